//! `SELECT ... FOR UPDATE` through tokio-postgres: the rows a select returns stay locked until
//! the transaction ends, so a client-side read-modify-write loses no update; NOWAIT fails
//! with 55P03 instead of waiting; the forms PostgreSQL refuses are refused with its SQLSTATEs.

mod common;

use std::time::Duration;

use common::{connect, exec, sqlstate, with_server};
use tokio_postgres::Client;

async fn balance(c: &Client, id: i32) -> i32 {
    c.query_one("SELECT v FROM acct WHERE id = $1", &[&id])
        .await
        .expect("read the balance")
        .get(0)
}

/// Read the balance under FOR UPDATE, compute the new one in the client, write it back: with
/// the row locked between the read and the write, no concurrent increment is lost.
async fn add_client_side(c: &Client, times: usize) {
    let read = c
        .prepare("SELECT v FROM acct WHERE id = $1 FOR UPDATE")
        .await
        .expect("prepare the locking read");
    let write = c
        .prepare("UPDATE acct SET v = $1 WHERE id = $2")
        .await
        .expect("prepare the write");
    for _ in 0..times {
        exec(c, "BEGIN").await;
        let v: i32 = c.query_one(&read, &[&1i32]).await.expect("read").get(0);
        // Give the other client every chance to slip in between the read and the write.
        tokio::task::yield_now().await;
        tokio::time::sleep(Duration::from_millis(1)).await;
        let n = c.execute(&write, &[&(v + 1), &1i32]).await.expect("write");
        assert_eq!(n, 1);
        exec(c, "COMMIT").await;
    }
}

#[test]
fn read_modify_write_under_for_update_loses_no_update() {
    with_server(|addr| async move {
        let (a, _ca) = connect(addr).await;
        let (b, _cb) = connect(addr).await;
        exec(
            &a,
            "CREATE TABLE acct (id int PRIMARY KEY, v int); INSERT INTO acct VALUES (1, 0), (2, 0)",
        )
        .await;
        tokio::join!(add_client_side(&a, 40), add_client_side(&b, 40));
        assert_eq!(balance(&a, 1).await, 80, "every increment of both clients");
        assert_eq!(balance(&a, 2).await, 0, "the other row was not touched");
    });
}

#[test]
fn a_locked_row_blocks_another_for_update_until_commit() {
    with_server(|addr| async move {
        let (a, _ca) = connect(addr).await;
        let (b, _cb) = connect(addr).await;
        exec(
            &a,
            "CREATE TABLE acct (id int PRIMARY KEY, v int); INSERT INTO acct VALUES (1, 5), (2, 7)",
        )
        .await;
        exec(&a, "BEGIN").await;
        let rows = a
            .query("SELECT id, v FROM acct WHERE id = 1 FOR UPDATE", &[])
            .await
            .unwrap();
        assert_eq!(rows.len(), 1);

        // The unlocked row is free: another transaction may lock and change it at once.
        exec(&b, "BEGIN").await;
        let other = tokio::time::timeout(
            Duration::from_secs(5),
            b.query("SELECT v FROM acct WHERE id = 2 FOR UPDATE", &[]),
        )
        .await
        .expect("a row nobody holds is locked without waiting")
        .unwrap();
        assert_eq!(other.len(), 1);
        exec(&b, "COMMIT").await;

        let waiting = tokio::spawn(async move {
            exec(&b, "BEGIN").await;
            let v: i32 = b
                .query_one("SELECT v FROM acct WHERE id = 1 FOR UPDATE", &[])
                .await
                .unwrap()
                .get(0);
            exec(&b, "COMMIT").await;
            v
        });
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(!waiting.is_finished(), "the row is locked until COMMIT");
        exec(&a, "UPDATE acct SET v = 6 WHERE id = 1; COMMIT").await;
        let v = tokio::time::timeout(Duration::from_secs(10), waiting)
            .await
            .expect("the lock went with the COMMIT")
            .unwrap();
        assert_eq!(v, 6, "the waiter reads the row as the holder committed it");
    });
}

#[test]
fn nowait_fails_with_55p03_and_the_transaction_is_aborted() {
    with_server(|addr| async move {
        let (a, _ca) = connect(addr).await;
        let (b, _cb) = connect(addr).await;
        exec(
            &a,
            "CREATE TABLE acct (id int PRIMARY KEY, v int); INSERT INTO acct VALUES (1, 5), (2, 7)",
        )
        .await;
        exec(&a, "BEGIN").await;
        a.query("SELECT v FROM acct WHERE id = 1 FOR UPDATE", &[])
            .await
            .unwrap();

        exec(&b, "BEGIN").await;
        let e = tokio::time::timeout(
            Duration::from_secs(5),
            b.query("SELECT v FROM acct FOR UPDATE NOWAIT", &[]),
        )
        .await
        .expect("NOWAIT does not wait")
        .expect_err("the row is held");
        assert_eq!(sqlstate(&e), "55P03", "{e:?}");
        let e = b.query("SELECT 1", &[]).await.expect_err("aborted");
        assert_eq!(sqlstate(&e), "25P02", "{e:?}");
        exec(&b, "ROLLBACK").await;

        // What b took before it failed (row 2) went with the rollback: a may lock it now.
        let rows = tokio::time::timeout(
            Duration::from_secs(5),
            a.query("SELECT v FROM acct WHERE id = 2 FOR UPDATE NOWAIT", &[]),
        )
        .await
        .expect("no wait")
        .expect("row 2 is free again");
        assert_eq!(rows.len(), 1);
        exec(&a, "COMMIT").await;

        // Without a holder NOWAIT just locks.
        exec(&b, "BEGIN").await;
        let rows = b
            .query("SELECT v FROM acct FOR SHARE NOWAIT", &[])
            .await
            .expect("nobody holds the rows");
        assert_eq!(rows.len(), 2);
        exec(&b, "COMMIT").await;
    });
}

