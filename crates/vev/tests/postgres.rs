//! PostgreSQL storage through `Connection` (`vev-postgres`), on a real PostgreSQL 15 that
//! the test starts in a temporary directory and stops at the end (`TempServer`): round
//! trips, history after reopening, checkpoints, group commit, two writers, a lease taken
//! over from a stopped writer process that is then fenced, readers following the writer,
//! the typed errors of an unreachable server and of a schema that is not Vev's, and a schema
//! of the older layout version 1 read and migrated.
//!
//! One test starts one server and runs every scenario on a database of its own (a server
//! per scenario would cost an `initdb` each). The writer that loses its lease is this same
//! test binary run again as a child (`writer_child`), so that it can be stopped (SIGSTOP)
//! like a paused or partitioned process.
//!
//! The scenarios that hold for every shared-storage backend (`every_backend`) run twice, the
//! test parameter `Stores` choosing PostgreSQL alone or PostgreSQL with the segments in an
//! S3-compatible object store (a throwaway moto, `vev_objstore::testing`); the object
//! store's own scenarios are in `postgres/objstore.rs`.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use vev::{Connection, Db, LockMode, OpenOptions};
use vev_objstore::testing::MotoServer;
use vev_postgres::testing::{self, TempServer};

#[path = "postgres/objstore.rs"]
mod objstore;

const SCHEMA: &str = r#"[{:db/ident :k/n :db/valueType :db.type/long :db/cardinality :db.cardinality/one}
 {:db/ident :k/name :db/valueType :db.type/string :db/cardinality :db.cardinality/one}]"#;

fn writer_opts(lease_ms: u64) -> OpenOptions {
    OpenOptions {
        lease: Duration::from_millis(lease_ms),
        ..OpenOptions::default()
    }
}

fn tx_n(conn: &Connection, n: i64) -> Result<vev::TxReport, vev::Error> {
    conn.transact_edn(&format!("[{{:k/n {n} :k/name \"n{n}\"}}]"))
}

/// The integers of a query's printed result.
fn ints(text: &str) -> Vec<i64> {
    text.split(|c: char| !(c.is_ascii_digit() || c == '-'))
        .filter_map(|w| w.parse().ok())
        .collect()
}

/// Every `:k/n` value, one per entity that has it (so a transaction applied twice shows).
fn ns(db: &Db) -> Vec<i64> {
    let r = db.q("[:find ?e ?n :where [?e :k/n ?n]]", &[]).unwrap();
    let mut out: Vec<i64> = ints(&r.to_edn().to_string())
        .chunks(2)
        .map(|p| p[1])
        .collect();
    out.sort_unstable();
    out
}

fn server() -> Option<TempServer> {
    testing::for_test("the PostgreSQL storage tests")
}

/// The test parameter: where a scenario's databases go.
enum Stores<'a> {
    /// Everything in PostgreSQL.
    Postgres(&'a TempServer),
    /// The segments in an object store (moto, bucket `BUCKET`), the rest in PostgreSQL.
    Objstore(&'a TempServer, &'a MotoServer),
}

/// The bucket of the object-store scenarios.
const BUCKET: &str = "vev-tests";

impl Stores<'_> {
    /// A new database's URL: a PostgreSQL database named `name` (and for the object store
    /// the prefix `name`).
    fn create_db(&self, name: &str) -> Result<String, String> {
        match self {
            Stores::Postgres(pg) => pg.create_db(name),
            Stores::Objstore(pg, moto) => Ok(moto.url(BUCKET, name, &pg.create_db(name)?)),
        }
    }
}

/// The scenarios that hold for every shared-storage backend.
fn every_backend(st: &Stores<'_>) {
    round_trip_and_history(st);
    checkpoint_and_reopen(st);
    group_commit(st);
    second_writer_is_locked(st);
    lease_takeover_fences_the_stopped_writer(st);
    killed_writer_is_taken_over(st);
    reader_follows_the_writer(st);
}

