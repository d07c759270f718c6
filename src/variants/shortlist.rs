//! `shortlist` ([`shortlist`]): a toolkit of `ceil(f · N)` tools of the instance's domain
//! universe (its `tools`: SLOT/SEL the instance toolkit, REST the database's endpoints), never
//! fewer than the gold tools, always containing them; the rest drawn with a seeded shuffle,
//! toolkit order kept. No row when the shortlist would not be smaller than the toolkit.

use std::collections::BTreeSet;

use serde_json::json;

use super::{Rng, gold_tool_names, variant_row};
use crate::dataset::Example;
use crate::tools::ToolSpec;

/// The shortlist variant of `e` for fraction `f` (module docs), id `<parent>/shortlist-<pct>`.
pub fn shortlist(e: &Example, f: f64, seed: u64) -> Option<Example> {
    let n = e.tools.len();
    let gold = gold_tool_names(e);
    let size = ((f * n as f64).ceil() as usize).max(gold.len()).max(1);
    if size >= n {
        return None;
    }
    let pct = (f * 100.0).round() as u32;
    let mut rng = Rng::new(seed, &["shortlist", &pct.to_string(), &e.id]);
    let mut others: Vec<&str> = e
        .tools
        .iter()
        .map(|t| t.name.as_str())
        .filter(|n| !gold.iter().any(|g| g.as_str() == *n))
        .collect();
    rng.shuffle(&mut others);
    let keep: BTreeSet<&str> = gold
        .iter()
        .map(String::as_str)
        .chain(others.into_iter().take(size - gold.len()))
        .collect();
    let tools: Vec<ToolSpec> = e
        .tools
        .iter()
        .filter(|t| keep.contains(t.name.as_str()))
        .cloned()
        .collect();
    let mut row = variant_row(
        e,
        &format!("shortlist-{pct}"),
        "shortlist",
        json!({"fraction": f, "universe": n, "size": tools.len()}),
    );
    row.tools = tools.into();
    Some(row)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::variants::fixtures::example;

    #[test]
    fn shortlists_keep_gold() {
        let e = example();
        let s = shortlist(&e, 0.25, 1).unwrap();
        assert_eq!(s.tools.len(), 1);
        assert_eq!(s.tools[0].name, "get_b");
        let s = shortlist(&e, 0.5, 1).unwrap();
        assert_eq!(s.tools.len(), 2);
        assert!(s.tools.iter().any(|t| t.name == "get_b"));
        assert!(shortlist(&e, 0.9, 1).is_none());
    }
}
