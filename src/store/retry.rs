//! Compare-and-swap retries: one loop and one backoff for every store's
//! contended edits.

use std::time::Duration;

/// How long to pause between tries: `first`, doubling per try up to
/// `cap`, times a random factor in [0.5, 1.5), so contending writers
/// spread out instead of colliding again.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Backoff {
    pub(crate) first: Duration,
    pub(crate) cap: Duration,
}

/// A local store's: 100 µs doubling to 20 ms.
pub(crate) const LOCAL: Backoff = Backoff {
    first: Duration::from_micros(100),
    cap: Duration::from_millis(20),
};

impl Backoff {
    /// Sleeps before try `attempt` (the first retry is 1).
    pub(crate) fn pause(self, attempt: u32) {
        use std::hash::{BuildHasher, RandomState};
        let base = self
            .first
            .saturating_mul(1 << attempt.min(16))
            .min(self.cap);
        let jitter = RandomState::new().hash_one(attempt) % 1000;
        std::thread::sleep(base / 2 + base.mul_f64(jitter as f64 / 1000.0));
    }
}

/// Runs `attempt` up to `attempts` times, pausing before each retry,
/// until it answers `Ok(Some(_))` or an error; `Ok(None)` means it lost a
/// compare-and-swap and should run again on fresh content. `Ok(None)`
/// after the last try: the caller's conflict error.
pub(crate) fn until_swapped<T, E>(
    attempts: u32,
    backoff: Backoff,
    mut attempt: impl FnMut() -> Result<Option<T>, E>,
) -> Result<Option<T>, E> {
    for n in 0..attempts {
        if n > 0 {
            backoff.pause(n);
        }
        if let Some(done) = attempt()? {
            return Ok(Some(done));
        }
    }
    Ok(None)
}
