//! The S3-compatible object storage [`Backend`] (AWS S3, SeaweedFS, MinIO, R2, …) through the
//! `object_store` crate.
//!
//! Location: `s3://bucket/prefix` (`--store`, `TOOLFORGE_STORE`, or the recipe's `store` key);
//! entries are objects `prefix/objects/<2 hex>/<64 hex>` with the local store's bytes.
//! Configuration is the usual AWS environment, read by `AmazonS3Builder::from_env`:
//! `AWS_ENDPOINT_URL` (for a non-AWS server), `AWS_REGION` / `AWS_DEFAULT_REGION`,
//! `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`. Plain `http://` endpoints
//! are allowed for loopback hosts (a test server) or with `AWS_ALLOW_HTTP=true`.
//!
//! Opening a store makes one request (a GET of `prefix/objects/probe`, answered "not found"), so a
//! store that is down, a wrong secret, a missing bucket or a refused plain-http endpoint fails the
//! build at once, named ([`Fault`]), instead of every item turning into a miss. A request failing
//! that way later (the server went down mid-build) marks the store down for the process: the
//! requests after it fail at once with the same error instead of each retrying for a minute.
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

use super::fault::{Fault, classify, needs_allow_http};
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
    /// The first request failure that every later request would repeat ([`Fault::is_fatal`]).
    down: std::sync::Mutex<Option<(Fault, String)>>,
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
    /// module docs) and probes it with one request.
    ///
    /// Errors: [`StoreError::Remote`] for a URL without a bucket or a bad configuration
    /// ([`Fault::Config`]), and for a failed probe, with its [`Fault`] (unreachable, wrong secret,
    /// unknown access key, permission denied, no such bucket, plain-http endpoint not allowed).
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
            fault: Fault::Config,
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
        let local = endpoint.starts_with("http://") && !needs_allow_http(&endpoint);
        let allow_http = var("AWS_ALLOW_HTTP")
            .is_some_and(|v| matches!(v.to_ascii_lowercase().as_str(), "1" | "true" | "on" | "yes" | "y"));
        let plain_http_refused = endpoint.starts_with("http://") && !local && !allow_http;
        if plain_http_refused {
            // Every request would fail before it is sent ("URL scheme is not allowed").
            return Err(StoreError::Remote {
                url: url.to_string(),
                fault: Fault::PlainHttp,
                detail: format!("AWS_ENDPOINT_URL {endpoint} is plain http on a host that is not this machine"),
            });
        }
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
        // The probe gives up after ~1 s of refused connections (the default retries for 3 min).
        let quick = object_store::RetryConfig {
            backoff: object_store::BackoffConfig {
                init_backoff: std::time::Duration::from_millis(100),
                max_backoff: std::time::Duration::from_secs(1),
                base: 2.0,
            },
            max_retries: 3,
            retry_timeout: std::time::Duration::from_secs(5),
        };
        let probe_client = builder
            .clone()
            .with_retry(quick)
            .build()
            .map_err(|e| remote(e.to_string()))?;
        let client = builder.build().map_err(|e| remote(e.to_string()))?;
        let store = S3 {
            url: url.trim_end_matches('/').to_string(),
            prefix: prefix.trim_matches('/').to_string(),
            client,
            down: Default::default(),
        };
        store.probe(probe_client)?;
        Ok(store)
    }

    /// One GET of `objects/probe` (normally "not found"): a store that cannot answer it cannot
    /// be used. Errors: the request's [`Fault`].
    fn probe(&self, client: AmazonS3) -> Result<(), StoreError> {
        let name = "objects/probe";
        let path = self.path(name);
        let got = block(async move {
            match client.get(&path).await {
                Ok(r) => r.bytes().await.map(|_| ()),
                Err(e) => Err(e),
            }
        });
        match got {
            Ok(()) => Ok(()),
            Err(e @ object_store::Error::NotFound { .. }) if classify(&e) != Fault::NoSuchBucket => Ok(()),
            Err(e) => Err(self.error(name, e)),
        }
    }

    fn path(&self, name: &str) -> ObjectPath {
        if self.prefix.is_empty() {
            ObjectPath::from(name)
        } else {
            ObjectPath::from(format!("{}/{name}", self.prefix))
        }
    }

    /// The store error of a failed request; a fatal one marks the store down.
    fn error(&self, name: &str, e: object_store::Error) -> StoreError {
        let fault = classify(&e);
        let detail = e.to_string();
        if fault.is_fatal() {
            if let Ok(mut down) = self.down.lock() {
                down.get_or_insert((fault, detail.clone()));
            }
        }
        StoreError::Remote {
            url: format!("{}/{name}", self.url),
            fault,
            detail,
        }
    }

    /// The error every request gets once the store is down (no request is sent).
    fn check_up(&self) -> Result<(), StoreError> {
        match self.down.lock().ok().and_then(|d| d.clone()) {
            Some((fault, detail)) => Err(StoreError::Remote {
                url: self.url.clone(),
                fault,
                detail: format!("{detail} (an earlier request; not sent again)"),
            }),
            None => Ok(()),
        }
    }
}

impl Backend for S3 {
    fn read(&self, name: &str) -> Result<Option<bytes::Bytes>, StoreError> {
        self.check_up()?;
        let (client, path) = (self.client.clone(), self.path(name));
        let got = block(async move {
            match client.get(&path).await {
                Ok(r) => r.bytes().await.map(Some),
                Err(object_store::Error::NotFound { .. }) => Ok(None),
                Err(e) => Err(e),
            }
        });
        got.map_err(|e| self.error(name, e))
    }

    fn create(&self, name: &str, bytes: &[u8]) -> Result<Created, StoreError> {
        self.check_up()?;
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

    fn remove(&self, name: &str) -> Result<(), StoreError> {
        self.check_up()?;
        let (client, path) = (self.client.clone(), self.path(name));
        match block(async move { client.delete(&path).await }) {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(self.error(name, e)),
        }
    }

    fn describe(&self) -> String {
        self.url.clone()
    }
}
