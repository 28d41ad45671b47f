//! One partition's log: an ordered set of segments in `<log.dir>/<topic>-<partition>/`.
//!
//! Files in the partition directory:
//! - `<20-digit base offset>.log|.index|.timeindex` per segment;
//! - `leader-epoch-checkpoint`;
//! - `recovery-point-offset-checkpoint` and `log-start-offset-checkpoint`: Kafka's
//!   checkpoint format with the one entry `<topic> <partition> <offset>` of this log;
//! - `.kafka_cleanshutdown`: present only while the log is closed cleanly. Opening
//!   removes it, so a crash at any later point leads to recovery on the next open.
//! - `<segment file>.deleted`: a segment removed by retention or the cleaner, unlinked
//!   `file.delete.delay.ms` later (`segment_deletion.rs`). `close` unlinks the ones still
//!   pending before it returns; `open` deletes any left by a crash.
//!
//! Invariants:
//! - `log_start_offset <= next_offset` (the log end offset); segments are contiguous
//!   in offset order and only the last one (the active segment) takes appends.
//! - Everything below `recovery_point` has been fsynced; after an unclean shutdown,
//!   segments from the one holding the recovery point onward are re-validated.
//! - An append is validated whole before any byte is written: either every batch in
//!   the call lands, or none does.

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::RwLock;

use crate::checkpoint;
use crate::error::{Error, IoContext, Result};
use crate::file_slice::FileSlice;
use crate::leader_epoch_cache::LeaderEpochCache;
use crate::log_config::{LogConfig, TimestampType};
use crate::record_batch::{self, BatchHeader, BatchIter, HEADER_SIZE};
use crate::record_rules::RecordRules;
use crate::topic_compression;
use crate::segment::{LogSegment, PreparedBatch};
use crate::segment_deletion::{unlink_all, PendingDeletions};
use crate::validation_pool::CONCURRENT_CHECK_MIN_BYTES;

pub const CLEAN_SHUTDOWN_FILE: &str = ".kafka_cleanshutdown";
pub const RECOVERY_POINT_FILE: &str = "recovery-point-offset-checkpoint";
pub const LOG_START_OFFSET_FILE: &str = "log-start-offset-checkpoint";

pub fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

/// Offsets the broker keeps in its own checkpoints; None means "read the log's files".
#[derive(Clone, Debug, Default)]
pub struct OpenOptions {
    pub recovery_point: Option<i64>,
    pub log_start_offset: Option<i64>,
    pub now_ms: Option<i64>,
}

#[derive(Clone, Debug, Default)]
pub struct AppendOptions {
    /// Leader appends assign offsets; follower appends keep the batches' own.
    pub assign_offsets: bool,
    /// Stamped into partitionLeaderEpoch of every batch (leader appends).
    pub leader_epoch: Option<i32>,
    pub now_ms: Option<i64>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AppendInfo {
    pub base_offset: i64,
    pub last_offset: i64,
    pub max_timestamp: i64,
    pub offset_of_max_timestamp: i64,
    pub log_append_time: i64,
    pub num_batches: usize,
    pub num_records: i64,
    pub size: usize,
    pub log_start_offset: i64,
}

#[derive(Clone, Debug)]
pub struct SegmentInfo {
    pub base_offset: i64,
    pub size: u64,
    pub log_path: PathBuf,
    pub index_entries: usize,
    pub time_index_entries: usize,
    pub largest_timestamp: i64,
    pub next_offset: i64,
}

pub(crate) struct LogInner {
    pub(crate) config: LogConfig,
    pub(crate) segments: BTreeMap<i64, LogSegment>,
    pub(crate) next_offset: i64,
    pub(crate) log_start_offset: i64,
    recovery_point: i64,
    epochs: LeaderEpochCache,
    closed: bool,
    unflushed_messages: i64,
    last_flush_ms: i64,
}

pub struct Log {
    pub(crate) dir: PathBuf,
    topic: String,
    partition: i32,
    recovered: bool,
    /// The offset checkpoints `open` could not parse and set aside, each with what it
    /// did instead (for the caller to log).
    checkpoint_faults: Vec<String>,
    pub(crate) inner: Arc<RwLock<LogInner>>,
    /// Held for a whole cleaning pass: one pass at a time per log.
    pub(crate) cleaning: parking_lot::Mutex<()>,
    /// Held for writing while a segment file shrinks (`truncate_to`), and for reading by
    /// the cleaner while it reads a memory-mapped segment: a mapped page past the end of
    /// a shrunk file would fault (SIGBUS). Taken before `inner`, never after it.
    pub(crate) segment_shrink: parking_lot::RwLock<()>,
    /// Files of segments removed by retention or the cleaner, unlinked after
    /// `file.delete.delay.ms` (`segment_deletion.rs`); `close` unlinks what is left.
    pub(crate) deletions: Arc<PendingDeletions>,
}

/// Splits `<topic>-<partition>`; a name without a numeric suffix is partition 0.
fn topic_partition(dir: &Path) -> (String, i32) {
    let name = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    match name.rsplit_once('-') {
        Some((t, p)) if !t.is_empty() => match p.parse() {
            Ok(p) => (t.to_string(), p),
            Err(_) => (name, 0),
        },
        _ => (name, 0),
    }
}

fn parse_base_offset(name: &str, suffix: &str) -> Option<i64> {
    let stem = name.strip_suffix(suffix)?;
    (stem.len() == 20 && stem.bytes().all(|b| b.is_ascii_digit())).then(|| stem.parse().ok())?
}

fn remove_if_exists(path: &Path) -> Result<()> {
    match fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e).ctx("delete", path),
        _ => Ok(()),
    }
}

