//! Emitters: every file of `out/<recipe>/` from one [`Build`], one emitter per file kind.
//!
//! | file                          | emitter              | content                                         |
//! |-------------------------------|----------------------|-------------------------------------------------|
//! | `data/<split>.parquet`        | [`rows`]             | one row per example (schema in [`rows`])        |
//! | `data/<split>.jsonl`          | [`rows`]             | the same rows as JSON lines                     |
//! | `tools/functions.json`        | [`crate::tools::functions_json`] | dataset-level catalog, OpenAI function format |
//! | `trajectories/<split>*.jsonl` | [`trajectories`]     | executable families: chat trajectories, faults  |
//! | `report/verification.json`   | [`report`]           | attempted / kept per group, drops with reasons  |
//! | `report/index.html` (+ `data.js`, `rows.js`, `rows/<n>.js`) | [`html`] | the page a person reads (not with `--no-html`) |
//! | `README.md`                   | [`card`]             | dataset card with a Hugging Face YAML header    |
//! | `trajectories/README.md`      | [`card`]             | the trajectory files' card: configs, features   |
//! | `trajectories/dialogue/*`     | [`dialogue`]         | SGD/MultiWOZ multi-turn dialogues, turn gold, card |
//! | `MANIFEST.json`               | [`manifest`]         | blake3 of every file, build key, source hashes  |
//!
//! Family-specific files (e.g. `tools/openapi.json`, `tools/endpoints.json`, `tools/drift.json`)
//! come from [`Build::extra_files`] and are written as they are.
//!
//! The directory is written as a whole into a sibling temp directory and renamed into place
//! ([`write()`]), so a failed build never leaves a half-written dataset. A rebuild whose build key
//! and files match the existing `MANIFEST.json` writes nothing ([`manifest::up_to_date`]).
//! [`reverify()`] re-executes a built SLOT/SEL dataset from its files.

pub mod card;
mod data_files;
pub mod dialogue;
pub mod html;
pub mod manifest;
pub mod report;
pub mod reverify;
pub mod rows;
pub mod trajectories;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::dataset::Build;
use anyhow::{Context, Result};

pub use manifest::{database_root, read_manifest};
pub use reverify::reverify;
pub use rows::{EncodedRow, StoredRow, data_files, encode_rows, read_rows};

/// Writes every file of `build` into `out_dir` (staged, then renamed into place). Returns `false`
/// without writing when `out_dir` already holds this build (same build key, every file's hash
/// checks out). `recipe_path` is hashed into the manifest. Trajectories are computed afresh; see
/// [`write_cached`].
pub fn write(build: &Build, out_dir: &Path, recipe_path: &Path) -> Result<bool> {
    write_cached(build, out_dir, recipe_path, None)
}

/// [`write()`], with the trajectories of each group read from / stored in `store`
/// ([`trajectories::cached`]), so an `out/`-only rebuild does not execute the calls again.
pub fn write_cached(
    build: &Build,
    out_dir: &Path,
    recipe_path: &Path,
    store: Option<&crate::store::Store>,
) -> Result<bool> {
    write_with(build, out_dir, recipe_path, store, true)
}

