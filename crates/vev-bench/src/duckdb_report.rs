//! The markdown report of a `duckdb` run: per size, each scenario's p50/p95 in the three
//! engines and the faster peer over Vev; the targets, judged at the largest size.

use std::fmt::Write;

use crate::duckdb::DuckdbResults;
use crate::duckdb_output::{PerEngine, ScanResult, SizeResult};
use crate::report::thousands;
use crate::stats::{median, quantile};

/// Every query scenario at least this many times faster than the faster peer.
pub const TARGET_SPEEDUP: f64 = 5.0;
/// `vev_attribute` values per second into DuckDB, at least.
pub const TARGET_SCAN_VALUES_PER_S: f64 = 50e6;
/// Durable single-datom transactions per second, at least.
pub const TARGET_TX_PER_S: f64 = 2_000.0;

fn verdict(ok: bool) -> &'static str {
    if ok {
        "met"
    } else {
        "**missed**"
    }
}

fn p50_p95(samples: &[f64]) -> String {
    format!("{} / {}", ms(median(samples)), ms(quantile(samples, 0.95)))
}

/// Milliseconds with three significant digits (at least one decimal below 100).
fn ms(x: f64) -> String {
    if x >= 100.0 {
        format!("{x:.0}")
    } else if x >= 10.0 {
        format!("{x:.1}")
    } else if x >= 1.0 {
        format!("{x:.2}")
    } else {
        format!("{x:.3}")
    }
}

fn mb(bytes: u64) -> String {
    format!("{:.1}", bytes as f64 / 1e6)
}

/// The faster peer's p50 over Vev's (above 1: Vev is faster).
fn speedup(s: &PerEngine<Vec<f64>>) -> f64 {
    median(&s.duckdb).min(median(&s.sqlite)) / median(&s.vev)
}

/// Transactions per second over the whole run of sequential calls.
fn tx_per_s(samples: &[f64]) -> f64 {
    samples.len() as f64 / (samples.iter().sum::<f64>() / 1e3)
}

fn scan_rate(s: &ScanResult) -> f64 {
    s.values as f64 / (median(&s.samples_ms) / 1e3)
}

/// The target cell of a row: judged only at the largest size.
fn target_cell(judged: bool, ok: bool, target: &str) -> String {
    if judged {
        format!("{} {target}", verdict(ok))
    } else {
        "—".into()
    }
}

pub fn render(r: &DuckdbResults) -> String {
    let d = &r.driver;
    let mut out = String::new();
    let _ = writeln!(out, "{}\n", r.machine.line(true));
    let _ = writeln!(
        out,
        "Command: `cargo run --release -p vev-bench -- {}`\n",
        r.command
    );
    let _ = writeln!(
        out,
        "- Vev {}: `vev.duckdb_extension` (release, `scripts/duckdb-extension.sh`) loaded into an in-memory DuckDB {} connection (Python {}); every call a table function over the database file.\n- (a) DuckDB {}: one `datoms(e, a, v_int, v_str, tx, added)` table in a DuckDB file, rows sorted by (a, e, v, tx) at load, no ART index; current state through an `ANTI JOIN` against later retractions.\n- (b) SQLite {} (Python's `sqlite3`): `datoms(e, a, v, tx, added)` WITHOUT ROWID keyed (e, a, v, tx), indexes (a, v, added) and (tx); WAL, `synchronous=FULL`; current state through `NOT EXISTS` of a later retraction.\n- One client; every timed call `con.execute(sql, params).fetchall()` from Python. Per scenario and engine, each of {} round(s): a warm-up (≥ 3 calls, ≥ {} ms), then up to {} timed calls (≥ 5, stopping after {} ms); the engines take turns. Calls take the probe values in turn, the same sequence in every engine. Every scenario's answers were checked equal in the three engines before timing (the run stops otherwise). SQL texts: `bench/duckdb/sql.py`; design choices: `bench/duckdb/README.md`.\n- Vev's advantage: the faster peer's p50 over Vev's (bulk load: its seconds over Vev's); for transactions Vev's rate over the faster peer's; for the store (a)'s bytes over Vev's. Above 1× Vev is ahead.\n",
        env!("CARGO_PKG_VERSION"),
        d.duckdb_version,
        d.python_version,
        d.duckdb_version,
        d.sqlite_version,
        d.rounds,
        d.warmup_ms,
        d.reps,
        d.budget_ms,
    );
    let largest = d.sizes.iter().map(|s| s.target_datoms).max();
    for size in &d.sizes {
        size_table(&mut out, size, Some(size.target_datoms) == largest, d.txs);
    }
    if let Some(size) = d.sizes.iter().find(|s| Some(s.target_datoms) == largest) {
        targets(&mut out, size);
        let _ = writeln!(out, "\n{}", summary_line(size));
    }
    out
}