#[test]
fn postgres_storage() {
    let Some(pg) = server() else {
        return;
    };
    every_backend(&Stores::Postgres(&pg));
    typed_errors(&pg);
    version_1_layout_is_read_and_migrated(&pg);
}

/// The same scenarios with the segments in an object store, then its own (`objstore.rs`).
#[test]
fn objstore_storage() {
    let Some(pg) = server() else {
        return;
    };
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
    let Some(moto) = vev_objstore::testing::for_test("the object-store storage tests", dir) else {
        return;
    };
    moto.create_bucket(BUCKET).unwrap();
    let st = Stores::Objstore(&pg, &moto);
    every_backend(&st);
    objstore::segments_are_objects_and_collected(&pg, &moto);
    objstore::typed_errors(&pg, &moto, dir);
    objstore::copy_there_and_back(&pg, &moto);
    objstore::orphans_are_swept(&pg, &moto);
}

/// A schema of layout version 1 (before compressed blobs): a reader reads it and leaves it
/// at 1, a writer marks it version 2; both see the same data. (The blobs here are the new
/// build's; that raw blobs of older stores read as they are is the SQLite format-5
/// fixture's test, since both backends decode blobs in `vev-db`.)
fn version_1_layout_is_read_and_migrated(pg: &TempServer) {
    let url = pg.create_db("layout1").unwrap();
    let conn = Connection::open(&url).unwrap();
    conn.transact_edn(SCHEMA).unwrap();
    for n in 0..50 {
        tx_n(&conn, n).unwrap();
    }
    conn.checkpoint().unwrap();
    tx_n(&conn, 50).unwrap();
    drop(conn);
    let mut c = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let version = |c: &mut postgres::Client| -> i64 {
        c.query_one("SELECT format_version FROM vev.meta", &[])
            .unwrap()
            .get(0)
    };
    assert_eq!(version(&mut c), vev_postgres::FORMAT_VERSION);
    assert_eq!(vev_postgres::FORMAT_VERSION, 2);
    c.batch_execute("UPDATE vev.meta SET format_version = 1")
        .unwrap();
    let reader = Connection::open_with(&url, &OpenOptions::read_only()).unwrap();
    assert_eq!(ns(&reader.db()), (0..=50).collect::<Vec<_>>());
    drop(reader);
    assert_eq!(version(&mut c), 1);
    let writer = Connection::open(&url).unwrap();
    assert_eq!(version(&mut c), 2);
    tx_n(&writer, 51).unwrap();
    assert_eq!(ns(&writer.db()), (0..=51).collect::<Vec<_>>());
}

fn round_trip_and_history(pg: &Stores<'_>) {
    let url = pg.create_db("roundtrip").unwrap();
    let t_before;
    {
        let conn = Connection::open(&url).unwrap();
        if let Stores::Postgres(_) = pg {
            assert_eq!(conn.path().unwrap().to_str(), Some(url.as_str()));
        }
        conn.transact_edn(SCHEMA).unwrap();
        for n in 1..=5 {
            tx_n(&conn, n).unwrap();
        }
        t_before = conn.db().basis_t();
        let e = conn
            .db()
            .q("[:find ?e . :where [?e :k/name \"n1\"]]", &[])
            .unwrap()
            .to_edn()
            .to_string();
        conn.transact_edn(&format!("[[:db/add {e} :k/n 100]]"))
            .unwrap();
        assert_eq!(ns(&conn.db()), vec![2, 3, 4, 5, 100]);
    }
    // Reopened (from the log: the close checkpointed, so also from the root).
    let conn = Connection::open(&url).unwrap();
    let db = conn.db();
    assert_eq!(ns(&db), vec![2, 3, 4, 5, 100]);
    assert_eq!(ns(&db.as_of(t_before)), vec![1, 2, 3, 4, 5]);
    let hist = db
        .history()
        .q("[:find ?n ?added :where [?e :k/n ?n ?tx ?added]]", &[])
        .unwrap();
    assert_eq!(hist.len(), 7, "{}", hist.to_edn()); // 1..5, 100 asserted, 1 retracted
    let log = db.tx_range(Some(1), None).unwrap();
    assert_eq!(log.len() as u64, db.basis_t());
    let report = conn.verify().unwrap().unwrap();
    assert_eq!(report.log_rows, db.basis_t());
}

