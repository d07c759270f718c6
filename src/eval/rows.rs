//! A built dataset as the evaluator reads it: every row of `data/*.jsonl` (files in name order)
//! with the setup step split off the sequence a model predicts, plus what executing a
//! prediction needs (`tools/endpoints.json`, `tools/drift.json`, `tools/functions.json`, the
//! database root).
//!
//! The setup step (Live API-Bench App. D.1, Listing 10) is taken from `initialization_step` when
//! the row has one, else from `output[0]` when that call is `initialize_active_data` (the row
//! shape before the join step moved out of `output`); either way [`EvalRow::gold`] is exactly
//! what a model must predict.

use std::collections::{BTreeMap, HashMap};
use std::io::BufRead as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use serde_json::{Map, Value};

use crate::tools::rest::Endpoint;
use crate::tools::{Call, ToolSpec};
use crate::variants::drift::Drift;
use crate::verify::Answer;

/// Name of the SLOT/SEL setup call the framework runs.
pub const SETUP_TOOL: &str = "initialize_active_data";

/// One dataset row, ready to score.
#[derive(Debug, Clone, Default)]
pub struct EvalRow {
    /// Example id.
    pub id: String,
    /// Dataset name.
    pub dataset: String,
    /// Split.
    pub split: String,
    /// Database id (text-to-SQL families).
    pub db_id: Option<String>,
    /// The request.
    pub input: String,
    /// The setup calls the framework runs before the model's calls, in order (SLOT/SEL: the join
    /// step `initialization_step`, then `additional_setup_steps`); empty for other families.
    pub setup: Vec<Call>,
    /// The gold calls a model must predict (the setup step excluded).
    pub gold: Vec<Call>,
    /// The verified answer, when the family has one.
    pub gold_answer: Option<Answer>,
    /// Whether the answer is ordered (text-to-SQL rows: the SQL has ORDER BY; other rows: the
    /// order of the gold calls is part of the answer, see `seq/mod.rs` and `catalog/bfcl.rs`).
    pub ordered: bool,
    /// Whether the gold calls may come in any order: `ordered` is false on a row that is not
    /// text-to-SQL (no `sql`; BFCL rows, MixATIS/MixSNIPS clauses, single calls). A
    /// text-to-SQL row's `ordered` speaks of its answer, and its calls keep their order.
    pub calls_unordered: bool,
    /// The instance's tool specs (seq rows: references into the dataset catalog), each shared
    /// with the other rows offering it ([`Toolkits`]).
    pub tools: Toolkit,
    /// BIRD difficulty.
    pub difficulty: Option<String>,
    /// `meta` as JSON (`Null` when absent).
    pub meta: Value,
}

impl EvalRow {
    /// `meta.variant_kind` (`perturb`, `drift`, `obfuscate`, …) of a variant row.
    pub fn variant_kind(&self) -> Option<&str> {
        self.meta["variant_kind"].as_str()
    }
}

/// Splits the setup steps off a row's calls ([`crate::tools::setup_and_calls`]):
/// `initialization_step` if set, else `output[0]` when it is `initialize_active_data` (both row
/// shapes of the brief), then `additional_setup_steps`.
pub fn split_setup(
    initialization_step: Option<Call>,
    additional_setup_steps: &[Call],
    output: Vec<Call>,
) -> (Vec<Call>, Vec<Call>) {
    let (setup, calls) = crate::tools::setup_and_calls(initialization_step.as_ref(), additional_setup_steps, &output);
    (setup.into_iter().cloned().collect(), calls.to_vec())
}

/// A call from the JSONL shape (`arguments` a JSON string or an object).
fn call_of(v: &Value, what: &str) -> Result<Call> {
    let name = v["name"].as_str().with_context(|| format!("{what}: no name"))?;
    let arguments = match &v["arguments"] {
        Value::String(s) => {
            serde_json::from_str(s).with_context(|| format!("{what}: arguments are not a JSON object"))?
        }
        Value::Object(m) => m.clone(),
        Value::Null => Map::new(),
        other => bail!("{what}: arguments {other} are not an object"),
    };
    Ok(Call {
        name: name.into(),
        arguments,
        label: v["label"].as_str().unwrap_or_default().into(),
    })
}

