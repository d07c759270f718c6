//! The MCP server: an rmcp client lists the tools of a built dataset over stdio
//! (`toolforge serve DIR --mcp`) and calls them against the real data; a raw JSON-RPC client does
//! the same over streamable HTTP at `/mcp` of the HTTP server.

use std::path::{Path, PathBuf};

use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::{ConfigureCommandExt, TokioChildProcess};
use serde_json::{Value, json};
use toolforge::pipeline::build_and_emit;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn dbs() -> PathBuf {
    root().join("../shared/corpora/spider/database")
}

fn build(recipe: &str, tmp: &Path) -> PathBuf {
    let out = tmp.join("out");
    build_and_emit(
        &root().join(format!("recipes/{recipe}.toml")),
        Some(&out),
        Some(&tmp.join("store")),
        false,
    )
    .unwrap();
    out.join(recipe)
}

fn args(v: Value) -> serde_json::Map<String, Value> {
    v.as_object().unwrap().clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_mcp_client_lists_and_calls_slot_tools() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = build("slot-spider", tmp.path());
    let transport = TokioChildProcess::new(tokio::process::Command::new(env!("CARGO_BIN_EXE_toolforge")).configure(
        |cmd| {
            cmd.arg("serve").arg(&dir).arg("--mcp").arg("--databases").arg(dbs());
        },
    ))
    .unwrap();
    let client = ().serve(transport).await.unwrap();
    let tools = client.list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    for n in [
        "create_session",
        "filter_data",
        "retrieve_data",
        "aggregate_data",
        "sort_data",
    ] {
        assert!(names.contains(&n), "{names:?}");
    }
    // "How many singers are there?" style: count the rows of concert_singer's singer table.
    let session = client
        .call_tool(CallToolRequestParams::new("create_session").with_arguments(args(json!({"id": "slot-spider/3"}))))
        .await
        .unwrap();
    let session = session.structured_content.unwrap();
    let sid = session["session_id"].as_str().unwrap();
    let sorted = client
        .call_tool(CallToolRequestParams::new("sort_data").with_arguments(args(json!({
            "session_id": sid, "label": "SORTED_DF",
            "data_source": "$starting_table_var$", "key_name": "singer_Age", "ascending": false
        }))))
        .await
        .unwrap();
    assert_eq!(sorted.is_error, Some(false));
    let names = client
        .call_tool(CallToolRequestParams::new("retrieve_data").with_arguments(args(json!({
            "session_id": sid, "data_source": "$SORTED_DF$", "key_name": "singer_Name"
        }))))
        .await
        .unwrap();
    let out = names.structured_content.unwrap();
    // The gold SQL: SELECT name FROM singer ORDER BY age DESC, on the real database.
    let conn = rusqlite::Connection::open_with_flags(
        dbs().join("concert_singer/concert_singer.sqlite"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .unwrap();
    let mut stmt = conn.prepare("SELECT name FROM singer ORDER BY age DESC").unwrap();
    let want: Vec<String> = stmt.query_map([], |r| r.get(0)).unwrap().map(Result::unwrap).collect();
    assert_eq!(out["output"], json!(want));
    // A bad argument is a tool error that says why, not a protocol failure.
    let bad = client
        .call_tool(CallToolRequestParams::new("sort_data").with_arguments(args(json!({
            "session_id": sid, "data_source": "$starting_table_var$", "key_name": "no_such_column"
        }))))
        .await
        .unwrap();
    assert_eq!(bad.is_error, Some(true));
    // An unknown aggregation_type names the allowed values (not "`median` needs a key_name").
    let median = client
        .call_tool(CallToolRequestParams::new("aggregate_data").with_arguments(args(json!({
            "session_id": sid, "data_source": "$starting_table_var$", "aggregation_type": "median"
        }))))
        .await
        .unwrap();
    assert_eq!(median.is_error, Some(true));
    let text = serde_json::to_string(&median.content).unwrap();
    assert!(
        text.contains("unknown aggregation_type") && text.contains("`mean`"),
        "{text}"
    );
    client.cancel().await.unwrap();
}

/// Posts one JSON-RPC message to `/mcp`; returns the session header and the JSON payload (from
/// an SSE `data:` line or a JSON body), if any.
fn rpc(agent: &ureq::Agent, url: &str, session: Option<&str>, body: Value) -> (Option<String>, Option<Value>) {
    let mut req = agent
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json");
    if let Some(s) = session {
        req = req.header("mcp-session-id", s);
    }
    let mut resp = req.send(body.to_string()).unwrap();
    assert!(resp.status().is_success(), "{}", resp.status());
    let sid = resp
        .headers()
        .get("mcp-session-id")
        .map(|v| v.to_str().unwrap().to_string());
    let text = resp.body_mut().read_to_string().unwrap();
    let payload = text
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(str::trim)
        .find(|d| d.starts_with('{'))
        .map(|d| serde_json::from_str(d).unwrap())
        .or_else(|| serde_json::from_str(&text).ok());
    (sid, payload)
}

#[test]
fn streamable_http_mcp_rest_result_is_a_structured_object() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = build("rest-spider", tmp.path());
    let toolkit = toolforge::serve::Toolkit::load(&dir, Some(&dbs())).unwrap();
    let addr = toolforge::serve::spawn(toolkit, toolforge::serve::ServeConfig::default()).unwrap();
    let url = format!("http://{addr}/mcp");
    let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
    let (sid, init) = rpc(
        &agent,
        &url,
        None,
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}}),
    );
    assert_eq!(init.unwrap()["result"]["serverInfo"]["name"], "toolforge");
    let sid = sid.expect("mcp-session-id");
    rpc(
        &agent,
        &url,
        Some(&sid),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    );
    let (_, list) = rpc(
        &agent,
        &url,
        Some(&sid),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
    );
    let tools = list.unwrap()["result"]["tools"].as_array().unwrap().clone();
    // 456 endpoints since issue 27 (REST drops empty, degenerate and tied answers as SLOT does;
    // 538 before).
    assert!(tools.len() >= 450, "{}", tools.len());
    let (_, call) = rpc(
        &agent,
        &url,
        Some(&sid),
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
        "name": "get_ship_count_by_disposition_of_ship", "arguments": {"disposition_of_ship": "Captured"}}}),
    );
    let result = &call.unwrap()["result"];
    // MCP: structuredContent is an object (the SDK clients reject an array), matching outputSchema.
    assert_eq!(result["structuredContent"], json!({"result": [[4]]}), "{result}");
    assert_eq!(result["content"][0]["text"], json!({"result": [[4]]}).to_string());
    let listed = tools
        .iter()
        .find(|t| t["name"] == "get_ship_count_by_disposition_of_ship")
        .unwrap();
    assert_eq!(listed["outputSchema"]["type"], "object");
    let (_, bad) = rpc(
        &agent,
        &url,
        Some(&sid),
        json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {
        "name": "get_ship_count_by_disposition_of_ship", "arguments": {}}}),
    );
    let bad = &bad.unwrap()["result"];
    assert_eq!(bad["isError"], true);
    assert!(bad["content"][0]["text"].as_str().unwrap().contains("missing"), "{bad}");
}
