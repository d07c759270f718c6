//! Drawing the drift: a tool's change log ([`plan_tool`], one seeded stream per tool), A_new
//! from A_old and the log ([`apply_schema`]), the drift of a whole dataset ([`Drift::plan`],
//! `tools/drift.json`) and the drift variant rows ([`Drift::variant`]).

use std::collections::{BTreeMap, HashMap};

use serde_json::{Map, Value, json};

use super::{
    Change, Drift, DriftConfig, OPERATORS, Rng, Scope, ToolDrift, default_flip, endpoint_evolution, migrate,
    nested_object, parameter_rename, props, required, required_swap, type_drift,
};
use crate::dataset::{Build, Example};
use crate::tools::ToolSpec;
use crate::tools::rest::Endpoint;
use crate::variants::variant_row;

/// Draws the change log of one tool (module docs). `path`: a REST endpoint's A_old path (the
/// path is versioned too; nesting groups its filter parameters and moves it to POST).
pub fn plan_tool(spec: &ToolSpec, path: Option<&str>, cfg: &DriftConfig, rng: &mut Rng) -> Vec<Change> {
    let on = |op: &str| cfg.operators.iter().any(|o| o == op);
    let ps = props(&spec.parameters);
    let req = required(&spec.parameters);
    // Which operators are applicable, with the change each would make.
    let mut taken: Vec<String> = Vec::new(); // parameters given a value-level change
    let mut order: Vec<&str> = OPERATORS.to_vec();
    rng.shuffle(&mut order);
    let mut chosen: Vec<Change> = Vec::new();
    let mut fallback: Option<Vec<Change>> = None;
    for op in order {
        if !on(op) {
            continue;
        }
        let changes: Vec<Change> = match op {
            "endpoint_evolution" => endpoint_evolution::propose(spec, path),
            "type_drift" => type_drift::propose(&ps, &taken, rng),
            "default_flip" => default_flip::propose(&ps, &taken, rng),
            "required_swap" => required_swap::propose(&ps, &req, &taken, rng),
            "parameter_rename" => parameter_rename::propose(&ps, rng),
            // nested_object; members named after renaming, applied later
            _ => nested_object::propose(&ps, path.is_some()),
        };
        if changes.is_empty() {
            continue;
        }
        if rng.chance(cfg.probability(op)) {
            for c in &changes {
                if let Change::TypeDrift { parameter, .. }
                | Change::DefaultFlip { parameter, .. }
                | Change::RequiredSwap { parameter, .. } = c
                {
                    taken.push(parameter.clone());
                }
            }
            chosen.extend(changes);
        } else if fallback.is_none() {
            fallback = Some(changes.clone());
        }
    }
    if chosen.is_empty() {
        chosen = fallback.unwrap_or_default();
    }
    // Nest members are named as in A_new.
    let renames: HashMap<String, String> = chosen
        .iter()
        .filter_map(|c| match c {
            Change::ParameterRename { from, to } => Some((from.clone(), to.clone())),
            _ => None,
        })
        .collect();
    for c in &mut chosen {
        if let Change::NestedObject { members, .. } = c {
            for m in members.iter_mut() {
                if let Some(r) = renames.get(m) {
                    *m = r.clone();
                }
            }
        }
    }
    // Canonical order: the order migration applies them.
    chosen.sort_by_key(|c| {
        OPERATORS
            .iter()
            .position(|o| *o == c.operator())
            .map(|i| [2, 1, 0, 0, 0, 3][i])
            .unwrap_or(9)
    });
    chosen
}

