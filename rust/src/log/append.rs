//! The append path: `append` (validation, offset assignment, the write), `roll` (a new
//! active segment) and `flush` (fsync and the recovery point).
//!
//! Files: the active segment's `.log`, `.index` and `.timeindex`, a new segment's files
//! on a roll, `leader-epoch-checkpoint` (a new epoch's start), and
//! `recovery-point-offset-checkpoint` (after a flush, and after the background fsync of
//! rolled segments).
//!
//! Invariants:
//! - An append is validated whole before it is published: either every batch in the
//!   call lands, or none does. A small append is validated before anything is written;
//!   one of `CONCURRENT_CHECK_MIN_BYTES` or more has its headers checked first and its
//!   contents on the validation pool while its bytes are written, and is cut back if
//!   they fail.
//! - Offsets are assigned and bytes written under the write lock; leader appends take
//!   the next offsets, follower appends keep theirs and must not fall below the log end.
//! - Only the last segment takes appends; a roll starts the new one at the log end.
//! - A failed append leaves the log as it was: a write that fails (ENOSPC, EIO) is cut
//!   back, as is a written append whose `leader-epoch-checkpoint` cannot be written,
//!   and a segment rolled for the append is removed again. Only the flush that
//!   `flush.messages` / `flush.ms` make due runs after the batches are published; if it
//!   fails, its error is returned with the batches appended (as in Kafka).
//! - The recovery point only moves to an offset below which everything is fsynced.

use std::fs::File;
use std::sync::Arc;

use super::{now_ms, remove_if_exists, AppendInfo, AppendOptions, Log, LogInner, RECOVERY_POINT_FILE};
use crate::checkpoint;
use crate::error::{Error, Result};
use crate::leader_epoch_cache::LeaderEpochCache;
use crate::log_config::TimestampType;
use crate::records::record_batch::{self, BatchHeader, BatchIter, HEADER_SIZE};
use crate::records::record_rules::RecordRules;
use crate::segment::{LogSegment, PreparedBatch};
use crate::topic_compression;
use crate::validation_pool::CONCURRENT_CHECK_MIN_BYTES;

