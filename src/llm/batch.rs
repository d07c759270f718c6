//! LLM requests through a provider's Batch API (issue 19 item 5), in OpenAI's shape
//! (<https://platform.openai.com/docs/guides/batch>): the requests that miss the store are written
//! as one JSONL file (`{"custom_id", "method": "POST", "url": "/v1/chat/completions", "body"}` per
//! line), uploaded (`POST /files`, purpose `batch`), submitted (`POST /batches`, window `24h`),
//! polled (`GET /batches/{id}`) until it ends, and its output and error files fetched
//! (`GET /files/{id}/content`). Each answer is stored under the same key as a live request's
//! ([`super::cache_key`], the same `{"request", "response"}` entry), so a dataset built from a
//! batch is byte-identical to one built live from the same answers, and a rebuild is offline
//! either way.
//!
//! - **Resumable**: the submitted batch's id is recorded in the store (stage `llm-batch`, keyed by
//!   the endpoint, the model and the digest of the JSONL), so a build that is stopped while it
//!   waits resumes polling the same batch when re-run instead of paying for it twice. A recorded
//!   batch that ended `failed`, `expired` or `cancelled` is retried as a new batch (a further
//!   attempt number in the record key).
//! - **Partial results**: lines answered with a non-200 status or an error become
//!   [`LlmError`]s (`batch_http_<status>`, `batch_<error code>`), lines missing from a batch that
//!   ended early `batch_<status>`; none is cached, so the next build sends only those again.
//! - **Sharded builds**: a request another shard computes ([`crate::store::Store::claim`]) is not
//!   sent (`unclaimed`).
//!
//! Requests are deduplicated (one line per distinct key) and ordered by key digest, so the JSONL,
//! and with it the resume record, is deterministic.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use async_openai::error::OpenAIError;
use async_openai::types::batches::{
    Batch, BatchCompletionWindow, BatchEndpoint, BatchRequest, BatchRequestOutput, BatchStatus,
};
use async_openai::types::files::{CreateFileRequest, FileInput, FilePurpose};
use serde_json::{Value, json};

use super::{Completion, Llm, LlmError, Message, cache_key, request_json, response_text, unclaimed};
use crate::store::{Lookup, StageKey};

/// Version of the `llm-batch` resume records.
const RECORD_VERSION: u32 = 1;

/// One distinct request of the batch: its store key, body, and the jobs asking for it.
struct Pending {
    key: StageKey,
    body: Value,
    jobs: Vec<usize>,
}

/// Answers every `(messages, seed)` job: from the store, else through one batch (module docs).
/// Results in job order.
pub async fn chat_all(llm: &Llm, jobs: Vec<(Vec<Message>, u64)>) -> Vec<Result<Completion, LlmError>> {
    let mut out: Vec<Option<Result<Completion, LlmError>>> = (0..jobs.len()).map(|_| None).collect();
    let mut pending: BTreeMap<String, Pending> = BTreeMap::new();
    let c = &llm.resolved.cfg;
    for (j, (messages, seed)) in jobs.iter().enumerate() {
        if let Some(done) = llm.cached(messages, *seed) {
            llm.counters.cache_hits.fetch_add(1, Ordering::Relaxed);
            out[j] = Some(Ok(done));
            continue;
        }
        let key = cache_key(&llm.resolved.model, messages, c.temperature, *seed, c.max_tokens);
        let digest = key.digest();
        if let Some(p) = pending.get_mut(&digest) {
            p.jobs.push(j);
            continue;
        }
        if !llm.store.claim(&key, "llm-chat") {
            out[j] = Some(Err(unclaimed()));
            continue;
        }
        let body = request_json(&llm.resolved.model, messages, c.temperature, *seed, c.max_tokens);
        pending.insert(
            digest,
            Pending {
                key,
                body,
                jobs: vec![j],
            },
        );
    }
    if !pending.is_empty() {
        let answers = run(llm, &pending).await;
        for (digest, p) in &pending {
            let res = answers.get(digest).cloned().unwrap_or_else(|| {
                Err(LlmError {
                    code: "batch_unanswered".into(),
                    detail: "the batch ended without a line for this request".into(),
                })
            });
            for &j in &p.jobs {
                out[j] = Some(res.clone());
            }
        }
    }
    out.into_iter().map(|r| r.expect("every job answered")).collect()
}

