//! Read-only connections following the writer on PostgreSQL storage (`LISTEN/NOTIFY`, with
//! polling as the fallback; `docs/design/follow.md`), on a throwaway PostgreSQL 15 the test
//! starts and stops (`TempServer`):
//!
//! - a reader in another process sees each acknowledged transaction through `db()` alone
//!   (no `sync`) well within the bound, with a polling interval so long that only a
//!   notification can explain it;
//! - `sync()` includes every transaction acknowledged before it was called, with or without
//!   a follower, across checkpoints;
//! - a listen connection killed on the server (`pg_terminate_backend`) is made again and
//!   the reader goes on following; one that cannot be made again (the reader's role is at
//!   its connection limit) leaves the reader following by polling.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use vev::{Connection, Db, OpenOptions};
use vev_postgres::testing::{self, TempServer};

const SCHEMA: &str =
    r#"[{:db/ident :k/n :db/valueType :db.type/long :db/cardinality :db.cardinality/one}]"#;

fn tx_n(conn: &Connection, n: i64) -> u64 {
    conn.transact_edn(&format!("[{{:k/n {n}}}]"))
        .unwrap()
        .db_after
        .basis_t()
}

/// Every `:k/n` value, sorted.
fn ns(db: &Db) -> Vec<i64> {
    let r = db.q("[:find [?n ...] :where [_ :k/n ?n]]", &[]).unwrap();
    let text = r.to_edn().to_string();
    let mut out: Vec<i64> = text
        .split(|c: char| !(c.is_ascii_digit() || c == '-'))
        .filter_map(|w| w.parse().ok())
        .collect();
    out.sort_unstable();
    out
}

fn reader_opts(interval: Duration) -> OpenOptions {
    OpenOptions {
        follow_interval: Some(interval),
        ..OpenOptions::read_only()
    }
}

