//! The HTTP server's connections (issue 31 D4), through hyper's own HTTP/1 connection builder
//! and hyper-util's graceful shutdown rather than `axum::serve` (which sets no timer, so idle and
//! half-sent connections were held forever):
//!
//! - **At most [`ConnectionLimits::max_connections`] connections**: one past it is closed as
//!   soon as it is accepted (a semaphore permit per connection, released when it ends). The
//!   accept queue is as long ([`bind`]), so a burst of connects is not dropped by the kernel.
//! - **Header-read and idle timeout** ([`ConnectionLimits::header_read_timeout`]): hyper's
//!   `header_read_timeout` runs from the moment a connection waits for a request head — a new
//!   connection, and a kept-alive one between two requests — so a client that sends no complete
//!   head within it (idle, or one byte a second) is closed.
//! - **Body-read timeout and minimum rate** ([`ConnectionLimits::body`], [`super::body`]): a
//!   request body must arrive within `--body-timeout-ms`, extended by a second per
//!   `--body-min-rate` bytes; one that falls behind is answered 400 and its connection closed.
//! - **Keep-alive limit** ([`ConnectionLimits::max_requests_per_connection`]): the response to
//!   the last request a connection may carry has `Connection: close`, and hyper closes the
//!   connection after it.
//! - **Graceful shutdown with a deadline** ([`ConnectionLimits::shutdown_deadline`]): on
//!   SIGINT/SIGTERM the listener is closed, every connection is told to finish its running
//!   request and close (hyper-util's `GracefulShutdown`), and the server returns when they have,
//!   or, whatever the clients do, in time for the process to exit within the deadline (the
//!   connections get the deadline less a tenth of it, at most 200 ms, for the exit).

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::http::{HeaderValue, Request, header};
use hyper::body::{Body as _, Incoming};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use tower::ServiceExt as _;

/// Limits of the server's connections (module docs).
#[derive(Debug, Clone, Copy)]
pub struct ConnectionLimits {
    /// Most open connections; more are closed when accepted.
    pub max_connections: usize,
    /// Time a connection has to send a complete request head, counted from when it starts
    /// waiting for one (so also the idle timeout of a kept-alive connection).
    pub header_read_timeout: Duration,
    /// Most requests one connection carries before it is closed.
    pub max_requests_per_connection: usize,
    /// How long a shutdown waits for running requests before the server stops anyway.
    pub shutdown_deadline: Duration,
    /// Time limit and minimum rate of reading a request body ([`super::body`]).
    pub body: super::body::BodyLimits,
}

impl Default for ConnectionLimits {
    fn default() -> ConnectionLimits {
        ConnectionLimits {
            max_connections: 4096,
            header_read_timeout: Duration::from_secs(10),
            max_requests_per_connection: 10_000,
            shutdown_deadline: Duration::from_secs(5),
            body: Default::default(),
        }
    }
}

/// A listener on `addr` whose accept queue holds up to `max_connections` connections not yet
/// accepted (the kernel caps it at `net.core.somaxconn`). `TcpListener::bind`'s queue of 128
/// overflowed under a burst of new connections (500 slow-header clients connecting at once): the
/// kernel dropped the SYNs past it, and a client caught in the burst, a health check included,
/// waited for its 1 s SYN retransmission.
pub(crate) fn bind(addr: std::net::SocketAddr, max_connections: usize) -> std::io::Result<tokio::net::TcpListener> {
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(u32::try_from(max_connections).unwrap_or(u32::MAX).max(128))
}

/// Serves `app` on `listener` under `limits` until `shutdown` completes, then shuts down within
/// the deadline (module docs).
pub(crate) async fn serve(
    listener: tokio::net::TcpListener,
    app: Router,
    limits: ConnectionLimits,
    shutdown: impl Future<Output = ()>,
) {
    let permits = Arc::new(tokio::sync::Semaphore::new(limits.max_connections));
    let graceful = GracefulShutdown::new();
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .keep_alive(true);
    tokio::pin!(shutdown);
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                // Out of file descriptors or a connection reset before it was accepted: wait a
                // moment rather than spin.
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let Ok(permit) = permits.clone().try_acquire_owned() else {
            drop(stream);
            continue;
        };
        let _ = stream.set_nodelay(true);
        let served = Arc::new(AtomicUsize::new(0));
        let app = app.clone();
        let max = limits.max_requests_per_connection;
        let body_limits = limits.body;
        let service = hyper::service::service_fn(move |req: Request<Incoming>| {
            let n = served.fetch_add(1, Ordering::Relaxed) + 1;
            // A health check (a load balancer's, every few seconds) is not load: counted, it
            // would keep the server from ever being quiet enough to trim.
            if req.uri().path() != "/healthz" {
                super::trim::request_seen();
            }
            let app = app.clone();
            // A body is read under the body limits; one that fell behind closes the connection.
            let late = Arc::new(AtomicBool::new(false));
            let req = if req.body().is_end_stream() {
                req.map(axum::body::Body::new)
            } else {
                let late = late.clone();
                req.map(|b| axum::body::Body::new(super::body::TimedBody::new(b, body_limits, late)))
            };
            async move {
                let mut resp = app.oneshot(req).await?;
                if n >= max || late.load(Ordering::Relaxed) {
                    resp.headers_mut()
                        .insert(header::CONNECTION, HeaderValue::from_static("close"));
                }
                Ok::<_, Infallible>(resp)
            }
        });
        let conn = graceful.watch(http.serve_connection(TokioIo::new(stream), service));
        tokio::spawn(async move {
            let _ = conn.await;
            drop(permit);
        });
    }
    drop(listener);
    // The process must be gone within the deadline: the connections get it less a margin for
    // what follows (the runtime let go of, the process's exit), a tenth of it, at most 200 ms.
    let margin = (limits.shutdown_deadline / 10).min(Duration::from_millis(200));
    tokio::select! {
        () = graceful.shutdown() => {}
        () = tokio::time::sleep(limits.shutdown_deadline - margin) => {
            eprintln!(
                "toolforge serve: shutdown deadline of {} ms passed; closing the remaining connections",
                limits.shutdown_deadline.as_millis()
            );
        }
    }
}
