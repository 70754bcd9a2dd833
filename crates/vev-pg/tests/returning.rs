//! `INSERT/UPDATE/DELETE ... RETURNING` through tokio-postgres, against a real PostgreSQL 15
//! as the oracle: the same statements (autocommit and inside a transaction block, the simple
//! and the extended protocol) must return the same rows and row counts from both. What Vev
//! refuses (`0A000`) is checked on Vev alone.

#[path = "differential/pg.rs"]
mod pg;

use tokio_postgres::{Client, NoTls, SimpleQueryMessage};

async fn connect(port: u16, db: &str) -> Client {
    let (client, conn) = tokio_postgres::connect(
        &format!("host=127.0.0.1 port={port} user=vev dbname={db}"),
        NoTls,
    )
    .await
    .unwrap_or_else(|e| panic!("cannot connect to port {port}: {e}"));
    tokio::spawn(async move {
        let _ = conn.await;
    });
    client
}

/// A statement's rows as text (sorted: the order of the rows a write returns is not
/// specified) and its row count.
async fn returned(c: &Client, sql: &str) -> (Vec<Vec<Option<String>>>, u64) {
    let messages = c
        .simple_query(sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e:?}"));
    let mut rows = Vec::new();
    let mut count = None;
    for m in messages {
        match m {
            SimpleQueryMessage::Row(r) => {
                rows.push((0..r.len()).map(|i| r.get(i).map(str::to_owned)).collect());
            }
            SimpleQueryMessage::CommandComplete(n) => count = Some(n),
            _ => {}
        }
    }
    rows.sort();
    (rows, count.expect("a command tag"))
}

/// The statements both servers run, in order; each one's rows and count are compared.
const SCRIPT: &[&str] = &[
    "INSERT INTO items VALUES (1, 'apple', 3, 1.5, 'ab') RETURNING *",
    "INSERT INTO items (id, name) VALUES (2, 'pear'), (3, 'fig') RETURNING id, name, qty",
    // An integer column rounds the numeric 2.5 away from zero; char(4) pads.
    "INSERT INTO items (id, name, qty, code) VALUES (4, 'kiwi', 2.5, 'k') \
     RETURNING qty AS q, items.code, name",
    "INSERT INTO items VALUES (1, 'dup') ON CONFLICT (id) DO NOTHING RETURNING id",
    "INSERT INTO items VALUES (5, 'plum', 1), (1, 'dup', 0) ON CONFLICT DO NOTHING RETURNING name",
    "UPDATE items SET qty = qty + 1 WHERE id <= 2 RETURNING id, qty, name",
    "UPDATE items SET qty = 7.5, code = 'x' WHERE id = 3 RETURNING *",
    "UPDATE items SET name = 'none' WHERE id = 99 RETURNING id",
    "UPDATE items AS i SET qty = 1 WHERE i.id = 4 RETURNING i.id * 10 AS tenfold, upper(name)",
    "UPDATE items SET price = NULL WHERE id = 1 RETURNING price, id",
    "BEGIN",
    "INSERT INTO items VALUES (6, 'lime', 9) RETURNING id",
    "UPDATE items SET qty = qty * 2 WHERE qty > 5 RETURNING id, qty",
    "DELETE FROM items WHERE id = 6 RETURNING name, qty",
    "COMMIT",
    "DELETE FROM items WHERE qty > 3 RETURNING *",
    "DELETE FROM items WHERE id = 1 RETURNING id, name || '!' AS shout, qty * 2",
    "DELETE FROM items WHERE id = 99 RETURNING *",
    "SELECT * FROM items ORDER BY id",
];

const TABLE: &str =
    "CREATE TABLE items (id int PRIMARY KEY, name text, qty int, price numeric, code char(4))";

#[test]
fn returning_matches_postgres() {
    if !pg::available() {
        eprintln!(
            "SKIPPED returning_matches_postgres: {}/postgres is not installed \
             (apt-get install postgresql-15)",
            pg::BIN
        );
        return;
    }
    let postgres = pg::Postgres::start().expect("a throwaway PostgreSQL 15 starts");
    let server = vev_pg::Server::start(
        vev::Connection::open_in_memory(),
        &vev_pg::ServeOptions {
            listen: "127.0.0.1:0".parse().expect("an address"),
            password: None,
        },
    )
    .expect("vev serve starts");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    rt.block_on(async {
        let admin = connect(postgres.port, "postgres").await;
        admin
            .simple_query("CREATE DATABASE vevret")
            .await
            .expect("CREATE DATABASE");
        let pg = connect(postgres.port, "vevret").await;
        let vev = connect(server.local_addr().port(), "vevret").await;
        for c in [&pg, &vev] {
            c.simple_query(TABLE).await.expect("CREATE TABLE");
        }
        let mut with_rows = 0;
        for sql in SCRIPT {
            let want = returned(&pg, sql).await;
            let got = returned(&vev, sql).await;
            assert_eq!(got, want, "{sql}: Vev (left) and PostgreSQL (right)");
            with_rows += usize::from(!want.0.is_empty());
        }
        assert!(with_rows >= 12, "the script returns rows ({with_rows} statements)");

        // The extended protocol: parameters, typed columns from Describe.
        for c in [&pg, &vev] {
            let rows = c
                .query(
                    "INSERT INTO items (id, name, qty) VALUES ($1, $2, $3) RETURNING id, name, qty, code",
                    &[&10i32, &"ten", &10i32],
                )
                .await
                .expect("INSERT ... RETURNING with parameters");
            assert_eq!(rows.len(), 1);
            assert_eq!(rows[0].get::<_, i32>(0), 10);
            assert_eq!(rows[0].get::<_, &str>(1), "ten");
            assert_eq!(rows[0].get::<_, i32>(2), 10);
            assert!(rows[0].get::<_, Option<&str>>(3).is_none());
            let rows = c
                .query(
                    "UPDATE items SET qty = qty + $1 WHERE id = $2 RETURNING qty, name",
                    &[&5i32, &10i32],
                )
                .await
                .expect("UPDATE ... RETURNING with parameters");
            assert_eq!(rows.len(), 1);
            assert_eq!(rows[0].get::<_, i32>(0), 15);
            let n = c
                .execute("DELETE FROM items WHERE id = $1 RETURNING id", &[&10i32])
                .await
                .expect("DELETE ... RETURNING through execute");
            assert_eq!(n, 1);
        }

        // Refused by Vev, clearly.
        for sql in [
            "UPDATE items SET qty = 1 RETURNING qty + 1",
            "INSERT INTO items (id) VALUES (20) RETURNING id + 1",
            "INSERT INTO items VALUES (21, 'x') ON CONFLICT (id) DO UPDATE SET name = 'y' RETURNING id",
        ] {
            let e = vev.simple_query(sql).await.expect_err(sql);
            let code = e.code().map(|c| c.code().to_owned());
            assert_eq!(code.as_deref(), Some("0A000"), "{sql}: {e}");
        }
        let (rows, _) = returned(&vev, "SELECT id FROM items WHERE id >= 20").await;
        assert!(rows.is_empty(), "a refused statement writes nothing: {rows:?}");
    });
    drop(server);
}
