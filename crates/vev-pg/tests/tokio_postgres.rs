//! `vev serve` through a real driver, tokio-postgres: the simple and extended protocols
//! (binary parameters and results), SQL over tables, transactions, SQLSTATEs, COPY, and
//! row locks between connections.

mod common;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::BytesMut;
use common::{connect, count, exec, sqlstate, text_rows, with_server};
use futures::SinkExt;
use tokio_postgres::types::{Format, IsNull, ToSql, Type};
use tokio_postgres::{Client, SimpleQueryMessage};

/// A parameter sent in the text format (tokio-postgres sends binary ones by itself).
#[derive(Debug)]
struct TextParam(&'static str);

impl ToSql for TextParam {
    fn to_sql(
        &self,
        _ty: &Type,
        out: &mut BytesMut,
    ) -> Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        out.extend_from_slice(self.0.as_bytes());
        Ok(IsNull::No)
    }

    fn accepts(_ty: &Type) -> bool {
        true
    }

    fn encode_format(&self, _ty: &Type) -> Format {
        Format::Text
    }

    tokio_postgres::types::to_sql_checked!();
}

#[test]
fn simple_query_creates_inserts_and_selects() {
    with_server(|addr| async move {
        let (c, _conn) = connect(addr).await;
        let msgs = c
            .simple_query(
                "CREATE TABLE fruit (id int PRIMARY KEY, name text, price float8); \
                 INSERT INTO fruit VALUES (1, 'apple', 1.5), (2, 'pear', 2.25), (3, 'fig', NULL)",
            )
            .await
            .expect("create and insert");
        let done: Vec<u64> = msgs
            .iter()
            .filter_map(|m| match m {
                SimpleQueryMessage::CommandComplete(n) => Some(*n),
                _ => None,
            })
            .collect();
        assert_eq!(done, vec![0, 3], "CREATE TABLE then INSERT 0 3");
        let rows = text_rows(&c, "SELECT id, name, price FROM fruit ORDER BY id").await;
        let s = |v: &str| Some(v.to_owned());
        assert_eq!(
            rows,
            vec![
                vec![s("1"), s("apple"), s("1.5")],
                vec![s("2"), s("pear"), s("2.25")],
                vec![s("3"), s("fig"), None],
            ]
        );
    });
}

/// One row of `vals`: every type tokio-postgres sends in binary.
type Vals = (
    i32,
    Option<i32>,
    Option<i64>,
    Option<String>,
    Option<f64>,
    Option<bool>,
    Option<SystemTime>,
);

async fn insert_vals(c: &Client, v: &Vals) {
    c.execute(
        "INSERT INTO vals (id, i4, i8, t, f, b, ts) VALUES ($1, $2, $3, $4, $5, $6, $7)",
        &[&v.0, &v.1, &v.2, &v.3, &v.4, &v.5, &v.6],
    )
    .await
    .expect("insert with binary parameters");
}

async fn select_vals(c: &Client, id: i32) -> Vals {
    let r = c
        .query_one(
            "SELECT id, i4, i8, t, f, b, ts FROM vals WHERE id = $1",
            &[&id],
        )
        .await
        .expect("select by a binary parameter");
    (
        r.get(0),
        r.get(1),
        r.get(2),
        r.get(3),
        r.get(4),
        r.get(5),
        r.get(6),
    )
}

#[test]
fn binary_parameters_and_results_round_trip_exactly() {
    with_server(|addr| async move {
        let (c, _conn) = connect(addr).await;
        exec(
            &c,
            "CREATE TABLE vals (id int PRIMARY KEY, i4 int, i8 bigint, t text, f float8, \
             b boolean, ts timestamp)",
        )
        .await;
        // Instants are kept to the millisecond: these are exact.
        let ts = |ms: u64| UNIX_EPOCH + Duration::from_millis(ms);
        let rows: Vec<Vals> = vec![
            (
                1,
                Some(i32::MIN),
                Some(i64::MAX),
                Some("plain".into()),
                Some(0.1 + 0.2),
                Some(true),
                Some(ts(1_700_000_000_123)),
            ),
            (
                2,
                Some(i32::MAX),
                Some(i64::MIN),
                Some("quote ' and \"dq\", tab\t, newline\n, ünïcødé ✓".into()),
                Some(-1.0e300),
                Some(false),
                Some(ts(0)),
            ),
            (
                3,
                Some(0),
                Some(-1),
                Some(String::new()),
                Some(f64::MIN_POSITIVE),
                Some(true),
                Some(ts(946_684_800_000 - 1)),
            ),
            (4, None, None, None, None, None, None),
        ];
        for v in &rows {
            insert_vals(&c, v).await;
        }
        for v in &rows {
            assert_eq!(&select_vals(&c, v.0).await, v, "row {}", v.0);
        }
        // The text format (simple protocol) writes them as PostgreSQL does.
        let text = text_rows(&c, "SELECT i4, i8, f, b, ts FROM vals WHERE id = 1").await;
        let s = |v: &str| Some(v.to_owned());
        assert_eq!(
            text,
            [vec![
                s("-2147483648"),
                s("9223372036854775807"),
                s("0.30000000000000004"),
                s("t"),
                s("2023-11-14 22:13:20.123"),
            ]]
        );
        // Each type also works as a parameter compared with a column.
        let one = |rows: Vec<tokio_postgres::Row>| -> Vec<i32> {
            rows.iter().map(|r| r.get(0)).collect()
        };
        let q = |sql: &'static str| format!("SELECT id FROM vals WHERE {sql} ORDER BY id");
        assert_eq!(
            one(c.query(&q("i4 = $1"), &[&i32::MAX]).await.unwrap()),
            [2]
        );
        assert_eq!(
            one(c.query(&q("i8 = $1"), &[&i64::MAX]).await.unwrap()),
            [1]
        );
        assert_eq!(one(c.query(&q("t = $1"), &[&""]).await.unwrap()), [3]);
        assert_eq!(
            one(c.query(&q("f = $1"), &[&(0.1 + 0.2)]).await.unwrap()),
            [1]
        );
        assert_eq!(one(c.query(&q("b = $1"), &[&true]).await.unwrap()), [1, 3]);
        assert_eq!(one(c.query(&q("ts = $1"), &[&ts(0)]).await.unwrap()), [2]);
        assert_eq!(
            one(c.query(&q("ts > $1"), &[&ts(1_000)]).await.unwrap()),
            [1, 3]
        );
    });
}

