//! The facade's Rust API: Rust-built transaction data, transaction functions, the change
//! feed, speculative `with`, error spans, and concurrent readers.

use std::sync::Arc;
use std::thread;

use vev::{Connection, Db, Edn, EntityRef, Keyword, TxMap, TxOp, TxValue, Value};

const SCHEMA: &str = r#"[
  {:db/ident :account/id :db/valueType :db.type/string :db/cardinality :db.cardinality/one
   :db/unique :db.unique/identity}
  {:db/ident :account/balance :db/valueType :db.type/long :db/cardinality :db.cardinality/one}
  {:db/ident :audit/note :db/valueType :db.type/string :db/cardinality :db.cardinality/one}]"#;

fn kw(s: &str) -> Keyword {
    Keyword::new(s)
}

fn balance(db: &Db, id: &str) -> Option<i64> {
    let e = db.attribute(&kw("account/id")).map(|a| a.id)?;
    let holder = db.entity_with_value(e, &Value::string(id)).unwrap()?;
    db.entity(holder)
        .get(&kw("account/balance"))
        .unwrap()?
        .as_long()
}

fn bank() -> Connection {
    let conn = Connection::open_in_memory();
    conn.transact_edn(SCHEMA).unwrap();
    conn.transact_edn(
        r#"[{:account/id "a" :account/balance 100} {:account/id "b" :account/balance 0}]"#,
    )
    .unwrap();
    conn
}

fn register_transfer(conn: &Connection) {
    conn.register_fn("bank/transfer", |db: &Db, args: &[Edn]| {
        let [Edn::String(from), Edn::String(to), Edn::Integer(amount)] = args else {
            return Err(format!(
                "expected [from to amount], got {} arguments",
                args.len()
            ));
        };
        let from_balance = balance(db, from).ok_or_else(|| format!("no account {from:?}"))?;
        let to_balance = balance(db, to).ok_or_else(|| format!("no account {to:?}"))?;
        if from_balance < *amount {
            return Err(format!(
                "insufficient funds in {from:?}: {from_balance} < {amount}"
            ));
        }
        let lookup = |id: &str| {
            EntityRef::LookupRef(
                kw("account/id"),
                Box::new(TxValue::Value(Value::string(id))),
            )
        };
        Ok(vec![
            TxOp::Cas {
                e: lookup(from),
                a: "account/balance".into(),
                old: Some(Value::Long(from_balance).into()),
                new: Value::Long(from_balance - amount).into(),
            },
            TxOp::add(
                lookup(to),
                "account/balance",
                Value::Long(to_balance + amount),
            ),
        ])
    });
}

