//! The build driver: recipe → source → compile (one family: [`crate::sql::compile`] for `slot`/`sel`/`rest`,
//! [`crate::seq`], [`crate::catalog`]) → variants → [`Build`] → emitters ([`crate::emit`]).
//! Dispatch only: the row and build types live in [`crate::dataset`], below every family; the
//! files are written by [`crate::emit::write`]. [`build_and_emit`] is the `toolforge build` entry
//! point.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Result;

use crate::dataset::{Build, BuildError};
use crate::recipe::{Recipe, ResolvedSource};
use crate::store::{Scope, Store};

pub use crate::recipe::project_root;

/// Reads a recipe and locates its source corpus (`<root>/sources/<source>.toml`); see
/// [`crate::recipe::load_with_source`].
pub fn load_recipe(recipe_path: &Path) -> Result<(Recipe, ResolvedSource), BuildError> {
    Ok(crate::recipe::load_with_source(recipe_path)?)
}

/// Opens the store of a build: `location` (`--store`), else `$TOOLFORGE_STORE`, else the
/// recipe's `store` key (relative to the project root), else `<project>/out/.store`. A location
/// `s3://bucket/prefix` is an object store ([`crate::store::s3`]), anything else a directory.
pub fn open_store(recipe_path: &Path, location: Option<&str>) -> Result<Store, BuildError> {
    let env = std::env::var("TOOLFORGE_STORE").ok().filter(|s| !s.is_empty());
    let chosen = match location.map(str::to_string).or(env) {
        Some(l) => l,
        None => {
            let (recipe, _) = load_recipe(recipe_path)?;
            let root = project_root(recipe_path);
            match recipe.store {
                Some(s) if crate::store::s3::is_url(&s.to_string_lossy()) => s.to_string_lossy().into_owned(),
                Some(s) => root.join(s).to_string_lossy().into_owned(),
                None => root.join("out/.store").to_string_lossy().into_owned(),
            }
        }
    };
    Ok(Store::open_url(&chosen)?)
}

/// Runs the compile stages of a recipe (from the store where possible), then the variants stage
/// when the recipe has a `[variants]` section.
pub fn compile(recipe_path: &Path, store_override: Option<&Path>, progress: bool) -> Result<Build, BuildError> {
    let location = store_override.map(|p| p.to_string_lossy().into_owned());
    let store = open_store(recipe_path, location.as_deref())?;
    compile_with(recipe_path, &store, progress)
}

/// The family's compile stage alone (per database for text-to-SQL, one conversion for seq and
/// catalog recipes): the unit a shard computes.
fn compile_family(recipe: Recipe, source: ResolvedSource, store: &Store, progress: bool) -> Result<Build, BuildError> {
    let sql_source = crate::recipe::is_sql_source(&source.manifest.format);
    match (recipe.format.as_str(), sql_source) {
        ("slot" | "sel" | "rest", true) => crate::sql::compile::compile(recipe, source, store, progress),
        ("seq", false) => crate::seq::compile(recipe, source, store),
        ("catalog" | "bfcl", false) => crate::catalog::compile(recipe, source, store),
        _ => Err(BuildError::Mismatch {
            recipe: recipe.name.clone(),
            format: recipe.format.clone(),
            source_name: source.manifest.name.clone(),
            source_format: source.manifest.format.clone(),
        }),
    }
}

/// [`compile`] with an open store (whose [`crate::store::Scope`] decides which items may be
/// computed).
pub fn compile_with(recipe_path: &Path, store: &Store, progress: bool) -> Result<Build, BuildError> {
    compile_stages(recipe_path, store, progress, false)
}

