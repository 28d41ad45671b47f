//! logstore's storage core: Kafka's on-disk log format in Rust.
//!
//! - `records` (`record_batch`, `record` and the rest), `varint`, `compression`:
//!   RecordBatch v2 bytes; `legacy_records`: message formats v0/v1, and
//!   `records::record_conversion` between the two (Produce v0-v2 up, Fetch v0-v3 down).
//! - `offset_index`, `time_index` (over `index_file`): the sparse, mmapped indexes.
//! - `segment`: one `.log` with its indexes (`direct_writer`: filling one past the page cache). `log`: the ordered segments of a partition,
//!   with recovery, retention, truncation and the `leader_epoch_cache`;
//!   `segment_deletion`: unlinking the files of removed segments after `file.delete.delay.ms`.
//! - `produce_request`, `produce_response`: the Produce API's wire format, read in place
//!   and written whole, for the broker's hottest request; `fetch_response` writes Fetch
//!   responses around the records sent by `sendfile`; both over `wire_writer`.
//! - `log_clean_pass`: one compaction pass over a log's segment files (what to clean, the
//!   rewrite in groups, the crash-safe swap); `batch_cleaner`: the algorithm it runs over
//!   batch bytes (the offset map of latest offsets per key, the records kept).
//! - `validation_pool`: checking a large append's batches on a rayon thread pool while
//!   its bytes are written.
//! - `file_slice`: byte ranges of whole batches and zero-copy `sendfile(2)`.
//! - `log_reader` (over `segment_cursor`, `transactions`): read-only scans of a partition
//!   directory a broker may be writing, decoded by `arrow_decoder` into Arrow columns.
//!
//! The core has no Python in it; `bindings` (feature "python") is the PyO3 binding layer,
//! one module per concept with the `#[pymodule]` in `bindings/mod.rs`.

pub mod arrow_decoder;
pub mod batch_cleaner;
pub mod checkpoint;
pub mod compression;
pub mod direct_writer;
pub mod error;
pub mod file_cache;
pub mod file_slice;
pub mod follower_fetch_request;
pub mod index_file;
pub mod leader_epoch_cache;
pub mod legacy_records;
pub mod live_records;
pub mod log;
pub mod log_clean_pass;
pub mod log_reader;
pub mod log_config;
pub mod topic_config_def;
pub mod offset_index;
pub mod offset_map;
pub mod produce_request;
pub mod produce_response;
pub mod fetch_response;
pub mod records;
pub mod segment;
pub mod segment_cursor;
pub mod segment_deletion;
pub mod segment_recovery;
pub mod throttler;
pub mod time_index;
pub mod topic_compression;
pub mod transactions;
pub mod validation_pool;
pub mod varint;
pub mod wire_reader;
pub mod wire_writer;

#[cfg(feature = "python")]
mod bindings;

pub use crate::error::{Error, Result};
pub use crate::log::Log;
