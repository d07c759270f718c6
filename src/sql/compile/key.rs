//! What the compile stages of a text-to-SQL recipe are keyed by, and the build key computed from
//! those keys alone ([`quick_build_key`]): a no-op rebuild compares it with the manifest's
//! without reading any stage entry (issue 17).
//!
//! A rebuild after a code change computes the quick key, finds the output stale and then runs
//! [`super::compile`], which needs the same inputs and keys: the question records and the file
//! hashes are memoised for the process ([`inputs`], [`file_hash`]) so that the question file is
//! read once and each database hashed once. A memo entry is keyed by the file's
//! [`FileVersion`] (canonical path, length, modification time): a rewritten file is read again.

use std::collections::BTreeMap;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use rayon::prelude::*;
use serde_json::json;

use super::COMPILE_VERSION;
use crate::corpus::{self, BadRecord, Descriptions, Question};
use crate::dataset::{BuildError, build_key, code_fingerprint};
use crate::recipe::{Recipe, ResolvedSource};
use crate::store::{StageKey, StoreError, hash_file};
use crate::tools::join_cache::FileVersion;

/// The question records of a recipe's source, by database, the records skipped, and the Spider
/// column descriptions (`tables.json`; empty for BIRD, whose descriptions sit beside each
/// database).
#[derive(Clone)]
pub(super) struct Inputs {
    pub by_db: BTreeMap<String, Vec<Question>>,
    pub bad_records: Vec<BadRecord>,
    pub spider: BTreeMap<String, Descriptions>,
}

/// [`hash_file`], memoised for the process by [`FileVersion`] (the quick key and the compile stage
/// hash each database and the question file once between them). Errors are not memoised.
pub(super) fn file_hash(path: &Path) -> Result<String, StoreError> {
    static MEMO: OnceLock<Mutex<HashMap<FileVersion, String>>> = OnceLock::new();
    let id = FileVersion::of(path);
    let memo = MEMO.get_or_init(Default::default);
    if let Some(h) = memo.lock().expect("file hash memo").get(&id) {
        return Ok(h.clone());
    }
    let h = hash_file(path)?;
    memo.lock().expect("file hash memo").insert(id, h.clone());
    Ok(h)
}

/// Reads the [`Inputs`] of `source`, or returns those read last by this process from the same
/// question file, `tables.json` and format (one entry is kept). Errors: the questions or
/// `tables.json` do not read.
pub(super) fn inputs(source: &ResolvedSource) -> Result<Inputs, BuildError> {
    type Memo = Option<((FileVersion, Option<FileVersion>, String), Inputs)>;
    static MEMO: OnceLock<Mutex<Memo>> = OnceLock::new();
    let id = (
        FileVersion::of(&source.questions),
        source.tables.as_deref().map(FileVersion::of),
        source.manifest.format.clone(),
    );
    let memo = MEMO.get_or_init(Default::default);
    if let Some((_, inputs)) = memo.lock().expect("inputs memo").as_ref().filter(|(k, _)| *k == id) {
        return Ok(inputs.clone());
    }
    let inputs = read_inputs(source)?;
    *memo.lock().expect("inputs memo") = Some((id, inputs.clone()));
    Ok(inputs)
}

fn read_inputs(source: &ResolvedSource) -> Result<Inputs, BuildError> {
    let (questions, spider) = rayon::join(
        || corpus::read_questions(&source.questions, &source.manifest.format),
        || match &source.tables {
            Some(p) => corpus::spider_descriptions(p),
            None => Ok(BTreeMap::new()),
        },
    );
    let ((questions, bad_records), spider) = (questions?, spider?);
    let mut by_db: BTreeMap<String, Vec<Question>> = BTreeMap::new();
    for q in questions {
        by_db.entry(q.db_id.clone()).or_default().push(q);
    }
    Ok(Inputs {
        by_db,
        bad_records,
        spider,
    })
}

