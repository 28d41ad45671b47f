//! Deleting the files of segments that left a log, `file.delete.delay.ms` later (Kafka's
//! `LocalLog.deleteSegmentFiles` and the scheduler's "delete-file" task).
//!
//! A segment leaves the log (retention, a log start offset moved past it, replaced by
//! the cleaner) by being renamed `<name>.deleted` under the log's write lock and closed;
//! its paths are then queued in the log's `PendingDeletions` and unlinked after the
//! delay by one background thread shared by every log ("logstore-delete-file"). Unlinking
//! is when the kernel frees a file's page cache (about 0.2 s per GiB here), so deferring
//! it keeps that work out of the cleaner's pass and of the log's lock.
//!
//! Invariants:
//! - Only `.deleted` paths are queued, so whatever is still pending at a crash is found
//!   and deleted by the next `Log::open` (it deletes every `.deleted` file).
//! - A delay of 0 means no queue: the caller unlinks at once (`unlink_all`).
//! - `delete_all` (run by `Log::close`, and when the log is dropped) unlinks everything
//!   pending before it returns, after waiting for an unlink the background thread has
//!   begun. From then on the thread touches no file of that log, so a closed log's
//!   directory can be removed right away.
//! - `abandon` (run by `Log::close_handlers`) empties the queue and unlinks nothing.
//! - A path already gone (NotFound) counts as deleted. Any other failure to unlink leaves
//!   the file under its `.deleted` name for the next open to delete.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock, Weak};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::error::{IoContext, Result};

/// The files of segments one log has scheduled for deletion.
#[derive(Default)]
pub struct PendingDeletions {
    /// (when due, the `.deleted` paths of one segment or group of segments).
    queue: Mutex<Vec<(Instant, Vec<PathBuf>)>>,
    /// Held while files taken off `queue` are unlinked, so `delete_all` can wait for the
    /// background thread to finish what it took.
    unlinking: Mutex<()>,
}

impl PendingDeletions {
    pub fn new() -> Arc<PendingDeletions> {
        Arc::new(PendingDeletions::default())
    }

    /// Schedules `paths` (all named `.deleted`) for unlinking `delay_ms` from now. With a
    /// delay of 0 nothing is queued and `paths` come back for the caller to unlink now
    /// (outside its locks, where it can).
    #[must_use]
    pub fn delete_after(self: &Arc<Self>, paths: Vec<PathBuf>, delay_ms: i64) -> Vec<PathBuf> {
        if delay_ms <= 0 || paths.is_empty() {
            return paths;
        }
        let due = Instant::now() + Duration::from_millis(delay_ms as u64);
        self.queue.lock().push((due, paths));
        scheduler().wake_at(due, Arc::downgrade(self));
        Vec::new()
    }

    /// Number of scheduled deletions not yet done (one per `delete_after` call).
    pub fn len(&self) -> usize {
        self.queue.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Unlinks every file that is due at `now`.
    fn delete_due(&self, now: Instant) -> Result<()> {
        let _unlinking = self.unlinking.lock();
        let due: Vec<PathBuf> = {
            let mut queue = self.queue.lock();
            let (due, later): (Vec<_>, Vec<_>) = queue.drain(..).partition(|(at, _)| *at <= now);
            *queue = later;
            due.into_iter().flat_map(|(_, paths)| paths).collect()
        };
        unlink_all(&due)
    }

    /// Unlinks everything pending now, whatever its delay; see the module comment.
    pub fn delete_all(&self) -> Result<()> {
        let _unlinking = self.unlinking.lock();
        let all: Vec<PathBuf> = self.queue.lock().drain(..).flat_map(|(_, paths)| paths).collect();
        unlink_all(&all)
    }

    /// Forgets everything pending without unlinking it (a log dir gone offline): the
    /// `.deleted` files stay for the next `Log::open` to delete.
    pub fn abandon(&self) {
        self.queue.lock().clear();
    }
}

impl Drop for PendingDeletions {
    fn drop(&mut self) {
        // A log dropped without `close`: as close would. A failure leaves `.deleted`
        // files, which the next open deletes.
        let _ = self.delete_all();
    }
}

/// Unlinks `paths`; one already gone is fine.
pub fn unlink_all(paths: &[PathBuf]) -> Result<()> {
    for p in paths {
        match std::fs::remove_file(p) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e).ctx("delete segment file", p),
            _ => {}
        }
    }
    Ok(())
}

