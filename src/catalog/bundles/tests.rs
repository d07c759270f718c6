//! Unit tests of the bundle sampler.

use super::*;
use serde_json::json;

fn tool(server: &str, name: &str, desc: &str) -> McpTool {
    McpTool {
        function: name.into(),
        name: name.into(),
        server: server.into(),
        description: desc.into(),
        input_schema: json!({"type": "object", "properties": {"query": {"type": "string"}}}),
        annotations: Value::Null,
        fixes: vec![],
        aliases: vec![],
    }
}

#[test]
fn tokens_split_names_and_cjk() {
    let t = tool("s", "getWeather_forecast", "搜索 the city");
    let toks = tokens(&t);
    assert!(
        toks.starts_with(&[
            "get".into(),
            "weather".into(),
            "forecast".into(),
            "搜".into(),
            "索".into(),
            "city".into()
        ]),
        "{toks:?}"
    );
    assert!(toks.contains(&"p:query".to_string()));
}

#[test]
fn bundles_are_deterministic_spread_and_related() {
    let cat = vec![
        tool("web", "web_search", "search the web for pages"),
        tool("fetch", "fetch_page", "fetch a web page"),
        tool("maps", "geocode", "find coordinates of a place"),
        tool("maps", "route", "driving route between places"),
        tool("news", "news_search", "search news articles on the web"),
        tool("fin", "stock_price", "latest stock price"),
    ];
    let k = Sampling {
        seed: 7,
        bundles: 6,
        size: 3,
        min_servers: 2,
        max_seeds: 2,
        min_similarity: DEFAULT_MIN_SIMILARITY,
    };
    let (a, da) = sample(&cat, &k);
    let (b, db) = sample(&cat, &k);
    assert_eq!((a.clone(), da.clone()), (b, db));
    assert_eq!(a.len() + da.len(), 6);
    for bundle in &a {
        assert_eq!(bundle.members.len(), 3);
        assert_eq!(bundle.members[0].role, "seed");
        let servers: BTreeSet<_> = bundle.members.iter().map(|m| &cat[m.tool].server).collect();
        assert!(servers.len() >= 2);
    }
    // related tools share tokens: web_search (web) and news_search (news) meet in a bundle
    let both = |x: usize, y: usize| {
        a.iter()
            .any(|b| b.members.iter().any(|m| m.tool == x) && b.members.iter().any(|m| m.tool == y))
    };
    assert!(both(0, 4), "{a:?}");
    // the floor: every member shares vocabulary with the first seed; stock_price shares none
    let vecs = tfidf(&cat);
    for bundle in &a {
        let first = bundle.members[0].tool;
        for m in &bundle.members[1..] {
            assert!(
                cosine(&vecs[first], &vecs[m.tool]) >= DEFAULT_MIN_SIMILARITY,
                "{bundle:?}"
            );
            assert_ne!(m.tool, 5, "unrelated stock_price joined {bundle:?}");
        }
    }
    assert!(da.iter().any(|d| d.1 == "too_few_related"), "{da:?}");
    // a different seed gives different bundles
    let (c, _) = sample(&cat, &Sampling { seed: 8, ..k });
    assert_ne!(a, c);
}

/// Issue 30 item 6: on ToolGym's dump 92 / 199 bundles held copies of one tool from
/// several servers, and bundles mixed in tools matched only on generic tokens (`get`, `list`,
/// `query`). A member shares an entity token with the first seed and differs from every
/// other member in name or schema.
#[test]
fn members_share_an_entity_token_and_are_distinct_in_content() {
    let cat = vec![
        tool(
            "gh1",
            "get_pull_request_comments",
            "Get comments on a GitHub pull request",
        ),
        tool(
            "gh2",
            "get_pull_request_comments",
            "Get the comments of a GitHub pull request.",
        ),
        tool("gl", "list_merge_request_notes", "List notes on a merge request"),
        tool("gh3", "get_issue", "Get a GitHub issue"),
        tool("wx", "get_weather", "Get the weather for a city query"),
        tool("db", "list_tables", "List the tables of a database query"),
    ];
    let k = Sampling {
        seed: 3,
        bundles: 12,
        size: 2,
        min_servers: 2,
        max_seeds: 1,
        min_similarity: 0.0,
    };
    let (drawn, dropped) = sample(&cat, &k);
    assert_eq!(drawn.len() + dropped.len(), 12);
    let index = Index::new(&cat);
    for b in &drawn {
        let ids: BTreeSet<usize> = b.members.iter().map(|m| m.tool).collect();
        assert!(!(ids.contains(&0) && ids.contains(&1)), "two copies of one tool: {b:?}");
        let first = b.members[0].tool;
        for m in &b.members[1..] {
            assert!(!m.shared.is_empty(), "{b:?}");
            assert!(m.shared.iter().all(|t| !GENERIC.contains(&t.as_str())), "{b:?}");
            assert!(index.shares(first, m.tool));
        }
        assert!(!ids.contains(&4) && !ids.contains(&5), "generic-only match: {b:?}");
        assert!(!ids.contains(&2), "`request` is generic: {b:?}");
    }
    // the GitHub tools meet, on the entity token `git` (`GitHub` splits at its camelCase)
    assert!(
        drawn
            .iter()
            .any(|b| b.members.iter().any(|m| m.shared.contains(&"git".to_string()))),
        "{drawn:?}"
    );
}

#[test]
fn too_few_servers_is_a_drop() {
    let cat = vec![
        tool("only", "paper_search", "Search a paper"),
        tool("only", "paper_fetch", "Fetch a paper"),
    ];
    let (a, d) = sample(
        &cat,
        &Sampling {
            seed: 0,
            bundles: 1,
            size: 2,
            min_servers: 2,
            max_seeds: 1,
            min_similarity: 0.0,
        },
    );
    assert!(a.is_empty());
    assert_eq!(d[0].1, "too_few_servers");
}
