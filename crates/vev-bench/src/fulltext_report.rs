//! The markdown report of a `fulltext` run, with its targets as PASS/MISS lines.

use std::fmt::Write;

use crate::fulltext::{FulltextResults, QueryRun};
use crate::fulltext_insert::{InsertRun, Peer, FTS5_SCHEMA, SEGMENT_WRITE_DELAY};
use crate::fulltext_search::{digest, FTS5_QUERY, VEV_QUERY};
use crate::fulltext_vev::StatsExt;
use crate::report::thousands;
use crate::stats::{median, quantile};

/// Transaction latency with full text over without, at batch 1 and at batch 500.
const TARGET_FT_RATIO_BATCH_1: f64 = 1.3;
const TARGET_FT_RATIO_BATCH_500: f64 = 2.0;
/// Vev's search p50 over tantivy's (at most) and FTS5's over Vev's (at least).
const TARGET_VS_TANTIVY: f64 = 1.0;
const TARGET_VS_FTS5: f64 = 2.0;

const STATES: [&str; 3] = ["as written", "after compaction", "after reopening"];

fn verdict(ok: bool) -> &'static str {
    if ok {
        "PASS"
    } else {
        "MISS"
    }
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

fn p50_p95(samples: &[f64]) -> String {
    format!(
        "{} / {}",
        ms3(median(samples)),
        ms3(quantile(samples, 0.95))
    )
}

fn mib(bytes: u64) -> String {
    format!("{:.2}", bytes as f64 / 1_048_576.0)
}

pub fn render(r: &FulltextResults) -> String {
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
        "Corpus: {} generated documents (`fulltext_corpus.rs`: 3 in 5 track/album names, 2 in 5 descriptions of 20-60 Zipf-distributed words). Transactions per batch size capped at {} (the first `min(docs, cap × batch)` documents).\n",
        thousands(r.cfg.docs),
        thousands(r.cfg.max_txs)
    );
    let _ = writeln!(
        out,
        "- Vev {}: `Connection::open` (one SQLite file, bundled SQLite {}, WAL, `synchronous=FULL`), `:doc/id` long unique identity, `:doc/text` string, with or without `:db/fulltext true`; one `transact` per batch.",
        env!("CARGO_PKG_VERSION"),
        rusqlite::version()
    );
    let _ = writeln!(
        out,
        "- SQLite FTS5: `{FTS5_SCHEMA}`, id as rowid, WAL, `synchronous=FULL`, one `BEGIN IMMEDIATE` … `COMMIT` per batch.\n- tantivy 0.27: on-disk index, one indexing thread, text field (SimpleTokenizer, LowerCaser, AsciiFoldingFilter; positions; stored), u64 `id` fast and stored; one `commit()` per batch; its default merge policy merges in the background.\n"
    );
    insert_table(&mut out, r);
    search_table(&mut out, r);
    targets(&mut out, r);
    out
}

fn insert_table(out: &mut String, r: &FulltextResults) {
    let _ = writeln!(
        out,
        "**Inserts.** Latency in ms per transaction (median / p95); documents per second over the timed transactions; size: the database directory once closed (Vev's checkpoint on close, FTS5's WAL checkpoint, tantivy's merges done); written: what the process handed to `write` during the transactions and the close (all threads; WAL frames and checkpoint copies included); Vev with full text: segments and manifest entries each transaction wrote, per transaction, and the background compactions during the run (each writes one more segment, counted apart).\n"
    );
    let _ = writeln!(
        out,
        "| batch | peer | txs | docs | tx ms p50 / p95 | docs/s | size MiB | written MiB | written bytes/doc | segments/tx | manifest entries/tx | compactions | ÷ Vev no-FT p50 |"
    );
    let _ = writeln!(
        out,
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    for run in &r.inserts {
        let plain = r
            .inserts
            .iter()
            .find(|p| p.peer == Peer::VevPlain && p.batch == run.batch)
            .map(|p| median(&p.samples_us));
        let ratio = plain.map_or("—".into(), |p| {
            format!("{:.2}", median(&run.samples_us) / p)
        });
        let per_tx = |n: u64| {
            if run.peer.is_vev_fulltext() {
                format!("{:.2}", n as f64 / run.txs as f64)
            } else {
                "—".into()
            }
        };
        let total_s: f64 = run.samples_us.iter().sum::<f64>() / 1e6;
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {:.0} | {} | {} | {:.0} | {} | {} | {} | {ratio} |",
            run.batch,
            run.peer.label(),
            thousands(run.txs),
            thousands(run.docs),
            p50_p95(&run.samples_us.iter().map(|u| u / 1e3).collect::<Vec<_>>()),
            run.docs as f64 / total_s,
            mib(run.closed_bytes),
            mib(run.written_bytes),
            run.written_bytes as f64 / run.docs as f64,
            per_tx(run.stats.transaction_segments()),
            per_tx(run.stats.manifest_appends),
            if run.peer.is_vev_fulltext() {
                run.stats.compactions.to_string()
            } else {
                "—".into()
            },
        );
    }
}