#[test]
fn selects_filter_order_limit_and_aggregate() {
    with_server(|addr| async move {
        let (c, _conn) = connect(addr).await;
        exec(
            &c,
            "CREATE TABLE emp (id int PRIMARY KEY, dept text, salary int, bonus int); \
             INSERT INTO emp VALUES (1, 'eng', 100, 10), (2, 'eng', 200, NULL), \
             (3, 'ops', 50, 5), (4, 'ops', 70, 7), (5, 'sales', 90, NULL)",
        )
        .await;
        let ids = |rows: Vec<tokio_postgres::Row>| -> Vec<i32> {
            rows.iter().map(|r| r.get(0)).collect()
        };
        let r = c
            .query(
                "SELECT id FROM emp WHERE salary >= $1 ORDER BY salary DESC LIMIT 2",
                &[&70i32],
            )
            .await
            .unwrap();
        assert_eq!(ids(r), [2, 1]);
        let r = c
            .query(
                "SELECT id FROM emp WHERE dept = 'ops' OR salary > 150 ORDER BY id LIMIT 10 OFFSET 1",
                &[],
            )
            .await
            .unwrap();
        assert_eq!(ids(r), [3, 4]);
        let row = c
            .query_one(
                "SELECT count(*), sum(salary), min(salary), max(salary), count(bonus) FROM emp",
                &[],
            )
            .await
            .unwrap();
        assert_eq!(row.get::<_, i64>(0), 5);
        assert_eq!(row.get::<_, i64>(1), 510);
        assert_eq!(row.get::<_, i32>(2), 50);
        assert_eq!(row.get::<_, i32>(3), 200);
        assert_eq!(row.get::<_, i64>(4), 3, "count(col) skips NULLs");
        // avg of ints is numeric in PostgreSQL: read it as text to stay exact.
        let rows = text_rows(&c, "SELECT avg(salary) FROM emp WHERE dept = 'ops'").await;
        let avg: f64 = rows[0][0].as_deref().unwrap().parse().unwrap();
        assert_eq!(avg, 60.0);
        let rows = text_rows(
            &c,
            "SELECT dept, count(*), sum(salary) FROM emp GROUP BY dept ORDER BY dept",
        )
        .await;
        let s = |v: &str| Some(v.to_owned());
        assert_eq!(
            rows,
            vec![
                vec![s("eng"), s("2"), s("300")],
                vec![s("ops"), s("2"), s("120")],
                vec![s("sales"), s("1"), s("90")],
            ]
        );
        let row = c
            .query_one("SELECT count(*), sum(salary) FROM emp WHERE id > 100", &[])
            .await
            .unwrap();
        assert_eq!(row.get::<_, i64>(0), 0, "count over no rows is 0");
        assert_eq!(
            row.get::<_, Option<i64>>(1),
            None,
            "sum over no rows is NULL"
        );
    });
}

#[test]
fn joins_two_tables() {
    with_server(|addr| async move {
        let (c, _conn) = connect(addr).await;
        exec(
            &c,
            "CREATE TABLE author (id int PRIMARY KEY, name text); \
             CREATE TABLE book (id int PRIMARY KEY, author_id int, title text); \
             INSERT INTO author VALUES (1, 'Le Guin'), (2, 'Lem'), (3, 'Nobody'); \
             INSERT INTO book VALUES (10, 1, 'The Dispossessed'), (11, 2, 'Solaris'), \
             (12, 1, 'The Lathe of Heaven'), (13, 9, 'Orphan')",
        )
        .await;
        let rows = c
            .query(
                "SELECT a.name, b.title FROM author a JOIN book b ON b.author_id = a.id \
                 WHERE a.id = $1 ORDER BY b.title",
                &[&1i32],
            )
            .await
            .unwrap();
        let got: Vec<(String, String)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
        assert_eq!(
            got,
            [
                ("Le Guin".to_owned(), "The Dispossessed".to_owned()),
                ("Le Guin".to_owned(), "The Lathe of Heaven".to_owned()),
            ]
        );
        let rows = text_rows(
            &c,
            "SELECT a.name, count(*) FROM author a, book b WHERE b.author_id = a.id \
             GROUP BY a.name ORDER BY a.name",
        )
        .await;
        let s = |v: &str| Some(v.to_owned());
        assert_eq!(
            rows,
            vec![vec![s("Le Guin"), s("2")], vec![s("Lem"), s("1")]],
            "an inner join drops the author without books and the book without an author"
        );
    });
}

