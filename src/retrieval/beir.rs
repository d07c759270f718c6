//! Retrieval datasets in the BEIR layout (Thakur et al. 2021; what MTEB and Hugging Face's
//! retrieval datasets use), derived from a built dataset (`toolforge retrieval out/<name>`):
//!
//! - `corpus.jsonl`: one line per tool, `{"_id", "title", "text", "tool"}`: `title` the tool
//!   name, `text` the indexed document ([`super::index::document`]), `tool` the full spec
//!   (`{"name", "description", "parameters"}`) as JSON text (its keys vary per tool, so text keeps
//!   one column type for `datasets`);
//! - `queries.jsonl`: `{"_id", "text"}`, one per kept row: the row's id and request (`input`);
//! - `qrels/<split>.tsv`, one per split of the rows (`train`, `dev`, `test`; a row without a split
//!   is `test`): `query-id`, `corpus-id`, `score` (1 = relevant), tab-separated, header first
//!   (BEIR's files; MS MARCO's BEIR copy has `train`/`dev`/`test` the same way); the same rows as
//!   `qrels/<split>.jsonl`, the splits of the card's `default` config (as MTEB's Hugging Face
//!   datasets do: `datasets` reads one file type per repository);
//! - `stats.json`: rows attempted, kept, dropped by reason, corpus size; `README.md`: the card.
//!
//! The corpus is one tool per (name, database) offered to the selected rows (the spec first
//! offered in row order; rows without a database: one per distinct spec), plus, when no split
//! is selected, the catalog's (`tools/functions.json`) tools no row was offered: for
//! `rest-spider` every endpoint of every database, for `sel-spider` every database's SEL tools
//! (a name in several databases gets the id `<db_id>__<name>`, one without a database
//! `<8 hex of blake3(spec)>__<name>`: [`crate::tools::names::qualified_name`], the one qualified
//! form, a valid function name a model can call), for `bfcl --split multiple` every function of the category,
//! for `mcp-tools` the whole catalog. A row's relevant
//! tools are the tools its gold calls name, as offered in its own toolkit; a `catalog` row (an
//! MCP bundle, whose task has no gold calls until synthesised) has its bundle's tools. A row with
//! neither is dropped (`no_gold_call`, e.g. BFCL irrelevance), as is one whose gold names a tool
//! its toolkit lacks (`gold_tool_not_offered`): attempted = kept + dropped.
//!
//! Identical documents (the same indexed text, e.g. sel-spider's `calculate_add` in each of 20
//! databases) cannot be told apart by any retriever: the written corpus holds each text once,
//! under its first id (id order), with the other ids in `copies`, and the judgements name that id
//! ([`Retrieval::write`]; `stats.json` counts the merged copies). In memory ([`Retrieval`], what
//! the open-world eval routes calls with) every copy stays.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write as _;
use std::path::Path;

use anyhow::{Context, Result, bail};
use serde_json::{Value as Json, json};

use crate::tools::ToolSpec;

/// The split of a query whose row has none, and the split `eval retrieval` scores by default.
pub const DEFAULT_SPLIT: &str = "test";

/// A retrieval dataset in memory.
#[derive(Debug, Default)]
pub struct Retrieval {
    /// Its name (`<dataset>[-<split>]-retrieval`).
    pub name: String,
    /// Tools by corpus id (ordered by id).
    pub corpus: BTreeMap<String, ToolSpec>,
    /// Queries (id, text), in row order.
    pub queries: Vec<(String, String)>,
    /// Relevant corpus ids by query id.
    pub qrels: BTreeMap<String, BTreeSet<String>>,
    /// The split of each query (its row's `split`; `test` when the row has none).
    pub split_of: BTreeMap<String, String>,
    /// The scope (database id, or 8 hex digits of the spec's blake3) of each qualified corpus
    /// id; ids that are plain tool names are absent. Not written to the BEIR files.
    pub scopes: BTreeMap<String, String>,
    /// Rows dropped, by reason code.
    pub dropped: BTreeMap<String, usize>,
}

fn spec_key(t: &ToolSpec) -> String {
    json!({"name": t.name, "description": t.description, "parameters": t.parameters}).to_string()
}

