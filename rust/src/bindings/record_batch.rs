//! RecordBatch v2 bytes from and to Python: `encode_batch`, `encode_control_batch`,
//! `decode_batches` (into `RecordBatch` and `Record` objects) and `crc32c`.

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString, PyTuple};

use crate::compression::Compression;
use crate::error::Error;
use crate::log;
use crate::records::record::NewRecord;
use crate::records::record_batch::{self, BatchIter, BatchOptions, DecodedBatch};

use super::buffer::Borrowed;

fn bytes_or_none(v: &Bound<'_, PyAny>, what: &str) -> PyResult<Option<Vec<u8>>> {
    if v.is_none() {
        return Ok(None);
    }
    if let Ok(s) = v.cast::<PyString>() {
        return Ok(Some(s.to_str()?.as_bytes().to_vec()));
    }
    match Borrowed::new(v) {
        Ok(b) => Ok(Some(b.as_slice().to_vec())),
        Err(_) => Err(PyTypeError::new_err(format!("{what} must be bytes, str or None"))),
    }
}

fn parse_record(item: &Bound<'_, PyAny>, offset: i64, default_ts: i64) -> PyResult<NewRecord> {
    let t = item.cast::<PyTuple>().map_err(|_| PyTypeError::new_err("each record must be a tuple (key, value[, headers[, timestamp_ms]])"))?;
    if !(2..=4).contains(&t.len()) {
        return Err(PyTypeError::new_err("each record must be a tuple (key, value[, headers[, timestamp_ms]])"));
    }
    let key = bytes_or_none(&t.get_item(0)?, "key")?;
    let value = bytes_or_none(&t.get_item(1)?, "value")?;
    let mut headers = Vec::new();
    if t.len() >= 3 && !t.get_item(2)?.is_none() {
        for h in t.get_item(2)?.try_iter()? {
            let h = h?;
            let (k, v): (Bound<'_, PyAny>, Bound<'_, PyAny>) = h.extract().map_err(|_| PyTypeError::new_err("each header must be a (key, value) pair"))?;
            let k = bytes_or_none(&k, "header key")?.ok_or_else(|| PyTypeError::new_err("header key must not be None"))?;
            headers.push((k, bytes_or_none(&v, "header value")?));
        }
    }
    let timestamp = match t.len() {
        4 if !t.get_item(3)?.is_none() => t.get_item(3)?.extract()?,
        _ => default_ts,
    };
    Ok(NewRecord { offset, timestamp, key, value, headers })
}

fn compression_arg(name: &str) -> PyResult<Compression> {
    Compression::from_name(name)
        .ok_or_else(|| PyValueError::new_err(format!("unknown compression {name:?}; expected one of none, gzip, snappy, lz4, zstd")))
}

#[pyfunction]
#[pyo3(signature = (records, compression = "none", *, base_offset = 0, partition_leader_epoch = -1, producer_id = -1, producer_epoch = -1, base_sequence = -1, transactional = false, control = false, log_append_time = false, timestamp_ms = None))]
#[allow(clippy::too_many_arguments, reason = "mirrors the Python keyword arguments of encode_batch")]
pub(super) fn encode_batch<'py>(
    py: Python<'py>,
    records: &Bound<'py, PyAny>,
    compression: &str,
    base_offset: i64,
    partition_leader_epoch: i32,
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
    transactional: bool,
    control: bool,
    log_append_time: bool,
    timestamp_ms: Option<i64>,
) -> PyResult<Bound<'py, PyBytes>> {
    let compression = compression_arg(compression)?;
    let now = timestamp_ms.unwrap_or_else(log::now_ms);
    let mut recs = Vec::new();
    for (i, item) in records.try_iter()?.enumerate() {
        recs.push(parse_record(&item?, base_offset + i as i64, now)?);
    }
    let opts = BatchOptions {
        base_offset,
        compression,
        partition_leader_epoch,
        producer_id,
        producer_epoch,
        base_sequence,
        transactional,
        control,
        log_append_time: log_append_time.then_some(now),
        ..Default::default()
    };
    let out = py.detach(|| record_batch::encode(&recs, &opts));
    Ok(PyBytes::new(py, &out))
}

#[pyfunction]
#[allow(clippy::too_many_arguments, reason = "mirrors the Python keyword arguments of encode_control_batch")]
#[pyo3(signature = (control_type, *, producer_id, producer_epoch, base_offset = 0, coordinator_epoch = 0, partition_leader_epoch = -1, timestamp_ms = None))]
pub(super) fn encode_control_batch<'py>(
    py: Python<'py>,
    control_type: i16,
    producer_id: i64,
    producer_epoch: i16,
    base_offset: i64,
    coordinator_epoch: i32,
    partition_leader_epoch: i32,
    timestamp_ms: Option<i64>,
) -> PyResult<Bound<'py, PyBytes>> {
    if !(0..=1).contains(&control_type) {
        return Err(PyValueError::new_err("control_type must be 0 (abort) or 1 (commit)"));
    }
    let opts = BatchOptions { base_offset, producer_id, producer_epoch, partition_leader_epoch, ..Default::default() };
    let ts = timestamp_ms.unwrap_or_else(log::now_ms);
    Ok(PyBytes::new(py, &record_batch::encode_control(control_type, coordinator_epoch, ts, &opts)))
}

#[pyclass(frozen, name = "Record", module = "logstore._native", get_all)]
pub(super) struct PyRecord {
    offset: i64,
    timestamp: i64,
    key: Option<Py<PyBytes>>,
    value: Option<Py<PyBytes>>,
    headers: Py<PyAny>,
}

