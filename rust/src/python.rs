//! PyO3 bindings: the native module `logstore._native`.
//!
//! Thin wrappers only: argument conversion, GIL release around every file and CRC
//! operation, and the one mapping from core errors to Python exceptions.

use std::path::PathBuf;
use std::sync::Arc;

use pyo3::buffer::PyBuffer;
use pyo3::exceptions::{PyException, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyString, PyTuple};

use arrow_array::ffi::{FFI_ArrowArray, FFI_ArrowSchema};
use arrow_array::{Array, StructArray};

use crate::arrow_decoder::{self, ArrowDecoder, RecordFilter};
use crate::compression::{Compression, ALL};
use crate::error::Error;
use crate::file_slice::{self, FileSlice};
use crate::log::{self, AppendInfo, AppendOptions, Log, OpenOptions, SegmentInfo};
use crate::log_cleaner::{self, CleanEvent, LogCleanOptions, LogCleanSummary};
use crate::throttler::Throttler;
use crate::log_config::LogConfig;
use crate::log_reader::{PartitionDir, PartitionScan};
use crate::produce_request;
use crate::fetch_response::{self, FetchPartitionResponse, FetchTopicResponse};
use crate::produce_response::{self, PartitionProduceResponse, TopicProduceResponse};
use crate::record::NewRecord;
use crate::record_batch::{self, BatchIter, BatchOptions, DecodedBatch};

pyo3::create_exception!(logstore._native, LogStoreError, PyException, "Base of every storage engine error.");
pyo3::create_exception!(logstore._native, CorruptRecordError, LogStoreError, "A record batch failed validation.");
pyo3::create_exception!(logstore._native, InvalidRecordError, LogStoreError, "Records a topic's rules refuse (a compacted topic's record without a key); `record_errors` lists (index in batch, message).");
pyo3::create_exception!(logstore._native, InvalidTimestampError, InvalidRecordError, "Record timestamps outside the topic's message.timestamp.before/after.max.ms window.");
pyo3::create_exception!(logstore._native, OffsetOutOfRangeError, LogStoreError, "Offset outside [log start, log end].");
pyo3::create_exception!(logstore._native, RecordTooLargeError, LogStoreError, "A batch exceeds max.message.bytes or segment.bytes.");
pyo3::create_exception!(logstore._native, InvalidConfigError, LogStoreError, "A config key or value is invalid.");
pyo3::create_exception!(logstore._native, InvalidOffsetError, LogStoreError, "Follower batches do not follow the log end.");
pyo3::create_exception!(logstore._native, CorruptIndexError, LogStoreError, "An index file disagrees with its segment.");
pyo3::create_exception!(logstore._native, LogClosedError, LogStoreError, "The log was closed.");
pyo3::create_exception!(logstore._native, LogIOError, LogStoreError, "The OS refused a file operation.");

impl From<Error> for PyErr {
    fn from(e: Error) -> PyErr {
        let msg = e.to_string();
        match e {
            Error::CorruptRecord { .. } | Error::UnsupportedCompression(_) => CorruptRecordError::new_err(msg),
            Error::InvalidRecord { errors, .. } => Python::attach(|py| {
                let err = if errors.iter().any(|e| e.timestamp) {
                    InvalidTimestampError::new_err(msg)
                } else {
                    InvalidRecordError::new_err(msg)
                };
                let listed: Vec<(i32, String)> = errors.into_iter().map(|e| (e.batch_index, e.message)).collect();
                match PyTuple::new(py, listed).and_then(|t| err.value(py).setattr("record_errors", t)) {
                    Ok(()) => err,
                    Err(e) => e,
                }
            }),
            Error::OffsetOutOfRange { .. } => OffsetOutOfRangeError::new_err(msg),
            Error::RecordTooLarge { .. } => RecordTooLargeError::new_err(msg),
            Error::InvalidConfig { .. } => InvalidConfigError::new_err(msg),
            Error::InvalidOffset { .. } => InvalidOffsetError::new_err(msg),
            Error::CorruptIndex { .. } => CorruptIndexError::new_err(msg),
            Error::LogClosed(_) => LogClosedError::new_err(msg),
            Error::Io { .. } => LogIOError::new_err(msg),
            Error::Os(io) => io.into(),
        }
    }
}

/// Bytes borrowed from a Python object: `bytes` directly, anything else with the
/// buffer protocol (memoryview, bytearray) when C-contiguous.
enum Borrowed<'py> {
    Bytes(Bound<'py, PyBytes>),
    Buffer(PyBuffer<u8>),
}

