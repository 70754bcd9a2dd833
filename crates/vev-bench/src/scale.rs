//! `vev-bench scale` (issue 24): the people-and-friends graph (`vev::sample::People`) at
//! several sizes, in one run:
//!
//! 1. loaded through ordinary transactions of `tx_people` people (about 6.5 datoms each)
//!    into a new file, generated beforehand, timed from opening the file to closing it;
//! 2. the same data through `bulk_load` into a second file, timed the same way;
//! 3. file bytes per datom of both;
//! 4. a fresh process (`scale-probe`) opens the transactions' file read only, touches every
//!    index (four orders, current and history), reads its peak resident memory (VmHWM), then
//!    times the aggregate, a selective join, point pulls and the reach rule both ways, and
//!    exports `:person/city` and `:person/age` as CSV;
//! 5. DuckDB (the pinned PyPI wheel, in a virtual environment) runs the same aggregate over
//!    the two attributes as tables joined on the entity (`bench/star/duckdb_group_by.py`);
//!    its answer is checked against Vev's.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value as Json;
use vev::{Connection, OpenOptions, TxOp};

use crate::error::BenchError;
use crate::report::Machine;
use crate::storage_bulk::file_size;

pub struct ScaleConfig {
    /// Approximate datoms of each size (people = datoms / 6.5).
    pub datoms: Vec<u64>,
    /// People per transaction of the transactional load.
    pub tx_people: usize,
    /// Timed runs of each query in the probe.
    pub runs: usize,
    /// Run DuckDB's side of the aggregate.
    pub duckdb: bool,
    /// Keep the database files here instead of a temporary directory.
    pub dir: Option<PathBuf>,
}

/// One load of a size.
pub struct Load {
    pub elapsed: Duration,
    pub txs: usize,
    pub file_bytes: u64,
}

pub struct DuckdbAgg {
    pub version: String,
    pub joined_ms: f64,
    pub one_table_ms: f64,
}

pub struct SizeResult {
    pub people: usize,
    /// Datoms in the current EAVT index after the load (schema and transaction datoms too).
    pub datoms: u64,
    pub transactions: Load,
    pub bulk: Load,
    /// The probe's JSON object.
    pub probe: Json,
    pub duckdb: Option<DuckdbAgg>,
}

pub struct ScaleResults {
    pub machine: Machine,
    pub command: String,
    pub tx_people: usize,
    pub sizes: Vec<SizeResult>,
}

/// Average datoms a generated person adds (email, name, age, city, 2.5 friends).
const DATOMS_PER_PERSON: f64 = 6.5;

fn vev_err(e: impl Into<vev::Error>) -> BenchError {
    BenchError::from(e.into())
}

/// The generated transactions for `people`, `per_tx` people each, parsed.
fn generate(people: usize, per_tx: usize) -> Result<Vec<Vec<TxOp>>, BenchError> {
    let mut generator = vev::sample::People::new(42);
    (0..people.div_ceil(per_tx))
        .map(|k| {
            let text = generator.tx(k * per_tx, ((k + 1) * per_tx).min(people));
            let ops = vev::parse_tx(&text).map_err(vev_err)?;
            Ok(ops.into_iter().map(|s| s.op).collect())
        })
        .collect()
}

/// Open a new file, transact the schema, load `txs` (one by one or through `bulk_load`),
/// close; the time from opening to closing.
fn load(path: &Path, txs: Vec<Vec<TxOp>>, bulk: bool) -> Result<Load, BenchError> {
    let n = txs.len();
    let start = Instant::now();
    let conn = Connection::open_with(path, &OpenOptions::default()).map_err(vev_err)?;
    conn.transact_edn(vev::sample::PEOPLE_SCHEMA)
        .map_err(vev_err)?;
    if bulk {
        conn.bulk_load(txs, &mut |_| {}).map_err(vev_err)?;
    } else {
        for (k, ops) in txs.iter().enumerate() {
            conn.transact(ops).map_err(vev_err)?;
            if k % 200 == 199 {
                eprintln!("  {} of {n} transactions", k + 1);
            }
        }
    }
    drop(conn);
    let elapsed = start.elapsed();
    Ok(Load {
        elapsed,
        txs: n,
        file_bytes: file_size(path)?,
    })
}

/// Run `vev-bench scale-probe` on `path` in a new process and read its JSON.
fn probe_in_child(
    path: &Path,
    people: usize,
    runs: usize,
    export: &Path,
) -> Result<Json, BenchError> {
    let exe = std::env::current_exe().map_err(BenchError::io("find", "the vev-bench binary"))?;
    let out = Command::new(&exe)
        .arg("scale-probe")
        .arg("--path")
        .arg(path)
        .args(["--people", &people.to_string(), "--runs", &runs.to_string()])
        .arg("--export")
        .arg(export)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .map_err(BenchError::io("start", &exe))?;
    if !out.status.success() {
        return Err(BenchError::Command {
            command: "vev-bench scale-probe",
            dir: path.to_path_buf(),
            status: out.status,
        });
    }
    Ok(serde_json::from_slice(&out.stdout)?)
}

