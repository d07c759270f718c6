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
//! - **Inputs first**: the tools whose output is their inputs put together (`concatenate_*`,
//!   `combine_*`) are refused before running when their inputs together (each reference counted
//!   as often as it is named) exceed `max_bytes`, so a chain of self-concatenations cannot build
//!   a table past the budget. Every other tool's output is at most its input's size.

use std::collections::VecDeque;

use serde_json::Value as Json;

use crate::tools::Call;
use crate::tools::executor::{Session, Value};

/// Limits of one session's results.
#[derive(Debug, Clone, Copy)]
pub struct SessionBudget {
    /// Most results kept (setup outputs not counted).
    pub max_results: usize,
    /// Most bytes the kept results hold.
    pub max_bytes: usize,
}

/// Bytes a tool output holds: its Arrow arrays' memory (a grouped table: its table plus 4 bytes
/// per grouped row index), 32 for a single value.
pub fn value_bytes(v: &Value) -> usize {
    match v {
        Value::Table(t) => t.get_array_memory_size(),
        Value::Column(a) => a.get_array_memory_size(),
        Value::Grouped(g) => g.table.get_array_memory_size() + g.groups.iter().map(|x| 4 * x.len() + 24).sum::<usize>(),
        Value::Scalar(_) => 32,
    }
}

/// One kept result.
struct Kept {
    label: String,
    /// The client named it (never dropped).
    labelled: bool,
    bytes: usize,
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

    /// Refuses `call` before it runs when it puts its inputs together (`concatenate_*`,
    /// `combine_*`) and they exceed the budget's bytes (module docs).
    pub(crate) fn check_inputs(&self, call: &Call, budget: SessionBudget) -> Result<(), String> {
        if !(call.name.starts_with("concatenate") || call.name.starts_with("combine")) {
            return Ok(());
        }
        let mut labels = Vec::new();
        for v in call.arguments.values() {
            match v {
                Json::Array(items) => labels.extend(items.iter().filter_map(crate::tools::as_label_ref)),
                other => labels.extend(crate::tools::as_label_ref(other)),
            }
        }
        let bytes: usize = labels.iter().filter_map(|l| self.session.get(l)).map(value_bytes).sum();
        if bytes > budget.max_bytes {
            return Err(format!(
                "`{}` would put together {} MiB of inputs, over the session's budget of {} MiB (--max-session-mib)",
                call.name,
                bytes >> 20,
                budget.max_bytes >> 20
            ));
        }
        Ok(())
    }

    /// Accounts the output just stored under `label` (`labelled`: named by the client), then
    /// drops the oldest unlabelled results until the session fits `budget`; when it cannot, the
    /// new output is removed and the call refused (module docs).
    pub(crate) fn admit(&mut self, label: &str, labelled: bool, budget: SessionBudget) -> Result<(), String> {
        let bytes = self.session.get(label).map_or(0, value_bytes);
        self.results.retain(|k| k.label != label);
        self.results.push_back(Kept {
            label: label.to_string(),
            labelled,
            bytes,
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
