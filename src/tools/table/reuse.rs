//! The join step's read-only connection, kept open per thread for the next join on the same
//! database file (issue 17): opening a database and parsing its schema was a fifth of a join
//! miss's cost on Spider (156 joins, each on a fresh connection).
//!
//! A connection is reused only for the same [`FileVersion`] of the file, so a rewritten file is
//! opened again; each thread keeps one connection (bounded memory: SQLite's page cache of one
//! connection per thread). A connection's state does not change what a query returns.

use std::cell::RefCell;
use std::path::Path;

use super::open_read_only;
use crate::tools::join_cache::FileVersion;

thread_local! {
    static KEPT: RefCell<Option<(FileVersion, rusqlite::Connection)>> = const { RefCell::new(None) };
}

/// Runs `f` with a read-only connection to the database file at `path`: this thread's kept one
/// when it is of the same file version, else a new one (kept afterwards in its place). Errors:
/// `<path>: <SQLite error>` when the file does not open.
pub(super) fn with_connection<T>(
    path: &Path,
    f: impl FnOnce(&mut rusqlite::Connection) -> Result<T, String>,
) -> Result<T, String> {
    let id = FileVersion::of(path);
    let kept = KEPT.with(|k| k.borrow_mut().take()).filter(|(i, _)| *i == id);
    let conn = match kept {
        Some((_, c)) => c,
        None => open_read_only(path).map_err(|e| format!("{}: {e}", path.display()))?,
    };
    let mut conn = conn;
    let out = f(&mut conn);
    KEPT.with(|k| *k.borrow_mut() = Some((id, conn)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kept_connection_serves_only_its_own_file_version() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d.sqlite");
        let make = |rows: &str| {
            let _ = std::fs::remove_file(&path);
            let c = rusqlite::Connection::open(&path).unwrap();
            c.execute_batch(&format!("CREATE TABLE t (a); INSERT INTO t VALUES {rows};"))
                .unwrap();
        };
        let count = || {
            with_connection(&path, |c| {
                c.query_row("SELECT count(*) FROM t", [], |r| r.get::<_, i64>(0))
                    .map_err(|e| e.to_string())
            })
            .unwrap()
        };
        make("(1), (2)");
        assert_eq!(count(), 2);
        assert_eq!(count(), 2);
        // A new file at the same path (a new inode the kept connection does not see): opened
        // again, not read through the old connection.
        make("(1), (2), (3)");
        assert_eq!(count(), 3);
        assert!(with_connection(&dir.path().join("absent.sqlite"), |_| Ok(())).is_err());
    }
}
