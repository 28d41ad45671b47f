//! The broker's hottest wire frames: Produce requests read in place
//! (`parse_produce_request`, `has_producer_id`) and whole Produce and Fetch response
//! frames written from Python tuples (`encode_produce_response`, `encode_fetch_response`;
//! a Fetch response's records follow by `sendfile`).

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyTuple};

use crate::follower_fetch_request::{self, TopicRef};
use crate::fetch_response::{self, FetchPartitionResponse, FetchTopicResponse, NodeEndpoint};
use crate::produce_request;
use crate::produce_response::{self, PartitionProduceResponse, TopicProduceResponse};

use super::buffer::Borrowed;

/// A Produce request frame (the bytes after its size prefix) in the common shape, read
/// in place: `(api_version, correlation_id, client_id, transactional_id, acks,
/// timeout_ms, ((topic, ((partition, records_start, records_end, has_producer_id), ...)),
/// ...))`, records_start and records_end -1 for null records. `None` for any other shape.
#[pyfunction]
pub(super) fn parse_produce_request<'py>(py: Python<'py>, frame: &Bound<'py, PyBytes>) -> PyResult<Option<Bound<'py, PyTuple>>> {
    let buf = frame.as_bytes();
    let Some(v) = produce_request::parse(buf) else { return Ok(None) };
    // The parser checked every string range as UTF-8.
    let text = |r: &std::ops::Range<usize>| std::str::from_utf8(&buf[r.clone()]).unwrap_or_default();
    let mut topics = Vec::with_capacity(v.topics.len());
    for t in &v.topics {
        let mut parts = Vec::with_capacity(t.partitions.len());
        for p in &t.partitions {
            let item = match &p.records {
                Some(r) => (p.index, r.start as i64, r.end as i64, produce_request::has_producer_id(&buf[r.clone()])),
                None => (p.index, -1, -1, false),
            };
            parts.push(item.into_pyobject(py)?);
        }
        topics.push((text(&t.name), PyTuple::new(py, parts)?).into_pyobject(py)?);
    }
    let out = (v.api_version, v.correlation_id, v.client_id.as_ref().map(text), v.transactional_id.as_ref().map(text), v.acks, v.timeout_ms, PyTuple::new(py, topics)?);
    Ok(Some(out.into_pyobject(py)?))
}

/// A follower's sessionless Fetch request frame (v12-v17, the bytes after its size
/// prefix): `(api_version, correlation_id, client_id, replica_id, max_wait_ms, min_bytes,
/// max_bytes, ((topic, ((partition, current_leader_epoch, fetch_offset,
/// last_fetched_epoch, log_start_offset, partition_max_bytes), ...)), ...))`, topic a
/// name (v12) or a topic id as an int (v13+). `None` for any other frame.
#[pyfunction]
pub(super) fn parse_follower_fetch_request<'py>(py: Python<'py>, frame: &Bound<'py, PyBytes>) -> PyResult<Option<Bound<'py, PyTuple>>> {
    let buf = frame.as_bytes();
    let Some(v) = follower_fetch_request::parse(buf) else { return Ok(None) };
    // The parser checked every string range as UTF-8.
    let text = |r: &std::ops::Range<usize>| std::str::from_utf8(&buf[r.clone()]).unwrap_or_default();
    let mut topics = Vec::with_capacity(v.topics.len());
    for t in &v.topics {
        let mut parts = Vec::with_capacity(t.partitions.len());
        for p in &t.partitions {
            let item = (p.partition, p.current_leader_epoch, p.fetch_offset, p.last_fetched_epoch, p.log_start_offset, p.partition_max_bytes);
            parts.push(item.into_pyobject(py)?);
        }
        let topic = match &t.topic {
            TopicRef::Name(r) => text(r).into_pyobject(py)?.into_any(),
            TopicRef::Id(id) => id.into_pyobject(py)?.into_any(),
        };
        topics.push((topic, PyTuple::new(py, parts)?).into_pyobject(py)?);
    }
    let out = (v.api_version, v.correlation_id, v.client_id.as_ref().map(text), v.replica_id, v.max_wait_ms, v.min_bytes, v.max_bytes, PyTuple::new(py, topics)?);
    Ok(Some(out.into_pyobject(py)?))
}

/// Whether any batch in a produce request's records carries a producer id or the
/// transactional or control attribute (and so needs the producer state's checks).
#[pyfunction]
pub(super) fn has_producer_id(records: &Bound<'_, PyAny>) -> PyResult<bool> {
    Ok(produce_request::has_producer_id(Borrowed::new(records)?.as_slice()))
}

type PartitionResult = (i32, i16, i64, i64, i64, Option<String>, Vec<(i32, Option<String>)>);

/// A Produce response partition: the 7-tuple, or an 8-tuple ending in current_leader.
#[derive(FromPyObject)]
pub(super) enum ProducePartition {
    Plain(PartitionResult),
    WithLeader(i32, i16, i64, i64, i64, Option<String>, Vec<(i32, Option<String>)>, Option<(i32, i32)>),
}

