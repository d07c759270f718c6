//! What went wrong with a store request, in the operator's terms (issue 34 item 4): a storage
//! error is reported as one — "unreachable", "wrong secret", "permission denied" with the
//! variable to check — wherever it happens (shards, merge, plain builds), never as items missing
//! from the store nor as a silent recompute.
//!
//! The kind is read from the `object_store` error: its variant (403 → `PermissionDenied`, 401 →
//! `Unauthenticated`), the S3 error code in the response body (`SignatureDoesNotMatch`,
//! `InvalidAccessKeyId`, `NoSuchBucket`, `AccessDenied`; AWS S3 API reference, "Error codes")
//! and, for transport failures, the [`object_store::client::HttpError`] kind in its source chain
//! (`Connect`: nothing answered at the endpoint).

/// The kind of a failed store request or configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Nothing answered at the endpoint (connection refused, DNS failure, timeout).
    Unreachable,
    /// The endpoint is `http://` on a host other than localhost and `AWS_ALLOW_HTTP` is unset.
    PlainHttp,
    /// The server rejected the request signature: the secret does not match the access key.
    WrongSecret,
    /// The server does not know the access key id.
    UnknownAccessKey,
    /// The request carried no valid credentials (HTTP 401).
    Unauthenticated,
    /// The credentials are valid but lack the right for this request (HTTP 403 `AccessDenied`).
    PermissionDenied,
    /// The bucket of the URL does not exist.
    NoSuchBucket,
    /// The URL or the `AWS_*` configuration is invalid.
    Config,
    /// Any other failure (a server error after retries, a bad response).
    Request,
}

impl Fault {
    /// What to check, appended to the message.
    pub fn hint(self) -> &'static str {
        match self {
            Fault::Unreachable => {
                "is the server up, and AWS_ENDPOINT_URL right? (a plain-http endpoint other than localhost also needs AWS_ALLOW_HTTP=true)"
            }
            Fault::PlainHttp => "set AWS_ALLOW_HTTP=true to use a plain-http endpoint other than localhost",
            Fault::WrongSecret => "check AWS_SECRET_ACCESS_KEY (the secret of AWS_ACCESS_KEY_ID)",
            Fault::UnknownAccessKey => "check AWS_ACCESS_KEY_ID",
            Fault::Unauthenticated => "check AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN",
            Fault::PermissionDenied => "the credentials need read, write and delete rights on the store's prefix",
            Fault::NoSuchBucket => "create the bucket, or fix the store URL",
            Fault::Config => "see the AWS_* variables",
            Fault::Request => "the request failed after retries",
        }
    }

    /// Whether every later request would fail the same way (the store is unusable for this
    /// process, so the build stops asking it).
    pub fn is_fatal(self) -> bool {
        !matches!(self, Fault::Request)
    }
}

impl std::fmt::Display for Fault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Fault::Unreachable => "store unreachable",
            Fault::PlainHttp => "plain-http endpoint not allowed",
            Fault::WrongSecret => "wrong secret",
            Fault::UnknownAccessKey => "unknown access key",
            Fault::Unauthenticated => "credentials rejected",
            Fault::PermissionDenied => "permission denied",
            Fault::NoSuchBucket => "no such bucket",
            Fault::Config => "bad store configuration",
            Fault::Request => "store request failed",
        })
    }
}

/// The kind of `e`, a failed request to an endpoint. ([`Fault::PlainHttp`] is decided before any
/// request, from the endpoint: [`needs_allow_http`].)
pub fn classify(e: &object_store::Error) -> Fault {
    let text = e.to_string();
    let code = |c: &str| text.contains(c);
    if code("SignatureDoesNotMatch") {
        return Fault::WrongSecret;
    }
    if code("InvalidAccessKeyId") {
        return Fault::UnknownAccessKey;
    }
    if code("NoSuchBucket") {
        return Fault::NoSuchBucket;
    }
    match e {
        object_store::Error::PermissionDenied { .. } => return Fault::PermissionDenied,
        object_store::Error::Unauthenticated { .. } => return Fault::Unauthenticated,
        object_store::Error::UnknownConfigurationKey { .. } => return Fault::Config,
        _ => {}
    }
    let mut source: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(e);
    while let Some(s) = source {
        if let Some(h) = s.downcast_ref::<object_store::client::HttpError>() {
            use object_store::client::HttpErrorKind;
            if matches!(h.kind(), HttpErrorKind::Connect | HttpErrorKind::Timeout) {
                return Fault::Unreachable;
            }
        }
        source = s.source();
    }
    Fault::Request
}

/// Whether `endpoint` is plain `http://` on a host that is not this machine's loopback
/// (`localhost`, `127.0.0.0/8`, `::1`): `object_store` refuses such endpoints unless
/// `AWS_ALLOW_HTTP` is true.
pub fn needs_allow_http(endpoint: &str) -> bool {
    let Some(rest) = endpoint.strip_prefix("http://") else {
        return false;
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => host.split(':').next().unwrap_or(""),
    };
    let loopback =
        host.eq_ignore_ascii_case("localhost") || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback());
    !loopback
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_endpoints_need_no_allow_http_and_lookalikes_do() {
        for local in [
            "http://127.0.0.1:8333",
            "http://localhost:9000/",
            "http://[::1]:1",
            "http://127.0.0.2",
        ] {
            assert!(!needs_allow_http(local), "{local}");
        }
        for remote in [
            "http://127.0.0.1.example.com:80",
            "http://s3.internal:9000",
            "http://10.0.0.5",
        ] {
            assert!(needs_allow_http(remote), "{remote}");
        }
        assert!(!needs_allow_http("https://s3.amazonaws.com"));
    }
}