fn checkpoint_and_reopen(pg: &Stores<'_>) {
    let url = pg.create_db("checkpoints").unwrap();
    let opts = OpenOptions {
        checkpoint_datoms: 30,
        checkpoint_on_close: false,
        gc_grace: Some(Duration::ZERO),
        ..writer_opts(2000)
    };
    let mem = Connection::open_in_memory();
    {
        let conn = Connection::open_with(&url, &opts).unwrap();
        for c in [&conn, &mem] {
            c.transact_edn(SCHEMA).unwrap();
        }
        for n in 0..120 {
            for c in [&conn, &mem] {
                tx_n(c, n).unwrap();
            }
            if n == 60 {
                conn.checkpoint().unwrap();
            }
        }
        // Background checkpoints ran along the way; the tail after the last is replayed.
    }
    let conn = Connection::open_with(&url, &opts).unwrap();
    let db = conn.db();
    assert_eq!(db.basis_t(), mem.db().basis_t());
    assert_eq!(ns(&db), (0..120).collect::<Vec<_>>());
    // Every index equal to the in-memory engine's, but for the transaction instants (each
    // connection read its own clock).
    let datoms = |db: &Db, order| -> Vec<vev::Datom> {
        db.datoms(order, &[])
            .map(Result::unwrap)
            .filter(|d| d.a != vev::schema::sys::TX_INSTANT)
            .collect()
    };
    for order in [
        vev::IndexOrder::Eavt,
        vev::IndexOrder::Aevt,
        vev::IndexOrder::Avet,
        vev::IndexOrder::Vaet,
    ] {
        let (a, b) = (datoms(&db, order), datoms(&mem.db(), order));
        assert!(a == b, "{order:?}: {} datoms against {}", a.len(), b.len());
    }
    // t 1 is the schema, t k+2 asserts k.
    assert_eq!(ns(&db.as_of(30)), (0..29).collect::<Vec<_>>());
    conn.checkpoint().unwrap();
    drop(conn);
    let conn = Connection::open_with(&url, &opts).unwrap();
    assert_eq!(ns(&conn.db()), (0..120).collect::<Vec<_>>());
    conn.verify().unwrap();
}

fn group_commit(pg: &Stores<'_>) {
    let url = pg.create_db("groups").unwrap();
    let conn = Connection::open(&url).unwrap();
    conn.transact_edn(SCHEMA).unwrap();
    std::thread::scope(|s| {
        for k in 0..4 {
            let conn = conn.clone();
            s.spawn(move || {
                for i in 0..25 {
                    tx_n(&conn, k * 1000 + i).unwrap();
                }
            });
        }
    });
    drop(conn);
    let conn = Connection::open(&url).unwrap();
    let want: Vec<i64> = (0..4)
        .flat_map(|k| (0..25).map(move |i| k * 1000 + i))
        .collect();
    assert_eq!(ns(&conn.db()), want);
}

fn second_writer_is_locked(pg: &Stores<'_>) {
    let url = pg.create_db("twowriters").unwrap();
    let first = Connection::open_with(&url, &writer_opts(300)).unwrap();
    first.transact_edn(SCHEMA).unwrap();
    let e = Connection::open_with(&url, &writer_opts(300)).unwrap_err();
    assert_eq!(e.code(), "storage/locked", "{e}");
    // Waiting longer than the lease: the first writer renews it, so still locked.
    let waiting = OpenOptions {
        lock: LockMode::Wait(Duration::from_millis(1200)),
        ..writer_opts(300)
    };
    let started = Instant::now();
    let e = Connection::open_with(&url, &waiting).unwrap_err();
    assert_eq!(e.code(), "storage/locked", "{e}");
    assert!(started.elapsed() >= Duration::from_millis(1200));
    // Closing releases the lease: the next writer opens at once.
    tx_n(&first, 1).unwrap();
    drop(first);
    let second = Connection::open_with(&url, &writer_opts(300)).unwrap();
    assert_eq!(ns(&second.db()), vec![1]);
}

