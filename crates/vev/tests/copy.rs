//! `Connection::copy_to`: a database moved between stores with its whole history.
//!
//! Every copy is compared with its source through the public API, independently of the
//! comparison `copy_to` makes itself: the basis-t, the whole log (`tx_range`), the four
//! indexes of the current and history views and of views as of every basis-t, full-text
//! answers, and the entity id the next transaction gets. A fault at every storage operation
//! of the destination leaves it empty (and a retry succeeds) or complete, never partial. On
//! a throwaway PostgreSQL 15: file → PostgreSQL → file, a non-empty schema refused, and a
//! copy whose writer lease is taken over before its commit (the copying process stopped
//! with SIGSTOP, as a paused or partitioned one) fenced, committing nothing.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use vev::{Connection, CopyOptions, CopyStage, Db, FaultPlan, IndexOrder, LockMode, OpenOptions};
use vev_postgres::testing::{self, TempServer};

const SCHEMA: &str = r#"[
 {:db/ident :p/email :db/valueType :db.type/string :db/cardinality :db.cardinality/one
  :db/unique :db.unique/identity}
 {:db/ident :p/name :db/valueType :db.type/string :db/cardinality :db.cardinality/one
  :db/fulltext true}
 {:db/ident :p/age :db/valueType :db.type/long :db/cardinality :db.cardinality/one
  :db/index true}
 {:db/ident :p/tag :db/valueType :db.type/keyword :db/cardinality :db.cardinality/many}
 {:db/ident :p/friend :db/valueType :db.type/ref :db/cardinality :db.cardinality/many}]"#;

/// A source database at `path`: a schema, people, friendships, renames and retractions
/// (history), a transaction function's result, a checkpoint half way and a log tail after
/// it. Returns its basis-t.
fn write_source(path: &Path, people: usize) -> u64 {
    let conn = Connection::open(path).unwrap();
    conn.transact_edn(SCHEMA).unwrap();
    for chunk in (0..people).collect::<Vec<_>>().chunks(7) {
        let maps: Vec<String> = chunk
            .iter()
            .map(|i| {
                format!(
                    r#"{{:p/email "p{i}@x" :p/name "person number {i} of {}" :p/age {} :p/tag [:t{} :u{}]}}"#,
                    if i % 2 == 0 { "even" } else { "odd" },
                    i % 50,
                    i % 5,
                    i % 3
                )
            })
            .collect();
        conn.transact_edn(&format!("[{}]", maps.join(" "))).unwrap();
    }
    conn.checkpoint().unwrap();
    for i in (0..people).step_by(3) {
        conn.transact_edn(&format!(
            r#"[[:db/add [:p/email "p{i}@x"] :p/friend [:p/email "p{}@x"]]
                [:db/add [:p/email "p{i}@x"] :p/name "renamed {i}"]
                [:db/retract [:p/email "p{i}@x"] :p/tag :t{}]]"#,
            (i * 7 + 1) % people,
            i % 5
        ))
        .unwrap();
    }
    conn.transact_edn(r#"[[:db/retractEntity [:p/email "p1@x"]]]"#)
        .unwrap();
    conn.db().basis_t()
}

fn datoms(db: &Db, order: IndexOrder) -> Vec<vev::Datom> {
    db.datoms(order, &[]).collect::<Result<_, _>>().unwrap()
}

const ORDERS: [IndexOrder; 4] = [
    IndexOrder::Eavt,
    IndexOrder::Aevt,
    IndexOrder::Avet,
    IndexOrder::Vaet,
];