fn rows_cell(q: &QueryRun) -> (String, bool) {
    let counts = [q.vev[0].rows.len(), q.fts5.rows.len(), q.tantivy.rows.len()];
    let same = counts.iter().all(|&c| c == counts[0]);
    let cell = if same {
        thousands(counts[0])
    } else {
        format!(
            "✗ {} / {} / {}",
            thousands(counts[0]),
            thousands(counts[1]),
            thousands(counts[2])
        )
    };
    (cell, same)
}

fn search_table(out: &mut String, r: &FulltextResults) {
    let _ = writeln!(
        out,
        "\n**Search** on {} documents: every match with its score, ms median / p95 (Vev: `{VEV_QUERY}`, prepared once; FTS5: `{FTS5_QUERY}`; tantivy: a collector of every scored document with its `id`). Rows: one count when the three engines agree, else Vev / FTS5 / tantivy (✗).\n",
        thousands(r.search_docs)
    );
    let _ = writeln!(
        out,
        "| query | Vev text | rows | Vev {} | Vev {} | Vev {} | FTS5 | tantivy | Vev ÷ tantivy | Vev ÷ FTS5 |",
        STATES[0], STATES[1], STATES[2]
    );
    let _ = writeln!(out, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    let mut differ = Vec::new();
    for q in &r.queries {
        let (rows, same) = rows_cell(q);
        if !same {
            differ.push(q.spec.name);
        }
        let vev = median(&q.vev[0].samples_ms);
        let _ = writeln!(
            out,
            "| {} | `{}` | {rows} | {} | {} | {} | {} | {} | {:.2} | {:.2} |",
            q.spec.name,
            q.spec.vev_text(),
            p50_p95(&q.vev[0].samples_ms),
            p50_p95(&q.vev[1].samples_ms),
            p50_p95(&q.vev[2].samples_ms),
            p50_p95(&q.fts5.samples_ms),
            p50_p95(&q.tantivy.samples_ms),
            vev / median(&q.tantivy.samples_ms),
            vev / median(&q.fts5.samples_ms),
        );
    }
    let _ = writeln!(
        out,
        "\nRatios use Vev as written (medians; below 1, Vev is faster). Timing: at least {} untimed runs and {} ms, then up to {} timed runs, stopping after {} ms (at least 3).",
        r.cfg.timing.warmup, r.cfg.timing.warmup_ms, r.cfg.timing.reps, r.cfg.timing.budget_ms
    );
    if differ.is_empty() {
        let _ = writeln!(
            out,
            "The three engines return the same number of rows for every query."
        );
    } else {
        let _ = writeln!(
            out,
            "Row counts differ for: {}. The engines split words differently (Vev: Unicode word boundaries, so `don't` and `3.14` are one term; FTS5's unicode61 and tantivy's SimpleTokenizer split at every non-alphanumeric) and fold differently (tantivy folds `ß` to `ss`, Vev and FTS5 keep it).",
            differ.join("; ")
        );
    }
    let scores = "Scores are each engine's own BM25 (FTS5's negated, tantivy's with quantized field norms and a constant score for its prefix query), so only Vev's digests are compared.";
    let _ = writeln!(out, "{scores}");
}

/// Digest of every query's rows in Vev state `i`, folded together.
fn state_digest(r: &FulltextResults, i: usize) -> u64 {
    r.queries
        .iter()
        .fold(0u64, |acc, q| acc.rotate_left(7) ^ digest(&q.vev[i].rows))
}

fn targets(out: &mut String, r: &FulltextResults) {
    let _ = writeln!(out, "\n**Targets.**\n");
    counter_targets(out, r);
    let digests: Vec<u64> = (0..3).map(|i| state_digest(r, i)).collect();
    let differing: Vec<&str> = r
        .queries
        .iter()
        .filter(|q| {
            let d = digest(&q.vev[0].rows);
            q.vev[1..].iter().any(|m| digest(&m.rows) != d)
        })
        .map(|q| q.spec.name)
        .collect();
    let _ = writeln!(
        out,
        "- {}: identical result digests (sorted id, score rounded to 1e-9) as written {:016x}, after compaction {:016x}, after reopening {:016x}{}.",
        verdict(differing.is_empty() && digests.iter().all(|&d| d == digests[0])),
        digests[0],
        digests[1],
        digests[2],
        if differing.is_empty() { String::new() } else { format!("; differing: {}", differing.join(", ")) }
    );
    for (batch, limit) in [
        (1, TARGET_FT_RATIO_BATCH_1),
        (500, TARGET_FT_RATIO_BATCH_500),
    ] {
        let p50 = |peer: Peer| {
            r.inserts
                .iter()
                .find(|run| run.peer == peer && run.batch == batch)
                .map(|run| median(&run.samples_us))
        };
        if let (Some(ft), Some(plain)) = (p50(Peer::VevFulltext), p50(Peer::VevPlain)) {
            let ratio = ft / plain;
            let _ = writeln!(
                out,
                "- {}: Vev tx latency with full text ≤ {limit}× without at batch {batch}: p50 {:.3} / {:.3} ms = {ratio:.2}×.",
                verdict(ratio <= limit),
                ft / 1e3,
                plain / 1e3
            );
        }
    }
    search_targets(out, r);
}

fn counter_targets(out: &mut String, r: &FulltextResults) {
    let ft_runs: Vec<&InsertRun> = r
        .inserts
        .iter()
        .filter(|i| i.peer.is_vev_fulltext())
        .collect();
    let irregular: usize = ft_runs.iter().map(|i| i.irregular_txs).sum();
    let txs: usize = ft_runs.iter().map(|i| i.txs).sum();
    let head = verdict(irregular == 0);
    let _ = writeln!(
        out,
        "- {head}: exactly 1 segment and 1 manifest entry per insert transaction: {} of {} transactions (batches {:?}, with and without the {} ms delay) differ.",
        thousands(irregular),
        thousands(txs),
        r.cfg.batches,
        SEGMENT_WRITE_DELAY.as_millis()
    );
    if let Some(d) = &r.delete {
        let zero = d.stats.transaction_segments() == 0 && d.stats.manifest_appends == 0;
        let head = verdict(zero);
        let _ = writeln!(
            out,
            "- {head}: a delete-only transaction (`:doc/text` of ids {:?} retracted) adds 0 segments and 0 manifest entries: it added {} and {}.",
            d.ids, d.stats.transaction_segments(), d.stats.manifest_appends
        );
        let ok = d.matched_before == d.ids.len() && d.matched_after == 0;
        let _ = writeln!(
            out,
            "- {}: the retracted documents stop matching: a search for a word of each found {} of {} before, {} after.",
            verdict(ok),
            d.matched_before,
            d.ids.len(),
            d.matched_after
        );
    }
    let [written, compacted] = &r.search_stats;
    let _ = writeln!(
        out,
        "- Search database counters: as written {} segments written, {} manifest entries, {} live; after compaction {} live, {} compactions, {} MiB written by the index.",
        written.segments_written, written.manifest_appends, written.live_segments,
        compacted.live_segments, compacted.compactions, mib(compacted.bytes_written)
    );
}

fn search_targets(out: &mut String, r: &FulltextResults) {
    let n = r.queries.len();
    for (i, state) in STATES.iter().enumerate() {
        let vs_tantivy = r
            .queries
            .iter()
            .filter(|q| {
                median(&q.vev[i].samples_ms) <= TARGET_VS_TANTIVY * median(&q.tantivy.samples_ms)
            })
            .count();
        let vs_fts5 = r
            .queries
            .iter()
            .filter(|q| median(&q.fts5.samples_ms) >= TARGET_VS_FTS5 * median(&q.vev[i].samples_ms))
            .count();
        let _ = writeln!(
            out,
            "- {}: search p50 no slower than tantivy ({state}): {vs_tantivy} of {n} queries.",
            verdict(vs_tantivy == n)
        );
        let _ = writeln!(
            out,
            "- {}: search p50 at least {TARGET_VS_FTS5}× faster than FTS5 ({state}): {vs_fts5} of {n} queries.",
            verdict(vs_fts5 == n)
        );
    }
}