impl<'py> Borrowed<'py> {
    fn new(obj: &Bound<'py, PyAny>) -> PyResult<Self> {
        if let Ok(b) = obj.cast::<PyBytes>() {
            return Ok(Borrowed::Bytes(b.clone()));
        }
        let buf = PyBuffer::<u8>::get(obj)?;
        if !buf.is_c_contiguous() {
            return Err(PyTypeError::new_err("a contiguous bytes-like object is required"));
        }
        Ok(Borrowed::Buffer(buf))
    }

    fn as_slice(&self) -> &[u8] {
        match self {
            Borrowed::Bytes(b) => b.as_bytes(),
            // SAFETY: the buffer is contiguous and held (exported) for our lifetime.
            Borrowed::Buffer(b) => unsafe { std::slice::from_raw_parts(b.buf_ptr() as *const u8, b.len_bytes()) },
        }
    }
}

fn config_value(v: &Bound<'_, PyAny>) -> PyResult<String> {
    if let Ok(b) = v.extract::<bool>() {
        return Ok(if b { "true" } else { "false" }.to_string());
    }
    Ok(v.str()?.to_string())
}

#[pyclass(frozen, name = "AppendInfo", module = "logstore._native", get_all)]
struct PyAppendInfo {
    base_offset: i64,
    last_offset: i64,
    max_timestamp: i64,
    offset_of_max_timestamp: i64,
    log_append_time: i64,
    num_batches: usize,
    num_records: i64,
    size: usize,
    log_start_offset: i64,
}

impl From<AppendInfo> for PyAppendInfo {
    fn from(a: AppendInfo) -> Self {
        PyAppendInfo {
            base_offset: a.base_offset,
            last_offset: a.last_offset,
            max_timestamp: a.max_timestamp,
            offset_of_max_timestamp: a.offset_of_max_timestamp,
            log_append_time: a.log_append_time,
            num_batches: a.num_batches,
            num_records: a.num_records,
            size: a.size,
            log_start_offset: a.log_start_offset,
        }
    }
}

#[pymethods]
impl PyAppendInfo {
    fn __repr__(&self) -> String {
        format!("AppendInfo(base_offset={}, last_offset={}, num_records={})", self.base_offset, self.last_offset, self.num_records)
    }
}

#[pyclass(frozen, name = "SegmentInfo", module = "logstore._native", get_all)]
struct PySegmentInfo {
    base_offset: i64,
    size: u64,
    log_path: String,
    index_entries: usize,
    time_index_entries: usize,
    largest_timestamp: i64,
    next_offset: i64,
}

impl From<SegmentInfo> for PySegmentInfo {
    fn from(s: SegmentInfo) -> Self {
        PySegmentInfo {
            base_offset: s.base_offset,
            size: s.size,
            log_path: s.log_path.to_string_lossy().into_owned(),
            index_entries: s.index_entries,
            time_index_entries: s.time_index_entries,
            largest_timestamp: s.largest_timestamp,
            next_offset: s.next_offset,
        }
    }
}

#[pymethods]
impl PySegmentInfo {
    fn __repr__(&self) -> String {
        format!("SegmentInfo(base_offset={}, size={}, next_offset={})", self.base_offset, self.size, self.next_offset)
    }
}

#[pyclass(frozen, name = "FileSlice", module = "logstore._native")]
struct PyFileSlice(FileSlice);

#[pymethods]
impl PyFileSlice {
    #[getter]
    fn path(&self) -> String {
        self.0.path.to_string_lossy().into_owned()
    }
    #[getter]
    fn position(&self) -> u64 {
        self.0.position
    }
    #[getter]
    fn length(&self) -> u64 {
        self.0.length
    }
    #[getter]
    fn base_offset(&self) -> i64 {
        self.0.base_offset
    }
    #[getter]
    fn last_offset(&self) -> i64 {
        self.0.last_offset
    }

    #[pyo3(signature = (out_fd, offset = 0, count = None))]
    fn sendfile(&self, py: Python<'_>, out_fd: i32, offset: u64, count: Option<u64>) -> PyResult<usize> {
        Ok(py.detach(|| self.0.send(out_fd, offset, count))?)
    }

    fn read<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        read_slice_bytes(py, &self.0)
    }

    fn __len__(&self) -> usize {
        self.0.length as usize
    }

    fn __repr__(&self) -> String {
        format!("FileSlice(path={:?}, position={}, length={})", self.0.path, self.0.position, self.0.length)
    }
}

