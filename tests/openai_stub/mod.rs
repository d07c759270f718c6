//! A minimal OpenAI-compatible chat server on 127.0.0.1 for tests (std only, one thread per
//! connection, `Connection: close`): every `POST .../chat/completions` body is logged and
//! answered by the test's closure with a status and a JSON body.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

/// A running stub: its port and the request bodies it received.
pub struct Stub {
    /// The port on 127.0.0.1.
    pub port: u16,
    /// Every request body, in arrival order.
    pub bodies: Arc<Mutex<Vec<Value>>>,
}

impl Stub {
    /// The base URL for `--base-url`.
    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }
}

/// Starts a stub answering each request body with `answer(body) -> (status, body)`.
pub fn start(answer: impl Fn(&Value) -> (u16, Value) + Send + Sync + 'static) -> Stub {
    start_raw(move |body| {
        let (status, reply) = answer(body);
        (status, reply.to_string())
    })
}

/// [`start`] with the reply body as raw text (a malformed body is any text that is not a chat
/// completion).
#[allow(dead_code)]
pub fn start_raw(answer: impl Fn(&Value) -> (u16, String) + Send + Sync + 'static) -> Stub {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let bodies = Arc::new(Mutex::new(Vec::new()));
    let log = bodies.clone();
    let answer = Arc::new(answer);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let (log, answer) = (log.clone(), answer.clone());
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut len = 0usize;
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    let l = line.trim_end().to_ascii_lowercase();
                    if l.is_empty() {
                        break;
                    }
                    if let Some(v) = l.strip_prefix("content-length:") {
                        len = v.trim().parse().unwrap_or(0);
                    }
                }
                let mut buf = vec![0u8; len];
                if reader.read_exact(&mut buf).is_err() {
                    return;
                }
                let body: Value = serde_json::from_slice(&buf).unwrap_or(Value::Null);
                log.lock().unwrap().push(body.clone());
                let (status, text) = answer(&body);
                let _ = write!(
                    stream,
                    "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{text}",
                    text.len()
                );
            });
        }
    });
    Stub { port, bodies }
}

/// A chat completion whose message is `message` (`{"role": "assistant", ...}`).
pub fn completion(message: Value) -> Value {
    json!({
        "id": "chatcmpl-stub", "object": "chat.completion", "created": 0, "model": "stub",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
    })
}
