//! The markdown report of a `storage` run.

use std::fmt::Write;

use crate::report::thousands;
use crate::stats::{median, quantile};
use crate::storage::StorageResults;
use crate::storage_bulk::OPEN_QUERY;
use crate::storage_concurrent::{ConcurrentRun, Kind};
use crate::storage_fixture::{Round, Shape};

/// Targets of the storage suite.
const TARGET_FLOOR_RATIO: f64 = 2.0;
const TARGET_BIG_SMALL_RATIO: f64 = 1.5;
const TARGET_BULK_S_PER_MILLION: f64 = 3.0;
const TARGET_OPEN_QUERY_MS: f64 = 1_000.0;

/// `median / p95` in ms.
fn cell(samples_us: &[f64]) -> String {
    format!(
        "{} / {}",
        ms3(median(samples_us) / 1e3),
        ms3(quantile(samples_us, 0.95) / 1e3)
    )
}

/// Three significant digits, at least one decimal.
fn ms3(ms: f64) -> String {
    if ms >= 100.0 {
        format!("{ms:.1}")
    } else if ms >= 10.0 {
        format!("{ms:.2}")
    } else {
        format!("{ms:.3}")
    }
}

/// Counts of rows meeting each target: (met, of).
#[derive(Default)]
struct Tally {
    floor: (usize, usize),
    datalevin: (usize, usize),
    big_small: (usize, usize),
}

fn count(t: &mut (usize, usize), ok: bool) {
    t.0 += usize::from(ok);
    t.1 += 1;
}

pub fn render(r: &StorageResults) -> String {
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
        "- Vev {}: one SQLite file (bundled SQLite {}), WAL, `synchronous=FULL`, one log row per transaction.",
        env!("CARGO_PKG_VERSION"),
        rusqlite::version()
    );
    let _ = writeln!(
        out,
        "- SQLite floor: the same SQLite in the same process, its own file, the same pragmas; per measurement one write batch (`BEGIN IMMEDIATE` … `COMMIT`) inserting as many `(e, a, v, tx, added)` rows as the Vev transaction had datoms."
    );
    if let Some(d) = &r.datalevin {
        let _ = writeln!(
            out,
            "- {}: on disk, its defaults (no WAL; LMDB env flags {:?}: no `nosync`, so each commit is synced); `transact!` timed inside the JVM after {} warm-up transactions per shape.",
            d.label, d.env_flags, r.cfg.jvm_warmup
        );
    }
    let _ = writeln!(
        out,
        "\nDurable small transactions: milliseconds, median / p95 of {} timed transactions after {} untimed, per shape and database. Each shape runs two rounds over the same accounts, one account per measurement, spread over the database.",
        r.cfg.measurements, r.cfg.warmup
    );
    for round in Round::ALL {
        let title = match round {
            Round::First => "First touch: no transaction has touched the account since the bulk load, so on a large database Vev loads its index segments from the file (a freshly opened or just-loaded database, or one larger than the segment cache)",
            Round::Cached => "Cached: the same accounts again, right after the first round (the segments they need are in Vev's cache)",
        };
        let _ = writeln!(out, "\n**{title}.**\n");
        let tally = latency_table(&mut out, r, round);
        let _ = writeln!(
            out,
            "\nRatios are of medians. Targets, this round: Vev within {TARGET_FLOOR_RATIO}× of the floor: {} of {}; Vev faster than Datalevin: {} of {}; largest database within {TARGET_BIG_SMALL_RATIO}× of the smallest: {} of {}.",
            tally.floor.0,
            tally.floor.1,
            tally.datalevin.0,
            tally.datalevin.1,
            tally.big_small.0,
            tally.big_small.1
        );
    }
    builds(&mut out, r);
    concurrent_table(&mut out, r);
    bulk_table(&mut out, r);
    out
}

fn concurrent_table(out: &mut String, r: &StorageResults) {
    if r.concurrent.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "\nConcurrent small durable transactions: threads committing through one `Connection` at once (group commit), {} transactions per cell on a fresh file; syncs are synced write batches (`Connection::commit_stats`). One thread is the uncontended case.\n",
        thousands(r.cfg.concurrent_txs)
    );
    let _ = writeln!(
        out,
        "| transaction | threads | transactions/s | syncs per transaction | ÷ 1 thread |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---:|");
    for kind in Kind::ALL {
        let runs: Vec<&ConcurrentRun> = r.concurrent.iter().filter(|c| c.kind == kind).collect();
        let one = runs
            .iter()
            .find(|c| c.threads == 1)
            .map(|c| c.txs as f64 / c.seconds);
        for c in runs {
            let tps = c.txs as f64 / c.seconds;
            let _ = writeln!(
                out,
                "| {} | {} | {} | {:.3} | {:.2} |",
                kind.label(),
                c.threads,
                thousands(tps.round() as usize),
                c.write_batches as f64 / c.txs.max(1) as f64,
                one.map_or(f64::NAN, |o| tps / o),
            );
        }
    }
}