/// The background thread's timetable: when to look at which log's queue.
struct Scheduler {
    tasks: Mutex<Vec<(Instant, Weak<PendingDeletions>)>>,
    wake: Condvar,
}

fn scheduler() -> &'static Scheduler {
    static SCHEDULER: OnceLock<Scheduler> = OnceLock::new();
    SCHEDULER.get_or_init(|| {
        std::thread::Builder::new()
            .name("logstore-delete-file".into())
            .spawn(|| scheduler().run())
            .expect("spawn the segment deletion thread");
        Scheduler { tasks: Mutex::new(Vec::new()), wake: Condvar::new() }
    })
}

impl Scheduler {
    fn wake_at(&self, due: Instant, log: Weak<PendingDeletions>) {
        self.tasks.lock().push((due, log));
        self.wake.notify_one();
    }

    fn run(&self) {
        let mut tasks = self.tasks.lock();
        loop {
            let now = Instant::now();
            match tasks.iter().map(|(at, _)| *at).min() {
                None => self.wake.wait(&mut tasks),
                Some(at) if at > now => {
                    self.wake.wait_until(&mut tasks, at);
                }
                Some(_) => {
                    let (due, later): (Vec<_>, Vec<_>) = tasks.drain(..).partition(|(at, _)| *at <= now);
                    *tasks = later;
                    drop(tasks);
                    for log in due.iter().filter_map(|(_, w)| w.upgrade()) {
                        // A failure leaves `.deleted` files for the next open (module comment).
                        let _ = log.delete_due(now);
                    }
                    tasks = self.tasks.lock();
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(dir: &std::path::Path, names: &[&str]) -> Vec<PathBuf> {
        let paths: Vec<PathBuf> = names.iter().map(|n| dir.join(n)).collect();
        for p in &paths {
            std::fs::write(p, b"x").unwrap();
        }
        paths
    }

    #[test]
    fn zero_delay_hands_the_files_back() {
        let d = tempfile::tempdir().unwrap();
        let pending = PendingDeletions::new();
        let paths = files(d.path(), &["0.log.deleted"]);
        assert_eq!(pending.delete_after(paths.clone(), 0), paths);
        assert!(pending.is_empty());
        unlink_all(&paths).unwrap();
        unlink_all(&paths).unwrap(); // already gone is fine
        assert!(!paths[0].exists());
    }

    #[test]
    fn files_go_after_the_delay() {
        let d = tempfile::tempdir().unwrap();
        let pending = PendingDeletions::new();
        let soon = files(d.path(), &["0.log.deleted", "0.index.deleted"]);
        let late = files(d.path(), &["1.log.deleted"]);
        assert!(pending.delete_after(soon.clone(), 50).is_empty());
        assert!(pending.delete_after(late.clone(), 60_000).is_empty());
        assert!(soon.iter().chain(&late).all(|p| p.exists()));
        let start = Instant::now();
        while soon.iter().any(|p| p.exists()) {
            assert!(start.elapsed() < Duration::from_secs(10), "not deleted after its delay");
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(start.elapsed() >= Duration::from_millis(40));
        assert!(late[0].exists());
        assert_eq!(pending.len(), 1);
        // delete_all takes the rest at once.
        pending.delete_all().unwrap();
        assert!(!late[0].exists() && pending.is_empty());
    }

    #[test]
    fn dropping_deletes_what_is_pending() {
        let d = tempfile::tempdir().unwrap();
        let pending = PendingDeletions::new();
        let paths = files(d.path(), &["0.log.deleted"]);
        assert!(pending.delete_after(paths.clone(), 60_000).is_empty());
        drop(pending);
        assert!(!paths[0].exists());
    }
}
