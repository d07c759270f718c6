//! A build killed with `kill -9` while it writes its output (issue 18): the next build sweeps the
//! dead process's `out/.<recipe>.tmp-<pid>/` staging directory and writes a release that is
//! byte-identical to an uninterrupted build's. Real binary, real corpora (Spider dev).

mod tree;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn build(out: &Path, store: &Path) {
    let st = Command::new(env!("CARGO_BIN_EXE_toolforge"))
        .args(["build", "slot-spider", "--quiet", "--out"])
        .arg(out)
        .arg("--store")
        .arg(store)
        .current_dir(root())
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(st.success());
}

fn temp_dirs(out: &Path) -> Vec<String> {
    std::fs::read_dir(out)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
        .filter(|n| n.contains(".tmp-"))
        .collect()
}

#[test]
fn kill_9_mid_emit_leaves_no_temp_dir_and_an_identical_release() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    let reference = tmp.path().join("ref");
    build(&reference, &store);
    let want = tree::files(&reference.join("slot-spider"));

    // Start builds until one is killed while its staging directory exists (the emit phase).
    let out = tmp.path().join("out");
    let mut killed = None;
    for _attempt in 0..5 {
        let _ = std::fs::remove_dir_all(&out);
        std::fs::create_dir_all(&out).unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_toolforge"))
            .args(["build", "slot-spider", "--quiet", "--out"])
            .arg(&out)
            .arg("--store")
            .arg(&store)
            .current_dir(root())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let staging = format!(".slot-spider.tmp-{}", child.id());
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(120) {
            // Some files written, not yet renamed into place.
            if out.join(&staging).join("data").is_dir() {
                let _ = Command::new("kill").args(["-9", &child.id().to_string()]).status();
                killed = Some(staging.clone());
                break;
            }
            if child.try_wait().unwrap().is_some() {
                break;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        let status = child.wait().unwrap();
        if killed.is_some() && !status.success() && out.join(&staging).is_dir() {
            break;
        }
        killed = None;
    }
    let staging = killed.expect("no build was caught mid-emit in 5 attempts");
    assert!(temp_dirs(&out).contains(&staging), "{:?}", temp_dirs(&out));

    build(&out, &store);
    assert_eq!(
        temp_dirs(&out),
        Vec::<String>::new(),
        "temp directories left after the rebuild"
    );
    let got = tree::files(&out.join("slot-spider"));
    tree::assert_same_files(&got, &want, "the rebuilt and the uninterrupted build");
}
