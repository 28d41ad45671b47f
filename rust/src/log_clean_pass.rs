//! One compaction pass over a log's segment files: `Log::clean` drives the cleaner's
//! algorithm over bytes (`batch_cleaner.rs`) across its segments (Kafka's
//! `Cleaner.doClean` with `LogCleanerManager`'s choice of what to clean).
//!
//! A pass:
//! 1. reads every batch header of the log (`transactions.rs`): transactions, their
//!    markers and each producer's last batch;
//! 2. picks the cleanable segments: non-active, below the first unstable offset (an open
//!    transaction), and, from the first dirty offset on, older than
//!    `min.compaction.lag.ms`. The dirty section starts at the `cleaner-offset-checkpoint`
//!    (Kafka's checkpoint format, one entry, in the partition directory). The pass runs
//!    when the dirty share of the cleanable bytes reaches `min.cleanable.dirty.ratio`, or
//!    when the first dirty batch is older than `max.compaction.lag.ms`, or when forced;
//! 3. maps the dirty section to the latest offset per key (up to the offset map's
//!    capacity; the mapped end becomes the new checkpoint), counting per segment the
//!    records that stay the latest for their key (`live_records.rs`). The CRC-32C of
//!    every mapped batch is checked before anything is written, beside the map pass on a
//!    second thread when a core is free and no I/O limit applies (`verify_dirty`);
//! 4. rewrites the cleanable segments below the mapped end in groups (Kafka's
//!    `groupSegmentsBySize`): consecutive segments whose sizes sum to at most
//!    `segment.bytes`, whose indexes sum to at most `segment.index.bytes`, and whose
//!    offsets stay within an i32 of the group's base offset become one segment named by
//!    the group's first base offset. Segments are memory-mapped (`SegmentChunks`) and
//!    cleaned in chunks of whole batches (`CHUNK_BYTES`); the output is written per chunk.
//!    A segment mapped whole whose records were all superseded, with nothing else the
//!    rewrite would keep, is dropped without being read again (`LiveRecords`), and
//!    counts as empty in the grouping. The output is written past the page cache
//!    (`LogSegment::write_direct`).
//!
//! Each group is swapped in crash-safely, as Kafka does:
//! 1. `Cleaned`: `<base>.log.cleaned`, `.index.cleaned`, `.timeindex.cleaned` written and
//!    fsynced;
//! 2. `Swap`: under the log's write lock, renamed to `.swap` (indexes first, the `.log`
//!    last: its rename is the commit point), directory fsynced;
//! 3. `OldDeleted`: the group's old segments renamed `.deleted`, directory fsynced; their
//!    files are unlinked `file.delete.delay.ms` later, as Kafka does (right after the lock
//!    is released when the delay is 0; `segment_deletion.rs`; a reopen deletes any left);
//! 4. `Swapped`: `.swap` renamed to the final names, directory fsynced.
//!
//! Recovery on open (`complete_swaps`, before segments are listed): `.cleaned` files are
//! deleted (step 1 never committed); a `<base>.log.swap` replaces every segment whose base
//! offset is in [base, the swap's next offset), its indexes are dropped to be rebuilt, and
//! it is renamed to `<base>.log`. Offsets never move and the swap holds every record kept
//! from the segments it replaces, so each state reopens to the same records.

use std::fs::{self, File};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use memmap2::{Mmap, MmapOptions};
use parking_lot::{RwLock, RwLockReadGuard};

use crate::checkpoint;
use crate::batch_cleaner::{build_offset_map_counting, CleanOptions, CleanStats, SegmentCleaner};
use crate::live_records::LiveRecords;
use crate::transactions::control_batch_type;
use crate::error::{Error, IoContext, Result};
use crate::log::Log;
use crate::log_config::LogConfig;
use crate::offset_map::OffsetMap;
use crate::records::record_batch::{self, verify_crc, BatchIter, HEADER_SIZE};
use crate::segment::{file_name, read_header, LogSegment};
use crate::segment_deletion::unlink_all;
use crate::throttler::Throttler;
use crate::transactions::LogTransactions;

