//! The full-text index on a file under crashes and storage faults: SIGKILL during
//! transactions and compactions, and a fault at every write and sync (before and after the
//! commit). Afterwards every acknowledged document is searchable exactly once, nothing
//! unacknowledged is (but the one transaction in flight), and `verify` (the index against
//! the log) passes.
//!
//! The crash child is this test binary again, with `VEV_FT_CRASH_CHILD` set.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use vev::{Connection, Db, FaultPlan, FtQuery, OpenOptions};

const SCHEMA: &str = r#"[{:db/ident :doc/id :db/valueType :db.type/long
                           :db/cardinality :db.cardinality/one :db/unique :db.unique/identity}
                          {:db/ident :doc/text :db/valueType :db.type/string
                           :db/cardinality :db.cardinality/one :db/fulltext true}]"#;

/// Transaction `n` of the workload (n ≥ 1; 0 is the schema): documents `k` for `k` in the
/// transaction's range (1 to 12 of them, each with its own term `d<k>`); every fifth
/// transaction also retracts the text of an earlier document (delete-only every tenth).
fn tx_text(n: u64) -> String {
    let first = docs_before(n);
    let count = docs_in(n);
    let mut s = String::from("[");
    if n.is_multiple_of(10) {
        let k = n / 2;
        return format!("[[:db/retract [:doc/id {k}] :doc/text {:?}]]", text(k));
    }
    for k in first..first + count {
        s.push_str(&format!("{{:doc/id {k} :doc/text {:?}}}", text(k)));
    }
    if n.is_multiple_of(5) {
        let k = n / 3;
        s.push_str(&format!(
            "[:db/retract [:doc/id {k}] :doc/text {:?}]",
            text(k)
        ));
    }
    s.push(']');
    s
}

fn docs_in(n: u64) -> u64 {
    if n.is_multiple_of(10) {
        0
    } else {
        1 + (n * 7) % 12
    }
}

fn docs_before(n: u64) -> u64 {
    (1..n).map(docs_in).sum()
}

fn text(k: u64) -> String {
    let words = ["love", "always", "night", "blue", "moon", "Café"];
    format!(
        "d{k} {} {}",
        words[(k % 6) as usize],
        words[((k / 6) % 6) as usize]
    )
}

