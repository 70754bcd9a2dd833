//! The markdown report of a `pgbench` run, with the targets as PASS/MISS lines.

use std::fmt::Write;

use crate::pgbench::{CellResult, InitResult, Ledger, PgbenchResults, RunResult};
use crate::report::thousands;
use crate::stats::median;

/// Vev's init time over PostgreSQL's, at most.
const TARGET_INIT_RATIO: f64 = 3.0;

fn verdict(ok: bool) -> &'static str {
    if ok {
        "PASS"
    } else {
        "MISS"
    }
}

fn tps_median(runs: &[RunResult]) -> f64 {
    median(&runs.iter().map(|r| r.summary.tps).collect::<Vec<_>>())
}

fn latency_median(runs: &[RunResult]) -> f64 {
    median(
        &runs
            .iter()
            .map(|r| r.summary.latency_ms)
            .collect::<Vec<_>>(),
    )
}

fn failed(runs: &[RunResult]) -> u64 {
    runs.iter().map(|r| r.summary.failed).sum()
}

/// Retried transactions over the runs; "—" where pgbench could not retry (`--max-tries=1`).
fn retried(runs: &[RunResult]) -> String {
    let counts: Option<Vec<u64>> = runs.iter().map(|r| r.summary.retried).collect();
    counts.map_or("—".into(), |c| thousands(c.iter().sum::<u64>() as usize))
}

fn each_tps(runs: &[RunResult]) -> String {
    runs.iter()
        .map(|r| thousands(r.summary.tps.round() as usize))
        .collect::<Vec<_>>()
        .join(", ")
}

fn ratio(c: &CellResult) -> f64 {
    tps_median(&c.vev) / tps_median(&c.pg)
}

pub fn render(r: &PgbenchResults) -> String {
    let mut out = String::new();
    let m = &r.machine;
    let _ = writeln!(
        out,
        "{}
",
        m.line(true)
    );
    let _ = writeln!(
        out,
        "- Vev {}: `vev serve` in the bench's process (`vev_pg::Server` on a fresh database file, one SQLite file, WAL, `synchronous=FULL`).\n- {}: a throwaway cluster (`initdb`, default configuration: `fsync=on`, `synchronous_commit=on`).\n- Both on 127.0.0.1 over TCP, driven by the same {}; scale {} ({} accounts); each run `-T {}`; {} round(s) per cell, interleaved Vev, PostgreSQL, Vev, PostgreSQL.\n",
        env!("CARGO_PKG_VERSION"),
        r.postgres_version,
        r.pgbench_version,
        r.cfg_scale,
        thousands(r.cfg_scale as usize * 100_000),
        r.cfg_seconds,
        r.cfg_rounds
    );
    init_table(&mut out, r);
    run_table(&mut out, r);
    targets(&mut out, r);
    let _ = writeln!(
        out,
        "\nvev-bench-pgbench scale={} seconds={} rounds={} init_ratio={:.2} {}",
        r.cfg_scale,
        r.cfg_seconds,
        r.cfg_rounds,
        init_ratio(r),
        r.cells
            .iter()
            .map(|c| format!(
                "{}-{}={:.2}",
                c.cell.workload.label(),
                c.cell.clients,
                ratio(c)
            ))
            .collect::<Vec<_>>()
            .join(" ")
    );
    out
}

fn init_ratio(r: &PgbenchResults) -> f64 {
    r.init_vev.wall.as_secs_f64() / r.init_pg.wall.as_secs_f64()
}

fn init_table(out: &mut String, r: &PgbenchResults) {
    let _ = writeln!(
        out,
        "**Init** (`pgbench -i -I dtgp --no-vacuum -s {}`: tables, COPY of the rows, primary keys; wall clock of the pgbench process):\n",
        r.cfg_scale
    );
    let _ = writeln!(out, "| system | s | pgbench's steps |\n|---|---:|---|");
    let row = |out: &mut String, label: &str, i: &InitResult| {
        let _ = writeln!(
            out,
            "| {label} | {:.2} | {} |",
            i.wall.as_secs_f64(),
            i.steps.as_deref().unwrap_or("—")
        );
    };
    row(out, "Vev", &r.init_vev);
    row(out, "PostgreSQL", &r.init_pg);
    let _ = writeln!(out, "| Vev ÷ PostgreSQL | {:.2}× | |\n", init_ratio(r));
}

