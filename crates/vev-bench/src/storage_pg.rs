//! `vev-bench storage --backend postgres|s3`: Vev's shared storage (issue 23), on a
//! throwaway PostgreSQL 15 with its default durability (`fsync`, `synchronous_commit` on),
//! started here on a loopback port and stopped at the end; with `s3`, the segments in an
//! S3-compatible object store (a throwaway moto server, PyPI `moto[server]` pinned in
//! `scripts/moto-requirements.txt`, on another loopback port) and the log, root and lease in
//! that PostgreSQL. In one run:
//!
//! 1. Durable small transactions: one new account (`:acct/id`, `:acct/balance`) per
//!    transaction through a writer `Connection`, against the floor of a bare
//!    `INSERT INTO floor VALUES ($1, $2)` of the same row (autocommit, so each is its own
//!    `COMMIT`) on one prepared client; blocks of 20 alternate between the two.
//! 2. A reader's lag: a writer commits one transaction every 2 ms; a read-only connection
//!    (its follower `LISTEN`s) in a thread of this process looks at `db()` (never `sync`)
//!    every 50 µs; the lag of a transaction is when the reader first saw it minus when the
//!    writer's `transact` returned (0 when the reader saw it first).
//! 3. Read throughput: the query benchmark's people database (20,000 people) stored in
//!    PostgreSQL; 1, 2 and 4 reader processes (`vev-bench storage-pg-read`) each open it
//!    read-only and run the people queries (q1 ... qpred2) round robin for a fixed time.
//! 4. Opening a large database: `--pg-open-datoms` datoms of accounts bulk-loaded and
//!    checkpointed, then opened read-only in a new process (`vev-bench storage-open`,
//!    which also looks one account up).

use std::time::{Duration, Instant};

use serde_json::Value as Json;
use vev::{BulkProgress, Connection, OpenOptions};
use vev_objstore::testing::MotoServer;
use vev_postgres::testing::TempServer;

use crate::error::BenchError;
use crate::queries::{self, QueryForm, PEOPLE};
use crate::query_fixture::QueryFixture;
use crate::stats::{median, quantile};
use crate::storage_fixture as fx;

/// What `vev-bench storage --backend postgres` runs.
pub struct PgConfig {
    /// Timed transactions of Vev and of the floor each.
    pub txs: usize,
    /// Transactions the lag is measured over.
    pub lag_txs: usize,
    /// How long each reader process runs queries.
    pub read_seconds: f64,
    /// Reader process counts.
    pub readers: Vec<usize>,
    /// Datoms of the database opened in a new process (0 skips it).
    pub open_datoms: u64,
}

/// The bucket the object-store databases live in (one prefix each).
const BUCKET: &str = "vev-bench";

/// Where the suite's databases live: PostgreSQL, and with `moto` their segments in an
/// object store.
struct Stores {
    pg: TempServer,
    moto: Option<MotoServer>,
}

impl Stores {
    /// A new database `name`: its URL, and the PostgreSQL URL of its log (the same without
    /// an object store).
    fn create(&self, name: &str) -> Result<(String, String), BenchError> {
        let log = self
            .pg
            .create_db(name)
            .map_err(|e| BenchError::Server { message: e })?;
        Ok(match &self.moto {
            None => (log.clone(), log),
            Some(m) => (m.url(BUCKET, name, &log), log),
        })
    }

    /// Where the segments are, for headings.
    fn segments_in(&self) -> &'static str {
        match self.moto {
            None => "PostgreSQL",
            Some(_) => "the object store",
        }
    }
}

