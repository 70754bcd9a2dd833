//! The `pgbench` suite: stock pgbench 15 against `vev serve` and against a throwaway
//! PostgreSQL 15 with its default configuration (every COMMIT synced), in the same run.
//!
//! Both servers are initialised with `pgbench -i -I dtgp --no-vacuum` (timed, wall clock),
//! then every cell runs `--rounds` times interleaved Vev, PostgreSQL, Vev, PostgreSQL, so a
//! change in the machine's load falls on both. After each tpcb-like run the tpcb invariant is
//! checked on that server (`Ledger`); pgbench truncates `pgbench_history` at the start of
//! every run, so the check carries the balance total over from one run to the next.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::error::BenchError;
use crate::pgbench_output::{init_steps, parse_run, RunSummary};
use crate::pgbench_servers::{
    clean_up_on_interrupt, psql, run, PgBin, Postgres, System, Vev, DATABASE, USER,
};
use crate::report::Machine;

pub struct PgbenchConfig {
    pub scale: u32,
    pub seconds: u32,
    pub rounds: usize,
    pub pg_bin: PathBuf,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workload {
    /// `-S`: one primary-key SELECT per transaction.
    SelectOnly,
    /// pgbench's default TPC-B-like script, with `--max-tries=10`.
    TpcbLike,
}

impl Workload {
    pub fn label(self) -> &'static str {
        match self {
            Workload::SelectOnly => "select-only",
            Workload::TpcbLike => "tpcb-like",
        }
    }
}

/// One cell of the run table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cell {
    pub workload: Workload,
    pub clients: u32,
}

/// The cells, in the order they run (the tpcb-like ones last, so the history table they
/// write is there to check right after them).
pub const CELLS: [Cell; 5] = [
    Cell::new(Workload::SelectOnly, 1),
    Cell::new(Workload::SelectOnly, 8),
    Cell::new(Workload::TpcbLike, 1),
    Cell::new(Workload::TpcbLike, 4),
    Cell::new(Workload::TpcbLike, 8),
];

impl Cell {
    const fn new(workload: Workload, clients: u32) -> Cell {
        Cell { workload, clients }
    }

    /// pgbench's threads: 2 (the machine's cores) when there is more than one client.
    pub fn threads(self) -> u32 {
        if self.clients > 1 {
            2
        } else {
            1
        }
    }

    /// pgbench's arguments for this cell, before the connection ones.
    pub fn args(self, seconds: u32) -> Vec<String> {
        let mut args = match self.workload {
            Workload::SelectOnly => vec!["-S".to_string()],
            Workload::TpcbLike => vec!["--max-tries=10".to_string()],
        };
        args.extend(
            [
                "-M",
                "prepared",
                "-c",
                &self.clients.to_string(),
                "-j",
                &self.threads().to_string(),
                "-T",
                &seconds.to_string(),
            ]
            .map(String::from),
        );
        args
    }

    /// The target for Vev's median tps over PostgreSQL's.
    pub fn target_ratio(self) -> f64 {
        match (self.workload, self.clients) {
            (Workload::TpcbLike, c) if c > 1 => 0.8,
            _ => 1.0,
        }
    }
}

/// One pgbench run: its summary, or why pgbench exited non-zero after printing one.
#[derive(Clone, Debug)]
pub struct RunResult {
    pub summary: RunSummary,
    /// pgbench's first `error` line when it exited non-zero (a client aborted).
    pub aborted: Option<String>,
}

pub struct CellResult {
    pub cell: Cell,
    pub vev: Vec<RunResult>,
    pub pg: Vec<RunResult>,
}

pub struct InitResult {
    pub wall: Duration,
    /// pgbench's own step times (`drop tables … s, create tables … s, …`).
    pub steps: Option<String>,
}

/// The sums the tpcb invariant relates, read after a tpcb-like run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sums {
    pub abalance: i64,
    pub tbalance: i64,
    pub bbalance: i64,
    pub delta: i64,
    pub history_rows: i64,
}

/// The tpcb invariant across runs: balances start at 0 after init; each tpcb-like run adds
/// its history's deltas (pgbench truncates the history when a run starts) to all three.
#[derive(Clone, Debug, Default)]
pub struct Ledger {
    /// The total every balance sum should have now.
    pub expected: i64,
    pub checks: usize,
    /// The checks that failed: (expected before the run, what was read).
    pub broken: Vec<(i64, Sums)>,
    pub last: Option<Sums>,
    pub time: Duration,
}

