//! Columns whose cells mix storage classes: numbers beside text in one column (a REAL column
//! with some `''` cells, an untyped column holding `5` and `'n/a'`).
//!
//! SQLite types each *value*, not the column (SQLite "Datatypes In SQLite" §2–§4): a REAL
//! column keeps a text cell it cannot convert as text, and compares, orders and groups every
//! cell by its own storage class — NULL < numbers < text, numbers by value, text by bytes
//! (§4.1). Reading such a column as one Arrow type would order `'9.5'` above `'10.0'` and put
//! the text cell among the numbers. So a column whose non-NULL cells are both numbers and text
//! is a sparse Arrow union with three children of the column's length, `int` (Int64), `real`
//! (Float64) and `text` (Utf8); each cell's type id names the child holding it, a NULL cell is
//! a NULL of the `text` child. The executor reads cells through [`super::datum_at`], which
//! gives each its own class, so every operator applies SQLite's per-value rules unchanged;
//! `take` (the only Arrow kernel the executor applies to tables) keeps the union.

use std::sync::Arc;

use arrow_array::{ArrayRef, Float64Array, Int64Array, StringArray, UnionArray};
use arrow_buffer::ScalarBuffer;
use arrow_schema::{DataType, Field, UnionFields};

use crate::verify::Datum;

/// Type id of the `int` child.
const INT: i8 = 0;
/// Type id of the `real` child.
const REAL: i8 = 1;
/// Type id of the `text` child (also NULL cells).
const TEXT: i8 = 2;

/// Whether `values` needs a mixed column: some non-NULL cells numbers, some text.
pub fn mixes_storage_classes(values: &[Datum]) -> bool {
    let number = values.iter().any(|v| matches!(v, Datum::Int(_) | Datum::Real(_)));
    number && values.iter().any(|v| matches!(v, Datum::Text(_)))
}

/// The sparse union of `values` (module docs): each cell in the child of its storage class.
pub fn mixed_array(values: &[Datum]) -> ArrayRef {
    let fields: UnionFields = [
        (INT, Arc::new(Field::new("int", DataType::Int64, true))),
        (REAL, Arc::new(Field::new("real", DataType::Float64, true))),
        (TEXT, Arc::new(Field::new("text", DataType::Utf8, true))),
    ]
    .into_iter()
    .collect();
    let type_ids: ScalarBuffer<i8> = values
        .iter()
        .map(|v| match v {
            Datum::Int(_) => INT,
            Datum::Real(_) => REAL,
            _ => TEXT,
        })
        .collect();
    let ints: Int64Array = values
        .iter()
        .map(|v| if let Datum::Int(i) = v { Some(*i) } else { None })
        .collect();
    let reals: Float64Array = values
        .iter()
        .map(|v| if let Datum::Real(r) = v { Some(*r) } else { None })
        .collect();
    let texts: StringArray = values
        .iter()
        .map(|v| if let Datum::Text(t) = v { Some(t.as_str()) } else { None })
        .collect();
    let children: Vec<ArrayRef> = vec![Arc::new(ints), Arc::new(reals), Arc::new(texts)];
    Arc::new(UnionArray::try_new(fields, type_ids, None, children).expect("children of the column's length"))
}

/// The cell at `row` of a mixed column, in its own storage class.
pub fn mixed_datum(array: &UnionArray, row: usize) -> Datum {
    let child = array.child(array.type_id(row));
    super::datum_at(child.as_ref(), array.value_offset(row))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::table::{array_from_datums, datums};

    #[test]
    fn a_column_mixing_numbers_and_text_keeps_each_cells_class_through_take() {
        let cells = vec![
            Datum::Real(9.5),
            Datum::Text(String::new()),
            Datum::Null,
            Datum::Int(10),
            Datum::Text("n/a".into()),
        ];
        let a = array_from_datums(&cells);
        assert!(matches!(a.data_type(), DataType::Union(..)));
        assert_eq!(datums(a.as_ref()), cells);
        let idx = arrow_array::UInt32Array::from(vec![4, 3, 2, 0]);
        let taken = arrow_select::take::take(a.as_ref(), &idx, None).unwrap();
        assert_eq!(
            datums(taken.as_ref()),
            vec![cells[4].clone(), cells[3].clone(), Datum::Null, cells[0].clone()]
        );
    }
}
