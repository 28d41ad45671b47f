//! The log cleaner's algorithm (Kafka's `Cleaner`) over batch bytes, with no files:
//! `log_clean_pass.rs` drives it over a log's segments.
//!
//! A cleaning pass has two steps:
//! 1. `build_offset_map` reads the dirty part of the log and records, for every key, the
//!    latest offset (`OffsetMap`). It stops at a batch boundary once the map is full.
//! 2. `clean_segment` rewrites each segment up to the end of what was mapped, keeping a
//!    record only when it is the latest for its key (or its key is not in the map).
//!
//! Rules, as Kafka 3.x applies them to RecordBatch v2:
//! - Records with a null key are dropped (they cannot be compacted).
//! - A tombstone (null value) that is the latest for its key stays until its batch's
//!   delete horizon has passed (`now >= horizon`). A batch that keeps a tombstone and has
//!   no horizon yet gets one: attribute bit 6 set and baseTimestamp = now +
//!   `delete.retention.ms`. A horizon already set is kept when the batch is rewritten.
//! - Offsets never move: retained records keep their offsets (gaps are allowed) and a
//!   rewritten batch keeps its baseOffset and lastOffsetDelta, so the next offset of the
//!   segment is unchanged. Producer id, epoch, base sequence, partition leader epoch,
//!   timestamp type and codec are kept too.
//! - Records at or past `map_end` (the end of what the offset map covers) are kept.
//! - A batch that loses all its records is dropped, except when it is its producer's last
//!   data batch in the log: it is then kept as an empty batch (recordsCount 0, codec none,
//!   both timestamps set to the original maxTimestamp) so the producer's last sequence
//!   survives, as Kafka keeps it.
//! - Transactions (`transactions.rs`): batches of aborted transactions are discarded and
//!   never mapped; a transaction marker (control batch) that may go gets a delete horizon
//!   like a tombstone's, and goes once it has passed. Other control batches are copied.
//! - A batch with nothing removed and no horizon to set is copied byte for byte.

use crate::compression::Compression;
use crate::error::{Error, Result};
use crate::live_records::LiveRecords;
use crate::offset_map::{key_hash, OffsetMap, HASH_SIZE};
use crate::records::record::NewRecord;
use crate::records::record_batch::{
    compute_crc, control_type, encode, verify_crc, BatchHeader, BatchIter, BatchOptions, DecodedBatch, CRC_OFFSET, HEADER_SIZE,
};
use crate::records::record_skim::{skim_records, write_retained, SkimmedRecord};
use crate::transactions::{control_batch_type, CleanedTransactions, LogTransactions};

/// Map lookups run this many keys behind the prefetch of their slots, so that a few
/// cache misses overlap without the prefetched lines being evicted before use.
const PREFETCH_SLOTS: usize = 16;

/// What `build_offset_map` returns when its input holds no whole batch.
pub const NO_OFFSET: i64 = -1;


/// Feeds every whole batch header of `batches` (in offset order) to `txns`.
pub fn observe_batches(batches: &[u8], txns: &mut LogTransactions) -> Result<()> {
    for item in BatchIter::new(batches, 0) {
        let (pos, h, batch) = item?;
        let ty = if h.is_control() { control_batch_type(batch, pos as u64)? } else { None };
        txns.observe(&h, ty);
    }
    Ok(())
}

/// Maps the key of every record in `batches` (whole batches, e.g. one or more dirty
/// segments back to back) to its offset; control batches and batches of aborted
/// transactions are skipped. Stops before the first batch whose records could push the
/// map past its load factor (`OffsetMap::free_entries`), so a batch is always mapped
/// whole. Returns the next offset to map: the offset after the last batch mapped, the
/// first batch's base offset when none fit, or `NO_OFFSET` for empty input.
///
/// An empty map that cannot hold even the first batch's records is an error (the dedupe
/// buffer is too small), since no progress would ever be made.
pub fn build_offset_map(batches: &[u8], map: &mut OffsetMap, txns: &LogTransactions) -> Result<i64> {
    build_offset_map_counting(batches, map, txns, None, true)
}

/// As `build_offset_map`, counting each batch and the records that stay the latest for
/// their key in `live` (of the segment it last started), for dropping segments whose
/// records were all superseded without reading them again. With `check_crc` false the
/// caller checks every batch's CRC-32C itself before using the map.
pub fn build_offset_map_counting(batches: &[u8], map: &mut OffsetMap, txns: &LogTransactions, mut live: Option<&mut LiveRecords>, check_crc: bool) -> Result<i64> {
    let mut next = NO_OFFSET;
    let mut stopped = false;
    let mut hashed: Vec<([u8; HASH_SIZE], i64)> = Vec::new();
    let mut iter = BatchIter::new(batches, 0);
    for item in &mut iter {
        let (pos, h, batch) = item?;
        if next == NO_OFFSET {
            next = h.base_offset;
        }
        if h.is_control() || txns.is_aborted(&h) {
            if check_crc {
                verify_crc(batch, &h, pos as u64)?;
            }
            if let Some(l) = live.as_deref_mut() {
                l.on_unmapped_batch();
            }
            next = h.next_offset();
            continue;
        }
        let count = h.records_count as usize;
        if count > map.free_entries() {
            // One batch larger than the load factor fits in an empty map up to capacity - 1.
            if !map.is_empty() {
                stopped = true;
                break;
            }
            if count >= map.capacity() {
                return Err(Error::config(
                    "log.cleaner.dedupe.buffer.size",
                    map.memory_bytes(),
                    format!("the offset map of {} slots cannot hold the {count} records of the batch at offset {}", map.capacity(), h.base_offset),
                ));
            }
        }
        hashed.clear();
        for_each_key(batch, &h, pos as u64, check_crc, |offset, key| {
            if let Some(k) = key {
                hashed.push((key_hash(k), offset));
            }
        })?;
        for (hash, _) in hashed.iter().take(PREFETCH_SLOTS) {
            map.prefetch(hash);
        }
        if let Some(l) = live.as_deref_mut() {
            l.on_mapped_batch(&h, txns);
        }
        for (i, (hash, offset)) in hashed.iter().enumerate() {
            if let Some((ahead, _)) = hashed.get(i + PREFETCH_SLOTS) {
                map.prefetch(ahead);
            }
            let previous = map.put_hash(hash, *offset);
            if let Some(l) = live.as_deref_mut() {
                l.on_put(previous, *offset);
            }
        }
        next = h.next_offset();
        if map.is_full() {
            stopped = true;
            break;
        }
    }
    if !stopped {
        check_no_tail(batches, iter.position())?;
    }
    Ok(next)
}

