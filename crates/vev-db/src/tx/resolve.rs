//! Stage 2: resolve tempids, upserting through `:db.unique/identity` attributes.

use foldhash::{HashMap, HashMapExt};

use vev_core::ids::{user_id, EntityId};
use vev_core::schema::Unique;
use vev_core::{TempId, TxError, Value};

use super::expand::Holders;
use super::{Term, TermEntity, TermValue, Terms};
use crate::db::Db;

pub(crate) struct Resolved {
    pub terms: Vec<ResolvedTerm>,
    pub tempids: super::TempIds,
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

pub(crate) fn resolve(db: &Db, terms: Terms, tx: EntityId) -> Result<Resolved, TxError> {
    let slots = Slots::of(&terms);
    let mut assigned: HashMap<TempId, EntityId> = HashMap::new();
    assigned.insert(TempId::Tx, tx);
    if !slots.order.is_empty() {
        upsert(db, &terms, &mut assigned)?;
    }
    let unified = unify(&terms, &assigned);
    let mut next_user = db.state.next_user;
    let mut new_id = || {
        let id = user_id(next_user);
        next_user += 1;
        id
    };
    // Nothing upserted or unified (an import's usual case): every tempid but the
    // transaction's is a new entity, in order of first appearance.
    let plain = assigned.len() == 1 && unified.is_empty();
    let mut ids = Vec::with_capacity(slots.order.len());
    for t in &slots.order {
        let id = if plain {
            if *t == TempId::Tx {
                tx
            } else {
                new_id()
            }
        } else if let Some(id) = assigned.get(t) {
            *id
        } else if let Some(root) = unified.get(t) {
            let id = assigned.get(root).copied().unwrap_or_else(&mut new_id);
            assigned.insert(root.clone(), id);
            assigned.insert(t.clone(), id);
            id
        } else {
            let id = new_id();
            assigned.insert(t.clone(), id);
            id
        };
        ids.push(id);
    }
    check_value_only(&terms, &slots.index)?;
    let tx_used = slots.index.contains_key(&TempId::Tx)
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
    let ids_of = Ids {
        ids: &ids,
        index: &slots.index,
        tx,
    };
    let resolved = terms
        .into_iter()
        .zip(&slots.of_term)
        .map(|(t, slot)| substitute(t, *slot, &ids_of))
        .collect();
    let mut tempids = super::TempIds::with_capacity(ids.len() + 1);
    for (t, id) in slots.order.into_iter().zip(ids) {
        if !matches!(t, TempId::Internal(_)) {
            tempids.insert(t, id);
        }
    }
    if tx_used {
        tempids.insert(TempId::Tx, tx);
    }
    Ok(Resolved {
        terms: resolved,
        tempids,
        next_user,
    })
}

/// The tempids in entity position, each with a slot: its place in order of first
/// appearance.
struct Slots {
    order: Vec<TempId>,
    index: HashMap<TempId, u32>,
    /// Each term's entity's slot (`NO_SLOT` for an entity id).
    of_term: Vec<u32>,
}

const NO_SLOT: u32 = u32::MAX;

impl Slots {
    fn of(terms: &Terms) -> Slots {
        let mut slots = Slots {
            order: Vec::new(),
            index: HashMap::new(),
            of_term: Vec::with_capacity(terms.len()),
        };
        // A map form's terms come together: its tempid is looked up once, not per term.
        let mut last: Option<(&TempId, u32)> = None;
        for term in terms.iter() {
            let e = match term {
                Term::Add { e, .. } | Term::Retract { e, .. } | Term::Cas { e, .. } => e,
                Term::RetractEntity { e } => e,
            };
            let slot = match e {
                TermEntity::Id(_) => NO_SLOT,
                TermEntity::Temp(t) => match last {
                    Some((lt, slot)) if lt == t => slot,
                    _ => {
                        let next = u32::try_from(slots.order.len()).expect("under 2^32 tempids");
                        let slot = *slots.index.entry(t.clone()).or_insert(next);
                        if slot == next {
                            slots.order.push(t.clone());
                        }
                        last = Some((t, slot));
                        slot
                    }
                },
            };
            slots.of_term.push(slot);
        }
        slots
    }
}

/// The entity id of every tempid a term may name, once they are resolved.
struct Ids<'a> {
    ids: &'a [EntityId],
    index: &'a HashMap<TempId, u32>,
    tx: EntityId,
}

impl Ids<'_> {
    fn of(&self, t: &TempId) -> EntityId {
        match self.index.get(t) {
            Some(slot) => self.ids[*slot as usize],
            // Only the transaction's tempid may be a value without naming an entity
            // (`check_value_only`).
            None => self.tx,
        }
    }
}

/// Tempids that assert an identity value already held in db-before resolve to its holder.
fn upsert(db: &Db, terms: &Terms, assigned: &mut HashMap<TempId, EntityId>) -> Result<(), TxError> {
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
        for term in terms.iter() {
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
fn unify(terms: &Terms, assigned: &HashMap<TempId, EntityId>) -> HashMap<TempId, TempId> {
    let mut first: HashMap<(EntityId, Value), TempId> = HashMap::new();
    let mut out = HashMap::new();
    for term in terms.iter() {
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

fn check_value_only(terms: &Terms, in_entity: &HashMap<TempId, u32>) -> Result<(), TxError> {
    for term in terms.iter() {
        let v = match term {
            Term::Add { v, .. } | Term::Cas { new: v, .. } => Some(v),
            Term::Retract { v, .. } => v.as_ref(),
            Term::RetractEntity { .. } => None,
        };
        if let Some(TermValue::Temp(t)) = v {
            if !in_entity.contains_key(t) && !matches!(t, TempId::Tx) {
                return Err(TxError::TempidOnlyValue {
                    tempid: t.to_string().trim_matches('"').to_string(),
                });
            }
        }
    }
    Ok(())
}

/// `term` with its tempids replaced by their ids; `slot` is its entity's.
fn substitute(term: Term, slot: u32, ids: &Ids<'_>) -> ResolvedTerm {
    let e_of = |e: TermEntity| match e {
        TermEntity::Id(id) => id,
        TermEntity::Temp(_) => ids.ids[slot as usize],
    };
    let v_of = |v: TermValue| match v {
        TermValue::Val(x) => x,
        TermValue::Temp(t) => Value::Ref(ids.of(&t)),
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