/// A child writer process: reads `tx N` lines, answers `ok N` or `err CODE`.
struct ChildWriter {
    child: Child,
    /// The child's stdout, line by line, from a thread (so a silent child fails the test
    /// after a timeout rather than hanging it).
    out: std::sync::mpsc::Receiver<String>,
}

impl ChildWriter {
    fn start(url: &str, lease_ms: u64) -> ChildWriter {
        ChildWriter::spawn(url, lease_ms, false)
    }

    /// A read-only child: answers `sync` with `ns N,N,...` (`ns` of what `sync` returned).
    fn start_reader(url: &str) -> ChildWriter {
        ChildWriter::spawn(url, 1000, true)
    }

    fn spawn(url: &str, lease_ms: u64, reader: bool) -> ChildWriter {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "writer_child", "--nocapture", "--test-threads=1"])
            .env("VEV_PG_CHILD_URL", url)
            .env("VEV_PG_CHILD_LEASE_MS", lease_ms.to_string())
            .env("VEV_PG_CHILD_READER", if reader { "1" } else { "0" })
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let (send, out) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in stdout.lines().map_while(Result::ok) {
                if send.send(line).is_err() {
                    return;
                }
            }
        });
        let mut w = ChildWriter { child, out };
        assert_eq!(w.line(), "ready");
        w
    }

    fn line(&mut self) -> String {
        loop {
            let l = self
                .out
                .recv_timeout(Duration::from_secs(60))
                .expect("the child writer answers within a minute");
            // libtest's own text ("running 1 test", "test writer_child ... ") is not the
            // child's, and may begin the line the child's first answer ends.
            if let Some(at) = l.find("child: ") {
                return l[at + "child: ".len()..].to_owned();
            }
        }
    }

    fn tx(&mut self, n: i64) -> String {
        self.ask(&format!("tx {n}"))
    }

    fn ask(&mut self, request: &str) -> String {
        let stdin = self.child.stdin.as_mut().unwrap();
        writeln!(stdin, "{request}").unwrap();
        stdin.flush().unwrap();
        self.line()
    }

    fn signal(&self, sig: &str) {
        let ok = Command::new("kill")
            .args([sig, &self.child.id().to_string()])
            .status()
            .unwrap()
            .success();
        assert!(ok, "kill {sig}");
    }
}