/// DuckDB's aggregate over the exported CSV files; checked against Vev's answer.
fn duckdb_aggregate(python: &Path, csv: &Path, vev_answer: &str) -> Result<DuckdbAgg, BenchError> {
    let script = crate::duckdb::workspace_dir().join("bench/star/duckdb_group_by.py");
    let out = Command::new(python)
        .arg(&script)
        .arg(csv)
        .arg("20")
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .map_err(BenchError::io("start", python))?;
    if !out.status.success() {
        return Err(BenchError::Command {
            command: "bench/star/duckdb_group_by.py",
            dir: csv.to_path_buf(),
            status: out.status,
        });
    }
    let line = crate::duckdb::last_line(&out.stdout).ok_or(BenchError::MissingField {
        field: "duckdb_group_by.py's JSON line",
    })?;
    let doc: Json = serde_json::from_str(&line)?;
    let num = |field: &'static str| {
        doc.get(field)
            .and_then(Json::as_f64)
            .ok_or(BenchError::MissingField { field })
    };
    check_same_groups(vev_answer, doc.get("rows"))?;
    Ok(DuckdbAgg {
        version: doc
            .get("version")
            .and_then(Json::as_str)
            .unwrap_or("?")
            .to_string(),
        joined_ms: num("joined_ms")?,
        one_table_ms: num("one_table_ms")?,
    })
}

/// Vev's `#{[city count avg] ...}` against DuckDB's `[[city, count, avg], ...]`: the same
/// cities and counts, averages equal to 1e-9.
fn check_same_groups(vev_answer: &str, duck: Option<&Json>) -> Result<(), BenchError> {
    let mismatch = || BenchError::AnswersDiffer { queries: 1 };
    let vev_rows = match vev::edn::parse(vev_answer).map_err(vev_err)? {
        vev::Edn::Set(rows) => rows,
        _ => return Err(mismatch()),
    };
    let duck = duck.and_then(Json::as_array).ok_or_else(mismatch)?;
    if duck.len() != vev_rows.len() {
        return Err(mismatch());
    }
    for row in vev_rows {
        let vev::Edn::Vector(cells) = row else {
            return Err(mismatch());
        };
        let (Some(vev::Edn::String(city)), Some(vev::Edn::Integer(n)), Some(avg)) =
            (cells.first(), cells.get(1), cells.get(2))
        else {
            return Err(mismatch());
        };
        let avg = match avg {
            vev::Edn::Float(x) => *x,
            vev::Edn::Integer(x) => *x as f64,
            _ => return Err(mismatch()),
        };
        let found = duck.iter().any(|d| {
            d.get(0).and_then(Json::as_str) == Some(city.as_str())
                && d.get(1).and_then(Json::as_i64) == Some(*n)
                && d.get(2)
                    .and_then(Json::as_f64)
                    .is_some_and(|x| (x - avg).abs() <= 1e-9 * avg.abs().max(1.0))
        });
        if !found {
            return Err(mismatch());
        }
    }
    Ok(())
}

fn one_size(
    cfg: &ScaleConfig,
    dir: &Path,
    target: u64,
    python: Option<&Path>,
) -> Result<SizeResult, BenchError> {
    let people = (target as f64 / DATOMS_PER_PERSON).ceil() as usize;
    eprintln!("scale: {people} people (~{target} datoms): generating");
    let tx_path = dir.join(format!("people-{target}-tx.vev"));
    let bulk_path = dir.join(format!("people-{target}-bulk.vev"));
    let transactions = load(&tx_path, generate(people, cfg.tx_people)?, false)?;
    eprintln!(
        "scale: loaded through transactions in {:.1?}",
        transactions.elapsed
    );
    let bulk = load(&bulk_path, generate(people, cfg.tx_people)?, true)?;
    eprintln!("scale: bulk-loaded in {:.1?}", bulk.elapsed);
    std::fs::remove_file(&bulk_path).map_err(BenchError::io("remove", &bulk_path))?;
    let csv = dir.join(format!("csv-{target}"));
    std::fs::create_dir_all(&csv).map_err(BenchError::io("create", &csv))?;
    let probe = probe_in_child(&tx_path, people, cfg.runs, &csv)?;
    let datoms = probe
        .get("index_datoms")
        .and_then(|c| c.get(0))
        .and_then(Json::as_u64)
        .ok_or(BenchError::MissingField {
            field: "index_datoms",
        })?;
    let duckdb = match python {
        Some(python) => {
            let answer = probe["aggregate"]["groups"].as_str().unwrap_or("");
            Some(duckdb_aggregate(python, &csv, answer)?)
        }
        None => None,
    };
    if cfg.dir.is_none() {
        std::fs::remove_file(&tx_path).map_err(BenchError::io("remove", &tx_path))?;
    }
    Ok(SizeResult {
        people,
        datoms,
        transactions,
        bulk,
        probe,
        duckdb,
    })
}

pub fn run(cfg: &ScaleConfig, command: String) -> Result<ScaleResults, BenchError> {
    let mut machine = Machine::probe();
    let python = if cfg.duckdb {
        let exe =
            std::env::current_exe().map_err(BenchError::io("find", "the vev-bench binary"))?;
        // <target>/release/vev-bench: the virtual environment goes in <target>.
        let target = exe
            .parent()
            .and_then(Path::parent)
            .ok_or(BenchError::MissingField {
                field: "the target directory",
            })?;
        Some(crate::duckdb::venv_python(&target.join("duckdb-venv"))?)
    } else {
        None
    };
    let temp = tempfile::Builder::new()
        .prefix("vev-bench-scale-")
        .tempdir()
        .map_err(BenchError::io("create", std::env::temp_dir()))?;
    let dir = cfg.dir.clone().unwrap_or_else(|| temp.path().to_path_buf());
    std::fs::create_dir_all(&dir).map_err(BenchError::io("create", &dir))?;
    let mut sizes = Vec::new();
    for &target in &cfg.datoms {
        sizes.push(one_size(cfg, &dir, target, python.as_deref())?);
    }
    machine.finish();
    Ok(ScaleResults {
        machine,
        command,
        tx_people: cfg.tx_people,
        sizes,
    })
}