/// One database's compile stage: its file, the file's hash (`None` when it does not read), its
/// column descriptions and the stage key.
pub(super) struct DbKey {
    pub db_path: PathBuf,
    pub db_hash: Option<String>,
    pub descriptions: Descriptions,
    pub key: StageKey,
}

/// The database file of `db_id`: `<databases>/<db_id>/<db_id>.sqlite` (Spider's and BIRD's layout).
pub(super) fn db_path(source: &ResolvedSource, db_id: &str) -> PathBuf {
    source.databases.join(db_id).join(format!("{db_id}.sqlite"))
}

/// The [`DbKey`] of a batch of database `db_id` ([`super::batch`]) whose questions are `qs` and
/// whose file hashes to `db_hash` (`None`: it does not read): the stage is a function of the
/// recipe knobs it reads, the questions, the database file's bytes, the descriptions and the code.
pub(super) fn db_key(
    recipe: &Recipe,
    source: &ResolvedSource,
    spider: &BTreeMap<String, Descriptions>,
    db_id: &str,
    qs: &[Question],
    db_hash: Option<String>,
) -> DbKey {
    let db_path = db_path(source, db_id);
    let descriptions = spider
        .get(db_id)
        .cloned()
        .unwrap_or_else(|| corpus::bird_descriptions(&source.databases.join(db_id)));
    let key = StageKey {
        stage: format!("compile-{}", recipe.format),
        version: COMPILE_VERSION,
        config: json!({"dataset": recipe.name, "split": recipe.split, "keep_empty_answers": recipe.keep_empty_answers, "keep_degenerate_answers": recipe.keep_degenerate_answers, "tool_pool": recipe.tool_pool, "source": source.manifest.format, "code": code_fingerprint()}),
        inputs: vec![
            blake3::hash(&serde_json::to_vec(qs).expect("serialise"))
                .to_hex()
                .to_string(),
            db_hash.clone().unwrap_or_else(|| "missing".into()),
            blake3::hash(&serde_json::to_vec(&descriptions).expect("serialise"))
                .to_hex()
                .to_string(),
        ],
    };
    DbKey {
        db_path,
        db_hash,
        descriptions,
        key,
    }
}

/// The build key a whole build of `recipe` gets ([`super::compile`] with every item's stage
/// present), from the stage keys alone: no stage entry is read or computed. Errors: as
/// [`inputs`].
pub fn quick_build_key(recipe: &Recipe, source: &ResolvedSource) -> Result<String, BuildError> {
    let inputs = inputs(source)?;
    let whole = recipe.format == "rest";
    let digests: Vec<Vec<String>> = inputs
        .by_db
        .par_iter()
        .map(|(db_id, qs)| {
            let db_hash = file_hash(&db_path(source, db_id)).ok();
            super::batch::batches(db_id, qs, whole)
                .iter()
                .map(|b| {
                    db_key(recipe, source, &inputs.spider, db_id, &b.questions, db_hash.clone())
                        .key
                        .digest()
                })
                .collect()
        })
        .collect();
    Ok(build_key(recipe, &inputs.bad_records, &digests.concat()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_database_is_hashed_once_per_version_of_its_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d.sqlite");
        std::fs::write(&path, b"first").unwrap();
        let first = file_hash(&path).unwrap();
        assert_eq!(first, hash_file(&path).unwrap());
        // Same length and modification time, other bytes: the memo answers without reading the
        // file again (the quick key and the compile stage used to hash every database twice).
        let modified = std::fs::metadata(&path).unwrap().modified().unwrap();
        std::fs::write(&path, b"other").unwrap();
        std::fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_modified(modified)
            .unwrap();
        assert_eq!(file_hash(&path).unwrap(), first);
        // Another spelling of the path is the same file.
        assert_eq!(file_hash(&dir.path().join(".").join("d.sqlite")).unwrap(), first);
        // A rewritten file (another length) is hashed again.
        std::fs::write(&path, b"rewritten").unwrap();
        assert_eq!(file_hash(&path).unwrap(), hash_file(&path).unwrap());
        assert_ne!(file_hash(&path).unwrap(), first);
    }
}
