//! `INSERT ... ON CONFLICT DO NOTHING` through tokio-postgres: inside a transaction block
//! (the transaction's own rows count), and from concurrent autocommit clients whose keys
//! overlap (each conflicting row skipped, never refused).

mod common;

use common::{connect, count, exec, with_server};

/// The command tag's row count of a simple query.
async fn inserted(c: &tokio_postgres::Client, sql: &str) -> u64 {
    c.execute(sql, &[]).await.unwrap()
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
        let rows = c
            .query("SELECT k, v FROM kv ORDER BY k", &[])
            .await
            .unwrap();
        let rows: Vec<(i32, String)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
        assert_eq!(
            rows,
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
