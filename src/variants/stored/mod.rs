//! One group's variants as a store item (issue 34 item 1): the variant rows of the group's
//! verified examples and the counts the stage reports, so the shard owning a group computes them
//! once and the merge only reads them ([`super::apply_with`]).
//!
//! Keyed ([`StageKey`], stage [`STAGE`]) by the build key when the stage runs and the group
//! name: the build key covers the recipe (its `[variants]` section, seed included) and every
//! compile item, so it covers what the stage reads of the whole build too (the drift plan over
//! the catalog, the distractor pool over every group); the code fingerprint is in the config.
//!
//! Payload (version 4): the counts line `{"rows_by_split": {split: n}, "counts", "rejected", …}`
//! and a newline, then `{"rows": [row…], "toolkits": {"specs": [spec…], "toolkits":
//! [[index…]…]}, "new_specs": [spec…]}` (the toolkits as [`crate::tools::spec_table`] writes
//! them). A merge that reads no row reads the counts line alone
//! ([`GroupVariants::decode_counts`]). A variant row is written as its difference from its
//! parent (`Row`): the parent's id, the row's own id and `meta`, and only the fields whose value
//! differs from the parent's (a perturbed request, drifted or renamed calls; byte-identical JSON counts as the same). The other fields — the gold answer,
//! the joined table's columns, the setup calls, the SQL — are the parent's, which the reader
//! already holds (the unit's compiled examples), so it clones them instead of parsing them again:
//! a merge reads every group's variants, and in version 1 (every row whole) parsing the repeated
//! gold answers and columns was half a slot-spider-variants merge's CPU. A row's toolkit is its
//! parent's (`tools` absent) or an index into `toolkits` (each distinct toolkit once, as a table
//! of the distinct specs, [`crate::tools::spec_table`]: version 3). A drift row's A_new
//! (`meta.variant.tools_new`) is taken out of its `meta` and written as indices into
//! `new_specs`, each distinct spec once (`NewTools`: version 4).

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Value, json};

use crate::dataset::{Build, Example, code_fingerprint};
use crate::store::StageKey;
use crate::tools::pool::KeyDescription;
use crate::tools::{Call, Toolkit};
use crate::verify::Answer;

mod new_tools;
use new_tools::{NewSpecs, NewTools, put_back};

/// Stage name of a group's variants in the store.
pub const STAGE: &str = "variants";

/// Version of the stored variants; bump when a group's variants change for the same build key.
/// 2: rows written as their difference from their parent (`Row`); 3: toolkits as a table of
/// their distinct specs ([`crate::tools::spec_table`]); 4: drift's A_new specs as a table
/// (`NewTools`), the counts (with the rows by split) on a line of their own before the rows.
pub const VARIANTS_VERSION: u32 = 4;

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
    /// The rows by split (what a merge that reads no row counts, [`GroupVariants::decode_counts`]).
    rows_by_split: BTreeMap<String, usize>,
    counts: BTreeMap<String, usize>,
    rejected: BTreeMap<String, usize>,
    near_identical: usize,
    answering: usize,
    instance_ops: BTreeMap<String, usize>,
    instance_tools: usize,
}

/// A present field as `Some` (`null` included: `Some(None)` for an `Option` field); an absent one
/// is `None` by `#[serde(default)]`.
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