/// The copy holds the source's database: same log, same indexes now, in history and as of
/// every t, same full-text answers.
fn assert_same(source: &Db, copy: &Db) {
    assert_eq!(copy.basis_t(), source.basis_t());
    assert_eq!(
        copy.tx_range(None, None).unwrap(),
        source.tx_range(None, None).unwrap(),
        "the log"
    );
    for order in ORDERS {
        assert_eq!(datoms(copy, order), datoms(source, order), "{order:?}");
        assert_eq!(
            datoms(&copy.history(), order),
            datoms(&source.history(), order),
            "history {order:?}"
        );
    }
    let step = (source.basis_t() / 7).max(1);
    for t in (0..=source.basis_t()).step_by(step as usize) {
        assert_eq!(
            datoms(&copy.as_of(t), IndexOrder::Eavt),
            datoms(&source.as_of(t), IndexOrder::Eavt),
            "as of {t}"
        );
    }
    for words in ["person", "even", "renamed", "number 3", "odd -renamed"] {
        let q = format!(
            r#"[:find ?e ?v ?tx ?score :where [(fulltext $ :p/name "{words}") [[?e ?v ?tx ?score]]]]"#
        );
        let a = source.q(&q, &[]).unwrap().to_edn().to_string();
        let b = copy.q(&q, &[]).unwrap().to_edn().to_string();
        assert_eq!(b, a, "full text {words:?}");
        let a = source.history().q(&q, &[]).unwrap().to_edn().to_string();
        let b = copy.history().q(&q, &[]).unwrap().to_edn().to_string();
        assert_eq!(b, a, "full text in history {words:?}");
    }
}

fn read_only(path: &str) -> Connection {
    Connection::open_with(path, &OpenOptions::read_only()).unwrap()
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn file_to_file_keeps_history_ids_and_instants() {
    let dir = tempfile::tempdir().unwrap();
    let (src, dst) = (dir.path().join("src.vev"), dir.path().join("dst.vev"));
    let t = write_source(&src, 60);
    let source = read_only(s(&src));
    let mut stages = Vec::new();
    let report = source
        .copy_to(&dst, &CopyOptions::default(), &mut |p| {
            if stages.last() != Some(&p.stage) {
                stages.push(p.stage);
            }
            assert!(p.records <= p.records_total);
        })
        .unwrap();
    assert_eq!(
        stages,
        [
            CopyStage::Reading,
            CopyStage::Writing,
            CopyStage::Checkpointing,
            CopyStage::Verifying
        ]
    );
    assert_eq!((report.basis_t, report.records), (t, t));
    let log: usize = source
        .db()
        .tx_range(Some(1), None)
        .unwrap()
        .iter()
        .map(|e| e.datoms.len())
        .sum();
    assert_eq!(report.datoms, log as u64);
    assert!(report.bytes > 0 && report.verified_datoms > 0, "{report:?}");
    let copy = read_only(s(&dst));
    assert_same(&source.db(), &copy.db());
    drop(copy);
    // Checkpointed: its root covers the whole log, so opening replays nothing.
    let root_t: i64 = rusqlite::Connection::open(&dst)
        .unwrap()
        .query_row("SELECT t FROM vev_root WHERE slot = 0", [], |r| r.get(0))
        .unwrap();
    assert_eq!(root_t as u64, t);
    // The next transaction gets the same ids and t on both.
    drop(source);
    let tx = r#"[{:db/id "new" :p/email "new@x" :p/name "a new person"}]"#;
    let a = Connection::open(&src).unwrap().transact_edn(tx).unwrap();
    let b = Connection::open(&dst).unwrap().transact_edn(tx).unwrap();
    assert_eq!(a.tempid("new"), b.tempid("new"));
    assert_eq!(a.db_after.basis_t(), b.db_after.basis_t());
}

#[test]
fn a_destination_with_transactions_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (src, dst) = (dir.path().join("src.vev"), dir.path().join("dst.vev"));
    write_source(&src, 10);
    Connection::open(&dst)
        .unwrap()
        .transact_edn(SCHEMA)
        .unwrap();
    let e = read_only(s(&src))
        .copy_to(&dst, &CopyOptions::default(), &mut |_| {})
        .unwrap_err();
    assert_eq!(e.code(), "storage/not-empty", "{e}");
    assert!(e.to_string().contains(s(&dst)), "{e}");
    assert!(e.to_string().contains("t=1"), "{e}");
    assert_eq!(read_only(s(&dst)).db().basis_t(), 1, "left as it was");
    // An empty file that exists (a copy that failed before its commit) is fine.
    let empty = dir.path().join("empty.vev");
    drop(Connection::open(&empty).unwrap());
    read_only(s(&src))
        .copy_to(&empty, &CopyOptions::default(), &mut |_| {})
        .unwrap();
    // In memory there is no log to copy.
    let e = Connection::open_in_memory()
        .copy_to(
            dir.path().join("m.vev"),
            &CopyOptions::default(),
            &mut |_| {},
        )
        .unwrap_err();
    assert_eq!(e.code(), "storage/io", "{e}");
}

