//! Durable storage: crash tests (SIGKILL at random moments), fault injection at every
//! storage operation, readers in other threads and processes, corruption, reopen oracles.
//!
//! Every check compares the reopened database with the in-memory engine fed the same
//! transactions: all four indexes, current and history.
//!
//! The crash and reader children are this same test binary, re-run with an environment
//! variable that turns `crash_child` / `reader_child` into the child's main.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use vev::{Connection, Db, FaultPlan, IndexOrder, OpenOptions, TxOp};

/// A fresh directory for one test's files, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!(
            "vev-durable-{name}-{}-{}",
            std::process::id(),
            rand::random::<u32>()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    fn file(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

const SCHEMA: &str = r#"[{:db/ident :c/n :db/valueType :db.type/long :db/cardinality :db.cardinality/one :db/unique :db.unique/identity}
 {:db/ident :c/name :db/valueType :db.type/string :db/cardinality :db.cardinality/one}
 {:db/ident :c/tag :db/valueType :db.type/long :db/cardinality :db.cardinality/one :db/index true}
 {:db/ident :c/tags :db/valueType :db.type/keyword :db/cardinality :db.cardinality/many}
 {:db/ident :c/next :db/valueType :db.type/ref :db/cardinality :db.cardinality/one}
 {:db/ident :c/part :db/valueType :db.type/ref :db/cardinality :db.cardinality/many :db/isComponent true}
 {:db/ident :c/scratch :db/valueType :db.type/string :db/cardinality :db.cardinality/one :db/noHistory true}
 {:db/ident :audit/by :db/valueType :db.type/string :db/cardinality :db.cardinality/one}]"#;

