//! Fetch responses (api key 1, v0-v17), encoded around the records the broker sends by
//! `sendfile(2)` (or, for v0-v3, the records it converted down to message format v0/v1).
//!
//! Frame: int32 size, correlation_id int32, header tagged fields (v12+); body:
//! throttle_time_ms int32 (v1+), error_code int16 (v7+), session_id int32 (v7+),
//! responses [topic string (v0-12) | topic_id uuid (v13+), partitions [partition_index
//! int32, error_code int16, high_watermark int64, last_stable_offset int64 (v4+),
//! log_start_offset int64 (v5+), aborted_transactions nullable [producer_id int64,
//! first_offset int64] (v4+), preferred_read_replica int32 (v11+), records nullable
//! bytes]].
//! Flexible versions (v12+) use compact lengths and end each struct with a tagged-field
//! section (KIP-482): an unsigned varint count, then per field in ascending tag order an
//! unsigned varint tag, an unsigned varint size and that many bytes. Tagged fields written:
//! - partition tag 0 `diverging_epoch` (v12+): EpochEndOffset {epoch int32, end_offset
//!   int64, tags};
//! - partition tag 1 `current_leader` (v12+): LeaderIdAndEpoch {leader_id int32,
//!   leader_epoch int32, tags};
//! - body tag 0 `node_endpoints` (v16+): compact [node_id int32, host compact string,
//!   port int32, rack compact nullable string, tags].
//!
//! As in Kafka's generated code, a tagged field equal to its default (-1 for every
//! field of a struct, an empty array) is not written; nor is a field the version lacks.
//! `snapshot_id` (partition tag 2) is never written.
//!
//! Records are not copied: the encoder writes each records field's length and leaves
//! its bytes out; `records_at` gives, in order, the offsets in `head` where each
//! non-empty records field's bytes belong. The frame's size counts them. A partition's
//! tagged section follows its records, so it is written after the records' offset.

use crate::wire_writer::WireWriter;

pub const FIRST_FLEXIBLE_VERSION: i16 = 12;
/// v4 adds last_stable_offset and aborted_transactions (and message format v2 records).
pub const FIRST_TRANSACTIONAL_VERSION: i16 = 4;
pub const FIRST_TOPIC_ID_VERSION: i16 = 13;
pub const FIRST_PREFERRED_READ_REPLICA_VERSION: i16 = 11;
pub const FIRST_NODE_ENDPOINTS_VERSION: i16 = 16;

