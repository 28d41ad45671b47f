//! A read-only view of one partition directory, for analytics reading next to a running
//! broker: it never opens a file for writing, never takes the directory over (no
//! recovery, no marker files) and never maps a file, so the broker's rolls, cleanings,
//! retention deletes and index trims cannot break it.
//!
//! - Segments: `<20-digit base offset>.log` files; segment i holds offsets in
//!   [base_i, base_{i+1}). Files ending `.deleted`, `.cleaned`, `.swap` are ignored.
//! - `.index` / `.timeindex` are read whole with `pread` (they are small) and only their
//!   leading strictly increasing entries are used: the active segment's files are
//!   preallocated with zeros past the last entry. An index only narrows where a scan
//!   starts; batch headers decide what is read.
//! - Log start offset: the first segment's base offset, raised by the directory's
//!   `log-start-offset-checkpoint` (DeleteRecords). Log end offset: the offset after the
//!   last whole batch of the last segment.
//! - A scan stops at its end offset (fixed when the query is planned) and at whole
//!   batches. A segment deleted under it (retention) is data loss: an
//!   `OffsetOutOfRange` error, or with `fail_on_data_loss = false` a jump to the new
//!   log start offset.

use std::path::{Path, PathBuf};

use crate::arrow_decoder::{ArrowDecoder, RecordFilter};
use crate::error::{Error, IoContext, Result};
use crate::records::record_batch::DecodedBatch;
use crate::segment_cursor::SegmentCursor;
use crate::transactions::LogTransactions;

fn seg_path(dir: &Path, base: i64, ext: &str) -> PathBuf {
    dir.join(format!("{base:020}.{ext}"))
}

/// Reads a file whole; a missing file is `None`.
fn read_optional(path: &Path) -> Result<Option<Vec<u8>>> {
    match std::fs::read(path) {
        Ok(b) => Ok(Some(b)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).ctx("read index", path),
    }
}

/// `.index` entries (offset, position), the leading strictly increasing ones.
fn offset_index(dir: &Path, base: i64) -> Result<Vec<(i64, u64)>> {
    let Some(b) = read_optional(&seg_path(dir, base, "index"))? else { return Ok(vec![]) };
    let mut out: Vec<(i64, u64)> = Vec::new();
    for e in b.chunks_exact(8) {
        let rel = u32::from_be_bytes(e[0..4].try_into().unwrap()) as i64;
        let pos = u32::from_be_bytes(e[4..8].try_into().unwrap()) as u64;
        if out.last().is_some_and(|&(o, p)| base + rel <= o || pos <= p) || (rel == 0 && pos == 0) {
            break;
        }
        out.push((base + rel, pos));
    }
    Ok(out)
}

/// `.timeindex` entries (timestamp, offset), the leading strictly increasing ones.
fn time_index(dir: &Path, base: i64) -> Result<Vec<(i64, i64)>> {
    let Some(b) = read_optional(&seg_path(dir, base, "timeindex"))? else { return Ok(vec![]) };
    let mut out: Vec<(i64, i64)> = Vec::new();
    for e in b.chunks_exact(12) {
        let ts = i64::from_be_bytes(e[0..8].try_into().unwrap());
        let rel = u32::from_be_bytes(e[8..12].try_into().unwrap()) as i64;
        if out.last().is_some_and(|&(t, o)| ts <= t || base + rel <= o) || (ts == 0 && rel == 0) {
            break;
        }
        out.push((ts, base + rel));
    }
    Ok(out)
}

/// Where to start reading a segment for `offset`: the position of the index entry with
/// the largest offset <= `offset` (entries point at the start of a batch), else 0.
fn start_position(index: &[(i64, u64)], offset: i64) -> u64 {
    let i = index.partition_point(|&(o, _)| o <= offset);
    if i == 0 {
        0
    } else {
        index[i - 1].1
    }
}

/// The first offset that can hold a timestamp >= `ts`: every record up to the offset of
/// the last time index entry below `ts` has a smaller timestamp.
fn first_offset_for_time(tindex: &[(i64, i64)], ts: i64, base: i64) -> i64 {
    let i = tindex.partition_point(|&(t, _)| t < ts);
    if i == 0 {
        base
    } else {
        tindex[i - 1].1 + 1
    }
}

/// Counters of what a reader touched, for tests and metrics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ScanStats {
    pub segments_opened: u64,
    pub bytes_read: u64,
    pub batches_decoded: u64,
}

