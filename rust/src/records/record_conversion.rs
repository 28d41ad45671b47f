//! Conversion between message formats v0/v1 (`legacy_records`) and RecordBatch v2, as
//! Kafka's `LogValidator` (up, on append) and `RecordsUtil.downConvert` (down, on fetch)
//! do it.
//!
//! Up (Produce v0-v2): a message set becomes one v2 batch with base offset 0 and
//! offset deltas 0..n-1 (the log assigns the offsets), keeping each message's key and
//! value, its timestamp (magic 1; inner messages of a LogAppendTime wrapper take the
//! wrapper's) or `now_ms` (magic 0, which has none), and the codec of the message set's
//! wrappers (none if it has none). The batch carries no producer id, sequence or
//! headers, and is CreateTime unless every message is LogAppendTime.
//!
//! Down (Fetch v0-v3): each v2 batch becomes messages of `to_magic`:
//! - control batches are dropped; a transactional batch's records are kept as they are
//!   (old consumers cannot tell aborted records, as in Kafka);
//! - an uncompressed batch becomes one message per record, skipping the records before
//!   the fetch offset;
//! - a compressed batch becomes one wrapper holding all its records, with inner offsets
//!   absolute (magic 0) or relative to its first record (magic 1) and the wrapper at the
//!   last record's offset;
//! - timestamps and the timestamp type carry over to magic 1 and are dropped for magic
//!   0; headers are dropped;
//! - zstd has no v0/v1 form: `Error::UnsupportedForMessageFormat` (Kafka answers
//!   UNSUPPORTED_COMPRESSION_TYPE).
//!
//! Output is bounded: conversion stops before the unit (message or wrapper) that would
//! take the output past `max_bytes`, except that the first unit is always converted,
//! so a consumer can make progress. Memory held is the output plus one decompressed
//! batch.

use crate::compression::Compression;
use crate::error::{Error, Result};
use crate::legacy_records::{self, LegacyMessage, MAGIC_V0, TIMESTAMP_TYPE_MASK};
use crate::records::record::NewRecord;
use crate::records::record_batch::{self, BatchHeader, BatchOptions, DecodedBatch, HEADER_SIZE, LOG_OVERHEAD};

/// The v2 batch holding the messages of `message_set` (magic 0/1 only).
pub fn up_convert(message_set: &[u8], now_ms: i64) -> Result<Vec<u8>> {
    let mut records: Vec<NewRecord> = Vec::new();
    let mut codec = Compression::None;
    let mut all_log_append_time = true;
    for outer in legacy_records::read_message_set(message_set, 0)? {
        let position = outer.offset as u64;
        let outer_codec = legacy_records::codec(outer.attributes, position)?;
        all_log_append_time &= outer.is_log_append_time();
        if outer_codec == Compression::None {
            records.push(new_record(&outer, records.len(), None, now_ms));
            continue;
        }
        if codec == Compression::None {
            codec = outer_codec;
        }
        let value = outer.value.ok_or_else(|| Error::corrupt(position, "compressed message with a null value"))?;
        let inner_bytes = legacy_records::decompress(outer_codec, outer.magic, value, position)?;
        let wrapper_time = outer.is_log_append_time().then_some(outer.timestamp);
        for inner in legacy_records::read_message_set(&inner_bytes, 0)? {
            if inner.magic > outer.magic || inner.codec_id() != 0 {
                return Err(Error::corrupt(
                    position,
                    format!("inner message of magic {} codec {} in a magic {} wrapper", inner.magic, inner.codec_id(), outer.magic),
                ));
            }
            records.push(new_record(&inner, records.len(), wrapper_time, now_ms));
        }
    }
    if records.is_empty() {
        return Err(Error::corrupt(0, "message set holds no message"));
    }
    let opts = BatchOptions {
        compression: codec,
        log_append_time: all_log_append_time.then(|| records.iter().map(|r| r.timestamp).max().unwrap_or(now_ms)),
        ..BatchOptions::default()
    };
    Ok(record_batch::encode(&records, &opts))
}

fn new_record(m: &LegacyMessage<'_>, index: usize, wrapper_time: Option<i64>, now_ms: i64) -> NewRecord {
    let timestamp = match wrapper_time {
        Some(t) => t,
        None if m.magic == MAGIC_V0 => now_ms,
        None => m.timestamp,
    };
    NewRecord {
        offset: index as i64,
        timestamp,
        key: m.key.map(<[u8]>::to_vec),
        value: m.value.map(<[u8]>::to_vec),
        headers: Vec::new(),
    }
}

