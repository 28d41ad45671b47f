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
//!   pending before it returns; `open` deletes any left by a crash or `close_handlers`.
//!
//! Invariants:
//! - `log_start_offset <= next_offset` (the log end offset); segments are contiguous
//!   in offset order and only the last one (the active segment) takes appends.
//! - Everything below `recovery_point` has been fsynced; after an unclean shutdown,
//!   segments from the one holding the recovery point onward are re-validated.
//! - An append is validated whole before it is published: either every batch in the
//!   call lands, or none does (a large one is checked while it is written and cut back
//!   if it fails; a write the disk refuses is cut back too; see `log/append.rs`).
//!
//! This file holds the log's state (`Log`, `LogInner`), its options and results, and
//! the reads of that state; the operations on it are split by concern, each in a child
//! module (so they share `LogInner`'s private fields, and every public path stays
//! `crate::log::…`):
//! - `log/recovery.rs`: `open` (listing, leftovers, checkpoints, recovery), `close`
//!   (the clean-shutdown marker) and `close_handlers` (a log dir gone offline);
//! - `log/append.rs`: `append`, `roll` and `flush` (the recovery point's advance);
//! - `log/read.rs`: `read`, `read_slice`, `offset_for_timestamp`;
//! - `log/retention.rs`: `truncate_to`, `truncate_fully_and_start_at`, `delete_records`,
//!   `enforce_retention` (the log start offset's advance);
//! - `log/tests.rs`: their tests; `log/lazy_index_tests.rs`: indexes without files.

mod append;
mod read;
mod recovery;
mod retention;
#[cfg(test)]
mod lazy_index_tests;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::RwLock;

use crate::checkpoint;
use crate::error::{Error, IoContext, Result};
use crate::leader_epoch_cache::LeaderEpochCache;
use crate::log_config::LogConfig;
use crate::segment::LogSegment;
use crate::segment_deletion::PendingDeletions;

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
    /// The caller makes the directory's changes durable itself, with one
    /// `checkpoint::sync_filesystem` for many logs, before any of them takes a write:
    /// `open` then fsyncs nothing, and a recovery leaves the recovery point where the
    /// checkpoint had it (so no checkpoint can claim a tail not yet on disk).
    pub defer_sync: bool,
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
    /// Set by `close_deferred`: `mark_clean_shutdown` has the checkpoints and the
    /// marker to write.
    marker_due: bool,
    unflushed_messages: i64,
    last_flush_ms: i64,
}

pub struct Log {
    pub(crate) dir: PathBuf,
    topic: String,
    partition: i32,
    recovered: bool,
    /// What recovery cut at `open` (empty when nothing was).
    dropped: crate::segment_recovery::RecoveryCut,
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

/// A log dropped without `close` (a crash, or a handle given up) is closed for the
/// background flushes it started: none of them writes a checkpoint after this, so a
/// later `open` of the same directory is the only writer of its files.
impl Drop for Log {
    fn drop(&mut self) {
        self.inner.write().closed = true;
    }
}

impl Log {
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
    pub fn recovery_dropped(&self) -> &crate::segment_recovery::RecoveryCut {
        &self.dropped
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
}
