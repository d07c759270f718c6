//! `toolforge eval retrieval DIR…`: Recall@1/5/10, nDCG@10 and MRR ([`crate::retrieval::metrics`])
//! of a ranking on retrieval datasets in the BEIR layout (`toolforge retrieval`). The ranking is
//! the BM25 index's ([`crate::retrieval::bm25_run`]) unless `--run` gives a TREC run file.
//! Writes `<out>/<name>/report.json` (one entry per dataset) and `report.md` (the table).

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use serde_json::json;

use crate::retrieval::beir::Retrieval;
use crate::retrieval::metrics::{Summary, summarise};

/// The arguments of `eval retrieval`.
#[derive(clap::Args, Debug)]
pub struct RetrievalArgs {
    /// Retrieval dataset directories (BEIR layout, e.g. `out/rest-spider-retrieval`).
    #[arg(required = true)]
    pub datasets: Vec<PathBuf>,
    /// A TREC run file (`query-id Q0 doc-id rank score tag`) to score instead of BM25 (one
    /// dataset only).
    #[arg(long)]
    pub run: Option<PathBuf>,
    /// Tools ranked per query by BM25; at least 10, the deepest cutoff reported (Recall@10,
    /// nDCG@10).
    #[arg(long, default_value_t = 100)]
    pub depth: usize,
    /// The split whose judgements are scored (`qrels/<split>.tsv`; default `test`, else the only
    /// split of the dataset).
    #[arg(long)]
    pub split: Option<String>,
    /// Output root; the report goes to `<out>/<name>/`.
    #[arg(long, default_value = "eval")]
    pub out: PathBuf,
    /// Report name (default `retrieval-bm25`, or `retrieval-<run file stem>`).
    #[arg(long)]
    pub name: Option<String>,
}

/// The deepest cutoff the report gives (Recall@10, nDCG@10): a shallower ranking would report
/// them over fewer documents than they name.
pub const DEEPEST_CUTOFF: usize = 10;

/// One dataset's scores. Errors: the dataset does not read ([`Retrieval::read`]); the run is
/// empty, or ranks no query of the dataset (a run for another dataset), or names no document
/// of its corpus.
fn score(dir: &PathBuf, run: Option<&PathBuf>, depth: usize, split: Option<&str>) -> Result<(String, Summary)> {
    let data = Retrieval::read(dir, split).with_context(|| format!("{}: not a retrieval dataset", dir.display()))?;
    let ranking = match run {
        Some(f) => {
            let ranking = crate::retrieval::read_trec_run(f)?;
            if ranking.is_empty() {
                bail!("{}: the run is empty", f.display());
            }
            let matched = data.qrels.keys().filter(|q| ranking.contains_key(*q)).count();
            if matched == 0 {
                bail!(
                    "{}: ranks none of the {} judged queries of {} (a run for another dataset or split?)",
                    f.display(),
                    data.qrels.len(),
                    dir.display()
                );
            }
            if !ranking.values().flatten().any(|d| data.corpus.contains_key(d)) {
                bail!("{}: names no document of {}'s corpus", f.display(), dir.display());
            }
            ranking
        }
        None => crate::retrieval::bm25_run(&data, depth),
    };
    Ok((data.name, summarise(&data.qrels, &ranking)))
}

impl RetrievalArgs {
    /// Scores every dataset, writes the report, returns `report.json`'s content.
    pub fn run(self) -> Result<serde_json::Value> {
        if self.run.is_some() && self.datasets.len() > 1 {
            bail!("--run scores one dataset; give one directory");
        }
        if self.depth < DEEPEST_CUTOFF {
            bail!(
                "--depth {} is shallower than the cutoffs reported (Recall@10, nDCG@10): give --depth {DEEPEST_CUTOFF} or more",
                self.depth
            );
        }
        let method = match &self.run {
            Some(f) => f
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default(),
            None => "bm25".to_string(),
        };
        let mut rows = Vec::new();
        let mut md = String::from(
            "| dataset | queries | Recall@1 | Recall@5 | Recall@10 | nDCG@10 | MRR |\n|---|---:|---:|---:|---:|---:|---:|\n",
        );
        for d in &self.datasets {
            let (name, s) = score(d, self.run.as_ref(), self.depth, self.split.as_deref())?;
            md.push_str(&format!(
                "| {name} | {} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} |\n",
                s.queries, s.recall_1, s.recall_5, s.recall_10, s.ndcg_10, s.mrr
            ));
            rows.push(json!({"dataset": name, "metrics": s}));
        }
        let report = json!({"method": method, "depth": self.depth, "datasets": rows});
        let dir = self
            .out
            .join(self.name.unwrap_or_else(|| format!("retrieval-{method}")));
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        std::fs::write(
            dir.join("report.json"),
            format!("{}\n", serde_json::to_string_pretty(&report)?),
        )?;
        std::fs::write(dir.join("report.md"), format!("# Retrieval ({method})\n\n{md}"))?;
        Ok(report)
    }
}
