//! Opening and closing a partition's log: what a log directory holds when `open` finds
//! it, and what `close` leaves for the next `open`.
//!
//! Files: every file of the partition directory (see `log.rs`). `open` finishes an
//! interrupted cleaner swap, deletes leftovers (`.deleted`, `.cleaned`, `.tmp`, indexes
//! without a `.log`), reads `recovery-point-offset-checkpoint` and
//! `log-start-offset-checkpoint` (an unparsable one is set aside with a note in
//! `checkpoint_faults`, as Kafka does), removes `.kafka_cleanshutdown`, opens the
//! segments, loads `leader-epoch-checkpoint` and rewrites each offset checkpoint whose
//! file does not already hold its value (fsyncing the directory, so the marker's
//! removal is durable, when after a clean shutdown neither needs writing). A new log
//! (no segment, no offset checkpoint) writes neither and fsyncs nothing, as in Kafka.
//! With `OpenOptions::defer_sync` nothing is fsynced: the caller's
//! `checkpoint::sync_filesystem` makes it durable before the log takes a write, and a
//! recovery leaves the recovery point where the checkpoint had it, as Kafka's
//! `LogLoader` does (everything past it is validated again after another crash).
//! `close` flushes, writes both offset checkpoints, then the marker, and unlinks the
//! `.deleted` files still pending. `close_handlers` (a log dir gone offline) only lets go
//! of the files, writing nothing.
//!
//! Invariants:
//! - `.kafka_cleanshutdown` exists only while the log is closed cleanly: `open` removes
//!   it before it opens any segment; `close` writes it after the flush and checkpoints;
//!   `close_handlers` never does.
//! - After a crash (no marker), every segment from the one holding the recovery point
//!   onward is re-validated; after a clean shutdown only a segment whose files disagree
//!   or lack an index is. Recovery may cut a torn tail; the segments after a cut one
//!   are deleted (they lie past a gap) and the last survivor becomes the active one.
//!   What was cut and deleted is kept in `dropped` (`segment_recovery.rs`) for the
//!   broker to report.
//! - On return, `log_start_offset` lies in [first segment's base, log end], the leader
//!   epoch cache is truncated to it at both ends, and after a recovery everything is
//!   fsynced and the recovery point sits at the log end (with `defer_sync`: the
//!   recovery point is the checkpoint's, at most the log end, and nothing is fsynced).

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::RwLock;

use super::{now_ms, remove_if_exists, Log, LogInner, OpenOptions, CLEAN_SHUTDOWN_FILE, LOG_START_OFFSET_FILE, RECOVERY_POINT_FILE};
use crate::checkpoint;
use crate::error::{Error, IoContext, Result};
use crate::leader_epoch_cache::LeaderEpochCache;
use crate::log_config::LogConfig;
use crate::segment::LogSegment;
use crate::segment_recovery::RecoveryCut;
use crate::segment_deletion::PendingDeletions;

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

