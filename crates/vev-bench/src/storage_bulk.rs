//! Bulk load, file size, and open-then-query in a new process.
//!
//! A fresh file gets the schema, then `datoms / 5` accounts through `Connection::bulk_load`
//! in transactions of 1,000 accounts; the timed region is the `bulk_load` call, which ends
//! with its checkpoint (segments and root written and synced). The transaction data is made
//! lazily inside it, as an importer reading a file would; a separate untimed pass measures
//! how long making it alone takes. The connection is then dropped (SQLite folds its WAL into
//! the file on close) and the file measured. Finally a child process (this binary's hidden
//! `storage-open` subcommand) opens the file with `Connection::open` and answers one query;
//! it times both itself and prints them as JSON. The file is still in the OS page cache then:
//! this is a warm open, not a cold one.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use serde_json::Value as Json;
use vev::{BulkProgress, Connection, Edn};

use crate::error::BenchError;
use crate::storage_fixture as fx;
use crate::storage_latency::BUILD_ACCOUNTS_PER_TX;

/// The query of the open measurement: one account's attributes by its unique `:acct/id`.
pub const OPEN_QUERY: &str = "[:find ?a ?v :in $ ?id :where [?e :acct/id ?id] [?e ?a ?v]]";

/// What the child process measured.
pub struct OpenRun {
    pub open_ms: f64,
    pub query_ms: f64,
    pub rows: usize,
    /// The child process from spawn to exit, measured by the parent.
    pub process_ms: f64,
}

pub struct BulkRun {
    /// Account datoms asked for (5 per account).
    pub user_datoms: u64,
    /// Datoms `bulk_load` reported, transaction datoms included.
    pub datoms: u64,
    pub txs: u64,
    pub load_s: f64,
    /// Making the transaction data alone (untimed pass).
    pub generate_s: f64,
    pub file_bytes: u64,
    pub open: OpenRun,
}

/// Load `user_datoms` account datoms into a new file at `path` and measure it.
pub fn run(path: &Path, user_datoms: u64) -> Result<BulkRun, BenchError> {
    let accounts = user_datoms / fx::ACCOUNT_ATTRS as u64;
    let start = Instant::now();
    let ops = fx::account_txs(1, accounts, BUILD_ACCOUNTS_PER_TX)
        .map(|tx| tx.len())
        .sum::<usize>();
    let generate_s = start.elapsed().as_secs_f64();
    assert_eq!(ops as u64, accounts);

    eprintln!("bulk: loading {accounts} accounts ({user_datoms} datoms)");
    let conn = Connection::open(path)?;
    conn.transact_edn(fx::SCHEMA_EDN)?;
    let mut report_at = 1_000_000;
    let done = conn.bulk_load(
        fx::account_txs(1, accounts, BUILD_ACCOUNTS_PER_TX),
        &mut |p: &BulkProgress| {
            if p.datoms >= report_at {
                eprintln!("  {} datoms, {:.1} s", p.datoms, p.elapsed.as_secs_f64());
                report_at += 1_000_000;
            }
        },
    )?;
    drop(conn);
    let file_bytes = file_size(path)?;
    eprintln!(
        "bulk: {} datoms in {:.1} s, {} bytes on disk; opening in a new process",
        done.datoms,
        done.elapsed.as_secs_f64(),
        file_bytes
    );
    let open = open_in_child(path, accounts / 2 + 1)?;
    Ok(BulkRun {
        user_datoms,
        datoms: done.datoms,
        txs: done.txs,
        load_s: done.elapsed.as_secs_f64(),
        generate_s,
        file_bytes,
        open,
    })
}

/// The database file plus its WAL and shared-memory files, if any are left.
pub fn file_size(path: &Path) -> Result<u64, BenchError> {
    let mut total = 0;
    for suffix in ["", "-wal", "-shm"] {
        let p = path.with_file_name(format!(
            "{}{suffix}",
            path.file_name().and_then(|n| n.to_str()).unwrap_or("")
        ));
        match std::fs::metadata(&p) {
            Ok(m) => total += m.len(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(BenchError::io("stat", p)(e)),
        }
    }
    Ok(total)
}

/// Run `vev-bench storage-open` on `path` and read what it measured.
pub fn open_in_child(path: &Path, id: u64) -> Result<OpenRun, BenchError> {
    let exe = std::env::current_exe().map_err(BenchError::io("find", "the vev-bench binary"))?;
    let start = Instant::now();
    let out = Command::new(&exe)
        .arg("storage-open")
        .arg("--path")
        .arg(path)
        .arg("--id")
        .arg(id.to_string())
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .map_err(BenchError::io("start", &exe))?;
    let process_ms = start.elapsed().as_secs_f64() * 1e3;
    if !out.status.success() {
        return Err(BenchError::Command {
            command: "vev-bench storage-open",
            dir: path.to_path_buf(),
            status: out.status,
        });
    }
    let doc: Json = serde_json::from_slice(&out.stdout)?;
    let num = |field: &'static str| {
        doc.get(field)
            .and_then(Json::as_f64)
            .ok_or(BenchError::MissingField { field })
    };
    Ok(OpenRun {
        open_ms: num("open_ms")?,
        query_ms: num("query_ms")?,
        rows: num("rows")? as usize,
        process_ms,
    })
}

/// The child's side: open `path`, answer `OPEN_QUERY` for account `id`, print the times.
pub fn open_and_query(path: &Path, id: u64) -> Result<String, BenchError> {
    let start = Instant::now();
    let conn = Connection::open(path)?;
    let open_ms = start.elapsed().as_secs_f64() * 1e3;
    let start = Instant::now();
    let result = conn
        .db()
        .q(OPEN_QUERY, &[Edn::Integer(id as i64)])
        .map_err(vev::Error::from)?;
    let rows = result.len();
    let query_ms = start.elapsed().as_secs_f64() * 1e3;
    if rows != fx::ACCOUNT_ATTRS {
        return Err(BenchError::OpenQueryRows { id, rows });
    }
    Ok(serde_json::json!({"open_ms": open_ms, "query_ms": query_ms, "rows": rows}).to_string())
}