#[pymethods]
impl PyRecord {
    fn __repr__(&self, py: Python<'_>) -> String {
        let show = |b: &Option<Py<PyBytes>>| b.as_ref().map_or("None".to_string(), |b| format!("{:?}", String::from_utf8_lossy(b.bind(py).as_bytes())));
        format!("Record(offset={}, timestamp={}, key={}, value={})", self.offset, self.timestamp, show(&self.key), show(&self.value))
    }
}

#[pyclass(frozen, name = "RecordBatch", module = "logstore._native", get_all)]
pub(super) struct PyRecordBatch {
    base_offset: i64,
    last_offset: i64,
    last_offset_delta: i32,
    batch_length: i32,
    size: usize,
    partition_leader_epoch: i32,
    magic: i8,
    crc: u32,
    crc_valid: bool,
    attributes: i16,
    compression: String,
    timestamp_type: &'static str,
    is_transactional: bool,
    is_control: bool,
    has_delete_horizon: bool,
    base_timestamp: i64,
    max_timestamp: i64,
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
    last_sequence: i32,
    records_count: i32,
    position: usize,
    records: Py<PyAny>,
    control_type: Option<i16>,
}

#[pymethods]
impl PyRecordBatch {
    fn __repr__(&self) -> String {
        format!(
            "RecordBatch(base_offset={}, last_offset={}, records_count={}, compression={:?})",
            self.base_offset, self.last_offset, self.records_count, self.compression
        )
    }
}

fn opt_bytes(py: Python<'_>, b: Option<&[u8]>) -> Option<Py<PyBytes>> {
    b.map(|b| PyBytes::new(py, b).unbind())
}

#[pyfunction]
#[pyo3(signature = (data, *, records = true, verify_crc = true, allow_partial = true))]
pub(super) fn decode_batches(py: Python<'_>, data: &Bound<'_, PyAny>, records: bool, verify_crc: bool, allow_partial: bool) -> PyResult<Vec<PyRecordBatch>> {
    let data = Borrowed::new(data)?;
    let buf = data.as_slice();
    let mut iter = BatchIter::new(buf, 0);
    let mut out = Vec::new();
    for item in &mut iter {
        let (pos, header, bytes) = item?;
        if !records && !header.is_control() {
            // Header only: no decompression.
            let crc_valid = record_batch::compute_crc(bytes) == header.crc;
            if verify_crc && !crc_valid {
                record_batch::verify_crc(bytes, &header, pos as u64)?;
            }
            out.push(batch_object(py, &header, crc_valid, pos, Vec::new(), None)?);
            continue;
        }
        let batch = DecodedBatch::new(bytes, pos as u64, verify_crc)?;
        let h = batch.header;
        let mut control_type = None;
        let recs = if records || h.is_control() {
            let decoded = batch.records()?;
            if h.is_control() {
                control_type = decoded.first().and_then(|r| record_batch::control_type(r.key));
            }
            let mut list = Vec::with_capacity(if records { decoded.len() } else { 0 });
            if records {
                for r in decoded {
                    let headers: Vec<(String, Option<Py<PyBytes>>)> =
                        r.headers.iter().map(|(k, v)| (String::from_utf8_lossy(k).into_owned(), opt_bytes(py, *v))).collect();
                    let rec = PyRecord {
                        offset: r.offset,
                        timestamp: r.timestamp,
                        key: opt_bytes(py, r.key),
                        value: opt_bytes(py, r.value),
                        headers: headers.into_pyobject(py)?.into_any().unbind(),
                    };
                    list.push(Py::new(py, rec)?);
                }
            }
            list
        } else {
            Vec::new()
        };
        out.push(batch_object(py, &h, batch.crc_valid, pos, recs, control_type)?);
    }
    if !allow_partial && iter.position() != buf.len() {
        return Err(Error::corrupt(iter.position() as u64, format!("{} trailing bytes are not a whole record batch", buf.len() - iter.position())).into());
    }
    Ok(out)
}

fn batch_object(
    py: Python<'_>,
    h: &record_batch::BatchHeader,
    crc_valid: bool,
    pos: usize,
    recs: Vec<Py<PyRecord>>,
    control_type: Option<i16>,
) -> PyResult<PyRecordBatch> {
    Ok(PyRecordBatch {
        base_offset: h.base_offset,
        last_offset: h.last_offset(),
        last_offset_delta: h.last_offset_delta,
        batch_length: h.batch_length,
        size: h.size(),
        partition_leader_epoch: h.partition_leader_epoch,
        magic: h.magic,
        crc: h.crc,
        crc_valid,
        attributes: h.attributes,
        compression: h.compression().map(Compression::name).unwrap_or("unknown").to_string(),
        timestamp_type: if h.is_log_append_time() { "LogAppendTime" } else { "CreateTime" },
        is_transactional: h.is_transactional(),
        is_control: h.is_control(),
        has_delete_horizon: h.has_delete_horizon(),
        base_timestamp: h.base_timestamp,
        max_timestamp: h.max_timestamp,
        producer_id: h.producer_id,
        producer_epoch: h.producer_epoch,
        base_sequence: h.base_sequence,
        last_sequence: h.last_sequence(),
        records_count: h.records_count,
        position: pos,
        records: recs.into_pyobject(py)?.into_any().unbind(),
        control_type,
    })
}

/// CRC-32C (Castagnoli) of a bytes-like object, as Kafka's checksums use.
#[pyfunction]
#[pyo3(name = "crc32c", signature = (data, value = 0))]
pub(super) fn crc32c_py(data: &Bound<'_, PyAny>, value: u32) -> PyResult<u32> {
    let data = Borrowed::new(data)?;
    Ok(::crc32c::crc32c_append(value, data.as_slice()))
}
