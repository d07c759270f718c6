//! A store on a full disk (issue 31 D6), with the real `toolforge build` on a real tmpfs too
//! small for the store's entries: the build still succeeds from memory, its summary reports the
//! failed writes (`warning: store_failed: … N store requests failed`), its dataset files equal
//! those of a build with a healthy store, and no `*.tmp` file is left filling the disk (before
//! the fix: exit 0 with no warning, 5 of 40 entries missing and 5 `.tmp` files left).
//!
//! The tmpfs is mounted in a private user and mount namespace (`unshare -rm`), so nothing is
//! mounted on the host and the mount ends with the process; where `unshare` cannot make one the
//! test prints SKIPPED in capitals and passes.

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The bytes of every file under `dir/data`, by relative path.
fn data_files(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut files: Vec<(PathBuf, Vec<u8>)> = walk(&dir.join("data"))
        .into_iter()
        .map(|p| (p.strip_prefix(dir).unwrap().to_path_buf(), std::fs::read(&p).unwrap()))
        .collect();
    files.sort();
    files
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

#[test]
fn build_on_a_full_store_disk_warns_with_a_count_and_leaves_no_temp_file() {
    let tmp = tempfile::tempdir().unwrap();
    let (store, out, full_out) = (
        tmp.path().join("store"),
        tmp.path().join("out"),
        tmp.path().join("full-out"),
    );
    std::fs::create_dir_all(&store).unwrap();
    // slot-spider's store holds entries of up to ~4.5 MB: a 2 MiB tmpfs takes the small ones
    // and runs out of space on the large.
    let script = format!(
        "mount -t tmpfs -o size=2m tmpfs '{store}' || exit 97
         '{bin}' build slot-spider --quiet --no-html --out '{full_out}' --store '{store}'
         echo \"exit=$?\"
         echo \"tmp_files=$(find '{store}' -name '*.tmp' | wc -l)\"
         echo \"entries=$(find '{store}' -type f | wc -l)\"",
        store = store.display(),
        bin = env!("CARGO_BIN_EXE_toolforge"),
        full_out = full_out.display(),
    );
    let run = Command::new("unshare")
        .args(["-rm", "sh", "-c", &script])
        .current_dir(root())
        .output();
    let run = match run {
        Ok(r) if r.status.code() != Some(97) && !String::from_utf8_lossy(&r.stderr).contains("unshare:") => r,
        other => {
            eprintln!("SKIPPED: no private mount namespace for a tmpfs ({other:?})");
            return;
        }
    };
    let stdout = String::from_utf8_lossy(&run.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&run.stderr).into_owned();
    eprintln!("{stdout}");
    assert!(stdout.contains("exit=0"), "the build failed: {stdout}\n{stderr}");
    assert!(stdout.contains("tmp_files=0"), "temp files left: {stdout}");
    let warning = stdout
        .lines()
        .chain(stderr.lines())
        .find(|l| l.contains("warning: store_failed"))
        .unwrap_or_else(|| panic!("no store_failed warning: {stdout}\n{stderr}"));
    assert!(
        warning.contains("store request") && warning.contains("failed"),
        "{warning}"
    );
    // The dataset equals a build with a healthy store.
    let healthy_store = tmp.path().join("healthy-store");
    toolforge::pipeline::build_and_emit(
        &root().join("recipes/slot-spider.toml"),
        Some(&out),
        Some(&healthy_store),
        false,
    )
    .unwrap();
    let (full, healthy) = (
        data_files(&full_out.join("slot-spider")),
        data_files(&out.join("slot-spider")),
    );
    assert_eq!(
        full.iter().map(|(p, _)| p).collect::<Vec<_>>(),
        healthy.iter().map(|(p, _)| p).collect::<Vec<_>>()
    );
    assert!(
        full == healthy,
        "the data files differ from a build with a healthy store"
    );
}