pub const CLEANER_CHECKPOINT_FILE: &str = "cleaner-offset-checkpoint";
const CLEANED: &str = ".cleaned";
const SWAP: &str = ".swap";
/// Segments are processed in chunks of whole batches of about this size.
const CHUNK_BYTES: usize = 8 << 20;
/// The map pass keeps the mappings of the segments it read, up to this many bytes, for
/// the rewrite pass (mapping a page costs a fault each time; 2 MB of page tables a GB).
const KEEP_MAPPED_BYTES: u64 = 4 << 30;

#[derive(Clone, Debug)]
pub struct LogCleanOptions {
    pub now_ms: i64,
    /// `log.cleaner.dedupe.buffer.size`: memory for the offset map (24 bytes per key).
    pub dedupe_buffer_size: usize,
    /// Clean even when the dirty ratio is below `min.cleanable.dirty.ratio` (or nothing
    /// is dirty: tombstones and markers past their delete horizon are still dropped).
    pub force: bool,
    /// `log.cleaner.io.max.bytes.per.second`, shared by every cleaner thread.
    pub throttler: Option<Arc<Throttler>>,
}

/// The steps of swapping one cleaned group in; see the module comment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SwapStep {
    Cleaned,
    Swap,
    OldDeleted,
    Swapped,
}

impl SwapStep {
    pub fn name(self) -> &'static str {
        match self {
            SwapStep::Cleaned => "cleaned",
            SwapStep::Swap => "swap",
            SwapStep::OldDeleted => "old_deleted",
            SwapStep::Swapped => "swapped",
        }
    }
}

/// What a pass reports while it runs. `Step` events for `Swap` onward are sent while the
/// log's write lock is held: an observer must not call into the same log.
#[derive(Clone, Copy, Debug)]
pub enum CleanEvent {
    Progress { bytes_done: u64, bytes_total: u64 },
    Step { step: SwapStep, base_offset: i64 },
}

#[derive(Clone, Debug, Default)]
pub struct LogCleanSummary {
    pub stats: CleanStats,
    /// Old segments replaced, and the segments that replaced them.
    pub segments_cleaned: usize,
    pub segments_written: usize,
    /// Old segments among `segments_cleaned` dropped without being read a second time:
    /// their records were all superseded (`live_records.rs`).
    pub segments_unread: usize,
    pub keys_mapped: usize,
    pub offset_map_bytes: usize,
    /// Whole-log sizes before and after the pass.
    pub log_bytes_before: u64,
    pub log_bytes_after: u64,
    /// The dirty section started here and ends here (the new checkpoint).
    pub first_dirty_offset: i64,
    pub cleaned_up_to: i64,
}

/// One segment as the pass sees it, taken under the read lock (or read from a stopped
/// log's files for a dry run).
#[derive(Clone, Debug)]
struct SegmentView {
    base: i64,
    size: u64,
    next_offset: i64,
    largest_timestamp: i64,
    offset_index_bytes: usize,
    time_index_bytes: usize,
    active: bool,
    path: PathBuf,
    file: Arc<File>,
}

/// A segment mapped into memory, handed out in chunks of whole batches of about
/// `CHUNK_BYTES` (or one larger batch). Mapping saves copying every byte out of the page
/// cache: the rewrite pass touches little more than the record headers of the batches it
/// drops. Each chunk holds `segment_shrink` for reading (when the segment belongs to a
/// live log), and checks under it that the file still holds the chunk, so its pages
/// cannot vanish while it is read. One mapping may be walked by several `SegmentChunks`
/// at once (the map pass and the CRC check), which then share its page tables.
struct SegmentChunks<'a> {
    view: &'a SegmentView,
    shrink: Option<&'a RwLock<()>>,
    map: Option<Arc<Mmap>>,
    pos: usize,
}

/// A run of whole batches of a mapped segment, from byte `start` of it; `next_offset`
/// follows its last batch.
struct Chunk<'a> {
    bytes: &'a [u8],
    start: usize,
    next_offset: i64,
    _shrink: Option<RwLockReadGuard<'a, ()>>,
}

/// Maps the whole of `view` (None when it is empty).
fn map_segment(view: &SegmentView) -> Result<Option<Arc<Mmap>>> {
    match view.size {
        0 => Ok(None),
        // SAFETY: the map is read only through `SegmentChunks`, which holds `shrink` and
        // checks that the file is still as long (a stopped log's files, for a dry run, do
        // not change); the cleaner never reads the active segment, the only one written.
        len => Ok(Some(Arc::new(unsafe { MmapOptions::new().len(len as usize).map(&*view.file) }.ctx("map segment", &view.path)?))),
    }
}