fn run_table(out: &mut String, r: &PgbenchResults) {
    let _ = writeln!(
        out,
        "**Runs** (`-M prepared`; select-only `-S`, tpcb-like `--max-tries=10`; `-j 2` above 1 client). tps without the initial connection time, each run in order and the median; latency: median of the runs' averages; failed and retried: summed over the runs (— where pgbench cannot retry):\n"
    );
    let _ = writeln!(
        out,
        "| workload | clients | Vev tps | PG tps | Vev median | PG median | Vev ÷ PG | latency ms Vev / PG | failed Vev / PG | retried Vev / PG | target |"
    );
    let _ = writeln!(
        out,
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
    );
    for c in &r.cells {
        let target = c.cell.target_ratio();
        let ratio = ratio(c);
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {ratio:.2}× | {:.3} / {:.3} | {} / {} | {} / {} | {} ≥ {target:.1}× |",
            c.cell.workload.label(),
            c.cell.clients,
            each_tps(&c.vev),
            each_tps(&c.pg),
            thousands(tps_median(&c.vev).round() as usize),
            thousands(tps_median(&c.pg).round() as usize),
            latency_median(&c.vev),
            latency_median(&c.pg),
            failed(&c.vev),
            failed(&c.pg),
            retried(&c.vev),
            retried(&c.pg),
            verdict(ratio >= target)
        );
    }
    let _ = writeln!(out);
}

fn ledger_line(out: &mut String, label: &str, l: &Ledger) {
    let last = l.last.map_or(String::new(), |s| {
        format!(
            "; after the last run sum(abalance) {}, sum(tbalance) {}, sum(bbalance) {}, expected {} ({} history rows); {:.1} s of checking",
            s.abalance,
            s.tbalance,
            s.bbalance,
            l.expected,
            thousands(s.history_rows as usize),
            l.time.as_secs_f64()
        )
    });
    let _ = writeln!(
        out,
        "- {}: tpcb invariant on {label} (sum(abalance) = sum(tbalance) = sum(bbalance) = the deltas of every tpcb-like run since init, read after each run): {} of {} checks broken{last}.",
        verdict(l.broken.is_empty() && l.checks > 0),
        l.broken.len(),
        l.checks
    );
    for (expected, s) in &l.broken {
        let _ = writeln!(
            out,
            "  - expected {expected} + {} = {}, read abalance {}, tbalance {}, bbalance {}",
            s.delta,
            expected + s.delta,
            s.abalance,
            s.tbalance,
            s.bbalance
        );
    }
}