/// Wait until `reader.db()` (no sync) reaches basis-t `t`; how long that took.
fn seen_within(reader: &Connection, t: u64, limit: Duration) -> Duration {
    let started = Instant::now();
    loop {
        let seen = reader.db().basis_t();
        if seen >= t {
            return started.elapsed();
        }
        assert!(
            started.elapsed() < limit,
            "the reader is at t={seen}, not t={t}, {limit:?} after the commit"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn listen_backends(admin: &mut postgres::Client) -> i64 {
    admin
        .query_one(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1",
            &[&vev_postgres::LISTEN_APPLICATION],
        )
        .unwrap()
        .get(0)
}

fn wait_for_listen_backends(admin: &mut postgres::Client, n: i64) {
    let started = Instant::now();
    while listen_backends(admin) != n {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "{} listen connections, not {n}",
            listen_backends(admin)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn readers_follow_the_writer() {
    let Some(pg) = testing::for_test("the PostgreSQL follow tests") else {
        return;
    };
    reader_in_another_process_follows_without_sync(&pg);
    sync_includes_every_acknowledged_transaction(&pg);
    killed_listen_connection_is_made_again(&pg);
    reader_polls_when_it_cannot_listen(&pg);
}

/// The child's main, when run by `reader_in_another_process_follows_without_sync`: a
/// reader that prints `t N` whenever `db()` moves, and fails if it ever moves back.
#[test]
fn reader_child() {
    let Ok(url) = std::env::var("VEV_FOLLOW_CHILD_URL") else {
        return;
    };
    let reader = Connection::open_with(&url, &reader_opts(Duration::from_secs(60))).unwrap();
    let mut last = reader.db().basis_t();
    println!("child: t {last}");
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(120) {
        let t = reader.db().basis_t();
        assert!(t >= last, "the reader went back from t={last} to t={t}");
        if t != last {
            println!("child: t {t}");
            std::io::stdout().flush().unwrap();
            last = t;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
}

fn reader_in_another_process_follows_without_sync(pg: &TempServer) {
    let url = pg.create_db("follow_child").unwrap();
    let writer = Connection::open(&url).unwrap();
    writer.transact_edn(SCHEMA).unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "reader_child", "--nocapture", "--test-threads=1"])
        .env("VEV_FOLLOW_CHILD_URL", &url)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = BufReader::new(child.stdout.take().unwrap());
    let (send, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in stdout.lines().map_while(Result::ok) {
            // libtest's own text may begin the line the child's first answer ends.
            if let Some(at) = line.find("child: t ") {
                let t: u64 = line[at + "child: t ".len()..].trim().parse().unwrap();
                if send.send((t, Instant::now())).is_err() {
                    return;
                }
            }
        }
    });
    let next = |what: &str| {
        lines
            .recv_timeout(Duration::from_secs(30))
            .unwrap_or_else(|_| panic!("the child reader says nothing ({what})"))
    };
    let (t0, _) = next("at open");
    assert_eq!(t0, writer.db().basis_t());
    let mut lags = Vec::new();
    for n in 0..30 {
        let t = tx_n(&writer, n);
        let acked = Instant::now();
        // The child's interval is a minute: only a notification brings it here this soon.
        let (seen, at) = next("after a commit");
        assert_eq!(seen, t, "the reader skipped or repeated a transaction");
        lags.push(at.saturating_duration_since(acked));
        std::thread::sleep(Duration::from_millis(5));
    }
    let _ = child.kill();
    let _ = child.wait();
    lags.sort_unstable();
    eprintln!(
        "reader lag behind the writer's acknowledgement, another process: p50 {:?}, max {:?}",
        lags[lags.len() / 2],
        lags[lags.len() - 1]
    );
    assert!(
        lags[lags.len() - 1] < Duration::from_secs(3),
        "lags {lags:?}"
    );
}

fn sync_includes_every_acknowledged_transaction(pg: &TempServer) {
    let url = pg.create_db("follow_sync").unwrap();
    let writer = Connection::open_with(
        &url,
        &OpenOptions {
            checkpoint_datoms: 15,
            ..OpenOptions::default()
        },
    )
    .unwrap();
    writer.transact_edn(SCHEMA).unwrap();
    let following = Connection::open_with(&url, &reader_opts(Duration::from_secs(60))).unwrap();
    let polling = Connection::open_with(
        &url,
        &OpenOptions {
            follow_interval: None,
            ..OpenOptions::read_only()
        },
    )
    .unwrap();
    let mut want = Vec::new();
    for n in 0..40 {
        tx_n(&writer, n);
        want.push(n);
        // Right after the acknowledgement, before any notification could be counted on.
        assert_eq!(ns(&following.sync().unwrap()), want);
        assert_eq!(ns(&polling.db()), want);
        if n % 10 == 0 {
            writer.checkpoint().unwrap();
        }
    }
    // Checkpoints (new roots) are followed too.
    writer.checkpoint().unwrap();
    let t = writer.db().basis_t();
    seen_within(&following, t, Duration::from_secs(10));
    assert_eq!(ns(&following.db()), want);
}

fn killed_listen_connection_is_made_again(pg: &TempServer) {
    let url = pg.create_db("follow_kill").unwrap();
    let mut admin = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let writer = Connection::open(&url).unwrap();
    writer.transact_edn(SCHEMA).unwrap();
    let reader = Connection::open_with(&url, &reader_opts(Duration::from_secs(60))).unwrap();
    wait_for_listen_backends(&mut admin, 1);
    for round in 0..3 {
        let killed: i64 = admin
            .query_one(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
                 WHERE application_name = $1",
                &[&vev_postgres::LISTEN_APPLICATION],
            )
            .unwrap()
            .get(0);
        assert_eq!(killed, 1, "round {round}");
        // Committed while the reader has no listen connection: it is not lost.
        let t = tx_n(&writer, round);
        let lag = seen_within(&reader, t, Duration::from_secs(10));
        eprintln!("round {round}: followed {lag:?} after its listen connection was killed");
        wait_for_listen_backends(&mut admin, 1);
        // And listening again: the next commit comes by notification.
        let t = tx_n(&writer, 100 + round);
        seen_within(&reader, t, Duration::from_secs(10));
    }
    assert_eq!(ns(&reader.db()), vec![0, 1, 2, 100, 101, 102]);
}

fn reader_polls_when_it_cannot_listen(pg: &TempServer) {
    let url = pg.create_db("follow_poll").unwrap();
    let mut admin = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let writer = Connection::open(&url).unwrap();
    writer.transact_edn(SCHEMA).unwrap();
    // A role of its own, so that its connections can be limited (a superuser's cannot).
    admin
        .batch_execute(
            "CREATE ROLE follower LOGIN; GRANT USAGE ON SCHEMA vev TO follower; \
             GRANT SELECT ON ALL TABLES IN SCHEMA vev TO follower",
        )
        .unwrap();
    let reader_url = url.replacen("vev@", "follower@", 1);
    let reader =
        Connection::open_with(&reader_url, &reader_opts(Duration::from_millis(300))).unwrap();
    assert_eq!(reader.sync().unwrap().basis_t(), writer.db().basis_t());
    wait_for_listen_backends(&mut admin, 1);
    // No new connection for the role from now on: its listen connection cannot come back.
    let open: i64 = admin
        .query_one(
            "SELECT count(*) FROM pg_stat_activity WHERE usename = 'follower'",
            &[],
        )
        .unwrap()
        .get(0);
    admin
        .batch_execute(&format!(
            "ALTER ROLE follower CONNECTION LIMIT {}; \
             SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
             WHERE application_name = '{}'",
            open - 1,
            vev_postgres::LISTEN_APPLICATION
        ))
        .unwrap();
    wait_for_listen_backends(&mut admin, 0);
    let mut want = Vec::new();
    for n in 0..5 {
        let t = tx_n(&writer, n);
        want.push(n);
        let lag = seen_within(&reader, t, Duration::from_secs(10));
        eprintln!("followed by polling in {lag:?}");
        assert_eq!(listen_backends(&mut admin), 0, "it cannot listen");
    }
    assert_eq!(ns(&reader.db()), want);
    // Allowed again, it listens again (after its backoff).
    admin
        .batch_execute("ALTER ROLE follower CONNECTION LIMIT -1")
        .unwrap();
    wait_for_listen_backends(&mut admin, 1);
}