/// Down-converted records and how far the conversion went.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct DownConverted {
    /// A message set of `to_magic`.
    pub records: Vec<u8>,
    /// The offset after the last batch examined (converted or skipped): where a reader
    /// that got no records goes on.
    pub next_offset: i64,
    /// The records written (inner records of wrappers included).
    pub records_converted: usize,
}

/// The v2 batches of `batches` (whole batches, as the log returns them) as a message set
/// of `to_magic` (0 or 1), from `first_offset`, of at most `max_bytes` unless its first
/// unit alone is larger.
pub fn down_convert(batches: &[u8], to_magic: u8, first_offset: i64, max_bytes: usize) -> Result<DownConverted> {
    let mut out = DownConverted { next_offset: first_offset, ..DownConverted::default() };
    let mut pos = 0;
    while pos + HEADER_SIZE <= batches.len() {
        let h = BatchHeader::parse(&batches[pos..]);
        let size = h.size();
        if size < HEADER_SIZE || pos + size > batches.len() {
            break;
        }
        let full = convert_batch(&batches[pos..pos + size], pos as u64, &h, to_magic, first_offset, max_bytes, &mut out)?;
        if !full {
            break;
        }
        out.next_offset = out.next_offset.max(h.next_offset());
        pos += size;
    }
    Ok(out)
}

/// Appends one batch's messages; false when `max_bytes` stopped it before its end.
fn convert_batch(
    batch: &[u8],
    position: u64,
    h: &BatchHeader,
    to_magic: u8,
    first_offset: i64,
    max_bytes: usize,
    out: &mut DownConverted,
) -> Result<bool> {
    if h.is_control() || h.next_offset() <= first_offset {
        return Ok(true);
    }
    let codec = h.compression()?;
    if codec == Compression::Zstd {
        return Err(Error::UnsupportedForMessageFormat {
            position,
            reason: format!("zstd-compressed batches cannot be converted to magic {to_magic}"),
        });
    }
    let decoded = DecodedBatch::new(batch, position, false)?;
    let records = decoded.records()?;
    let log_append_time = h.is_log_append_time();
    let attributes = if to_magic > MAGIC_V0 && log_append_time { TIMESTAMP_TYPE_MASK } else { 0 };
    let fits = |out: &DownConverted, n: usize| out.records.is_empty() || out.records.len() + n <= max_bytes;
    if codec == Compression::None {
        for r in records.iter().filter(|r| r.offset >= first_offset) {
            let n = legacy_records::entry_size(to_magic, r.key, r.value);
            if !fits(out, n) {
                return Ok(false);
            }
            legacy_records::write_entry(&mut out.records, r.offset, to_magic, attributes, r.timestamp, r.key, r.value);
            out.records_converted += 1;
            out.next_offset = r.offset + 1;
        }
        return Ok(true);
    }
    let Some(first) = records.first() else { return Ok(true) };
    let base = first.offset;
    let mut inner = Vec::with_capacity(records.iter().map(|r| legacy_records::entry_size(to_magic, r.key, r.value)).sum());
    for r in &records {
        let offset = if to_magic == MAGIC_V0 { r.offset } else { r.offset - base };
        legacy_records::write_entry(&mut inner, offset, to_magic, attributes, r.timestamp, r.key, r.value);
    }
    let compressed = legacy_records::compress(codec, to_magic, &inner);
    let n = legacy_records::entry_size(to_magic, None, Some(&compressed));
    if !fits(out, n) {
        return Ok(false);
    }
    let last = records.last().map_or(base, |r| r.offset);
    let wrapper_time = if log_append_time { h.max_timestamp } else { records.iter().map(|r| r.timestamp).max().unwrap_or(-1) };
    legacy_records::write_entry(&mut out.records, last, to_magic, attributes | codec as u8, wrapper_time, None, Some(&compressed));
    out.records_converted += records.len();
    Ok(true)
}

/// The magic byte of the first entry of `records` (byte 16 in every format), or None
/// when there are too few bytes to tell.
pub fn magic_of(records: &[u8]) -> Option<u8> {
    records.get(LOG_OVERHEAD + 4).copied()
}

#[cfg(test)]
#[path = "record_conversion_tests.rs"]
mod tests;
