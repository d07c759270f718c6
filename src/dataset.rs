//! The rows and builds every stage passes on: [`Example`] (one dataset row), [`Drop`] (an input
//! that did not become a row, with its reason code), [`Outcome`] (one group's rows and drops),
//! [`Build`] (everything the emitters read) and [`BuildError`]; plus the helpers every family's
//! compile stage uses to key and assemble its build ([`code_fingerprint`], [`hash_inputs`],
//! [`build_key`], [`SplitStage`]/[`split_build`]).
//!
//! This module sits below every family (`sql`, `seq`, `catalog`), `variants` and `emit`: it
//! imports none of them.

pub mod dialogue;

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::corpus::{self, BadRecord};
use crate::recipe::{Recipe, ResolvedSource};
use crate::store::hash_file;
use crate::tools::pool::KeyDescription;
use crate::tools::{Call, ToolSpec, Toolkit};
use crate::verify::Answer;

mod duplicates;
pub use duplicates::DUPLICATE_ROW;

pub use crate::store::code_fingerprint;

/// One dataset row. Fields a family does not have stay `None`/empty (e.g. a SeqATIS row has no
/// `db_id`, `sql` or `gold_answer`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Example {
    /// `<dataset>/<source item id>`.
    pub id: String,
    /// Dataset (recipe) name.
    pub dataset: String,
    /// Split (`train`, `dev`, `test`, … as in the source).
    pub split: String,
    /// Database id (text-to-SQL families).
    pub db_id: Option<String>,
    /// The request text.
    pub input: String,
    /// BIRD evidence.
    pub evidence: Option<String>,
    /// Gold SQL (text-to-SQL families).
    pub sql: Option<String>,
    /// Gold calls, in execution order: what a model predicts (SLOT/SEL: the first call reads the
    /// join step's output `$starting_table_var$`).
    pub output: Vec<Call>,
    /// The setup call the framework runs before the model's calls (SLOT/SEL: the join step
    /// `initialize_active_data`, label `starting_table_var`), never part of what a model
    /// predicts (Live API-Bench App. D.1, Listing 10). `None` where the family has none.
    /// Readers accept older rows whose `output[0]` is the join step
    /// ([`crate::tools::setup_and_calls`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initialization_step: Option<Call>,
    /// Further setup calls the framework runs after `initialization_step`, in order (SLOT/SEL:
    /// one join step `initialize_active_data` per further joined table a subquery or set
    /// operation reads, labelled `starting_table_var_2`, `_3`, …); empty when there are none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub additional_setup_steps: Vec<Call>,
    /// The verified answer: the SQL result (text-to-SQL families).
    pub gold_answer: Option<Answer>,
    /// Whether the answer is ordered (the SQL has ORDER BY).
    pub ordered: bool,
    /// This instance's tool specs.
    pub tools: Toolkit,
    /// The joined table's columns with descriptions and types (SLOT/SEL).
    pub key_values_and_descriptions: Vec<KeyDescription>,
    /// BIRD difficulty.
    pub difficulty: Option<String>,
    /// Family-specific annotations as a JSON object (e.g. source intents, per-call execution
    /// checks); `None` when there are none.
    pub meta: Option<serde_json::Value>,
}

/// An input item that did not become an example, with what a person needs to see it (the
/// build page shows up to 5 per reason: request, source, detail).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Drop {
    /// Would-be example id.
    pub id: String,
    /// The group it belongs to: database id (text-to-SQL) or split (seq).
    pub group: String,
    /// Reason code, e.g. `db_missing`, `unsupported:subquery`, `mismatch`,
    /// `clause_intent_mismatch`; the family's module documents its codes.
    pub reason: String,
    /// Human detail.
    pub detail: String,
    /// The item's request: the question (text-to-SQL, BFCL), the utterance (ATIS/SNIPS, TopV2);
    /// empty where the family has none before conversion (SGD, MultiWOZ, MCP bundles).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub question: String,
    /// What the item was built from: the gold SQL (text-to-SQL), the TopV2 parse, the tagged
    /// tokens (ATIS/SNIPS), the source calls (SGD: `service.method(args)`; MultiWOZ: the turns'
    /// slot states), the BFCL functions (empty for an MCP bundle that could not be drawn); at
    /// most [`SOURCE_CHARS`] characters (longer ones cut, ending `…`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub source: String,
}

/// Most characters of a [`Drop::source`] (every drop is in `report/verification.json`).
pub const SOURCE_CHARS: usize = 2000;

