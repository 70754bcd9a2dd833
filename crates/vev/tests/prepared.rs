//! `Connection::prepare` and `transact_prepared`: a transaction applied ahead of its commit
//! is committed as it is only when nothing changed since; otherwise it is applied again.
//!
//! Whether the commit applied the operations again is seen through a transaction function
//! that counts its calls: once means the prepared result was committed, twice that the
//! operations ran again.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use vev::{Connection, Db, Edn, Keyword, TxOp, Value};

const SCHEMA: &str = r#"[{:db/ident :p/id :db/valueType :db.type/string :db/cardinality :db.cardinality/one :db/unique :db.unique/value}
 {:db/ident :p/n :db/valueType :db.type/long :db/cardinality :db.cardinality/one}]"#;

fn ops(text: &str) -> Vec<TxOp> {
    vev::tx_from_edn(&vev::edn::parse(text).unwrap()).unwrap()
}

/// A connection with the schema and `:p/add`, a function adding `{:p/id id :p/n n}` that
/// counts its calls in the returned counter.
fn setup(conn: &Connection) -> Arc<AtomicUsize> {
    conn.transact_edn(SCHEMA).unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let counter = calls.clone();
    conn.register_fn("p/add", move |_, args| {
        counter.fetch_add(1, Ordering::SeqCst);
        let (Some(Edn::String(id)), Some(Edn::Integer(n))) = (args.first(), args.get(1)) else {
            return Err(format!("bad arguments {args:?}"));
        };
        Ok(ops(&format!(r#"[{{:p/id "{id}" :p/n {n}}}]"#)))
    });
    calls
}

/// `:p/n` of the entity with `:p/id id`.
fn n_of(db: &Db, id: &str) -> Option<i64> {
    let a = db.attribute(&Keyword::new("p/id"))?.id;
    let n = db.attribute(&Keyword::new("p/n"))?.id;
    let e = db.entity_with_value(a, &Value::string(id)).unwrap()?;
    match db.values(e, n).unwrap().first() {
        Some(Value::Long(v)) => Some(*v),
        _ => None,
    }
}

#[test]
fn a_prepared_transaction_commits_as_prepared_when_nothing_changed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.vev");
    let conn = Connection::open(&path).unwrap();
    let calls = setup(&conn);
    let tx = ops(r#"[[:p/add "a" 1] {:p/id "b" :p/n 2}]"#);
    let prepared = conn.prepare(&conn.db(), &tx).unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    let expected = prepared.report().tx_data.clone();
    let t = prepared.report().db_after.basis_t();
    let report = conn.transact_prepared(&tx, prepared).unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 1, "the operations ran again");
    assert_eq!(report.tx_data, expected);
    assert_eq!(conn.db().basis_t(), t);
    assert_eq!(n_of(&conn.db(), "a"), Some(1));
    // It is durable: in the log, as any transaction.
    drop(conn);
    let conn = Connection::open(&path).unwrap();
    assert_eq!(conn.db().basis_t(), t);
    assert_eq!(n_of(&conn.db(), "b"), Some(2));
}

#[test]
fn a_commit_in_between_makes_the_operations_run_again() {
    let conn = Connection::open_in_memory();
    let calls = setup(&conn);
    let tx = ops(r#"[[:p/add "a" 1]]"#);
    let prepared = conn.prepare(&conn.db(), &tx).unwrap();
    let before = conn.db().basis_t();
    conn.transact_edn(r#"[{:p/id "other" :p/n 9}]"#).unwrap();
    let report = conn.transact_prepared(&tx, prepared).unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    assert_eq!(report.db_after.basis_t(), before + 2);
    assert_eq!(n_of(&conn.db(), "a"), Some(1));
    assert_eq!(n_of(&conn.db(), "other"), Some(9));
}

#[test]
fn a_conflict_committed_in_between_fails_the_prepared_transaction() {
    let conn = Connection::open_in_memory();
    setup(&conn);
    let tx = ops(r#"[{:p/id "x" :p/n 1}]"#);
    let prepared = conn.prepare(&conn.db(), &tx).unwrap();
    conn.transact_edn(r#"[{:p/id "x" :p/n 2}]"#).unwrap();
    let err = conn.transact_prepared(&tx, prepared).unwrap_err();
    assert!(err.to_string().contains("x"), "{err}");
    assert_eq!(n_of(&conn.db(), "x"), Some(2));
}

#[test]
fn a_function_registered_in_between_makes_the_operations_run_again() {
    let conn = Connection::open_in_memory();
    let calls = setup(&conn);
    let tx = ops(r#"[[:p/add "a" 1]]"#);
    let prepared = conn.prepare(&conn.db(), &tx).unwrap();
    conn.register_fn("p/other", |_, _| Ok(Vec::new()));
    conn.transact_prepared(&tx, prepared).unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    assert_eq!(n_of(&conn.db(), "a"), Some(1));
}

#[test]
fn other_operations_than_the_prepared_ones_are_applied_as_given() {
    let conn = Connection::open_in_memory();
    setup(&conn);
    let prepared = conn
        .prepare(&conn.db(), &ops(r#"[{:p/id "a" :p/n 1}]"#))
        .unwrap();
    let given = ops(r#"[{:p/id "b" :p/n 2} {:p/id "c" :p/n 3}]"#);
    conn.transact_prepared(&given, prepared).unwrap();
    assert_eq!(n_of(&conn.db(), "a"), None);
    assert_eq!(n_of(&conn.db(), "b"), Some(2));
    assert_eq!(n_of(&conn.db(), "c"), Some(3));
}

#[test]
fn a_prepared_transaction_on_a_checkpointed_database_runs_again() {
    let dir = tempfile::tempdir().unwrap();
    let conn = Connection::open(dir.path().join("c.vev")).unwrap();
    let calls = setup(&conn);
    let tx = ops(r#"[[:p/add "a" 1]]"#);
    let prepared = conn.prepare(&conn.db(), &tx).unwrap();
    // A checkpoint publishes the same transactions as another value.
    conn.checkpoint().unwrap();
    conn.transact_prepared(&tx, prepared).unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    assert_eq!(n_of(&conn.db(), "a"), Some(1));
}