/// [`write_cached`], with the page `report/index.html` ([`html`]) written only when `page` is
/// true (`toolforge build --no-html`: not). An output without the page is not up to date for a
/// build that wants one ([`up_to_date`]).
pub fn write_with(
    build: &Build,
    out_dir: &Path,
    recipe_path: &Path,
    store: Option<&crate::store::Store>,
    page: bool,
) -> Result<bool> {
    if up_to_date(out_dir, &build.build_key, page) {
        return Ok(false);
    }
    // Only the stored segments hold the rows of a build that counted its variant rows unread.
    anyhow::ensure!(
        build.variant_rows_counted.is_none() || (!page && has_segments(&build.recipe.format)),
        "{}: the variant rows were counted, not read, but the page or the rows files need them",
        build.recipe.name
    );
    let c = report::counts(build);
    let mut splits: Vec<&str> = build
        .groups
        .values()
        .flat_map(|o| &o.examples)
        .map(|e| e.split.as_str())
        .collect();
    splits.sort_unstable();
    splits.dedup();
    let staging = Staging::new(out_dir)?;
    let trajectories = trajectories::Trajectories::new(build)?;
    // The rows and trajectory files: each group's bytes (its segment, [`trajectories::segments`],
    // read from the store or computed) appended in group order; families without trajectories
    // encode their rows here ([`data_files::write_rows`]).
    let (skipped, written, sizes) = match &trajectories {
        Some(t) => t.write_files(&splits, store, &staging)?,
        None => {
            let (sizes, written) = data_files::write_rows(&staging, build)?;
            (Default::default(), written, sizes)
        }
    };
    let mut hashes: BTreeMap<String, String> = written.into_iter().collect();
    let summary = trajectories.as_ref().map(|_| card::TrajectorySummary {
        digest: card::TrajectorySummary::digest_of(&hashes),
        faults: has_segments(&build.recipe.format),
        tokens: skipped.tokens.clone(),
        max_tokens: build.recipe.trajectories.max_tokens,
        over_cap: skipped
            .by_group
            .iter()
            .filter_map(|(g, r)| Some((g.clone(), *r.get(trajectories::OVER_TOKEN_CAP)?)))
            .collect(),
    });
    let trajectory_stats = trajectories
        .as_ref()
        .map(|_| serde_json::json!({"skipped_by_reason": skipped.by_reason, "skipped_by_group": skipped.by_group}));
    let mut put = |rel: &str, bytes: &[u8]| -> Result<()> {
        let (k, v) = staging.put(rel, bytes)?;
        hashes.insert(k, v);
        Ok(())
    };
    put(
        "tools/functions.json",
        &pretty(&crate::tools::functions_json(&build.catalog)),
    )?;
    let report_doc = report::report(build, &c, trajectory_stats);
    put("report/verification.json", &pretty(&report_doc))?;
    if page {
        for (rel, bytes) in html::files(build, &report_doc, &staging.tmp.join("trajectories"))? {
            put(&rel, &bytes)?;
        }
    }
    put("README.md", card::card(build, &c, &sizes, summary.as_ref()).as_bytes())?;
    if let Some(t) = &summary {
        let splits: Vec<&String> = c.per_split.keys().collect();
        put(
            "trajectories/README.md",
            card::trajectories_card(build, &splits, t).as_bytes(),
        )?;
    }
    for (k, v) in &build.extra_files {
        put(k, v)?;
    }
    for (k, v) in dialogue::files(build) {
        put(&k, &v)?;
    }
    let recipe_hash = blake3::hash(&std::fs::read(recipe_path)?).to_hex().to_string();
    staging.put(
        "MANIFEST.json",
        &pretty(&manifest::manifest(build, &recipe_hash, &hashes)),
    )?;
    staging.finish()?;
    Ok(true)
}

/// The later-stage items of a shard (issue 34): computes and stores the trajectory segments
/// ([`trajectories::segments`]; per group, or per compile item, [`segments_per_item`]) that
/// `store`'s scope gives this build, so the merge only reads and concatenates them. Returns how
/// many segments this call stored or found; 0 for a family without an executable back end.
/// Errors: a
/// trajectory that does not execute.
pub fn store_segments(build: &Build, store: &crate::store::Store) -> Result<usize> {
    // Calls-only trajectories (seq) are computed by the build that writes them, never stored.
    if !has_segments(&build.recipe.format) {
        return Ok(0);
    }
    match trajectories::Trajectories::new(build)? {
        Some(t) => t.store_segments(store),
        None => Ok(0),
    }
}

/// Whether `recipe`'s trajectory segments are one store item per compile item
/// ([`trajectories::segments::item_key`]), computed by the shard that compiles the item in the
/// same run (issue 34: one round): SLOT and SEL without a variants stage, whose segments read
/// nothing beyond their item (the catalog is fixed by the family and tool pool; no LLM stage).
/// REST (its catalog is every database's endpoints, named across databases) and builds with
/// variants (the distractor pool reads the whole build) keep one segment per group, computed
/// once every compile item is stored (round two).
pub fn segments_per_item(recipe: &crate::recipe::Recipe) -> bool {
    ["slot", "sel"].contains(&recipe.format.as_str()) && recipe.variants.is_none()
}

/// Whether builds of `format` have per-group later items ([`store_segments`]): the executable
/// families (`slot`, `sel`, `rest`).
pub fn has_segments(format: &str) -> bool {
    ["slot", "sel", "rest"].contains(&format)
}