/// Per-batch limits of OpenAI's Batch API: 50,000 requests and 200 MB of JSONL (a margin kept).
const MAX_LINES: usize = 50_000;
const MAX_BYTES: usize = 190 * 1024 * 1024;

/// The JSONL files for `pending` (in digest order), split at the per-batch limits; each with the
/// digests it holds.
fn jsonl_files(pending: &BTreeMap<String, Pending>) -> Vec<(String, Vec<String>)> {
    let mut files: Vec<(String, Vec<String>)> = vec![(String::new(), Vec::new())];
    for (digest, p) in pending {
        let line =
            json!({"custom_id": digest, "method": "POST", "url": "/v1/chat/completions", "body": p.body}).to_string();
        let (text, ids) = files.last().expect("one file");
        if !ids.is_empty() && (ids.len() >= MAX_LINES || text.len() + line.len() + 1 > MAX_BYTES) {
            files.push((String::new(), Vec::new()));
        }
        let (text, ids) = files.last_mut().expect("one file");
        text.push_str(&line);
        text.push('\n');
        ids.push(digest.clone());
    }
    files
}

/// Submits (or resumes) one batch per JSONL file of `pending` (all submitted before any is
/// waited for, so they run side by side), waits for each, stores every answer; returns the
/// result per request digest (a batch that could not be submitted or polled: that error for
/// each of its requests).
async fn run(llm: &Llm, pending: &BTreeMap<String, Pending>) -> BTreeMap<String, Result<Completion, LlmError>> {
    let mut submitted = Vec::new();
    for (jsonl, ids) in jsonl_files(pending) {
        let requests = blake3::hash(jsonl.as_bytes()).to_hex().to_string();
        let batch = submit_or_resume(llm, &jsonl, &requests, ids.len()).await;
        submitted.push((batch, ids));
    }
    let mut answers = BTreeMap::new();
    for (batch, ids) in submitted {
        let got = match batch {
            Ok(b) => collect(llm, b, pending, &ids).await,
            Err(e) => Err(e),
        };
        match got {
            Ok(a) => answers.extend(a),
            Err(e) => {
                llm.counters.failures.fetch_add(ids.len(), Ordering::Relaxed);
                answers.extend(ids.into_iter().map(|d| (d, Err(e.clone()))));
            }
        }
    }
    answers
}

/// Waits for `batch` and reads its output and error files: the result per request digest `ids`
/// of `pending` that the batch holds (a malformed line is reported on stderr and skipped; its
/// request counts as unanswered). Errors: the batch could not be polled or its files read.
async fn collect(
    llm: &Llm,
    batch: Batch,
    pending: &BTreeMap<String, Pending>,
    ids: &[String],
) -> Result<BTreeMap<String, Result<Completion, LlmError>>, LlmError> {
    let batch = wait(llm, batch).await?;
    let mut answers = BTreeMap::new();
    for (file, is_output) in [(&batch.output_file_id, true), (&batch.error_file_id, false)] {
        let Some(id) = file else { continue };
        let bytes = retried(llm, || async { llm.client.files().content(id).await }).await?;
        for (n, line) in String::from_utf8_lossy(&bytes).lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            // A line that is not a batch output object is reported and skipped: its request is
            // then one the batch did not answer (below), resent by the next build.
            let parsed: BatchRequestOutput = match serde_json::from_str(line) {
                Ok(p) => p,
                Err(e) => {
                    let file = if is_output { "output" } else { "error" };
                    eprintln!(
                        "llm batch {}: {file} file {id} line {}: {e}; expected {{\"custom_id\", \"response\" | \"error\"}} (skipped)",
                        batch.id,
                        n + 1
                    );
                    continue;
                }
            };
            let Some(p) = pending.get(&parsed.custom_id) else {
                continue;
            };
            let res = answer(llm, p, &parsed);
            if res.is_err() {
                llm.counters.failures.fetch_add(1, Ordering::Relaxed);
            }
            answers.insert(parsed.custom_id.clone(), res);
        }
    }
    let status = status_name(&batch.status);
    for digest in ids {
        if !answers.contains_key(digest) {
            llm.counters.failures.fetch_add(1, Ordering::Relaxed);
            answers.insert(
                digest.clone(),
                Err(LlmError {
                    code: format!("batch_{status}"),
                    detail: format!("batch {} ended `{status}` without answering this request", batch.id),
                }),
            );
        }
    }
    Ok(answers)
}

