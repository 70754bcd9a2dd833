//! Stage 2: resolve tempids, upserting through `:db.unique/identity` attributes.

use foldhash::{HashMap, HashMapExt, HashSet, HashSetExt};

use vev_core::ids::{user_id, EntityId};
use vev_core::schema::Unique;
use vev_core::{TempId, TxError, Value};

use super::expand::Holders;
use super::{Term, TermEntity, TermValue};
use crate::db::Db;

pub(crate) struct Resolved {
    pub terms: Vec<ResolvedTerm>,
    pub tempids: std::collections::HashMap<TempId, EntityId>,
    pub next_user: u64,
}

/// A term whose entities and values are all concrete.
#[derive(Clone, Debug)]
pub(crate) enum ResolvedTerm {
    Add {
        e: EntityId,
        a: std::sync::Arc<vev_core::Attribute>,
        v: Value,
    },
    Retract {
        e: EntityId,
        a: std::sync::Arc<vev_core::Attribute>,
        v: Option<Value>,
    },
    RetractEntity {
        e: EntityId,
    },
    Cas {
        e: EntityId,
        a: std::sync::Arc<vev_core::Attribute>,
        old: Option<Value>,
        new: Value,
    },
}

/// Bounds the upsert passes (each pass can only resolve tempids used as identity values).
const UPSERT_PASSES_MAX: usize = 8;

pub(crate) fn resolve(db: &Db, terms: Vec<Term>, tx: EntityId) -> Result<Resolved, TxError> {
    let (order, in_entity) = tempid_order(&terms);
    let mut assigned: HashMap<TempId, EntityId> = HashMap::new();
    assigned.insert(TempId::Tx, tx);
    if !order.is_empty() {
        upsert(db, &terms, &mut assigned)?;
    }
    let unified = unify(&terms, &assigned);
    let mut next_user = db.state.next_user;
    for t in &order {
        if assigned.contains_key(t) {
            continue;
        }
        let root = unified.get(t).unwrap_or(t);
        let id = match assigned.get(root) {
            Some(id) => *id,
            None => {
                let id = user_id(next_user);
                next_user += 1;
                id
            }
        };
        assigned.insert(root.clone(), id);
        assigned.insert(t.clone(), id);
    }
    check_value_only(&terms, &in_entity)?;
    let tx_used = in_entity.contains(&TempId::Tx)
        || terms.iter().any(|t| {
            matches!(
                t,
                Term::Add {
                    v: TermValue::Temp(TempId::Tx),
                    ..
                } | Term::Cas {
                    new: TermValue::Temp(TempId::Tx),
                    ..
                }
            )
        });
    let resolved = terms
        .into_iter()
        .map(|t| substitute(t, &assigned))
        .collect();
    assigned.retain(|t, _| !matches!(t, TempId::Internal(_)));
    if !tx_used {
        assigned.remove(&TempId::Tx);
    }
    Ok(Resolved {
        terms: resolved,
        tempids: assigned.into_iter().collect(),
        next_user,
    })
}

/// Tempids in entity position, in order of first appearance, and the set of them.
fn tempid_order(terms: &[Term]) -> (Vec<TempId>, HashSet<TempId>) {
    let mut order = Vec::new();
    let mut seen = HashSet::new();
    for term in terms {
        let e = match term {
            Term::Add { e, .. } | Term::Retract { e, .. } | Term::Cas { e, .. } => e,
            Term::RetractEntity { e } => e,
        };
        if let TermEntity::Temp(t) = e {
            if seen.insert(t.clone()) {
                order.push(t.clone());
            }
        }
    }
    (order, seen)
}