impl<'a> SegmentChunks<'a> {
    /// Walks `mapped` (a mapping of `view` from `map_segment`), or maps `view` when None.
    fn new(view: &'a SegmentView, shrink: Option<&'a RwLock<()>>, mapped: Option<Arc<Mmap>>) -> Result<Self> {
        let map = match mapped {
            Some(m) => Some(m),
            None => map_segment(view)?,
        };
        Ok(SegmentChunks { view, shrink, map, pos: 0 })
    }

    /// The mapping, to keep for the rewrite pass.
    fn into_map(self) -> Option<Arc<Mmap>> {
        self.map
    }

    fn next(&mut self) -> Result<Option<Chunk<'_>>> {
        let Some(map) = &self.map else { return Ok(None) };
        let buf: &[u8] = map;
        if self.pos == buf.len() {
            return Ok(None);
        }
        let guard = self.shrink.map(|l| l.read());
        if guard.is_some() && self.view.file.metadata().ctx("stat segment", &self.view.path)?.len() < buf.len() as u64 {
            // What a read past the new end would have failed with.
            let e = std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "the segment was truncated during the pass");
            return Err(e).ctx("read segment", &self.view.path);
        }
        let (start, mut end, mut next_offset) = (self.pos, self.pos, -1i64);
        while end - start < CHUNK_BYTES {
            let Some(h) = record_batch::next_batch(buf, end, 0)? else { break };
            end += h.size();
            next_offset = h.next_offset();
        }
        if end == start {
            return Err(Error::corrupt(start as u64, "batch cut short at the end of the segment"));
        }
        self.pos = end;
        Ok(Some(Chunk { bytes: &buf[start..end], start, next_offset, _shrink: guard }))
    }
}

/// Checks the CRC-32C of every batch of `dirty` (mapped as `maps`) whose base offset is
/// below `stop`, which the map pass lowers to its end when it is done (or to
/// `i64::MIN` when it failed). Runs beside the map pass, on another core; lets go of
/// each mapping once through it.
fn verify_dirty(dirty: &[&SegmentView], maps: Vec<Option<Arc<Mmap>>>, shrink: Option<&RwLock<()>>, stop: &AtomicI64) -> Result<()> {
    for (v, m) in dirty.iter().zip(maps) {
        let mut chunks = SegmentChunks::new(v, shrink, m)?;
        while let Some(chunk) = chunks.next()? {
            for item in BatchIter::new(chunk.bytes, chunk.start as u64) {
                let (pos, h, batch) = item?;
                if h.base_offset >= stop.load(Ordering::Relaxed) {
                    return Ok(());
                }
                verify_crc(batch, &h, (chunk.start + pos) as u64)?;
            }
        }
    }
    Ok(())
}

/// Feeds each batch header of `v` to `txns` (control batches are read whole for their type).
fn observe_segment(v: &SegmentView, txns: &mut LogTransactions) -> Result<()> {
    let mut pos = 0u64;
    let mut buf = Vec::new();
    while pos + HEADER_SIZE as u64 <= v.size {
        let Some(h) = read_header(&v.file, pos).ctx("read segment", &v.path)? else { break };
        record_batch::check_header(&h, pos)?;
        let ty = if h.is_control() {
            buf.resize(h.size(), 0);
            v.file.read_exact_at(&mut buf, pos).ctx("read segment", &v.path)?;
            control_batch_type(&buf, pos)?
        } else {
            None
        };
        txns.observe(&h, ty);
        pos += h.size() as u64;
    }
    Ok(())
}

/// Kafka's `groupSegmentsBySize`; see the module comment. A segment `empty` says the
/// rewrite leaves nothing of counts as 0 bytes with empty indexes.
fn group_segments<'a>(segments: &[&'a SegmentView], config: &LogConfig, empty: impl Fn(&SegmentView) -> bool) -> Vec<Vec<&'a SegmentView>> {
    let sizes = |v: &SegmentView| if empty(v) { (0, 0, 0) } else { (v.size, v.offset_index_bytes, v.time_index_bytes) };
    let mut groups: Vec<Vec<&SegmentView>> = Vec::new();
    let mut rest = segments;
    while let Some((first, tail)) = rest.split_first() {
        let mut group = vec![*first];
        let (mut size, mut oi, mut ti) = sizes(first);
        rest = tail;
        while let Some((next, tail)) = rest.split_first() {
            let (next_size, next_oi, next_ti) = sizes(next);
            let fits = size + next_size <= config.segment_bytes
                && oi + next_oi <= config.segment_index_bytes
                && ti + next_ti <= config.segment_index_bytes
                && next.next_offset - 1 - first.base <= i32::MAX as i64;
            if !fits {
                break;
            }
            size += next_size;
            oi += next_oi;
            ti += next_ti;
            group.push(*next);
            rest = tail;
        }
        groups.push(group);
    }
    groups
}

