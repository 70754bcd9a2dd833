//! A transaction block with a large statement (what `pgbench -i` sends: a `COPY` of many
//! rows between `BEGIN` and `COMMIT`). Its view is the block's operations applied at once,
//! which COMMIT commits as it is when nothing was committed in between, and applies again
//! when something was: both ways give every row, the block's later writes included, and a
//! key another client took in between fails the COMMIT whole.

mod common;

use common::{connect, count, exec, with_server};

/// More rows than a view is rebuilt for (`rebuild_view`: 1,000 new operations).
const ROWS: i32 = 1_500;

/// `INSERT INTO big` of keys `from..from + n` with values `k * 2`.
fn insert_rows(from: i32, n: i32) -> String {
    let rows: Vec<String> = (from..from + n)
        .map(|k| format!("({k}, {})", k * 2))
        .collect();
    format!("INSERT INTO big VALUES {}", rows.join(", "))
}

async fn setup(c: &tokio_postgres::Client) {
    exec(c, "CREATE TABLE big (k int PRIMARY KEY, v int)").await;
    exec(c, "INSERT INTO big VALUES (-1, 0)").await;
}

#[test]
fn a_large_block_commits_every_row_and_its_earlier_writes() {
    with_server(|addr| async move {
        let (c, _conn) = connect(addr).await;
        setup(&c).await;
        exec(&c, "BEGIN").await;
        exec(&c, "INSERT INTO big VALUES (-2, 0)").await;
        exec(&c, "UPDATE big SET v = v + 1 WHERE k < 0").await;
        exec(&c, "DELETE FROM big WHERE k = -1").await;
        // The large statement last: COMMIT finds the view is all of the block at once.
        exec(&c, &insert_rows(0, ROWS)).await;
        assert_eq!(
            count(&c, "SELECT count(*) FROM big").await,
            1 + i64::from(ROWS)
        );
        exec(&c, "COMMIT").await;
        let (other, _conn) = connect(addr).await;
        assert_eq!(
            count(&other, "SELECT count(*) FROM big").await,
            1 + i64::from(ROWS)
        );
        let sum: i64 = (0..ROWS).map(|k| i64::from(k) * 2).sum();
        assert_eq!(count(&other, "SELECT sum(v) FROM big").await, sum + 1);
        assert_eq!(
            count(&other, "SELECT count(*) FROM big WHERE k = -1").await,
            0
        );
    });
}

#[test]
fn a_large_block_keeps_the_writes_after_its_large_statement() {
    with_server(|addr| async move {
        let (c, _conn) = connect(addr).await;
        setup(&c).await;
        exec(&c, "BEGIN").await;
        exec(&c, &insert_rows(0, ROWS)).await;
        exec(&c, "UPDATE big SET v = v + 1 WHERE k < 10").await;
        exec(&c, "DELETE FROM big WHERE k = 20").await;
        exec(&c, "COMMIT").await;
        assert_eq!(count(&c, "SELECT count(*) FROM big").await, i64::from(ROWS));
        let sum: i64 = (0..ROWS)
            .filter(|k| *k != 20)
            .map(|k| i64::from(k) * 2)
            .sum();
        // `UPDATE ... WHERE k < 10` matched -1 and 0..9.
        assert_eq!(count(&c, "SELECT sum(v) FROM big").await, sum + 11);
    });
}

/// Two clients on a server with table `big`: the first has a block open with the large
/// INSERT in it; the second has then run `other_sql` (autocommit).
async fn large_block_then(
    addr: common::Addr,
    other_sql: &str,
) -> [(tokio_postgres::Client, tokio::task::JoinHandle<()>); 2] {
    let (c, conn) = connect(addr).await;
    let (other, conn2) = connect(addr).await;
    setup(&c).await;
    exec(&c, "BEGIN").await;
    exec(&c, &insert_rows(0, ROWS)).await;
    exec(&other, other_sql).await;
    [(c, conn), (other, conn2)]
}

#[test]
fn a_commit_in_between_is_kept_with_the_large_block() {
    with_server(|addr| async move {
        let [(c, _conn), (other, _conn2)] =
            large_block_then(addr, "INSERT INTO big VALUES (100000, 7)").await;
        exec(&c, "UPDATE big SET v = 0 WHERE k = 100000").await;
        exec(&c, "COMMIT").await;
        assert_eq!(
            count(&other, "SELECT count(*) FROM big").await,
            2 + i64::from(ROWS)
        );
        // READ COMMITTED: the block's UPDATE saw the other client's row.
        let updated = "SELECT count(*) FROM big WHERE k = 100000 AND v = 0";
        assert_eq!(count(&other, updated).await, 1);
    });
}

#[test]
fn a_key_taken_in_between_fails_the_large_block_whole() {
    with_server(|addr| async move {
        let [(c, _conn), (other, _conn2)] =
            large_block_then(addr, "INSERT INTO big VALUES (700, 1)").await;
        let err = c.batch_execute("COMMIT").await.unwrap_err();
        assert_eq!(
            err.code().map(|s| s.code()),
            Some("23505"),
            "COMMIT after another client took key 700: {err:?}"
        );
        assert_eq!(count(&other, "SELECT count(*) FROM big").await, 2);
    });
}
