//! Answers counted in the server's memory budget ([`super::memory`]; issue 47): a REST
//! endpoint's rows and a tool's output are JSON text the server builds and holds until the
//! client has read it, so a large answer — or many at once, to clients that read slowly or not
//! at all — is memory like any result. Each answer is
//!
//! 1. **measured before it is written**: the exact length of its JSON text, counted by
//!    serialising it into a counter ([`crate::tools::executor::json_len`]; no allocation);
//! 2. **refused or reserved**: over the whole budget it is 413, and when the budget cannot hold
//!    it now (after ending idle sessions, [`super::sessions::reserve`]) 503 with `Retry-After`,
//!    both naming `--max-server-mib`;
//! 3. **written into chunks of [`CHUNK`] bytes, each holding its share of the reservation**
//!    ([`bytes::Bytes::from_owner`]): hyper drops a chunk once it has written it to the socket,
//!    which gives its bytes back — so the budget counts exactly the part of an answer not yet
//!    sent, and a client that stops reading keeps its answer counted (its connection's timeouts
//!    end it, [`super::listen`]).
//!
//! The REST rows themselves are counted while the query produces them
//! ([`crate::tools::rest::Endpoint::execute_within`]), and a tool output's rows are written
//! straight from its Arrow arrays ([`crate::tools::executor::Preview`]).

use std::collections::VecDeque;
use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use axum::body::Bytes;
use axum::http::StatusCode;
use axum::response::Response;
use hyper::body::{Body, Frame, SizeHint};
use serde::Serialize;

use super::memory::Reservation;
use super::state::{AppState, CallError};

/// Bytes of one chunk of an answer's text.
pub const CHUNK: usize = 64 << 10;

/// A JSON answer's text in chunks, each holding its bytes' reservation until hyper has written
/// (and dropped) it. An HTTP body ([`Body`]) with an exact size.
pub(crate) struct Reply {
    chunks: VecDeque<Bytes>,
    remaining: u64,
}

/// One chunk's text and its share of the reservation.
struct Chunk {
    text: Vec<u8>,
    _held: Reservation,
}

impl AsRef<[u8]> for Chunk {
    fn as_ref(&self) -> &[u8] {
        &self.text
    }
}

/// Writes into chunks of at most [`CHUNK`] bytes, each allocated at the size still to come.
struct Chunks {
    done: Vec<Vec<u8>>,
    current: Vec<u8>,
    left: usize,
}

