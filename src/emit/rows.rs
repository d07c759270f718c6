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
//! `gold_answer?` (JSON text: list of rows), `ordered` (bool), `tools` (JSON text: this instance's tool specs),
//! `key_values_and_descriptions` (JSON text), `difficulty?`, `meta?` (JSON text; variant rows
//! hold `variant_of`, `variant_kind` and `variant` there, see [`crate::variants`]).
//! The JSONL file has the same fields with the same JSON-text encodings, one row per line.
//! Parquet is written with a fixed `created_by` (`toolforge`), so files are byte-identical across
//! builds.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result};
use arrow_array::{ArrayRef, BooleanArray, ListArray, RecordBatch, StringArray, StructArray};
use arrow_buffer::OffsetBuffer;
use arrow_schema::{DataType, Field, Fields, Schema};

use crate::dataset::Example;
use crate::tools::Call;
use crate::verify::Answer;

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

/// Serialises the JSON-text fields of `examples`; [`ToolSpec::reference`]s are written as the
/// `catalog` spec of their name. Each toolkit is serialised once: rows sharing one
/// ([`crate::tools::Toolkit::id`], the SLOT/SEL rows of a join signature) and rows with equal
/// toolkits (seq rows, whose references resolve to the catalog's specs) get the same text.
///
/// [`ToolSpec::reference`]: crate::tools::ToolSpec::reference
pub fn encode_rows<'a>(examples: &[&'a Example], catalog: &[crate::tools::ToolSpec]) -> Vec<EncodedRow<'a>> {
    use rayon::prelude::*;
    type Encoded = (Arc<str>, Arc<serde_json::value::RawValue>);
    let by_name: std::collections::HashMap<&str, &crate::tools::ToolSpec> =
        catalog.iter().map(|t| (t.name.as_str(), t)).collect();
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
            let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
            let seen = by_value.entry(names).or_default();
            let i = match seen.iter().find(|&&i| distinct[i].as_slice() == tools.as_slice()) {
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
            if !tools.iter().any(crate::tools::ToolSpec::is_reference) {
                let text: &Arc<str> = tools.json();
                let quoted = serde_json::value::RawValue::from_string(to_json(&&**text)).expect("a JSON string");
                return (text.clone(), quoted.into());
            }
            let resolved: Vec<&crate::tools::ToolSpec> = tools
                .iter()
                .map(|t| match by_name.get(t.name.as_str()) {
                    Some(spec) if t.is_reference() => *spec,
                    _ => t,
                })
                .collect();
            let text = to_json(&resolved);
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

/// Index of the `tools` column in [`row_schema`].
const TOOLS: usize = 12;

/// The record batch of `others` ([`other_columns`]) with `tools` put back at its place.
fn batch_of(mut others: Vec<ArrayRef>, tools: ArrayRef) -> RecordBatch {
    others.insert(TOOLS, tools);
    RecordBatch::try_new(Arc::new(row_schema()), others).expect("schema matches columns")
}

/// The `tools` column of `rows`: each row's toolkit text, the largest column by far (a SEL row
/// carries its ~61 specs: 64 KB a row on Spider train), allocated at its exact size.
fn tools_column(rows: &[EncodedRow]) -> ArrayRef {
    let len = rows.iter().map(|r| r.tools.len()).sum();
    let mut b = arrow_array::builder::StringBuilder::with_capacity(rows.len(), len);
    for r in rows {
        b.append_value(&*r.tools);
    }
    Arc::new(b.finish())
}

/// Every column of [`row_schema`] but `tools`, in schema order.
fn other_columns(rows: &[EncodedRow]) -> Vec<ArrayRef> {
    fn strs<'r>(rows: &'r [EncodedRow], f: &dyn for<'x> Fn(&'x EncodedRow<'r>) -> &'x str) -> ArrayRef {
        Arc::new(rows.iter().map(|r| Some(f(r))).collect::<StringArray>())
    }
    fn opt<'r>(rows: &'r [EncodedRow], f: &dyn for<'x> Fn(&'x EncodedRow<'r>) -> Option<&'x str>) -> ArrayRef {
        Arc::new(rows.iter().map(f).collect::<StringArray>())
    }
    let calls: Vec<(&Call, &str)> = rows
        .iter()
        .flat_map(|r| r.example.output.iter().zip(r.arguments.iter().map(String::as_str)))
        .collect();
    let call_arrays: Vec<ArrayRef> = vec![
        Arc::new(
            calls
                .iter()
                .map(|(c, _)| Some(c.name.as_str()))
                .collect::<StringArray>(),
        ),
        Arc::new(calls.iter().map(|(_, a)| Some(*a)).collect::<StringArray>()),
        Arc::new(
            calls
                .iter()
                .map(|(c, _)| Some(c.label.as_str()))
                .collect::<StringArray>(),
        ),
    ];
    let structs = StructArray::new(call_fields(), call_arrays, None);
    let offsets = OffsetBuffer::from_lengths(rows.iter().map(|r| r.example.output.len()));
    let output = ListArray::new(
        Arc::new(Field::new("item", DataType::Struct(call_fields()), false)),
        offsets,
        Arc::new(structs),
        None,
    );
    vec![
        strs(rows, &|r| &r.example.id),
        strs(rows, &|r| &r.example.dataset),
        strs(rows, &|r| &r.example.split),
        opt(rows, &|r| r.example.db_id.as_deref()),
        strs(rows, &|r| &r.example.input),
        opt(rows, &|r| r.example.evidence.as_deref()),
        opt(rows, &|r| r.example.sql.as_deref()),
        Arc::new(output),
        opt(rows, &|r| r.initialization_step.as_deref()),
        opt(rows, &|r| r.additional_setup_steps.as_deref()),
        opt(rows, &|r| r.gold_answer.as_deref()),
        Arc::new(rows.iter().map(|r| Some(r.example.ordered)).collect::<BooleanArray>()),
        strs(rows, &|r| &r.keys),
        opt(rows, &|r| r.example.difficulty.as_deref()),
        opt(rows, &|r| r.meta.as_deref()),
    ]
}

