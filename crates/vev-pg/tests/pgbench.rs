//! Stock, unmodified pgbench 15 against `vev serve`: the init (simple protocol and COPY),
//! select-only and tpcb-like with prepared statements, no failed transaction, and
//! afterwards tpcb's invariant: every balance is the sum of the history's deltas.

mod common;

use std::collections::BTreeMap;
use std::process::Output;
use std::time::{Duration, Instant};

use common::{connect, describe, run, TestServer};

/// pgbench against the server, then `args`.
fn pgbench(server: &TestServer, args: &[&str]) -> Output {
    let port = server.port.to_string();
    let mut all: Vec<&str> = args.to_vec();
    all.extend_from_slice(&["-h", "127.0.0.1", "-p", &port, "-U", "vev", "app"]);
    let started = Instant::now();
    let out = run("pgbench", &all, Duration::from_secs(60));
    eprintln!("pgbench {args:?}: {:.1?}", started.elapsed());
    out
}

/// The number after `label` on its line of pgbench's report.
fn reported(out: &Output, label: &str) -> u64 {
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix(label))
        .unwrap_or_else(|| panic!("no {label:?} in pgbench's report: {}", describe(out)));
    let digits: String = line
        .trim_start()
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits
        .parse()
        .unwrap_or_else(|_| panic!("{label:?} is not followed by a number: {}", describe(out)))
}

/// A run's processed and failed transactions, checked: some processed, none failed.
fn check_run(out: &Output) -> u64 {
    assert!(out.status.success(), "{}", describe(out));
    let processed = reported(out, "number of transactions actually processed:");
    let failed = reported(out, "number of failed transactions:");
    assert!(processed > 0, "no transaction processed: {}", describe(out));
    assert_eq!(failed, 0, "failed transactions: {}", describe(out));
    eprintln!("processed {processed}, failed {failed}");
    processed
}

#[test]
fn stock_pgbench_runs_without_failures_and_keeps_the_tpcb_invariant() {
    if !common::on_path("pgbench") {
        eprintln!(
            "SKIPPED: pgbench is not on PATH (install postgresql-client-15 to run this test)"
        );
        return;
    }
    let server = TestServer::start();
    let init = pgbench(&server, &["-i", "-I", "dtgp", "--no-vacuum", "-s", "1"]);
    assert!(init.status.success(), "{}", describe(&init));
    let log = String::from_utf8_lossy(&init.stderr);
    assert!(log.contains("done in"), "{}", describe(&init));

    check_run(&pgbench(
        &server,
        &["-S", "-M", "prepared", "-c", "2", "-j", "2", "-T", "3"],
    ));
    let tpcb = check_run(&pgbench(
        &server,
        &[
            "-M",
            "prepared",
            "-c",
            "4",
            "-j",
            "2",
            "-T",
            "3",
            "--max-tries=10",
        ],
    ));

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(check_balances(server.addr(), tpcb));
    server.stop();
}

/// Sums of a two-column `key, value` query, keyed.
async fn sums(c: &tokio_postgres::Client, sql: &str) -> BTreeMap<i32, i64> {
    c.query(sql, &[])
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e:?}"))
        .iter()
        .map(|r| (r.get::<_, i32>(0), r.get::<_, i64>(1)))
        .filter(|(_, v)| *v != 0)
        .collect()
}

/// Each account's, teller's and branch's balance is the sum of its history's deltas (so
/// the totals agree too): no update lost, none applied twice, none half-committed.
async fn check_balances(addr: common::Addr, tpcb: u64) {
    let (c, _conn) = connect(addr).await;
    let mut rows = Vec::new();
    for table in ["accounts", "tellers", "branches", "history"] {
        let sql = format!("SELECT count(*) FROM pgbench_{table}");
        let n: i64 = c
            .query_one(&sql, &[])
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e:?}"))
            .get(0);
        rows.push(n);
    }
    assert_eq!(
        rows[..3],
        [100_000, 10, 1],
        "scale 1's accounts, tellers, branches"
    );
    let history = rows[3];
    // Each committed tpcb-like transaction inserted one history row; pgbench counts it
    // once its COMMIT returned (a retried one once, a failed one not at all).
    assert_eq!(
        history as u64, tpcb,
        "one history row per processed tpcb-like transaction"
    );
    let mut totals = Vec::new();
    for (what, balances, deltas) in [
        (
            "account",
            "SELECT aid, abalance::bigint FROM pgbench_accounts WHERE abalance <> 0",
            "SELECT aid, sum(delta) FROM pgbench_history GROUP BY aid",
        ),
        (
            "teller",
            "SELECT tid, tbalance::bigint FROM pgbench_tellers",
            "SELECT tid, sum(delta) FROM pgbench_history GROUP BY tid",
        ),
        (
            "branch",
            "SELECT bid, bbalance::bigint FROM pgbench_branches",
            "SELECT bid, sum(delta) FROM pgbench_history GROUP BY bid",
        ),
    ] {
        let b = sums(&c, balances).await;
        let d = sums(&c, deltas).await;
        assert!(!b.is_empty(), "some {what} balance changed");
        assert_eq!(b, d, "each {what}'s balance is the sum of its deltas");
        totals.push((what, b.values().sum::<i64>()));
    }
    let delta: i64 = c
        .query_one("SELECT sum(delta) FROM pgbench_history", &[])
        .await
        .unwrap()
        .get(0);
    for (what, total) in totals {
        assert_eq!(total, delta, "sum of {what} balances = sum(history.delta)");
    }
}