/// A JSON-text column of the JSONL rows (`"[...]"`), or the value itself.
fn json_text(v: &Value) -> Result<Value> {
    Ok(match v {
        Value::String(s) => serde_json::from_str(s)?,
        other => other.clone(),
    })
}

/// A row's toolkit: its tool specs in order, each shared with every row offering that tool.
pub type Toolkit = Arc<[Arc<ToolSpec>]>;

/// The toolkits and tools of the rows read so far, by the BLAKE3 digest of their JSON text:
/// rows over one database and its variants offer the same tools in different combinations
/// (distractors, shortlists, drift), so each distinct toolkit and each distinct tool is parsed
/// and held once. rest-spider-variants: 10,969 rows carry 195 MB of toolkit text, 5,077
/// distinct toolkits, 1,075 distinct tools; held per row they were most of `eval`'s peak memory
/// (issue 17).
#[derive(Default)]
pub struct Toolkits {
    kits: HashMap<blake3::Hash, Toolkit>,
    tools: HashMap<blake3::Hash, Arc<ToolSpec>>,
}

impl Toolkits {
    /// The toolkit of a row's `tools` column (JSON text, a list, or null → empty).
    pub fn get(&mut self, v: &Value) -> Result<Toolkit> {
        let text = match v {
            Value::Null => return Ok(Arc::from([])),
            Value::String(s) => std::borrow::Cow::Borrowed(s.as_str()),
            other => std::borrow::Cow::Owned(other.to_string()),
        };
        let key = blake3::hash(text.as_bytes());
        if let Some(kit) = self.kits.get(&key) {
            return Ok(kit.clone());
        }
        let specs: Vec<Value> = serde_json::from_str(&text).context("tools: not a JSON list")?;
        let kit: Toolkit = specs
            .into_iter()
            .enumerate()
            .map(|(i, spec)| {
                let key = blake3::hash(spec.to_string().as_bytes());
                if let Some(t) = self.tools.get(&key) {
                    return Ok(t.clone());
                }
                let tool: Arc<ToolSpec> =
                    Arc::new(serde_json::from_value(spec).with_context(|| format!("tools[{i}]"))?);
                self.tools.insert(key, tool.clone());
                Ok(tool)
            })
            .collect::<Result<_>>()?;
        self.kits.insert(key, kit.clone());
        Ok(kit)
    }

    /// Distinct (toolkits, tools) held.
    #[cfg(test)]
    fn counts(&self) -> (usize, usize) {
        (self.kits.len(), self.tools.len())
    }
}

/// A row's `meta` as the evaluator keeps it: without a drift row's `variant.tools_new` (its
/// A_new specs: the model is shown A_old — DynamicToolBench — and execution rebuilds A_new from
/// `variant.changes`), half of a variants dataset's `meta` by size.
fn eval_meta(mut meta: Value) -> Value {
    if let Some(v) = meta.get_mut("variant").and_then(Value::as_object_mut) {
        v.shift_remove("tools_new");
    }
    meta
}

/// Parses one JSONL row, its toolkit shared through `toolkits`; the error names the field.
pub fn parse_row(v: &Value, toolkits: &mut Toolkits) -> Result<EvalRow> {
    let id = v["id"].as_str().context("no id")?.to_string();
    let output = v["output"]
        .as_array()
        .context("output is not a list")?
        .iter()
        .enumerate()
        .map(|(i, c)| call_of(c, &format!("output[{i}]")))
        .collect::<Result<Vec<_>>>()?;
    let init = match &v["initialization_step"] {
        Value::Null => None,
        c => Some(call_of(&json_text(c)?, "initialization_step")?),
    };
    let additional = match &v["additional_setup_steps"] {
        Value::Null => vec![],
        c => json_text(c)?
            .as_array()
            .context("additional_setup_steps is not a list")?
            .iter()
            .enumerate()
            .map(|(i, c)| call_of(c, &format!("additional_setup_steps[{i}]")))
            .collect::<Result<Vec<_>>>()?,
    };
    let (setup, gold) = split_setup(init, &additional, output);
    let text = |k: &str| v[k].as_str().map(String::from);
    Ok(EvalRow {
        dataset: text("dataset").unwrap_or_default(),
        split: text("split").unwrap_or_default(),
        db_id: text("db_id"),
        input: text("input").unwrap_or_default(),
        setup,
        gold,
        gold_answer: match &v["gold_answer"] {
            Value::Null => None,
            g => Some(serde_json::from_value(json_text(g)?).context("gold_answer")?),
        },
        ordered: v["ordered"].as_bool().unwrap_or(false),
        calls_unordered: !v["ordered"].as_bool().unwrap_or(false) && v["sql"].is_null(),
        tools: toolkits.get(&v["tools"])?,
        difficulty: text("difficulty"),
        meta: eval_meta(json_text(&v["meta"]).context("meta")?),
        id,
    })
}

