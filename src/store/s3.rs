//! The S3-compatible object storage [`Backend`] (AWS S3, SeaweedFS, MinIO, R2, …) through the
//! `object_store` crate.
//!
//! Location: `s3://bucket/prefix` (`--store`, `TOOLFORGE_STORE`, or the recipe's `store` key);
//! entries are objects `prefix/objects/<2 hex>/<64 hex>` with the local store's bytes.
//! Configuration is the usual AWS environment, read by `AmazonS3Builder::from_env`:
//! `AWS_ENDPOINT_URL` (for a non-AWS server), `AWS_REGION` / `AWS_DEFAULT_REGION`,
//! `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`. Plain `http://` endpoints
//! are allowed for 127.0.0.1 / localhost (a test server) or with `AWS_ALLOW_HTTP=true`.
//!
//! Writes are conditional (`PutMode::Create`, i.e. `If-None-Match: *`): of two shards writing one
//! key at once, one wins and the other gets "already exists", never a mixed object.
//!
//! The store API is synchronous (stages run on rayon threads, some inside async LLM code): each
//! request is spawned on one process-wide tokio runtime and waited for on a channel, which works
//! from any thread, async or not.

use std::future::Future;
use std::sync::OnceLock;

use object_store::aws::{AmazonS3, AmazonS3Builder};
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};

use super::{Backend, Created, StoreError};

/// Whether `location` names an object store (`s3://…`) rather than a directory.
pub fn is_url(location: &str) -> bool {
    location.starts_with("s3://")
}

/// An S3 bucket and key prefix holding a store.
#[derive(Debug)]
pub struct S3 {
    url: String,
    prefix: String,
    client: AmazonS3,
}

/// The runtime running every object store request of the process (never dropped, so dropping a
/// store inside async code is fine).
fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("toolforge-store")
            .enable_all()
            .build()
            .expect("tokio runtime for the object store")
    })
}

/// Runs `fut` on [`runtime`] and waits for it from the calling thread.
fn block<T: Send + 'static>(fut: impl Future<Output = T> + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    runtime().spawn(async move {
        let _ = tx.send(fut.await);
    });
    rx.recv().expect("object store request finished")
}

impl S3 {
    /// Opens `s3://bucket/prefix` with the credentials and endpoint of the environment (see the
    /// module docs). No request is made here.
    ///
    /// Errors: [`StoreError::Remote`] for a URL without a bucket or a bad configuration.
    pub fn open(url: &str) -> Result<S3, StoreError> {
        S3::open_with(url, &[])
    }

    /// [`S3::open`] with `vars` (`AWS_*` name, value) taking precedence over the process
    /// environment (for a caller that configures several stores, e.g. the tests).
    ///
    /// Errors: as [`S3::open`].
    pub fn open_with(url: &str, vars: &[(&str, &str)]) -> Result<S3, StoreError> {
        let remote = |detail: String| StoreError::Remote {
            url: url.to_string(),
            detail,
        };
        let rest = url
            .strip_prefix("s3://")
            .ok_or_else(|| remote("not an s3:// URL".into()))?;
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        if bucket.is_empty() {
            return Err(remote("no bucket (expected s3://bucket/prefix)".into()));
        }
        let var = |name: &str| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
                .or_else(|| std::env::var(name).ok())
        };
        let endpoint = var("AWS_ENDPOINT_URL").unwrap_or_default();
        let local = ["http://127.0.0.1", "http://localhost", "http://[::1]"]
            .iter()
            .any(|p| endpoint.starts_with(p));
        let mut builder = AmazonS3Builder::from_env();
        for (k, v) in vars {
            let key = k
                .to_ascii_lowercase()
                .parse()
                .map_err(|e: object_store::Error| remote(e.to_string()))?;
            builder = builder.with_config(key, *v);
        }
        let mut builder = builder.with_bucket_name(bucket);
        if local {
            builder = builder.with_allow_http(true);
        }
        let client = builder.build().map_err(|e| remote(e.to_string()))?;
        Ok(S3 {
            url: url.trim_end_matches('/').to_string(),
            prefix: prefix.trim_matches('/').to_string(),
            client,
        })
    }

    fn path(&self, name: &str) -> ObjectPath {
        if self.prefix.is_empty() {
            ObjectPath::from(name)
        } else {
            ObjectPath::from(format!("{}/{name}", self.prefix))
        }
    }

    fn error(&self, name: &str, e: object_store::Error) -> StoreError {
        StoreError::Remote {
            url: format!("{}/{name}", self.url),
            detail: e.to_string(),
        }
    }
}

impl Backend for S3 {
    fn read(&self, name: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let (client, path) = (self.client.clone(), self.path(name));
        let got = block(async move {
            match client.get(&path).await {
                Ok(r) => r.bytes().await.map(|b| Some(b.to_vec())),
                Err(object_store::Error::NotFound { .. }) => Ok(None),
                Err(e) => Err(e),
            }
        });
        got.map_err(|e| self.error(name, e))
    }

    fn create(&self, name: &str, bytes: &[u8]) -> Result<Created, StoreError> {
        let (client, path) = (self.client.clone(), self.path(name));
        let payload = PutPayload::from(bytes.to_vec());
        let put = block(async move { client.put_opts(&path, payload, PutOptions::from(PutMode::Create)).await });
        match put {
            Ok(_) => Ok(Created::Written),
            Err(object_store::Error::AlreadyExists { .. } | object_store::Error::Precondition { .. }) => {
                Ok(Created::Present)
            }
            Err(e) => Err(self.error(name, e)),
        }
    }

    fn remove(&self, name: &str) {
        let (client, path) = (self.client.clone(), self.path(name));
        let _ = block(async move { client.delete(&path).await });
    }

    fn describe(&self) -> String {
        self.url.clone()
    }
}
