//! What the compile stages of a text-to-SQL recipe are keyed by, and the build key computed from
//! those keys alone ([`quick_build_key`]): a no-op rebuild compares it with the manifest's
//! without reading any stage entry (issue 17).

use std::collections::BTreeMap;
use std::path::PathBuf;

use rayon::prelude::*;
use serde_json::json;

use super::COMPILE_VERSION;
use crate::corpus::{self, BadRecord, Descriptions, Question};
use crate::dataset::{BuildError, build_key, code_fingerprint};
use crate::recipe::{Recipe, ResolvedSource};
use crate::store::{StageKey, hash_file};

/// The question records of a recipe's source, by database, the records skipped, and the Spider
/// column descriptions (`tables.json`; empty for BIRD, whose descriptions sit beside each
/// database).
pub(super) struct Inputs {
    pub by_db: BTreeMap<String, Vec<Question>>,
    pub bad_records: Vec<BadRecord>,
    pub spider: BTreeMap<String, Descriptions>,
}

/// Reads the [`Inputs`] of `source`. Errors: the questions or `tables.json` do not read.
pub(super) fn inputs(source: &ResolvedSource) -> Result<Inputs, BuildError> {
    let (questions, bad_records) = corpus::read_questions(&source.questions, &source.manifest.format)?;
    let spider = match &source.tables {
        Some(p) => corpus::spider_descriptions(p)?,
        None => BTreeMap::new(),
    };
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

/// The [`DbKey`] of database `db_id`, whose questions are `qs`: the stage is a function of the
/// recipe knobs it reads, the questions, the database file's bytes, the descriptions and the code.
pub(super) fn db_key(
    recipe: &Recipe,
    source: &ResolvedSource,
    spider: &BTreeMap<String, Descriptions>,
    db_id: &str,
    qs: &[Question],
) -> DbKey {
    let db_dir = source.databases.join(db_id);
    let db_path = db_dir.join(format!("{db_id}.sqlite"));
    let db_hash = hash_file(&db_path).ok();
    let descriptions = spider
        .get(db_id)
        .cloned()
        .unwrap_or_else(|| corpus::bird_descriptions(&db_dir));
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

/// The build key a whole build of `recipe` gets ([`super::compile`] with every database's stage
/// present), from the stage keys alone: no stage entry is read or computed. Errors: as
/// [`inputs`].
pub fn quick_build_key(recipe: &Recipe, source: &ResolvedSource) -> Result<String, BuildError> {
    let inputs = inputs(source)?;
    let digests: Vec<String> = inputs
        .by_db
        .par_iter()
        .map(|(db_id, qs)| db_key(recipe, source, &inputs.spider, db_id, qs).key.digest())
        .collect();
    Ok(build_key(recipe, &inputs.bad_records, &digests))
}
