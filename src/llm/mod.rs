//! LLM plumbing: chat completions against any OpenAI-compatible endpoint (`async-openai`), with
//! bounded concurrency, a request-rate limit, retries with exponential backoff, and every
//! request/response pair stored in the content-addressed [`Store`], so that a rebuild is offline
//! and byte-identical.
//!
//! Configuration ([`LlmConfig`], the recipe's `[variants.llm]` table; each key falls back to the
//! environment when absent from the recipe):
//!
//! | key                   | env fallback           | default                                    |
//! |-----------------------|------------------------|--------------------------------------------|
//! | `base_url`            | `OPENAI_BASE_URL`      | none: LLM variants are skipped             |
//! | `model`               | `TOOLFORGE_LLM_MODEL`  | none: an error line when `base_url` is set |
//! | `api_key_env`         | —                      | `OPENAI_API_KEY` (the variable holding the key; keys never go in recipes) |
//! | `temperature`         | —                      | 0.7                                        |
//! | `seed`                | —                      | 0 (candidate `i` uses `seed + i`)          |
//! | `max_tokens`          | —                      | 96                                         |
//! | `max_concurrency`     | —                      | 4 requests in flight                       |
//! | `requests_per_second` | —                      | unlimited; a shard I/N uses 1/N of it      |
//! | `max_attempts`        | —                      | 5 (first try + 4 retries)                  |
//! | `initial_backoff_ms`  | —                      | 500, doubled per retry, capped at 30 s     |
//! | `timeout_secs`        | —                      | 120 per attempt                            |
//! | `batch`               | `TOOLFORGE_LLM_BATCH=1`| false: one live request each ([`batch`] when true) |
//! | `batch_poll_secs`     | —                      | 30 between polls of a submitted batch      |
//! | `batch_max_wait_secs` | —                      | 90,000 (25 h) before unanswered requests fail |
//!
//! Retries: HTTP 429, 5xx, timeouts, transport errors (connection refused, reset) and malformed
//! response bodies (not JSON, not a chat completion, no message: `bad_response`) are retried up
//! to `max_attempts`; other 4xx errors are final. After a request fails for a transport
//! reason on every attempt the client is marked unreachable and later requests fail at once
//! (one clear error line rather than minutes of retries per request).
//!
//! Cache key ([`cache_key`]): stage `llm-chat`, the model, the messages and the sampling
//! parameters (temperature, seed, max_tokens). Not the base URL, the API key or the code
//! fingerprint: the same prompt to the same model is the same request wherever it is served, and
//! a code change does not force re-querying. A cached response is used without contacting the
//! endpoint. [`Counters`] tell requests made from cache hits.
//!
//! Sharded builds (`--shard I/N`): a request that misses the store is sent only by the shard its
//! key falls in ([`Store::claim`]); the others get the error `unclaimed`, and a merge names the
//! requests still missing. The rate limit is the provider's, shared by all shards: shard I/N
//! paces its requests at `requests_per_second / N` ([`config::shard_rate`], read from the
//! store's [`crate::store::Scope`]), so N shards running at once stay within the limit; the
//! first paced request prints one `llm: shard I/N paces …` line on stderr.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use async_openai::Client;
use async_openai::config::OpenAIConfig;
use async_openai::error::OpenAIError;
use async_openai::types::chat::CreateChatCompletionRequest;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

pub mod batch;
pub mod config;

pub use config::{LlmConfig, Resolved, Unavailable, resolve};

use crate::store::{StageKey, Store};

/// Version of the cached `llm-chat` entries' format.
pub const CACHE_VERSION: u32 = 1;

/// One chat message. The two tool fields are absent from the JSON when empty, so a plain text
/// message (and its cache key) is what it was before native tool calling.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Message {
    /// `system`, `user`, `assistant` or `tool`.
    pub role: String,
    /// Text (`""` for an assistant turn that only calls tools).
    pub content: String,
    /// An assistant turn's native calls, OpenAI's shape (`{"id", "type": "function",
    /// "function": {"name", "arguments"}}`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<Value>,
    /// A `tool` message: the id of the call it answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
}

impl Message {
    /// A plain text message.
    pub fn new(role: &str, content: impl Into<String>) -> Message {
        Message {
            role: role.to_string(),
            content: content.into(),
            ..Message::default()
        }
    }
}

