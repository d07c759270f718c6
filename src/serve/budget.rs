//! The memory budget of one SLOT/SEL session (issue 31 D2): how many results a session keeps
//! and how many bytes they hold.
//!
//! A session's results are the outputs of its tool calls, in the order they were made; its setup
//! outputs (the join steps) are not counted, being shared between sessions and bounded by the
//! join budget ([`crate::tools::table::JoinBudget`]). A result's bytes are its Arrow buffers'
//! ([`value_bytes`]; a slice is counted at its buffers' size, an overestimate).
//!
//! - **Past the budget, the oldest unlabelled results are dropped**: a call made without a
//!   `label` gets a generated one (`<tool>_<n>`) and its result is the first to go, oldest first,
//!   until the session has at most `max_results` results and `max_bytes` bytes. A later call
//!   naming a dropped label gets the executor's unknown-label error.
//! - **Labelled results are never dropped**: when the budget cannot be met by dropping
//!   unlabelled ones, the call is refused (HTTP 413) and its own result removed.
//! - **Before it is built**: a call whose output's upper bound, computed from its inputs and
//!   arguments, exceeds `max_bytes` is refused (413) without running
//!   ([`crate::tools::executor::estimate`]: a replacement's growth, a self-concatenation, a
//!   group's index), so a chain of self-concatenations cannot build a table past the budget.

use std::collections::VecDeque;

use super::memory::Reservation;
use crate::tools::executor::Session;

/// Limits of one session's results.
#[derive(Debug, Clone, Copy)]
pub struct SessionBudget {
    /// Most results kept (setup outputs not counted).
    pub max_results: usize,
    /// Most bytes the kept results hold.
    pub max_bytes: usize,
}

pub use crate::tools::executor::value_bytes;

/// One kept result.
struct Kept {
    label: String,
    /// The client named it (never dropped).
    labelled: bool,
    bytes: usize,
    /// Its bytes reserved from the server's budget ([`super::memory`]), given back when the
    /// result is dropped or the session ends.
    _reserved: Option<Reservation>,
}

/// A live session with the accounting of its results.
#[derive(Default)]
pub(crate) struct Held {
    /// The executor's session (labels → outputs).
    pub(crate) session: Session,
    results: VecDeque<Kept>,
}

impl Held {
    /// A session holding its setup outputs (not counted).
    pub(crate) fn new(session: Session) -> Held {
        Held {
            session,
            results: VecDeque::new(),
        }
    }

    /// Bytes the counted results hold.
    pub(crate) fn bytes(&self) -> usize {
        self.results.iter().map(|k| k.bytes).sum()
    }

    /// Accounts the output just stored under `label` (`labelled`: named by the client), then
    /// drops the oldest unlabelled results until the session fits `budget`; when it cannot, the
    /// new output is removed and the call refused (module docs). `reserved` (the call's
    /// reservation from the server's budget) is made the result's bytes and kept with it.
    pub(crate) fn admit(
        &mut self,
        label: &str,
        labelled: bool,
        budget: SessionBudget,
        mut reserved: Option<Reservation>,
    ) -> Result<(), String> {
        let bytes = self.session.get(label).map_or(0, value_bytes);
        if let Some(r) = reserved.as_mut() {
            // Growing fails only when the estimate was short and the server is full: the result
            // is then counted at the estimate.
            let _ = r.resize(bytes);
        }
        self.results.retain(|k| k.label != label);
        self.results.push_back(Kept {
            label: label.to_string(),
            labelled,
            bytes,
            _reserved: reserved,
        });
        while self.results.len() > budget.max_results || self.bytes() > budget.max_bytes {
            let Some(i) = self.results.iter().position(|k| !k.labelled && k.label != label) else {
                self.results.pop_back();
                self.session.remove(label);
                return Err(format!(
                    "the session would hold {} results and {} MiB, over its budget of {} results and {} MiB (--max-session-results, --max-session-mib); labelled results are kept, so end the session or reuse labels",
                    self.results.len() + 1,
                    (self.bytes() + bytes) >> 20,
                    budget.max_results,
                    budget.max_bytes >> 20
                ));
            };
            if let Some(k) = self.results.remove(i) {
                self.session.remove(&k.label);
            }
        }
        Ok(())
    }
}
