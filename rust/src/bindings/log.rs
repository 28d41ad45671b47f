//! `Log`, one partition's log, and the records of its calls: `AppendInfo` (an append)
//! and `SegmentInfo` (one segment). Thin wrappers: open, appends, reads, truncation,
//! retention, roll, flush, clean, close and close_handlers run with the GIL released;
//! `Log.clean` shares its options and callbacks with `clean_dry_run` (`cleaner.rs`).

use std::path::PathBuf;
use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyTuple};

use crate::log::{AppendInfo, AppendOptions, Log, OpenOptions, SegmentInfo};

use super::buffer::Borrowed;
use super::cleaner::{clean_options, summary_dict, with_observer, PyThrottler};
use super::file_slice::{read_slice_bytes, PyFileSlice};
use super::log_config::config_from_dict;

#[pyclass(frozen, name = "AppendInfo", module = "logstore._native", get_all)]
pub(super) struct PyAppendInfo {
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
pub(super) struct PySegmentInfo {
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

#[pyclass(frozen, name = "Log", module = "logstore._native")]
pub(super) struct PyLog(Arc<Log>);

#[pymethods]
impl PyLog {
    /// `defer_sync`: the caller calls `sync_filesystem` on the log dir before the log
    /// takes any write (see `OpenOptions::defer_sync`).
    #[staticmethod]
    #[pyo3(signature = (path, *, defer_sync = false, **config))]
    fn open(py: Python<'_>, path: PathBuf, defer_sync: bool, config: Option<&Bound<'_, PyDict>>) -> PyResult<PyLog> {
        let mut opts = OpenOptions { defer_sync, ..OpenOptions::default() };
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
    /// What crash recovery cut at open, as one line (None when nothing was cut).
    #[getter]
    fn recovery_report(&self) -> Option<String> {
        let cut = self.0.recovery_dropped();
        (!cut.is_empty()).then(|| cut.describe())
    }
    /// What crash recovery cut at open: bytes, batches, records, the first and last
    /// offset their headers claim (None when no header was readable), segments deleted.
    #[getter]
    fn recovery_dropped<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let cut = self.0.recovery_dropped();
        let d = PyDict::new(py);
        d.set_item("bytes", cut.bytes)?;
        d.set_item("batches", cut.batches)?;
        d.set_item("records", cut.records)?;
        d.set_item("first_offset", cut.offsets.map(|o| o.0))?;
        d.set_item("last_offset", cut.offsets.map(|o| o.1))?;
        d.set_item("segments_deleted", cut.segments_deleted)?;
        Ok(d)
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
        Ok(py.detach(|| self.0.read_slice(offset, max_bytes, max_offset, min_one_batch))?.map(PyFileSlice::from))
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

    /// One compaction pass (see `log_clean_pass.rs`); returns its counters. `progress(done,
    /// total)` gets byte counts; `on_step(step, base_offset)` each swap step, called with
    /// the log's write lock held for the steps after "cleaned".
    #[pyo3(signature = (*, now_ms = None, dedupe_buffer_size = 128 * 1024 * 1024, force = false, throttler = None, progress = None, on_step = None))]
    #[allow(clippy::too_many_arguments, reason = "mirrors the Python keyword arguments of Log.clean")]
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

    /// `close` without fsyncs nor marker, for closing many logs: then `sync_filesystem`
    /// of the log dir, `mark_clean_shutdown`, and `sync_filesystem` again.
    fn close_deferred(&self, py: Python<'_>) -> PyResult<()> {
        Ok(py.detach(|| self.0.close_deferred())?)
    }

    /// After `close_deferred` and a sync of the log dir: the offset checkpoints and the
    /// clean-shutdown marker, not fsynced. Nothing for a log not closed that way.
    fn mark_clean_shutdown(&self, py: Python<'_>) -> PyResult<()> {
        Ok(py.detach(|| self.0.mark_clean_shutdown())?)
    }

    /// Closes without writing anything (a log dir gone offline); the next open recovers.
    fn close_handlers(&self, py: Python<'_>) {
        py.detach(|| self.0.close_handlers())
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

/// Caps the segment files the storage engine keeps open (0: half the soft file limit);
/// the least recently used are closed past it and opened again on use.
#[pyfunction]
pub(super) fn set_max_open_files(n: usize) {
    crate::file_cache::set_max_open(n);
}

/// (segment files open now, the cap).
#[pyfunction]
pub(super) fn open_files() -> (usize, usize) {
    (crate::file_cache::open_count(), crate::file_cache::max_open())
}

/// `syncfs(2)` of the filesystem holding `path` (a log dir): makes durable what logs
/// opened with `defer_sync` left to the caller.
#[pyfunction]
pub(super) fn sync_filesystem(py: Python<'_>, path: PathBuf) -> PyResult<()> {
    Ok(py.detach(|| crate::checkpoint::sync_filesystem(&path))?)
}

/// Closes the segment files unused for `idle_ms`; returns how many.
#[pyfunction]
pub(super) fn close_idle_files(py: Python<'_>, idle_ms: u64) -> usize {
    py.detach(|| crate::file_cache::close_idle(idle_ms))
}
