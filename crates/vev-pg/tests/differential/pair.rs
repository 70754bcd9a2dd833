//! The harness of the tests that run the same statements on a throwaway PostgreSQL 15 and
//! on a Vev server and compare what they return (`against_postgres.rs`,
//! `aggregate_expressions.rs`).

use tokio_postgres::{Client, SimpleQueryMessage};

use super::common;
use super::pg::{self, connect};

/// A statement's rows as text (sorted: the order of the rows a write returns is not
/// specified) and its row count.
pub async fn returned(c: &Client, sql: &str) -> (Vec<Vec<Option<String>>>, u64) {
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

/// Run `body` with a client of a throwaway PostgreSQL and one of a Vev server in memory,
/// each connected to a new database (skipped, with a message, where PostgreSQL is not
/// installed).
pub fn with_pair<F, Fut>(test: &str, body: F)
where
    F: FnOnce(Client, Client) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    if !pg::available() {
        eprintln!(
            "SKIPPED {test}: {}/postgres is not installed (apt-get install postgresql-15)",
            pg::BIN
        );
        return;
    }
    let postgres = pg::Postgres::start().expect("a throwaway PostgreSQL 15 starts");
    let server = pg::start_vev();
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
        body(pg, vev).await;
    });
    drop(server);
}

/// Each statement of `script` on both servers: the same rows (sorted) and counts.
pub async fn same(pg: &Client, vev: &Client, script: &[&str]) -> usize {
    let mut with_rows = 0;
    for sql in script {
        let want = returned(pg, sql).await;
        let got = returned(vev, sql).await;
        assert_eq!(got, want, "{sql}: Vev (left) and PostgreSQL (right)");
        with_rows += usize::from(!want.0.is_empty());
    }
    with_rows
}

/// Each statement fails with the same SQLSTATE on PostgreSQL and on Vev.
pub async fn same_errors(pg: &Client, vev: &Client, cases: &[(&str, &str)]) {
    for &(sql, code) in cases {
        for c in [pg, vev] {
            let e = c.simple_query(sql).await.expect_err(sql);
            assert_eq!(e.code().map(|c| c.code()), Some(code), "{sql}: {e}");
        }
    }
}

/// A number's text without trailing fractional zeros (Vev keeps one scale per numeric
/// value, docs/sql.md: PostgreSQL's `3.0` is Vev's `3`), and `-0` as `0`.
pub fn unscaled(cell: &Option<String>) -> Option<String> {
    cell.as_ref().map(|t| {
        let number = t.contains('.')
            && t.bytes()
                .all(|b| b.is_ascii_digit() || b == b'.' || b == b'-');
        if t == "-0" {
            "0".to_owned()
        } else if number {
            t.trim_end_matches('0').trim_end_matches('.').to_owned()
        } else {
            t.clone()
        }
    })
}

/// `same`, with numbers compared by value (`unscaled`).
pub async fn same_values(pg: &Client, vev: &Client, script: &[&str]) -> usize {
    let mut with_rows = 0;
    for sql in script {
        let (want, got) = (returned(pg, sql).await, returned(vev, sql).await);
        let values = |rows: &[Vec<Option<String>>]| -> Vec<Vec<Option<String>>> {
            let mut v: Vec<Vec<Option<String>>> = rows
                .iter()
                .map(|r| r.iter().map(unscaled).collect())
                .collect();
            v.sort();
            v
        };
        assert_eq!(
            (values(&got.0), got.1),
            (values(&want.0), want.1),
            "{sql}: Vev (left) and PostgreSQL (right)"
        );
        with_rows += usize::from(!want.0.is_empty());
    }
    with_rows
}

/// A statement's rows on both servers, compared in order (it has an ORDER BY over every
/// column that decides it); PostgreSQL's must not be empty.
pub async fn same_in_order(pg: &Client, vev: &Client, sql: &str) {
    let want = common::text_rows(pg, sql).await;
    assert!(!want.is_empty(), "{sql} returns rows");
    assert_eq!(
        common::text_rows(vev, sql).await,
        want,
        "{sql}: Vev (left) and PostgreSQL (right)"
    );
}
