//! The Ray driver (`scripts/ray_build.py`):
//! - on a local Ray instance: 4 shards of slot-spider with the first attempt of shard 0
//!   SIGKILLed (Ray re-runs it, the summary counts the attempt), then the merge; the dataset
//!   equals a single-machine build. Over SeaweedFS when `weed` is installed, else over a local
//!   store directory.
//! - on a separate head started without OPENAI_* (`ray start --head --block`): an LLM recipe
//!   (paraphrase) against an OpenAI stub reaches the endpoint only through `--env
//!   OPENAI_BASE_URL --env OPENAI_API_KEY` set in the driver's environment; without them the
//!   driver stops before any shard (exit 3) naming the variables, a declared variable that is
//!   unset is an error naming it, and a merge that fails prints toolforge's message, not a
//!   Python traceback. With them the merged dataset equals a single build's.
//!
//! Needs PyPI `ray` (about 60 s to install, 240 MB; `.ci/run` installs it). Without it the test
//! prints SKIPPED in capitals and passes; TOOLFORGE_RAY_SKIP skips it too.

#[path = "scale/llm_project.rs"]
mod llm_project;
mod openai_stub;
#[path = "scale/seaweed.rs"]
mod seaweed;
mod tree;

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn skip_reason() -> Option<String> {
    if let Ok(why) = std::env::var("TOOLFORGE_RAY_SKIP") {
        return Some(why);
    }
    let ok = Command::new("python3")
        .args(["-c", "import ray"])
        .status()
        .is_ok_and(|s| s.success());
    (!ok).then(|| "python3 cannot import ray (pip install ray)".into())
}