impl Log {
    /// Validates and appends whole batches. Validation (CRC included) runs before the
    /// lock is taken; offsets are assigned and bytes written under it.
    pub fn append(&self, data: &[u8], opts: &AppendOptions) -> Result<AppendInfo> {
        let now = opts.now_ms.unwrap_or_else(now_ms);
        let (max_message_bytes, timestamp_type, rules, codec) = {
            let inner = self.inner.read();
            inner.check_open(&self.dir)?;
            let rules = if opts.assign_offsets { inner.config.record_rules(now) } else { RecordRules::default() };
            let codec = if opts.assign_offsets { topic_compression::target(&inner.config) } else { None };
            (inner.config.max_message_bytes, inner.config.timestamp_type, rules, codec)
        };
        // A producer's batches in another codec than the topic's compression.type are
        // re-encoded first; everything below then checks and writes the new batches.
        let converted = match codec {
            Some(c) => topic_compression::convert(data, c)?,
            None => None,
        };
        let data = converted.as_deref().unwrap_or(data);
        let partition = if rules.is_empty() { Default::default() } else { self.dir.file_name().unwrap_or_default().to_string_lossy() };
        let mut parsed: Vec<(BatchHeader, &[u8])> = Vec::new();
        let mut iter = BatchIter::new(data, 0);
        for item in &mut iter {
            let (_, h, bytes) = item?;
            if h.size() > max_message_bytes {
                return Err(Error::RecordTooLarge { size: h.size(), limit: max_message_bytes, what: "max.message.bytes" });
            }
            parsed.push((h, bytes));
        }
        if iter.position() != data.len() {
            return Err(Error::corrupt(
                iter.position() as u64,
                format!("{} trailing bytes are not a whole record batch", data.len() - iter.position()),
            ));
        }
        if parsed.is_empty() {
            return Err(Error::corrupt(0, "no record batches"));
        }
        let stamp_time = opts.assign_offsets && timestamp_type == TimestampType::LogAppendTime;
        // Every batch is validated whole (CRC and records) before it is published. A small
        // append is validated before anything is written; a large one's headers are, and
        // its contents are checked on the validation pool while its bytes are written.
        let check_beside_write = data.len() >= CONCURRENT_CHECK_MIN_BYTES;
        let mut pos = 0u64;
        for (h, bytes) in &parsed {
            record_batch::validate_header(bytes, pos, opts.assign_offsets)?;
            if !check_beside_write {
                record_batch::validate_contents(bytes, h, pos, opts.assign_offsets, &rules, &partition)?;
            }
            pos += bytes.len() as u64;
        }
        let check_contents = || -> Result<()> {
            let mut pos = 0u64;
            for (h, bytes) in &parsed {
                record_batch::validate_contents(bytes, h, pos, opts.assign_offsets, &rules, &partition)?;
                pos += bytes.len() as u64;
            }
            Ok(())
        };

        let mut guard = self.inner.write();
        let inner = &mut *guard;
        inner.check_open(&self.dir)?;
        let mut next = inner.next_offset;
        let mut prepared = Vec::with_capacity(parsed.len());
        let (mut max_ts, mut offset_of_max_ts, mut num_records) = (-1i64, -1i64, 0i64);
        for (h, bytes) in &parsed {
            let mut h = *h;
            if opts.assign_offsets {
                h.base_offset = next;
            } else if h.base_offset < next {
                return Err(Error::InvalidOffset { base_offset: h.base_offset, log_end_offset: next });
            }
            if let Some(epoch) = opts.leader_epoch {
                h.partition_leader_epoch = epoch;
            }
            let mut header_bytes = [0u8; HEADER_SIZE];
            if stamp_time {
                h.attributes |= 0x08;
                h.max_timestamp = now;
                h.write(&mut header_bytes);
                h.crc = record_batch::crc_with_header(&header_bytes, &bytes[HEADER_SIZE..]);
            }
            h.write(&mut header_bytes);
            if h.max_timestamp > max_ts {
                (max_ts, offset_of_max_ts) = (h.max_timestamp, h.last_offset());
            }
            num_records += h.records_count as i64;
            next = h.next_offset();
            prepared.push(PreparedBatch { header_bytes, header: h, records: &bytes[HEADER_SIZE..] });
        }
        let base_offset = prepared[0].header.base_offset;
        let last_offset = next - 1;
        let size: usize = prepared.iter().map(|b| b.header.size()).sum();
        if size as u64 > inner.config.segment_bytes {
            return Err(Error::RecordTooLarge { size, limit: inner.config.segment_bytes as usize, what: "segment.bytes" });
        }
        let rolled = inner.active().should_roll(&inner.config, size, last_offset, max_ts, now);
        if rolled {
            self.roll_locked(inner, now)?;
        }
        let mark = inner.active().mark();
        let written = match check_beside_write {
            true => inner.active_mut().append_checked(&prepared, check_contents),
            false => inner.active_mut().append(&prepared),
        };
        // The epochs the batches start are written once the batches are; if that fails
        // the batches are taken back.
        let epochs = written.and_then(|()| match staged_epochs(&inner.epochs, opts.leader_epoch, base_offset, &prepared) {
            Some(epochs) => epochs.save().map(|()| Some(epochs)),
            None => Ok(None),
        });
        match epochs {
            Ok(Some(epochs)) => inner.epochs = epochs,
            Ok(None) => {}
            Err(e) => {
                inner.active_mut().undo(&mark);
                if rolled {
                    unroll_locked(inner);
                }
                return Err(e);
            }
        }
        inner.next_offset = next;
        inner.unflushed_messages += num_records;
        if inner.unflushed_messages >= inner.config.flush_messages || now - inner.last_flush_ms >= inner.config.flush_ms {
            self.flush_locked(inner, now)?;
        }
        Ok(AppendInfo {
            base_offset,
            last_offset,
            max_timestamp: max_ts,
            offset_of_max_timestamp: offset_of_max_ts,
            log_append_time: if stamp_time { now } else { -1 },
            num_batches: prepared.len(),
            num_records,
            size,
            log_start_offset: inner.log_start_offset,
        })
    }

