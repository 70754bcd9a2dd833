//! `vev-bench`: Vev's comparative benchmarks.
//!
//! `vev-bench core` runs the core suite in one process and prints a markdown table:
//! (c) memory first, while the process is still small, so the VmRSS delta is the database's;
//! (b) small-transaction latency on a small and on the just-built large database; then (a)
//! the fixture load in Vev and, through node, in DataScript. Progress goes to stderr, the
//! table to stdout.
//!
//! `vev-bench query` runs the query suite: datascript-bench's queries on one fixture
//! built here, in Vev (`vev_query.rs`), in DataScript under node and in
//! Datalevin on its JVM, in memory and on disk, each peer installed on first use.
//!
//! `vev-bench storage` runs the storage suite: durable small transactions in Vev, the
//! raw SQLite floor and Datalevin on disk, Vev from 1, 4 and 8 threads at once, then bulk load, file size and the time to open a
//! database in a new process (the hidden `storage-open` subcommand) and answer one query.
//!
//! `vev-bench fulltext` runs the full-text suite: a generated corpus inserted in transactions
//! of 1 to 500 documents into Vev without and with `:db/fulltext`, SQLite FTS5 and tantivy,
//! then a fixed query set against the three indexes (`fulltext.rs`).
//!
//! `vev-bench pgbench` runs stock pgbench 15 against `vev serve` (in this process) and a
//! throwaway PostgreSQL 15, interleaved, and checks the tpcb invariant (`pgbench.rs`).
//!
//! `vev-bench scale` loads the people graph at 1M-50M datoms through transactions and
//! `bulk_load`, then measures memory per datom, file size, the aggregate against DuckDB, a
//! join, pulls and the reach rule in a fresh process (`scale.rs`, issue 24).
//!
//! `vev-bench duckdb` builds Vev's DuckDB extension and runs `bench/duckdb/bench.py` in a
//! virtual environment with the pinned `duckdb` wheel: Vev through the extension against a
//! `datoms` table in DuckDB and in SQLite, the same scenarios on one dataset per size, every
//! call timed from one Python client, answers checked equal (`duckdb.rs`).

mod bulk;
mod datascript;
mod duckdb;
mod duckdb_output;
mod duckdb_report;
mod error;
mod fixture;
mod fulltext;
mod fulltext_corpus;
mod fulltext_insert;
mod fulltext_report;
mod fulltext_search;
mod fulltext_vev;
mod latency;
mod mbrainz;
mod mbrainz_export;
mod mbrainz_peers;
mod mbrainz_report;
mod mbrainz_rows;
mod peers;
mod pgbench;
mod pgbench_output;
mod pgbench_report;
mod pgbench_servers;
mod queries;
mod query_fixture;
mod query_report;
mod report;
mod scale;
mod scale_probe;
mod scale_report;
mod stats;
mod storage;
mod storage_bulk;
mod storage_concurrent;
mod storage_fixture;
mod storage_latency;
mod storage_pg;
mod storage_report;
mod vev_query;

use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

use crate::error::BenchError;
use crate::report::CoreResults;

/// mimalloc, with freed memory kept for reuse (see `vev::alloc`). The `system-alloc` feature
/// keeps the system allocator, to measure what an application that does not switch gets.
#[cfg(not(feature = "system-alloc"))]
#[global_allocator]
static ALLOCATOR: vev::alloc::MiMalloc = vev::alloc::MiMalloc;

