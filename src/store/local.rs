//! The local-directory [`Backend`]: entries are files under the store root, written to a
//! `*.tmp` sibling and hard-linked into place (put-if-absent: the link fails when the entry
//! exists), so a reader never sees a half-written entry and two writers never interleave.

use std::fs;
use std::path::{Path, PathBuf};

use super::{Backend, Created, StoreError, io_err};

/// A store directory (`<root>/objects/<2 hex>/<64 hex>`).
#[derive(Debug)]
pub struct Local {
    root: PathBuf,
}

impl Local {
    /// Opens (creating if needed) the store at `root` and sweeps left-over `*.tmp` files.
    ///
    /// Errors: the directory cannot be created or read.
    pub fn open(root: &Path) -> Result<Local, StoreError> {
        let objects = root.join("objects");
        fs::create_dir_all(&objects).map_err(io_err(&objects))?;
        for shard in fs::read_dir(&objects).map_err(io_err(&objects))? {
            let shard = shard.map_err(io_err(&objects))?.path();
            if !shard.is_dir() {
                continue;
            }
            for entry in fs::read_dir(&shard).map_err(io_err(&shard))? {
                let path = entry.map_err(io_err(&shard))?.path();
                if path.extension().is_some_and(|e| e == "tmp") {
                    let _ = fs::remove_file(&path);
                }
            }
        }
        Ok(Local {
            root: root.to_path_buf(),
        })
    }
}

impl Backend for Local {
    fn read(&self, name: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let path = self.root.join(name);
        match fs::read(&path) {
            Ok(bytes) => Ok(Some(bytes)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io_err(&path)(e)),
        }
    }

    fn create(&self, name: &str, bytes: &[u8]) -> Result<Created, StoreError> {
        use std::io::Write;
        let path = self.root.join(name);
        let dir = path.parent().unwrap_or(Path::new("."));
        fs::create_dir_all(dir).map_err(io_err(dir))?;
        let file_name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        // Unique per process and thread: rayon workers of one process may write one key at once.
        let tmp = dir.join(format!(
            ".{file_name}.{}-{:?}.tmp",
            std::process::id(),
            std::thread::current().id()
        ));
        // A failed write (disk full) leaves no partial temp file behind.
        let written = fs::File::create(&tmp).and_then(|mut file| file.write_all(bytes));
        if let Err(e) = written {
            let _ = fs::remove_file(&tmp);
            return Err(io_err(&tmp)(e));
        }
        // Not synced: an entry is a cache of its key's payload, and one torn by a crash fails its
        // checksum ([`super::Store::get`]) and is recomputed. Forty syncs (a sel-spider build's
        // entries) cost as much wall time as its Parquet (issue 17).
        // The link is the put-if-absent: it fails with AlreadyExists when another writer won.
        let linked = fs::hard_link(&tmp, &path);
        let outcome = match linked {
            Ok(()) => Ok(Created::Written),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(Created::Present),
            // A file system without hard links: rename (atomic; an existing entry is replaced
            // by the same bytes, as the payload of a key does not depend on its writer).
            Err(_) => fs::rename(&tmp, &path)
                .map(|()| Created::Written)
                .map_err(io_err(&path)),
        };
        let _ = fs::remove_file(&tmp);
        outcome
    }

    fn remove(&self, name: &str) {
        let _ = fs::remove_file(self.root.join(name));
    }

    fn describe(&self) -> String {
        self.root.display().to_string()
    }
}
