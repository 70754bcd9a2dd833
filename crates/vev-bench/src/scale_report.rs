//! The markdown report of `vev-bench scale`: one column per size, one row per measure, with
//! issue 24's target and whether each cell meets it.

use std::fmt::Write;

use serde_json::Value as Json;

use crate::scale::{ScaleResults, SizeResult};

/// A target as written in the issue and the test of a value against it.
type Target = (&'static str, fn(f64) -> bool);

/// A measure: its name, its target (None: reported only), and its value for a size.
struct Row {
    name: &'static str,
    target: Option<Target>,
    value: fn(&SizeResult) -> Option<f64>,
    digits: usize,
}

fn num(j: &Json, path: &[&str]) -> Option<f64> {
    path.iter().try_fold(j, |j, k| j.get(*k))?.as_f64()
}

fn per_million(secs: f64, datoms: u64) -> f64 {
    secs / (datoms as f64 / 1e6)
}

const ROWS: &[Row] = &[
    Row {
        name: "resident memory after touching every index (VmHWM), bytes/datom",
        target: Some(("≤ 100", |x| x <= 100.0)),
        value: |s| num(&s.probe, &["vm_hwm"]).map(|b| b / s.datoms as f64),
        digits: 0,
    },
    Row {
        name: "resident (VmRSS) at the same moment, bytes/datom",
        target: None,
        value: |s| num(&s.probe, &["vm_rss"]).map(|b| b / s.datoms as f64),
        digits: 0,
    },
    Row {
        name: "file after the transactional load, bytes/datom",
        target: Some(("≤ 40", |x| x <= 40.0)),
        value: |s| Some(s.transactions.file_bytes as f64 / s.datoms as f64),
        digits: 1,
    },
    Row {
        name: "file after `bulk_load`, bytes/datom",
        target: None,
        value: |s| Some(s.bulk.file_bytes as f64 / s.datoms as f64),
        digits: 1,
    },
    Row {
        name: "load through ordinary transactions, s per million datoms",
        target: Some(("≤ 3", |x| x <= 3.0)),
        value: |s| Some(per_million(s.transactions.elapsed.as_secs_f64(), s.datoms)),
        digits: 2,
    },
    Row {
        name: "load through `bulk_load`, s per million datoms",
        target: None,
        value: |s| Some(per_million(s.bulk.elapsed.as_secs_f64(), s.datoms)),
        digits: 2,
    },
    Row {
        name: "open (read only), ms",
        target: None,
        value: |s| num(&s.probe, &["open_ms"]),
        digits: 1,
    },
    Row {
        name: "touch every index (8 full scans), ms",
        target: None,
        value: |s| num(&s.probe, &["touch_ms"]),
        digits: 0,
    },
    Row {
        name: "aggregate, best warm run, ms",
        target: None,
        value: |s| num(&s.probe, &["aggregate", "best_ms"]),
        digits: 1,
    },
    Row {
        name: "aggregate, ns per entity",
        target: Some(("≤ 50", |x| x <= 50.0)),
        value: |s| num(&s.probe, &["aggregate", "best_ms"]).map(|m| m * 1e6 / s.people as f64),
        digits: 1,
    },
    Row {
        name: "same aggregate in DuckDB, two attribute tables joined on e, best, ms",
        target: None,
        value: |s| s.duckdb.as_ref().map(|d| d.joined_ms),
        digits: 1,
    },
    Row {
        name: "Vev ÷ DuckDB on the aggregate",
        target: Some(("≤ 3×", |x| x <= 3.0)),
        value: |s| {
            let vev = num(&s.probe, &["aggregate", "best_ms"])?;
            Some(vev / s.duckdb.as_ref()?.joined_ms)
        },
        digits: 2,
    },
    Row {
        name: "DuckDB, one table, best, ms (reference)",
        target: None,
        value: |s| s.duckdb.as_ref().map(|d| d.one_table_ms),
        digits: 1,
    },
    Row {
        name: "selective join (30-year-olds in Riga, friends in Riga), best, ms",
        target: None,
        value: |s| num(&s.probe, &["join", "best_ms"]),
        digits: 2,
    },
    Row {
        name: "point pull with friends' names, p50 of 1,000, µs",
        target: None,
        value: |s| num(&s.probe, &["pull_p50_us"]),
        digits: 1,
    },
    Row {
        name: "reach from the last person, right-linear, best, ms",
        target: Some(("≤ 20", |x| x <= 20.0)),
        value: |s| num(&s.probe, &["reach", "right", "best_ms"]),
        digits: 1,
    },
    Row {
        name: "reach from the last person, left-linear, best, ms",
        target: Some(("≤ 20", |x| x <= 20.0)),
        value: |s| num(&s.probe, &["reach", "left", "best_ms"]),
        digits: 1,
    },
];

fn cell(row: &Row, s: &SizeResult) -> String {
    match (row.value)(s) {
        None => "—".to_string(),
        Some(x) => {
            let verdict = match row.target {
                Some((_, ok)) if ok(x) => " met",
                Some(_) => " **MISS**",
                None => "",
            };
            format!("{x:.prec$}{verdict}", prec = row.digits)
        }
    }
}

pub fn render(r: &ScaleResults) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# vev-bench scale\n\n`{}`\n", r.command);
    let _ = writeln!(out, "{}\n", r.machine.line(true));
    let _ = write!(out, "| measure | target |");
    for s in &r.sizes {
        let _ = write!(out, " {} datoms ({} people) |", s.datoms, s.people);
    }
    let _ = write!(out, "\n|---|---|");
    for _ in &r.sizes {
        let _ = write!(out, "---:|");
    }
    out.push('\n');
    for row in ROWS {
        let target = row.target.map_or("", |(t, _)| t);
        let _ = write!(out, "| {} | {target} |", row.name);
        for s in &r.sizes {
            let _ = write!(out, " {} |", cell(row, s));
        }
        out.push('\n');
    }
    out.push('\n');
    for s in &r.sizes {
        let found = |dir: &str| s.probe["reach"][dir]["found"].as_i64().unwrap_or(-1);
        let _ = writeln!(
            out,
            "- {} datoms: {} transactions of {} people ({:.1} s) against `bulk_load` of the same transactions ({:.1} s); \
             index datoms (EAVT AEVT AVET VAET, then history) {}; the join found {} friends, reach {} (right) and {} (left) people; \
             peak resident after the queries {:.0} bytes/datom; DuckDB {} (answer checked equal to Vev's).",
            s.datoms,
            s.transactions.txs,
            r.tx_people,
            s.transactions.elapsed.as_secs_f64(),
            s.bulk.elapsed.as_secs_f64(),
            s.probe["index_datoms"],
            s.probe["join"]["rows"],
            found("right"),
            found("left"),
            num(&s.probe, &["vm_hwm_after_queries"]).unwrap_or(0.0) / s.datoms as f64,
            s.duckdb.as_ref().map_or("not run", |d| d.version.as_str()),
        );
    }
    let _ = writeln!(
        out,
        "\nEach load is timed from opening a new file to closing it (its last checkpoint), on \
         transactions generated and parsed beforehand. Memory is read in a new process that \
         opened the transactions' file read only and scanned all eight indexes. Datalevin is \
         not run at these sizes."
    );
    out
}
