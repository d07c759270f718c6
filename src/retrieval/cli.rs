//! The `toolforge index` and `toolforge retrieval` commands (their clap arguments; `main.rs`
//! resolves dataset names to directories and calls `run`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Result, bail};
use serde_json::json;

use super::ToolIndex;
use super::beir::Retrieval;
use crate::tools::ToolSpec;

/// `toolforge index DATASET…`: builds the BM25 index over the catalogs (`tools/functions.json`)
/// of built datasets and prints one JSON object: `tools`, `build_ms`, and the `results` of
/// `--query` or the `latency` of `--queries`.
#[derive(clap::Args, Debug)]
pub struct IndexArgs {
    /// Built dataset directories or recipe names (e.g. `out/rest-spider`, `bfcl`).
    #[arg(required = true)]
    pub datasets: Vec<String>,
    /// Print the top `k` tools for this query (name, score, description, parameters).
    #[arg(long)]
    pub query: Option<String>,
    /// Tools per query.
    #[arg(long, short, default_value_t = 5)]
    pub k: usize,
    /// A BEIR `queries.jsonl` (or a retrieval dataset directory): every query is searched 5
    /// times, its fastest run kept, and the latency percentiles printed (`p50_us`, `p99_us`).
    #[arg(long)]
    pub queries: Option<PathBuf>,
    /// Grow the catalog to this many tools for benchmarking: copies of the tools, each copy's
    /// names suffixed `__copy<i>` (the text stays real).
    #[arg(long)]
    pub scale_to: Option<usize>,
}

/// The catalogs of `dirs` as one tool list: a name found in several datasets is qualified
/// `<dataset dir name>__<name>`.
pub fn merged_catalog(dirs: &[PathBuf]) -> Result<Vec<ToolSpec>> {
    let mut lists = Vec::new();
    for d in dirs {
        let name = d
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        lists.push((name, super::catalog(d)?));
    }
    let mut count: BTreeMap<String, usize> = BTreeMap::new();
    for t in lists.iter().flat_map(|(_, l)| l) {
        *count.entry(t.name.clone()).or_default() += 1;
    }
    Ok(lists
        .into_iter()
        .flat_map(|(ds, l)| {
            let count = &count;
            l.into_iter().map(move |mut t| {
                if count[&t.name] > 1 {
                    t.name = crate::tools::names::qualified_name(&ds, &t.name);
                }
                t
            })
        })
        .collect())
}

/// Times each `--queries` query is run; its fastest run is its latency.
const REPEATS: usize = 5;

/// The `p`-th percentile (nearest rank) of sorted `v`.
fn percentile(v: &[u128], p: f64) -> u128 {
    if v.is_empty() {
        return 0;
    }
    let rank = ((p / 100.0) * v.len() as f64).ceil().max(1.0) as usize;
    v[rank.min(v.len()) - 1]
}

impl IndexArgs {
    /// Runs the command over the resolved dataset directories; returns the JSON it prints.
    pub fn run(self, dirs: &[PathBuf]) -> Result<serde_json::Value> {
        let mut tools = merged_catalog(dirs)?;
        if tools.is_empty() {
            bail!("no tools in the catalogs given");
        }
        if let Some(n) = self.scale_to {
            let base = tools.clone();
            let mut copy = 1;
            while tools.len() < n {
                for t in base.iter().take(n - tools.len()) {
                    let mut t = t.clone();
                    t.name = format!("{}__copy{copy}", t.name);
                    tools.push(t);
                }
                copy += 1;
            }
        }
        let start = Instant::now();
        let index = ToolIndex::build(tools);
        let build_ms = start.elapsed().as_secs_f64() * 1e3;
        let mut out = json!({"tools": index.tools().len(), "build_ms": (build_ms * 10.0).round() / 10.0});
        if let Some(q) = &self.query {
            out["results"] = hits_json(&index, q, self.k);
        }
        if let Some(p) = &self.queries {
            let file = if p.is_dir() { p.join("queries.jsonl") } else { p.clone() };
            let queries = read_queries(&file)?;
            // Each query's fastest of REPEATS runs: the index's own time, without the waits of a
            // process preempted on a shared machine.
            let mut micros: Vec<u128> = queries
                .iter()
                .map(|q| {
                    (0..REPEATS)
                        .map(|_| {
                            let t = Instant::now();
                            std::hint::black_box(index.search(q, self.k));
                            t.elapsed().as_micros()
                        })
                        .min()
                        .unwrap_or_default()
                })
                .collect();
            micros.sort_unstable();
            out["latency"] = json!({"queries": micros.len(), "k": self.k, "repeats": REPEATS,
                "p50_us": percentile(&micros, 50.0), "p99_us": percentile(&micros, 99.0)});
        }
        Ok(out)
    }
}

/// The `text` of every line of a BEIR `queries.jsonl`.
fn read_queries(file: &Path) -> Result<Vec<String>> {
    let text = std::fs::read_to_string(file).map_err(|e| anyhow::anyhow!("reading {}: {e}", file.display()))?;
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .enumerate()
        .map(|(i, l)| {
            let v: serde_json::Value =
                serde_json::from_str(l).map_err(|e| anyhow::anyhow!("{}:{}: {e}", file.display(), i + 1))?;
            Ok(v["text"].as_str().unwrap_or_default().to_string())
        })
        .collect()
}

/// The top `k` tools of `index` for `query` as JSON: `[{"name", "score", "description",
/// "parameters"}]`, best first — what `search_tools` answers.
pub fn hits_json(index: &ToolIndex, query: &str, k: usize) -> serde_json::Value {
    index
        .search(query, k)
        .into_iter()
        .map(|h| {
            let t = &index.tools()[h.index];
            json!({"name": t.name, "score": h.score, "description": t.description, "parameters": t.parameters})
        })
        .collect()
}

/// `toolforge retrieval DATASET`: writes the dataset's retrieval dataset in the BEIR layout
/// ([`super::beir`]) to `<out>/<dataset>[-<split>]-retrieval/`.
#[derive(clap::Args, Debug)]
pub struct RetrievalArgs {
    /// A built dataset directory or recipe name (e.g. `rest-spider`).
    pub dataset: String,
    /// Only the rows of this split (e.g. `multiple` for BFCL); the corpus is then the tools
    /// offered to those rows.
    #[arg(long)]
    pub split: Option<String>,
    /// Output root (default: the dataset directory's parent, i.e. `out/`).
    #[arg(long)]
    pub out: Option<PathBuf>,
}

impl RetrievalArgs {
    /// Writes the retrieval dataset of the resolved dataset directory; returns its stats.
    pub fn run(self, dir: &Path) -> Result<serde_json::Value> {
        let data = Retrieval::from_dataset(dir, self.split.as_deref())?;
        let root = self
            .out
            .clone()
            .unwrap_or_else(|| dir.parent().map(Path::to_path_buf).unwrap_or_default());
        let target = root.join(&data.name);
        data.write(&target)?;
        let merged = data.representatives().iter().filter(|(id, rep)| id != rep).count();
        let mut per_split: BTreeMap<&str, usize> = BTreeMap::new();
        for split in data.split_of.values() {
            *per_split.entry(split).or_default() += 1;
        }
        Ok(
            json!({"written": target, "queries": data.queries.len(), "queries_per_split": per_split,
            "corpus": data.corpus.len() - merged, "identical_documents_merged": merged,
            "attempted": data.attempted(), "dropped": data.dropped}),
        )
    }
}