fn specs(v: &Json) -> Vec<ToolSpec> {
    v.as_array()
        .map(|a| {
            a.iter()
                .map(|t| {
                    let f = if t.get("function").is_some() { &t["function"] } else { t };
                    ToolSpec {
                        name: f["name"].as_str().unwrap_or_default().into(),
                        description: f["description"].as_str().unwrap_or_default().into(),
                        parameters: f["parameters"].clone(),
                        output_parameters: json!({}),
                    }
                })
                .collect()
        })
        .unwrap_or_default()
}

/// A JSON value that may be stored as JSON text (the JSONL rows keep `tools` and `meta` as text).
fn parsed(v: &Json) -> Json {
    match v {
        Json::String(s) => serde_json::from_str(s).unwrap_or(Json::Null),
        other => other.clone(),
    }
}

/// The rows of a built dataset (`data/*.jsonl`, files in name order, lines in file order).
fn rows(dir: &Path) -> Result<Vec<Json>> {
    let files = crate::emit::data_files(dir, "jsonl")?;
    let mut out = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).with_context(|| format!("reading {}", f.display()))?;
        for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
            out.push(serde_json::from_str(line).with_context(|| format!("{}:{}", f.display(), i + 1))?);
        }
    }
    Ok(out)
}

impl Retrieval {
    /// The retrieval dataset of the built dataset `dir`, over the rows of `split` (all rows when
    /// `None`). Errors: `dir` is not a built dataset, or no row is in `split`.
    pub fn from_dataset(dir: &Path, split: Option<&str>) -> Result<Retrieval> {
        let manifest = crate::emit::read_manifest(dir)?;
        let dataset = manifest["dataset"].as_str().unwrap_or("dataset").to_string();
        let format = manifest["format"].as_str().unwrap_or_default().to_string();
        let rows: Vec<Json> = rows(dir)?
            .into_iter()
            .filter(|r| split.is_none_or(|s| r["split"].as_str() == Some(s)))
            .collect();
        if rows.is_empty() {
            bail!(
                "{}: no rows{}",
                dir.display(),
                split.map(|s| format!(" in split {s:?}")).unwrap_or_default()
            );
        }
        // One document per (name, scope): the scope is the row's database (a database's tool,
        // first spec seen in row order) or, without one, the spec itself.
        // A seq row lists its toolkit by name (`{"name"}` alone): the spec is the catalog's.
        let catalog: Vec<ToolSpec> = match dir.join("tools/functions.json").is_file() {
            true => super::catalog(dir)?,
            false => vec![],
        };
        let by_name: BTreeMap<&str, &ToolSpec> = catalog.iter().map(|t| (t.name.as_str(), t)).collect();
        let resolve = |t: ToolSpec| match by_name.get(t.name.as_str()) {
            Some(spec) if t.description.is_empty() && t.parameters.is_null() => (*spec).clone(),
            _ => t,
        };
        let toolkits: Vec<Vec<ToolSpec>> = rows
            .iter()
            .map(|r| specs(&parsed(&r["tools"])).into_iter().map(resolve).collect())
            .collect();
        let scope = |row: &Json, t: &ToolSpec| -> String {
            match row["db_id"].as_str() {
                Some(db) => db.to_string(),
                None => blake3::hash(spec_key(t).as_bytes()).to_hex()[..8].to_string(),
            }
        };
        let mut offered: BTreeMap<(String, String), ToolSpec> = BTreeMap::new();
        for (row, toolkit) in rows.iter().zip(&toolkits) {
            for t in toolkit {
                offered
                    .entry((t.name.clone(), scope(row, t)))
                    .or_insert_with(|| t.clone());
            }
        }
        // The catalog's tools no row was offered (e.g. MCP tools in no bundle).
        if split.is_none() && dir.join("tools/functions.json").is_file() {
            let names: BTreeSet<String> = offered.keys().map(|(n, _)| n.clone()).collect();
            for t in catalog {
                if !names.contains(&t.name) {
                    let h = blake3::hash(spec_key(&t).as_bytes()).to_hex()[..8].to_string();
                    offered.entry((t.name.clone(), h)).or_insert(t);
                }
            }
        }
        let mut per_name: BTreeMap<String, usize> = BTreeMap::new();
        for (name, _) in offered.keys() {
            *per_name.entry(name.clone()).or_default() += 1;
        }
        let id_of = |key: &(String, String)| -> String {
            if per_name.get(&key.0).copied().unwrap_or(0) > 1 {
                crate::tools::names::qualified_name(&key.1, &key.0)
            } else {
                key.0.clone()
            }
        };
        let mut out = Retrieval {
            name: match split {
                Some(s) => format!("{dataset}-{s}-retrieval"),
                None => format!("{dataset}-retrieval"),
            },
            ..Default::default()
        };
        for (key, t) in &offered {
            let id = id_of(key);
            if id != key.0 {
                out.scopes.insert(id.clone(), key.1.clone());
            }
            out.corpus.insert(id, t.clone());
        }
        for (row, toolkit) in rows.iter().zip(&toolkits) {
            let id = row["id"].as_str().unwrap_or_default().to_string();
            let output = parsed(&row["output"]);
            let calls: BTreeSet<&str> = output
                .as_array()
                .map(|a| a.iter().filter_map(|c| c["name"].as_str()).collect())
                .unwrap_or_default();
            let key = |t: &ToolSpec| id_of(&(t.name.clone(), scope(row, t)));
            let relevant: Result<BTreeSet<String>, &str> = if calls.is_empty() {
                if format == "catalog" && !toolkit.is_empty() {
                    Ok(toolkit.iter().map(key).collect())
                } else {
                    Err("no_gold_call")
                }
            } else {
                calls
                    .iter()
                    .map(|n| {
                        toolkit
                            .iter()
                            .find(|t| t.name == *n)
                            .map(key)
                            .ok_or("gold_tool_not_offered")
                    })
                    .collect()
            };
            match relevant {
                Ok(rel) => {
                    let split = row["split"].as_str().unwrap_or(DEFAULT_SPLIT).to_string();
                    out.split_of.insert(id.clone(), split);
                    out.queries
                        .push((id.clone(), row["input"].as_str().unwrap_or_default().to_string()));
                    out.qrels.insert(id, rel);
                }
                Err(reason) => *out.dropped.entry(reason.to_string()).or_default() += 1,
            }
        }
        Ok(out)
    }

