// A tiny OpenAI-compatible chat-completions server on node-llama-cpp, for toolforge's LLM
// integration test (tests/llm.rs). Started by setup.sh --start.
//
//   POST /v1/chat/completions   {model, messages, temperature?, seed?, max_tokens?}
//                               → OpenAI response shape (one choice)
//   GET  /v1/models             the one model
//   GET  /stats                 {requests, completions, injected, errors}
//
// Env: MODEL (path to a .gguf), THREADS (llama.cpp threads, default 1: the test machine is shared), PORT (0 = any free port; prints `LISTENING <port>`),
// REQUEST_LOG (optional JSON-lines file, one line per chat request),
// INJECT_STATUS (e.g. 429 or 503) + INJECT_MATCH (substring of the last user message, default
// any): the FIRST request of each matching prompt is answered with that status (with a
// `retry-after: 0` header for 429), later ones normally — so clients' retry paths are exercised.
// A request header `x-inject-status: <code>` fails that one request the same way.
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
const stats = {requests: 0, completions: 0, injected: 0, errors: 0};
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

function send(res, status, obj, headers = {}) {
    const b = JSON.stringify(obj);
    res.writeHead(status, {"content-type": "application/json", "content-length": Buffer.byteLength(b), ...headers});
    res.end(b);
}

const server = http.createServer((req, res) => {
    let raw = "";
    req.on("data", (c) => { raw += c; });
    req.on("end", async () => {
        try {
            if (req.method === "GET" && req.url === "/stats") return send(res, 200, stats);
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
            send(res, 200, {
                id: "chatcmpl-" + key.slice(0, 24),
                object: "chat.completion",
                created: Math.floor(Date.now() / 1000),
                model: body.model || modelId,
                choices: [{index: 0, message: {role: "assistant", content: out.text}, finish_reason: "stop", logprobs: null}],
                usage: {prompt_tokens: out.promptTokens, completion_tokens: out.completionTokens, total_tokens: out.promptTokens + out.completionTokens},
            });
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
