//! The local-directory [`Backend`]: entries are files under the store root, written to a
//! `*.tmp` sibling and hard-linked into place (put-if-absent: the link fails when the entry
//! exists), so a reader never sees a half-written entry and two writers never interleave.
//!
//! Temp files are named after their writer, `.<entry>.<machine>.<pid>.<n>.tmp` ([`TempOwner`]):
//! opening a store removes one only when it is provably abandoned (issue 34 item 5) — written
//! on this machine by a process that is no longer running, or untouched for
//! [`ABANDONED_AFTER`] (a writer on another machine sharing the directory, e.g. the Slurm
//! driver's shared store, whose pid means nothing here). A live writer's temp file is never
//! removed, so shards writing while others open the directory all succeed.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::error::io_err;
use super::{Backend, Created, StoreError};

/// How long a temp file may go unmodified before any process may remove it. An entry's temp file
/// is written in one `write_all` of bytes already in memory and linked right after, so a live
/// writer touches it within seconds; an hour is far beyond the longest write.
pub const ABANDONED_AFTER: Duration = Duration::from_secs(3600);

/// Who wrote a temp file: this machine's token and the writer's process id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TempOwner {
    /// 12 hex digits of blake3(host name, pid namespace): processes with the same token see the
    /// same `/proc`.
    pub machine: String,
    /// The writer's process id.
    pub pid: u32,
}

/// This machine's token (see [`TempOwner::machine`]); `unknown` without `/proc`.
pub fn machine_token() -> &'static str {
    static TOKEN: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    TOKEN.get_or_init(|| {
        let host = fs::read_to_string("/proc/sys/kernel/hostname").ok();
        let ns = fs::read_link("/proc/self/ns/pid").ok();
        match (host, ns) {
            (Some(host), Some(ns)) => {
                let id = format!("{}\0{}", host.trim(), ns.display());
                blake3::hash(id.as_bytes()).to_hex()[..12].to_string()
            }
            _ => "unknown".into(),
        }
    })
}

/// The temp file name for `entry` written by this process (unique per call).
pub fn temp_name(entry: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    format!(".{entry}.{}.{}.{n}.tmp", machine_token(), std::process::id())
}

/// The writer recorded in a temp file name made by [`temp_name`]; `None` for other names.
pub fn temp_owner(name: &str) -> Option<TempOwner> {
    let rest = name.strip_prefix('.')?.strip_suffix(".tmp")?;
    let mut parts = rest.rsplitn(4, '.');
    let (_n, pid, machine, _entry) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    Some(TempOwner {
        machine: machine.to_string(),
        pid: pid.parse().ok()?,
    })
}

/// Whether the temp file `path` is provably abandoned: its writer ran on this machine and is
/// gone, or it was not modified for [`ABANDONED_AFTER`]. A temp file of a live writer is not.
pub fn abandoned(path: &Path) -> bool {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    if let Some(owner) = temp_owner(&name) {
        let here = owner.machine == machine_token() && owner.machine != "unknown";
        if here && !Path::new("/proc").join(owner.pid.to_string()).exists() {
            return true;
        }
    }
    let modified = fs::metadata(path).and_then(|m| m.modified());
    modified.is_ok_and(|t| t.elapsed().is_ok_and(|age| age > ABANDONED_AFTER))
}

/// A store directory (`<root>/objects/<2 hex>/<64 hex>`).
#[derive(Debug)]
pub struct Local {
    root: PathBuf,
}

impl Local {
    /// Opens (creating if needed) the store at `root` and removes the `*.tmp` files that are
    /// provably abandoned ([`abandoned`]).
    ///
    /// Errors: the directory cannot be created or read.
    pub fn open(root: &Path) -> Result<Local, StoreError> {
        let objects = root.join("objects");
        fs::create_dir_all(&objects).map_err(io_err(&objects))?;
        for shard in fs::read_dir(&objects).map_err(io_err(&objects))? {
            let shard = shard.map_err(io_err(&objects))?.path();
            if !shard.is_dir() {
                continue;
            }
            for entry in fs::read_dir(&shard).map_err(io_err(&shard))? {
                let path = entry.map_err(io_err(&shard))?.path();
                if path.extension().is_some_and(|e| e == "tmp") && abandoned(&path) {
                    let _ = fs::remove_file(&path);
                }
            }
        }
        Ok(Local {
            root: root.to_path_buf(),
        })
    }
}

/// Entries at least this large are memory-mapped rather than read ([`read_entry`]).
const MAP_BYTES: u64 = 1 << 20;

