//! Exact duplicate rows ([`Outcome::drop_exact_duplicates`]).

use std::collections::HashMap;
use std::sync::Arc;

use super::{Drop, Example, Outcome};
use crate::tools::Toolkit;

/// Drop reason of a row identical to an earlier row of its group in everything but `id` and
/// `meta` (issue 45: a training set must not hold one example twice).
pub const DUPLICATE_ROW: &str = "duplicate_row";

impl Outcome {
    /// Moves every example identical to an earlier one of this outcome in everything but `id`
    /// and `meta` (the same request, tools, calls, answer, …) to the drops as [`DUPLICATE_ROW`],
    /// naming the row it repeats; returns how many. Each toolkit is compared by its JSON text,
    /// serialised once per shared list.
    pub fn drop_exact_duplicates(&mut self, group: &str) -> usize {
        // By toolkit id; the entry keeps the toolkit alive, so its id stays its own.
        let mut toolkit_text: HashMap<usize, (Toolkit, Arc<str>)> = HashMap::new();
        let mut first: HashMap<(String, Arc<str>), String> = HashMap::new();
        let mut kept = Vec::with_capacity(self.examples.len());
        let mut dropped = 0;
        for e in std::mem::take(&mut self.examples) {
            let tools = toolkit_text
                .entry(e.tools.id())
                .or_insert_with(|| (e.tools.clone(), e.tools.json().clone()))
                .1
                .clone();
            let rest = Example {
                id: String::new(),
                meta: None,
                tools: Toolkit::default(),
                ..e.clone()
            };
            let key = (serde_json::to_string(&rest).expect("serialisable"), tools);
            match first.get(&key) {
                Some(earlier) => {
                    dropped += 1;
                    self.drops.push(Drop {
                        id: e.id.clone(),
                        group: group.to_string(),
                        reason: DUPLICATE_ROW.into(),
                        detail: format!("identical to {earlier} in everything but id and meta"),
                        question: e.input.clone(),
                        source: String::new(),
                    });
                }
                None => {
                    first.insert(key, e.id.clone());
                    kept.push(e);
                }
            }
        }
        self.examples = kept;
        dropped
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::ToolSpec;

    #[test]
    fn rows_equal_but_for_id_and_meta_are_dropped_and_named() {
        let row = |id: &str, input: &str, tool: &str, meta: i64| Example {
            id: id.into(),
            input: input.into(),
            tools: vec![ToolSpec::reference(tool)].into(),
            meta: Some(serde_json::json!({"dialogue": meta})),
            ..Example::default()
        };
        let mut o = Outcome {
            examples: vec![
                row("a", "book it", "f", 1),
                row("b", "book it", "f", 2),
                row("c", "book it", "g", 3),
                row("d", "book that", "f", 4),
                row("e", "book it", "f", 5),
            ],
            attempted: 5,
            ..Outcome::default()
        };
        assert_eq!(o.drop_exact_duplicates("train"), 2);
        let kept: Vec<&str> = o.examples.iter().map(|e| e.id.as_str()).collect();
        assert_eq!(kept, ["a", "c", "d"]);
        let dropped: Vec<(&str, &str)> = o.drops.iter().map(|d| (d.id.as_str(), d.reason.as_str())).collect();
        assert_eq!(dropped, [("b", DUPLICATE_ROW), ("e", DUPLICATE_ROW)]);
        assert!(o.drops[0].detail.contains("identical to a"));
        assert_eq!(o.examples.len() + o.drops.len(), o.attempted);
    }
}
