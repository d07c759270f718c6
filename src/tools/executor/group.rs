//! `group_data_by`: row indices per key value, groups in first-appearance order, NULL keys one
//! group.

use std::collections::HashMap;

use super::args::{Args, column};
use super::cells::*;
use super::{Grouped, R, Value};
use crate::tools::table::datum_at;

/// `group_data_by(data_source, key_name)` → grouped table; NULL keys form one group; groups in
/// first-appearance order.
pub(super) fn group_data_by(args: &Args) -> R<Value> {
    let t = args.table("data_source")?;
    let key = args.str("key_name")?;
    let (idx, col) = column(t, key)?;
    let mut index: HashMap<(u8, u64, String), usize> = HashMap::new();
    let mut groups: Vec<Vec<u32>> = Vec::new();
    for r in 0..t.num_rows() {
        let k = datum_key(&datum_at(col.as_ref(), r));
        let g = *index.entry(k).or_insert_with(|| {
            groups.push(Vec::new());
            groups.len() - 1
        });
        groups[g].push(r as u32);
    }
    let key = t.schema().field(idx).name().clone();
    Ok(Value::Grouped(Grouped {
        table: t.clone(),
        key,
        groups,
    }))
}
