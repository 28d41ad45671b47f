//! The log cleaner's bindings: `Throttler`, `clean_dry_run`, and the options, progress
//! callbacks and counters that `Log.clean` (in `log.rs`) shares with it.

use std::path::PathBuf;
use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::log;
use crate::log_clean_pass::{self, CleanEvent, LogCleanOptions, LogCleanSummary};
use crate::throttler::Throttler;

use super::log_config::config_from_dict;

pub(super) fn clean_options(now_ms: Option<i64>, dedupe_buffer_size: usize, force: bool, throttler: Option<&PyThrottler>) -> LogCleanOptions {
    LogCleanOptions { now_ms: now_ms.unwrap_or_else(log::now_ms), dedupe_buffer_size, force, throttler: throttler.map(|t| Arc::clone(&t.0)) }
}

/// Runs `f` with an observer that forwards events to the Python callables (taking the
/// GIL for each call); the first exception a callable raises is returned after `f`.
pub(super) fn with_observer(
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

pub(super) fn summary_dict(s: &LogCleanSummary) -> std::collections::BTreeMap<&'static str, i64> {
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
pub(super) struct PyThrottler(Arc<Throttler>);

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
pub(super) fn clean_dry_run(
    py: Python<'_>,
    path: PathBuf,
    now_ms: Option<i64>,
    dedupe_buffer_size: usize,
    progress: Option<Py<PyAny>>,
    config: Option<&Bound<'_, PyDict>>,
) -> PyResult<std::collections::BTreeMap<&'static str, i64>> {
    let cfg = config_from_dict(config, None)?;
    let opts = clean_options(now_ms, dedupe_buffer_size, true, None);
    let summary = py.detach(|| with_observer(progress.as_ref(), None, |observer| log_clean_pass::clean_dry_run(&path, &cfg, &opts, observer)))?;
    Ok(summary_dict(&summary))
}
