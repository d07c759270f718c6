//! Training mixes (issue 45 item 3): a SQL family built from a generated Spider-layout corpus's
//! train split joins a mix; rows whose request is a dev-split question (planted, and a case /
//! punctuation perturbation of it) are dropped and counted as contaminated; exact and
//! normalised duplicates across two sources are kept once. Every expected number comes from the
//! test's own reading of the built files (its own normaliser), never from the mix's report alone.
//!
//! The corpus: `benches/synth.py --databases 3` (seconds), its questions cut into `dev.json`
//! (every third) and `train.json` (the rest, plus the planted dev questions); `extra.json` holds
//! copies of train questions (exact and perturbed). Recipes `slot-synth-dev` (split dev),
//! `slot-synth-train`, `slot-synth-extra` (split train) in a temporary project tree.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use serde_json::{Value as Json, json};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The test's own normal form: lower case, apostrophes dropped, any other non-alphanumeric
/// character a break, single spaces.
fn norm(text: &str) -> String {
    let cleaned: String = text
        .chars()
        .filter(|c| !matches!(c, '\'' | '\u{2019}'))
        .map(|c| if c.is_alphanumeric() { c } else { ' ' })
        .collect::<String>()
        .to_lowercase();
    cleaned.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A case and punctuation perturbation of `q` (same words).
fn perturb(q: &str) -> String {
    let mut words: Vec<String> = q.split(' ').map(str::to_string).collect();
    words[0] = words[0].to_uppercase();
    if words.len() > 2 {
        words[1] = format!("{},", words[1]);
    }
    let s = words.join("  ");
    format!("{} ?!", s.trim_end_matches(['?', '.']))
}

fn toolforge(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_toolforge"))
        .args(args)
        .env_remove("TOOLFORGE_STORE")
        .output()
        .unwrap()
}

fn build(tmp: &Path, recipe: &str) -> String {
    let path = tmp.join(format!("recipes/{recipe}.toml"));
    let o = toolforge(&["build", path.to_str().unwrap(), "--quiet", "--no-html"]);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(o.status.success(), "build {recipe}: {text}");
    text
}

fn build_err(tmp: &Path, recipe: &str) -> String {
    let path = tmp.join(format!("recipes/{recipe}.toml"));
    let o = toolforge(&["build", path.to_str().unwrap(), "--quiet"]);
    assert!(!o.status.success(), "mix {recipe} should fail");
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn jsonl(path: &Path) -> Vec<Json> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// A source manifest reading `questions` under `corpus`, named `name`.
fn source(tmp: &Path, name: &str, corpus: &Path, questions: &str) {
    let manifest = std::fs::read_to_string(root().join("sources/spider-dev.toml")).unwrap();
    let manifest: Vec<String> = manifest
        .lines()
        .map(|l| {
            if l.starts_with("search_paths") {
                format!("search_paths = [{:?}]", corpus.display().to_string())
            } else if l.starts_with("env ") {
                "env = \"TOOLFORGE_MIX_TEST_UNSET\"".into()
            } else if l.starts_with("questions") {
                format!("questions = [{questions:?}]")
            } else if l.starts_with("name ") {
                format!("name = {name:?}")
            } else {
                l.to_string()
            }
        })
        .collect();
    std::fs::write(tmp.join(format!("sources/{name}.toml")), manifest.join("\n")).unwrap();
}

fn recipe(tmp: &Path, name: &str, source: &str, split: &str) {
    std::fs::write(
        tmp.join(format!("recipes/{name}.toml")),
        format!(
            "name = {name:?}\ndescription = \"synthetic\"\nformat = \"slot\"\nsource = {source:?}\nsplit = {split:?}\n"
        ),
    )
    .unwrap();
}

fn mix_recipe(tmp: &Path, name: &str, body: &str) {
    std::fs::write(
        tmp.join(format!("recipes/{name}.toml")),
        format!("name = {name:?}\ndescription = \"test mix\"\nformat = \"mix\"\n{body}"),
    )
    .unwrap();
}

struct Fixture {
    tmp: tempfile::TempDir,
    /// Requests of the planted dev questions in train (exact, perturbed).
    planted: Vec<String>,
}

/// The project tree with the three SLOT datasets built (once per test binary).
fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let tmp = tempfile::tempdir().unwrap();
        let t = tmp.path();
        for d in ["recipes", "sources", "corpus"] {
            std::fs::create_dir_all(t.join(d)).unwrap();
        }
        let corpus = t.join("corpus");
        let o = Command::new("python3")
            .arg(root().join("benches/synth.py"))
            .arg(&corpus)
            .args(["--databases", "3", "--seed", "45", "--questions", "14", "--rows", "150"])
            .output()
            .unwrap();
        assert!(o.status.success(), "synth.py: {}", String::from_utf8_lossy(&o.stderr));
        let all: Vec<Json> = serde_json::from_str(&std::fs::read_to_string(corpus.join("dev.json")).unwrap()).unwrap();
        let (mut dev, mut train) = (Vec::new(), Vec::new());
        for (i, q) in all.into_iter().enumerate() {
            if i % 3 == 0 { dev.push(q) } else { train.push(q) }
        }
        std::fs::write(corpus.join("dev.json"), serde_json::to_string(&dev).unwrap()).unwrap();
        source(t, "synth-dev", &corpus, "dev.json");
        source(t, "synth-train", &corpus, "train.json");
        source(t, "synth-extra", &corpus, "extra.json");
        recipe(t, "slot-synth-dev", "synth-dev", "dev");
        recipe(t, "slot-synth-train", "synth-train", "train");
        recipe(t, "slot-synth-extra", "synth-extra", "train");
        build(t, "slot-synth-dev");
        // Plant two dev questions the dev build kept: one as it is, one perturbed.
        let kept: Vec<String> = jsonl(&t.join("out/slot-synth-dev/data/dev.jsonl"))
            .iter()
            .map(|r| r["input"].as_str().unwrap().to_string())
            .collect();
        let pick: Vec<&Json> = dev
            .iter()
            .filter(|q| kept.contains(&q["question"].as_str().unwrap().to_string()))
            .take(2)
            .collect();
        assert_eq!(pick.len(), 2, "the dev build keeps at least two questions");
        let mut a = pick[0].clone();
        let mut b = pick[1].clone();
        b["question"] = json!(perturb(b["question"].as_str().unwrap()));
        let planted = vec![
            a["question"].as_str().unwrap().to_string(),
            b["question"].as_str().unwrap().to_string(),
        ];
        a["question"] = json!(planted[0]);
        train.insert(1, a);
        train.insert(4, b);
        std::fs::write(corpus.join("train.json"), serde_json::to_string(&train).unwrap()).unwrap();
        // The second source: train questions again, exact and perturbed, and nothing else.
        let mut extra = Vec::new();
        for (i, q) in train.iter().enumerate().filter(|(i, _)| ![1, 4].contains(i)).take(6) {
            let mut q = q.clone();
            if i % 2 == 0 {
                q["question"] = json!(perturb(q["question"].as_str().unwrap()));
            }
            extra.push(q);
        }
        std::fs::write(corpus.join("extra.json"), serde_json::to_string(&extra).unwrap()).unwrap();
        build(t, "slot-synth-train");
        build(t, "slot-synth-extra");
        Fixture { tmp, planted }
    })
}

