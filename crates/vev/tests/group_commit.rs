//! Group commit: many threads calling `transact` at once, on a file and in memory.
//!
//! Where a test needs a group to form, it does not hope for a race: `FaultPlan::pause_next`
//! holds the first transaction's sync while the others queue (`CommitStats::waiting` says
//! when they have), so the second write batch takes them all. The crash test runs this
//! binary again as a child with several committing threads and kills it.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use vev::{Connection, Db, FaultPlan, Keyword, OpenOptions, TxReport, Value};

const SCHEMA: &str = r#"[{:db/ident :g/id :db/valueType :db.type/string :db/cardinality :db.cardinality/one :db/unique :db.unique/identity}
 {:db/ident :g/email :db/valueType :db.type/string :db/cardinality :db.cardinality/one :db/unique :db.unique/value}
 {:db/ident :g/n :db/valueType :db.type/long :db/cardinality :db.cardinality/one}
 {:db/ident :g/text :db/valueType :db.type/string :db/cardinality :db.cardinality/one :db/fulltext true}]"#;

fn tx(id: &str) -> String {
    format!(r#"[{{:g/id "{id}" :g/n {}}}]"#, id.len())
}

/// The entity `db` holds under `:g/id id`, if any.
fn entity(db: &Db, id: &str) -> Option<vev::EntityId> {
    let a = db.attribute(&Keyword::new("g/id"))?.id;
    db.entity_with_value(a, &Value::string(id)).unwrap()
}

/// Every `:g/id` the database holds.
fn ids(db: &Db) -> Vec<String> {
    let Some(a) = db.attribute(&Keyword::new("g/id")).map(|a| a.id) else {
        return Vec::new();
    };
    db.datoms(vev::IndexOrder::Aevt, &[vev::Component::Entity(a)])
        .map(|d| match d.unwrap().v {
            Value::String(s) => s.to_string(),
            other => panic!("a :g/id of {other:?}"),
        })
        .collect()
}

fn open(path: &Path, faults: Option<Arc<FaultPlan>>) -> Connection {
    let conn = Connection::open_with(
        path,
        &OpenOptions {
            faults,
            lock: vev::LockMode::Wait(Duration::from_secs(10)),
            // Full-text segments stay one per transaction, so that tests can count them.
            fulltext_compaction: vev::FulltextCompaction::Manual,
            ..OpenOptions::default()
        },
    )
    .unwrap();
    if conn.db().attribute(&Keyword::new("g/id")).is_none() {
        conn.transact_edn(SCHEMA).unwrap();
    }
    conn
}

/// Wait until `n` transactions are queued behind the leader.
fn wait_for_queue(conn: &Connection, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while conn.commit_stats().waiting < n {
        assert!(Instant::now() < deadline, "{n} transactions never queued");
        thread::sleep(Duration::from_millis(1));
    }
}

/// Check the reports of one run: each has its own datoms, basis-t one past its db-before,
/// and together they cover `first_t..` with no gap or repeat.
fn check_reports(reports: &[(String, TxReport)], first_t: u64) {
    let mut ts = BTreeSet::new();
    for (id, report) in reports {
        let t = report.db_after.basis_t();
        assert_eq!(t, report.db_before.basis_t() + 1, "{id}");
        assert!(
            entity(&report.db_after, id).is_some(),
            "{id} not in its db-after"
        );
        assert!(
            entity(&report.db_before, id).is_none(),
            "{id} in its db-before"
        );
        assert!(ts.insert(t), "two transactions at t={t}");
    }
    let expected: BTreeSet<u64> = (first_t..first_t + reports.len() as u64).collect();
    assert_eq!(ts, expected, "basis-t has gaps");
}

fn run_concurrent(conn: &Connection, threads: usize, per_thread: usize) -> Vec<(String, TxReport)> {
    thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|k| {
                s.spawn(move || {
                    (0..per_thread)
                        .map(|i| {
                            let id = format!("{k}-{i}");
                            let report = conn.transact_edn(&tx(&id)).unwrap();
                            (id, report)
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    })
}

#[test]
fn concurrent_committers_each_commit_once_in_basis_t_order() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("many.vev");
    for durable in [true, false] {
        let conn = if durable {
            open(&path, None)
        } else {
            let conn = Connection::open_in_memory();
            conn.transact_edn(SCHEMA).unwrap();
            conn
        };
        let feed = conn.subscribe();
        let before = conn.commit_stats();
        let first_t = conn.db().basis_t() + 1;
        let reports = run_concurrent(&conn, 8, 40);
        check_reports(&reports, first_t);
        let fed: Vec<u64> = feed.try_iter().map(|r| r.db_after.basis_t()).collect();
        let expected: Vec<u64> = (first_t..first_t + 320).collect();
        assert_eq!(
            fed, expected,
            "the feed is not every report in commit order"
        );
        let mut held = ids(&conn.db());
        held.sort();
        let mut sent: Vec<String> = reports.iter().map(|(id, _)| id.clone()).collect();
        sent.sort();
        assert_eq!(held, sent);
        let stats = conn.commit_stats();
        assert_eq!(stats.transactions - before.transactions, 320);
        let batches = stats.write_batches - before.write_batches;
        if durable {
            assert!((1..=320).contains(&batches), "{batches} write batches");
            drop(conn);
            let reopened = open(&path, None);
            let mut again = ids(&reopened.db());
            again.sort();
            assert_eq!(again, sent, "the reopened file differs");
            reopened.verify().unwrap();
        } else {
            assert_eq!(batches, 0, "an in-memory connection wrote");
        }
    }
}

/// Start a transaction of `id` on its own thread while `plan` holds the current leader's
/// sync, and wait until it has queued (`queued` before it).
fn queue_behind<'s>(
    s: &'s thread::Scope<'s, '_>,
    conn: &'s Connection,
    id: &str,
    queued: usize,
) -> thread::ScopedJoinHandle<'s, Result<TxReport, vev::Error>> {
    let text = tx(id);
    let handle = s.spawn(move || conn.transact_edn(&text));
    wait_for_queue(conn, queued + 1);
    handle
}

#[test]
fn callers_queued_behind_a_sync_share_one_write_batch() {
    let dir = tempfile::tempdir().unwrap();
    let plan = FaultPlan::new(0, false);
    let conn = open(&dir.path().join("group.vev"), Some(plan.clone()));
    let feed = conn.subscribe();
    let before = conn.commit_stats();
    let first_t = conn.db().basis_t() + 1;
    plan.pause_next("log sync");
    let reports = thread::scope(|s| {
        let leader = s.spawn(|| conn.transact_edn(&tx("lead")));
        plan.wait_paused();
        let followers: Vec<_> = (0..7)
            .map(|k| queue_behind(s, &conn, &format!("follow-{k}"), k))
            .collect();
        plan.resume();
        let mut reports = vec![("lead".to_owned(), leader.join().unwrap().unwrap())];
        for (k, f) in followers.into_iter().enumerate() {
            reports.push((format!("follow-{k}"), f.join().unwrap().unwrap()));
        }
        reports
    });
    check_reports(&reports, first_t);
    // The followers committed in the order they queued.
    let ts: Vec<u64> = reports.iter().map(|(_, r)| r.db_after.basis_t()).collect();
    assert_eq!(ts, (first_t..first_t + 8).collect::<Vec<_>>());
    let fed: Vec<u64> = feed.try_iter().map(|r| r.db_after.basis_t()).collect();
    assert_eq!(fed, ts);
    let stats = conn.commit_stats();
    assert_eq!(stats.transactions - before.transactions, 8);
    // The leader's batch, then one for the seven that queued behind it.
    assert_eq!(stats.write_batches - before.write_batches, 2);
    assert_eq!(stats.waiting, 0);
}

#[test]
fn a_failing_transaction_in_a_group_fails_only_its_caller() {
    let dir = tempfile::tempdir().unwrap();
    let plan = FaultPlan::new(0, false);
    let conn = open(&dir.path().join("unique.vev"), Some(plan.clone()));
    let before = conn.commit_stats();
    plan.pause_next("log sync");
    let results = thread::scope(|s| {
        let leader = s.spawn(|| conn.transact_edn(&tx("lead")));
        plan.wait_paused();
        let texts = [
            r#"[{:g/id "b" :g/email "x@example.com"}]"#,
            r#"[{:g/id "c" :g/email "x@example.com"}]"#,
            r#"[{:g/id "d" :g/email "d@example.com"}]"#,
        ];
        let queued: Vec<_> = texts
            .iter()
            .enumerate()
            .map(|(k, text)| {
                let h = s.spawn(|| conn.transact_edn(text));
                wait_for_queue(&conn, k + 1);
                h
            })
            .collect();
        plan.resume();
        leader.join().unwrap().unwrap();
        queued
            .into_iter()
            .map(|h| h.join().unwrap())
            .collect::<Vec<_>>()
    });
    let [b, c, d] = <[_; 3]>::try_from(results).unwrap();
    let (b, d) = (b.unwrap(), d.unwrap());
    assert_eq!(c.unwrap_err().code(), "tx/unique-conflict");
    assert_eq!(d.db_before.basis_t(), b.db_after.basis_t());
    assert_eq!(d.db_after.basis_t(), b.db_after.basis_t() + 1);
    let stats = conn.commit_stats();
    assert_eq!(stats.transactions - before.transactions, 3);
    assert_eq!(stats.write_batches - before.write_batches, 2);
    let mut held = ids(&conn.db());
    held.sort();
    assert_eq!(held, ["b", "d", "lead"]);
}

#[test]
fn a_panicking_transaction_function_fails_only_its_caller() {
    let dir = tempfile::tempdir().unwrap();
    let plan = FaultPlan::new(0, false);
    let conn = open(&dir.path().join("panic.vev"), Some(plan.clone()));
    conn.register_fn("g/boom", |_, _| panic!("boom"));
    // The panicking transaction is second, so that the first one's thread leads the group
    // and runs it.
    let texts = [tx("a"), r#"[[:g/boom]]"#.to_owned(), tx("b")];
    plan.pause_next("log sync");
    let results = thread::scope(|s| {
        let leader = s.spawn(|| conn.transact_edn(&tx("lead")));
        plan.wait_paused();
        let queued: Vec<_> = texts
            .iter()
            .enumerate()
            .map(|(k, text)| {
                let h = s.spawn(|| conn.transact_edn(text));
                wait_for_queue(&conn, k + 1);
                h
            })
            .collect();
        plan.resume();
        leader.join().unwrap().unwrap();
        queued.into_iter().map(|h| h.join()).collect::<Vec<_>>()
    });
    assert!(results[0].as_ref().is_ok_and(|r| r.is_ok()));
    let panic = results[1]
        .as_ref()
        .expect_err("the panic did not reach its caller");
    assert_eq!(panic.downcast_ref::<&str>(), Some(&"boom"));
    assert!(results[2].as_ref().is_ok_and(|r| r.is_ok()));
    // The connection goes on committing.
    conn.transact_edn(&tx("c")).unwrap();
    let mut held = ids(&conn.db());
    held.sort();
    assert_eq!(held, ["a", "b", "c", "lead"]);
}

/// A group of three queued behind a held sync whose own sync fails (`after_commit`: once
/// it has committed); returns the file's ids afterwards, once one more transaction ran.
fn failed_group(after_commit: bool) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fault.vev");
    let plan = FaultPlan::new(0, after_commit);
    let conn = open(&path, Some(plan.clone()));
    plan.pause_next("log sync");
    let results = thread::scope(|s| {
        let leader = s.spawn(|| conn.transact_edn(&tx("lead")));
        plan.wait_paused();
        let followers: Vec<_> = (0..3)
            .map(|k| queue_behind(s, &conn, &format!("lost-{k}"), k))
            .collect();
        plan.fail_next("log sync");
        plan.resume();
        leader.join().unwrap().unwrap();
        followers
            .into_iter()
            .map(|h| h.join().unwrap())
            .collect::<Vec<_>>()
    });
    for r in results {
        assert_eq!(r.unwrap_err().code(), "storage/injected");
    }
    // The next transaction commits on what the file holds (the connection re-reads it).
    let after = conn.transact_edn(&tx("after")).unwrap();
    let lost = entity(&after.db_after, "lost-0").is_some();
    assert_eq!(lost, after_commit, "db-after of the next transaction");
    drop(conn);
    let reopened = open(&path, None);
    reopened.verify().unwrap();
    let mut held = ids(&reopened.db());
    held.sort();
    held
}

#[test]
fn a_failed_group_write_fails_every_caller_and_keeps_the_rest() {
    assert_eq!(failed_group(false), ["after", "lead"]);
}

#[test]
fn a_group_that_committed_before_its_sync_failed_is_adopted_before_the_next() {
    // Every caller was told of the failure, yet the group is in the file: the next
    // transaction builds on it (no basis-t is reused).
    assert_eq!(
        failed_group(true),
        ["after", "lead", "lost-0", "lost-1", "lost-2"]
    );
}

/// Documents of `db` whose `:g/text` matches `term`.
fn hits(db: &Db, term: &str) -> usize {
    let a = db.attribute(&Keyword::new("g/text")).unwrap().id;
    vev::Source::fulltext(db, a, &vev::FtQuery::parse(term).unwrap(), true)
        .unwrap()
        .len()
}

#[test]
fn a_group_writes_each_transactions_fulltext_segment() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fulltext.vev");
    let plan = FaultPlan::new(0, false);
    let conn = open(&path, Some(plan.clone()));
    let before = conn.commit_stats();
    let terms = ["alpha", "beta", "gamma", "delta"];
    let text = |term: &str| format!(r#"[{{:g/id "{term}" :g/text "the {term} document"}}]"#);
    let texts: Vec<String> = terms.iter().map(|t| text(t)).collect();
    plan.pause_next("log sync");
    let reports = thread::scope(|s| {
        let leader = s.spawn(|| conn.transact_edn(&texts[0]));
        plan.wait_paused();
        let queued: Vec<_> = texts[1..]
            .iter()
            .enumerate()
            .map(|(k, text)| {
                let h = s.spawn(|| conn.transact_edn(text));
                wait_for_queue(&conn, k + 1);
                h
            })
            .collect();
        plan.resume();
        let mut reports = vec![leader.join().unwrap().unwrap()];
        reports.extend(queued.into_iter().map(|h| h.join().unwrap().unwrap()));
        reports
    });
    for (k, report) in reports.iter().enumerate() {
        // Each db-after finds its own document and those committed before it.
        for (j, term) in terms.iter().enumerate() {
            assert_eq!(
                hits(&report.db_after, term),
                usize::from(j <= k),
                "{term} after {k}"
            );
        }
    }
    assert_eq!(conn.commit_stats().write_batches - before.write_batches, 2);
    drop(conn);
    let reopened = open(&path, None);
    for term in terms {
        assert_eq!(hits(&reopened.db(), term), 1, "{term} after reopening");
    }
    let report = reopened.verify().unwrap().unwrap();
    assert_eq!(report.fulltext_documents, 4);
    assert_eq!(report.fulltext_segments, 4, "one segment per transaction");
}

// ---- crash test --------------------------------------------------------------------------

const CRASH_THREADS: usize = 4;

/// The crash child: `CRASH_THREADS` threads commit `round-thread-i` for i = 0, 1, ... and
/// print `ack round thread i` after each returns, until the child is killed.
fn crash_child(path: &str) {
    let round = std::env::var("VEV_GROUP_CRASH_ROUND").unwrap();
    let conn = open(Path::new(path), None);
    thread::scope(|s| {
        for k in 0..CRASH_THREADS {
            let (conn, round) = (&conn, &round);
            s.spawn(move || {
                for i in 0.. {
                    conn.transact_edn(&tx(&format!("{round}-{k}-{i}"))).unwrap();
                    let mut out = std::io::stdout().lock();
                    writeln!(out, "ack {round} {k} {i}").unwrap();
                    out.flush().unwrap();
                }
            });
        }
    });
}

/// Run the child for a moment, kill it, and return the last acknowledged i of each thread.
fn crash_round(path: &Path, round: usize) -> (BTreeMap<usize, u64>, bool) {
    let mut proc = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "sigkill_with_concurrent_committers_loses_nothing_acknowledged",
        ])
        .args(["--nocapture", "--test-threads=1", "-q"])
        .env("VEV_GROUP_CRASH_CHILD", path)
        .env("VEV_GROUP_CRASH_ROUND", round.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = proc.stdout.take().unwrap();
    let reader = thread::spawn(move || {
        let mut last = BTreeMap::new();
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let parts: Vec<&str> = line.split(' ').collect();
            if let ["ack", _, k, i] = parts[..] {
                last.insert(k.parse::<usize>().unwrap(), i.parse::<u64>().unwrap());
            }
        }
        last
    });
    thread::sleep(Duration::from_millis(20 + rand::random::<u64>() % 80));
    proc.kill().unwrap();
    let killed = proc.wait().unwrap().code().is_none();
    (reader.join().unwrap(), killed)
}

