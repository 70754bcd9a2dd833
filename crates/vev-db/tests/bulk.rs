//! `Bulk` against the transactor: a random stream of transactions applied through a bulk
//! import (which sets AVET entries of non-unique attributes aside and merges them in
//! batches) and one `transact` at a time must give the same transaction data, the same
//! tempids, the same errors at the same place, and the same database: every index of the
//! current and history views, datom for datom.
//!
//! The streams make the set-aside entries matter: values inserted and retracted again before
//! a merge, merges every few changes, transaction functions that read AVET of a non-unique
//! attribute (the import must merge first), and alterations that make an attribute unique
//! (legal only when its values already are, which the alteration checks in AVET).

use proptest::prelude::*;
use vev_core::{parse_tx, Component, Datom, Edn, IndexOrder, Keyword, TxOp, Value};
use vev_db::{transact, Bulk, Db, TxContext, TxFunctions};

const SCHEMA: &str = r#"[
  {:db/ident :b/name :db/valueType :db.type/string :db/cardinality :db.cardinality/one}
  {:db/ident :b/n    :db/valueType :db.type/long   :db/cardinality :db.cardinality/one}
  {:db/ident :b/tags :db/valueType :db.type/string :db/cardinality :db.cardinality/many}
  {:db/ident :b/key  :db/valueType :db.type/string :db/cardinality :db.cardinality/one
   :db/unique :db.unique/identity}
  {:db/ident :b/ref  :db/valueType :db.type/ref    :db/cardinality :db.cardinality/one}]"#;

/// `[:fn/count-name "x"]` asserts, on a new entity, how many AVET datoms name `"x"`: a
/// function that reads set-aside entries if the import did not merge them first.
struct Functions;

