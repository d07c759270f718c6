//! SGD (`sgd` source, DSTC8 Schema-Guided Dialogue) → SeqSGD.
//!
//! Input: `<root>/{train,dev,test}/schema.json` and `<root>/<split>/dialogues_*.json`.
//!
//! Rules (each pinned by a test below):
//!
//! - **Catalog**: one tool per (service, intent) of the schemas, named `<Service>_<Intent>`
//!   (e.g. `Restaurants_2_ReserveRestaurant`; intent names repeat across services with different
//!   slots, so the service is part of the name). Slots become `string` parameters with the slot
//!   description; `possible_values` become an `enum` only when the slot `is_categorical`;
//!   `required_slots` are `required`, `optional_slots` optional (their default becomes the JSON
//!   Schema `default` unless it is `dontcare`, which means "any" and is the same as omission);
//!   `additionalProperties: false`. `result_slots` are the `output_parameters`. A service defined
//!   in several splits' schemas is taken from the first split (train, dev, test); differing
//!   definitions are counted in `schema_conflicts`.
//! - **Calls**: one call per system-turn `service_call`, in dialogue order, with its canonical
//!   method and parameter values (not the user state's surface forms: "half past 11 in the
//!   morning" is `11:30` in the call). A call identical to the one just before it (the system
//!   re-ran the same query) is collapsed into one (`duplicate_calls_collapsed`). Labels are
//!   `<tool>_<n>` (n counts that tool's calls in the example, from 1).
//! - **Request**: the deterministic `templates/seq-sgd-request.j2` rendering of the calls (intent
//!   description + slot names + canonical values), so every value is grounded. There is no LLM
//!   paraphrase yet; `meta.surface_forms` keeps what the user actually said for each canonical
//!   value that differs, for a later paraphrase step.
//! - **Tools of an instance**: every intent of the services the dialogue lists (`services`): the
//!   API the system had in that dialogue, including intents it did not call (distractors).
//!
//! Drop reasons: `no_service_call` (the dialogue never executed a call), `unknown_tool` (a call
//! whose service or method is not in the schemas), `schema_violation` (a call failing its JSON
//! Schema). Malformed dialogue records are bad records (file, record index, message).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use rayon::prelude::*;
use serde_json::{Map, Value, json};

use super::Conversion;
use super::check::{Checker, SeqStats};
use crate::corpus::{BadRecord, CorpusError, read_json};
use crate::dataset::{Drop, Example, Outcome};
use crate::recipe::ResolvedSource;
use crate::tools::{Call, ToolSpec};

/// The SGD splits, in catalog precedence order.
const SPLITS: [&str; 3] = ["train", "dev", "test"];

/// The request template (minijinja).
const REQUEST_TEMPLATE: &str = include_str!("../../templates/seq-sgd-request.j2");

/// Published SeqSGD sizes (API-BLEND, train/dev/test), for the report.
const PAPER_SIZES: [(&str, usize); 3] = [("train", 6782), ("dev", 1092), ("test", 1567)];

fn dialogue_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| {
                    p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with("dialogues_") && n.ends_with(".json"))
                })
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    files
}

/// Every file the conversion reads: per split its `schema.json` and dialogue files, sorted.
pub fn inputs(source: &ResolvedSource) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for split in SPLITS {
        let dir = source.root.join(split);
        let schema = dir.join("schema.json");
        if schema.is_file() {
            out.push(schema);
        }
        out.extend(dialogue_files(&dir));
    }
    out.sort();
    out
}

fn rel(root: &Path, path: &Path) -> String {
    path.strip_prefix(root).unwrap_or(path).display().to_string()
}

/// `<Service>_<Intent>` with every character outside `[A-Za-z0-9_]` replaced by `_`.
fn tool_name(service: &str, intent: &str) -> String {
    format!("{service}_{intent}")
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '_' { c } else { '_' })
        .collect()
}