/// A partition directory, read-only.
#[derive(Clone, Debug)]
pub struct PartitionDir {
    dir: PathBuf,
}

impl PartitionDir {
    pub fn new(dir: &Path) -> Self {
        PartitionDir { dir: dir.to_path_buf() }
    }

    /// Base offsets of the segments, ascending.
    pub fn segments(&self) -> Result<Vec<i64>> {
        let mut out = Vec::new();
        for entry in std::fs::read_dir(&self.dir).ctx("list partition", &self.dir)? {
            let name = entry.ctx("list partition", &self.dir)?.file_name();
            let name = name.to_string_lossy();
            if let Some(stem) = name.strip_suffix(".log") {
                if stem.len() == 20 && stem.bytes().all(|c| c.is_ascii_digit()) {
                    out.push(stem.parse::<i64>().map_err(|e| Error::config("segment", stem, e.to_string()))?);
                }
            }
        }
        out.sort_unstable();
        Ok(out)
    }

    fn checkpointed_start(&self) -> Result<Option<i64>> {
        let path = self.dir.join("log-start-offset-checkpoint");
        let Ok(Some(entries)) = crate::checkpoint::read(&path) else { return Ok(None) };
        Ok(entries.first().and_then(|e| e.last()).and_then(|o| o.parse().ok()))
    }

    pub fn log_start_offset(&self) -> Result<i64> {
        let segs = self.segments()?;
        let first = segs.first().copied().unwrap_or(0);
        Ok(first.max(self.checkpointed_start()?.unwrap_or(0)))
    }

    /// The offset after the last whole batch on disk.
    pub fn log_end_offset(&self) -> Result<i64> {
        let segs = self.segments()?;
        let Some(&last) = segs.last() else { return Ok(0) };
        let index = offset_index(&self.dir, last)?;
        let start = index.last().map_or(0, |e| e.1);
        let path = seg_path(&self.dir, last, "log");
        let mut end = last;
        match SegmentCursor::open(&path, start) {
            Ok(mut c) => {
                while let Some((_, h)) = c.next_header_only()? {
                    end = end.max(h.next_offset());
                }
            }
            // Deleted between listing and opening: the log is being emptied; list again.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return self.log_end_offset(),
            Err(e) => return Err(e).ctx("open segment", &path),
        }
        Ok(end)
    }

    /// The first offset whose record timestamp is >= `ts` (ms), or None.
    pub fn offset_for_timestamp(&self, ts: i64) -> Result<Option<i64>> {
        let segs = self.segments()?;
        for (i, &base) in segs.iter().enumerate() {
            let tindex = time_index(&self.dir, base)?;
            let is_last = i + 1 == segs.len();
            if !is_last && tindex.last().is_some_and(|&(t, _)| t < ts) {
                continue;
            }
            let from = first_offset_for_time(&tindex, ts, base);
            let pos = start_position(&offset_index(&self.dir, base)?, from);
            let path = seg_path(&self.dir, base, "log");
            let mut c = match SegmentCursor::open(&path, pos) {
                Ok(c) => c,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(e).ctx("open segment", &path),
            };
            while let Some((p, b)) = c.next_batch()? {
                let h = crate::records::record_batch::BatchHeader::parse(b);
                if h.is_control() || h.max_timestamp < ts {
                    continue;
                }
                let decoded = DecodedBatch::new(b, p, true)?;
                if let Some(r) = decoded.records()?.iter().find(|r| r.timestamp >= ts) {
                    return Ok(Some(r.offset));
                }
            }
        }
        Ok(None)
    }
}

/// Reads the records of one partition in `filter`'s offset range into Arrow columns,
/// resumable in pieces of at most `max_rows` rows.
pub struct PartitionScan {
    dir: PartitionDir,
    filter: RecordFilter,
    fail_on_data_loss: bool,
    /// Next offset to read; everything below it was returned or skipped.
    next_offset: i64,
    /// The open segment: (its base offset, the next segment's base or None, cursor).
    cursor: Option<(i64, Option<i64>, SegmentCursor)>,
    /// Base offset of the last segment read to its end.
    finished_base: Option<i64>,
    markers: Option<LogTransactions>,
    done: bool,
    pub stats: ScanStats,
}

impl PartitionScan {
    pub fn new(dir: &Path, filter: RecordFilter, fail_on_data_loss: bool) -> Self {
        PartitionScan {
            dir: PartitionDir::new(dir),
            filter,
            fail_on_data_loss,
            next_offset: filter.start_offset,
            cursor: None,
            finished_base: None,
            markers: None,
            done: filter.start_offset >= filter.end_offset,
            stats: ScanStats::default(),
        }
    }