/// Whether `out_dir` holds this build ([`manifest::up_to_date`]) and, when `page` is wanted,
/// its page ([`html`]; an output built with `--no-html` lacks it).
pub fn up_to_date(out_dir: &Path, build_key: &str, page: bool) -> bool {
    manifest::up_to_date(out_dir, build_key) && (!page || out_dir.join(PAGE).is_file())
}

/// The build page's path inside a dataset directory.
pub const PAGE: &str = "report/index.html";

/// Pretty JSON with a trailing newline: the encoding of every JSON document the emitters write.
fn pretty(v: &serde_json::Value) -> Vec<u8> {
    let mut b = serde_json::to_vec_pretty(v).expect("serialisable");
    b.push(b'\n');
    b
}

/// A dataset directory under construction: files go into a sibling temp directory, which
/// [`Staging::finish`] swaps into place; dropped unfinished, it is removed.
pub struct Staging {
    dir: PathBuf,
    tmp: PathBuf,
    done: bool,
}

impl Staging {
    /// Stages `dir`: its sibling temp directory `.<name>.tmp-<pid>`, emptied (stale staging
    /// directories of killed builds swept first).
    pub fn new(dir: &Path) -> Result<Staging> {
        let parent = dir.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        // Staging directories of killed builds (`kill -9` mid-emit) are swept first.
        crate::store::sweep_stale_dirs(parent);
        let tmp = parent.join(format!(".{name}.tmp-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&tmp);
        Ok(Staging {
            dir: dir.to_path_buf(),
            tmp,
            done: false,
        })
    }

    /// Writes one file; returns (relative path, blake3 hex). A large file is written and hashed
    /// at once.
    pub fn put(&self, rel: &str, bytes: &[u8]) -> Result<(String, String)> {
        let path = self.tmp.join(rel);
        std::fs::create_dir_all(path.parent().expect("has parent"))
            .with_context(|| format!("creating {}", path.display()))?;
        let hash = || {
            let mut h = blake3::Hasher::new();
            if bytes.len() > 1 << 20 {
                h.update_rayon(bytes);
            } else {
                h.update(bytes);
            }
            h.finalize().to_hex().to_string()
        };
        let (written, hash) = rayon::join(|| std::fs::write(&path, bytes), hash);
        written.with_context(|| format!("writing {}", path.display()))?;
        Ok((rel.to_string(), hash))
    }

    /// Creates one file, to be written through [`StagedFile::w`] and closed by
    /// [`StagedFile::finish`] (several can be open at once).
    pub fn create(&self, rel: &str) -> Result<StagedFile> {
        let path = self.tmp.join(rel);
        std::fs::create_dir_all(path.parent().expect("has parent"))
            .with_context(|| format!("creating {}", path.display()))?;
        let file = std::fs::File::create(&path).with_context(|| format!("writing {}", path.display()))?;
        let w = std::io::BufWriter::with_capacity(
            1 << 20,
            HashingWriter {
                inner: file,
                hasher: blake3::Hasher::new(),
            },
        );
        Ok(StagedFile {
            rel: rel.to_string(),
            path,
            w,
        })
    }

    /// Replaces the dataset directory by the staged one.
    pub fn finish(mut self) -> Result<()> {
        // `.<name>.tmp-<pid>.old`: per process, so the sweep can tell a dead build's leftovers.
        let old = self.tmp.with_file_name(format!(
            "{}.old",
            self.tmp
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default()
        ));
        if self.dir.exists() {
            std::fs::rename(&self.dir, &old).with_context(|| format!("moving {} aside", self.dir.display()))?;
        }
        std::fs::rename(&self.tmp, &self.dir)
            .with_context(|| format!("renaming {} to {}", self.tmp.display(), self.dir.display()))?;
        let _ = std::fs::remove_dir_all(&old);
        self.done = true;
        Ok(())
    }
}

/// A staged file being written ([`Staging::create`]): buffered, hashed as it goes, never held
/// whole. The hasher sees the buffer's 1 MiB flushes, not each small write (BLAKE3 hashes large
/// inputs many chunks at a time).
pub struct StagedFile {
    rel: String,
    path: PathBuf,
    w: std::io::BufWriter<HashingWriter<std::fs::File>>,
}

impl std::io::Write for StagedFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.w.write(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.w.flush()
    }
}

/// Slices of a mapped store entry at least this large are copied file to file
/// ([`StagedFile::write_bytes`]).
const COPY_BYTES: usize = 1 << 20;

/// Pieces at least this large are written to the file without passing through its buffer
/// ([`StagedFile::write_bytes`]).
const DIRECT_BYTES: usize = 64 << 10;

impl StagedFile {
    /// Writes `bytes` as `write_all` does. A large slice of a mapped local store entry (the
    /// merge's segments and rows, [`crate::store::mapped`]) is copied file to file inside the
    /// kernel after the buffer is flushed, and hashed from memory; what the kernel does not copy
    /// (another filesystem on an old kernel) is written as any other bytes.
    fn write_bytes(&mut self, bytes: &[u8]) -> Result<()> {
        use std::io::Write;
        let mut rest = bytes;
        if bytes.len() >= COPY_BYTES {
            if let Some((src, offset)) = crate::store::mapped::source(bytes) {
                self.w
                    .flush()
                    .with_context(|| format!("writing {}", self.path.display()))?;
                let hashing = self.w.get_mut();
                let copied = crate::store::mapped::copy_to(&src, offset, bytes.len(), &hashing.inner);
                hashing.hasher.update(&bytes[..copied]);
                rest = &bytes[copied..];
            }
        }
        // A large piece is written from where it is (the buffer flushed first), not copied
        // into the buffer on the way: the merge's pieces are tens to hundreds of KiB each.
        let w = if rest.len() >= DIRECT_BYTES {
            self.w.flush().and_then(|()| self.w.get_mut().write_all(rest))
        } else {
            self.w.write_all(rest)
        };
        w.with_context(|| format!("writing {}", self.path.display()))
    }

