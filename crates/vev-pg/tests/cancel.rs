//! Cancel requests through a real driver (tokio-postgres's `CancelToken`, which sends
//! PostgreSQL's `CancelRequest` on a new connection, as psql's Ctrl-C does): a running
//! query and a wait for a row lock stop with 57014 "canceling statement due to user
//! request", the session goes on, and a request between statements does nothing.

mod common;

use std::time::Duration;

use common::{connect, count, exec, sqlstate, with_server};
use tokio_postgres::NoTls;

/// The message of an error the cancel caused (not the safety `statement_timeout`).
fn assert_canceled(err: &tokio_postgres::Error) {
    assert_eq!(sqlstate(err), "57014", "{err:?}");
    let message = err.as_db_error().map(|d| d.message()).unwrap_or_default();
    assert_eq!(message, "canceling statement due to user request");
}

#[test]
fn a_cancel_request_stops_a_running_query_and_the_session_goes_on() {
    with_server(|addr| async move {
        let (c, _conn) = connect(addr).await;
        exec(&c, "CREATE TABLE big (id int PRIMARY KEY, v int)").await;
        let values: Vec<String> = (0..3000).map(|i| format!("({i}, {})", i % 7)).collect();
        exec(&c, &format!("INSERT INTO big VALUES {}", values.join(", "))).await;
        // A request between statements does nothing: the next statement runs.
        c.cancel_token().cancel_query(NoTls).await.expect("send");
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(count(&c, "SELECT count(*) FROM big").await, 3000);
        // A three-way cross join (27 billion rows) runs until canceled; the timeout only
        // keeps a broken cancel from hanging the test, and its message differs.
        exec(&c, "SET statement_timeout = 30000").await;
        let token = c.cancel_token();
        let (result, ()) = tokio::join!(
            c.query_one(
                "SELECT count(*) FROM big a, big b, big d WHERE a.v <= b.v AND b.v <= d.v",
                &[]
            ),
            async {
                tokio::time::sleep(Duration::from_millis(300)).await;
                token
                    .cancel_query(NoTls)
                    .await
                    .expect("send the cancel request");
            }
        );
        assert_canceled(&result.expect_err("the query is canceled"));
        assert_eq!(count(&c, "SELECT count(*) FROM big").await, 3000);
        // Prepared (extended protocol) statements are canceled the same way.
        let stmt = c
            .prepare("SELECT count(*) FROM big a, big b, big d WHERE a.v <= b.v AND b.v <= $1")
            .await
            .expect("prepare");
        let (result, ()) = tokio::join!(c.query_one(&stmt, &[&7i32]), async {
            tokio::time::sleep(Duration::from_millis(300)).await;
            token
                .cancel_query(NoTls)
                .await
                .expect("send the cancel request");
        });
        assert_canceled(&result.expect_err("the prepared query is canceled"));
        assert_eq!(count(&c, "SELECT count(*) FROM big WHERE v = 0").await, 429);
    });
}

#[test]
fn a_cancel_request_stops_a_wait_for_a_row_lock() {
    with_server(|addr| async move {
        let (a, _ca) = connect(addr).await;
        let (b, _cb) = connect(addr).await;
        exec(&a, "CREATE TABLE acct (id int PRIMARY KEY, bal int)").await;
        exec(&a, "INSERT INTO acct VALUES (1, 10)").await;
        exec(&a, "BEGIN; UPDATE acct SET bal = bal + 1 WHERE id = 1").await;
        let token = b.cancel_token();
        let (result, ()) = tokio::join!(
            b.execute("UPDATE acct SET bal = bal + 100 WHERE id = 1", &[]),
            async {
                tokio::time::sleep(Duration::from_millis(300)).await;
                token
                    .cancel_query(NoTls)
                    .await
                    .expect("send the cancel request");
            }
        );
        assert_canceled(&result.expect_err("the wait is canceled"));
        exec(&a, "COMMIT").await;
        // The canceled update changed nothing; the session can update the row now.
        assert_eq!(count(&b, "SELECT sum(bal) FROM acct").await, 11);
        exec(&b, "UPDATE acct SET bal = bal + 100 WHERE id = 1").await;
        assert_eq!(count(&a, "SELECT sum(bal) FROM acct").await, 111);
    });
}