/// Target in-memory (Arrow) size of one Parquet row group, in bytes. The Hugging Face dataset
/// viewer reads whole row groups and refuses those above ~286 MiB; its docs recommend 100–300 MB.
/// 64 MiB keeps a margin and lets readers stream large splits.
pub const ROW_GROUP_BYTES: usize = 64 << 20;

/// Rows per row group for `rows` rows whose record batch takes `bytes` of Arrow memory
/// (`RecordBatch::get_array_memory_size`): as many as fit `group_bytes` ([`ROW_GROUP_BYTES`])
/// at the mean row size (at least 1). A function of the data only, so builds stay
/// byte-identical.
fn rows_per_group(rows: usize, bytes: usize, group_bytes: usize) -> usize {
    let (rows, bytes) = (rows.max(1), bytes.max(1));
    (group_bytes as u128 * rows as u128 / bytes as u128).clamp(1, rows as u128) as usize
}

/// The Parquet writer's settings for row groups of `per_group` rows ([`parquet_file`]).
fn writer_properties(per_group: usize) -> Result<parquet::file::properties::WriterProperties> {
    use parquet::basic::{Compression, ZstdLevel};
    Ok(parquet::file::properties::WriterProperties::builder()
        .set_created_by("toolforge".into())
        .set_compression(Compression::ZSTD(ZstdLevel::try_new(3)?))
        .set_max_row_group_row_count(Some(per_group))
        .set_statistics_enabled(parquet::file::properties::EnabledStatistics::Page)
        .build())
}

/// What a [`StringArray`] of `lengths` (UTF-8 byte lengths, no nulls) built by collecting an
/// exact-size iterator takes: `(get_array_memory_size, get_slice_memory_size)`. The row groups
/// were sized by the whole record batch so built, before [`parquet_file`] built `tools` a row
/// group at a time; computing that size without building the column keeps the files
/// byte-identical. The first counts allocated capacity: the offsets are reserved exactly
/// (`n + 1` of `i32`), the values start at 1,024 bytes and grow as a `Vec<u8>` does (to the
/// larger of twice the capacity and what is needed); the second counts `n + 1` offsets and the
/// values' bytes. `tools_sizes_equal_the_built_columns` checks both against arrow.
fn tools_sizes(lengths: impl Iterator<Item = usize>) -> (usize, usize) {
    let (mut n, mut len, mut capacity) = (0usize, 0usize, 1024usize);
    for l in lengths {
        n += 1;
        len += l;
        if len > capacity {
            capacity = len.max(capacity * 2);
        }
    }
    let offsets = 4 * (n + 1);
    (std::mem::size_of::<StringArray>() + offsets + capacity, offsets + len)
}