/// [`compile_with`]; with `rows_unread` (a merge writing no page) the variants stage of an
/// executable family without an LLM stage (paraphrases) counts the stored variant rows instead
/// of reading them ([`Build::variant_rows_counted`]): the merge's rows and trajectory files are
/// the shards' stored segments, and reading every variant row was about half of its CPU on
/// slot-spider-variants (issue 34).
fn compile_stages(recipe_path: &Path, store: &Store, progress: bool, rows_unread: bool) -> Result<Build, BuildError> {
    let (recipe, source) = load_recipe(recipe_path)?;
    let mut build = compile_family(recipe, source, store, progress)?;
    // No LLM stage adds rows after the variants (no endpoint for paraphrases: they are skipped).
    let variants_alone = build.recipe.variants.is_some() && !llm_stage_configured(&build.recipe, &build.source);
    if rows_unread && variants_alone && crate::emit::has_segments(&build.recipe.format) {
        build.variant_rows_counted = Some(Default::default());
    }
    // A merge missing compile items fails naming them; the later stages would only add noise
    // (requests for a partial build).
    if store.complete() {
        later_stages(&mut build, store);
    }
    Ok(build)
}

/// Names the corrupt store entries met so far (every stage: compile, variants, trajectories) in
/// `build.stats` under [`crate::store::REPAIRED_STAT`]: printed in the summary, kept out of the
/// files (a rebuild must give the same bytes). Called again after the files are written, so
/// the trajectory entries repaired while writing are counted too (issue 31 item 5).
fn note_repaired(build: &mut Build, store: &Store) {
    let dirty = store.dirty();
    if !dirty.is_empty() {
        let list: Vec<String> = dirty.iter().map(ToString::to_string).collect();
        build.stats.insert(
            crate::store::REPAIRED_STAT.into(),
            format!("{} corrupt entries recomputed: {}", dirty.len(), list.join("; ")).into(),
        );
    }
}

/// The stages after the family's compile, on the whole compiled build: MCP task synthesis, seq
/// requests and paraphrases (LLM stages: each request an item of the store), the variants (each
/// group's an item, [`crate::variants::apply_with`]). Returns how many LLM requests the store's
/// scope left to other shards (their answers are not in this build yet).
fn later_stages(build: &mut Build, store: &Store) -> u64 {
    note_repaired(build, store);
    // Round two's units (a database's question batches, [`Build::item_runs`], else the group)
    // placed on their later stages' cost (examples × toolkit size), computed from the compiled
    // build every round-two shard and the merge hold alike.
    if store.shard_count().is_some() && !crate::emit::segments_per_item(&build.recipe) {
        let mut costs = Vec::new();
        for (g, o) in &build.groups {
            // Counted by name: a toolkit read from the store is not parsed for this.
            let cost = |examples: &[crate::dataset::Example]| {
                crate::store::plan::later_cost(examples.iter().map(|e| e.tools.names().count()))
            };
            match build.item_runs(g) {
                Some(runs) => costs.extend(runs.into_iter().map(|(i, r)| (i.name.clone(), cost(&o.examples[r])))),
                None => costs.push((g.clone(), cost(&o.examples))),
            }
        }
        store.assign_groups(costs);
    }
    let mut llm_left = 0;
    // ToolGym task synthesis for MCP bundles (an LLM endpoint, else skipped with one line).
    if build.recipe.format == "catalog" {
        let llm = build.recipe.catalog.as_ref().and_then(|k| k.llm.clone());
        let before = store.skipped();
        crate::catalog::synthesis::apply(build, llm.as_ref(), store);
        llm_left += store.skipped() - before;
    }
    // SeqSGD / SeqMultiWOZ requests written by an LLM (an endpoint, else the template stays).
    if build.recipe.format == "seq" && matches!(build.source.manifest.format.as_str(), "sgd" | "multiwoz") {
        let llm = build.recipe.seq.as_ref().and_then(|k| k.llm.clone());
        let before = store.skipped();
        crate::seq::request::apply(build, llm.as_ref(), store);
        llm_left += store.skipped() - before;
    }
    // The variants stage: after compile, on the verified examples.
    if let Some(cfg) = build.recipe.variants.clone() {
        crate::variants::apply_with(build, &cfg, Some(store));
        if let Some(p) = &cfg.paraphrase {
            let before = store.skipped();
            crate::variants::paraphrase::apply(build, p, cfg.llm.as_ref(), store);
            llm_left += store.skipped() - before;
        }
    }
    llm_left
}

