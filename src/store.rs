//! Content-addressed store for stage outputs.
//!
//! A stage result is stored under the blake3 hash of a [`StageKey`]: everything that can change
//! the result goes into the key, nothing else does.
//!
//! | key field       | what it covers                                                        |
//! |-----------------|-----------------------------------------------------------------------|
//! | `stage`         | the stage name, e.g. `compile-slot`                                   |
//! | `version`       | the stage's `STAGE_VERSION`, bumped whenever its semantics change     |
//! | `config`        | the recipe knobs the stage reads, as canonical JSON, and the code     |
//! |                 | fingerprint (blake3 of the toolforge executable)                      |
//! | `inputs`        | blake3 hashes of the input bytes (question records, SQLite file, …)   |
//!
//! Deliberately kept out of the key: file modification times, absolute paths, the host name.
//!
//! On disk an entry is `<root>/objects/<first 2 hex>/<64 hex>`: a 32-byte blake3 hash of the
//! payload followed by the payload. Writes go to a `*.tmp` file in the same directory and are
//! renamed into place, so a reader never sees a half-written entry; left-over temp files are
//! swept when the store is opened. Every read re-hashes the payload: a corrupt or truncated entry
//! is a miss (and is removed), never trusted.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::Serialize;

/// Errors of the store layer: IO on the store directory.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// An IO operation on a store path failed.
    #[error("store {path}")]
    Io {
        /// The file or directory that failed.
        path: PathBuf,
        /// The underlying IO error.
        source: std::io::Error,
    },
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> StoreError + '_ {
    move |source| StoreError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Everything that determines a stage's output (see the module docs for the table).
#[derive(Debug, Clone, Serialize)]
pub struct StageKey {
    /// Stage name, e.g. `compile-slot`.
    pub stage: String,
    /// Stage version; bump when the stage's output for the same inputs changes.
    pub version: u32,
    /// The stage's configuration as JSON (serde_json maps are ordered, so this is canonical).
    pub config: serde_json::Value,
    /// Hex blake3 hashes of the stage's inputs, in a fixed order chosen by the stage.
    pub inputs: Vec<String>,
}

impl StageKey {
    /// The hex blake3 digest naming this key's entry.
    pub fn digest(&self) -> String {
        let bytes = serde_json::to_vec(self).expect("StageKey serialises");
        blake3::hash(&bytes).to_hex().to_string()
    }
}

/// Outcome of a [`Store::get`] lookup, with the reason for a miss (cf. cargo's `DirtyReason`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lookup {
    /// The entry exists and its payload hash checks out.
    Hit(Vec<u8>),
    /// No entry under this key.
    Missing,
    /// An entry existed but was truncated or its payload hash did not match; it was removed.
    Corrupt,
}

/// The `Build::stats` key under which the pipeline names the corrupt entries [`Store::get`] met
/// (printed in the build summary, kept out of the written report).
pub const REPAIRED_STAT: &str = "store_repaired";

/// Why a stored entry was not used and its stage recomputed (cf. cargo's `DirtyReason`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dirty {
    /// The stage name of the key, e.g. `compile-slot`.
    pub stage: String,
    /// The entry's file name (hex digest of the key).
    pub digest: String,
    /// What was wrong: `truncated to N bytes` or `payload hash mismatch`.
    pub reason: String,
}

impl std::fmt::Display for Dirty {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {}…: {}",
            self.stage,
            &self.digest[..12.min(self.digest.len())],
            self.reason
        )
    }
}

/// A content-addressed store rooted at a directory (default `out/.store`).
#[derive(Debug, Clone)]
pub struct Store {
    root: PathBuf,
    /// Corrupt entries met by [`Store::get`] since the store was opened (shared by clones).
    dirty: std::sync::Arc<std::sync::Mutex<Vec<Dirty>>>,
}

impl Store {
    /// Opens (creating if needed) the store at `root` and sweeps left-over `*.tmp` files.
    ///
    /// Errors: the directory cannot be created or read.
    pub fn open(root: impl Into<PathBuf>) -> Result<Store, StoreError> {
        let root = root.into();
        let objects = root.join("objects");
        fs::create_dir_all(&objects).map_err(io_err(&objects))?;
        for shard in fs::read_dir(&objects).map_err(io_err(&objects))? {
            let shard = shard.map_err(io_err(&objects))?.path();
            if !shard.is_dir() {
                continue;
            }
            for entry in fs::read_dir(&shard).map_err(io_err(&shard))? {
                let path = entry.map_err(io_err(&shard))?.path();
                if path.extension().is_some_and(|e| e == "tmp") {
                    let _ = fs::remove_file(&path);
                }
            }
        }
        Ok(Store {
            root,
            dirty: Default::default(),
        })
    }

    /// The corrupt entries [`Store::get`] met and removed (so their stages were recomputed), in
    /// the order met.
    pub fn dirty(&self) -> Vec<Dirty> {
        self.dirty.lock().map(|d| d.clone()).unwrap_or_default()
    }