/// One output line: the completion (stored under the request's key) or why there is none.
fn answer(llm: &Llm, p: &Pending, line: &BatchRequestOutput) -> Result<Completion, LlmError> {
    if let Some(e) = &line.error {
        return Err(LlmError {
            code: format!("batch_{}", e.code),
            detail: e.message.clone(),
        });
    }
    let Some(resp) = &line.response else {
        return Err(LlmError {
            code: "bad_response".into(),
            detail: format!("batch line {} has neither response nor error", line.custom_id),
        });
    };
    if resp.status_code != 200 {
        return Err(LlmError {
            code: format!("batch_http_{}", resp.status_code),
            detail: resp.body.to_string().chars().take(200).collect(),
        });
    }
    let text = response_text(&resp.body).map_err(|detail| LlmError {
        code: "bad_response".into(),
        detail,
    })?;
    let entry = json!({"request": p.body, "response": resp.body});
    llm.store
        .put(&p.key, &serde_json::to_vec(&entry).expect("serialisable"))
        .map_err(|e| LlmError {
            code: "store".into(),
            detail: e.to_string(),
        })?;
    Ok(Completion {
        text,
        tool_calls: vec![],
        cached: false,
    })
}

/// The store key recording attempt `attempt` of the batch of `requests` (the JSONL digest).
fn record_key(llm: &Llm, requests: &str, attempt: u32) -> StageKey {
    StageKey {
        stage: "llm-batch".into(),
        version: RECORD_VERSION,
        config: json!({
            "base_url": llm.resolved.base_url,
            "model": llm.resolved.model,
            "requests": requests,
            "attempt": attempt,
        }),
        inputs: vec![],
    }
}

/// The batch to wait for: a recorded one still usable (resumed), else a new submission
/// (recorded under the next attempt number).
async fn submit_or_resume(llm: &Llm, jsonl: &str, requests: &str, lines: usize) -> Result<Batch, LlmError> {
    let mut attempt = 0;
    loop {
        let key = record_key(llm, requests, attempt);
        let Lookup::Hit(bytes) = llm.store.get(&key) else { break };
        let id = serde_json::from_slice::<Value>(&bytes)
            .ok()
            .and_then(|v| v["batch_id"].as_str().map(str::to_string));
        if let Some(id) = id {
            match retried(llm, || async { llm.client.batches().retrieve(&id).await }).await {
                Ok(b)
                    if !matches!(
                        b.status,
                        BatchStatus::Failed | BatchStatus::Expired | BatchStatus::Cancelled
                    ) =>
                {
                    eprintln!("llm batch {id}: resumed ({lines} requests, {})", status_name(&b.status));
                    return Ok(b);
                }
                // Ended without results, or unknown to the provider: submit again.
                _ => {}
            }
        }
        attempt += 1;
    }
    let file = retried(llm, || async {
        let request = CreateFileRequest {
            file: FileInput::from_vec_u8("toolforge-batch.jsonl".into(), jsonl.as_bytes().to_vec()),
            purpose: FilePurpose::Batch,
            expires_after: None,
        };
        llm.client.files().create(request).await
    })
    .await?;
    let batch = retried(llm, || async {
        let request = BatchRequest {
            input_file_id: file.id.clone(),
            endpoint: BatchEndpoint::V1ChatCompletions,
            completion_window: BatchCompletionWindow::W24H,
            metadata: None,
            output_expires_after: None,
        };
        llm.client.batches().create(request).await
    })
    .await?;
    llm.counters.batches.fetch_add(1, Ordering::Relaxed);
    llm.counters.batch_lines.fetch_add(lines, Ordering::Relaxed);
    let record = json!({"batch_id": batch.id, "input_file_id": file.id, "requests": lines});
    llm.store
        .put(
            &record_key(llm, requests, attempt),
            &serde_json::to_vec(&record).expect("serialisable"),
        )
        .map_err(|e| LlmError {
            code: "store".into(),
            detail: e.to_string(),
        })?;
    eprintln!("llm batch {}: submitted {lines} requests", batch.id);
    Ok(batch)
}

