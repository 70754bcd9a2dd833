//! The markdown report of an `mbrainz` run: the loads, per query Vev's cold and warm times
//! against each peer's, the answer checks, issue 22's targets, and a one-line summary.

use std::fmt::Write;

use crate::mbrainz::{MbrainzResults, VevQuery};
use crate::mbrainz_peers::{Peer, PeerOutcome, PeerRun};
use crate::mbrainz_rows::{compare, Check};
use crate::report::thousands;
use crate::stats::{median, quantile};

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

fn mb(bytes: u64) -> String {
    format!("{:.1} MB", bytes as f64 / 1e6)
}

fn p50_p95(samples: &[f64], reps: usize) -> String {
    if samples.is_empty() {
        return "no samples".to_string();
    }
    let mut cell = format!(
        "{} / {}",
        fmt_ms(median(samples)),
        fmt_ms(quantile(samples, 0.95))
    );
    if samples.len() < reps {
        let _ = write!(cell, " (n={})", samples.len());
    }
    cell
}

/// Whether query `v` searches full text (query 5): a peer's own tokenizer may find other
/// tracks, so its rows are reported, not failed.
fn tokenizer_dependent(v: &VevQuery) -> bool {
    v.query.text.contains("track-search")
}

/// A peer's answer to one query against Vev's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    Same,
    /// Different rows where the engines must agree: the run fails.
    Wrong(Check),
    /// Different rows of a full-text search (its own tokenizer): reported, not failed.
    OwnTokenizer {
        peer_rows: usize,
    },
}

pub fn verdict(v: &VevQuery, peer: Peer, rows: usize, lines: &[String]) -> Verdict {
    let vev = match peer {
        Peer::DataScript => &v.lines_name,
        Peer::DatalevinMemory | Peer::DatalevinDisk => &v.lines_full,
    };
    match compare(vev, lines) {
        Check::Same => Verdict::Same,
        _ if tokenizer_dependent(v) => Verdict::OwnTokenizer { peer_rows: rows },
        differ => Verdict::Wrong(differ),
    }
}

/// A peer's p50 for a query, `Some(INFINITY)` when it was stopped unfinished (slower than
/// anything Vev did), `None` when it has no time (cannot run, not reached, not run).
fn peer_p50(run: &PeerRun, name: &str) -> Option<f64> {
    match run.query(name)? {
        PeerOutcome::Timed { samples_ms, .. } if !samples_ms.is_empty() => Some(median(samples_ms)),
        PeerOutcome::TimedOut { .. } => Some(f64::INFINITY),
        _ => None,
    }
}

fn vev_p50(v: &VevQuery) -> f64 {
    median(&v.warm.samples_ms)
}

/// The faster Datalevin's p50 for a query.
fn datalevin_p50(r: &MbrainzResults, name: &str) -> Option<f64> {
    r.peers
        .iter()
        .filter(|p| p.peer.is_datalevin())
        .filter_map(|p| peer_p50(p, name))
        .reduce(f64::min)
}

fn ratio(peer: Option<f64>, vev: f64) -> String {
    match peer {
        Some(p) if p.is_infinite() => "stopped".to_string(),
        Some(p) => format!("{:.1}×", p / vev),
        None => "—".to_string(),
    }
}

/// One of issue 22's targets: met, missed, or not evaluated (`None`).
pub struct Target {
    pub met: Option<bool>,
    pub text: String,
}

const NINE: [&str; 9] = ["q1", "q2", "q3", "q4", "q5", "q6", "q7", "q8", "q9"];