fn latency_table(out: &mut String, r: &StorageResults, round: Round) -> Tally {
    let dl = r.datalevin.as_ref();
    let with_head = if round == Round::Cached {
        " Vev transactor only (`with`) |"
    } else {
        ""
    };
    let _ = writeln!(
        out,
        "| shape | accounts | datoms/tx Vev · Datalevin | Vev |{with_head} SQLite floor | Datalevin | Vev ÷ floor | Vev ÷ Datalevin | Vev ÷ Vev at {} |",
        r.sizes.first().map_or("-".into(), |s| thousands(s.entities as usize))
    );
    let with_rule = if round == Round::Cached { "---:|" } else { "" };
    let _ = writeln!(
        out,
        "|---|---:|---:|---:|{with_rule}---:|---:|---:|---:|---:|"
    );
    let mut tally = Tally::default();
    let largest = r.sizes.last().map(|s| s.entities);
    for shape in Shape::REPORT_ORDER {
        let base = r
            .sizes
            .first()
            .and_then(|s| s.shape(shape))
            .map(|s| median(&s.round(round).vev_us));
        for size in &r.sizes {
            let Some(run) = size.shape(shape) else {
                continue;
            };
            let samples = run.round(round);
            let vev = median(&samples.vev_us);
            let floor_ratio = vev / median(&samples.floor_us);
            count(&mut tally.floor, floor_ratio <= TARGET_FLOOR_RATIO);
            let d = dl.and_then(|d| d.shape(size.entities, shape, round));
            let (d_datoms, d_cell, d_ratio) = match d {
                Some(d) => {
                    let ratio = vev / median(&d.samples_us);
                    count(&mut tally.datalevin, ratio < 1.0);
                    let datoms: Vec<String> = d.datoms.iter().map(u64::to_string).collect();
                    (datoms.join("/"), cell(&d.samples_us), format!("{ratio:.2}"))
                }
                None => ("—".into(), "not run".into(), "—".into()),
            };
            let big_small = base.map_or(f64::NAN, |b| vev / b);
            if Some(size.entities) == largest && r.sizes.len() > 1 {
                count(&mut tally.big_small, big_small <= TARGET_BIG_SMALL_RATIO);
            }
            let with_cell = if round == Round::Cached {
                format!(" {} |", cell(&run.with_us))
            } else {
                String::new()
            };
            let _ = writeln!(
                out,
                "| {} | {} | {} · {} | {} |{with_cell} {} | {} | {floor_ratio:.2} | {d_ratio} | {big_small:.2} |",
                shape.label(),
                thousands(size.entities as usize),
                run.datoms,
                d_datoms,
                cell(&samples.vev_us),
                cell(&samples.floor_us),
                d_cell,
            );
        }
    }
    tally
}

fn builds(out: &mut String, r: &StorageResults) {
    let vev: Vec<String> = r
        .sizes
        .iter()
        .map(|s| {
            format!(
                "{} accounts ({} datoms) {:.1} s",
                thousands(s.entities as usize),
                thousands(s.datoms),
                s.build_s,
            )
        })
        .collect();
    let _ = writeln!(
        out,
        "\nResident databases, built before measuring (not timed above): Vev `bulk_load`: {}. The kernel preempted the bench {} times while it measured Vev and the floor.",
        vev.join("; "),
        r.preemptions
    );
    if let Some(d) = &r.datalevin {
        let dl: Vec<String> = d
            .builds
            .iter()
            .map(|(n, ms)| format!("{} accounts {:.1} s", thousands(*n as usize), ms / 1e3))
            .collect();
        let _ = writeln!(out, "Datalevin `init-db`: {}.", dl.join("; "));
    }
}

fn bulk_table(out: &mut String, r: &StorageResults) {
    if r.bulk.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "\nBulk load through `Connection::bulk_load` (transactions of 1,000 five-attribute accounts, final checkpoint included), then `Connection::open` and one query (`{OPEN_QUERY}`) in a new process (file in the page cache):\n"
    );
    let _ = writeln!(
        out,
        "| account datoms | datoms with tx datoms | txs | load s | s per million datoms | of which making tx data, s | file MiB | bytes per datom | open ms | query ms (rows) | child process ms |"
    );
    let _ = writeln!(
        out,
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    for b in &r.bulk {
        let per_million = b.load_s / (b.datoms as f64 / 1e6);
        let _ = writeln!(
            out,
            "| {} | {} | {} | {:.1} | {per_million:.2} | {:.2} | {:.1} | {:.1} | {} | {} ({}) | {:.0} |",
            thousands(b.user_datoms as usize),
            thousands(b.datoms as usize),
            thousands(b.txs as usize),
            b.load_s,
            b.generate_s,
            b.file_bytes as f64 / 1048576.0,
            b.file_bytes as f64 / b.datoms as f64,
            ms3(b.open.open_ms),
            ms3(b.open.query_ms),
            b.open.rows,
            b.open.process_ms,
        );
    }
    let bulk_ok = r
        .bulk
        .iter()
        .filter(|b| b.load_s / (b.datoms as f64 / 1e6) < TARGET_BULK_S_PER_MILLION)
        .count();
    let open_ok = r
        .bulk
        .iter()
        .filter(|b| b.open.open_ms + b.open.query_ms < TARGET_OPEN_QUERY_MS)
        .count();
    let _ = writeln!(
        out,
        "\nTargets: bulk load under {TARGET_BULK_S_PER_MILLION} s per million datoms: {bulk_ok} of {}; open and query under 1 s: {open_ok} of {}.",
        r.bulk.len(),
        r.bulk.len()
    );
}