#[test]
fn update_with_expressions_and_delete() {
    with_server(|addr| async move {
        let (c, _conn) = connect(addr).await;
        exec(
            &c,
            "CREATE TABLE acct (id int PRIMARY KEY, balance int, note text); \
             INSERT INTO acct VALUES (1, 100, 'a'), (2, 200, 'b'), (3, 300, 'c')",
        )
        .await;
        let n = c
            .execute(
                "UPDATE acct SET balance = balance + $1, note = 'paid' WHERE id = $2",
                &[&-30i32, &2i32],
            )
            .await
            .unwrap();
        assert_eq!(n, 1);
        let n = c
            .execute(
                "UPDATE acct SET balance = balance * 2 WHERE balance < 250",
                &[],
            )
            .await
            .unwrap();
        assert_eq!(n, 2, "rows 1 (100) and 2 (170)");
        let n = c
            .execute("DELETE FROM acct WHERE id = 3", &[])
            .await
            .unwrap();
        assert_eq!(n, 1);
        let n = c
            .execute("DELETE FROM acct WHERE id = 3", &[])
            .await
            .unwrap();
        assert_eq!(n, 0, "deleting a deleted row touches nothing");
        let rows = c
            .query("SELECT id, balance, note FROM acct ORDER BY id", &[])
            .await
            .unwrap();
        let got: Vec<(i32, i32, String)> = rows
            .iter()
            .map(|r| (r.get(0), r.get(1), r.get(2)))
            .collect();
        assert_eq!(got, [(1, 200, "a".into()), (2, 340, "paid".into())]);
        // A deleted primary key can be inserted again.
        exec(&c, "INSERT INTO acct VALUES (3, 1, 'again')").await;
        assert_eq!(count(&c, "SELECT count(*) FROM acct").await, 3);
    });
}

#[test]
fn nulls_are_absent_and_never_equal() {
    with_server(|addr| async move {
        let (c, _conn) = connect(addr).await;
        exec(
            &c,
            "CREATE TABLE n (id int PRIMARY KEY, v int, s text); \
             INSERT INTO n VALUES (1, 10, 'x'), (2, NULL, NULL); INSERT INTO n (id) VALUES (3)",
        )
        .await;
        let rows = c
            .query("SELECT id, v, s FROM n ORDER BY id", &[])
            .await
            .unwrap();
        let got: Vec<(i32, Option<i32>, Option<String>)> = rows
            .iter()
            .map(|r| (r.get(0), r.get(1), r.get(2)))
            .collect();
        assert_eq!(
            got,
            [
                (1, Some(10), Some("x".into())),
                (2, None, None),
                (3, None, None)
            ]
        );
        assert_eq!(count(&c, "SELECT count(*) FROM n WHERE v = NULL").await, 0);
        assert_eq!(count(&c, "SELECT count(*) FROM n WHERE v <> NULL").await, 0);
        assert_eq!(count(&c, "SELECT count(*) FROM n WHERE v IS NULL").await, 2);
        assert_eq!(
            count(&c, "SELECT count(*) FROM n WHERE v IS NOT NULL").await,
            1
        );
        assert_eq!(count(&c, "SELECT count(*) FROM n WHERE v <> 10").await, 0);
        let none: Option<i32> = None;
        let r = c
            .query("SELECT id FROM n WHERE v = $1", &[&none])
            .await
            .unwrap();
        assert!(r.is_empty(), "a NULL parameter equals nothing");
        // Setting a column to NULL removes its value.
        exec(&c, "UPDATE n SET v = NULL WHERE id = 1").await;
        assert_eq!(count(&c, "SELECT count(*) FROM n WHERE v IS NULL").await, 3);
        // Without a column list, N values fill the first N columns; the rest are NULL.
        exec(&c, "INSERT INTO n VALUES (4); INSERT INTO n VALUES (5, 50)").await;
        let rows = c
            .query("SELECT id, v, s FROM n WHERE id >= 4 ORDER BY id", &[])
            .await
            .unwrap();
        let got: Vec<(i32, Option<i32>, Option<String>)> = rows
            .iter()
            .map(|r| (r.get(0), r.get(1), r.get(2)))
            .collect();
        assert_eq!(got, [(4, None, None), (5, Some(50), None)]);
        let e = c
            .batch_execute("INSERT INTO n VALUES (6, 1, 'a', 'extra')")
            .await
            .unwrap_err();
        assert_eq!(sqlstate(&e), "42601", "more values than columns: {e:?}");
    });
}

