//! `vev-bench mbrainz`: the MusicBrainz workload (issue 22, `docs/mbrainz.md`) in Vev,
//! DataScript and Datalevin, on the same generated data set.
//!
//! 1. Vev generates the data set of the chosen scale in memory (untimed, as the peers read
//!    their datoms before their timed loads), then loads it into a new file: open, schema,
//!    enums, `bulk_load` of the transactions and the closing checkpoint, timed as a whole;
//!    the file is measured.
//! 2. Cold: for each query, a fresh `Connection::open` and the query's first run on it
//!    (parsing the query and its inputs included), timed.
//! 3. Warm: one connection; each query parsed once (`Query::parse`), its inputs read once, then
//!    `Db::q_prepared` timed as `vev_query::measure` times the query suite (warm-up runs, then
//!    timed runs within a budget). Query 8 is two calls, the second on the first's result.
//! 4. Export: that database's datoms and the peers' schemas, rules and queries
//!    (`mbrainz_export`), then each peer in turn (`mbrainz_peers`), each loading the whole
//!    data set with its bulk path and running the same queries the same way.
//! 5. Every answer a peer gives is compared with Vev's last warm answer (`mbrainz_rows`).

use std::path::{Path, PathBuf};
use std::time::Instant;

use vev::{Connection, Db, Edn, Query, QueryOptions, QueryResult};
use vev_mbrainz::{NamedQuery, Scale};

use crate::error::BenchError;
use crate::mbrainz_export as export;
use crate::mbrainz_peers::{self as mpeers, Peer, PeerLimits, PeerRun};
use crate::mbrainz_rows::{vev_lines, KeywordForm};
use crate::peers::QueryTiming;
use crate::query_fixture::RunnerConfig;
use crate::report::Machine;
use crate::stats::ms;

pub struct MbrainzConfig {
    pub scale: Scale,
    pub runner: RunnerConfig,
    /// Run only these queries (all when empty).
    pub only: Vec<String>,
    pub peers: Vec<Peer>,
    pub limits: PeerLimits,
    /// The command line, for the report.
    pub command: String,
}

/// Vev's load of the data set.
pub struct VevLoad {
    pub seconds: f64,
    /// Datoms and transactions `bulk_load` reported (transaction datoms included).
    pub bulk_datoms: u64,
    pub txs: u64,
    /// The file (and any WAL left) after the connection closed.
    pub file_bytes: u64,
}

/// One query in Vev.
pub struct VevQuery {
    pub query: &'static NamedQuery,
    pub rows: usize,
    pub cold_ms: f64,
    pub warm: QueryTiming,
    /// Its answer for the checks, keywords in both forms (`mbrainz_rows`).
    pub lines_full: Vec<String>,
    pub lines_name: Vec<String>,
}

pub struct MbrainzResults {
    pub machine: Machine,
    pub command: String,
    pub scale: Scale,
    pub warmup: usize,
    pub warmup_ms: u64,
    pub reps: usize,
    pub budget_ms: u64,
    pub load: VevLoad,
    /// Datoms handed to the peers.
    pub exported_datoms: usize,
    pub vev: Vec<VevQuery>,
    /// The peers asked for, in order.
    pub peers: Vec<PeerRun>,
    /// Datalevin's form of the `track-search` clause.
    pub datalevin_track_search: String,
}

/// A scratch directory, removed on drop.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The queries to run: the nine, then the extra ones with `collab-net-10` last, since a peer
/// that cannot finish it is stopped and reaches nothing after it.
fn selected(only: &[String]) -> Vec<&'static NamedQuery> {
    let mut queries: Vec<&'static NamedQuery> = vev_mbrainz::all_queries()
        .filter(|q| only.is_empty() || only.iter().any(|o| o == q.name))
        .collect();
    queries.sort_by_key(|q| q.name == "collab-net-10");
    queries
}

pub fn run(cfg: &MbrainzConfig) -> Result<MbrainzResults, BenchError> {
    let mut machine = Machine::probe();
    let queries = selected(&cfg.only);
    let scratch =
        Scratch(std::env::temp_dir().join(format!("vev-bench-mbrainz-{}", std::process::id())));
    std::fs::create_dir_all(&scratch.0).map_err(BenchError::io("create", &scratch.0))?;
    let path = scratch.0.join("mbrainz.vev");
    let load = load_vev(&path, cfg.scale)?;
    let mut vev = Vec::with_capacity(queries.len());
    for q in &queries {
        vev.push(cold(&path, q)?);
    }
    let conn = Connection::open(&path)?;
    let db = conn.db();
    for v in vev.iter_mut() {
        warm(&db, v, &cfg.runner)?;
    }
    eprintln!("mbrainz: exporting the datoms for the peers");
    let datoms_path = scratch.0.join("datoms.jsonl");
    let exported = export::write_datoms(&db, &datoms_path)?;
    drop((db, conn));
    let fixture = scratch.0.join("mbrainz-fixture.json");
    export::write_fixture(&fixture, &exported, &datoms_path, &cfg.runner, &queries)?;
    let names: Vec<&str> = queries.iter().map(|q| q.name).collect();
    let mut peers = Vec::new();
    for &peer in &cfg.peers {
        eprintln!("mbrainz: {}", peer.short());
        peers.push(mpeers::run(
            peer,
            &fixture,
            &scratch.0,
            &names,
            &cfg.limits,
        )?);
    }
    machine.finish();
    Ok(MbrainzResults {
        machine,
        command: cfg.command.clone(),
        scale: cfg.scale,
        warmup: cfg.runner.warmup,
        warmup_ms: cfg.runner.warmup_ms,
        reps: cfg.runner.reps,
        budget_ms: cfg.runner.budget_ms,
        load,
        exported_datoms: exported.datoms,
        vev,
        peers,
        datalevin_track_search: export::track_search_datalevin(exported.track_names),
    })
}

