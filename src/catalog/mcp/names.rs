//! Tool names as OpenAI function names: sanitising, and qualifying names that collide.

use std::collections::BTreeMap;

use super::McpTool;
use crate::catalog::schema::Fix;

/// Sanitises a tool name to `^[a-zA-Z0-9_-]{1,64}$`: other characters become `_`; names longer
/// than 64 keep 55 characters plus `_` and 8 hex digits of their blake3 hash (so distinct long
/// names stay distinct). An empty name stays empty (the caller rejects it).
pub fn sanitise_name(name: &str) -> String {
    let s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.len() <= 64 {
        return s;
    }
    let h = blake3::hash(name.as_bytes()).to_hex();
    format!("{}_{}", &s[..55], &h[..8])
}

/// Gives every tool whose sanitised name is shared with a different tool the name
/// `<server>__<name>` (sanitised; `_2`, `_3`, … if that still collides), recording a
/// `name_qualified` fix. Unique names are kept as they are.
pub(super) fn qualify_colliding_names(tools: &mut [McpTool]) {
    let mut by_name: BTreeMap<String, usize> = BTreeMap::new();
    for t in tools.iter() {
        *by_name.entry(t.function.to_lowercase()).or_insert(0) += 1;
    }
    let mut used: std::collections::HashSet<String> = tools
        .iter()
        .filter(|t| by_name[&t.function.to_lowercase()] == 1)
        .map(|t| t.function.to_lowercase())
        .collect();
    for t in tools.iter_mut() {
        if by_name[&t.function.to_lowercase()] == 1 {
            continue;
        }
        let base = sanitise_name(&format!("{}__{}", t.server, t.function));
        let mut name = base.clone();
        let mut n = 2;
        while !used.insert(name.to_lowercase()) {
            name = sanitise_name(&format!("{base}_{n}"));
            n += 1;
        }
        t.fixes.push(Fix {
            kind: "name_qualified".into(),
            pointer: "name".into(),
            detail: format!("{:?} is shared by different tools → {name:?}", t.function),
        });
        t.function = name;
    }
}