/// Reads a slice straight into a new `bytes` object, with the GIL released for the read.
fn read_slice_bytes<'py>(py: Python<'py>, slice: &FileSlice) -> PyResult<Bound<'py, PyBytes>> {
    PyBytes::new_with(py, slice.length as usize, |buf| {
        py.detach(|| {
            use std::os::unix::fs::FileExt;
            slice.file.read_exact_at(buf, slice.position)
        })
        .map_err(|e| PyErr::from(Error::Io { op: "read segment", path: slice.path.clone(), source: e }))
    })
}

#[pyclass(frozen, name = "Log", module = "logstore._native")]
struct PyLog(Arc<Log>);

fn config_from_dict(config: Option<&Bound<'_, PyDict>>, opts: Option<&mut OpenOptions>) -> PyResult<LogConfig> {
    let mut pairs = Vec::new();
    let mut opts = opts;
    if let Some(config) = config {
        for (k, v) in config.iter() {
            let key: String = k.extract()?;
            match (key.as_str(), opts.as_deref_mut()) {
                ("recovery_point", Some(o)) => o.recovery_point = v.extract()?,
                ("log_start_offset", Some(o)) => o.log_start_offset = v.extract()?,
                ("now_ms", Some(o)) => o.now_ms = v.extract()?,
                _ => pairs.push((key, config_value(&v)?)),
            }
        }
    }
    Ok(LogConfig::from_pairs(pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())))?)
}

/// Validates topic configs (Kafka names) and returns the effective config with defaults.
#[pyfunction]
#[pyo3(signature = (**config))]
fn validate_log_config(config: Option<&Bound<'_, PyDict>>) -> PyResult<std::collections::BTreeMap<String, String>> {
    Ok(config_from_dict(config, None)?.entries())
}

#[pymethods]
impl PyLog {
    #[staticmethod]
    #[pyo3(signature = (path, **config))]
    fn open(py: Python<'_>, path: PathBuf, config: Option<&Bound<'_, PyDict>>) -> PyResult<PyLog> {
        let mut opts = OpenOptions::default();
        let cfg = config_from_dict(config, Some(&mut opts))?;
        let log = py.detach(|| Log::open(&path, cfg, opts))?;
        Ok(PyLog(Arc::new(log)))
    }

    #[getter]
    fn path(&self) -> String {
        self.0.dir().to_string_lossy().into_owned()
    }
    #[getter]
    fn log_start_offset(&self) -> i64 {
        self.0.log_start_offset()
    }
    #[getter]
    fn log_end_offset(&self) -> i64 {
        self.0.log_end_offset()
    }
    #[getter]
    fn recovery_point(&self) -> i64 {
        self.0.recovery_point()
    }
    #[getter]
    fn size_bytes(&self) -> u64 {
        self.0.size()
    }
    #[getter]
    fn num_segments(&self) -> usize {
        self.0.num_segments()
    }
    #[getter]
    fn recovered(&self) -> bool {
        self.0.recovered()
    }
    #[getter]
    fn checkpoint_faults(&self) -> Vec<String> {
        self.0.checkpoint_faults().to_vec()
    }
    #[getter]
    fn closed(&self) -> bool {
        self.0.is_closed()
    }

    #[pyo3(signature = (data, *, leader_epoch = None, now_ms = None))]
    fn append(&self, py: Python<'_>, data: &Bound<'_, PyAny>, leader_epoch: Option<i32>, now_ms: Option<i64>) -> PyResult<(i64, i64)> {
        let info = self.append_impl(py, data, AppendOptions { assign_offsets: true, leader_epoch, now_ms })?;
        Ok((info.base_offset, info.last_offset))
    }

    #[pyo3(signature = (data, *, leader_epoch = None, now_ms = None))]
    fn append_info(&self, py: Python<'_>, data: &Bound<'_, PyAny>, leader_epoch: Option<i32>, now_ms: Option<i64>) -> PyResult<PyAppendInfo> {
        Ok(self.append_impl(py, data, AppendOptions { assign_offsets: true, leader_epoch, now_ms })?.into())
    }

