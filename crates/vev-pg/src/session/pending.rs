//! A transaction's pending writes: string tempids recorded both ways as `with` reports
//! them, resolved in later operations, and new operations folded into the pending ones
//! (`merge_ops`).

use std::collections::HashMap;
use std::sync::Arc;

use vev::{EntityId, EntityRef, TempId, TxOp};

/// Record a `with` report's string tempids, both ways.
pub(super) fn note_tempids(
    report: &vev::TxReport,
    tempids: &mut HashMap<EntityId, Arc<str>>,
    ids: &mut HashMap<Arc<str>, EntityId>,
) {
    for (t, e) in &report.tempids {
        if let TempId::Str(s) = t {
            tempids.insert(*e, s.clone());
            ids.insert(s.clone(), *e);
        }
    }
}

/// `op` with its references to entities created earlier in the view by their ids (an
/// extension of the view applies only the new operations, where those tempids are unknown).
pub(super) fn resolve_tempids(op: &TxOp, ids: &HashMap<Arc<str>, EntityId>) -> TxOp {
    let resolve = |e: &EntityRef| match e {
        EntityRef::TempId(TempId::Str(s)) => ids
            .get(&**s)
            .map_or_else(|| e.clone(), |id| EntityRef::Id(*id)),
        other => other.clone(),
    };
    match op {
        TxOp::Add { e, a, v } => TxOp::Add {
            e: resolve(e),
            a: a.clone(),
            v: v.clone(),
        },
        TxOp::Retract { e, a, v } => TxOp::Retract {
            e: resolve(e),
            a: a.clone(),
            v: v.clone(),
        },
        TxOp::RetractEntity { e } => TxOp::RetractEntity { e: resolve(e) },
        other => other.clone(),
    }
}

/// Which entity an operation's reference names, for folding a transaction's writes.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Key {
    Id(EntityId),
    Temp(String),
}

fn key_of(e: &EntityRef) -> Option<Key> {
    match e {
        EntityRef::Id(id) => Some(Key::Id(*id)),
        EntityRef::TempId(TempId::Str(s)) => Some(Key::Temp(s.to_string())),
        _ => None,
    }
}

/// Add a statement's writes to a transaction's, as the net effect: a later value of a
/// row's column replaces an earlier one (one transaction may assert one value per
/// cardinality-one attribute), and a row inserted then deleted in the transaction
/// disappears from it.
pub(super) fn merge_ops(pending: &mut Vec<TxOp>, new: Vec<TxOp>) -> bool {
    let mut folded = false;
    pending.reserve(new.len());
    for op in new {
        let before = pending.len();
        match &op {
            TxOp::Add { e, a, .. } | TxOp::Retract { e, a, .. } => {
                let (Some(k), vev::AttrRef::Ident(attr)) = (key_of(e), a) else {
                    pending.push(op);
                    continue;
                };
                folded |= drop_attr(pending, &k, attr);
                if matches!(op, TxOp::Retract { .. }) && matches!(k, Key::Temp(_)) {
                    // Nothing of a row inserted in this transaction is left to retract.
                    continue;
                }
                pending.push(op);
            }
            TxOp::RetractEntity { e } => {
                let Some(k) = key_of(e) else {
                    pending.push(op);
                    continue;
                };
                pending.retain(|p| !names_entity(p, &k));
                folded |= pending.len() != before;
                if matches!(k, Key::Id(_)) {
                    pending.push(op);
                }
            }
            _ => pending.push(op),
        }
    }
    folded
}

/// Whether `op` writes to entity `k` (a map of it, or an add or retract on it).
fn names_entity(op: &TxOp, k: &Key) -> bool {
    match op {
        TxOp::Map(m) => m.id.as_ref().and_then(key_of).as_ref() == Some(k),
        TxOp::Add { e, .. } | TxOp::Retract { e, .. } => key_of(e).as_ref() == Some(k),
        _ => false,
    }
}

/// Remove the pending writes of attribute `attr` of entity `k`; whether there were any.
fn drop_attr(pending: &mut Vec<TxOp>, k: &Key, attr: &vev::Keyword) -> bool {
    let mut changed = false;
    let before = pending.len();
    pending.retain_mut(|p| match p {
        TxOp::Map(m) if m.id.as_ref().and_then(key_of).as_ref() == Some(k) => {
            let n = m.attrs.len();
            m.attrs.retain(|(a, _)| a != attr);
            changed |= m.attrs.len() != n;
            true
        }
        TxOp::Add {
            e,
            a: vev::AttrRef::Ident(a),
            ..
        }
        | TxOp::Retract {
            e,
            a: vev::AttrRef::Ident(a),
            ..
        } => !(key_of(e).as_ref() == Some(k) && a == attr),
        _ => true,
    });
    changed || pending.len() != before
}

/// Whether a statement's writes `ops` are sure to apply on any database with `db`'s schema,
/// so that checking them can wait for the next read of their tables or the commit (which
/// applies them anyway) instead of applying them to the view at once: each asserts or
/// retracts, on an entity by id or a row's tempid, a value of the attribute's own type for a
/// plain attribute (neither unique, nor a ref or tuple, nor part of a composite tuple). An
/// UPDATE of a column that is not a key and an INSERT into a table without one are such.
pub(super) fn sure_to_apply(db: &vev::Db, ops: &[TxOp]) -> bool {
    let schema = db.schema();
    let plain = |a: &vev::Keyword, v: Option<&vev::TxValue>| {
        let Some(attr) = schema.attribute_by_ident(a) else {
            return false;
        };
        let shape = attr.unique.is_none()
            && !matches!(attr.value_type, vev::ValueType::Ref | vev::ValueType::Tuple)
            && schema.composites_of(attr.id).is_empty();
        shape
            && match v {
                None => true,
                Some(vev::TxValue::Value(x)) => x.value_type() == Some(attr.value_type),
                Some(vev::TxValue::Edn(x)) => vev::coerce_value(db, attr, x).is_some(),
                Some(_) => false,
            }
    };
    let entity = |e: &EntityRef| matches!(e, EntityRef::Id(_) | EntityRef::TempId(TempId::Str(_)));
    let sure = |op: &TxOp| match op {
        TxOp::Add {
            e,
            a: vev::AttrRef::Ident(a),
            v,
        } => entity(e) && plain(a, Some(v)),
        TxOp::Retract {
            e,
            a: vev::AttrRef::Ident(a),
            v,
        } => entity(e) && plain(a, v.as_ref()),
        TxOp::Map(m) => {
            m.id.as_ref().is_some_and(entity) && m.attrs.iter().all(|(a, v)| plain(a, Some(v)))
        }
        _ => false,
    };
    // A large COPY's rows are checked on two threads, half each.
    if ops.len() >= SURE_PARALLEL_MIN {
        let (first, second) = ops.split_at(ops.len() / 2);
        let (first, second) = vev::par::join(|| first.iter().all(sure), || second.iter().all(sure));
        return first && second;
    }
    ops.iter().all(sure)
}

/// Operations from which `sure_to_apply` checks them on two threads.
const SURE_PARALLEL_MIN: usize = 4096;