/// Whether one of the recipe's LLM stages has a usable endpoint (recipe or environment), so a
/// shard build has LLM requests to share out once every compile item is in the store.
fn llm_stage_configured(recipe: &Recipe, source: &ResolvedSource) -> bool {
    let mut configs = Vec::new();
    if let Some(v) = recipe.variants.as_ref().filter(|v| v.paraphrase.is_some()) {
        configs.push(v.llm.clone().unwrap_or_default());
    }
    if recipe.format == "catalog" {
        configs.push(recipe.catalog.as_ref().and_then(|c| c.llm.clone()).unwrap_or_default());
    }
    if recipe.format == "seq" && crate::seq::writes_requests(recipe, source) {
        return true;
    }
    configs.iter().any(|c| crate::llm::resolve(c).is_ok())
}

/// The build key when it can be known without running the stages (seq and text-to-SQL recipes:
/// from the input hashes), so an up-to-date output is recognised cheaply; `None` for the other
/// families, for builds whose key also depends on LLM answers, and when `out_root` holds no
/// built output of the recipe (a cold or `out/`-only build would compute the key twice).
pub fn quick_build_key(recipe_path: &Path, out_root: &Path) -> Result<Option<(Recipe, String)>, BuildError> {
    let (recipe, source) = load_recipe(recipe_path)?;
    if !out_root.join(&recipe.name).join("MANIFEST.json").is_file() {
        return Ok(None);
    }
    if ["slot", "sel", "rest"].contains(&recipe.format.as_str()) {
        // A text-to-SQL recipe over another source fails in the build with its own error.
        if !crate::recipe::is_sql_source(&source.manifest.format) {
            return Ok(None);
        }
        // The paraphrase stage folds its LLM answers into the key; with no endpoint configured
        // it is skipped (one line in the summary) and adds nothing, so the key is known here.
        if llm_stage_configured(&recipe, &source) {
            return Ok(None);
        }
        let key = crate::sql::compile::quick_build_key(&recipe, &source)?;
        return Ok(Some((recipe, key)));
    }
    if recipe.format != "seq"
        || crate::recipe::is_sql_source(&source.manifest.format)
        || crate::seq::writes_requests(&recipe, &source)
    {
        return Ok(None);
    }
    let key = crate::seq::quick_build_key(&recipe, &source)?;
    Ok(Some((recipe, key)))
}

/// Builds a recipe and writes `out/<name>/` (default output root `<project>/out`); returns the
/// human summary ([`crate::emit::report::summary`]). An output that is already up to date is
/// recognised from its manifest and left untouched.
pub fn build_and_emit(
    recipe_path: &Path,
    out_root: Option<&Path>,
    store: Option<&Path>,
    progress: bool,
) -> Result<String> {
    let opts = BuildOptions {
        out_root: out_root.map(Path::to_path_buf),
        store: store.map(|p| p.to_string_lossy().into_owned()),
        progress,
        ..Default::default()
    };
    build(recipe_path, &opts)
}

/// The `toolforge build` flags beyond the recipe.
#[derive(Debug, Clone, Default)]
pub struct BuildOptions {
    /// Output root (default `<project>/out`).
    pub out_root: Option<PathBuf>,
    /// Store location, a directory or `s3://bucket/prefix` (default: see [`open_store`]).
    pub store: Option<String>,
    /// Show a progress bar.
    pub progress: bool,
    /// `--shard I/N`: compute only shard `I`'s stage items into the store; emit nothing.
    pub shard: Option<(u64, u64)>,
    /// `--merge`: compute nothing, emit from the store; fail naming the missing items. The value
    /// is the shard count when known (to name each missing item's shard), else 0.
    pub merge: Option<u64>,
    /// `--plan [--shards N]`: hash the inputs once, store the plan, print the assignment over N
    /// shards ([`plan`]); computes no stage.
    pub plan: Option<u64>,
    /// `--no-html`: write no page (`report/index.html`, [`crate::emit::html`]).
    pub no_html: bool,
}