/// Transaction number `n` of the deterministic workload (0 is the schema). Each carries an
/// explicit `:db/txInstant`, so the same transactions give the same datoms everywhere.
fn tx_text(n: u64) -> String {
    let instant = 1_700_000_000_000u64 + n * 1000;
    let ms = format!(
        "#inst \"{}\"",
        vev::Edn::Inst(instant as i64)
            .to_string()
            .trim_start_matches("#inst ")
            .trim_matches('"')
    );
    if n == 0 {
        return format!(
            r#"{} [:db/add "datomic.tx" :db/txInstant {ms}]]"#,
            SCHEMA.trim_end_matches(']')
        );
    }
    let meta = format!(
        r#"[:db/add "datomic.tx" :db/txInstant {ms}] [:db/add "datomic.tx" :audit/by "w{n}"]"#
    );
    let mut ops = vec![meta];
    ops.push(format!(
        r#"{{:db/id "e" :c/n {n} :c/name "e{n}" :c/tag {} :c/tags [:t{} :t{}] :c/scratch "s{n}" :c/part [{{:c/name "p{n}"}}]}}"#,
        n % 7,
        n % 3,
        n % 5
    ));
    if n > 1 {
        ops.push(format!(r#"[:db/add [:c/n {}] :c/tag {}]"#, n - 1, 100 + n));
        ops.push(format!(r#"[:db/add [:c/n {}] :c/next "e"]"#, n - 1));
        ops.push(format!(r#"[:db/add [:c/n {}] :c/scratch "t{n}"]"#, n - 1));
    }
    if n > 4 && n.is_multiple_of(4) {
        ops.push(format!("[:db/retractEntity [:c/n {}]]", n - 3));
    }
    if n > 2 && n.is_multiple_of(3) {
        ops.push(format!(
            "[:db/retract [:c/n {}] :c/tags :t{}]",
            n - 2,
            (n - 2) % 3
        ));
    }
    format!("[{}]", ops.join(" "))
}

fn tx_ops(n: u64) -> Vec<TxOp> {
    vev::parse_tx(&tx_text(n))
        .unwrap_or_else(|e| panic!("tx {n}: {e}"))
        .into_iter()
        .map(|s| s.op)
        .collect()
}

/// The in-memory engine fed transactions `0..count`.
fn memory_oracle(count: u64) -> Db {
    let conn = Connection::open_in_memory();
    for n in 0..count {
        conn.transact(&tx_ops(n)).unwrap();
    }
    conn.db()
}

/// All datoms of the four indexes, current and history, and the log.
fn all_datoms(db: &Db) -> Result<Vec<Vec<vev::Datom>>, vev::StorageError> {
    let mut out = Vec::new();
    for view in [db.current(), db.history()] {
        for order in IndexOrder::ALL {
            out.push(view.datoms(order, &[]).collect::<Result<_, _>>()?);
        }
    }
    out.push(
        db.tx_range(None, None)?
            .into_iter()
            .flat_map(|e| e.datoms)
            .collect(),
    );
    Ok(out)
}

fn assert_same(stored: &Db, memory: &Db, context: &str) {
    assert_eq!(stored.basis_t(), memory.basis_t(), "{context}: basis-t");
    let stored_datoms = all_datoms(stored).unwrap_or_else(|e| panic!("{context}: {e}"));
    assert!(
        stored_datoms == all_datoms(memory).unwrap(),
        "{context}: the stored database differs from the in-memory engine"
    );
    let schema = |db: &Db| {
        let mut attrs: Vec<String> = db.schema().attributes().map(|a| format!("{a:?}")).collect();
        attrs.sort();
        let mut idents: Vec<String> = db
            .schema()
            .idents()
            .map(|(k, e)| format!("{k} {e}"))
            .collect();
        idents.sort();
        (attrs, idents)
    };
    assert_eq!(schema(stored), schema(memory), "{context}: schema");
    assert_eq!(
        stored.next_user(),
        memory.next_user(),
        "{context}: entity counter"
    );
}

/// Frequent checkpoints, each deleting at once what the one before named and it does not
/// (so crashes and faults land in garbage collection too).
fn small_checkpoints() -> OpenOptions {
    OpenOptions {
        checkpoint_datoms: 150,
        gc_grace: Some(Duration::ZERO),
        ..OpenOptions::default()
    }
}

/// Reopen as the writer. Waits for the lock: a process another test thread is spawning can
/// hold a copy of the previous writer's lock descriptor for the instant between its fork and
/// exec.
fn reopen(path: &Path) -> Connection {
    open_waiting(path).unwrap()
}

fn open_waiting(path: &Path) -> Result<Connection, vev::Error> {
    Connection::open_with(
        path,
        &OpenOptions {
            lock: vev::LockMode::Wait(Duration::from_secs(10)),
            ..OpenOptions::default()
        },
    )
}

#[test]
fn reopen_matches_memory_with_and_without_checkpoints() {
    let dir = TempDir::new("reopen");
    for (name, opts) in [
        (
            "never",
            OpenOptions {
                checkpoint_datoms: usize::MAX,
                ..OpenOptions::default()
            },
        ),
        ("often", small_checkpoints()),
    ] {
        let path = dir.file(&format!("{name}.vev"));
        let conn = Connection::open_with(&path, &opts).unwrap();
        for n in 0..60 {
            conn.transact(&tx_ops(n)).unwrap();
        }
        let live = conn.db();
        drop(conn);
        let memory = memory_oracle(60);
        assert_same(&live, &memory, name);
        let reopened = reopen(&path);
        assert_same(&reopened.db(), &memory, name);
        let report = reopened.verify().unwrap().unwrap();
        assert_eq!(report.log_rows, 60);
        // Queries and pull read through segments the same as in memory.
        let q = "[:find ?n ?t :where [?e :c/n ?n] [?e :c/tag ?t] [(> ?t 3)]]";
        assert_eq!(
            reopened.db().q(q, &[]).unwrap().to_edn(),
            memory.q(q, &[]).unwrap().to_edn()
        );
    }
}

#[test]
fn a_database_larger_than_the_cache_still_answers() {
    let dir = TempDir::new("cache");
    let path = dir.file("db.vev");
    let conn = reopen(&path);
    for n in 0..150 {
        conn.transact(&tx_ops(n)).unwrap();
    }
    conn.checkpoint().unwrap();
    drop(conn);
    let tiny = OpenOptions {
        cache_datoms_max: 3_000,
        ..OpenOptions::default()
    };
    let conn = Connection::open_with(&path, &tiny).unwrap();
    let db = conn.db();
    let memory = memory_oracle(150);
    assert_same(&db, &memory, "tiny cache");
    let cache = db.segment_cache().unwrap();
    assert!(
        cache.cached_datoms() <= 3_000 + 4_096,
        "{}",
        cache.cached_datoms()
    );
    // Walking everything twice through a cache smaller than the data must reload segments.
    let first = cache.loads();
    assert_same(&db, &memory, "tiny cache, second walk");
    assert!(cache.loads() > first, "no segment was evicted and reloaded");
    let q = "[:find (count ?e) . :where [?e :c/name]]";
    assert_eq!(
        db.q(q, &[]).unwrap().to_edn(),
        memory.q(q, &[]).unwrap().to_edn()
    );
}

// ---- crash tests -------------------------------------------------------------------------

/// The crash child: transact the workload from wherever the file is, printing `ack N` after
/// each transaction returns, until it is killed. The parent test runs it by starting this
/// test binary again on itself with `VEV_CRASH_CHILD` set (see `child`), so the child is no
/// test of its own that would pass, empty, when run alone.
fn crash_child(path: &str) {
    let conn = Connection::open_with(path, &small_checkpoints()).unwrap();
    let mut n = conn.db().basis_t();
    let out = std::io::stdout();
    loop {
        conn.transact(&tx_ops(n)).unwrap();
        {
            use std::io::Write;
            let mut lock = out.lock();
            writeln!(lock, "ack {n}").unwrap();
            lock.flush().unwrap();
        }
        n += 1;
    }
}

/// The test binary again, running only `test` (the test that calls it) with `env` set to
/// `value`: the test sees `env` and plays the child instead of the parent.
fn child(test: &str, env: &str, value: &Path) -> Command {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", test, "--nocapture", "--test-threads=1", "-q"])
        .env(env, value)
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    cmd
}

#[test]
fn sigkill_at_random_moments_loses_nothing_acknowledged() {
    if let Ok(path) = std::env::var("VEV_CRASH_CHILD") {
        return crash_child(&path);
    }
    let iterations: usize = std::env::var("VEV_CRASH_ITERATIONS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(200);
    let dir = TempDir::new("crash");
    let path = dir.file("crash.vev");
    let oracle = Connection::open_in_memory();
    let mut acked_max: Option<u64> = None;
    let mut kills_mid_run = 0;
    for i in 0..iterations {
        let mut proc = child(
            "sigkill_at_random_moments_loses_nothing_acknowledged",
            "VEV_CRASH_CHILD",
            &path,
        )
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
        std::thread::sleep(Duration::from_millis(5 + rand::random::<u64>() % 60));
        proc.kill().unwrap();
        let status = proc.wait().unwrap();
        if status.code().is_none() {
            kills_mid_run += 1;
        }
        let last = reader.join().unwrap();
        if let Some(n) = last {
            acked_max = Some(acked_max.map_or(n, |m| m.max(n)));
        }
        let conn = reopen(&path);
        let db = conn.db();
        let present = db.basis_t();
        // Transaction n is at basis-t n + 1 (t 0 is the empty database).
        if let Some(m) = acked_max {
            assert!(
                present > m,
                "iteration {i}: acknowledged tx {m} is missing (t={present})"
            );
        }
        // At most the one transaction in flight when the child died is there unacknowledged.
        assert!(
            present <= acked_max.map_or(1, |m| m + 2),
            "iteration {i}: t={present} but only up to {acked_max:?} was acknowledged"
        );
        while oracle.db().basis_t() < present {
            let n = oracle.db().basis_t();
            oracle.transact(&tx_ops(n)).unwrap();
        }
        // Full comparisons cost O(database); do them often early, then every 20 iterations.
        if i < 10 || i % 20 == 0 || i + 1 == iterations {
            assert_same(&db, &oracle.db(), &format!("iteration {i}"));
            conn.verify().unwrap();
        }
        acked_max = present.checked_sub(1);
    }
    assert!(
        kills_mid_run > iterations / 2,
        "the child was rarely killed mid-run"
    );
}

// ---- fault injection ---------------------------------------------------------------------

/// Run the workload with the Nth storage operation failing; return the transactions whose
/// `transact` returned `Ok`.
/// The workload run against a store that fails as `plan` says: the transactions that were
/// acknowledged, and how many reported the injected fault.
fn faulty_run(path: &Path, plan: std::sync::Arc<FaultPlan>) -> (Vec<u64>, usize) {
    let opts = OpenOptions {
        checkpoint_datoms: 60,
        gc_grace: Some(Duration::ZERO),
        faults: Some(plan),
        ..OpenOptions::default()
    };
    let conn = Connection::open_with(
        path,
        &OpenOptions {
            lock: vev::LockMode::Wait(Duration::from_secs(10)),
            ..opts
        },
    )
    .unwrap();
    let mut ok = Vec::new();
    let mut injected = 0;
    for n in 0..14 {
        match conn.transact(&tx_ops(n)) {
            Ok(_) => ok.push(n),
            Err(e) if e.code() == "storage/injected" => injected += 1,
            // A later transaction that names an entity the failed one would have made: it
            // leaves the database as it was.
            Err(e) => assert!(ok.len() < n as usize, "tx {n} failed with {e}"),
        }
    }
    let _ = conn.checkpoint();
    (ok, injected)
}

/// The workload transactions a database holds, in commit order (by their `:audit/by`).
fn committed(db: &Db) -> Vec<u64> {
    let by = db.entid(&vev::Keyword::new("audit/by"));
    let mut out = Vec::new();
    for entry in db.tx_range(None, None).unwrap() {
        if entry.datoms.iter().any(|d| {
            Some(d.a) == db.entid(&vev::Keyword::new("db/ident"))
                && d.v == vev::Value::Keyword(vev::Keyword::new("c/n"))
        }) {
            out.push(0);
        }
        for d in &entry.datoms {
            if Some(d.a) == by && d.e == entry.tx {
                if let vev::Value::String(s) = &d.v {
                    out.push(s.trim_start_matches('w').parse().unwrap());
                }
            }
        }
    }
    out
}

#[test]
fn a_failure_at_every_storage_operation_keeps_what_was_acknowledged() {
    let dir = TempDir::new("faults");
    // Count the operations of a clean run.
    let counter = FaultPlan::new(0, false);
    let (ok, _) = faulty_run(&dir.file("count.vev"), counter.clone());
    assert_eq!(ok.len(), 14);
    let total = counter.seen();
    assert!(total >= 28, "only {total} storage operations counted");
    for after_commit in [false, true] {
        // Runs where a transaction reported the fault, and (after_commit) runs where a
        // transaction that reported it is in the file all the same.
        let mut failed_tx_runs = 0;
        let mut committed_anyway_runs = 0;
        for n in 1..=total {
            let context = format!("fault at op {n}, after_commit={after_commit}");
            let path = dir.file(&format!("f{n}-{after_commit}.vev"));
            let plan = FaultPlan::new(n, after_commit);
            let (ok, injected) = faulty_run(&path, plan.clone());
            // How many operations a run does varies with when its background checkpoints
            // run, so a fault late in the count may not be reached; that run must then be a
            // clean one.
            if plan.seen() < n {
                assert_eq!(
                    (ok.len(), injected),
                    (14, 0),
                    "{context}: the fault never fired, yet the run was not clean"
                );
            }
            assert!(
                injected <= 1,
                "{context}: {injected} transactions saw one fault"
            );
            failed_tx_runs += usize::from(injected == 1);
            let conn = reopen(&path);
            let db = conn.db();
            let present = committed(&db);
            for k in &ok {
                assert!(
                    present.contains(k),
                    "{context}: acknowledged tx {k} is missing"
                );
            }
            let unacked: Vec<u64> = present
                .iter()
                .copied()
                .filter(|k| !ok.contains(k))
                .collect();
            assert!(
                unacked.len() <= usize::from(after_commit),
                "{context}: unacknowledged transactions {unacked:?} are present"
            );
            committed_anyway_runs += usize::from(!unacked.is_empty());
            let memory = Connection::open_in_memory();
            for k in &present {
                memory.transact(&tx_ops(*k)).unwrap();
            }
            assert_same(&db, &memory.db(), &context);
            conn.verify().unwrap();
        }
        // Each kind of fault was seen by transactions, not only by checkpoints, and a fault
        // after the commit did leave the transaction it failed in the file.
        assert!(
            failed_tx_runs > 0,
            "after_commit={after_commit}: no transaction ever reported the fault"
        );
        if after_commit {
            assert!(
                committed_anyway_runs > 0,
                "no fault after a commit left its transaction in the file"
            );
        }
    }
}

// ---- readers -----------------------------------------------------------------------------

const ACCOUNTS: &str = r#"[{:db/ident :acct/id :db/valueType :db.type/long :db/cardinality :db.cardinality/one :db/unique :db.unique/identity}
 {:db/ident :acct/balance :db/valueType :db.type/long :db/cardinality :db.cardinality/one}]"#;
const ACCOUNT_COUNT: i64 = 10;
const TRANSFERS: u64 = 60;
const TOTAL_Q: &str = "[:find (sum ?b) . :with ?a :where [?a :acct/balance ?b]]";

/// A snapshot is consistent when it is either before the accounts exist or the balances of
/// the last transfer it contains are exactly those the transfer wrote.
fn check_snapshot(db: &Db) -> Result<u64, String> {
    let t = db.basis_t();
    if t < 2 {
        return Ok(t);
    }
    let total = db.q(TOTAL_Q, &[]).map_err(|e| e.to_string())?;
    let total = match total.to_edn() {
        vev::Edn::Integer(n) => n,
        other => return Err(format!("t={t}: total {other}")),
    };
    // Each transfer rewrites two balances to 1000-k-1 and 1000+k+1: the sum stays 1000 per account.
    if total != 1000 * ACCOUNT_COUNT {
        return Err(format!(
            "t={t}: inconsistent snapshot, total balance {total}"
        ));
    }
    Ok(t)
}

fn writer_workload(conn: &Connection) {
    conn.transact_edn(ACCOUNTS).unwrap();
    let accounts: Vec<String> = (0..ACCOUNT_COUNT)
        .map(|i| format!("{{:acct/id {i} :acct/balance 1000}}"))
        .collect();
    conn.transact_edn(&format!("[{}]", accounts.join(" ")))
        .unwrap();
    for i in 0..TRANSFERS {
        // Reset both accounts first so every committed state sums to 1000 per account.
        let from = (i * 7) % ACCOUNT_COUNT as u64;
        let to = (i * 3 + 1) % ACCOUNT_COUNT as u64;
        if from == to {
            continue;
        }
        let k = (i % 50) as i64 + 1;
        conn.transact_edn(&format!(
            "[[:db/add [:acct/id {from}] :acct/balance {}] [:db/add [:acct/id {to}] :acct/balance {}]]",
            1000 - k,
            1000 + k
        ))
        .unwrap();
        conn.transact_edn(&format!(
            "[[:db/add [:acct/id {from}] :acct/balance 1000] [:db/add [:acct/id {to}] :acct/balance 1000]]"
        ))
        .unwrap();
    }
}

/// The reader child: follow the file read-only until it sees `VEV_READER_UNTIL`, checking
/// every snapshot; print `saw T` for the last one. Run by the readers test on itself, as
/// `crash_child` is.
fn reader_child(path: &str) {
    let until: u64 = std::env::var("VEV_READER_UNTIL").unwrap().parse().unwrap();
    let started = Instant::now();
    let conn = loop {
        match Connection::open_with(path, &OpenOptions::read_only()) {
            Ok(c) => break c,
            Err(_) if started.elapsed() < Duration::from_secs(30) => {
                std::thread::sleep(Duration::from_millis(5))
            }
            Err(e) => panic!("reader open: {e}"),
        }
    };
    let mut seen = 0;
    while started.elapsed() < Duration::from_secs(60) {
        let db = conn.db();
        let t = check_snapshot(&db).unwrap();
        assert!(t >= seen, "time went backwards: {t} after {seen}");
        seen = t;
        if t >= until {
            break;
        }
    }
    println!("saw {seen}");
}

#[test]
fn readers_in_threads_and_another_process_see_consistent_snapshots() {
    if let Ok(path) = std::env::var("VEV_READER_CHILD") {
        return reader_child(&path);
    }
    let dir = TempDir::new("readers");
    let path = dir.file("bank.vev");
    // Count the writer's transactions with an in-memory dry run.
    let dry = Connection::open_in_memory();
    writer_workload(&dry);
    let final_t = dry.db().basis_t();
    let conn = reopen(&path);
    let mut proc = child(
        "readers_in_threads_and_another_process_see_consistent_snapshots",
        "VEV_READER_CHILD",
        &path,
    )
    .env("VEV_READER_UNTIL", final_t.to_string())
    .spawn()
    .unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut threads = Vec::new();
    for k in 0..3 {
        let reader = if k == 0 {
            conn.clone()
        } else {
            Connection::open_with(&path, &OpenOptions::read_only()).unwrap()
        };
        let stop = stop.clone();
        threads.push(std::thread::spawn(move || {
            let mut seen = 0;
            let mut snapshots = 0;
            while !stop.load(std::sync::atomic::Ordering::SeqCst) || seen < final_t {
                let db = reader.db();
                let t = check_snapshot(&db).unwrap();
                assert!(t >= seen);
                seen = t;
                snapshots += 1;
            }
            (seen, snapshots)
        }));
    }
    writer_workload(&conn);
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    for th in threads {
        let (seen, snapshots) = th.join().unwrap();
        assert_eq!(seen, final_t);
        assert!(snapshots > 1);
    }
    let out = proc.stdout.take().unwrap();
    let status = proc.wait().unwrap();
    assert!(status.success(), "the reader process failed");
    let line = BufReader::new(out)
        .lines()
        .map_while(Result::ok)
        .find(|l| l.starts_with("saw "));
    assert_eq!(line, Some(format!("saw {final_t}")));
}

// ---- corruption and misuse ---------------------------------------------------------------

fn raw(path: &Path) -> rusqlite::Connection {
    rusqlite::Connection::open(path).unwrap()
}

/// A database of `txs` workload transactions: checkpointed at the end, or with all of them
/// in the log tail.
fn built(dir: &TempDir, name: &str, txs: u64, checkpoint: bool) -> PathBuf {
    let path = dir.file(name);
    let conn = Connection::open_with(
        &path,
        &OpenOptions {
            checkpoint_on_close: false,
            ..OpenOptions::default()
        },
    )
    .unwrap();
    for n in 0..txs {
        conn.transact(&tx_ops(n)).unwrap();
    }
    if checkpoint {
        conn.checkpoint().unwrap();
    }
    path
}

#[test]
fn a_corrupt_segment_is_reported_by_queries_and_verify_never_as_a_wrong_answer() {
    let dir = TempDir::new("corrupt-seg");
    let path = built(&dir, "db.vev", 120, true);
    {
        let c = raw(&path);
        let (id, mut payload): (i64, Vec<u8>) = c
            .query_row(
                "SELECT id, payload FROM vev_segment ORDER BY length(payload) DESC LIMIT 1",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        let mid = payload.len() / 2;
        payload[mid] ^= 0x5a;
        c.execute(
            "UPDATE vev_segment SET payload = ?1 WHERE id = ?2",
            rusqlite::params![payload, id],
        )
        .unwrap();
    }
    let conn = reopen(&path);
    let e = conn.verify().unwrap_err();
    assert_eq!(e.code(), "storage/corruption", "{e}");
    assert!(e.to_string().contains("segment"), "{e}");
    drop(conn);
    // With every segment corrupt, any query that reads the indexes fails rather than answering.
    {
        let c = raw(&path);
        c.execute(
            "UPDATE vev_segment SET payload = substr(payload, 2) || x'00'",
            [],
        )
        .unwrap();
    }
    let conn = reopen(&path);
    let mut failures = 0;
    for q in [
        "[:find (count ?e) . :where [?e :c/name]]",
        "[:find (count ?v) . :where [_ :c/tag ?v]]",
        "[:find (count ?e) . :where [?e :c/next ?x]]",
        "[:find (count ?tx) . :where [?tx :audit/by]]",
    ] {
        if let Err(e) = conn.db().q(q, &[]) {
            assert_eq!(e.code(), "storage/corruption", "{e}");
            failures += 1;
        }
    }
    assert_eq!(failures, 4, "a query answered from corrupt segments");
    let e = conn.transact(&tx_ops(120)).unwrap_err();
    assert_eq!(e.code(), "storage/corruption");
}

#[test]
fn a_corrupt_log_row_or_root_fails_the_open_with_its_name() {
    let dir = TempDir::new("corrupt-log");
    let path = built(&dir, "log.vev", 30, false);
    raw(&path)
        .execute(
            "UPDATE vev_log SET record = substr(record, 1, length(record) - 7) WHERE t = 17",
            [],
        )
        .unwrap();
    let e = open_waiting(&path).unwrap_err();
    assert_eq!(e.code(), "storage/corruption");
    assert!(e.to_string().contains("log row t=17"), "{e}");

    // Before the root, a bad log row is found by verify (open reads only the tail).
    let path = built(&dir, "old.vev", 30, true);
    raw(&path)
        .execute(
            "UPDATE vev_log SET record = record || x'00' WHERE t = 5",
            [],
        )
        .unwrap();
    let conn = reopen(&path);
    let e = conn.verify().unwrap_err();
    assert_eq!(e.code(), "storage/corruption");
    assert!(e.to_string().contains("log row t=5"), "{e}");
    drop(conn);

    let path = built(&dir, "gap.vev", 30, false);
    raw(&path)
        .execute("DELETE FROM vev_log WHERE t = 9", [])
        .unwrap();
    let e = open_waiting(&path).unwrap_err();
    assert_eq!(e.code(), "storage/corruption");
    assert!(e.to_string().contains("gap"), "{e}");

    let path = built(&dir, "root.vev", 30, true);
    raw(&path)
        .execute("UPDATE vev_root SET record = zeroblob(40)", [])
        .unwrap();
    let e = open_waiting(&path).unwrap_err();
    assert_eq!(e.code(), "storage/corruption");
    assert!(e.to_string().contains("root record"), "{e}");
}

#[test]
fn a_truncated_file_is_corrupt_not_a_panic() {
    let dir = TempDir::new("truncated");
    let path = built(&dir, "t.vev", 200, true);
    // Fold the WAL into the main file, then cut the file.
    raw(&path)
        .execute_batch("PRAGMA wal_checkpoint(TRUNCATE);")
        .unwrap();
    let len = std::fs::metadata(&path).unwrap().len();
    let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    f.set_len(len / 2).unwrap();
    drop(f);
    let Err(e) = open_waiting(&path) else {
        panic!("a truncated file opened");
    };
    assert_eq!(e.code(), "storage/truncated", "{e}");
    assert!(e.to_string().contains(&format!("{} bytes", len / 2)), "{e}");
}

#[test]
fn format_version_identity_locks_and_read_only() {
    let dir = TempDir::new("format");
    let path = built(&dir, "v.vev", 3, false);
    raw(&path)
        .execute_batch("PRAGMA user_version = 99;")
        .unwrap();
    let e = open_waiting(&path).unwrap_err();
    assert_eq!(e.code(), "storage/format-version");
    assert!(e.to_string().contains("99"), "{e}");

    let other = dir.file("other.sqlite");
    raw(&other)
        .execute_batch("CREATE TABLE t (x); PRAGMA application_id = 7;")
        .unwrap();
    assert_eq!(open_waiting(&other).unwrap_err().code(), "storage/not-vev");
    let text = dir.file("text.vev");
    std::fs::write(&text, b"this is not a database at all, just some text....................................................................").unwrap();
    let e = open_waiting(&text).unwrap_err();
    assert_eq!(e.code(), "storage/not-vev", "{e}");
    let e = Connection::open_with(&text, &OpenOptions::read_only()).unwrap_err();
    assert_eq!(e.code(), "storage/not-vev", "{e}");
    let e = open_waiting(&dir.0).unwrap_err();
    assert_eq!(e.code(), "storage/is-directory", "{e}");

    let path = built(&dir, "lock.vev", 3, false);
    let writer = reopen(&path);
    let e = Connection::open(&path).unwrap_err();
    assert_eq!(e.code(), "storage/locked");
    let waited = Connection::open_with(
        &path,
        &OpenOptions {
            lock: vev::LockMode::Wait(Duration::from_millis(50)),
            ..OpenOptions::default()
        },
    )
    .unwrap_err();
    assert_eq!(waited.code(), "storage/locked");
    // A waiting writer gets the lock once the first one is gone.
    let handle = {
        let path = path.clone();
        std::thread::spawn(move || {
            Connection::open_with(
                &path,
                &OpenOptions {
                    lock: vev::LockMode::Wait(Duration::from_secs(10)),
                    ..OpenOptions::default()
                },
            )
            .map(|c| c.db().basis_t())
        })
    };
    std::thread::sleep(Duration::from_millis(50));
    drop(writer);
    assert_eq!(handle.join().unwrap().unwrap(), 3);

    let reader = Connection::open_with(&path, &OpenOptions::read_only()).unwrap();
    assert_eq!(
        reader.transact(&tx_ops(3)).unwrap_err().code(),
        "storage/read-only"
    );
    let missing =
        Connection::open_with(dir.file("none.vev"), &OpenOptions::read_only()).unwrap_err();
    assert_eq!(missing.code(), "storage/io");
}

#[test]
fn bulk_load_reports_progress_and_reopens_equal() {
    let dir = TempDir::new("bulk");
    let path = dir.file("bulk.vev");
    let conn = Connection::open_with(
        &path,
        &OpenOptions {
            bulk_batch_datoms: 300,
            ..OpenOptions::default()
        },
    )
    .unwrap();
    let mut calls = Vec::new();
    let done = conn
        .bulk_load((0..80).map(tx_ops), &mut |p| calls.push(p.clone()))
        .unwrap();
    assert_eq!(done.txs, 80);
    assert!(calls.len() > 2, "{} progress calls", calls.len());
    assert!(calls.windows(2).all(|w| w[0].datoms < w[1].datoms));
    drop(conn);
    let conn = reopen(&path);
    assert_same(&conn.db(), &memory_oracle(80), "bulk");
    conn.verify().unwrap();
}

/// With a subscriber, a bulk load hands it every transaction's report in order (and takes
/// the path that builds each report, not `Bulk`); the database is the same either way.
#[test]
fn a_bulk_load_with_a_subscriber_reports_every_transaction() {
    let dir = TempDir::new("bulk-feed");
    let path = dir.file("bulk.vev");
    let conn = Connection::open(&path).unwrap();
    let feed = conn.subscribe();
    let first_t = conn.db().basis_t() + 1;
    let done = conn.bulk_load((0..80).map(tx_ops), &mut |_| {}).unwrap();
    assert_eq!(done.txs, 80);
    let reports: Vec<_> = feed.try_iter().collect();
    assert_eq!(reports.len(), 80);
    for (i, r) in reports.iter().enumerate() {
        assert_eq!(r.db_after.basis_t(), first_t + i as u64);
        assert_eq!(r.db_before.basis_t() + 1, r.db_after.basis_t());
    }
    assert_same(&conn.db(), &memory_oracle(80), "bulk with a subscriber");
    drop(conn);
    assert_same(&reopen(&path).db(), &memory_oracle(80), "reopened");
}

#[test]
fn a_failed_bulk_load_keeps_the_batches_it_committed() {
    let dir = TempDir::new("bulk-fail");
    let path = dir.file("bulk.vev");
    let conn = Connection::open_with(
        &path,
        &OpenOptions {
            bulk_batch_datoms: 100,
            ..OpenOptions::default()
        },
    )
    .unwrap();
    let bad: Vec<TxOp> = vev::parse_tx("[[:db/add 1 :no/such-attribute 1]]")
        .unwrap()
        .into_iter()
        .map(|s| s.op)
        .collect();
    let txs = (0..40)
        .map(tx_ops)
        .chain(std::iter::once(bad))
        .chain((40..50).map(tx_ops));
    let mut reported = 0;
    let e = conn.bulk_load(txs, &mut |p| reported = p.txs).unwrap_err();
    assert_eq!(e.code(), "tx/unknown-attribute", "{e}");
    let live = conn.db();
    assert!(
        live.basis_t() >= reported,
        "{} < {reported}",
        live.basis_t()
    );
    assert!(live.basis_t() <= 40);
    let memory = memory_oracle(live.basis_t());
    assert_same(&live, &memory, "after a failed bulk load");
    drop(conn);
    let reopened = reopen(&path);
    assert_same(&reopened.db(), &memory, "reopened after a failed bulk load");
    // The connection goes on from there.
    let conn = reopened;
    let next = conn.db().basis_t();
    conn.transact(&tx_ops(next)).unwrap();
}

#[test]
fn a_large_database_checkpoints_on_two_threads_and_reopens_equal() {
    // Enough datoms that the checkpoint encodes its trees on two threads and one transaction
    // applies its changes on two threads.
    let dir = TempDir::new("large");
    let path = dir.file("large.vev");
    let conn = Connection::open(&path).unwrap();
    conn.transact(&tx_ops(0)).unwrap();
    let big: String = (0..1600)
        .map(|i| {
            format!(
                "{{:c/n {} :c/name \"big{i}\" :c/tag {} :c/tags [:a :b]}}",
                100_000 + i,
                i % 97
            )
        })
        .collect();
    let big_ops: Vec<TxOp> = vev::parse_tx(&format!("[{big}]"))
        .unwrap()
        .into_iter()
        .map(|s| s.op)
        .collect();
    let report = conn.transact(&big_ops).unwrap();
    assert!(report.tx_data.len() > 4096);
    conn.checkpoint().unwrap();
    let live = conn.db();
    drop(conn);
    let memory = Connection::open_in_memory();
    memory.transact(&tx_ops(0)).unwrap();
    memory.transact(&big_ops).unwrap();
    let reopened = reopen(&path);
    // Transaction instants differ (the clock), so compare everything but the instants.
    type Stripped = Vec<Vec<(u64, u64, String, u64, bool)>>;
    let strip = |db: &Db| -> Stripped {
        all_datoms(db)
            .unwrap()
            .into_iter()
            .map(|ds| {
                ds.into_iter()
                    .filter(|d| d.a != vev::schema::sys::TX_INSTANT)
                    .map(|d| (d.e, d.a, d.v.to_string(), d.tx, d.added))
                    .collect()
            })
            .collect()
    };
    assert!(strip(&reopened.db()) == strip(&memory.db()));
    assert!(strip(&live) == strip(&memory.db()));
    let report = reopened.verify().unwrap().unwrap();
    // Above the two-thread bound (20,000 datoms in the trees).
    assert!(report.index_datoms > 20_000, "{report:?}");
}

#[test]
fn checkpoints_write_only_what_changed_and_background_ones_are_adopted() {
    let dir = TempDir::new("incremental");
    let path = dir.file("inc.vev");
    let conn = Connection::open_with(&path, &small_checkpoints()).unwrap();
    for n in 0..80 {
        conn.transact(&tx_ops(n)).unwrap();
        // Background checkpoints run and are adopted along the way: the live database stays
        // equal to the engine's.
        if n % 20 == 19 {
            assert_same(
                &conn.db(),
                &memory_oracle(n + 1),
                &format!("live after tx {n}"),
            );
        }
    }
    conn.checkpoint().unwrap();
    let segments = |path: &Path| -> i64 {
        raw(path)
            .query_row("SELECT count(*) FROM vev_segment", [], |r| r.get(0))
            .unwrap()
    };
    let before = segments(&path);
    conn.checkpoint().unwrap();
    assert_eq!(
        segments(&path),
        before,
        "a checkpoint with nothing new wrote segments"
    );
    // Segments written after the newest one so far.
    let newer = |path: &Path, than: i64| -> i64 {
        raw(path)
            .query_row(
                "SELECT count(*) FROM vev_segment WHERE id > ?1",
                [than],
                |r| r.get(0),
            )
            .unwrap()
    };
    let newest = |path: &Path| -> i64 {
        raw(path)
            .query_row("SELECT max(id) FROM vev_segment", [], |r| r.get(0))
            .unwrap()
    };
    // A small transaction's changes may wait in the trees' pending lists, which the root
    // holds: its checkpoint writes few segments or none.
    let last = newest(&path);
    conn.transact(&tx_ops(80)).unwrap();
    conn.checkpoint().unwrap();
    let added = newer(&path, last);
    assert!(
        added <= 40,
        "one small transaction rewrote {added} segments"
    );
    // Once a transaction fills a pending list, the list goes to the nodes: that checkpoint
    // rewrites the segments of the nodes it changed, not the others.
    let mut n = 81;
    let added = loop {
        let last = newest(&path);
        conn.transact(&tx_ops(n)).unwrap();
        conn.checkpoint().unwrap();
        n += 1;
        let added = newer(&path, last);
        if added > 0 || n == 400 {
            break added;
        }
    };
    assert!(
        added > 0 && added <= 40,
        "transaction {} rewrote {added} of {} segments",
        n - 1,
        segments(&path)
    );
    assert_same(&conn.db(), &memory_oracle(n), "after the last checkpoint");
    drop(conn);
    assert_same(&reopen(&path).db(), &memory_oracle(n), "reopened");
}

#[test]
fn a_reader_follows_the_writer_across_checkpoints() {
    let dir = TempDir::new("follow");
    let path = dir.file("follow.vev");
    // The default grace: the reader loads segments while the writer's background
    // checkpoints run, and with none a checkpoint may delete a segment under it.
    let writer = Connection::open_with(
        &path,
        &OpenOptions {
            gc_grace: OpenOptions::default().gc_grace,
            ..small_checkpoints()
        },
    )
    .unwrap();
    for n in 0..5 {
        writer.transact(&tx_ops(n)).unwrap();
    }
    let reader = Connection::open_with(&path, &OpenOptions::read_only()).unwrap();
    for n in 5..90 {
        writer.transact(&tx_ops(n)).unwrap();
        if n % 15 == 0 {
            assert_same(
                &reader.db(),
                &memory_oracle(n + 1),
                &format!("reader after tx {n}"),
            );
        }
    }
    writer.checkpoint().unwrap();
    let db = reader.db();
    assert_same(&db, &memory_oracle(90), "reader after the last checkpoint");
    // It adopted a checkpoint's root: its indexes read through segments.
    assert!(db.segment_cache().is_some_and(|c| c.loads() > 0));
}

/// Segment rows in the file.
fn segment_rows(path: &Path) -> usize {
    raw(path)
        .query_row("SELECT count(*) FROM vev_segment", [], |r| {
            r.get::<_, i64>(0)
        })
        .unwrap() as usize
}

/// The segments the latest checkpoint's root names (right after `checkpoint()`, the
/// connection's database is that checkpoint's).
fn named_segments(conn: &Connection) -> usize {
    let mut ids = conn.db().segment_ids();
    ids.sort_unstable();
    ids.dedup();
    ids.len()
}

fn manual_checkpoints(gc_grace: Option<Duration>) -> OpenOptions {
    OpenOptions {
        checkpoint_datoms: usize::MAX,
        checkpoint_on_close: false,
        gc_grace,
        ..OpenOptions::default()
    }
}

#[test]
fn checkpoints_collect_the_segments_no_root_names() {
    let dir = TempDir::new("gc");
    let mut rows = Vec::new();
    let mut garbage = 0;
    for grace in [Some(Duration::ZERO), None] {
        let path = dir.file(&format!("gc-{}.vev", grace.is_some()));
        let conn = Connection::open_with(&path, &manual_checkpoints(grace)).unwrap();
        for n in 0..200 {
            conn.transact(&tx_ops(n)).unwrap();
            if n % 20 == 19 {
                conn.checkpoint().unwrap();
                let report = conn.verify().unwrap().unwrap();
                if grace.is_some() {
                    // Collected at once: the file holds exactly what the root names.
                    assert_eq!(segment_rows(&path), named_segments(&conn), "after tx {n}");
                    assert_eq!(report.garbage_segments, 0);
                } else {
                    // Kept: the garbage is recorded, the rest is what the root names.
                    assert_eq!(
                        segment_rows(&path),
                        named_segments(&conn) + report.garbage_segments as usize,
                        "after tx {n}"
                    );
                    garbage = report.garbage_segments as usize;
                }
            }
        }
        rows.push(segment_rows(&path));
        drop(conn);
        let conn = reopen(&path);
        assert_same(&conn.db(), &memory_oracle(200), "reopened after collecting");
        conn.verify().unwrap();
    }
    // Both files name the same segments' worth of data; the one that kept its garbage holds
    // that garbage on top.
    let (collected, kept) = (rows[0], rows[1]);
    assert!(
        garbage > 0 && collected + garbage == kept,
        "ten checkpoints left {collected} segments with collection, {kept} without, \
         {garbage} of them garbage"
    );
}

/// Transactions 0..40, a checkpoint, 40..80 and another checkpoint (collecting at once),
/// with `plan`'s fault; whether the second checkpoint failed.
fn two_checkpoints(path: &Path, plan: std::sync::Arc<FaultPlan>) -> (Connection, bool) {
    let conn = Connection::open_with(
        path,
        &OpenOptions {
            faults: Some(plan),
            ..manual_checkpoints(Some(Duration::ZERO))
        },
    )
    .unwrap();
    for n in 0..40 {
        conn.transact(&tx_ops(n)).unwrap();
    }
    conn.checkpoint().unwrap();
    for n in 40..80 {
        conn.transact(&tx_ops(n)).unwrap();
    }
    let failed = conn.checkpoint().is_err();
    (conn, failed)
}

#[test]
fn segments_of_a_checkpoint_that_failed_are_collected_by_the_next() {
    let dir = TempDir::new("gc-orphans");
    // A dry run counts the storage operations: the second checkpoint ends with its root
    // write and that write's sync.
    let plan = FaultPlan::new(u64::MAX, false);
    let (conn, _) = two_checkpoints(&dir.file("dry.vev"), plan.clone());
    drop(conn);
    let root_write = plan.seen() - 1;
    let path = dir.file("orphans.vev");
    let (conn, failed) = two_checkpoints(&path, FaultPlan::new(root_write, false));
    assert!(failed, "the second checkpoint's root write was to fail");
    // Its segments are in the file, and no root names them.
    let orphans = segment_rows(&path) - named_segments(&conn);
    assert!(orphans > 0, "the failed checkpoint wrote no segments");
    conn.transact(&tx_ops(80)).unwrap();
    conn.checkpoint().unwrap();
    assert_eq!(segment_rows(&path), named_segments(&conn));
    drop(conn);
    assert_same(&reopen(&path).db(), &memory_oracle(81), "reopened");
}

#[test]
fn an_old_database_keeps_its_segments_for_the_grace_period() {
    let dir = TempDir::new("gc-grace");
    for grace in [Duration::from_secs(3600), Duration::ZERO] {
        let path = dir.file(&format!("grace-{}.vev", grace.as_secs()));
        let writer = Connection::open_with(&path, &manual_checkpoints(Some(grace))).unwrap();
        for n in 0..60 {
            writer.transact(&tx_ops(n)).unwrap();
        }
        writer.checkpoint().unwrap();
        // A reader whose cache holds almost nothing, so every walk reads segments.
        let reader = Connection::open_with(
            &path,
            &OpenOptions {
                cache_datoms_max: 1,
                ..OpenOptions::read_only()
            },
        )
        .unwrap();
        let old = reader.db();
        for n in 60..160 {
            writer.transact(&tx_ops(n)).unwrap();
            if n % 50 == 9 {
                writer.checkpoint().unwrap();
            }
        }
        writer.checkpoint().unwrap();
        let datoms = all_datoms(&old);
        if grace.is_zero() {
            // Gone: a typed error naming the segment, never a wrong answer.
            let f = datoms.expect_err("the old root's segments were collected");
            assert_eq!(f.code(), "storage/corruption", "{f}");
            assert!(f.to_string().contains("missing"), "{f}");
        } else {
            assert_eq!(
                datoms.unwrap(),
                all_datoms(&memory_oracle(60)).unwrap(),
                "the old database"
            );
            // And the reader's next database is the latest.
            assert_same(&reader.db(), &memory_oracle(160), "the reader, synced");
        }
    }
}

#[test]
fn a_checkpoint_that_landed_but_reported_a_failure_loses_nothing_to_collection() {
    let dir = TempDir::new("gc-landed");
    let plan = FaultPlan::new(u64::MAX, false);
    let (conn, _) = two_checkpoints(&dir.file("dry.vev"), plan.clone());
    drop(conn);
    // The second checkpoint's last operation is its root's sync: it commits, then fails.
    let path = dir.file("landed.vev");
    let (conn, failed) = two_checkpoints(&path, FaultPlan::new(plan.seen(), true));
    assert!(failed, "the root's sync was to report a failure");
    for n in 80..120 {
        conn.transact(&tx_ops(n)).unwrap();
    }
    conn.checkpoint().unwrap();
    assert_same(&conn.db(), &memory_oracle(120), "after the next checkpoint");
    assert_eq!(segment_rows(&path), named_segments(&conn));
    drop(conn);
    let conn = reopen(&path);
    assert_same(&conn.db(), &memory_oracle(120), "reopened");
    conn.verify().unwrap();
}

/// The valid length of a write-ahead log: its header and the frames before the first whose
/// page number is zero (what the zeros a writer's open appends look like).
fn wal_frames_end(wal: &[u8], page_size: usize) -> usize {
    let frame = 24 + page_size;
    let mut end = 32;
    while end + frame <= wal.len() && wal[end..end + 4] != [0, 0, 0, 0] {
        end += frame;
    }
    end
}

#[test]
fn a_writer_preallocates_the_write_ahead_log_and_keeps_the_frames_in_it() {
    let dir = TempDir::new("wal");
    let path = dir.file("a.vev");
    let wal_of = |p: &Path| {
        let mut w = p.as_os_str().to_owned();
        w.push("-wal");
        PathBuf::from(w)
    };
    let conn = Connection::open(&path).unwrap();
    // As long as SQLite fills it before it wraps: 1,000 frames of 4 KiB pages.
    let preallocated = std::fs::metadata(wal_of(&path)).unwrap().len();
    assert!(preallocated >= 32 + 1000 * (24 + 4096), "{preallocated}");
    for n in 0..25 {
        conn.transact(&tx_ops(n)).unwrap();
    }
    // What a writer that crashed before this change left: the committed frames and nothing
    // after them (a copy taken while the writer holds the file, so nothing is checkpointed).
    let copy = dir.file("b.vev");
    std::fs::copy(&path, &copy).unwrap();
    let wal = std::fs::read(wal_of(&path)).unwrap();
    let end = wal_frames_end(&wal, 4096);
    assert!(end > 32 + 3 * (24 + 4096), "the log holds frames: {end}");
    std::fs::write(wal_of(&copy), &wal[..end]).unwrap();
    drop(conn);
    let reopened = reopen(&copy);
    assert!(std::fs::metadata(wal_of(&copy)).unwrap().len() >= preallocated);
    assert_same(
        &reopened.db(),
        &memory_oracle(25),
        "after extending a short log",
    );
    reopened.transact(&tx_ops(25)).unwrap();
    drop(reopened);
    assert_same(
        &reopen(&copy).db(),
        &memory_oracle(26),
        "and writing after it",
    );
}