impl Drop {
    /// `text` cut to [`SOURCE_CHARS`] characters (`…` at the end when cut).
    pub fn source_text(text: &str) -> String {
        match text.char_indices().nth(SOURCE_CHARS) {
            Some((i, _)) => format!("{}…", &text[..i]),
            None => text.to_string(),
        }
    }
}

/// The compile output of one group (a database or a split).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Outcome {
    /// Examples, in input order.
    pub examples: Vec<Example>,
    /// Dropped items, in input order.
    pub drops: Vec<Drop>,
    /// Items attempted.
    pub attempted: usize,
}

impl Outcome {
    /// This outcome as a store entry holds it ([`StoredOutcome`]): the examples' toolkits taken
    /// out, each shared one ([`Toolkit::id`]) listed once. [`Outcome::from_stored`] undoes it, the
    /// rows sharing a toolkit again.
    pub fn into_stored(mut self) -> StoredOutcome {
        let mut toolkits: Vec<Toolkit> = Vec::new();
        let mut index: std::collections::HashMap<usize, u32> = std::collections::HashMap::new();
        let toolkit_of = self
            .examples
            .iter_mut()
            .map(|e| {
                let tools = std::mem::take(&mut e.tools);
                *index.entry(tools.id()).or_insert_with(|| {
                    toolkits.push(tools);
                    toolkits.len() as u32 - 1
                })
            })
            .collect();
        StoredOutcome {
            outcome: self,
            toolkits,
            toolkit_of,
        }
    }

    /// The outcome of a store entry. Errors: a toolkit index out of range, or not one index per
    /// example (a corrupt entry: the caller recomputes it).
    pub fn from_stored(stored: StoredOutcome) -> Result<Outcome, String> {
        let StoredOutcome {
            mut outcome,
            toolkits,
            toolkit_of,
        } = stored;
        if toolkit_of.len() != outcome.examples.len() {
            return Err(format!(
                "{} toolkit indices for {} examples",
                toolkit_of.len(),
                outcome.examples.len()
            ));
        }
        for (e, i) in outcome.examples.iter_mut().zip(toolkit_of) {
            e.tools = toolkits
                .get(i as usize)
                .ok_or_else(|| format!("toolkit {i} of {} in example {}", toolkits.len(), e.id))?
                .clone();
        }
        Ok(outcome)
    }
}

/// Whether this build may compute the later-stage item `key` of unit `group` after a store miss
/// ([`crate::store::Store::claim`]). A unit is a group, or one compile item of a group whose
/// examples are its items' runs ([`Build::item_runs`]: a database's question batch). All of a
/// unit's later items are claimed under one key of its name alone (stage [`LATER_STAGES`]), so
/// the shard that computes a batch's variants also computes its trajectory segment, which reads
/// them (issue 34), on the shard round two's packing gives the unit
/// ([`crate::store::plan::group_item`]), and a merge names a missing one as
/// `later-stages <stage> of <unit>` with that shard.
pub fn claim_group(store: &crate::store::Store, key: &crate::store::StageKey, group: &str) -> bool {
    let owner = crate::store::StageKey {
        stage: LATER_STAGES.into(),
        version: 1,
        config: serde_json::Value::Null,
        inputs: vec![group.to_string()],
    };
    store.claim(&owner, &crate::store::plan::group_item(&key.stage, group))
}

/// The stage name under which [`claim_group`] claims a group's later items.
pub const LATER_STAGES: &str = "later-stages";

/// An [`Outcome`] as a store entry holds it: the examples without their toolkits, the distinct
/// toolkits, and the index of each example's toolkit. A sel-spider build's 889 rows hold 61 specs
/// each but share a few hundred toolkits; stored whole they were 65 MB to serialise, hash and
/// write (issue 17).
#[derive(Debug, Serialize, Deserialize)]
pub struct StoredOutcome {
    /// The outcome, every example's `tools` empty.
    outcome: Outcome,
    /// The distinct toolkits, in first-use order, as a table of their distinct specs
    /// ([`crate::tools::spec_table`]: read back as toolkits of text, their specs parsed only
    /// when read — issue 34: a merge reads every entry, and most toolkits' specs never).
    #[serde(with = "crate::tools::spec_table")]
    toolkits: Vec<Toolkit>,
    /// Per example (in order), its index in `toolkits`.
    toolkit_of: Vec<u32>,
}

