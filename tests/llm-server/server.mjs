// A tiny OpenAI-compatible chat-completions server on node-llama-cpp, for toolforge's LLM
// integration test (tests/llm.rs). Started by setup.sh --start.
//
//   POST /v1/chat/completions   {model, messages, temperature?, seed?, max_tokens?}
//                               → OpenAI response shape (one choice)
//   GET  /v1/models             the one model
//   GET  /stats                 {requests, completions, injected, errors, files, batches, batch_lines}
//   The Batch API in OpenAI's shape (https://platform.openai.com/docs/api-reference/batch):
//   POST /v1/files              multipart `file` + `purpose=batch` → file object
//   POST /v1/batches            {input_file_id, endpoint: "/v1/chat/completions", completion_window}
//                               → batch object; its lines run in the background on the same model
//   GET  /v1/batches/<id>       batch object (status validating → in_progress → completed,
//                               request_counts, output_file_id, error_file_id)
//   GET  /v1/files/<id>/content the uploaded JSONL, or a batch's output / error JSONL
//
// Env: MODEL (path to a .gguf), THREADS (llama.cpp threads, default 1: the test machine is shared), PORT (0 = any free port; prints `LISTENING <port>`),
// REQUEST_LOG (optional JSON-lines file, one line per chat request),
// INJECT_STATUS (e.g. 429 or 503) + INJECT_MATCH (substring of the last user message, default
// any): the FIRST request of each matching prompt is answered with that status (with a
// `retry-after: 0` header for 429), later ones normally — so clients' retry paths are exercised.
// A request header `x-inject-status: <code>` fails that one request the same way.
// BATCH_DELAY_MS: a batch stays `validating` this long before its lines run (so a test can stop
// the client while it waits). BATCH_FAIL_MATCH: the FIRST batch line of each prompt whose last
// user message contains it is answered with status 500 in the batch's error file.
// BATCH_BAD_LINE: every output file starts with a line that is not JSON.
import http from "node:http";
import fs from "node:fs";
import crypto from "node:crypto";
import {getLlama, LlamaChatSession} from "node-llama-cpp";

const modelPath = process.env.MODEL;
if (!modelPath) throw new Error("MODEL is not set");
const llama = await getLlama({gpu: false});
const model = await llama.loadModel({modelPath});
const context = await model.createContext({contextSize: Number(process.env.CONTEXT_SIZE || 8192), sequences: 1, threads: Number(process.env.THREADS || 1)});
const sequence = context.getSequence();
const modelId = process.env.MODEL_ID || "smollm2-135m-instruct";
const injectStatus = Number(process.env.INJECT_STATUS || 0);
const injectMatch = process.env.INJECT_MATCH || "";
const seen = new Set();
const stats = {requests: 0, completions: 0, injected: 0, errors: 0, files: 0, batches: 0, batch_lines: 0};
const files = new Map();   // id → {meta, content}
const batches = new Map(); // id → batch object
const batchDelay = Number(process.env.BATCH_DELAY_MS || 0);
const batchFailMatch = process.env.BATCH_FAIL_MATCH || "";
const now = () => Math.floor(Date.now() / 1000);
const log = (o) => { if (process.env.REQUEST_LOG) fs.appendFileSync(process.env.REQUEST_LOG, JSON.stringify(o) + "\n"); };

// One generation at a time (one sequence); requests queue here.
let queue = Promise.resolve();
function serial(f) { const p = queue.then(f, f); queue = p.catch(() => {}); return p; }

async function complete(body) {
    const msgs = body.messages || [];
    const last = msgs[msgs.length - 1];
    if (!last || last.role !== "user") throw Object.assign(new Error("last message must be a user message"), {status: 400});
    const history = [];
    for (const m of msgs.slice(0, -1)) {
        const text = typeof m.content === "string" ? m.content : (m.content || []).map((p) => p.text || "").join("");
        if (m.role === "system") history.push({type: "system", text});
        else if (m.role === "user") history.push({type: "user", text});
        else if (m.role === "assistant") history.push({type: "model", response: [text]});
    }
    const session = new LlamaChatSession({contextSequence: sequence, autoDisposeSequence: false});
    try {
        session.setChatHistory(history);
        const prompt = typeof last.content === "string" ? last.content : last.content.map((p) => p.text || "").join("");
        const text = await session.prompt(prompt, {
            temperature: body.temperature ?? 0,
            seed: body.seed ?? 0,
            maxTokens: Math.min(body.max_tokens ?? body.max_completion_tokens ?? 128, 512),
        });
        return {text, promptTokens: 0, completionTokens: model.tokenize(text).length};
    } finally {
        session.dispose({disposeSequence: false});
        await sequence.clearHistory();
    }
}