fn read_checkpoint(dir: &Path) -> Result<Option<i64>> {
    let entries = checkpoint::read(&dir.join(CLEANER_CHECKPOINT_FILE))?;
    Ok(entries.and_then(|e| e.first().and_then(|f| f.get(2)?.parse().ok())))
}

/// The topic config a pass reads (Kafka's names and defaults).
struct PassConfig {
    delete_retention_ms: i64,
    min_lag_ms: i64,
    max_lag_ms: i64,
    min_ratio: f64,
}

impl PassConfig {
    fn of(config: &LogConfig) -> PassConfig {
        let get = |key: &str| config.other.get(key);
        PassConfig {
            delete_retention_ms: get("delete.retention.ms").and_then(|v| v.parse().ok()).unwrap_or(86_400_000),
            min_lag_ms: get("min.compaction.lag.ms").and_then(|v| v.parse().ok()).unwrap_or(0),
            max_lag_ms: get("max.compaction.lag.ms").and_then(|v| v.parse().ok()).unwrap_or(i64::MAX),
            min_ratio: get("min.cleanable.dirty.ratio").and_then(|v| v.parse().ok()).unwrap_or(0.5),
        }
    }
}

// Switches tests flip to take the other side of a choice a pass makes by itself:
// rewrite every segment instead of dropping superseded ones unread, and check CRCs
// inside the map pass instead of beside it.
#[cfg(test)]
thread_local! {
    pub(crate) static REWRITE_EVERY_SEGMENT: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    pub(crate) static CHECK_CRC_INLINE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// A test switch's value on this thread; always false outside tests.
macro_rules! test_switch {
    ($switch:ident) => {{
        #[cfg(test)]
        let on = $switch.with(|c| c.get());
        #[cfg(not(test))]
        let on = false;
        on
    }};
}

/// One pass over `views`; `log` is None for a dry run, which writes nothing.
fn run_pass(
    dir: &Path,
    log: Option<&Log>,
    views: &[SegmentView],
    config: &LogConfig,
    log_start: i64,
    opts: &LogCleanOptions,
    observer: &dyn Fn(&CleanEvent),
) -> Result<LogCleanSummary> {
    let pc = PassConfig::of(config);
    let throttler = opts.throttler.as_deref();
    let shrink = log.map(|l| &l.segment_shrink);
    let log_bytes: u64 = views.iter().map(|v| v.size).sum();
    // A checkpoint past the log end (the log was truncated since) restarts at the start.
    let log_end = views.last().map_or(log_start, |v| v.next_offset);
    let first_dirty = read_checkpoint(dir)?.filter(|&c| c <= log_end).unwrap_or(log_start).max(log_start);
    let mut summary = LogCleanSummary {
        first_dirty_offset: first_dirty,
        cleaned_up_to: first_dirty,
        log_bytes_before: log_bytes,
        log_bytes_after: log_bytes,
        ..Default::default()
    };
    // The cleanable prefix of the log below `first_unstable`, and whether a pass is due.
    let choose = |first_unstable: i64| {
        let cleanable: Vec<&SegmentView> = views
            .iter()
            .take_while(|v| {
                !v.active
                    && v.next_offset <= first_unstable
                    && (v.next_offset <= first_dirty || v.size == 0 || pc.min_lag_ms <= 0 || opts.now_ms - v.largest_timestamp >= pc.min_lag_ms)
            })
            .collect();
        let dirty: Vec<&SegmentView> = cleanable.iter().copied().filter(|v| v.next_offset > first_dirty).collect();
        let total: u64 = cleanable.iter().map(|v| v.size).sum();
        let dirty_bytes: u64 = dirty.iter().map(|v| v.size).sum();
        // max.compaction.lag.ms: the first dirty batch waited too long, whatever the ratio.
        let overdue = pc.max_lag_ms < i64::MAX
            && dirty.iter().find(|v| v.size > 0).is_some_and(|v| {
                read_header(&v.file, 0).ok().flatten().is_some_and(|h| h.max_timestamp >= 0 && opts.now_ms - h.max_timestamp > pc.max_lag_ms)
            });
        let ratio_reached = dirty_bytes > 0 && (dirty_bytes as f64) / (total as f64) >= pc.min_ratio;
        let due = total > 0 && (opts.force || overdue || ratio_reached);
        (cleanable, dirty, total, dirty_bytes, due)
    };
    // Cutting the prefix at the first unstable offset only removes dirty segments from its
    // end, so a log not due without that cut is not due with it: skip the header scan.
    if !choose(i64::MAX).4 {
        return Ok(summary);
    }
    let mut txns = LogTransactions::default();
    for v in views {
        observe_segment(v, &mut txns)?;
    }
    let (cleanable, dirty, total, dirty_bytes, due) = choose(txns.first_unstable_offset().unwrap_or(i64::MAX));
    if !due {
        return Ok(summary);
    }

    // A pass stops at its next chunk once the log is closed (broker shutdown, topic
    // deletion); its `.cleaned` files go on the next open.
    let check_open = || match log {
        Some(l) if l.is_closed() => Err(Error::LogClosed(dir.to_path_buf())),
        _ => Ok(()),
    };
    let mut map = OffsetMap::with_memory(opts.dedupe_buffer_size)?;
    summary.offset_map_bytes = map.memory_bytes();
    let mut mapped_end = first_dirty;
    let (mut done, mut bytes_total) = (0u64, dirty_bytes + total);
    let (mut kept, mut kept_bytes) = (std::collections::HashMap::new(), 0u64);
    let mut live = LiveRecords::default();
    // The CRC-32C of every mapped batch is checked before anything is rewritten. With a
    // core to spare and no I/O limit, a second thread checks them beside the map pass
    // (`verify_dirty`), walking the same mappings; otherwise the map pass checks each.
    let maps = dirty.iter().map(|v| map_segment(v)).collect::<Result<Vec<_>>>()?;
    let parallel = !test_switch!(CHECK_CRC_INLINE) && throttler.is_none_or(|t| !t.is_limited()) && std::thread::available_parallelism().is_ok_and(|n| n.get() > 1);
    let stop = AtomicI64::new(i64::MAX);
    std::thread::scope(|scope| -> Result<()> {
        let verifier = match parallel {
            true => {
                let (dirty, maps, stop) = (&dirty, maps.clone(), &stop);
                let thread = std::thread::Builder::new().name("logstore-cleaner-crc".into());
                Some(thread.spawn_scoped(scope, move || verify_dirty(dirty, maps, shrink, stop))?)
            }
            false => None,
        };
        let map_dirty = || -> Result<()> {
            for (v, m) in dirty.iter().zip(maps) {
                let mut full = false;
                let mut chunks = SegmentChunks::new(v, shrink, m)?;
                live.start_segment(v.base);
                while !full {
                    check_open()?;
                    let Some(chunk) = chunks.next()? else { break };
                    let next = build_offset_map_counting(chunk.bytes, &mut map, &txns, Some(&mut live), !parallel)?;
                    let len = chunk.bytes.len() as u64;
                    full = next < chunk.next_offset;
                    drop(chunk);
                    if next >= 0 {
                        mapped_end = next;
                    }
                    if let Some(t) = throttler {
                        t.maybe_throttle(len);
                    }
                    done += len;
                    observer(&CleanEvent::Progress { bytes_done: done, bytes_total });
                }
                // The rewrite pass reads this segment again: keep its pages mapped, up to a bound.
                if kept_bytes + v.size <= KEEP_MAPPED_BYTES {
                    if let Some(m) = chunks.into_map() {
                        kept_bytes += v.size;
                        kept.insert(v.base, m);
                    }
                }
                if full {
                    break; // the map is full: this pass cleans up to here
                }
            }
            Ok(())
        };
        let mapped = map_dirty();
        stop.store(if mapped.is_ok() { mapped_end } else { i64::MIN }, Ordering::Relaxed);
        let verified = verifier.map_or(Ok(()), |v| v.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)));
        mapped.and(verified)
    })?;
    summary.keys_mapped = map.len();
    let to_clean: Vec<&SegmentView> = cleanable.iter().copied().filter(|v| v.base < mapped_end).collect();
    bytes_total = done + to_clean.iter().map(|v| v.size).sum::<u64>();

    let clean_opts = CleanOptions { now_ms: opts.now_ms, delete_retention_ms: pc.delete_retention_ms, map_end: mapped_end, verified_from: first_dirty, verified_to: mapped_end };
    let mut cleaner = SegmentCleaner::new(&map, clean_opts, &txns);
    let mut cleaned = Vec::new();
    // Records all superseded (`live_records.rs`): the rewrite would drop every batch.
    let superseded = |v: &SegmentView| live.all_superseded(v.base).filter(|_| v.next_offset <= mapped_end);
    for group in group_segments(&to_clean, config, |v| superseded(v).is_some()) {
        let base = group[0].base;
        let mut out = match log {
            Some(_) => {
                for suffix in [".log", ".index", ".timeindex"] {
                    remove_if_exists(&dir.join(file_name(base, &format!("{suffix}{CLEANED}"))))?;
                }
                let mut seg = LogSegment::open_with_suffix(dir, base, config, true, opts.now_ms, CLEANED)?;
                // Written once, fsynced, and read later if at all: past the page cache.
                seg.write_direct()?;
                Some(seg)
            }
            None => None,
        };
        let (mut stats, mut unread) = (CleanStats::default(), 0);
        for v in &group {
            // Count what the rewrite would have, and skip reading the segment again.
            if let Some((batches, records)) = superseded(v).filter(|_| !test_switch!(REWRITE_EVERY_SEGMENT)) {
                unread += 1;
                kept.remove(&v.base);
                let st = CleanStats { bytes_read: v.size, records_read: records, batches_dropped: batches, batches_changed: batches, ..Default::default() };
                stats.add(&st);
                done += v.size;
                observer(&CleanEvent::Progress { bytes_done: done, bytes_total });
                continue;
            }
            let mut chunks = SegmentChunks::new(v, shrink, kept.remove(&v.base))?;
            loop {
                check_open()?;
                let Some(chunk) = chunks.next()? else { break };
                let st = cleaner.clean_into(chunk.bytes, &mut cleaned)?;
                drop(chunk);
                let mut io = st.bytes_read;
                if let Some(seg) = out.as_mut() {
                    seg.append_batches(&cleaned)?;
                    io += cleaned.len() as u64;
                }
                if let Some(t) = throttler {
                    t.maybe_throttle(io);
                }
                stats.add(&st);
                done += st.bytes_read;
                observer(&CleanEvent::Progress { bytes_done: done, bytes_total });
            }
        }
        summary.stats.add(&stats);
        if group.len() == 1 && stats.batches_changed == 0 {
            if let Some(seg) = out {
                seg.delete()?;
            }
            continue; // nothing to change in a lone segment
        }
        summary.log_bytes_after = summary.log_bytes_after - stats.bytes_read + stats.bytes_written;
        let Some(mut seg) = out else {
            summary.segments_cleaned += group.len();
            summary.segments_written += 1;
            summary.segments_unread += unread;
            continue;
        };
        seg.finish_direct()?;
        seg.on_become_inactive()?;
        seg.flush()?;
        observer(&CleanEvent::Step { step: SwapStep::Cleaned, base_offset: base });
        if !log.expect("a log to swap into").swap_in(&group, seg, observer)? {
            return Ok(summary); // the log changed under the pass: the next one retries
        }
        summary.segments_cleaned += group.len();
        summary.segments_written += 1;
        summary.segments_unread += unread;
    }
    summary.cleaned_up_to = mapped_end;
    if let Some(log) = log {
        checkpoint::write(&dir.join(CLEANER_CHECKPOINT_FILE), &[format!("{} {mapped_end}", log.topic_partition_label())])?;
    }
    Ok(summary)
}

