//! What the client tests share: a server on a free loopback port over a database in a
//! temporary directory, a tokio-postgres client, and external commands (psql, pgbench) run
//! with a deadline.

#![allow(dead_code)] // each test file uses its own part of this module

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use vev_pg::{ServeOptions, Server};

/// A running server and the directory its database lives in; both go when it is dropped.
pub struct TestServer {
    server: Option<Server>,
    pub port: u16,
    _dir: tempfile::TempDir,
}

impl TestServer {
    /// Serve a new database on `127.0.0.1`, on a port the system picks.
    pub fn start() -> TestServer {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let conn = vev::Connection::open(dir.path().join("app.vev")).expect("open the database");
        let opts = ServeOptions {
            listen: std::net::SocketAddr::from(([127, 0, 0, 1], 0)),
            password: None,
        };
        let server = Server::start(conn, &opts).expect("start the server");
        let port = server.local_addr().port();
        assert_ne!(port, 0, "the server reports the port it was given");
        TestServer {
            server: Some(server),
            port,
            _dir: dir,
        }
    }

    /// Where clients reach the server.
    pub fn addr(&self) -> Addr {
        Addr { port: self.port }
    }

    /// Stop the server (and close its connections) now.
    pub fn stop(mut self) {
        if let Some(s) = self.server.take() {
            s.shutdown();
        }
    }
}

/// Where a test server listens.
#[derive(Clone, Copy, Debug)]
pub struct Addr {
    pub port: u16,
}

impl Addr {
    /// The libpq connection string of the server.
    pub fn conn_str(&self) -> String {
        format!("host=127.0.0.1 port={} user=vev dbname=app", self.port)
    }
}

/// Run an async test body against a fresh server: the server runs on its own threads, the
/// body on a runtime of its own, and the server stops when the body returns.
pub fn with_server<F, Fut>(body: F)
where
    F: FnOnce(Addr) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let server = TestServer::start();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a client runtime");
    // A server stuck on a lock or a lost message must fail the test, not hang CI.
    rt.block_on(async {
        tokio::time::timeout(Duration::from_secs(60), body(server.addr()))
            .await
            .expect("the test finished within 60 s");
    });
    // Stopped outside the client runtime (stopping waits for the server's threads).
    server.stop();
}

/// A tokio-postgres client of `server` (its connection runs on the current runtime). The
/// handle is the connection task: aborting it drops the socket without a Terminate.
pub async fn connect(server: Addr) -> (tokio_postgres::Client, tokio::task::JoinHandle<()>) {
    let (client, connection) = tokio_postgres::connect(&server.conn_str(), tokio_postgres::NoTls)
        .await
        .expect("connect with tokio-postgres");
    let task = tokio::spawn(async move {
        let _ = connection.await;
    });
    (client, task)
}

/// Whether `program` is on PATH.
pub fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(program).is_file()))
}

/// Run a command (stdin closed, libpq's environment cleared so that the arguments alone
/// choose the server), killing it past `deadline`.
pub fn run(program: &str, args: &[&str], deadline: Duration) -> Output {
    let mut cmd = Command::new(program);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("PG") {
            cmd.env_remove(&k);
        }
    }
    cmd.env("PGCONNECT_TIMEOUT", "10");
    let mut child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {program}: {e}"));
    let start = Instant::now();
    // Read the pipes on threads so a chatty child never blocks on a full pipe.
    let mut stdout = child.stdout.take().expect("piped stdout");
    let mut stderr = child.stderr.take().expect("piped stderr");
    let out = std::thread::spawn(move || read_all(&mut stdout));
    let err = std::thread::spawn(move || read_all(&mut stderr));
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for the child") {
            break status;
        }
        if start.elapsed() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{program} {args:?} did not finish within {deadline:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Output {
        status,
        stdout: out.join().expect("stdout reader"),
        stderr: err.join().expect("stderr reader"),
    }
}

fn read_all(r: &mut impl std::io::Read) -> Vec<u8> {
    let mut buf = Vec::new();
    let _ = r.read_to_end(&mut buf);
    buf
}

/// A command's output as text, for assertion messages.
pub fn describe(out: &Output) -> String {
    format!(
        "exit {:?}\n--- stdout\n{}\n--- stderr\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Write `text` to `name` in a new temporary directory (kept alive by the returned guard).
pub fn script(name: &str, text: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join(name);
    std::fs::write(&path, text).expect("write the script");
    (dir, path)
}

/// The SQLSTATE of a failed statement.
pub fn sqlstate(e: &tokio_postgres::Error) -> &str {
    e.code()
        .unwrap_or_else(|| panic!("a server error with a SQLSTATE, got {e:?}"))
        .code()
}

/// Run statements (simple protocol), panicking with the SQL on an error.
pub async fn exec(c: &tokio_postgres::Client, sql: &str) {
    c.batch_execute(sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e:?}"));
}

/// The count a `SELECT count(*) ...` gives.
pub async fn count(c: &tokio_postgres::Client, sql: &str) -> i64 {
    c.query_one(sql, &[])
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e:?}"))
        .get(0)
}

/// The text rows a simple query returns, in the order they came.
pub async fn text_rows(c: &tokio_postgres::Client, sql: &str) -> Vec<Vec<Option<String>>> {
    c.simple_query(sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e:?}"))
        .into_iter()
        .filter_map(|m| match m {
            tokio_postgres::SimpleQueryMessage::Row(r) => {
                Some((0..r.len()).map(|i| r.get(i).map(str::to_owned)).collect())
            }
            _ => None,
        })
        .collect()
}