function completionBody(body, key, text, completionTokens) {
    return {
        id: "chatcmpl-" + key.slice(0, 24),
        object: "chat.completion",
        created: now(),
        model: body.model || modelId,
        choices: [{index: 0, message: {role: "assistant", content: text}, finish_reason: "stop", logprobs: null}],
        usage: {prompt_tokens: 0, completion_tokens: completionTokens, total_tokens: completionTokens},
    };
}

function addFile(filename, purpose, content) {
    const id = "file-" + crypto.randomBytes(8).toString("hex");
    const meta = {id, object: "file", bytes: Buffer.byteLength(content), created_at: now(), filename, purpose};
    files.set(id, {meta, content});
    stats.files++;
    return meta;
}

// Runs a batch's lines one by one on the model, then writes its output and error files.
async function runBatch(batch) {
    await new Promise((r) => setTimeout(r, batchDelay));
    const lines = files.get(batch.input_file_id).content.split("\n").filter((l) => l.trim());
    batch.status = "in_progress";
    batch.in_progress_at = now();
    batch.request_counts = {total: lines.length, completed: 0, failed: 0};
    const out = [], err = [];
    for (const l of lines) {
        const line = JSON.parse(l);
        const body = line.body || {};
        const msgs = body.messages || [];
        const key = crypto.createHash("sha256").update(JSON.stringify([msgs, body.seed, body.temperature])).digest("hex");
        const lastText = JSON.stringify(msgs[msgs.length - 1]?.content ?? "");
        const id = "batch_req_" + key.slice(0, 24);
        stats.batch_lines++;
        if (batchFailMatch && !seen.has("batch:" + key) && lastText.includes(batchFailMatch)) {
            seen.add("batch:" + key);
            stats.injected++;
            err.push({id, custom_id: line.custom_id, response: {status_code: 500, request_id: id, body: {error: {message: "injected 500", type: "server_error"}}}, error: null});
            batch.request_counts.failed++;
            continue;
        }
        seen.add("batch:" + key);
        try {
            const o = await serial(() => complete(body));
            stats.completions++;
            out.push({id, custom_id: line.custom_id, response: {status_code: 200, request_id: id, body: completionBody(body, key, o.text, o.completionTokens)}, error: null});
            batch.request_counts.completed++;
        } catch (e) {
            err.push({id, custom_id: line.custom_id, response: {status_code: e.status || 500, request_id: id, body: {error: {message: String(e.message || e)}}}, error: null});
            batch.request_counts.failed++;
        }
    }
    batch.status = "finalizing";
    batch.finalizing_at = now();
    const jsonl = (rows) => rows.map((r) => JSON.stringify(r) + "\n").join("");
    // BATCH_BAD_LINE: one line that is not an output object, as a provider's truncated file would have.
    const bad = process.env.BATCH_BAD_LINE ? "{not json\n" : "";
    if (out.length) batch.output_file_id = addFile("batch_output.jsonl", "batch_output", bad + jsonl(out)).id;
    if (err.length) batch.error_file_id = addFile("batch_errors.jsonl", "batch_output", jsonl(err)).id;
    batch.status = "completed";
    batch.completed_at = now();
}

