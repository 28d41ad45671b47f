//! A memory-mapped file of fixed-size index entries (Kafka's `AbstractIndex`).
//!
//! Invariants:
//! - `entries * entry_size <= mapped length <= file length`, and `populated <= mapped
//!   length`.
//! - Entries are sorted: the key of entry i+1 is greater than the key of entry i.
//! - The active segment's index is preallocated to `max_index_size` (rounded down to a
//!   whole entry) so appends never grow the file; `trim()` cuts it to `entries *
//!   entry_size` when the segment is rolled or the log is closed.
//! - Bytes past `entries` are meaningless (zeros from preallocation or stale entries
//!   after a truncation); only the first `entries` entries are read.
//! - No file descriptor is kept: the file is opened to be sized and mapped, and closed
//!   again (a mapping outlives its descriptor), so a broker's descriptors do not grow
//!   with its partitions' indexes.
//! - An entry is written only to pages with storage behind them: the first `populated`
//!   bytes of the mapping are backed (given storage by `MADV_POPULATE_WRITE` before the
//!   first write into each page), so a write does not fault on a full disk (a
//!   preallocated file is sparse: a store into a hole that the filesystem cannot fill
//!   raises SIGBUS, which kills the process). Pages holding the entries an index was
//!   opened with have storage already: they were written.
//!   `populated` only grows while the mapping lives, and is 0 after each (re)map. An
//!   entry whose page cannot get storage is skipped: entries are optional (the index is
//!   sparse), so they stay contiguous and sorted, only fewer. On a kernel without
//!   `MADV_POPULATE_WRITE` entries are written unchecked.
//! - An absent file is an empty index (Kafka's `LazyIndex`): opening a path with no file
//!   creates nothing, and a file comes into existence (created, sized to
//!   `max_entries`, mapped) only when the first entry is pushed. Trimming, flushing,
//!   renaming and deleting an absent index touch no file; a file found at the path
//!   when it comes into existence (left by an earlier segment) is cut to zero first. An
//!   absent index that could never be sized (past the process's file size limit) is
//!   refused when opened, as sizing an existing file would be.

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use memmap2::MmapMut;

use crate::error::{IoContext, Result};

pub struct IndexFile {
    path: PathBuf,
    mmap: Option<MmapMut>,
    entries: usize,
    entry_size: usize,
    max_entries: usize,
    /// Bytes from the start of the mapping whose pages are known to have storage
    /// (module comment).
    populated: usize,
    /// False while no file exists at `path` (module comment).
    exists: bool,
}

fn page_size() -> usize {
    static PAGE: OnceLock<usize> = OnceLock::new();
    // SAFETY: sysconf only reads a system constant.
    *PAGE.get_or_init(|| match unsafe { libc::sysconf(libc::_SC_PAGESIZE) } {
        n if n > 0 => n as usize,
        _ => 4096,
    })
}

/// The process's file size limit (`RLIMIT_FSIZE`, soft), which an absent index must be
/// able to grow to when it comes into existence.
fn max_file_size() -> usize {
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes the limit into `lim`.
    match unsafe { libc::getrlimit(libc::RLIMIT_FSIZE, &mut lim) } {
        0 if lim.rlim_cur != libc::RLIM_INFINITY => lim.rlim_cur as usize,
        _ => usize::MAX,
    }
}

/// How `MADV_POPULATE_WRITE` answered for a range of the mapping.
enum Populated {
    /// The pages have storage.
    Yes,
    /// The kernel or the mapping does not support it (EINVAL, ENOSYS, EOPNOTSUPP).
    Unsupported,
    /// The pages cannot get storage: EFAULT (a write would raise SIGBUS: no space, or an
    /// I/O error), ENOMEM, EHWPOISON.
    No,
}

fn populate_write(map: &MmapMut, offset: usize, len: usize) -> Populated {
    loop {
        match map.advise_range(memmap2::Advice::PopulateWrite, offset, len) {
            Ok(()) => return Populated::Yes,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                return match e.raw_os_error() {
                    Some(libc::EINVAL | libc::ENOSYS | libc::EOPNOTSUPP) => Populated::Unsupported,
                    _ => Populated::No,
                }
            }
        }
    }
}