impl Ledger {
    /// Record the sums read right after a tpcb-like run.
    pub fn record(&mut self, sums: Sums) {
        let total = self.expected + sums.delta;
        let holds = sums.abalance == total && sums.tbalance == total && sums.bbalance == total;
        if !holds {
            self.broken.push((self.expected, sums));
        }
        // Carry on from what is there, so one broken run is reported once.
        self.expected = sums.abalance;
        self.checks += 1;
        self.last = Some(sums);
    }
}

pub struct PgbenchResults {
    pub machine: Machine,
    pub cfg_scale: u32,
    pub cfg_seconds: u32,
    pub cfg_rounds: usize,
    pub postgres_version: String,
    pub pgbench_version: String,
    pub init_vev: InitResult,
    pub init_pg: InitResult,
    pub cells: Vec<CellResult>,
    pub ledger_vev: Ledger,
    pub ledger_pg: Ledger,
}

/// The port each system listens on.
struct Ports {
    vev: u16,
    pg: u16,
}

impl Ports {
    fn of(&self, system: System) -> u16 {
        match system {
            System::Vev => self.vev,
            System::Postgres => self.pg,
        }
    }
}

/// `pgbench ARGS -h 127.0.0.1 -p PORT -U vev bench`.
fn pgbench(pgbench: &Path, port: u16, args: &[String]) -> Command {
    let mut cmd = Command::new(pgbench);
    cmd.args(args).args([
        "-h",
        "127.0.0.1",
        "-p",
        &port.to_string(),
        "-U",
        USER,
        DATABASE,
    ]);
    cmd
}

fn init(bin: &Path, port: u16, scale: u32) -> Result<InitResult, BenchError> {
    let args = ["-i", "-I", "dtgp", "--no-vacuum", "-s", &scale.to_string()].map(String::from);
    let start = Instant::now();
    let out = run(&mut pgbench(bin, port, &args))?;
    let wall = start.elapsed();
    Ok(InitResult {
        wall,
        steps: init_steps(&String::from_utf8_lossy(&out.stderr)),
    })
}

fn run_cell(bin: &Path, port: u16, cell: Cell, seconds: u32) -> Result<RunResult, BenchError> {
    let mut cmd = pgbench(bin, port, &cell.args(seconds));
    let shown = format!("{cmd:?}");
    let out = cmd.output().map_err(BenchError::io("run", &shown))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let summary = parse_run(&stdout).map_err(|_| BenchError::Tool {
        command: shown,
        status: out.status,
        stderr: stderr.trim().to_string(),
    })?;
    let aborted = (!out.status.success()).then(|| {
        stderr
            .lines()
            .find(|l| l.contains("error"))
            .unwrap_or("pgbench exited non-zero")
            .to_string()
    });
    Ok(RunResult { summary, aborted })
}

/// One number through psql; SQL's NULL (the sum of no rows) is 0.
fn sum(port: u16, sql: &str) -> Result<i64, BenchError> {
    let text = psql(port, DATABASE, sql)?;
    if text.is_empty() {
        return Ok(0);
    }
    text.parse().map_err(|_| BenchError::PsqlValue {
        sql: sql.to_string(),
        output: text,
    })
}

fn read_sums(port: u16) -> Result<Sums, BenchError> {
    Ok(Sums {
        abalance: sum(port, "SELECT sum(abalance) FROM pgbench_accounts")?,
        tbalance: sum(port, "SELECT sum(tbalance) FROM pgbench_tellers")?,
        bbalance: sum(port, "SELECT sum(bbalance) FROM pgbench_branches")?,
        delta: sum(port, "SELECT sum(delta) FROM pgbench_history")?,
        history_rows: sum(port, "SELECT count(*) FROM pgbench_history")?,
    })
}

/// Every cell, `cfg.rounds` times, interleaved Vev, PostgreSQL; the ledgers of Vev and
/// PostgreSQL, in that order.
fn run_cells(
    pgbench_bin: &Path,
    ports: &Ports,
    cfg: &PgbenchConfig,
) -> Result<(Vec<CellResult>, [Ledger; 2]), BenchError> {
    let mut ledgers = [Ledger::default(), Ledger::default()];
    let mut cells = Vec::new();
    for cell in CELLS {
        let mut runs = [Vec::new(), Vec::new()];
        for round in 1..=cfg.rounds {
            for (i, system) in [System::Vev, System::Postgres].into_iter().enumerate() {
                let port = ports.of(system);
                let r = run_cell(pgbench_bin, port, cell, cfg.seconds)?;
                eprintln!(
                    "{} -c {}, round {round}, {}: {:.0} tps, {} failed{}",
                    cell.workload.label(),
                    cell.clients,
                    system.label(),
                    r.summary.tps,
                    r.summary.failed,
                    r.aborted
                        .as_deref()
                        .map_or(String::new(), |e| format!(", aborted: {e}"))
                );
                if cell.workload == Workload::TpcbLike {
                    let start = Instant::now();
                    ledgers[i].record(read_sums(port)?);
                    ledgers[i].time += start.elapsed();
                }
                runs[i].push(r);
            }
        }
        let [vev, pg] = runs;
        cells.push(CellResult { cell, vev, pg });
    }
    Ok((cells, ledgers))
}

