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
//!
//! The same entries can live in S3-compatible object storage (`s3://bucket/prefix`, [`s3`]):
//! [`Store`] talks to a [`Backend`], and both backends write with put-if-absent, so shards of
//! one build (`toolforge build --shard I/N`, [`Scope`]) can share one store.

pub mod local;
pub mod s3;

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::Serialize;

/// Errors of the store layer: IO on the store directory, or an object store request.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// An object store request or its configuration failed.
    #[error("store {url}: {detail}")]
    Remote {
        /// The store URL (`s3://bucket/prefix`) or entry URL.
        url: String,
        /// What failed (the object_store error).
        detail: String,
    },
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

/// Where the store's entries live: a local directory ([`local::Local`]) or S3-compatible object
/// storage ([`s3::S3`]). Entries are named `objects/<first 2 hex>/<64 hex>` in both; the bytes
/// are the same (blake3 of the payload, then the payload).
pub trait Backend: Send + Sync + std::fmt::Debug {
    /// The entry's bytes, `None` when there is none. Errors: IO or network failures other than
    /// "not found".
    fn read(&self, name: &str) -> Result<Option<Vec<u8>>, StoreError>;
    /// Writes the entry unless one exists (put-if-absent): [`Created::Written`] when this call
    /// wrote it, [`Created::Present`] when another writer had (its bytes are left untouched).
    fn create(&self, name: &str, bytes: &[u8]) -> Result<Created, StoreError>;
    /// Removes the entry (a corrupt one); a missing entry is not an error.
    fn remove(&self, name: &str);
    /// The store's location for messages: a directory path or an `s3://bucket/prefix` URL.
    fn describe(&self) -> String;
}

/// Outcome of [`Backend::create`] / [`Store::put`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Created {
    /// This call wrote the entry.
    Written,
    /// An entry under the key already existed; it was left as is.
    Present,
}

/// Which stage items a build computes (`toolforge build --shard I/N`, `--merge`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Scope {
    /// Every item missing from the store is computed (a single-machine build).
    #[default]
    All,
    /// Only the items whose key digest falls in shard `index` of `count` ([`shard_of`]).
    Shard {
        /// 0-based shard index, below `count`.
        index: u64,
        /// Number of shards, at least 1.
        count: u64,
    },
    /// Nothing is computed: every item must be in the store (the merge after sharded builds);
    /// the missing ones are recorded in [`Store::missing`].
    StoredOnly,
}

/// The shard (0-based, below `count`) an entry digest belongs to: the first 16 hex digits of the
/// blake3 digest as a number, modulo `count`. Uniform because blake3 is.
pub fn shard_of(digest: &str, count: u64) -> u64 {
    u64::from_str_radix(&digest[..16.min(digest.len())], 16).unwrap_or(0) % count.max(1)
}

/// A stage item that a [`Scope::StoredOnly`] build needed and did not find in the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Missing {
    /// The stage name of the key, e.g. `compile-slot`.
    pub stage: String,
    /// The item, e.g. the database id or `conversion`.
    pub item: String,
    /// The key's hex digest.
    pub digest: String,
    /// The shard (of the count given to [`Store::missing`]) that computes it.
    pub shard: u64,
}

/// Request counts of a store since it was opened (reads, writes, hits), for the benchmark.
#[derive(Debug, Default)]
pub struct Requests {
    /// Entry reads (each is one GET on an object store).
    pub reads: std::sync::atomic::AtomicU64,
    /// Entry writes (each is one conditional PUT on an object store).
    pub writes: std::sync::atomic::AtomicU64,
    /// Reads that found a valid entry.
    pub hits: std::sync::atomic::AtomicU64,
}

/// A content-addressed store: a directory (default `out/.store`) or an `s3://bucket/prefix`.
#[derive(Debug, Clone)]
pub struct Store {
    root: PathBuf,
    backend: std::sync::Arc<dyn Backend>,
    scope: Scope,
    /// Corrupt entries met by [`Store::get`] since the store was opened (shared by clones).
    dirty: std::sync::Arc<std::sync::Mutex<Vec<Dirty>>>,
    /// Items a [`Scope::StoredOnly`] build needed and did not find (shared by clones).
    missing: std::sync::Arc<std::sync::Mutex<Vec<Missing>>>,
    /// Items left to other shards.
    skipped: std::sync::Arc<std::sync::atomic::AtomicU64>,
    /// Backend errors met by reads and writes (shared by clones), for [`Store::errors`].
    errors: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    requests: std::sync::Arc<Requests>,
}