/// The documents retracted by transactions up to and including `n`.
fn retracted(n: u64) -> Vec<u64> {
    let mut out: Vec<u64> = (1..=n)
        .filter_map(|m| match m {
            _ if m.is_multiple_of(10) => Some(m / 2),
            _ if m.is_multiple_of(5) => Some(m / 3),
            _ => None,
        })
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

fn hits(db: &Db, q: &str) -> usize {
    let a = db
        .schema()
        .attribute_by_ident(&vev::Keyword::new("doc/text"))
        .unwrap()
        .id;
    vev::Source::fulltext(db, a, &FtQuery::parse(q).unwrap(), true)
        .unwrap()
        .len()
}

/// After transactions 1..=n: each document is found by its own term exactly once if it
/// is live, not at all if retracted or never written; and the index agrees with the
/// reference scan on shared terms.
fn check_documents(db: &Db, n: u64, context: &str) {
    if n == 0 {
        return; // the schema may not be there yet
    }
    let gone = retracted(n);
    let end = docs_before(n + 1);
    for k in 0..end + 3 {
        let want = usize::from(k < end && !gone.contains(&k));
        assert_eq!(hits(db, &format!("d{k}")), want, "{context}: document {k}");
    }
    let a = db
        .schema()
        .attribute_by_ident(&vev::Keyword::new("doc/text"))
        .unwrap()
        .id;
    for q in ["love", "blue moon", "caf*", "night OR always -love"] {
        let q = FtQuery::parse(q).unwrap();
        let mut got = vev::Source::fulltext(db, a, &q, true).unwrap();
        let mut want = vev_query::fulltext::scan_search(db, a, &q);
        got.sort_by_key(|h| h.e);
        want.sort_by_key(|h| h.e);
        assert_eq!(got.len(), want.len(), "{context}");
        for (g, w) in got.iter().zip(&want) {
            assert_eq!(g.e, w.e, "{context}");
            assert!((g.score - w.score).abs() < 1e-9, "{context}");
        }
    }
}

/// The transactions the database holds: its basis-t less the schema's.
fn committed(db: &Db) -> u64 {
    db.basis_t().saturating_sub(1)
}

fn opts() -> OpenOptions {
    OpenOptions {
        checkpoint_datoms: 120,
        gc_grace: Some(Duration::ZERO),
        lock: vev::LockMode::Wait(Duration::from_secs(10)),
        ..OpenOptions::default()
    }
}

fn open(path: &Path) -> Connection {
    let conn = Connection::open_with(path, &opts()).unwrap();
    if conn.db().basis_t() == 0 {
        conn.transact_edn(SCHEMA).unwrap();
    }
    conn
}

// ---- fault injection ---------------------------------------------------------------------

const FAULT_TXS: u64 = 24;

/// The workload on a store failing as `plan` says, compacting everything halfway and at the
/// end, as an application would run it: a transaction that reports a failure is retried
/// (it may have committed: a retried assertion is then redundant, a retried retraction a
/// no-op). Returns how many transactions reported the injected fault.
fn faulty_run(path: &Path, plan: std::sync::Arc<FaultPlan>) -> usize {
    drop(open(path));
    let conn = Connection::open_with(
        path,
        &OpenOptions {
            faults: Some(plan),
            ..opts()
        },
    )
    .unwrap();
    let mut injected = 0;
    for n in 1..=FAULT_TXS {
        loop {
            match conn.transact_edn(&tx_text(n)) {
                Ok(_) => break,
                Err(e) if e.code() == "storage/injected" => injected += 1,
                Err(e) => panic!("tx {n} failed with {e}"),
            }
        }
        if n == FAULT_TXS / 2 {
            let _ = conn.compact_fulltext();
        }
    }
    let _ = conn.compact_fulltext();
    let _ = conn.checkpoint();
    injected
}

#[test]
fn a_fault_at_every_write_and_sync_loses_no_document_and_duplicates_none() {
    let dir = tempfile::tempdir().unwrap();
    let counter = FaultPlan::new(0, false);
    assert_eq!(
        faulty_run(&dir.path().join("count.vev"), counter.clone()),
        0
    );
    let total = counter.seen();
    assert!(
        total >= FAULT_TXS * 2,
        "only {total} storage operations counted"
    );
    for after_commit in [false, true] {
        let mut failed_runs = 0;
        for n in 1..=total {
            let context = format!("fault at op {n}, after_commit={after_commit}");
            let path = dir.path().join(format!("f{n}-{after_commit}.vev"));
            let injected = faulty_run(&path, FaultPlan::new(n, after_commit));
            assert!(
                injected <= 1,
                "{context}: {injected} transactions saw one fault"
            );
            failed_runs += usize::from(injected == 1);
            let conn = Connection::open_with(&path, &opts()).unwrap();
            check_documents(&conn.db(), FAULT_TXS, &context);
            conn.verify()
                .unwrap_or_else(|e| panic!("{context}: verify: {e}"));
        }
        assert!(
            failed_runs > 0,
            "after_commit={after_commit}: no transaction saw a fault"
        );
    }
}

// ---- crashes -----------------------------------------------------------------------------

/// The crash child: transact the workload from wherever the file is, compacting every few
/// transactions (and compacting in the background as it goes), printing `ack N` after
/// each transaction returns, until killed.
fn crash_child(path: &str) {
    let conn = open(Path::new(path));
    let mut n = committed(&conn.db()) + 1;
    let out = std::io::stdout();
    loop {
        conn.transact_edn(&tx_text(n)).unwrap();
        {
            use std::io::Write;
            let mut lock = out.lock();
            writeln!(lock, "ack {n}").unwrap();
            lock.flush().unwrap();
        }
        if n.is_multiple_of(7) {
            conn.compact_fulltext().unwrap();
        }
        n += 1;
    }
}

#[test]
fn sigkill_during_transactions_and_compactions_loses_no_document() {
    if let Ok(path) = std::env::var("VEV_FT_CRASH_CHILD") {
        return crash_child(&path);
    }
    let iterations: usize = std::env::var("VEV_CRASH_ITERATIONS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(40);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("crash.vev");
    let mut acked_max = 0;
    for i in 0..iterations {
        let mut proc = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "sigkill_during_transactions_and_compactions_loses_no_document",
                "--nocapture",
                "--test-threads=1",
                "-q",
            ])
            .env("VEV_FT_CRASH_CHILD", &path)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = proc.stdout.take().unwrap();
        let reader = std::thread::spawn(move || {
            let mut last = None;
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Some(n) = line.strip_prefix("ack ") {
                    last = n.trim().parse::<u64>().ok();
                }
            }
            last
        });
        std::thread::sleep(Duration::from_millis(10 + rand::random::<u64>() % 80));
        proc.kill().unwrap();
        proc.wait().unwrap();
        if let Some(n) = reader.join().unwrap() {
            acked_max = acked_max.max(n);
        }
        let conn = Connection::open_with(&path, &opts()).unwrap();
        let db = conn.db();
        let present = committed(&db);
        let context = format!("iteration {i}");
        assert!(
            present >= acked_max,
            "{context}: acknowledged tx {acked_max} is missing"
        );
        assert!(
            present <= acked_max + 1,
            "{context}: {present} present, {acked_max} acknowledged"
        );
        if i < 5 || i % 8 == 0 || i + 1 == iterations {
            check_documents(&db, present, &context);
            conn.verify()
                .unwrap_or_else(|e| panic!("{context}: verify: {e}"));
        }
        acked_max = present;
    }
    assert!(
        acked_max > 20,
        "the children committed only {acked_max} transactions"
    );
}