    /// Starts a new active segment at the log end offset, then fsyncs the old ones in
    /// the background and advances the recovery point past them (Kafka's async flush).
    /// On failure the active segment stays the active one.
    fn roll_locked(&self, inner: &mut LogInner, now: i64) -> Result<()> {
        if inner.active().size() == 0 {
            return Ok(());
        }
        let base = inner.next_offset;
        // The segments below the new one not fsynced yet, for the background flush.
        let files: Vec<Arc<File>> =
            inner.segments.values().filter(|s| s.next_offset() > inner.recovery_point).map(LogSegment::file).collect::<Result<_>>()?;
        let opened = inner
            .active_mut()
            .on_become_inactive()
            .and_then(|()| {
                [".log", ".index", ".timeindex"]
                    .into_iter()
                    .try_for_each(|suffix| remove_if_exists(&self.dir.join(crate::segment::file_name(base, suffix))))
            })
            .and_then(|()| LogSegment::open(&self.dir, base, &inner.config, true, now));
        let seg = match opened {
            Ok(seg) => seg,
            Err(e) => {
                let LogInner { segments, config, .. } = inner;
                if let Some(active) = segments.values_mut().next_back() {
                    let _ = active.on_become_active(config);
                }
                return Err(e);
            }
        };
        inner.segments.insert(base, seg);
        let state = Arc::clone(&self.inner);
        let (dir, topic, partition) = (self.dir.clone(), self.topic.clone(), self.partition);
        std::thread::spawn(move || {
            if files.iter().any(|f| f.sync_data().is_err()) {
                return; // the recovery point stays; recovery re-validates those segments
            }
            let mut inner = state.write();
            if !inner.closed && inner.recovery_point < base && inner.next_offset >= base {
                inner.recovery_point = base;
                let _ = checkpoint::write(&dir.join(RECOVERY_POINT_FILE), &[format!("{topic} {partition} {base}")]);
            }
        });
        Ok(())
    }

    pub fn roll(&self, now: Option<i64>) -> Result<()> {
        let mut inner = self.inner.write();
        inner.check_open(&self.dir)?;
        self.roll_locked(&mut inner, now.unwrap_or_else(now_ms))
    }

    pub(super) fn flush_locked(&self, inner: &mut LogInner, now: i64) -> Result<()> {
        let from = inner.segments.range(..=inner.recovery_point).next_back().map_or(i64::MIN, |(b, _)| *b);
        for seg in inner.segments.range(from..).map(|(_, s)| s) {
            seg.flush()?;
        }
        inner.recovery_point = inner.next_offset;
        inner.unflushed_messages = 0;
        inner.last_flush_ms = now;
        self.write_offset_checkpoint(RECOVERY_POINT_FILE, inner.recovery_point)
    }

    /// fsyncs everything up to the log end and moves the recovery point there.
    pub fn flush(&self) -> Result<()> {
        let mut inner = self.inner.write();
        inner.check_open(&self.dir)?;
        self.flush_locked(&mut inner, now_ms())
    }
}

/// Takes back a roll whose segment took no batches (the append that rolled it failed):
/// the new, empty segment's files go and the one before it takes appends again. Should
/// the unlink fail, the empty files stay for the next `open`, which takes them as the
/// (empty) active segment; should growing the indexes back fail, they stay full and the
/// next append rolls again.
fn unroll_locked(inner: &mut LogInner) {
    let LogInner { segments, config, .. } = inner;
    if segments.len() < 2 || segments.values().next_back().is_none_or(|s| s.size() > 0) {
        return;
    }
    if let Some((_, empty)) = segments.pop_last() {
        let _ = empty.delete();
    }
    if let Some(active) = segments.values_mut().next_back() {
        let _ = active.on_become_active(config);
    }
}

/// The leader epoch cache with the epochs `batches` start: a leader's `epoch` at
/// `base_offset`, or each follower batch's epoch above the latest one. None when they
/// change nothing.
fn staged_epochs(epochs: &LeaderEpochCache, leader_epoch: Option<i32>, base_offset: i64, batches: &[PreparedBatch<'_>]) -> Option<LeaderEpochCache> {
    let newer = |e: i32, cache: &LeaderEpochCache| e >= 0 && cache.latest_epoch().is_none_or(|l| e > l);
    match leader_epoch {
        Some(epoch) => epochs.changed_by(epoch, base_offset).then(|| {
            let mut staged = epochs.clone();
            staged.stage(epoch, base_offset);
            staged
        }),
        None if batches.iter().any(|b| newer(b.header.partition_leader_epoch, epochs)) => {
            let mut staged = epochs.clone();
            for b in batches {
                if newer(b.header.partition_leader_epoch, &staged) {
                    staged.stage(b.header.partition_leader_epoch, b.header.base_offset);
                }
            }
            Some(staged)
        }
        None => None,
    }
}