/// A variant row as stored: its parent's id (`None`: no parent in the group, every field is then
/// written unless it is [`Example::default`]'s), its own id and `meta`, and each other field of
/// [`Example`] only when it differs from the parent's (absent: the parent's). `tools` is an index
/// into the payload's toolkits, absent for the parent's toolkit.
#[derive(Serialize, Deserialize)]
struct Row {
    parent: Option<String>,
    id: String,
    meta: Option<Value>,
    #[serde(default, deserialize_with = "present", skip_serializing_if = "Option::is_none")]
    dataset: Option<String>,
    #[serde(default, deserialize_with = "present", skip_serializing_if = "Option::is_none")]
    split: Option<String>,
    #[serde(default, deserialize_with = "present", skip_serializing_if = "Option::is_none")]
    db_id: Option<Option<String>>,
    #[serde(default, deserialize_with = "present", skip_serializing_if = "Option::is_none")]
    input: Option<String>,
    #[serde(default, deserialize_with = "present", skip_serializing_if = "Option::is_none")]
    evidence: Option<Option<String>>,
    #[serde(default, deserialize_with = "present", skip_serializing_if = "Option::is_none")]
    sql: Option<Option<String>>,
    #[serde(default, deserialize_with = "present", skip_serializing_if = "Option::is_none")]
    output: Option<Vec<Call>>,
    #[serde(default, deserialize_with = "present", skip_serializing_if = "Option::is_none")]
    initialization_step: Option<Option<Call>>,
    #[serde(default, deserialize_with = "present", skip_serializing_if = "Option::is_none")]
    additional_setup_steps: Option<Vec<Call>>,
    #[serde(default, deserialize_with = "present", skip_serializing_if = "Option::is_none")]
    gold_answer: Option<Option<Answer>>,
    #[serde(default, deserialize_with = "present", skip_serializing_if = "Option::is_none")]
    ordered: Option<bool>,
    #[serde(default, deserialize_with = "present", skip_serializing_if = "Option::is_none")]
    key_values_and_descriptions: Option<Vec<KeyDescription>>,
    #[serde(default, deserialize_with = "present", skip_serializing_if = "Option::is_none")]
    difficulty: Option<Option<String>>,
    #[serde(default, deserialize_with = "present", skip_serializing_if = "Option::is_none")]
    tools: Option<u32>,
    /// `meta.variant.tools_new`, taken out of `meta`: its place among `meta.variant`'s keys and
    /// its elements as indices into the payload's `new_specs`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tools_new: Option<NewTools>,
}

/// The stored rows: [`Row`]s and the distinct toolkits they index, as a table of their distinct
/// specs ([`crate::tools::spec_table`]).
#[derive(Serialize, Deserialize)]
struct StoredRows {
    rows: Vec<Row>,
    #[serde(with = "crate::tools::spec_table")]
    toolkits: Vec<Toolkit>,
    /// The distinct elements of the rows' `meta.variant.tools_new` ([`NewTools`]), as JSON text.
    new_specs: Vec<Box<serde_json::value::RawValue>>,
}

/// `row`'s value when it differs from `parent`'s: by `==`, and for values that may hold floats
/// also by their JSON text (`0.0 == -0.0`, whose texts differ), so a field left out is exactly
/// the parent's.
fn differs<T: PartialEq + Serialize + Clone>(row: &T, parent: &T, floats: bool) -> Option<T> {
    let same = row == parent && (!floats || serde_json::to_string(row).ok() == serde_json::to_string(parent).ok());
    (!same).then(|| row.clone())
}

/// The group's examples by id: the parents a stored row names.
fn parents_by_id(parents: &[Example]) -> HashMap<&str, &Example> {
    parents.iter().map(|e| (e.id.as_str(), e)).collect()
}