fn remove_if_exists(path: &Path) -> Result<()> {
    match fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e).ctx("delete", path),
        _ => Ok(()),
    }
}

fn parse_base(name: &str, suffix: &str) -> Option<i64> {
    let stem = name.strip_suffix(suffix)?;
    (stem.len() == 20 && stem.bytes().all(|b| b.is_ascii_digit())).then(|| stem.parse().ok())?
}

/// The offset after the last whole batch of `file` (its base offset when empty).
fn next_offset_of(file: &File, path: &Path, base: i64) -> Result<i64> {
    let len = file.metadata().ctx("stat segment", path)?.len();
    let (mut pos, mut next) = (0u64, base);
    while let Some(h) = read_header(file, pos).ctx("read segment", path)? {
        if record_batch::check_header(&h, pos).is_err() || pos + h.size() as u64 > len {
            break;
        }
        next = h.next_offset();
        pos += h.size() as u64;
    }
    Ok(next)
}

/// Finishes interrupted swaps in a partition directory; see the module comment. Runs
/// before the log lists its segments. `.cleaned` files are left to the caller's sweep.
pub(crate) fn complete_swaps(dir: &Path) -> Result<()> {
    let (mut swaps, mut logs, mut index_swaps) = (Vec::new(), Vec::new(), Vec::new());
    for entry in fs::read_dir(dir).ctx("list log directory", dir)? {
        let path = entry.ctx("list log directory", dir)?.path();
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        if let Some(base) = parse_base(&name, ".log.swap") {
            swaps.push(base);
        } else if let Some(base) = parse_base(&name, ".log") {
            logs.push(base);
        } else if name.ends_with(".index.swap") || name.ends_with(".timeindex.swap") {
            index_swaps.push(path);
        }
    }
    for path in index_swaps {
        remove_if_exists(&path)?; // the indexes are rebuilt from the swapped-in .log
    }
    swaps.sort_unstable();
    for base in swaps {
        let swap = dir.join(file_name(base, &format!(".log{SWAP}")));
        let next = next_offset_of(&File::open(&swap).ctx("open swap segment", &swap)?, &swap, base)?;
        for &b in logs.iter().filter(|&&b| b == base || (b > base && b < next)) {
            for suffix in [".log", ".index", ".timeindex"] {
                remove_if_exists(&dir.join(file_name(b, suffix)))?;
            }
        }
        checkpoint::sync_dir(dir)?;
        fs::rename(&swap, dir.join(file_name(base, ".log"))).ctx("rename swap segment", &swap)?;
        checkpoint::sync_dir(dir)?;
    }
    Ok(())
}