    fn append_as_follower(&self, py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<PyAppendInfo> {
        Ok(self.append_impl(py, data, AppendOptions::default())?.into())
    }

    #[pyo3(signature = (offset, max_bytes, *, max_offset = None, min_one_batch = true))]
    fn read<'py>(&self, py: Python<'py>, offset: i64, max_bytes: usize, max_offset: Option<i64>, min_one_batch: bool) -> PyResult<Bound<'py, PyBytes>> {
        match py.detach(|| self.0.read_slice(offset, max_bytes, max_offset, min_one_batch))? {
            None => Ok(PyBytes::new(py, b"")),
            Some(slice) => read_slice_bytes(py, &slice),
        }
    }

    #[pyo3(signature = (offset, max_bytes, *, max_offset = None, min_one_batch = true))]
    fn read_slice(&self, py: Python<'_>, offset: i64, max_bytes: usize, max_offset: Option<i64>, min_one_batch: bool) -> PyResult<Option<PyFileSlice>> {
        Ok(py.detach(|| self.0.read_slice(offset, max_bytes, max_offset, min_one_batch))?.map(PyFileSlice))
    }

    fn offset_for_timestamp(&self, py: Python<'_>, timestamp_ms: i64) -> PyResult<Option<(i64, i64)>> {
        Ok(py.detach(|| self.0.offset_for_timestamp(timestamp_ms))?)
    }

    fn truncate_to(&self, py: Python<'_>, offset: i64) -> PyResult<()> {
        Ok(py.detach(|| self.0.truncate_to(offset))?)
    }

    fn truncate_fully_and_start_at(&self, py: Python<'_>, offset: i64) -> PyResult<()> {
        Ok(py.detach(|| self.0.truncate_fully_and_start_at(offset))?)
    }

    fn delete_records(&self, py: Python<'_>, before_offset: i64) -> PyResult<i64> {
        Ok(py.detach(|| self.0.delete_records(before_offset))?)
    }

    #[pyo3(signature = (*, now_ms = None, max_offset = None))]
    fn enforce_retention(&self, py: Python<'_>, now_ms: Option<i64>, max_offset: Option<i64>) -> PyResult<usize> {
        Ok(py.detach(|| self.0.enforce_retention(now_ms, max_offset))?)
    }

    #[pyo3(signature = (*, now_ms = None))]
    fn roll(&self, py: Python<'_>, now_ms: Option<i64>) -> PyResult<()> {
        Ok(py.detach(|| self.0.roll(now_ms))?)
    }

    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        Ok(py.detach(|| self.0.flush())?)
    }

    /// One compaction pass (see `log_cleaner.rs`); returns its counters. `progress(done,
    /// total)` gets byte counts; `on_step(step, base_offset)` each swap step, called with
    /// the log's write lock held for the steps after "cleaned".
    #[pyo3(signature = (*, now_ms = None, dedupe_buffer_size = 128 * 1024 * 1024, force = false, throttler = None, progress = None, on_step = None))]
    #[allow(clippy::too_many_arguments)]
    fn clean(
        &self,
        py: Python<'_>,
        now_ms: Option<i64>,
        dedupe_buffer_size: usize,
        force: bool,
        throttler: Option<PyRef<'_, PyThrottler>>,
        progress: Option<Py<PyAny>>,
        on_step: Option<Py<PyAny>>,
    ) -> PyResult<std::collections::BTreeMap<&'static str, i64>> {
        let opts = clean_options(now_ms, dedupe_buffer_size, force, throttler.as_deref());
        let log = &self.0;
        let summary = py.detach(|| with_observer(progress.as_ref(), on_step.as_ref(), |observer| log.clean_observed(&opts, observer)))?;
        Ok(summary_dict(&summary))
    }

    fn segments(&self) -> PyResult<Vec<PySegmentInfo>> {
        Ok(self.0.segments()?.into_iter().map(PySegmentInfo::from).collect())
    }

    fn config(&self) -> std::collections::BTreeMap<String, String> {
        self.0.config().entries()
    }

    /// Replaces the log's config (Kafka names, as for ``open``).
    #[pyo3(signature = (**config))]
    fn set_config(&self, config: Option<&Bound<'_, PyDict>>) -> PyResult<()> {
        Ok(self.0.set_config(config_from_dict(config, None)?)?)
    }

    fn assign_epoch_start_offset(&self, epoch: i32, start_offset: i64) -> PyResult<()> {
        Ok(self.0.assign_epoch_start_offset(epoch, start_offset)?)
    }

    fn end_offset_for_epoch(&self, epoch: i32) -> (i32, i64) {
        self.0.end_offset_for_epoch(epoch)
    }

    #[getter]
    fn latest_epoch(&self) -> Option<i32> {
        self.0.latest_epoch()
    }

    fn epoch_entries(&self) -> Vec<(i32, i64)> {
        self.0.epoch_entries()
    }

    fn close(&self, py: Python<'_>) -> PyResult<()> {
        Ok(py.detach(|| self.0.close())?)
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, PyTuple>) -> PyResult<()> {
        self.close(py)
    }

    fn __repr__(&self) -> String {
        format!("Log({:?}, log_start_offset={}, log_end_offset={})", self.0.dir(), self.0.log_start_offset(), self.0.log_end_offset())
    }
}

