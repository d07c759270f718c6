//! The Ray driver (`scripts/ray_build.py`) on a local Ray head (127.0.0.1): 4 shards of
//! slot-spider with the first attempt of shard 0 SIGKILLed (Ray re-runs it), then the merge;
//! the dataset equals a single-machine build. Over SeaweedFS when `weed` is installed, else over
//! a local store directory.
//!
//! Needs PyPI `ray` (about 60 s to install, 240 MB; `.ci/run` installs it). Without it the test
//! prints SKIPPED in capitals and passes; TOOLFORGE_RAY_SKIP skips it too.

#[path = "scale/seaweed.rs"]
mod seaweed;

use std::path::{Path, PathBuf};
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

fn tree(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push((
                    p.strip_prefix(dir).unwrap().to_string_lossy().into_owned(),
                    std::fs::read(&p).unwrap(),
                ));
            }
        }
    }
    out.sort();
    out
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
    let (a, b) = (tree(&single.join("slot-spider")), tree(&merged.join("slot-spider")));
    assert_eq!(a.len(), b.len());
    for ((na, ba), (nb, bb)) in a.iter().zip(&b) {
        assert!(na == nb && ba == bb, "{na} differs");
    }
}