/// The BLAKE3 digest (hex) of `examples` as JSON, each distinct toolkit serialised and hashed
/// once: a function of the examples' contents (two equal lists give one digest whether or not
/// their toolkits are shared), for store keys that cover whole groups of rows.
pub fn examples_digest(examples: &[&Example]) -> String {
    let mut hasher = blake3::Hasher::new();
    let mut toolkits: std::collections::HashMap<usize, blake3::Hash> = std::collections::HashMap::new();
    let mut buf = Vec::new();
    for e in examples {
        // Every field by name (no `..`): a field added to `Example` must be added here, or the
        // key would not cover it.
        let Example {
            id,
            dataset,
            split,
            db_id,
            input,
            evidence,
            sql,
            output,
            initialization_step,
            additional_setup_steps,
            gold_answer,
            ordered,
            tools,
            key_values_and_descriptions,
            difficulty,
            meta,
        } = e;
        let tools = *toolkits
            .entry(tools.id())
            .or_insert_with(|| blake3::hash(tools.json().as_bytes()));
        buf.clear();
        serde_json::to_writer(
            &mut buf,
            &(
                (id, dataset, split, db_id, input, evidence, sql),
                (
                    output,
                    initialization_step,
                    additional_setup_steps,
                    gold_answer,
                    ordered,
                ),
                (key_values_and_descriptions, difficulty, meta),
            ),
        )
        .expect("serialisable");
        hasher.update(&buf);
        hasher.update(tools.as_bytes());
    }
    hasher.finalize().to_hex().to_string()
}

/// Everything a build produced, for the emitters.
#[derive(Debug, Clone)]
pub struct Build {
    /// The recipe.
    pub recipe: Recipe,
    /// The resolved source.
    pub source: ResolvedSource,
    /// What a group is: `database` or `split`.
    pub group_kind: &'static str,
    /// Outcomes per group, in group order.
    pub groups: BTreeMap<String, Outcome>,
    /// Skipped input records.
    pub bad_records: Vec<BadRecord>,
    /// blake3 of each source input, for the manifest.
    pub source_hashes: BTreeMap<String, String>,
    /// Digest of all stage keys: changes whenever any output could.
    pub build_key: String,
    /// Stages served from the store.
    pub cache_hits: usize,
    /// Stages recomputed.
    pub cache_misses: usize,
    /// The dataset-level tool catalog (`tools/functions.json`).
    pub catalog: Vec<ToolSpec>,
    /// Family-specific files, path under `out/<name>/` → bytes (e.g. `tools/openapi.json`).
    pub extra_files: BTreeMap<String, Vec<u8>>,
    /// Family-specific report numbers (`report/verification.json` → `stats`), also printed.
    pub stats: serde_json::Map<String, serde_json::Value>,
    /// SLOT/SEL/REST: the results of each example's calls as its trajectory shows them, by example
    /// id, from the compile stages that ran in this process (a stage served from the store has
    /// none; the trajectories emitter then executes the calls itself). Not part of any output.
    pub shown: std::collections::HashMap<String, crate::tools::shown::Shown>,
    /// Text-to-SQL: each group's compile items in item order, whose examples are the group's
    /// examples one after the other (a database's question batches; after the variants stage
    /// each item's variant rows follow its examples and are counted in); empty for other
    /// families.
    pub items: BTreeMap<String, Vec<ItemRef>>,
    /// `Some`: the variants stage counts the stored variant rows here, by unit (question batch
    /// or group, as [`Build::item_runs`] gives them) and split, instead of putting them into
    /// `groups` — a merge whose rows and trajectory files are the shards' stored segments and
    /// that writes no page reads no variant row (issue 34; set by [`crate::pipeline`] before the
    /// stage). `None` (every other build): the rows are read.
    pub variant_rows_counted: Option<BTreeMap<String, BTreeMap<String, usize>>>,
    /// SGD and MultiWOZ: the multi-turn dialogue trajectories (`trajectories/dialogue/`, issue 45).
    pub dialogues: Option<dialogue::Dialogues>,
}

/// One compile item of a group ([`Build::items`]).
#[derive(Debug, Clone, PartialEq)]
pub struct ItemRef {
    /// The item's name (`world_1`, `world_1#2`): what the shard assignment places.
    pub name: String,
    /// The digest of the item's stage key ([`crate::store::StageKey::digest`]).
    pub digest: String,
    /// How many of the group's examples the item gave (consecutive, after the previous items').
    pub examples: usize,
}

impl Build {
    /// The runs of `group`'s examples its compile items give ([`Build::items`]), each item with
    /// its range of `groups[group].examples`, in order; `None` when the group has no items or
    /// they do not cover its examples exactly (rows added after them, e.g. LLM paraphrases: the
    /// group is then one unit for its later items).
    pub fn item_runs(&self, group: &str) -> Option<Vec<(&ItemRef, std::ops::Range<usize>)>> {
        let items = self.items.get(group)?;
        let len = self.groups.get(group)?.examples.len();
        let mut start = 0;
        let mut runs = Vec::with_capacity(items.len());
        for item in items {
            runs.push((item, start..start + item.examples));
            start += item.examples;
        }
        (start == len).then_some(runs)
    }