impl ProducePartition {
    fn response(&self) -> PartitionProduceResponse<'_> {
        let (index, error_code, base_offset, log_append_time_ms, log_start_offset, message, record_errors, current_leader) = match self {
            Self::Plain((a, b, c, d, e, f, g)) => (a, b, c, d, e, f, g, None),
            Self::WithLeader(a, b, c, d, e, f, g, h) => (a, b, c, d, e, f, g, *h),
        };
        PartitionProduceResponse {
            index: *index,
            error_code: *error_code,
            base_offset: *base_offset,
            log_append_time_ms: *log_append_time_ms,
            log_start_offset: *log_start_offset,
            record_errors: record_errors.iter().map(|(i, m)| (*i, m.as_deref())).collect(),
            error_message: message.as_deref(),
            current_leader,
        }
    }
}

/// A whole Produce response frame (size prefix included) from `[(topic, [(partition,
/// error_code, base_offset, log_append_time_ms, log_start_offset, error_message,
/// [(batch_index, message), ...][, current_leader]), ...]), ...]`: each partition a
/// 7-tuple, or an 8-tuple whose last item is `(leader_id, leader_epoch)` or None.
/// `node_endpoints`: `[(node_id, host, port, rack or None), ...]` or None. The current
/// leader and the node endpoints are written v10+ only (tagged fields), and only when
/// other than (-1, -1) and non-empty.
#[pyfunction]
#[pyo3(signature = (correlation_id, api_version, topics, throttle_time_ms = 0, node_endpoints = None))]
pub(super) fn encode_produce_response<'py>(
    py: Python<'py>,
    correlation_id: i32,
    api_version: i16,
    topics: Vec<(String, Vec<ProducePartition>)>,
    throttle_time_ms: i32,
    node_endpoints: Option<Vec<NodeEndpointArg>>,
) -> Bound<'py, PyBytes> {
    let topics: Vec<TopicProduceResponse<'_>> = topics
        .iter()
        .map(|(name, parts)| TopicProduceResponse { name, partitions: parts.iter().map(ProducePartition::response).collect() })
        .collect();
    let endpoints = endpoint_refs(&node_endpoints);
    PyBytes::new(py, &produce_response::encode(correlation_id, api_version, &topics, throttle_time_ms, &endpoints))
}

type FetchPartitionResult = (i32, i16, i64, i64, i64, Option<Vec<(i64, i64)>>, u32, i32, Option<(i32, i64)>, Option<(i32, i32)>);

/// A Fetch response frame without its records' bytes, from `[(topic, topic_id as int,
/// [(partition, error_code, high_watermark, last_stable_offset, log_start_offset,
/// aborted [(producer_id, first_offset)] or None, records_len, preferred_read_replica,
/// diverging_epoch (epoch, end_offset) or None, current_leader (leader_id, leader_epoch)
/// or None), ...]), ...]`, and `node_endpoints` `[(node_id, host, port, rack or None),
/// ...]` or None: returns (head, offsets in head where each non-empty records field's
/// bytes go). preferred_read_replica is written v11+; diverging_epoch and current_leader
/// v12+ and node_endpoints v16+ as tagged fields, only when other than all -1 and
/// non-empty.
#[pyfunction]
#[pyo3(signature = (correlation_id, api_version, error_code, session_id, topics, throttle_time_ms = 0, node_endpoints = None))]
#[allow(clippy::too_many_arguments, reason = "mirrors the Python arguments of encode_fetch_response")]
pub(super) fn encode_fetch_response<'py>(
    py: Python<'py>,
    correlation_id: i32,
    api_version: i16,
    error_code: i16,
    session_id: i32,
    topics: Vec<(String, u128, Vec<FetchPartitionResult>)>,
    throttle_time_ms: i32,
    node_endpoints: Option<Vec<NodeEndpointArg>>,
) -> (Bound<'py, PyBytes>, Vec<usize>) {
    let topics: Vec<FetchTopicResponse<'_>> = topics
        .iter()
        .map(|(name, topic_id, parts)| FetchTopicResponse {
            name: name.as_str(),
            topic_id: topic_id.to_be_bytes(),
            partitions: parts
                .iter()
                .map(|&(index, error_code, high_watermark, last_stable_offset, log_start_offset, ref aborted, records_len, preferred, diverging, leader)| {
                    FetchPartitionResponse {
                        index,
                        error_code,
                        high_watermark,
                        last_stable_offset,
                        log_start_offset,
                        aborted_transactions: aborted.clone(),
                        records_len,
                        preferred_read_replica: preferred,
                        diverging_epoch: diverging,
                        current_leader: leader,
                    }
                })
                .collect(),
        })
        .collect();
    let endpoints = endpoint_refs(&node_endpoints);
    let encoded = fetch_response::encode(correlation_id, api_version, throttle_time_ms, error_code, session_id, &topics, &endpoints);
    (PyBytes::new(py, &encoded.head), encoded.records_at)
}

/// A broker's address: (node_id, host, port, rack or None).
type NodeEndpointArg = (i32, String, i32, Option<String>);

fn endpoint_refs(endpoints: &Option<Vec<NodeEndpointArg>>) -> Vec<NodeEndpoint<'_>> {
    endpoints.iter().flatten().map(|(id, host, port, rack)| (*id, host.as_str(), *port, rack.as_deref())).collect()
}
