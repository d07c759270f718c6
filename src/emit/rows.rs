//! The rows emitter: `data/<split>.parquet` and `data/<split>.jsonl`, and [`read_rows`] to read
//! a built dataset's Parquet back.
//!
//! Row schema (the same for every family; `?` = null where the family has no such field):
//! `id, dataset, split, db_id?, input, evidence?, sql?` (strings),
//! `output: list<struct<name, arguments (JSON text), label>>` (what a model predicts),
//! `initialization_step?` (JSON text `{name, arguments, label}`: the setup call the framework runs
//! first, SLOT/SEL's join step), `additional_setup_steps?` (JSON text: a list of such calls the
//! framework runs next, `[]` when none; SLOT/SEL's further joined tables of subqueries and set
//! operations, labelled `starting_table_var_2`, …; null where `initialization_step` is),
//! `gold_answer?` (JSON text: list of rows), `ordered` (bool), `tools` (JSON text: this instance's tool
//! specs; an element `{"name": …}` alone names a tool of `tools/functions.json`: seq rows list the
//! dataset's API list by name, see [`encode_rows`]),
//! `key_values_and_descriptions` (JSON text), `difficulty?`, `meta?` (JSON text; variant rows
//! hold `variant_of`, `variant_kind` and `variant` there, see [`crate::variants`]).
//! The JSONL file has the same fields with the same JSON-text encodings, one row per line.
//! Parquet is written with a fixed `created_by` (`toolforge`), so files are byte-identical across
//! builds.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result};
use arrow_array::{BooleanArray, ListArray, RecordBatch, StringArray, StructArray};
use arrow_schema::{DataType, Field, Fields, Schema};

use crate::dataset::Example;
use crate::tools::Call;
use crate::verify::Answer;

mod concat;
mod parquet_writer;

pub(super) use concat::ParquetConcat;
pub use parquet_writer::ROW_GROUP_BYTES;

/// One group's rows of one split, encoded ([`rows_part`]): the unit a shard stores and the
/// writer appends ([`ParquetConcat`]; the JSONL lines go beside, written by the caller).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RowsPart {
    /// Rows in the part.
    pub rows: usize,
    /// Their Arrow size (`get_slice_memory_size` summed over the columns, bytes); a split's
    /// `num_bytes` in the dataset card is the sum over its parts.
    pub num_bytes: usize,
    /// The rows as a Parquet file of their own ([`parquet_writer::parquet_file`]).
    pub parquet: bytes::Bytes,
}

/// Encodes one group's `examples` (all of one split, in order): their JSONL lines written to
/// `jsonl` ([`write_jsonl`]) and their Parquet file, at once. Errors: `jsonl`'s, and Parquet
/// encoding errors (none for rows this build made).
pub fn rows_part<W: std::io::Write + Send>(examples: &[&Example], jsonl: &mut W) -> Result<RowsPart> {
    let rows = encode_rows(examples);
    let (parquet, written) = rayon::join(|| parquet_writer::parquet_file(&rows), || write_jsonl(&rows, jsonl));
    written?;
    let (num_bytes, parquet) = parquet?;
    Ok(RowsPart {
        rows: rows.len(),
        num_bytes,
        parquet: parquet.into(),
    })
}

/// The JSONL lines of `examples` (all of one split, in order), written to `jsonl` as
/// [`rows_part`] writes them, without encoding Parquet. Errors: `jsonl`'s.
pub fn write_rows_jsonl<W: std::io::Write>(examples: &[&Example], jsonl: &mut W) -> Result<()> {
    Ok(write_jsonl(&encode_rows(examples), jsonl)?)
}

fn call_fields() -> Fields {
    Fields::from(vec![
        Field::new("name", DataType::Utf8, false),
        Field::new("arguments", DataType::Utf8, false),
        Field::new("label", DataType::Utf8, false),
    ])
}

/// The Arrow schema of a row (module docs).
pub(super) fn row_schema() -> Schema {
    let s = |n: &str, null: bool| Field::new(n, DataType::Utf8, null);
    Schema::new(vec![
        s("id", false),
        s("dataset", false),
        s("split", false),
        s("db_id", true),
        s("input", false),
        s("evidence", true),
        s("sql", true),
        Field::new(
            "output",
            DataType::List(Arc::new(Field::new("item", DataType::Struct(call_fields()), false))),
            false,
        ),
        s("initialization_step", true),
        s("additional_setup_steps", true),
        s("gold_answer", true),
        Field::new("ordered", DataType::Boolean, false),
        s("tools", false),
        s("key_values_and_descriptions", false),
        s("difficulty", true),
        s("meta", true),
    ])
}

fn to_json<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_string(v).expect("serialisable")
}