    /// Puts later rows into `group` (variant rows, paraphrases): each `(item, rows)` right after
    /// the run of its compile item (`item` indexes [`Build::items`]; [`Build::item_runs`]) and
    /// counted in that item, so a question batch's rows stay in the batch's unit (issue 34);
    /// after the group's examples when `item` is `None` or the group has no item runs. Rows of
    /// one item keep their order; a missing group is left alone.
    pub fn insert_after_runs(&mut self, group: &str, rows: Vec<(Option<usize>, Vec<Example>)>) {
        let lens: Vec<usize> = self
            .item_runs(group)
            .map(|runs| runs.into_iter().map(|(_, r)| r.len()).collect())
            .unwrap_or_default();
        let Some(outcome) = self.groups.get_mut(group) else {
            return;
        };
        let mut by_run: Vec<Vec<Example>> = vec![Vec::new(); lens.len()];
        let mut tail = Vec::new();
        for (item, r) in rows {
            match item.and_then(|i| by_run.get_mut(i)) {
                Some(run) => run.extend(r),
                None => tail.extend(r),
            }
        }
        let mut before = std::mem::take(&mut outcome.examples).into_iter();
        let mut examples = Vec::new();
        for (n, (len, extra)) in lens.iter().zip(by_run).enumerate() {
            examples.extend(before.by_ref().take(*len));
            if let Some(i) = self.items.get_mut(group).and_then(|items| items.get_mut(n)) {
                i.examples += extra.len();
            }
            examples.extend(extra);
        }
        examples.extend(before);
        examples.extend(tail);
        outcome.examples = examples;
    }

    /// Folds `bytes` (e.g. the digest of every LLM answer a stage used) into the build key:
    /// `build_key = blake3(build_key ‖ bytes)`, so outputs that depend on them never count as
    /// up to date with a key computed without them.
    pub fn fold_into_key(&mut self, bytes: &[u8]) {
        let mut h = blake3::Hasher::new();
        h.update(self.build_key.as_bytes());
        h.update(bytes);
        self.build_key = h.finalize().to_hex().to_string();
    }
}

