//! One group's variants as a store item (issue 34 item 1): the variant rows of the group's
//! verified examples and the counts the stage reports, so the shard owning a group computes them
//! once and the merge only reads them ([`super::apply_with`]).
//!
//! Keyed ([`StageKey`], stage [`STAGE`]) by the build key when the stage runs and the group
//! name: the build key covers the recipe (its `[variants]` section, seed included) and every
//! compile item, so it covers what the stage reads of the whole build too (the drift plan over
//! the catalog, the distractor pool over every group); the code fingerprint is in the config.
//! The payload is the rows as a [`StoredOutcome`] (shared toolkits written once) and the counts.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::dataset::{Build, Example, Outcome, StoredOutcome, code_fingerprint};
use crate::store::StageKey;

/// Stage name of a group's variants in the store.
pub const STAGE: &str = "variants";

/// Version of the stored variants; bump when a group's variants change for the same build key.
pub const VARIANTS_VERSION: u32 = 1;

/// The variant rows of one group and the stage's counts over it (summed over groups by
/// [`GroupVariants::add`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GroupVariants {
    /// The variant rows, in parent order, each parent's in operator order.
    pub rows: Vec<Example>,
    /// Rows made, by operator.
    pub counts: BTreeMap<String, usize>,
    /// Rows not made, by `operator:reason`.
    pub rejected: BTreeMap<String, usize>,
    /// Distractor candidates dropped as near-identical to a gold tool.
    pub near_identical: usize,
    /// Distractor candidates dropped as answering the question.
    pub answering: usize,
    /// Per-instance drift: tools drifted per operator.
    pub instance_ops: BTreeMap<String, usize>,
    /// Per-instance drift: tools drifted.
    pub instance_tools: usize,
}

/// The counts of a [`GroupVariants`] as stored (the rows go beside them).
#[derive(Serialize, Deserialize)]
struct Counts {
    counts: BTreeMap<String, usize>,
    rejected: BTreeMap<String, usize>,
    near_identical: usize,
    answering: usize,
    instance_ops: BTreeMap<String, usize>,
    instance_tools: usize,
}

/// The store key of `group`'s variants in `build` (at the variants stage).
pub fn key(build: &Build, group: &str) -> StageKey {
    StageKey {
        stage: STAGE.into(),
        version: VARIANTS_VERSION,
        config: json!({"code": code_fingerprint()}),
        inputs: vec![build.build_key.clone(), group.to_string()],
    }
}

impl GroupVariants {
    /// Adds `other`'s counts to these (the rows are not copied).
    pub fn add(&mut self, other: &GroupVariants) {
        let sum = |into: &mut BTreeMap<String, usize>, from: &BTreeMap<String, usize>| {
            for (k, n) in from {
                *into.entry(k.clone()).or_default() += n;
            }
        };
        sum(&mut self.counts, &other.counts);
        sum(&mut self.rejected, &other.rejected);
        sum(&mut self.instance_ops, &other.instance_ops);
        self.near_identical += other.near_identical;
        self.answering += other.answering;
        self.instance_tools += other.instance_tools;
    }

    /// The store payload: `[counts, rows as a StoredOutcome]` as JSON.
    pub fn encode(&self) -> Vec<u8> {
        let counts = Counts {
            counts: self.counts.clone(),
            rejected: self.rejected.clone(),
            near_identical: self.near_identical,
            answering: self.answering,
            instance_ops: self.instance_ops.clone(),
            instance_tools: self.instance_tools,
        };
        let rows = Outcome {
            examples: self.rows.clone(),
            ..Outcome::default()
        }
        .into_stored();
        serde_json::to_vec(&(counts, rows)).expect("serialisable")
    }

    /// The variants of an [`GroupVariants::encode`]d payload; `Err(why)` when it is not one.
    pub fn decode(bytes: &[u8]) -> Result<GroupVariants, String> {
        let (c, rows): (Counts, StoredOutcome) = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
        Ok(GroupVariants {
            rows: Outcome::from_stored(rows)?.examples,
            counts: c.counts,
            rejected: c.rejected,
            near_identical: c.near_identical,
            answering: c.answering,
            instance_ops: c.instance_ops,
            instance_tools: c.instance_tools,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_group_variants_decode_to_the_same_rows_and_counts() {
        let spec = crate::tools::test_spec;
        let row = |id: &str| Example {
            id: id.into(),
            input: "How many? é".into(),
            tools: vec![spec("a"), spec("b")].into(),
            meta: Some(json!({"variant_of": "p", "variant": {"x": 0.1}})),
            ..Example::default()
        };
        let mut v = GroupVariants {
            rows: vec![row("p/obfuscate"), row("p/shortlist-50")],
            ..GroupVariants::default()
        };
        v.counts.insert("obfuscate".into(), 1);
        v.rejected.insert("drift:no_drifted_call".into(), 2);
        v.near_identical = 3;
        v.instance_ops.insert("type_drift".into(), 4);
        assert_eq!(GroupVariants::decode(&v.encode()), Ok(v.clone()));
        assert!(GroupVariants::decode(b"[{}, 1]").is_err());
        let mut total = GroupVariants::default();
        total.add(&v);
        total.add(&v);
        assert_eq!(
            (
                total.counts["obfuscate"],
                total.near_identical,
                total.instance_ops["type_drift"]
            ),
            (2, 6, 8)
        );
        assert!(total.rows.is_empty());
    }
}