fn size_table(out: &mut String, s: &SizeResult, judged: bool, txs: u64) {
    let _ = writeln!(
        out,
        "### {} datoms ({} people, {} transactions of {} people, then {} changing ages)\n",
        thousands(s.datoms as usize),
        thousands(s.people as usize),
        s.load_transactions,
        thousands(s.people_per_tx as usize),
        s.transactions - s.load_transactions
    );
    let _ = writeln!(
        out,
        "| scenario | rows | Vev p50 / p95 ms | (a) DuckDB p50 / p95 ms | (b) SQLite p50 / p95 ms | Vev's advantage | target |\n|---|---:|---:|---:|---:|---:|---|"
    );
    for q in &s.queries {
        let x = speedup(&q.samples_ms);
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {x:.2}× | {} |",
            q.name,
            format_rows(q.rows),
            p50_p95(&q.samples_ms.vev),
            p50_p95(&q.samples_ms.duckdb),
            p50_p95(&q.samples_ms.sqlite),
            target_cell(judged, x >= TARGET_SPEEDUP, "≥ 5×"),
        );
    }
    let b = &s.bulk_load_s;
    let _ = writeln!(
        out,
        "| bulk load, s | {} | {:.2} | {:.2} | {:.2} | {:.2}× | — |",
        thousands(s.datoms as usize),
        b.vev,
        b.duckdb,
        b.sqlite,
        b.duckdb.min(b.sqlite) / b.vev
    );
    let t = &s.transactions_ms;
    let rate = |x: &[f64]| format!("{} ({})", thousands(tx_per_s(x) as usize), p50_p95(x));
    let vev_rate = tx_per_s(&t.vev);
    let _ = writeln!(
        out,
        "| single-datom transactions per s (p50 / p95 ms) | {txs} | {} | {} | {} | {:.2}× | {} |",
        rate(&t.vev),
        rate(&t.duckdb),
        rate(&t.sqlite),
        vev_rate / tx_per_s(&t.duckdb).max(tx_per_s(&t.sqlite)),
        target_cell(judged, vev_rate >= TARGET_TX_PER_S, "≥ 2,000/s"),
    );
    let st = &s.store;
    let store = |b: &crate::duckdb_output::StoreBytes| format!("{} + {}", mb(b.file), mb(b.wal));
    let _ = writeln!(
        out,
        "| store after load, MB (file + WAL) | | {} | {} | {} | {:.2}× | {} |\n",
        store(&st.vev),
        store(&st.duckdb),
        store(&st.sqlite),
        st.duckdb.total() as f64 / st.vev.total() as f64,
        target_cell(judged, st.vev.total() <= st.duckdb.total(), "≤ (a)"),
    );
    let _ = writeln!(
        out,
        "Store: after each peer's checkpoint (DuckDB `CHECKPOINT`, SQLite `wal_checkpoint(TRUNCATE)`); Vev's once the checkpoint it starts on its own thread had finished (its files settled {:.1} s after the last transaction; right after it they held {} + {} MB).\n",
        s.vev_checkpoint_s,
        mb(s.vev_store_before_checkpoint.file),
        mb(s.vev_store_before_checkpoint.wal),
    );
    let f = &s.floor;
    let _ = writeln!(
        out,
        "Floor of one call that reads nothing (p50 / p95 ms): `{}` on Vev's DuckDB connection {}, on (a) {}; `{}` on (b) {}.\n",
        f.duckdb_sql,
        p50_p95(&f.samples_ms.vev),
        p50_p95(&f.samples_ms.duckdb),
        f.sqlite_sql,
        p50_p95(&f.samples_ms.sqlite),
    );
    scan_table(out, &s.scans, judged);
    let _ = writeln!(out, "Datalog of each scenario:\n");
    for q in &s.queries {
        let probes = match q.calls {
            1 => String::new(),
            n => format!(" ({n} probe values in turn)"),
        };
        let _ = writeln!(out, "- {}{probes}: `{}`", q.name, q.shown);
    }
    let _ = writeln!(out);
}

fn format_rows(rows: f64) -> String {
    if rows.fract() == 0.0 {
        thousands(rows as usize)
    } else {
        format!("{rows:.1}")
    }
}

fn scan_table(out: &mut String, scans: &[ScanResult], judged: bool) {
    let _ = writeln!(
        out,
        "| `vev_attribute` scan | values | p50 / p95 ms | values per s | target |\n|---|---:|---:|---:|---|"
    );
    for s in scans {
        let rate = scan_rate(s);
        let _ = writeln!(
            out,
            "| `{}` | {} | {} | {}M | {} |",
            s.sql,
            thousands(s.values as usize),
            p50_p95(&s.samples_ms),
            thousands((rate / 1e6).round() as usize),
            target_cell(judged, rate >= TARGET_SCAN_VALUES_PER_S, "≥ 50M/s"),
        );
    }
    let _ = writeln!(out);
}