/// Errors that stop a build (bad recipe, missing corpus, unreadable input file, store IO).
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// Recipe or source problem.
    #[error(transparent)]
    Recipe(#[from] crate::recipe::RecipeError),
    /// Corpus file problem.
    #[error(transparent)]
    Corpus(#[from] corpus::CorpusError),
    /// Store problem.
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    /// A stage item this build may not compute (`--shard`: another shard's; `--merge`: not in
    /// the store); the pipeline reports it, see [`crate::store::Store::claim`].
    #[error("stage {stage}: not computed here (another shard's item, or missing from the store)")]
    Unclaimed {
        /// The stage name of the item's key.
        stage: String,
    },
    /// A shard's own input file differs from the stored plan's (`toolforge build --plan`): the
    /// plan is stale and must be made again.
    #[error("stale plan: {detail}")]
    StalePlan {
        /// The input file (a database) that changed.
        path: std::path::PathBuf,
        /// What differs, with the hint to re-plan.
        detail: String,
    },
    /// Recipe and source do not fit together.
    #[error("recipe {recipe}: format {format:?} cannot be built from source {source_name} (format {source_format:?})")]
    Mismatch {
        /// Recipe name.
        recipe: String,
        /// Recipe format.
        format: String,
        /// Source name.
        source_name: String,
        /// Source format.
        source_format: String,
    },
}

/// blake3 of each input file, keyed by its path relative to the corpus root.
pub fn hash_inputs(source: &ResolvedSource, files: &[PathBuf]) -> Result<BTreeMap<String, String>, BuildError> {
    let mut out = BTreeMap::new();
    for f in files {
        let rel = f.strip_prefix(&source.root).unwrap_or(f).display().to_string();
        out.insert(rel, hash_file(f)?);
    }
    Ok(out)
}

/// The stage output of a family whose groups are splits and whose whole conversion is one
/// store stage (seq, catalog), with what the build records about it.
pub struct SplitStage {
    /// Outcomes per split; ids without the dataset prefix.
    pub splits: BTreeMap<String, Outcome>,
    /// Skipped input records.
    pub bad_records: Vec<BadRecord>,
    /// The dataset-level catalog.
    pub catalog: Vec<ToolSpec>,
    /// Family files (path under `out/<name>/` → bytes).
    pub extra_files: BTreeMap<String, Vec<u8>>,
    /// Report numbers.
    pub stats: serde_json::Map<String, serde_json::Value>,
    /// Input hashes ([`hash_inputs`]).
    pub source_hashes: BTreeMap<String, String>,
    /// The build key.
    pub build_key: String,
    /// Whether the stage came from the store.
    pub hit: bool,
}

/// Assembles the [`Build`] of a [`SplitStage`]: every example and drop id gets the
/// `<dataset>/` prefix, every example its dataset and split names.
pub fn split_build(recipe: Recipe, source: ResolvedSource, stage: SplitStage) -> Build {
    let mut groups = stage.splits;
    for (split, outcome) in groups.iter_mut() {
        for e in &mut outcome.examples {
            e.dataset = recipe.name.clone();
            e.split = split.clone();
            e.id = format!("{}/{}", recipe.name, e.id);
        }
        for d in &mut outcome.drops {
            d.id = format!("{}/{}", recipe.name, d.id);
        }
    }
    Build {
        recipe,
        source,
        group_kind: "split",
        groups,
        bad_records: stage.bad_records,
        source_hashes: stage.source_hashes,
        build_key: stage.build_key,
        cache_hits: stage.hit as usize,
        cache_misses: (!stage.hit) as usize,
        catalog: stage.catalog,
        extra_files: stage.extra_files,
        stats: stage.stats,
        shown: Default::default(),
        items: BTreeMap::new(),
        variant_rows_counted: None,
        dialogues: None,
    }
}

/// Digest over the recipe, the bad records and the stage digests: the build key.
pub fn build_key(recipe: &Recipe, bad_records: &[BadRecord], digests: &[String]) -> String {
    let mut h = blake3::Hasher::new();
    h.update(&serde_json::to_vec(recipe).expect("serialise"));
    h.update(&serde_json::to_vec(bad_records).expect("serialise"));
    for d in digests {
        h.update(d.as_bytes());
    }
    h.update(env!("CARGO_PKG_VERSION").as_bytes());
    h.finalize().to_hex().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_examples_digest_covers_every_field_and_not_toolkit_sharing() {
        let spec = |name: &str| crate::tools::test_spec(name);
        let base = Example {
            id: "d/1".into(),
            dataset: "d".into(),
            split: "dev".into(),
            db_id: Some("db".into()),
            input: "How many?".into(),
            sql: Some("SELECT 1".into()),
            tools: Toolkit::from(vec![spec("a")]),
            ..Example::default()
        };
        let digest = |e: &Example| examples_digest(&[e]);
        let call = || Call {
            name: "f".into(),
            arguments: serde_json::Map::new(),
            label: "x".into(),
        };
        let d0 = digest(&base);
        // Equal toolkits give one digest whether or not they are one shared list.
        let mut shared = base.clone();
        shared.tools = base.tools.clone();
        let mut equal = base.clone();
        equal.tools = Toolkit::from(vec![spec("a")]);
        assert_eq!(digest(&shared), d0);
        assert_eq!(digest(&equal), d0);
        // Any change of any field changes it.
        let changes: Vec<(&str, Box<dyn Fn(&mut Example)>)> = vec![
            ("id", Box::new(|e| e.id.push('x'))),
            ("dataset", Box::new(|e| e.dataset.push('x'))),
            ("split", Box::new(|e| e.split = "test".into())),
            ("db_id", Box::new(|e| e.db_id = None)),
            ("input", Box::new(|e| e.input.push('x'))),
            ("evidence", Box::new(|e| e.evidence = Some(String::new()))),
            ("sql", Box::new(|e| e.sql = None)),
            ("output", Box::new(|e| e.output.push(call()))),
            (
                "initialization_step",
                Box::new(|e| e.initialization_step = Some(call())),
            ),
            (
                "additional_setup_steps",
                Box::new(|e| e.additional_setup_steps.push(call())),
            ),
            ("gold_answer", Box::new(|e| e.gold_answer = Some(Answer::default()))),
            ("ordered", Box::new(|e| e.ordered = true)),
            ("tools", Box::new(|e| e.tools = Toolkit::from(vec![spec("b")]))),
            (
                "key_values_and_descriptions",
                Box::new(|e| {
                    e.key_values_and_descriptions.push(KeyDescription {
                        key_name: "k".into(),
                        description: String::new(),
                        dtype: "string".into(),
                    })
                }),
            ),
            ("difficulty", Box::new(|e| e.difficulty = Some("easy".into()))),
            ("meta", Box::new(|e| e.meta = Some(serde_json::json!({})))),
        ];
        for (field, change) in changes {
            let mut e = base.clone();
            change(&mut e);
            assert_ne!(digest(&e), d0, "changing `{field}` must change the digest");
        }
    }
}