pub fn targets(r: &MbrainzResults) -> Vec<Target> {
    let mut out = Vec::new();
    // Faster than every peer on every query each peer ran.
    let mut slower = Vec::new();
    let mut compared = 0;
    for v in &r.vev {
        for p in &r.peers {
            if let Some(t) = peer_p50(p, v.query.name) {
                compared += 1;
                if t <= vev_p50(v) {
                    slower.push(format!(
                        "{} ({} {} ms, Vev {} ms)",
                        v.query.name,
                        p.peer.short(),
                        fmt_ms(t),
                        fmt_ms(vev_p50(v))
                    ));
                }
            }
        }
    }
    out.push(Target {
        met: (compared > 0).then_some(slower.is_empty()),
        text: if slower.is_empty() {
            format!("Vev faster than every peer on every query ({compared} query × peer pairs, p50)")
        } else {
            format!(
                "Vev faster than every peer on every query: slower or equal in {} of {compared}: {}",
                slower.len(),
                slower.join(", ")
            )
        },
    });
    // ≥ 5× the faster Datalevin on at least 7 of the nine.
    let nine: Vec<(&str, Option<f64>)> = r
        .vev
        .iter()
        .filter(|v| NINE.contains(&v.query.name))
        .map(|v| {
            (
                v.query.name,
                datalevin_p50(r, v.query.name).map(|d| d / vev_p50(v)),
            )
        })
        .collect();
    let fives: Vec<&str> = nine
        .iter()
        .filter(|(_, x)| x.is_some_and(|x| x >= 5.0))
        .map(|(n, _)| *n)
        .collect();
    let evaluated = nine.iter().filter(|(_, x)| x.is_some()).count();
    out.push(Target {
        met: (evaluated > 0).then_some(fives.len() >= 7),
        text: format!(
            "≥ 5× faster than Datalevin (the faster of memory and disk, p50) on at least 7 of the 9: {} of {evaluated} evaluated ({})",
            fives.len(),
            nine.iter()
                .map(|(n, x)| format!("{n} {}", x.map_or("—".to_string(), |x| if x.is_infinite() { "stopped".to_string() } else { format!("{x:.1}×") })))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    });
    // collab-net-10 under 1 s.
    let net = r.vev.iter().find(|v| v.query.name == "collab-net-10");
    out.push(Target {
        met: net.map(|v| vev_p50(v) < 1000.0),
        text: match net {
            Some(v) => format!(
                "collab-net-10 under 1 s (set at medium; this run: {}): warm p50 {} ms, cold {} ms",
                r.scale.name(),
                fmt_ms(vev_p50(v)),
                fmt_ms(v.cold_ms)
            ),
            None => "collab-net-10 under 1 s: not run".to_string(),
        },
    });
    // Load ≥ 3× faster than Datalevin's.
    let dl_load = r
        .peers
        .iter()
        .filter(|p| p.peer.is_datalevin())
        .filter_map(|p| p.load_ms)
        .reduce(f64::min);
    let vev_ms = r.load.seconds * 1e3;
    out.push(Target {
        met: dl_load.map(|d| d / vev_ms >= 3.0),
        text: match dl_load {
            Some(d) => format!(
                "load ≥ 3× faster than Datalevin's (its faster load): {:.2}× (Vev {:.1} s, Datalevin {:.1} s)",
                d / vev_ms,
                r.load.seconds,
                d / 1e3
            ),
            None => "load ≥ 3× faster than Datalevin's: no Datalevin load finished".to_string(),
        },
    });
    out
}

fn peer_cell(r: &MbrainzResults, v: &VevQuery, p: &PeerRun, wrong: &mut usize) -> String {
    match p.query(v.query.name) {
        None | Some(PeerOutcome::NotReached) => "not reached".to_string(),
        Some(PeerOutcome::CannotRun(_)) => "cannot run".to_string(),
        Some(PeerOutcome::TimedOut { after_s }) => format!("> {after_s} s (stopped)"),
        Some(PeerOutcome::Timed {
            rows,
            samples_ms,
            lines,
        }) => {
            let mut cell = p50_p95(samples_ms, r.reps);
            match verdict(v, p.peer, *rows, lines) {
                Verdict::Same => {}
                Verdict::OwnTokenizer { peer_rows } => {
                    let _ = write!(cell, " ({} rows)", thousands(peer_rows));
                }
                Verdict::Wrong(_) => {
                    *wrong += 1;
                    let _ = write!(cell, " ✗ {} rows", thousands(*rows));
                }
            }
            cell
        }
    }
}

fn load_table(out: &mut String, r: &MbrainzResults) {
    let _ = writeln!(
        out,
        "| engine | bulk path | load s | datoms | store |\n|---|---|---:|---:|---:|"
    );
    let _ = writeln!(
        out,
        "| Vev | `vev_mbrainz::load_transactions`: schema, enums, `bulk_load` of the generated transactions ({} transactions) into a new file, closed | {:.1} | {} | {} |",
        thousands(r.load.txs as usize),
        r.load.seconds,
        thousands(r.load.bulk_datoms as usize),
        mb(r.load.file_bytes)
    );
    for p in &r.peers {
        let store = match (p.peer, p.store_bytes) {
            (Peer::DataScript, _) => "in memory".to_string(),
            (_, Some(b)) if b > 0 => mb(b),
            _ => "—".to_string(),
        };
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {store} |",
            p.peer.short(),
            p.peer.load_path(),
            p.load_ms
                .map_or("did not finish".to_string(), |x| format!("{:.1}", x / 1e3)),
            p.datoms.map_or("—".to_string(), thousands),
        );
    }
}