/// A_new of a tool: `changes` applied to A_old (a per-instance spec keeps its enums). A REST
/// endpoint (description ending `(GET <path>)`) whose parameters were nested is described as
/// `(POST <path>)` (verb evolution, [`nested_object`]).
pub fn apply_schema(spec: &ToolSpec, changes: &[Change]) -> ToolSpec {
    let mut new = spec.clone();
    let mut properties: Map<String, Value> = new.parameters["properties"].as_object().cloned().unwrap_or_default();
    let mut req = required(&new.parameters);
    for c in changes {
        match c {
            Change::EndpointEvolution {
                name_new,
                path_old,
                path_new,
                ..
            } => endpoint_evolution::apply(&mut new, name_new, path_old, path_new),
            Change::TypeDrift { parameter, from } => type_drift::apply(&mut properties, parameter, from),
            Change::DefaultFlip { parameter, new: d, .. } => default_flip::apply(&mut properties, parameter, d),
            Change::RequiredSwap {
                parameter,
                now_required,
                ..
            } => required_swap::apply(&mut req, parameter, *now_required),
            Change::ParameterRename { from, to } => parameter_rename::apply(&mut properties, &mut req, from, to),
            Change::NestedObject { group, members } => {
                nested_object::apply(&mut properties, &mut req, group, members);
                new.description = new.description.replace("(GET /", "(POST /");
            }
        }
    }
    new.parameters =
        json!({"type": "object", "properties": properties, "required": req, "additionalProperties": false});
    new
}

/// The drift of one instance (scope `instance`, SLOT/SEL): every tool of `e`'s toolkit drawn
/// from its own stream (`seed`, `drift`, `e.id`, tool name) with the configured operator mix,
/// so two rows get different A_new for the same tool and a row's A_new never depends on the
/// others.
pub fn plan_instance(e: &Example, cfg: &DriftConfig, seed: u64, format: &str) -> Drift {
    let tools = e
        .tools
        .iter()
        .filter_map(|t| {
            let mut rng = Rng::new(seed, &["drift", &e.id, &t.name]);
            let changes = plan_tool(t, None, cfg, &mut rng);
            (!changes.is_empty()).then(|| ToolDrift::of_tool(t, changes))
        })
        .collect();
    let mut drift = Drift {
        format: format.to_string(),
        seed,
        scope: Scope::Instance,
        tools,
    };
    drift.unique_new_names(e.tools.iter().map(|t| t.name.as_str()));
    drift
}

impl Drift {
    /// Draws the drift of a dataset: REST (scope `tool`), every endpoint of
    /// `tools/endpoints.json`, one seeded stream per endpoint (seed, `drift`, db, name); SLOT/SEL
    /// (scope `instance`), no tools here — each row draws its own ([`plan_instance`]).
    pub fn plan(build: &Build, cfg: &DriftConfig, seed: u64) -> Drift {
        let format = build.recipe.format.clone();
        let mut tools = Vec::new();
        let mut names: Vec<String> = Vec::new();
        if format == "rest" {
            let endpoints: Vec<Endpoint> = build
                .extra_files
                .get("tools/endpoints.json")
                .and_then(|b| serde_json::from_slice(b).ok())
                .unwrap_or_default();
            names = endpoints.iter().map(|ep| ep.name.clone()).collect();
            for ep in endpoints {
                let spec = ep.tool_spec();
                let mut rng = Rng::new(seed, &["drift", &ep.db_id, &ep.name]);
                let changes = plan_tool(&spec, Some(ep.path.as_str()), cfg, &mut rng);
                if changes.is_empty() {
                    continue;
                }
                let path_new = changes.iter().find_map(|c| match c {
                    Change::EndpointEvolution { path_new, .. } => path_new.clone(),
                    _ => None,
                });
                let post = changes.iter().any(|c| matches!(c, Change::NestedObject { .. }));
                tools.push(ToolDrift {
                    method: Some(if post { "POST" } else { "GET" }.to_string()),
                    db_id: Some(ep.db_id.clone()),
                    path_new: Some(path_new.unwrap_or_else(|| ep.path.clone())),
                    path_old: Some(ep.path.clone()),
                    new: apply_schema(&spec, &changes),
                    old: spec,
                    changes,
                });
            }
        }
        let scope = if format == "rest" { Scope::Tool } else { Scope::Instance };
        let mut drift = Drift {
            format,
            seed,
            scope,
            tools,
        };
        drift.unique_new_names(names.iter().map(String::as_str));
        drift
    }