impl Store {
    /// Opens (creating if needed) the local store at `root` and sweeps left-over `*.tmp` files.
    ///
    /// Errors: the directory cannot be created or read.
    pub fn open(root: impl Into<PathBuf>) -> Result<Store, StoreError> {
        let root = root.into();
        let backend = local::Local::open(&root)?;
        Ok(Store::with_backend(root, std::sync::Arc::new(backend)))
    }

    /// Opens the store named by `location`: `s3://bucket/prefix` ([`s3::S3`], configured from the
    /// usual `AWS_*` environment variables), else a local directory ([`Store::open`]).
    ///
    /// Errors: a bad URL or configuration, or the local directory cannot be created.
    pub fn open_url(location: &str) -> Result<Store, StoreError> {
        if s3::is_url(location) {
            let backend = s3::S3::open(location)?;
            Ok(Store::with_backend(
                PathBuf::from(location),
                std::sync::Arc::new(backend),
            ))
        } else {
            Store::open(location)
        }
    }

    /// A store over any backend; `root` is what [`Store::root`] returns.
    pub fn with_backend(root: PathBuf, backend: std::sync::Arc<dyn Backend>) -> Store {
        Store {
            root,
            backend,
            scope: Scope::All,
            dirty: Default::default(),
            missing: Default::default(),
            skipped: Default::default(),
            errors: Default::default(),
            requests: Default::default(),
        }
    }

    /// This store restricted to `scope` (the items [`Store::claim`] lets a stage compute).
    pub fn with_scope(mut self, scope: Scope) -> Store {
        self.scope = scope;
        self
    }

    /// The scope given to [`Store::with_scope`].
    pub fn scope(&self) -> Scope {
        self.scope
    }