/// The report and the number of answers that differ from Vev's where they must not.
pub fn render(r: &MbrainzResults) -> (String, usize) {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# mbrainz, scale {}\n\n{}\n\nCommand: `{}`\n",
        r.scale.name(),
        r.machine.line(true),
        r.command
    );
    let _ = writeln!(out, "## Load\n");
    load_table(&mut out, r);
    let _ = writeln!(
        out,
        "\nVev's time is opening a new file, the schema and enum transactions, `bulk_load` of the transactions generated beforehand, and closing (its checkpoint); each peer's is its bulk calls alone, on datoms already read from the export ({} datoms: Vev's current datoms of every user entity that is not an attribute). Vev's store is the file after its connection closed; Datalevin's the LMDB directory after the run (for memory, the temporary directory Datalevin opens for a nil dir).\n",
        thousands(r.exported_datoms)
    );
    let _ = writeln!(out, "## Queries\n");
    let mut header = "| query | rows | Vev cold ms | Vev warm ms |".to_string();
    let mut rule = "|---|---:|---:|---:|".to_string();
    for p in &r.peers {
        let _ = write!(header, " {} ms |", p.peer.short());
        rule.push_str("---:|");
    }
    if r.peers.iter().any(|p| p.peer == Peer::DataScript) {
        header.push_str(" DataScript ÷ Vev |");
        rule.push_str("---:|");
    }
    if r.peers.iter().any(|p| p.peer.is_datalevin()) {
        header.push_str(" Datalevin ÷ Vev |");
        rule.push_str("---:|");
    }
    let _ = writeln!(out, "{header}\n{rule}");
    let mut wrong = 0;
    for v in &r.vev {
        let _ = write!(
            out,
            "| {} | {} | {} | {} |",
            v.query.name,
            thousands(v.rows),
            fmt_ms(v.cold_ms),
            p50_p95(&v.warm.samples_ms, r.reps)
        );
        for p in &r.peers {
            let _ = write!(out, " {} |", peer_cell(r, v, p, &mut wrong));
        }
        if let Some(ds) = r.peers.iter().find(|p| p.peer == Peer::DataScript) {
            let _ = write!(out, " {} |", ratio(peer_p50(ds, v.query.name), vev_p50(v)));
        }
        if r.peers.iter().any(|p| p.peer.is_datalevin()) {
            let _ = write!(
                out,
                " {} |",
                ratio(datalevin_p50(r, v.query.name), vev_p50(v))
            );
        }
        out.push('\n');
    }
    legend(&mut out, r);
    let _ = writeln!(out, "\n**Targets** (issue 22):\n");
    let targets = targets(r);
    for t in &targets {
        let mark = match t.met {
            Some(true) => "met",
            Some(false) => "**missed**",
            None => "not evaluated",
        };
        let _ = writeln!(out, "- {mark}: {}", t.text);
    }
    let _ = writeln!(out, "\n{}", summary(r, &targets));
    (out, wrong)
}

