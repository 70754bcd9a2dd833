//! The bootstrap transaction (t 0): the system attributes and idents every database starts
//! with. Their ids are fixed (`vev_core::schema::sys`), so they are the same in every database.

use std::sync::Arc;

use vev_core::ids::tx_id;
use vev_core::schema::{sys, Schema, TupleSpec};
use vev_core::{Datom, IndexOrder, Value};

use crate::db::{Db, State};
use crate::indexes::Indexes;
use crate::tree::{Bound, Change, Tree};

/// The bootstrap transaction's datoms (its `:db/txInstant` first).
pub(crate) fn datoms() -> Vec<Datom> {
    let tx = tx_id(0);
    let schema = Schema::system();
    let mut datoms = vec![Datom::new(tx, sys::TX_INSTANT, Value::Instant(0), tx, true)];
    for (ident, id) in schema.idents() {
        datoms.push(Datom::new(
            id,
            sys::IDENT,
            Value::Keyword(ident.clone()),
            tx,
            true,
        ));
    }
    for attr in schema.attributes() {
        let mut fact = |a, v| datoms.push(Datom::new(attr.id, a, Value::Ref(v), tx, true));
        fact(sys::VALUE_TYPE, attr.value_type.entity_id());
        fact(sys::CARDINALITY, sys::CARDINALITY_ONE);
        if attr.unique.is_some() {
            fact(sys::UNIQUE, sys::UNIQUE_IDENTITY);
        }
        if let Some(TupleSpec::Homogeneous(t)) = &attr.tuple {
            fact(sys::TUPLE_TYPE, t.entity_id());
        }
    }
    datoms
}

pub(crate) fn empty_db() -> Db {
    let schema = Schema::system();
    let datoms = datoms();
    let changes: Vec<Change> = datoms
        .iter()
        .map(|d| Change {
            datom: d.clone(),
            insert: true,
        })
        .collect();
    let is_ref = |a: u64| schema.attribute(a).is_some_and(|x| x.is_ref());
    let current = Indexes::new().apply(changes.clone(), is_ref, None, Bound::Shared);
    let log = crate::indexes::apply_sorted(Tree::new(IndexOrder::Log), changes, Bound::Shared);
    Db::from_state(State {
        current,
        retired: Indexes::new(),
        log,
        log_stored: None,
        schema: Arc::new(schema),
        basis_t: 0,
        next_user: 1,
        last_instant: 0,
        segments: None,
        fulltext: Default::default(),
        free_beside: Default::default(),
    })
}