#[test]
fn transactions_commit_rollback_and_read_their_own_writes() {
    with_server(|addr| async move {
        let (a, _ca) = connect(addr).await;
        let (b, _cb) = connect(addr).await;
        exec(
            &a,
            "CREATE TABLE t (id int PRIMARY KEY, v int); INSERT INTO t VALUES (1, 1)",
        )
        .await;

        exec(&a, "BEGIN").await;
        exec(&a, "INSERT INTO t VALUES (2, 2)").await;
        exec(&a, "UPDATE t SET v = 10 WHERE id = 1").await;
        assert_eq!(
            count(&a, "SELECT count(*) FROM t").await,
            2,
            "own insert seen"
        );
        let v: i32 = a
            .query_one("SELECT v FROM t WHERE id = 1", &[])
            .await
            .unwrap()
            .get(0);
        assert_eq!(v, 10, "own update seen");
        assert_eq!(
            count(&b, "SELECT count(*) FROM t").await,
            1,
            "not before COMMIT"
        );
        let v: i32 = b
            .query_one("SELECT v FROM t WHERE id = 1", &[])
            .await
            .unwrap()
            .get(0);
        assert_eq!(v, 1, "the update is not visible before COMMIT");
        exec(&a, "COMMIT").await;
        assert_eq!(
            count(&b, "SELECT count(*) FROM t").await,
            2,
            "visible after COMMIT"
        );

        exec(
            &a,
            "BEGIN; INSERT INTO t VALUES (3, 3); DELETE FROM t WHERE id = 1",
        )
        .await;
        assert_eq!(count(&a, "SELECT count(*) FROM t").await, 2);
        exec(&a, "ROLLBACK").await;
        for c in [&a, &b] {
            let ids: Vec<i32> = c
                .query("SELECT id FROM t ORDER BY id", &[])
                .await
                .unwrap()
                .iter()
                .map(|r| r.get(0))
                .collect();
            assert_eq!(ids, [1, 2], "ROLLBACK discards the insert and the delete");
        }

        // The driver's own transaction API (BEGIN ... COMMIT through prepared statements).
        let mut a = a;
        let tx = a.transaction().await.unwrap();
        tx.execute("INSERT INTO t VALUES ($1, $2)", &[&4i32, &4i32])
            .await
            .unwrap();
        let n: i64 = tx
            .query_one("SELECT count(*) FROM t WHERE id = $1", &[&4i32])
            .await
            .unwrap()
            .get(0);
        assert_eq!(n, 1);
        tx.commit().await.unwrap();
        assert_eq!(count(&b, "SELECT count(*) FROM t WHERE id = 4").await, 1);
    });
}

#[test]
fn errors_carry_their_sqlstate_and_the_connection_survives() {
    with_server(|addr| async move {
        let (c, _conn) = connect(addr).await;
        exec(
            &c,
            "CREATE TABLE u (id int PRIMARY KEY, v int); INSERT INTO u VALUES (1, 1)",
        )
        .await;

        let e = c
            .execute("INSERT INTO u VALUES (1, 2)", &[])
            .await
            .unwrap_err();
        assert_eq!(sqlstate(&e), "23505", "{e:?}");
        let e = c
            .execute("INSERT INTO u VALUES ($1, 2)", &[&1i32])
            .await
            .unwrap_err();
        assert_eq!(sqlstate(&e), "23505", "prepared: {e:?}");
        let e = c
            .batch_execute("INSERT INTO u VALUES (5, 5), (5, 6)")
            .await
            .unwrap_err();
        assert_eq!(
            sqlstate(&e),
            "23505",
            "a duplicate within one INSERT: {e:?}"
        );
        assert_eq!(
            count(&c, "SELECT count(*) FROM u").await,
            1,
            "nothing was written"
        );

        let e = c.query("SELECT * FROM nope", &[]).await.unwrap_err();
        assert_eq!(sqlstate(&e), "42P01", "{e:?}");
        let e = c.batch_execute("SELECT * FROM nope").await.unwrap_err();
        assert_eq!(sqlstate(&e), "42P01", "simple: {e:?}");
        let e = c.query("SELECT nocol FROM u", &[]).await.unwrap_err();
        assert_eq!(sqlstate(&e), "42703", "{e:?}");
        let e = c.execute("UPDATE u SET nocol = 1", &[]).await.unwrap_err();
        assert_eq!(sqlstate(&e), "42703", "{e:?}");
        let e = c.batch_execute("SELEKT 1").await.unwrap_err();
        assert_eq!(sqlstate(&e), "42601", "{e:?}");
        let e = c.query("SELECT * FROM u WHERE", &[]).await.unwrap_err();
        assert_eq!(sqlstate(&e), "42601", "prepared: {e:?}");

        let e = c
            .query("SELECT v FROM u WHERE id = $1", &[&TextParam("abc")])
            .await
            .unwrap_err();
        assert_eq!(
            sqlstate(&e),
            "22P02",
            "a text parameter that is no int: {e:?}"
        );
        let e = c
            .batch_execute("INSERT INTO u VALUES ('x1', 1)")
            .await
            .unwrap_err();
        assert_eq!(sqlstate(&e), "22P02", "a literal that is no int: {e:?}");
        let e = c
            .batch_execute("INSERT INTO u VALUES (3000000000, 1)")
            .await
            .unwrap_err();
        assert_eq!(sqlstate(&e), "22003", "an int out of range: {e:?}");
        let e = c
            .query(
                "SELECT v FROM u WHERE id = $1",
                &[&TextParam("99999999999999999999")],
            )
            .await
            .unwrap_err();
        assert_eq!(
            sqlstate(&e),
            "22003",
            "a text parameter out of range: {e:?}"
        );
        // A valid text parameter is typed by its use.
        let v: i32 = c
            .query_one("SELECT v FROM u WHERE id = $1", &[&TextParam("1")])
            .await
            .unwrap()
            .get(0);
        assert_eq!(v, 1);
    });
}