#[derive(Parser)]
#[command(name = "vev-bench", about = "Vev's comparative benchmarks")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Fixture load against DataScript, small-transaction latency, memory per datom.
    Core(CoreConfig),
    /// datascript-bench's queries in Vev, DataScript and Datalevin (memory and disk).
    Query(QueryConfig),
    /// Durable small transactions vs raw SQLite and Datalevin; bulk load; open time.
    Storage(StorageArgs),
    /// Full-text indexing and search: Vev against SQLite FTS5 and tantivy.
    Fulltext(FulltextArgs),
    /// Stock pgbench against `vev serve` and a throwaway PostgreSQL 15, interleaved.
    Pgbench(PgbenchArgs),
    /// Vev's DuckDB extension against a datoms table in DuckDB and in SQLite, from Python.
    Duckdb(DuckdbArgs),
    /// The MusicBrainz workload (issue 22) in Vev, DataScript and Datalevin (memory and disk).
    Mbrainz(MbrainzArgs),
    /// Issue 24: the people graph at 1M-50M datoms: memory, file, loads, aggregate vs DuckDB,
    /// join, pull, reach.
    Scale(ScaleArgs),
    /// Internal: open a database file and answer one query, print the times as JSON.
    #[command(hide = true)]
    StorageOpen(StorageOpenArgs),
    /// Internal: `scale`'s measurements of one file in a fresh process, as JSON.
    #[command(hide = true)]
    ScaleProbe(ScaleProbeArgs),
    /// Internal: a reader process of `storage --backend postgres`.
    #[command(hide = true)]
    StoragePgRead(StoragePgReadArgs),
}

#[derive(Args)]
struct StoragePgReadArgs {
    #[arg(long)]
    url: String,
    #[arg(long)]
    seconds: f64,
}

/// Where `vev-bench storage` stores its databases.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum StorageBackend {
    /// SQLite files, against the raw SQLite floor and Datalevin.
    Sqlite,
    /// A throwaway PostgreSQL 15, against a bare INSERT's floor (`storage_pg.rs`).
    Postgres,
    /// As `postgres`, with the segments in a throwaway S3-compatible object store (moto).
    S3,
}

#[derive(Args)]
struct StorageArgs {
    /// Resident accounts (5 datoms each) of the largest database; the others have 50 and
    /// 2,000.
    #[arg(long, default_value_t = 1_000_000)]
    big_entities: u64,
    /// Untimed transactions of each shape on each database before the timed ones.
    #[arg(long, default_value_t = 5)]
    warmup: usize,
    /// Timed transactions of each shape on each database (the targets ask for at least 40; more
    /// steady the medians, since a commit's fsync time is bimodal on a busy disk).
    #[arg(long, default_value_t = 100)]
    measurements: usize,
    /// Datoms of each bulk load (comma-separated; 0 or none skips it).
    #[arg(long, value_delimiter = ',', default_value = "1000000,10000000")]
    bulk_datoms: Vec<u64>,
    /// Transactions of each shape Datalevin's JVM runs on a scratch database before measuring,
    /// so that its JIT has compiled the transaction path.
    #[arg(long, default_value_t = 200)]
    jvm_warmup: usize,
    /// Skip Datalevin (no Python or JVM needed).
    #[arg(long)]
    no_datalevin: bool,
    /// Transactions of each concurrent-committers cell (1, 4 and 8 threads; 0 skips them).
    #[arg(long, default_value_t = 2_000)]
    concurrent_txs: usize,
    /// Where the databases live (`postgres`: the storage-in-PostgreSQL suite, whose options
    /// are the `--pg-*` ones; `s3`: the same with the segments in an object store).
    #[arg(long, value_enum, default_value = "sqlite")]
    backend: StorageBackend,
    /// PostgreSQL: timed small transactions of Vev and of the floor each.
    #[arg(long, default_value_t = 1_000)]
    pg_txs: usize,
    /// PostgreSQL: transactions a reader's lag is measured over.
    #[arg(long, default_value_t = 1_000)]
    pg_lag_txs: usize,
    /// PostgreSQL: seconds each reader process runs queries.
    #[arg(long, default_value_t = 10.0)]
    pg_read_seconds: f64,
    /// PostgreSQL: reader process counts (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "1,2,4")]
    pg_readers: Vec<usize>,
    /// PostgreSQL: datoms of the database opened in a new process (0 skips it).
    #[arg(long, default_value_t = 1_000_000)]
    pg_open_datoms: u64,
}

