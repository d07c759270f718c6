//! Issue 30 item 1: seq rows carry the dataset's API list (API-BLEND §5.7.2: "we provide the
//! possible list of APIs and parameters … from the original dataset's API specifications"),
//! written once per dataset (rows name their tools; the specs are `tools/functions.json`), and
//! `toolforge eval` shows the model that list.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde_json::Value;
use toolforge::dataset::Example;
use toolforge::eval::prompt::{ToolFormat, agent_messages, direct_messages, openai_tools};
use toolforge::eval::rows::EvalSet;
use toolforge::pipeline::{build_and_emit, load_recipe};
use toolforge::seq::{Conversion, multiwoz, nlu, sgd, topv2};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn convert(recipe: &str) -> Conversion {
    let source = load_recipe(&root().join(format!("recipes/{recipe}.toml"))).unwrap().1;
    match recipe {
        "seq-atis" | "seq-snips" => nlu::convert(&source, None),
        "seq-topv2" => topv2::convert(&source, None),
        "seq-sgd" => sgd::convert(&source, None),
        "seq-multiwoz" => multiwoz::convert(&source, None),
        _ => unreachable!(),
    }
    .unwrap()
}

fn build(recipe: &str, tmp: &Path) -> PathBuf {
    let out = tmp.join("out");
    build_and_emit(
        &root().join(format!("recipes/{recipe}.toml")),
        Some(&out),
        Some(&tmp.join("store")),
        false,
    )
    .unwrap();
    out.join(recipe)
}

/// Every seq dataset's toolkit sizes, printed; no row of SeqATIS, SeqSNIPS or SeqTopV2 whose
/// toolkit is only its gold tool set (was 100% of their rows). A toolkit is judged by the tool
/// names the catalog holds, so a reference that resolves to nothing fails too.
#[test]
fn seq_toolkit_sizes_per_dataset_and_no_gold_only_toolkit() {
    for recipe in ["seq-atis", "seq-snips", "seq-topv2", "seq-sgd", "seq-multiwoz"] {
        let c = convert(recipe);
        let catalog: BTreeSet<&str> = c.catalog.iter().map(|t| t.name.as_str()).collect();
        let rows: Vec<&Example> = c.splits.values().flat_map(|o| &o.examples).collect();
        let mut sizes: BTreeMap<usize, usize> = BTreeMap::new();
        let mut per_domain: BTreeMap<String, usize> = BTreeMap::new();
        let mut only_gold = 0;
        for e in &rows {
            let kit: BTreeSet<&str> = e.tools.iter().map(|t| t.name.as_str()).collect();
            assert!(kit.is_subset(&catalog), "{recipe} {}: a tool outside the catalog", e.id);
            let gold: BTreeSet<&str> = e.output.iter().map(|c| c.name.as_str()).collect();
            assert!(
                gold.is_subset(&kit),
                "{recipe} {}: a gold tool outside the toolkit",
                e.id
            );
            only_gold += (kit == gold) as usize;
            *sizes.entry(kit.len()).or_default() += 1;
            if let Some(d) = e.meta.as_ref().and_then(|m| m["domain"].as_str()) {
                per_domain.insert(d.to_string(), kit.len());
            }
        }
        eprintln!(
            "{recipe}: catalog {} tools; {} rows; toolkit size → rows {sizes:?}; per domain {per_domain:?}; {only_gold} rows whose toolkit is only the gold set",
            catalog.len(),
            rows.len()
        );
        if ["seq-atis", "seq-snips", "seq-topv2"].contains(&recipe) {
            assert_eq!(only_gold, 0, "{recipe}");
        }
    }
}

/// The eval prompts of a built SeqATIS / SeqSNIPS show the model the whole API list: every
/// catalog tool of `tools/functions.json` (read here from the file) is in the system prompt with
/// its description and parameters (prompt format), and in the request's `tools` (native format),
/// on every row — not only the row's gold tools. The rows carry their tools' full specs (issue
/// 45): each `tools` element of `data/*.jsonl` is the catalog's spec of that name, never a bare
/// name.
#[test]
fn eval_prompts_show_the_datasets_api_list_not_the_gold_tools() {
    for recipe in ["seq-atis", "seq-snips"] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = build(recipe, tmp.path());
        let functions: Vec<Value> =
            serde_json::from_slice(&std::fs::read(dir.join("tools/functions.json")).unwrap()).unwrap();
        let names: Vec<&str> = functions
            .iter()
            .map(|f| f["function"]["name"].as_str().unwrap())
            .collect();
        // The rows: every catalog tool with its full spec, in catalog order.
        let mut jsonl_rows = 0;
        for f in std::fs::read_dir(dir.join("data")).unwrap() {
            let path = f.unwrap().path();
            if path.extension().is_none_or(|e| e != "jsonl") {
                continue;
            }
            for line in std::fs::read_to_string(&path).unwrap().lines() {
                let row: Value = serde_json::from_str(line).unwrap();
                let tools: Vec<Value> = serde_json::from_str(row["tools"].as_str().unwrap()).unwrap();
                let listed: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
                assert_eq!(listed, names, "{}", row["id"]);
                for (t, f) in tools.iter().zip(&functions) {
                    assert_eq!(
                        t["parameters"], f["function"]["parameters"],
                        "{}: a spec not the catalog's",
                        row["id"]
                    );
                    assert_eq!(t["description"], f["function"]["description"], "{}", row["id"]);
                }
                jsonl_rows += 1;
            }
        }
        let set = EvalSet::load(&dir, None).unwrap();
        assert_eq!(set.rows.len(), jsonl_rows);
        let mut multi_tool_rows = 0;
        for row in &set.rows {
            let toolkit = set.toolkit(row);
            let shown: Vec<&str> = toolkit.iter().map(|t| t.name.as_str()).collect();
            assert_eq!(shown, names, "{}", row.id);
            let gold: BTreeSet<&str> = row.gold.iter().map(|c| c.name.as_str()).collect();
            multi_tool_rows += (gold.len() < names.len()) as usize;
            let direct = direct_messages(row, &toolkit, ToolFormat::Prompt, &[]);
            let agent = agent_messages(row, &toolkit, ToolFormat::Prompt, &[]);
            for system in [&direct[0].content, &agent[0].content] {
                for f in &functions {
                    let line = serde_json::json!({"name": f["function"]["name"], "description": f["function"]["description"], "parameters": f["function"]["parameters"]}).to_string();
                    assert!(system.contains(&line), "{}: the prompt lacks {line}", row.id);
                }
            }
            let native = openai_tools(&toolkit);
            let native: Vec<&str> = native.iter().map(|t| t["function"]["name"].as_str().unwrap()).collect();
            assert_eq!(native, names, "{}", row.id);
        }
        eprintln!(
            "{recipe}: {} rows, every eval prompt lists all {} tools ({multi_tool_rows} rows whose gold uses fewer)",
            set.rows.len(),
            names.len()
        );
        assert_eq!(multi_tool_rows, set.rows.len());
    }
}