/// Run everything; the markdown report. `s3`: the segments in a moto object store.
pub fn run(cfg: &PgConfig, s3: bool) -> Result<String, BenchError> {
    let pg = TempServer::start().map_err(|e| BenchError::Server { message: e })?;
    let moto = if s3 {
        vev_objstore::testing::credentials();
        let exe = std::env::current_exe().map_err(BenchError::io("find", "vev-bench"))?;
        // The venv beside the build's own files (`target/release/`).
        let dir = exe.parent().unwrap_or(std::path::Path::new("."));
        let moto = MotoServer::start(dir, &[]).map_err(|e| BenchError::Server { message: e })?;
        moto.create_bucket(BUCKET)
            .map_err(|e| BenchError::Server { message: e })?;
        Some(moto)
    } else {
        None
    };
    let pg = Stores { pg, moto };
    let mut out = String::new();
    let title = match pg.moto {
        None => "## Vev on PostgreSQL storage (PostgreSQL 15 on 127.0.0.1, default durability)",
        Some(_) => {
            "## Vev on object-store storage (segments in moto on 127.0.0.1; log, root and \
             lease in PostgreSQL 15 on 127.0.0.1, default durability)"
        }
    };
    out.push_str(&format!(
        "{title}\n\nMachine: {} cores; load average before: {}.\n\n",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        load_average()
    ));
    out.push_str(&latency(&pg, cfg.txs)?);
    out.push_str(&lag(&pg, cfg.lag_txs)?);
    out.push_str(&read_throughput(&pg, cfg)?);
    if cfg.open_datoms > 0 {
        out.push_str(&open_large(&pg, cfg.open_datoms)?);
    }
    Ok(out)
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".to_owned())
}

const ACCOUNT_SCHEMA: &str = r#"[
 {:db/ident :acct/id :db/valueType :db.type/long :db/cardinality :db.cardinality/one :db/unique :db.unique/identity}
 {:db/ident :acct/balance :db/valueType :db.type/long :db/cardinality :db.cardinality/one}]"#;

fn account_tx(id: u64) -> String {
    format!("[{{:acct/id {id} :acct/balance {}}}]", id * 7919 % 100_000)
}

fn us_stats(samples: &[f64]) -> String {
    format!(
        "{:.0} | {:.0} | {:.0}",
        median(samples),
        quantile(samples, 0.9),
        quantile(samples, 0.99)
    )
}

/// Phase 1: Vev's durable commit against a bare INSERT's.
fn latency(pg: &Stores, txs: usize) -> Result<String, BenchError> {
    eprintln!("postgres: {txs} small transactions, Vev and the floor interleaved");
    let (url, log) = pg.create("latency")?;
    let conn = Connection::open(&url)?;
    conn.transact_edn(ACCOUNT_SCHEMA)?;
    let mut floor = postgres::Client::connect(&log, postgres::NoTls)?;
    floor.batch_execute("CREATE TABLE floor (id bigint PRIMARY KEY, balance bigint NOT NULL)")?;
    let insert = floor.prepare("INSERT INTO floor VALUES ($1, $2)")?;
    let (mut vev_us, mut floor_us) = (Vec::new(), Vec::new());
    let warmup = 20;
    for block in 0..(txs + warmup).div_ceil(20) {
        for i in 0..20 {
            let id = (block * 20 + i + 1) as u64;
            let text = account_tx(id);
            let start = Instant::now();
            conn.transact_edn(&text)?;
            let took = start.elapsed().as_secs_f64() * 1e6;
            let start2 = Instant::now();
            floor.execute(&insert, &[&(id as i64), &((id * 7919 % 100_000) as i64)])?;
            let took2 = start2.elapsed().as_secs_f64() * 1e6;
            if id as usize > warmup {
                vev_us.push(took);
                floor_us.push(took2);
            }
        }
    }
    let ratio = median(&vev_us) / median(&floor_us);
    Ok(format!(
        "### Durable small transactions ({} each after {warmup} untimed)\n\n\
         | | p50 µs | p90 µs | p99 µs |\n|---|---:|---:|---:|\n\
         | Vev, segments in {} (`transact_edn`, 1 entity, 2 datoms + the tx's) | {} |\n\
         | floor: bare `INSERT` of the same row, autocommit | {} |\n\n\
         Vev / floor at p50: **{ratio:.2}x** (target ≤ 1.5x).\n\n",
        vev_us.len(),
        pg.segments_in(),
        us_stats(&vev_us),
        us_stats(&floor_us)
    ))
}