#[test]
fn ray_shards_with_a_killed_worker_then_merge_equal_a_single_build() {
    if let Some(why) = skip_reason() {
        eprintln!("\n!!!!! SKIPPED the Ray driver test: {why} !!!!!\n");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let exe = env!("CARGO_BIN_EXE_toolforge");
    let server = seaweed::skip_reason().is_none().then(seaweed::Seaweed::start);
    let (store, env) = match &server {
        Some(s) => (format!("s3://{}/ray-slot-spider", seaweed::BUCKET), s.env()),
        None => (tmp.path().join("store").to_string_lossy().into_owned(), vec![]),
    };
    let single = tmp.path().join("single");
    let st = Command::new(exe)
        .args(["build", "slot-spider", "--quiet", "--out"])
        .arg(&single)
        .arg("--store")
        .arg(tmp.path().join("single-store"))
        .status()
        .unwrap();
    assert!(st.success());
    let marker = tmp.path().join("killed-once");
    let merged = tmp.path().join("merged");
    let out = Command::new("python3")
        .arg(root().join("scripts/ray_build.py"))
        .args([
            "slot-spider",
            "--shards",
            "4",
            "--store",
            &store,
            "--toolforge",
            exe,
            "--out",
        ])
        .arg(&merged)
        .arg("--kill-first-attempt")
        .arg(&marker)
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .env("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
        .env_remove("RAY_ADDRESS")
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    assert!(marker.exists(), "shard 0's first attempt was killed");
    assert!(
        text.contains("attempts, round 1: shard 0/4: 2 (retried); shard 1/4: 1;"),
        "the summary counts the retried attempt: {text}"
    );
    assert!(
        text.contains("ray: started a local instance: node address "),
        "the driver states Ray's binding: {text}"
    );
    for i in 0..4 {
        assert!(text.contains(&format!("shard {i}/4 of slot-spider")), "{text}");
    }
    assert!(text.contains("0 computed"), "the merge computes nothing: {text}");
    tree::assert_same_tree(&single.join("slot-spider"), &merged.join("slot-spider"));
}

/// A Ray head of its own (`ray start --head --block` in a new process group, with a temp dir
/// of its own and an environment without OPENAI_*), stopped with SIGTERM when dropped (`ray
/// start --block` then stops every process it started).
struct Head {
    child: Child,
    /// The GCS address for RAY_ADDRESS, as the head printed it.
    address: String,
    /// The head's Ray token file (`RAY_AUTH_TOKEN_PATH`, with `RAY_AUTH_MODE=token`), handed to
    /// the drivers too: its own, so the test does not depend on a `~/.ray/auth_token` that an
    /// earlier Ray run left (on a fresh machine there is none, and `ray start` with token
    /// authentication refuses to start).
    token: PathBuf,
    _dir: tempfile::TempDir,
}

impl Head {
    fn start() -> Head {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("head.log");
        let token = dir.path().join("auth_token");
        let seed = format!("{:?} {}", Instant::now(), std::process::id());
        std::fs::write(&token, blake3::hash(seed.as_bytes()).to_hex().as_str()).unwrap();
        let child = Command::new("ray")
            .args([
                "start",
                "--head",
                "--block",
                "--port=0",
                "--num-cpus=2",
                "--include-dashboard=false",
            ])
            .arg(format!("--temp-dir={}", dir.path().join("ray").display()))
            .env_remove("OPENAI_BASE_URL")
            .env_remove("OPENAI_API_KEY")
            .env_remove("RAY_ADDRESS")
            .env("RAY_AUTH_MODE", "token")
            .env("RAY_AUTH_TOKEN_PATH", &token)
            .stdout(std::fs::File::create(&log).unwrap())
            .stderr(std::fs::File::create(dir.path().join("head.err")).unwrap())
            .process_group(0)
            .spawn()
            .unwrap();
        let t = Instant::now();
        loop {
            let text = std::fs::read_to_string(&log).unwrap_or_default()
                + &std::fs::read_to_string(dir.path().join("head.err")).unwrap_or_default();
            if let Some(a) = text
                .split("ray start --address='")
                .nth(1)
                .and_then(|r| r.split('\'').next())
            {
                return Head {
                    child,
                    address: a.to_string(),
                    token,
                    _dir: dir,
                };
            }
            assert!(
                t.elapsed() < Duration::from_secs(120),
                "the Ray head did not start: {text}"
            );
            std::thread::sleep(Duration::from_millis(250));
        }
    }
}

impl Drop for Head {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(30) {
            if self.child.try_wait().is_ok_and(|s| s.is_some()) {
                return;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{}", self.child.id())])
            .status();
        let _ = self.child.wait();
    }
}

/// Runs the driver on `head` for `recipe` with `args`; OPENAI_* set in the driver's own
/// environment only when `endpoint` is given.
fn driver(head: &Head, recipe: &Path, args: &[&str], endpoint: Option<&str>) -> (Output, String) {
    let mut c = Command::new("python3");
    c.arg(root().join("scripts/ray_build.py"))
        .arg(recipe)
        .args(["--toolforge", env!("CARGO_BIN_EXE_toolforge"), "--retries", "0"])
        .args(args)
        .env("RAY_ADDRESS", &head.address)
        .env("RAY_AUTH_MODE", "token")
        .env("RAY_AUTH_TOKEN_PATH", &head.token)
        .env_remove("OPENAI_BASE_URL")
        .env_remove("OPENAI_API_KEY")
        .env_remove("TOOLFORGE_STORE");
    if let Some(url) = endpoint {
        c.env("OPENAI_BASE_URL", url).env("OPENAI_API_KEY", "sk-driver-only");
    }
    let out = c.output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out, text)
}

#[test]
fn ray_driver_forwards_declared_env_to_tasks() {
    if let Some(why) = skip_reason() {
        eprintln!("\n!!!!! SKIPPED the Ray driver --env test: {why} !!!!!\n");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let times = Arc::new(Mutex::new(Vec::new()));
    let stub = llm_project::paraphrase_stub(times.clone());
    let url = stub.base_url();
    let recipe = llm_project::project(tmp.path(), "proj", 4, 1, "");
    let s = |p: &Path| p.to_string_lossy().into_owned();

    // The judge: a single build with the endpoint in its own environment.
    let single = tmp.path().join("single");
    let st = Command::new(env!("CARGO_BIN_EXE_toolforge"))
        .arg("build")
        .arg(&recipe)
        .args([
            "--quiet",
            "--out",
            &s(&single),
            "--store",
            &s(&tmp.path().join("single-store")),
        ])
        .env("OPENAI_BASE_URL", &url)
        .env("OPENAI_API_KEY", "sk-driver-only")
        .env_remove("TOOLFORGE_STORE")
        .status()
        .unwrap();
    assert!(st.success());
    let single_requests = times.lock().unwrap().len();
    assert!(single_requests > 0, "the single build sent its LLM requests");

    // A declared variable unset on the driver: an error naming it, before Ray is contacted.
    let head = Head::start();
    let store = s(&tmp.path().join("store"));
    let (out, text) = driver(
        &head,
        &recipe,
        &["--shards", "2", "--store", &store, "--env", "OPENAI_BASE_URL"],
        None,
    );
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(text.contains("OPENAI_BASE_URL") && text.contains("not set"), "{text}");

    // The endpoint set on the driver but not declared: the tasks would skip the LLM stage; the
    // driver says so and stops before any shard.
    let common = ["--shards", "2", "--store", &store];
    let (out, text) = driver(&head, &recipe, &common, Some(&url));
    assert_eq!(out.status.code(), Some(3), "{text}");
    assert!(
        text.contains("no endpoint reaches the tasks") && text.contains("--env OPENAI_BASE_URL"),
        "{text}"
    );
    assert_eq!(times.lock().unwrap().len(), single_requests, "no request was sent");

    // Built without the LLM stage on purpose, the merge (with the driver's endpoint) misses the
    // LLM answers: toolforge's message and exit code, no Python traceback.
    let skipped = s(&tmp.path().join("skipped-store"));
    let args = [
        "--shards",
        "2",
        "--store",
        &skipped,
        "--allow-llm-skip",
        "--out",
        &s(&tmp.path().join("x")),
    ];
    let (out, text) = driver(&head, &recipe, &args, Some(&url));
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(text.contains("error: merge:") && text.contains("llm-chat"), "{text}");
    assert!(!text.contains("Traceback"), "{text}");

    // Declared: the tasks reach the stub, the merged dataset equals the single build.
    let merged = tmp.path().join("merged");
    let mut args = common.to_vec();
    args.extend(["--env", "OPENAI_BASE_URL", "--env", "OPENAI_API_KEY", "--out"]);
    let merged_s = s(&merged);
    args.push(&merged_s);
    let (out, text) = driver(&head, &recipe, &args, Some(&url));
    assert!(out.status.success(), "{text}");
    assert!(text.contains("OPENAI_API_KEY, OPENAI_BASE_URL"), "{text}");
    assert!(text.contains("llm: the tasks reach an endpoint"), "{text}");
    assert!(text.contains("attempts, round 1:"), "{text}");
    assert!(
        times.lock().unwrap().len() > single_requests,
        "the shards sent LLM requests: {text}"
    );
    assert_eq!(stub.bodies.lock().unwrap().len(), times.lock().unwrap().len());
    tree::assert_same_tree(&single.join("llm-scale"), &merged.join("llm-scale"));
    drop(head);
}
