//! Open-world agent mode (`eval run --mode agent --open-world`; issue 32 item 4, ToolGym's
//! setting): the model is given only `search_tools` and `call_tool`, the two tools `toolforge
//! serve --open-world` lists over MCP (the same specs, [`crate::serve::search`]), and must find
//! the tools a request needs in the dataset's whole catalog before calling them.
//!
//! **The catalog searched** is the corpus of the dataset's retrieval dataset
//! ([`crate::retrieval::beir::Retrieval::from_dataset`], every split: what `toolforge retrieval`
//! writes), indexed by the same BM25 ([`ToolIndex`]) over the original specs, so a search with a
//! row's request ranks tools exactly as `eval retrieval` ranks them. A hit is named by its corpus
//! id: the tool's name, or `<database>__<name>` for a name several databases offer (rest-spider:
//! every endpoint of every database; slot-spider: each database's SLOT tools). `search_tools`
//! takes serve's arguments (`query`, `top_k` 1–20, default 5) and answers serve's shape
//! `{"query", "tools": [{"name", "score", "description", "parameters"}]}`.
//!
//! **Calls**: `call_tool {"name", "arguments"}` or a call of a catalog tool by name (serve's
//! `tools/call` routes every catalog tool too). A name resolves to a corpus id ([`OpenWorld::resolve`]):
//! the id itself, or a plain name offered once or by the row's own database. A tool of another
//! database fails (the row's request is about its own database), as does an unknown name; a
//! resolved call runs as an ordinary agent call of the row's tool ([`super::agent`]).
//!
//! **Retrieval metrics of the searches** ([`OpenWorldReport`]), against the row's relevant tools
//! (the retrieval dataset's qrels: the tools the gold calls use): *per row*, the row's searches
//! fused into one ranking (every search's 1st hit in search order, then every 2nd hit, …,
//! repeats skipped; no search = an empty ranking, scoring 0); *per search*, each search alone
//! against its row's relevant tools. Recall@1/5/10, nDCG@10 and MRR as
//! [`crate::retrieval::metrics`] defines them; `found` the mean share of a row's relevant tools
//! that any of its searches returned. Rows whose request failed are in no metric; rows without a
//! relevant tool (the retrieval dataset's drops) are counted, not scored.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use anyhow::Result;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::rows::EvalRow;
use crate::retrieval::beir::Retrieval;
use crate::retrieval::metrics::{Summary, recall_at, summarise};
use crate::retrieval::{Hit, ToolIndex};
use crate::tools::ToolSpec;

/// The searchable catalog of one dataset (module docs).
pub struct OpenWorld {
    data: Retrieval,
    /// Corpus ids in index order.
    ids: Vec<String>,
    /// BM25 over the corpus's specs, in `ids` order.
    index: ToolIndex,
    /// Corpus ids by tool name.
    by_name: BTreeMap<String, Vec<String>>,
}

/// One `search_tools` call an agent made.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Search {
    /// The query as the model wrote it.
    pub query: String,
    /// Tools asked for.
    pub top_k: usize,
    /// The corpus ids returned, best first.
    pub hits: Vec<String>,
}

impl OpenWorld {
    /// The open world of the built dataset `dir` (its retrieval dataset over every split).
    pub fn load(dir: &Path) -> Result<OpenWorld> {
        let data = Retrieval::from_dataset(dir, None)?;
        let ids: Vec<String> = data.corpus.keys().cloned().collect();
        let mut by_name: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (id, t) in &data.corpus {
            by_name.entry(t.name.clone()).or_default().push(id.clone());
        }
        let index = ToolIndex::build(data.corpus.values().cloned().collect());
        Ok(OpenWorld {
            data,
            ids,
            index,
            by_name,
        })
    }

    /// Tools in the catalog.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// Whether the catalog is empty.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// The two tools the model is given: serve's `search_tools` and `call_tool` specs.
    pub fn tools() -> Vec<ToolSpec> {
        vec![
            crate::serve::search::search_tools_spec(),
            crate::serve::search::call_tool_spec(),
        ]
    }

    /// What the system prompt adds in open-world mode.
    pub const NOTE: &'static str = "\nThe tools you may need are not listed: find them with search_tools (describe one capability per query), then call a tool it returned by its name through call_tool, with the arguments its input schema describes.";

    /// Runs `search_tools` with the model's `args` (serve's validation, [`crate::serve::search::search_arguments`]):
    /// the answer shown to the model and the search made, or the argument error.
    pub fn search(&self, args: &Map<String, Value>) -> Result<(Value, Search), String> {
        let (query, top_k) = crate::serve::search::search_arguments(args)?;
        let hits: Vec<Hit> = self.index.search(&query, top_k);
        let tools: Vec<Value> = hits
            .iter()
            .map(|h| {
                let t = &self.index.tools()[h.index];
                json!({"name": self.ids[h.index], "score": h.score, "description": t.description, "parameters": t.parameters})
            })
            .collect();
        let search = Search {
            hits: hits.iter().map(|h| self.ids[h.index].clone()).collect(),
            query: query.clone(),
            top_k,
        };
        Ok((json!({"query": query, "tools": tools}), search))
    }

