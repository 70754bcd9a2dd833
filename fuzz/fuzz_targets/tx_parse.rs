//! Fuzz the transaction parser and the transactor: arbitrary text is read as transaction data
//! and, when it reads, transacted against a small schema. Nothing may panic; a rejected
//! transaction must leave the database unchanged.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;

const SCHEMA: &str = r#"[
 {:db/ident :p/name :db/valueType :db.type/string :db/cardinality :db.cardinality/one :db/unique :db.unique/identity}
 {:db/ident :p/age :db/valueType :db.type/long :db/cardinality :db.cardinality/one}
 {:db/ident :p/tags :db/valueType :db.type/keyword :db/cardinality :db.cardinality/many}
 {:db/ident :p/friend :db/valueType :db.type/ref :db/cardinality :db.cardinality/many}
 {:db/ident :p/home :db/valueType :db.type/ref :db/cardinality :db.cardinality/one :db/isComponent true}
 {:db/ident :p/pair :db/valueType :db.type/tuple :db/tupleTypes [:db.type/long :db.type/string] :db/cardinality :db.cardinality/one}
 {:db/ident :p/name+age :db/valueType :db.type/tuple :db/tupleAttrs [:p/name :p/age] :db/cardinality :db.cardinality/one}
 ]"#;

fn base() -> &'static vev::Db {
    static DB: OnceLock<vev::Db> = OnceLock::new();
    DB.get_or_init(|| {
        let conn = vev::Connection::open_in_memory();
        conn.transact_edn(SCHEMA).expect("schema");
        conn.transact_edn(
            r#"[{:db/id "a" :p/name "a" :p/age 1 :p/friend "b"} {:db/id "b" :p/name "b"}]"#,
        )
        .expect("data");
        conn.db()
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(ops) = vev::parse_tx(text) else { return };
    let ops: Vec<vev::TxOp> = ops.into_iter().map(|s| s.op).collect();
    let db = base();
    let conn = vev::Connection::from_db(db.clone());
    match conn.transact(&ops) {
        Ok(report) => assert_eq!(report.db_after.basis_t(), db.basis_t() + 1),
        Err(e) => {
            assert!(!e.code().is_empty());
            assert_eq!(conn.db().basis_t(), db.basis_t());
        }
    }
});
