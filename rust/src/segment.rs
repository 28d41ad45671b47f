//! One log segment: `<base>.log` plus its `.index` and `.timeindex` (Kafka's `LogSegment`).
//!
//! Invariants:
//! - `size` bytes of the `.log` file are whole, validated batches; `size` is published
//!   only after a write completed, so a reader bounded by it never sees a torn batch.
//! - Batch offsets strictly increase and are all >= `base_offset`; offsets relative to
//!   `base_offset` fit in an i32 (the log rolls before they would not).
//! - `next_offset` is the last offset of the last batch + 1 (`base_offset` when empty).
//! - The file may be longer than `size` only transiently, inside a failed write or an
//!   `undo`, which truncate it back.
//! - Index entries are optional: one is due every `index.interval.bytes`, but when a
//!   page of either index cannot get storage (a full disk, `index_file.rs`) both skip
//!   it and the next batch is indexed instead. So a skipped entry never leaves the
//!   time index behind the offset index: its last entry still holds the max timestamp
//!   up to the batch of the offset index's last entry, where `load` starts its walk.
//! - `mark` and `undo` take back published batches (an append whose later step
//!   failed): the file is cut back to the marked size, index entries added since are
//!   dropped and the cached tail state is as it was.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::direct_writer::DirectWriter;
use crate::file_cache::LazyFile;
use crate::error::{Error, IoContext, Result};
use crate::log_config::LogConfig;
use crate::offset_index::OffsetIndex;
use crate::records::record_batch::{self, BatchHeader, DecodedBatch, HEADER_SIZE, LOG_OVERHEAD};
use crate::segment_recovery::RecoveryCut;
use crate::time_index::TimeIndex;

pub fn file_name(base_offset: i64, suffix: &str) -> String {
    format!("{base_offset:020}{suffix}")
}

/// One batch ready to be written: its final header and its unchanged record area.
pub struct PreparedBatch<'a> {
    pub header_bytes: [u8; HEADER_SIZE],
    pub header: BatchHeader,
    pub records: &'a [u8],
}

/// A segment's state before an append (`LogSegment::mark`), for `LogSegment::undo`.
pub struct AppendMark {
    size: u64,
    next_offset: i64,
    max_timestamp: i64,
    offset_of_max_timestamp: i64,
    rolling_timestamp: Option<i64>,
    bytes_since_last_index_entry: usize,
    index_entries: (usize, usize),
}

/// The suffix of the files of a segment that left the log and waits to be unlinked.
pub const DELETED_SUFFIX: &str = ".deleted";

pub struct LogSegment {
    base_offset: i64,
    log_path: PathBuf,
    /// The `.log` file, opened on use and closed when idle (`file_cache.rs`).
    log: LazyFile,
    size: u64,
    offset_index: OffsetIndex,
    time_index: TimeIndex,
    index_interval_bytes: usize,
    bytes_since_last_index_entry: usize,
    next_offset: i64,
    max_timestamp: i64,
    offset_of_max_timestamp: i64,
    /// Max timestamp of the first batch, for `segment.ms` (None: no timestamps yet).
    rolling_timestamp: Option<i64>,
    created_ms: i64,
    /// Set by `write_direct`: appends go through it, bypassing the page cache, and the
    /// file's bytes are whole only after `flush`.
    direct: Option<DirectWriter>,
}