    /// Whether the stage may compute `item` (key `key`) after a [`Store::get`] miss: always for
    /// [`Scope::All`], when the key's shard is ours for [`Scope::Shard`] (otherwise the item is
    /// counted in [`Store::skipped`]), never for [`Scope::StoredOnly`] (the item is recorded in
    /// [`Store::missing`]). A stage that gets `false` leaves the item out of its result.
    pub fn claim(&self, key: &StageKey, item: &str) -> bool {
        match self.scope {
            Scope::All => true,
            Scope::Shard { index, count } => {
                let mine = shard_of(&key.digest(), count) == index;
                if !mine {
                    self.skipped.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
                mine
            }
            Scope::StoredOnly => {
                if let Ok(mut m) = self.missing.lock() {
                    m.push(Missing {
                        stage: key.stage.clone(),
                        item: item.to_string(),
                        digest: key.digest(),
                        shard: 0,
                    });
                }
                false
            }
        }
    }

    /// The items a [`Scope::StoredOnly`] build needed and did not find, sorted by stage and item,
    /// each with the shard (of `shards`) that computes it.
    pub fn missing(&self, shards: u64) -> Vec<Missing> {
        let mut m = self.missing.lock().map(|m| m.clone()).unwrap_or_default();
        for x in &mut m {
            x.shard = shard_of(&x.digest, shards);
        }
        m.sort_by(|a, b| (&a.stage, &a.item).cmp(&(&b.stage, &b.item)));
        m
    }

    /// How many items [`Store::claim`] left to other shards.
    pub fn skipped(&self) -> u64 {
        self.skipped.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Whether every item a stage asked for so far was found or computed here: none left to
    /// another shard ([`Store::skipped`]) and none missing from a merge ([`Store::missing`]).
    pub fn complete(&self) -> bool {
        self.skipped() == 0 && self.missing.lock().map(|m| m.is_empty()).unwrap_or(true)
    }

    /// Backend errors met so far (a failed read counts as a miss, a failed write loses the entry),
    /// in the order met.
    pub fn errors(&self) -> Vec<String> {
        self.errors.lock().map(|e| e.clone()).unwrap_or_default()
    }

    /// Request counts since the store was opened.
    pub fn requests(&self) -> &Requests {
        &self.requests
    }

    /// The corrupt entries [`Store::get`] met and removed (so their stages were recomputed), in
    /// the order met.
    pub fn dirty(&self) -> Vec<Dirty> {
        self.dirty.lock().map(|d| d.clone()).unwrap_or_default()
    }

    /// The store's root directory (for an object store: its URL as a path).
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The store's location for messages: a directory or an `s3://bucket/prefix` URL.
    pub fn describe(&self) -> String {
        self.backend.describe()
    }

    fn entry_name(digest: &str) -> String {
        format!("objects/{}/{digest}", &digest[..2])
    }

    fn record_error(&self, e: &StoreError) {
        if let Ok(mut errors) = self.errors.lock() {
            errors.push(format!("{e:#}"));
        }
    }

    /// Looks up the entry for `key`, checking its integrity.
    /// A corrupt entry is removed and recorded in [`Store::dirty`]; a backend error is a miss
    /// (recorded in [`Store::errors`]).
    pub fn get(&self, key: &StageKey) -> Lookup {
        use std::sync::atomic::Ordering::Relaxed;
        let digest = key.digest();
        let name = Store::entry_name(&digest);
        self.requests.reads.fetch_add(1, Relaxed);
        let bytes = match self.backend.read(&name) {
            Ok(Some(bytes)) => bytes,
            Ok(None) => return Lookup::Missing,
            Err(e) => {
                self.record_error(&e);
                return Lookup::Missing;
            }
        };
        let reason = if bytes.len() >= 32 {
            let (stored, payload) = bytes.split_at(32);
            if blake3::hash(payload).as_bytes() == stored {
                self.requests.hits.fetch_add(1, Relaxed);
                return Lookup::Hit(payload.to_vec());
            }
            "payload hash mismatch".to_string()
        } else {
            format!("truncated to {} bytes", bytes.len())
        };
        self.backend.remove(&name);
        if let Ok(mut d) = self.dirty.lock() {
            d.push(Dirty {
                stage: key.stage.clone(),
                digest,
                reason,
            });
        }
        Lookup::Corrupt
    }

    /// Stores `payload` under `key` with put-if-absent: concurrent writers of one key never
    /// corrupt each other (one write wins, the others get [`Created::Present`]; the payload of a
    /// key is the same whoever computes it). Errors (also recorded in [`Store::errors`]): IO or
    /// network failures.
    pub fn put(&self, key: &StageKey, payload: &[u8]) -> Result<Created, StoreError> {
        let name = Store::entry_name(&key.digest());
        let mut bytes = Vec::with_capacity(32 + payload.len());
        bytes.extend_from_slice(blake3::hash(payload).as_bytes());
        bytes.extend_from_slice(payload);
        self.requests.writes.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.backend.create(&name, &bytes).inspect_err(|e| self.record_error(e))
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
    // A failed write (disk full) leaves no partial temp file behind.
    let written = fs::File::create(&tmp)
        .and_then(|mut file| file.write_all(bytes).and_then(|()| file.sync_all()))
        .and_then(|()| fs::rename(&tmp, path));
    written.map_err(|e| {
        let _ = fs::remove_file(&tmp);
        io_err(&tmp)(e)
    })
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
    use std::io::Read;
    let mut hasher = blake3::Hasher::new();
    let mut file = fs::File::open(path).map_err(io_err(path))?;
    // 4 MiB reads hashed on every core: the executable (`code_fingerprint`, ~55 MB) and the
    // databases are hashed on every build, no-op rebuilds included (issue 17).
    let len = file.metadata().map_or(0, |m| m.len()) as usize;
    let mut buf = vec![0u8; len.clamp(64 << 10, 4 << 20)];
    loop {
        let mut filled = 0;
        while filled < buf.len() {
            match file.read(&mut buf[filled..]) {
                Ok(0) => break,
                Ok(n) => filled += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(io_err(path)(e)),
            }
        }
        if filled == 0 {
            break;
        }
        if filled > 1 << 20 {
            hasher.update_rayon(&buf[..filled]);
        } else {
            hasher.update(&buf[..filled]);
        }
        if filled < buf.len() {
            break;
        }
    }
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
        let path = dir.path().join(Store::entry_name(&key(1).digest()));
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
    fn a_failed_atomic_write_leaves_no_temp_file() {
        // The rename onto a non-empty directory fails after the temp file was written in full
        // (as a full disk fails a write part-way): the old code left the temp file behind.
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("MANIFEST.json");
        fs::create_dir_all(target.join("occupied")).unwrap();
        assert!(write_atomic(&target, &vec![b'x'; 1 << 20]).is_err());
        let left: Vec<String> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".tmp"))
            .collect();
        assert!(left.is_empty(), "{left:?}");
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
