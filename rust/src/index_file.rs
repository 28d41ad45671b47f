//! A memory-mapped file of fixed-size index entries (Kafka's `AbstractIndex`).
//!
//! Invariants:
//! - `entries * entry_size <= mapped length <= file length`.
//! - Entries are sorted: the key of entry i+1 is greater than the key of entry i.
//! - The active segment's index is preallocated to `max_index_size` (rounded down to a
//!   whole entry) so appends never grow the file; `trim()` cuts it to `entries *
//!   entry_size` when the segment is rolled or the log is closed.
//! - Bytes past `entries` are meaningless (zeros from preallocation or stale entries
//!   after a truncation); only the first `entries` entries are read.
//! - No file descriptor is kept: the file is opened to be sized and mapped, and closed
//!   again (a mapping outlives its descriptor), so a broker's descriptors do not grow
//!   with its partitions' indexes.

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};

use memmap2::MmapMut;

use crate::error::{IoContext, Result};

pub struct IndexFile {
    path: PathBuf,
    mmap: Option<MmapMut>,
    entries: usize,
    entry_size: usize,
    max_entries: usize,
}

impl IndexFile {
    /// Opens or creates `path`. An existing file's entries are all `len / entry_size`
    /// whole entries; the caller sanity-checks them. With `preallocate`, the file is
    /// grown to `max_index_size` so it can take appends.
    pub fn open(path: &Path, entry_size: usize, max_index_size: usize, preallocate: bool) -> Result<Self> {
        let file = Self::open_file(path, true)?;
        let len = file.metadata().ctx("stat index", path)?.len() as usize;
        let entries = len / entry_size;
        // A trimmed index takes no appends until `make_appendable` grows it.
        let max_entries = if preallocate { (max_index_size / entry_size).max(entries) } else { entries };
        let mut index = IndexFile { path: path.to_path_buf(), mmap: None, entries, entry_size, max_entries };
        if preallocate {
            index.resize_file(&file, max_entries * entry_size)?;
        } else {
            index.map(&file)?;
        }
        Ok(index)
    }

    fn open_file(path: &Path, create: bool) -> Result<File> {
        OpenOptions::new().read(true).write(true).create(create).truncate(false).open(path).ctx("open index", path)
    }

    fn map(&mut self, file: &File) -> Result<()> {
        self.mmap = None;
        let len = file.metadata().ctx("stat index", &self.path)?.len();
        if len > 0 {
            // SAFETY: the index file is owned by this process (Kafka's layout gives each
            // partition directory to one broker); nothing else truncates it while mapped.
            let map = unsafe { MmapMut::map_mut(file) }.ctx("mmap index", &self.path)?;
            // Lookups binary-search and appends touch one page at a time: readahead would
            // only fault in (and zero, for a preallocated file) pages nobody asked for.
            let _ = map.advise(memmap2::Advice::Random);
            self.mmap = Some(map);
        }
        Ok(())
    }

    fn resize(&mut self, len: usize) -> Result<()> {
        let file = Self::open_file(&self.path, false)?;
        self.resize_file(&file, len)
    }

    fn resize_file(&mut self, file: &File, len: usize) -> Result<()> {
        self.mmap = None;
        file.set_len(len as u64).ctx("resize index", &self.path)?;
        self.max_entries = self.max_entries.max(len / self.entry_size);
        self.map(file)
    }

    /// Grows a trimmed index back to `max_index_size` so it can take appends again.
    pub fn make_appendable(&mut self, max_index_size: usize) -> Result<()> {
        self.max_entries = (max_index_size / self.entry_size).max(self.entries);
        self.resize(self.max_entries * self.entry_size)
    }

    /// Cuts the file to exactly its entries (done when the segment stops being active).
    pub fn trim(&mut self) -> Result<()> {
        let want = self.entries * self.entry_size;
        if self.mmap.as_ref().map_or(0, |m| m.len()) != want {
            self.resize(want)?;
        }
        self.max_entries = self.entries;
        Ok(())
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
    pub fn entries(&self) -> usize {
        self.entries
    }
    pub fn is_full(&self) -> bool {
        self.entries >= self.max_entries
    }
    pub fn max_entries(&self) -> usize {
        self.max_entries
    }

    pub fn entry(&self, i: usize) -> &[u8] {
        debug_assert!(i < self.entries);
        let m = self.mmap.as_ref().expect("an index with entries is mapped");
        &m[i * self.entry_size..(i + 1) * self.entry_size]
    }

    /// Appends one entry. The caller checks ordering and `is_full()` first.
    pub fn push(&mut self, entry: &[u8]) {
        debug_assert_eq!(entry.len(), self.entry_size);
        assert!(!self.is_full(), "append to a full index {}", self.path.display());
        let at = self.entries * self.entry_size;
        let m = self.mmap.as_mut().expect("a preallocated index is mapped");
        m[at..at + self.entry_size].copy_from_slice(entry);
        self.entries += 1;
    }

    /// Keeps the first `n` entries.
    pub fn truncate_entries(&mut self, n: usize) {
        self.entries = self.entries.min(n);
    }

    /// The largest i with key(entry i) <= target, by binary search over `key`.
    pub fn floor<K: Ord>(&self, target: K, key: impl Fn(&[u8]) -> K) -> Option<usize> {
        if self.entries == 0 || key(self.entry(0)) > target {
            return None;
        }
        let (mut lo, mut hi) = (0usize, self.entries - 1);
        while lo < hi {
            let mid = lo + (hi - lo).div_ceil(2);
            if key(self.entry(mid)) <= target {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        Some(lo)
    }

    /// The smallest i with key(entry i) >= target, or `entries` if none.
    pub fn ceiling<K: Ord>(&self, target: K, key: impl Fn(&[u8]) -> K) -> usize {
        let (mut lo, mut hi) = (0usize, self.entries);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if key(self.entry(mid)) < target {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    pub fn flush(&self) -> Result<()> {
        if let Some(m) = &self.mmap {
            m.flush().ctx("flush index", &self.path)?;
        }
        Ok(())
    }

    /// Drops every entry and trims the file; the caller re-appends (index rebuild).
    pub fn reset(&mut self, max_index_size: usize) -> Result<()> {
        self.entries = 0;
        self.make_appendable(max_index_size)
    }

    pub fn delete(self) -> Result<()> {
        let path = self.path.clone();
        drop(self);
        match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e).ctx("delete index", &path),
            _ => Ok(()),
        }
    }

    pub fn rename(&mut self, to: &Path) -> Result<()> {
        std::fs::rename(&self.path, to).ctx("rename index", &self.path)?;
        self.path = to.to_path_buf();
        Ok(())
    }
}