/// Parses `I/N` (`--shard`): `0 <= I < N`. Errors: a message naming the bad part.
pub fn parse_shard(text: &str) -> Result<(u64, u64), String> {
    let (i, n) = text
        .split_once('/')
        .ok_or_else(|| format!("--shard {text:?}: expected I/N, e.g. 0/4"))?;
    let i: u64 = i
        .trim()
        .parse()
        .map_err(|_| format!("--shard {text:?}: I is not a number"))?;
    let n: u64 = n
        .trim()
        .parse()
        .map_err(|_| format!("--shard {text:?}: N is not a number"))?;
    if n == 0 || i >= n {
        return Err(format!("--shard {text:?}: need 0 <= I < N"));
    }
    Ok((i, n))
}

/// Builds a recipe as `opts` say: a whole build (compute what the store lacks, then emit), one
/// shard ([`BuildOptions::shard`]: compute, no emit), or a merge ([`BuildOptions::merge`]: emit
/// from the store only). Returns the human summary.
///
/// Errors: recipe, corpus and store errors; a shard whose store writes failed; a merge with
/// items missing from the store (each named with its stage and item, e.g. the database).
pub fn build(recipe_path: &Path, opts: &BuildOptions) -> Result<String> {
    use std::sync::atomic::Ordering::Relaxed;
    let start = Instant::now();
    // A training mix reads built datasets' files: no stage, store or shard of its own.
    if crate::recipe::mix::is_mix(recipe_path) {
        anyhow::ensure!(
            opts.shard.is_none() && opts.merge.is_none() && opts.plan.is_none(),
            "{}: a training mix (format \"mix\") is built whole: --shard, --merge and --plan do not apply",
            recipe_path.display()
        );
        return crate::mix::build(recipe_path, opts.out_root.as_deref());
    }
    if let Some(shards) = opts.plan {
        return plan(recipe_path, opts.store.as_deref(), shards);
    }
    if let Some((index, count)) = opts.shard {
        let (recipe, source) = load_recipe(recipe_path)?;
        let name = recipe.name.clone();
        // Segments per compile item are computed with the items, in this round; per group (REST,
        // variants) and LLM answers need every shard's compile items (round two).
        let per_item = crate::emit::segments_per_item(&recipe);
        let later = llm_stage_configured(&recipe, &source) || (crate::emit::has_segments(&recipe.format) && !per_item);
        // Round one reads and hashes only this shard's own items.
        let own = open_store(recipe_path, opts.store.as_deref())?.with_scope(Scope::Shard { index, count });
        let (waiting, store) = match compile_family(recipe.clone(), source.clone(), &own, opts.progress) {
            // Every item is this shard's (N = 1, or a one-item recipe it owns): the build is whole.
            Ok(mut build) if own.complete() => {
                let waiting = shard_later_stages(&mut build, &own)?;
                release(build);
                (waiting, own)
            }
            // The segments of this shard's own compile items, from the items it holds (one round;
            // a call's shown results are still in memory for the items computed now).
            Ok(build) if per_item => {
                crate::emit::store_segments(&build, &own)?;
                release(build);
                (false, own)
            }
            // Every own item was already stored (round two): the later stages need the whole
            // compiled build, so the shard reads every item (another shard's database hashes
            // come from the plan, or are made once and stored as the plan) and computes its
            // share of the later items.
            Ok(_) | Err(BuildError::Unclaimed { .. }) if later && own.requests().writes.load(Relaxed) == 0 => {
                if let Some(failure) = own.failure() {
                    anyhow::bail!(
                        "shard {index}/{count} of {name}: {failure} (re-run this shard once the store works)"
                    );
                }
                let whole = open_store(recipe_path, opts.store.as_deref())?
                    .with_scope(Scope::Shard { index, count })
                    .with_others_read(true);
                let waiting = match compile_family(recipe, source, &whole, opts.progress) {
                    Ok(mut build) if whole.complete() => {
                        let waiting = shard_later_stages(&mut build, &whole)?;
                        release(build);
                        waiting
                    }
                    Ok(_) | Err(BuildError::Unclaimed { .. }) => true,
                    Err(e) => return Err(e.into()),
                };
                (waiting, whole)
            }
            // Own items computed now: the later stages wait for every shard's (round two).
            Ok(_) | Err(BuildError::Unclaimed { .. }) => (later, own),
            Err(e) => return Err(e.into()),
        };
        let summary = shard_summary(&store, &name, (index, count), start.elapsed().as_secs_f64())?;
        return Ok(if waiting {
            format!("{summary}\n{ROUND_TWO}")
        } else {
            summary
        });
    }
    let root = project_root(recipe_path);
    let out_root = opts.out_root.clone().unwrap_or_else(|| root.join("out"));
    // Not for a merge: it must still name the stage items missing from the store.
    let quick = match opts.merge {
        None => quick_build_key(recipe_path, &out_root)?,
        Some(_) => None,
    };
    if let Some((recipe, key)) = quick {
        let out_dir = out_root.join(&recipe.name);
        if crate::emit::up_to_date(&out_dir, &key, !opts.no_html) {
            return crate::emit::report::up_to_date_summary(&out_dir, &recipe.name, start.elapsed().as_secs_f64());
        }
    }
    let mut store = open_store(recipe_path, opts.store.as_deref())?;
    if let Some(shards) = opts.merge {
        store = store.with_scope(Scope::StoredOnly).with_merge_shards(shards);
    }
    let compiled = compile_stages(recipe_path, &store, opts.progress, opts.merge.is_some() && opts.no_html);
    if opts.merge.is_some() {
        // A store that failed is not "items missing": re-running shards would not help.
        if let Some(failure) = store.failure() {
            anyhow::bail!("merge: {failure}");
        }
    }
    if let Some(shards) = opts.merge {
        if let Some(e) = merge_missing(&store, shards) {
            return Err(e);
        }
    }
    let mut build = compiled?;
    let out_dir = out_root.join(&build.recipe.name);
    let wrote = match crate::emit::write_with(&build, &out_dir, recipe_path, Some(&store), !opts.no_html) {
        // A merge lacking a later-stage item (a group's trajectory segment) names it like a
        // compile item.
        Err(e) if opts.merge.is_some() => {
            if let Some(failure) = store.failure() {
                anyhow::bail!("merge: {failure}");
            }
            return Err(merge_missing(&store, opts.merge.unwrap_or(0)).unwrap_or(e));
        }
        r => r?,
    };
    note_repaired(&mut build, &store);
    let mut text = crate::emit::report::summary(&build, &out_dir, wrote, start.elapsed().as_secs_f64());
    // A store that could not be written (disk full, network) does not fail the build, whose
    // results are in memory; the summary says how many requests failed (issue 31 D6).
    if let Some(failure) = store.failure() {
        let warning = format!(
            "warning: store_failed: {failure} (the build computed what it could not read and used its results from memory; they are not cached)"
        );
        eprintln!("{warning}");
        text = format!("{}\n{warning}", text.trim_end());
    }
    if std::env::var_os("TOOLFORGE_STORE_STATS").is_some() {
        eprintln!("{}", requests_line(&store));
    }
    release(build);
    Ok(text)
}