/// `row` as its difference from its parent (`meta.variant_of` in `parents`); a new toolkit is
/// added to `toolkits` (`index`: by [`Toolkit::id`]).
fn to_row(
    row: &Example,
    parents: &HashMap<&str, &Example>,
    toolkits: &mut Vec<Toolkit>,
    index: &mut HashMap<usize, u32>,
    new_specs: &mut NewSpecs,
) -> Row {
    let parent_id = row
        .meta
        .as_ref()
        .and_then(|m| m.get("variant_of"))
        .and_then(Value::as_str);
    let found = parent_id.and_then(|id| parents.get_key_value(id));
    let default = Example::default();
    let p: &Example = found.map_or(&default, |(_, p)| p);
    // Every field named, so a new field of `Example` is a compile error here.
    let Example {
        id,
        dataset,
        split,
        db_id,
        input,
        evidence,
        sql,
        output,
        initialization_step,
        additional_setup_steps,
        gold_answer,
        ordered,
        tools,
        key_values_and_descriptions,
        difficulty,
        meta,
    } = row;
    let same_tools = tools.id() == p.tools.id() || tools.json() == p.tools.json();
    let mut meta = meta.clone();
    let tools_new = new_specs.take(&mut meta);
    Row {
        parent: found.map(|(id, _)| id.to_string()),
        id: id.clone(),
        meta,
        tools_new,
        dataset: differs(dataset, &p.dataset, false),
        split: differs(split, &p.split, false),
        db_id: differs(db_id, &p.db_id, false),
        input: differs(input, &p.input, false),
        evidence: differs(evidence, &p.evidence, false),
        sql: differs(sql, &p.sql, false),
        output: differs(output, &p.output, true),
        initialization_step: differs(initialization_step, &p.initialization_step, true),
        additional_setup_steps: differs(additional_setup_steps, &p.additional_setup_steps, true),
        gold_answer: differs(gold_answer, &p.gold_answer, true),
        ordered: differs(ordered, &p.ordered, false),
        key_values_and_descriptions: differs(key_values_and_descriptions, &p.key_values_and_descriptions, false),
        difficulty: differs(difficulty, &p.difficulty, false),
        tools: (!same_tools).then(|| {
            *index.entry(tools.id()).or_insert_with(|| {
                toolkits.push(tools.clone());
                toolkits.len() as u32 - 1
            })
        }),
    }
}

/// The example of stored `row`: its own fields, the parent's (in `parents`) for the others.
/// Errors: a parent not in the group, a toolkit index out of range.
fn from_row(
    row: Row,
    parents: &HashMap<&str, &Example>,
    toolkits: &[Toolkit],
    new_specs: &[Value],
) -> Result<Example, String> {
    let default = Example::default();
    let p: &Example = match row.parent.as_deref() {
        Some(id) => parents
            .get(id)
            .ok_or_else(|| format!("variant {} of {id}, which the group does not have", row.id))?,
        None => &default,
    };
    let mut meta = row.meta;
    if let Some(new) = row.tools_new {
        put_back(&mut meta, new, new_specs).map_err(|e| format!("variant {}: {e}", row.id))?;
    }
    let tools = match row.tools {
        None => p.tools.clone(),
        Some(i) => toolkits
            .get(i as usize)
            .ok_or_else(|| format!("toolkit {i} of {} in variant {}", toolkits.len(), row.id))?
            .clone(),
    };
    let Example {
        id: _,
        dataset,
        split,
        db_id,
        input,
        evidence,
        sql,
        output,
        initialization_step,
        additional_setup_steps,
        gold_answer,
        ordered,
        tools: _,
        key_values_and_descriptions,
        difficulty,
        meta: _,
    } = p;
    Ok(Example {
        id: row.id,
        dataset: row.dataset.unwrap_or_else(|| dataset.clone()),
        split: row.split.unwrap_or_else(|| split.clone()),
        db_id: row.db_id.unwrap_or_else(|| db_id.clone()),
        input: row.input.unwrap_or_else(|| input.clone()),
        evidence: row.evidence.unwrap_or_else(|| evidence.clone()),
        sql: row.sql.unwrap_or_else(|| sql.clone()),
        output: row.output.unwrap_or_else(|| output.clone()),
        initialization_step: row.initialization_step.unwrap_or_else(|| initialization_step.clone()),
        additional_setup_steps: row
            .additional_setup_steps
            .unwrap_or_else(|| additional_setup_steps.clone()),
        gold_answer: row.gold_answer.unwrap_or_else(|| gold_answer.clone()),
        ordered: row.ordered.unwrap_or(*ordered),
        tools,
        key_values_and_descriptions: row
            .key_values_and_descriptions
            .unwrap_or_else(|| key_values_and_descriptions.clone()),
        difficulty: row.difficulty.unwrap_or_else(|| difficulty.clone()),
        meta,
    })
}

/// How many of `rows` are in each split (the counts line's `rows_by_split`).
fn rows_by_split(rows: &[Example]) -> BTreeMap<String, usize> {
    let mut by_split = BTreeMap::new();
    for r in rows {
        *by_split.entry(r.split.clone()).or_default() += 1;
    }
    by_split
}