    pub fn next_offset(&self) -> i64 {
        self.next_offset
    }

    pub fn is_done(&self) -> bool {
        self.done
    }

    /// Appends rows to `decoder` until it holds at least `max_rows` or the scan is done.
    pub fn read_into(&mut self, decoder: &mut ArrowDecoder, max_rows: usize) -> Result<()> {
        while !self.done && decoder.rows() < max_rows {
            if self.cursor.is_none() && !self.open_next_segment()? {
                self.done = true;
                break;
            }
            let (base, next_base, cursor) = self.cursor.as_mut().expect("a segment is open");
            let before = cursor.bytes_read;
            let next = cursor.next_batch()?;
            let Some((pos, batch)) = next else {
                // Every offset below the next segment's base was in this one (compaction
                // may have removed the last ones).
                self.stats.bytes_read += cursor.bytes_read - before;
                if let Some(nb) = *next_base {
                    self.next_offset = self.next_offset.max(nb);
                }
                self.finished_base = Some(*base);
                self.cursor = None;
                continue;
            };
            let h = crate::records::record_batch::BatchHeader::parse(batch);
            if h.base_offset >= self.filter.end_offset {
                self.done = true;
            } else if h.next_offset() > self.next_offset {
                let aborted = h.is_transactional() && !h.is_control() && {
                    if self.markers.is_none() {
                        self.markers = Some(scan_markers(&self.dir, h.base_offset)?);
                    }
                    self.markers.as_ref().expect("scanned").is_aborted(&h)
                };
                let filter = RecordFilter { start_offset: self.next_offset, ..self.filter };
                let a = decoder.append_batch(batch, pos, &filter, aborted)?;
                self.stats.batches_decoded += 1;
                self.next_offset = a.next_offset.min(self.filter.end_offset);
            }
            let (_, _, cursor) = self.cursor.as_mut().expect("a segment is open");
            self.stats.bytes_read += cursor.bytes_read - before;
        }
        if self.next_offset >= self.filter.end_offset {
            self.done = true;
        }
        Ok(())
    }

    /// Opens the segment holding `next_offset` (or the next one after it), positioned by
    /// the indexes. False when no segment is left below the end offset.
    fn open_next_segment(&mut self) -> Result<bool> {
        loop {
            let segs = self.dir.segments()?;
            let start = self.dir.log_start_offset()?;
            if self.next_offset < start {
                if self.fail_on_data_loss {
                    return Err(Error::OffsetOutOfRange {
                        offset: self.next_offset,
                        log_start_offset: start,
                        log_end_offset: self.dir.log_end_offset()?,
                    });
                }
                self.next_offset = start;
            }
            // The last segment whose base is <= next_offset, else the first one above it.
            let mut i = segs.partition_point(|&b| b <= self.next_offset).saturating_sub(1);
            if segs.get(i).is_some_and(|&b| Some(b) <= self.finished_base) {
                // Read to its end already (the last segment, or one rolled meanwhile).
                i += 1;
            }
            let Some(&base) = segs.get(i) else { return Ok(false) };
            if base >= self.filter.end_offset {
                return Ok(false);
            }
            let next_base = segs.get(i + 1).copied();
            let mut from = self.next_offset.max(base);
            if self.filter.min_timestamp > i64::MIN {
                let tindex = time_index(&self.dir.dir, base)?;
                if let (Some(nb), Some(&(t, _))) = (next_base, tindex.last()) {
                    if t < self.filter.min_timestamp {
                        // A rolled segment whose largest timestamp is too small: skip it whole.
                        self.next_offset = nb;
                        continue;
                    }
                }
                from = from.max(first_offset_for_time(&tindex, self.filter.min_timestamp, base));
            }
            let pos = start_position(&offset_index(&self.dir.dir, base)?, from);
            let path = seg_path(&self.dir.dir, base, "log");
            match SegmentCursor::open(&path, pos) {
                Ok(c) => {
                    self.stats.segments_opened += 1;
                    self.next_offset = from;
                    // Reading a segment to its end covers every offset below the next base.
                    self.cursor = Some((base, next_base, c));
                    return Ok(true);
                }
                // Deleted (retention) or swapped after listing: list again.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(e).ctx("open segment", &path),
            }
        }
    }
}

