//! The process-wide cache of materialised join steps (issue 17): one Arrow table per (database
//! file, join SQL), shared by every question, stage and session that runs the same join.
//!
//! - **Sharing**: a join is materialised once; concurrent callers of the same key wait for the
//!   first one (a per-key slot lock) instead of running the join again. A [`RecordBatch`] clone
//!   shares the Arrow buffers, so a hit costs a few reference counts.
//! - **Budget**: the cached tables hold at most [`budget`] bytes (Arrow buffer sizes,
//!   `TOOLFORGE_JOIN_CACHE_MIB`, default 256 MiB), or one table alone when it is larger than the
//!   whole budget (an *oversize* join); the least recently used are evicted first. The cache
//!   thus holds at most max(budget, one oversize join).
//! - **Oversize joins, one at a time**: once a join under construction has grown past the budget
//!   (the materialiser reports its bytes every 64K rows, [`crate::tools::table`]), it takes a
//!   process-wide gate, so at most one oversize join is materialised at a time, and the cache
//!   lets go of every other table (this one will fill it alone). Cached when done, it is shared
//!   like any other: the questions after it on the same join, and the callers that waited for it
//!   on its key, do not join again (the previous cache returned an oversize join uncached, so each
//!   of them, on each thread, materialised it anew). The gate is a plain lock taken and released
//!   within one call, held around SQLite stepping and column building, which run no rayon work
//!   and wait on no other lock (the cache's own lock is only taken briefly, and nothing waits
//!   while holding it), so no thread can wait at the gate while holding what its holder needs.
//! - **The bound**: the cache's own peak is about one budget (the partial join when it crosses
//!   the budget, while the cache still holds up to a budget) plus one oversize join (the one
//!   kept, or the one being built once the others are let go of); a partial join below the
//!   budget per other thread comes on top. So do the joins running questions still hold: a
//!   table evicted while a question executes on it lives until that question is done (at most
//!   one per thread, and on one thread the one being built is that question's), plus the
//!   executor's working set on it. See README § "The memory bound of the join step".
//! - **Freshness**: the key holds the file's length and modification time besides its path, so a
//!   rewritten database file is joined again.
//! - Errors are not cached (the next caller runs the join and gets the error itself).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::SystemTime;

use arrow_array::RecordBatch;

/// One version of a file, as every process-wide memo keyed by a file knows it (this cache, the
/// join step's kept connection, the compile stage's question records and database hashes): the
/// canonical path (`a/./b.sqlite`, `a/../a/b.sqlite` and a symbolic link to the file are one
/// file), the length and the modification time, read now. A file that cannot be read gets length
/// 0 and no time, so it is another version once it exists. A file rewritten in place with the
/// same length within one tick of the clock is not told apart.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FileVersion {
    path: PathBuf,
    len: u64,
    modified: Option<SystemTime>,
}

impl FileVersion {
    /// The version of the file at `path` now.
    pub fn of(path: &Path) -> FileVersion {
        let meta = std::fs::metadata(path).ok();
        FileVersion {
            path: std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf()),
            len: meta.as_ref().map_or(0, |m| m.len()),
            modified: meta.and_then(|m| m.modified().ok()),
        }
    }
}

/// What identifies one materialised join: the database file's [`FileVersion`] and the join SQL
/// ([`super::table::join_sql`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct JoinKey {
    file: FileVersion,
    sql: String,
}

impl JoinKey {
    /// The key of `sql` on the database file at `path` (its [`FileVersion`] read now: one file
    /// is cached once whatever its spelling, and re-joined once rewritten).
    pub fn new(path: &Path, sql: &str) -> JoinKey {
        JoinKey {
            file: FileVersion::of(path),
            sql: sql.to_string(),
        }
    }
}

type Slot = Arc<Mutex<Option<RecordBatch>>>;

#[derive(Default)]
struct Cache {
    slots: HashMap<JoinKey, (Slot, u64)>,
    /// Bytes of the cached tables.
    bytes: usize,
    /// Tables evicted while someone else (a session) still held them: counted by
    /// [`held_bytes`] until the last other holder lets go.
    orphans: Vec<RecordBatch>,
    /// Use counter (recency of each slot).
    clock: u64,
}

/// The gate an oversize join is materialised behind (module docs).
fn gate() -> &'static Mutex<()> {
    static GATE: OnceLock<Mutex<()>> = OnceLock::new();
    GATE.get_or_init(Default::default)
}

