//! The storage core's error type: one enum, structured variants.
//!
//! Every variant maps to exactly one Python exception class in `bindings/errors.rs`.

use std::path::PathBuf;

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("corrupt record batch at byte {position}: {reason}")]
    CorruptRecord { position: u64, reason: String },

    /// Records a topic's rules refuse (`record_rules`), each by its index in the batch.
    #[error("{} record(s) of the batch at byte {position} rejected, first: {}", errors.len(), errors[0].message)]
    InvalidRecord { position: u64, errors: Vec<crate::records::record_rules::RecordError> },

    #[error("offset {offset} is out of range [{log_start_offset}, {log_end_offset}]")]
    OffsetOutOfRange { offset: i64, log_start_offset: i64, log_end_offset: i64 },

    #[error("record batch of {size} bytes exceeds the limit of {limit} bytes ({what})")]
    RecordTooLarge { size: usize, limit: usize, what: &'static str },

    /// Worded as Kafka words it. `config_exception`: Kafka raises it as a `ConfigException`
    /// (a bad value, which AlterConfigs answers prefixed with the resource) rather than an
    /// `InvalidConfigurationException` (an unknown name, a cross-key rule).
    #[error("{message}")]
    InvalidConfig { message: String, config_exception: bool },

    #[error("batch offsets start at {base_offset}, but the log end offset is {log_end_offset}")]
    InvalidOffset { base_offset: i64, log_end_offset: i64 },

    #[error("corrupt index {path}: {reason}")]
    CorruptIndex { path: PathBuf, reason: String },

    #[error("unsupported compression codec id {0}")]
    UnsupportedCompression(u8),

    /// Records message format v0/v1 cannot express (zstd), met while converting down.
    #[error("record batch at byte {position} cannot be converted: {reason}")]
    UnsupportedForMessageFormat { position: u64, reason: String },

    #[error("the log at {0} is closed")]
    LogClosed(PathBuf),

    #[error("{op} {path}: {source}")]
    Io { op: &'static str, path: PathBuf, #[source] source: std::io::Error },

    /// An I/O error that is not about one file (starting the cleaner's thread).
    #[error(transparent)]
    Os(#[from] std::io::Error),
}

impl Error {
    /// The OS error number of an I/O error (`Io`, `Os`), if it has one.
    pub fn raw_os_error(&self) -> Option<i32> {
        match self {
            Error::Io { source, .. } | Error::Os(source) => source.raw_os_error(),
            _ => None,
        }
    }

    pub fn corrupt(position: u64, reason: impl Into<String>) -> Self {
        Error::CorruptRecord { position, reason: reason.into() }
    }

    /// Kafka's `ConfigException(name, value, message)`:
    /// `Invalid value <value> for configuration <key>: <reason>`.
    pub fn config(key: &str, value: impl ToString, reason: impl Into<String>) -> Self {
        let message = format!("Invalid value {} for configuration {key}: {}", value.to_string(), reason.into());
        Error::InvalidConfig { message, config_exception: true }
    }

    /// Kafka's `ConfigException(message)`.
    pub fn config_exception(message: impl Into<String>) -> Self {
        Error::InvalidConfig { message: message.into(), config_exception: true }
    }

    /// Kafka's `InvalidConfigurationException(message)`.
    pub fn invalid_config(message: impl Into<String>) -> Self {
        Error::InvalidConfig { message: message.into(), config_exception: false }
    }
}

/// Attaches the operation and file name to an `io::Error`.
pub trait IoContext<T> {
    fn ctx(self, op: &'static str, path: &std::path::Path) -> Result<T>;
}

impl<T> IoContext<T> for std::io::Result<T> {
    fn ctx(self, op: &'static str, path: &std::path::Path) -> Result<T> {
        self.map_err(|source| Error::Io { op, path: path.to_path_buf(), source })
    }
}
