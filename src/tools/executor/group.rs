//! `group_data_by`: row indices per key value (or combination of values of several keys), groups
//! in first-appearance order, NULL keys one group.

use std::collections::HashMap;

use serde_json::Value as Json;

use super::args::{Args, column};
use super::cells::*;
use super::{Grouped, R, Value};
use crate::tools::table::datum_at;

/// `group_data_by(data_source, key_name)` → grouped table. `key_name` is a column or a non-empty
/// list of columns (SQL's `GROUP BY a, b`: one group per distinct combination of values). NULL
/// keys are equal to each other (one group, as in SQL); groups in first-appearance order.
pub(super) fn group_data_by(args: &Args) -> R<Value> {
    let t = args.table("data_source")?;
    let names: Vec<&str> = match args.json("key_name")? {
        Json::String(k) => vec![k.as_str()],
        Json::Array(ks) if !ks.is_empty() => ks
            .iter()
            .map(|k| {
                k.as_str()
                    .ok_or_else(|| format!("`key_name` list holds a non-string: {k}"))
            })
            .collect::<R<_>>()?,
        other => {
            return Err(format!(
                "`key_name` must be a column name or a non-empty list of column names, got {other}"
            ));
        }
    };
    let cols = names.iter().map(|k| column(t, k)).collect::<R<Vec<_>>>()?;
    let mut index: HashMap<Vec<(u8, u64, String)>, usize> = HashMap::new();
    let mut groups: Vec<Vec<u32>> = Vec::new();
    for r in 0..t.num_rows() {
        super::limits::checkpoint()?;
        let k: Vec<_> = cols
            .iter()
            .map(|(_, col)| datum_key(&datum_at(col.as_ref(), r)))
            .collect();
        let g = *index.entry(k).or_insert_with(|| {
            groups.push(Vec::new());
            groups.len() - 1
        });
        groups[g].push(r as u32);
    }
    let keys = cols
        .iter()
        .map(|(idx, _)| t.schema().field(*idx).name().clone())
        .collect();
    Ok(Value::Grouped(Grouped {
        table: t.clone(),
        keys,
        groups,
    }))
}