/// Views of a stopped log's segments read from its files, for a dry run.
fn views_from_files(dir: &Path) -> Result<Vec<SegmentView>> {
    let mut bases = Vec::new();
    for entry in fs::read_dir(dir).ctx("list log directory", dir)? {
        let path = entry.ctx("list log directory", dir)?.path();
        if let Some(base) = parse_base(&path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(), ".log") {
            bases.push(base);
        }
    }
    bases.sort_unstable();
    let n = bases.len();
    let mut views = Vec::with_capacity(n);
    for (i, base) in bases.into_iter().enumerate() {
        let path = dir.join(file_name(base, ".log"));
        let file = File::open(&path).ctx("open segment", &path)?;
        let len = file.metadata().ctx("stat segment", &path)?.len();
        let (mut pos, mut next, mut largest) = (0u64, base, -1i64);
        while let Some(h) = read_header(&file, pos).ctx("read segment", &path)? {
            if record_batch::check_header(&h, pos).is_err() || pos + h.size() as u64 > len {
                break;
            }
            (next, largest) = (h.next_offset(), largest.max(h.max_timestamp));
            pos += h.size() as u64;
        }
        let index_len = |suffix: &str| fs::metadata(dir.join(file_name(base, suffix))).map_or(0, |m| m.len() as usize);
        views.push(SegmentView {
            base,
            size: pos,
            next_offset: next,
            largest_timestamp: largest,
            offset_index_bytes: index_len(".index"),
            time_index_bytes: index_len(".timeindex"),
            active: i + 1 == n,
            path,
            file: Arc::new(file),
        });
    }
    Ok(views)
}