    /// Rows attempted (kept + dropped).
    pub fn attempted(&self) -> usize {
        self.queries.len() + self.dropped.values().sum::<usize>()
    }

    /// Identical documents grouped: each corpus id → the first id (id order) whose indexed text
    /// ([`super::index::document`]) is the same (itself when its text is unique).
    pub fn representatives(&self) -> BTreeMap<&str, &str> {
        let mut first: BTreeMap<String, &str> = BTreeMap::new();
        self.corpus
            .iter()
            .map(|(id, t)| {
                (
                    id.as_str(),
                    *first.entry(super::index::document(t)).or_insert(id.as_str()),
                )
            })
            .collect()
    }

    /// Writes the BEIR files into `out` (created; files replaced): the corpus with identical
    /// documents merged (module docs), the queries, and per split the judgements.
    pub fn write(&self, out: &Path) -> Result<()> {
        let _ = std::fs::remove_dir_all(out.join("qrels"));
        std::fs::create_dir_all(out.join("qrels")).with_context(|| format!("creating {}", out.display()))?;
        let rep = self.representatives();
        let mut copies: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for (id, r) in &rep {
            if id != r {
                copies.entry(r).or_default().push(id);
            }
        }
        let mut corpus = Vec::new();
        for (id, t) in self.corpus.iter().filter(|(id, _)| rep[id.as_str()] == id.as_str()) {
            let tool = json!({"name": t.name, "description": t.description, "parameters": t.parameters});
            let same = copies.get(id.as_str()).cloned().unwrap_or_default();
            let line = json!({"_id": id, "title": t.name, "text": super::index::document(t),
                "tool": tool.to_string(), "copies": same});
            writeln!(corpus, "{line}")?;
        }
        let mut queries = Vec::new();
        for (id, text) in &self.queries {
            writeln!(queries, "{}", json!({"_id": id, "text": text}))?;
        }
        // Per split: (tsv, jsonl).
        let mut qrels: BTreeMap<&str, (Vec<u8>, Vec<u8>)> = BTreeMap::new();
        for (q, _) in &self.queries {
            let split = self.split_of.get(q).map_or(DEFAULT_SPLIT, String::as_str);
            let (tsv, jsonl) = qrels
                .entry(split)
                .or_insert_with(|| (b"query-id\tcorpus-id\tscore\n".to_vec(), Vec::new()));
            let judged: BTreeSet<&str> = self.qrels[q].iter().map(|d| rep[d.as_str()]).collect();
            for d in judged {
                writeln!(tsv, "{q}\t{d}\t1")?;
                writeln!(jsonl, "{}", json!({"query-id": q, "corpus-id": d, "score": 1}))?;
            }
        }
        let merged = rep.iter().filter(|(id, r)| id != r).count();
        let stats = json!({
            "name": self.name,
            "attempted": self.attempted(),
            "kept": self.queries.len(),
            "dropped": self.dropped,
            "corpus": self.corpus.len() - merged,
            "identical_documents_merged": merged,
            "qrels": self.qrels.values().map(BTreeSet::len).sum::<usize>(),
            "queries_per_split": qrels.keys().map(|s| (s.to_string(), self.split_of.values().filter(|x| x == s).count())).collect::<BTreeMap<_, _>>(),
        });
        let mut split_files = String::new();
        for split in qrels.keys() {
            split_files.push_str(&format!("  - split: {split}\n    path: qrels/{split}.jsonl\n"));
        }
        let card = format!(
            "---\nconfigs:\n- config_name: corpus\n  data_files:\n  - split: corpus\n    path: corpus.jsonl\n\
             - config_name: queries\n  data_files:\n  - split: queries\n    path: queries.jsonl\n\
             - config_name: default\n  data_files:\n{split_files}---\n\n\
             # {name}\n\nTool retrieval in the BEIR layout, from the verified rows of a toolforge dataset: \
             {q} queries (each a row's request), {c} tools (`corpus`), relevance judgements per split in \
             `qrels/<split>.tsv` ({splits}; the tools the row's gold calls use). {merged} documents whose \
             text is identical to another's are merged into it (`copies` lists their ids): no retriever can \
             tell them apart. `toolforge eval retrieval` scores a run (Recall@1/5/10, nDCG@10, MRR) on \
             `test` (or `--split`).\n",
            name = self.name,
            q = self.queries.len(),
            c = self.corpus.len() - merged,
            splits = qrels.keys().map(|s| format!("`{s}`")).collect::<Vec<_>>().join(", "),
        );
        let mut files: Vec<(String, Vec<u8>)> = vec![
            ("corpus.jsonl".into(), corpus),
            ("queries.jsonl".into(), queries),
            (
                "stats.json".into(),
                format!("{}\n", serde_json::to_string_pretty(&stats)?).into_bytes(),
            ),
            ("README.md".into(), card.into_bytes()),
        ];
        for (split, (tsv, jsonl)) in qrels {
            files.push((format!("qrels/{split}.tsv"), tsv));
            files.push((format!("qrels/{split}.jsonl"), jsonl));
        }
        for (rel, bytes) in files {
            let p = out.join(rel);
            std::fs::write(&p, bytes).with_context(|| format!("writing {}", p.display()))?;
        }
        Ok(())
    }