#[derive(Args)]
struct FulltextArgs {
    /// Documents in the corpus (the search databases hold all of them).
    #[arg(long, default_value_t = 200_000)]
    docs: usize,
    /// Documents per transaction (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "1,10,100,500")]
    batches: Vec<usize>,
    /// Transactions per peer and batch size, at most: each run inserts the first
    /// `min(docs, max_txs × batch)` documents.
    #[arg(long, default_value_t = 2_000)]
    max_txs: usize,
    /// Timed runs of each query (after the warm-up).
    #[arg(long, default_value_t = 20)]
    reps: usize,
    /// Untimed runs of each query before the timed ones, at least.
    #[arg(long, default_value_t = 1)]
    warmup: usize,
    /// Untimed runs of each query go on for at least this many ms.
    #[arg(long, default_value_t = 200)]
    warmup_ms: u64,
    /// Stop a query's timed runs once they have taken this many ms (at least 3 run).
    #[arg(long, default_value_t = 2_000)]
    budget_ms: u64,
    /// Also write the report to this file (e.g. `bench/history/<date>-fulltext.md`).
    #[arg(long)]
    out: Option<std::path::PathBuf>,
}

#[derive(Args)]
struct PgbenchArgs {
    /// pgbench's scale factor (100,000 accounts each).
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..))]
    scale: u32,
    /// Length of each run (`pgbench -T`).
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..))]
    seconds: u32,
    /// Runs of each cell per system, interleaved Vev, PostgreSQL, Vev, PostgreSQL.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..))]
    rounds: u32,
    /// Where PostgreSQL 15's `initdb`, `pg_ctl`, `postgres` and `pgbench` are.
    #[arg(long, default_value = "/usr/lib/postgresql/15/bin")]
    pg_bin: std::path::PathBuf,
    /// Also write the report to this file (e.g. `bench/history/<date>-pgbench.md`).
    #[arg(long)]
    out: Option<std::path::PathBuf>,
}

#[derive(Args)]
struct DuckdbArgs {
    /// Datoms of each dataset, about (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "100000,1000000")]
    sizes: Vec<u64>,
    /// Turns of each engine per scenario (warm-up, then timed calls), interleaved.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..))]
    rounds: u32,
    /// Timed calls per scenario, engine and round, at most.
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u32).range(5..))]
    reps: u32,
    /// Untimed calls before each engine's timed ones go on for at least this many ms.
    #[arg(long, default_value_t = 100)]
    warmup_ms: u32,
    /// An engine's timed calls of a round stop once they add up to this many ms (at least 5 run).
    #[arg(long, default_value_t = 1_000)]
    budget_ms: u32,
    /// Single-datom transactions per engine and size.
    #[arg(long, default_value_t = 500, value_parser = clap::value_parser!(u32).range(1..))]
    txs: u32,
    /// Also write the report to this file (e.g. `bench/history/<date>-duckdb.md`).
    #[arg(long)]
    out: Option<std::path::PathBuf>,
}

#[derive(Args)]
struct MbrainzArgs {
    /// The data set's scale: tiny, small (1M datoms), medium (10M), large (50M).
    #[arg(long, default_value = "medium", value_parser = parse_scale)]
    scale: vev_mbrainz::Scale,
    /// Timed runs of each query (after the warm-up).
    #[arg(long, default_value_t = 30)]
    reps: usize,
    /// Untimed runs of each query before the timed ones, at least.
    #[arg(long, default_value_t = 1)]
    warmup: usize,
    /// Untimed runs of each query go on for at least this many ms.
    #[arg(long, default_value_t = 2_000)]
    warmup_ms: u64,
    /// Stop a query's timed runs once they have taken this many ms (at least 3 run).
    #[arg(long, default_value_t = 10_000)]
    budget_ms: u64,
    /// Run only these queries (repeatable), e.g. `--only q1 --only collab-net-10`.
    #[arg(long)]
    only: Vec<String>,
    /// Skip DataScript (no node needed).
    #[arg(long)]
    no_datascript: bool,
    /// Skip Datalevin (no Python or JVM needed).
    #[arg(long)]
    no_datalevin: bool,
    /// Stop a peer that prints nothing for this many seconds (a query that does not finish).
    #[arg(long, default_value_t = 1_200)]
    peer_timeout_s: u64,
    /// node's heap limit for DataScript, MB.
    #[arg(long, default_value_t = 12_000)]
    node_heap_mb: u64,
    /// The JVM's heap limit for Datalevin, MB (its data is off the heap, in LMDB).
    #[arg(long, default_value_t = 8_000)]
    jvm_heap_mb: u64,
    /// Also write the report to this file (e.g. `bench/history/<date>-mbrainz.md`).
    #[arg(long)]
    out: Option<std::path::PathBuf>,
}