/// Phase 2: how long after the writer's acknowledgement a following reader has each commit.
fn lag(pg: &Stores, txs: usize) -> Result<String, BenchError> {
    eprintln!("postgres: a reader's lag over {txs} transactions");
    let (url, _) = pg.create("lag")?;
    let writer = Connection::open(&url)?;
    writer.transact_edn(ACCOUNT_SCHEMA)?;
    let reader = Connection::open_with(&url, &OpenOptions::read_only())?;
    let first_t = writer.db().basis_t() + 1;
    let last_t = first_t + txs as u64 - 1;
    let watcher = std::thread::spawn(move || {
        let mut seen: Vec<(u64, Instant)> = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(600);
        let mut at = 0;
        while at < last_t && Instant::now() < deadline {
            let t = reader.db().basis_t();
            if t > at {
                let now = Instant::now();
                seen.extend((at.max(first_t - 1) + 1..=t).map(|t| (t, now)));
                at = t;
            }
            std::thread::sleep(Duration::from_micros(50));
        }
        seen
    });
    let mut acked = Vec::with_capacity(txs);
    for i in 0..txs {
        let report = writer.transact_edn(&account_tx(1_000_000 + i as u64))?;
        acked.push((report.db_after.basis_t(), Instant::now()));
        std::thread::sleep(Duration::from_millis(2));
    }
    let seen = watcher.join().map_err(|_| BenchError::Server {
        message: "the lag watcher panicked".to_owned(),
    })?;
    let seen: std::collections::HashMap<u64, Instant> = seen.into_iter().collect();
    let lags: Vec<f64> = acked
        .iter()
        .filter_map(|(t, at)| {
            seen.get(t)
                .map(|s| s.saturating_duration_since(*at).as_secs_f64() * 1e6)
        })
        .collect();
    Ok(format!(
        "### A reader's lag behind the writer ({} transactions, one every 2 ms)\n\n\
         A read-only connection with its default follower (`LISTEN`, 1 s poll interval), in \
         this process; `db()` only. p50 **{:.0} µs**, p90 {:.0} µs, p99 **{:.0} µs**, max \
         {:.0} µs; {} of {} seen.\n\n",
        acked.len(),
        median(&lags),
        quantile(&lags, 0.9),
        quantile(&lags, 0.99),
        lags.iter().copied().fold(0.0, f64::max),
        lags.len(),
        acked.len()
    ))
}

/// The people queries of the query benchmark (plain queries on the people database).
fn people_queries() -> Vec<(&'static str, &'static str, &'static [&'static str])> {
    queries::all()
        .into_iter()
        .filter(|q| q.db == PEOPLE)
        .filter_map(|q| match q.form {
            QueryForm::Query { text, inputs } => Some((q.name, text, inputs)),
            QueryForm::Pull { .. } => None,
        })
        .collect()
}

