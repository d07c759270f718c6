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
//! On disk an entry is `<root>/objects/<first 2 hex>/<64 hex>`: a header recording the key it
//! belongs to and a keyed checksum of the payload, then the payload ([`entry`]). Writes go to a
//! `*.tmp` file in the same directory and are linked into place, so a reader never sees a
//! half-written entry; temp files are removed when provably abandoned ([`local`]). Every read
//! checks the header against the key asked for: a corrupt or truncated entry, or an entry of
//! another key, is a miss, never trusted; it is removed, named in [`Store::dirty`], and the
//! next build (or shard) that owns the item writes it again. A payload that passes and still
//! does not decode is rejected by its stage the same way ([`Store::load`]).
//!
//! The same entries can live in S3-compatible object storage (`s3://bucket/prefix`, [`s3`]):
//! [`Store`] talks to a [`Backend`], and both backends write with put-if-absent, so shards of
//! one build (`toolforge build --shard I/N`, [`Scope`]) can share one store. A failing store
//! request is a [`StoreError`] with its [`Fault`] (unreachable, wrong secret, …), reported as
//! such by shards, merges and plain builds.

pub mod entry;
mod error;
pub mod fault;
mod files;
pub mod local;
pub mod mapped;
pub mod plan;
pub mod s3;

use std::path::{Path, PathBuf};

use serde::Serialize;

