//! `vev-bench`: Vev's comparative benchmarks.
//!
//! `vev-bench core` runs the issue-2 suite in one process and prints a markdown table:
//! (c) memory first, while the process is still small, so the VmRSS delta is the database's;
//! (b) small-transaction latency on a small and on the just-built large database; then (a)
//! the fixture load in Vev and, through node, in DataScript. Progress goes to stderr, the
//! table to stdout.

mod bulk;
mod datascript;
mod error;
mod fixture;
mod latency;
mod report;
mod stats;

use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

use crate::error::BenchError;
use crate::report::CoreResults;

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

fn main() -> ExitCode {
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
    }
}