impl LogInner {
    pub(crate) fn active(&self) -> &LogSegment {
        self.segments.values().next_back().expect("a log always has an active segment")
    }
    fn active_mut(&mut self) -> &mut LogSegment {
        self.segments.values_mut().next_back().expect("a log always has an active segment")
    }
    fn size(&self) -> u64 {
        self.segments.values().map(LogSegment::size).sum()
    }
    pub(crate) fn check_open(&self, dir: &Path) -> Result<()> {
        if self.closed {
            return Err(Error::LogClosed(dir.to_path_buf()));
        }
        Ok(())
    }
    fn out_of_range(&self, offset: i64) -> Error {
        Error::OffsetOutOfRange { offset, log_start_offset: self.log_start_offset, log_end_offset: self.next_offset }
    }
}

impl Log {
    pub fn open(dir: &Path, config: LogConfig, opts: OpenOptions) -> Result<Log> {
        let now = opts.now_ms.unwrap_or_else(now_ms);
        fs::create_dir_all(dir).ctx("create log directory", dir)?;
        let (topic, partition) = topic_partition(dir);
        let marker = dir.join(CLEAN_SHUTDOWN_FILE);
        let clean = marker.exists();

        // An interrupted cleaner swap is finished first (see `log_cleaner.rs`); then
        // segment files by base offset; leftovers of interrupted deletes and cleanings go.
        crate::log_cleaner::complete_swaps(dir)?;
        let mut logs = Vec::new();
        let mut indexes = Vec::new();
        for entry in fs::read_dir(dir).ctx("list log directory", dir)? {
            let path = entry.ctx("list log directory", dir)?.path();
            let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            if name.ends_with(".deleted") || name.ends_with(".cleaned") || name.ends_with(".tmp") {
                remove_if_exists(&path)?;
            } else if let Some(base) = parse_base_offset(&name, ".log") {
                logs.push(base);
            } else if let Some(base) = parse_base_offset(&name, ".index").or_else(|| parse_base_offset(&name, ".timeindex")) {
                indexes.push((base, path));
            }
        }
        logs.sort_unstable();
        for (base, path) in indexes {
            if logs.binary_search(&base).is_err() {
                remove_if_exists(&path)?;
            }
        }
        // As Kafka does, an offset checkpoint that cannot be parsed is set aside with a
        // note: the recovery point falls back to 0 (every segment is recovered) and the
        // log start offset to the first segment's base offset. Read errors still fail.
        let mut checkpoint_faults = Vec::new();
        let mut read_offset = |file: &str, fallback: &str| -> Result<Option<i64>> {
            let entries = match checkpoint::read(&dir.join(file)) {
                Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::InvalidData => {
                    checkpoint_faults.push(format!("{file}: {source}; {fallback}"));
                    return Ok(None);
                }
                other => other?,
            };
            let Some(entries) = entries else { return Ok(None) };
            match entries.first().and_then(|f| f.get(2)?.parse::<i64>().ok()) {
                Some(offset) if entries.len() == 1 && offset >= 0 => Ok(Some(offset)),
                _ => {
                    checkpoint_faults.push(format!("{file}: not one entry with an offset; {fallback}"));
                    Ok(None)
                }
            }
        };
        let checkpoint_start = match opts.log_start_offset {
            Some(o) => Some(o),
            None => read_offset(LOG_START_OFFSET_FILE, "the log starts at its first segment")?,
        };
        let recovery_point = match opts.recovery_point {
            Some(o) => o,
            None => read_offset(RECOVERY_POINT_FILE, "every segment is recovered")?.unwrap_or(0),
        };
        remove_if_exists(&marker)?;

        let mut segments = BTreeMap::new();
        let mut recovered = false;
        let last = logs.last().copied();
        let mut cut_from: Option<i64> = None;
        for (i, &base) in logs.iter().enumerate() {
            if cut_from.is_some() {
                // Everything after a segment that recovery cut short is past a gap.
                LogSegment::open(dir, base, &config, false, now)?.delete()?;
                continue;
            }
            let active = Some(base) == last;
            let missing_index = !dir.join(crate::segment::file_name(base, ".index")).exists()
                || !dir.join(crate::segment::file_name(base, ".timeindex")).exists();
            let mut seg = LogSegment::open(dir, base, &config, active, now)?;
            let next_base = logs.get(i + 1).copied().unwrap_or(i64::MAX);
            // After a crash: every segment from the recovery point on. After a clean
            // shutdown: a segment whose files disagree (torn tail, bad index) or lack
            // an index. Only a rebuilt index with nothing cut is not crash recovery.
            let after_crash = !clean && next_base > recovery_point;
            let damaged = !after_crash && !missing_index && seg.load().is_err();
            if after_crash || damaged || missing_index {
                let cut = seg.recover(&config)?;
                recovered |= after_crash || damaged || cut > 0;
                if cut > 0 && !active {
                    cut_from = Some(base);
                }
            }
            if !active {
                seg.on_become_inactive()?;
            }
            segments.insert(base, seg);
        }
        if cut_from.is_some() {
            // The last surviving segment becomes the active one.
            if let Some(seg) = segments.values_mut().next_back() {
                seg.on_become_active(&config)?;
            }
        }
        if segments.is_empty() {
            let base = checkpoint_start.unwrap_or(0).max(0);
            segments.insert(base, LogSegment::open(dir, base, &config, true, now)?);
        }
        let first_base = *segments.keys().next().unwrap();
        let next_offset = segments.values().next_back().unwrap().next_offset();
        let log_start_offset = checkpoint_start.unwrap_or(first_base).clamp(first_base, next_offset);
        let mut epochs = LeaderEpochCache::load(dir);
        epochs.truncate_from_end(next_offset)?;
        epochs.truncate_from_start(log_start_offset)?;
        let inner = LogInner {
            config,
            segments,
            next_offset,
            log_start_offset,
            recovery_point: if recovered { next_offset } else { recovery_point.min(next_offset) },
            epochs,
            closed: false,
            unflushed_messages: 0,
            last_flush_ms: now,
        };
        let log = Log {
            dir: dir.to_path_buf(),
            topic,
            partition,
            recovered,
            checkpoint_faults,
            inner: Arc::new(RwLock::new(inner)),
            cleaning: parking_lot::Mutex::new(()),
            segment_shrink: parking_lot::RwLock::new(()),
            deletions: PendingDeletions::new(),
        };
        if recovered {
            // The recovered tail is now fsynced and the recovery point sits at its end.
            let inner = log.inner.read();
            for seg in inner.segments.values() {
                seg.flush()?;
            }
        }
        {
            let inner = log.inner.read();
            log.write_offset_checkpoint(RECOVERY_POINT_FILE, inner.recovery_point)?;
            log.write_offset_checkpoint(LOG_START_OFFSET_FILE, inner.log_start_offset)?;
        }
        Ok(log)
    }

