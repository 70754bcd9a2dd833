//! The bootstrap transaction (t 0): the system attributes and idents every database starts
//! with. Their ids are fixed (`vev_core::schema::sys`), so they are the same in every database.

use std::sync::Arc;

use vev_core::ids::tx_id;
use vev_core::schema::{sys, Attribute, Cardinality, Schema, TupleSpec, Unique, ValueType};
use vev_core::{Datom, IndexOrder, Keyword, Value};

use crate::db::{Db, Indexes, State};
use crate::tree::{Change, Tree};

struct SysAttr {
    id: u64,
    ident: &'static str,
    value_type: ValueType,
    unique: Option<Unique>,
    tuple: Option<TupleSpec>,
}

fn sys_attrs() -> Vec<SysAttr> {
    let a = |id, ident, value_type| SysAttr {
        id,
        ident,
        value_type,
        unique: None,
        tuple: None,
    };
    vec![
        SysAttr {
            unique: Some(Unique::Identity),
            ..a(sys::IDENT, "db/ident", ValueType::Keyword)
        },
        a(sys::VALUE_TYPE, "db/valueType", ValueType::Ref),
        a(sys::CARDINALITY, "db/cardinality", ValueType::Ref),
        a(sys::UNIQUE, "db/unique", ValueType::Ref),
        a(sys::IS_COMPONENT, "db/isComponent", ValueType::Boolean),
        a(sys::INDEX, "db/index", ValueType::Boolean),
        a(sys::FULLTEXT, "db/fulltext", ValueType::Boolean),
        a(sys::NO_HISTORY, "db/noHistory", ValueType::Boolean),
        a(sys::DOC, "db/doc", ValueType::String),
        a(sys::TX_INSTANT, "db/txInstant", ValueType::Instant),
        SysAttr {
            tuple: Some(TupleSpec::Homogeneous(ValueType::Keyword)),
            ..a(sys::TUPLE_ATTRS, "db/tupleAttrs", ValueType::Tuple)
        },
        a(sys::TUPLE_TYPE, "db/tupleType", ValueType::Ref),
        SysAttr {
            tuple: Some(TupleSpec::Homogeneous(ValueType::Keyword)),
            ..a(sys::TUPLE_TYPES, "db/tupleTypes", ValueType::Tuple)
        },
    ]
}

fn sys_idents() -> Vec<(u64, String)> {
    let mut out: Vec<(u64, String)> = [
        (sys::CARDINALITY_ONE, "db.cardinality/one"),
        (sys::CARDINALITY_MANY, "db.cardinality/many"),
        (sys::UNIQUE_IDENTITY, "db.unique/identity"),
        (sys::UNIQUE_VALUE, "db.unique/value"),
        (sys::PART_DB, "db.part/db"),
        (sys::PART_TX, "db.part/tx"),
        (sys::PART_USER, "db.part/user"),
        (sys::FN_ADD, "db/add"),
        (sys::FN_RETRACT, "db/retract"),
        (sys::FN_RETRACT_ENTITY, "db/retractEntity"),
        (sys::FN_CAS, "db/cas"),
    ]
    .iter()
    .map(|(id, s)| (*id, s.to_string()))
    .collect();
    for t in ValueType::ALL {
        out.push((t.entity_id(), format!("db.type/{}", t.name())));
    }
    out
}

pub(crate) fn empty_db() -> Db {
    let tx = tx_id(0);
    let mut schema = Schema::default();
    let mut datoms = vec![Datom::new(tx, sys::TX_INSTANT, Value::Instant(0), tx, true)];
    for (id, ident) in sys_idents() {
        schema.set_ident(id, Keyword::new(&ident));
        datoms.push(Datom::new(id, sys::IDENT, Value::keyword(&ident), tx, true));
    }
    for attr in sys_attrs() {
        let ident = Keyword::new(attr.ident);
        schema.set_ident(attr.id, ident.clone());
        datoms.push(Datom::new(
            attr.id,
            sys::IDENT,
            Value::Keyword(ident.clone()),
            tx,
            true,
        ));
        let vt = Value::Ref(attr.value_type.entity_id());
        datoms.push(Datom::new(attr.id, sys::VALUE_TYPE, vt, tx, true));
        datoms.push(Datom::new(
            attr.id,
            sys::CARDINALITY,
            Value::Ref(sys::CARDINALITY_ONE),
            tx,
            true,
        ));
        if attr.unique.is_some() {
            datoms.push(Datom::new(
                attr.id,
                sys::UNIQUE,
                Value::Ref(sys::UNIQUE_IDENTITY),
                tx,
                true,
            ));
        }
        if let Some(TupleSpec::Homogeneous(t)) = &attr.tuple {
            datoms.push(Datom::new(
                attr.id,
                sys::TUPLE_TYPE,
                Value::Ref(t.entity_id()),
                tx,
                true,
            ));
        }
        schema.install(Attribute {
            id: attr.id,
            ident,
            value_type: attr.value_type,
            cardinality: Cardinality::One,
            unique: attr.unique,
            is_component: false,
            index: attr.id == sys::TX_INSTANT,
            fulltext: false,
            no_history: false,
            tuple: attr.tuple,
        });
    }
    let changes: Vec<Change> = datoms
        .iter()
        .map(|d| Change {
            datom: d.clone(),
            insert: true,
        })
        .collect();
    let is_ref = |a: u64| schema.attribute(a).is_some_and(|x| x.is_ref());
    let current = Indexes::new().apply(changes.clone(), is_ref);
    let log = crate::db::apply_sorted(&Tree::new(IndexOrder::Log), changes);
    Db::from_state(State {
        current,
        retired: Indexes::new(),
        log,
        schema: Arc::new(schema),
        basis_t: 0,
        next_user: 1,
        last_instant: 0,
    })
}