/// The bytes of the entry file at `path`: a small file read, a large one (a trajectory segment's
/// megabytes) memory-mapped, so a merge copies its bytes once, into the output file. Safe to map:
/// an entry file is never changed in place — it is written under a temporary name and renamed
/// ([`Local::create`]), and a removed or replaced entry keeps its old pages for the mapping.
/// (Someone else truncating an entry file while a build maps it would end the process with
/// SIGBUS: entries are not to be edited by hand while builds run.) One of the crate's few
/// `unsafe` blocks (the lint is `deny`, allowed here only).
#[allow(unsafe_code)]
fn read_entry(path: &Path) -> std::io::Result<bytes::Bytes> {
    let file = fs::File::open(path)?;
    if file.metadata()?.len() < MAP_BYTES {
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut &file, &mut bytes)?;
        return Ok(bytes.into());
    }
    // SAFETY: the file is never written or truncated in place by toolforge (see above); the
    // mapping is read-only and lives as long as the `Bytes` that own it.
    let map = unsafe { memmap2::Mmap::map(&file)? };
    // Listed by address, so the merge can copy its slices file to file ([`super::mapped`]).
    Ok(bytes::Bytes::from_owner(super::mapped::Mapped::new(map, file)))
}

impl Backend for Local {
    fn read(&self, name: &str) -> Result<Option<bytes::Bytes>, StoreError> {
        let path = self.root.join(name);
        match read_entry(&path) {
            Ok(bytes) => Ok(Some(bytes)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io_err(&path)(e)),
        }
    }

    fn create(&self, name: &str, bytes: &[u8]) -> Result<Created, StoreError> {
        self.create_parts(name, &[bytes])
    }

    fn create_parts(&self, name: &str, parts: &[&[u8]]) -> Result<Created, StoreError> {
        use std::io::Write;
        let path = self.root.join(name);
        let dir = path.parent().unwrap_or(Path::new("."));
        fs::create_dir_all(dir).map_err(io_err(dir))?;
        let file_name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        // Unique per call and named after this process: rayon workers of one process may write
        // one key at once, and other processes' opens keep it while we run.
        let tmp = dir.join(temp_name(&file_name));
        // A failed write (disk full) leaves no partial temp file behind.
        let written = fs::File::create(&tmp).and_then(|mut file| parts.iter().try_for_each(|p| file.write_all(p)));
        if let Err(e) = written {
            let _ = fs::remove_file(&tmp);
            return Err(io_err(&tmp)(e));
        }
        // Not synced: an entry is a cache of its key's payload, and one torn by a crash fails its
        // checksum ([`super::Store::get`]) and is recomputed. Forty syncs (a sel-spider build's
        // entries) cost as much wall time as its Parquet (issue 17).
        // The link is the put-if-absent: it fails with AlreadyExists when another writer won.
        let linked = fs::hard_link(&tmp, &path);
        let outcome = match linked {
            Ok(()) => Ok(Created::Written),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(Created::Present),
            // A file system without hard links: rename (atomic; an existing entry is replaced
            // by the same bytes, as the payload of a key does not depend on its writer).
            Err(_) => fs::rename(&tmp, &path)
                .map(|()| Created::Written)
                .map_err(io_err(&path)),
        };
        let _ = fs::remove_file(&tmp);
        outcome
    }

    fn remove(&self, name: &str) -> Result<(), StoreError> {
        let path = self.root.join(name);
        match fs::remove_file(&path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(io_err(&path)(e)),
        }
    }

    fn describe(&self) -> String {
        self.root.display().to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opening_a_store_keeps_live_writers_temp_files_and_removes_abandoned_ones() {
        let dir = tempfile::tempdir().unwrap();
        let shard = dir.path().join("objects/ab");
        fs::create_dir_all(&shard).unwrap();
        let me = machine_token();
        // Ours (live), a dead process's on this machine (pid above the kernel's pid_max of 2^22),
        // another machine's fresh one, another machine's hour-old one, an old-format fresh one.
        let live = shard.join(temp_name("ab01"));
        let dead = shard.join(format!(".ab02.{me}.99999999.0.tmp"));
        let remote = shard.join(".ab03.0123456789ab.1.0.tmp");
        let stale = shard.join(".ab04.0123456789ab.1.0.tmp");
        let legacy = shard.join(".ab05.1-ThreadId(1).tmp");
        for p in [&live, &dead, &remote, &stale, &legacy] {
            fs::write(p, b"half").unwrap();
        }
        let old = std::time::SystemTime::now() - ABANDONED_AFTER - Duration::from_secs(60);
        fs::File::options()
            .write(true)
            .open(&stale)
            .unwrap()
            .set_modified(old)
            .unwrap();
        Local::open(dir.path()).unwrap();
        assert!(live.exists() && remote.exists() && legacy.exists());
        assert!(!dead.exists() && !stale.exists());
        assert_eq!(
            temp_owner(&live.file_name().unwrap().to_string_lossy()),
            Some(TempOwner {
                machine: me.to_string(),
                pid: std::process::id()
            })
        );
    }
}