fn cache() -> &'static Mutex<Cache> {
    static CACHE: OnceLock<Mutex<Cache>> = OnceLock::new();
    CACHE.get_or_init(Default::default)
}

static BUDGET: OnceLock<usize> = OnceLock::new();

/// Sets the byte budget of the cache for this process (the live server's `--join-cache-mib`);
/// effective only before the cache's first use (later calls change nothing).
pub fn set_budget(bytes: usize) {
    let _ = BUDGET.set(bytes);
}

/// The byte budget of the cache: [`set_budget`]'s, else `TOOLFORGE_JOIN_CACHE_MIB` MiB (default
/// 256; 0 turns sharing off).
pub fn budget() -> usize {
    *BUDGET.get_or_init(|| {
        std::env::var("TOOLFORGE_JOIN_CACHE_MIB")
            .ok()
            .and_then(|v| v.parse::<usize>().ok())
            .unwrap_or(256)
            << 20
    })
}

/// The cached table under `key`, else `make(grown)`'s, cached (evicting the least recently used
/// others until the cache fits its budget or holds this table alone). `make` reports the bytes of its table under
/// construction to `grown` as it goes; past the budget, `grown` waits at the oversize gate
/// (module docs). `key` `None` (an in-memory database) bypasses the cache.
pub fn get_or_try_insert<E>(
    key: Option<JoinKey>,
    make: impl FnOnce(&mut dyn FnMut(usize)) -> Result<RecordBatch, E>,
) -> Result<RecordBatch, E> {
    get_or_try_insert_within(budget(), key, make)
}

/// [`get_or_try_insert`] with the budget given (tests).
fn get_or_try_insert_within<E>(
    budget: usize,
    key: Option<JoinKey>,
    make: impl FnOnce(&mut dyn FnMut(usize)) -> Result<RecordBatch, E>,
) -> Result<RecordBatch, E> {
    let Some(key) = key.filter(|_| budget > 0) else {
        return make(&mut |_| {});
    };
    let slot = {
        let mut c = cache().lock().expect("join cache lock");
        c.clock += 1;
        let now = c.clock;
        let (slot, used) = c
            .slots
            .entry(key.clone())
            .or_insert_with(|| (Arc::new(Mutex::new(None)), now));
        *used = now;
        slot.clone()
    };
    let mut guard = slot.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(batch) = guard.as_ref() {
        return Ok(batch.clone());
    }
    // Held from the moment the join grows past the budget until it is cached (or dropped).
    let mut oversize_gate: Option<MutexGuard<'static, ()>> = None;
    let made = make(&mut |bytes| {
        if bytes > budget && oversize_gate.is_none() {
            oversize_gate = Some(gate().lock().unwrap_or_else(|p| p.into_inner()));
            // This join alone will fill the cache: let go of the others now, not once it is done.
            evict(&mut cache().lock().expect("join cache lock"), &key, 0);
        }
    });
    let batch = match made {
        Ok(b) => b,
        Err(e) => {
            drop(guard);
            remove_if_empty(&key);
            return Err(e);
        }
    };
    *guard = Some(batch.clone());
    drop(guard);
    let mut c = cache().lock().expect("join cache lock");
    c.bytes += batch.get_array_memory_size();
    evict(&mut c, &key, budget);
    Ok(batch)
}

/// Drops `key`'s slot if it holds no table (after an error or an oversized join).
fn remove_if_empty(key: &JoinKey) {
    let mut c = cache().lock().expect("join cache lock");
    let empty = c
        .slots
        .get(key)
        .is_some_and(|(s, _)| s.try_lock().is_ok_and(|g| g.is_none()));
    if empty {
        c.slots.remove(key);
    }
}

/// Evicts least recently used tables (never `keep`) until the cache fits `budget` or holds
/// `keep` alone.
fn evict(c: &mut Cache, keep: &JoinKey, budget: usize) {
    while c.bytes > budget {
        let oldest = c
            .slots
            .iter()
            .filter(|(k, (s, _))| *k != keep && s.try_lock().is_ok_and(|g| g.is_some()))
            .min_by_key(|(_, (_, used))| *used)
            .map(|(k, _)| k.clone());
        let Some(k) = oldest else { break };
        if let Some((slot, _)) = c.slots.remove(&k) {
            if let Some(b) = slot.lock().ok().and_then(|mut g| g.take()) {
                c.bytes = c.bytes.saturating_sub(b.get_array_memory_size());
                if !unheld(&b) {
                    c.orphans.push(b);
                }
            }
        }
    }
    c.orphans.retain(|b| !unheld(b));
}