    /// `<topic> <partition>`, as offset checkpoint entries name this log.
    pub(crate) fn topic_partition_label(&self) -> String {
        format!("{} {}", self.topic, self.partition)
    }

    pub(crate) fn write_offset_checkpoint(&self, file: &str, offset: i64) -> Result<()> {
        checkpoint::write(&self.dir.join(file), &[format!("{} {} {offset}", self.topic, self.partition)])
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }
    pub fn recovered(&self) -> bool {
        self.recovered
    }
    pub fn checkpoint_faults(&self) -> &[String] {
        &self.checkpoint_faults
    }
    pub fn log_start_offset(&self) -> i64 {
        self.inner.read().log_start_offset
    }
    pub fn log_end_offset(&self) -> i64 {
        self.inner.read().next_offset
    }
    pub fn recovery_point(&self) -> i64 {
        self.inner.read().recovery_point
    }
    pub fn size(&self) -> u64 {
        self.inner.read().size()
    }
    pub fn num_segments(&self) -> usize {
        self.inner.read().segments.len()
    }
    pub fn is_closed(&self) -> bool {
        self.inner.read().closed
    }
    pub fn config(&self) -> LogConfig {
        self.inner.read().config.clone()
    }

    /// Applies a new config (AlterConfigs). Index sizes apply to segments created later.
    pub fn set_config(&self, config: LogConfig) -> Result<()> {
        let mut inner = self.inner.write();
        inner.check_open(&self.dir)?;
        inner.config = config;
        Ok(())
    }

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
        if inner.active().should_roll(&inner.config, size, last_offset, max_ts, now) {
            self.roll_locked(inner, now)?;
        }
        if check_beside_write {
            inner.active_mut().append_checked(&prepared, check_contents)?;
        } else {
            inner.active_mut().append(&prepared)?;
        }
        inner.next_offset = next;
        match opts.leader_epoch {
            Some(epoch) => inner.epochs.assign(epoch, base_offset)?,
            None => {
                for b in &prepared {
                    let e = b.header.partition_leader_epoch;
                    if e >= 0 && inner.epochs.latest_epoch().is_none_or(|l| e > l) {
                        inner.epochs.assign(e, b.header.base_offset)?;
                    }
                }
            }
        }
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
    fn roll_locked(&self, inner: &mut LogInner, now: i64) -> Result<()> {
        if inner.active().size() == 0 {
            return Ok(());
        }
        let base = inner.next_offset;
        inner.active_mut().on_become_inactive()?;
        for suffix in [".log", ".index", ".timeindex"] {
            remove_if_exists(&self.dir.join(crate::segment::file_name(base, suffix)))?;
        }
        let seg = LogSegment::open(&self.dir, base, &inner.config, true, now)?;
        inner.segments.insert(base, seg);
        let files: Vec<Arc<File>> = inner
            .segments
            .range(..base)
            .filter(|(_, s)| s.next_offset() > inner.recovery_point)
            .map(|(_, s)| Arc::clone(s.file()))
            .collect();
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

    fn flush_locked(&self, inner: &mut LogInner, now: i64) -> Result<()> {
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

    /// Locates the whole batches a read returns.
    fn locate(&self, offset: i64, max_bytes: usize, max_offset: Option<i64>, min_one: bool) -> Result<Option<FileSlice>> {
        let inner = self.inner.read();
        inner.check_open(&self.dir)?;
        if offset < inner.log_start_offset || offset > inner.next_offset {
            return Err(inner.out_of_range(offset));
        }
        let bound = max_offset.unwrap_or(i64::MAX).min(inner.next_offset);
        if offset >= bound {
            return Ok(None);
        }
        let from = inner.segments.range(..=offset).next_back().map_or(i64::MIN, |(b, _)| *b);
        for seg in inner.segments.range(from..).map(|(_, s)| s) {
            if let Some((pos, len, first, last)) = seg.read_range(offset, max_bytes, bound, min_one)? {
                return Ok(Some(FileSlice {
                    file: Arc::clone(seg.file()),
                    path: seg.log_path().to_path_buf(),
                    position: pos,
                    length: len,
                    base_offset: first.base_offset,
                    last_offset: last,
                }));
            }
            if seg.size() > 0 && seg.next_offset() > offset {
                break; // the batch holding `offset` exists but does not fit the limits
            }
            // Otherwise `offset` lies past this segment's batches (a compaction gap, or a
            // segment the cleaner emptied): the next segment holds the next batch.
        }
        Ok(None)
    }

    /// Whole batches from the one holding `offset`; see `read_slice`.
    pub fn read(&self, offset: i64, max_bytes: usize, max_offset: Option<i64>, min_one: bool) -> Result<Vec<u8>> {
        match self.locate(offset, max_bytes, max_offset, min_one)? {
            None => Ok(Vec::new()),
            Some(slice) => slice.read(),
        }
    }

    /// The byte range of whole batches from the one holding `offset`: at most
    /// `max_bytes` (the first batch whole when `min_one`), below `max_offset`.
    pub fn read_slice(&self, offset: i64, max_bytes: usize, max_offset: Option<i64>, min_one: bool) -> Result<Option<FileSlice>> {
        self.locate(offset, max_bytes, max_offset, min_one)
    }

    /// (offset, timestamp) of the first record with timestamp >= `ts`.
    pub fn offset_for_timestamp(&self, ts: i64) -> Result<Option<(i64, i64)>> {
        let inner = self.inner.read();
        inner.check_open(&self.dir)?;
        for seg in inner.segments.values() {
            if seg.next_offset() <= inner.log_start_offset || seg.max_timestamp() < ts {
                continue;
            }
            if let Some(found) = seg.find_offset_by_timestamp(ts, inner.log_start_offset)? {
                return Ok(Some(found));
            }
        }
        Ok(None)
    }

    /// Removes every batch whose last offset >= `offset` (a follower truncating to the
    /// leader's epoch boundary). Below the log start it truncates everything.
    pub fn truncate_to(&self, offset: i64) -> Result<()> {
        let _shrink = self.segment_shrink.write();
        let mut guard = self.inner.write();
        let inner = &mut *guard;
        inner.check_open(&self.dir)?;
        if offset >= inner.next_offset {
            return Ok(());
        }
        let first_base = *inner.segments.keys().next().unwrap();
        if offset < inner.log_start_offset || offset <= first_base {
            drop(guard);
            return self.truncate_fully_and_start_at(offset);
        }
        let doomed: Vec<i64> = inner.segments.range(offset..).map(|(b, _)| *b).collect();
        for base in doomed {
            inner.segments.remove(&base).unwrap().delete()?;
        }
        let config = inner.config.clone();
        let seg = inner.active_mut();
        let removed_base = seg.truncate_to(offset, &config)?;
        seg.on_become_active(&config)?;
        inner.next_offset = removed_base.unwrap_or(offset).min(offset);
        inner.recovery_point = inner.recovery_point.min(inner.next_offset);
        inner.epochs.truncate_from_end(inner.next_offset)?;
        self.truncate_cleaner_checkpoint(inner.next_offset)?;
        self.write_offset_checkpoint(RECOVERY_POINT_FILE, inner.recovery_point)
    }

    /// Deletes every segment and starts an empty log at `offset`.
    pub fn truncate_fully_and_start_at(&self, offset: i64) -> Result<()> {
        let mut guard = self.inner.write();
        let inner = &mut *guard;
        inner.check_open(&self.dir)?;
        let offset = offset.max(0);
        for (_, seg) in std::mem::take(&mut inner.segments) {
            seg.delete()?;
        }
        inner.segments.insert(offset, LogSegment::open(&self.dir, offset, &inner.config, true, now_ms())?);
        inner.next_offset = offset;
        inner.log_start_offset = offset;
        inner.recovery_point = offset;
        inner.epochs.clear()?;
        self.truncate_cleaner_checkpoint(offset)?;
        self.write_offset_checkpoint(RECOVERY_POINT_FILE, offset)?;
        self.write_offset_checkpoint(LOG_START_OFFSET_FILE, offset)
    }

    /// Deletes non-active segments wholly below the log start offset, then records it.
    /// As in Kafka's `deleteSegmentFiles`, their files are renamed `.deleted` and
    /// unlinked after `file.delete.delay.ms` (at once when it is 0).
    fn delete_below_start(&self, inner: &mut LogInner) -> Result<usize> {
        let bases: Vec<i64> = inner.segments.keys().copied().collect();
        let mut deleted = 0;
        for pair in bases.windows(2) {
            if pair[1] > inner.log_start_offset {
                break;
            }
            let paths = inner.segments.remove(&pair[0]).unwrap().into_deleted()?;
            unlink_all(&self.deletions.delete_after(paths, inner.config.file_delete_delay_ms))?;
            deleted += 1;
        }
        inner.epochs.truncate_from_start(inner.log_start_offset)?;
        if deleted > 0 {
            self.write_offset_checkpoint(LOG_START_OFFSET_FILE, inner.log_start_offset)?;
        }
        Ok(deleted)
    }

    /// Advances the log start offset to `before_offset` (DeleteRecords).
    pub fn delete_records(&self, before_offset: i64) -> Result<i64> {
        let mut guard = self.inner.write();
        let inner = &mut *guard;
        inner.check_open(&self.dir)?;
        if before_offset < 0 || before_offset > inner.next_offset {
            return Err(inner.out_of_range(before_offset));
        }
        if before_offset > inner.log_start_offset {
            inner.log_start_offset = before_offset;
            self.delete_below_start(inner)?;
            self.write_offset_checkpoint(LOG_START_OFFSET_FILE, inner.log_start_offset)?;
        }
        Ok(inner.log_start_offset)
    }

    /// Deletes whole non-active segments past `retention.ms` or beyond `retention.bytes`,
    /// oldest first, stopping at the first one to keep; none at or above `max_offset`.
    pub fn enforce_retention(&self, now: Option<i64>, max_offset: Option<i64>) -> Result<usize> {
        let now = now.unwrap_or_else(now_ms);
        let mut guard = self.inner.write();
        let inner = &mut *guard;
        inner.check_open(&self.dir)?;
        let bound = max_offset.unwrap_or(i64::MAX);
        let (retention_ms, retention_bytes) = (inner.config.retention_ms, inner.config.retention_bytes);
        // Segments wholly below the log start offset go first (Kafka's
        // deleteLogStartOffsetBreachedSegments), e.g. after DeleteRecords on a segment
        // that was still active then.
        let below_start = self.delete_below_start(inner)?;
        let mut excess = if retention_bytes >= 0 { inner.size() as i64 - retention_bytes } else { -1 };
        let bases: Vec<i64> = inner.segments.keys().copied().collect();
        let mut new_start = None;
        for pair in bases.windows(2) {
            if pair[1] > bound {
                break;
            }
            let seg = &inner.segments[&pair[0]];
            let by_time = retention_ms >= 0 && now - seg.largest_timestamp() > retention_ms;
            let by_size = retention_bytes >= 0 && excess - seg.size() as i64 >= 0;
            if !(by_time || by_size) {
                break;
            }
            excess -= seg.size() as i64;
            new_start = Some(pair[1]);
        }
        let Some(start) = new_start else { return Ok(below_start) };
        inner.log_start_offset = inner.log_start_offset.max(start);
        Ok(below_start + self.delete_below_start(inner)?)
    }

    pub fn segments(&self) -> Result<Vec<SegmentInfo>> {
        let inner = self.inner.read();
        inner.check_open(&self.dir)?;
        Ok(inner
            .segments
            .values()
            .map(|s| SegmentInfo {
                base_offset: s.base_offset(),
                size: s.size(),
                log_path: s.log_path().to_path_buf(),
                index_entries: s.index_entries().0,
                time_index_entries: s.index_entries().1,
                largest_timestamp: s.largest_timestamp(),
                next_offset: s.next_offset(),
            })
            .collect())
    }

    pub fn assign_epoch_start_offset(&self, epoch: i32, start_offset: i64) -> Result<()> {
        let mut inner = self.inner.write();
        inner.check_open(&self.dir)?;
        inner.epochs.assign(epoch, start_offset)
    }

    pub fn end_offset_for_epoch(&self, epoch: i32) -> (i32, i64) {
        let inner = self.inner.read();
        inner.epochs.end_offset_for(epoch, inner.next_offset)
    }

    pub fn latest_epoch(&self) -> Option<i32> {
        self.inner.read().epochs.latest_epoch()
    }

    pub fn epoch_entries(&self) -> Vec<(i32, i64)> {
        self.inner.read().epochs.entries().to_vec()
    }

    /// Flushes, records the max timestamp and trims the indexes of the active segment,
    /// writes both offset checkpoints and then the clean-shutdown marker.
    pub fn close(&self) -> Result<()> {
        let mut guard = self.inner.write();
        let inner = &mut *guard;
        if inner.closed {
            return Ok(());
        }
        self.flush_locked(inner, now_ms())?;
        inner.active_mut().on_become_inactive()?;
        inner.active().flush()?;
        self.write_offset_checkpoint(LOG_START_OFFSET_FILE, inner.log_start_offset)?;
        let marker = self.dir.join(CLEAN_SHUTDOWN_FILE);
        File::create(&marker).and_then(|f| f.sync_all()).ctx("write clean-shutdown marker", &marker)?;
        checkpoint::sync_dir(&self.dir)?;
        inner.closed = true;
        inner.segments.clear();
        // Nothing is scheduled once `closed` is set (scheduling happens under this lock).
        self.deletions.delete_all()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::NewRecord;
    use crate::record_batch::{encode, BatchOptions};

    fn batch(n: usize, ts: i64) -> Vec<u8> {
        let recs: Vec<NewRecord> = (0..n)
            .map(|i| NewRecord { offset: i as i64, timestamp: ts, key: Some(vec![i as u8]), value: Some(vec![7; 100]), headers: vec![] })
            .collect();
        encode(&recs, &BatchOptions::default())
    }

    fn leader() -> AppendOptions {
        AppendOptions { assign_offsets: true, ..Default::default() }
    }

    #[test]
    fn large_append_checked_beside_its_write_publishes_nothing_when_corrupt() {
        let dir = tempfile::tempdir().unwrap();
        let log = Log::open(&dir.path().join("t-0"), LogConfig::default(), OpenOptions::default()).unwrap();
        log.append(&batch(3, 1000), &leader()).unwrap();
        let size = log.size();
        let mut big = batch(4000, 1000);
        assert!(big.len() >= CONCURRENT_CHECK_MIN_BYTES);
        let last = big.len() - 1;
        big[last] ^= 0x5A;
        assert!(matches!(log.append(&big, &leader()), Err(Error::CorruptRecord { .. })));
        assert_eq!((log.log_end_offset(), log.size()), (3, size));
        assert_eq!(fs::metadata(dir.path().join("t-0").join(crate::segment::file_name(0, ".log"))).unwrap().len(), size);
        big[last] ^= 0x5A;
        assert_eq!(log.append(&big, &leader()).unwrap().base_offset, 3);
        assert_eq!(log.log_end_offset(), 4003);
    }

    #[test]
    fn a_compacted_log_refuses_records_without_keys_small_or_large_appends_alike() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = LogConfig::from_pairs([("cleanup.policy", "compact")]).unwrap();
        let log = Log::open(&dir.path().join("t-0"), cfg, OpenOptions::default()).unwrap();
        log.append(&batch(3, 1000), &leader()).unwrap();
        let size = log.size();
        for n in [5, 4000] {
            let recs: Vec<NewRecord> = (0..n)
                .map(|i| NewRecord { offset: i, timestamp: 1000, key: (i % 2 == 0).then(|| vec![1]), value: Some(vec![7; 100]), headers: vec![] })
                .collect();
            let compression = if n == 5 { crate::compression::Compression::Lz4 } else { crate::compression::Compression::None };
            let keyless = encode(&recs, &BatchOptions { compression, ..Default::default() });
            assert_eq!(keyless.len() >= CONCURRENT_CHECK_MIN_BYTES, n > 5);
            let Err(Error::InvalidRecord { errors, .. }) = log.append(&keyless, &leader()) else { panic!("accepted") };
            assert_eq!(errors.len(), n as usize / 2);
            assert_eq!(errors[0].batch_index, 1);
            assert!(errors[0].message.contains("t-0"), "{}", errors[0].message);
            assert_eq!((log.log_end_offset(), log.size()), (3, size));
        }
        // A follower's copy (offsets kept) is not the producer's to be judged.
        let keyless = encode(&[NewRecord { offset: 3, timestamp: 1, ..Default::default() }], &BatchOptions { base_offset: 3, ..Default::default() });
        assert_eq!(log.append(&keyless, &AppendOptions::default()).unwrap().base_offset, 3);
    }

    #[test]
    fn append_read_roll_reopen() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("t-0");
        let cfg = LogConfig::from_pairs([("segment.bytes", "2000"), ("index.interval.bytes", "100")]).unwrap();
        let log = Log::open(&dir, cfg.clone(), OpenOptions::default()).unwrap();
        let t0 = now_ms();
        for i in 0..30 {
            let info = log.append(&batch(3, t0 + i), &leader()).unwrap();
            assert_eq!((info.base_offset, info.last_offset), (i * 3, i * 3 + 2));
        }
        assert!(log.num_segments() > 3);
        assert_eq!(log.log_end_offset(), 90);
        for o in 0..90 {
            let data = log.read(o, 1, None, true).unwrap();
            let h = BatchHeader::parse(&data);
            assert!(h.base_offset <= o && o <= h.last_offset(), "offset {o}");
        }
        assert_eq!(log.offset_for_timestamp(t0 + 10).unwrap(), Some((30, t0 + 10)));
        log.close().unwrap();
        let log = Log::open(&dir, cfg, OpenOptions::default()).unwrap();
        assert!(!log.recovered());
        assert_eq!(log.log_end_offset(), 90);
        assert_eq!(log.offset_for_timestamp(t0 + 10).unwrap(), Some((30, t0 + 10)));
        assert_eq!(log.read(45, 1, None, true).unwrap().len(), batch(3, 0).len());
    }

    #[test]
    fn unparsable_offset_checkpoints_fall_back_as_kafka_does() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("t-0");
        let log = Log::open(&dir, LogConfig::default(), OpenOptions::default()).unwrap();
        for _ in 0..5 {
            log.append(&batch(2, now_ms()), &leader()).unwrap();
        }
        log.delete_records(4).unwrap();
        drop(log); // no close: an unclean shutdown
        fs::write(dir.join(RECOVERY_POINT_FILE), b"\xff garbage").unwrap();
        fs::write(dir.join(LOG_START_OFFSET_FILE), "0\n1\nt 0 notanumber\n").unwrap();
        let log = Log::open(&dir, LogConfig::default(), OpenOptions::default()).unwrap();
        let faults = log.checkpoint_faults();
        assert_eq!(faults.len(), 2, "{faults:?}");
        assert!(faults[0].starts_with("log-start-offset-checkpoint: not one entry"), "{faults:?}");
        assert!(faults[0].ends_with("; the log starts at its first segment"), "{faults:?}");
        assert!(faults[1].starts_with("recovery-point-offset-checkpoint: "), "{faults:?}");
        assert!(faults[1].ends_with("; every segment is recovered"), "{faults:?}");
        assert!(log.recovered());
        assert_eq!((log.log_start_offset(), log.log_end_offset()), (0, 10));
        log.close().unwrap();
        // Both were rewritten: the next open has nothing to set aside.
        let log = Log::open(&dir, LogConfig::default(), OpenOptions::default()).unwrap();
        assert!(log.checkpoint_faults().is_empty() && !log.recovered());
    }

