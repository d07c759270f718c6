//! A built dataset is servable and verifiable from wherever it is copied: MANIFEST.json records
//! how to find the databases (source name, env var, corpus-relative search paths and database
//! directory — never an absolute path), `toolforge serve` and `toolforge verify` use it, and
//! `--databases` stays the override.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use toolforge::pipeline::build_and_emit;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), target).unwrap();
        }
    }
}

fn toolforge(cwd: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_toolforge"));
    c.current_dir(cwd).env_remove("TOOLFORGE_SPIDER_DEV");
    c
}

#[test]
fn copied_datasets_serve_and_verify_without_the_project_out_dir() {
    let tmp = tempfile::tempdir().unwrap();
    for recipe in ["rest-spider", "slot-spider"] {
        let out = tmp.path().join("out");
        build_and_emit(
            &root().join(format!("recipes/{recipe}.toml")),
            Some(&out),
            Some(&tmp.path().join("store")),
            false,
        )
        .unwrap();
        let manifest = std::fs::read_to_string(out.join(recipe).join("MANIFEST.json")).unwrap();
        // Portable: no absolute path of this machine in the manifest.
        assert!(!manifest.contains(tmp.path().to_str().unwrap()), "{manifest}");
        assert!(!manifest.contains(root().to_str().unwrap()), "{manifest}");
        let m: serde_json::Value = serde_json::from_str(&manifest).unwrap();
        assert_eq!(m["databases"]["source"], "spider-dev");
        assert_eq!(m["databases"]["database_dir"], "database");

        let copy = tmp.path().join("elsewhere/deep").join(recipe);
        copy_dir(&out.join(recipe), &copy);
        // verify: from the project directory (the corpus search paths resolve from there).
        let v = toolforge(&root()).arg("verify").arg(&copy).output().unwrap();
        let stdout = String::from_utf8_lossy(&v.stdout);
        assert!(
            v.status.success(),
            "{recipe}: {stdout} {}",
            String::from_utf8_lossy(&v.stderr)
        );
        assert!(stdout.contains(" 0 failed"), "{stdout}");
        // serve: starts and answers.
        let mut child = toolforge(&root())
            .arg("serve")
            .arg(&copy)
            .args(["--port", "0"])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(&mut std::io::BufReader::new(child.stdout.take().unwrap()), &mut line).unwrap();
        let base = line
            .trim()
            .split("listening on ")
            .nth(1)
            .unwrap_or_else(|| panic!("{line}"))
            .to_string();
        let status = ureq::get(format!("{base}/openapi.json")).call().unwrap().status();
        assert_eq!(status, 200);
        child.kill().unwrap();
        child.wait().unwrap();
        // From a directory where no search path resolves: a clear error naming the override.
        let away = tmp.path().join("elsewhere");
        let e = toolforge(&away).arg("verify").arg(&copy).output().unwrap();
        assert!(!e.status.success());
        let err = String::from_utf8_lossy(&e.stderr);
        assert!(err.contains("spider-dev") && err.contains("--databases"), "{err}");
        // --databases stays the override.
        let o = toolforge(&away)
            .arg("verify")
            .arg(&copy)
            .arg("--databases")
            .arg(root().join("../shared/corpora/spider/database"))
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
}