    /// Flushes the file; returns (relative path, blake3 hex) as [`Staging::put`] does.
    pub fn finish(mut self) -> Result<(String, String)> {
        use std::io::Write;
        self.w
            .flush()
            .with_context(|| format!("writing {}", self.path.display()))?;
        let (hashing, _) = self.w.into_parts();
        Ok((self.rel, hashing.hasher.finalize().to_hex().to_string()))
    }
}

/// A writer that hashes (blake3) what it passes on.
struct HashingWriter<W> {
    inner: W,
    hasher: blake3::Hasher,
}

impl<W: std::io::Write> std::io::Write for HashingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

impl std::ops::Drop for Staging {
    fn drop(&mut self) {
        if !self.done {
            let _ = std::fs::remove_dir_all(&self.tmp);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mapped_slices_copied_file_to_file_leave_the_same_file_and_hash_as_written_bytes() {
        use std::io::Write;
        let dir = tempfile::tempdir().unwrap();
        let store = crate::store::Store::open_url(dir.path().join("store").to_str().unwrap()).unwrap();
        let key = crate::store::StageKey {
            stage: "t".into(),
            version: 1,
            config: serde_json::Value::Null,
            inputs: vec![],
        };
        let payload: Vec<u8> = (0..5u32 << 19).map(|i| (i % 253) as u8).collect();
        store.put(&key, &payload).unwrap();
        // A large entry of a local store is mapped; its slices of 1 MiB or more are copied.
        let entry = store.load_shared(&key, Ok::<_, String>).unwrap();
        let big = entry.slice(7..COPY_BYTES + 10);
        let small = entry.slice(100..5000);
        let heap = payload[..COPY_BYTES + 1].to_vec();
        assert!(crate::store::mapped::source(&big).is_some(), "the copy path is taken");
        assert!(crate::store::mapped::source(&heap).is_none());
        let staging = Staging::new(&dir.path().join("out")).unwrap();
        let mut file = staging.create("a/f.jsonl").unwrap();
        let mut expected = Vec::new();
        // Buffered bytes before, between and after copies; copies back to back; the whole entry.
        for bytes in [&b"head"[..], &big, &big, &small, &heap, b"mid", &entry, b"tail"] {
            file.write_bytes(bytes).unwrap();
            expected.extend_from_slice(bytes);
        }
        file.write_all(b"end").unwrap();
        expected.extend_from_slice(b"end");
        let (rel, hash) = file.finish().unwrap();
        let written = std::fs::read(staging.tmp.join(&rel)).unwrap();
        assert!(
            written == expected,
            "{} bytes written, {} expected",
            written.len(),
            expected.len()
        );
        assert_eq!(hash, blake3::hash(&written).to_hex().to_string());
    }
}