/// The rows as one Parquet file, with the Arrow size of their record batch (the split's
/// `num_bytes` in the dataset card: `get_slice_memory_size` summed over the columns).
/// zstd level 3 (the repeated `tools` JSON compresses ~50×), row groups of [`rows_per_group`]
/// rows, page statistics (the page index lets readers such as the dataset viewer fetch row
/// ranges), `created_by` fixed to `toolforge`.
///
/// Memory: every column but `tools` is built for the whole split (they are small), `tools` one
/// row group at a time, so a split never holds its rows' toolkit texts side by side (5,742
/// Spider-train SEL rows: 370 MB, 476 MB allocated). The file is byte for byte the one the whole
/// record batch written in one call gives: the row groups are the same ([`tools_sizes`]), and the
/// writer is fed one whole row group per call.
pub(super) fn parquet_file(rows: &[EncodedRow]) -> Result<(usize, Vec<u8>)> {
    parquet_file_grouped(rows, ROW_GROUP_BYTES)
}

/// [`parquet_file`] with row groups sized to `group_bytes` of Arrow memory.
fn parquet_file_grouped(rows: &[EncodedRow], group_bytes: usize) -> Result<(usize, Vec<u8>)> {
    use arrow_array::Array;
    let others = other_columns(rows);
    let (tools_memory, tools_slice) = tools_sizes(rows.iter().map(|r| r.tools.len()));
    let memory = others.iter().map(|c| c.get_array_memory_size()).sum::<usize>() + tools_memory;
    let num_bytes = others
        .iter()
        .map(|c| c.to_data().get_slice_memory_size().unwrap_or(0))
        .sum::<usize>()
        + tools_slice;
    let per_group = rows_per_group(rows.len(), memory, group_bytes);
    let mut buf = Vec::new();
    let schema = Arc::new(row_schema());
    let mut writer = parquet::arrow::ArrowWriter::try_new(&mut buf, schema, Some(writer_properties(per_group)?))?;
    for (i, group) in rows.chunks(per_group).enumerate() {
        let columns = others.iter().map(|c| c.slice(i * per_group, group.len())).collect();
        writer.write(&batch_of(columns, tools_column(group)))?;
    }
    writer.close()?;
    Ok((num_bytes, buf))
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

/// Reads every row of `dir/data/*.parquet` (files in name order).
pub fn read_rows(dir: &Path) -> Result<Vec<StoredRow>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir.join("data"))
        .with_context(|| format!("{}: not a built dataset (no data/)", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "parquet"))
        .collect();
    files.sort();
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
    fn spec(name: &str) -> ToolSpec {
        ToolSpec {
            description: format!("\"{name}\" does it\n"),
            ..crate::tools::test_spec(name)
        }
    }

    /// The file the whole record batch gives, written in one call (how `parquet_file` worked
    /// before it built `tools` a row group at a time): the oracle for its bytes and sizes.
    fn whole_batch_file(rows: &[EncodedRow], group_bytes: usize) -> (usize, Vec<u8>) {
        let tools: ArrayRef = Arc::new(rows.iter().map(|r| Some(&*r.tools)).collect::<StringArray>());
        let batch = batch_of(other_columns(rows), tools);
        let num_bytes = batch
            .columns()
            .iter()
            .map(|c| c.to_data().get_slice_memory_size().unwrap())
            .sum();
        let per_group = rows_per_group(batch.num_rows(), batch.get_array_memory_size(), group_bytes);
        let mut buf = Vec::new();
        let props = writer_properties(per_group).unwrap();
        let mut writer = parquet::arrow::ArrowWriter::try_new(&mut buf, batch.schema(), Some(props)).unwrap();
        writer.write(&batch).unwrap();
        writer.close().unwrap();
        (num_bytes, buf)
    }

    #[test]
    fn tools_sizes_equal_the_built_columns() {
        use arrow_array::Array;
        let mut seed = 7u64;
        let mut next = move |m: u64| {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (seed >> 33) % m
        };
        let mut cases: Vec<Vec<usize>> = vec![vec![], vec![0], vec![1024], vec![1025], vec![1, 1023, 1], vec![65_536; 50]];
        for _ in 0..40 {
            let n = next(300) as usize;
            let scale = [10, 1_000, 70_000][next(3) as usize];
            cases.push((0..n).map(|_| next(scale) as usize).collect());
        }
        for lengths in cases {
            let texts: Vec<String> = lengths.iter().map(|&l| "x".repeat(l)).collect();
            let built = texts.iter().map(|t| Some(t.as_str())).collect::<StringArray>();
            let expected = (built.get_array_memory_size(), built.to_data().get_slice_memory_size().unwrap());
            assert_eq!(tools_sizes(lengths.iter().copied()), expected, "lengths {lengths:?}");
        }
    }

    #[test]
    fn parquet_written_a_row_group_at_a_time_equals_the_whole_batch_file() {
        // Rows with every column filled or null in turn, several calls, toolkits of several sizes
        // shared by several rows; row groups from one row to all of them.
        let toolkits: Vec<Toolkit> = (1..6)
            .map(|k| (0..k * 7).map(|i| spec(&format!("get_{k}_{i}"))).collect::<Vec<_>>().into())
            .collect();
        let examples: Vec<Example> = (0..97)
            .map(|i| Example {
                id: format!("t/{i}"),
                dataset: "t".into(),
                split: "dev".into(),
                db_id: (i % 3 != 0).then(|| format!("db{}", i % 4)),
                input: format!("question {i} {}", "é".repeat(i % 5)),
                evidence: (i % 4 == 0).then(|| "evidence".into()),
                sql: (i % 2 == 0).then(|| format!("SELECT {i}")),
                output: (0..i % 4)
                    .map(|c| Call {
                        name: format!("call_{c}"),
                        arguments: serde_json::json!({"k": c, "i": i}).as_object().unwrap().clone(),
                        label: format!("$var_{c}"),
                    })
                    .collect(),
                gold_answer: (i % 5 != 0).then(|| vec![vec![crate::verify::Datum::Int(i as i64)]; i % 3]),
                ordered: i % 2 == 1,
                tools: toolkits[i % toolkits.len()].clone(),
                difficulty: (i % 6 == 0).then(|| "hard".into()),
                meta: (i % 7 == 0).then(|| serde_json::json!({"variant_of": i})),
                ..Example::default()
            })
            .collect();
        let refs: Vec<&Example> = examples.iter().collect();
        let rows = encode_rows(&refs, &[]);
        for group_bytes in [1, 4_000, 60_000, 250_000, ROW_GROUP_BYTES] {
            for n in [0, 1, 2, 50, rows.len()] {
                let (num_bytes, file) = parquet_file_grouped(&rows[..n], group_bytes).unwrap();
                let (want_bytes, want_file) = whole_batch_file(&rows[..n], group_bytes);
                assert_eq!(num_bytes, want_bytes, "{n} rows, {group_bytes}-byte groups: num_bytes");
                assert!(file == want_file, "{n} rows, {group_bytes}-byte groups: the files differ");
            }
        }
        // The row groups really are several (the case the one-call writer split itself).
        let (_, file) = parquet_file_grouped(&rows, 60_000).unwrap();
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("t.parquet"), file).unwrap();
        let reader =
            parquet::file::reader::SerializedFileReader::new(std::fs::File::open(dir.path().join("t.parquet")).unwrap())
                .unwrap();
        let groups = parquet::file::reader::FileReader::metadata(&reader).num_row_groups();
        assert!(groups > 3, "{groups} row groups");
    }

    #[test]
    fn shared_equal_and_reference_toolkits_encode_as_their_own_specs() {
        let catalog = vec![spec("get_c")];
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
        let encoded = encode_rows(&refs, &catalog);
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
            to_json(&catalog),
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
