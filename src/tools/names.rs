//! Tool names as OpenAI function names (`^[a-zA-Z0-9_-]{1,64}$`, the function-calling APIs'
//! rule): sanitising any text into one, and the one form of a name qualified by its scope.
//!
//! A name offered by several scopes (databases, datasets, MCP servers, retrieval documents) is
//! written `<scope>__<name>` everywhere toolforge qualifies one: `serve --open-world`'s listing,
//! the retrieval corpus ids (and so the open-world eval), the merged catalog of `toolforge
//! retrieval index`, MCP catalogs. `@` or `.` would be shorter but are not allowed in a
//! function name, and a qualified name is something a model calls.

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

/// `name` qualified by `scope` (a database id, dataset, server or digest): `<scope>__<name>`,
/// sanitised ([`sanitise_name`]), so the result is always a valid function name.
pub fn qualified_name(scope: &str, name: &str) -> String {
    sanitise_name(&format!("{scope}__{name}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qualified_names_are_valid_function_names_in_every_scope_spelling() {
        let re = |s: &str| {
            !s.is_empty() && s.len() <= 64 && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        };
        for (scope, name) in [
            ("concert_singer", "get_singer_names"),
            ("slot-spider.v2", "filter_data"),
            ("a9f03c1e", "search"),
            ("server with spaces/and@signs", "tool.name"),
            (&"long_database_name_".repeat(5), "get_everything_in_the_world"),
        ] {
            let q = qualified_name(scope, name);
            assert!(re(&q), "{q:?} from {scope:?} / {name:?}");
        }
        assert_eq!(qualified_name("car_1", "get_cars"), "car_1__get_cars");
        assert_ne!(
            qualified_name(&"d".repeat(70), "a"),
            qualified_name(&"d".repeat(70), "b")
        );
    }
}
