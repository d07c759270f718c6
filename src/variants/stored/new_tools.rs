//! A drift row's A_new in a stored unit of variants (version 4): `meta.variant.tools_new` taken
//! out of the row's `meta` and written as indices into the payload's table of distinct specs,
//! put back in its place when the row is read ([`super`]).

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;

/// Where a row's `meta.variant.tools_new` (drift's A_new: one spec per tool of the instance)
/// was, and its specs as indices into the payload's `new_specs`. The A_new specs of a unit's
/// drift rows repeat (most tools of an instance are not drifted, and a drifted spec is drawn from
/// a few operators), so each distinct one is stored and parsed once and cloned per row: they
/// were 80 % of the variant rows' `meta` on Spider dev (14.8 MB over 859 drift rows), and parsing
/// them row by row a quarter of the CPU of a slot-spider-variants merge that reads the rows (one
/// writing the page; a merge without it reads none, [`crate::dataset::Build::variant_rows_counted`]).
#[derive(Serialize, Deserialize)]
pub(super) struct NewTools {
    at: usize,
    specs: Vec<u32>,
}

/// The key a drift row's new specs are under, in `meta.variant`.
const TOOLS_NEW: &str = "tools_new";

/// The distinct JSON texts of the rows' new specs ([`NewTools`]) being written, by text.
#[derive(Default)]
pub(super) struct NewSpecs {
    pub(super) texts: Vec<Box<RawValue>>,
    index: HashMap<String, u32>,
}

impl NewSpecs {
    /// Takes `meta.variant.tools_new` out of `meta` when it is a list, adding its elements to the
    /// table; `None` (and `meta` untouched) otherwise.
    pub(super) fn take(&mut self, meta: &mut Option<Value>) -> Option<NewTools> {
        let variant = meta.as_mut()?.get_mut("variant")?.as_object_mut()?;
        let at = variant.keys().position(|k| k == TOOLS_NEW)?;
        if !variant[TOOLS_NEW].is_array() {
            return None;
        }
        let Some(Value::Array(list)) = variant.shift_remove(TOOLS_NEW) else {
            unreachable!("checked to be a list")
        };
        let specs = list
            .iter()
            .map(|spec| {
                let text = serde_json::to_string(spec).expect("a JSON value");
                let next = self.texts.len() as u32;
                *self.index.entry(text).or_insert_with_key(|text| {
                    self.texts.push(RawValue::from_string(text.clone()).expect("JSON text"));
                    next
                })
            })
            .collect();
        Some(NewTools { at, specs })
    }
}

/// Puts a row's new specs back into its `meta.variant` at their place: the elements of
/// `specs` (the payload's parsed `new_specs`), cloned. Errors: an index out of range, a `meta`
/// without a `variant` object.
pub(super) fn put_back(meta: &mut Option<Value>, new: NewTools, specs: &[Value]) -> Result<(), String> {
    let list = new
        .specs
        .iter()
        .map(|&i| {
            specs
                .get(i as usize)
                .cloned()
                .ok_or_else(|| format!("new spec {i} of {}", specs.len()))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let variant = meta
        .as_mut()
        .and_then(|m| m.get_mut("variant"))
        .and_then(Value::as_object_mut)
        .ok_or("new specs of a row without meta.variant")?;
    let mut list = Some(Value::Array(list));
    for (n, (k, v)) in std::mem::take(variant).into_iter().enumerate() {
        if n == new.at {
            variant.insert(TOOLS_NEW.into(), list.take().expect("once"));
        }
        variant.insert(k, v);
    }
    if let Some(list) = list {
        variant.insert(TOOLS_NEW.into(), list);
    }
    Ok(())
}
