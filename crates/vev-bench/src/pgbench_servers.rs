//! The two servers of the `pgbench` suite, each on its own loopback port: a throwaway
//! PostgreSQL 15 cluster (default configuration, so `fsync` and `synchronous_commit` on) and
//! `vev serve` in this process on a fresh database file. Both are stopped, and their files
//! removed, when dropped, also when the run fails or panics; on Ctrl-C or SIGTERM, when no
//! drop runs, `Interrupt` does it.

use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Mutex, PoisonError};

use crate::error::BenchError;

/// The database both servers are benchmarked in.
pub const DATABASE: &str = "bench";
/// The user pgbench and psql connect as (PostgreSQL's superuser from `initdb -U`).
pub const USER: &str = "vev";

/// Which server a run is against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum System {
    Vev,
    Postgres,
}

impl System {
    pub fn label(self) -> &'static str {
        match self {
            System::Vev => "Vev",
            System::Postgres => "PostgreSQL",
        }
    }
}

/// Where the PostgreSQL 15 programs are (`pgbench` included: both servers get that binary).
#[derive(Clone, Debug)]
pub struct PgBin(pub PathBuf);

impl PgBin {
    pub fn program(&self, name: &'static str) -> Result<PathBuf, BenchError> {
        let path = self.0.join(name);
        if path.is_file() {
            Ok(path)
        } else {
            Err(BenchError::MissingProgram { path })
        }
    }

    /// `postgres --version`, e.g. `postgres (PostgreSQL) 15.18 (Debian 15.18-0+deb12u1)`.
    pub fn version(&self, name: &'static str) -> Result<String, BenchError> {
        let out = run(Command::new(self.program(name)?).arg("--version"))?;
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    }
}

/// Run `cmd` to completion; a non-zero exit is an error carrying its stderr.
pub fn run(cmd: &mut Command) -> Result<Output, BenchError> {
    let shown = format!("{cmd:?}");
    let out = cmd.output().map_err(BenchError::io("run", &shown))?;
    if out.status.success() {
        Ok(out)
    } else {
        Err(BenchError::Tool {
            command: shown,
            status: out.status,
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        })
    }
}

/// A loopback port nobody listens on right now.
fn free_port() -> Result<u16, BenchError> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .map_err(BenchError::io("bind", "127.0.0.1:0"))?;
    let port = listener
        .local_addr()
        .map_err(BenchError::io("bind", "127.0.0.1:0"))?
        .port();
    Ok(port)
}

/// Whether this process runs as root (`initdb` and `postgres` refuse to).
fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .and_then(|ids| ids.split_whitespace().nth(1).map(|e| e == "0"))
        })
        .unwrap_or(false)
}

/// A PostgreSQL program run as the `postgres` OS user when this process is root.
fn as_postgres(program: &Path) -> Command {
    if is_root() {
        let mut cmd = Command::new("runuser");
        cmd.args(["-u", "postgres", "--"]).arg(program);
        cmd
    } else {
        Command::new(program)
    }
}

/// What an interrupt must undo: the scratch directory and, once started, the cluster in it.
struct Undo {
    scratch: PathBuf,
    cluster: Option<(PathBuf, PathBuf)>,
}

static UNDO: Mutex<Option<Undo>> = Mutex::new(None);

fn undo() -> std::sync::MutexGuard<'static, Option<Undo>> {
    UNDO.lock().unwrap_or_else(PoisonError::into_inner)
}

/// On Ctrl-C or SIGTERM (pgbench, in the same process group, gets Ctrl-C too): stop the
/// cluster, remove the scratch directory, exit with 130. Once per process.
pub fn clean_up_on_interrupt(scratch: &Path) -> Result<(), BenchError> {
    *undo() = Some(Undo {
        scratch: scratch.to_path_buf(),
        cluster: None,
    });
    ctrlc::set_handler(|| {
        if let Some(u) = undo().take() {
            eprintln!(
                "vev-bench: interrupted; stopping PostgreSQL and removing {}",
                u.scratch.display()
            );
            if let Some((pg_ctl, data)) = &u.cluster {
                let _ = stop(pg_ctl, data);
            }
            let _ = std::fs::remove_dir_all(&u.scratch);
        }
        std::process::exit(130);
    })?;
    Ok(())
}

fn stop(pg_ctl: &Path, data: &Path) -> Result<Output, BenchError> {
    run(as_postgres(pg_ctl)
        .arg("-D")
        .arg(data)
        .args(["-m", "fast", "stop"]))
}

/// A running throwaway cluster in `dir`: stopped with `pg_ctl -m fast stop` when dropped.
pub struct Postgres {
    pg_ctl: PathBuf,
    data: PathBuf,
    pub port: u16,
}

impl Postgres {
    /// `initdb` in `dir/data` (trust auth, superuser `vev`), start on a free loopback port
    /// with its socket in `dir`, and create the database `bench`.
    pub fn start(bin: &PgBin, dir: &Path) -> Result<Postgres, BenchError> {
        std::fs::create_dir_all(dir).map_err(BenchError::io("create", dir))?;
        if is_root() {
            run(Command::new("chown").arg("postgres").arg(dir))?;
        }
        let data = dir.join("data");
        run(as_postgres(&bin.program("initdb")?)
            .arg("-D")
            .arg(&data)
            .args(["-U", USER, "--auth=trust", "-E", "UTF8", "--locale=C.UTF-8"]))?;
        let port = free_port()?;
        let options = format!(
            "-c listen_addresses=127.0.0.1 -p {port} -c unix_socket_directories={}",
            dir.display()
        );
        let pg_ctl = bin.program("pg_ctl")?;
        run(as_postgres(&pg_ctl)
            .arg("-D")
            .arg(&data)
            .arg("-l")
            .arg(dir.join("log"))
            .args(["-w", "-o", &options, "start"]))?;
        if let Some(u) = undo().as_mut() {
            u.cluster = Some((pg_ctl.clone(), data.clone()));
        }
        let server = Postgres { pg_ctl, data, port };
        psql(port, "postgres", &format!("CREATE DATABASE {DATABASE}"))?;
        Ok(server)
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        if let Some(u) = undo().as_mut() {
            u.cluster = None;
        }
        if let Err(e) = stop(&self.pg_ctl, &self.data) {
            eprintln!("vev-bench: stopping PostgreSQL: {e}");
        }
    }
}

/// `vev serve` in this process on a fresh database file, on a free loopback port; it stops
/// when dropped.
pub struct Vev {
    server: vev_pg::Server,
}

impl Vev {
    pub fn start(path: &Path) -> Result<Vev, BenchError> {
        let conn = vev::Connection::open(path)?;
        let opts = vev_pg::ServeOptions {
            listen: SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
            password: None,
        };
        let server = vev_pg::Server::start(conn, &opts)?;
        Ok(Vev { server })
    }

    pub fn port(&self) -> u16 {
        self.server.local_addr().port()
    }
}

/// The one value `sql` returns, through `psql -At` on `127.0.0.1:port`.
pub fn psql(port: u16, database: &str, sql: &str) -> Result<String, BenchError> {
    let out = run(Command::new("psql").args([
        "-X",
        "-At",
        "-v",
        "ON_ERROR_STOP=1",
        "-h",
        "127.0.0.1",
        "-p",
        &port.to_string(),
        "-U",
        USER,
        "-d",
        database,
        "-c",
        sql,
    ]))?;
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}
