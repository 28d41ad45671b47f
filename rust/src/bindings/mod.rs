//! PyO3 bindings: the native module `logstore._native` (feature "python"), the only
//! code in the crate that uses pyo3.
//!
//! Thin wrappers only: argument conversion, GIL release around every file and CRC
//! operation, and the one mapping from core errors to Python exceptions. One module
//! per core concept, each holding its `Py*` newtypes (with `From` conversions from the
//! core types) and `#[pyfunction]`s:
//! - `errors`: every exception class, and `From<crate::error::Error> for PyErr`;
//! - `log`: `Log`, `AppendInfo`, `SegmentInfo`; `log_config`: `**config` into `LogConfig`;
//! - `file_slice`: `FileSlice`, `sendfile`;
//! - `frame_buffer`: `FrameBuffer`, a request frame read in place;
//! - `cleaner`: `Throttler`, `clean_dry_run` (and what `Log.clean` uses);
//! - `record_batch`: `Record`, `RecordBatch`, the batch encoders and decoder, `crc32c`;
//! - `wire`: the Produce request parser and the Produce/Fetch response encoders;
//! - `legacy`: message formats v0/v1 converted up (Produce v0-v2) and down (Fetch v0-v3);
//! - `arrow`: `PartitionReader` and the other read-only scans into pyarrow;
//! - `buffer`: bytes-like arguments borrowed without a copy.
//!
//! This root only registers them. `python/logstore/_native.pyi` is the contract for
//! every name registered here.

mod arrow;
mod buffer;
mod cleaner;
mod errors;
mod file_slice;
mod frame_buffer;
mod legacy;
mod log;
mod log_config;
mod record_batch;
mod wire;

use pyo3::prelude::*;
use pyo3::types::PyTuple;

use crate::compression::ALL;

use self::errors::{
    CorruptIndexError, CorruptRecordError, InvalidConfigError, InvalidOffsetError, InvalidRecordError, InvalidTimestampError, LogClosedError,
    LogIOError, LogStoreError, OffsetOutOfRangeError, RecordTooLargeError, UnsupportedForMessageFormatError,
};

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
    // Instances say whether Kafka raises theirs as a ConfigException (a bad value).
    py.get_type::<InvalidConfigError>().setattr("config_exception", true)?;
    m.add("InvalidConfigError", py.get_type::<InvalidConfigError>())?;
    m.add("InvalidOffsetError", py.get_type::<InvalidOffsetError>())?;
    m.add("CorruptIndexError", py.get_type::<CorruptIndexError>())?;
    m.add("LogClosedError", py.get_type::<LogClosedError>())?;
    py.get_type::<LogIOError>().setattr("errno", py.None())?;
    m.add("LogIOError", py.get_type::<LogIOError>())?;
    m.add("UnsupportedForMessageFormatError", py.get_type::<UnsupportedForMessageFormatError>())?;
    m.add("COMPRESSION_TYPES", PyTuple::new(py, ALL.iter().map(|c| c.name()))?)?;
    m.add_class::<log::PyLog>()?;
    m.add_class::<cleaner::PyThrottler>()?;
    m.add_class::<file_slice::PyFileSlice>()?;
    m.add_class::<frame_buffer::PyFrameBuffer>()?;
    m.add_class::<log::PyAppendInfo>()?;
    m.add_class::<log::PySegmentInfo>()?;
    m.add_class::<record_batch::PyRecord>()?;
    m.add_class::<record_batch::PyRecordBatch>()?;
    m.add_class::<arrow::PyPartitionReader>()?;
    m.add_function(wrap_pyfunction!(arrow::partition_offsets, m)?)?;
    m.add_function(wrap_pyfunction!(arrow::offset_for_timestamp, m)?)?;
    m.add_function(wrap_pyfunction!(arrow::decode_arrow, m)?)?;
    m.add_function(wrap_pyfunction!(record_batch::encode_batch, m)?)?;
    m.add_function(wrap_pyfunction!(record_batch::encode_control_batch, m)?)?;
    m.add_function(wrap_pyfunction!(record_batch::decode_batches, m)?)?;
    m.add_function(wrap_pyfunction!(file_slice::sendfile, m)?)?;
    m.add_function(wrap_pyfunction!(record_batch::crc32c_py, m)?)?;
    m.add_function(wrap_pyfunction!(wire::parse_produce_request, m)?)?;
    m.add_function(wrap_pyfunction!(wire::parse_follower_fetch_request, m)?)?;
    m.add_function(wrap_pyfunction!(wire::has_producer_id, m)?)?;
    m.add_function(wrap_pyfunction!(wire::encode_produce_response, m)?)?;
    m.add_function(wrap_pyfunction!(wire::encode_fetch_response, m)?)?;
    m.add_function(wrap_pyfunction!(legacy::up_convert_records, m)?)?;
    m.add_function(wrap_pyfunction!(legacy::down_convert_slice, m)?)?;
    m.add_function(wrap_pyfunction!(log_config::validate_log_config, m)?)?;
    m.add_function(wrap_pyfunction!(log_config::validate_topic_configs, m)?)?;
    m.add_function(wrap_pyfunction!(log_config::topic_config_keys, m)?)?;
    m.add_function(wrap_pyfunction!(cleaner::clean_dry_run, m)?)?;
    m.add_function(wrap_pyfunction!(log::set_max_open_files, m)?)?;
    m.add_function(wrap_pyfunction!(log::open_files, m)?)?;
    m.add_function(wrap_pyfunction!(log::close_idle_files, m)?)?;
    m.add_function(wrap_pyfunction!(log::sync_filesystem, m)?)?;
    Ok(())
}
