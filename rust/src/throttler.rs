//! A byte-rate limiter shared by cleaner threads (Kafka's `Throttler`,
//! `log.cleaner.io.max.bytes.per.second`).
//!
//! Callers report the bytes they read or wrote with `maybe_throttle`. Once at least
//! `CHECK_INTERVAL` has passed since the period started (or the period's bytes need that
//! long at the desired rate), the observed rate is compared
//! with the desired one; when above it, the caller sleeps (holding the lock, so every
//! thread sharing the throttler waits) until the period's average falls to the desired
//! rate, and a new period starts.

use std::time::{Duration, Instant};

use parking_lot::Mutex;

const CHECK_INTERVAL: Duration = Duration::from_millis(100);

#[derive(Debug)]
struct Period {
    start: Instant,
    bytes: f64,
}

#[derive(Debug)]
pub struct Throttler {
    bytes_per_second: f64,
    period: Mutex<Period>,
}

impl Throttler {
    /// A throttler at `bytes_per_second`; infinite or non-positive rates never sleep.
    pub fn new(bytes_per_second: f64) -> Throttler {
        Throttler { bytes_per_second, period: Mutex::new(Period { start: Instant::now(), bytes: 0.0 }) }
    }

    /// Whether it ever sleeps (a finite, positive rate).
    pub fn is_limited(&self) -> bool {
        self.bytes_per_second().is_finite() && self.bytes_per_second() > 0.0
    }

    pub fn bytes_per_second(&self) -> f64 {
        self.bytes_per_second
    }

    /// Records `bytes` of I/O and sleeps when the rate is over the limit.
    pub fn maybe_throttle(&self, bytes: u64) {
        if !self.is_limited() {
            return;
        }
        let mut p = self.period.lock();
        p.bytes += bytes as f64;
        let elapsed = p.start.elapsed();
        let target = Duration::from_secs_f64(p.bytes / self.bytes_per_second);
        if elapsed < CHECK_INTERVAL && target < CHECK_INTERVAL {
            return;
        }
        if target > elapsed {
            std::thread::sleep(target - elapsed);
        }
        p.start = Instant::now();
        p.bytes = 0.0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holds_the_rate() {
        let t = Throttler::new(10_000_000.0);
        let start = Instant::now();
        for _ in 0..100 {
            t.maybe_throttle(50_000); // 5 MB at 10 MB/s: about 0.5 s
        }
        let took = start.elapsed().as_secs_f64();
        assert!((0.35..2.0).contains(&took), "{took}");
        let free = Throttler::new(f64::INFINITY);
        let start = Instant::now();
        for _ in 0..1000 {
            free.maybe_throttle(1 << 30);
        }
        assert!(start.elapsed() < Duration::from_millis(100));
    }
}