fn parse_scale(name: &str) -> Result<vev_mbrainz::Scale, String> {
    vev_mbrainz::Scale::parse(name)
        .ok_or_else(|| format!("unknown scale {name:?}: tiny, small, medium or large"))
}

#[derive(Args)]
struct ScaleArgs {
    /// Approximate datoms of each size (comma-separated; 6.5 datoms a person).
    #[arg(long, value_delimiter = ',', default_value = "1000000,10000000")]
    datoms: Vec<u64>,
    /// People per transaction of the transactional load (about 6.5 datoms each).
    #[arg(long, default_value_t = 500)]
    tx_people: usize,
    /// Timed runs of each query.
    #[arg(long, default_value_t = 20)]
    runs: usize,
    /// Skip DuckDB (no Python needed).
    #[arg(long)]
    no_duckdb: bool,
    /// Keep the database files in this directory.
    #[arg(long)]
    dir: Option<std::path::PathBuf>,
    /// Also write the report to this file (e.g. `bench/history/<date>-scale.md`).
    #[arg(long)]
    out: Option<std::path::PathBuf>,
}

#[derive(Args)]
struct ScaleProbeArgs {
    #[arg(long)]
    path: std::path::PathBuf,
    #[arg(long)]
    people: usize,
    #[arg(long)]
    runs: usize,
    #[arg(long)]
    export: Option<std::path::PathBuf>,
}

#[derive(Args)]
struct StorageOpenArgs {
    #[arg(long)]
    path: std::path::PathBuf,
    /// The `:acct/id` to look up.
    #[arg(long)]
    id: u64,
}

#[derive(Args)]
struct QueryConfig {
    /// Timed runs of each query (after the warm-up).
    #[arg(long, default_value_t = 30)]
    reps: usize,
    /// Untimed runs of each query before the timed ones, at least.
    #[arg(long, default_value_t = 1)]
    warmup: usize,
    /// Untimed runs of each query go on for at least this many ms (the JIT compilers of node
    /// and the JVM need many runs of a fast query; datascript-bench warms up for 2 s).
    #[arg(long, default_value_t = 2_000)]
    warmup_ms: u64,
    /// Stop a query's timed runs once they have taken this many ms (at least 3 run).
    #[arg(long, default_value_t = 10_000)]
    budget_ms: u64,
    /// Run only these queries (repeatable), e.g. `--only q1 --only rules-long-30x5`.
    #[arg(long)]
    only: Vec<String>,
    /// Skip DataScript (no node needed).
    #[arg(long)]
    no_datascript: bool,
    /// Skip Datalevin (no Python or JVM needed).
    #[arg(long)]
    no_datalevin: bool,
    /// Transactions of each concurrent-committers cell (1, 4 and 8 threads; 0 skips them).
    #[arg(long, default_value_t = 2_000)]
    concurrent_txs: usize,
}

#[derive(Args)]
struct CoreConfig {
    /// Timed repetitions of each fixture load (after one untimed warm-up).
    #[arg(long, default_value_t = 5)]
    reps: usize,
    /// People in the fixture (5 datoms each).
    #[arg(long, default_value_t = 20_000)]
    people: usize,
    /// Timed transactions per latency run.
    #[arg(long, default_value_t = 2_000)]
    latency_txs: usize,
    /// Datoms of the small latency database.
    #[arg(long, default_value_t = 10_000)]
    small_datoms: usize,
    /// Datoms of the large latency database (also the memory measurement).
    #[arg(long, default_value_t = 1_000_000)]
    big_datoms: usize,
    /// Skip the DataScript side (no node needed).
    #[arg(long)]
    no_datascript: bool,
}