/// Checks the CRC of the data batch `batch` (header `h`) when `check_crc`, and calls
/// `f(offset, key)` on each of its records: skimmed in place when uncompressed, decoded
/// otherwise.
fn for_each_key(batch: &[u8], h: &BatchHeader, position: u64, check_crc: bool, mut f: impl FnMut(i64, Option<&[u8]>)) -> Result<()> {
    if h.codec_id() == 0 {
        if check_crc {
            verify_crc(batch, h, position)?;
        }
        return skim_records(&batch[HEADER_SIZE..], h, position, |r: SkimmedRecord<'_>| f(h.base_offset + r.offset_delta as i64, r.key));
    }
    let decoded = DecodedBatch::new(batch, position, check_crc)?;
    for r in decoded.records()? {
        f(r.offset, r.key);
    }
    Ok(())
}

/// Bytes after the last whole batch of a segment are a partial batch: corruption here,
/// since the cleaner only reads segments the log has already recovered.
fn check_no_tail(buf: &[u8], consumed: usize) -> Result<()> {
    if consumed == buf.len() {
        return Ok(());
    }
    Err(Error::corrupt(consumed as u64, format!("{} bytes after the last whole batch", buf.len() - consumed)))
}

/// Settings of one cleaning pass.
#[derive(Clone, Copy, Debug)]
pub struct CleanOptions {
    /// The time of the pass (ms since the epoch): horizons at or before it have passed.
    pub now_ms: i64,
    /// `delete.retention.ms`: how long tombstones and markers stay after they may go.
    pub delete_retention_ms: i64,
    /// The end of the mapped section: records at or past it are kept unchanged.
    pub map_end: i64,
    /// Batches with base offsets in [verified_from, verified_to) had their CRC checked
    /// by `build_offset_map` in this pass; every other batch is checked here, so a
    /// rewrite never stamps a fresh CRC on damaged bytes.
    pub verified_from: i64,
    pub verified_to: i64,
}

impl CleanOptions {
    fn verify(&self, h: &BatchHeader) -> bool {
        !(self.verified_from..self.verified_to).contains(&h.base_offset)
    }
}

/// Counters of one `clean_segment` call.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CleanStats {
    /// Bytes of the input cleaned, segments dropped unread (`live_records.rs`) included.
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub records_read: u64,
    pub records_retained: u64,
    /// Tombstones that were the latest for their key (kept or dropped).
    pub tombstones_found: u64,
    pub tombstones_dropped: u64,
    pub batches_dropped: u64,
    /// Batches written differently from how they were read (rewritten, emptied, dropped).
    pub batches_changed: u64,
    pub aborted_records_dropped: u64,
    pub markers_dropped: u64,
}

impl CleanStats {
    /// Adds another segment's counters.
    pub fn add(&mut self, other: &CleanStats) {
        self.bytes_read += other.bytes_read;
        self.bytes_written += other.bytes_written;
        self.records_read += other.records_read;
        self.records_retained += other.records_retained;
        self.tombstones_found += other.tombstones_found;
        self.tombstones_dropped += other.tombstones_dropped;
        self.batches_dropped += other.batches_dropped;
        self.batches_changed += other.batches_changed;
        self.aborted_records_dropped += other.aborted_records_dropped;
        self.markers_dropped += other.markers_dropped;
    }
}

/// Rewrites segments of one pass, in offset order from the log start: the transaction
/// state (`CleanedTransactions`) carries from one segment to the next.
pub struct SegmentCleaner<'a> {
    map: &'a OffsetMap,
    opts: CleanOptions,
    txns: &'a LogTransactions,
    cleaned: CleanedTransactions,
}

impl<'a> SegmentCleaner<'a> {
    pub fn new(map: &'a OffsetMap, opts: CleanOptions, txns: &'a LogTransactions) -> Self {
        SegmentCleaner { map, opts, txns, cleaned: CleanedTransactions::default() }
    }

    /// Rewrites whole batches (`input`: a segment, or a run of whole batches of it) keeping
    /// only what the rules in the module documentation retain. Returns the new bytes.
    pub fn clean(&mut self, input: &[u8]) -> Result<(Vec<u8>, CleanStats)> {
        let mut out = Vec::with_capacity(input.len());
        let stats = self.clean_into(input, &mut out)?;
        Ok((out, stats))
    }