/// Frees `build` off the caller's path: a large build's many small allocations take seconds to
/// free, and the process usually exits first.
fn release(build: Build) {
    std::thread::spawn(move || drop(build));
}

/// The error of a merge whose store lacks items (`store.missing`: compile, LLM and later-stage
/// items alike), naming each with its stage, item, digest and, with `shards` > 0, its shard;
/// `None` when nothing is missing.
fn merge_missing(store: &Store, shards: u64) -> Option<anyhow::Error> {
    let missing = store.missing(shards);
    if missing.is_empty() {
        return None;
    }
    let list: Vec<String> = missing
        .iter()
        .map(|m| {
            let shard = if shards > 0 {
                format!(" (shard {}/{shards})", m.shard)
            } else {
                String::new()
            };
            format!("{} {} {}…{shard}", m.stage, m.item, &m.digest[..12])
        })
        .collect();
    let dirty = store.dirty();
    let removed = if dirty.is_empty() {
        String::new()
    } else {
        let names: Vec<String> = dirty.iter().map(ToString::to_string).collect();
        format!(
            "; {} untrusted entries were removed (their shards write them again): {}",
            dirty.len(),
            names.join("; ")
        )
    };
    Some(anyhow::anyhow!(
        "merge: {} stage items are not in the store {} (re-run their shards, or build without --merge to compute them here): {}{removed}",
        missing.len(),
        store.describe(),
        list.join("; ")
    ))
}