fn core(cfg: &CoreConfig) -> Result<CoreResults, BenchError> {
    assert!(
        cfg.reps > 0 && cfg.latency_txs > 0,
        "--reps and --latency-txs must be positive"
    );
    let mut machine = report::Machine::probe();
    eprintln!("(c) building a {}-datom database", cfg.big_datoms);
    let rss_before = latency::rss_bytes()?;
    let big_conn = latency::build(cfg.big_datoms, fixture::SEED ^ 0xC)?;
    let rss_after = latency::rss_bytes()?;
    eprintln!(
        "(b) latency on {} and {} datoms",
        cfg.small_datoms, cfg.big_datoms
    );
    let small_conn = latency::build(cfg.small_datoms, fixture::SEED ^ 0xD)?;
    let small = latency::run(&small_conn, cfg.latency_txs)?;
    let big = latency::run(&big_conn, cfg.latency_txs)?;
    drop((small_conn, big_conn));

    eprintln!("(a) fixture of {} people: Vev", cfg.people);
    let people = fixture::people(fixture::SEED, cfg.people);
    let bulk = bulk::run(&people, cfg.reps)?;
    let datascript = if cfg.no_datascript {
        None
    } else {
        eprintln!(
            "(a) fixture of {} people: DataScript under node",
            cfg.people
        );
        let path =
            std::env::temp_dir().join(format!("vev-bench-fixture-{}.json", std::process::id()));
        fixture::write_json(&people, fixture::SEED, &path)
            .map_err(BenchError::io("write", &path))?;
        let result = datascript::run(&path, cfg.reps);
        let _ = std::fs::remove_file(&path);
        Some(result?)
    };
    machine.finish();
    Ok(CoreResults {
        machine,
        people: cfg.people,
        reps: cfg.reps,
        bulk,
        datascript,
        small_datoms: cfg.small_datoms,
        big_datoms: cfg.big_datoms,
        small,
        big,
        rss_before,
        rss_after,
    })
}

