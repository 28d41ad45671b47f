//! The threads that check a large append's record batches while its bytes are written.
//!
//! An append of `CONCURRENT_CHECK_MIN_BYTES` or more costs two passes over memory: the
//! kernel's copy into the page cache and the CRC-32C plus record-framing walk. They are
//! independent, so `beside` offers the check to an idle checker thread (a rayon thread
//! pool of its own, at most four threads) while the caller writes, and the caller
//! publishes the batches only when both succeeded.
//!
//! Invariants:
//! - `beside` returns (or unwinds) only after the check has run to its end, so the check
//!   may borrow whatever the caller borrows (a rayon scope).
//! - A check is offered only to a checker that is idle at that moment (`idle` counts
//!   them); when none is, the caller runs it right after its write. A check no checker
//!   has picked up by the time the write is done is taken back and run by the caller.
//!   On a busy machine, where the checker may wait for a CPU, the append costs what
//!   checking then writing on one thread costs, plus at most the time its checker needs
//!   to be scheduled and find the offer empty.
//! - Checker threads sleep when there is nothing to check: an idle broker burns no CPU
//!   on them.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};

/// Appends at least this large are checked beside their write; smaller ones are checked
/// before it, where handing work to another thread would cost more than it saves.
pub const CONCURRENT_CHECK_MIN_BYTES: usize = 256 * 1024;

struct Checkers {
    pool: rayon_core::ThreadPool,
    /// Checker threads not reserved by an offer; never above the pool's size.
    idle: AtomicUsize,
}

impl Checkers {
    /// Reserves an idle checker for one offer, if there is one.
    fn reserve(&self) -> bool {
        self.idle.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1)).is_ok()
    }
}

/// Gives a reserved checker back when its offer's job ends, by return or by unwind.
struct Release<'a>(&'a AtomicUsize);

impl Drop for Release<'_> {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::AcqRel);
    }
}

/// How many checker threads the pool has: one per CPU, at most four.
fn checker_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get().clamp(1, 4))
}

static CHECKERS: OnceLock<Option<Checkers>> = OnceLock::new();

fn checkers() -> Option<&'static Checkers> {
    CHECKERS
        .get_or_init(|| {
            let threads = checker_threads();
            let pool = rayon_core::ThreadPoolBuilder::new()
                .num_threads(threads)
                .thread_name(|i| format!("logstore-check-{i}"))
                .build()
                .ok()?;
            Some(Checkers { pool, idle: AtomicUsize::new(threads) })
        })
        .as_ref()
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Runs `check` and `work` at the same time, `work` on the calling thread and `check` on
/// a checker thread if one is idle and picks it up before `work` is done (else on the
/// calling thread right after), and returns both results. A panic in either reaches the
/// caller once both have ended.
pub fn beside<C, R, W, T>(check: C, work: W) -> (R, T)
where
    C: FnOnce() -> R + Send,
    R: Send,
    W: FnOnce() -> T,
{
    let Some(checkers) = checkers() else {
        let checked = check();
        return (checked, work());
    };
    if !checkers.reserve() {
        let done = work();
        return (check(), done);
    }
    // Taken exactly once: by the checker's job or, if it has not started, by the caller.
    let offer = Mutex::new(Some(check));
    let on_checker: Mutex<Option<R>> = Mutex::new(None);
    let (on_caller, done) = checkers.pool.in_place_scope(|scope| {
        scope.spawn(|_| {
            let _release = Release(&checkers.idle);
            let taken = lock(&offer).take();
            if let Some(check) = taken {
                let checked = check();
                *lock(&on_checker) = Some(checked);
            }
        });
        let done = work();
        let taken_back = lock(&offer).take();
        (taken_back.map(|check| check()), done)
    });
    let checked = on_caller.or_else(|| on_checker.into_inner().unwrap_or_else(PoisonError::into_inner));
    (checked.expect("the scope has run the check to its end"), done)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::panic;
    use std::sync::{Arc, Condvar};

    /// The pool is process-wide: tests that occupy or count its checkers run one at a time.
    static SERIAL: Mutex<()> = Mutex::new(());

    #[test]
    fn check_and_work_both_run_and_may_borrow() {
        let _serial = lock(&SERIAL);
        let data = vec![7u8; 1 << 20];
        for _ in 0..100 {
            let (sum, len) = beside(|| data.iter().map(|&b| b as u64).sum::<u64>(), || data.len());
            assert_eq!((sum, len), (7 << 20, 1 << 20));
        }
    }

    #[test]
    fn a_slow_write_lets_a_checker_run_the_check() {
        let _serial = lock(&SERIAL);
        let caller = std::thread::current().id();
        let (other, _) = beside(|| std::thread::current().id(), || std::thread::sleep(std::time::Duration::from_millis(200)));
        assert_ne!(other, caller);
    }

    #[test]
    fn a_check_nobody_picked_up_runs_on_the_caller() {
        let _serial = lock(&SERIAL);
        // Occupy every checker (each blocker's write waits until its check has started on
        // a checker, which then holds it until the gate opens), then offer a check: no
        // checker is free, so it runs on the caller.
        let threads = checker_threads();
        let gate = Arc::new((Mutex::new(false), Condvar::new()));
        let running = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let blockers: Vec<_> = (0..threads)
            .map(|_| {
                let (gate, running) = (Arc::clone(&gate), Arc::clone(&running));
                std::thread::spawn(move || {
                    let (started_tx, started_rx) = std::sync::mpsc::channel();
                    beside(
                        move || {
                            running.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                            started_tx.send(()).unwrap();
                            let mut open = lock(&gate.0);
                            while !*open {
                                open = gate.1.wait(open).unwrap();
                            }
                        },
                        || started_rx.recv().unwrap(),
                    )
                })
            })
            .collect();
        while running.load(std::sync::atomic::Ordering::SeqCst) < threads {
            std::thread::yield_now();
        }
        let caller = std::thread::current().id();
        let (ran_on, ()) = beside(|| std::thread::current().id(), || ());
        *lock(&gate.0) = true;
        gate.1.notify_all();
        for b in blockers {
            b.join().unwrap();
        }
        assert_eq!(ran_on, caller);
    }

    #[test]
    fn a_panicking_check_reaches_the_caller() {
        let _serial = lock(&SERIAL);
        let r = panic::catch_unwind(|| beside(|| panic!("check failed"), || std::thread::sleep(std::time::Duration::from_millis(20))));
        assert!(r.is_err());
        // The pool still works afterwards.
        assert_eq!(beside(|| 1, || 2), (1, 2));
    }
}