// The Batch API routes; false when the request is not one of them.
async function batchRoute(req, res, raw) {
    if (req.method === "POST" && req.url === "/v1/files") {
        const form = await new Request("http://127.0.0.1/", {method: "POST", headers: req.headers, body: raw}).formData();
        const file = form.get("file");
        if (!file || form.get("purpose") !== "batch")
            return send(res, 400, {error: {message: "need a `file` and purpose=batch", type: "invalid_request_error"}}), true;
        return send(res, 200, addFile(file.name || "input.jsonl", "batch", await file.text())), true;
    }
    if (req.method === "POST" && req.url === "/v1/batches") {
        const b = JSON.parse(raw.toString("utf8"));
        if (!files.has(b.input_file_id) || b.endpoint !== "/v1/chat/completions")
            return send(res, 400, {error: {message: "unknown input_file_id or endpoint", type: "invalid_request_error"}}), true;
        const id = "batch_" + crypto.randomBytes(8).toString("hex");
        const batch = {id, object: "batch", endpoint: b.endpoint, input_file_id: b.input_file_id,
            completion_window: b.completion_window || "24h", status: "validating", created_at: now(),
            output_file_id: null, error_file_id: null, request_counts: {total: 0, completed: 0, failed: 0}};
        batches.set(id, batch);
        stats.batches++;
        runBatch(batch).catch((e) => { batch.status = "failed"; batch.failed_at = now(); batch.errors = {object: "list", data: [{code: "server_error", message: String(e)}]}; });
        return send(res, 200, batch), true;
    }
    let m;
    if (req.method === "GET" && (m = req.url.match(/^\/v1\/batches\/([\w-]+)$/))) {
        const b = batches.get(m[1]);
        return (b ? send(res, 200, b) : send(res, 404, {error: {message: "no such batch", type: "invalid_request_error"}})), true;
    }
    if (req.method === "GET" && (m = req.url.match(/^\/v1\/files\/([\w-]+)\/content$/))) {
        const f = files.get(m[1]);
        if (!f) return send(res, 404, {error: {message: "no such file", type: "invalid_request_error"}}), true;
        res.writeHead(200, {"content-type": "application/jsonl", "content-length": Buffer.byteLength(f.content)});
        res.end(f.content);
        return true;
    }
    return false;
}

function send(res, status, obj, headers = {}) {
    const b = JSON.stringify(obj);
    res.writeHead(status, {"content-type": "application/json", "content-length": Buffer.byteLength(b), ...headers});
    res.end(b);
}

const server = http.createServer((req, res) => {
    const chunks = [];
    req.on("data", (c) => { chunks.push(c); });
    req.on("end", async () => {
        const buf = Buffer.concat(chunks);
        const raw = buf.toString("utf8");
        try {
            if (req.method === "GET" && req.url === "/stats") return send(res, 200, stats);
            if (await batchRoute(req, res, buf)) return;
            if (req.method === "GET" && req.url === "/v1/models")
                return send(res, 200, {object: "list", data: [{id: modelId, object: "model", created: 0, owned_by: "local"}]});
            if (req.method !== "POST" || req.url !== "/v1/chat/completions")
                return send(res, 404, {error: {message: `no route ${req.method} ${req.url}`, type: "invalid_request_error"}});
            stats.requests++;
            const body = JSON.parse(raw);
            const msgs = body.messages || [];
            const lastText = JSON.stringify(msgs[msgs.length - 1]?.content ?? "");
            const key = crypto.createHash("sha256").update(JSON.stringify([msgs, body.seed, body.temperature])).digest("hex");
            const forced = Number(req.headers["x-inject-status"] || 0);
            if (forced || (injectStatus && !seen.has(key) && lastText.includes(injectMatch))) {
                seen.add(key);
                stats.injected++;
                const status = forced || injectStatus;
                log({key, status, injected: true});
                return send(res, status, {error: {message: `injected ${status}`, type: status === 429 ? "rate_limit_exceeded" : "server_error"}},
                    status === 429 ? {"retry-after": "0"} : {});
            }
            seen.add(key);
            const t0 = Date.now();
            const out = await serial(() => complete(body));
            stats.completions++;
            log({key, status: 200, ms: Date.now() - t0});
            send(res, 200, completionBody(body, key, out.text, out.completionTokens));
        } catch (e) {
            stats.errors++;
            log({status: e.status || 500, error: String(e)});
            send(res, e.status || 500, {error: {message: String(e.message || e), type: "server_error"}});
        }
    });
});
server.listen(Number(process.env.PORT || 0), "127.0.0.1", () => {
    console.log(`LISTENING ${server.address().port}`);
});
for (const s of ["SIGTERM", "SIGINT"]) process.on(s, () => process.exit(0));