/// Tempids that assert an identity value already held in db-before resolve to its holder.
fn upsert(
    db: &Db,
    terms: &[Term],
    assigned: &mut HashMap<TempId, EntityId>,
) -> Result<(), TxError> {
    let upserting = |term: &Term| match term {
        Term::Add {
            e: TermEntity::Temp(t),
            a,
            v: TermValue::Val(x),
        } if a.unique == Some(Unique::Identity) && !matches!(t, TempId::Tx) => {
            Some((a.id, x.clone()))
        }
        _ => None,
    };
    let holders = Holders::prefetch(db, terms.iter().filter_map(upserting));
    for _ in 0..UPSERT_PASSES_MAX {
        let mut changed = false;
        for term in terms {
            let Term::Add {
                e: TermEntity::Temp(t),
                a,
                v,
            } = term
            else {
                continue;
            };
            if a.unique != Some(Unique::Identity) || matches!(t, TempId::Tx) {
                continue;
            }
            let value = match v {
                TermValue::Val(x) => x.clone(),
                TermValue::Temp(vt) => match assigned.get(vt) {
                    Some(id) => Value::Ref(*id),
                    None => continue,
                },
            };
            let Some(holder) = holders.get(db, a.id, &value) else {
                continue;
            };
            match assigned.get(t) {
                Some(prev) if *prev != holder => {
                    return Err(TxError::ConflictingUpserts {
                        tempid: t.to_string(),
                        first: *prev,
                        second: holder,
                    })
                }
                Some(_) => {}
                None => {
                    assigned.insert(t.clone(), holder);
                    changed = true;
                }
            }
        }
        if !changed {
            break;
        }
    }
    Ok(())
}

/// New tempids asserting the same new identity value become one entity: each maps to the
/// first tempid of its group.
fn unify(terms: &[Term], assigned: &HashMap<TempId, EntityId>) -> HashMap<TempId, TempId> {
    let mut first: HashMap<(EntityId, Value), TempId> = HashMap::new();
    let mut out = HashMap::new();
    for term in terms {
        let Term::Add {
            e: TermEntity::Temp(t),
            a,
            v: TermValue::Val(v),
        } = term
        else {
            continue;
        };
        if a.unique != Some(Unique::Identity) || assigned.contains_key(t) {
            continue;
        }
        let root = first
            .entry((a.id, v.clone()))
            .or_insert_with(|| t.clone())
            .clone();
        if root != *t {
            let root = out.get(&root).cloned().unwrap_or(root);
            out.insert(t.clone(), root);
        }
    }
    out
}

fn check_value_only(terms: &[Term], in_entity: &HashSet<TempId>) -> Result<(), TxError> {
    for term in terms {
        let v = match term {
            Term::Add { v, .. } | Term::Cas { new: v, .. } => Some(v),
            Term::Retract { v, .. } => v.as_ref(),
            Term::RetractEntity { .. } => None,
        };
        if let Some(TermValue::Temp(t)) = v {
            if !in_entity.contains(t) && !matches!(t, TempId::Tx) {
                return Err(TxError::TempidOnlyValue {
                    tempid: t.to_string().trim_matches('"').to_string(),
                });
            }
        }
    }
    Ok(())
}

fn substitute(term: Term, m: &HashMap<TempId, EntityId>) -> ResolvedTerm {
    let e_of = |e: TermEntity| match e {
        TermEntity::Id(id) => id,
        TermEntity::Temp(t) => m[&t],
    };
    let v_of = |v: TermValue| match v {
        TermValue::Val(x) => x,
        TermValue::Temp(t) => Value::Ref(m[&t]),
    };
    match term {
        Term::Add { e, a, v } => ResolvedTerm::Add {
            e: e_of(e),
            a,
            v: v_of(v),
        },
        Term::Retract { e, a, v } => ResolvedTerm::Retract {
            e: e_of(e),
            a,
            v: v.map(v_of),
        },
        Term::RetractEntity { e } => ResolvedTerm::RetractEntity { e: e_of(e) },
        Term::Cas { e, a, old, new } => ResolvedTerm::Cas {
            e: e_of(e),
            a,
            old: old.map(v_of),
            new: v_of(new),
        },
    }
}