    /// The splits that have judgements in the BEIR directory `dir` (`qrels/<split>.tsv`), sorted.
    pub fn splits(dir: &Path) -> Vec<String> {
        let mut out: Vec<String> = std::fs::read_dir(dir.join("qrels"))
            .map(|rd| {
                rd.filter_map(|e| e.ok())
                    .filter_map(|e| {
                        let name = e.file_name().to_string_lossy().into_owned();
                        name.strip_suffix(".tsv").map(String::from)
                    })
                    .collect()
            })
            .unwrap_or_default();
        out.sort();
        out
    }

    /// The documents of a BEIR directory's `corpus.jsonl` by id: the `tool` column's spec, or a
    /// spec made of BEIR's plain `title` (the name) and `text` (the description). Errors name
    /// the line: not JSON, no `_id`, an id given twice.
    pub fn read_corpus(dir: &Path) -> Result<BTreeMap<String, ToolSpec>> {
        let p = dir.join("corpus.jsonl");
        let text = std::fs::read_to_string(&p).with_context(|| format!("reading {}", p.display()))?;
        let mut corpus = BTreeMap::new();
        for (i, l) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
            let n = i + 1;
            let v: Json = serde_json::from_str(l).with_context(|| format!("corpus.jsonl:{n}"))?;
            let tool = parsed(&v["tool"]);
            let spec = specs(&json!([tool])).pop().unwrap_or_else(|| ToolSpec::reference(""));
            let id = v["_id"].as_str().with_context(|| format!("corpus.jsonl:{n}: no _id"))?;
            let spec = if spec.name.is_empty() {
                ToolSpec {
                    name: v["title"].as_str().unwrap_or(id).into(),
                    description: v["text"].as_str().unwrap_or_default().into(),
                    parameters: json!({}),
                    output_parameters: json!({}),
                }
            } else {
                spec
            };
            if corpus.insert(id.to_string(), spec).is_some() {
                bail!("corpus.jsonl:{n}: document id {id:?} given twice");
            }
        }
        Ok(corpus)
    }

    /// Reads a BEIR directory: `corpus.jsonl` (with the `tool` spec column, or BEIR's plain
    /// `title`/`text`), `queries.jsonl` and the judgements of `split` (`qrels/<split>.tsv`; `None`:
    /// `test`, else the only split there is). The queries kept are those judged in that split.
    ///
    /// Errors, naming the file and line: a line that is not JSON or has no `_id`; an id given
    /// twice in the corpus or in the queries; an empty corpus; no judgements for the split (the
    /// splits there are are named); a judgement naming a document absent from the corpus or a
    /// query absent from the queries.
    pub fn read(dir: &Path, split: Option<&str>) -> Result<Retrieval> {
        let lines = |rel: &str| -> Result<Vec<(usize, String)>> {
            let p = dir.join(rel);
            let text = std::fs::read_to_string(&p).with_context(|| format!("reading {}", p.display()))?;
            Ok(text
                .lines()
                .enumerate()
                .filter(|(_, l)| !l.trim().is_empty())
                .map(|(i, l)| (i + 1, l.to_string()))
                .collect())
        };
        let splits = Self::splits(dir);
        let listed = || splits.join(", ");
        let split = match split {
            Some(s) if splits.iter().any(|x| x == s) => s.to_string(),
            Some(s) => bail!(
                "{}: no judgements for split {s:?} (qrels/{s}.tsv); splits: {}",
                dir.display(),
                listed()
            ),
            None if splits.iter().any(|x| x == DEFAULT_SPLIT) => DEFAULT_SPLIT.to_string(),
            None if splits.len() == 1 => splits[0].clone(),
            None if splits.is_empty() => bail!("{}: no judgements (qrels/<split>.tsv)", dir.display()),
            None => bail!(
                "{}: judgements for splits {} and none is `test`: choose one (--split)",
                dir.display(),
                listed()
            ),
        };
        let mut out = Retrieval {
            name: dir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            ..Default::default()
        };
        out.corpus = Self::read_corpus(dir)?;
        if out.corpus.is_empty() {
            bail!("{}: the corpus (corpus.jsonl) is empty", dir.display());
        }
        let mut texts: BTreeMap<String, String> = BTreeMap::new();
        for (n, l) in lines("queries.jsonl")? {
            let v: Json = serde_json::from_str(&l).with_context(|| format!("queries.jsonl:{n}"))?;
            let id = v["_id"]
                .as_str()
                .with_context(|| format!("queries.jsonl:{n}: no _id"))?;
            let text = v["text"].as_str().unwrap_or_default().to_string();
            if texts.insert(id.to_string(), text).is_some() {
                bail!("queries.jsonl:{n}: query id {id:?} given twice");
            }
        }
        let file = format!("qrels/{split}.tsv");
        for (n, l) in lines(&file)? {
            let cols: Vec<&str> = l.split('\t').collect();
            if n == 1 && cols.first() == Some(&"query-id") {
                continue;
            }
            let [q, d, score] = cols[..] else {
                bail!("{file}:{n}: expected 3 tab-separated columns")
            };
            if !texts.contains_key(q) {
                bail!("{file}:{n}: query {q:?} is not in queries.jsonl");
            }
            if !out.corpus.contains_key(d) {
                bail!("{file}:{n}: document {d:?} is not in corpus.jsonl");
            }
            if score
                .trim()
                .parse::<f64>()
                .with_context(|| format!("{file}:{n}: score"))?
                > 0.0
            {
                out.qrels.entry(q.to_string()).or_default().insert(d.to_string());
            }
        }
        if out.qrels.is_empty() {
            bail!("{}: {file} judges no document relevant", dir.display());
        }
        for (q, text) in texts {
            if out.qrels.contains_key(&q) {
                out.split_of.insert(q.clone(), split.clone());
                out.queries.push((q, text));
            }
        }
        Ok(out)
    }
}