/// A built dataset loaded for evaluation.
pub struct EvalSet {
    /// The dataset directory (`out/<name>`).
    pub dir: PathBuf,
    /// Dataset name (MANIFEST.json `dataset`).
    pub name: String,
    /// Format (`slot`, `sel`, `rest`, `seq`, `mcp`, `bfcl`, …).
    pub format: String,
    /// Rows in file order.
    pub rows: Vec<EvalRow>,
    /// The dataset catalog (`tools/functions.json`), by name.
    pub catalog: BTreeMap<String, ToolSpec>,
    /// REST endpoints (`tools/endpoints.json`).
    pub endpoints: Vec<Endpoint>,
    /// Schema drift (`tools/drift.json`): A_new, as `serve` enforces it.
    pub drift: Option<Drift>,
    /// Directory holding `<db>/<db>.sqlite`, when the family executes.
    pub database_root: Option<PathBuf>,
}

impl EvalSet {
    /// Loads `dir` (a built dataset); `databases` overrides the database root (else the
    /// recipe's source through MANIFEST.json, when it can be found). A bad row is an error
    /// naming the file and line: a built dataset is our own output.
    pub fn load(dir: &Path, databases: Option<&Path>) -> Result<EvalSet> {
        let manifest = crate::emit::read_manifest(dir)?;
        let format = manifest["format"].as_str().unwrap_or_default().to_string();
        let name = manifest["dataset"].as_str().unwrap_or_default().to_string();
        let files = crate::emit::data_files(dir, "jsonl")?;
        // Line by line (a REST variants file is ~280 MB), toolkits shared across rows.
        let mut rows = Vec::new();
        let mut toolkits = Toolkits::default();
        for f in &files {
            let file = std::fs::File::open(f).with_context(|| format!("reading {}", f.display()))?;
            for (i, line) in std::io::BufReader::new(file).lines().enumerate() {
                let line = line.with_context(|| format!("reading {} line {}", f.display(), i + 1))?;
                if line.trim().is_empty() {
                    continue;
                }
                let v: Value =
                    serde_json::from_str(&line).with_context(|| format!("{} line {}: not JSON", f.display(), i + 1))?;
                rows.push(parse_row(&v, &mut toolkits).with_context(|| format!("{} line {}", f.display(), i + 1))?);
            }
        }
        let read = |rel: &str| -> Result<Option<Value>> {
            let p = dir.join(rel);
            if !p.is_file() {
                return Ok(None);
            }
            let bytes = std::fs::read(&p).with_context(|| format!("reading {}", p.display()))?;
            Ok(Some(
                serde_json::from_slice(&bytes).with_context(|| format!("parsing {}", p.display()))?,
            ))
        };
        let catalog = read("tools/functions.json")?
            .and_then(|f| f.as_array().cloned())
            .unwrap_or_default()
            .iter()
            .map(|f| {
                let spec = ToolSpec {
                    name: f["function"]["name"].as_str().unwrap_or_default().into(),
                    description: f["function"]["description"].as_str().unwrap_or_default().into(),
                    parameters: f["function"]["parameters"].clone(),
                    output_parameters: Value::Null,
                };
                (spec.name.clone(), spec)
            })
            .collect();
        let endpoints = match read("tools/endpoints.json")? {
            Some(v) => serde_json::from_value(v).context("parsing tools/endpoints.json")?,
            None => vec![],
        };
        let drift = match read("tools/drift.json")? {
            Some(v) => Some(serde_json::from_value(v).context("parsing tools/drift.json")?),
            None => None,
        };
        let executes = ["slot", "sel", "rest"].contains(&format.as_str());
        let database_root = match databases {
            Some(d) => Some(d.to_path_buf()),
            None if executes => Some(crate::emit::database_root(dir, None)?),
            None => None,
        };
        Ok(EvalSet {
            dir: dir.to_path_buf(),
            name,
            format,
            rows,
            catalog,
            endpoints,
            drift,
            database_root,
        })
    }

