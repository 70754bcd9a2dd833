//! The markdown report of a `core` run.

use std::fmt::Write;

use crate::bulk::BulkTimes;
use crate::datascript::DataScriptTimes;
use crate::latency::Latency;
use crate::stats::median;

/// Targets of the core suite.
pub const TARGET_SPEEDUP: f64 = 10.0;
pub const TARGET_MEDIAN_US: f64 = 20.0;
pub const TARGET_BIG_SMALL_RATIO: f64 = 1.5;

pub struct CoreResults {
    pub machine: Machine,
    pub people: usize,
    pub reps: usize,
    pub bulk: BulkTimes,
    pub datascript: Option<DataScriptTimes>,
    pub small_datoms: usize,
    pub big_datoms: usize,
    pub small: Latency,
    pub big: Latency,
    pub rss_before: u64,
    pub rss_after: u64,
}

/// Where and under what load the run happened.
pub struct Machine {
    pub cpus: usize,
    pub cpu_model: String,
    pub load_start: String,
    pub load_end: String,
    /// The global allocator this build of the bench runs on (Vev's in-process side).
    pub allocator: &'static str,
}

impl Machine {
    /// The machine now; `load_end` is filled in by `finish`.
    pub fn probe() -> Machine {
        let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu_model = cpuinfo
            .lines()
            .find_map(|l| l.strip_prefix("model name"))
            .and_then(|rest| rest.split_once(':'))
            .map_or("unknown".to_string(), |(_, m)| m.trim().to_string());
        Machine {
            cpus,
            cpu_model,
            load_start: load_average(),
            load_end: String::new(),
            allocator: if cfg!(feature = "system-alloc") {
                "the system allocator (glibc malloc; `--features system-alloc`)"
            } else {
                "mimalloc"
            },
        }
    }

    pub fn finish(&mut self) {
        self.load_end = load_average();
    }

    /// The report's machine line; `files`: the suite keeps its files in the temp dir,
    /// which the line names.
    pub fn line(&self, files: bool) -> String {
        let files = if files {
            format!(" Files in {} (same disk).", std::env::temp_dir().display())
        } else {
            String::new()
        };
        format!(
            "Machine: {} CPUs, {}; load average {} at start, {} at end.{files} Vev's allocator: {}.",
            self.cpus, self.cpu_model, self.load_start, self.load_end, self.allocator
        )
    }
}

/// The 1, 5 and 15 minute load averages from `/proc/loadavg`.
fn load_average() -> String {
    let text = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    text.split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

fn met(ok: bool) -> &'static str {
    if ok {
        "yes"
    } else {
        "**no**"
    }
}

pub fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// One row of the (a) comparison: Vev's median against DataScript's.
/// `median ms (min–max)` of repetition times.
fn ms_cell(samples: &[f64]) -> String {
    let min = samples.iter().copied().fold(f64::INFINITY, f64::min);
    let max = samples.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    format!("{:.1} ms ({min:.0}–{max:.0})", median(samples))
}

fn vs_row(out: &mut String, label: &str, vev: &[f64], ds: Option<&[f64]>, target: bool) {
    let (ds_cell, ratio_cell, met_cell) = match ds {
        Some(ds) => {
            let ratio = median(ds) / median(vev);
            let met_cell = if target {
                met(ratio >= TARGET_SPEEDUP)
            } else {
                "—"
            };
            (
                ms_cell(ds),
                format!("{ratio:.1}× (DataScript/Vev)"),
                met_cell,
            )
        }
        None => ("not run".to_string(), "—".to_string(), "—"),
    };
    let target_cell = if target { "Vev ≥ 10× faster" } else { "—" };
    let vev_cell = ms_cell(vev);
    let _ = writeln!(
        out,
        "| {label} | {vev_cell} | {ds_cell} | {ratio_cell} | {target_cell} | {met_cell} |"
    );
}

pub fn render(r: &CoreResults) -> String {
    let mut out = String::new();
    let m = &r.machine;
    let _ = writeln!(
        out,
        "{}
",
        m.line(false)
    );
    let ds_name = r.datascript.as_ref().map_or("DataScript".to_string(), |d| {
        format!("DataScript {} (node {})", d.version, d.node_version)
    });
    let _ = writeln!(
        out,
        "| # | measure | Vev | {ds_name} | ratio | target | met |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|");
    let people = thousands(r.people);
    let ds = r.datascript.as_ref();
    out.push_str("| a1 ");
    vs_row(
        &mut out,
        &format!(
            "{people} people, 1 transaction (Rust `TxMap`), median (min–max) of {}",
            r.reps
        ),
        &r.bulk.one_tx_ms,
        ds.map(|d| d.one_tx_ms.as_slice()),
        true,
    );
    out.push_str("| a2 ");
    vs_row(
        &mut out,
        &format!(
            "{people} people, {people} transactions, median (min–max) of {}",
            r.reps
        ),
        &r.bulk.many_tx_ms,
        ds.map(|d| d.many_tx_ms.as_slice()),
        true,
    );
    out.push_str("| a3 ");
    vs_row(
        &mut out,
        &format!(
            "{people} people, 1 transaction from EDN text (parse included), median (min–max) of {}",
            r.reps
        ),
        &r.bulk.edn_one_tx_ms,
        ds.map(|d| d.one_tx_ms.as_slice()),
        false,
    );
    latency_rows(&mut out, r);
    let per_datom = r.rss_after.saturating_sub(r.rss_before) as f64 / r.big_datoms as f64;
    let _ = writeln!(
        out,
        "| c | resident memory per datom at {} datoms (VmRSS {:.1} → {:.1} MiB; `size_of::<Datom>()` = {}) | {per_datom:.0} bytes | — | — | — | — |",
        thousands(r.big_datoms),
        r.rss_before as f64 / 1048576.0,
        r.rss_after as f64 / 1048576.0,
        std::mem::size_of::<vev::Datom>(),
    );
    out
}

fn latency_rows(out: &mut String, r: &CoreResults) {
    let txs = r.small.samples_us.len();
    let (sm, sp) = (r.small.median_us(), r.small.p95_us());
    let (bm, bp) = (r.big.median_us(), r.big.p95_us());
    let tail = |l: &Latency| format!("mean {:.1} µs, max {:.0} µs", l.mean_us(), l.max_us());
    let label = |datoms: usize, l: &Latency| {
        format!(
            "1-entity 3-attribute transaction on a {}-datom db ({} at the end), {txs} transactions, {} preemptions",
            thousands(datoms),
            thousands(datoms + l.datoms_added),
            l.preemptions,
        )
    };
    let _ = writeln!(
        out,
        "| b1 | {} | median {sm:.1} µs, p95 {sp:.1} µs ({}) | — | — | median < 20 µs | {} |",
        label(r.small_datoms, &r.small),
        tail(&r.small),
        met(sm < TARGET_MEDIAN_US),
    );
    let ratio = bm / sm;
    let _ = writeln!(
        out,
        "| b2 | {} | median {bm:.1} µs, p95 {bp:.1} µs ({}) | — | {ratio:.2} (median big/small); p95 {:.2} | median < 20 µs, ratio ≤ 1.5 | {} |",
        label(r.big_datoms, &r.big),
        tail(&r.big),
        bp / sp,
        met(bm < TARGET_MEDIAN_US && ratio <= TARGET_BIG_SMALL_RATIO),
    );
}

#[cfg(test)]
mod tests {
    use super::thousands;

    #[test]
    fn thousands_separators() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(20_000), "20,000");
        assert_eq!(thousands(1_000_000), "1,000,000");
    }
}
