//! One split's Parquet file assembled from its groups' Parquet parts (issue 34 item 1): each
//! group's rows are encoded once, as a Parquet file of their own ([`super::rows_part`]: a shard
//! does it for the groups it owns and stores the bytes), and [`ParquetConcat`] splices their
//! row groups' encoded column chunks into the split's file without decoding or compressing
//! anything (the Parquet format's row groups are independent; `SerializedRowGroupWriter::
//! append_column` rewrites only the chunk offsets, the page index and the footer).
//!
//! A whole build and a merge assemble the same parts in the same group order, so their files
//! are byte-identical. The file has at least one row group per group (a database's rows
//! together, split further at [`super::parquet_writer::ROW_GROUP_BYTES`]), so a reader
//! filtering on `db_id` skips whole row groups.

use std::io::Write;
use std::sync::Arc;

use anyhow::{Context, Result};
use parquet::column::writer::ColumnCloseResult;
use parquet::file::metadata::{PageIndexPolicy, ParquetMetaDataReader};
use parquet::file::writer::SerializedFileWriter;

/// The Parquet file of one split written part by part ([`ParquetConcat::append`]) into `W`.
pub(in crate::emit) struct ParquetConcat<W: Write + Send> {
    /// Until the first part: the output (the schema and key-value metadata come from a part).
    out: Option<W>,
    writer: Option<SerializedFileWriter<W>>,
}

impl<W: Write + Send> ParquetConcat<W> {
    /// A file to be written into `out`.
    pub(in crate::emit) fn new(out: W) -> ParquetConcat<W> {
        ParquetConcat {
            out: Some(out),
            writer: None,
        }
    }

    /// Appends every row group of `part` (a whole Parquet file of the row schema, as
    /// [`super::rows_part`] writes it): its column chunks copied as encoded, their statistics and
    /// page index kept. The file takes its schema, `created_by` and key-value metadata (the
    /// Arrow schema) from the first part. Errors: a part that is not a Parquet file, or whose
    /// schema differs from the first part's.
    pub(in crate::emit) fn append(&mut self, part: &bytes::Bytes) -> Result<()> {
        let bytes = part.clone();
        let meta = ParquetMetaDataReader::new()
            .with_page_index_policy(PageIndexPolicy::Optional)
            .parse_and_finish(&bytes)
            .context("a rows part that is not a Parquet file")?;
        if self.writer.is_none() {
            let file = meta.file_metadata();
            let props = super::parquet_writer::writer_properties(1)?
                .into_builder()
                .set_key_value_metadata(file.key_value_metadata().cloned())
                .build();
            let out = self.out.take().expect("output until the first part");
            let schema = file.schema_descr().root_schema_ptr();
            self.writer = Some(SerializedFileWriter::new(out, schema, Arc::new(props))?);
        }
        let writer = self.writer.as_mut().expect("made above");
        for (g, group) in meta.row_groups().iter().enumerate() {
            let index = meta.page_index_for_row_group(g);
            let mut out = writer.next_row_group()?;
            for (c, column) in group.columns().iter().enumerate() {
                let close = ColumnCloseResult {
                    bytes_written: column.compressed_size() as u64,
                    rows_written: group.num_rows() as u64,
                    metadata: column.clone(),
                    bloom_filter: None,
                    column_index: index.column_index(c).cloned(),
                    offset_index: index.offset_index(c).cloned(),
                };
                out.append_column(&bytes, close)?;
            }
            out.close()?;
        }
        Ok(())
    }

    /// Writes the footer; the output back. Errors: no part was appended (a split always has
    /// rows), or the output's.
    pub(in crate::emit) fn finish(self) -> Result<W> {
        let writer = self
            .writer
            .ok_or_else(|| anyhow::anyhow!("a Parquet file without any rows part"))?;
        Ok(writer.into_inner()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataset::Example;
    use crate::emit::rows::tests::spec;
    use crate::tools::Toolkit;
    use arrow_array::{Array, RecordBatch};
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

    fn examples(db: &str, n: usize) -> Vec<Example> {
        let tools = Toolkit::from(vec![spec(&format!("get_{db}_tool"))]);
        (0..n)
            .map(|i| Example {
                id: format!("{db}/{i}"),
                db_id: Some(db.into()),
                input: format!("question {i} of {db}"),
                tools: tools.clone(),
                ..Example::default()
            })
            .collect()
    }

    fn read(file: Vec<u8>) -> (Vec<RecordBatch>, usize) {
        let reader = ParquetRecordBatchReaderBuilder::try_new(bytes::Bytes::from(file)).unwrap();
        let groups = reader.metadata().num_row_groups();
        (reader.build().unwrap().map(Result::unwrap).collect(), groups)
    }

    /// The independent judge is arrow's own reader: the spliced file reads back as the parts'
    /// rows in part order, one row group per part, with the Arrow schema the writer gives.
    #[test]
    fn spliced_parts_read_back_as_the_parts_rows_in_order() {
        let (a, b) = (examples("alpha", 3), examples("beta", 2));
        let part = |es: &[Example]| {
            let refs: Vec<&Example> = es.iter().collect();
            crate::emit::rows::rows_part(&refs, &mut Vec::new()).unwrap().parquet
        };
        let mut concat = ParquetConcat::new(Vec::new());
        concat.append(&part(&a)).unwrap();
        concat.append(&part(&b)).unwrap();
        let (batches, groups) = read(concat.finish().unwrap());
        assert_eq!(groups, 2);
        let ids: Vec<String> = batches
            .iter()
            .flat_map(|b| {
                let col = b.column_by_name("id").unwrap();
                let s = col.as_any().downcast_ref::<arrow_array::StringArray>().unwrap();
                (0..s.len()).map(|i| s.value(i).to_string()).collect::<Vec<_>>()
            })
            .collect();
        assert_eq!(ids, ["alpha/0", "alpha/1", "alpha/2", "beta/0", "beta/1"]);
        assert_eq!(*batches[0].schema(), crate::emit::rows::row_schema());
        assert!(ParquetConcat::new(Vec::new()).finish().is_err(), "no part");
        let garbage = bytes::Bytes::from_static(b"not parquet");
        assert!(ParquetConcat::new(Vec::new()).append(&garbage).is_err());
    }
}