/// Sends every (messages, seed) job, at most `max_concurrency` at a time (or, with `batch = true`,
/// as one batch: [`batch`]), and returns the results in job order (blocking).
pub fn chat_all(llm: std::sync::Arc<Llm>, jobs: Vec<(Vec<Message>, u64)>) -> Vec<Result<Completion, LlmError>> {
    if llm.resolved.cfg.batch {
        return block_on(async move { batch::chat_all(&llm, jobs).await });
    }
    block_on(async move {
        let mut set = tokio::task::JoinSet::new();
        for (j, (messages, seed)) in jobs.into_iter().enumerate() {
            let llm = llm.clone();
            set.spawn(async move { (j, llm.chat(&messages, seed).await) });
        }
        let mut out: Vec<Option<Result<Completion, LlmError>>> = (0..set.len()).map(|_| None).collect();
        while let Some(r) = set.join_next().await {
            let (j, res) = r.expect("LLM task panicked");
            out[j] = Some(res);
        }
        out.into_iter().map(|r| r.expect("every job answered")).collect()
    })
}

/// Renders a chat prompt template (minijinja) and splits it into messages at `### <role>`
/// lines; each message's text is trimmed. Panics only on a template bug (the templates are
/// compiled into the binary and covered by tests).
pub fn render_chat(name: &str, template: &str, ctx: minijinja::Value) -> Vec<Message> {
    let mut env = minijinja::Environment::new();
    env.add_template(name, template).expect("template parses");
    let text = env
        .get_template(name)
        .expect("template")
        .render(ctx)
        .expect("template renders");
    let mut out: Vec<Message> = Vec::new();
    for line in text.lines() {
        if let Some(role) = line.strip_prefix("### ") {
            out.push(Message::new(role.trim(), ""));
        } else if let Some(m) = out.last_mut() {
            if !m.content.is_empty() {
                m.content.push('\n');
            }
            m.content.push_str(line);
        }
    }
    for m in &mut out {
        m.content = m.content.trim().to_string();
    }
    out
}

/// The store key of a request: model, messages and sampling parameters (module docs).
pub fn cache_key(model: &str, messages: &[Message], temperature: f64, seed: u64, max_tokens: u32) -> StageKey {
    StageKey {
        stage: "llm-chat".into(),
        version: CACHE_VERSION,
        config: json!({
            "model": model,
            "messages": messages,
            "temperature": temperature,
            "seed": seed,
            "max_tokens": max_tokens,
        }),
        inputs: vec![],
    }
}

/// The body of a chat-completions request (the `request` of a stored entry).
pub fn request_json(model: &str, messages: &[Message], temperature: f64, seed: u64, max_tokens: u32) -> Value {
    json!({
        "model": model,
        "messages": messages,
        "temperature": temperature,
        "seed": seed,
        "max_tokens": max_tokens,
    })
}

/// Run counters (not part of any output: they differ between a first build and a rebuild).
#[derive(Debug, Default)]
pub struct Counters {
    /// HTTP requests sent (retries included).
    pub requests: AtomicUsize,
    /// Answers taken from the store.
    pub cache_hits: AtomicUsize,
    /// Retries (attempts after the first).
    pub retries: AtomicUsize,
    /// Requests that failed after all attempts.
    pub failures: AtomicUsize,
    /// Batches submitted ([`batch`]).
    pub batches: AtomicUsize,
    /// Requests sent inside those batches.
    pub batch_lines: AtomicUsize,
}

impl Counters {
    /// `(requests, cache_hits, retries, failures)`.
    pub fn snapshot(&self) -> (usize, usize, usize, usize) {
        (
            self.requests.load(Ordering::Relaxed),
            self.cache_hits.load(Ordering::Relaxed),
            self.retries.load(Ordering::Relaxed),
            self.failures.load(Ordering::Relaxed),
        )
    }
}

/// A completion: the text of the first choice, its native tool calls, and whether it came from
/// the store.
#[derive(Debug, Clone, PartialEq)]
pub struct Completion {
    /// `choices[0].message.content` (`""` when null beside tool calls).
    pub text: String,
    /// `choices[0].message.tool_calls` (OpenAI's shape), empty when there are none.
    pub tool_calls: Vec<Value>,
    /// Served from the store.
    pub cached: bool,
}

/// A failed request, after retries: a short reason code and the detail.
#[derive(Debug, Clone, PartialEq)]
pub struct LlmError {
    /// `http_<status>`, `timeout`, `transport`, `unreachable`, `bad_response`, `store`.
    pub code: String,
    /// Human detail (the last error).
    pub detail: String,
}

