//! The rows' Parquet file ([`parquet_file`]): the Arrow columns of the row schema
//! ([`super::row_schema`]), written a row group at a time.

use std::sync::Arc;

use anyhow::Result;
use arrow_array::{ArrayRef, BooleanArray, ListArray, RecordBatch, StringArray, StructArray};
use arrow_buffer::OffsetBuffer;
use arrow_schema::{DataType, Field};

use super::{EncodedRow, call_fields, row_schema};
use crate::tools::Call;

/// The record batch of `others` ([`other_columns`]) with `tools` put back at its place in
/// [`row_schema`].
fn batch_of(mut others: Vec<ArrayRef>, tools: ArrayRef) -> RecordBatch {
    let schema = row_schema();
    others.insert(schema.index_of("tools").expect("a tools column"), tools);
    RecordBatch::try_new(Arc::new(schema), others).expect("schema matches columns")
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
pub(super) fn writer_properties(per_group: usize) -> Result<parquet::file::properties::WriterProperties> {
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
pub(in crate::emit) fn parquet_file(rows: &[EncodedRow]) -> Result<(usize, Vec<u8>)> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataset::Example;
    use crate::emit::rows::encode_rows;
    use crate::emit::rows::tests::spec;
    use crate::tools::Toolkit;

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
        let mut cases: Vec<Vec<usize>> = vec![
            vec![],
            vec![0],
            vec![1024],
            vec![1025],
            vec![1, 1023, 1],
            vec![65_536; 50],
        ];
        for _ in 0..40 {
            let n = next(300) as usize;
            let scale = [10, 1_000, 70_000][next(3) as usize];
            cases.push((0..n).map(|_| next(scale) as usize).collect());
        }
        for lengths in cases {
            let texts: Vec<String> = lengths.iter().map(|&l| "x".repeat(l)).collect();
            let built = texts.iter().map(|t| Some(t.as_str())).collect::<StringArray>();
            let expected = (
                built.get_array_memory_size(),
                built.to_data().get_slice_memory_size().unwrap(),
            );
            assert_eq!(tools_sizes(lengths.iter().copied()), expected, "lengths {lengths:?}");
        }
    }

    #[test]
    fn parquet_written_a_row_group_at_a_time_equals_the_whole_batch_file() {
        // Rows with every column filled or null in turn, several calls, toolkits of several sizes
        // shared by several rows; row groups from one row to all of them.
        let toolkits: Vec<Toolkit> = (1..6)
            .map(|k| {
                (0..k * 7)
                    .map(|i| spec(&format!("get_{k}_{i}")))
                    .collect::<Vec<_>>()
                    .into()
            })
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
        let rows = encode_rows(&refs);
        for group_bytes in [1, 4_000, 60_000, 250_000, ROW_GROUP_BYTES] {
            for n in [0, 1, 2, 50, rows.len()] {
                let (num_bytes, file) = parquet_file_grouped(&rows[..n], group_bytes).unwrap();
                let (want_bytes, want_file) = whole_batch_file(&rows[..n], group_bytes);
                assert_eq!(num_bytes, want_bytes, "{n} rows, {group_bytes}-byte groups: num_bytes");
                assert!(
                    file == want_file,
                    "{n} rows, {group_bytes}-byte groups: the files differ"
                );
            }
        }
        // The row groups really are several (the case the one-call writer split itself).
        let (_, file) = parquet_file_grouped(&rows, 60_000).unwrap();
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("t.parquet"), file).unwrap();
        let reader = parquet::file::reader::SerializedFileReader::new(
            std::fs::File::open(dir.path().join("t.parquet")).unwrap(),
        )
        .unwrap();
        let groups = parquet::file::reader::FileReader::metadata(&reader).num_row_groups();
        assert!(groups > 3, "{groups} row groups");
    }
}
