//! The Ray driver (`scripts/ray_build.py`) on a local Ray head (127.0.0.1): 4 shards of
//! slot-spider with the first attempt of shard 0 SIGKILLed (Ray re-runs it), then the merge;
//! the dataset equals a single-machine build. Over SeaweedFS when `weed` is installed, else over
//! a local store directory.
//!
//! Needs PyPI `ray` (about 60 s to install, 240 MB; `.ci/run` installs it). Without it the test
//! prints SKIPPED in capitals and passes; TOOLFORGE_RAY_SKIP skips it too.

#[path = "scale/seaweed.rs"]
mod seaweed;
mod tree;

use std::path::PathBuf;
use std::process::Command;

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
    for i in 0..4 {
        assert!(text.contains(&format!("shard {i}/4 of slot-spider")), "{text}");
    }
    assert!(text.contains("0 computed"), "the merge computes nothing: {text}");
    tree::assert_same_tree(&single.join("slot-spider"), &merged.join("slot-spider"));
}