/// Whether `b` is held only by the caller (no other clone shares its columns).
fn unheld(b: &RecordBatch) -> bool {
    b.columns().iter().all(|a| Arc::strong_count(a) == 1)
}

/// Bytes of the joined tables the process holds through this cache: the cached ones, and those
/// evicted while a session still held them (until it lets go) — what the live server counts
/// against its memory budget ([`crate::serve::memory`]).
pub fn held_bytes() -> usize {
    let Ok(mut c) = cache().lock() else { return 0 };
    c.orphans.retain(|b| !unheld(b));
    c.orphans
        .iter()
        .map(RecordBatch::get_array_memory_size)
        .fold(c.bytes, usize::saturating_add)
}

/// Serialises the tests that need the cache to keep what they put in it against the test that
/// evicts everything (with a budget of one byte).
#[cfg(test)]
pub(crate) fn exclusive() -> MutexGuard<'static, ()> {
    static TESTS: Mutex<()> = Mutex::new(());
    TESTS.lock().unwrap_or_else(|p| p.into_inner())
}

/// Lets go of every cached table no one else holds (a table whose every column the cache alone
/// references: no session, question or running call has a clone of it); tables in use stay, so
/// a later join of the same key still shares them rather than materialising a second copy, and
/// slots being built are left alone. The live server calls this once it has been quiet for a
/// while ([`crate::serve::trim`]), so the joins a load filled the cache with do not stay
/// resident. Returns the bytes released.
pub fn release_unheld() -> usize {
    let mut c = cache().lock().expect("join cache lock");
    let keys: Vec<JoinKey> = c
        .slots
        .iter()
        .filter(|(_, (slot, _))| slot.try_lock().is_ok_and(|g| g.as_ref().is_some_and(unheld)))
        .map(|(k, _)| k.clone())
        .collect();
    let mut released = 0;
    for k in keys {
        if let Some((slot, _)) = c.slots.remove(&k) {
            if let Some(b) = slot.lock().ok().and_then(|mut g| g.take()) {
                released += b.get_array_memory_size();
            }
        }
    }
    c.bytes = c.bytes.saturating_sub(released);
    released
}

