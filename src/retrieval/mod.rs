//! Tool retrieval (issue 32): a BM25 index over any built catalog ([`index`]), the retrieval
//! datasets in the BEIR layout derived from verified rows ([`beir`]), the retrieval metrics
//! ([`metrics`]) and the `toolforge index` / `toolforge retrieval` commands ([`cli`]). `serve`
//! answers `search_tools` from [`index::ToolIndex`]; `eval retrieval` scores runs with
//! [`metrics`].

pub mod beir;
pub mod cli;
pub mod metrics;

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};

/// The BM25 tool index: it lives in `tools` (below `variants`, whose distractors rank by it, and
/// below `retrieval`, which reads built datasets through `emit`), re-exported here.
pub use crate::tools::index;
pub use index::{Hit, ToolIndex};

use crate::tools::ToolSpec;

/// The tool catalog of a built dataset (`tools/functions.json`, OpenAI function format), in file
/// order; of a retrieval dataset in the BEIR layout (`toolforge retrieval`), its corpus in id
/// order, each tool named by its corpus id (unique, unlike the tool names of several databases).
pub fn catalog(dir: &Path) -> Result<Vec<ToolSpec>> {
    if !dir.join("tools/functions.json").is_file() && dir.join("corpus.jsonl").is_file() {
        return Ok(beir::Retrieval::read_corpus(dir)?
            .into_iter()
            .map(|(id, mut t)| {
                t.name = id;
                t
            })
            .collect());
    }
    let p = dir.join("tools/functions.json");
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&p).with_context(|| format!("reading {}", p.display()))?)
            .with_context(|| format!("parsing {}", p.display()))?;
    Ok(v.as_array()
        .map(|a| {
            a.iter()
                .map(|f| ToolSpec {
                    name: f["function"]["name"].as_str().unwrap_or_default().into(),
                    description: f["function"]["description"].as_str().unwrap_or_default().into(),
                    parameters: f["function"]["parameters"].clone(),
                    output_parameters: serde_json::json!({}),
                })
                .collect()
        })
        .unwrap_or_default())
}

/// The BM25 run of a retrieval dataset: for every query, the ids of the `depth` best tools of
/// its corpus, best first (corpus ids in [`beir::Retrieval::corpus`] order index the tools).
pub fn bm25_run(data: &beir::Retrieval, depth: usize) -> BTreeMap<String, Vec<String>> {
    let ids: Vec<&String> = data.corpus.keys().collect();
    let index = ToolIndex::build(data.corpus.values().cloned().collect());
    data.queries
        .iter()
        .map(|(q, text)| {
            let ranked = index
                .search(text, depth)
                .into_iter()
                .map(|h| ids[h.index].clone())
                .collect();
            (q.clone(), ranked)
        })
        .collect()
}

/// A TREC run file (`query-id Q0 doc-id rank score tag`, whitespace-separated): the ranking of
/// every query in it, ordered as trec_eval orders it — by score descending, ties by document id
/// descending; the rank column is read (it must be an integer) but ignored, as trec_eval ignores
/// it. Errors name the line.
pub fn read_trec_run(path: &Path) -> Result<BTreeMap<String, Vec<String>>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let mut by_query: BTreeMap<String, Vec<(f64, String)>> = BTreeMap::new();
    for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let cols: Vec<&str> = line.split_whitespace().collect();
        let [q, _, d, rank, score, ..] = cols[..] else {
            anyhow::bail!(
                "{}:{}: expected `query-id Q0 doc-id rank score tag`",
                path.display(),
                i + 1
            );
        };
        let _: i64 = rank
            .parse()
            .with_context(|| format!("{}:{}: rank", path.display(), i + 1))?;
        let score: f64 = score
            .parse()
            .with_context(|| format!("{}:{}: score", path.display(), i + 1))?;
        by_query.entry(q.to_string()).or_default().push((score, d.to_string()));
    }
    Ok(by_query
        .into_iter()
        .map(|(q, mut v)| {
            v.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| b.1.cmp(&a.1)));
            (q, v.into_iter().map(|(_, d)| d).collect())
        })
        .collect())
}