/// The counts line of a payload, parsed, and the rest (the rows). Errors: no newline, counts
/// that do not parse.
fn split_counts(bytes: &[u8]) -> Result<(Counts, &[u8]), String> {
    let newline = bytes.iter().position(|&b| b == b'\n').ok_or("no counts line")?;
    let counts = serde_json::from_slice(&bytes[..newline]).map_err(|e| format!("counts: {e}"))?;
    Ok((counts, &bytes[newline + 1..]))
}

/// The store key of the variants of unit `group` in `build` (at the variants stage): a
/// text-to-SQL question batch (its compile item's name, [`Build::item_runs`]) or a group.
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

    /// The store payload (module docs), each row written as its difference from its parent in
    /// `parents` (the group's examples the rows were made from).
    pub fn encode(&self, parents: &[Example]) -> Vec<u8> {
        let counts = Counts {
            rows_by_split: rows_by_split(&self.rows),
            counts: self.counts.clone(),
            rejected: self.rejected.clone(),
            near_identical: self.near_identical,
            answering: self.answering,
            instance_ops: self.instance_ops.clone(),
            instance_tools: self.instance_tools,
        };
        let by_id = parents_by_id(parents);
        let (mut toolkits, mut index) = (Vec::new(), HashMap::new());
        let mut new_specs = NewSpecs::default();
        let rows: Vec<Row> = self
            .rows
            .iter()
            .map(|r| to_row(r, &by_id, &mut toolkits, &mut index, &mut new_specs))
            .collect();
        let stored = StoredRows {
            rows,
            toolkits,
            new_specs: new_specs.texts,
        };
        // Compact JSON holds no raw newline: the counts line ends at the first one.
        let mut out = serde_json::to_vec(&counts).expect("serialisable");
        out.push(b'\n');
        serde_json::to_writer(&mut out, &stored).expect("serialisable");
        out
    }

    /// The counts line of an [`GroupVariants::encode`]d payload, without reading its rows: the
    /// stage's counts (`rows` empty) and the rows by split. `Err(why)` when it is not one.
    pub fn decode_counts(bytes: &[u8]) -> Result<(GroupVariants, BTreeMap<String, usize>), String> {
        let (mut c, _) = split_counts(bytes)?;
        let by_split = std::mem::take(&mut c.rows_by_split);
        Ok((GroupVariants::of_counts(c, Vec::new()), by_split))
    }

    fn of_counts(c: Counts, rows: Vec<Example>) -> GroupVariants {
        GroupVariants {
            rows,
            counts: c.counts,
            rejected: c.rejected,
            near_identical: c.near_identical,
            answering: c.answering,
            instance_ops: c.instance_ops,
            instance_tools: c.instance_tools,
        }
    }

    /// The variants of an [`GroupVariants::encode`]d payload, each row's unwritten fields cloned
    /// from its parent in `parents`; `Err(why)` when it is not one (also: a parent the group
    /// lacks, a toolkit that is not a list of specs, a toolkit or new spec index out of range).
    pub fn decode(bytes: &[u8], parents: &[Example]) -> Result<GroupVariants, String> {
        let (c, rows) = split_counts(bytes)?;
        let stored: StoredRows = serde_json::from_slice(rows).map_err(|e| format!("rows: {e}"))?;
        let by_id = parents_by_id(parents);
        let new_specs = stored
            .new_specs
            .iter()
            .map(|t| serde_json::from_str(t.get()))
            .collect::<Result<Vec<Value>, _>>()
            .map_err(|e| e.to_string())?;
        let rows = stored
            .rows
            .into_iter()
            .map(|r| from_row(r, &by_id, &stored.toolkits, &new_specs))
            .collect::<Result<Vec<_>, _>>()?;
        let by_split = rows_by_split(&rows);
        if by_split != c.rows_by_split {
            return Err(format!(
                "rows by split {by_split:?}, the counts say {:?}",
                c.rows_by_split
            ));
        }
        Ok(GroupVariants::of_counts(c, rows))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verify::Datum;

    /// A compiled example of the group, with a gold answer, columns and a setup call.
    fn parent(id: &str) -> Example {
        let spec = crate::tools::test_spec;
        Example {
            id: id.into(),
            dataset: "d".into(),
            split: "dev".into(),
            db_id: Some("db".into()),
            input: "How many? é".into(),
            sql: Some("SELECT 1".into()),
            gold_answer: Some(vec![vec![Datum::Int(1), Datum::Real(0.0), Datum::Text("x".into())]]),
            key_values_and_descriptions: vec![KeyDescription {
                key_name: "t_a".into(),
                description: "a".into(),
                dtype: "integer".into(),
            }],
            initialization_step: Some(Call {
                name: "initialize_active_data".into(),
                arguments: serde_json::from_value(json!({"x": 0.5})).unwrap(),
                label: "starting_table_var".into(),
            }),
            tools: vec![spec("a"), spec("b")].into(),
            ..Example::default()
        }
    }

    #[test]
    fn stored_group_variants_decode_to_the_same_rows_and_counts() {
        let parents = vec![parent("p"), parent("q")];
        let row = |p: &Example, suffix: &str| super::super::variant_row(p, suffix, "perturb", json!({"x": 0.1}));
        let mut v = GroupVariants {
            rows: vec![row(&parents[0], "obfuscate"), row(&parents[1], "shortlist-50")],
            ..GroupVariants::default()
        };
        v.rows[1].tools = vec![crate::tools::test_spec("b")].into();
        v.counts.insert("obfuscate".into(), 1);
        v.rejected.insert("drift:no_drifted_call".into(), 2);
        v.near_identical = 3;
        v.instance_ops.insert("type_drift".into(), 4);
        assert_eq!(GroupVariants::decode(&v.encode(&parents), &parents), Ok(v.clone()));
        assert!(GroupVariants::decode(b"[{}, 1]", &parents).is_err());
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

    #[test]
    fn a_variant_row_is_stored_as_what_differs_from_its_parent_and_decodes_whole() {
        let parents = vec![parent("p")];
        let mut perturbed = super::super::variant_row(&parents[0], "perturb-case", "perturb", json!({"k": 1}));
        perturbed.input = "HOW MANY? É".into();
        // Equal by `==` but not the same JSON: written, so the decoded row is exactly this one.
        let mut signed = super::super::variant_row(&parents[0], "drift", "drift", json!({}));
        signed.gold_answer = Some(vec![vec![Datum::Int(1), Datum::Real(-0.0), Datum::Text("x".into())]]);
        signed.tools = vec![crate::tools::test_spec("c")].into();
        // A row whose parent is not in the group is written whole.
        let mut orphan = parent("other");
        orphan.meta = Some(json!({"variant_of": "missing"}));
        let v = GroupVariants {
            rows: vec![perturbed.clone(), signed.clone(), orphan.clone()],
            ..GroupVariants::default()
        };
        let bytes = v.encode(&parents);
        let text = String::from_utf8(bytes.clone()).unwrap();
        // The parent's columns, SQL and setup call are not repeated; the changed fields are.
        // (Once: the row without a parent in the group.)
        assert_eq!(text.matches("t_a").count(), 1, "{text}");
        assert_eq!(text.matches("SELECT 1").count(), 1, "{text}");
        assert!(text.contains("HOW MANY") && text.contains("-0.0"), "{text}");
        let back = GroupVariants::decode(&bytes, &parents).unwrap();
        assert_eq!(back.rows, vec![perturbed.clone(), signed.clone(), orphan]);
        assert_eq!(
            serde_json::to_string(&back.rows[1].gold_answer).unwrap(),
            serde_json::to_string(&signed.gold_answer).unwrap()
        );
        // The perturbed row shares its parent's toolkit, the drifted one has its own.
        assert_eq!(back.rows[0].tools.id(), parents[0].tools.id());
        assert_eq!(back.rows[1].tools.names().collect::<Vec<_>>(), vec!["c"]);
        // Read against a group without the parent (or with a toolkit index out of range): refused.
        assert!(
            GroupVariants::decode(&bytes, &[])
                .unwrap_err()
                .contains("does not have")
        );
        let bad = text.replace("\"tools\":0", "\"tools\":7");
        assert!(
            GroupVariants::decode(bad.as_bytes(), &parents)
                .unwrap_err()
                .contains("toolkit 7")
        );
    }

    #[test]
    fn a_drift_rows_new_specs_are_stored_once_and_decode_to_the_same_meta_text() {
        let parents = vec![parent("p"), parent("q")];
        let a = json!({"name": "f_v2", "description": "d", "parameters": {"type": "object", "x": 1.5e-7}});
        let b = json!({"name": "g", "description": "e", "parameters": null});
        let drift = |p: &Example, variant: Value| super::super::variant_row(p, "drift", "drift", variant);
        let rows = vec![
            // A_new first, last, alone; the same specs in several rows; a tools_new that is not a
            // list stays in meta as it is.
            drift(
                &parents[0],
                json!({"tools_new": [a.clone(), b.clone()], "changes": {"f": ["rename"]}, "loud_calls": []}),
            ),
            drift(
                &parents[1],
                json!({"changes": {}, "tools_new": [b.clone(), a.clone(), a]}),
            ),
            drift(&parents[1], json!({"tools_new": []})),
            drift(&parents[0], json!({"tools_new": "not a list", "z": 0})),
            drift(&parents[0], json!({"other": 1})),
        ];
        let v = GroupVariants {
            rows,
            ..GroupVariants::default()
        };
        let bytes = v.encode(&parents);
        let text = String::from_utf8(bytes.clone()).unwrap();
        assert_eq!(text.matches(r#""name":"f_v2""#).count(), 1, "{text}");
        let back = GroupVariants::decode(&bytes, &parents).unwrap();
        assert_eq!(back, v);
        // The judge of key order: each row's meta as JSON text, as the rows files write it.
        for (b, r) in back.rows.iter().zip(&v.rows) {
            assert_eq!(
                serde_json::to_string(&b.meta).unwrap(),
                serde_json::to_string(&r.meta).unwrap()
            );
        }
        // An index out of range does not decode.
        let bad = text.replace(r#""specs":[1,0,0]"#, r#""specs":[1,0,7]"#);
        assert_ne!(bad, text);
        assert!(GroupVariants::decode(bad.as_bytes(), &parents).is_err());
    }

    #[test]
    fn the_counts_line_is_read_without_the_rows_and_must_agree_with_them() {
        let parents = vec![parent("p"), parent("q")];
        let row = |p: &Example, suffix: &str| super::super::variant_row(p, suffix, "perturb", json!({}));
        let mut v = GroupVariants {
            rows: vec![row(&parents[0], "a"), row(&parents[1], "b"), row(&parents[1], "c")],
            ..GroupVariants::default()
        };
        v.rows[2].split = "train".into();
        v.counts.insert("perturb".into(), 3);
        let bytes = v.encode(&parents);
        let (counts, by_split) = GroupVariants::decode_counts(&bytes).unwrap();
        assert!(counts.rows.is_empty());
        assert_eq!(counts.counts, v.counts);
        assert_eq!(
            by_split,
            BTreeMap::from([("dev".to_string(), 2), ("train".to_string(), 1)])
        );
        // Only the counts line is read: rows that do not parse do not matter to it.
        let newline = bytes.iter().position(|&b| b == b'\n').unwrap();
        let mut cut = bytes[..=newline].to_vec();
        cut.extend_from_slice(b"not rows");
        assert!(GroupVariants::decode_counts(&cut).is_ok());
        assert!(GroupVariants::decode(&cut, &parents).is_err());
        // A counts line that disagrees with the rows is not a payload.
        let text = String::from_utf8(bytes).unwrap();
        let lying = text.replacen(r#""dev":2"#, r#""dev":1"#, 1);
        assert_ne!(lying, text);
        assert!(GroupVariants::decode(lying.as_bytes(), &parents).is_err());
    }
}