    /// Makes every `endpoint_evolution` name unique among the tools of the catalog (REST: every
    /// endpoint, names being unique across databases) or the instance (SLOT/SEL): a new name that
    /// an A_old name in `names` or an earlier A_new name already has is numbered
    /// ([`endpoint_evolution::versioned`] with n = 2, 3, …), in the change log and A_new alike.
    pub(super) fn unique_new_names<'n>(&mut self, names: impl Iterator<Item = &'n str>) {
        let mut taken: std::collections::BTreeSet<String> = names.map(String::from).collect();
        for t in &mut self.tools {
            for c in &mut t.changes {
                let Change::EndpointEvolution { name_old, name_new, .. } = c else {
                    continue;
                };
                let mut n = 2;
                while taken.contains(name_new.as_str()) {
                    *name_new = endpoint_evolution::versioned(name_old, n);
                    n += 1;
                }
                taken.insert(name_new.clone());
                t.new.name = name_new.clone();
            }
        }
    }

    /// The A_new of one instance from its drift row (scope `instance`): `tools` the row's (A_old)
    /// specs, `variant` its `meta.variant` (`changes`: change log by A_old tool name). `None`
    /// when `variant` has no change log. Used by `serve` (sessions of that row), `eval` and the
    /// tests.
    pub fn of_instance<T: std::borrow::Borrow<ToolSpec>>(format: &str, tools: &[T], variant: &Value) -> Option<Drift> {
        let log = variant["changes"].as_object()?;
        let tools = tools
            .iter()
            .map(T::borrow)
            .filter_map(|t| {
                let changes: Vec<Change> = serde_json::from_value(log.get(&t.name)?.clone()).ok()?;
                Some(ToolDrift::of_tool(t, changes))
            })
            .collect();
        Some(Drift {
            format: format.to_string(),
            seed: 0,
            scope: Scope::Instance,
            tools,
        })
    }

    /// The `tools/drift.json` document.
    pub fn document(&self) -> Value {
        serde_json::to_value(self).expect("serialisable")
    }

    /// Tools changed per operator.
    pub fn operator_counts(&self) -> BTreeMap<&'static str, usize> {
        let mut out = BTreeMap::new();
        for t in &self.tools {
            let mut ops: Vec<&str> = t.changes.iter().map(Change::operator).collect();
            ops.dedup();
            for o in ops {
                *out.entry(o).or_insert(0) += 1;
            }
        }
        out
    }

    /// The drift of the A_old tool `name` (REST: of database `db`).
    pub fn by_old_name(&self, db: Option<&str>, name: &str) -> Option<&ToolDrift> {
        self.tools
            .iter()
            .find(|t| t.old.name == name && (self.format != "rest" || t.db_id.as_deref() == db))
    }

    /// The drift of the A_new tool `name` (REST: of database `db`).
    pub fn by_new_name(&self, db: Option<&str>, name: &str) -> Option<&ToolDrift> {
        self.tools
            .iter()
            .find(|t| t.new.name == name && (self.format != "rest" || t.db_id.as_deref() == db))
    }

    /// The drift variant of `e`: `tools` = A_old (the parent's), `output` = every call migrated,
    /// `meta.variant` = {`tools_new`: the instance's A_new specs, `changes`: change log per
    /// drifted tool of the toolkit, `loud_calls`: indexes of calls an A_new validator rejects in
    /// their old form}. `None` when no call changed.
    pub fn variant(&self, e: &Example) -> Option<Example> {
        let db = e.db_id.as_deref();
        let mut changes_log = Map::new();
        let tools_new: Vec<ToolSpec> = e
            .tools
            .iter()
            .map(|t| match self.by_old_name(db, &t.name) {
                Some(d) => {
                    changes_log.insert(t.name.clone(), json!(d.changes));
                    apply_schema(t, &d.changes)
                }
                None => t.clone(),
            })
            .collect();
        let mut output = Vec::new();
        let mut loud = Vec::new();
        let mut changed = false;
        for (i, c) in e.output.iter().enumerate() {
            match self.by_old_name(db, &c.name) {
                Some(d) => {
                    let m = migrate(c, &d.changes);
                    changed |= m.call != *c;
                    if m.loud {
                        loud.push(i);
                    }
                    output.push(m.call);
                }
                None => output.push(c.clone()),
            }
        }
        if !changed {
            return None;
        }
        let mut row = variant_row(
            e,
            "drift",
            "drift",
            json!({"tools_new": tools_new, "changes": changes_log, "loud_calls": loud}),
        );
        row.output = output;
        Some(row)
    }
}