/// The test's reading of a source: (id, request) of each trajectory line, the request the data
/// row's `input` of the same id.
fn requests(out: &Path, recipe: &str, split: &str) -> Vec<(String, String, String)> {
    let inputs: HashMap<String, String> = jsonl(&out.join(format!("{recipe}/data/{split}.jsonl")))
        .into_iter()
        .map(|r| (r["id"].as_str().unwrap().into(), r["input"].as_str().unwrap().into()))
        .collect();
    let text = std::fs::read_to_string(out.join(format!("{recipe}/trajectories/{split}.jsonl"))).unwrap();
    text.lines()
        .map(|l| {
            let t: Json = serde_json::from_str(l).unwrap();
            let id = t["id"].as_str().unwrap().to_string();
            (id.clone(), inputs[&id].clone(), l.to_string())
        })
        .collect()
}

#[test]
fn sql_train_split_joins_the_mix_and_dev_questions_are_dropped_as_contaminated() {
    let f = fixture();
    let t = f.tmp.path();
    mix_recipe(
        t,
        "mix-a",
        "seed = 7\n[[sources]]\nrecipe = \"slot-synth-train\"\n[[sources]]\nrecipe = \"slot-synth-extra\"\n",
    );
    let summary = build(t, "mix-a");
    let out = t.join("out");
    let dev: HashSet<String> = jsonl(&out.join("slot-synth-dev/data/dev.jsonl"))
        .iter()
        .map(|r| norm(r["input"].as_str().unwrap()))
        .collect();
    // The judge: decontaminate, then de-duplicate in source order, exact before normalised.
    let (mut exact, mut normal) = (HashSet::new(), HashSet::new());
    let mut expected = Vec::new();
    let mut kept_lines: BTreeMap<String, String> = BTreeMap::new();
    for recipe in ["slot-synth-train", "slot-synth-extra"] {
        let (mut contaminated, mut dup_exact, mut dup_norm, mut kept) = (0, 0, 0, 0);
        for (id, request, line) in requests(&out, recipe, "train") {
            if dev.contains(&norm(&request)) {
                contaminated += 1;
            } else if !exact.insert(request.clone()) {
                dup_exact += 1;
            } else if !normal.insert(norm(&request)) {
                dup_norm += 1;
            } else {
                kept += 1;
                kept_lines.insert(id, line);
            }
        }
        expected.push((recipe, contaminated, dup_exact, dup_norm, kept));
    }
    let report: Json =
        serde_json::from_str(&std::fs::read_to_string(out.join("mix-a/report/mix.json")).unwrap()).unwrap();
    eprintln!("judge (recipe, contaminated, exact, normalised, kept): {expected:?}\n{summary}");
    for (i, (recipe, contaminated, dup_exact, dup_norm, kept)) in expected.iter().enumerate() {
        let s = &report["sources"][i];
        assert_eq!(s["recipe"], *recipe);
        let got = (
            s["contaminated"].as_u64().unwrap() as usize,
            s["duplicates_exact"].as_u64().unwrap() as usize,
            s["duplicates_normalised"].as_u64().unwrap() as usize,
            s["kept"].as_u64().unwrap() as usize,
        );
        assert_eq!(
            got,
            (*contaminated, *dup_exact, *dup_norm, *kept),
            "{recipe}: {s}\n{summary}"
        );
    }
    // The planted dev question and its perturbation are among the contaminated.
    assert!(expected[0].1 >= 2, "{expected:?}");
    // Every extra row repeats a train row (exact or perturbed): none is kept, both kinds counted.
    let extra = &expected[1];
    assert_eq!(extra.4, 0, "{expected:?}");
    assert!(
        extra.2 >= 1 && extra.3 >= 1,
        "exact and normalised duplicates: {expected:?}"
    );
    // The mix holds exactly the kept rows, byte for byte as the source wrote them.
    let mix = std::fs::read_to_string(out.join("mix-a/trajectories/train.jsonl")).unwrap();
    let mut got: BTreeMap<String, String> = BTreeMap::new();
    for l in mix.lines() {
        let t: Json = serde_json::from_str(l).unwrap();
        let id = t["id"].as_str().unwrap().to_string();
        assert!(got.insert(id, l.to_string()).is_none(), "a row twice");
    }
    assert!(!got.is_empty() && got.keys().all(|id| id.starts_with("slot-synth-train/")));
    assert_eq!(got, kept_lines);
    for l in mix.lines() {
        let t: Json = serde_json::from_str(l).unwrap();
        let user = t["messages"][1]["content"].as_str().unwrap();
        for p in &f.planted {
            assert!(!user.starts_with(p.as_str()), "planted {p:?} in the mix");
        }
    }
    // Shuffled: not in file order (the kept ids in file order differ from the mix's order).
    let order: Vec<String> = mix
        .lines()
        .map(|l| {
            serde_json::from_str::<Json>(l).unwrap()["id"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    let file_order: Vec<String> = requests(&out, "slot-synth-train", "train")
        .into_iter()
        .map(|(id, _, _)| id)
        .filter(|id| kept_lines.contains_key(id))
        .collect();
    assert_ne!(order, file_order, "the mix is shuffled");
    // The other exports: one line per row, in the same order.
    let openai = jsonl(&out.join("mix-a/trajectories/openai/train.jsonl"));
    let meta = jsonl(&out.join("mix-a/trajectories/openai/train.meta.jsonl"));
    let sharegpt = jsonl(&out.join("mix-a/trajectories/sharegpt/train.jsonl"));
    assert_eq!(
        (openai.len(), meta.len(), sharegpt.len()),
        (order.len(), order.len(), order.len())
    );
    for (i, id) in order.iter().enumerate() {
        assert_eq!((&meta[i]["id"], &meta[i]["line"]), (&json!(id), &json!(i)));
        assert_eq!(sharegpt[i]["id"], json!(id));
        let keys: Vec<&String> = openai[i].as_object().unwrap().keys().collect();
        assert_eq!(keys, ["messages", "tools", "parallel_tool_calls"]);
    }
    // The card: counts per source, what was checked and what could not be.
    let card = std::fs::read_to_string(out.join("mix-a/README.md")).unwrap();
    assert!(card.contains("| slot-synth-dev | dev ("), "{card}");
    assert!(card.contains("config_name: mix-a-sharegpt-"), "{card}");
    assert_eq!(report["total"]["rows"], json!(order.len()));
    let dev_rows = jsonl(&out.join("slot-synth-dev/data/dev.jsonl")).len();
    assert_eq!(
        report["evaluation"]["checked"]["slot-synth-dev"]["dev"],
        json!(dev_rows)
    );
    // Trainable sources aside, every recipe of the tree was checked; none is unavailable.
    assert_eq!(report["evaluation"]["unavailable"], json!({}), "{report}");
}

#[test]
fn mix_naming_bfcl_mcp_tools_or_an_unbuilt_recipe_fails_with_the_reason() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    std::fs::create_dir_all(t.join("recipes")).unwrap();
    for r in ["bfcl", "mcp-tools", "slot-spider"] {
        std::fs::copy(
            root().join(format!("recipes/{r}.toml")),
            t.join(format!("recipes/{r}.toml")),
        )
        .unwrap();
    }
    mix_recipe(t, "mix-bfcl", "[[sources]]\nrecipe = \"bfcl\"\n");
    let err = build_err(t, "mix-bfcl");
    assert!(
        err.contains("bfcl") && err.contains("no trajectories") && err.contains("evaluation set"),
        "{err}"
    );
    mix_recipe(t, "mix-mcp", "[[sources]]\nrecipe = \"mcp-tools\"\n");
    let err = build_err(t, "mix-mcp");
    assert!(
        err.contains("mcp-tools") && err.contains("no trajectories") && err.contains("executable back end"),
        "{err}"
    );
    mix_recipe(
        t,
        "mix-unbuilt",
        "[[sources]]\nrecipe = \"slot-spider\"\nsplit = \"dev\"\n",
    );
    let err = build_err(t, "mix-unbuilt");
    assert!(
        err.contains("slot-spider") && err.contains("not built") && err.contains("toolforge build slot-spider"),
        "{err}"
    );
    mix_recipe(t, "mix-unknown", "[[sources]]\nrecipe = \"slot-spyder\"\n");
    let err = build_err(t, "mix-unknown");
    assert!(err.contains("slot-spyder") && err.contains("no recipe"), "{err}");
    mix_recipe(t, "mix-weight", "[[sources]]\nrecipe = \"slot-spider\"\nweight = 3\n");
    let err = build_err(t, "mix-weight");
    assert!(err.contains("mix-weight.toml") && err.contains("weight"), "{err}");
}

#[test]
fn mix_is_byte_identical_per_seed_and_takes_weights_and_caps() {
    let f = fixture();
    let t = f.tmp.path();
    let out = t.join("out");
    let files = |name: &str| -> BTreeMap<String, Vec<u8>> {
        let mut m = BTreeMap::new();
        for rel in [
            "trajectories/train.jsonl",
            "trajectories/openai/train.jsonl",
            "trajectories/openai/train.meta.jsonl",
            "trajectories/sharegpt/train.jsonl",
            "README.md",
            "report/mix.json",
        ] {
            m.insert(rel.to_string(), std::fs::read(out.join(name).join(rel)).unwrap());
        }
        m
    };
    let body = "seed = 1\n[[sources]]\nrecipe = \"slot-synth-train\"\n";
    mix_recipe(t, "mix-seed", body);
    build(t, "mix-seed");
    let first = files("mix-seed");
    build(t, "mix-seed");
    assert!(first == files("mix-seed"), "a rebuild changed the files");
    mix_recipe(t, "mix-seed2", &body.replace("seed = 1", "seed = 2"));
    build(t, "mix-seed2");
    let ids = |name: &str| -> Vec<String> {
        jsonl(&out.join(name).join("trajectories/train.jsonl"))
            .iter()
            .map(|r| r["id"].as_str().unwrap().to_string())
            .collect()
    };
    let (a, b) = (ids("mix-seed"), ids("mix-seed2"));
    assert_ne!(a, b, "another seed, another order");
    let (mut sa, mut sb) = (a.clone(), b.clone());
    sa.sort();
    sb.sort();
    assert_eq!(sa, sb, "the same rows");
    let kept = a.len();
    mix_recipe(t, "mix-half", &format!("{body}weight = 0.5\n"));
    build(t, "mix-half");
    assert_eq!(ids("mix-half").len(), (kept as f64 * 0.5).round() as usize);
    mix_recipe(t, "mix-cap", &format!("{body}cap = 3\n"));
    build(t, "mix-cap");
    let capped = ids("mix-cap");
    assert_eq!(capped.len(), 3.min(kept));
    assert!(capped.iter().all(|id| sa.contains(id)));
}

/// Pieces of `\w+|[^\w\s]+` (the `Whitespace` pre-tokenizer's pattern), counted by the test.
fn whitespace_pieces(text: &str) -> u64 {
    #[derive(PartialEq, Clone, Copy)]
    enum K {
        Word,
        Space,
        Other,
    }
    let kind = |c: char| {
        if c.is_alphanumeric() || c == '_' {
            K::Word
        } else if c.is_whitespace() {
            K::Space
        } else {
            K::Other
        }
    };
    let mut n = 0;
    let mut last = K::Space;
    for c in text.chars() {
        let k = kind(c);
        if k != K::Space && k != last {
            n += 1;
        }
        last = k;
    }
    n
}

#[test]
fn mix_counts_real_tokens_with_a_tokenizer_json() {
    let f = fixture();
    let t = f.tmp.path();
    // A word-level tokenizer: every `\w+` or `[^\w\s]+` piece is one token ([UNK] or known).
    let tokenizer = json!({"version": "1.0", "truncation": null, "padding": null, "added_tokens": [],
        "normalizer": null, "pre_tokenizer": {"type": "Whitespace"}, "post_processor": null, "decoder": null,
        "model": {"type": "WordLevel", "vocab": {"[UNK]": 0, "the": 1}, "unk_token": "[UNK]"}});
    std::fs::write(t.join("tokenizer.json"), tokenizer.to_string()).unwrap();
    mix_recipe(
        t,
        "mix-tok",
        "tokenizer = \"tokenizer.json\"\n[[sources]]\nrecipe = \"slot-synth-train\"\n",
    );
    build(t, "mix-tok");
    let out = t.join("out/mix-tok");
    let text = std::fs::read_to_string(out.join("trajectories/train.jsonl")).unwrap();
    let expected: u64 = text.lines().map(whitespace_pieces).sum();
    let chars4: u64 = text.lines().map(|l| l.chars().count() as u64 / 4).sum();
    let report: Json = serde_json::from_str(&std::fs::read_to_string(out.join("report/mix.json")).unwrap()).unwrap();
    assert_eq!(report["total"]["tokens_tokenizer"], json!(expected));
    assert_eq!(report["total"]["tokens_chars4"], json!(chars4));
    let card = std::fs::read_to_string(out.join("README.md")).unwrap();
    assert!(card.contains(&format!("{expected} (`tokenizer.json`)")), "{card}");
    mix_recipe(
        t,
        "mix-badtok",
        "tokenizer = \"nope.json\"\n[[sources]]\nrecipe = \"slot-synth-train\"\n",
    );
    let err = build_err(t, "mix-badtok");
    assert!(err.contains("nope.json"), "{err}");
}

/// A dialogue trajectory line with these user turns (each answered; `calls` tool calls after
/// the first).
fn dialogue(id: &str, users: &[&str], calls: usize) -> String {
    let mut messages = vec![json!({"role": "system", "content": "You are a booking assistant."})];
    for (i, u) in users.iter().enumerate() {
        messages.push(json!({"role": "user", "content": u}));
        if i == 0 {
            for c in 0..calls {
                let cid = format!("call{c:05}");
                messages.push(
                    json!({"role": "assistant", "content": "", "tool_calls": [{"id": cid, "type": "function",
                    "function": {"name": "find_restaurant", "arguments": {"area": "north"}}}]}),
                );
                messages.push(json!({"role": "tool", "tool_call_id": cid, "name": "find_restaurant", "content": "[]"}));
            }
        }
        messages.push(json!({"role": "assistant", "content": "Sure."}));
    }
    json!({"id": id, "messages": messages, "tools": []}).to_string()
}

#[test]
fn mix_of_dialogues_counts_turns_skips_a_bad_line_and_decontaminates_against_eval_dialogues() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    std::fs::create_dir_all(t.join("recipes")).unwrap();
    for (name, split) in [("talk", "train"), ("talkdev", "dev")] {
        recipe(t, name, "none", split);
        std::fs::create_dir_all(t.join(format!("out/{name}/trajectories/dialogue"))).unwrap();
        std::fs::create_dir_all(t.join(format!("out/{name}/data"))).unwrap();
        std::fs::write(t.join(format!("out/{name}/MANIFEST.json")), "{}").unwrap();
    }
    std::fs::write(
        t.join("out/talkdev/data/dev.jsonl"),
        format!("{}\n", json!({"id": "talkdev/0", "input": "Book a table for two."})),
    )
    .unwrap();
    std::fs::write(
        t.join("out/talkdev/trajectories/dialogue/dev.jsonl"),
        format!("{}\n", dialogue("talkdev/d0", &["I want a hotel", "in the north"], 1)),
    )
    .unwrap();
    let lines = [
        dialogue("talk/a", &["Hi, I need a table.", "For two at 7pm", "Thanks"], 2),
        "not a trajectory".to_string(),
        dialogue("talk/b", &["book a table, for two"], 1),
        dialogue("talk/c", &["hi I need a TABLE", "for two at 7pm!", "thanks"], 1),
        dialogue("talk/d", &["I want a hotel.", "In the north!"], 0),
    ];
    std::fs::write(
        t.join("out/talk/trajectories/dialogue/train.jsonl"),
        lines.join("\n") + "\n",
    )
    .unwrap();
    // An optional source built without the split is left out and named; a required one fails.
    let optional = "[[sources]]\nrecipe = \"talkdev\"\nkind = \"dialogue\"\noptional = true\n";
    mix_recipe(
        t,
        "mix-talk",
        &format!("[[sources]]\nrecipe = \"talk\"\nkind = \"dialogue\"\n{optional}"),
    );
    let summary = build(t, "mix-talk");
    assert!(summary.contains("talkdev train: left out (optional)"), "{summary}");
    mix_recipe(t, "mix-talk-strict", &optional.replace("optional = true\n", ""));
    let err = build_err(t, "mix-talk-strict");
    assert!(
        err.contains("talkdev") && err.contains("no dialogue trajectories of split \"train\""),
        "{err}"
    );
    let report: Json =
        serde_json::from_str(&std::fs::read_to_string(t.join("out/mix-talk/report/mix.json")).unwrap()).unwrap();
    let s = &report["sources"][0];
    let got = |k: &str| s[k].as_u64().unwrap_or_else(|| panic!("{k}: {s}"));
    assert_eq!(
        (
            got("lines"),
            got("bad_lines"),
            got("read"),
            got("contaminated"),
            got("duplicates_normalised"),
            got("kept")
        ),
        (5, 1, 4, 2, 1, 1),
        "{summary}\n{s}"
    );
    assert!(s["bad_examples"][0].as_str().unwrap().starts_with("2: "), "{s}");
    assert_eq!(s["taken"]["dialogues"], json!(1));
    assert_eq!(s["taken"]["dialogue_turns"], json!(3));
    assert_eq!(s["taken"]["calls"], json!(2));
    let mix = jsonl(&t.join("out/mix-talk/trajectories/train.jsonl"));
    assert_eq!(mix.len(), 1);
    assert_eq!(mix[0]["id"], json!("talk/a"));
    assert_eq!(
        report["evaluation"]["checked"]["talkdev"],
        json!({"dev": 1, "dev (dialogues)": 1})
    );
    let card = std::fs::read_to_string(t.join("out/mix-talk/README.md")).unwrap();
    assert!(
        card.contains("3.00 (1 dialogues)") && card.contains("train (dialogues)"),
        "{card}"
    );
}

/// The card's config names are unique to the mix and its files (issue 45: `datasets` caches a
/// local folder by folder and config name, so `default`/`openai`/`sharegpt` served a rebuilt
/// mix's stale rows): `<mix>[-openai|-sharegpt]-<digest>`, one marked default, and a rebuild
/// whose rows differ gets other names.
#[test]
fn mix_config_names_are_unique_to_the_mix_and_its_files() {
    let f = fixture();
    let t = f.tmp.path();
    let configs = |name: &str| -> (Vec<String>, usize) {
        let card = std::fs::read_to_string(t.join("out").join(name).join("README.md")).unwrap();
        let header = card.split("\n---\n").next().unwrap().to_string();
        let names: Vec<String> = header
            .lines()
            .filter_map(|l| l.strip_prefix("- config_name: "))
            .map(String::from)
            .collect();
        (names, header.matches("default: true").count())
    };
    let body = "seed = 3\n[[sources]]\nrecipe = \"slot-synth-train\"\n";
    mix_recipe(t, "mix-cfg", body);
    build(t, "mix-cfg");
    let (first, defaults) = configs("mix-cfg");
    assert_eq!(defaults, 1, "{first:?}");
    // Configs, then the same names again under dataset_info.
    assert_eq!(first.len(), 6, "{first:?}");
    assert!(
        first[0].starts_with("mix-cfg-") && first[1].starts_with("mix-cfg-openai-"),
        "{first:?}"
    );
    assert!(first[2].starts_with("mix-cfg-sharegpt-"), "{first:?}");
    assert!(
        !first
            .iter()
            .any(|n| ["default", "openai", "sharegpt"].contains(&n.as_str())),
        "{first:?}"
    );
    mix_recipe(t, "mix-cfg", &format!("{body}cap = 2\n"));
    build(t, "mix-cfg");
    let (second, _) = configs("mix-cfg");
    for (a, b) in first.iter().zip(&second) {
        assert_ne!(a, b, "the same config name after the mix's files changed");
    }
}
