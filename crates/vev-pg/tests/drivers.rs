//! The drivers applications use, against `vev serve`: node-postgres (npm `pg`), psycopg 3
//! (PyPI) and the PostgreSQL JDBC driver (Debian's pgjdbc), each running a program
//! (`tests/clients/`) that prints one JSON line per result.
//!
//! The packages are installed when missing: `npm ci` in `tests/clients`, and
//! `pip install --target` psycopg into cargo's test scratch directory; `scripts/test`
//! installs a JDK and pgjdbc from Debian. When a runtime is absent or the install fails, the
//! test fails under `CI=true` (CI must run the real clients) and elsewhere says on stderr
//! that it is skipped.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{json, Value};

fn clients_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients")
}

fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !matches!(v.trim(), "" | "0" | "false" | "FALSE" | "False"))
}

/// `Err(why)` becomes a skip outside CI and a failure in it.
fn or_skip<T>(found: Result<T, String>, what: &str) -> Option<T> {
    match found {
        Ok(t) => Some(t),
        Err(why) if in_ci() => panic!("{why}: {what} cannot run, and CI must run it"),
        Err(why) => {
            let _ = writeln!(std::io::stderr(), "skipped: {what}: {why}");
            None
        }
    }
}

fn runs(program: &str, arg: &str) -> bool {
    Command::new(program)
        .arg(arg)
        .output()
        .is_ok_and(|o| o.status.success())
}

/// A server on a fresh database and a free port; stopped when dropped.
struct Served {
    server: Option<vev_pg::Server>,
    _dir: tempfile::TempDir,
}

impl Served {
    fn start() -> Served {
        let dir = tempfile::tempdir().expect("a temp dir");
        let conn = vev::Connection::open(dir.path().join("drivers.vev")).expect("open");
        let opts = vev_pg::ServeOptions {
            listen: "127.0.0.1:0".parse().expect("an address"),
            password: None,
        };
        let server = vev_pg::Server::start(conn, &opts).expect("the server starts");
        Served {
            server: Some(server),
            _dir: dir,
        }
    }

    fn port(&self) -> u16 {
        self.server.as_ref().expect("running").local_addr().port()
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        if let Some(s) = self.server.take() {
            s.shutdown();
        }
    }
}

/// Run a client script; its JSON lines by name.
fn results(mut cmd: Command) -> HashMap<String, Value> {
    let out = cmd.output().expect("the client runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the client failed:\nstdout:\n{stdout}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // A driver that recovers from an unsupported statement by itself (and says so on
    // stderr) still met a gap.
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains("not supported by Vev"),
        "the client met an unsupported statement:\n{stderr}"
    );
    stdout
        .lines()
        .map(|l| {
            let v: Value =
                serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}"));
            (
                v["name"].as_str().expect("a name").to_owned(),
                v["value"].clone(),
            )
        })
        .collect()
}

fn node_modules() -> Result<PathBuf, String> {
    if !runs("node", "--version") {
        return Err("`node` is not on the PATH".into());
    }
    let modules = clients_dir().join("node_modules");
    if !modules.join("pg/package.json").exists() {
        let ok = Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund"])
            .current_dir(clients_dir())
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            return Err(format!("`npm ci` in {} failed", clients_dir().display()));
        }
    }
    Ok(modules)
}

#[test]
fn node_postgres() {
    let Some(_) = or_skip(node_modules(), "node-postgres") else {
        return;
    };
    let served = Served::start();
    let mut cmd = Command::new("node");
    cmd.arg(clients_dir().join("node_pg.js"))
        .arg(served.port().to_string());
    let r = results(cmd);
    assert_eq!(
        r["select"],
        json!([[1, "apple", 0.5, "2024-01-31T12:00:00.000Z"]])
    );
    // count and sum are bigints, which node-postgres gives as strings.
    assert_eq!(r["aggregate"], json!(["2", "3"]));
    assert_eq!(r["null"], json!(["pear"]));
    assert_eq!(r["in-transaction"].as_f64(), Some(1.0));
    assert_eq!(r["after-rollback"].as_f64(), Some(0.5));
    assert_eq!(r["duplicate"], json!("23505"));
    assert_eq!(r["unknown-table"], json!("42P01"));
    assert_eq!(r["after-errors"], json!("pear"));
}

/// psycopg installed under cargo's test scratch directory (kept between runs).
fn psycopg_path() -> Result<PathBuf, String> {
    if !runs("python3", "--version") {
        return Err("`python3` is not on the PATH".into());
    }
    let target = Path::new(env!("CARGO_TARGET_TMPDIR")).join("psycopg");
    let present = Command::new("python3")
        .args(["-c", "import psycopg"])
        .env("PYTHONPATH", &target)
        .status()
        .is_ok_and(|s| s.success());
    if !present {
        let ok = Command::new("python3")
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "--target",
            ])
            .arg(&target)
            .arg("psycopg[binary]==3.*")
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            return Err("`pip install psycopg[binary]` failed".into());
        }
    }
    Ok(target)
}