impl PyLog {
    fn append_impl(&self, py: Python<'_>, data: &Bound<'_, PyAny>, opts: AppendOptions) -> PyResult<AppendInfo> {
        let data = Borrowed::new(data)?;
        let bytes = data.as_slice();
        Ok(py.detach(|| self.0.append(bytes, &opts))?)
    }
}

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
#[allow(clippy::too_many_arguments)]
fn encode_batch<'py>(
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
#[allow(clippy::too_many_arguments)]
#[pyo3(signature = (control_type, *, producer_id, producer_epoch, base_offset = 0, coordinator_epoch = 0, partition_leader_epoch = -1, timestamp_ms = None))]
fn encode_control_batch<'py>(
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

fn clean_options(now_ms: Option<i64>, dedupe_buffer_size: usize, force: bool, throttler: Option<&PyThrottler>) -> LogCleanOptions {
    LogCleanOptions { now_ms: now_ms.unwrap_or_else(log::now_ms), dedupe_buffer_size, force, throttler: throttler.map(|t| Arc::clone(&t.0)) }
}

/// Runs `f` with an observer that forwards events to the Python callables (taking the
/// GIL for each call); the first exception a callable raises is returned after `f`.
fn with_observer(
    progress: Option<&Py<PyAny>>,
    on_step: Option<&Py<PyAny>>,
    f: impl FnOnce(&dyn Fn(&CleanEvent)) -> crate::error::Result<LogCleanSummary>,
) -> PyResult<LogCleanSummary> {
    let failure: std::sync::Mutex<Option<PyErr>> = std::sync::Mutex::new(None);
    let observer = |e: &CleanEvent| {
        let result = match *e {
            CleanEvent::Progress { bytes_done, bytes_total } => progress.map(|cb| Python::attach(|py| cb.call1(py, (bytes_done, bytes_total)).map(drop))),
            CleanEvent::Step { step, base_offset } => on_step.map(|cb| Python::attach(|py| cb.call1(py, (step.name(), base_offset)).map(drop))),
        };
        if let Some(Err(err)) = result {
            failure.lock().unwrap().get_or_insert(err);
        }
    };
    let summary = f(&observer)?;
    match failure.into_inner().unwrap() {
        Some(err) => Err(err),
        None => Ok(summary),
    }
}

fn summary_dict(s: &LogCleanSummary) -> std::collections::BTreeMap<&'static str, i64> {
    std::collections::BTreeMap::from([
        ("segments_cleaned", s.segments_cleaned as i64),
        ("segments_written", s.segments_written as i64),
        ("segments_unread", s.segments_unread as i64),
        ("keys_mapped", s.keys_mapped as i64),
        ("offset_map_bytes", s.offset_map_bytes as i64),
        ("log_bytes_before", s.log_bytes_before as i64),
        ("log_bytes_after", s.log_bytes_after as i64),
        ("first_dirty_offset", s.first_dirty_offset),
        ("cleaned_up_to", s.cleaned_up_to),
        ("bytes_read", s.stats.bytes_read as i64),
        ("bytes_written", s.stats.bytes_written as i64),
        ("records_read", s.stats.records_read as i64),
        ("records_retained", s.stats.records_retained as i64),
        ("tombstones_found", s.stats.tombstones_found as i64),
        ("tombstones_dropped", s.stats.tombstones_dropped as i64),
        ("batches_dropped", s.stats.batches_dropped as i64),
        ("aborted_records_dropped", s.stats.aborted_records_dropped as i64),
        ("markers_dropped", s.stats.markers_dropped as i64),
    ])
}

/// A byte-rate limit shared by the cleaner passes given it.
#[pyclass(frozen, name = "Throttler", module = "logstore._native")]
struct PyThrottler(Arc<Throttler>);

#[pymethods]
impl PyThrottler {
    #[new]
    fn new(bytes_per_second: f64) -> Self {
        PyThrottler(Arc::new(Throttler::new(bytes_per_second)))
    }
    #[getter]
    fn bytes_per_second(&self) -> f64 {
        self.0.bytes_per_second()
    }
}

/// What a cleaning pass over the stopped log at `path` would do; writes nothing.
#[pyfunction]
#[pyo3(signature = (path, *, now_ms = None, dedupe_buffer_size = 128 * 1024 * 1024, progress = None, **config))]
fn clean_dry_run(
    py: Python<'_>,
    path: PathBuf,
    now_ms: Option<i64>,
    dedupe_buffer_size: usize,
    progress: Option<Py<PyAny>>,
    config: Option<&Bound<'_, PyDict>>,
) -> PyResult<std::collections::BTreeMap<&'static str, i64>> {
    let cfg = config_from_dict(config, None)?;
    let opts = clean_options(now_ms, dedupe_buffer_size, true, None);
    let summary = py.detach(|| with_observer(progress.as_ref(), None, |observer| log_cleaner::clean_dry_run(&path, &cfg, &opts, observer)))?;
    Ok(summary_dict(&summary))
}