/// A scratch directory for the fixture file and Datalevin's disk databases, removed on drop.
struct Scratch(std::path::PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A peer's column of the query report: its run, or `None` timings when skipped.
fn peer_column(
    short: &'static str,
    skip: bool,
    run: impl FnOnce() -> Result<peers::EngineRun, BenchError>,
) -> Result<query_report::EngineColumn, BenchError> {
    if skip {
        return Ok(query_report::EngineColumn {
            short,
            label: String::new(),
            timings: None,
        });
    }
    eprintln!("running {short}");
    let run = run()?;
    Ok(query_report::EngineColumn {
        short,
        label: run.label,
        timings: Some(run.timings),
    })
}

fn query(cfg: &QueryConfig) -> Result<query_report::QueryResults, BenchError> {
    assert!(cfg.reps > 0, "--reps must be positive");
    let mut machine = report::Machine::probe();
    let mut specs = queries::all();
    if !cfg.only.is_empty() {
        specs.retain(|s| cfg.only.iter().any(|o| o == s.name));
    }
    let runner = query_fixture::RunnerConfig {
        warmup: cfg.warmup,
        warmup_ms: cfg.warmup_ms,
        reps: cfg.reps,
        budget_ms: cfg.budget_ms,
    };
    eprintln!("building the fixture for {} queries", specs.len());
    let fixture = query_fixture::QueryFixture::build(fixture::SEED, &specs);
    let scratch =
        Scratch(std::env::temp_dir().join(format!("vev-bench-query-{}", std::process::id())));
    std::fs::create_dir_all(&scratch.0).map_err(BenchError::io("create", &scratch.0))?;
    let path = scratch.0.join("query-fixture.json");
    query_fixture::write_json(&fixture, &specs, &runner, &path)
        .map_err(BenchError::io("write", &path))?;

    let (vev, pair) = vev_query::run_vev(&fixture, &specs, &runner, ["q2", "q2-switch"], 200)?;
    let mut engines = vec![query_report::EngineColumn {
        short: "Vev",
        label: format!("Vev {}", env!("CARGO_PKG_VERSION")),
        timings: Some(vev),
    }];
    engines.push(peer_column("DataScript", cfg.no_datascript, || {
        peers::run_datascript(&path)
    })?);
    for (short, storage) in [
        ("Datalevin mem", peers::DatalevinStorage::Memory),
        ("Datalevin disk", peers::DatalevinStorage::Disk),
    ] {
        engines.push(peer_column(short, cfg.no_datalevin, || {
            peers::run_datalevin(&path, storage, &scratch.0)
        })?);
    }
    machine.finish();
    let queries = specs
        .into_iter()
        .map(|spec| {
            let db = fixture.db(spec.db);
            query_report::QueryRow {
                expected_rows: (spec.rows)(db),
                datoms: db.datoms.len(),
                spec,
            }
        })
        .collect();
    Ok(query_report::QueryResults {
        machine,
        warmup: cfg.warmup,
        warmup_ms: cfg.warmup_ms,
        reps: cfg.reps,
        budget_ms: cfg.budget_ms,
        queries,
        engines,
        pair,
    })
}

fn main() -> ExitCode {
    #[cfg(not(feature = "system-alloc"))]
    vev::alloc::keep_freed_memory();
    let cli = Cli::parse();
    match cli.command {
        Command::Core(cfg) => match core(&cfg) {
            Ok(results) => {
                print!("{}", report::render(&results));
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("vev-bench: {e}");
                ExitCode::FAILURE
            }
        },
        Command::Query(cfg) => {
            let result = query(&cfg).and_then(|results| {
                let (table, mismatches) = query_report::render(&results);
                print!("{table}");
                match mismatches {
                    0 => Ok(()),
                    cells => Err(BenchError::RowMismatch { cells }),
                }
            });
            exit(result)
        }
        Command::Storage(args) if args.backend != StorageBackend::Sqlite => {
            let cfg = storage_pg::PgConfig {
                txs: args.pg_txs,
                lag_txs: args.pg_lag_txs,
                read_seconds: args.pg_read_seconds,
                readers: args.pg_readers,
                open_datoms: args.pg_open_datoms,
            };
            let s3 = args.backend == StorageBackend::S3;
            exit(storage_pg::run(&cfg, s3).map(|r| print!("{r}")))
        }
        Command::StoragePgRead(args) => {
            exit(storage_pg::read_child(&args.url, args.seconds).map(|l| println!("{l}")))
        }
        Command::Storage(args) => {
            let mut sizes = vec![50, 2_000, args.big_entities];
            sizes.sort_unstable();
            sizes.dedup();
            let cfg = storage::StorageConfig {
                sizes,
                warmup: args.warmup,
                measurements: args.measurements,
                bulk_datoms: args.bulk_datoms.into_iter().filter(|&d| d > 0).collect(),
                datalevin: !args.no_datalevin,
                jvm_warmup: args.jvm_warmup,
                concurrent_txs: args.concurrent_txs,
            };
            exit(storage::run(cfg).map(|r| print!("{}", storage_report::render(&r))))
        }
        Command::Fulltext(args) => exit(fulltext_cmd(args)),
        Command::Pgbench(args) => exit(pgbench_cmd(args)),
        Command::Duckdb(args) => exit(duckdb_cmd(args)),
        Command::Mbrainz(args) => exit(mbrainz_cmd(args)),
        Command::Scale(args) => exit(scale_cmd(args)),
        Command::ScaleProbe(args) => exit(
            scale_probe::probe(&scale_probe::ProbeArgs {
                path: &args.path,
                people: args.people,
                runs: args.runs,
                export: args.export.as_deref(),
            })
            .map(|line| println!("{line}")),
        ),
        Command::StorageOpen(args) => {
            exit(storage_bulk::open_and_query(&args.path, args.id).map(|line| println!("{line}")))
        }
    }
}

fn fulltext_cmd(args: FulltextArgs) -> Result<(), BenchError> {
    let cfg = fulltext::FulltextConfig {
        docs: args.docs,
        batches: args.batches,
        max_txs: args.max_txs,
        timing: fulltext_search::Timing {
            warmup: args.warmup,
            warmup_ms: args.warmup_ms,
            reps: args.reps,
            budget_ms: args.budget_ms,
        },
    };
    let report = fulltext_report::render(&fulltext::run(cfg)?);
    print!("{report}");
    if let Some(path) = &args.out {
        std::fs::write(path, &report).map_err(BenchError::io("write", path))?;
    }
    Ok(())
}

fn scale_cmd(args: ScaleArgs) -> Result<(), BenchError> {
    let cfg = scale::ScaleConfig {
        datoms: args.datoms,
        tx_people: args.tx_people.max(1),
        runs: args.runs,
        duckdb: !args.no_duckdb,
        dir: args.dir,
    };
    let command = std::env::args().skip(1).collect::<Vec<_>>().join(" ");
    let report = scale_report::render(&scale::run(&cfg, command)?);
    print!("{report}");
    if let Some(path) = &args.out {
        std::fs::write(path, &report).map_err(BenchError::io("write", path))?;
    }
    Ok(())
}

fn pgbench_cmd(args: PgbenchArgs) -> Result<(), BenchError> {
    let cfg = pgbench::PgbenchConfig {
        scale: args.scale,
        seconds: args.seconds,
        rounds: args.rounds as usize,
        pg_bin: args.pg_bin,
    };
    let report = pgbench_report::render(&pgbench::run_suite(&cfg)?);
    print!("{report}");
    if let Some(path) = &args.out {
        std::fs::write(path, &report).map_err(BenchError::io("write", path))?;
    }
    Ok(())
}

fn duckdb_cmd(args: DuckdbArgs) -> Result<(), BenchError> {
    let cfg = duckdb::DuckdbConfig {
        sizes: args.sizes,
        rounds: args.rounds,
        reps: args.reps,
        warmup_ms: args.warmup_ms,
        budget_ms: args.budget_ms,
        txs: args.txs,
    };
    let command = std::env::args().skip(1).collect::<Vec<_>>().join(" ");
    let report = duckdb_report::render(&duckdb::run(&cfg, command)?);
    print!("{report}");
    if let Some(path) = &args.out {
        std::fs::write(path, &report).map_err(BenchError::io("write", path))?;
    }
    Ok(())
}

fn mbrainz_cmd(args: MbrainzArgs) -> Result<(), BenchError> {
    assert!(args.reps > 0, "--reps must be positive");
    let mut peers = Vec::new();
    if !args.no_datascript {
        peers.push(mbrainz_peers::Peer::DataScript);
    }
    if !args.no_datalevin {
        peers.extend([
            mbrainz_peers::Peer::DatalevinMemory,
            mbrainz_peers::Peer::DatalevinDisk,
        ]);
    }
    let cfg = mbrainz::MbrainzConfig {
        scale: args.scale,
        runner: query_fixture::RunnerConfig {
            warmup: args.warmup,
            warmup_ms: args.warmup_ms,
            reps: args.reps,
            budget_ms: args.budget_ms,
        },
        only: args.only,
        peers,
        limits: mbrainz_peers::PeerLimits {
            timeout: std::time::Duration::from_secs(args.peer_timeout_s),
            node_heap_mb: args.node_heap_mb,
            jvm_heap_mb: args.jvm_heap_mb,
        },
        command: format!(
            "cargo run --release -p vev-bench -- {}",
            std::env::args().skip(1).collect::<Vec<_>>().join(" ")
        ),
    };
    let (report, wrong) = mbrainz_report::render(&mbrainz::run(&cfg)?);
    print!("{report}");
    if let Some(path) = &args.out {
        std::fs::write(path, &report).map_err(BenchError::io("write", path))?;
    }
    match wrong {
        0 => Ok(()),
        queries => Err(BenchError::AnswersDiffer { queries }),
    }
}

fn exit(result: Result<(), BenchError>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("vev-bench: {e}");
            ExitCode::FAILURE
        }
    }
}