impl std::fmt::Display for LlmError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code, self.detail)
    }
}

/// The client: cache, concurrency bound, rate limit, retries.
pub struct Llm {
    client: Client<OpenAIConfig>,
    /// The resolved configuration.
    pub resolved: Resolved,
    store: Store,
    permits: tokio::sync::Semaphore,
    next_start: tokio::sync::Mutex<Instant>,
    /// Request starts per second of this process: the recipe's limit divided among the shards.
    rate: Option<f64>,
    rate_noted: std::sync::Once,
    unreachable: AtomicBool,
    /// Run counters.
    pub counters: Counters,
}

enum Attempt {
    Retry(LlmError),
    Final(LlmError),
}

impl Llm {
    /// A client for `resolved`, caching in `store`.
    pub fn new(resolved: Resolved, store: Store) -> Llm {
        let config = OpenAIConfig::new()
            .with_api_base(resolved.base_url.clone())
            .with_api_key(resolved.api_key.clone());
        Llm {
            // The plain reqwest transport, without async-openai's built-in retry layer: retries
            // are ours (bounded, counted, backoff from the recipe).
            client: Client::with_config(config).with_http_service(async_openai::middleware::ReqwestService::default()),
            permits: tokio::sync::Semaphore::new(resolved.cfg.max_concurrency),
            next_start: tokio::sync::Mutex::new(Instant::now()),
            rate: config::shard_rate(resolved.cfg.requests_per_second, store.scope()),
            rate_noted: std::sync::Once::new(),
            unreachable: AtomicBool::new(false),
            counters: Counters::default(),
            resolved,
            store,
        }
    }

    /// The cached answer for a request without tools, if any (no network).
    pub fn cached(&self, messages: &[Message], seed: u64) -> Option<Completion> {
        let c = &self.resolved.cfg;
        self.lookup(&cache_key(
            &self.resolved.model,
            messages,
            c.temperature,
            seed,
            c.max_tokens,
        ))
    }

    fn lookup(&self, key: &StageKey) -> Option<Completion> {
        // An entry that does not decode is removed and requested again (`Store::load`).
        let (text, tool_calls) = self.store.load(key, |b| {
            let v: Value = serde_json::from_slice(b).map_err(|e| e.to_string())?;
            response_message(&v["response"]).map_err(|e| e.to_string())
        })?;
        Some(Completion {
            text,
            tool_calls,
            cached: true,
        })
    }

    /// One chat completion: from the store, or from the endpoint (then stored).
    pub async fn chat(&self, messages: &[Message], seed: u64) -> Result<Completion, LlmError> {
        self.chat_with_tools(messages, &[], seed).await
    }

