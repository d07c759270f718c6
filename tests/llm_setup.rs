//! The LLM test server's setup (`tests/llm-server/setup.sh`) is safe to run from parallel tests.
//!
//! CI once failed `eval_run_against_a_real_server_in_both_modes` with `cp: cannot create regular
//! file '…/node/server.mjs': File exists`: the two tests of `tests/eval_llm.rs` started servers at
//! once on a cache where `.ci/run`'s install had not yet copied `server.mjs`, and both `cp`s found
//! no file and then raced to create it. The rule that closes this family of races (copy, npm
//! install, pip install): setup.sh writes its cache only while holding `$cache/.lock`, and
//! replaces `server.mjs` by rename. Judged here from outside: while this test holds the lock, a
//! starting setup writes nothing; released, it starts a working server; and eight setups started
//! together on a cache without `server.mjs` all succeed.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

#[allow(dead_code)]
mod llm_server;

/// A cache under `tmp` sharing the real cache's installed packages and model (symlinks) but
/// holding no `server.mjs`, so the next `--start` must write it.
fn scratch_cache(tmp: &Path) -> PathBuf {
    let out = Command::new("bash").arg(llm_server::setup_script()).output().unwrap();
    assert!(
        out.status.success(),
        "setup.sh (install): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let printed = |k: &str| {
        stdout
            .lines()
            .find_map(|l| l.strip_prefix(k).map(PathBuf::from))
            .unwrap_or_else(|| panic!("setup.sh printed no {k}: {stdout}"))
    };
    let (real, model) = (printed("CACHE="), printed("MODEL="));
    let cache = tmp.join("cache");
    std::fs::create_dir_all(cache.join("node")).unwrap();
    std::fs::create_dir_all(cache.join("py/model")).unwrap();
    std::fs::copy(real.join("node/package.json"), cache.join("node/package.json")).unwrap();
    std::os::unix::fs::symlink(real.join("node/node_modules"), cache.join("node/node_modules")).unwrap();
    std::os::unix::fs::symlink(&model, cache.join("py/model/model.gguf")).unwrap();
    cache
}

fn spawn_start(cache: &Path, log: &Path) -> Child {
    Command::new("bash")
        .arg(llm_server::setup_script())
        .arg("--start")
        .env("TOOLFORGE_LLM_CACHE", cache)
        .env("TOOLFORGE_LLM_LOG", log)
        .env_remove("TOOLFORGE_LLM_REQUEST_LOG")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Waits for a started setup: the server's pid (the caller kills it), or what setup printed.
fn finish(mut child: Child) -> Result<u32, String> {
    let status = child.wait().unwrap();
    let (mut out, mut err) = (String::new(), String::new());
    child.stdout.take().unwrap().read_to_string(&mut out).unwrap();
    child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    let pid = out
        .lines()
        .find_map(|l| l.strip_prefix("PID="))
        .and_then(|p| p.parse().ok());
    match pid {
        Some(pid) if status.success() && out.lines().any(|l| l.starts_with("PORT=")) => Ok(pid),
        _ => Err(format!("setup.sh --start failed ({status}):\n{out}\n{err}")),
    }
}

fn kill(pid: u32) {
    let _ = Command::new("kill").arg(pid.to_string()).status();
}

#[test]
fn the_llm_server_setup_writes_its_cache_only_under_its_lock() {
    if !llm_server::available("the LLM setup lock test") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let cache = scratch_cache(tmp.path());
    let copy = cache.join("node/server.mjs");

    // Hold the lock from outside (flock(1), as setup.sh takes it), then start a setup.
    let held = tmp.path().join("held");
    let mut holder = Command::new("flock")
        .arg(cache.join(".lock"))
        .arg("-c")
        .arg(format!("touch '{}'; sleep 3", held.display()))
        .spawn()
        .unwrap();
    let t = Instant::now();
    while !held.exists() {
        assert!(t.elapsed() < Duration::from_secs(10), "flock never took the lock");
        std::thread::sleep(Duration::from_millis(20));
    }
    let setup = spawn_start(&cache, &tmp.path().join("locked.log"));
    std::thread::sleep(Duration::from_millis(1500));
    assert!(
        !copy.exists(),
        "setup.sh wrote server.mjs into the cache while another process held its lock"
    );
    holder.wait().unwrap();
    kill(finish(setup).unwrap_or_else(|e| panic!("after the lock was released: {e}")));
    let source = std::fs::read(llm_server::setup_script().with_file_name("server.mjs")).unwrap();
    assert_eq!(
        std::fs::read(&copy).unwrap(),
        source,
        "the cached server.mjs is not the source's"
    );

    // Eight setups at once on a cache without server.mjs: every one starts its server.
    std::fs::remove_file(&copy).unwrap();
    let children: Vec<Child> = (0..8)
        .map(|i| spawn_start(&cache, &tmp.path().join(format!("s{i}.log"))))
        .collect();
    let results: Vec<Result<u32, String>> = children.into_iter().map(finish).collect();
    results
        .iter()
        .filter_map(|r| r.as_ref().ok())
        .for_each(|&pid| kill(pid));
    let failed: Vec<&String> = results.iter().filter_map(|r| r.as_ref().err()).collect();
    assert!(
        failed.is_empty(),
        "{} of 8 concurrent setups failed: {failed:#?}",
        failed.len()
    );
    assert_eq!(std::fs::read(&copy).unwrap(), source);
    let leftovers: Vec<_> = std::fs::read_dir(cache.join("node"))
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("server.mjs."))
        .collect();
    assert!(leftovers.is_empty(), "temporary copies left behind: {leftovers:?}");
}