impl std::io::Write for Chunks {
    fn write(&mut self, mut b: &[u8]) -> std::io::Result<usize> {
        let n = b.len();
        while !b.is_empty() {
            if self.current.len() == self.current.capacity() {
                let full = std::mem::take(&mut self.current);
                if !full.is_empty() {
                    self.done.push(full);
                }
                self.current = Vec::with_capacity(self.left.clamp(1, CHUNK));
            }
            let room = (self.current.capacity() - self.current.len()).min(b.len());
            self.current.extend_from_slice(&b[..room]);
            self.left = self.left.saturating_sub(room);
            b = &b[room..];
        }
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Reply {
    /// `value` as JSON text under the server's budget (module docs): 413 past the whole
    /// budget, 503 when it cannot be held now; `what` names the answer in the message, `caller`
    /// is the session whose results are not ended to make room.
    pub(crate) fn json<T: Serialize + ?Sized>(
        state: &AppState,
        value: &T,
        what: &str,
        caller: Option<&str>,
    ) -> Result<Reply, CallError> {
        if state.memory.is_off() {
            // No budget: written as axum's `Json` writes it, unmeasured.
            let text = serde_json::to_vec(value).map_err(|e| {
                (
                    StatusCode::INTERNAL_SERVER_ERROR,
                    format!("writing the answer failed: {e}"),
                )
            })?;
            return Ok(Reply {
                remaining: text.len() as u64,
                chunks: VecDeque::from([Bytes::from(text)]),
            });
        }
        let len = crate::tools::executor::json_len(value);
        let mut held = reserve_answer(state, len, what, caller)?;
        let mut w = Chunks {
            done: Vec::new(),
            current: Vec::new(),
            left: len,
        };
        serde_json::to_writer(&mut w, value).map_err(|e| {
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("writing the answer failed: {e}"),
            )
        })?;
        if !w.current.is_empty() {
            w.done.push(w.current);
        }
        let chunks = w
            .done
            .into_iter()
            .map(|text| {
                let share = held.split(text.len());
                Bytes::from_owner(Chunk { text, _held: share })
            })
            .collect();
        Ok(Reply {
            chunks,
            remaining: len as u64,
        })
    }

    /// The 200 response carrying this answer (`content-type: application/json`).
    pub(crate) fn into_response(self) -> Response {
        let mut r = Response::new(axum::body::Body::new(self));
        r.headers_mut().insert(
            axum::http::header::CONTENT_TYPE,
            axum::http::HeaderValue::from_static("application/json"),
        );
        r
    }
}

/// `bytes` of an answer reserved from the server's budget: 413 when they exceed the whole
/// budget, 503 when they cannot be held now ([`super::sessions::grow`]).
pub(crate) fn reserve_answer(
    state: &AppState,
    bytes: usize,
    what: &str,
    caller: Option<&str>,
) -> Result<Reservation, CallError> {
    let mut r = state.memory.empty();
    grow_answer(state, &mut r, bytes, what, caller)?;
    Ok(r)
}

/// Makes `held` (an answer's reservation) `bytes`, as [`reserve_answer`] reserves them.
pub(crate) fn grow_answer(
    state: &AppState,
    held: &mut Reservation,
    bytes: usize,
    what: &str,
    caller: Option<&str>,
) -> Result<(), CallError> {
    if bytes > state.memory.limit() {
        return Err((
            StatusCode::PAYLOAD_TOO_LARGE,
            format!(
                "{what} would take {} MiB, over the server's memory budget of {} MiB (--max-server-mib); narrow the call or lower --max-rows",
                bytes >> 20,
                state.memory.limit() >> 20
            ),
        ));
    }
    super::sessions::grow(state, held, bytes, caller)
}

/// An answer ending (sent, or dropped with its connection) is activity for the trimmer
/// ([`super::trim`]): its quiet period, after which freed memory is handed back, starts when
/// the last answer has gone, not when the last request came in (a burst of large answers
/// outlasts the request that started it).
impl Drop for Reply {
    fn drop(&mut self) {
        super::trim::request_seen();
    }
}

impl Body for Reply {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = self.get_mut();
        Poll::Ready(this.chunks.pop_front().map(|b| {
            this.remaining -= b.len() as u64;
            Ok(Frame::data(b))
        }))
    }

    fn is_end_stream(&self) -> bool {
        self.chunks.is_empty()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.remaining)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An answer's chunks hold its bytes until each is dropped (hyper drops a chunk once
    /// written), and their text is the value's JSON.
    #[test]
    fn an_answer_holds_its_bytes_until_its_chunks_are_dropped() {
        let _x = crate::tools::join_cache::exclusive();
        let state = super::super::state::shared(
            super::super::Toolkit {
                name: "t".into(),
                format: "rest".into(),
                endpoints: Vec::new(),
                catalog: Vec::new(),
                openapi: serde_json::Value::Null,
                database_root: std::env::temp_dir(),
                setups: Default::default(),
                join_shapes: Default::default(),
                drift: None,
                instances: Default::default(),
            },
            super::super::ServeConfig {
                max_server_bytes: (1 << 20) + crate::tools::join_cache::held_bytes(),
                ..Default::default()
            },
        );
        let value: Vec<String> = (0..5000).map(|i| format!("row {i:>100}")).collect();
        let text = serde_json::to_vec(&value).unwrap();
        let mut reply = Reply::json(&state, &value, "the answer", None).unwrap();
        assert!(reply.chunks.len() > 1);
        assert_eq!(state.memory.used() - crate::tools::join_cache::held_bytes(), text.len());
        let first = reply.chunks.pop_front().unwrap();
        let rest: Vec<u8> = reply.chunks.iter().flat_map(|b| b.to_vec()).collect();
        assert_eq!([first.to_vec(), rest].concat(), text);
        drop(reply);
        assert_eq!(
            state.memory.used() - crate::tools::join_cache::held_bytes(),
            first.len()
        );
        // Past what is left: 503; past the whole budget: 413.
        let again = Reply::json(&state, &value, "the answer", None).unwrap();
        assert_eq!(
            Reply::json(&state, &value, "the answer", None).err().unwrap().0,
            StatusCode::SERVICE_UNAVAILABLE
        );
        drop(again);
        let huge: Vec<String> = (0..20).map(|_| "x".repeat(100_000)).collect();
        assert_eq!(
            Reply::json(&state, &huge, "the answer", None).err().unwrap().0,
            StatusCode::PAYLOAD_TOO_LARGE
        );
    }
}