    /// As `clean`, replacing the contents of `out` (a buffer reused across chunks).
    pub fn clean_into(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<CleanStats> {
        let opts = self.opts;
        out.clear();
        let mut stats = CleanStats { bytes_read: input.len() as u64, ..Default::default() };
        let (mut skimmed, mut retained, mut hashes) = (Vec::new(), Vec::new(), Vec::new());
        let mut iter = BatchIter::new(input, 0);
        for item in &mut iter {
            let (pos, h, batch) = item?;
            let horizon_passed = h.delete_horizon_ms().is_some_and(|t| opts.now_ms >= t);
            if h.is_control() {
                let decoded = DecodedBatch::new(batch, pos as u64, opts.verify(&h))?;
                let records = decoded.records()?;
                stats.records_read += records.len() as u64;
                let ty = records.first().and_then(|r| control_type(r.key));
                let may_go = self.cleaned.on_control_batch_read(&h, ty) && h.base_offset < opts.map_end;
                if may_go && horizon_passed {
                    stats.markers_dropped += 1;
                    stats.batches_dropped += 1;
                    stats.batches_changed += 1;
                } else if may_go && !h.has_delete_horizon() {
                    let owned: Vec<NewRecord> = records.iter().map(|r| r.to_owned_record()).collect();
                    let horizon = opts.now_ms.saturating_add(opts.delete_retention_ms);
                    out.extend_from_slice(&encode(&owned, &retained_options(&h, Some(horizon))?));
                    stats.records_retained += records.len() as u64;
                    stats.batches_changed += 1;
                } else {
                    out.extend_from_slice(batch);
                    stats.records_retained += records.len() as u64;
                }
                continue;
            }
            if self.cleaned.on_batch_read(self.txns, &h) {
                if opts.verify(&h) {
                    verify_crc(batch, &h, pos as u64)?;
                }
                stats.records_read += h.records_count as u64;
                stats.aborted_records_dropped += h.records_count as u64;
                stats.batches_changed += 1;
                self.write_emptied(&h, out, &mut stats);
                continue;
            }
            if h.codec_id() != 0 || h.is_log_append_time() {
                self.clean_decoded(batch, pos, &h, horizon_passed, out, &mut stats)?;
                continue;
            }
            // Uncompressed: the records are skimmed in place and the retained ones copied.
            if opts.verify(&h) {
                verify_crc(batch, &h, pos as u64)?;
            }
            skimmed.clear();
            skim_records(&batch[HEADER_SIZE..], &h, pos as u64, |r| skimmed.push(r))?;
            stats.records_read += skimmed.len() as u64;
            let offsets = skimmed.iter().map(|r| h.base_offset + r.offset_delta as i64);
            self.hash_mapped_keys(offsets.zip(skimmed.iter().map(|r| r.key)), &mut hashes);
            retained.clear();
            let mut keeps_tombstone = false;
            for (i, (r, hash)) in skimmed.iter().zip(&hashes).enumerate() {
                self.prefetch_ahead(&hashes, i);
                if self.keep(h.base_offset + r.offset_delta as i64, hash, r.null_value, horizon_passed, &mut keeps_tombstone, &mut stats) {
                    retained.push(*r);
                }
            }
            stats.records_retained += retained.len() as u64;
            let set_horizon = keeps_tombstone && !h.has_delete_horizon();
            if retained.len() == skimmed.len() && !set_horizon {
                out.extend_from_slice(batch);
                continue;
            }
            stats.batches_changed += 1;
            if retained.is_empty() {
                self.write_emptied(&h, out, &mut stats);
            } else {
                let horizon = set_horizon.then(|| opts.now_ms.saturating_add(opts.delete_retention_ms));
                write_retained(batch, &h, &retained, horizon, out);
            }
        }
        check_no_tail(input, iter.position())?;
        stats.bytes_written = out.len() as u64;
        Ok(stats)
    }

    /// Hashes the key of every record below `map_end` into `hashes` (None for the others
    /// and for null keys) and prefetches the slots of the first `PREFETCH_SLOTS`.
    fn hash_mapped_keys<'k>(&self, records: impl Iterator<Item = (i64, Option<&'k [u8]>)>, hashes: &mut Vec<Option<[u8; HASH_SIZE]>>) {
        hashes.clear();
        hashes.extend(records.map(|(offset, key)| if offset < self.opts.map_end { key.map(key_hash) } else { None }));
        for hash in hashes.iter().take(PREFETCH_SLOTS).flatten() {
            self.map.prefetch(hash);
        }
    }

    /// Prefetches the slot looked up `PREFETCH_SLOTS` records after record `i`.
    fn prefetch_ahead(&self, hashes: &[Option<[u8; HASH_SIZE]>], i: usize) {
        if let Some(Some(hash)) = hashes.get(i + PREFETCH_SLOTS) {
            self.map.prefetch(hash);
        }
    }

    /// Whether a data record stays (module rules); `hash` is from `hash_mapped_keys`.
    fn keep(&self, offset: i64, hash: &Option<[u8; HASH_SIZE]>, null_value: bool, horizon_passed: bool, keeps_tombstone: &mut bool, stats: &mut CleanStats) -> bool {
        if offset >= self.opts.map_end {
            return true;
        }
        let Some(hash) = hash else { return false }; // a null key
        if self.map.get_hash(hash).is_some_and(|latest| offset < latest) {
            return false;
        }
        if null_value {
            stats.tombstones_found += 1;
            if horizon_passed {
                stats.tombstones_dropped += 1;
                return false;
            }
            *keeps_tombstone = true;
        }
        true
    }

    /// A compressed or LogAppendTime data batch: decoded, and re-encoded when it changes.
    fn clean_decoded(&self, batch: &[u8], pos: usize, h: &BatchHeader, horizon_passed: bool, out: &mut Vec<u8>, stats: &mut CleanStats) -> Result<()> {
        let opts = self.opts;
        let decoded = DecodedBatch::new(batch, pos as u64, opts.verify(h))?;
        let records = decoded.records()?;
        stats.records_read += records.len() as u64;
        let mut hashes = Vec::new();
        self.hash_mapped_keys(records.iter().map(|r| (r.offset, r.key)), &mut hashes);
        let mut keeps_tombstone = false;
        let mut retained = Vec::with_capacity(records.len());
        for (i, (r, hash)) in records.iter().zip(&hashes).enumerate() {
            self.prefetch_ahead(&hashes, i);
            if self.keep(r.offset, hash, r.value.is_none(), horizon_passed, &mut keeps_tombstone, stats) {
                retained.push(r);
            }
        }
        stats.records_retained += retained.len() as u64;
        let set_horizon = keeps_tombstone && !h.has_delete_horizon();
        if retained.len() == records.len() && !set_horizon {
            out.extend_from_slice(batch);
            return Ok(());
        }
        stats.batches_changed += 1;
        if retained.is_empty() {
            self.write_emptied(h, out, stats);
        } else {
            let owned: Vec<NewRecord> = retained.iter().map(|r| r.to_owned_record()).collect();
            let horizon = if set_horizon { Some(opts.now_ms.saturating_add(opts.delete_retention_ms)) } else { h.delete_horizon_ms() };
            out.extend_from_slice(&encode(&owned, &retained_options(h, horizon)?));
        }
        Ok(())
    }

    /// A data batch with no record left: kept empty when it is its producer's last batch.
    fn write_emptied(&self, h: &BatchHeader, out: &mut Vec<u8>, stats: &mut CleanStats) {
        if self.txns.is_last_batch_of_producer(h) {
            out.extend_from_slice(&empty_batch(h));
        } else {
            stats.batches_dropped += 1;
        }
    }
}