/// A merged segment larger than a part is stored in several parts (written in write batches
/// of their own) and reads back whole; parts no manifest row names (a compaction that died
/// before its last batch) are deleted when a writer opens the file.
#[test]
fn large_segments_are_stored_in_parts_and_orphan_parts_are_removed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("parts.vev");
    let conn = open(&path);
    for n in 0..12u64 {
        let mut tx = String::from("[");
        for k in n * 250..(n + 1) * 250 {
            let words: Vec<String> = (0..40)
                .map(|w| format!("w{}x{}", (k * 7 + w) % 911, w % 7))
                .collect();
            tx.push_str(&format!("{{:doc/id {k} :doc/text {:?}}}", words.join(" ")));
        }
        tx.push(']');
        conn.transact_edn(&tx).unwrap();
    }
    conn.compact_fulltext().unwrap();
    let sqlite = rusqlite::Connection::open(&path).unwrap();
    let parts: i64 = sqlite
        .query_row(
            "SELECT count(*) FROM vev_ft_segment WHERE key / 65536 = (SELECT segment FROM vev_ft_manifest)",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(parts > 1, "the merged segment has {parts} part(s)");
    let want = hits(&conn.db(), "w5x5 OR w17x3");
    assert!(want > 0);
    conn.verify().unwrap();
    drop(conn);
    // An orphan: parts of a segment nothing names.
    sqlite
        .execute(
            "INSERT INTO vev_ft_segment (key, payload) VALUES (99999 * 65536, x'00010203')",
            [],
        )
        .unwrap();
    let conn = Connection::open_with(&path, &opts()).unwrap();
    let orphans: i64 = sqlite
        .query_row(
            "SELECT count(*) FROM vev_ft_segment WHERE key / 65536 = 99999",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(orphans, 0);
    assert_eq!(hits(&conn.db(), "w5x5 OR w17x3"), want);
    conn.verify().unwrap();
}

#[test]
fn compaction_garbage_is_indexed_by_age_on_new_files_and_on_files_without_the_index() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("garbage.vev");
    let has_index = |path: &Path| -> bool {
        let sqlite = rusqlite::Connection::open(path).unwrap();
        let n: i64 = sqlite
            .query_row(
                "SELECT count(*) FROM sqlite_master WHERE type = 'index' \
                 AND name = 'vev_ft_garbage_since'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        n == 1
    };
    let conn = open(&path);
    assert!(has_index(&path), "a new file has the index");
    for k in 0..20u64 {
        conn.transact_edn(&format!("[{{:doc/id {k} :doc/text \"word{k} common\"}}]"))
            .unwrap();
    }
    conn.compact_fulltext().unwrap();
    drop(conn);
    // A file written before the index existed: a writer creates it; searches are unchanged.
    let sqlite = rusqlite::Connection::open(&path).unwrap();
    sqlite
        .execute_batch("DROP INDEX vev_ft_garbage_since")
        .unwrap();
    drop(sqlite);
    assert!(!has_index(&path));
    let conn = Connection::open_with(&path, &opts()).unwrap();
    assert!(has_index(&path), "a writer's open creates the index");
    assert_eq!(hits(&conn.db(), "common"), 20);
    conn.compact_fulltext().unwrap();
    conn.verify().unwrap();
}

#[test]
fn small_segments_are_held_in_their_manifest_rows_and_survive_their_compaction() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("inline.vev");
    let conn = Connection::open_with(
        &path,
        &OpenOptions {
            fulltext_compaction: vev::FulltextCompaction::Manual,
            gc_grace: None,
            ..opts()
        },
    )
    .unwrap();
    conn.transact_edn(SCHEMA).unwrap();
    let rows = || -> (i64, i64) {
        let sqlite = rusqlite::Connection::open(&path).unwrap();
        let one = |sql: &str| -> i64 { sqlite.query_row(sql, [], |r| r.get(0)).unwrap() };
        (
            one("SELECT count(*) FROM vev_ft_manifest WHERE payload IS NOT NULL"),
            one("SELECT count(*) FROM vev_ft_segment"),
        )
    };
    for k in 0..8u64 {
        conn.transact_edn(&format!("[{{:doc/id {k} :doc/text \"small{k} words\"}}]"))
            .unwrap();
    }
    assert_eq!(rows(), (8, 0), "eight small segments, each in its row");
    let before = conn.db();
    conn.compact_fulltext().unwrap();
    // The merged segment is small too: in its row; the eight replaced ones are now parts
    // (garbage for the grace period), which the database value from before still reads.
    assert_eq!(rows(), (1, 8));
    let fresh = Connection::open_with(&path, &OpenOptions::read_only()).unwrap();
    assert_eq!(hits(&fresh.db(), "words"), 8);
    assert_eq!(hits(&fresh.db(), "small3"), 1);
    assert_eq!(hits(&before, "words"), 8);
    let report = conn.verify().unwrap().unwrap();
    assert_eq!(report.fulltext_segments, 9);
    drop(fresh);
    drop(conn);
    // A writer's next id is past the ids held only in rows: a new segment does not reuse one.
    let conn = Connection::open_with(&path, &opts()).unwrap();
    conn.transact_edn("[{:doc/id 100 :doc/text \"later words\"}]")
        .unwrap();
    conn.compact_fulltext().unwrap();
    assert_eq!(hits(&conn.db(), "words"), 9);
    conn.verify().unwrap();
}