/// Reads the 61-byte header at `pos`, or None if the file ends before a whole header.
pub fn read_header(file: &File, pos: u64) -> std::io::Result<Option<BatchHeader>> {
    let mut buf = [0u8; HEADER_SIZE];
    let mut got = 0;
    while got < HEADER_SIZE {
        match file.read_at(&mut buf[got..], pos + got as u64) {
            Ok(0) => return Ok(None),
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(Some(BatchHeader::parse(&buf)))
}

impl LogSegment {
    /// Opens (or creates) the segment files. Nothing is validated here: the log either
    /// runs `recover()` or `load()` next.
    pub fn open(dir: &Path, base_offset: i64, config: &LogConfig, active: bool, now_ms: i64) -> Result<Self> {
        Self::open_with_suffix(dir, base_offset, config, active, now_ms, "")
    }

    /// As `open`, for files named `<base>.log<suffix>`, `<base>.index<suffix>` and
    /// `<base>.timeindex<suffix>` (the cleaner's `.cleaned` and `.swap` files).
    pub fn open_with_suffix(dir: &Path, base_offset: i64, config: &LogConfig, active: bool, now_ms: i64, suffix: &str) -> Result<Self> {
        let log_path = dir.join(file_name(base_offset, &format!(".log{suffix}")));
        let log = OpenOptions::new().read(true).write(true).create(true).truncate(false).open(&log_path).ctx("open segment", &log_path)?;
        let size = log.metadata().ctx("stat segment", &log_path)?.len();
        let log = LazyFile::with_file(&log_path, log);
        let idx = dir.join(file_name(base_offset, &format!(".index{suffix}")));
        let tidx = dir.join(file_name(base_offset, &format!(".timeindex{suffix}")));
        let offset_index = OffsetIndex::open(&idx, base_offset, config.segment_index_bytes, active)?;
        let time_index = TimeIndex::open(&tidx, base_offset, config.segment_index_bytes, active)?;
        Ok(LogSegment {
            base_offset,
            log_path,
            log,
            size,
            offset_index,
            time_index,
            index_interval_bytes: config.index_interval_bytes,
            bytes_since_last_index_entry: 0,
            next_offset: base_offset,
            max_timestamp: -1,
            offset_of_max_timestamp: base_offset,
            rolling_timestamp: None,
            created_ms: now_ms,
            direct: None,
        })
    }

    pub fn base_offset(&self) -> i64 {
        self.base_offset
    }
    pub fn size(&self) -> u64 {
        self.size
    }
    pub fn next_offset(&self) -> i64 {
        self.next_offset
    }
    pub fn log_path(&self) -> &Path {
        &self.log_path
    }
    /// The open `.log` file (opened again if it was closed while idle).
    pub fn file(&self) -> Result<Arc<File>> {
        self.log.get().ctx("open segment", &self.log_path)
    }
    pub fn index_entries(&self) -> (usize, usize) {
        (self.offset_index.entries(), self.time_index.entries())
    }
    pub fn max_timestamp(&self) -> i64 {
        self.max_timestamp
    }
    pub fn offset_index(&self) -> &OffsetIndex {
        &self.offset_index
    }

    /// The timestamp retention compares against: the max record timestamp, or the
    /// file's modification time when no record carries one (as Kafka does).
    pub fn largest_timestamp(&self) -> i64 {
        if self.max_timestamp >= 0 {
            return self.max_timestamp;
        }
        std::fs::metadata(&self.log_path)
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(self.created_ms, |d| d.as_millis() as i64)
    }

    /// Loads a cleanly closed segment: checks the indexes against the file and walks
    /// the batch headers after the last index entry. Errors mean "run recover()".
    pub fn load(&mut self) -> Result<()> {
        let corrupt = |path: &Path, reason: String| Error::CorruptIndex { path: path.to_path_buf(), reason };
        // An absent index file is an empty index (`index_file.rs`).
        let files = [(self.offset_index.exists(), self.offset_index.path().to_path_buf(), 8u64), (self.time_index.exists(), self.time_index.path().to_path_buf(), 12)];
        for (_, path, entry) in files.into_iter().filter(|f| f.0) {
            let len = std::fs::metadata(&path).ctx("stat index", &path)?.len();
            if len % entry != 0 {
                return Err(corrupt(&path, format!("{len} bytes is not a multiple of {entry}")));
            }
        }
        // Bytes past the entries of a cleanly closed index are zeros from preallocation.
        self.drop_zero_tail_entries();
        // Walk from the last index entry; it must point at a batch ending at its offset.
        let file = self.file()?;
        let (mut next, mut pos) = (self.base_offset, 0u64);
        if let Some((o, p)) = self.offset_index.last_entry() {
            match read_header(&file, p as u64).ctx("read segment", &self.log_path)? {
                Some(h) if h.magic == record_batch::MAGIC && h.last_offset() == o => (next, pos) = (h.base_offset, p as u64),
                _ => return Err(corrupt(self.offset_index.path(), format!("last entry ({o}, {p}) is not a batch ending at {o}"))),
            }
        }
        let mut max_ts = self.time_index.last_entry().unwrap_or((-1, self.base_offset));
        let mut buf = Vec::new();
        self.bytes_since_last_index_entry = 0;
        while pos < self.size {
            let h = read_header(&file, pos)
                .ctx("read segment", &self.log_path)?
                .ok_or_else(|| Error::corrupt(pos, "partial batch header at the end of the segment"))?;
            record_batch::check_header(&h, pos)?;
            if h.base_offset < next || pos + h.size() as u64 > self.size {
                return Err(Error::corrupt(pos, "batch out of order or cut short"));
            }
            // The tail after the last index entry is at most index.interval.bytes plus one
            // batch: validate it whole, CRC included, so a torn or damaged tail is caught.
            buf.resize(h.size(), 0);
            file.read_exact_at(&mut buf, pos).ctx("read segment", &self.log_path)?;
            record_batch::validate(&buf, pos, false)?;
            if h.max_timestamp > max_ts.0 {
                max_ts = (h.max_timestamp, h.last_offset());
            }
            if !self.offset_index.exists() && self.bytes_since_last_index_entry > self.index_interval_bytes {
                // An entry was due here: the index file went missing (rebuild it).
                return Err(corrupt(self.offset_index.path(), format!("no file, but an entry was due at position {pos}")));
            }
            next = h.next_offset();
            pos += h.size() as u64;
            self.bytes_since_last_index_entry += h.size();
        }
        self.offset_index.sanity_check(next, self.size.max(1))?;
        self.time_index.sanity_check(next)?;
        // Both indexes gain entries together (the time index whenever timestamps grew),
        // so a time index emptied while the offset index has entries is damaged.
        if self.time_index.entries() == 0 && self.offset_index.entries() > 0 && max_ts.0 >= 0 {
            return Err(Error::CorruptIndex { path: self.time_index.path().to_path_buf(), reason: "empty beside a non-empty offset index".into() });
        }
        self.next_offset = next;
        (self.max_timestamp, self.offset_of_max_timestamp) = max_ts;
        if self.size > 0 {
            self.rolling_timestamp = read_header(&file, 0).ctx("read segment", &self.log_path)?.map(|h| h.max_timestamp);
        }
        Ok(())
    }

    fn drop_zero_tail_entries(&mut self) {
        // An all-zero entry can only be the first one (relative offset 0 at position 0).
        let n = (1..self.offset_index.entries()).find(|&i| self.offset_index.entry(i) == (self.base_offset, 0));
        if let Some(n) = n {
            self.offset_index.truncate_entries(n);
        }
        let n = (0..self.time_index.entries()).find(|&i| self.time_index.entry(i) == (0, self.base_offset));
        if let Some(n) = n {
            self.time_index.truncate_entries(n);
        }
    }

    /// Re-validates every batch (CRC included), rebuilds both indexes and truncates the
    /// file at the first torn, corrupt or out-of-order batch. Returns what was cut.
    ///
    /// Offsets must continue: a batch starting below the expected next offset is out of
    /// order, and with `contiguous` a batch starting above it is too (its baseOffset lies
    /// outside the CRC, so a damaged one would otherwise move the log end offset
    /// anywhere). `contiguous` is for the active segment of a log that is not compacted:
    /// the cleaner never rewrites an active segment, while other segments may keep the
    /// gaps of batches it removed (a log compacted before its policy changed).
    pub fn recover(&mut self, config: &LogConfig, contiguous: bool) -> Result<RecoveryCut> {
        let strict = contiguous && !config.compacted();
        let file = self.file()?;
        let file_len = file.metadata().ctx("stat segment", &self.log_path)?.len();
        self.offset_index.reset(config.segment_index_bytes)?;
        self.time_index.reset(config.segment_index_bytes)?;
        self.size = 0;
        self.next_offset = self.base_offset;
        self.max_timestamp = -1;
        self.offset_of_max_timestamp = self.base_offset;
        self.rolling_timestamp = None;
        self.bytes_since_last_index_entry = 0;
        // `pos` is the file position of buf[0]; `needed` grows the buffer for a batch
        // larger than the default chunk.
        let mut buf: Vec<u8> = Vec::new();
        let (mut pos, mut needed) = (0u64, 0usize);
        'scan: while pos < file_len {
            let chunk = ((file_len - pos) as usize).min((8usize << 20).max(needed));
            buf.resize(chunk, 0);
            file.read_exact_at(&mut buf, pos).ctx("read segment", &self.log_path)?;
            let mut at = 0usize;
            loop {
                if buf.len() - at < HEADER_SIZE {
                    if pos + (buf.len() as u64) < file_len && at > 0 {
                        pos += at as u64;
                        continue 'scan;
                    }
                    break 'scan; // the end, or a torn header at the end of the file
                }
                let h = BatchHeader::parse(&buf[at..]);
                if record_batch::check_header(&h, pos + at as u64).is_err() {
                    break 'scan;
                }
                if at + h.size() > buf.len() {
                    if pos + (at + h.size()) as u64 > file_len {
                        break 'scan; // torn batch at the end of the file
                    }
                    needed = h.size();
                    pos += at as u64;
                    continue 'scan;
                }
                let batch = &buf[at..at + h.size()];
                if record_batch::validate(batch, pos + at as u64, false).is_err()
                    || h.base_offset < self.next_offset
                    || (strict && h.base_offset != self.next_offset)
                    || h.last_offset() - self.base_offset > i32::MAX as i64
                {
                    break 'scan;
                }
                self.index_batch(&h, self.size);
                self.size += h.size() as u64;
                at += h.size();
            }
        }
        let cut = if file_len > self.size { RecoveryCut::survey(&file, self.size, file_len) } else { RecoveryCut::default() };
        if cut.bytes > 0 {
            file.set_len(self.size).ctx("truncate segment", &self.log_path)?;
        }
        Ok(cut)
    }

    /// Updates indexes and cached state for a batch written at `position`.
    fn index_batch(&mut self, h: &BatchHeader, position: u64) {
        if self.rolling_timestamp.is_none() {
            self.rolling_timestamp = Some(h.max_timestamp);
        }
        if h.max_timestamp > self.max_timestamp {
            self.max_timestamp = h.max_timestamp;
            self.offset_of_max_timestamp = h.last_offset();
        }
        if self.bytes_since_last_index_entry > self.index_interval_bytes {
            // Both indexes take this batch's entries or neither does (a full disk: see
            // the module comment), so the next batch tries again.
            let time_entry = self.time_index.advances(self.max_timestamp, self.offset_of_max_timestamp);
            if self.offset_index.prepare_next() && (!time_entry || self.time_index.prepare_next()) {
                self.offset_index.append(h.last_offset(), position as u32);
                self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp);
                self.bytes_since_last_index_entry = 0;
            }
        }
        self.bytes_since_last_index_entry += h.size();
        self.next_offset = h.next_offset();
    }

    /// True when this segment must roll before taking `size` more bytes whose last
    /// offset is `last_offset` (Kafka's `shouldRoll`).
    /// `segment.ms` measures, as Kafka does, from the first batch's max timestamp to the
    /// incoming batches' max timestamp, or from the segment's creation to now when the
    /// first batch has no timestamp.
    pub fn should_roll(&self, config: &LogConfig, size: usize, last_offset: i64, max_timestamp: i64, now_ms: i64) -> bool {
        if self.size == 0 {
            return false;
        }
        let waited = match self.rolling_timestamp.filter(|t| *t >= 0) {
            Some(first) => max_timestamp - first,
            None => now_ms - self.created_ms,
        };
        self.size + size as u64 > config.segment_bytes
            || waited > config.segment_ms - config.segment_jitter_ms
            || self.offset_index.is_full()
            || self.time_index.is_full()
            || last_offset - self.base_offset > i32::MAX as i64
            || self.size + size as u64 > u32::MAX as u64
    }

    /// Writes prepared batches at the end of the file with one `pwritev` per 512 iovecs,
    /// then indexes and publishes them. On a failed write the file is cut back.
    pub fn append(&mut self, batches: &[PreparedBatch<'_>]) -> Result<()> {
        let start = self.size;
        if let Some(d) = self.direct.as_mut() {
            for b in batches {
                d.write(&b.header_bytes).and_then(|_| d.write(b.records)).ctx("write segment", &self.log_path)?;
            }
            self.publish(batches, start);
            return Ok(());
        }
        let file = self.file()?;
        if let Err(e) = write_all_vectored(&file, &mut iovecs(batches), start) {
            let _ = file.set_len(start);
            return Err(e).ctx("write segment", &self.log_path);
        }
        self.publish(batches, start);
        Ok(())
    }

    /// `append`, with `check` (the batches' content validation) running on the validation
    /// pool while the bytes are written. The batches are published only when both succeed;
    /// otherwise the file is cut back to where it ended, and the write's error (or else
    /// the check's) is returned. Readers never see the unpublished bytes: they stop at
    /// `size`, and recovery re-validates anything a crash leaves past it.
    pub fn append_checked<C>(&mut self, batches: &[PreparedBatch<'_>], check: C) -> Result<()>
    where
        C: FnOnce() -> Result<()> + Send,
    {
        let start = self.size;
        let mut iov = iovecs(batches);
        let log = self.file()?;
        let (checked, written) = crate::validation_pool::beside(check, || write_all_vectored(&log, &mut iov, start));
        if let Err(e) = written.ctx("write segment", &self.log_path).and(checked) {
            let _ = log.set_len(start);
            return Err(e);
        }
        self.publish(batches, start);
        Ok(())
    }

    /// The state `undo` returns to.
    pub fn mark(&self) -> AppendMark {
        AppendMark {
            size: self.size,
            next_offset: self.next_offset,
            max_timestamp: self.max_timestamp,
            offset_of_max_timestamp: self.offset_of_max_timestamp,
            rolling_timestamp: self.rolling_timestamp,
            bytes_since_last_index_entry: self.bytes_since_last_index_entry,
            index_entries: self.index_entries(),
        }
    }

    /// Takes back the batches published since `mark` (see the module comment). The file
    /// is cut back as after a failed write; should cutting fail too, the bytes past
    /// `size` stay until the next append overwrites them (readers never see them, but
    /// recovery after a crash before then would take back whole batches among them).
    pub fn undo(&mut self, mark: &AppendMark) {
        debug_assert!(self.direct.is_none(), "undo is for appends through the page cache");
        if self.size > mark.size {
            if let Ok(file) = self.file() {
                let _ = file.set_len(mark.size);
            }
        }
        self.size = mark.size;
        self.next_offset = mark.next_offset;
        self.max_timestamp = mark.max_timestamp;
        self.offset_of_max_timestamp = mark.offset_of_max_timestamp;
        self.rolling_timestamp = mark.rolling_timestamp;
        self.bytes_since_last_index_entry = mark.bytes_since_last_index_entry;
        self.offset_index.truncate_entries(mark.index_entries.0);
        self.time_index.truncate_entries(mark.index_entries.1);
    }

    fn publish(&mut self, batches: &[PreparedBatch<'_>], start: u64) {
        let mut pos = start;
        for b in batches {
            self.index_batch(&b.header, pos);
            pos += b.header.size() as u64;
        }
        self.size = pos;
    }

    /// Finds the first batch whose last offset >= `offset`, scanning headers forward from
    /// the index entry at or below it, and never past `self.size`.
    pub fn translate_offset(&self, offset: i64) -> Result<Option<(u64, BatchHeader)>> {
        let (_, start) = self.offset_index.lookup(offset);
        match self.scan_from(start as u64, offset) {
            Ok(found) => Ok(found),
            // An index that points into the middle of a batch: fall back to a full scan.
            Err(Error::CorruptRecord { .. }) if start > 0 => self.scan_from(0, offset),
            Err(e) => Err(e),
        }
    }

    fn scan_from(&self, mut pos: u64, offset: i64) -> Result<Option<(u64, BatchHeader)>> {
        let file = self.file()?;
        while pos + LOG_OVERHEAD as u64 <= self.size {
            let h = read_header(&file, pos).ctx("read segment", &self.log_path)?.ok_or_else(|| Error::corrupt(pos, "segment ends inside a batch header"))?;
            record_batch::check_header(&h, pos)?;
            if h.last_offset() >= offset {
                return Ok(Some((pos, h)));
            }
            pos += h.size() as u64;
        }
        Ok(None)
    }

    /// The byte range of whole batches starting at the batch holding `offset`: at most
    /// `max_size` bytes (but the first batch whole when `min_one`), only batches whose
    /// last offset is below `max_offset`. Returns (position, length, first header, last offset).
    pub fn read_range(&self, offset: i64, max_size: usize, max_offset: i64, min_one: bool) -> Result<Option<(u64, u64, BatchHeader, i64)>> {
        let Some((start, first)) = self.translate_offset(offset)? else { return Ok(None) };
        if first.last_offset() >= max_offset || (!min_one && first.size() > max_size) {
            return Ok(None);
        }
        let file = self.file()?;
        let mut end = start + first.size() as u64;
        let mut last = first.last_offset();
        let limit = (start + max_size as u64).min(self.size);
        // Jump over whole indexed batches instead of reading every header: the batch at
        // the last index entry within the limits (or the one before it, which always
        // fits) starts the walk, so at most one index interval of headers is read.
        if let Some(i) = self.offset_index.last_entry_within(limit, max_offset) {
            for j in [Some(i), i.checked_sub(1)].into_iter().flatten() {
                let (_, p) = self.offset_index.entry(j);
                let p = p as u64;
                if p < end {
                    break;
                }
                let Some(h) = read_header(&file, p).ctx("read segment", &self.log_path)? else { break };
                if p + h.size() as u64 <= limit && h.last_offset() < max_offset {
                    end = p + h.size() as u64;
                    last = h.last_offset();
                    break;
                }
            }
        }
        while end + (HEADER_SIZE as u64) <= self.size && end < limit {
            let Some(h) = read_header(&file, end).ctx("read segment", &self.log_path)? else { break };
            if h.last_offset() >= max_offset || end + h.size() as u64 > limit {
                break;
            }
            end += h.size() as u64;
            last = h.last_offset();
        }
        Ok(Some((start, end - start, first, last)))
    }

    /// First record with timestamp >= `ts` at or after `start_offset`: (offset, timestamp).
    pub fn find_offset_by_timestamp(&self, ts: i64, start_offset: i64) -> Result<Option<(i64, i64)>> {
        if self.max_timestamp < ts {
            return Ok(None);
        }
        // Entries with timestamp < ts bound where the answer can start.
        let (_, from_offset) = self.time_index.lookup(ts.saturating_sub(1));
        let (_, pos) = self.offset_index.lookup(from_offset.max(start_offset));
        let mut pos = pos as u64;
        let file = self.file()?;
        while pos + HEADER_SIZE as u64 <= self.size {
            let h = read_header(&file, pos).ctx("read segment", &self.log_path)?.ok_or_else(|| Error::corrupt(pos, "segment ends inside a batch header"))?;
            record_batch::check_header(&h, pos)?;
            if h.max_timestamp >= ts && h.last_offset() >= start_offset {
                let mut buf = vec![0u8; h.size()];
                file.read_exact_at(&mut buf, pos).ctx("read segment", &self.log_path)?;
                let batch = DecodedBatch::new(&buf, pos, true)?;
                for r in batch.records()? {
                    if r.timestamp >= ts && r.offset >= start_offset {
                        return Ok(Some((r.offset, r.timestamp)));
                    }
                }
            }
            pos += h.size() as u64;
        }
        Ok(None)
    }

    /// Removes every batch whose last offset >= `offset`. Returns the base offset of the
    /// first removed batch, if any was removed.
    pub fn truncate_to(&mut self, offset: i64, config: &LogConfig) -> Result<Option<i64>> {
        let Some((pos, h)) = self.translate_offset(offset)? else { return Ok(None) };
        self.file()?.set_len(pos).ctx("truncate segment", &self.log_path)?;
        self.size = pos;
        self.offset_index.truncate_to(h.base_offset);
        self.time_index.truncate_to(h.base_offset);
        // Rebuild the cached tail state (max timestamp, next offset) from what is left.
        if self.load().is_err() {
            self.recover(config, false)?;
        }
        Ok(Some(h.base_offset))
    }

    /// Called when the segment stops being active: records its max timestamp in the time
    /// index and trims both index files.
    pub fn on_become_inactive(&mut self) -> Result<()> {
        self.seal(true)
    }

    /// As `on_become_inactive`, for the active segment of a log being closed: a time
    /// index without a file gets no entry (nor a file). The segment reopens as the
    /// active one, whose max timestamp `load` reads from the batches after the last
    /// offset index entry; the offset index gets its first entry with the time index's
    /// first, so it has no file either and that walk covers the whole segment.
    pub fn on_close(&mut self) -> Result<()> {
        self.seal(self.time_index.exists())
    }

    fn seal(&mut self, final_time_entry: bool) -> Result<()> {
        if self.max_timestamp >= 0 && final_time_entry {
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp);
        }
        self.offset_index.trim()?;
        self.time_index.trim()
    }

    /// Makes a trimmed segment appendable again (it became the last one).
    pub fn on_become_active(&mut self, config: &LogConfig) -> Result<()> {
        self.offset_index.make_appendable(config.segment_index_bytes)?;
        self.time_index.make_appendable(config.segment_index_bytes)
    }

    /// Makes the appends to this new, empty segment bypass the page cache
    /// (`direct_writer.rs`), for a segment written whole and then flushed, as the
    /// cleaner's output is. Its bytes are readable only after `finish_direct`.
    pub fn write_direct(&mut self) -> Result<()> {
        debug_assert_eq!(self.size, 0, "direct writes start on an empty segment");
        self.direct = Some(DirectWriter::new(&self.log_path, self.file()?).ctx("open segment", &self.log_path)?);
        Ok(())
    }

    /// Writes out what `write_direct` still buffers; later appends go through the page
    /// cache again.
    pub fn finish_direct(&mut self) -> Result<()> {
        if let Some(mut d) = self.direct.take() {
            let end = d.finish().ctx("write segment", &self.log_path)?;
            debug_assert_eq!(end, self.size);
        }
        Ok(())
    }

    pub fn flush(&self) -> Result<()> {
        debug_assert!(self.direct.is_none(), "finish_direct before flush");
        self.file()?.sync_data().ctx("fsync segment", &self.log_path)?;
        self.offset_index.flush()?;
        self.time_index.flush()
    }

    pub fn read_at(&self, buf: &mut [u8], pos: u64) -> Result<()> {
        self.file()?.read_exact_at(buf, pos).ctx("read segment", &self.log_path)
    }

    /// Appends whole batches already validated (the cleaner's output), indexing them.
    pub fn append_batches(&mut self, batches: &[u8]) -> Result<()> {
        let mut prepared = Vec::new();
        for item in record_batch::BatchIter::new(batches, 0) {
            let (_, header, bytes) = item?;
            let mut header_bytes = [0u8; HEADER_SIZE];
            header_bytes.copy_from_slice(&bytes[..HEADER_SIZE]);
            prepared.push(PreparedBatch { header_bytes, header, records: &bytes[HEADER_SIZE..] });
        }
        for chunk in prepared.chunks(256) {
            self.append(chunk)?;
        }
        Ok(())
    }

    /// True when the offset index has no room for another entry.
    pub fn index_full(&self) -> bool {
        self.offset_index.is_full() || self.time_index.is_full()
    }

    /// Renames the three files from suffix `from` to suffix `to` (the `.log` last), e.g.
    /// `.cleaned` to `.swap`. Open handles and maps keep working.
    pub fn change_suffix(&mut self, from: &str, to: &str) -> Result<()> {
        let rename = |p: &Path| -> PathBuf {
            let name = p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            p.with_file_name(format!("{}{to}", name.strip_suffix(from).unwrap_or(&name)))
        };
        let idx = rename(self.offset_index.path());
        self.offset_index.rename(&idx)?;
        let tidx = rename(self.time_index.path());
        self.time_index.rename(&tidx)?;
        let log = rename(&self.log_path);
        std::fs::rename(&self.log_path, &log).ctx("rename segment", &self.log_path)?;
        self.log.set_path(&log);
        self.log_path = log;
        Ok(())
    }

    /// Deletes the segment's files. Open `FileSlice`s keep reading the unlinked file.
    /// Renames the files `.deleted` and closes them; returns the new paths, for
    /// `PendingDeletions` to unlink (`segment_deletion.rs`).
    pub fn into_deleted(mut self) -> Result<Vec<PathBuf>> {
        self.change_suffix("", DELETED_SUFFIX)?;
        Ok(self.close_files())
    }

    /// Closes the files (handles and index maps); returns their paths.
    pub fn close_files(self) -> Vec<PathBuf> {
        vec![self.log_path.clone(), self.offset_index.path().to_path_buf(), self.time_index.path().to_path_buf()]
    }

    pub fn delete(self) -> Result<()> {
        crate::segment_deletion::unlink_all(&self.close_files())
    }
}

/// `pwritev` until every byte of `iov` is written at `pos`.
/// The iovecs that write `batches` in order: each header, then its record area.
fn iovecs(batches: &[PreparedBatch<'_>]) -> Vec<libc::iovec> {
    let mut iov: Vec<libc::iovec> = Vec::with_capacity(batches.len() * 2);
    for b in batches {
        iov.push(libc::iovec { iov_base: b.header_bytes.as_ptr() as *mut _, iov_len: HEADER_SIZE });
        if !b.records.is_empty() {
            iov.push(libc::iovec { iov_base: b.records.as_ptr() as *mut _, iov_len: b.records.len() });
        }
    }
    iov
}

fn write_all_vectored(file: &File, iov: &mut [libc::iovec], mut pos: u64) -> std::io::Result<()> {
    let fd = file.as_raw_fd();
    let mut first = 0usize;
    while first < iov.len() {
        let n = (iov.len() - first).min(512);
        // SAFETY: the iovecs point into buffers borrowed for the duration of this call.
        let written = unsafe { libc::pwritev(fd, iov[first..].as_ptr(), n as libc::c_int, pos as libc::off_t) };
        if written < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if written == 0 {
            return Err(std::io::Error::new(std::io::ErrorKind::WriteZero, "pwritev wrote nothing"));
        }
        pos += written as u64;
        let mut left = written as usize;
        while left > 0 && first < iov.len() {
            if left >= iov[first].iov_len {
                left -= iov[first].iov_len;
                first += 1;
            } else {
                // SAFETY: advancing within the same buffer by fewer bytes than its length.
                iov[first].iov_base = unsafe { (iov[first].iov_base as *mut u8).add(left) } as *mut _;
                iov[first].iov_len -= left;
                left = 0;
            }
        }
        while first < iov.len() && iov[first].iov_len == 0 {
            first += 1;
        }
    }
    Ok(())
}
