//! The markdown report of a `query` run: per query, the expected row count, each engine's
//! median and p95, and each engine's median over the base engine's (Vev's when it ran).

use std::fmt::Write;

use crate::peers::QueryTiming;
use crate::queries::QuerySpec;
use crate::report::{thousands, Machine};
use crate::stats::{median, quantile};

/// One engine's column; `timings` is `None` when the engine was not run.
pub struct EngineColumn {
    /// Short name for headers: `Vev`, `DataScript`, `Datalevin mem`, `Datalevin disk`.
    pub short: &'static str,
    /// Engine, version and runtime, for the legend.
    pub label: String,
    pub timings: Option<Vec<QueryTiming>>,
}

impl EngineColumn {
    fn timing(&self, query: &str) -> Option<&QueryTiming> {
        self.timings.as_ref()?.iter().find(|t| t.query == query)
    }

    fn has_any(&self) -> bool {
        self.timings.as_ref().is_some_and(|t| !t.is_empty())
    }
}

/// One query of the report with its naive row count and the size of its database.
pub struct QueryRow {
    pub spec: QuerySpec,
    pub expected_rows: usize,
    pub datoms: usize,
}

pub struct QueryResults {
    pub machine: Machine,
    pub warmup: usize,
    pub warmup_ms: u64,
    pub reps: usize,
    pub budget_ms: u64,
    pub queries: Vec<QueryRow>,
    pub engines: Vec<EngineColumn>,
    /// q2 and q2-switch timed in alternation in Vev (see `vev_query::PairTiming`).
    pub pair: Option<crate::vev_query::PairTiming>,
}

fn fmt_ms(x: f64) -> String {
    if x < 1.0 {
        format!("{x:.3}")
    } else if x < 10.0 {
        format!("{x:.2}")
    } else if x < 1000.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.0}")
    }
}

fn time_cell(t: Option<&QueryTiming>, reps: usize) -> String {
    match t {
        None => "—".to_string(),
        Some(t) if t.samples_ms.is_empty() => "no samples".to_string(),
        Some(t) => {
            let mut cell = format!(
                "{} / {}",
                fmt_ms(median(&t.samples_ms)),
                fmt_ms(quantile(&t.samples_ms, 0.95))
            );
            if t.samples_ms.len() < reps {
                let _ = write!(cell, " (n={})", t.samples_ms.len());
            }
            cell
        }
    }
}

/// The rows cell, and how many engines disagree with the expected count.
fn rows_cell(q: &QueryRow, engines: &[EngineColumn]) -> (String, usize) {
    let mut cell = thousands(q.expected_rows);
    let mut wrong = 0;
    for e in engines {
        if let Some(t) = e.timing(q.spec.name) {
            if t.rows != q.expected_rows {
                wrong += 1;
                let _ = write!(cell, " ✗ {}: {}", e.short, thousands(t.rows));
            }
        }
    }
    (cell, wrong)
}

/// The report and the number of row counts that differ from the naive count.
pub fn render(r: &QueryResults) -> (String, usize) {
    let mut out = String::new();
    let m = &r.machine;
    let _ = writeln!(
        out,
        "{}
",
        m.line(false)
    );
    let base = r
        .engines
        .iter()
        .position(EngineColumn::has_any)
        .unwrap_or(0);
    let others: Vec<usize> = (0..r.engines.len())
        .filter(|&i| i != base && r.engines[i].has_any())
        .collect();
    let mut header = "| query | db (datoms) | rows |".to_string();
    let mut rule = "|---|---|---:|".to_string();
    for e in &r.engines {
        let _ = write!(header, " {} ms |", e.short);
        rule.push_str("---:|");
    }
    for &i in &others {
        let _ = write!(
            header,
            " {} ÷ {} |",
            r.engines[i].short, r.engines[base].short
        );
        rule.push_str("---:|");
    }
    let _ = writeln!(out, "{header}\n{rule}");
    let mut mismatches = 0;
    for q in &r.queries {
        let (rows, wrong) = rows_cell(q, &r.engines);
        mismatches += wrong;
        let _ = write!(
            out,
            "| {} | {} ({}) | {rows} |",
            q.spec.name,
            q.spec.db.name(),
            thousands(q.datoms)
        );
        for e in &r.engines {
            let _ = write!(out, " {} |", time_cell(e.timing(q.spec.name), r.reps));
        }
        let base_median = r.engines[base]
            .timing(q.spec.name)
            .filter(|t| !t.samples_ms.is_empty())
            .map(|t| median(&t.samples_ms));
        for &i in &others {
            let ratio = r.engines[i]
                .timing(q.spec.name)
                .filter(|t| !t.samples_ms.is_empty())
                .zip(base_median)
                .map(|(t, b)| format!("{:.2}×", median(&t.samples_ms) / b));
            let _ = write!(out, " {} |", ratio.as_deref().unwrap_or("—"));
        }
        out.push('\n');
    }
    legend(&mut out, r, base);
    (out, mismatches)
}

fn legend(out: &mut String, r: &QueryResults, base: usize) {
    let _ = writeln!(
        out,
        "\nTimes are median / p95 in ms of up to {} timed runs after untimed warm-up runs (at \
         least {}, for at least {} ms); fewer timed runs, shown as n=, where they passed {} ms \
         (never fewer than 3). \
         Ratios are medians over {}'s: above 1, {} is faster. Rows are checked against a naive \
         count over the fixture's datoms; ✗ marks an engine that disagrees.\n",
        r.reps, r.warmup, r.warmup_ms, r.budget_ms, r.engines[base].short, r.engines[base].short
    );
    if let Some(p) = &r.pair {
        let (a, b) = (median(&p.first.samples_ms), median(&p.second.samples_ms));
        let ratio = a.max(b) / a.min(b);
        let _ = writeln!(
            out,
            "{} and {} in Vev, timed in {} alternating pairs (each pair alternates which runs \
             first): medians {} and {} ms, {} and {} rows; the slower is {ratio:.2}× the faster \
             (target: within 1.2×, {}).\n",
            p.first.query,
            p.second.query,
            p.first.samples_ms.len(),
            fmt_ms(a),
            fmt_ms(b),
            p.first.rows,
            p.second.rows,
            if ratio <= 1.2 { "met" } else { "not met" },
        );
    }
    for e in &r.engines {
        let status = match &e.timings {
            None => "not run".to_string(),
            Some(t) if t.is_empty() => "no timings".to_string(),
            Some(_) => e.label.clone(),
        };
        let _ = writeln!(out, "- {}: {status}", e.short);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn milliseconds_keep_three_significant_digits() {
        assert_eq!(fmt_ms(0.01234), "0.012");
        assert_eq!(fmt_ms(1.234), "1.23");
        assert_eq!(fmt_ms(12.34), "12.3");
        assert_eq!(fmt_ms(1234.5), "1234");
    }
}