/// A row with its JSON-text fields serialised once (for both Parquet and JSONL).
pub struct EncodedRow<'a> {
    example: &'a Example,
    arguments: Vec<String>,
    initialization_step: Option<String>,
    additional_setup_steps: Option<String>,
    gold_answer: Option<String>,
    tools: Arc<str>,
    /// `tools` as a JSON string literal (quoted, escaped), for the JSONL line.
    tools_quoted: Arc<serde_json::value::RawValue>,
    keys: String,
    meta: Option<String>,
}

/// Serialises the JSON-text fields of `examples`; a [`ToolSpec::reference`] is written as
/// `{"name": …}`, the name of a tool of the dataset catalog (`tools/functions.json`), so a seq
/// row's toolkit — the dataset's API list, API-BLEND §5.7.2 — is the list of its names and the
/// specs are written once, in the catalog (SeqTopV2: 137k rows over 11 domain lists). Each
/// toolkit is serialised once: rows sharing one ([`crate::tools::Toolkit::id`], the SLOT/SEL
/// rows of a join signature, a seq dataset's domain list) and rows with equal toolkits get the
/// same text.
///
/// [`ToolSpec::reference`]: crate::tools::ToolSpec::reference
pub fn encode_rows<'a>(examples: &[&'a Example]) -> Vec<EncodedRow<'a>> {
    use rayon::prelude::*;
    type Encoded = (Arc<str>, Arc<serde_json::value::RawValue>);
    // The distinct toolkits, in first-use order, and each row's index among them.
    let mut distinct: Vec<&'a crate::tools::Toolkit> = Vec::new();
    let mut by_id: std::collections::HashMap<usize, usize> = std::collections::HashMap::new();
    let mut by_value: std::collections::HashMap<Vec<&str>, Vec<usize>> = std::collections::HashMap::new();
    let slots: Vec<usize> = examples
        .iter()
        .map(|e| {
            let tools = &e.tools;
            if let Some(&i) = by_id.get(&tools.id()) {
                return i;
            }
            // Names, equality and references read a toolkit decoded from the store without
            // parsing its specs ([`crate::tools::Toolkit::names`]).
            let names: Vec<&str> = tools.names().collect();
            let seen = by_value.entry(names).or_default();
            let i = match seen.iter().find(|&&i| *distinct[i] == *tools) {
                Some(&i) => i,
                None => {
                    distinct.push(tools);
                    if seen.len() == 8 {
                        seen.remove(0);
                    }
                    seen.push(distinct.len() - 1);
                    distinct.len() - 1
                }
            };
            by_id.insert(tools.id(), i);
            i
        })
        .collect();
    let encoded: Vec<Encoded> = distinct
        .par_iter()
        .map(|tools| {
            if !tools.has_references() {
                let text: &Arc<str> = tools.json();
                let quoted = serde_json::value::RawValue::from_string(to_json(&&**text)).expect("a JSON string");
                return (text.clone(), quoted.into());
            }
            let written: Vec<serde_json::Value> = tools
                .iter()
                .map(|t| match t.is_reference() {
                    true => serde_json::json!({"name": t.name}),
                    false => serde_json::to_value(t).expect("serialisable"),
                })
                .collect();
            let text = to_json(&written);
            let quoted = serde_json::value::RawValue::from_string(to_json(&text)).expect("a JSON string");
            (text.into(), quoted.into())
        })
        .collect();
    examples
        .par_iter()
        .zip(slots)
        .map(|(e, slot)| {
            let (tools, tools_quoted) = encoded[slot].clone();
            EncodedRow {
                example: e,
                arguments: e.output.iter().map(|c| to_json(&c.arguments)).collect(),
                initialization_step: e.initialization_step.as_ref().map(to_json),
                additional_setup_steps: e
                    .initialization_step
                    .as_ref()
                    .map(|_| to_json(&e.additional_setup_steps)),
                gold_answer: e.gold_answer.as_ref().map(to_json),
                tools,
                tools_quoted,
                keys: to_json(&e.key_values_and_descriptions),
                meta: e.meta.as_ref().map(to_json),
            }
        })
        .collect()
}

#[derive(serde::Serialize)]
struct JsonCall<'a> {
    name: &'a str,
    arguments: &'a str,
    label: &'a str,
}

#[derive(serde::Serialize)]
struct JsonRow<'a> {
    id: &'a str,
    dataset: &'a str,
    split: &'a str,
    db_id: Option<&'a str>,
    input: &'a str,
    evidence: Option<&'a str>,
    sql: Option<&'a str>,
    output: Vec<JsonCall<'a>>,
    initialization_step: Option<&'a str>,
    additional_setup_steps: Option<&'a str>,
    gold_answer: Option<&'a str>,
    ordered: bool,
    tools: &'a serde_json::value::RawValue,
    key_values_and_descriptions: &'a str,
    difficulty: Option<&'a str>,
    meta: Option<&'a str>,
}

