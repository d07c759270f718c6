//! Memory returned to the system after load (issue 31, item 6), in three parts:
//!
//! - **Trim**: glibc's malloc keeps the pages a burst of requests freed (in the main heap above
//!   its top chunk's trim threshold, and in every thread arena, which it never trims on its own).
//!   `malloc_trim(0)` hands every arena's free pages back (`madvise(MADV_DONTNEED)`); the server
//!   calls it once requests have stopped for [`QUIET`].
//! - **Release**: what a load fills and keeps is mostly not free memory but caches: a pooled
//!   SQLite connection (page cache, schema, prepared statements) per concurrent request and
//!   database, the join step's connection kept per blocking thread, and the joined tables of the
//!   join cache. Once the server has been quiet for `--release-idle-secs` (default 5 s) it lets
//!   go of the pooled connections and of the cached joins no session holds (the caller's
//!   `release`, [`super::state::AppState`]), then trims; the blocking threads (each with its
//!   kept connection) end after [`QUIET`] without work ([`super::run`]'s runtime).
//! - **Arenas**: glibc makes up to 8 arenas per core, each keeping its own fragments; the server
//!   limits them to one per core ([`limit_arenas`], `M_ARENA_MAX`) unless `GLIBC_TUNABLES` sets
//!   `glibc.malloc.arena_max`.
//!
//! Measured with `benches/rss_after_load.sh` (RSS 10 s after the load / idle RSS; the README has
//! the whole table): glibc alone 1.60 (rest-spider) and 1.76 (slot-spider); with the trim 1.45 /
//! 1.45; jemalloc 5.3 (default, and with `background_thread`, 1 s dirty decay) 1.38–1.44 /
//! 1.17–1.27 with idle RSS up to 1.35× glibc's; mimalloc 1.98 / 1.10 with idle RSS 1.3–2.4×
//! glibc's; glibc with the trim, the release and one arena per core 1.09–1.11 / 0.95–1.18. The
//! allocator was not the cause, the caches were.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How long the server must have been quiet before it trims; also how long a blocking thread
/// waits for work before it ends.
pub const QUIET: Duration = Duration::from_secs(2);

/// How often the trimmer looks at the request count.
const TICK: Duration = Duration::from_millis(500);

/// Requests seen so far (a request counts when it arrives); the trimmer compares two readings.
static REQUESTS: AtomicU64 = AtomicU64::new(0);

/// Counts one request (called by the connection loop for every request).
pub fn request_seen() {
    REQUESTS.fetch_add(1, Ordering::Relaxed);
}

/// Spawns the trimmer on the current tokio runtime. Once no request has arrived for [`QUIET`]
/// (and some arrived since the last trim) the freed memory is returned to the system; once none
/// has arrived for `release_after` (when given, and some arrived since the last release),
/// `release` runs first, then the trim. Both on a blocking thread (a trim takes each arena's lock
/// for one walk over its free pages). The trim is a no-op on systems without glibc.
pub fn spawn_trimmer(release_after: Option<Duration>, release: impl Fn() + Send + Sync + 'static) {
    let release = std::sync::Arc::new(release);
    tokio::spawn(async move {
        let mut seen = REQUESTS.load(Ordering::Relaxed);
        let mut quiet_since = Instant::now();
        // The request count at the last trim and at the last release.
        let (mut trimmed, mut released) = (seen, seen);
        let mut interval = tokio::time::interval(TICK);
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            interval.tick().await;
            let now = REQUESTS.load(Ordering::Relaxed);
            if now != seen {
                seen = now;
                quiet_since = Instant::now();
                continue;
            }
            let quiet = quiet_since.elapsed();
            if release_after.is_some_and(|after| quiet >= after) && now != released {
                let release = release.clone();
                let _ = tokio::task::spawn_blocking(move || {
                    release();
                    trim()
                })
                .await;
                (released, trimmed) = (now, now);
            } else if quiet >= QUIET && now != trimmed {
                let _ = tokio::task::spawn_blocking(trim).await;
                trimmed = now;
            }
        }
    });
}

/// Returns the freed memory of every malloc arena to the system; how long it took. One of the
/// crate's three `unsafe` blocks (the lint is `deny`, allowed here only; the third maps store
/// entries, `store::local`): a call of glibc's
/// `malloc_trim`.
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

/// Limits glibc's malloc to one arena per core (its default is 8 per core, each keeping its
/// own free fragments after a burst of threads), unless the operator set
/// `glibc.malloc.arena_max` in `GLIBC_TUNABLES`. Called once, before the server's threads start.
/// Another of the crate's `unsafe` blocks: a call of glibc's `mallopt`.
#[allow(unsafe_code)]
pub fn limit_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        if std::env::var("GLIBC_TUNABLES").is_ok_and(|t| t.contains("arena_max")) {
            return;
        }
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let cores = libc::c_int::try_from(cores).unwrap_or(libc::c_int::MAX);
        // SAFETY: `mallopt` sets a malloc parameter; M_ARENA_MAX only bounds arenas made later.
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, cores);
        }
    }
}
