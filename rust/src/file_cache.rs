//! Segment files opened on use and closed when idle, under one process-wide cap on how
//! many stay open (the descriptors budgeted for storage; the broker sets it from its
//! file descriptor limit, `set_max_open`).
//!
//! A `LazyFile` names one file and may hold it open. `get` returns the open handle,
//! opening the file again if it was closed; the handle is an `Arc<File>`, so a reader
//! that took one (a `FileSlice` being sent, an fsync in flight) keeps its descriptor
//! even if the cache closes its own reference meanwhile. When more than the cap are
//! open, the least recently used tenth of them are closed. `close_idle` closes those
//! unused for a given time.
//!
//! Invariants:
//! - `OPEN` counts the `LazyFile`s holding a handle (not the clones readers hold).
//! - Lock order: the registry's lock before an entry's, never the reverse: `get` takes
//!   only its entry's lock and evicts after releasing it.
//! - A file is reopened read-write without `O_CREAT`: a segment file that vanished (a
//!   deleted partition) is an error, never an empty new file.

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock, Weak};

use parking_lot::Mutex;

static OPEN: AtomicUsize = AtomicUsize::new(0);
static MAX_OPEN: AtomicUsize = AtomicUsize::new(0); // 0: not set, half the soft RLIMIT_NOFILE
static CLOCK: AtomicU64 = AtomicU64::new(1);
static REGISTRY: OnceLock<Mutex<Vec<Weak<Entry>>>> = OnceLock::new();

fn registry() -> &'static Mutex<Vec<Weak<Entry>>> {
    REGISTRY.get_or_init(|| Mutex::new(Vec::new()))
}

/// The cap on files kept open (see the module comment).
pub fn max_open() -> usize {
    match MAX_OPEN.load(Ordering::Relaxed) {
        0 => {
            let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
            // SAFETY: getrlimit writes the struct it is given.
            let soft = if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } == 0 { lim.rlim_cur as usize } else { 1024 };
            (soft / 2).clamp(16, 1 << 20)
        }
        n => n,
    }
}

/// Sets the cap (0: the default, half the soft RLIMIT_NOFILE) and applies it at once.
pub fn set_max_open(n: usize) {
    MAX_OPEN.store(n, Ordering::Relaxed);
    evict_over_cap();
}

/// Files held open by the cache now.
pub fn open_count() -> usize {
    OPEN.load(Ordering::Relaxed)
}

fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

struct Entry {
    path: Mutex<PathBuf>,
    file: Mutex<Option<Arc<File>>>,
    /// CLOCK tick of the last use (ordering for eviction) and the time of it.
    tick: AtomicU64,
    used_ms: AtomicU64,
}

impl Entry {
    fn touch(&self) {
        self.tick.store(CLOCK.fetch_add(1, Ordering::Relaxed), Ordering::Relaxed);
        self.used_ms.store(now_ms(), Ordering::Relaxed);
    }

    /// Drops the cache's handle; true if it held one.
    fn close(&self) -> bool {
        if self.file.lock().take().is_some() {
            OPEN.fetch_sub(1, Ordering::Relaxed);
            return true;
        }
        false
    }
}

pub struct LazyFile {
    entry: Arc<Entry>,
}

impl LazyFile {
    /// Opens (creating it with `create`) `path` now and keeps it open.
    pub fn open(path: &Path, create: bool) -> std::io::Result<LazyFile> {
        let file = OpenOptions::new().read(true).write(true).create(create).truncate(false).open(path)?;
        Ok(Self::with_file(path, file))
    }

    /// Takes an open `file` of `path` into the cache.
    pub fn with_file(path: &Path, file: File) -> LazyFile {
        let entry = Arc::new(Entry {
            path: Mutex::new(path.to_path_buf()),
            file: Mutex::new(Some(Arc::new(file))),
            tick: AtomicU64::new(0),
            used_ms: AtomicU64::new(0),
        });
        entry.touch();
        OPEN.fetch_add(1, Ordering::Relaxed);
        {
            let mut reg = registry().lock();
            if reg.len() >= 64 && reg.len().is_power_of_two() {
                reg.retain(|w| w.strong_count() > 0);
            }
            reg.push(Arc::downgrade(&entry));
        }
        evict_over_cap();
        LazyFile { entry }
    }