/// The rows as JSON lines, the same fields and JSON-text encodings as the Parquet columns,
/// written to `out` row by row (a large split's JSONL is never held whole: 250 MB on SeqTopV2's
/// train split, issue 17). Errors: `out`'s.
pub(super) fn write_jsonl(rows: &[EncodedRow], out: &mut impl std::io::Write) -> std::io::Result<()> {
    for r in rows {
        let e = r.example;
        let row = JsonRow {
            id: &e.id,
            dataset: &e.dataset,
            split: &e.split,
            db_id: e.db_id.as_deref(),
            input: &e.input,
            evidence: e.evidence.as_deref(),
            sql: e.sql.as_deref(),
            output: e
                .output
                .iter()
                .zip(&r.arguments)
                .map(|(c, a)| JsonCall {
                    name: &c.name,
                    arguments: a,
                    label: &c.label,
                })
                .collect(),
            initialization_step: r.initialization_step.as_deref(),
            additional_setup_steps: r.additional_setup_steps.as_deref(),
            gold_answer: r.gold_answer.as_deref(),
            ordered: e.ordered,
            tools: &r.tools_quoted,
            key_values_and_descriptions: &r.keys,
            difficulty: e.difficulty.as_deref(),
            meta: r.meta.as_deref(),
        };
        serde_json::to_writer(&mut *out, &row)?;
        out.write_all(b"\n")?;
    }
    Ok(())
}

/// One row of a built dataset, as read back from its Parquet files.
#[derive(Debug, Clone)]
pub struct StoredRow {
    /// Example id.
    pub id: String,
    /// Database id, if any.
    pub db_id: Option<String>,
    /// Gold calls.
    pub output: Vec<Call>,
    /// The setup call (`initialization_step` column; absent in datasets built before it).
    pub initialization_step: Option<Call>,
    /// The further setup calls (`additional_setup_steps` column; empty when absent or null).
    pub additional_setup_steps: Vec<Call>,
    /// Gold answer, if the family has one.
    pub gold_answer: Option<Answer>,
    /// Whether the answer is ordered.
    pub ordered: bool,
    /// For a variant row (`meta.variant_of`), its parent's id.
    pub variant_of: Option<String>,
    /// Tie runs of an ordered gold answer (`meta.order_ties`, [`crate::verify::compare`]).
    pub ties: Option<Vec<usize>>,
    /// A drift variant row (`meta.variant_kind` = `drift`): its (A_old) `tools` and
    /// `meta.variant` — the per-instance A_new `toolforge serve` enforces in its sessions
    /// ([`crate::variants::drift::Drift::of_instance`]). `None` for every other row.
    pub drift: Option<(Vec<crate::tools::ToolSpec>, serde_json::Value)>,
}

fn string_column<'b>(batch: &'b RecordBatch, file: &Path, name: &str) -> Result<&'b StringArray> {
    batch
        .column_by_name(name)
        .with_context(|| format!("{}: no column {name}", file.display()))?
        .as_any()
        .downcast_ref::<StringArray>()
        .with_context(|| format!("{}: column {name} is not text", file.display()))
}

/// [`StoredRow::drift`] of row `r`: its tools and `meta.variant` when `meta.variant_kind` is
/// `drift`.
fn drift_of_row(
    meta: &StringArray,
    tools: Option<&StringArray>,
    r: usize,
) -> Result<Option<(Vec<crate::tools::ToolSpec>, serde_json::Value)>> {
    if arrow_array::Array::is_null(meta, r) {
        return Ok(None);
    }
    let mut m: serde_json::Value = serde_json::from_str(meta.value(r))?;
    if m["variant_kind"] != "drift" {
        return Ok(None);
    }
    let Some(tools) = tools.filter(|t| !arrow_array::Array::is_null(*t, r)) else {
        return Ok(None);
    };
    Ok(Some((serde_json::from_str(tools.value(r))?, m["variant"].take())))
}

/// The files of a built dataset's `data/` with extension `extension` (`parquet`, `jsonl`), in name
/// order (the splits in a stable order). Errors: `dir` has no `data/` (not a built dataset).
pub fn data_files(dir: &Path, extension: &str) -> Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir.join("data"))
        .with_context(|| format!("{}: not a built dataset (no data/)", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == extension))
        .collect();
    files.sort();
    Ok(files)
}