/// A fault at each storage operation of the destination, failing before or after its
/// commit: the destination is then either empty (and the copy run again succeeds) or holds
/// the whole database, never part of it.
#[test]
fn a_fault_at_any_operation_leaves_the_destination_empty_or_complete() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src.vev");
    write_source(&src, 30);
    let source = read_only(s(&src));
    let with_faults = |plan: Arc<FaultPlan>| CopyOptions {
        open: OpenOptions {
            faults: Some(plan),
            ..OpenOptions::default()
        },
        ..CopyOptions::default()
    };
    let counter = FaultPlan::new(0, false);
    source
        .copy_to(
            dir.path().join("count.vev"),
            &with_faults(counter.clone()),
            &mut |_| {},
        )
        .unwrap();
    let ops = counter.seen();
    assert!(
        ops > source.db().basis_t(),
        "one per record at least: {ops}"
    );
    let (mut empty, mut complete) = (0, 0);
    for after_commit in [false, true] {
        for n in 1..=ops {
            let dst = dir.path().join(format!("dst-{n}-{after_commit}.vev"));
            let failed = source.copy_to(
                &dst,
                &with_faults(FaultPlan::new(n, after_commit)),
                &mut |_| {},
            );
            let e = failed.expect_err("the injected fault fails the copy");
            assert_eq!(e.code(), "storage/injected", "{e}");
            let held = read_only(s(&dst)).db();
            if held.basis_t() == 0 {
                empty += 1;
                assert_eq!(
                    datoms(&held, IndexOrder::Eavt),
                    datoms(&Db::empty(), IndexOrder::Eavt)
                );
                let retry = source
                    .copy_to(&dst, &CopyOptions::default(), &mut |_| {})
                    .unwrap();
                assert_eq!(retry.basis_t, source.db().basis_t());
            } else {
                complete += 1;
                assert_same(&source.db(), &held);
                let e = source
                    .copy_to(&dst, &CopyOptions::default(), &mut |_| {})
                    .unwrap_err();
                assert_eq!(e.code(), "storage/not-empty", "{e}");
            }
            assert_same(&source.db(), &read_only(s(&dst)).db());
        }
    }
    assert!(
        empty > 0 && complete > 0,
        "{empty} empty, {complete} complete"
    );
}

fn server() -> Option<TempServer> {
    testing::for_test("the PostgreSQL copies")
}

