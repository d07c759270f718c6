//! A time limit on reading a request body (issue 47 D4), as Apache's `mod_reqtimeout` sets one
//! (`body=10,MinRate=500`): once the head is in, the body must arrive within
//! [`BodyLimits::timeout`], extended by one second for every [`BodyLimits::min_rate`] bytes
//! received — a minimum transfer rate. A body that falls behind ends in an error for whoever
//! reads it (the route answers 400), the response carries `Connection: close` and the
//! connection is closed, as a slow head is by hyper's header-read timeout
//! ([`super::listen`]); before, a client sending one body byte every 2 s held its connection
//! (and one of `--max-connections`) forever.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Bytes;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use tokio::time::{Instant, Sleep};

/// The body-read limits (module docs).
#[derive(Debug, Clone, Copy)]
pub struct BodyLimits {
    /// Time a body has to arrive, counted from the end of the head.
    pub timeout: Duration,
    /// Bytes per second that extend the time by one second each (0: no extension).
    pub min_rate: u64,
}

impl Default for BodyLimits {
    fn default() -> BodyLimits {
        BodyLimits {
            timeout: Duration::from_secs(10),
            min_rate: 500,
        }
    }
}

/// A request body read under [`BodyLimits`]; `late` is set when it fell behind.
pub(crate) struct TimedBody {
    inner: Incoming,
    sleep: Pin<Box<Sleep>>,
    started: Instant,
    limits: BodyLimits,
    received: u64,
    late: Arc<AtomicBool>,
}

impl TimedBody {
    /// `inner` timed from now.
    pub(crate) fn new(inner: Incoming, limits: BodyLimits, late: Arc<AtomicBool>) -> TimedBody {
        let started = Instant::now();
        TimedBody {
            inner,
            sleep: Box::pin(tokio::time::sleep_until(started + limits.timeout)),
            started,
            limits,
            received: 0,
            late,
        }
    }
}

impl Body for TimedBody {
    type Data = Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = self.get_mut();
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    this.received += data.len() as u64;
                    if let Some(extra) = this.received.checked_div(this.limits.min_rate) {
                        let deadline = this.started + this.limits.timeout + Duration::from_secs(extra);
                        this.sleep.as_mut().reset(deadline);
                    }
                }
                return Poll::Ready(Some(Ok(frame)));
            }
            Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(e.into()))),
            Poll::Ready(None) => return Poll::Ready(None),
            Poll::Pending => {}
        }
        if this.sleep.as_mut().poll(cx).is_ready() {
            this.late.store(true, Ordering::Relaxed);
            return Poll::Ready(Some(Err(format!(
                "request body not received in time ({} bytes after {} ms; --body-timeout-ms, --body-min-rate)",
                this.received,
                this.started.elapsed().as_millis()
            )
            .into())));
        }
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