impl TxFunctions for Functions {
    fn call(&self, name: &Keyword, db: &Db, args: &[Edn]) -> Option<Result<Vec<TxOp>, String>> {
        if name.as_str() != "fn/count-name" {
            return None;
        }
        let Some(Edn::String(s)) = args.first() else {
            return Some(Err("count-name takes a string".into()));
        };
        let a = db.entid(&Keyword::new("b/name")).expect("schema");
        let n = db
            .datoms(
                IndexOrder::Avet,
                &[
                    Component::Entity(a),
                    Component::Value(Value::String(s.as_str().into())),
                ],
            )
            .count();
        Some(Ok(ops(&format!(r#"[{{:b/n {n} :b/tags "count"}}]"#))))
    }
}

fn ops(text: &str) -> Vec<TxOp> {
    parse_tx(text)
        .expect("test transactions parse")
        .into_iter()
        .map(|s| s.op)
        .collect()
}

/// One operation of a generated transaction, over small value domains so that values repeat,
/// get replaced and retracted, and upserts find their entity.
#[derive(Clone, Debug)]
enum Op {
    /// A new (or upserted, by `:b/key`) entity.
    Entity {
        key: u8,
        name: u8,
        n: u8,
        tags: Vec<u8>,
    },
    /// Replace the name of the entity with `:b/key` `key`.
    Rename {
        key: u8,
        name: u8,
    },
    /// Retract one tag.
    Untag {
        key: u8,
        tag: u8,
    },
    RetractEntity {
        key: u8,
    },
    /// Point `from`'s `:b/ref` at `to`.
    Link {
        from: u8,
        to: u8,
    },
    CountName {
        name: u8,
    },
    /// Make `:b/name` unique (fails while two entities share a name).
    NameUnique,
    /// And not unique again.
    NameNotUnique,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0..12u8, 0..6u8, 0..4u8, prop::collection::vec(0..4u8, 0..3))
            .prop_map(|(key, name, n, tags)| Op::Entity { key, name, n, tags }),
        3 => (0..12u8, 0..6u8).prop_map(|(key, name)| Op::Rename { key, name }),
        2 => (0..12u8, 0..4u8).prop_map(|(key, tag)| Op::Untag { key, tag }),
        1 => (0..12u8).prop_map(|key| Op::RetractEntity { key }),
        2 => (0..12u8, 0..12u8).prop_map(|(from, to)| Op::Link { from, to }),
        1 => (0..6u8).prop_map(|name| Op::CountName { name }),
        1 => Just(Op::NameUnique),
        1 => Just(Op::NameNotUnique),
    ]
}

fn edn(op: &Op) -> String {
    match op {
        Op::Entity { key, name, n, tags } => {
            let tags: Vec<String> = tags.iter().map(|t| format!("\"t{t}\"")).collect();
            format!(
                r#"{{:b/key "k{key}" :b/name "name-{name}" :b/n {n} :b/tags [{}]}}"#,
                tags.join(" ")
            )
        }
        Op::Rename { key, name } => format!(r#"[:db/add [:b/key "k{key}"] :b/name "name-{name}"]"#),
        Op::Untag { key, tag } => format!(r#"[:db/retract [:b/key "k{key}"] :b/tags "t{tag}"]"#),
        Op::RetractEntity { key } => format!(r#"[:db/retractEntity [:b/key "k{key}"]]"#),
        Op::Link { from, to } => {
            format!(r#"[:db/add [:b/key "k{from}"] :b/ref [:b/key "k{to}"]]"#)
        }
        Op::CountName { name } => format!(r#"[:fn/count-name "name-{name}"]"#),
        Op::NameUnique => "[[:db/add :b/name :db/unique :db.unique/value]]".into(),
        Op::NameNotUnique => "[[:db/retract :b/name :db/unique :db.unique/value]]".into(),
    }
}

/// A transaction's text: schema alterations stand alone, everything else is a vector.
/// Operations that name an entity by a key `db` does not hold are left out (a lookup ref
/// that resolves to nothing fails the transaction, which would end most streams early).
fn tx_text(db: &Db, tx: &[Op]) -> String {
    if let [one @ (Op::NameUnique | Op::NameNotUnique)] = tx {
        return edn(one);
    }
    let key_attr = db.entid(&Keyword::new("b/key")).expect("schema");
    let exists = |k: &u8| {
        db.entity_with_value(key_attr, &Value::String(format!("k{k}").into()))
            .expect("in memory")
            .is_some()
    };
    let body: Vec<String> = tx
        .iter()
        .filter(|op| match op {
            Op::NameUnique | Op::NameNotUnique => false,
            Op::Rename { key, .. } | Op::Untag { key, .. } | Op::RetractEntity { key } => {
                exists(key)
            }
            Op::Link { from, to } => exists(from) && exists(to),
            Op::Entity { .. } | Op::CountName { .. } => true,
        })
        .map(edn)
        .collect();
    format!("[{}]", body.join(" "))
}

fn ctx(i: usize) -> TxContext<'static> {
    TxContext {
        functions: &Functions,
        now_ms: 1_700_000_000_000 + i as i64,
        speculative: false,
    }
}

fn all(db: &Db, order: IndexOrder) -> Vec<Datom> {
    db.datoms(order, &[])
        .collect::<Result<_, _>>()
        .expect("in memory")
}

fn same_db(bulk: &Db, one_by_one: &Db) -> Result<(), TestCaseError> {
    for order in [
        IndexOrder::Eavt,
        IndexOrder::Aevt,
        IndexOrder::Avet,
        IndexOrder::Vaet,
    ] {
        prop_assert_eq!(
            all(bulk, order),
            all(one_by_one, order),
            "current {:?}",
            order
        );
        prop_assert_eq!(
            all(&bulk.history(), order),
            all(&one_by_one.history(), order),
            "history {:?}",
            order
        );
    }
    prop_assert_eq!(bulk.basis_t(), one_by_one.basis_t());
    prop_assert_eq!(bulk.next_user(), one_by_one.next_user());
    Ok(())
}

fn schema_db() -> Db {
    transact(&Db::empty(), &ops(SCHEMA), &ctx(0))
        .expect("schema")
        .db_after
}

/// Run `txs` both ways, with merges once `merge_at` changes are set aside, sorted on other
/// threads in chunks of `sort_chunk`.
fn check(txs: &[Vec<Op>], merge_at: usize, sort_chunk: usize) -> Result<(), TestCaseError> {
    let mut db = schema_db();
    let mut bulk = Some(
        Bulk::new(schema_db())
            .merge_at(merge_at)
            .sort_chunks_of(sort_chunk),
    );
    for (i, tx) in txs.iter().enumerate() {
        let text = tx_text(&db, tx);
        let tx_ops = ops(&text);
        let expected = transact(&db, &tx_ops, &ctx(i + 1));
        let got = bulk
            .take()
            .expect("the import goes on")
            .transact(&tx_ops, &ctx(i + 1));
        match (expected, got) {
            (Ok(report), Ok((next, done))) => {
                bulk = Some(next);
                prop_assert_eq!(&done.tx_data, &report.tx_data, "tx {}: {}", i, text);
                prop_assert_eq!(&done.tempids, &report.tempids, "tx {}: {}", i, text);
                db = report.db_after;
            }
            (Err(want), Err(err)) => {
                prop_assert_eq!(err.code(), want.code(), "tx {}: {}", i, text);
                // The import is over; everything before agreed.
                return Ok(());
            }
            (want, got) => prop_assert!(
                false,
                "tx {i}: {text}: one by one {:?}, bulk {:?}",
                want.map(|r| r.tx_data).map_err(|e| e.code()),
                got.map(|(_, r)| r.tx_data).map_err(|e| e.code())
            ),
        }
    }
    same_db(&bulk.expect("the import goes on").finish(), &db)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(
        std::env::var("VEV_PROPTEST_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(64)
    ))]

    #[test]
    fn a_bulk_import_matches_one_transaction_at_a_time(
        txs in prop::collection::vec(prop::collection::vec(op(), 1..6), 1..40),
        merge_at in prop_oneof![Just(1usize), Just(7), Just(MERGE_AT_END)],
        sort_chunk in prop_oneof![Just(1usize), Just(3), Just(MERGE_AT_END)],
    ) {
        check(&txs, merge_at, sort_chunk)?;
    }
}

/// `merge_at` for no merge before the end of these short imports.
const MERGE_AT_END: usize = 1 << 20;

/// A transaction of one new entity with a key and a name.
fn named(key: u8, name: u8) -> Vec<Op> {
    vec![Op::Entity {
        key,
        name,
        n: 0,
        tags: vec![],
    }]
}

/// A transaction function reads AVET of a non-unique attribute: the import merges first.
#[test]
fn a_transaction_function_sees_set_aside_entries() {
    let txs = vec![named(1, 3), named(2, 3), vec![Op::CountName { name: 3 }]];
    for chunk in [1, MERGE_AT_END] {
        check(&txs, MERGE_AT_END, chunk).unwrap();
    }
}

/// Making an attribute unique checks its values in AVET: the import merges first.
#[test]
fn an_alteration_to_unique_sees_set_aside_entries() {
    let duplicate = vec![named(1, 3), named(2, 3), vec![Op::NameUnique]];
    let distinct = vec![named(1, 3), named(2, 4), vec![Op::NameUnique], named(3, 4)];
    for chunk in [1, MERGE_AT_END] {
        check(&duplicate, MERGE_AT_END, chunk).unwrap();
        check(&distinct, MERGE_AT_END, chunk).unwrap();
    }
}

/// A value asserted and retracted again before any merge leaves no AVET entry.
#[test]
fn an_entry_added_and_retracted_between_merges_is_gone() {
    let txs = vec![
        vec![Op::Entity {
            key: 1,
            name: 3,
            n: 0,
            tags: vec![1],
        }],
        vec![Op::Rename { key: 1, name: 4 }],
        vec![Op::Untag { key: 1, tag: 1 }],
        vec![Op::RetractEntity { key: 1 }],
    ];
    // Also with each transaction's set-aside changes sorted on a thread of their own, so
    // that the insert and the removals are in different runs.
    for chunk in [1, MERGE_AT_END] {
        check(&txs, MERGE_AT_END, chunk).unwrap();
    }
}

/// `Value::sort_key` never contradicts `Value::cmp`, and settles exactly what it claims to.
#[test]
fn sort_keys_agree_with_value_order() {
    let strings = [
        "",
        "a",
        "a\0",
        "ab",
        "abcdefghijklmno",
        "abcdefghijklmnop",
        "abcdefghijklmnoq",
        "abcdefghijklmno\0",
        "é",
        "z",
    ];
    let mut values: Vec<Value> = strings.iter().map(|s| Value::String((*s).into())).collect();
    values.extend(strings.iter().map(|s| Value::Uri((*s).into())));
    values.extend(strings.iter().map(|s| Value::Bytes(s.as_bytes().into())));
    for n in [i64::MIN, -2, -1, 0, 1, 2, i64::MAX] {
        values.extend([Value::Long(n), Value::Instant(n)]);
    }
    values.extend([
        Value::Ref(0),
        Value::Ref(7),
        Value::Ref(u64::MAX),
        Value::Boolean(false),
        Value::Boolean(true),
    ]);
    values.extend([
        Value::Double(-1.5),
        Value::Double(2.0),
        Value::Uuid([0; 16]),
        Value::Uuid([255; 16]),
    ]);
    values.extend([Value::Keyword(Keyword::new("a/b")), Value::Nil]);
    for x in &values {
        for y in &values {
            let (kx, ky) = (x.sort_key(), y.sort_key());
            if let Some(ord) = kx.cmp_known(&ky) {
                assert_eq!(ord, x.cmp(y), "{x:?} vs {y:?}");
            }
        }
    }
}
