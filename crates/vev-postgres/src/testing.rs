//! A throwaway PostgreSQL 15 for tests (`/work/shared/reference/postgres-local.md`): a
//! cluster in a temporary directory on a free loopback port, run as the `postgres` OS user
//! when the test runs as root (`initdb` and `postgres` refuse root). Dropping the guard stops
//! the server (`pg_ctl -m fast stop`) and removes the directory, also when a test fails.
//! Unlike `vev-pg`'s differential server it keeps PostgreSQL's durability settings
//! (`fsync`, `synchronous_commit`), since these tests are about storage.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Where Debian's `postgresql-15` puts the server programs.
pub const BIN: &str = "/usr/lib/postgresql/15/bin";

/// Whether the server binary is installed.
pub fn available() -> bool {
    Path::new(BIN).join("postgres").exists()
}

/// A started server for a test, or `None` where PostgreSQL 15 is not installed (the test
/// then says on stderr that it skipped `what`). Under `CI` a missing server fails the test
/// instead: CI must run every backend, and `scripts/test` installs it.
///
/// # Panics
/// Under `CI` without the server, or when the server does not start.
pub fn for_test(what: &str) -> Option<TempServer> {
    if !available() {
        assert!(
            std::env::var_os("CI").is_none(),
            "PostgreSQL 15 is not installed at {BIN} (scripts/test installs it)"
        );
        eprintln!("skipped {what}: PostgreSQL 15 is not installed at {BIN}");
        return None;
    }
    match TempServer::start() {
        Ok(server) => Some(server),
        Err(e) => panic!("cannot start a throwaway postgresql: {e}"),
    }
}

/// Where else a `TempServer` listens, and whom it trusts there (`start_with`).
#[derive(Clone, Debug, Default)]
pub struct Network {
    /// Addresses to listen on besides 127.0.0.1 (our own test hosts' only).
    pub listen: Vec<String>,
    /// Client networks trusted without a password, as `pg_hba.conf` CIDRs.
    pub clients: Vec<String>,
}

/// A running server; `url(db)` names a database on it (user `vev`, trust authentication).
pub struct TempServer {
    data: PathBuf,
    /// The loopback port it listens on.
    pub port: u16,
    as_postgres: bool,
    dir: tempfile::TempDir,
}

impl TempServer {
    /// Create a cluster (user `vev`, trust authentication, UTF-8, C collation) and start it.
    pub fn start() -> Result<TempServer, String> {
        TempServer::start_with(&Network::default())
    }

    /// `start`, also listening on `network.listen` (besides 127.0.0.1) and trusting clients
    /// from `network.clients` (CIDRs): for tests whose processes sit in network namespaces
    /// of their own, reaching the server over veth pairs.
    pub fn start_with(network: &Network) -> Result<TempServer, String> {
        let dir = tempfile::Builder::new()
            .prefix("vev-pgstore")
            .tempdir()
            .map_err(|e| format!("cannot create a temporary directory: {e}"))?;
        let as_postgres = running_as_root();
        if as_postgres {
            run(Command::new("chmod").arg("755").arg(dir.path()))?;
            run(Command::new("chown").arg("postgres:").arg(dir.path()))?;
        }
        let mut pg = TempServer {
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
        if !network.clients.is_empty() {
            let hba = pg.data.join("pg_hba.conf");
            let mut text = std::fs::read_to_string(&hba)
                .map_err(|e| format!("cannot read {}: {e}", hba.display()))?;
            for cidr in &network.clients {
                text.push_str(&format!("host all all {cidr} trust\n"));
            }
            std::fs::write(&hba, text)
                .map_err(|e| format!("cannot write {}: {e}", hba.display()))?;
        }
        let listen = std::iter::once("127.0.0.1")
            .chain(network.listen.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join(",");
        let mut last = String::new();
        // The port is free when chosen; another process may take it first, so retry.
        for _ in 0..3 {
            pg.port = free_port()?;
            let opts = format!(
                "-c listen_addresses={listen} -p {} -c unix_socket_directories={} \
                 -c shared_buffers=16MB -c max_connections=200",
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

    /// A URL for database `db` on this server (which must exist: `create_db`).
    pub fn url(&self, db: &str) -> String {
        format!("postgres://vev@127.0.0.1:{}/{db}", self.port)
    }

    /// Create database `name` (through `psql`-free SQL on the `postgres` database).
    pub fn create_db(&self, name: &str) -> Result<String, String> {
        let mut c = postgres::Client::connect(&self.url("postgres"), postgres::NoTls)
            .map_err(|e| e.to_string())?;
        c.batch_execute(&format!("CREATE DATABASE {name}"))
            .map_err(|e| e.to_string())?;
        Ok(self.url(name))
    }

    /// Stop the server now (`pg_ctl -m immediate stop`: no shutdown checkpoint, as a crash).
    pub fn stop(&self) {
        let _ = self
            .command("pg_ctl")
            .arg("-D")
            .arg(&self.data)
            .args(["-m", "immediate", "-w", "stop"])
            .output();
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

impl Drop for TempServer {
    fn drop(&mut self) {
        if self.data.join("postmaster.pid").exists() {
            let _ = self
                .command("pg_ctl")
                .arg("-D")
                .arg(&self.data)
                .args(["-m", "fast", "-w", "stop"])
                .output();
        }
    }
}

fn running_as_root() -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
    }
    #[cfg(not(unix))]
    false
}

/// A loopback port nothing listens on right now.
pub fn free_port() -> Result<u16, String> {
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
