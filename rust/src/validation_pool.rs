//! The threads that check a large append's record batches while its bytes are written.
//!
//! An append of `CONCURRENT_CHECK_MIN_BYTES` or more costs two passes over memory: the
//! kernel's copy into the page cache and the CRC-32C plus record-framing walk. They are
//! independent, so `beside` offers the check to an idle checker thread while the caller
//! writes, and the caller publishes the batches only when both succeeded.
//!
//! Invariants:
//! - `beside` returns (or unwinds) only after the check has run to its end, so the check
//!   may borrow whatever the caller borrows.
//! - A check no checker thread has picked up by the time the write is done is taken back
//!   and run by the caller. On a busy machine, where the checker may wait for a CPU, the
//!   append costs what checking then writing on one thread costs, never a wait on top.
//! - Checker threads sleep on a condition variable when there is nothing to check: an
//!   idle broker burns no CPU on them.

use std::any::Any;
use std::collections::VecDeque;
use std::panic::{self, AssertUnwindSafe};
use std::sync::{Arc, Condvar, Mutex, OnceLock, PoisonError};

/// Appends at least this large are checked beside their write; smaller ones are checked
/// before it, where handing work to another thread would cost more than it saves.
pub const CONCURRENT_CHECK_MIN_BYTES: usize = 256 * 1024;

type Task = Box<dyn FnOnce() + Send + 'static>;

/// One offered check: taken exactly once, by a checker thread or by the caller.
struct Offer {
    task: Mutex<Option<Task>>,
    /// `None` while a checker runs the task; then `Some(Ok)` or the panic it raised.
    outcome: Mutex<Option<Result<(), Box<dyn Any + Send>>>>,
    finished: Condvar,
}

struct Pool {
    queue: Mutex<VecDeque<Arc<Offer>>>,
    ready: Condvar,
}

static POOL: OnceLock<Option<Arc<Pool>>> = OnceLock::new();

fn pool() -> Option<&'static Arc<Pool>> {
    POOL.get_or_init(|| {
        let pool = Arc::new(Pool { queue: Mutex::new(VecDeque::new()), ready: Condvar::new() });
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get().clamp(1, 4));
        for i in 0..threads {
            let p = Arc::clone(&pool);
            let spawned = std::thread::Builder::new().name(format!("logstore-check-{i}")).spawn(move || checker(&p));
            if spawned.is_err() && i == 0 {
                return None;
            }
        }
        Some(pool)
    })
    .as_ref()
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn checker(pool: &Pool) {
    loop {
        let offer = {
            let mut queue = lock(&pool.queue);
            loop {
                match queue.pop_front() {
                    Some(o) => break o,
                    None => queue = pool.ready.wait(queue).unwrap_or_else(PoisonError::into_inner),
                }
            }
        };
        let Some(task) = lock(&offer.task).take() else { continue }; // the caller took it back
        let result = panic::catch_unwind(AssertUnwindSafe(task));
        *lock(&offer.outcome) = Some(result);
        offer.finished.notify_all();
    }
}

/// Settles an offer before the caller's frame (which the task borrows) goes away: takes
/// the task back and runs it here, or waits for the checker that took it. Runs on return
/// and on unwind alike.
struct Settle<'a>(&'a Arc<Offer>);

impl Settle<'_> {
    fn settle(&self) -> Result<(), Box<dyn Any + Send>> {
        let offer = self.0;
        let taken_back = lock(&offer.task).take();
        if let Some(task) = taken_back {
            return panic::catch_unwind(AssertUnwindSafe(task));
        }
        let mut outcome = lock(&offer.outcome);
        loop {
            match outcome.take() {
                Some(result) => return result,
                None => outcome = offer.finished.wait(outcome).unwrap_or_else(PoisonError::into_inner),
            }
        }
    }
}

impl Drop for Settle<'_> {
    fn drop(&mut self) {
        // Only reached while unwinding out of `work` (the normal path settles first and
        // forgets the guard); the result of the check no longer matters.
        let _ = self.settle();
    }
}

/// Runs `check` and `work` at the same time, `work` on the calling thread and `check` on
/// a checker thread if one is free before `work` is done (else on the calling thread
/// right after), and returns both results.
pub fn beside<C, R, W, T>(check: C, work: W) -> (R, T)
where
    C: FnOnce() -> R + Send,
    R: Send,
    W: FnOnce() -> T,
{
    let Some(pool) = pool() else {
        let checked = check();
        return (checked, work());
    };
    let mut checked: Option<R> = None;
    let slot = &mut checked;
    let task: Box<dyn FnOnce() + Send + '_> = Box::new(move || *slot = Some(check()));
    // SAFETY: the task borrows `checked` and what `check` borrows, all of which outlive
    // this call. The task runs at most once, and `Settle` does not let this frame end
    // (by return or unwind) before it has either run here or finished on a checker;
    // a checker that dequeues the offer later finds it empty and touches nothing.
    let task: Task = unsafe { std::mem::transmute::<Box<dyn FnOnce() + Send + '_>, Task>(task) };
    let offer = Arc::new(Offer { task: Mutex::new(Some(task)), outcome: Mutex::new(None), finished: Condvar::new() });
    lock(&pool.queue).push_back(Arc::clone(&offer));
    pool.ready.notify_one();
    let guard = Settle(&offer);
    let done = work();
    let result = guard.settle();
    std::mem::forget(guard);
    if let Err(payload) = result {
        panic::resume_unwind(payload);
    }
    (checked.expect("a settled check has stored its result"), done)
}

#[cfg(test)]
mod tests {
    use super::*;

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
        // checker is free, so it comes back to the caller.
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get().clamp(1, 4));
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