impl Log {
    pub fn open(dir: &Path, config: LogConfig, opts: OpenOptions) -> Result<Log> {
        let now = opts.now_ms.unwrap_or_else(now_ms);
        fs::create_dir_all(dir).ctx("create log directory", dir)?;
        let (topic, partition) = topic_partition(dir);
        let marker = dir.join(CLEAN_SHUTDOWN_FILE);
        let clean = marker.exists();

        // An interrupted cleaner swap is finished first (see `log_clean_pass.rs`); then
        // segment files by base offset; leftovers of interrupted deletes and cleanings go.
        let list = || -> Result<Vec<(PathBuf, String)>> {
            let mut out = Vec::new();
            for entry in fs::read_dir(dir).ctx("list log directory", dir)? {
                let path = entry.ctx("list log directory", dir)?.path();
                let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
                out.push((path, name));
            }
            Ok(out)
        };
        let mut files = list()?;
        if files.iter().any(|(_, name)| name.ends_with(".swap")) {
            crate::log_clean_pass::complete_swaps(dir)?;
            files = list()?;
        }
        let mut logs = Vec::new();
        let mut indexes = Vec::new();
        for (path, name) in files {
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
        // Each offset comes with whether the file is exactly what a write of it would
        // leave (one entry naming this log's topic and partition).
        let mut read_offset = |file: &str, fallback: &str| -> Result<Option<(i64, bool)>> {
            let entries = match checkpoint::read(&dir.join(file)) {
                Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::InvalidData => {
                    checkpoint_faults.push(format!("{file}: {source}; {fallback}"));
                    return Ok(None);
                }
                other => other?,
            };
            let Some(entries) = entries else { return Ok(None) };
            match entries.first().and_then(|f| f.get(2)?.parse::<i64>().ok()) {
                Some(offset) if entries.len() == 1 && offset >= 0 => {
                    let e = &entries[0];
                    let exact = e.len() == 3 && e[0] == topic && e[1] == partition.to_string();
                    Ok(Some((offset, exact)))
                }
                _ => {
                    checkpoint_faults.push(format!("{file}: not one entry with an offset; {fallback}"));
                    Ok(None)
                }
            }
        };
        // What each checkpoint file holds now (None: absent, unreadable or overridden),
        // so that one already saying what it would be written with is not written again.
        let (checkpoint_start, stored_start) = match opts.log_start_offset {
            Some(o) => (Some(o), None),
            None => {
                let read = read_offset(LOG_START_OFFSET_FILE, "the log starts at its first segment")?;
                (read.map(|(o, _)| o), read.and_then(|(o, exact)| exact.then_some(o)))
            }
        };
        let (recovery_point, stored_recovery_point) = match opts.recovery_point {
            Some(o) => (o, None),
            None => {
                let read = read_offset(RECOVERY_POINT_FILE, "every segment is recovered")?;
                (read.map_or(0, |(o, _)| o), read.and_then(|(o, exact)| exact.then_some(o)))
            }
        };
        remove_if_exists(&marker)?;

        let mut segments = BTreeMap::new();
        let mut recovered = false;
        let last = logs.last().copied();
        let mut cut_from: Option<i64> = None;
        let mut dropped = RecoveryCut::default();
        for (i, &base) in logs.iter().enumerate() {
            if cut_from.is_some() {
                // Everything after a segment that recovery cut short is past a gap.
                let seg = LogSegment::open(dir, base, &config, false, now)?;
                let mut gone = RecoveryCut::survey(&*seg.file()?, 0, seg.size());
                gone.segments_deleted = 1;
                dropped.add(&gone);
                seg.delete()?;
                continue;
            }
            let active = Some(base) == last;
            let mut seg = LogSegment::open(dir, base, &config, active, now)?;
            let next_base = logs.get(i + 1).copied().unwrap_or(i64::MAX);
            // After a crash: every segment from the recovery point on. After a clean
            // shutdown: a segment whose files disagree (torn tail, bad index) or whose
            // offset index is missing entries (`LogSegment::load`; an absent index
            // file is an empty index, which a segment shorter than an index interval
            // has). Only a rebuilt index with nothing cut is not crash recovery.
            let after_crash = !clean && next_base > recovery_point;
            let failed = !after_crash && seg.load().is_err();
            let missing_index = failed && !seg.offset_index().exists();
            let damaged = failed && !missing_index;
            if after_crash || failed {
                let cut = seg.recover(&config, active)?;
                recovered |= after_crash || damaged || cut.bytes > 0;
                if cut.bytes > 0 && !active {
                    cut_from = Some(base);
                }
                dropped.add(&cut);
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
        // A new log (no segment and no offset checkpoint found) writes no checkpoint and
        // fsyncs nothing, as Kafka's new logs: what the absent files stand for (recovery
        // from 0, the log starting at its one segment's base) is what they would say,
        // and the first flush fsyncs the directory with the recovery point.
        let created = segments.is_empty() && checkpoint_start.is_none() && recovery_point == 0 && checkpoint_faults.is_empty();
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
            // Deferred, a recovery fsyncs nothing and the recovery point stays where the
            // checkpoint had it (Kafka's LogLoader): the next crash validates that tail again.
            recovery_point: if recovered && !opts.defer_sync { next_offset } else { recovery_point.min(next_offset) },
            epochs,
            closed: false,
            marker_due: false,
            unflushed_messages: 0,
            last_flush_ms: now,
        };
        let log = Log {
            dir: dir.to_path_buf(),
            topic,
            partition,
            recovered,
            dropped,
            checkpoint_faults,
            inner: Arc::new(RwLock::new(inner)),
            cleaning: parking_lot::Mutex::new(()),
            segment_shrink: parking_lot::RwLock::new(()),
            deletions: PendingDeletions::new(),
        };
        if recovered && !opts.defer_sync {
            // The recovered tail is now fsynced and the recovery point sits at its end.
            let inner = log.inner.read();
            for seg in inner.segments.values() {
                seg.flush()?;
            }
        }
        if !created || clean {
            // Each write fsyncs its file; one fsync of the directory then makes the
            // renames and the marker's removal durable (a crash from here on recovers).
            // With `defer_sync` the caller's `sync_filesystem` does both for many logs.
            let inner = log.inner.read();
            let entry = |offset: i64| [format!("{} {} {offset}", log.topic, log.partition)];
            let sync = !opts.defer_sync;
            let mut written = false;
            if stored_recovery_point != Some(inner.recovery_point) {
                checkpoint::write_file_with(&dir.join(RECOVERY_POINT_FILE), &entry(inner.recovery_point), sync)?;
                written = true;
            }
            if stored_start != Some(inner.log_start_offset) {
                checkpoint::write_file_with(&dir.join(LOG_START_OFFSET_FILE), &entry(inner.log_start_offset), sync)?;
                written = true;
            }
            if (clean || written) && sync {
                checkpoint::sync_dir(dir)?;
            }
        }
        Ok(log)
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
        inner.active_mut().on_close()?;
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

    /// The first step of closing many logs at once, with two `syncfs(2)` in all where
    /// `close` fsyncs each log's files several times: trims the indexes of the active
    /// segment and closes the files, fsyncing and writing nothing else. The caller then
    /// makes the log dir durable (`checkpoint::sync_filesystem`), calls
    /// `mark_clean_shutdown` and syncs the log dir again. A crash before the marker is
    /// durable finds no marker and recovers from the recovery point of the last flush,
    /// as after any crash.
    pub fn close_deferred(&self) -> Result<()> {
        let mut guard = self.inner.write();
        let inner = &mut *guard;
        if inner.closed {
            return Ok(());
        }
        inner.active_mut().on_close()?;
        inner.closed = true;
        inner.marker_due = true;
        inner.segments.clear();
        self.deletions.delete_all()
    }

    /// After `close_deferred` and a sync of the log dir (so the log's data is durable):
    /// writes the recovery point (the log end), the log start offset and then the
    /// clean-shutdown marker, none fsynced (the caller syncs the log dir again). Does
    /// nothing for a log not closed by `close_deferred`, or already marked.
    pub fn mark_clean_shutdown(&self) -> Result<()> {
        let mut inner = self.inner.write();
        if !std::mem::take(&mut inner.marker_due) {
            return Ok(());
        }
        inner.recovery_point = inner.next_offset;
        let entry = |offset: i64| [format!("{} {} {offset}", self.topic, self.partition)];
        checkpoint::write_file_with(&self.dir.join(RECOVERY_POINT_FILE), &entry(inner.recovery_point), false)?;
        checkpoint::write_file_with(&self.dir.join(LOG_START_OFFSET_FILE), &entry(inner.log_start_offset), false)?;
        let marker = self.dir.join(CLEAN_SHUTDOWN_FILE);
        File::create(&marker).map(drop).ctx("write clean-shutdown marker", &marker)
    }

    /// Kafka's `closeHandlers`, for a log whose directory went offline: marks the log
    /// closed and drops its segments' file handles and index mappings, writing nothing
    /// (no flush, no index trim, no checkpoint, no clean-shutdown marker), so the next
    /// `open` recovers it. Segment files waiting for `file.delete.delay.ms` are left as
    /// they are, for the next `open` to delete. Later calls fail as after `close`.
    pub fn close_handlers(&self) {
        let mut inner = self.inner.write();
        inner.closed = true;
        inner.segments.clear();
        self.deletions.abandon();
    }
}
