//! Tool names as OpenAI function names: sanitising, and qualifying names that collide.

use std::collections::HashSet;

use super::McpTool;
use crate::catalog::schema::Fix;

pub use crate::tools::names::sanitise_name;

/// Sets every tool's OpenAI name (see the parent module): the sanitised name (already in
/// `function`) when no earlier tool holds it (case-insensitively), else `<server>__<name>`
/// (sanitised; `_2`, `_3`, … if that still collides) with a `name_qualified` fix. `tools` are in
/// input order and distinct in content (merged before), so a name is qualified only when two
/// different tools collide, and a tool's name depends only on the tools before it.
pub(super) fn assign_functions(tools: &mut [McpTool]) {
    let mut used: HashSet<String> = HashSet::new();
    for t in tools.iter_mut() {
        if used.insert(t.function.to_lowercase()) {
            continue;
        }
        let base = crate::tools::names::qualified_name(&t.server, &t.function);
        let mut name = base.clone();
        let mut n = 2;
        while !used.insert(name.to_lowercase()) {
            name = sanitise_name(&format!("{base}_{n}"));
            n += 1;
        }
        t.fixes.push(Fix {
            kind: "name_qualified".into(),
            pointer: "name".into(),
            detail: format!("{:?} is held by an earlier, different tool → {name:?}", t.function),
        });
        t.function = name;
    }
}