fn load_vev(path: &Path, scale: Scale) -> Result<VevLoad, BenchError> {
    eprintln!("mbrainz: loading the {} data set into Vev", scale.name());
    // Generated first, untimed, as each peer's datoms are read before its timed load.
    let generating = Instant::now();
    let (txs, _) = vev_mbrainz::generate(scale);
    eprintln!(
        "mbrainz: generated {} transactions in {:.1} s (untimed)",
        txs.len(),
        generating.elapsed().as_secs_f64()
    );
    let mut report_at = 1_000_000;
    let start = Instant::now();
    let conn = Connection::open(path)?;
    let loaded = vev_mbrainz::load_transactions(&conn, txs, &mut |p| {
        if p.datoms >= report_at {
            eprintln!("  {} datoms, {:.1} s", p.datoms, p.elapsed.as_secs_f64());
            report_at += 1_000_000;
        }
    })?;
    // Closing checkpoints: part of the load, as Datalevin's disk load ends with its sync.
    drop(conn);
    let seconds = start.elapsed().as_secs_f64();
    let file_bytes = crate::storage_bulk::file_size(path)?;
    eprintln!(
        "mbrainz: Vev loaded {} datoms in {seconds:.1} s, {file_bytes} bytes on disk",
        loaded.datoms
    );
    Ok(VevLoad {
        seconds,
        bulk_datoms: loaded.datoms,
        txs: loaded.txs,
        file_bytes,
    })
}

/// A query's inputs after `$`: the rule set, then its reference input.
fn inputs(q: &NamedQuery) -> Result<Vec<Edn>, BenchError> {
    let mut args = Vec::with_capacity(2);
    if q.rules {
        args.push(vev::edn::parse(vev_mbrainz::RULES).map_err(vev::Error::from)?);
    }
    if let Some(input) = q.input {
        args.push(vev::edn::parse(input).map_err(vev::Error::from)?);
    }
    Ok(args)
}

/// Run a prepared query; query 8 a second time on its first result.
fn run_prepared(
    db: &Db,
    q: &NamedQuery,
    prepared: &Query,
    args: &[Edn],
) -> Result<QueryResult, BenchError> {
    let opts = QueryOptions::default();
    let first = db
        .q_prepared(prepared, args, &opts)
        .map_err(vev::Error::from)?;
    if !q.feeds_itself {
        return Ok(first);
    }
    let mut again = args.to_vec();
    if let Some(last) = again.last_mut() {
        *last = vev_mbrainz::relation_of(&first);
    }
    Ok(db
        .q_prepared(prepared, &again, &opts)
        .map_err(vev::Error::from)?)
}

/// The first run of `q` on a freshly opened connection.
fn cold(path: &Path, q: &'static NamedQuery) -> Result<VevQuery, BenchError> {
    let conn = Connection::open(path)?;
    let db = conn.db();
    let start = Instant::now();
    let result = vev_mbrainz::run(&db, q)?;
    let cold_ms = ms(start.elapsed());
    eprintln!(
        "vev: {} cold {cold_ms:.1} ms, {} rows",
        q.name,
        result.len()
    );
    Ok(VevQuery {
        query: q,
        rows: result.len(),
        cold_ms,
        warm: QueryTiming {
            query: q.name.to_string(),
            rows: 0,
            samples_ms: Vec::new(),
        },
        lines_full: Vec::new(),
        lines_name: Vec::new(),
    })
}

/// The warm timings of `v`'s query, and its answer.
fn warm(db: &Db, v: &mut VevQuery, runner: &RunnerConfig) -> Result<(), BenchError> {
    let q = v.query;
    let prepared = Query::parse(q.text).map_err(vev::Error::from)?;
    let args = inputs(q)?;
    let mut last = None;
    v.warm = crate::vev_query::measure(
        runner,
        q.name,
        || {
            let r = run_prepared(db, q, &prepared, &args)?;
            let n = r.len();
            last = Some(r);
            Ok(n)
        },
        |n| *n,
    )?;
    if let Some(result) = last {
        v.lines_full = vev_lines(&result, KeywordForm::Full);
        v.lines_name = vev_lines(&result, KeywordForm::Name);
    }
    eprintln!(
        "vev: {} warm p50 {:.3} ms ({} runs), {} rows",
        q.name,
        crate::stats::median(&v.warm.samples_ms),
        v.warm.samples_ms.len(),
        v.warm.rows
    );
    Ok(())
}