/// One segment cleaned on its own: transactions and producers as seen in `input` alone.
pub fn clean_segment(input: &[u8], map: &OffsetMap, opts: &CleanOptions) -> Result<(Vec<u8>, CleanStats)> {
    let mut txns = LogTransactions::default();
    observe_batches(input, &mut txns)?;
    SegmentCleaner::new(map, *opts, &txns).clean(input)
}

/// The options that re-encode a batch's retained records with the batch's own metadata.
fn retained_options(h: &BatchHeader, delete_horizon_ms: Option<i64>) -> Result<BatchOptions> {
    Ok(BatchOptions {
        base_offset: h.base_offset,
        compression: h.compression()?,
        partition_leader_epoch: h.partition_leader_epoch,
        producer_id: h.producer_id,
        producer_epoch: h.producer_epoch,
        base_sequence: h.base_sequence,
        transactional: h.is_transactional(),
        control: h.is_control(),
        log_append_time: h.is_log_append_time().then_some(h.max_timestamp),
        delete_horizon_ms,
        last_offset_delta: Some(h.last_offset_delta),
    })
}

/// Kafka's `writeEmptyHeader`: a batch with no records that keeps the producer state,
/// offsets and timestamp type of `h`; codec none, base and max timestamp = maxTimestamp.
fn empty_batch(h: &BatchHeader) -> Vec<u8> {
    let opts = BatchOptions {
        base_offset: h.base_offset,
        compression: Compression::None,
        partition_leader_epoch: h.partition_leader_epoch,
        producer_id: h.producer_id,
        producer_epoch: h.producer_epoch,
        base_sequence: h.base_sequence,
        transactional: h.is_transactional(),
        control: false,
        log_append_time: h.is_log_append_time().then_some(h.max_timestamp),
        delete_horizon_ms: None,
        last_offset_delta: Some(h.last_offset_delta),
    };
    let mut b = encode(&[], &opts);
    let mut header = BatchHeader::parse(&b);
    header.base_timestamp = h.max_timestamp;
    header.max_timestamp = h.max_timestamp;
    header.write(&mut b[..HEADER_SIZE]);
    let crc = compute_crc(&b);
    b[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
    b
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compression::ALL;
    use crate::records::record_batch::{encode_control, validate};
    use std::collections::HashMap;


    const T0: i64 = 1_700_000_000_000;

    fn rec(offset: i64, key: Option<&str>, value: Option<&str>) -> NewRecord {
        NewRecord {
            offset,
            timestamp: T0 + offset,
            key: key.map(|k| k.as_bytes().to_vec()),
            value: value.map(|v| v.as_bytes().to_vec()),
            headers: vec![(b"h".to_vec(), Some(offset.to_string().into_bytes()))],
        }
    }

    fn batch(records: &[NewRecord], compression: Compression) -> Vec<u8> {
        encode(records, &BatchOptions { base_offset: records[0].offset, compression, ..Default::default() })
    }

    /// Every batch of `bytes`, validated as the log would, with its records.
    fn decode_all(bytes: &[u8]) -> Vec<(BatchHeader, Vec<NewRecord>)> {
        let mut out = Vec::new();
        let mut it = BatchIter::new(bytes, 0);
        for item in &mut it {
            let (pos, _, b) = item.unwrap();
            validate(b, pos as u64, false).unwrap();
            let d = DecodedBatch::new(b, pos as u64, true).unwrap();
            let recs = d.records().unwrap().iter().map(|r| r.to_owned_record()).collect();
            out.push((d.header, recs));
        }
        assert_eq!(it.position(), bytes.len());
        out
    }

    fn all_records(segments: &[Vec<u8>]) -> Vec<NewRecord> {
        segments.iter().flat_map(|s| decode_all(s)).flat_map(|(_, r)| r).collect()
    }

    fn opts(now_ms: i64) -> CleanOptions {
        CleanOptions { now_ms, delete_retention_ms: 86_400_000, map_end: i64::MAX, verified_from: 0, verified_to: 0 }
    }

    /// One cleaning pass over `segments` with a map large enough for all of them.
    fn clean_all(segments: &[Vec<u8>], o: &CleanOptions) -> (Vec<Vec<u8>>, CleanStats) {
        let mut map = OffsetMap::with_memory(1 << 20).unwrap();
        let all: Vec<u8> = segments.concat();
        let next = build_offset_map(&all, &mut map, &LogTransactions::default()).unwrap();
        let last = BatchIter::new(&all, 0).last().map_or(NO_OFFSET, |b| b.unwrap().1.next_offset());
        assert_eq!(next, last);
        let mut total = CleanStats::default();
        let cleaned = segments
            .iter()
            .map(|s| {
                let (out, st) = clean_segment(s, &map, o).unwrap();
                total.add(&st);
                out
            })
            .collect();
        (cleaned, total)
    }

    #[test]
    fn keeps_latest_value_per_key_for_every_codec() {
        for c in ALL {
            let mut segments = Vec::new();
            let mut latest: HashMap<String, (i64, String)> = HashMap::new();
            let mut offset = 0i64;
            for _seg in 0..3 {
                let mut seg = Vec::new();
                for _b in 0..4 {
                    let recs: Vec<NewRecord> = (0..5)
                        .map(|_| {
                            let (k, v) = (format!("k{}", offset % 7), format!("v{offset}"));
                            latest.insert(k.clone(), (offset, v.clone()));
                            offset += 1;
                            rec(offset - 1, Some(&k), Some(&v))
                        })
                        .collect();
                    seg.extend(batch(&recs, c));
                }
                segments.push(seg);
            }
            let (cleaned, stats) = clean_all(&segments, &opts(T0));
            let got = all_records(&cleaned);
            assert_eq!(got.len(), 7, "{}", c.name());
            assert!(got.windows(2).all(|w| w[0].offset < w[1].offset));
            for r in &got {
                let k = String::from_utf8(r.key.clone().unwrap()).unwrap();
                let (o, v) = &latest[&k];
                assert_eq!((r.offset, r.value.as_deref()), (*o, Some(v.as_bytes())), "{}", c.name());
                assert_eq!(r.timestamp, T0 + r.offset);
                assert_eq!(r.headers, vec![(b"h".to_vec(), Some(r.offset.to_string().into_bytes()))]);
            }
            for (h, _) in cleaned.iter().flat_map(|s| decode_all(s)) {
                assert_eq!(h.compression().unwrap(), c);
            }
            assert_eq!((stats.records_read, stats.records_retained), (60, 7));
            assert_eq!(stats.bytes_read, segments.iter().map(|s| s.len() as u64).sum::<u64>());
            assert_eq!(stats.bytes_written, cleaned.iter().map(|s| s.len() as u64).sum::<u64>());
            // Cleaning a clean log changes nothing.
            let (again, _) = clean_all(&cleaned, &opts(T0));
            assert_eq!(again, cleaned);
        }
    }

    #[test]
    fn tombstones_stay_until_the_delete_horizon() {
        let seg = [
            batch(&[rec(0, Some("a"), Some("1")), rec(1, Some("b"), Some("2"))], Compression::None),
            batch(&[rec(2, Some("a"), None), rec(3, Some("c"), Some("3"))], Compression::Zstd),
        ]
        .concat();
        let o = CleanOptions { now_ms: 5_000, delete_retention_ms: 1_000, map_end: i64::MAX, verified_from: 0, verified_to: 0 };
        let (first, st) = clean_all(&[seg], &o);
        let batches = decode_all(&first[0]);
        assert_eq!(batches.len(), 2);
        assert_eq!(batches[0].1, vec![rec(1, Some("b"), Some("2"))]);
        assert_eq!(batches[0].0.last_offset(), 1);
        assert!(!batches[0].0.has_delete_horizon());
        let (h, recs) = &batches[1];
        assert_eq!(h.delete_horizon_ms(), Some(6_000));
        assert_eq!(h.base_timestamp, 6_000);
        assert_eq!(h.max_timestamp, T0 + 3);
        assert_eq!(h.compression().unwrap(), Compression::Zstd);
        assert_eq!(recs, &vec![rec(2, Some("a"), None), rec(3, Some("c"), Some("3"))]);
        assert_eq!(st.tombstones_dropped, 0);

        // Before the horizon: nothing to do, byte for byte.
        let (second, st) = clean_all(&first, &CleanOptions { now_ms: 5_999, ..o });
        assert_eq!(second, first);
        assert_eq!(st.tombstones_dropped, 0);

        // At the horizon the tombstone goes; the horizon stays on the rewritten batch.
        let (third, st) = clean_all(&first, &CleanOptions { now_ms: 6_000, ..o });
        let batches = decode_all(&third[0]);
        assert_eq!(batches[1].1, vec![rec(3, Some("c"), Some("3"))]);
        assert_eq!(batches[1].0.delete_horizon_ms(), Some(6_000));
        assert_eq!(batches[1].0.next_offset(), 4);
        assert_eq!((st.tombstones_dropped, st.batches_dropped), (1, 0));

        // A batch holding only the tombstone is dropped once the horizon passes.
        let lone = batch(&[rec(9, Some("z"), None)], Compression::Gzip);
        let (kept, _) = clean_all(&[lone], &o);
        assert_eq!(decode_all(&kept[0])[0].0.delete_horizon_ms(), Some(6_000));
        let (gone, st) = clean_all(&kept, &CleanOptions { now_ms: 7_000, ..o });
        assert!(gone[0].is_empty());
        assert_eq!((st.tombstones_dropped, st.batches_dropped), (1, 1));
    }

    #[test]
    fn null_key_records_are_dropped() {
        let seg = batch(&[rec(0, None, Some("x")), rec(1, Some("k"), Some("y")), rec(2, None, Some("z"))], Compression::Lz4);
        let (out, st) = clean_all(&[seg], &opts(T0));
        let b = decode_all(&out[0]);
        assert_eq!(b.len(), 1);
        assert_eq!(b[0].1, vec![rec(1, Some("k"), Some("y"))]);
        assert_eq!((b[0].0.base_offset, b[0].0.last_offset()), (0, 2));
        assert_eq!((st.records_read, st.records_retained), (3, 1));
        // A batch of only null keys goes entirely.
        let (out, st) = clean_all(&[batch(&[rec(5, None, Some("x"))], Compression::None)], &opts(T0));
        assert!(out[0].is_empty());
        assert_eq!(st.batches_dropped, 1);
    }

    #[test]
    fn producer_metadata_is_preserved() {
        let idem = BatchOptions {
            base_offset: 10,
            compression: Compression::Gzip,
            partition_leader_epoch: 5,
            producer_id: 77,
            producer_epoch: 3,
            base_sequence: 40,
            log_append_time: Some(T0 + 500),
            ..Default::default()
        };
        let first = encode(&[rec(10, Some("a"), Some("1")), rec(11, Some("b"), Some("2")), rec(12, Some("c"), Some("3"))], &idem);
        let second = encode(&[rec(13, Some("c"), Some("4"))], &BatchOptions { base_offset: 13, base_sequence: 43, ..idem.clone() });
        let (out, _) = clean_all(&[[first.clone(), second.clone()].concat()], &opts(T0));
        let b = decode_all(&out[0]);
        let (h, recs) = &b[0];
        let orig = BatchHeader::parse(&first);
        assert_eq!(recs.iter().map(|r| r.offset).collect::<Vec<_>>(), vec![10, 11]);
        assert!(recs.iter().all(|r| r.timestamp == T0 + 500));
        assert_eq!(
            (h.base_offset, h.last_offset_delta, h.partition_leader_epoch, h.producer_id, h.producer_epoch, h.base_sequence),
            (10, 2, 5, 77, 3, 40)
        );
        assert_eq!((h.compression().unwrap(), h.is_log_append_time(), h.max_timestamp), (Compression::Gzip, true, orig.max_timestamp));
        assert_eq!(h.last_sequence(), orig.last_sequence());
        assert_eq!(&out[0][h.size()..], &second[..]);
    }

    #[test]
    fn emptied_idempotent_batch_is_kept_empty() {
        let idem = BatchOptions {
            base_offset: 0,
            compression: Compression::Snappy,
            partition_leader_epoch: 2,
            producer_id: 5,
            producer_epoch: 1,
            base_sequence: 0,
            transactional: false,
            ..Default::default()
        };
        let a = encode(&[rec(0, Some("k"), Some("1")), rec(1, Some("k"), Some("2"))], &idem);
        let plain = batch(&[rec(2, Some("k"), Some("3"))], Compression::None);
        // Producer 6's first batch is emptied but is not its last: it goes.
        let other = BatchOptions { producer_id: 6, ..idem.clone() };
        let b = encode(&[rec(3, Some("k"), Some("4"))], &BatchOptions { base_offset: 3, ..other.clone() });
        let c = encode(&[rec(4, Some("k"), Some("5"))], &BatchOptions { base_offset: 4, base_sequence: 1, ..other.clone() });
        let (out, st) = clean_all(&[[a.clone(), plain, b, c.clone()].concat()], &opts(T0));
        let batches = decode_all(&out[0]);
        assert_eq!(batches.len(), 2);
        let (h, recs) = &batches[0];
        assert!(recs.is_empty());
        assert_eq!(h.records_count, 0);
        assert_eq!(h.size(), HEADER_SIZE);
        assert_eq!(h.compression().unwrap(), Compression::None);
        let orig = BatchHeader::parse(&a);
        assert_eq!((h.base_offset, h.next_offset()), (0, 2));
        assert_eq!((h.producer_id, h.producer_epoch, h.base_sequence, h.last_sequence()), (5, 1, 0, 1));
        assert_eq!((h.partition_leader_epoch, h.base_timestamp, h.max_timestamp), (2, orig.max_timestamp, orig.max_timestamp));
        assert_eq!(&out[0][HEADER_SIZE..], &c[..]);
        assert_eq!((st.batches_dropped, st.records_retained), (2, 1));
    }

    #[test]
    fn untouched_batches_and_control_batches_are_copied() {
        let seg = [
            encode(
                &[rec(0, Some("a"), Some("1")), rec(1, Some("b"), Some("2"))],
                &BatchOptions { compression: Compression::Gzip, producer_id: 9, producer_epoch: 0, base_sequence: 0, transactional: true, ..Default::default() },
            ),
            // The commit marker of a transaction whose data is still there stays as it is.
            encode_control(1, 3, T0, &BatchOptions { base_offset: 2, producer_id: 9, producer_epoch: 0, ..Default::default() }),
            batch(&[rec(3, Some("c"), Some("3"))], Compression::Snappy),
        ]
        .concat();
        let (out, st) = clean_all(std::slice::from_ref(&seg), &opts(T0));
        assert_eq!(out[0], seg);
        assert_eq!(st.bytes_written, st.bytes_read);
        assert_eq!((st.records_read, st.records_retained, st.batches_dropped), (4, 4, 0));
        // The control batch's key is not mapped as a data key.
        let mut map = OffsetMap::with_memory(1 << 12).unwrap();
        build_offset_map(&seg, &mut map, &LogTransactions::default()).unwrap();
        assert_eq!(map.len(), 3);
    }

    #[test]
    fn aborted_transactions_go_and_markers_follow_after_the_horizon() {
        let txn = |base: i64, pid: i64, recs: &[NewRecord]| {
            encode(recs, &BatchOptions { base_offset: base, producer_id: pid, producer_epoch: 0, base_sequence: base as i32, transactional: true, ..Default::default() })
        };
        let marker = |base: i64, pid: i64, ty: i16| encode_control(ty, 0, T0, &BatchOptions { base_offset: base, producer_id: pid, producer_epoch: 0, ..Default::default() });
        // Producer 1 aborts a transaction writing a=1, b=2; producer 2 commits c=3 and
        // a=4; producer 1 then commits b=5. A plain batch overwrites c.
        let seg = [
            txn(0, 1, &[rec(0, Some("a"), Some("1")), rec(1, Some("b"), Some("2"))]),
            txn(2, 2, &[rec(2, Some("c"), Some("3"))]),
            marker(3, 1, 0),
            txn(4, 2, &[rec(4, Some("a"), Some("4"))]),
            marker(5, 2, 1),
            txn(6, 1, &[rec(6, Some("b"), Some("5"))]),
            marker(7, 1, 1),
            batch(&[rec(8, Some("c"), Some("6"))], Compression::None),
        ]
        .concat();
        let mut txns = LogTransactions::default();
        observe_batches(&seg, &mut txns).unwrap();
        let mut map = OffsetMap::with_memory(1 << 12).unwrap();
        build_offset_map(&seg, &mut map, &txns).unwrap();
        assert_eq!(map.len(), 3); // a, b, c: the aborted a=1, b=2 are not mapped
        let o = CleanOptions { now_ms: 1_000, delete_retention_ms: 100, map_end: i64::MAX, verified_from: 0, verified_to: 0 };
        let values = |bytes: &[u8]| -> Vec<(i64, bool)> { decode_all(bytes).iter().map(|(h, _)| (h.base_offset, h.is_control())).collect() };
        // Pass 1: aborted data goes; the abort marker stays (its data was seen in this
        // pass); both commit markers stay (their data was seen).
        let (p1, st) = SegmentCleaner::new(&map, o, &txns).clean(&seg).unwrap();
        assert_eq!(st.aborted_records_dropped, 2);
        assert_eq!(values(&p1), vec![(3, true), (4, false), (5, true), (6, false), (7, true), (8, false)]);
        // Pass 2: the abort marker may go now: it gets a delete horizon; so does producer
        // 2's marker once c=3 is gone (its transaction's batches were all dropped).
        let rescan = |bytes: &[u8]| {
            let mut t = LogTransactions::default();
            observe_batches(bytes, &mut t).unwrap();
            t
        };
        let t1 = rescan(&p1);
        let (p2, _) = SegmentCleaner::new(&map, o, &t1).clean(&p1).unwrap();
        let hs = decode_all(&p2);
        assert_eq!(hs[0].0.delete_horizon_ms(), Some(1_100));
        assert!(hs[0].0.is_control() && hs[0].0.is_transactional());
        assert_eq!(hs[0].1.len(), 1);
        assert_eq!(control_type(hs[0].1[0].key.as_deref()), Some(0));
        assert!(!hs.iter().find(|(h, _)| h.base_offset == 7).unwrap().0.has_delete_horizon());
        // Pass 3 after the horizon: the abort marker is gone, the commit marker of producer
        // 1 (whose data b=5 remains) stays, and everything retained reads back.
        let t2 = rescan(&p2);
        assert_eq!(t2.first_unstable_offset(), None);
        let (p3, st) = SegmentCleaner::new(&map, CleanOptions { now_ms: 1_100, ..o }, &t2).clean(&p2).unwrap();
        assert_eq!(st.markers_dropped, 1);
        let left = values(&p3);
        assert!(!left.contains(&(3, true)) && left.contains(&(7, true)));
        let data: Vec<(i64, Option<Vec<u8>>)> = all_records(&[p3]).into_iter().filter(|r| r.key.as_deref() != Some(&[0, 0, 0, 1][..])).map(|r| (r.offset, r.value)).collect();
        assert_eq!(data, vec![(4, Some(b"4".to_vec())), (6, Some(b"5".to_vec())), (8, Some(b"6".to_vec()))]);
    }

    #[test]
    fn offset_map_fills_at_batch_boundaries() {
        let mut seg = Vec::new();
        let mut half = 0;
        for b in 0..6i64 {
            if b == 3 {
                half = seg.len();
            }
            let recs: Vec<NewRecord> = (0..5).map(|i| rec(b * 5 + i, Some(&format!("k{}", b * 5 + i)), Some("v"))).collect();
            seg.extend(batch(&recs, Compression::None));
        }
        // 20 slots: full at 18 entries. 3 batches (15 keys) fit, the 4th would not.
        let mut map = OffsetMap::with_memory(24 * 20).unwrap();
        assert_eq!(build_offset_map(&seg, &mut map, &LogTransactions::default()).unwrap(), 15);
        assert_eq!((map.len(), map.latest_offset()), (15, 14));
        // A second call with a non-empty map makes no progress past a batch that won't fit.
        assert_eq!(build_offset_map(&seg[half..], &mut map, &LogTransactions::default()).unwrap(), 15);
        // The next round, with a cleared map, goes on from there.
        map.clear();
        assert_eq!(build_offset_map(&seg[half..], &mut map, &LogTransactions::default()).unwrap(), 30);
        assert!(!map.is_full());
        // Stopping because the map became full.
        let mut map = OffsetMap::with_memory(24 * 12).unwrap(); // full at 10
        assert_eq!(build_offset_map(&seg, &mut map, &LogTransactions::default()).unwrap(), 10);
        assert!(map.is_full());
        // An empty map too small for one batch is an error; a batch over the load factor
        // but under the capacity is still taken by an empty map.
        let mut tiny = OffsetMap::with_memory(24 * 5).unwrap();
        assert!(matches!(build_offset_map(&seg, &mut tiny, &LogTransactions::default()), Err(Error::InvalidConfig { .. })));
        let mut six = OffsetMap::with_memory(24 * 6).unwrap();
        assert_eq!(build_offset_map(&seg, &mut six, &LogTransactions::default()).unwrap(), 5);
        assert_eq!(build_offset_map(&[], &mut six, &LogTransactions::default()).unwrap(), NO_OFFSET);
        // A partial batch at the end of a segment is corruption.
        let mut big = OffsetMap::with_memory(1 << 12).unwrap();
        assert!(build_offset_map(&seg[..seg.len() - 3], &mut big, &LogTransactions::default()).is_err());
        assert!(clean_segment(&seg[..seg.len() - 3], &big, &opts(T0)).is_err());
    }

    #[test]
    fn corrupt_input_is_rejected() {
        let mut seg = batch(&[rec(0, Some("a"), Some("1"))], Compression::None);
        let last = seg.len() - 1;
        seg[last] ^= 0xff;
        let map = OffsetMap::with_memory(1 << 12).unwrap();
        assert!(matches!(clean_segment(&seg, &map, &opts(T0)), Err(Error::CorruptRecord { .. })));
    }

    #[test]
    fn matches_a_hashmap_model_over_random_appends() {
        for seed in 0..8u64 {
            let mut rng = fastrand::Rng::with_seed(seed);
            let mut model: HashMap<String, (i64, Option<String>)> = HashMap::new();
            let mut segments = Vec::new();
            let mut offset = 0i64;
            for _ in 0..1 + rng.u64(..4) {
                let mut seg = Vec::new();
                for _ in 0..1 + rng.u64(..6) {
                    let c = ALL[rng.u64(..5) as usize];
                    let n = 1 + rng.u64(..12);
                    let mut recs = Vec::new();
                    for _ in 0..n {
                        let key = (rng.u64(..10) != 0).then(|| format!("key-{}", rng.u64(..25)));
                        let value = (rng.u64(..5) != 0).then(|| format!("value-{offset}-{}", rng.u64(..)));
                        if let Some(k) = &key {
                            model.insert(k.clone(), (offset, value.clone()));
                        }
                        recs.push(rec(offset, key.as_deref(), value.as_deref()));
                        offset += 1;
                    }
                    let producer_id = if rng.u64(..3) == 0 { 1000 + seed as i64 } else { -1 };
                    let base_sequence = if producer_id >= 0 { recs[0].offset as i32 } else { -1 };
                    seg.extend(encode(
                        &recs,
                        &BatchOptions { base_offset: recs[0].offset, compression: c, producer_id, producer_epoch: 0, base_sequence, ..Default::default() },
                    ));
                }
                segments.push(seg);
            }
            let check = |cleaned: &[Vec<u8>], with_tombstones: bool| {
                let got = all_records(cleaned);
                assert!(got.windows(2).all(|w| w[0].offset < w[1].offset));
                let mut expect: Vec<(i64, Option<String>)> =
                    model.values().filter(|(_, v)| with_tombstones || v.is_some()).cloned().collect();
                expect.sort();
                let got: Vec<(i64, Option<String>)> =
                    got.iter().map(|r| (r.offset, r.value.clone().map(|v| String::from_utf8(v).unwrap()))).collect();
                assert_eq!(got, expect, "seed {seed}");
                // Offsets never move: each segment still ends where it ended, or lost its tail batches.
                for (c, s) in cleaned.iter().zip(&segments) {
                    let orig: Vec<i64> = decode_all(s).iter().map(|(h, _)| h.base_offset).collect();
                    for (h, _) in decode_all(c) {
                        assert!(orig.contains(&h.base_offset));
                        let o = decode_all(s).into_iter().find(|(oh, _)| oh.base_offset == h.base_offset).unwrap().0;
                        assert_eq!(h.next_offset(), o.next_offset());
                    }
                }
            };
            let o = CleanOptions { now_ms: 10_000, delete_retention_ms: 500, map_end: i64::MAX, verified_from: 0, verified_to: 0 };
            let (first, _) = clean_all(&segments, &o);
            check(&first, true);
            let (again, _) = clean_all(&first, &CleanOptions { now_ms: 10_499, ..o });
            assert_eq!(again, first);
            let (last, st) = clean_all(&first, &CleanOptions { now_ms: 10_500, ..o });
            check(&last, false);
            assert_eq!(st.tombstones_dropped as usize, model.values().filter(|(_, v)| v.is_none()).count());
        }
    }

    #[test]
    fn offset_map_costs_24_bytes_per_key() {
        let mut map = OffsetMap::with_memory(24 * 1000).unwrap();
        let before = map.memory_bytes();
        let mut seg = Vec::new();
        for i in 0..100 {
            let big_key = format!("{i}-{}", "x".repeat(1000));
            seg.extend(batch(&[rec(i, Some(&big_key), Some("v"))], Compression::None));
        }
        build_offset_map(&seg, &mut map, &LogTransactions::default()).unwrap();
        assert_eq!(map.len(), 100);
        assert_eq!(map.memory_bytes(), before);
        assert_eq!(map.memory_bytes() / map.capacity(), 24);
        assert_eq!(map.bytes_per_entry(), 24);
    }
}
