//! What every report page shares: the stylesheet and helper script (`templates/report/`,
//! inlined), the page template's rendering (minijinja, HTML auto-escaping), and the two ways
//! data reaches a page opened from `file://` (where `fetch()` is refused): a sibling script
//! assigning a global ([`js_data`]), or a JSON block inside the page ([`inline_json`]).

use anyhow::{Context, Result};
use serde::Serialize;

/// The stylesheet of every page.
pub const CSS: &str = include_str!("../../../templates/report/page.css");
/// The helpers every page's script uses (`TF.el`, `TF.browser`, the diffs).
pub const COMMON_JS: &str = include_str!("../../../templates/report/common.js");

/// Renders the page template `source` (an HTML template: `{{ … }}` values are HTML-escaped,
/// `|safe` ones inserted as they are) with `ctx`. `name` ends in `.html` (minijinja picks the
/// escaping from it) and names the template in errors.
pub fn render(name: &str, source: &str, ctx: impl Serialize) -> Result<String> {
    let mut env = minijinja::Environment::new();
    env.add_template(name, source)
        .with_context(|| format!("page template {name}"))?;
    let mut out = env
        .get_template(name)?
        .render(minijinja::value::Serde(ctx))
        .with_context(|| format!("rendering {name}"))?;
    if !out.ends_with('\n') {
        out.push('\n');
    }
    Ok(out)
}

/// A script file setting `window.<var>` to `v`: `window.<var> = JSON.parse('<v as JSON>');`
/// (V8 parses a large JSON string faster than the same object literal; [`js_json`]).
pub fn js_data(var: &str, v: &serde_json::Value) -> Vec<u8> {
    format!("window.{var} = JSON.parse('{}');\n", js_json(v)).into_bytes()
}

/// A script file handing chunk `n` to the page: `window.TF_CHUNK(n, JSON.parse('<v>'));`.
pub fn js_chunk(n: usize, v: &serde_json::Value) -> Vec<u8> {
    format!("window.TF_CHUNK({n}, JSON.parse('{}'));\n", js_json(v)).into_bytes()
}

/// `v` as compact, deterministic JSON (`v`'s own key order) inside a single-quoted JS string:
/// `\` and `'` escaped, U+2028/U+2029 JSON-escaped so older parsers read them too.
fn js_json(v: &serde_json::Value) -> String {
    let json = serde_json::to_string(v).expect("serialisable");
    let mut out = String::with_capacity(json.len() + json.len() / 16);
    for ch in json.chars() {
        match ch {
            '\\' => out.push_str("\\\\"),
            '\'' => out.push_str("\\'"),
            '\u{2028}' => out.push_str("\\\\u2028"),
            '\u{2029}' => out.push_str("\\\\u2029"),
            c => out.push(c),
        }
    }
    out
}

/// `v` as JSON that can sit inside `<script type="application/json">`: `<`, `>` and `&` written
/// as `\u003c`, `\u003e`, `\u0026` (they only occur inside JSON strings, where the escapes
/// mean the same characters), so no `</script>` can end the block early.
pub fn inline_json(v: &serde_json::Value) -> String {
    let json = serde_json::to_string(v).expect("serialisable");
    json.replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn js_data_round_trips_quotes_backslashes_and_line_separators() {
        let v = serde_json::json!({"q": "it's a \\ \"test\" \u{2028} </script>"});
        let text = String::from_utf8(js_data("X", &v)).unwrap();
        let inner = text
            .strip_prefix("window.X = JSON.parse('")
            .and_then(|t| t.strip_suffix("');\n"))
            .unwrap();
        // Undo the JS string escapes, then the JSON must read back as `v`.
        let mut json = String::new();
        let mut chars = inner.chars();
        while let Some(c) = chars.next() {
            if c == '\\' {
                json.push(chars.next().unwrap());
            } else {
                assert_ne!(c, '\'', "an unescaped quote ends the JS string");
                json.push(c);
            }
        }
        assert_eq!(serde_json::from_str::<serde_json::Value>(&json).unwrap(), v);
    }

    #[test]
    fn inline_json_cannot_close_its_script_block() {
        let v = serde_json::json!({"q": "</script><b>&"});
        let text = inline_json(&v);
        assert!(!text.contains("</"));
        assert_eq!(serde_json::from_str::<serde_json::Value>(&text).unwrap(), v);
    }

    #[test]
    fn page_values_are_html_escaped() {
        let html = render("t.html", "<h1>{{ name }}</h1>", serde_json::json!({"name": "<a&b>"})).unwrap();
        assert_eq!(html, "<h1>&lt;a&amp;b&gt;</h1>\n");
    }
}
