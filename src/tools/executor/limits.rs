//! What a live caller (the tool server, issue 47) bounds one tool call by: an upper bound of
//! the call's output computed **before** it is built ([`super::estimate`]) against a byte
//! budget, documented limits on the size of its arguments, and a cooperative deadline checked
//! inside the operators' loops ([`checkpoint`]). A whole-sequence run (compile, verification)
//! has no limits ([`Limits::NONE`]).
//!
//! Argument limits ([`check_arguments`]), for every tool:
//! - a text argument (a replacement, a pattern, a format, a LIKE pattern, a value) has at most
//!   [`MAX_TEXT_CHARS`] characters;
//! - a list argument (a label list, a key list, CASE branches) has at most [`MAX_LIST_ITEMS`]
//!   items, and the arguments hold at most [`MAX_ARGUMENT_NODES`] JSON values in all.
//!
//! The deadline: [`Limits::deadline`] (wall clock) and [`Limits::cancel`] (set when the client
//! went away) are installed for the calling thread while the call runs; the operators call
//! [`checkpoint`] in every loop over rows, which reads the clock once every
//! [`CHECK_EVERY`] calls, and fails the call once either is past.

use std::cell::{Cell, RefCell};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use serde_json::Value as Json;

/// Most characters of one text argument.
pub const MAX_TEXT_CHARS: usize = 1024;
/// Most items of one list argument.
pub const MAX_LIST_ITEMS: usize = 64;
/// Most JSON values in one call's arguments (all levels).
pub const MAX_ARGUMENT_NODES: usize = 4096;
/// Calls of [`checkpoint`] between two readings of the clock.
pub const CHECK_EVERY: u32 = 256;

/// The bounds of one call (module docs).
#[derive(Debug, Clone, Default)]
pub struct Limits {
    /// Most bytes the call's output may take (its upper bound, computed before it is built);
    /// `None`: unbounded.
    pub max_output_bytes: Option<usize>,
    /// Whether the argument limits apply.
    pub check_arguments: bool,
    /// Wall-clock deadline of the call.
    pub deadline: Option<Instant>,
    /// Set by the caller when the call's answer is no longer wanted (the client disconnected).
    pub cancel: Option<Arc<AtomicBool>>,
}

impl Limits {
    /// No limits (compile-time runs).
    pub const NONE: Limits = Limits {
        max_output_bytes: None,
        check_arguments: false,
        deadline: None,
        cancel: None,
    };
}

/// Why a call was not run, or stopped.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum StepError {
    /// The arguments or inputs are wrong (a 422 for a client).
    #[error("{0}")]
    Invalid(String),
    /// The output's upper bound is over the byte budget (nothing was built).
    #[error("`{tool}` could build up to {} MiB ({estimate} bytes), over the budget of {} MiB", estimate >> 20, max >> 20)]
    OverBudget {
        /// The tool.
        tool: String,
        /// Upper bound of the output's bytes.
        estimate: usize,
        /// The budget.
        max: usize,
    },
    /// An argument is over a documented size limit.
    #[error("{0}")]
    ArgumentTooLarge(String),
    /// The deadline passed while the call ran (its work was stopped).
    #[error("the call ran past its time limit and was stopped")]
    TimedOut,
    /// The caller cancelled the call (its work was stopped).
    #[error("the call was cancelled")]
    Cancelled,
}

/// Checks `arguments` against the argument limits (module docs).
pub fn check_arguments(tool: &str, arguments: &serde_json::Map<String, Json>) -> Result<(), StepError> {
    fn walk(path: &str, v: &Json, nodes: &mut usize) -> Result<(), String> {
        *nodes += 1;
        if *nodes > MAX_ARGUMENT_NODES {
            return Err(format!("the arguments hold more than {MAX_ARGUMENT_NODES} values"));
        }
        match v {
            Json::String(s) if s.len() > MAX_TEXT_CHARS && s.chars().count() > MAX_TEXT_CHARS => Err(format!(
                "argument `{path}` has {} characters, over the limit of {MAX_TEXT_CHARS}",
                s.chars().count()
            )),
            Json::Array(items) if items.len() > MAX_LIST_ITEMS => Err(format!(
                "argument `{path}` lists {} items, over the limit of {MAX_LIST_ITEMS}",
                items.len()
            )),
            Json::Array(items) => items.iter().try_for_each(|i| walk(path, i, nodes)),
            Json::Object(o) => o.iter().try_for_each(|(k, i)| walk(&format!("{path}.{k}"), i, nodes)),
            _ => Ok(()),
        }
    }
    let mut nodes = 0;
    arguments
        .iter()
        .try_for_each(|(k, v)| walk(k, v, &mut nodes))
        .map_err(|m| StepError::ArgumentTooLarge(format!("`{tool}`: {m}")))
}

