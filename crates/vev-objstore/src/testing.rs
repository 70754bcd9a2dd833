//! A throwaway S3-compatible server for tests: `moto`'s server (PyPI `moto[server]`, the
//! version pinned in `scripts/moto-requirements.txt`) from a virtual environment made on
//! first use, on a free loopback port. Dropping the guard stops it.
//!
//! Tests set `AWS_ACCESS_KEY_ID` / `AWS_SECRET_ACCESS_KEY` to dummy values (`credentials`)
//! so that the client never looks for credentials anywhere but the environment.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The requirements file, relative to the repository.
const REQUIREMENTS: &str = "scripts/moto-requirements.txt";

/// A running moto server.
pub struct MotoServer {
    child: Child,
    pub port: u16,
}

impl Drop for MotoServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Dummy credentials in this process's environment (moto accepts any by default).
pub fn credentials() {
    // SAFETY of the environment: set before any thread reads it, once, with the same
    // values every time (tests of one binary call this first).
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        std::env::set_var("AWS_ACCESS_KEY_ID", "vevtestkey");
        std::env::set_var("AWS_SECRET_ACCESS_KEY", "vevtestsecret");
        std::env::set_var("AWS_REGION", "us-east-1");
    });
}

/// `moto_server` from a virtual environment under `dir` with the pinned moto, made when
/// missing (`python3 -m venv`, `pip install`).
pub fn moto_bin(dir: &Path) -> Result<PathBuf, String> {
    let venv = dir.join("moto-venv");
    let bin = venv.join("bin/moto_server");
    let python = venv.join("bin/python");
    let requirements = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(REQUIREMENTS);
    let pinned = std::fs::read_to_string(&requirements)
        .map_err(|e| format!("{}: {e}", requirements.display()))?;
    let stamp = venv.join("requirements.txt");
    if bin.exists() && std::fs::read_to_string(&stamp).ok().as_deref() == Some(&pinned) {
        return Ok(bin);
    }
    let made = Command::new("python3")
        .args(["-m", "venv", "--clear"])
        .arg(&venv)
        .status()
        .is_ok_and(|s| s.success());
    if !made {
        return Err("`python3 -m venv` failed (scripts/test installs python3-venv)".into());
    }
    let installed = Command::new(&python)
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "-r",
        ])
        .arg(&requirements)
        .status()
        .is_ok_and(|s| s.success());
    if !installed || !bin.exists() {
        return Err(format!(
            "`pip install -r {}` failed",
            requirements.display()
        ));
    }
    std::fs::write(&stamp, pinned).map_err(|e| e.to_string())?;
    Ok(bin)
}

/// A loopback port nothing listens on now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("bind a loopback port")
}

impl MotoServer {
    /// Start moto on a free loopback port with extra environment `env` (for example
    /// `INITIAL_NO_AUTH_ACTION_COUNT=0`, which makes it refuse unknown credentials).
    pub fn start(dir: &Path, env: &[(&str, &str)]) -> Result<MotoServer, String> {
        let bin = moto_bin(dir)?;
        let port = free_port();
        let child = Command::new(&bin)
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("{}: {e}", bin.display()))?;
        let server = MotoServer { child, port };
        let deadline = Instant::now() + Duration::from_secs(60);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            if Instant::now() > deadline {
                return Err(format!("moto did not listen on port {port} within 60 s"));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Ok(server)
    }

    /// `http://127.0.0.1:PORT`.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Create `bucket` (moto takes unsigned requests unless told otherwise).
    pub fn create_bucket(&self, bucket: &str) -> Result<(), String> {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).map_err(|e| e.to_string())?;
        write!(
            s,
            "PUT /{bucket} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Length: 0\r\n\
             Connection: close\r\n\r\n",
            self.port
        )
        .map_err(|e| e.to_string())?;
        let mut answer = String::new();
        s.read_to_string(&mut answer).map_err(|e| e.to_string())?;
        if answer.starts_with("HTTP/1.1 200") || answer.starts_with("HTTP/1.0 200") {
            Ok(())
        } else {
            Err(format!(
                "create bucket {bucket}: {}",
                answer.lines().next().unwrap_or("")
            ))
        }
    }

    /// The `s3://` URL of `bucket/prefix` on this server with the log at `log`.
    pub fn url(&self, bucket: &str, prefix: &str, log: &str) -> String {
        format!(
            "s3://{bucket}/{prefix}?endpoint={}&allow_http=true&log={log}",
            self.endpoint()
        )
    }
}

/// A started server for a test, or `None` where python3's venv cannot be made or moto not
/// installed (the test then says on stderr that it skipped `what`). Under `CI` that fails
/// the test instead: `scripts/test` installs python3-venv.
///
/// # Panics
/// Under `CI` when moto cannot be installed or started.
pub fn for_test(what: &str, dir: &Path) -> Option<MotoServer> {
    credentials();
    match MotoServer::start(dir, &[]) {
        Ok(server) => Some(server),
        Err(e) => {
            assert!(
                std::env::var_os("CI").is_none(),
                "cannot start moto for {what}: {e}"
            );
            eprintln!("skipped {what}: cannot start moto: {e}");
            None
        }
    }
}