#[pyclass(frozen, name = "Record", module = "logstore._native", get_all)]
struct PyRecord {
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
struct PyRecordBatch {
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
fn decode_batches(py: Python<'_>, data: &Bound<'_, PyAny>, records: bool, verify_crc: bool, allow_partial: bool) -> PyResult<Vec<PyRecordBatch>> {
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

#[pyfunction]
fn sendfile(py: Python<'_>, out_fd: i32, in_fd: i32, offset: u64, count: usize) -> PyResult<usize> {
    Ok(py.detach(|| file_slice::sendfile(out_fd, in_fd, offset, count))?)
}

/// A Produce request frame (the bytes after its size prefix) in the common shape, read
/// in place: `(api_version, correlation_id, client_id, transactional_id, acks,
/// timeout_ms, ((topic, ((partition, records_start, records_end, has_producer_id), ...)),
/// ...))`, records_start and records_end -1 for null records. `None` for any other shape.
#[pyfunction]
fn parse_produce_request<'py>(py: Python<'py>, frame: &Bound<'py, PyBytes>) -> PyResult<Option<Bound<'py, PyTuple>>> {
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

/// Whether any batch in a produce request's records carries a producer id or the
/// transactional or control attribute (and so needs the producer state's checks).
#[pyfunction]
fn has_producer_id(records: &Bound<'_, PyAny>) -> PyResult<bool> {
    Ok(produce_request::has_producer_id(Borrowed::new(records)?.as_slice()))
}

type PartitionResult = (i32, i16, i64, i64, i64, Option<String>, Vec<(i32, Option<String>)>);

/// A whole Produce response frame (size prefix included) from `[(topic, [(partition,
/// error_code, base_offset, log_append_time_ms, log_start_offset, error_message,
/// [(batch_index, message), ...]), ...]), ...]`.
#[pyfunction]
#[pyo3(signature = (correlation_id, api_version, topics, throttle_time_ms = 0))]
fn encode_produce_response<'py>(
    py: Python<'py>,
    correlation_id: i32,
    api_version: i16,
    topics: Vec<(String, Vec<PartitionResult>)>,
    throttle_time_ms: i32,
) -> Bound<'py, PyBytes> {
    let topics: Vec<TopicProduceResponse<'_>> = topics
        .iter()
        .map(|(name, parts)| TopicProduceResponse {
            name,
            partitions: parts
                .iter()
                .map(|(index, error_code, base_offset, log_append_time_ms, log_start_offset, message, record_errors)| PartitionProduceResponse {
                    index: *index,
                    error_code: *error_code,
                    base_offset: *base_offset,
                    log_append_time_ms: *log_append_time_ms,
                    log_start_offset: *log_start_offset,
                    record_errors: record_errors.iter().map(|(i, m)| (*i, m.as_deref())).collect(),
                    error_message: message.as_deref(),
                })
                .collect(),
        })
        .collect();
    PyBytes::new(py, &produce_response::encode(correlation_id, api_version, &topics, throttle_time_ms))
}

type FetchPartitionResult = (i32, i16, i64, i64, i64, Option<Vec<(i64, i64)>>, u32);

/// A Fetch response frame without its records' bytes, from `[(topic, topic_id as int,
/// [(partition, error_code, high_watermark, last_stable_offset, log_start_offset,
/// aborted [(producer_id, first_offset)] or None, records_len), ...]), ...]`: returns
/// (head, offsets in head where each non-empty records field's bytes go).
#[pyfunction]
#[pyo3(signature = (correlation_id, api_version, error_code, session_id, topics, throttle_time_ms = 0))]
fn encode_fetch_response<'py>(
    py: Python<'py>,
    correlation_id: i32,
    api_version: i16,
    error_code: i16,
    session_id: i32,
    topics: Vec<(String, u128, Vec<FetchPartitionResult>)>,
    throttle_time_ms: i32,
) -> (Bound<'py, PyBytes>, Vec<usize>) {
    let topics: Vec<FetchTopicResponse<'_>> = topics
        .iter()
        .map(|(name, topic_id, parts)| FetchTopicResponse {
            name: name.as_str(),
            topic_id: topic_id.to_be_bytes(),
            partitions: parts
                .iter()
                .map(|(index, error_code, high_watermark, last_stable_offset, log_start_offset, aborted, records_len)| {
                    FetchPartitionResponse {
                        index: *index,
                        error_code: *error_code,
                        high_watermark: *high_watermark,
                        last_stable_offset: *last_stable_offset,
                        log_start_offset: *log_start_offset,
                        aborted_transactions: aborted.clone(),
                        records_len: *records_len,
                    }
                })
                .collect(),
        })
        .collect();
    let encoded = fetch_response::encode(correlation_id, api_version, throttle_time_ms, error_code, session_id, &topics);
    (PyBytes::new(py, &encoded.head), encoded.records_at)
}

/// CRC-32C (Castagnoli) of a bytes-like object, as Kafka's checksums use.
#[pyfunction]
#[pyo3(name = "crc32c", signature = (data, value = 0))]
fn crc32c_py(data: &Bound<'_, PyAny>, value: u32) -> PyResult<u32> {
    let data = Borrowed::new(data)?;
    Ok(::crc32c::crc32c_append(value, data.as_slice()))
}

/// Hands an Arrow record batch to pyarrow through the Arrow C Data Interface: the FFI
/// structs live on this stack frame and `RecordBatch._import_from_c` moves their
/// contents out (leaving `release` null), so nothing is copied and nothing leaks.
fn to_pyarrow(py: Python<'_>, batch: arrow_array::RecordBatch) -> PyResult<Py<PyAny>> {
    let data = StructArray::from(batch).into_data();
    let mut array = FFI_ArrowArray::new(&data);
    let mut schema = FFI_ArrowSchema::try_from(data.data_type()).map_err(|e| PyValueError::new_err(e.to_string()))?;
    let cls = py.import("pyarrow")?.getattr("RecordBatch")?;
    let addrs = (&mut array as *mut FFI_ArrowArray as usize, &mut schema as *mut FFI_ArrowSchema as usize);
    Ok(cls.call_method1("_import_from_c", addrs)?.unbind())
}

fn record_filter(start_offset: i64, end_offset: Option<i64>, min_timestamp: Option<i64>, max_timestamp: Option<i64>) -> RecordFilter {
    RecordFilter {
        start_offset,
        end_offset: end_offset.unwrap_or(i64::MAX),
        min_timestamp: min_timestamp.unwrap_or(i64::MIN),
        max_timestamp: max_timestamp.unwrap_or(i64::MAX),
    }
}

/// A read-only scan of one partition directory into pyarrow record batches.
#[pyclass(name = "PartitionReader", module = "logstore._native")]
struct PyPartitionReader {
    scan: PartitionScan,
    decoder: ArrowDecoder,
}

#[pymethods]
impl PyPartitionReader {
    #[new]
    #[pyo3(signature = (path, topic, partition, *, start_offset, end_offset, min_timestamp = None, max_timestamp = None, include_headers = false, fail_on_data_loss = true))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        path: PathBuf,
        topic: &str,
        partition: i32,
        start_offset: i64,
        end_offset: i64,
        min_timestamp: Option<i64>,
        max_timestamp: Option<i64>,
        include_headers: bool,
        fail_on_data_loss: bool,
    ) -> Self {
        let filter = record_filter(start_offset, Some(end_offset), min_timestamp, max_timestamp);
        PyPartitionReader { scan: PartitionScan::new(&path, filter, fail_on_data_loss), decoder: ArrowDecoder::new(topic, partition, include_headers) }
    }