/// What a pass over the stopped log in `dir` would do, reading its files only: nothing
/// is written, renamed or deleted.
pub fn clean_dry_run(dir: &Path, config: &LogConfig, opts: &LogCleanOptions, observer: &dyn Fn(&CleanEvent)) -> Result<LogCleanSummary> {
    let views = views_from_files(dir)?;
    let first_base = views.first().map_or(0, |v| v.base);
    let start = checkpoint::read(&dir.join(crate::log::LOG_START_OFFSET_FILE))?
        .and_then(|e| e.first().and_then(|f| f.get(2)?.parse().ok()))
        .unwrap_or(first_base)
        .max(first_base);
    run_pass(dir, None, &views, config, start, opts, observer)
}

impl Log {
    /// After a truncation to `end`: a cleaner checkpoint past it moves back to it (Kafka's
    /// `maybeTruncateCheckpoint`), so new data written there counts as dirty.
    pub(crate) fn truncate_cleaner_checkpoint(&self, end: i64) -> Result<()> {
        if read_checkpoint(&self.dir)?.is_some_and(|c| c > end) {
            checkpoint::write(&self.dir.join(CLEANER_CHECKPOINT_FILE), &[format!("{} {end}", self.topic_partition_label())])?;
        }
        Ok(())
    }

    /// One cleaning pass; see the module comment. Returns what it did.
    pub fn clean(&self, opts: &LogCleanOptions) -> Result<LogCleanSummary> {
        self.clean_observed(opts, &|_| {})
    }