#[test]
fn psycopg() {
    let Some(path) = or_skip(psycopg_path(), "psycopg") else {
        return;
    };
    let served = Served::start();
    let mut cmd = Command::new("python3");
    cmd.arg(clients_dir().join("psycopg_client.py"))
        .arg(served.port().to_string())
        .env("PYTHONPATH", path);
    let r = results(cmd);
    assert_eq!(r["group"], json!([["north", 2, 2.0], ["south", 1, null]]));
    assert_eq!(
        r["typed"],
        json!([1, true, "2024-01-31T12:00:00.500000+00:00"])
    );
    assert_eq!(r["filter"], json!([3]));
    assert_eq!(r["committed"], json!(10.0));
    assert_eq!(r["undefined-table"], json!("42P01"));
    assert_eq!(r["rolled-back"], json!(10.0));
    assert_eq!(r["duplicate"], json!("23505"));
    assert_eq!(r["too-long"], json!("22001"));
    assert_eq!(r["copied"], json!(10));
}

/// `--password`: SCRAM-SHA-256 with the right password connects; a wrong or missing one
/// is refused before any statement runs.
#[test]
fn a_password_is_checked_by_scram() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let conn = vev::Connection::open(dir.path().join("scram.vev")).expect("open");
    let opts = vev_pg::ServeOptions {
        listen: "127.0.0.1:0".parse().expect("an address"),
        password: Some("s3cret pass".into()),
    };
    let server = vev_pg::Server::start(conn, &opts).expect("the server starts");
    let port = server.local_addr().port();
    let rt = tokio::runtime::Runtime::new().expect("a runtime");
    let connect = |password: Option<&str>| {
        let mut config = tokio_postgres::Config::new();
        config
            .host("127.0.0.1")
            .port(port)
            .user("vev")
            .dbname("app");
        if let Some(p) = password {
            config.password(p);
        }
        rt.block_on(async move {
            let (client, connection) = config.connect(tokio_postgres::NoTls).await?;
            tokio::spawn(connection);
            let row = client.query_one("SELECT 40 + 2", &[]).await?;
            Ok::<i32, tokio_postgres::Error>(row.get(0))
        })
    };
    assert_eq!(
        connect(Some("s3cret pass")).expect("the right password"),
        42
    );
    let wrong = connect(Some("s3cret")).expect_err("a wrong password is refused");
    assert_eq!(wrong.code().map(|c| c.code()), Some("28P01"), "{wrong}");
    assert!(connect(None).is_err(), "no password is refused");
    server.shutdown();
}

/// pgjdbc's jar (Debian's `libpostgresql-jdbc-java`) and a `java` that runs a source file.
fn jdbc_jar() -> Result<PathBuf, String> {
    if !runs("java", "-version") {
        return Err("`java` is not on the PATH".into());
    }
    let jar = PathBuf::from("/usr/share/java/postgresql.jar");
    if !jar.exists() {
        return Err(format!(
            "{} is missing (apt-get install libpostgresql-jdbc-java)",
            jar.display()
        ));
    }
    Ok(jar)
}

#[test]
fn jdbc() {
    let Some(jar) = or_skip(jdbc_jar(), "the PostgreSQL JDBC driver") else {
        return;
    };
    let served = Served::start();
    let mut cmd = Command::new("java");
    cmd.arg("-cp")
        .arg(jar)
        .arg(clients_dir().join("JdbcClient.java"))
        .arg(served.port().to_string());
    let r = results(cmd);
    // Every value below is what the same program printed against PostgreSQL 15.
    assert_eq!(r["version"], json!("PostgreSQL"));
    assert_eq!(r["batch"], json!(3));
    assert_eq!(
        r["select"],
        json!([
            [2, "p2", "2020-01-02 10:00:00.0", 13.0, true],
            [3, "p3", "2020-01-03 10:00:00.0", 4.5, false]
        ]),
        "the committed update is there, the rolled-back one is not"
    );
    assert_eq!(r["tables"], json!([["public", "person", "TABLE"]]));
    assert_eq!(
        r["columns"],
        json!([
            ["id", "int4", 4, 10, "NO", 1],
            ["name", "varchar", 12, 20, "NO", 2],
            ["born", "timestamp", 93, 29, "YES", 3],
            ["score", "float8", 8, 17, "YES", 4],
            ["ok", "bool", -7, 1, "YES", 5]
        ])
    );
    assert_eq!(r["primary-keys"], json!([["id", 1, "person_pkey"]]));
    assert_eq!(r["no-tables"], json!(false));
    assert_eq!(r["unknown-table"], json!("42P01"));
    assert_eq!(r["duplicate"], json!("23505"));
}