/// One server for every PostgreSQL scenario (an `initdb` each would be slow).
#[test]
fn copies_through_postgres() {
    let Some(pg) = server() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src.vev");
    write_source(&src, 40);
    let source = read_only(s(&src));

    // File → PostgreSQL → file.
    let url = pg.create_db("copied").unwrap();
    let to_pg = source
        .copy_to(&url, &CopyOptions::default(), &mut |_| {})
        .unwrap();
    assert_eq!(to_pg.basis_t, source.db().basis_t());
    assert!(!to_pg.dest.is_empty());
    let in_pg = read_only(&url);
    assert_same(&source.db(), &in_pg.db());
    let back = dir.path().join("back.vev");
    in_pg
        .copy_to(&back, &CopyOptions::default(), &mut |_| {})
        .unwrap();
    assert_same(&source.db(), &read_only(s(&back)).db());
    // PostgreSQL → PostgreSQL, into another schema of the same database.
    let other = format!("{url}?schema=other");
    in_pg
        .copy_to(&other, &CopyOptions::default(), &mut |_| {})
        .unwrap();
    assert_same(&source.db(), &read_only(&other).db());

    // A schema that holds transactions is refused, and keeps them.
    let e = source
        .copy_to(&url, &CopyOptions::default(), &mut |_| {})
        .unwrap_err();
    assert_eq!(e.code(), "storage/not-empty", "{e}");
    assert_same(&source.db(), &read_only(&url).db());

    fenced_copy_commits_nothing(&pg, &src, &source);
}

/// The copying process is stopped after it has read and replayed the source, holding the
/// destination's lease; another writer takes the lease over; the copy resumes and its
/// write batch is fenced: nothing is committed, and a copy run again succeeds.
fn fenced_copy_commits_nothing(pg: &TempServer, src: &Path, source: &Connection) {
    let url = pg.create_db("fenced").unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "copy_child", "--nocapture", "--test-threads=1"])
        .env("VEV_COPY_CHILD_SRC", src)
        .env("VEV_COPY_CHILD_DEST", &url)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = BufReader::new(child.stdout.take().unwrap());
    let (send, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in stdout.lines().map_while(Result::ok) {
            if let Some(at) = line.find("child: ") {
                if send.send(line[at + "child: ".len()..].to_owned()).is_err() {
                    return;
                }
            }
        }
    });
    let next = || {
        lines
            .recv_timeout(Duration::from_secs(60))
            .expect("the child answers within a minute")
    };
    assert_eq!(next(), "paused");
    let signal = |sig: &str| {
        let ok = Command::new("kill")
            .args([sig, &child.id().to_string()])
            .status()
            .unwrap()
            .success();
        assert!(ok, "kill {sig}");
    };
    signal("-STOP");
    let taker = Connection::open_with(
        &url,
        &OpenOptions {
            lock: LockMode::Wait(Duration::from_secs(10)),
            lease: Duration::from_millis(400),
            ..OpenOptions::default()
        },
    )
    .expect("the lease is taken over once the stopped copier's expires");
    assert_eq!(taker.db().basis_t(), 0);
    drop(taker);
    signal("-CONT");
    let stdin = child.stdin.as_mut().unwrap();
    writeln!(stdin, "go").unwrap();
    stdin.flush().unwrap();
    let answer = next();
    assert!(answer.starts_with("err storage/fenced"), "{answer}");
    let _ = child.wait();
    assert_eq!(read_only(&url).db().basis_t(), 0, "nothing committed");
    source
        .copy_to(&url, &CopyOptions::default(), &mut |_| {})
        .unwrap();
    assert_same(&source.db(), &read_only(&url).db());
}

/// The copying child of `fenced_copy_commits_nothing`, when run by it; otherwise nothing.
#[test]
fn copy_child() {
    let (Ok(src), Ok(dest)) = (
        std::env::var("VEV_COPY_CHILD_SRC"),
        std::env::var("VEV_COPY_CHILD_DEST"),
    ) else {
        return;
    };
    let opts = CopyOptions {
        open: OpenOptions {
            lease: Duration::from_millis(400),
            ..OpenOptions::default()
        },
        before_commit: Some(Arc::new(|| {
            println!("child: paused");
            std::io::stdout().flush().unwrap();
            let mut line = String::new();
            std::io::stdin().lock().read_line(&mut line).unwrap();
        })),
        ..CopyOptions::default()
    };
    match read_only(&src).copy_to(&dest, &opts, &mut |_| {}) {
        Ok(r) => println!("child: ok {}", r.basis_t),
        Err(e) => println!("child: err {} {e}", e.code()),
    }
    std::io::stdout().flush().unwrap();
}