impl Drop for ChildWriter {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The child's main, when run by `ChildWriter::start`; otherwise nothing.
#[test]
fn writer_child() {
    let Ok(url) = std::env::var("VEV_PG_CHILD_URL") else {
        return;
    };
    let lease: u64 = std::env::var("VEV_PG_CHILD_LEASE_MS")
        .unwrap()
        .parse()
        .unwrap();
    let reader = std::env::var("VEV_PG_CHILD_READER").is_ok_and(|v| v == "1");
    let opts = if reader {
        OpenOptions::read_only()
    } else {
        writer_opts(lease)
    };
    let conn = Connection::open_with(&url, &opts).unwrap();
    println!("child: ready");
    for line in std::io::stdin().lock().lines() {
        let line = line.unwrap();
        if line == "sync" {
            match conn.sync() {
                Ok(db) => {
                    let text: Vec<String> = ns(&db).iter().map(i64::to_string).collect();
                    println!("child: ns {}", text.join(","));
                }
                Err(e) => println!("child: err {} {e}", e.code()),
            }
            std::io::stdout().flush().unwrap();
            continue;
        }
        let n: i64 = line.trim_start_matches("tx ").parse().unwrap();
        match tx_n(&conn, n) {
            Ok(_) => println!("child: ok {n}"),
            Err(e) => println!("child: err {} {e}", e.code()),
        }
        std::io::stdout().flush().unwrap();
    }
}

fn lease_takeover_fences_the_stopped_writer(pg: &Stores<'_>) {
    let url = pg.create_db("takeover").unwrap();
    Connection::open(&url)
        .unwrap()
        .transact_edn(SCHEMA)
        .unwrap();
    let mut old = ChildWriter::start(&url, 400);
    for n in 1..=5 {
        assert_eq!(old.tx(n), format!("ok {n}"));
    }
    // Paused (as by a long GC pause or a partition): it stops renewing its lease.
    old.signal("-STOP");
    let waiting = OpenOptions {
        lock: LockMode::Wait(Duration::from_secs(10)),
        ..writer_opts(400)
    };
    let started = Instant::now();
    let new = Connection::open_with(&url, &waiting).unwrap();
    let took = started.elapsed();
    assert!(took < Duration::from_secs(5), "takeover took {took:?}");
    // The new writer caught up from the log: every acknowledged transaction, once.
    assert_eq!(ns(&new.db()), vec![1, 2, 3, 4, 5]);
    for n in 6..=8 {
        tx_n(&new, n).unwrap();
    }
    // The old writer wakes up and tries to commit: fenced, now and for good.
    old.signal("-CONT");
    let answer = old.tx(99);
    assert!(answer.starts_with("err storage/fenced"), "{answer}");
    let answer = old.tx(100);
    assert!(answer.starts_with("err storage/fenced"), "{answer}");
    tx_n(&new, 9).unwrap();
    drop(new);
    let reader = Connection::open_with(&url, &OpenOptions::read_only()).unwrap();
    assert_eq!(ns(&reader.db()), (1..=9).collect::<Vec<_>>());
    let log = reader.db().tx_range(Some(1), None).unwrap();
    let ts: Vec<u64> = log.iter().map(|e| e.t).collect();
    assert_eq!(
        ts,
        (1..=reader.db().basis_t()).collect::<Vec<_>>(),
        "a gapless log"
    );
}

fn killed_writer_is_taken_over(pg: &Stores<'_>) {
    let url = pg.create_db("killed").unwrap();
    Connection::open(&url)
        .unwrap()
        .transact_edn(SCHEMA)
        .unwrap();
    let mut old = ChildWriter::start(&url, 300);
    for n in 1..=3 {
        assert_eq!(old.tx(n), format!("ok {n}"));
    }
    old.signal("-KILL");
    let waiting = OpenOptions {
        lock: LockMode::Wait(Duration::from_secs(10)),
        ..writer_opts(300)
    };
    let new = Connection::open_with(&url, &waiting).unwrap();
    assert_eq!(ns(&new.db()), vec![1, 2, 3]);
    tx_n(&new, 4).unwrap();
    assert_eq!(ns(&new.db()), vec![1, 2, 3, 4]);
}

fn reader_follows_the_writer(pg: &Stores<'_>) {
    let url = pg.create_db("readers").unwrap();
    let writer = Connection::open_with(
        &url,
        &OpenOptions {
            checkpoint_datoms: 20,
            ..writer_opts(2000)
        },
    )
    .unwrap();
    writer.transact_edn(SCHEMA).unwrap();
    let reader = Connection::open_with(&url, &OpenOptions::read_only()).unwrap();
    assert!(ns(&reader.sync().unwrap()).is_empty());
    let mut want = Vec::new();
    for n in 0..40 {
        tx_n(&writer, n).unwrap();
        want.push(n);
        if n % 7 == 0 {
            // Whatever was acknowledged before `sync` is in what it returns.
            assert_eq!(ns(&reader.sync().unwrap()), want);
        }
    }
    writer.checkpoint().unwrap();
    assert_eq!(ns(&reader.sync().unwrap()), want);
    assert_eq!(reader.sync().unwrap().basis_t(), writer.db().basis_t());
    // Readers take no lease (a writer is open meanwhile), and do not write.
    let e = tx_n(&reader, 1000).unwrap_err();
    assert_eq!(e.code(), "storage/read-only", "{e}");
    // A reader in another process: its own segment cache, loading from storage.
    let mut other = ChildWriter::start_reader(&url);
    let text = |want: &[i64]| {
        let w: Vec<String> = want.iter().map(i64::to_string).collect();
        format!("ns {}", w.join(","))
    };
    assert_eq!(other.ask("sync"), text(&want));
    for n in 40..70 {
        tx_n(&writer, n).unwrap();
        want.push(n);
        if n % 10 == 0 {
            writer.checkpoint().unwrap();
            assert_eq!(other.ask("sync"), text(&want));
        }
    }
    assert_eq!(other.ask("sync"), text(&want));
}

fn typed_errors(pg: &TempServer) {
    // Nothing listens on the port: unavailable, and the password never shows.
    let port = testing::free_port().unwrap();
    let url = format!("postgres://vev:hunter2@127.0.0.1:{port}/app");
    let e = Connection::open(&url).unwrap_err();
    assert_eq!(e.code(), "storage/unavailable", "{e}");
    assert!(!e.to_string().contains("hunter2"), "{e}");
    assert!(e.to_string().contains(&format!("127.0.0.1:{port}")), "{e}");
    // A database with no Vev schema, opened read only: not a Vev database.
    let url = pg.create_db("empty").unwrap();
    let e = Connection::open_with(&url, &OpenOptions::read_only()).unwrap_err();
    assert_eq!(e.code(), "storage/not-vev", "{e}");
    // A schema holding someone else's tables: not Vev's, and left alone by a writer too.
    let mut c = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    c.batch_execute("CREATE SCHEMA shop; CREATE TABLE shop.orders (id int)")
        .unwrap();
    let e = Connection::open(format!("{url}?schema=shop")).unwrap_err();
    assert_eq!(e.code(), "storage/not-vev", "{e}");
    // A Vev schema of another format version.
    Connection::open(format!("{url}?schema=v")).unwrap();
    c.batch_execute("UPDATE v.meta SET format_version = 99")
        .unwrap();
    let e = Connection::open(format!("{url}?schema=v")).unwrap_err();
    assert_eq!(e.code(), "storage/format-version", "{e}");
    // A Vev schema whose columns were altered by hand: refused at open, not misread.
    Connection::open(format!("{url}?schema=altered")).unwrap();
    c.batch_execute("ALTER TABLE altered.log ALTER COLUMN record TYPE text")
        .unwrap();
    let e = Connection::open(format!("{url}?schema=altered")).unwrap_err();
    assert_eq!(e.code(), "storage/not-vev", "{e}");
    assert!(e.to_string().contains("altered.log.record"), "{e}");
    // A database that does not exist.
    let e = Connection::open(pg.url("nosuchdb")).unwrap_err();
    assert_eq!(e.code(), "storage/io", "{e}");
    // Two schemas are two databases.
    let a = Connection::open(format!("{url}?schema=a")).unwrap();
    let b = Connection::open(format!("{url}?schema=b")).unwrap();
    a.transact_edn(SCHEMA).unwrap();
    assert!(b.db().basis_t() < a.db().basis_t());
}

#[test]
fn open_postgres_urls_only_as_urls() {
    assert!(vev::is_postgres_url("postgres://u@h/d"));
    assert!(!vev::is_postgres_url("./postgres/file.vev"));
    let set: BTreeSet<i64> = ints("#{[1 2] [3 -4]}").into_iter().collect();
    assert_eq!(set, BTreeSet::from([1, 2, 3, -4]));
}