/// A broker's address in a `node_endpoints` tagged field: (node_id, host, port, rack).
pub type NodeEndpoint<'a> = (i32, &'a str, i32, Option<&'a str>);

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchPartitionResponse {
    pub index: i32,
    pub error_code: i16,
    pub high_watermark: i64,
    pub last_stable_offset: i64,
    pub log_start_offset: i64,
    /// (producer_id, first_offset) of each aborted transaction; None for read_uncommitted.
    pub aborted_transactions: Option<Vec<(i64, i64)>>,
    pub records_len: u32,
    /// The replica the client should fetch from instead (v11+); -1 for none.
    pub preferred_read_replica: i32,
    /// (epoch, end_offset) where the follower's log diverges from the leader's (v12+).
    pub diverging_epoch: Option<(i32, i64)>,
    /// (leader_id, leader_epoch) of the partition's current leader (v12+).
    pub current_leader: Option<(i32, i32)>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchTopicResponse<'a> {
    pub name: &'a str,
    pub topic_id: [u8; 16],
    pub partitions: Vec<FetchPartitionResponse>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncodedFetchResponse {
    /// The frame without the records' bytes.
    pub head: Vec<u8>,
    /// Where each non-empty records field's bytes go in `head`, ascending.
    pub records_at: Vec<usize>,
}

pub fn encode(
    correlation_id: i32,
    version: i16,
    throttle_time_ms: i32,
    error_code: i16,
    session_id: i32,
    topics: &[FetchTopicResponse<'_>],
    node_endpoints: &[NodeEndpoint<'_>],
) -> EncodedFetchResponse {
    let parts: usize = topics.iter().map(|t| t.partitions.len()).sum();
    let mut w = WireWriter::new(32 + 24 * topics.len() + 48 * parts, version >= FIRST_FLEXIBLE_VERSION);
    let mut records_at = Vec::new();
    let mut records_total: u64 = 0;
    w.start_frame(correlation_id);
    if version >= 1 {
        w.i32(throttle_time_ms);
    }
    if version >= 7 {
        w.i16(error_code);
        w.i32(session_id);
    }
    w.count(Some(topics.len()));
    for t in topics {
        if version >= FIRST_TOPIC_ID_VERSION {
            w.out.extend_from_slice(&t.topic_id);
        } else {
            w.nullable_string(Some(t.name));
        }
        w.count(Some(t.partitions.len()));
        for p in &t.partitions {
            w.i32(p.index);
            w.i16(p.error_code);
            w.i64(p.high_watermark);
            if version >= FIRST_TRANSACTIONAL_VERSION {
                w.i64(p.last_stable_offset);
            }
            if version >= 5 {
                w.i64(p.log_start_offset);
            }
            if version >= FIRST_TRANSACTIONAL_VERSION {
                w.count(p.aborted_transactions.as_ref().map(Vec::len));
                for (producer_id, first_offset) in p.aborted_transactions.iter().flatten() {
                    w.i64(*producer_id);
                    w.i64(*first_offset);
                    w.no_tagged_fields();
                }
            }
            if version >= FIRST_PREFERRED_READ_REPLICA_VERSION {
                w.i32(p.preferred_read_replica);
            }
            w.bytes_length(p.records_len);
            if p.records_len > 0 {
                records_at.push(w.out.len());
                records_total += u64::from(p.records_len);
            }
            if w.flexible {
                let diverging = p.diverging_epoch.filter(|&e| e != (-1, -1)).map(|(epoch, end_offset)| {
                    let mut f = WireWriter::new(13, true);
                    f.i32(epoch);
                    f.i64(end_offset);
                    f.no_tagged_fields();
                    (0, f.out)
                });
                let leader = p.current_leader.and_then(|(id, epoch)| leader_id_and_epoch(1, id, epoch));
                tagged_fields(&mut w, [diverging, leader]);
            }
        }
        w.no_tagged_fields();
    }
    let endpoints = if version >= FIRST_NODE_ENDPOINTS_VERSION { node_endpoints_field(0, node_endpoints) } else { None };
    tagged_fields(&mut w, [endpoints]);
    w.finish_frame(records_total);
    EncodedFetchResponse { head: w.out, records_at }
}

/// One tagged field: its tag and its bytes.
pub(crate) type TaggedField = (u32, Vec<u8>);

/// A tagged-field section (flexible versions only): the count of the present fields,
/// then each as unsigned varint tag, unsigned varint size, bytes. `fields` are in
/// ascending tag order.
pub(crate) fn tagged_fields<const N: usize>(w: &mut WireWriter, fields: [Option<TaggedField>; N]) {
    if !w.flexible {
        return;
    }
    w.uvarint(fields.iter().flatten().count() as u32);
    for (tag, bytes) in fields.iter().flatten() {
        w.uvarint(*tag);
        w.uvarint(bytes.len() as u32);
        w.out.extend_from_slice(bytes);
    }
}

/// A LeaderIdAndEpoch tagged field {leader_id int32, leader_epoch int32, tags}; None
/// for the default (-1, -1).
pub(crate) fn leader_id_and_epoch(tag: u32, leader_id: i32, leader_epoch: i32) -> Option<TaggedField> {
    if (leader_id, leader_epoch) == (-1, -1) {
        return None;
    }
    let mut f = WireWriter::new(9, true);
    f.i32(leader_id);
    f.i32(leader_epoch);
    f.no_tagged_fields();
    Some((tag, f.out))
}

/// A `node_endpoints` tagged field: compact [node_id int32, host compact string, port
/// int32, rack compact nullable string, tags]; None when empty.
pub(crate) fn node_endpoints_field(tag: u32, endpoints: &[NodeEndpoint<'_>]) -> Option<TaggedField> {
    if endpoints.is_empty() {
        return None;
    }
    let mut f = WireWriter::new(1 + endpoints.iter().map(|e| 12 + e.1.len()).sum::<usize>(), true);
    f.count(Some(endpoints.len()));
    for &(node_id, host, port, rack) in endpoints {
        f.i32(node_id);
        f.nullable_string(Some(host));
        f.i32(port);
        f.nullable_string(rack);
        f.no_tagged_fields();
    }
    Some((tag, f.out))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn partition(records_len: u32, aborted: Option<Vec<(i64, i64)>>) -> FetchPartitionResponse {
        FetchPartitionResponse {
            index: 2,
            error_code: 0,
            high_watermark: 10,
            last_stable_offset: 10,
            log_start_offset: 0,
            aborted_transactions: aborted,
            records_len,
            preferred_read_replica: -1,
            diverging_epoch: None,
            current_leader: None,
        }
    }

    fn tagged(records_len: u32) -> FetchPartitionResponse {
        FetchPartitionResponse {
            preferred_read_replica: 3,
            diverging_epoch: Some((4, 0x0102)),
            current_leader: Some((5, 6)),
            ..partition(records_len, None)
        }
    }

    fn one(version: i16, p: FetchPartitionResponse) -> EncodedFetchResponse {
        with_endpoints(version, p, &[])
    }

    fn with_endpoints(version: i16, p: FetchPartitionResponse, endpoints: &[NodeEndpoint<'_>]) -> EncodedFetchResponse {
        let topics = [FetchTopicResponse { name: "t", topic_id: [9; 16], partitions: vec![p] }];
        encode(5, version, 0, 0, 77, &topics, endpoints)
    }

    #[test]
    fn v0_to_v3_have_no_transaction_fields() {
        // v0: size 4, correlation 4, topics 4, name 2+1, partitions 4, partition 2+4+8
        // (index, error, hw), records length 4
        let v0 = one(0, partition(7, Some(vec![(1, 2)])));
        assert_eq!(v0.head.len(), 4 + 4 + 4 + 3 + 4 + 14 + 4);
        assert_eq!(v0.records_at, vec![v0.head.len()]);
        #[rustfmt::skip]
        let body = [
            0, 0, 0, 1, 0, 1, b't', 0, 0, 0, 1, // one topic "t", one partition
            0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 10, // index 2, error 0, hw 10
            0, 0, 0, 7, // records length 7
        ];
        assert_eq!(&v0.head[8..], &body);
        for version in 1..4 {
            // v1-v3 add throttle_time_ms only
            let e = one(version, partition(7, Some(vec![(1, 2)])));
            assert_eq!(&e.head[8..12], &[0, 0, 0, 0]);
            assert_eq!(&e.head[12..], &body, "v{version}");
        }
    }

    #[test]
    fn sizes_follow_the_version() {
        // v4: size 4, correlation 4, throttle 4, topics 4, name 2+1, partitions 4,
        // partition 2+4+8+8 (index, error, hw, lso), aborted -1 4, records length 4
        assert_eq!(one(4, partition(0, None)).head.len(), 4 + 4 + 4 + 4 + 3 + 4 + 22 + 4 + 4);
        // v7 adds error_code 2 and session_id 4 (and v5 log_start_offset 8)
        assert_eq!(one(7, partition(0, None)).head.len(), 4 + 4 + 4 + 6 + 4 + 3 + 4 + 30 + 4 + 4);
        // v13: header tags 1, topics 1, topic id 16, partitions 1, partition 30,
        // aborted null 1, preferred replica 4, records 1, tags 1+1+1
        assert_eq!(one(13, partition(0, None)).head.len(), 4 + 4 + 1 + 4 + 6 + 1 + 16 + 1 + 30 + 1 + 4 + 1 + 3);
    }

    #[test]
    fn records_are_left_out_and_counted_in_the_size() {
        let e = one(12, partition(300, Some(vec![(7, 3)])));
        let size = i32::from_be_bytes(e.head[..4].try_into().unwrap()) as usize;
        assert_eq!(size, e.head.len() - 4 + 300);
        // the compact length 301 precedes the records; then the partition's and the
        // topic's and the body's tag counts follow
        let at = e.records_at[0];
        assert_eq!(&e.head[at - 2..at], &[0xAD, 0x02]);
        assert_eq!(&e.head[at..], &[0, 0, 0]);
        assert!(one(12, partition(0, None)).records_at.is_empty());
    }

    #[test]
    fn partition_tagged_fields_follow_the_records() {
        let e = one(12, tagged(300));
        let size = i32::from_be_bytes(e.head[..4].try_into().unwrap()) as usize;
        assert_eq!(size, e.head.len() - 4 + 300);
        let at = e.records_at[0];
        // preferred_read_replica 3, then the records' compact length 301
        assert_eq!(&e.head[at - 6..at], &[0, 0, 0, 3, 0xAD, 0x02]);
        #[rustfmt::skip]
        let tags = [
            2, // two tagged fields
            0, 13, 0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 1, 2, 0, // diverging_epoch {4, 0x0102}
            1, 9, 0, 0, 0, 5, 0, 0, 0, 6, 0, // current_leader {5, 6}
            0, // the topic's tags
            0, // the body's tags
        ];
        assert_eq!(&e.head[at..], &tags);
    }

    #[test]
    fn only_fields_other_than_their_default_are_tagged() {
        let e = one(12, FetchPartitionResponse { diverging_epoch: Some((-1, -1)), current_leader: Some((7, -1)), ..partition(0, None) });
        assert_eq!(&e.head[e.head.len() - 14..], &[1, 1, 9, 0, 0, 0, 7, 0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0][..]);
        let e = one(12, FetchPartitionResponse { current_leader: Some((-1, -1)), ..partition(0, None) });
        assert_eq!(e, one(12, partition(0, None)));
    }

    #[test]
    fn node_endpoints_are_a_body_tagged_field_from_v16() {
        let endpoints = [(1, "h", 9092, None), (2, "ab", 9093, Some("r"))];
        let plain = one(16, partition(0, None));
        let e = with_endpoints(16, partition(0, None), &endpoints);
        #[rustfmt::skip]
        let field = [
            1, 0, 27, // one tagged field, tag 0, 27 bytes
            3, // two endpoints
            0, 0, 0, 1, 2, b'h', 0, 0, 0x23, 0x84, 0, 0, // {1, "h", 9092, null}
            0, 0, 0, 2, 3, b'a', b'b', 0, 0, 0x23, 0x85, 2, b'r', 0, // {2, "ab", 9093, "r"}
        ];
        assert_eq!(&e.head[4..plain.head.len() - 1], &plain.head[4..plain.head.len() - 1]);
        assert_eq!(&e.head[plain.head.len() - 1..], &field);
        let size = i32::from_be_bytes(e.head[..4].try_into().unwrap()) as usize;
        assert_eq!(size, e.head.len() - 4);
    }

    #[test]
    fn older_versions_carry_nothing_extra() {
        let endpoints = [(1, "h", 9092, None)];
        for version in 4..16 {
            let plain = one(version, partition(0, None));
            let e = with_endpoints(version, tagged(0), &endpoints);
            if version < 11 {
                assert_eq!(e, plain, "v{version}");
            } else if version < 12 {
                assert_eq!(e.head.len(), plain.head.len(), "v{version}");
            } else {
                // the partition's two tagged fields (1 + 2+13 + 2+9 bytes for the count of 0)
                assert_eq!(e.head.len(), plain.head.len() + 26, "v{version}");
            }
        }
    }
}
