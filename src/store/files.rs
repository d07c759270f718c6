//! Files outside the store's entries: atomic writes of output files, the sweep of abandoned
//! output staging directories, and the blake3 of input files (the hashes store keys are made of).

use std::fs;
use std::io::Write;
use std::path::Path;

use super::StoreError;
use super::error::io_err;

/// Writes `bytes` to `path` atomically: a sibling `*.tmp` file is written, synced and renamed.
/// Creates the parent directory. A crash leaves either the old file or the new one, never half.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    fs::create_dir_all(dir).map_err(io_err(dir))?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    // A failed write (disk full) leaves no partial temp file behind.
    let written = fs::File::create(&tmp)
        .and_then(|mut file| file.write_all(bytes).and_then(|()| file.sync_all()))
        .and_then(|()| fs::rename(&tmp, path));
    written.map_err(|e| {
        let _ = fs::remove_file(&tmp);
        io_err(&tmp)(e)
    })
}

/// Removes the staging directories `<parent>/.<name>.tmp-<pid>` (and their `.old` siblings)
/// left by builds whose process `pid` is no longer running (killed mid-emit), as the store sweeps
/// its temp files on open. Directories of live processes are left alone. Returns how many were
/// removed. Liveness is read from `/proc/<pid>`; without `/proc` nothing is removed.
pub fn sweep_stale_dirs(parent: &Path) -> usize {
    if !Path::new("/proc/self").exists() {
        return 0;
    }
    let Ok(entries) = fs::read_dir(parent) else { return 0 };
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.starts_with('.') {
            continue;
        }
        let Some((_, pid)) = name.rsplit_once(".tmp-") else {
            continue;
        };
        let pid = pid.strip_suffix(".old").unwrap_or(pid);
        if pid.is_empty() || !pid.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        if Path::new("/proc").join(pid).exists() {
            continue;
        }
        if fs::remove_dir_all(entry.path()).is_ok() {
            removed += 1;
        }
    }
    removed
}

/// Hex blake3 hash of a file's bytes. Errors: the file cannot be read.
pub fn hash_file(path: &Path) -> Result<String, StoreError> {
    use std::io::Read;
    let mut hasher = blake3::Hasher::new();
    let mut file = fs::File::open(path).map_err(io_err(path))?;
    // 4 MiB reads hashed on every core: the executable (`code_fingerprint`, ~55 MB) and the
    // databases are hashed on every build, no-op rebuilds included (issue 17).
    let len = file.metadata().map_or(0, |m| m.len()) as usize;
    let mut buf = vec![0u8; len.clamp(64 << 10, 4 << 20)];
    loop {
        let mut filled = 0;
        while filled < buf.len() {
            match file.read(&mut buf[filled..]) {
                Ok(0) => break,
                Ok(n) => filled += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(io_err(path)(e)),
            }
        }
        if filled == 0 {
            break;
        }
        if filled > 1 << 20 {
            hasher.update_rayon(&buf[..filled]);
        } else {
            hasher.update(&buf[..filled]);
        }
        if filled < buf.len() {
            break;
        }
    }
    Ok(hasher.finalize().to_hex().to_string())
}

/// Fingerprint of the running toolforge build: XXH3-128 (hex) of its executable, so that any
/// code change invalidates stage results even when a `*_VERSION` bump was forgotten. It tells
/// builds apart, it does not guard against forgers (a store's writers are trusted to run the
/// same executable, README "Scaling out"), so the cheap non-cryptographic hash serves: every
/// process (each shard, the merge) hashes its ~60 MB executable once.
pub fn code_fingerprint() -> &'static str {
    static FP: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    FP.get_or_init(|| {
        let hash = |path: std::path::PathBuf| -> std::io::Result<String> {
            let mut hasher = twox_hash::XxHash3_128::new();
            std::io::copy(&mut std::fs::File::open(path)?, &mut HashWriter(&mut hasher))?;
            Ok(format!("{:032x}", hasher.finish_128()))
        };
        // `/proc/self/exe` opens the running file even once it was replaced or deleted on disk
        // (where `current_exe` names a path ending in " (deleted)"). An executable that cannot
        // be read gets a fingerprint of its own process: nothing stored is trusted then.
        hash("/proc/self/exe".into())
            .or_else(|_| std::env::current_exe().and_then(hash))
            .unwrap_or_else(|e| {
                eprintln!("warning: cannot read the toolforge executable ({e}): the store is not reused");
                let nanos = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_nanos());
                format!("unread-{}-{}-{nanos}", env!("CARGO_PKG_VERSION"), std::process::id())
            })
    })
}

/// A writer feeding an XXH3-128 hasher ([`code_fingerprint`]).
struct HashWriter<'h>(&'h mut twox_hash::XxHash3_128);

impl std::io::Write for HashWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.write(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sweep_removes_only_dead_processes_temp_dirs() {
        let dir = tempfile::tempdir().unwrap();
        // A pid that cannot be alive (above the kernel's pid_max of 2^22) and our own, live one.
        let dead = dir.path().join(".slot-bird.tmp-99999999");
        let live = dir.path().join(format!(".slot-bird.tmp-{}", std::process::id()));
        let other = dir.path().join("slot-bird");
        for d in [&dead, &live, &other] {
            fs::create_dir_all(d.join("data")).unwrap();
        }
        assert_eq!(sweep_stale_dirs(dir.path()), 1);
        assert!(!dead.exists() && live.exists() && other.exists());
    }

    #[test]
    fn a_failed_atomic_write_leaves_no_temp_file() {
        // The rename onto a non-empty directory fails after the temp file was written in full
        // (as a full disk fails a write part-way): the old code left the temp file behind.
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("MANIFEST.json");
        fs::create_dir_all(target.join("occupied")).unwrap();
        assert!(write_atomic(&target, &vec![b'x'; 1 << 20]).is_err());
        let left: Vec<String> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".tmp"))
            .collect();
        assert!(left.is_empty(), "{left:?}");
    }

    #[test]
    fn the_code_fingerprint_is_the_xxh3_of_the_running_executable() {
        let bytes = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        let expected = format!("{:032x}", twox_hash::XxHash3_128::oneshot(&bytes));
        assert_eq!(super::code_fingerprint(), expected);
    }
}
