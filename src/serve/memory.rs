//! One memory budget for the whole server (issue 47 D2), shared by every session's results, the
//! cached joins and the work in flight, so that no mix of requests — many sessions each within
//! its own budget, several joins each accepted on its own — can take the process past what it
//! may allocate.
//!
//! - **What is counted**: the joined tables the process holds
//!   ([`crate::tools::join_cache::held_bytes`]: cached, or evicted from the cache but still held
//!   by a session), plus [`Reservation`]s: every tool call reserves its working memory's upper
//!   bound ([`crate::tools::executor::estimate`]) before it runs, a join step reserves its
//!   table's bytes as it grows, and a result a session keeps holds a reservation of its bytes
//!   until it is dropped or the session ends ([`super::budget`]).
//! - **Admission**: a reservation that would pass the budget first ends the least recently used
//!   idle sessions (not the caller's, none running a call) one at a time, releasing what they
//!   held; when none is left it is refused, and the request gets 503 with `Retry-After`
//!   (JSON-RPC −32001 over MCP), naming `--max-server-mib`.
//! - **Default budget** ([`default_budget`]): a quarter of the least of the machine's memory,
//!   the cgroup's memory limit and the process's address-space limit (`ulimit -v`): the counted
//!   bytes are upper bounds of Arrow data, and the rest of the process (threads' stacks, malloc's
//!   arenas, transient JSON) needs room too.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The server-wide budget and what is reserved from it.
#[derive(Debug)]
pub struct ServerMemory {
    limit: usize,
    reserved: AtomicUsize,
    /// No budget (`--max-server-mib 0`, for benchmarks): nothing is counted, every
    /// reservation succeeds, and answers are written without being measured first.
    off: bool,
}

impl ServerMemory {
    /// A budget of `limit` bytes; `0`: no budget ([`ServerMemory::is_off`]).
    pub fn new(limit: usize) -> Arc<ServerMemory> {
        Arc::new(ServerMemory {
            limit: if limit == 0 { usize::MAX } else { limit },
            reserved: AtomicUsize::new(0),
            off: limit == 0,
        })
    }

    /// The budget in bytes (`usize::MAX` when off).
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Whether there is no budget (`--max-server-mib 0`).
    pub fn is_off(&self) -> bool {
        self.off
    }

    /// Bytes counted now: reservations plus the joined tables held.
    pub fn used(&self) -> usize {
        self.reserved
            .load(Ordering::Relaxed)
            .saturating_add(crate::tools::join_cache::held_bytes())
    }

    /// Adds `bytes` to the reserved bytes when the total stays within the budget.
    fn take(&self, bytes: usize) -> bool {
        if self.off {
            return true;
        }
        let held = crate::tools::join_cache::held_bytes();
        self.reserved
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |r| {
                let total = r.checked_add(bytes)?;
                (total.saturating_add(held) <= self.limit).then_some(total)
            })
            .is_ok()
    }

    fn give(&self, bytes: usize) {
        if self.off {
            return;
        }
        let _ = self
            .reserved
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |r| Some(r.saturating_sub(bytes)));
    }

    /// An empty reservation, to grow with [`Reservation::resize`].
    pub fn empty(self: &Arc<ServerMemory>) -> Reservation {
        Reservation {
            memory: self.clone(),
            bytes: 0,
        }
    }
}

/// Bytes reserved from the server's budget, given back when dropped.
#[derive(Debug)]
pub struct Reservation {
    memory: Arc<ServerMemory>,
    bytes: usize,
}

impl Reservation {
    /// Bytes reserved.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Makes the reservation `bytes`; shrinking always succeeds, growing only within the
    /// budget (`false`: unchanged).
    pub fn resize(&mut self, bytes: usize) -> bool {
        if bytes <= self.bytes {
            self.memory.give(self.bytes - bytes);
        } else if !self.memory.take(bytes - self.bytes) {
            return false;
        }
        self.bytes = bytes;
        true
    }

    /// Moves `bytes` (at most what is reserved) out of this reservation into a new one: the
    /// budget's use is unchanged, and each part is given back when it is dropped.
    pub fn split(&mut self, bytes: usize) -> Reservation {
        let bytes = bytes.min(self.bytes);
        self.bytes -= bytes;
        Reservation {
            memory: self.memory.clone(),
            bytes,
        }
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.memory.give(self.bytes);
    }
}

/// The default budget (module docs): a quarter of the least of physical memory
/// (`/proc/meminfo`), the cgroup's `memory.max` and `RLIMIT_AS`; 1 GiB when none is known.
pub fn default_budget() -> usize {
    let mut least: Option<u64> = None;
    let mut consider = |v: Option<u64>| {
        if let Some(v) = v.filter(|v| *v > 0) {
            least = Some(least.map_or(v, |l| l.min(v)));
        }
    };
    consider(
        std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|m| {
                m.lines()
                    .find_map(|l| l.strip_prefix("MemTotal:"))
                    .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            })
            .map(|kb| kb << 10),
    );
    for path in [
        "/sys/fs/cgroup/memory.max",
        "/sys/fs/cgroup/memory/memory.limit_in_bytes",
    ] {
        consider(
            std::fs::read_to_string(path)
                .ok()
                .and_then(|v| v.trim().parse::<u64>().ok())
                .filter(|v| *v < 1 << 60),
        );
    }
    consider(address_space_limit());
    usize::try_from(least.map_or(4 << 30, |l| l / 4)).unwrap_or(usize::MAX)
}

/// The process's `RLIMIT_AS` (`ulimit -v`) when it is set, from `/proc/self/limits` (its "Max
/// address space" line: soft limit in bytes, or `unlimited`).
fn address_space_limit() -> Option<u64> {
    std::fs::read_to_string("/proc/self/limits")
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("Max address space"))?
        .split_whitespace()
        .next()?
        .parse::<u64>()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reservations_stay_within_the_budget_and_are_given_back() {
        let memory = ServerMemory::new(1000 + crate::tools::join_cache::held_bytes());
        let mut a = memory.empty();
        assert!(a.resize(600));
        let mut b = memory.empty();
        assert!(!b.resize(600), "past the budget");
        assert!(b.resize(400));
        assert!(a.resize(100));
        assert!(b.resize(900));
        drop(b);
        drop(a);
        assert!(memory.empty().resize(1000));
    }

    #[test]
    fn a_split_reservation_gives_back_each_part_when_it_is_dropped() {
        let memory = ServerMemory::new(1000 + crate::tools::join_cache::held_bytes());
        let mut a = memory.empty();
        assert!(a.resize(1000));
        let part = a.split(300);
        assert_eq!((a.bytes(), part.bytes()), (700, 300));
        assert!(!memory.empty().resize(1), "the parts still hold the whole budget");
        drop(part);
        assert!(memory.empty().resize(300));
        drop(a);
        assert!(memory.empty().resize(1000));
    }

    #[test]
    fn the_default_budget_is_at_most_a_quarter_of_the_address_space_limit() {
        let budget = default_budget();
        assert!(budget > 0);
        if let Some(l) = address_space_limit() {
            assert!(budget as u64 <= l / 4);
        }
    }
}