    /// The next pyarrow.RecordBatch of at least `max_rows` rows (fewer at the end), or
    /// None when the scan is done. The GIL is released while reading and decoding.
    fn read(&mut self, py: Python<'_>, max_rows: usize) -> PyResult<Option<Py<PyAny>>> {
        let (scan, decoder) = (&mut self.scan, &mut self.decoder);
        py.detach(|| scan.read_into(decoder, max_rows.max(1)))?;
        if self.decoder.rows() == 0 {
            return Ok(None);
        }
        let batch = py.detach(|| self.decoder.finish());
        to_pyarrow(py, batch).map(Some)
    }

    #[getter]
    fn next_offset(&self) -> i64 {
        self.scan.next_offset()
    }
    #[getter]
    fn done(&self) -> bool {
        self.scan.is_done()
    }
    #[getter]
    fn segments_opened(&self) -> u64 {
        self.scan.stats.segments_opened
    }
    #[getter]
    fn bytes_read(&self) -> u64 {
        self.scan.stats.bytes_read
    }
    #[getter]
    fn batches_decoded(&self) -> u64 {
        self.scan.stats.batches_decoded
    }
}

/// (log start offset, log end offset) of a partition directory, read-only.
#[pyfunction]
fn partition_offsets(py: Python<'_>, path: PathBuf) -> PyResult<(i64, i64)> {
    let dir = PartitionDir::new(&path);
    Ok(py.detach(|| -> crate::error::Result<(i64, i64)> { Ok((dir.log_start_offset()?, dir.log_end_offset()?)) })?)
}