    #[test]
    fn torn_tail_is_cut_after_crash() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("t-0");
        let log = Log::open(&dir, LogConfig::default(), OpenOptions::default()).unwrap();
        for _ in 0..5 {
            log.append(&batch(2, now_ms()), &leader()).unwrap();
        }
        assert_eq!(log.num_segments(), 1);
        let path = log.segments().unwrap()[0].log_path.clone();
        drop(log); // no close: an unclean shutdown
        let len = fs::metadata(&path).unwrap().len();
        let f = fs::OpenOptions::new().write(true).open(&path).unwrap();
        f.set_len(len - 10).unwrap();
        let log = Log::open(&dir, LogConfig::default(), OpenOptions::default()).unwrap();
        assert!(log.recovered());
        assert_eq!(log.log_end_offset(), 8);
        assert_eq!(log.append(&batch(1, now_ms()), &leader()).unwrap().base_offset, 8);
    }

    #[test]
    fn corrupt_batch_writes_nothing() {
        let d = tempfile::tempdir().unwrap();
        let log = Log::open(&d.path().join("t-0"), LogConfig::default(), OpenOptions::default()).unwrap();
        let mut two = batch(2, 1);
        let mut bad = batch(2, 1);
        bad[HEADER_SIZE + 3] ^= 0xff;
        two.extend(bad);
        assert!(matches!(log.append(&two, &leader()), Err(Error::CorruptRecord { .. })));
        assert_eq!(log.log_end_offset(), 0);
        assert_eq!(log.size(), 0);
    }

    #[test]
    fn large_corrupt_append_is_cut_back() {
        let d = tempfile::tempdir().unwrap();
        let log = Log::open(&d.path().join("t-0"), LogConfig::default(), OpenOptions::default()).unwrap();
        log.append(&batch(3, now_ms()), &leader()).unwrap();
        let before = (log.log_end_offset(), log.size(), fs::metadata(&log.segments().unwrap()[0].log_path).unwrap().len());
        let mut data = Vec::new();
        while data.len() < 512 * 1024 {
            data.extend(batch(50, now_ms()));
        }
        let n = data.len();
        data[n - 5] ^= 0x55;
        assert!(matches!(log.append(&data, &leader()), Err(Error::CorruptRecord { .. })));
        let after = (log.log_end_offset(), log.size(), fs::metadata(&log.segments().unwrap()[0].log_path).unwrap().len());
        assert_eq!(before, after);
        data[n - 5] ^= 0x55;
        let info = log.append(&data, &leader()).unwrap();
        assert_eq!(info.base_offset, 3);
        assert_eq!(log.log_end_offset(), info.last_offset + 1);
    }

    #[test]
    fn read_ranges_agree_with_a_linear_walk() {
        let d = tempfile::tempdir().unwrap();
        let cfg = LogConfig::from_pairs([("index.interval.bytes", "300")]).unwrap();
        let log = Log::open(&d.path().join("t-0"), cfg, OpenOptions::default()).unwrap();
        let mut sizes = Vec::new();
        for i in 0..60 {
            let b = batch(1 + i % 4, now_ms());
            sizes.push((log.append(&b, &leader()).unwrap().last_offset, b.len()));
        }
        let leo = log.log_end_offset();
        for offset in (0..leo).step_by(3) {
            for max_bytes in [1usize, 200, 700, 1500, 5000, 100_000] {
                for max_offset in [leo, leo - 5, offset + 7] {
                    let got = log.read_slice(offset, max_bytes, Some(max_offset), true).unwrap();
                    // Linear reference: the batch holding `offset`, then whole batches
                    // while they fit in max_bytes and end below max_offset.
                    let first = sizes.iter().position(|(last, _)| *last >= offset).unwrap();
                    let (first_last, _) = sizes[first];
                    if first_last >= max_offset {
                        assert!(got.is_none());
                        continue;
                    }
                    let (mut len, mut last) = (sizes[first].1, first_last);
                    for (l, sz) in &sizes[first + 1..] {
                        if *l >= max_offset || len + sz > max_bytes {
                            break;
                        }
                        len += sz;
                        last = *l;
                    }
                    let got = got.unwrap();
                    assert_eq!((got.length as usize, got.last_offset), (len, last), "offset {offset} max_bytes {max_bytes} max_offset {max_offset}");
                }
            }
        }
    }

    #[test]
    fn large_corrupt_batches_leave_the_log_unchanged() {
        let d = tempfile::tempdir().unwrap();
        let cfg = LogConfig::from_pairs([("max.message.bytes", "4000000")]).unwrap();
        let log = Log::open(&d.path().join("t-0"), cfg, OpenOptions::default()).unwrap();
        log.append(&batch(2, now_ms()), &leader()).unwrap();
        let big = batch(6000, now_ms()); // ~700 KB, one batch
        let file_len = |log: &Log| fs::metadata(&log.segments().unwrap()[0].log_path).unwrap().len();
        let before = (log.log_end_offset(), log.size(), file_len(&log));
        // A flipped byte near the end: the CRC fails.
        let mut bad = big.clone();
        let n = bad.len();
        bad[n - 3] ^= 1;
        assert!(matches!(log.append(&bad, &leader()), Err(Error::CorruptRecord { .. })));
        assert_eq!(before, (log.log_end_offset(), log.size(), file_len(&log)));
        // A record count that lies (CRC recomputed): the framing walk fails.
        let mut lying = big.clone();
        lying[57..61].copy_from_slice(&5999i32.to_be_bytes());
        lying[23..27].copy_from_slice(&5998i32.to_be_bytes());
        let crc = record_batch::compute_crc(&lying);
        lying[17..21].copy_from_slice(&crc.to_be_bytes());
        assert!(matches!(log.append(&lying, &leader()), Err(Error::CorruptRecord { .. })));
        assert_eq!(before, (log.log_end_offset(), log.size(), file_len(&log)));
        // The good batch lands whole, and reads back byte for byte (but its base offset).
        let info = log.append(&big, &leader()).unwrap();
        assert_eq!((info.base_offset, info.last_offset), (2, 6001));
        let back = log.read(2, 10 << 20, None, true).unwrap();
        assert_eq!(&back[8..], &big[8..]);
        drop(log);
        // Reopened after a crash (no marker), the batch passes recovery's full validation.
        let log = Log::open(&d.path().join("t-0"), LogConfig::from_pairs([("max.message.bytes", "4000000")]).unwrap(), OpenOptions::default()).unwrap();
        assert_eq!(log.log_end_offset(), 6002);
    }

    #[test]
    fn retention_unlinks_segment_files_after_file_delete_delay_ms() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("t-0");
        let deleted = || fs::read_dir(&dir).unwrap().filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().ends_with(".deleted")).count();
        for (delay, left) in [("60000", 3), ("0", 0)] {
            let cfg = LogConfig::from_pairs([("segment.bytes", "2000"), ("file.delete.delay.ms", delay)]).unwrap();
            let log = Log::open(&dir, cfg, OpenOptions::default()).unwrap();
            let t0 = now_ms();
            for i in 0..20 {
                log.append(&batch(3, t0 + i), &leader()).unwrap();
            }
            let end = log.log_end_offset();
            let first = log.segments().unwrap()[1].base_offset;
            log.delete_records(first).unwrap();
            assert_eq!(log.enforce_retention(None, None).unwrap(), 0, "already gone by delete_records");
            assert_eq!(deleted(), left, "delay {delay}");
            assert_eq!((log.log_start_offset(), log.log_end_offset()), (first, end));
            log.close().unwrap();
            assert_eq!(deleted(), 0);
            fs::remove_dir_all(&dir).unwrap();
        }
    }
}