pub use error::StoreError;
pub use fault::Fault;
pub use files::{code_fingerprint, hash_file, sweep_stale_dirs, write_atomic};
pub use plan::shard_of;

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
    /// The entry exists and its payload hash checks out: the payload, a view into the bytes read
    /// (never copied again).
    Hit(bytes::Bytes),
    /// No entry under this key.
    Missing,
    /// An entry existed but could not be trusted (truncated, payload hash mismatch, another
    /// key's entry, not an entry at all); it was removed and named in [`Store::dirty`].
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
    /// What was wrong: `truncated to N bytes`, `payload hash mismatch`, `entry of another key
    /// (…)`, `not a keyed entry (…)` ([`entry::open`]), or the stage's `undecodable payload: …`
    /// ([`Store::load`]).
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
/// are the same ([`entry`]: the key's digest and a keyed checksum, then the payload).
pub trait Backend: Send + Sync + std::fmt::Debug {
    /// The entry's bytes, `None` when there is none (a large local entry is memory-mapped, an S3
    /// object's body is kept as received: neither is copied). Errors: IO or network failures
    /// other than "not found".
    fn read(&self, name: &str) -> Result<Option<bytes::Bytes>, StoreError>;
    /// Writes the entry unless one exists (put-if-absent): [`Created::Written`] when this call
    /// wrote it, [`Created::Present`] when another writer had (its bytes are left untouched).
    fn create(&self, name: &str, bytes: &[u8]) -> Result<Created, StoreError>;
    /// [`Backend::create`] of the entry made of `parts` one after the other. The default joins
    /// them; a backend that writes them in turn (a local file) spares the copy.
    fn create_parts(&self, name: &str, parts: &[&[u8]]) -> Result<Created, StoreError> {
        self.create(name, &parts.concat())
    }
    /// Removes the entry (a corrupt one); a missing entry is not an error. Errors: IO or
    /// network failures (the corrupt entry stays and the caller must say so).
    fn remove(&self, name: &str) -> Result<(), StoreError>;
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
    /// Only shard `index` of `count`'s items: those the [`plan::Assignment`] given to
    /// [`Store::assign`] places there, the others by key digest ([`shard_of`]).
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
    errors: std::sync::Arc<std::sync::Mutex<Vec<(Fault, String)>>>,
    /// Digests of the entries found corrupt and removed (shared by clones): a write of one that
    /// finds an entry present checks it instead of trusting it ([`Store::put`]).
    rejected: std::sync::Arc<std::sync::Mutex<std::collections::HashSet<String>>>,
    requests: std::sync::Arc<Requests>,
    /// The shard of each planned item and group ([`Store::assign`]; shared by clones).
    assignment: std::sync::Arc<std::sync::Mutex<Option<std::sync::Arc<plan::Assignment>>>>,
    /// The shard count a [`Scope::StoredOnly`] merge names missing items' shards with (0: none).
    merge_shards: u64,
    /// Whether a shard reads other shards' items ([`Store::with_others_read`]).
    others_read: bool,
    /// Database (input) bytes hashed by this build's stages ([`Store::note_hashed`]).
    hashed: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl Store {
    /// Opens (creating if needed) the local store at `root` and removes the temp files that are
    /// provably abandoned ([`local::abandoned`]).
    ///
    /// Errors: the directory cannot be created or read.
    pub fn open(root: impl Into<PathBuf>) -> Result<Store, StoreError> {
        let root = root.into();
        let backend = local::Local::open(&root)?;
        Ok(Store::with_backend(root, std::sync::Arc::new(backend)))
    }

    /// Opens the store named by `location`: `s3://bucket/prefix` ([`s3::S3`], configured from the
    /// usual `AWS_*` environment variables, probed with one request), else a local directory
    /// ([`Store::open`]).
    ///
    /// Errors: a bad URL or configuration, a store that cannot answer ([`StoreError::fault`]:
    /// unreachable, wrong secret, …), or the local directory cannot be created.
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
            rejected: Default::default(),
            requests: Default::default(),
            assignment: Default::default(),
            merge_shards: 0,
            others_read: false,
            hashed: Default::default(),
        }
    }

    /// This store naming, in a merge, each missing item's shard of `count` (0: none).
    pub fn with_merge_shards(mut self, count: u64) -> Store {
        self.merge_shards = count;
        self
    }

    /// The shard count items are placed over: the [`Scope::Shard`] count, a merge's
    /// [`Store::with_merge_shards`] count, else `None` (a single build places nothing).
    pub fn shard_count(&self) -> Option<u64> {
        match self.scope {
            Scope::Shard { count, .. } => Some(count),
            Scope::StoredOnly if self.merge_shards > 0 => Some(self.merge_shards),
            _ => None,
        }
    }

    /// Places `items` over the shards ([`plan::Assignment::pack`] for [`Store::shard_count`]):
    /// from now on [`Store::claim`] and [`Store::leaves`] follow it for these items and their
    /// groups. Returns the assignment (`None` when there is no shard count).
    pub fn assign(&self, items: &[plan::Item]) -> Option<std::sync::Arc<plan::Assignment>> {
        let count = self.shard_count()?;
        let a = std::sync::Arc::new(plan::Assignment::pack(items, count));
        if let Ok(mut slot) = self.assignment.lock() {
            *slot = Some(a.clone());
        }
        Some(a)
    }

    /// The assignment given to [`Store::assign`], if any.
    pub fn assignment(&self) -> Option<std::sync::Arc<plan::Assignment>> {
        self.assignment.lock().ok().and_then(|a| a.clone())
    }

    /// This store reading other shards' items too (`true`: a round-two shard, whose later stages
    /// need the whole compiled build); [`Store::leaves`] is then always `false`.
    pub fn with_others_read(mut self, read: bool) -> Store {
        self.others_read = read;
        self
    }

    /// Whether the assignment places the planned `item` (or group) on this shard: always outside
    /// a [`Scope::Shard`] build, and for an item the assignment does not know.
    pub fn owns(&self, item: &str) -> bool {
        let Scope::Shard { index, .. } = self.scope else {
            return true;
        };
        self.assignment().and_then(|a| a.shard(item)).is_none_or(|s| s == index)
    }

    /// Whether a [`Scope::Shard`] build leaves the planned `item` to another shard ([`Store::owns`]
    /// not, and other shards' items not read): then the stage neither hashes its inputs nor
    /// reads its entry, and the item is counted in [`Store::skipped`].
    pub fn leaves(&self, item: &str) -> bool {
        let other = !self.others_read && !self.owns(item);
        if other {
            self.skipped.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        other
    }

    /// Counts `bytes` of input files (databases) hashed by a stage, for the shard summary.
    pub fn note_hashed(&self, bytes: u64) {
        self.hashed.fetch_add(bytes, std::sync::atomic::Ordering::Relaxed);
    }

    /// Input bytes hashed so far ([`Store::note_hashed`]).
    pub fn hashed(&self) -> u64 {
        self.hashed.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The shard of `item` (key digest `digest`) among `count`: the assignment's when it knows
    /// the item or group and has `count` shards, else [`shard_of`] the digest.
    fn shard_for(&self, item: &str, digest: &str, count: u64) -> u64 {
        self.assignment()
            .filter(|a| a.loads().len() as u64 == count)
            .and_then(|a| a.shard(item))
            .unwrap_or_else(|| shard_of(digest, count))
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
    /// [`Scope::All`], when the item's shard is ours for [`Scope::Shard`] (the assignment's for
    /// an item or group it places, [`Store::assign`], else the key digest's; otherwise the item is
    /// counted in [`Store::skipped`]), never for [`Scope::StoredOnly`] (the item is recorded in
    /// [`Store::missing`]). A stage that gets `false` leaves the item out of its result.
    pub fn claim(&self, key: &StageKey, item: &str) -> bool {
        match self.scope {
            Scope::All => true,
            Scope::Shard { index, count } => {
                let mine = self.shard_for(item, &key.digest(), count) == index;
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
    /// each with the shard (of `shards`) that computes it (the assignment's, else the digest's).
    pub fn missing(&self, shards: u64) -> Vec<Missing> {
        let mut m = self.missing.lock().map(|m| m.clone()).unwrap_or_default();
        for x in &mut m {
            x.shard = self.shard_for(&x.item, &x.digest, shards);
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
    /// in the order met, as messages (with the cause and what to check).
    pub fn errors(&self) -> Vec<String> {
        self.errors
            .lock()
            .map(|e| e.iter().map(|(_, m)| m.clone()).collect())
            .unwrap_or_default()
    }

    /// The storage failure to report for the errors met so far, if any: `<fault> on <store>: N
    /// requests failed; the first: <message>` (e.g. `store unreachable on s3://b/p: …`). Shards,
    /// merges and plain builds print it instead of listing the items it made miss.
    pub fn failure(&self) -> Option<String> {
        let errors = self.errors.lock().map(|e| e.clone()).unwrap_or_default();
        let (fault, first) = errors.first()?;
        Some(format!(
            "{fault} on {}: {} store request{} failed; the first: {first}",
            self.describe(),
            errors.len(),
            if errors.len() == 1 { "" } else { "s" }
        ))
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
        let mut text = e.to_string();
        let mut source = std::error::Error::source(e);
        while let Some(s) = source {
            text = format!("{text}: {s}");
            source = s.source();
        }
        if let Ok(mut errors) = self.errors.lock() {
            errors.push((e.fault(), text));
        }
    }

    /// Looks up the entry for `key`, checking that it is this key's entry and whole
    /// ([`entry::open`]). An untrusted entry is removed and recorded in [`Store::dirty`]
    /// ([`Lookup::Corrupt`]); a backend error is a miss recorded in [`Store::errors`].
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
        match entry::open(&digest, &bytes).map(<[u8]>::len) {
            Ok(len) => {
                self.requests.hits.fetch_add(1, Relaxed);
                Lookup::Hit(bytes.slice(bytes.len() - len..))
            }
            Err(reason) => {
                self.discard(key, &digest, reason);
                Lookup::Corrupt
            }
        }
    }

    /// The decoded entry for `key`: [`Store::get`], then `decode` on the payload. A payload that
    /// `decode` refuses (`Err(why)`: garbage that passed the checksum, a stage's older layout) is
    /// never trusted: the entry is removed and named in [`Store::dirty`] as `undecodable
    /// payload: <why>`, and the caller recomputes it (its [`Store::put`] replaces the entry).
    /// `None` for a miss of any kind.
    pub fn load<T>(&self, key: &StageKey, decode: impl FnOnce(&[u8]) -> Result<T, String>) -> Option<T> {
        self.load_shared(key, |b| decode(&b))
    }

    /// [`Store::load`] with `decode` given the payload itself, so the value may keep views into
    /// it ([`bytes::Bytes::slice`]) instead of copies (a trajectory segment's megabytes).
    pub fn load_shared<T>(&self, key: &StageKey, decode: impl FnOnce(bytes::Bytes) -> Result<T, String>) -> Option<T> {
        let Lookup::Hit(bytes) = self.get(key) else { return None };
        match decode(bytes) {
            Ok(value) => Some(value),
            Err(why) => {
                self.requests.hits.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
                self.discard(key, &key.digest(), format!("undecodable payload: {why}"));
                None
            }
        }
    }

    /// Removes the untrusted entry of `key` and records why; a failed removal is a store error
    /// (the entry would stay).
    fn discard(&self, key: &StageKey, digest: &str, reason: String) {
        if let Err(e) = self.backend.remove(&Store::entry_name(digest)) {
            self.record_error(&e);
        }
        if let Ok(mut r) = self.rejected.lock() {
            r.insert(digest.to_string());
        }
        if let Ok(mut d) = self.dirty.lock() {
            d.push(Dirty {
                stage: key.stage.clone(),
                digest: digest.to_string(),
                reason,
            });
        }
    }

    /// Stores `payload` under `key`, replacing the entry there (a removal, then a put-if-absent):
    /// for an entry whose key does not cover everything it records, like a build's plan. Errors:
    /// IO or network failures (also recorded in [`Store::errors`]).
    pub fn replace(&self, key: &StageKey, payload: &[u8]) -> Result<Created, StoreError> {
        let name = Store::entry_name(&key.digest());
        self.backend.remove(&name).inspect_err(|e| self.record_error(e))?;
        self.put(key, payload)
    }

    /// Stores `payload` under `key` with put-if-absent: concurrent writers of one key never
    /// corrupt each other (one write wins, the others get [`Created::Present`]; the payload of a
    /// key is the same whoever computes it). An entry present under a key this store found
    /// corrupt is read back: when it is still not this key's whole entry it is deleted and
    /// written again, so a bad entry never outlives the write meant to replace it. Errors (also
    /// recorded in [`Store::errors`]): IO or network failures.
    pub fn put(&self, key: &StageKey, payload: &[u8]) -> Result<Created, StoreError> {
        self.put_parts(key, &[payload])
    }

    /// [`Store::put`] of the payload made of `parts` one after the other, written in turn (a
    /// large payload, e.g. a trajectory segment, is never joined into one buffer first).
    pub fn put_parts(&self, key: &StageKey, parts: &[&[u8]]) -> Result<Created, StoreError> {
        let digest = key.digest();
        let name = Store::entry_name(&digest);
        let header = entry::header(&digest, parts);
        let mut framed: Vec<&[u8]> = Vec::with_capacity(parts.len() + 1);
        framed.push(&header);
        framed.extend_from_slice(parts);
        self.requests.writes.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let created = self
            .backend
            .create_parts(&name, &framed)
            .inspect_err(|e| self.record_error(e))?;
        let suspect = self.rejected.lock().is_ok_and(|r| r.contains(&digest));
        if created == Created::Written || !suspect {
            return Ok(created);
        }
        let present = self.backend.read(&name).inspect_err(|e| self.record_error(e))?;
        if present.is_some_and(|b| entry::open(&digest, &b).is_ok()) {
            return Ok(Created::Present);
        }
        self.backend.remove(&name).inspect_err(|e| self.record_error(e))?;
        self.backend
            .create_parts(&name, &framed)
            .inspect_err(|e| self.record_error(e))
    }
}

#[cfg(test)]
mod tests;
