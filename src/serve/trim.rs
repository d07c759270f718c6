//! Memory returned to the system after load (issue 31, item 6). glibc's malloc keeps the pages
//! a burst of requests freed (in the main heap above its top chunk's trim threshold, and in every
//! thread arena, which it never trims on its own), so a long-running server sat at its peak: RSS
//! 10 s after a load was 1.60× idle on rest-spider and 1.76× on slot-spider
//! (`benches/rss_after_load.sh`). `malloc_trim(0)` hands every arena's free pages back
//! (`madvise(MADV_DONTNEED)`); the server calls it once the requests have stopped for a moment:
//! 1.37× and 1.47× after (the rest is the caches a load fills and keeps: SQLite connections and
//! their page caches per worker thread, the join cache). A swap of allocator was measured and
//! rejected: mimalloc's idle RSS was 1.3–2.4× glibc's and its after-load ratio 1.98 / 1.10.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How often the trimmer looks, and how long the server must have been quiet before it trims.
pub const QUIET: Duration = Duration::from_secs(2);

/// Requests seen so far (a request counts when it arrives); the trimmer compares two readings.
static REQUESTS: AtomicU64 = AtomicU64::new(0);

/// Counts one request (called by the connection loop for every request).
pub fn request_seen() {
    REQUESTS.fetch_add(1, Ordering::Relaxed);
}

/// Spawns the trimmer on the current tokio runtime: every [`QUIET`], if requests arrived before the
/// last look and none since, the freed memory is returned to the system (on a blocking thread;
/// it takes each arena's lock for the length of one walk over its free pages). A no-op on
/// systems without glibc.
pub fn spawn_trimmer() {
    tokio::spawn(async {
        let mut seen = REQUESTS.load(Ordering::Relaxed);
        let mut trimmed = seen;
        let mut interval = tokio::time::interval(QUIET);
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            interval.tick().await;
            let now = REQUESTS.load(Ordering::Relaxed);
            if now == seen && now != trimmed {
                let _ = tokio::task::spawn_blocking(trim).await;
                trimmed = now;
            }
            seen = now;
        }
    });
}

/// Returns the freed memory of every malloc arena to the system; how long it took. The crate's
/// one `unsafe` block (the lint is `deny`, allowed here only): a call of glibc's `malloc_trim`.
#[allow(unsafe_code)]
pub fn trim() -> Duration {
    let start = Instant::now();
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `malloc_trim` only releases free memory glibc owns; it has no preconditions.
    unsafe {
        libc::malloc_trim(0);
    }
    start.elapsed()
}