    /// The corpus id a called `name` means for `row` (module docs), or the error the model gets.
    pub fn resolve(&self, name: &str, row: &EvalRow) -> Result<String, String> {
        let scope = |id: &str| self.data.scopes.get(id).cloned();
        let id = if self.data.corpus.contains_key(name) {
            name.to_string()
        } else {
            let ids = self.by_name.get(name).map(Vec::as_slice).unwrap_or_default();
            match ids {
                [] => {
                    return Err(format!(
                        "404: no tool named {name:?} in the catalog; find tools with search_tools"
                    ));
                }
                [one] => one.clone(),
                many => many
                    .iter()
                    .find(|id| row.db_id.is_some() && scope(id) == row.db_id)
                    .cloned()
                    .ok_or_else(|| format!("{name:?} names {} tools: call one of {}", many.len(), many.join(", ")))?,
            }
        };
        match (scope(&id), &row.db_id) {
            (Some(s), Some(db)) if self.is_database(&s) && &s != db => Err(format!(
                "{id:?} is a tool of database {s}, not of this request's database {db}"
            )),
            _ => Ok(id),
        }
    }

    /// Whether a corpus id's scope is a database (not a spec digest).
    fn is_database(&self, scope: &str) -> bool {
        !(scope.len() == 8 && scope.bytes().all(|b| b.is_ascii_hexdigit()))
    }

    /// The tool name a resolved corpus id runs as.
    pub fn tool_name<'a>(&'a self, id: &'a str) -> &'a str {
        self.data.corpus.get(id).map_or(id, |t| t.name.as_str())
    }

    /// The relevant corpus ids of a row (`None`: the retrieval dataset dropped it).
    pub fn relevant(&self, row_id: &str) -> Option<&BTreeSet<String>> {
        self.data.qrels.get(row_id)
    }
}

/// The searches of a row fused into one ranking (module docs): every search's first hit in
/// search order, then every second hit, …; repeats skipped.
pub fn fused(searches: &[Search]) -> Vec<String> {
    let depth = searches.iter().map(|s| s.hits.len()).max().unwrap_or(0);
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for rank in 0..depth {
        for s in searches {
            if let Some(h) = s.hits.get(rank)
                && seen.insert(h.clone())
            {
                out.push(h.clone());
            }
        }
    }
    out
}

/// The retrieval part of an open-world run's report (module docs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OpenWorldReport {
    /// Tools in the searched catalog.
    pub catalog_tools: usize,
    /// Rows with an answer (failed rows excluded).
    pub rows: usize,
    /// Rows without a relevant tool (not scored).
    pub rows_without_relevant_tools: usize,
    /// Rows that made at least one search.
    pub rows_searching: usize,
    /// Searches made.
    pub searches: usize,
    /// Per row, its searches fused (module docs).
    pub by_row: Summary,
    /// Per search, each against its row's relevant tools.
    pub by_search: Summary,
    /// Mean share of a row's relevant tools any of its searches returned.
    pub found: f64,
}

/// The report of the rows' searches (`searches` by row id; rows absent searched nothing).
pub fn report(world: &OpenWorld, rows: &[&str], searches: &BTreeMap<String, Vec<Search>>) -> OpenWorldReport {
    let none = Vec::new();
    let mut qrels: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut run: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut search_qrels: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut search_run: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let (mut without, mut searching, mut made, mut found) = (0, 0, 0, 0.0);
    for id in rows {
        let list = searches.get(*id).unwrap_or(&none);
        searching += usize::from(!list.is_empty());
        made += list.len();
        let Some(rel) = world.relevant(id).filter(|r| !r.is_empty()) else {
            without += 1;
            continue;
        };
        let ranking = fused(list);
        let refs: Vec<&str> = ranking.iter().map(String::as_str).collect();
        found += recall_at(&refs, &rel.iter().map(String::as_str).collect(), usize::MAX);
        qrels.insert(id.to_string(), rel.clone());
        run.insert(id.to_string(), ranking);
        for (i, s) in list.iter().enumerate() {
            let key = format!("{id}#{i}");
            search_qrels.insert(key.clone(), rel.clone());
            search_run.insert(key, s.hits.clone());
        }
    }
    OpenWorldReport {
        catalog_tools: world.len(),
        rows: rows.len(),
        rows_without_relevant_tools: without,
        rows_searching: searching,
        searches: made,
        found: if qrels.is_empty() {
            0.0
        } else {
            found / qrels.len() as f64
        },
        by_row: summarise(&qrels, &run),
        by_search: summarise(&search_qrels, &search_run),
    }
}

/// The Markdown section of [`OpenWorldReport`] in `report.md`.
pub fn markdown(r: &OpenWorldReport) -> String {
    let row = |name: &str, s: &Summary| {
        format!(
            "| {name} | {} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} |\n",
            s.queries, s.recall_1, s.recall_5, s.recall_10, s.ndcg_10, s.mrr
        )
    };
    format!(
        "\n## Open world: the model's searches\n\nThe model had only `search_tools` and `call_tool` over {} tools. {} rows ({} without a relevant tool, not scored), {} made a search; {} searches. Share of relevant tools found by any search: {:.3}.\n\n| Ranking | Queries | Recall@1 | Recall@5 | Recall@10 | nDCG@10 | MRR |\n|---|---:|---:|---:|---:|---:|---:|\n{}{}",
        r.catalog_tools,
        r.rows,
        r.rows_without_relevant_tools,
        r.rows_searching,
        r.searches,
        r.found,
        row("per row (searches fused)", &r.by_row),
        row("per search", &r.by_search),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(hits: &[&str]) -> Search {
        Search {
            query: String::new(),
            top_k: hits.len(),
            hits: hits.iter().map(|h| h.to_string()).collect(),
        }
    }

    #[test]
    fn searches_fuse_rank_by_rank_in_search_order() {
        let f = fused(&[s(&["a", "b", "c"]), s(&["d", "a"]), s(&["e"])]);
        assert_eq!(f, ["a", "d", "e", "b", "c"]);
        assert!(fused(&[]).is_empty());
    }
}