/// The first offset whose record timestamp is >= `timestamp` (ms), or None.
#[pyfunction]
fn offset_for_timestamp(py: Python<'_>, path: PathBuf, timestamp: i64) -> PyResult<Option<i64>> {
    let dir = PartitionDir::new(&path);
    Ok(py.detach(|| dir.offset_for_timestamp(timestamp))?)
}

/// Decodes the whole batches in `data` (as a Fetch returns them) into one pyarrow
/// RecordBatch; returns it with the offset after the last whole batch (or
/// `start_offset` when there is none).
#[pyfunction]
#[pyo3(signature = (data, topic, partition, *, start_offset = 0, end_offset = None, min_timestamp = None, max_timestamp = None, include_headers = false))]
#[allow(clippy::too_many_arguments)]
fn decode_arrow(
    py: Python<'_>,
    data: &Bound<'_, PyAny>,
    topic: &str,
    partition: i32,
    start_offset: i64,
    end_offset: Option<i64>,
    min_timestamp: Option<i64>,
    max_timestamp: Option<i64>,
    include_headers: bool,
) -> PyResult<(Py<PyAny>, i64)> {
    let data = Borrowed::new(data)?;
    let buf = data.as_slice();
    let filter = record_filter(start_offset, end_offset, min_timestamp, max_timestamp);
    let (batch, next) = py.detach(|| arrow_decoder::decode_buffer(buf, topic, partition, include_headers, &filter))?;
    Ok((to_pyarrow(py, batch)?, next))
}

#[pymodule]
#[pyo3(name = "_native")]
fn native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("LogStoreError", py.get_type::<LogStoreError>())?;
    m.add("CorruptRecordError", py.get_type::<CorruptRecordError>())?;
    // Instances carry their own list; the class default is empty.
    py.get_type::<InvalidRecordError>().setattr("record_errors", PyTuple::empty(py))?;
    m.add("InvalidRecordError", py.get_type::<InvalidRecordError>())?;
    m.add("InvalidTimestampError", py.get_type::<InvalidTimestampError>())?;
    m.add("OffsetOutOfRangeError", py.get_type::<OffsetOutOfRangeError>())?;
    m.add("RecordTooLargeError", py.get_type::<RecordTooLargeError>())?;
    m.add("InvalidConfigError", py.get_type::<InvalidConfigError>())?;
    m.add("InvalidOffsetError", py.get_type::<InvalidOffsetError>())?;
    m.add("CorruptIndexError", py.get_type::<CorruptIndexError>())?;
    m.add("LogClosedError", py.get_type::<LogClosedError>())?;
    m.add("LogIOError", py.get_type::<LogIOError>())?;
    m.add("COMPRESSION_TYPES", PyTuple::new(py, ALL.iter().map(|c| c.name()))?)?;
    m.add_class::<PyLog>()?;
    m.add_class::<PyThrottler>()?;
    m.add_class::<PyFileSlice>()?;
    m.add_class::<PyAppendInfo>()?;
    m.add_class::<PySegmentInfo>()?;
    m.add_class::<PyRecord>()?;
    m.add_class::<PyRecordBatch>()?;
    m.add_class::<PyPartitionReader>()?;
    m.add_function(wrap_pyfunction!(partition_offsets, m)?)?;
    m.add_function(wrap_pyfunction!(offset_for_timestamp, m)?)?;
    m.add_function(wrap_pyfunction!(decode_arrow, m)?)?;
    m.add_function(wrap_pyfunction!(encode_batch, m)?)?;
    m.add_function(wrap_pyfunction!(encode_control_batch, m)?)?;
    m.add_function(wrap_pyfunction!(decode_batches, m)?)?;
    m.add_function(wrap_pyfunction!(sendfile, m)?)?;
    m.add_function(wrap_pyfunction!(crc32c_py, m)?)?;
    m.add_function(wrap_pyfunction!(parse_produce_request, m)?)?;
    m.add_function(wrap_pyfunction!(has_producer_id, m)?)?;
    m.add_function(wrap_pyfunction!(encode_produce_response, m)?)?;
    m.add_function(wrap_pyfunction!(encode_fetch_response, m)?)?;
    m.add_function(wrap_pyfunction!(validate_log_config, m)?)?;
    m.add_function(wrap_pyfunction!(clean_dry_run, m)?)?;
    Ok(())
}
