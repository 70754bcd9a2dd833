//! A throwaway PostgreSQL 15 server for the differential test
//! (`/work/shared/reference/postgres-local.md`): a cluster in a temporary directory, on a
//! free loopback port, run as the `postgres` OS user when the test runs as root (`initdb`
//! and `postgres` refuse root). Dropping the guard stops the server (`pg_ctl -m fast stop`)
//! and removes the directory, also when the test fails.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Where Debian's `postgresql-15` puts the server programs.
pub const BIN: &str = "/usr/lib/postgresql/15/bin";

/// Whether the server binary is installed (the test skips only when it is not).
pub fn available() -> bool {
    Path::new(BIN).join("postgres").exists()
}

pub struct Postgres {
    /// The cluster's data directory, inside `dir`.
    data: PathBuf,
    pub port: u16,
    as_postgres: bool,
    dir: tempfile::TempDir,
}

impl Postgres {
    /// Create a cluster (user `vev`, trust authentication, UTF-8, C collation) and start
    /// it with durability off (the test compares answers, not crash safety).
    pub fn start() -> Result<Postgres, String> {
        let dir = tempfile::Builder::new()
            .prefix("vev-diff-pg")
            .tempdir()
            .map_err(|e| format!("cannot create a temporary directory: {e}"))?;
        let as_postgres = running_as_root();
        if as_postgres {
            run(Command::new("chmod").arg("755").arg(dir.path()))?;
            run(Command::new("chown").arg("postgres:").arg(dir.path()))?;
        }
        let mut pg = Postgres {
            data: dir.path().join("data"),
            port: 0,
            as_postgres,
            dir,
        };
        run(pg
            .command("initdb")
            .arg("-D")
            .arg(&pg.data)
            .args(["-U", "vev", "--auth=trust", "-E", "UTF8"])
            .args(["--locale=C.UTF-8", "--no-sync"]))?;
        // The port is free when chosen; another process may take it before the server
        // binds it, so a failed start tries a new one.
        let mut last = String::new();
        for _ in 0..3 {
            pg.port = free_port()?;
            let opts = format!(
                "-c listen_addresses=127.0.0.1 -p {} -c unix_socket_directories={} \
                 -c fsync=off -c synchronous_commit=off -c full_page_writes=off \
                 -c shared_buffers=16MB",
                pg.port,
                pg.dir.path().display()
            );
            let log = pg.dir.path().join("server.log");
            let started = run(pg
                .command("pg_ctl")
                .arg("-D")
                .arg(&pg.data)
                .arg("-l")
                .arg(&log)
                .args(["-w", "-t", "60", "-o", &opts, "start"]));
            match started {
                Ok(()) => return Ok(pg),
                Err(e) => {
                    let tail = std::fs::read_to_string(&log).unwrap_or_default();
                    last = format!("{e}\nserver log:\n{tail}");
                }
            }
        }
        Err(last)
    }

    fn command(&self, program: &str) -> Command {
        let path = Path::new(BIN).join(program);
        if self.as_postgres {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(path);
            c
        } else {
            Command::new(path)
        }
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        // A server runs (or a failed start left one) while its pid file exists.
        if self.data.join("postmaster.pid").exists() {
            let _ = self
                .command("pg_ctl")
                .arg("-D")
                .arg(&self.data)
                .args(["-m", "fast", "-w", "stop"])
                .output();
        }
        // `dir` is removed when it drops, after this.
    }
}

fn running_as_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

fn free_port() -> Result<u16, String> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    l.local_addr().map(|a| a.port()).map_err(|e| e.to_string())
}

fn run(c: &mut Command) -> Result<(), String> {
    let out = c.output().map_err(|e| format!("cannot run {c:?}: {e}"))?;
    if out.status.success() {
        return Ok(());
    }
    Err(format!(
        "{c:?} failed ({}):\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    ))
}

/// `vev serve` in this process, on a database in memory and a free loopback port.
pub fn start_vev() -> vev_pg::Server {
    vev_pg::Server::start(
        vev::Connection::open_in_memory(),
        &vev_pg::ServeOptions {
            listen: "127.0.0.1:0".parse().expect("an address"),
            password: None,
        },
    )
    .expect("vev serve starts")
}

/// A tokio-postgres client of database `db` on `port` (its connection runs on the current
/// runtime).
pub async fn connect(port: u16, db: &str) -> tokio_postgres::Client {
    let (client, conn) = tokio_postgres::connect(
        &format!("host=127.0.0.1 port={port} user=vev dbname={db}"),
        tokio_postgres::NoTls,
    )
    .await
    .unwrap_or_else(|e| panic!("cannot connect to port {port}: {e}"));
    tokio::spawn(async move {
        let _ = conn.await;
    });
    client
}
