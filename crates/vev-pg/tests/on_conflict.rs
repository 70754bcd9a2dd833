//! `INSERT ... ON CONFLICT` through tokio-postgres: `DO NOTHING` inside a transaction block
//! (the transaction's own rows count) and from concurrent autocommit clients whose keys
//! overlap (each conflicting row skipped, never refused); `DO UPDATE` as a counter bumped by
//! racing clients (no update lost) and as one statement that commits whole or not at all.

mod common;

use common::{connect, count, exec, with_server};

/// The command tag's row count of a simple query.
async fn inserted(c: &tokio_postgres::Client, sql: &str) -> u64 {
    c.execute(sql, &[]).await.unwrap()
}

/// The rows of table `kv`, by key.
async fn kv(c: &tokio_postgres::Client) -> Vec<(i32, String)> {
    let rows = c
        .query("SELECT k, v FROM kv ORDER BY k", &[])
        .await
        .unwrap();
    rows.iter().map(|r| (r.get(0), r.get(1))).collect()
}

#[test]
fn do_nothing_skips_the_rows_a_transaction_already_has() {
    with_server(|addr| async move {
        let (c, _conn) = connect(addr).await;
        exec(&c, "CREATE TABLE kv (k int PRIMARY KEY, v text)").await;
        exec(&c, "INSERT INTO kv VALUES (1, 'one')").await;
        exec(&c, "BEGIN").await;
        assert_eq!(inserted(&c, "INSERT INTO kv VALUES (10, 'a')").await, 1);
        let sql = "INSERT INTO kv VALUES (10, 'b'), (11, 'c'), (1, 'x'), (11, 'd') \
                   ON CONFLICT (k) DO NOTHING";
        assert_eq!(inserted(&c, sql).await, 1, "only 11 is new");
        exec(&c, "COMMIT").await;
        assert_eq!(
            kv(&c).await,
            [(1, "one".into()), (10, "a".into()), (11, "c".into())]
        );
        // With a parameter, over the extended protocol.
        let n = c
            .execute(
                "INSERT INTO kv VALUES ($1, 'p') ON CONFLICT DO NOTHING",
                &[&11i32],
            )
            .await
            .unwrap();
        assert_eq!(n, 0);
    });
}

#[test]
fn concurrent_do_nothing_inserts_of_overlapping_keys_never_fail() {
    with_server(|addr| async move {
        let (c, _conn) = connect(addr).await;
        exec(&c, "CREATE TABLE seen (k int PRIMARY KEY, who int)").await;
        let mut tasks = Vec::new();
        for who in 0..6i32 {
            tasks.push(tokio::spawn(async move {
                let (c, _conn) = connect(addr).await;
                let mut total = 0;
                // Every client inserts the same keys in the same order, two a statement,
                // so that clients often look at a key at once and both find it absent.
                for k in (0..200).step_by(2) {
                    let sql = format!(
                        "INSERT INTO seen VALUES ({k}, {who}), ({}, {who}) ON CONFLICT DO NOTHING",
                        k + 1
                    );
                    total += c.execute(sql.as_str(), &[]).await.unwrap();
                }
                total
            }));
        }
        let mut total = 0;
        for t in tasks {
            total += t.await.unwrap();
        }
        assert_eq!(count(&c, "SELECT count(*) FROM seen").await, 200);
        assert_eq!(
            total, 200,
            "every key was inserted by exactly one statement"
        );
    });
}

#[test]
fn do_update_counts_from_racing_clients_without_losing_one() {
    with_server(|addr| async move {
        let (c, _conn) = connect(addr).await;
        exec(&c, "CREATE TABLE cnt (k int PRIMARY KEY, n int NOT NULL)").await;
        let mut tasks = Vec::new();
        for _ in 0..6 {
            tasks.push(tokio::spawn(async move {
                let (c, _conn) = connect(addr).await;
                for _ in 0..30 {
                    let n = c
                        .execute(
                            "INSERT INTO cnt VALUES ($1, 1) \
                             ON CONFLICT (k) DO UPDATE SET n = cnt.n + EXCLUDED.n",
                            &[&7i32],
                        )
                        .await
                        .unwrap();
                    assert_eq!(n, 1);
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        assert_eq!(count(&c, "SELECT sum(n) FROM cnt WHERE k = 7").await, 180);
    });
}

#[test]
fn do_update_is_one_statement_that_commits_whole_or_not_at_all() {
    with_server(|addr| async move {
        let (c, _conn) = connect(addr).await;
        exec(&c, "CREATE TABLE kv (k int PRIMARY KEY, v text NOT NULL)").await;
        exec(&c, "INSERT INTO kv VALUES (1, 'one'), (2, 'two')").await;
        let sql = "INSERT INTO kv VALUES (1, 'uno'), (3, 'tres') \
                   ON CONFLICT (k) DO UPDATE SET v = kv.v || '/' || EXCLUDED.v";
        assert_eq!(inserted(&c, sql).await, 2);
        // The update of 2 breaks NOT NULL: the new row 4 must not stay either.
        let err = c
            .execute(
                "INSERT INTO kv VALUES (4, 'cuatro'), (2, 'dos') \
                 ON CONFLICT (k) DO UPDATE SET v = NULL",
                &[],
            )
            .await
            .expect_err("v is NOT NULL");
        assert_eq!(common::sqlstate(&err), "23502", "{err:?}");
        assert_eq!(
            kv(&c).await,
            [(1, "one/uno".into()), (2, "two".into()), (3, "tres".into())]
        );
    });
}
