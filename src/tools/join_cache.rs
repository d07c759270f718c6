//! The process-wide cache of materialised join steps (issue 17): one Arrow table per (database
//! file, join SQL), shared by every question, stage and session that runs the same join.
//!
//! - **Sharing**: a join is materialised once; concurrent callers of the same key wait for the
//!   first one (a per-key slot lock) instead of running the join again. A [`RecordBatch`] clone
//!   shares the Arrow buffers, so a hit costs a few reference counts.
//! - **Bound**: the cached tables hold at most [`budget`] bytes (Arrow buffer sizes,
//!   `TOOLFORGE_JOIN_CACHE_MIB`, default 256 MiB); the least recently used are evicted first, and a
//!   join larger than the whole budget is returned without being cached. Peak memory is the
//!   budget plus the joins being used at that moment.
//! - **Freshness**: the key holds the file's length and modification time besides its path, so a
//!   rewritten database file is joined again.
//! - Errors are not cached (the next caller runs the join and gets the error itself).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
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
    /// Use counter (recency of each slot).
    clock: u64,
}

fn cache() -> &'static Mutex<Cache> {
    static CACHE: OnceLock<Mutex<Cache>> = OnceLock::new();
    CACHE.get_or_init(Default::default)
}

/// The byte budget of the cache: `TOOLFORGE_JOIN_CACHE_MIB` MiB (default 256; 0 turns sharing
/// off).
pub fn budget() -> usize {
    static BUDGET: OnceLock<usize> = OnceLock::new();
    *BUDGET.get_or_init(|| {
        std::env::var("TOOLFORGE_JOIN_CACHE_MIB")
            .ok()
            .and_then(|v| v.parse::<usize>().ok())
            .unwrap_or(256)
            << 20
    })
}

/// The cached table under `key`, else `make()`'s, cached when it fits the budget. `key` `None`
/// (an in-memory database) bypasses the cache.
pub fn get_or_try_insert<E>(
    key: Option<JoinKey>,
    make: impl FnOnce() -> Result<RecordBatch, E>,
) -> Result<RecordBatch, E> {
    let Some(key) = key.filter(|_| budget() > 0) else {
        return make();
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
    let batch = match make() {
        Ok(b) => b,
        Err(e) => {
            drop(guard);
            remove_if_empty(&key);
            return Err(e);
        }
    };
    let size = batch.get_array_memory_size();
    if size > budget() {
        drop(guard);
        remove_if_empty(&key);
        return Ok(batch);
    }
    *guard = Some(batch.clone());
    drop(guard);
    let mut c = cache().lock().expect("join cache lock");
    c.bytes += size;
    evict(&mut c, &key);
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

/// Evicts least recently used tables (never `keep`) until the cache fits its budget.
fn evict(c: &mut Cache, keep: &JoinKey) {
    while c.bytes > budget() {
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
            }
        }
    }
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
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.sqlite");
        std::fs::write(&path, b"x").unwrap();
        let key = || Some(JoinKey::new(&path, "SELECT 1"));
        let batch = || super::super::table::batch_from_columns(&["a".into()], vec![vec![Datum::Int(1)]]);
        let mut runs = 0;
        for _ in 0..3 {
            let b = get_or_try_insert::<()>(key(), || {
                runs += 1;
                Ok(batch())
            })
            .unwrap();
            assert_eq!(b.num_rows(), 1);
        }
        assert_eq!(runs, 1, "one materialisation for three uses");
        // A rewritten file is a new key.
        std::fs::write(&path, b"xy").unwrap();
        get_or_try_insert::<()>(key(), || {
            runs += 1;
            Ok(batch())
        })
        .unwrap();
        assert_eq!(runs, 2);
        // Errors are not cached.
        assert!(get_or_try_insert(Some(JoinKey::new(&path, "bad")), || Err::<RecordBatch, _>("e")).is_err());
        assert!(get_or_try_insert::<()>(Some(JoinKey::new(&path, "bad")), || Ok(batch())).is_ok());
    }

    #[test]
    fn two_spellings_of_one_database_share_one_cached_join() {
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
}
