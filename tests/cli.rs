//! The newcomer's command line (issue 18): `--help` points to each command's flags, a mistyped
//! recipe lists the recipes and the nearest name, and recipe names resolve from any directory.

use std::process::Command;

fn toolforge() -> Command {
    Command::new(env!("CARGO_BIN_EXE_toolforge"))
}

#[test]
fn help_points_to_each_commands_flags() {
    let out = toolforge().arg("--help").output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("toolforge <command> --help"), "{text}");
    for cmd in ["build", "serve", "verify", "trajectories"] {
        assert!(text.contains(cmd), "{text}");
    }
    let serve = toolforge().args(["serve", "--help"]).output().unwrap();
    let serve = String::from_utf8_lossy(&serve.stdout);
    assert!(
        serve.contains("--max-sessions") && serve.contains("--fault-rate"),
        "{serve}"
    );
}

#[test]
fn mistyped_recipe_lists_recipes_and_the_nearest_name() {
    let tmp = tempfile::tempdir().unwrap();
    let out = toolforge()
        .args(["build", "slot-brid"])
        .current_dir(tmp.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("unknown recipe \"slot-brid\" (did you mean \"slot-bird\"?)"),
        "{err}"
    );
    assert!(err.contains("seq-topv2") && err.contains("bfcl"), "{err}");
    assert!(!err.contains("os error"), "{err}");
}

#[test]
fn recipe_names_resolve_from_another_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let out = toolforge()
        .args(["build", "bfcl", "--quiet", "--out"])
        .arg(tmp.path().join("out"))
        .arg("--store")
        .arg(tmp.path().join("store"))
        .current_dir(tmp.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(tmp.path().join("out/bfcl/MANIFEST.json").is_file());
}