    /// As `clean`, reporting progress and swap steps to `observer`.
    pub fn clean_observed(&self, opts: &LogCleanOptions, observer: &dyn Fn(&CleanEvent)) -> Result<LogCleanSummary> {
        let _one_pass = self.cleaning.lock();
        let (views, config, log_start) = {
            let inner = self.inner.read();
            inner.check_open(&self.dir)?;
            let active = inner.active().base_offset();
            let views: Vec<SegmentView> = inner
                .segments
                .values()
                .map(|s| -> Result<SegmentView> { Ok(SegmentView {
                    base: s.base_offset(),
                    size: s.size(),
                    next_offset: s.next_offset(),
                    largest_timestamp: s.largest_timestamp(),
                    offset_index_bytes: s.index_entries().0 * crate::offset_index::ENTRY_SIZE,
                    time_index_bytes: s.index_entries().1 * 12,
                    active: s.base_offset() == active,
                    path: s.log_path().to_path_buf(),
                    file: s.file()?,
                }) })
                .collect::<Result<_>>()?;
            (views, inner.config.clone(), inner.log_start_offset)
        };
        run_pass(&self.dir, Some(self), &views, &config, log_start, opts, observer)
    }

    /// Swaps a cleaned group in (steps 2-4 of the module comment). Returns false, deleting
    /// the cleaned files, when a segment of the group changed meanwhile (truncated,
    /// deleted, or made active).
    fn swap_in(&self, group: &[&SegmentView], mut cleaned: LogSegment, observer: &dyn Fn(&CleanEvent)) -> Result<bool> {
        let base = group[0].base;
        let mut inner = self.inner.write();
        let active = inner.active().base_offset();
        let unchanged = inner.check_open(&self.dir).is_ok()
            && group.iter().all(|v| v.base != active && inner.segments.get(&v.base).is_some_and(|s| s.size() == v.size));
        if !unchanged {
            drop(inner);
            cleaned.delete()?;
            return Ok(false);
        }
        cleaned.change_suffix(CLEANED, SWAP)?;
        checkpoint::sync_dir(&self.dir)?;
        observer(&CleanEvent::Step { step: SwapStep::Swap, base_offset: base });
        // Old segments are renamed `.deleted` under the lock (what a reopen deletes) and
        // scheduled for deletion under it too (so `close`, which takes the lock, sees
        // them); with no delay they are unlinked after it, so freeing their pages does
        // not hold up appends and reads.
        let mut old = Vec::with_capacity(group.len() * 3);
        for v in group {
            old.extend(inner.segments.remove(&v.base).expect("checked above").into_deleted()?);
        }
        let unlink_now = self.deletions.delete_after(old, inner.config.file_delete_delay_ms);
        checkpoint::sync_dir(&self.dir)?;
        observer(&CleanEvent::Step { step: SwapStep::OldDeleted, base_offset: base });
        cleaned.change_suffix(SWAP, "")?;
        checkpoint::sync_dir(&self.dir)?;
        inner.segments.insert(base, cleaned);
        observer(&CleanEvent::Step { step: SwapStep::Swapped, base_offset: base });
        drop(inner);
        unlink_all(&unlink_now)?;
        Ok(true)
    }
}

#[cfg(test)]
#[path = "log_clean_pass_tests.rs"]
mod tests;