/// The deadline and cancel flag of the call running on this thread.
struct Watch {
    deadline: Option<Instant>,
    cancel: Option<Arc<AtomicBool>>,
    ticks: Cell<u32>,
    stopped: Cell<Option<StepError>>,
}

thread_local! {
    static WATCH: RefCell<Option<Watch>> = const { RefCell::new(None) };
}

/// Runs `f` with `limits`' deadline and cancel flag installed for [`checkpoint`] on this
/// thread; returns `f`'s result and why it was stopped, if it was.
pub(super) fn watched<T>(limits: &Limits, f: impl FnOnce() -> T) -> (T, Option<StepError>) {
    if limits.deadline.is_none() && limits.cancel.is_none() {
        return (f(), None);
    }
    WATCH.with(|w| {
        *w.borrow_mut() = Some(Watch {
            deadline: limits.deadline,
            cancel: limits.cancel.clone(),
            ticks: Cell::new(0),
            stopped: Cell::new(None),
        })
    });
    let out = f();
    let stopped = WATCH.with(|w| w.borrow_mut().take().and_then(|w| w.stopped.take()));
    (out, stopped)
}

/// Fails once the running call's deadline has passed or it was cancelled (module docs); a
/// no-op outside a watched call. Cheap: the clock is read once every [`CHECK_EVERY`] calls.
pub(super) fn checkpoint() -> Result<(), String> {
    WATCH.with(|w| {
        let w = w.borrow();
        let Some(w) = w.as_ref() else { return Ok(()) };
        let t = w.ticks.get().wrapping_add(1);
        w.ticks.set(t);
        if t % CHECK_EVERY != 0 {
            return Ok(());
        }
        let why = if w.cancel.as_ref().is_some_and(|c| c.load(Ordering::Relaxed)) {
            StepError::Cancelled
        } else if w.deadline.is_some_and(|d| Instant::now() > d) {
            StepError::TimedOut
        } else {
            return Ok(());
        };
        let message = why.to_string();
        w.stopped.set(Some(why));
        Err(message)
    })
}

/// Whether the running call may go on ([`checkpoint`] as a bool, for iterator adaptors: a loop
/// cut short by `take_while(|_| live())` leaves a partial result, which the stopped call
/// discards).
pub(super) fn live() -> bool {
    checkpoint().is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_texts_and_lists_are_over_the_argument_limits() {
        let args = |v: Json| v.as_object().cloned().unwrap();
        assert!(check_arguments("t", &args(serde_json::json!({"pattern": "a".repeat(MAX_TEXT_CHARS)}))).is_ok());
        let long = check_arguments(
            "t",
            &args(serde_json::json!({"x": {"replacement": "é".repeat(MAX_TEXT_CHARS + 1)}})),
        );
        assert!(
            matches!(&long, Err(StepError::ArgumentTooLarge(m)) if m.contains("x.replacement")),
            "{long:?}"
        );
        let labels: Vec<Json> = (0..=MAX_LIST_ITEMS).map(|i| Json::String(format!("$L{i}$"))).collect();
        assert!(check_arguments("t", &args(serde_json::json!({"unique_array": labels}))).is_err());
    }

    #[test]
    fn checkpoint_stops_a_watched_loop_at_its_deadline() {
        let limits = Limits {
            deadline: Some(Instant::now() + std::time::Duration::from_millis(20)),
            ..Limits::default()
        };
        let started = Instant::now();
        let (r, why) = watched(&limits, || {
            loop {
                if let Err(m) = checkpoint() {
                    break m;
                }
            }
        });
        assert!(started.elapsed() < std::time::Duration::from_secs(1));
        assert_eq!(why, Some(StepError::TimedOut), "{r}");
        assert!(checkpoint().is_ok(), "no watch outside the call");
    }
}