/// The i's the database holds for each thread of `round`.
fn present(db: &Db, round: usize) -> BTreeMap<usize, Vec<u64>> {
    let mut out: BTreeMap<usize, Vec<u64>> = BTreeMap::new();
    for id in ids(db) {
        let parts: Vec<u64> = id.split('-').map(|p| p.parse().unwrap()).collect();
        if parts[0] == round as u64 {
            out.entry(parts[1] as usize).or_default().push(parts[2]);
        }
    }
    out
}

#[test]
fn sigkill_with_concurrent_committers_loses_nothing_acknowledged() {
    if let Ok(path) = std::env::var("VEV_GROUP_CRASH_CHILD") {
        return crash_child(&path);
    }
    let rounds: usize = std::env::var("VEV_CRASH_ITERATIONS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(30);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("crash.vev");
    let mut acked: Vec<BTreeMap<usize, u64>> = Vec::new();
    let mut kills_mid_run = 0;
    for round in 0..rounds {
        let (last, killed) = crash_round(&path, round);
        kills_mid_run += usize::from(killed);
        acked.push(last);
        let conn = open(&path, None);
        let db = conn.db();
        for (r, last) in acked.iter().enumerate() {
            let held = present(&db, r);
            for k in 0..CRASH_THREADS {
                let mut got = held.get(&k).cloned().unwrap_or_default();
                got.sort();
                // Each thread's transactions run one after another: the file holds a
                // prefix of them, every acknowledged one and at most the one in flight.
                let n = got.len() as u64;
                assert_eq!(got, (0..n).collect::<Vec<_>>(), "round {r} thread {k}");
                let acked_n = last.get(&k).map_or(0, |i| i + 1);
                assert!(
                    n == acked_n || (r == round && n == acked_n + 1),
                    "round {r} thread {k}: {n} in the file, {acked_n} acknowledged"
                );
            }
        }
        conn.verify().unwrap();
        // What the file holds now is what later rounds expect.
        let held = present(&db, round);
        acked[round] = held
            .into_iter()
            .map(|(k, is)| (k, is.len() as u64 - 1))
            .collect();
    }
    assert!(
        kills_mid_run > rounds / 2,
        "the child was rarely killed mid-run"
    );
}