    /// One chat completion offering `tools` (OpenAI function tools, `{"type": "function",
    /// "function": {"name", "description", "parameters"}}`; none when empty): the request body
    /// and the cache key carry them, and the answer's `tool_calls` come back in the
    /// [`Completion`].
    pub async fn chat_with_tools(
        &self,
        messages: &[Message],
        tools: &[Value],
        seed: u64,
    ) -> Result<Completion, LlmError> {
        let c = &self.resolved.cfg;
        let mut key = cache_key(&self.resolved.model, messages, c.temperature, seed, c.max_tokens);
        let mut request_json = request_json(&self.resolved.model, messages, c.temperature, seed, c.max_tokens);
        if !tools.is_empty() {
            key.config["tools"] = json!(tools);
            request_json["tools"] = json!(tools);
        }
        if let Some(done) = self.lookup(&key) {
            self.counters.cache_hits.fetch_add(1, Ordering::Relaxed);
            return Ok(done);
        }
        if !self.store.claim(&key, "llm-chat") {
            return Err(unclaimed());
        }
        let request: CreateChatCompletionRequest =
            serde_json::from_value(request_json.clone()).map_err(|e| LlmError {
                code: "bad_request".into(),
                detail: e.to_string(),
            })?;
        let _permit = self.permits.acquire().await.expect("semaphore open");
        let mut attempt = 0u32;
        loop {
            attempt += 1;
            if self.unreachable.load(Ordering::Relaxed) {
                self.counters.failures.fetch_add(1, Ordering::Relaxed);
                return Err(LlmError {
                    code: "unreachable".into(),
                    detail: format!("{} did not answer earlier requests", self.resolved.base_url),
                });
            }
            self.pace().await;
            self.counters.requests.fetch_add(1, Ordering::Relaxed);
            let outcome = match tokio::time::timeout(
                Duration::from_secs_f64(c.timeout_secs),
                self.client.chat().create(request.clone()),
            )
            .await
            {
                Err(_) => Err(Attempt::Retry(LlmError {
                    code: "timeout".into(),
                    detail: format!("no answer within {} s", c.timeout_secs),
                })),
                Ok(Ok(resp)) => Ok(resp),
                Ok(Err(e)) => Err(classify(e)),
            };
            // A body that decodes but holds no message is malformed too: retried like a 500.
            let outcome = outcome.and_then(|resp| {
                let response = serde_json::to_value(&resp).expect("response serialises");
                match response_message(&response) {
                    Ok(message) => Ok((response, message)),
                    Err(detail) => Err(Attempt::Retry(LlmError {
                        code: "bad_response".into(),
                        detail,
                    })),
                }
            });
            match outcome {
                Ok((response, (text, tool_calls))) => {
                    let entry = json!({"request": request_json, "response": response});
                    self.store
                        .put(&key, &serde_json::to_vec(&entry).expect("serialisable"))
                        .map_err(|e| LlmError {
                            code: "store".into(),
                            detail: e.to_string(),
                        })?;
                    return Ok(Completion {
                        text,
                        tool_calls,
                        cached: false,
                    });
                }
                Err(Attempt::Final(e)) => {
                    self.counters.failures.fetch_add(1, Ordering::Relaxed);
                    return Err(e);
                }
                Err(Attempt::Retry(e)) => {
                    if attempt >= c.max_attempts {
                        self.counters.failures.fetch_add(1, Ordering::Relaxed);
                        if e.code == "transport" || e.code == "timeout" {
                            self.unreachable.store(true, Ordering::Relaxed);
                        }
                        return Err(LlmError {
                            code: e.code,
                            detail: format!("{} (after {attempt} attempts)", e.detail),
                        });
                    }
                    self.counters.retries.fetch_add(1, Ordering::Relaxed);
                    tokio::time::sleep(backoff(c, attempt)).await;
                }
            }
        }
    }

    /// Waits for the next start slot of the rate limit (this shard's share of it).
    async fn pace(&self) {
        let Some(rps) = self.rate else {
            return;
        };
        if let (crate::store::Scope::Shard { index, count }, Some(limit)) =
            (self.store.scope(), self.resolved.cfg.requests_per_second)
        {
            self.rate_noted.call_once(|| {
                eprintln!(
                    "llm: shard {index}/{count} paces its requests at {rps} req/s (requests_per_second {limit} divided among {count} shards)"
                )
            });
        }
        let slot = {
            let mut next = self.next_start.lock().await;
            let now = Instant::now();
            let slot = (*next).max(now);
            *next = slot + Duration::from_secs_f64(1.0 / rps);
            slot
        };
        tokio::time::sleep_until(slot.into()).await;
    }
}

/// The error of a request another shard sends ([`Store::claim`]).
fn unclaimed() -> LlmError {
    LlmError {
        code: "unclaimed".into(),
        detail: "another shard sends this request".into(),
    }
}

/// The delay before retry `attempt` (1-based): `initial_backoff_ms` doubled per retry, capped at
/// 30 s.
fn backoff(c: &LlmConfig, attempt: u32) -> Duration {
    Duration::from_millis(
        c.initial_backoff_ms
            .saturating_mul(1 << (attempt - 1).min(16))
            .min(30_000),
    )
}

/// `choices[0].message.content` of a response (`""` when null beside tool calls), or why there
/// is none.
fn response_text(response: &Value) -> Result<String, String> {
    response_message(response).map(|(text, _)| text)
}

/// `choices[0].message`'s content and `tool_calls`: a message with tool calls may have a null
/// content (OpenAI's native tool calling); a message with neither is no answer.
fn response_message(response: &Value) -> Result<(String, Vec<Value>), String> {
    let m = &response["choices"][0]["message"];
    let calls = m["tool_calls"].as_array().cloned().unwrap_or_default();
    match m["content"].as_str() {
        Some(t) => Ok((t.to_string(), calls)),
        None if !calls.is_empty() => Ok((String::new(), calls)),
        None => Err("response has no choices[0].message.content or tool_calls".to_string()),
    }
}

