//! A transaction block's writes that cannot fail (an UPDATE of a column that is not a key,
//! an INSERT into a table without one) are applied to the block's view when a statement
//! next reads their tables, not at once: they are read back exactly, committed whole, and
//! unseen by other sessions until COMMIT; a write that can fail is still checked by its own
//! statement, with the deferred ones before it.

mod common;

use common::{connect, count, exec, sqlstate, with_server};
use tokio_postgres::Client;

async fn setup(c: &Client) {
    exec(
        c,
        "CREATE TABLE acct (id int PRIMARY KEY, v int); \
         CREATE TABLE note (acct int, body text); \
         INSERT INTO acct VALUES (1, 10), (2, 20)",
    )
    .await;
}

async fn balances(c: &Client) -> Vec<(i32, i32)> {
    c.query("SELECT id, v FROM acct ORDER BY id", &[])
        .await
        .expect("read the balances")
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect()
}

#[test]
fn deferred_writes_are_read_back_and_committed() {
    with_server(|addr| async move {
        let (c, _conn) = connect(addr).await;
        let (other, _conn2) = connect(addr).await;
        setup(&c).await;
        exec(&c, "BEGIN").await;
        exec(&c, "UPDATE acct SET v = v + 5 WHERE id = 1").await;
        exec(&c, "INSERT INTO note VALUES (1, 'five')").await;
        exec(&c, "UPDATE acct SET v = v + 1 WHERE id = 2").await;
        assert_eq!(balances(&other).await, [(1, 10), (2, 20)]);
        assert_eq!(count(&other, "SELECT count(*) FROM note").await, 0);
        assert_eq!(count(&c, "SELECT count(*) FROM note").await, 1);
        assert_eq!(balances(&c).await, [(1, 15), (2, 21)]);
        // A second write of the row (folded into the first), then more after the view.
        exec(&c, "UPDATE acct SET v = v * 2 WHERE id = 1").await;
        exec(&c, "INSERT INTO note VALUES (2, 'one')").await;
        exec(&c, "UPDATE acct SET v = v + 100 WHERE id = 2").await;
        assert_eq!(balances(&c).await, [(1, 30), (2, 121)]);
        assert_eq!(
            count(&c, "SELECT count(*) FROM note WHERE body = 'one'").await,
            1
        );
        exec(&c, "COMMIT").await;
        assert_eq!(balances(&other).await, [(1, 30), (2, 121)]);
        assert_eq!(count(&other, "SELECT count(*) FROM note").await, 2);
    });
}

#[test]
fn a_write_that_can_fail_is_checked_by_its_statement() {
    with_server(|addr| async move {
        let (c, _conn) = connect(addr).await;
        setup(&c).await;
        exec(&c, "BEGIN").await;
        exec(&c, "UPDATE acct SET v = 0 WHERE id = 1").await;
        exec(&c, "INSERT INTO note VALUES (1, 'zero')").await;
        let e = c
            .execute("UPDATE acct SET id = 2 WHERE id = 1", &[])
            .await
            .unwrap_err();
        assert_eq!(
            sqlstate(&e),
            "23505",
            "the key's UPDATE fails by itself: {e:?}"
        );
        let e = c.execute("SELECT 1", &[]).await.unwrap_err();
        assert_eq!(sqlstate(&e), "25P02");
        exec(&c, "ROLLBACK").await;
        assert_eq!(balances(&c).await, [(1, 10), (2, 20)]);
        assert_eq!(count(&c, "SELECT count(*) FROM note").await, 0);

        exec(&c, "BEGIN").await;
        exec(&c, "UPDATE acct SET v = 1 WHERE id = 2").await;
        let e = c
            .execute("INSERT INTO acct VALUES (2, 0)", &[])
            .await
            .unwrap_err();
        assert_eq!(
            sqlstate(&e),
            "23505",
            "a taken key, after a deferred write: {e:?}"
        );
        exec(&c, "ROLLBACK").await;
        exec(&c, "BEGIN").await;
        exec(&c, "UPDATE acct SET v = 2 WHERE id = 2").await;
        exec(&c, "INSERT INTO acct VALUES (3, 30)").await;
        exec(&c, "COMMIT").await;
        assert_eq!(balances(&c).await, [(1, 10), (2, 2), (3, 30)]);
    });
}
