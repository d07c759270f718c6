//! `endpoint_evolution`: the function gets a new version, `f` → `f_v2`; a REST endpoint's path
//! `/v1/…` → `/v2/…` too (and its description, which names the path).
//!
//! Migration of a gold call: its name becomes `f_v2`; always loud (the old name no longer
//! exists). Un-migration: the name goes back to `f`.

use super::Change;
use crate::tools::ToolSpec;

/// The change for `spec` (always applicable); `path`: a REST endpoint's A_old path.
pub(super) fn propose(spec: &ToolSpec, path: Option<&str>) -> Vec<Change> {
    vec![Change::EndpointEvolution {
        name_old: spec.name.clone(),
        name_new: format!("{}_v2", spec.name),
        path_old: path.map(String::from),
        path_new: path.map(|p| p.replacen("/v1/", "/v2/", 1)),
    }]
}

/// A_new: the new name; the path replaced in the description.
pub(super) fn apply(new: &mut ToolSpec, name_new: &str, path_old: &Option<String>, path_new: &Option<String>) {
    new.name = name_new.to_string();
    if let (Some(a), Some(b)) = (path_old, path_new) {
        new.description = new.description.replace(a.as_str(), b);
    }
}
