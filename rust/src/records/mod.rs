//! The bytes of RecordBatch v2, Kafka's unit of storage and transfer, and what reads,
//! checks and converts them:
//!
//! - `record_batch`: the batch header, its CRC-32C, encoding, decoding and the
//!   append-time validation; `record`: one record inside a batch's record area.
//! - `record_stream`: the records of a compressed batch, streamed out of its codec for
//!   the append-time checks; `record_skim`: the records of an uncompressed batch, read in
//!   place for the cleaner.
//! - `record_rules`: what a topic's config asks of each record a producer sends.
//! - `record_conversion`: to and from message formats v0/v1 (`crate::legacy_records`).

pub mod record;
pub mod record_batch;
pub mod record_conversion;
pub mod record_rules;
pub mod record_skim;
pub mod record_stream;