    /// The store's root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    fn entry_path(&self, digest: &str) -> PathBuf {
        self.root.join("objects").join(&digest[..2]).join(digest)
    }

    /// Looks up the entry for `key`, checking its integrity.
    /// A corrupt entry is removed and recorded in [`Store::dirty`].
    pub fn get(&self, key: &StageKey) -> Lookup {
        let digest = key.digest();
        let path = self.entry_path(&digest);
        let Ok(bytes) = fs::read(&path) else {
            return Lookup::Missing;
        };
        let reason = if bytes.len() >= 32 {
            let (stored, payload) = bytes.split_at(32);
            if blake3::hash(payload).as_bytes() == stored {
                return Lookup::Hit(payload.to_vec());
            }
            "payload hash mismatch".to_string()
        } else {
            format!("truncated to {} bytes", bytes.len())
        };
        let _ = fs::remove_file(&path);
        if let Ok(mut d) = self.dirty.lock() {
            d.push(Dirty {
                stage: key.stage.clone(),
                digest,
                reason,
            });
        }
        Lookup::Corrupt
    }

    /// Stores `payload` under `key` atomically (temp file in the same directory, then rename).
    pub fn put(&self, key: &StageKey, payload: &[u8]) -> Result<(), StoreError> {
        let path = self.entry_path(&key.digest());
        let mut bytes = Vec::with_capacity(32 + payload.len());
        bytes.extend_from_slice(blake3::hash(payload).as_bytes());
        bytes.extend_from_slice(payload);
        write_atomic(&path, &bytes)
    }
}

/// Writes `bytes` to `path` atomically: a sibling `*.tmp` file is written, synced and renamed.
/// Creates the parent directory. A crash leaves either the old file or the new one, never half.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    fs::create_dir_all(dir).map_err(io_err(dir))?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let mut file = fs::File::create(&tmp).map_err(io_err(&tmp))?;
    file.write_all(bytes).map_err(io_err(&tmp))?;
    file.sync_all().map_err(io_err(&tmp))?;
    drop(file);
    fs::rename(&tmp, path).map_err(io_err(path))
}

/// Removes the staging directories `<parent>/.<name>.tmp-<pid>` (and their `.old` siblings)
/// left by builds whose process `pid` is no longer running (killed mid-emit), as the store sweeps
/// its temp files on open. Directories of live processes are left alone. Returns how many were
/// removed. Liveness is read from `/proc/<pid>`; without `/proc` nothing is removed.
pub fn sweep_stale_dirs(parent: &Path) -> usize {
    if !Path::new("/proc/self").exists() {
        return 0;
    }
    let Ok(entries) = fs::read_dir(parent) else { return 0 };
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.starts_with('.') {
            continue;
        }
        let Some((_, pid)) = name.rsplit_once(".tmp-") else {
            continue;
        };
        let pid = pid.strip_suffix(".old").unwrap_or(pid);
        if pid.is_empty() || !pid.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        if Path::new("/proc").join(pid).exists() {
            continue;
        }
        if fs::remove_dir_all(entry.path()).is_ok() {
            removed += 1;
        }
    }
    removed
}

/// Hex blake3 hash of a file's bytes. Errors: the file cannot be read.
pub fn hash_file(path: &Path) -> Result<String, StoreError> {
    let mut hasher = blake3::Hasher::new();
    let mut file = fs::File::open(path).map_err(io_err(path))?;
    std::io::copy(&mut file, &mut hasher).map_err(io_err(path))?;
    Ok(hasher.finalize().to_hex().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(n: u32) -> StageKey {
        StageKey {
            stage: "t".into(),
            version: n,
            config: serde_json::json!({"a": 1}),
            inputs: vec!["x".into()],
        }
    }

    #[test]
    fn round_trip_and_miss() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        assert_eq!(store.get(&key(1)), Lookup::Missing);
        store.put(&key(1), b"hello").unwrap();
        assert_eq!(store.get(&key(1)), Lookup::Hit(b"hello".to_vec()));
        assert_eq!(store.get(&key(2)), Lookup::Missing);
    }

    #[test]
    fn corrupt_and_truncated_entries_are_misses() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        store.put(&key(1), b"hello world").unwrap();
        let path = store.entry_path(&key(1).digest());
        let mut bytes = fs::read(&path).unwrap();
        *bytes.last_mut().unwrap() ^= 1;
        fs::write(&path, &bytes).unwrap();
        assert_eq!(store.get(&key(1)), Lookup::Corrupt);
        assert!(!path.exists(), "corrupt entry is removed");
        store.put(&key(1), b"hello world").unwrap();
        fs::write(&path, &fs::read(&path).unwrap()[..20]).unwrap();
        assert_eq!(store.get(&key(1)), Lookup::Corrupt);
        let dirty = store.dirty();
        assert_eq!(dirty.len(), 2);
        assert_eq!(
            (dirty[0].stage.as_str(), dirty[0].reason.as_str()),
            ("t", "payload hash mismatch")
        );
        assert_eq!(dirty[1].reason, "truncated to 20 bytes");
    }

    #[test]
    fn sweep_removes_only_dead_processes_temp_dirs() {
        let dir = tempfile::tempdir().unwrap();
        // A pid that cannot be alive (above the kernel's pid_max of 2^22) and our own, live one.
        let dead = dir.path().join(".slot-bird.tmp-99999999");
        let live = dir.path().join(format!(".slot-bird.tmp-{}", std::process::id()));
        let other = dir.path().join("slot-bird");
        for d in [&dead, &live, &other] {
            fs::create_dir_all(d.join("data")).unwrap();
        }
        assert_eq!(sweep_stale_dirs(dir.path()), 1);
        assert!(!dead.exists() && live.exists() && other.exists());
    }

    #[test]
    fn open_sweeps_temp_files() {
        let dir = tempfile::tempdir().unwrap();
        let shard = dir.path().join("objects/ab");
        fs::create_dir_all(&shard).unwrap();
        fs::write(shard.join(".x.1.tmp"), b"half").unwrap();
        Store::open(dir.path()).unwrap();
        assert!(!shard.join(".x.1.tmp").exists());
    }
}