/// Polls `batch` every `batch_poll_secs` until it ends (completed, failed, expired, cancelled)
/// or `batch_max_wait_secs` pass (then the error `batch_timeout`; the next build resumes it).
/// Prints a progress line when the request counts change.
async fn wait(llm: &Llm, mut batch: Batch) -> Result<Batch, LlmError> {
    let c = &llm.resolved.cfg;
    let start = Instant::now();
    let mut shown = String::new();
    loop {
        let counts = batch
            .request_counts
            .as_ref()
            .map(|r| format!("{}/{} done, {} failed", r.completed, r.total, r.failed))
            .unwrap_or_default();
        let line = format!("llm batch {}: {} {counts}", batch.id, status_name(&batch.status));
        if line != shown {
            eprintln!("{line}");
            shown = line;
        }
        if matches!(
            batch.status,
            BatchStatus::Completed | BatchStatus::Failed | BatchStatus::Expired | BatchStatus::Cancelled
        ) {
            return Ok(batch);
        }
        if start.elapsed().as_secs_f64() >= c.batch_max_wait_secs {
            return Err(LlmError {
                code: "batch_timeout".into(),
                detail: format!(
                    "batch {} still `{}` after {} s (re-run the build to resume it)",
                    batch.id,
                    status_name(&batch.status),
                    c.batch_max_wait_secs
                ),
            });
        }
        tokio::time::sleep(Duration::from_secs_f64(c.batch_poll_secs)).await;
        let id = batch.id.clone();
        batch = retried(llm, || async { llm.client.batches().retrieve(&id).await }).await?;
    }
}

/// `f` with the client's retry rule (429, 5xx, timeouts, transport errors; `max_attempts`,
/// doubling backoff), counting each HTTP request.
async fn retried<T, F, Fut>(llm: &Llm, f: F) -> Result<T, LlmError>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Result<T, OpenAIError>>,
{
    let c = &llm.resolved.cfg;
    let mut attempt = 0u32;
    loop {
        attempt += 1;
        llm.counters.requests.fetch_add(1, Ordering::Relaxed);
        let outcome = match tokio::time::timeout(Duration::from_secs_f64(c.timeout_secs), f()).await {
            Ok(Ok(v)) => return Ok(v),
            Ok(Err(e)) => super::classify(e),
            Err(_) => super::Attempt::Retry(LlmError {
                code: "timeout".into(),
                detail: format!("no answer within {} s", c.timeout_secs),
            }),
        };
        match outcome {
            super::Attempt::Final(e) => return Err(e),
            super::Attempt::Retry(e) if attempt >= c.max_attempts => {
                return Err(LlmError {
                    code: e.code,
                    detail: format!("{} (after {attempt} attempts)", e.detail),
                });
            }
            super::Attempt::Retry(_) => {
                llm.counters.retries.fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(super::backoff(c, attempt)).await;
            }
        }
    }
}

/// The status as the API spells it (`in_progress`, …).
fn status_name(s: &BatchStatus) -> String {
    serde_json::to_value(s)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_else(|| format!("{s:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jsonl_files_split_at_the_batch_api_request_limit() {
        let mut pending = BTreeMap::new();
        for i in 0..MAX_LINES + 1 {
            let m = vec![Message::new("user", format!("q{i}"))];
            let key = cache_key("m", &m, 0.7, 0, 8);
            let body = request_json("m", &m, 0.7, 0, 8);
            pending.insert(
                key.digest(),
                Pending {
                    key,
                    body,
                    jobs: vec![i],
                },
            );
        }
        let files = jsonl_files(&pending);
        assert_eq!(files.len(), 2);
        assert_eq!((files[0].1.len(), files[1].1.len()), (MAX_LINES, 1));
        assert_eq!(files[0].0.lines().count(), MAX_LINES);
        let all: Vec<&String> = files.iter().flat_map(|(_, ids)| ids).collect();
        assert_eq!(
            all,
            pending.keys().collect::<Vec<_>>(),
            "digest order, every request once"
        );
        let first: Value = serde_json::from_str(files[1].0.lines().next().unwrap()).unwrap();
        assert_eq!(first["custom_id"], *files[1].1[0]);
        assert_eq!(first["url"], "/v1/chat/completions");
    }
}
