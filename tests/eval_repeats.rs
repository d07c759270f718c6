//! Issue 49 item 3: `eval run --repeats N --seed S` against a local OpenAI-compatible stub whose
//! answer depends on the request seed, so each row completes in a known subset of the runs;
//! the mean ± std per metric and pass@k (Chen et al. 2021's unbiased estimator) are checked
//! against figures computed here directly (binomial coefficients, not the estimator's product).

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};
use toolforge::eval::rows::EvalSet;
use toolforge::pipeline::build_and_emit;

mod eval_support;
mod openai_stub;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn slot_spider(tmp: &Path) -> (PathBuf, EvalSet) {
    build_and_emit(
        &root().join("recipes/slot-spider.toml"),
        Some(&tmp.join("out")),
        Some(&tmp.join("store")),
        false,
    )
    .unwrap();
    let dataset = tmp.join("out/slot-spider");
    let set = EvalSet::load(&dataset, Some(&root().join("../shared/corpora/spider/database"))).unwrap();
    (dataset, set)
}

/// C(n, k) as a float, by the product formula.
fn binom(n: usize, k: usize) -> f64 {
    if k > n {
        return 0.0;
    }
    (0..k).map(|i| (n - i) as f64 / (i + 1) as f64).product()
}

#[test]
fn repeats_report_mean_std_and_pass_at_k_of_completion() {
    let tmp = tempfile::tempdir().unwrap();
    let tmp = tmp.path();
    let (dataset, set) = slot_spider(tmp);
    let ids = ["slot-spider/491", "slot-spider/492", "slot-spider/493"];
    let (n, seed0) = (5usize, 10u64);
    // Row j completes exactly in the runs whose seed offset is in wins[j].
    let wins: [&[u64]; 3] = [&[0, 2, 4], &[1], &[]];
    let answers = eval_support::gold_answers(&set, &ids);
    let stub = openai_stub::start(move |body| {
        let text: String = body["messages"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|m| m["content"].as_str())
            .collect();
        let offset = body["seed"].as_u64().unwrap() - seed0;
        let j = answers.iter().position(|(q, _)| text.contains(q.as_str())).unwrap();
        let content = if wins[j].contains(&offset) {
            answers[j].1.clone()
        } else {
            "[]".to_string()
        };
        (
            200,
            openai_stub::completion(json!({"role": "assistant", "content": content})),
        )
    });
    let out = tmp.join("eval");
    let o = Command::new(env!("CARGO_BIN_EXE_toolforge"))
        .args(["eval", "run"])
        .arg(&dataset)
        .args(["--model", "stub", "--quiet", "--run", "r", "--ids", &ids.join(",")])
        .args(["--repeats", &n.to_string(), "--seed", &seed0.to_string()])
        .args(["--base-url", &stub.base_url()])
        .arg("--databases")
        .arg(root().join("../shared/corpora/spider/database"))
        .arg("--out")
        .arg(&out)
        .arg("--store")
        .arg(tmp.join("llm-store"))
        .env("OPENAI_API_KEY", "test")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    eprintln!("{stdout}");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(
        stub.bodies.lock().unwrap().len(),
        n * ids.len(),
        "one request per row and run"
    );
    let r: Value = serde_json::from_slice(&std::fs::read(out.join("r/repeats.json")).unwrap()).unwrap();
    assert_eq!(r["seeds"], json!((0..n as u64).map(|i| seed0 + i).collect::<Vec<_>>()));
    for i in 0..n {
        assert!(out.join(format!("r/repeat-{i}/rows.jsonl")).exists());
    }
    // Completion per run: the share of the 3 rows completing under that seed.
    let per_run: Vec<f64> = (0..n as u64)
        .map(|s| wins.iter().filter(|w| w.contains(&s)).count() as f64 / ids.len() as f64)
        .collect();
    let mean = per_run.iter().sum::<f64>() / n as f64;
    let std = (per_run.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n as f64 - 1.0)).sqrt();
    let c = &r["metrics"]["completion"];
    assert!((c["mean"].as_f64().unwrap() - mean).abs() < 1e-12, "{c}");
    assert!((c["std"].as_f64().unwrap() - std).abs() < 1e-12, "{c} vs {std}");
    assert_eq!(c["runs"], n);
    // pass@k = mean over rows of 1 − C(n − c, k) / C(n, k).
    for k in 1..=n {
        let want = wins
            .iter()
            .map(|w| 1.0 - binom(n - w.len(), k) / binom(n, k))
            .sum::<f64>()
            / ids.len() as f64;
        let got = r["pass_at_k"][k.to_string()].as_f64().unwrap();
        eprintln!("pass@{k}: {got:.4} (direct {want:.4})");
        assert!((got - want).abs() < 1e-12, "pass@{k}: {got} vs {want}");
    }
    // Rows 0 and 1 differ between runs; row 2 never completes: 1 of 3 agrees.
    assert!((r["agreement"].as_f64().unwrap() - 1.0 / 3.0).abs() < 1e-12);
    let md = std::fs::read_to_string(out.join("r/repeats.md")).unwrap();
    assert!(
        md.contains(&format!(
            "| completion | {:.1} ± {:.1} | {n} |",
            mean * 100.0,
            std * 100.0
        )),
        "{md}"
    );
}