/// The transactions of every batch at or after `from`, to the log end: enough to tell
/// whether a transactional batch at `from` or later was aborted (its producer's next
/// marker is ABORT; no marker yet means open, not aborted).
fn scan_markers(dir: &PartitionDir, from: i64) -> Result<LogTransactions> {
    let mut markers = LogTransactions::default();
    let segs = dir.segments()?;
    let i = segs.partition_point(|&b| b <= from).saturating_sub(1);
    for &base in &segs[i.min(segs.len())..] {
        let pos = if base <= from { start_position(&offset_index(&dir.dir, base)?, from) } else { 0 };
        let path = seg_path(&dir.dir, base, "log");
        let mut c = match SegmentCursor::open(&path, pos) {
            Ok(c) => c,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e).ctx("open segment", &path),
        };
        while let Some((p, b)) = c.next_batch()? {
            markers.observe_batch(b, p)?;
        }
    }
    Ok(markers)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::{Log, OpenOptions};
    use crate::log_config::LogConfig;
    use crate::records::record::NewRecord;
    use crate::records::record_batch::{encode, BatchOptions};

    fn batch(n: usize, ts: i64) -> Vec<u8> {
        let recs: Vec<NewRecord> = (0..n)
            .map(|i| NewRecord { offset: i as i64, timestamp: ts + i as i64, key: None, value: Some(vec![1; 100]), headers: vec![] })
            .collect();
        encode(&recs, &BatchOptions::default())
    }

    fn fixture() -> (tempfile::TempDir, PathBuf) {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().join("t-0");
        let cfg = LogConfig { segment_bytes: 5_000, ..Default::default() };
        let log = Log::open(&dir, cfg, OpenOptions::default()).unwrap();
        for i in 0..50 {
            log.append(&batch(10, 1_000 * i), &crate::log::AppendOptions { assign_offsets: true, ..Default::default() }).unwrap();
        }
        log.close().unwrap();
        (t, dir)
    }

    #[test]
    fn offsets_and_timestamps() {
        let (_t, dir) = fixture();
        let p = PartitionDir::new(&dir);
        assert!(p.segments().unwrap().len() > 5);
        assert_eq!(p.log_start_offset().unwrap(), 0);
        assert_eq!(p.log_end_offset().unwrap(), 500);
        assert_eq!(p.offset_for_timestamp(7_005).unwrap(), Some(75));
        assert_eq!(p.offset_for_timestamp(7_011).unwrap(), Some(80));
        assert_eq!(p.offset_for_timestamp(1 << 40).unwrap(), None);
    }

    #[test]
    fn scan_skips_segments_and_stops_at_end() {
        let (_t, dir) = fixture();
        let f = RecordFilter { start_offset: 300, end_offset: 320, ..Default::default() };
        let total = PartitionDir::new(&dir).segments().unwrap().len() as u64;
        assert!(total >= 10);
        let mut s = PartitionScan::new(&dir, f, true);
        let mut d = ArrowDecoder::new("t", 0, false);
        s.read_into(&mut d, 1 << 20).unwrap();
        assert_eq!(d.rows(), 20);
        assert!(s.is_done());
        // 20 offsets span at most two segments of ~4 batches.
        assert!(s.stats.segments_opened <= 2);
        let f = RecordFilter { min_timestamp: 45_000, ..Default::default() };
        let mut s = PartitionScan::new(&dir, f, true);
        s.read_into(&mut d, 1 << 20).unwrap();
        assert_eq!(d.finish().num_rows(), 20 + 50);
        assert!(s.stats.segments_opened <= 2);
        let mut all = PartitionScan::new(&dir, RecordFilter::default(), true);
        all.read_into(&mut d, 1 << 20).unwrap();
        assert_eq!(d.rows(), 500);
        assert_eq!(all.stats.segments_opened, total);
        assert!(s.stats.bytes_read * 4 < all.stats.bytes_read);
    }

    #[test]
    fn lost_segment_follows_fail_on_data_loss() {
        let (_t, dir) = fixture();
        let segs = PartitionDir::new(&dir).segments().unwrap();
        std::fs::remove_file(seg_path(&dir, segs[0], "log")).unwrap();
        let mut d = ArrowDecoder::new("t", 0, false);
        assert!(PartitionScan::new(&dir, RecordFilter::default(), true).read_into(&mut d, 10).is_err());
        let mut s = PartitionScan::new(&dir, RecordFilter { end_offset: 500, ..Default::default() }, false);
        s.read_into(&mut d, 1 << 20).unwrap();
        assert_eq!(d.rows() as i64, 500 - segs[1]);
    }
}
