//! Unit tests of the MCP ingest (shapes, rejections, content merge, names).

use super::*;

fn ingest_json(files: &[(&str, &str)]) -> Ingested {
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in files {
        std::fs::write(dir.path().join(name), text).unwrap();
    }
    ingest(&inputs(dir.path()), dir.path()).unwrap()
}

#[test]
fn smithery_and_tools_list_shapes() {
    let smithery = r#"{"qualifiedName": "@acme/weather", "displayName": "Weather", "description": "d",
        "tools": [{"name": "get.forecast", "description": "f", "inputSchema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city", "city"]}}]}"#;
    let list = r#"{"jsonrpc": "2.0", "id": 1, "result": {"tools": [{"name": "echo", "inputSchema": {"properties": {"text": {"type": "string"}}}}]}}"#;
    let ing = ingest_json(&[("a.json", smithery), ("echo-server.json", list)]);
    assert_eq!(
        ing.servers
            .iter()
            .map(|s| (s.name.as_str(), s.shape.as_str()))
            .collect::<Vec<_>>(),
        [("@acme/weather", "smithery"), ("echo-server", "tools_list")]
    );
    assert_eq!(ing.tools.len(), 2);
    let w = &ing.tools[0];
    assert_eq!((w.function.as_str(), w.name.as_str()), ("get_forecast", "get.forecast"));
    assert_eq!(
        w.fixes.iter().map(|f| f.kind.as_str()).collect::<Vec<_>>(),
        ["name_sanitised", "duplicate_required"]
    );
    assert_eq!(ing.tools[1].fixes[0].kind, "top_type_object_added");
    let mcp = mcp_json(&ing);
    assert_eq!(mcp["servers"][1]["tools"][0]["_meta"]["toolforge/function"], "echo");
}

#[test]
fn jsonl_and_servers_wrapper_files() {
    let tool = r#"{"name": "t", "inputSchema": {"type": "object", "properties": {}}}"#;
    let lines = format!("{{\"qualifiedName\": \"a/b\", \"tools\": [{tool}]}}\n\nnot json\n");
    let wrapper = format!("{{\"servers\": [{{\"name\": \"w\", \"tools\": [{tool}]}}]}}");
    let ing = ingest_json(&[("s.jsonl", &lines), ("w.json", &wrapper)]);
    assert_eq!(
        ing.servers.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(),
        ["a/b", "w"]
    );
    assert_eq!(
        (ing.bad_records[0].file.as_str(), ing.bad_records[0].record),
        ("s.jsonl", 2)
    );
    assert!(ing.bad_records[0].message.contains("not valid JSON"));
}

#[test]
fn malformed_record_is_reported_and_skipped() {
    let text = r#"[{"name": "ok", "tools": [{"name": "t", "inputSchema": {"type": "object", "properties": {}}}]}, 42, {"name": "bad", "tools": 7}]"#;
    let ing = ingest_json(&[("servers.json", text)]);
    assert_eq!(ing.tools.len(), 1);
    let b: Vec<_> = ing.bad_records.iter().map(|b| (b.file.as_str(), b.record)).collect();
    assert_eq!(b, [("servers.json", 1), ("servers.json", 2)]);
}