impl IndexFile {
    /// Opens `path`. An existing file's entries are all `len / entry_size` whole
    /// entries; the caller sanity-checks them. With `preallocate`, the index can take
    /// appends up to `max_index_size`: an existing file is grown to it, an absent one is
    /// created that size at its first entry. Without, an absent file stays an empty
    /// index that takes no appends until `make_appendable`.
    pub fn open(path: &Path, entry_size: usize, max_index_size: usize, preallocate: bool) -> Result<Self> {
        let file = match Self::open_file(path, false) {
            Ok(f) => Some(f),
            Err(crate::error::Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(e),
        };
        let len = match &file {
            Some(f) => f.metadata().ctx("stat index", path)?.len() as usize,
            None => 0,
        };
        let entries = len / entry_size;
        // A trimmed index takes no appends until `make_appendable` grows it.
        let max_entries = if preallocate { (max_index_size / entry_size).max(entries) } else { entries };
        if file.is_none() && preallocate && max_entries * entry_size > max_file_size() {
            // Refused now, as sizing the file would be (EFBIG), not at the first entry.
            return Err(std::io::Error::from_raw_os_error(libc::EFBIG)).ctx("resize index", path);
        }
        let mut index =
            IndexFile { path: path.to_path_buf(), mmap: None, entries, entry_size, max_entries, populated: 0, exists: file.is_some() };
        match file {
            Some(file) if preallocate => index.resize_file(&file, max_entries * entry_size)?,
            Some(file) => index.map(&file)?,
            None => {}
        }
        Ok(index)
    }

    /// True when the index has a file (module comment).
    pub fn exists(&self) -> bool {
        self.exists
    }

    /// Creates the file of an absent index, sized to `max_entries` and mapped.
    fn create(&mut self) -> Result<()> {
        let file = OpenOptions::new().read(true).write(true).create(true).truncate(true).open(&self.path).ctx("create index", &self.path)?;
        self.exists = true;
        self.resize_file(&file, self.max_entries * self.entry_size)
    }

    fn open_file(path: &Path, create: bool) -> Result<File> {
        OpenOptions::new().read(true).write(true).create(create).truncate(false).open(path).ctx("open index", path)
    }

    fn map(&mut self, file: &File) -> Result<()> {
        self.mmap = None;
        self.populated = 0;
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
        if !self.exists {
            self.max_entries = self.max_entries.max(len / self.entry_size);
            return Ok(());
        }
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
        if !self.exists {
            return Ok(());
        }
        self.resize(self.max_entries * self.entry_size)
    }

    /// Cuts the file to exactly its entries (done when the segment stops being active).
    pub fn trim(&mut self) -> Result<()> {
        let want = self.entries * self.entry_size;
        if self.exists && self.mmap.as_ref().map_or(0, |m| m.len()) != want {
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

    /// Gives the page(s) the next entry lands on storage, if they have none yet. False
    /// when they cannot get it (a full disk): the next entry must then be skipped. True
    /// for a full index (`push` refuses its entry) and where populating is unsupported.
    pub fn prepare_next(&mut self) -> bool {
        let at = self.entries * self.entry_size;
        let end = at + self.entry_size;
        if end <= self.populated || self.is_full() {
            return true;
        }
        if !self.exists && self.create().is_err() {
            // No file (no space or no descriptor): the entry is skipped, as on a full disk.
            return false;
        }
        // Not full but unmapped: the file could not be sized (`create`).
        let Some(m) = self.mmap.as_ref() else { return false };
        let page = page_size();
        let start = self.populated.max(at / page * page);
        let stop = (end.div_ceil(page) * page).min(m.len());
        match populate_write(m, start, stop - start) {
            Populated::Yes | Populated::Unsupported => {
                self.populated = stop;
                true
            }
            Populated::No => false,
        }
    }

    /// Appends one entry, or returns false, writing nothing, when its page cannot get
    /// storage (`prepare_next`). The caller checks ordering and `is_full()` first.
    pub fn push(&mut self, entry: &[u8]) -> bool {
        debug_assert_eq!(entry.len(), self.entry_size);
        assert!(!self.is_full(), "append to a full index {}", self.path.display());
        if !self.prepare_next() {
            return false;
        }
        let at = self.entries * self.entry_size;
        let m = self.mmap.as_mut().expect("a preallocated index is mapped");
        m[at..at + self.entry_size].copy_from_slice(entry);
        self.entries += 1;
        true
    }

    /// Keeps the first `n` entries. `populated` stays: the file keeps its length and
    /// its pages their storage.
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
        if !self.exists {
            // Nothing stays at the new path that would read as this index's entries.
            match std::fs::remove_file(to) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e).ctx("rename index", to),
                _ => {}
            }
            self.path = to.to_path_buf();
            return Ok(());
        }
        std::fs::rename(&self.path, to).ctx("rename index", &self.path)?;
        self.path = to.to_path_buf();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(i: usize) -> [u8; 8] {
        (i as u64).to_be_bytes()
    }

    fn cut_file(path: &Path, len: usize) {
        OpenOptions::new().write(true).open(path).unwrap().set_len(len as u64).unwrap();
    }

    /// A page the mapping covers but the file does not (cut under the mapping) cannot get
    /// storage, as a hole cannot on a full disk: MADV_POPULATE_WRITE fails (EFAULT) where
    /// a store would raise SIGBUS.
    #[test]
    fn an_entry_whose_page_cannot_get_storage_is_skipped() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("0.index");
        let page = page_size();
        let per_page = page / 8;
        let mut index = IndexFile::open(&path, 8, 3 * page, true).unwrap();
        for i in 0..per_page {
            assert!(index.push(&entry(i)));
        }
        cut_file(&path, page);
        assert!(!index.prepare_next());
        for i in per_page..per_page + 3 {
            assert!(!index.push(&entry(i)), "entry {i} written past the file");
        }
        assert_eq!(index.entries(), per_page);
        assert!((0..per_page).all(|i| index.entry(i) == entry(i)));
        assert_eq!(index.floor(per_page as u64 + 5, |e| u64::from_be_bytes(e.try_into().unwrap())), Some(per_page - 1));

        // Storage back: entries continue where they stopped, contiguous and sorted.
        cut_file(&path, 3 * page);
        for i in per_page..per_page + 3 {
            assert!(index.push(&entry(i)));
        }
        assert_eq!(index.entries(), per_page + 3);
        assert!((0..index.entries()).all(|i| index.entry(i) == entry(i)));
        index.trim().unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len() as usize, (per_page + 3) * 8);
    }

    #[test]
    fn an_absent_index_has_no_file_until_its_first_entry() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("0.index");
        let mut index = IndexFile::open(&path, 8, 4096, true).unwrap();
        assert!(!index.exists() && !index.is_full());
        index.trim().unwrap();
        index.make_appendable(4096).unwrap();
        index.reset(4096).unwrap();
        index.flush().unwrap();
        let moved = d.path().join("0.index.swap");
        std::fs::write(&moved, [9u8; 24]).unwrap(); // a stale file where it goes
        index.rename(&moved).unwrap();
        assert_eq!((index.floor(5u64, |e| u64::from_be_bytes(e.try_into().unwrap())), index.ceiling(5u64, |_| 0u64)), (None, 0));
        assert!(!path.exists() && !moved.exists());
        std::fs::write(&moved, [9u8; 24]).unwrap(); // stale again: cut when created
        assert!(index.push(&entry(7)));
        assert!(index.exists());
        assert_eq!(std::fs::metadata(&moved).unwrap().len(), 4096);
        assert_eq!((index.entries(), index.entry(0)), (1, &entry(7)[..]));
        index.trim().unwrap();
        assert_eq!(std::fs::read(&moved).unwrap(), entry(7));
        // Opened without preallocation, an absent file takes no appends until made appendable.
        let other = d.path().join("1.index");
        let mut index = IndexFile::open(&other, 8, 4096, false).unwrap();
        assert!(index.is_full() && !other.exists());
        index.make_appendable(4096).unwrap();
        assert!(!index.is_full() && !other.exists());
        index.delete().unwrap();
    }

    #[test]
    fn an_entry_straddling_two_pages_needs_both() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("0.timeindex");
        let page = page_size();
        let mut index = IndexFile::open(&path, 12, 2 * page, true).unwrap();
        let straddling = page / 12; // starts in the first page, ends in the second
        assert!(page % 12 != 0);
        for i in 0..straddling {
            assert!(index.push(&[i as u8; 12]));
        }
        cut_file(&path, page);
        assert!(!index.push(&[0xFF; 12]));
        assert_eq!(index.entries(), straddling);
        cut_file(&path, 2 * page);
        assert!(index.push(&[0xFF; 12]));
        assert_eq!(index.entry(straddling), &[0xFF; 12]);
    }

    #[test]
    fn remapping_forgets_the_populated_pages() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("0.index");
        let page = page_size();
        let mut index = IndexFile::open(&path, 8, 2 * page, true).unwrap();
        assert_eq!(index.populated, 0);
        assert!(index.push(&entry(0)));
        assert_eq!(index.populated, page);
        index.truncate_entries(0); // the file and its storage stay
        assert_eq!(index.populated, page);
        assert!(index.push(&entry(0)));
        index.trim().unwrap();
        assert_eq!(index.populated, 0);
        index.make_appendable(2 * page).unwrap();
        assert_eq!(index.populated, 0);
        for i in 1..=page / 8 {
            assert!(index.push(&entry(i)));
        }
        // Entry page/8 straddles nothing (8 divides the page): it starts the second page.
        assert_eq!(index.populated, 2 * page);
        assert!((0..index.entries()).all(|i| index.entry(i) == entry(i)));
    }
}