/// A shard's later stages once every compile item is in the store (round two, or a shard that
/// found them all): the whole build's later stages ([`later_stages`]: LLM requests — each shard
/// sends its share —, the variants of the groups this shard claims), then the items the merge
/// only reads: the trajectory segments this shard claims ([`crate::emit::store_segments`]; per
/// group, or per compile item, [`crate::emit::segments_per_item`]). Per-group segments are
/// keyed by the build key, which the LLM answers fold into: while other shards' answers are
/// missing they wait for another round.
/// Returns whether this shard must run again. Errors: a trajectory that does not execute.
fn shard_later_stages(build: &mut Build, store: &Store) -> Result<bool> {
    if later_stages(build, store) > 0 {
        return Ok(crate::emit::has_segments(&build.recipe.format));
    }
    // Only this shard's groups: `store_segments` claims a group before reading its segment.
    crate::emit::store_segments(build, store)?;
    Ok(false)
}

/// `store <location>: R reads (H hits), W writes; B database bytes hashed`.
fn requests_line(store: &Store) -> String {
    use std::sync::atomic::Ordering::Relaxed;
    let r = store.requests();
    format!(
        "store {}: {} reads ({} hits), {} writes; {} database bytes hashed",
        store.describe(),
        r.reads.load(Relaxed),
        r.hits.load(Relaxed),
        r.writes.load(Relaxed),
        store.hashed()
    )
}

/// `toolforge build RECIPE --plan [--shards N]`: a text-to-SQL recipe's plan entry written and
/// its items' assignment over `shards` shards ([`crate::sql::compile::plan`]); a seq, catalog or
/// BFCL recipe is one item and has nothing to plan. Errors: recipe, corpus and store errors.
fn plan(recipe_path: &Path, store: Option<&str>, shards: u64) -> Result<String> {
    let (recipe, source) = load_recipe(recipe_path)?;
    if !(["slot", "sel", "rest"].contains(&recipe.format.as_str())
        && crate::recipe::is_sql_source(&source.manifest.format))
    {
        return Ok(format!(
            "plan of {}: one item (the whole conversion), nothing to plan",
            recipe.name
        ));
    }
    let store = open_store(recipe_path, store)?;
    Ok(crate::sql::compile::plan(&recipe, &source, &store, shards)?)
}

/// The line a shard prints when its later stages (LLM requests; the trajectory segments of
/// text-to-SQL recipes, [`shard_later_stages`]) wait for the other shards' compile items (the
/// Ray driver looks for `round two needed` and runs a second round of the shards).
pub const ROUND_TWO: &str = "round two needed: the later stages (LLM requests, trajectories) need every shard's compile items; run the shards again once all have finished";

/// The summary of one shard; an error when any store request failed (the shard must be re-run).
fn shard_summary(store: &Store, name: &str, (index, count): (u64, u64), secs: f64) -> Result<String> {
    use std::sync::atomic::Ordering::Relaxed;
    if let Some(failure) = store.failure() {
        anyhow::bail!("shard {index}/{count} of {name}: {failure} (re-run this shard once the store works)");
    }
    let r = store.requests();
    Ok(format!(
        "shard {index}/{count} of {name}: {} items computed, {} already in the store, {} left to other shards; {}; {secs:.1}s",
        r.writes.load(Relaxed),
        r.hits.load(Relaxed),
        store.skipped(),
        requests_line(store)
    ))
}