/// The catalog entries of one schema service: `(tool, spec)` per intent, in schema order.
fn service_tools(service: &Value) -> Result<Vec<ToolSpec>, String> {
    let name = service["service_name"].as_str().ok_or("service without service_name")?;
    let sdesc = service["description"].as_str().unwrap_or("");
    let slots: BTreeMap<&str, &Value> = service["slots"]
        .as_array()
        .ok_or_else(|| format!("service {name}: no slots array"))?
        .iter()
        .filter_map(|s| Some((s["name"].as_str()?, s)))
        .collect();
    let param = |slot: &str| -> Result<Value, String> {
        let s = slots
            .get(slot)
            .ok_or_else(|| format!("service {name}: intent uses unknown slot {slot}"))?;
        let mut p = Map::new();
        p.insert("type".into(), json!("string"));
        p.insert("description".into(), json!(s["description"].as_str().unwrap_or(slot)));
        let values = s["possible_values"].as_array().filter(|v| !v.is_empty());
        if let (Some(true), Some(values)) = (s["is_categorical"].as_bool(), values) {
            p.insert("enum".into(), json!(values));
        }
        Ok(Value::Object(p))
    };
    let mut tools = Vec::new();
    for intent in service["intents"]
        .as_array()
        .ok_or_else(|| format!("service {name}: no intents"))?
    {
        let iname = intent["name"]
            .as_str()
            .ok_or_else(|| format!("service {name}: intent without name"))?;
        let mut props = Map::new();
        let mut required = Vec::new();
        for slot in intent["required_slots"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
        {
            props.insert(slot.into(), param(slot)?);
            required.push(json!(slot));
        }
        if let Some(optional) = intent["optional_slots"].as_object() {
            for (slot, default) in optional {
                let mut p = param(slot)?;
                if let Some(d) = default.as_str().filter(|d| *d != "dontcare") {
                    p["default"] = json!(d);
                }
                props.insert(slot.clone(), p);
            }
        }
        let mut outputs = Map::new();
        for slot in intent["result_slots"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
        {
            let desc = slots.get(slot).and_then(|s| s["description"].as_str()).unwrap_or(slot);
            outputs.insert(slot.into(), json!({"type": "string", "description": desc}));
        }
        let transactional = intent["is_transactional"].as_bool().unwrap_or(false);
        tools.push(ToolSpec {
            name: tool_name(name, iname),
            description: format!(
                "{} ({name}: {sdesc}{})",
                intent["description"].as_str().unwrap_or(iname),
                if transactional { "; transactional" } else { "" }
            ),
            parameters: json!({"type": "object", "properties": props, "required": required, "additionalProperties": false}),
            output_parameters: json!({"type": "array", "items": {"type": "object", "properties": outputs}}),
        });
    }
    Ok(tools)
}

/// The schema catalog: services by name (first split wins) → their tools; plus conflicts.
struct Schema {
    services: BTreeMap<String, Vec<ToolSpec>>,
    /// Intent description per tool, for the request text.
    phrases: BTreeMap<String, String>,
    conflicts: usize,
}

fn load_schema(root: &Path, splits: &[&str]) -> Result<Schema, CorpusError> {
    let mut raw: BTreeMap<String, Value> = BTreeMap::new();
    let mut conflicts = 0;
    for split in splits {
        let path = root.join(split).join("schema.json");
        if !path.is_file() {
            continue;
        }
        let value = read_json(&path)?;
        let services = value.as_array().ok_or_else(|| CorpusError::Malformed {
            path: path.clone(),
            message: "expected a JSON array of services".into(),
        })?;
        for s in services {
            let Some(name) = s["service_name"].as_str() else {
                return Err(CorpusError::Malformed {
                    path: path.clone(),
                    message: "service without service_name".into(),
                });
            };
            match raw.get(name) {
                Some(prev) if prev != s => conflicts += 1,
                Some(_) => {}
                None => {
                    raw.insert(name.to_string(), s.clone());
                }
            }
        }
    }
    let mut services = BTreeMap::new();
    let mut phrases = BTreeMap::new();
    for (name, s) in &raw {
        let tools = service_tools(s).map_err(|message| CorpusError::Malformed {
            path: root.join("schema.json"),
            message,
        })?;
        for intent in s["intents"].as_array().into_iter().flatten() {
            let iname = intent["name"].as_str().unwrap_or_default();
            phrases.insert(
                tool_name(name, iname),
                intent["description"].as_str().unwrap_or(iname).to_string(),
            );
        }
        services.insert(name.clone(), tools);
    }
    Ok(Schema {
        services,
        phrases,
        conflicts,
    })
}

/// One executed service call of a dialogue.
#[derive(Debug, Clone, PartialEq)]
struct ServiceCall {
    service: String,
    method: String,
    parameters: Map<String, Value>,
}

/// The parts of a dialogue record the conversion reads.
#[derive(Debug)]
struct Dialogue {
    id: String,
    services: Vec<String>,
    calls: Vec<ServiceCall>,
    /// (slot, canonical value, what the user said) where the two differ, first occurrence.
    surface_forms: Vec<(String, String, String)>,
}

fn parse_dialogue(rec: &Value) -> Result<Dialogue, String> {
    let obj = rec.as_object().ok_or("expected a dialogue object")?;
    let id = obj
        .get("dialogue_id")
        .and_then(Value::as_str)
        .ok_or("missing string field `dialogue_id`")?
        .to_string();
    let services = obj
        .get("services")
        .and_then(Value::as_array)
        .ok_or_else(|| format!("dialogue {id}: missing array field `services`"))?
        .iter()
        .map(|s| s.as_str().map(str::to_string))
        .collect::<Option<Vec<_>>>()
        .ok_or_else(|| format!("dialogue {id}: `services` must hold strings"))?;
    let turns = obj
        .get("turns")
        .and_then(Value::as_array)
        .ok_or_else(|| format!("dialogue {id}: missing array field `turns`"))?;
    let mut calls = Vec::new();
    let mut surface_forms = Vec::new();
    let mut seen = BTreeSet::new();
    for (ti, turn) in turns.iter().enumerate() {
        let frames = turn["frames"]
            .as_array()
            .ok_or_else(|| format!("dialogue {id}: turn {ti} has no `frames` array"))?;
        let speaker = turn["speaker"].as_str().unwrap_or_default();
        for frame in frames {
            if speaker == "USER" {
                for action in frame["actions"].as_array().into_iter().flatten() {
                    let slot = action["slot"].as_str().unwrap_or_default();
                    let said = action["values"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(Value::as_str);
                    let canon = action["canonical_values"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(Value::as_str);
                    for (s, c) in said.zip(canon) {
                        if s != c && seen.insert((slot.to_string(), c.to_string())) {
                            surface_forms.push((slot.to_string(), c.to_string(), s.to_string()));
                        }
                    }
                }
            }
            let Some(sc) = frame.get("service_call") else { continue };
            let service = frame["service"]
                .as_str()
                .ok_or_else(|| format!("dialogue {id}: turn {ti}: service_call frame without `service`"))?;
            let method = sc["method"]
                .as_str()
                .ok_or_else(|| format!("dialogue {id}: turn {ti}: service_call without `method`"))?;
            let parameters = sc["parameters"]
                .as_object()
                .ok_or_else(|| format!("dialogue {id}: turn {ti}: service_call without `parameters` object"))?;
            calls.push(ServiceCall {
                service: service.to_string(),
                method: method.to_string(),
                parameters: parameters.clone(),
            });
        }
    }
    Ok(Dialogue {
        id,
        services,
        calls,
        surface_forms,
    })
}

/// Renders the request text of a call sequence.
fn render_request(calls: &[Call], phrases: &BTreeMap<String, String>) -> Result<String, String> {
    let steps: Vec<Value> = calls
        .iter()
        .map(|c| {
            json!({
                "phrase": phrases.get(&c.name).cloned().unwrap_or_else(|| c.name.clone()),
                "args": c.arguments.iter().map(|(k, v)| json!({
                    "slot": k.replace('_', " "),
                    "value": v.as_str().map(str::to_string).unwrap_or_else(|| v.to_string()),
                })).collect::<Vec<_>>(),
            })
        })
        .collect();
    let mut env = minijinja::Environment::new();
    env.add_template("request", REQUEST_TEMPLATE)
        .map_err(|e| e.to_string())?;
    let tmpl = env.get_template("request").map_err(|e| e.to_string())?;
    tmpl.render(minijinja::value::Serde(json!({"steps": steps})))
        .map_err(|e| e.to_string())
}

/// What happened to one dialogue.
enum Converted {
    Example(Box<Example>, usize),
    Drop(Drop),
}

fn convert_dialogue(d: &Dialogue, split: &str, file: &str, schema: &Schema, checker: &Checker) -> Converted {
    let id = format!("{split}/{}", d.id);
    let drop = |reason: &str, detail: String| {
        Converted::Drop(Drop {
            id: id.clone(),
            group: split.to_string(),
            reason: reason.into(),
            detail,
        })
    };
    if d.calls.is_empty() {
        return drop("no_service_call", format!("dialogue {} executed no service call", d.id));
    }
    let known: BTreeSet<String> = schema.services.values().flatten().map(|t| t.name.clone()).collect();
    let mut calls: Vec<Call> = Vec::new();
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    let mut collapsed = 0;
    let mut last: Option<&ServiceCall> = None;
    for sc in &d.calls {
        if last == Some(sc) {
            collapsed += 1;
            continue;
        }
        last = Some(sc);
        let name = tool_name(&sc.service, &sc.method);
        if !known.contains(&name) {
            return drop(
                "unknown_tool",
                format!("service call {}.{} is not in the schemas", sc.service, sc.method),
            );
        }
        let n = counts.entry(name.clone()).or_insert(0);
        *n += 1;
        let call = Call {
            label: format!("{name}_{n}"),
            name,
            arguments: sc.parameters.clone(),
        };
        if let Err(e) = checker.validate(&call) {
            return drop("schema_violation", e);
        }
        calls.push(call);
    }
    let input = match render_request(&calls, &schema.phrases) {
        Ok(text) => text,
        Err(e) => return drop("template_error", e),
    };
    let tools: Vec<ToolSpec> = d
        .services
        .iter()
        .flat_map(|s| {
            schema
                .services
                .get(s)
                .into_iter()
                .flatten()
                .map(|t| ToolSpec::reference(&t.name))
        })
        .collect();
    let used: BTreeSet<(&str, &str)> = calls
        .iter()
        .flat_map(|c| c.arguments.iter().filter_map(|(k, v)| Some((k.as_str(), v.as_str()?))))
        .collect();
    let surface: Vec<Value> = d
        .surface_forms
        .iter()
        .filter(|(slot, canon, _)| used.contains(&(slot.as_str(), canon.as_str())))
        .map(|(slot, canon, said)| json!({"slot": slot, "canonical": canon, "said": said}))
        .collect();
    let example = Example {
        id,
        split: split.to_string(),
        input,
        output: calls,
        tools,
        meta: Some(json!({
            "dialogue_id": d.id,
            "file": file,
            "services": d.services,
            "request": "template",
            "duplicate_calls_collapsed": collapsed,
            "surface_forms": surface,
        })),
        ..Example::default()
    };
    Converted::Example(Box::new(example), collapsed)
}

/// Converts the source (only `split` when given).
pub fn convert(source: &ResolvedSource, split: Option<&str>) -> Result<Conversion, CorpusError> {
    let root = &source.root;
    let schema = load_schema(root, &SPLITS)?;
    let catalog: Vec<ToolSpec> = schema.services.values().flatten().cloned().collect();
    let checker = Checker::new(&catalog).map_err(|message| CorpusError::Malformed {
        path: root.clone(),
        message,
    })?;
    let mut conversion = Conversion {
        catalog,
        ..Conversion::default()
    };
    let mut stats = SeqStats::default();
    let mut collapsed_total = 0;
    let mut files_per_split = Map::new();
    for sp in SPLITS.iter().filter(|s| split.is_none_or(|want| want == **s)) {
        let files = dialogue_files(&root.join(sp));
        if files.is_empty() {
            continue;
        }
        files_per_split.insert(sp.to_string(), json!(files.len()));
        let parsed: Vec<(String, Value)> = files
            .par_iter()
            .map(|f| crate::corpus::read_json_lossy(f).map(|v| (rel(root, f), v)))
            .collect::<Result<_, _>>()?;
        let mut outcome = Outcome::default();
        for (file, value) in parsed {
            let Value::Array(records) = value else {
                return Err(CorpusError::Malformed {
                    path: root.join(&file),
                    message: "expected a JSON array of dialogues".into(),
                });
            };
            for (i, rec) in records.iter().enumerate() {
                let d = match crate::corpus::invalid_record(rec).map_or_else(|| parse_dialogue(rec), Err) {
                    Ok(d) => d,
                    Err(message) => {
                        conversion.bad_records.push(BadRecord {
                            file: file.clone(),
                            record: i,
                            message,
                        });
                        continue;
                    }
                };
                outcome.attempted += 1;
                match convert_dialogue(&d, sp, &file, &schema, &checker) {
                    Converted::Example(e, collapsed) => {
                        stats.add(&e, &checker);
                        collapsed_total += collapsed;
                        outcome.examples.push(*e);
                    }
                    Converted::Drop(d) => outcome.drops.push(d),
                }
            }
        }
        conversion.splits.insert(sp.to_string(), outcome);
    }
    let mut s = stats.into_json();
    s.insert(
        "rules".into(),
        json!([
            "one call per system-turn service_call, in dialogue order, with its canonical method and parameter values; a call identical to the previous one is collapsed",
            "tools: one per schema (service, intent), named <Service>_<Intent>; slots are string parameters, enum only for categorical slots, required from required_slots",
            "instance tools: every intent of the dialogue's services",
            "request: deterministic template over the calls (every value grounded); meta.surface_forms keeps what the user said",
        ]),
    );
    s.insert(
        "request_text".into(),
        json!("template: templates/seq-sgd-request.j2 (deterministic, no LLM paraphrase yet)"),
    );
    s.insert("duplicate_calls_collapsed".into(), json!(collapsed_total));
    s.insert("schema_services".into(), json!(schema.services.len()));
    s.insert("schema_conflicts".into(), json!(schema.conflicts));
    s.insert("tools".into(), json!(conversion.catalog.len()));
    s.insert("dialogue_files".into(), Value::Object(files_per_split));
    s.insert(
        "paper_sizes".into(),
        json!(
            PAPER_SIZES
                .iter()
                .map(|(k, v)| (k.to_string(), json!(v)))
                .collect::<Map<_, _>>()
        ),
    );
    conversion.stats = s;
    Ok(conversion)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recipe::SourceManifest;

    fn corpus() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/corpora/sgd")
    }

    fn source(root: &Path) -> ResolvedSource {
        let manifest =
            SourceManifest::load(&PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("sources/sgd.toml")).unwrap();
        ResolvedSource {
            manifest,
            root: root.to_path_buf(),
            questions: root.join("dev/schema.json"),
            databases: root.to_path_buf(),
            tables: None,
        }
    }

    #[test]
    fn real_dialogue_calls_hold_canonical_values_not_surface_forms() {
        let schema = load_schema(&corpus(), &SPLITS).unwrap();
        let catalog: Vec<ToolSpec> = schema.services.values().flatten().cloned().collect();
        let checker = Checker::new(&catalog).unwrap();
        let records = read_json(&corpus().join("dev/dialogues_001.json")).unwrap();
        let d = parse_dialogue(&records[0]).unwrap();
        assert_eq!(d.id, "1_00000");
        let Converted::Example(e, _) = convert_dialogue(&d, "dev", "dev/dialogues_001.json", &schema, &checker) else {
            panic!("dropped")
        };
        let reserve = e
            .output
            .iter()
            .find(|c| c.name == "Restaurants_2_ReserveRestaurant")
            .unwrap();
        assert_eq!(reserve.arguments["time"], "11:30");
        assert_eq!(reserve.arguments["restaurant_name"], "Sino");
        assert!(
            e.input.contains("11:30") && !e.input.contains("half past"),
            "{}",
            e.input
        );
        let meta = e.meta.unwrap();
        assert!(
            meta["surface_forms"]
                .as_array()
                .unwrap()
                .iter()
                .any(|s| s["canonical"] == "11:30" && s["said"] == "half past 11 in the morning"),
            "{meta}"
        );
        assert!(
            e.output
                .iter()
                .all(|c| checker.validate(c).is_ok() && checker.ungrounded(c, &e.input).is_empty())
        );
        assert!(e.tools.iter().any(|t| t.name == "Restaurants_2_FindRestaurants"));
    }

    #[test]
    fn catalog_types_enums_required_and_unique_names() {
        let schema = load_schema(&corpus(), &SPLITS).unwrap();
        let tools: Vec<&ToolSpec> = schema.services.values().flatten().collect();
        let names: BTreeSet<&str> = tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names.len(), tools.len(), "tool names must be unique");
        let reserve = tools
            .iter()
            .find(|t| t.name == "Restaurants_2_ReserveRestaurant")
            .unwrap();
        let p = &reserve.parameters;
        assert!(p["required"].as_array().unwrap().contains(&json!("restaurant_name")));
        // number_of_seats is categorical → enum; restaurant_name is not → no enum.
        assert!(p["properties"]["number_of_seats"]["enum"].is_array(), "{p}");
        assert!(p["properties"]["restaurant_name"].get("enum").is_none());
        assert_eq!(schema.conflicts, 0);
    }

    #[test]
    fn malformed_record_is_a_bad_record_and_callless_dialogue_a_drop() {
        let tmp = tempfile::tempdir().unwrap();
        let dev = tmp.path().join("dev");
        std::fs::create_dir_all(&dev).unwrap();
        std::fs::copy(corpus().join("dev/schema.json"), dev.join("schema.json")).unwrap();
        let real = read_json(&corpus().join("dev/dialogues_001.json")).unwrap();
        let mut callless = real[0].clone();
        callless["dialogue_id"] = json!("x_1");
        for t in callless["turns"].as_array_mut().unwrap() {
            for f in t["frames"].as_array_mut().unwrap() {
                f.as_object_mut().unwrap().remove("service_call");
            }
        }
        let records = json!([real[0], {"dialogue_id": "x_2", "turns": []}, callless, 7]);
        std::fs::write(dev.join("dialogues_001.json"), serde_json::to_vec(&records).unwrap()).unwrap();
        let c = convert(&source(tmp.path()), None).unwrap();
        let bad: Vec<(String, usize)> = c.bad_records.iter().map(|b| (b.file.clone(), b.record)).collect();
        assert_eq!(
            bad,
            vec![
                ("dev/dialogues_001.json".into(), 1),
                ("dev/dialogues_001.json".into(), 3)
            ]
        );
        let dev = &c.splits["dev"];
        assert_eq!((dev.attempted, dev.examples.len()), (2, 1));
        assert_eq!(dev.drops[0].reason, "no_service_call");
        assert_eq!(dev.drops[0].id, "dev/x_1");
        assert_eq!(c.stats["calls_failing_schema"], 0);
    }

    #[test]
    fn consecutive_identical_calls_are_collapsed() {
        let tmp = tempfile::tempdir().unwrap();
        let dev = tmp.path().join("dev");
        std::fs::create_dir_all(&dev).unwrap();
        std::fs::copy(corpus().join("dev/schema.json"), dev.join("schema.json")).unwrap();
        let real = read_json(&corpus().join("dev/dialogues_001.json")).unwrap();
        let mut d = real[0].clone();
        let turns = d["turns"].as_array_mut().unwrap();
        let with_call = turns
            .iter()
            .position(|t| {
                t["frames"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|f| f.get("service_call").is_some())
            })
            .unwrap();
        let dup = turns[with_call].clone();
        turns.insert(with_call + 1, dup);
        std::fs::write(
            dev.join("dialogues_001.json"),
            serde_json::to_vec(&json!([real[0], d])).unwrap(),
        )
        .unwrap();
        let c = convert(&source(tmp.path()), Some("dev")).unwrap();
        let ex = &c.splits["dev"].examples;
        assert_eq!(ex[0].output, ex[1].output);
        assert_eq!(c.stats["duplicate_calls_collapsed"], 1);
    }
}