#[test]
fn transaction_functions_see_db_before_and_expand() {
    let conn = bank();
    register_transfer(&conn);
    conn.transact_edn(
        r#"[[:bank/transfer "a" "b" 30] [:db/add "datomic.tx" :audit/note "payday"]]"#,
    )
    .unwrap();
    let db = conn.db();
    assert_eq!(balance(&db, "a"), Some(70));
    assert_eq!(balance(&db, "b"), Some(30));
    let err = conn
        .transact_edn(r#"[[:bank/transfer "a" "b" 1000]]"#)
        .unwrap_err();
    assert_eq!(err.code(), "tx/function-failed");
    assert!(err.to_string().contains("insufficient funds"), "{err}");
    assert_eq!(
        conn.db().basis_t(),
        db.basis_t(),
        "a failed transaction changes nothing"
    );
    let err = conn.transact_edn(r#"[[:bank/no-such-fn 1]]"#).unwrap_err();
    assert_eq!(err.code(), "tx/unknown-function");
}

#[test]
fn rust_built_transaction_data() {
    let conn = Connection::open_in_memory();
    conn.transact_edn(SCHEMA).unwrap();
    let ops = vec![TxOp::Map(
        TxMap::new(Some(EntityRef::tempid("acc")))
            .with("account/id", "x")
            .with("account/balance", Value::Long(5)),
    )];
    let report = conn.transact(&ops).unwrap();
    let e = report.tempid("acc").unwrap();
    assert_eq!(
        conn.db().entity(e).get(&kw("account/balance")).unwrap(),
        Some(Value::Long(5))
    );
    // A tempid as the value of a non-ref attribute is a typed error.
    let bad = vec![TxOp::add(
        EntityRef::Id(e),
        "account/balance",
        TxValue::Entity(EntityRef::tempid("t")),
    )];
    assert_eq!(conn.transact(&bad).unwrap_err().code(), "tx/tempid-not-ref");
}

#[test]
fn change_feed_delivers_every_report_in_order() {
    let conn = bank();
    let feed = conn.subscribe();
    let writer = conn.clone();
    let handle = thread::spawn(move || {
        for i in 0..50 {
            writer
                .transact_edn(&format!(r#"[{{:account/id "a" :account/balance {i}}}]"#))
                .unwrap();
        }
    });
    handle.join().unwrap();
    let ts: Vec<u64> = feed.try_iter().map(|r| r.db_after.basis_t()).collect();
    assert_eq!(ts.len(), 50);
    assert!(ts.windows(2).all(|w| w[1] == w[0] + 1), "{ts:?}");
}

#[test]
fn with_is_speculative() {
    let conn = bank();
    let before = conn.db();
    let report = conn
        .with_edn(&before, r#"[{:account/id "a" :account/balance 1}]"#)
        .unwrap();
    assert_eq!(balance(&report.db_after, "a"), Some(1));
    assert_eq!(balance(&conn.db(), "a"), Some(100));
    assert_eq!(conn.db().basis_t(), before.basis_t());
}

#[test]
fn malformed_text_errors_carry_spans() {
    let conn = bank();
    let err = conn
        .transact_edn("[[:db/add \"x\" :account/id]\n [:db/add]]")
        .unwrap_err();
    assert_eq!(err.code(), "tx/malformed-form");
    let vev::Error::Tx(tx) = &err else {
        panic!("{err:?}")
    };
    let span = tx.span().expect("a span");
    assert_eq!((span.start.line, span.start.column), (1, 2));
    let err = conn.transact_edn("[{:account/id \"x\"").unwrap_err();
    assert_eq!(err.code(), "edn/unexpected-eof");
}

#[test]
fn db_values_are_send_sync_and_readers_run_during_writes() {
    fn assert_send_sync<T: Send + Sync + Clone>() {}
    assert_send_sync::<Db>();
    assert_send_sync::<Connection>();
    let conn = bank();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    // Readers that have read once: the writer starts only when both run (on a loaded
    // machine a reader thread may otherwise first run after the writes are done).
    let started = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let conn = conn.clone();
            let (stop, started) = (stop.clone(), started.clone());
            thread::spawn(move || {
                let mut last = 0;
                let mut reads = 0u64;
                loop {
                    let db = conn.db();
                    assert!(db.basis_t() >= last, "basis-t never goes back");
                    last = db.basis_t();
                    assert!(balance(&db, "a").is_some());
                    reads += 1;
                    if reads == 1 {
                        started.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    }
                    if stop.load(std::sync::atomic::Ordering::Relaxed) {
                        return reads;
                    }
                }
            })
        })
        .collect();
    while started.load(std::sync::atomic::Ordering::SeqCst) < 2 {
        thread::yield_now();
    }
    for i in 0..200 {
        conn.transact_edn(&format!(r#"[{{:account/id "a" :account/balance {i}}}]"#))
            .unwrap();
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for r in readers {
        assert!(r.join().unwrap() > 0);
    }
}

#[test]
fn old_db_values_stay_unchanged() {
    let conn = bank();
    let old = conn.db();
    let count = |db: &Db| db.datoms(vev::IndexOrder::Eavt, &[]).count();
    let n = count(&old);
    for i in 0..100 {
        conn.transact_edn(&format!(r#"[{{:account/id "n{i}" :account/balance {i}}}]"#))
            .unwrap();
    }
    assert_eq!(count(&old), n);
    assert_eq!(balance(&old, "n5"), None);
    assert_eq!(balance(&conn.db(), "n5"), Some(5));
}

#[test]
fn tx_log_and_time_points() {
    let conn = bank();
    let t = conn.db().basis_t();
    conn.transact_edn(r#"[{:account/id "a" :account/balance 7}]"#)
        .unwrap();
    let db = conn.db();
    let log = db.tx_range(Some(t), None).unwrap();
    assert_eq!(log.len(), 2);
    assert_eq!(log[1].t, t + 1);
    // txInstant + retraction of 100 + assertion of 7
    assert_eq!(log[1].datoms.len(), 3);
    let tx = vev::ids::tx_id(t);
    assert_eq!(balance(&db.as_of(vev::TimePoint::Tx(tx)), "a"), Some(100));
    assert_eq!(balance(&db.as_of(t), "a"), Some(100));
    assert_eq!(
        db.since(t)
            .datoms(vev::IndexOrder::Eavt, &[])
            .map(Result::unwrap)
            .filter(|d| d.a != vev::schema::sys::TX_INSTANT)
            .count(),
        1
    );
}