fn targets(out: &mut String, s: &SizeResult) {
    let _ = writeln!(
        out,
        "**Targets** (issue 21), at the largest size ({} datoms; the issue sets them at 1M):\n",
        thousands(s.datoms as usize)
    );
    for q in &s.queries {
        let x = speedup(&q.samples_ms);
        let _ = writeln!(
            out,
            "- {}: {} ≥ 5× faster than the faster of (a) and (b): {x:.2}× (p50 Vev {} ms, DuckDB {} ms, SQLite {} ms).",
            verdict(x >= TARGET_SPEEDUP),
            q.name,
            ms(median(&q.samples_ms.vev)),
            ms(median(&q.samples_ms.duckdb)),
            ms(median(&q.samples_ms.sqlite)),
        );
    }
    for scan in &s.scans {
        let rate = scan_rate(scan);
        let _ = writeln!(
            out,
            "- {}: `{}` ≥ 50M values per s: {:.1}M ({} values, p50 {} ms).",
            verdict(rate >= TARGET_SCAN_VALUES_PER_S),
            scan.sql,
            rate / 1e6,
            thousands(scan.values as usize),
            ms(median(&scan.samples_ms)),
        );
    }
    let rate = tx_per_s(&s.transactions_ms.vev);
    let _ = writeln!(
        out,
        "- {}: durable single-datom transactions ≥ 2,000 per s: {}.",
        verdict(rate >= TARGET_TX_PER_S),
        thousands(rate as usize)
    );
    let (vev, duck) = (s.store.vev.total(), s.store.duckdb.total());
    let _ = writeln!(
        out,
        "- {}: store no larger than (a): Vev {} MB, DuckDB {} MB.",
        verdict(vev <= duck),
        mb(vev),
        mb(duck)
    );
}

/// One machine-readable line: the largest size's ratios and rates.
fn summary_line(s: &SizeResult) -> String {
    let mut line = format!("vev-bench-duckdb datoms={}", s.datoms);
    for q in &s.queries {
        let _ = write!(line, " {}={:.2}", q.name, speedup(&q.samples_ms));
    }
    for scan in &s.scans {
        let aggregate = scan.aggregate.split('(').next().unwrap_or_default();
        let _ = write!(
            line,
            " scan_{aggregate}{}={:.1}M",
            scan.attribute,
            scan_rate(scan) / 1e6
        );
    }
    let _ = write!(
        line,
        " tx_per_s={:.0} store_vs_a={:.2}",
        tx_per_s(&s.transactions_ms.vev),
        s.store.duckdb.total() as f64 / s.store.vev.total() as f64
    );
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::duckdb_output::{parse, tests::sample};
    use crate::report::Machine;

    fn results(doc: serde_json::Value) -> DuckdbResults {
        DuckdbResults {
            machine: Machine::probe(),
            driver: parse(doc.to_string().as_bytes()).unwrap(),
            command: "duckdb --sizes 1000000".into(),
        }
    }

    #[test]
    fn targets_judge_the_faster_peer_the_rates_and_the_store() {
        let text = render(&results(sample()));
        for line in [
            "- **missed**: point_lookup ≥ 5× faster than the faster of (a) and (b): 0.20× (p50 Vev 0.100 ms, DuckDB 9.00 ms, SQLite 0.020 ms).",
            "- met: aggregate ≥ 5× faster than the faster of (a) and (b): 6.00× (p50 Vev 1.00 ms, DuckDB 6.00 ms, SQLite 140 ms).",
            "- met: `SELECT sum(v) FROM vev_attribute(path, ':person/age')` ≥ 50M values per s: 82.0M (163,934 values, p50 2.00 ms).",
            "- met: durable single-datom transactions ≥ 2,000 per s: 2,222.",
            "- met: store no larger than (a): Vev 5.0 MB, DuckDB 5.0 MB.",
        ] {
            assert!(text.contains(line), "no line {line:?} in\n{text}");
        }
        assert!(
            text.contains("Command: `cargo run --release -p vev-bench -- duckdb --sizes 1000000`")
        );
        assert!(text.contains(
            "| aggregate | 1 | 1.00 / 2.00 | 6.00 / 12.0 | 140 / 280 | 6.00× | met ≥ 5× |"
        ));
        assert!(text.ends_with(
            "vev-bench-duckdb datoms=1000152 point_lookup=0.20 aggregate=6.00 scan_sum:person/age=82.0M tx_per_s=2222 store_vs_a=1.00\n"
        ));
    }

    #[test]
    fn only_the_largest_size_is_judged() {
        let mut doc = sample();
        let mut small = doc["sizes"][0].clone();
        small["target_datoms"] = 100_000.into();
        small["datoms"] = 100_015.into();
        small["store_bytes"]["Vev"]["file"] = 9_000_000.into();
        doc["sizes"] = serde_json::json!([small, doc["sizes"][0].clone()]);
        let text = render(&results(doc));
        assert!(
            text.contains("| aggregate | 1 | 1.00 / 2.00 | 6.00 / 12.0 | 140 / 280 | 6.00× | — |")
        );
        assert!(text.contains("| store after load, MB (file + WAL) | | 9.0 + 1.0 | 5.0 + 0.0 | 74.0 + 0.0 | 0.50× | — |"));
        assert!(text.contains("at the largest size (1,000,152 datoms"));
        assert!(text.contains("- met: store no larger than (a): Vev 5.0 MB, DuckDB 5.0 MB."));
    }
}