/// Phase 3: per-process read throughput of 1, 2, 4 reader processes on one database.
fn read_throughput(pg: &Stores, cfg: &PgConfig) -> Result<String, BenchError> {
    eprintln!("postgres: loading the people database");
    let (url, _) = pg.create("people")?;
    let fixture = QueryFixture::build(1, &queries::all());
    {
        let conn = Connection::open(&url)?;
        crate::vev_query::load_into(&conn, fixture.db(PEOPLE))?;
        conn.checkpoint()?;
    }
    let names: Vec<&str> = people_queries().iter().map(|q| q.0).collect();
    let mut rows = String::new();
    for &n in &cfg.readers {
        eprintln!("postgres: {n} reader processes for {} s", cfg.read_seconds);
        let exe = std::env::current_exe().map_err(BenchError::io("find", "vev-bench"))?;
        let children: Vec<std::process::Child> = (0..n)
            .map(|_| {
                std::process::Command::new(&exe)
                    .args(["storage-pg-read", "--url", &url, "--seconds"])
                    .arg(cfg.read_seconds.to_string())
                    .stdout(std::process::Stdio::piped())
                    .spawn()
                    .map_err(BenchError::io("start", &exe))
            })
            .collect::<Result<_, _>>()?;
        let mut per = Vec::new();
        for c in children {
            let out = c
                .wait_with_output()
                .map_err(BenchError::io("wait for", &exe))?;
            let doc: Json = serde_json::from_slice(&out.stdout)?;
            let q = doc.get("queries").and_then(Json::as_f64);
            let s = doc.get("seconds").and_then(Json::as_f64);
            let (Some(q), Some(s)) = (q, s) else {
                return Err(BenchError::MissingField { field: "queries" });
            };
            per.push(q / s);
        }
        let total: f64 = per.iter().sum();
        rows.push_str(&format!(
            "| {n} | {} | {total:.0} |\n",
            per.iter()
                .map(|p| format!("{p:.0}"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    Ok(format!(
        "### Read throughput of reader processes on one shared database\n\n\
         The query benchmark's people database (20,000 people, {} datoms) in {}, \
         checkpointed; each process opens it read-only and runs {} ({}) round robin for \
         {} s (after one untimed round).\n\n\
         | processes | queries/s per process | total |\n|---:|---|---:|\n{rows}\n",
        fixture.db(PEOPLE).datoms.len(),
        pg.segments_in(),
        names.len(),
        names.join(", "),
        cfg.read_seconds
    ))
}

/// The reader process of phase 3: JSON `{"queries": N, "seconds": S}`.
pub fn read_child(url: &str, seconds: f64) -> Result<String, BenchError> {
    let conn = Connection::open_with(url, &OpenOptions::read_only())?;
    let prepared: Vec<(vev::Query, Vec<vev::Edn>)> = people_queries()
        .into_iter()
        .map(|(_, text, inputs)| {
            let q = vev::Query::parse(text).map_err(vev::Error::from)?;
            let args = inputs
                .iter()
                .map(|i| vev::edn::parse(i).map_err(vev::Error::from))
                .collect::<Result<Vec<_>, _>>()?;
            Ok::<_, BenchError>((q, args))
        })
        .collect::<Result<_, _>>()?;
    let opts = vev::QueryOptions::default();
    let run = |n: &mut u64| -> Result<(), BenchError> {
        for (q, args) in &prepared {
            conn.db()
                .q_prepared(q, args, &opts)
                .map_err(vev::Error::from)?;
            *n += 1;
        }
        Ok(())
    };
    let mut warm = 0;
    run(&mut warm)?;
    let start = Instant::now();
    let mut n = 0;
    while start.elapsed().as_secs_f64() < seconds {
        run(&mut n)?;
    }
    let s = start.elapsed().as_secs_f64();
    Ok(serde_json::json!({"queries": n, "seconds": s}).to_string())
}

/// Phase 4: bulk-load `datoms` datoms, then open the database in a new process.
fn open_large(pg: &Stores, datoms: u64) -> Result<String, BenchError> {
    let (url, log) = pg.create("large")?;
    let accounts = datoms / fx::ACCOUNT_ATTRS as u64;
    eprintln!("postgres: bulk-loading {accounts} accounts ({datoms} datoms)");
    let conn = Connection::open(&url)?;
    conn.transact_edn(fx::SCHEMA_EDN)?;
    let done = conn.bulk_load(
        fx::account_txs(1, accounts, 1_000),
        &mut |_: &BulkProgress| {},
    )?;
    drop(conn);
    let size: i64 = postgres::Client::connect(&log, postgres::NoTls)?
        .query_one("SELECT pg_database_size(current_database())", &[])?
        .get(0);
    let objects = match &pg.moto {
        None => String::new(),
        Some(_) => {
            let target = vev_objstore::Target::parse(&url)?;
            let n = vev_objstore::S3Objects::new(&target)?
                .keys(usize::MAX)?
                .len();
            format!("; {n} objects")
        }
    };
    let mut opens = Vec::new();
    for _ in 0..3 {
        opens.push(crate::storage_bulk::open_in_child(
            std::path::Path::new(&url),
            accounts / 2 + 1,
        )?);
    }
    let cells = opens
        .iter()
        .map(|o| {
            format!(
                "open {:.0} ms + query {:.1} ms (process {:.0} ms)",
                o.open_ms, o.query_ms, o.process_ms
            )
        })
        .collect::<Vec<_>>()
        .join("; ");
    Ok(format!(
        "### Opening a large database from {}\n\n\
         {} datoms ({} accounts bulk-loaded in {:.1} s, checkpointed; PostgreSQL database \
         {:.0} MB{objects}), \
         opened as a writer in a new process that then looks one account up \
         (`vev-bench storage-open`), three times: {cells}. Target < 2 s.\n\n",
        pg.segments_in(),
        done.datoms,
        accounts,
        done.elapsed.as_secs_f64(),
        size as f64 / 1e6
    ))
}