/// After an error inside a transaction every statement fails with 25P02 until ROLLBACK
/// (or a COMMIT, which rolls back), and nothing of the transaction is written.
#[test]
fn a_failed_transaction_refuses_statements_until_it_ends() {
    with_server(|addr| async move {
        let (c, _conn) = connect(addr).await;
        exec(
            &c,
            "CREATE TABLE u (id int PRIMARY KEY, v int); INSERT INTO u VALUES (1, 1)",
        )
        .await;
        exec(&c, "BEGIN").await;
        exec(&c, "INSERT INTO u VALUES (2, 2)").await;
        let e = c
            .execute("INSERT INTO u VALUES (1, 1)", &[])
            .await
            .unwrap_err();
        assert_eq!(sqlstate(&e), "23505");
        for sql in [
            "SELECT 1",
            "SELECT count(*) FROM u",
            "INSERT INTO u VALUES (3, 3)",
        ] {
            let e = c.batch_execute(sql).await.unwrap_err();
            assert_eq!(
                sqlstate(&e),
                "25P02",
                "{sql} in a failed transaction: {e:?}"
            );
        }
        let e = c.query("SELECT count(*) FROM u", &[]).await.unwrap_err();
        assert_eq!(
            sqlstate(&e),
            "25P02",
            "prepared, in a failed transaction: {e:?}"
        );
        exec(&c, "ROLLBACK").await;
        assert_eq!(
            count(&c, "SELECT count(*) FROM u").await,
            1,
            "the failed transaction left nothing"
        );

        // A COMMIT of a failed transaction rolls it back.
        exec(&c, "BEGIN; INSERT INTO u VALUES (2, 2)").await;
        let _ = c.batch_execute("SELECT * FROM nope").await.unwrap_err();
        let done = c.simple_query("COMMIT").await.unwrap();
        assert!(
            matches!(done.last(), Some(SimpleQueryMessage::CommandComplete(_))),
            "{done:?}"
        );
        assert_eq!(count(&c, "SELECT count(*) FROM u").await, 1);
    });
}

#[test]
fn copy_from_stdin_in_text_format() {
    with_server(|addr| async move {
        let (c, _conn) = connect(addr).await;
        exec(
            &c,
            "CREATE TABLE items (id int PRIMARY KEY, name text, qty int)",
        )
        .await;
        let sink = c
            .copy_in::<_, bytes::Bytes>("COPY items FROM STDIN")
            .await
            .expect("COPY starts");
        futures::pin_mut!(sink);
        let mut expected_qty = 0i64;
        for chunk in 0..10 {
            let mut text = String::new();
            for i in 0..100 {
                let id = chunk * 100 + i;
                let name = if id % 10 == 0 {
                    "\\N".to_owned()
                } else {
                    format!("item\\t{id}")
                };
                text.push_str(&format!("{id}\t{name}\t{}\n", id % 7));
                expected_qty += i64::from(id % 7);
            }
            sink.send(bytes::Bytes::from(text)).await.expect("CopyData");
        }
        let n = sink.finish().await.expect("COPY finishes");
        assert_eq!(n, 1000, "COPY 1000");
        assert_eq!(count(&c, "SELECT count(*) FROM items").await, 1000);
        assert_eq!(count(&c, "SELECT sum(qty) FROM items").await, expected_qty);
        assert_eq!(
            count(&c, "SELECT count(*) FROM items WHERE name IS NULL").await,
            100
        );
        let name: String = c
            .query_one("SELECT name FROM items WHERE id = 7", &[])
            .await
            .unwrap()
            .get(0);
        assert_eq!(name, "item\t7", "\\t is a tab in COPY's text format");

        // A bad line fails the COPY and writes nothing.
        let sink = c
            .copy_in::<_, bytes::Bytes>("COPY items (id, qty) FROM STDIN")
            .await
            .unwrap();
        futures::pin_mut!(sink);
        sink.send(bytes::Bytes::from_static(b"5000\t1\nnot-an-int\t2\n"))
            .await
            .unwrap();
        let e = sink.finish().await.unwrap_err();
        assert_eq!(sqlstate(&e), "22P02", "{e:?}");
        assert_eq!(count(&c, "SELECT count(*) FROM items").await, 1000);
    });
}

/// A row lock holder that vanishes (no Terminate, the socket just closes) must not keep its
/// lock nor leave its writes.
#[test]
fn a_client_gone_mid_transaction_rolls_back_and_releases_its_locks() {
    with_server(|addr| async move {
        let (a, conn_a) = connect(addr).await;
        let (b, _cb) = connect(addr).await;
        exec(
            &a,
            "CREATE TABLE t (id int PRIMARY KEY, v int); INSERT INTO t VALUES (1, 1)",
        )
        .await;
        exec(
            &a,
            "BEGIN; UPDATE t SET v = 100 WHERE id = 1; INSERT INTO t VALUES (2, 2)",
        )
        .await;

        let waiting = tokio::spawn(async move {
            let n = b
                .execute("UPDATE t SET v = v + 1 WHERE id = 1", &[])
                .await
                .expect("the second client's update");
            (b, n)
        });
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(
            !waiting.is_finished(),
            "the row is locked while the first client lives"
        );

        conn_a.abort();
        drop(a);
        let (b, n) = tokio::time::timeout(Duration::from_secs(10), waiting)
            .await
            .expect("the lock was released when the client went")
            .unwrap();
        assert_eq!(n, 1);
        let rows = b
            .query("SELECT id, v FROM t ORDER BY id", &[])
            .await
            .unwrap();
        let got: Vec<(i32, i32)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
        assert_eq!(
            got,
            [(1, 2)],
            "the gone client's update and insert are not visible"
        );
    });
}

async fn increment(c: &Client, times: usize, in_transactions: bool) {
    for i in 0..times {
        if in_transactions && i % 2 == 0 {
            exec(c, "BEGIN").await;
            c.execute("UPDATE counter SET x = x + 1 WHERE id = $1", &[&1i32])
                .await
                .unwrap();
            c.execute("UPDATE counter SET x = x + $1 WHERE id = 2", &[&1i32])
                .await
                .unwrap();
            exec(c, "COMMIT").await;
        } else {
            c.execute("UPDATE counter SET x = x + 1 WHERE id = 1", &[])
                .await
                .unwrap();
            c.execute("UPDATE counter SET x = x + 1 WHERE id = 2", &[])
                .await
                .unwrap();
        }
    }
}