#[test]
fn rejections_dedup_and_collisions() {
    let s = |name: &str, tools: &str| format!(r#"{{"name": "{name}", "tools": {tools}}}"#);
    let same = r#"{"name": "read", "inputSchema": {"type": "object", "properties": {"p": {"type": "string"}}}}"#;
    let other = r#"{"name": "read", "inputSchema": {"type": "object", "properties": {"q": {"type": "string"}}}}"#;
    let text = format!(
        "[{}, {}, {}]",
        s(
            "A",
            &format!(
                "[{same}, {{\"inputSchema\": {{}}}}, {{\"name\": \"s\", \"inputSchema\": {{\"type\": \"string\"}}}}]"
            )
        ),
        s(
            "B",
            &format!(
                "[{same}, {{\"name\": \"bad\", \"inputSchema\": {{\"type\": \"object\", \"properties\": {{\"x\": {{\"type\": \"strng\"}}}}}}}}]"
            )
        ),
        s("C", &format!("[{other}, {{\"name\": \"n\"}}]"))
    );
    let ing = ingest_json(&[("x.json", &text)]);
    assert_eq!(ing.tools_in, 7);
    let reasons: Vec<_> = ing.rejected.iter().map(|r| r.reason.as_str()).collect();
    assert_eq!(
        reasons,
        [
            "missing_name",
            "top_level_not_object",
            "invalid_schema",
            "missing_input_schema"
        ]
    );
    // same name, schema and description on A and B: one tool, B an alias of it; C's `read`
    // differs, so it is the one qualified (the earlier tool keeps the name)
    assert_eq!(ing.duplicates.len(), 1);
    assert_eq!(ing.tools[0].aliases, ["B"]);
    let names: Vec<_> = ing.tools.iter().map(|t| t.function.as_str()).collect();
    assert_eq!(names, ["read", "C__read"]);
}

/// Issue 15: dedup ignored case and description, then reported the wrong description
/// (Smithery dump: supermemory `whoAmI` listed as `whoami` with switchboard's description;
/// alphavantage's second `company_dividends`, described as "company splits", merged away).
#[test]
fn dedup_is_exact_and_each_tool_keeps_its_description() {
    let schema = r#"{"type": "object", "properties": {"symbol": {"type": "string"}}}"#;
    let t =
        |name: &str, desc: &str| format!(r#"{{"name": "{name}", "description": "{desc}", "inputSchema": {schema}}}"#);
    let smithery =
        |q: &str, tools: &[String]| format!(r#"{{"qualifiedName": "{q}", "tools": [{}]}}"#, tools.join(", "));
    let dump = format!(
        "[{}, {}, {}]",
        smithery("supermemory", &[t("whoAmI", "Get the current supermemory user")]),
        smithery("switchboard", &[t("whoami", "Show the switchboard account")]),
        smithery(
            "alphavantage",
            &[
                t("company_dividends", "company dividends"),
                t("company_dividends", "company splits")
            ]
        ),
    );
    // the same alphavantage server again in a second dump: an exact duplicate, merged
    let again = format!(
        r#"{{"servers": [{}]}}"#,
        smithery("alphavantage", &[t("company_dividends", "company dividends")])
    );
    let ing = ingest_json(&[("a.json", &dump), ("b.json", &again)]);
    let got: Vec<_> = ing
        .tools
        .iter()
        .map(|t| {
            (
                t.server.as_str(),
                t.name.as_str(),
                t.function.as_str(),
                t.description.as_str(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            ("supermemory", "whoAmI", "whoAmI", "Get the current supermemory user"),
            (
                "switchboard",
                "whoami",
                "switchboard__whoami",
                "Show the switchboard account"
            ),
            (
                "alphavantage",
                "company_dividends",
                "company_dividends",
                "company dividends"
            ),
            (
                "alphavantage",
                "company_dividends",
                "alphavantage__company_dividends",
                "company splits"
            ),
        ]
    );
    assert_eq!(
        ing.duplicates,
        [Duplicate {
            server: "alphavantage".into(),
            kept_server: "alphavantage".into(),
            tool: "company_dividends".into(),
            kept_from: "a.json#2".into(),
            duplicate_from: "b.json#0".into(),
        }]
    );
    // a server listed twice is no alias of itself
    assert!(ing.tools.iter().all(|t| t.aliases.is_empty()));
    // mcp.json lists alphavantage once, with its two distinct tools and their own descriptions
    let mcp = mcp_json(&ing);
    let servers = mcp["servers"].as_array().unwrap();
    assert_eq!(servers.len(), 3);
    let alpha: Vec<_> = servers[2]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["description"].as_str().unwrap())
        .collect();
    assert_eq!(alpha, ["company dividends", "company splits"]);
}

/// Issue 30 item 6: ToolGym's Smithery dump lists copies of one server under several names
/// (3,385 / 9,974 emitted tools byte-identical to a tool on another server). A tool with the
/// same name, schema and description on another server is merged, that server recorded as an
/// alias; the copies then force no qualification of the name.
#[test]
fn content_identical_tools_on_copied_servers_merge_with_aliases() {
    let t = |d: &str| {
        format!(
            r#"{{"name": "get_pull_request_comments", "description": "{d}", "inputSchema": {{"type": "object", "properties": {{"pull_number": {{"type": "number"}}}}}}}}"#
        )
    };
    let server = |q: &str, d: &str| format!(r#"{{"qualifiedName": "{q}", "tools": [{}]}}"#, t(d));
    let ing = ingest_json(&[
        ("a.json", &server("@x/github", "Get review comments")),
        ("b.json", &server("@y/github-mcp", "Get review comments")),
        ("c.json", &server("@z/github", "Get review comments")),
        ("d.json", &server("@w/gitea", "Get comments of a Gitea pull request")),
    ]);
    let got: Vec<_> = ing
        .tools
        .iter()
        .map(|t| (t.server.as_str(), t.function.as_str(), t.aliases.clone()))
        .collect();
    assert_eq!(
        got,
        [
            (
                "@x/github",
                "get_pull_request_comments",
                vec!["@y/github-mcp".to_string(), "@z/github".to_string()]
            ),
            ("@w/gitea", "_w_gitea__get_pull_request_comments", vec![]),
        ]
    );
    assert_eq!(
        ing.duplicates
            .iter()
            .map(|d| d.kept_server.as_str())
            .collect::<Vec<_>>(),
        ["@x/github", "@x/github"]
    );
    let mcp = mcp_json(&ing);
    assert_eq!(
        mcp["servers"][0]["tools"][0]["_meta"]["toolforge/aliases"],
        json!(["@y/github-mcp", "@z/github"])
    );
    assert_eq!(mcp["servers"][1]["tools"], json!([]), "a copy lists no tool of its own");
}

/// Issue 30 item 6: adding a dump renamed 111 / 527 LiveMCPBench functions (every tool whose
/// name another server also used was qualified). A tool's name depends only on the tools
/// before it: the names of dump A are the same with dump B (sorting after it) added.
#[test]
fn names_of_a_dump_unchanged_when_a_later_dump_is_added() {
    let s = r#"{"type": "object", "properties": {"path": {"type": "string"}}}"#;
    let a = format!(
        r#"[{{"name": "fs", "tools": [{{"name": "read_file", "description": "Read a file", "inputSchema": {s}}}, {{"name": "whoami", "description": "Current user", "inputSchema": {s}}}]}}, {{"name": "desk", "tools": [{{"name": "read_file", "description": "Read a file from the desktop", "inputSchema": {s}}}]}}]"#
    );
    let b = format!(
        r#"{{"qualifiedName": "@b/files", "tools": [{{"name": "read_file", "description": "Read a remote file", "inputSchema": {s}}}, {{"name": "whoAmI", "description": "Who am I", "inputSchema": {s}}}, {{"name": "read_file", "description": "Read a file", "inputSchema": {s}}}]}}"#
    );
    let names = |ing: &Ingested| -> Vec<(String, String, String)> {
        ing.tools
            .iter()
            .map(|t| (t.server.clone(), t.description.clone(), t.function.clone()))
            .collect()
    };
    let alone = names(&ingest_json(&[("a.json", &a)]));
    let both = ingest_json(&[("a.json", &a), ("b.json", &b)]);
    assert_eq!(names(&both)[..alone.len()], alone[..]);
    assert_eq!(
        names(&both)[alone.len()..],
        [
            (
                "@b/files".into(),
                "Read a remote file".into(),
                "_b_files__read_file".into()
            ),
            ("@b/files".into(), "Who am I".into(), "_b_files__whoAmI".into()),
        ]
    );
    assert_eq!(both.tools[0].aliases, ["@b/files"]);
}

#[test]
fn long_names_are_cut_with_a_hash() {
    let long = "x".repeat(80);
    let s = sanitise_name(&long);
    assert_eq!(s.len(), 64);
    assert_ne!(s, sanitise_name(&"x".repeat(81)));
}