    /// The open handle, reopening the file if the cache closed it.
    pub fn get(&self) -> std::io::Result<Arc<File>> {
        self.entry.touch();
        let opened = {
            let mut slot = self.entry.file.lock();
            if let Some(f) = slot.as_ref() {
                return Ok(Arc::clone(f));
            }
            let path = self.entry.path.lock().clone();
            let file = Arc::new(OpenOptions::new().read(true).write(true).open(&path)?);
            *slot = Some(Arc::clone(&file));
            OPEN.fetch_add(1, Ordering::Relaxed);
            file
        };
        evict_over_cap();
        Ok(opened)
    }

    pub fn is_open(&self) -> bool {
        self.entry.file.lock().is_some()
    }

    /// The file was renamed: later reopenings use `path`.
    pub fn set_path(&self, path: &Path) {
        *self.entry.path.lock() = path.to_path_buf();
    }

    /// Closes the cache's handle now (readers keep theirs).
    pub fn close(&self) {
        self.entry.close();
    }
}

impl Drop for LazyFile {
    fn drop(&mut self) {
        self.entry.close();
    }
}

/// Closes the least recently used tenth of the open files when more than the cap are.
fn evict_over_cap() {
    let cap = max_open();
    if OPEN.load(Ordering::Relaxed) <= cap {
        return;
    }
    let target = cap - cap / 10;
    let mut reg = registry().lock();
    reg.retain(|w| w.strong_count() > 0);
    let mut open: Vec<(u64, Arc<Entry>)> = reg
        .iter()
        .filter_map(Weak::upgrade)
        .filter(|e| e.file.try_lock().is_some_and(|f| f.is_some()))
        .map(|e| (e.tick.load(Ordering::Relaxed), e))
        .collect();
    open.sort_unstable_by_key(|(t, _)| *t);
    for (_, e) in open {
        if OPEN.load(Ordering::Relaxed) <= target {
            break;
        }
        e.close();
    }
}

/// Closes the files not used for `idle_ms`; returns how many.
pub fn close_idle(idle_ms: u64) -> usize {
    let cutoff = now_ms().saturating_sub(idle_ms);
    let reg = registry().lock();
    let mut closed = 0;
    for e in reg.iter().filter_map(Weak::upgrade) {
        if e.used_ms.load(Ordering::Relaxed) < cutoff && e.close() {
            closed += 1;
        }
    }
    closed
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    // The cap is process-wide: one test drives it, so tests running in parallel threads
    // do not see each other's cap.
    #[test]
    fn files_close_past_the_cap_and_reopen_on_use() {
        let dir = tempfile::tempdir().unwrap();
        let files: Vec<LazyFile> = (0..20)
            .map(|i| {
                let p = dir.path().join(format!("{i}.log"));
                std::fs::File::create(&p).unwrap().write_all(&[i as u8]).unwrap();
                LazyFile::open(&p, false).unwrap()
            })
            .collect();
        assert!(files.iter().all(LazyFile::is_open));
        files[0].close();
        assert!(!files[0].is_open());
        let f = files[0].get().unwrap();
        let mut b = [0u8; 1];
        std::os::unix::fs::FileExt::read_exact_at(&*f, &mut b, 0).unwrap();
        assert_eq!(b[0], 0);
        // A handle a reader holds outlives the cache closing its own.
        files[1].close();
        let renamed = dir.path().join("1.log.deleted");
        std::fs::rename(dir.path().join("1.log"), &renamed).unwrap();
        assert!(files[1].get().is_err(), "a vanished file is not created again");
        files[1].set_path(&renamed);
        assert!(files[1].get().is_ok());
        std::thread::sleep(std::time::Duration::from_millis(20));
        files[2].get().unwrap();
        assert!(close_idle(10) >= 17);
        assert!(files[2].is_open());
        drop(files);
    }
}
