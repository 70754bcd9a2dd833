//! SERIALIZABLE transactions through tokio-postgres: a commit that would break
//! serializability fails with 40001 and is rolled back, so write skew and lost updates cannot
//! happen, and a client that retries on 40001 gets exact results.

mod common;

use common::{connect, count, exec, sqlstate, with_server};
use tokio_postgres::Client;

/// Two doctors on call; each goes off call if the other is still on. Under READ COMMITTED
/// both succeed and nobody is on call (write skew); under SERIALIZABLE the second COMMIT
/// fails with 40001.
#[test]
fn write_skew_is_refused_with_40001() {
    with_server(|addr| async move {
        let (a, _ca) = connect(addr).await;
        let (b, _cb) = connect(addr).await;
        let setup = "CREATE TABLE oncall (id int PRIMARY KEY, on_call boolean)";
        exec(&a, setup).await;
        for (level, skewed) in [("READ COMMITTED", true), ("SERIALIZABLE", false)] {
            exec(
                &a,
                "DELETE FROM oncall; INSERT INTO oncall VALUES (1, true), (2, true)",
            )
            .await;
            exec(&a, &format!("BEGIN ISOLATION LEVEL {level}")).await;
            exec(&b, &format!("BEGIN ISOLATION LEVEL {level}")).await;
            let on = "SELECT count(*) FROM oncall WHERE on_call";
            assert_eq!(count(&a, on).await, 2);
            assert_eq!(count(&b, on).await, 2);
            exec(&a, "UPDATE oncall SET on_call = false WHERE id = 1").await;
            exec(&b, "UPDATE oncall SET on_call = false WHERE id = 2").await;
            exec(&a, "COMMIT").await;
            let second = b.batch_execute("COMMIT").await;
            if skewed {
                second.expect("READ COMMITTED lets the skew through");
                assert_eq!(count(&a, on).await, 0);
            } else {
                let e = second.expect_err("the second commit breaks serializability");
                assert_eq!(sqlstate(&e), "40001", "{e:?}");
                assert_eq!(count(&b, on).await, 1, "b's update was rolled back");
                // The session goes on, outside a transaction.
                exec(&b, "UPDATE oncall SET on_call = true WHERE id = 1").await;
                assert_eq!(count(&a, on).await, 2);
            }
        }
    });
}

/// Read a counter, compute the next value in the client, write it: without FOR UPDATE a
/// READ COMMITTED client loses updates; SERIALIZABLE with retries on 40001 loses none.
async fn add_with_retries(c: &Client, times: usize) -> usize {
    let mut retries = 0;
    for _ in 0..times {
        loop {
            exec(c, "BEGIN ISOLATION LEVEL SERIALIZABLE").await;
            let v: i32 = c
                .query_one("SELECT v FROM counter WHERE id = 1", &[])
                .await
                .unwrap()
                .get(0);
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
            c.execute("UPDATE counter SET v = $1 WHERE id = 1", &[&(v + 1)])
                .await
                .unwrap();
            match c.batch_execute("COMMIT").await {
                Ok(()) => break,
                Err(e) if sqlstate(&e) == "40001" => retries += 1,
                Err(e) => panic!("COMMIT: {e:?}"),
            }
        }
    }
    retries
}

#[test]
fn retried_serializable_read_modify_writes_lose_no_update() {
    with_server(|addr| async move {
        let (a, _ca) = connect(addr).await;
        let (b, _cb) = connect(addr).await;
        exec(
            &a,
            "CREATE TABLE counter (id int PRIMARY KEY, v int); INSERT INTO counter VALUES (1, 0)",
        )
        .await;
        let (ra, rb) = tokio::join!(add_with_retries(&a, 30), add_with_retries(&b, 30));
        let v: i32 = a
            .query_one("SELECT v FROM counter WHERE id = 1", &[])
            .await
            .unwrap()
            .get(0);
        assert_eq!(v, 60);
        eprintln!("retries: {ra} + {rb}");
    });
}

#[test]
fn transactions_on_other_tables_commit_side_by_side() {
    with_server(|addr| async move {
        let (a, _ca) = connect(addr).await;
        let (b, _cb) = connect(addr).await;
        exec(
            &a,
            "CREATE TABLE x (id int PRIMARY KEY, v int); CREATE TABLE y (id int PRIMARY KEY, v int); \
             INSERT INTO x VALUES (1, 1); INSERT INTO y VALUES (1, 1)",
        )
        .await;
        exec(&a, "BEGIN ISOLATION LEVEL SERIALIZABLE").await;
        exec(&b, "BEGIN ISOLATION LEVEL SERIALIZABLE").await;
        assert_eq!(count(&a, "SELECT count(*) FROM x").await, 1);
        assert_eq!(count(&b, "SELECT count(*) FROM y").await, 1);
        exec(&a, "UPDATE x SET v = 2").await;
        exec(&b, "UPDATE y SET v = 2").await;
        exec(&a, "COMMIT").await;
        exec(&b, "COMMIT").await;
        assert_eq!(count(&a, "SELECT sum(v) FROM x").await, 2);
        assert_eq!(count(&a, "SELECT sum(v) FROM y").await, 2);
    });
}

#[test]
fn isolation_is_set_per_session_and_per_transaction() {
    with_server(|addr| async move {
        let (a, _ca) = connect(addr).await;
        let (b, _cb) = connect(addr).await;
        exec(
            &a,
            "CREATE TABLE t (id int PRIMARY KEY, v int); INSERT INTO t VALUES (1, 1)",
        )
        .await;
        // The session default, as JDBC's setTransactionIsolation sets it.
        exec(
            &b,
            "SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL SERIALIZABLE",
        )
        .await;
        exec(&b, "BEGIN").await;
        assert_eq!(count(&b, "SELECT count(*) FROM t").await, 1);
        exec(&a, "INSERT INTO t VALUES (2, 2)").await;
        exec(&b, "UPDATE t SET v = 0 WHERE id = 1").await;
        let e = b
            .batch_execute("COMMIT")
            .await
            .expect_err("a wrote what b read");
        assert_eq!(sqlstate(&e), "40001", "{e:?}");

        // SET TRANSACTION as the first statement of a block.
        exec(
            &b,
            "SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL READ COMMITTED",
        )
        .await;
        exec(&b, "BEGIN; SET TRANSACTION ISOLATION LEVEL SERIALIZABLE").await;
        assert_eq!(count(&b, "SELECT count(*) FROM t").await, 2);
        exec(&a, "INSERT INTO t VALUES (3, 3)").await;
        let e = b.batch_execute("COMMIT").await.expect_err("validated");
        assert_eq!(sqlstate(&e), "40001", "{e:?}");

        // ... and not after a query.
        exec(&b, "BEGIN").await;
        count(&b, "SELECT count(*) FROM t").await;
        let e = b
            .batch_execute("SET TRANSACTION ISOLATION LEVEL SERIALIZABLE")
            .await
            .expect_err("too late");
        assert_eq!(sqlstate(&e), "25001", "{e:?}");
        exec(&b, "ROLLBACK").await;
    });
}