/// Bytes the cached tables hold now (for benchmarks and tests).
pub fn cached_bytes() -> usize {
    cache().lock().map(|c| c.bytes).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verify::Datum;

    #[test]
    fn a_join_is_materialised_once_per_key() {
        let _cache = exclusive();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.sqlite");
        std::fs::write(&path, b"x").unwrap();
        let key = || Some(JoinKey::new(&path, "SELECT 1"));
        let batch = || super::super::table::batch_from_columns(&["a".into()], vec![vec![Datum::Int(1)]]);
        let mut runs = 0;
        for _ in 0..3 {
            let b = get_or_try_insert::<()>(key(), |_| {
                runs += 1;
                Ok(batch())
            })
            .unwrap();
            assert_eq!(b.num_rows(), 1);
        }
        assert_eq!(runs, 1, "one materialisation for three uses");
        // A rewritten file is a new key.
        std::fs::write(&path, b"xy").unwrap();
        get_or_try_insert::<()>(key(), |_| {
            runs += 1;
            Ok(batch())
        })
        .unwrap();
        assert_eq!(runs, 2);
        // Errors are not cached.
        assert!(get_or_try_insert(Some(JoinKey::new(&path, "bad")), |_| Err::<RecordBatch, _>("e")).is_err());
        assert!(get_or_try_insert::<()>(Some(JoinKey::new(&path, "bad")), |_| Ok(batch())).is_ok());
    }

    #[test]
    fn release_unheld_lets_go_of_tables_only_the_cache_holds() {
        let _cache = exclusive();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.sqlite");
        std::fs::write(&path, b"r").unwrap();
        let key = |sql: &str| Some(JoinKey::new(&path, sql));
        let batch = || super::super::table::batch_from_columns(&["a".into()], vec![vec![Datum::Int(1)]]);
        let held = get_or_try_insert::<()>(key("held"), |_| Ok(batch())).unwrap();
        get_or_try_insert::<()>(key("unheld"), |_| Ok(batch())).unwrap();
        assert!(release_unheld() >= held.get_array_memory_size());
        // The table a caller still holds stays shared; the other one is joined again.
        let cached = |sql: &str| get_or_try_insert(key(sql), |_| Err(())).is_ok();
        assert!(cached("held"), "a table in use was released");
        assert!(!cached("unheld"), "a table only the cache held was kept");
        drop(held);
        release_unheld();
        assert!(!cached("held"));
    }

    #[test]
    fn two_spellings_of_one_database_share_one_cached_join() {
        let _cache = exclusive();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d.sqlite");
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch("CREATE TABLE t (a); INSERT INTO t VALUES (1), (2), (3);")
            .unwrap();
        drop(conn);
        let tables = vec![super::super::table::JoinTable {
            alias: "t".into(),
            table: "t".into(),
            prefix: "t".into(),
        }];
        assert_eq!(super::super::table::join_at(&path, &tables, &[]).unwrap().num_rows(), 3);
        // The file no longer reads as a database (same length and time): another spelling of
        // its path must be served the cached join, not join again (the old key, the path as
        // given, missed and failed here).
        let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        let modified = file.metadata().unwrap().modified().unwrap();
        let len = file.metadata().unwrap().len() as usize;
        std::io::Write::write_all(&mut &file, &vec![b'x'; len]).unwrap();
        file.set_modified(modified).unwrap();
        drop(file);
        let link = dir.path().join("link.sqlite");
        std::os::unix::fs::symlink(&path, &link).unwrap();
        for spelling in [dir.path().join(".").join("d.sqlite"), link] {
            assert_eq!(
                super::super::table::join_at(&spelling, &tables, &[])
                    .unwrap()
                    .num_rows(),
                3,
                "{}",
                spelling.display()
            );
        }
    }

    #[test]
    fn oversize_joins_are_shared_and_materialised_one_at_a_time() {
        let _cache = exclusive();
        use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
        use std::time::Duration;
        // One test for every use of the process's one oversize place (tests run in parallel).
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("o.sqlite");
        std::fs::write(&path, b"o").unwrap();
        let key = |sql: &str| Some(JoinKey::new(&path, sql));
        let batch = || super::super::table::batch_from_columns(&["a".into()], vec![vec![Datum::Int(1)]]);
        // Budget 1 byte: every table is oversize. Concurrent users of one oversize join wait for
        // the first and share its table (the old cache returned it uncached: 4 materialisations).
        let runs = AtomicUsize::new(0);
        let shared = |runs: &AtomicUsize| {
            get_or_try_insert_within::<()>(1, key("shared"), |grown| {
                runs.fetch_add(1, SeqCst);
                grown(2);
                std::thread::sleep(Duration::from_millis(50));
                Ok(batch())
            })
            .unwrap()
        };
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| assert_eq!(shared(&runs).num_rows(), 1));
            }
        });
        assert_eq!(runs.load(SeqCst), 1, "one materialisation for four concurrent users");
        shared(&runs);
        assert_eq!(runs.load(SeqCst), 1, "a later question shares the kept oversize join");
        // Different oversize joins: past the budget, one at a time (the old cache materialised
        // them side by side, one per thread).
        let (inside, most) = (AtomicUsize::new(0), AtomicUsize::new(0));
        std::thread::scope(|s| {
            for i in 0..3 {
                let (inside, most, key) = (&inside, &most, &key);
                s.spawn(move || {
                    get_or_try_insert_within::<()>(1, key(&format!("big {i}")), |grown| {
                        grown(2);
                        most.fetch_max(inside.fetch_add(1, SeqCst) + 1, SeqCst);
                        std::thread::sleep(Duration::from_millis(30));
                        inside.fetch_sub(1, SeqCst);
                        Ok(batch())
                    })
                    .unwrap();
                });
            }
        });
        assert_eq!(most.load(SeqCst), 1, "one oversize join materialised at a time");
        // Only the last one is kept (an uncached key runs `make`, whose error is not cached).
        let kept: Vec<bool> = ["shared", "big 0", "big 1", "big 2"]
            .iter()
            .map(|k| get_or_try_insert_within(1, key(k), |_| Err(())).is_ok())
            .collect();
        assert_eq!(kept.iter().filter(|k| **k).count(), 1, "{kept:?}");
        assert!(!kept[0], "the first oversize join was let go of");
    }
}
