//! [`StoreError`], the store layer's errors, and `io_err`, the IO error of a store path.

use std::path::{Path, PathBuf};

use super::Fault;

/// Errors of the store layer: IO on the store directory, or an object store request.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// An object store request or its configuration failed.
    #[error("store {url}: {fault}: {detail} ({})", .fault.hint())]
    Remote {
        /// The store URL (`s3://bucket/prefix`) or entry URL.
        url: String,
        /// What kind of failure (unreachable, wrong secret, …).
        fault: Fault,
        /// What failed (the object_store error).
        detail: String,
    },
    /// An IO operation on a store path failed.
    #[error("store {path}")]
    Io {
        /// The file or directory that failed.
        path: PathBuf,
        /// The underlying IO error.
        source: std::io::Error,
    },
}

impl StoreError {
    /// The failure's kind in the operator's terms: the [`Fault`] of a remote request; for a
    /// local directory `permission denied`, else `store request failed`.
    pub fn fault(&self) -> Fault {
        match self {
            StoreError::Remote { fault, .. } => *fault,
            StoreError::Io { source, .. } if source.kind() == std::io::ErrorKind::PermissionDenied => {
                Fault::PermissionDenied
            }
            StoreError::Io { .. } => Fault::Request,
        }
    }
}

/// The [`StoreError::Io`] of `path`, for `map_err`.
pub(super) fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> StoreError + '_ {
    move |source| StoreError::Io {
        path: path.to_path_buf(),
        source,
    }
}