#[test]
fn only_the_rows_returned_are_locked() {
    with_server(|addr| async move {
        let (a, _ca) = connect(addr).await;
        let (b, _cb) = connect(addr).await;
        exec(
            &a,
            "CREATE TABLE acct (id int PRIMARY KEY, v int); \
             INSERT INTO acct VALUES (1, 1), (2, 2), (3, 3)",
        )
        .await;
        exec(&a, "BEGIN").await;
        let rows = a
            .query(
                "SELECT id FROM acct ORDER BY id DESC LIMIT 1 FOR UPDATE",
                &[],
            )
            .await
            .unwrap();
        let ids: Vec<i32> = rows.iter().map(|r| r.get(0)).collect();
        assert_eq!(ids, [3]);
        // Rows 1 and 2 were read but not returned: they are free.
        let n = tokio::time::timeout(
            Duration::from_secs(5),
            b.execute("UPDATE acct SET v = v + 10 WHERE id < 3", &[]),
        )
        .await
        .expect("rows outside the LIMIT are not locked")
        .unwrap();
        assert_eq!(n, 2);
        let e = b
            .query("SELECT id FROM acct WHERE id = 3 FOR UPDATE NOWAIT", &[])
            .await
            .expect_err("row 3 is held");
        assert_eq!(sqlstate(&e), "55P03", "{e:?}");
        exec(&a, "COMMIT").await;
    });
}

#[test]
fn an_autocommit_for_update_releases_its_locks_at_once() {
    with_server(|addr| async move {
        let (a, _ca) = connect(addr).await;
        let (b, _cb) = connect(addr).await;
        exec(
            &a,
            "CREATE TABLE acct (id int PRIMARY KEY, v int); INSERT INTO acct VALUES (1, 1)",
        )
        .await;
        let rows = a.query("SELECT v FROM acct FOR UPDATE", &[]).await.unwrap();
        assert_eq!(rows.len(), 1);
        let n = tokio::time::timeout(
            Duration::from_secs(5),
            b.execute("UPDATE acct SET v = 2 WHERE id = 1", &[]),
        )
        .await
        .expect("the statement's own transaction ended with it")
        .unwrap();
        assert_eq!(n, 1);
    });
}

#[test]
fn joins_lock_every_table_or_the_ones_named_in_of() {
    with_server(|addr| async move {
        let (a, _ca) = connect(addr).await;
        let (b, _cb) = connect(addr).await;
        exec(
            &a,
            "CREATE TABLE acct (id int PRIMARY KEY, v int, owner int); \
             CREATE TABLE person (pid int PRIMARY KEY, name text); \
             INSERT INTO acct VALUES (1, 1, 10); INSERT INTO person VALUES (10, 'ann')",
        )
        .await;
        exec(&a, "BEGIN").await;
        let rows = a
            .query(
                "SELECT a.v, p.name FROM acct a JOIN person p ON p.pid = a.owner FOR UPDATE OF a",
                &[],
            )
            .await
            .unwrap();
        assert_eq!(rows.len(), 1);
        b.query("SELECT name FROM person FOR UPDATE NOWAIT", &[])
            .await
            .expect("person was not named in OF");
        let e = b
            .query("SELECT v FROM acct FOR UPDATE NOWAIT", &[])
            .await
            .expect_err("acct was");
        assert_eq!(sqlstate(&e), "55P03", "{e:?}");
        exec(&a, "COMMIT").await;

        exec(&a, "BEGIN").await;
        a.query(
            "SELECT a.v FROM acct a JOIN person p ON p.pid = a.owner FOR UPDATE",
            &[],
        )
        .await
        .unwrap();
        let e = b
            .query("SELECT name FROM person FOR UPDATE NOWAIT", &[])
            .await
            .expect_err("without OF every table's rows are locked");
        assert_eq!(sqlstate(&e), "55P03", "{e:?}");
        exec(&a, "COMMIT").await;
    });
}

#[test]
fn refused_forms_get_postgresql_sqlstates() {
    with_server(|addr| async move {
        let (a, _ca) = connect(addr).await;
        exec(
            &a,
            "CREATE TABLE acct (id int PRIMARY KEY, v int); INSERT INTO acct VALUES (1, 1)",
        )
        .await;
        for (sql, code) in [
            ("SELECT count(*) FROM acct FOR UPDATE", "0A000"),
            (
                "SELECT v, count(*) FROM acct GROUP BY v FOR UPDATE",
                "0A000",
            ),
            ("SELECT DISTINCT v FROM acct FOR UPDATE", "0A000"),
            ("SELECT v FROM acct FOR UPDATE SKIP LOCKED", "0A000"),
            ("SELECT v FROM acct FOR UPDATE OF nosuch", "42P01"),
        ] {
            let e = a.query(sql, &[]).await.expect_err(sql);
            assert_eq!(sqlstate(&e), code, "{sql}: {e:?}");
        }
        // The connection is still usable, and the table unchanged.
        let rows = a.query("SELECT v FROM acct FOR UPDATE", &[]).await.unwrap();
        assert_eq!(rows.len(), 1);
    });
}
