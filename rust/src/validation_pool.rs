//! The threads that check a large append's record batches while its bytes are written.
//!
//! An append of `CONCURRENT_CHECK_MIN_BYTES` or more costs two passes over memory: the
//! kernel's copy into the page cache and the CRC-32C plus record-framing walk. They are
//! independent, so `beside` runs the check on this pool while the caller writes, and the
//! caller publishes the batches only when both succeeded.
//!
//! Invariant: `beside` returns only after the check has finished, so the check may borrow
//! whatever the caller borrows.

use std::sync::OnceLock;

/// Appends at least this large are checked beside their write; smaller ones are checked
/// before it, where handing work to another thread would cost more than it saves.
pub const CONCURRENT_CHECK_MIN_BYTES: usize = 256 * 1024;

static POOL: OnceLock<Option<rayon::ThreadPool>> = OnceLock::new();

fn pool() -> Option<&'static rayon::ThreadPool> {
    POOL.get_or_init(|| {
        let threads = std::thread::available_parallelism().map_or(2, |n| n.get().min(8));
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("logstore-check-{i}"))
            .build()
            .ok()
    })
    .as_ref()
}

/// Runs `check` on the pool and `work` on the calling thread at the same time, and returns
/// both results once both are done. Without a pool (threads could not be started) the
/// check runs first, then the work, on the calling thread.
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
    let mut checked = None;
    let done = pool.in_place_scope(|scope| {
        scope.spawn(|_| checked = Some(check()));
        work()
    });
    (checked.expect("a scope returns after its spawned tasks"), done)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_and_work_both_run_and_may_borrow() {
        let data = vec![7u8; 1 << 20];
        let (sum, len) = beside(|| data.iter().map(|&b| b as u64).sum::<u64>(), || data.len());
        assert_eq!((sum, len), (7 << 20, 1 << 20));
    }

    #[test]
    fn check_runs_on_another_thread() {
        let caller = std::thread::current().id();
        let (other, _) = beside(|| std::thread::current().id(), || ());
        assert_ne!(other, caller);
    }
}