fn classify(e: OpenAIError) -> Attempt {
    match e {
        OpenAIError::ApiError(r) => {
            let status = r.status_code.as_u16();
            let err = LlmError {
                code: format!("http_{status}"),
                detail: r.to_string(),
            };
            if status == 429 || status >= 500 {
                Attempt::Retry(err)
            } else {
                Attempt::Final(err)
            }
        }
        OpenAIError::Reqwest(e) => {
            let code = if e.is_timeout() { "timeout" } else { "transport" };
            Attempt::Retry(LlmError {
                code: code.into(),
                detail: format!("{e:#}: {}", source_chain(&e)),
            })
        }
        // A malformed body (cut off, not JSON, not a completion) is the server's fault, as a
        // 5xx is: retried.
        OpenAIError::JSONDeserialize(e, body) => Attempt::Retry(LlmError {
            code: "bad_response".into(),
            detail: format!("{e}: {}", body.chars().take(200).collect::<String>()),
        }),
        other => Attempt::Final(LlmError {
            code: "error".into(),
            detail: other.to_string(),
        }),
    }
}

fn source_chain(e: &dyn std::error::Error) -> String {
    let mut parts = Vec::new();
    let mut cur = e.source();
    while let Some(s) = cur {
        parts.push(s.to_string());
        cur = s.source();
    }
    parts.join(": ")
}

/// Runs `f` on a fresh tokio runtime in its own thread (so it works whether or not the caller is
/// inside a runtime) and returns its output.
pub fn block_on<F, T>(f: F) -> T
where
    F: std::future::Future<Output = T> + Send,
    T: Send,
{
    std::thread::scope(|s| {
        s.spawn(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .expect("tokio runtime")
                .block_on(f)
        })
        .join()
        .expect("LLM thread panicked")
    })
}

/// Convenience for callers holding an `Arc`.
pub type SharedLlm = Arc<Llm>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_endpoint_is_a_skip_and_missing_model_an_error() {
        let cfg = LlmConfig {
            base_url: Some("".into()),
            ..LlmConfig::default()
        };
        if std::env::var("OPENAI_BASE_URL").is_err() {
            assert_eq!(resolve(&cfg), Err(Unavailable::NoEndpoint));
            assert!(
                Unavailable::NoEndpoint
                    .to_string()
                    .starts_with("skipped: no endpoint configured")
            );
        }
        let cfg = LlmConfig {
            base_url: Some("http://127.0.0.1:9/v1/".into()),
            model: Some("m".into()),
            ..LlmConfig::default()
        };
        assert_eq!(resolve(&cfg).unwrap().base_url, "http://127.0.0.1:9/v1");
        let bad = LlmConfig {
            base_url: Some("ftp://x".into()),
            ..cfg.clone()
        };
        assert!(matches!(resolve(&bad), Err(Unavailable::Misconfigured(_))));
    }

    #[test]
    fn cache_key_covers_model_prompt_and_parameters() {
        let m = vec![Message::new("user", "hi")];
        let k = cache_key("a", &m, 0.7, 1, 64).digest();
        assert_eq!(k, cache_key("a", &m, 0.7, 1, 64).digest());
        assert_ne!(k, cache_key("b", &m, 0.7, 1, 64).digest());
        assert_ne!(k, cache_key("a", &m, 0.7, 2, 64).digest());
        assert_ne!(k, cache_key("a", &m, 0.5, 1, 64).digest());
        assert_ne!(k, cache_key("a", &[], 0.7, 1, 64).digest());
    }

    #[test]
    fn unreachable_endpoint_fails_fast_and_is_counted() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = LlmConfig {
            base_url: Some("http://127.0.0.1:9/v1".into()),
            model: Some("m".into()),
            max_attempts: 2,
            initial_backoff_ms: 1,
            timeout_secs: 5.0,
            ..LlmConfig::default()
        };
        let llm = Llm::new(resolve(&cfg).unwrap(), Store::open(dir.path()).unwrap());
        let m = vec![Message::new("user", "hi")];
        let (a, b) = block_on(async { (llm.chat(&m, 0).await, llm.chat(&m, 1).await) });
        assert_eq!(a.unwrap_err().code, "transport");
        assert_eq!(b.unwrap_err().code, "unreachable");
        assert_eq!(llm.counters.snapshot(), (2, 0, 1, 2));
    }
}