fn legend(out: &mut String, r: &MbrainzResults) {
    let _ = writeln!(
        out,
        "\nWarm times are p50 / p95 in ms of up to {} timed runs after untimed warm-up runs (at least {}, for at least {} ms), fewer (n=) once the timed runs passed {} ms, never fewer than 3; every engine is timed this way. Vev warm: each query parsed once, `Db::q_prepared` on one open connection. Vev cold: the first run of the query on a newly opened connection to the file (query and inputs parsed in the run; the OS page cache stays warm). q8 is two calls, the second with the first's result as its `[[?aname]]` relation. Ratios are a peer's p50 over Vev's warm p50 (Datalevin: the faster of memory and disk); above 1, Vev is faster.\n",
        r.reps, r.warmup, r.warmup_ms, r.budget_ms
    );
    let _ = writeln!(
        out,
        "Answers: each peer's rows of its last timed run are compared with Vev's, row by row (sorted; floats to ten significant digits; DataScript's JS API returns keywords as their names, so Vev's are compared that way there). ✗ marks a difference, which fails the run. q5 is a full-text search: DataScript has none (cannot run); Datalevin runs its own `fulltext` with its own tokenizer, through its form of the `track-search` rule, `[(track-search ?q ?track) {}]` (it binds `[e a v]` and returns its 10 best hits unless given `:top`; Datalevin 1.2.8 keeps only about the last 1,024 documents one write transaction adds to a full-text domain, so its full-text datoms are loaded by `fill-db` in runs of 1,000, as the load table says), and its row count is shown beside its time when its rows differ from Vev's rather than failing the run. \"> N s (stopped)\": the peer printed nothing for N s while on that query (its untimed and at least 3 timed runs together took longer), so it was stopped and reached none of the queries after it.\n",
        r.datalevin_track_search
    );
    for p in &r.peers {
        let mut line = format!(
            "- {}: {}",
            p.peer.short(),
            if p.label.is_empty() {
                "did not start"
            } else {
                &p.label
            }
        );
        if let Some(f) = &p.failure {
            let _ = write!(line, "; **{f}**");
        }
        let _ = writeln!(out, "{line}");
    }
    for v in &r.vev {
        for p in &r.peers {
            if let Some(PeerOutcome::Timed { rows, lines, .. }) = p.query(v.query.name) {
                match verdict(v, p.peer, *rows, lines) {
                    Verdict::Wrong(Check::Differ {
                        only_vev,
                        only_peer,
                        example,
                    }) => {
                        let _ = writeln!(
                            out,
                            "- ✗ {} in {}: {} rows, Vev {}; {only_vev} rows only Vev has, {only_peer} only the peer has; {example}",
                            v.query.name,
                            p.peer.short(),
                            thousands(*rows),
                            thousands(v.rows)
                        );
                    }
                    Verdict::OwnTokenizer { peer_rows } => {
                        let _ = writeln!(
                            out,
                            "- {} in {}: {} rows by its own full-text search, Vev {}",
                            v.query.name,
                            p.peer.short(),
                            thousands(peer_rows),
                            thousands(v.rows)
                        );
                    }
                    _ => {}
                }
            }
        }
    }
}