    /// The full specs of a row's toolkit: references resolved through the catalog.
    pub fn toolkit(&self, row: &EvalRow) -> Vec<ToolSpec> {
        row.tools
            .iter()
            .map(|t| {
                if t.is_reference() {
                    self.catalog.get(&t.name).cloned().unwrap_or_else(|| (**t).clone())
                } else {
                    (**t).clone()
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(name: &str) -> Call {
        Call {
            name: name.into(),
            arguments: Map::new(),
            label: String::new(),
        }
    }

    #[test]
    fn setup_step_from_either_row_shape() {
        let (s, g) = split_setup(None, &[], vec![call(SETUP_TOOL), call("filter_data")]);
        assert_eq!(s[0].name, SETUP_TOOL);
        assert_eq!(g, vec![call("filter_data")]);
        let (s, g) = split_setup(Some(call(SETUP_TOOL)), &[call(SETUP_TOOL)], vec![call("filter_data")]);
        assert_eq!(s.len(), 2, "the initialization step, then the additional setup step");
        assert_eq!(g.len(), 1);
        let (s, g) = split_setup(None, &[], vec![call("f")]);
        assert!(s.is_empty());
        assert_eq!(g.len(), 1);
    }

    #[test]
    fn parses_a_row_with_initialization_step() {
        let v = json!({"id": "d/1", "output": [{"name": "retrieve_data", "arguments": "{\"data_source\":\"$starting_table_var$\"}", "label": "SELECT_COL_0"}],
            "initialization_step": {"name": SETUP_TOOL, "arguments": {"database_path": "x/x.sqlite"}, "label": "starting_table_var"},
            "gold_answer": "[[1]]", "tools": "[]", "meta": null});
        let r = parse_row(&v, &mut Toolkits::default()).unwrap();
        assert_eq!(r.setup[0].arguments["database_path"], "x/x.sqlite");
        assert_eq!(r.gold[0].arguments["data_source"], "$starting_table_var$");
        assert_eq!(r.gold_answer.unwrap().len(), 1);
    }

    #[test]
    fn rows_share_their_toolkits_and_tools() {
        let tool = |n: &str| json!({"name": n, "description": "d", "parameters": {"type": "object"}, "output_parameters": null});
        let row =
            |id: &str, tools: Vec<Value>| json!({"id": id, "output": [], "tools": Value::Array(tools).to_string()});
        let mut kits = Toolkits::default();
        let a = parse_row(&row("a", vec![tool("f"), tool("g")]), &mut kits).unwrap();
        let b = parse_row(&row("b", vec![tool("f"), tool("g")]), &mut kits).unwrap();
        let c = parse_row(&row("c", vec![tool("g"), tool("h")]), &mut kits).unwrap();
        assert!(Arc::ptr_eq(&a.tools, &b.tools), "one toolkit held once");
        assert!(
            Arc::ptr_eq(&a.tools[1], &c.tools[0]),
            "a tool in two toolkits held once"
        );
        assert_eq!(kits.counts(), (2, 3));
        assert_eq!(c.tools[1].name, "h");
    }

    #[test]
    fn drift_rows_drop_the_a_new_specs_eval_never_reads() {
        let v = json!({"id": "d/1", "output": [], "meta": {"variant_kind": "drift",
            "variant": {"tools_new": [{"name": "f_v2"}], "changes": {"f": []}}}});
        let r = parse_row(&v, &mut Toolkits::default()).unwrap();
        assert!(r.meta["variant"].get("tools_new").is_none());
        assert!(r.meta["variant"]["changes"].is_object());
    }
}