/// Reads every row of `dir/data/*.parquet` (files in name order).
pub fn read_rows(dir: &Path) -> Result<Vec<StoredRow>> {
    let files = data_files(dir, "parquet")?;
    let mut out = Vec::new();
    for file in files {
        let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(
            std::fs::File::open(&file).with_context(|| format!("opening {}", file.display()))?,
        )?
        .build()?;
        for batch in reader {
            let batch = batch?;
            let ids = string_column(&batch, &file, "id")?;
            let dbs = string_column(&batch, &file, "db_id")?;
            let gold = string_column(&batch, &file, "gold_answer")?;
            let meta = string_column(&batch, &file, "meta")?;
            let init = string_column(&batch, &file, "initialization_step").ok();
            let tools = string_column(&batch, &file, "tools").ok();
            let additional = string_column(&batch, &file, "additional_setup_steps").ok();
            let ordered = batch
                .column_by_name("ordered")
                .and_then(|c| c.as_any().downcast_ref::<BooleanArray>())
                .with_context(|| format!("{}: no boolean column ordered", file.display()))?;
            let output = batch
                .column_by_name("output")
                .and_then(|c| c.as_any().downcast_ref::<ListArray>())
                .with_context(|| format!("{}: no list column output", file.display()))?;
            for r in 0..batch.num_rows() {
                let calls = output.value(r);
                let calls = calls.as_any().downcast_ref::<StructArray>().context("output items")?;
                let get = |i: usize| {
                    calls
                        .column(i)
                        .as_any()
                        .downcast_ref::<StringArray>()
                        .context("output field")
                };
                let (names, args, labels) = (get(0)?, get(1)?, get(2)?);
                let seq: Vec<Call> = (0..arrow_array::Array::len(calls))
                    .map(|i| {
                        Ok(Call {
                            name: names.value(i).into(),
                            arguments: serde_json::from_str(args.value(i))?,
                            label: labels.value(i).into(),
                        })
                    })
                    .collect::<Result<_, serde_json::Error>>()?;
                let null = |a: &StringArray| arrow_array::Array::is_null(a, r);
                out.push(StoredRow {
                    id: ids.value(r).into(),
                    db_id: (!null(dbs)).then(|| dbs.value(r).to_string()),
                    output: seq,
                    initialization_step: match init.filter(|c| !null(c)) {
                        Some(c) => Some(serde_json::from_str(c.value(r))?),
                        None => None,
                    },
                    additional_setup_steps: match additional.filter(|c| !null(c)) {
                        Some(c) => serde_json::from_str(c.value(r))?,
                        None => vec![],
                    },
                    gold_answer: if null(gold) {
                        None
                    } else {
                        Some(serde_json::from_str(gold.value(r))?)
                    },
                    ordered: ordered.value(r),
                    ties: if null(meta) {
                        None
                    } else {
                        crate::verify::ties_from_meta(Some(&serde_json::from_str(meta.value(r))?))
                    },
                    variant_of: if null(meta) {
                        None
                    } else {
                        serde_json::from_str::<serde_json::Value>(meta.value(r))?["variant_of"]
                            .as_str()
                            .map(String::from)
                    },
                    drift: drift_of_row(meta, tools, r)?,
                });
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::{ToolSpec, Toolkit};

    /// A spec whose JSON text has characters to escape (quotes, a newline).
    pub(super) fn spec(name: &str) -> ToolSpec {
        ToolSpec {
            description: format!("\"{name}\" does it\n"),
            ..crate::tools::test_spec(name)
        }
    }

    #[test]
    fn shared_equal_and_reference_toolkits_encode_as_their_own_specs_and_references_as_names() {
        let shared = Toolkit::from(vec![spec("get_a"), spec("get_b")]);
        let rows = [
            Example {
                id: "1".into(),
                tools: shared.clone(),
                ..Example::default()
            },
            Example {
                id: "2".into(),
                tools: shared.clone(),
                ..Example::default()
            },
            Example {
                id: "3".into(),
                tools: vec![spec("get_a"), spec("get_b")].into(),
                ..Example::default()
            },
            Example {
                id: "4".into(),
                tools: vec![ToolSpec::reference("get_c")].into(),
                ..Example::default()
            },
            Example {
                id: "5".into(),
                tools: vec![spec("get_b")].into(),
                ..Example::default()
            },
        ];
        let refs: Vec<&Example> = rows.iter().collect();
        let encoded = encode_rows(&refs);
        let mut jsonl = Vec::new();
        write_jsonl(&encoded, &mut jsonl).unwrap();
        let lines: Vec<serde_json::Value> = jsonl
            .split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .map(|l| serde_json::from_slice(l).unwrap())
            .collect();
        let expected = [
            to_json(&[spec("get_a"), spec("get_b")]),
            to_json(&[spec("get_a"), spec("get_b")]),
            to_json(&[spec("get_a"), spec("get_b")]),
            r#"[{"name":"get_c"}]"#.to_string(),
            to_json(&[spec("get_b")]),
        ];
        for ((r, line), want) in encoded.iter().zip(&lines).zip(&expected) {
            assert_eq!(&*r.tools, want.as_str(), "row {}", r.example.id);
            assert_eq!(
                line["tools"].as_str(),
                Some(want.as_str()),
                "JSONL row {}",
                r.example.id
            );
        }
    }
}
