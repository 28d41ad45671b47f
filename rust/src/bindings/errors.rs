//! The one mapping from core errors to Python exceptions.
//!
//! Every exception class of `logstore._native` is declared here, all under the one base
//! `LogStoreError`, and every `crate::error::Error` variant maps to exactly one of them in
//! the single exhaustive `From<Error> for PyErr` below (a new variant fails to compile
//! until it is mapped). Both I/O variants (`Error::Io`, `Error::Os`) become `LogIOError`,
//! whose `errno` attribute is the OS error number (`errno.ENOSPC`, `errno.EIO`, ...) or
//! None; the class's own `errno` is None (`bindings/mod.rs`).

use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::PyTuple;

use crate::error::Error;

pyo3::create_exception!(logstore._native, LogStoreError, PyException, "Base of every storage engine error.");
pyo3::create_exception!(logstore._native, CorruptRecordError, LogStoreError, "A record batch failed validation.");
pyo3::create_exception!(logstore._native, InvalidRecordError, LogStoreError, "Records a topic's rules refuse (a compacted topic's record without a key); `record_errors` lists (index in batch, message).");
pyo3::create_exception!(logstore._native, InvalidTimestampError, InvalidRecordError, "Record timestamps outside the topic's message.timestamp.before/after.max.ms window.");
pyo3::create_exception!(logstore._native, UnsupportedForMessageFormatError, LogStoreError, "Records message format v0/v1 cannot hold (zstd), met in a down-conversion.");
pyo3::create_exception!(logstore._native, OffsetOutOfRangeError, LogStoreError, "Offset outside [log start, log end].");
pyo3::create_exception!(logstore._native, RecordTooLargeError, LogStoreError, "A batch exceeds max.message.bytes or segment.bytes.");
pyo3::create_exception!(logstore._native, InvalidConfigError, LogStoreError, "A config key or value is invalid, worded as Kafka; `config_exception` is true for a bad value (Kafka's ConfigException).");
pyo3::create_exception!(logstore._native, InvalidOffsetError, LogStoreError, "Follower batches do not follow the log end.");
pyo3::create_exception!(logstore._native, CorruptIndexError, LogStoreError, "An index file disagrees with its segment.");
pyo3::create_exception!(logstore._native, LogClosedError, LogStoreError, "The log was closed.");
pyo3::create_exception!(logstore._native, LogIOError, LogStoreError, "The OS refused a file operation; `errno` is its error number (or None).");

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
            Error::UnsupportedForMessageFormat { .. } => UnsupportedForMessageFormatError::new_err(msg),
            Error::OffsetOutOfRange { .. } => OffsetOutOfRangeError::new_err(msg),
            Error::RecordTooLarge { .. } => RecordTooLargeError::new_err(msg),
            Error::InvalidConfig { config_exception, .. } => Python::attach(|py| {
                let err = InvalidConfigError::new_err(msg);
                match err.value(py).setattr("config_exception", config_exception) {
                    Ok(()) => err,
                    Err(e) => e,
                }
            }),
            Error::InvalidOffset { .. } => InvalidOffsetError::new_err(msg),
            Error::CorruptIndex { .. } => CorruptIndexError::new_err(msg),
            Error::LogClosed(_) => LogClosedError::new_err(msg),
            Error::Io { .. } | Error::Os(_) => {
                let errno = e.raw_os_error();
                Python::attach(|py| {
                    let err = LogIOError::new_err(msg);
                    match err.value(py).setattr("errno", errno) {
                        Ok(()) => err,
                        Err(e) => e,
                    }
                })
            }
        }
    }
}