/// `vev-bench-mbrainz scale=… datoms=… load_s=… q1=<fastest peer ÷ Vev> … targets=met/of`.
fn summary(r: &MbrainzResults, targets: &[Target]) -> String {
    let mut s = format!(
        "vev-bench-mbrainz scale={} datoms={} load_s={:.1}",
        r.scale.name(),
        r.load.bulk_datoms,
        r.load.seconds
    );
    for v in &r.vev {
        let fastest = r
            .peers
            .iter()
            .filter_map(|p| peer_p50(p, v.query.name))
            .reduce(f64::min);
        let _ = write!(
            s,
            " {}={}ms/{}",
            v.query.name,
            fmt_ms(vev_p50(v)),
            ratio(fastest, vev_p50(v))
        );
    }
    let met = targets.iter().filter(|t| t.met == Some(true)).count();
    let _ = write!(s, " targets={met}/{}", targets.len());
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mbrainz::VevLoad;
    use crate::mbrainz_peers::PeerQuery;
    use crate::peers::QueryTiming;
    use crate::report::Machine;

    fn vev(name: &str, ms: f64, lines: &[&str]) -> VevQuery {
        let query = vev_mbrainz::all_queries()
            .find(|q| q.name == name)
            .expect("a workload query");
        let lines: Vec<String> = lines.iter().map(|s| s.to_string()).collect();
        VevQuery {
            query,
            rows: lines.len(),
            cold_ms: ms * 3.0,
            warm: QueryTiming {
                query: name.to_string(),
                rows: lines.len(),
                samples_ms: vec![ms; 5],
            },
            lines_full: lines.clone(),
            lines_name: lines,
        }
    }

    fn timed(name: &str, ms: f64, lines: &[&str]) -> PeerQuery {
        PeerQuery {
            name: name.to_string(),
            outcome: PeerOutcome::Timed {
                rows: lines.len(),
                samples_ms: vec![ms; 5],
                lines: lines.iter().map(|s| s.to_string()).collect(),
            },
        }
    }

    fn peer(peer: Peer, load_ms: f64, queries: Vec<PeerQuery>) -> PeerRun {
        PeerRun {
            peer,
            label: format!("{} x", peer.short()),
            load_ms: Some(load_ms),
            datoms: Some(10),
            store_bytes: Some(1_000_000),
            queries,
            failure: None,
        }
    }

    fn results(vevs: Vec<VevQuery>, peers: Vec<PeerRun>) -> MbrainzResults {
        MbrainzResults {
            machine: Machine::probe(),
            command: "vev-bench mbrainz".to_string(),
            scale: vev_mbrainz::Scale::Small,
            warmup: 1,
            warmup_ms: 0,
            reps: 5,
            budget_ms: 1000,
            load: VevLoad {
                seconds: 1.0,
                bulk_datoms: 10,
                txs: 1,
                file_bytes: 1_000_000,
            },
            exported_datoms: 10,
            vev: vevs,
            peers,
            datalevin_track_search: String::new(),
        }
    }

    #[test]
    fn targets_count_fivefold_wins_over_the_faster_datalevin() {
        let names = ["q1", "q2", "q3", "q4", "q5", "q6", "q7", "q8", "q9"];
        let vevs: Vec<VevQuery> = names.iter().map(|n| vev(n, 1.0, &["\"a\""])).collect();
        // Memory 10× slower than Vev everywhere, disk only 2× on q1 and q2: the faster
        // Datalevin gives 7 fivefold wins.
        let mem = names.iter().map(|n| timed(n, 10.0, &["\"a\""])).collect();
        let disk = names
            .iter()
            .map(|n| {
                timed(
                    n,
                    if ["q1", "q2"].contains(n) { 2.0 } else { 50.0 },
                    &["\"a\""],
                )
            })
            .collect();
        let r = results(
            vevs,
            vec![
                peer(Peer::DatalevinMemory, 4000.0, mem),
                peer(Peer::DatalevinDisk, 2500.0, disk),
            ],
        );
        let t = targets(&r);
        assert_eq!(t[0].met, Some(true), "{}", t[0].text);
        assert_eq!(t[1].met, Some(true), "{}", t[1].text);
        assert!(t[1].text.contains("7 of 9"), "{}", t[1].text);
        assert_eq!(t[2].met, None, "no collab-net-10 in this run");
        assert_eq!(t[3].met, Some(false), "2.5 s is only 2.5× Vev's 1 s");
        let (report, wrong) = render(&r);
        assert_eq!(wrong, 0);
        assert!(
            report.contains("| q1 | 1 | 3.00 | 1.00 / 1.00 | 10.0 / 10.0 | 2.00 / 2.00 | 2.0× |"),
            "{report}"
        );
        assert!(report.contains("vev-bench-mbrainz scale=small"), "{report}");
    }

    #[test]
    fn a_slower_query_or_a_wrong_answer_shows() {
        let r = results(
            vec![
                vev("q1", 5.0, &["\"a\"", "\"b\""]),
                vev("q5", 1.0, &["\"x\""]),
            ],
            vec![peer(
                Peer::DatalevinDisk,
                9000.0,
                vec![
                    timed("q1", 4.0, &["\"a\""]),
                    timed("q5", 9.0, &["\"x\"", "\"y\""]),
                ],
            )],
        );
        let t = targets(&r);
        assert_eq!(t[0].met, Some(false));
        assert!(
            t[0].text
                .contains("q1 (Datalevin disk 4.00 ms, Vev 5.00 ms)"),
            "{}",
            t[0].text
        );
        assert_eq!(t[3].met, Some(true));
        let (report, wrong) = render(&r);
        assert_eq!(
            wrong, 1,
            "q1's missing row fails; q5's own tokenizer does not"
        );
        assert!(report.contains("✗ 1 rows"), "{report}");
        assert!(
            report.contains("q5 in Datalevin disk: 2 rows by its own full-text search, Vev 1"),
            "{report}"
        );
    }

    #[test]
    fn stopped_and_skipped_queries_are_said_so() {
        let mut ds = peer(Peer::DataScript, 1.0, vec![]);
        ds.queries = vec![
            PeerQuery {
                name: "q5".into(),
                outcome: PeerOutcome::CannotRun("no full text".into()),
            },
            PeerQuery {
                name: "collab-net-10".into(),
                outcome: PeerOutcome::TimedOut { after_s: 600 },
            },
        ];
        ds.failure = Some("collab-net-10 did not finish in 600 s; stopped".into());
        let r = results(
            vec![vev("q5", 1.0, &[]), vev("collab-net-10", 1500.0, &[])],
            vec![ds],
        );
        let t = targets(&r);
        assert_eq!(
            t[0].met,
            Some(true),
            "a stopped peer is slower: {}",
            t[0].text
        );
        assert_eq!(t[2].met, Some(false), "1.5 s is over 1 s");
        let (report, _) = render(&r);
        assert!(report.contains("cannot run"), "{report}");
        assert!(report.contains("> 600 s (stopped)"), "{report}");
        assert!(
            report.contains("**collab-net-10 did not finish in 600 s; stopped**"),
            "{report}"
        );
    }
}