fn targets(out: &mut String, r: &PgbenchResults) {
    let _ = writeln!(out, "**Targets** (issue 20):\n");
    for c in &r.cells {
        let target = c.cell.target_ratio();
        let ratio = ratio(c);
        let _ = writeln!(
            out,
            "- {}: {} at {} client(s) ≥ {target:.1}× PostgreSQL: median {} / {} tps = {ratio:.2}×.",
            verdict(ratio >= target),
            c.cell.workload.label(),
            c.cell.clients,
            thousands(tps_median(&c.vev).round() as usize),
            thousands(tps_median(&c.pg).round() as usize),
        );
    }
    let vev_failed: u64 = r.cells.iter().map(|c| failed(&c.vev)).sum();
    let aborted: Vec<&str> = r
        .cells
        .iter()
        .flat_map(|c| &c.vev)
        .filter_map(|r| r.aborted.as_deref())
        .collect();
    let _ = writeln!(
        out,
        "- {}: 0 failed transactions in every Vev cell: {} failed, {} aborted runs{}.",
        verdict(vev_failed == 0 && aborted.is_empty()),
        vev_failed,
        aborted.len(),
        aborted
            .first()
            .map_or(String::new(), |e| format!(" (first: `{e}`)"))
    );
    let ratio = init_ratio(r);
    let _ = writeln!(
        out,
        "- {}: init within {TARGET_INIT_RATIO}× of PostgreSQL's: {:.2} / {:.2} s = {ratio:.2}×.",
        verdict(ratio <= TARGET_INIT_RATIO),
        r.init_vev.wall.as_secs_f64(),
        r.init_pg.wall.as_secs_f64()
    );
    ledger_line(out, "Vev", &r.ledger_vev);
    ledger_line(out, "PostgreSQL (the check's own check)", &r.ledger_pg);
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::pgbench::{Cell, CellResult, Ledger, Sums, CELLS};
    use crate::pgbench_output::RunSummary;
    use crate::report::Machine;

    fn runs(tps: &[f64], failed: u64, retried: Option<u64>) -> Vec<RunResult> {
        tps.iter()
            .map(|&tps| RunResult {
                summary: RunSummary {
                    tps,
                    latency_ms: 1.0,
                    processed: 100,
                    failed,
                    retried,
                },
                aborted: None,
            })
            .collect()
    }

    /// Vev's tps over PostgreSQL's per cell: 1.1×, 0.9×, 1.0×, 0.85×, 0.5×.
    fn results() -> PgbenchResults {
        let vev = [1100.0, 900.0, 100.0, 85.0, 50.0];
        let cell = |(i, cell): (usize, Cell)| {
            let retried = (i >= 2).then_some(1);
            CellResult {
                cell,
                vev: runs(&[vev[i] - 10.0, vev[i] + 10.0], 0, retried),
                pg: runs(&[if i >= 2 { 100.0 } else { 1000.0 }], 0, retried),
            }
        };
        let mut ledger = Ledger::default();
        ledger.record(Sums {
            abalance: 5,
            tbalance: 5,
            bbalance: 5,
            delta: 5,
            history_rows: 2,
        });
        PgbenchResults {
            machine: Machine::probe(),
            cfg_scale: 1,
            cfg_seconds: 3,
            cfg_rounds: 2,
            postgres_version: "postgres (PostgreSQL) 15.18".into(),
            pgbench_version: "pgbench (PostgreSQL) 15.18".into(),
            init_vev: InitResult {
                wall: Duration::from_millis(600),
                steps: None,
            },
            init_pg: InitResult {
                wall: Duration::from_millis(300),
                steps: None,
            },
            cells: CELLS.into_iter().enumerate().map(cell).collect(),
            ledger_vev: ledger.clone(),
            ledger_pg: ledger,
        }
    }

    #[test]
    fn targets_compare_medians_with_each_cells_ratio() {
        let text = render(&results());
        for line in [
            "- PASS: select-only at 1 client(s) ≥ 1.0× PostgreSQL: median 1,100 / 1,000 tps = 1.10×.",
            "- MISS: select-only at 8 client(s) ≥ 1.0× PostgreSQL: median 900 / 1,000 tps = 0.90×.",
            "- PASS: tpcb-like at 1 client(s) ≥ 1.0× PostgreSQL: median 100 / 100 tps = 1.00×.",
            "- PASS: tpcb-like at 4 client(s) ≥ 0.8× PostgreSQL: median 85 / 100 tps = 0.85×.",
            "- MISS: tpcb-like at 8 client(s) ≥ 0.8× PostgreSQL: median 50 / 100 tps = 0.50×.",
            "- PASS: 0 failed transactions in every Vev cell: 0 failed, 0 aborted runs.",
            "- PASS: init within 3× of PostgreSQL's: 0.60 / 0.30 s = 2.00×.",
        ] {
            assert!(text.contains(line), "no line {line:?} in\n{text}");
        }
        assert!(text.contains("| select-only | 1 | 1,090, 1,110 | 1,000 | 1,100 | 1,000 | 1.10× |"));
        assert!(text.contains("| 0 / 0 | — / — | PASS ≥ 1.0× |"));
        assert!(text.contains("| 0 / 0 | 2 / 1 | MISS ≥ 0.8× |"));
        assert!(text.ends_with(
            "init_ratio=2.00 select-only-1=1.10 select-only-8=0.90 tpcb-like-1=1.00 tpcb-like-4=0.85 tpcb-like-8=0.50\n"
        ));
    }

    #[test]
    fn a_failed_transaction_an_aborted_run_or_a_broken_ledger_is_a_miss() {
        let mut r = results();
        r.cells[3].vev[1].summary.failed = 2;
        r.cells[4].vev[0].aborted = Some("pgbench: error: client 3 aborted".into());
        r.ledger_vev.record(Sums {
            abalance: 9,
            tbalance: 9,
            bbalance: 8,
            delta: 4,
            history_rows: 1,
        });
        let text = render(&r);
        assert!(text.contains(
            "- MISS: 0 failed transactions in every Vev cell: 2 failed, 1 aborted runs (first: `pgbench: error: client 3 aborted`)."
        ));
        assert!(text.contains("- MISS: tpcb invariant on Vev"));
        assert!(text.contains("1 of 2 checks broken"));
        assert!(text.contains("  - expected 5 + 4 = 9, read abalance 9, tbalance 9, bbalance 8"));
        assert!(text.contains("- PASS: tpcb invariant on PostgreSQL"));
    }
}
