//! [`Preview`]: a value's JSON preview written straight from its Arrow arrays, cell by cell, as
//! [`super::value_json`] shapes it (the same text, byte for byte) — without building the
//! `serde_json::Value` tree or a column of `Datum`s first. The live server writes tool outputs
//! this way, so the memory an answer takes is its text alone, which it counts and reserves
//! before writing it (issue 47: an answer of 100,000 rows as a `Value` tree took several times
//! the table's bytes).

use arrow_array::{Array, ArrayRef, RecordBatch};
use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};

use super::{Value, value_json};
use crate::tools::table::datum_at;

/// `value` shown with at most `max_rows` rows, serialised as [`super::value_json`] would
/// serialise it.
#[derive(Clone, Copy)]
pub struct Preview<'a> {
    /// The value shown.
    pub value: &'a Value,
    /// Most rows (list values) shown.
    pub max_rows: usize,
}

impl Serialize for Preview<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.value {
            Value::Column(a) => {
                let shown = Cells(a, a.len().min(self.max_rows));
                if a.len() <= self.max_rows {
                    return shown.serialize(s);
                }
                let mut m = s.serialize_map(Some(3))?;
                m.serialize_entry("values", &shown)?;
                m.serialize_entry("total", &a.len())?;
                m.serialize_entry("truncated", &true)?;
                m.end()
            }
            Value::Table(t) => {
                let mut m = s.serialize_map(Some(4))?;
                let names: Vec<&String> = t.schema_ref().fields().iter().map(|f| f.name()).collect();
                m.serialize_entry("columns", &names)?;
                m.serialize_entry("rows", &Rows(t, t.num_rows().min(self.max_rows)))?;
                m.serialize_entry("total_rows", &t.num_rows())?;
                m.serialize_entry("truncated", &(t.num_rows() > self.max_rows))?;
                m.end()
            }
            // One value, or a grouped table's two facts: small.
            Value::Scalar(_) | Value::Grouped(_) => value_json(self.value, self.max_rows).serialize(s),
        }
    }
}

/// The first `.1` cells of a list.
struct Cells<'a>(&'a ArrayRef, usize);

impl Serialize for Cells<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.1))?;
        for r in 0..self.1 {
            seq.serialize_element(&datum_at(self.0.as_ref(), r))?;
        }
        seq.end()
    }
}

/// The first `.1` rows of a table, each an array of its cells.
struct Rows<'a>(&'a RecordBatch, usize);

/// Row `.1` of a table.
struct Row<'a>(&'a RecordBatch, usize);

impl Serialize for Rows<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.1))?;
        for r in 0..self.1 {
            seq.serialize_element(&Row(self.0, r))?;
        }
        seq.end()
    }
}

impl Serialize for Row<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.0.num_columns()))?;
        for c in self.0.columns() {
            seq.serialize_element(&datum_at(c.as_ref(), self.1))?;
        }
        seq.end()
    }
}

/// Bytes of `value`'s JSON text, counted by writing it nowhere (no allocation).
pub fn json_len<T: Serialize + ?Sized>(value: &T) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0 += b.len();
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut n = Count(0);
    let _ = serde_json::to_writer(&mut n, value);
    n.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::table::{array_from_datums, batch_from_columns};
    use crate::verify::Datum;

    fn values() -> Vec<Value> {
        let mixed = vec![
            Datum::Int(1),
            Datum::Real(2.5),
            Datum::Real(-0.0),
            Datum::Real(1e300),
            Datum::Text("tab\t\"quote\" é \u{1}".into()),
            Datum::Null,
        ];
        let texts: Vec<Datum> = (0..7).map(|i| Datum::Text(format!("t{i}"))).collect();
        let ints: Vec<Datum> = (0..7).map(Datum::Int).collect();
        let reals: Vec<Datum> = (0..7).map(|i| Datum::real(i as f64 / 3.0)).collect();
        let table = batch_from_columns(
            &["a".into(), "b b".into(), "c".into()],
            vec![texts.clone(), ints.clone(), reals],
        );
        vec![
            Value::Table(table.clone()),
            Value::Table(table.slice(0, 0)),
            Value::Column(array_from_datums(&mixed)),
            Value::Column(array_from_datums(&texts)),
            Value::Column(array_from_datums(&ints[..2])),
            Value::Scalar(Datum::Text("x".into())),
            Value::Scalar(Datum::Null),
        ]
    }

    /// The preview is value_json's text, byte for byte, shown whole or cut to fewer rows, and
    /// [`json_len`] counts it exactly.
    #[test]
    fn preview_is_value_json_text_and_json_len_counts_it() {
        for v in values() {
            for max_rows in [0, 1, 3, 100] {
                let want = value_json(&v, max_rows).to_string();
                let preview = Preview { value: &v, max_rows };
                assert_eq!(serde_json::to_string(&preview).unwrap(), want);
                assert_eq!(json_len(&preview), want.len());
            }
        }
    }
}