/// Start both servers in a scratch directory, run everything, stop both and remove the
/// directory (also on failure: the guards' drops do it).
pub fn run_suite(cfg: &PgbenchConfig) -> Result<PgbenchResults, BenchError> {
    assert!(
        cfg.rounds > 0 && cfg.seconds > 0 && cfg.scale > 0,
        "--rounds, --seconds and --scale must be positive"
    );
    let mut machine = Machine::probe();
    let bin = PgBin(cfg.pg_bin.clone());
    let pgbench_bin = bin.program("pgbench")?;
    let scratch = tempfile::Builder::new()
        .prefix("vev-bench-pgbench-")
        .tempdir()
        .map_err(BenchError::io("create", std::env::temp_dir()))?;
    // The postgres user must be able to reach its data directory inside.
    std::fs::set_permissions(
        scratch.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .map_err(BenchError::io("chmod", scratch.path()))?;
    clean_up_on_interrupt(scratch.path())?;
    eprintln!(
        "starting PostgreSQL and vev serve in {}",
        scratch.path().display()
    );
    let postgres = Postgres::start(&bin, &scratch.path().join("pg"))?;
    let vev = Vev::start(&scratch.path().join("bench.vev"))?;
    let ports = Ports {
        vev: vev.port(),
        pg: postgres.port,
    };

    eprintln!("init -s {}: Vev", cfg.scale);
    let init_vev = init(&pgbench_bin, ports.vev, cfg.scale)?;
    eprintln!("init -s {}: PostgreSQL", cfg.scale);
    let init_pg = init(&pgbench_bin, ports.pg, cfg.scale)?;

    let (cells, [ledger_vev, ledger_pg]) = run_cells(&pgbench_bin, &ports, cfg)?;
    machine.finish();
    Ok(PgbenchResults {
        machine,
        cfg_scale: cfg.scale,
        cfg_seconds: cfg.seconds,
        cfg_rounds: cfg.rounds,
        postgres_version: bin.version("postgres")?,
        pgbench_version: bin.version("pgbench")?,
        init_vev,
        init_pg,
        cells,
        ledger_vev,
        ledger_pg,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sums(a: i64, t: i64, b: i64, delta: i64) -> Sums {
        Sums {
            abalance: a,
            tbalance: t,
            bbalance: b,
            delta,
            history_rows: 1,
        }
    }

    #[test]
    fn ledger_carries_the_total_across_truncated_histories() {
        let mut l = Ledger::default();
        l.record(sums(-50, -50, -50, -50));
        l.record(sums(70, 70, 70, 120));
        assert_eq!(l.checks, 2);
        assert!(l.broken.is_empty());
        assert_eq!(l.expected, 70);
    }

    #[test]
    fn ledger_reports_a_lost_update_or_a_history_left_untruncated() {
        let mut l = Ledger::default();
        // A lost update: the teller's sum misses one delta.
        l.record(sums(10, 7, 10, 10));
        // A history not truncated at the run's start: its deltas counted twice.
        l.record(sums(15, 15, 15, 15));
        assert_eq!(l.broken.len(), 2);
        assert_eq!(l.broken[0].0, 0);
        assert_eq!(l.broken[1].0, 10);
    }

    #[test]
    fn cells_take_two_threads_only_with_several_clients() {
        assert_eq!(
            CELLS[0].args(20),
            ["-S", "-M", "prepared", "-c", "1", "-j", "1", "-T", "20"]
        );
        assert_eq!(
            CELLS[3].args(30),
            [
                "--max-tries=10",
                "-M",
                "prepared",
                "-c",
                "4",
                "-j",
                "2",
                "-T",
                "30"
            ]
        );
        assert_eq!(CELLS.map(Cell::target_ratio), [1.0, 1.0, 1.0, 0.8, 0.8]);
    }
}