#[test]
fn concurrent_increments_never_lose_an_update() {
    with_server(|addr| async move {
        let (setup, _conn) = connect(addr).await;
        exec(
            &setup,
            "CREATE TABLE counter (id int PRIMARY KEY, x int); INSERT INTO counter VALUES (1, 0), (2, 0)",
        )
        .await;
        let (clients, times) = (3, 30);
        let mut tasks = Vec::new();
        for k in 0..clients {
            tasks.push(tokio::spawn(async move {
                let (c, _conn) = connect(addr).await;
                increment(&c, times, k % 2 == 0).await;
            }));
        }
        for t in tasks {
            t.await.expect("an incrementing client");
        }
        let rows = setup
            .query("SELECT x FROM counter ORDER BY id", &[])
            .await
            .unwrap();
        let xs: Vec<i32> = rows.iter().map(|r| r.get(0)).collect();
        let total = (clients * times) as i32;
        assert_eq!(
            xs,
            [total, total],
            "every increment of every client is kept"
        );
    });
}

async fn id_v(c: &Client) -> Vec<(i32, Option<i32>)> {
    c.query("SELECT id, v FROM t ORDER BY id", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect()
}

#[test]
fn a_transaction_reads_its_own_inserts_updates_and_deletes() {
    with_server(|addr| async move {
        let (c, _conn) = connect(addr).await;
        exec(
            &c,
            "CREATE TABLE t (id int PRIMARY KEY, v int); \
             INSERT INTO t VALUES (1, 1), (2, 2), (5, 5), (6, 6)",
        )
        .await;
        exec(&c, "BEGIN").await;
        exec(&c, "INSERT INTO t VALUES (3, 3)").await;
        exec(&c, "UPDATE t SET v = v + 10 WHERE id = 3").await;
        exec(&c, "UPDATE t SET v = v + 10 WHERE id >= 2").await;
        exec(&c, "UPDATE t SET v = 7 WHERE id = 6").await;
        let v: i32 = c
            .query_one("SELECT v FROM t WHERE id = 6", &[])
            .await
            .unwrap()
            .get(0);
        assert_eq!(v, 7, "a second update of a row is read back");
        exec(&c, "UPDATE t SET v = 16 WHERE id = 6").await;
        exec(&c, "INSERT INTO t VALUES (4, 4)").await;
        exec(&c, "DELETE FROM t WHERE id = 4").await;
        // A committed row deleted and its key inserted again: PostgreSQL allows it.
        exec(&c, "DELETE FROM t WHERE id = 1").await;
        exec(&c, "INSERT INTO t VALUES (1, 100)").await;
        exec(&c, "UPDATE t SET v = v + 1 WHERE id = 1").await;
        exec(
            &c,
            "DELETE FROM t WHERE id = 2; INSERT INTO t (id) VALUES (2)",
        )
        .await;
        exec(
            &c,
            "DELETE FROM t WHERE id = 5; INSERT INTO t VALUES (5, 50)",
        )
        .await;
        exec(&c, "DELETE FROM t WHERE id = 5").await;
        let expected = [(1, Some(101)), (2, None), (3, Some(23)), (6, Some(16))];
        assert_eq!(id_v(&c).await, expected, "inside the transaction");
        let e = c
            .execute("INSERT INTO t VALUES (6, 0)", &[])
            .await
            .unwrap_err();
        assert_eq!(sqlstate(&e), "23505", "a key not deleted is still taken");
        exec(&c, "ROLLBACK; BEGIN").await;
        exec(&c, "INSERT INTO t VALUES (3, 3)").await;
        exec(&c, "UPDATE t SET v = v + 10 WHERE id = 3").await;
        exec(&c, "UPDATE t SET v = v + 10 WHERE id >= 2").await;
        exec(&c, "INSERT INTO t VALUES (4, 4)").await;
        exec(&c, "DELETE FROM t WHERE id = 4").await;
        exec(&c, "DELETE FROM t WHERE id = 1").await;
        exec(&c, "INSERT INTO t VALUES (1, 100)").await;
        exec(&c, "UPDATE t SET v = v + 1 WHERE id = 1").await;
        exec(
            &c,
            "DELETE FROM t WHERE id = 2; INSERT INTO t (id) VALUES (2)",
        )
        .await;
        exec(
            &c,
            "DELETE FROM t WHERE id = 5; INSERT INTO t VALUES (5, 50)",
        )
        .await;
        exec(&c, "DELETE FROM t WHERE id = 5").await;
        assert_eq!(id_v(&c).await, expected, "the same, again");
        exec(&c, "COMMIT").await;
        let (c2, _conn2) = connect(addr).await;
        assert_eq!(
            id_v(&c2).await,
            expected,
            "after COMMIT, from another session"
        );
        exec(
            &c,
            "BEGIN; TRUNCATE t; INSERT INTO t VALUES (1, 1), (9, 9); COMMIT",
        )
        .await;
        assert_eq!(
            id_v(&c2).await,
            [(1, Some(1)), (9, Some(9))],
            "TRUNCATE, then a key again"
        );
    });
}

/// READ COMMITTED: an UPDATE that waited for a row lock works on the row as the holder
/// committed it (PostgreSQL re-reads the row), and finds nothing if it was deleted.
#[test]
fn an_update_that_waited_for_a_lock_sees_the_committed_row() {
    with_server(|addr| async move {
        let (a, _ca) = connect(addr).await;
        let (b, _cb) = connect(addr).await;
        exec(
            &a,
            "CREATE TABLE t (id int PRIMARY KEY, v int); INSERT INTO t VALUES (1, 1), (2, 2)",
        )
        .await;
        exec(
            &a,
            "BEGIN; UPDATE t SET v = v + 10 WHERE id = 1; DELETE FROM t WHERE id = 2",
        )
        .await;
        let waiting = tokio::spawn(async move {
            let doubled = b
                .execute("UPDATE t SET v = v * 2 WHERE id = 1", &[])
                .await
                .unwrap();
            let gone = b
                .execute("UPDATE t SET v = 0 WHERE id = 2", &[])
                .await
                .unwrap();
            (b, doubled, gone)
        });
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(!waiting.is_finished(), "the rows are locked until COMMIT");
        exec(&a, "COMMIT").await;
        let (b, doubled, gone) = waiting.await.unwrap();
        assert_eq!((doubled, gone), (1, 0));
        let rows = b
            .query("SELECT id, v FROM t ORDER BY id", &[])
            .await
            .unwrap();
        let got: Vec<(i32, Option<i32>)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
        assert_eq!(
            got,
            [(1, Some(22))],
            "(1 + 10) * 2, and the deleted row stays deleted"
        );
        assert_eq!(count(&b, "SELECT count(*) FROM t").await, 1);
    });
}

/// Two sessions inserting the same primary key: one of them fails with 23505, and the
/// table never holds the key twice.
#[test]
fn concurrent_inserts_of_one_key_keep_it_unique() {
    with_server(|addr| async move {
        let (a, _ca) = connect(addr).await;
        let (b, _cb) = connect(addr).await;
        exec(&a, "CREATE TABLE t (id int PRIMARY KEY, who text)").await;
        exec(&a, "BEGIN; INSERT INTO t VALUES (5, 'a')").await;
        let b_insert = tokio::spawn(async move {
            let r = b.execute("INSERT INTO t VALUES (5, 'b')", &[]).await;
            (b, r)
        });
        tokio::time::sleep(Duration::from_millis(200)).await;
        let a_commit = a.batch_execute("COMMIT").await;
        let (b, b_result) = b_insert.await.unwrap();
        let failures: Vec<String> = [a_commit.err(), b_result.err()]
            .into_iter()
            .flatten()
            .map(|e| sqlstate(&e).to_owned())
            .collect();
        assert_eq!(failures, ["23505"], "exactly one of the two fails");
        assert_eq!(count(&b, "SELECT count(*) FROM t WHERE id = 5").await, 1);
    });
}

/// A named prepared statement runs many times with new parameters, and again after the
/// table it reads changed.
#[test]
fn a_prepared_statement_is_reused() {
    with_server(|addr| async move {
        let (c, _conn) = connect(addr).await;
        exec(&c, "CREATE TABLE t (id int PRIMARY KEY, v bigint)").await;
        let insert = c
            .prepare("INSERT INTO t (id, v) VALUES ($1, $2)")
            .await
            .unwrap();
        let select = c.prepare("SELECT v FROM t WHERE id = $1").await.unwrap();
        assert_eq!(insert.params(), [Type::INT4, Type::INT8]);
        assert_eq!(select.columns()[0].type_(), &Type::INT8);
        for i in 0..50i32 {
            c.execute(&insert, &[&i, &(i64::from(i) * 1_000_000_007)])
                .await
                .unwrap();
        }
        for i in [0i32, 17, 49] {
            let v: i64 = c.query_one(&select, &[&i]).await.unwrap().get(0);
            assert_eq!(v, i64::from(i) * 1_000_000_007);
        }
        assert!(c.query_opt(&select, &[&50i32]).await.unwrap().is_none());
        exec(
            &c,
            "CREATE TABLE other (id int PRIMARY KEY); UPDATE t SET v = -1 WHERE id = 17",
        )
        .await;
        let v: i64 = c.query_one(&select, &[&17i32]).await.unwrap().get(0);
        assert_eq!(v, -1, "the statement runs on after the schema changed");
    });
}

/// Execute with a row limit (what JDBC's fetch size does): the portal is suspended after
/// each batch and resumed by the next Execute.
#[test]
fn a_portal_is_read_in_batches() {
    with_server(|addr| async move {
        let (mut c, _conn) = connect(addr).await;
        let values: Vec<String> = (0..25).map(|i| format!("({i})")).collect();
        exec(
            &c,
            &format!(
                "CREATE TABLE p (id int PRIMARY KEY); INSERT INTO p VALUES {}",
                values.join(", ")
            ),
        )
        .await;
        let tx = c.transaction().await.unwrap();
        let stmt = tx
            .prepare("SELECT id FROM p WHERE id >= $1 ORDER BY id")
            .await
            .unwrap();
        let portal = tx.bind(&stmt, &[&5i32]).await.unwrap();
        let mut sizes = Vec::new();
        let mut ids = Vec::new();
        loop {
            let rows = tx.query_portal(&portal, 7).await.unwrap();
            sizes.push(rows.len());
            ids.extend(rows.iter().map(|r| r.get::<_, i32>(0)));
            if rows.len() < 7 || sizes.len() > 10 {
                break;
            }
        }
        assert_eq!(sizes, [7, 7, 6]);
        assert_eq!(ids, (5..25).collect::<Vec<i32>>());
        tx.commit().await.unwrap();
    });
}

/// Several statements in one simple Query are one transaction, as in PostgreSQL: a failure
/// undoes the statements before it.
#[test]
fn a_multi_statement_query_is_one_transaction() {
    with_server(|addr| async move {
        let (c, _conn) = connect(addr).await;
        exec(&c, "CREATE TABLE m (id int PRIMARY KEY)").await;
        let err = c
            .simple_query("INSERT INTO m VALUES (1); INSERT INTO m VALUES (2); SELECT * FROM nope")
            .await
            .expect_err("the last statement fails");
        assert_eq!(sqlstate(&err), "42P01");
        assert_eq!(
            count(&c, "SELECT count(*) FROM m").await,
            0,
            "both inserts undone"
        );
        exec(&c, "INSERT INTO m VALUES (1); INSERT INTO m VALUES (2)").await;
        assert_eq!(count(&c, "SELECT count(*) FROM m").await, 2);
    });
}

/// DDL inside BEGIN ... COMMIT is refused with 0A000 (a table's schema and its rows cannot
/// commit in one Vev transaction), and the transaction is then failed, not half applied.
#[test]
fn ddl_inside_a_transaction_block_is_refused() {
    with_server(|addr| async move {
        let (c, _conn) = connect(addr).await;
        exec(&c, "CREATE TABLE d (id int PRIMARY KEY)").await;
        exec(&c, "BEGIN").await;
        exec(&c, "INSERT INTO d VALUES (1)").await;
        let err = c
            .batch_execute("CREATE TABLE e (id int)")
            .await
            .expect_err("DDL in a transaction block");
        assert_eq!(sqlstate(&err), "0A000");
        let err = c
            .batch_execute("INSERT INTO d VALUES (2)")
            .await
            .expect_err("failed");
        assert_eq!(sqlstate(&err), "25P02");
        exec(&c, "ROLLBACK").await;
        assert_eq!(count(&c, "SELECT count(*) FROM d").await, 0);
        let err = c
            .batch_execute("SELECT * FROM e")
            .await
            .expect_err("no table e");
        assert_eq!(sqlstate(&err), "42P01");
    });
}

/// A SELECT without FROM describes its parameters by their casts, so drivers can bind them.
#[test]
fn a_select_without_from_types_its_parameters() {
    with_server(|addr| async move {
        let (c, _conn) = connect(addr).await;
        let stmt = c.prepare("SELECT $1::int4 * 2").await.expect("prepare");
        assert_eq!(stmt.params(), &[Type::INT4]);
        assert_eq!(stmt.columns()[0].type_(), &Type::INT4);
        let row = c.query_one(&stmt, &[&21i32]).await.expect("run");
        assert_eq!(row.get::<_, i32>(0), 42);
    });
}

/// `statement_timeout` stops a query that runs past it with 57014, and the session goes on.
#[test]
fn statement_timeout_cancels_a_long_query() {
    with_server(|addr| async move {
        let (c, _conn) = connect(addr).await;
        exec(&c, "CREATE TABLE big (id int PRIMARY KEY, v int)").await;
        let values: Vec<String> = (0..2000).map(|i| format!("({i}, {})", i % 7)).collect();
        exec(&c, &format!("INSERT INTO big VALUES {}", values.join(", "))).await;
        exec(&c, "SET statement_timeout = 5").await;
        // A cross join of 4 million rows: far more than 5 ms.
        let err = c
            .query_one("SELECT count(*) FROM big a, big b WHERE a.v <= b.v", &[])
            .await
            .expect_err("the query times out");
        assert_eq!(sqlstate(&err), "57014", "{err:?}");
        exec(&c, "SET statement_timeout = 0").await;
        assert_eq!(count(&c, "SELECT count(*) FROM big").await, 2000);
    });
}

/// HAVING with a parameter (typed by the aggregate it is compared with, over the extended
/// protocol), and a column neither grouped nor aggregated refused as PostgreSQL does.
#[test]
fn having_keeps_the_groups_its_condition_holds_for() {
    with_server(|addr| async move {
        let (c, _conn) = connect(addr).await;
        exec(
            &c,
            "CREATE TABLE hv (id int PRIMARY KEY, k text, v int); \
             INSERT INTO hv VALUES (1, 'a', 1), (2, 'a', 2), (3, 'b', 5)",
        )
        .await;
        let keys = |rows: Vec<tokio_postgres::Row>| -> Vec<String> {
            rows.iter().map(|r| r.get(0)).collect()
        };
        let sql = "SELECT k FROM hv GROUP BY k HAVING count(*) >= $1 ORDER BY k";
        assert_eq!(keys(c.query(sql, &[&2i64]).await.unwrap()), ["a"]);
        assert_eq!(keys(c.query(sql, &[&1i64]).await.unwrap()), ["a", "b"]);
        let sql = "SELECT k FROM hv GROUP BY k HAVING sum(v) > $1 ORDER BY k";
        assert_eq!(keys(c.query(sql, &[&3i64]).await.unwrap()), ["b"]);
        let err = c
            .query("SELECT k FROM hv GROUP BY k HAVING v > 1", &[])
            .await
            .expect_err("v is neither grouped nor aggregated");
        assert_eq!(sqlstate(&err), "42803", "{err:?}");
        // An expression over an aggregate (integer division: a's 3 / 2 is 1).
        let sql = "SELECT k FROM hv GROUP BY k HAVING sum(v) / 2 > 1 ORDER BY k";
        assert_eq!(keys(c.query(sql, &[]).await.unwrap()), ["b"]);
    });
}
