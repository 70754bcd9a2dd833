//! Stage 3: turn resolved terms into the transaction's datoms, checked against db-before.

use std::collections::BTreeMap;

use foldhash::{HashMap, HashMapExt, HashSet, HashSetExt};
use std::sync::Arc;

use vev_core::error::EntityName;
use vev_core::ids::{self, EntityId};
use vev_core::schema::TupleSpec;
use vev_core::{Attribute, Component, Datom, Edn, IndexOrder, TxError, Value};

use super::expand::Holders;
use super::resolve::ResolvedTerm;
use crate::db::Db;

pub(crate) struct Generated {
    /// Assertions and retractions, in the order they were produced.
    pub datoms: Vec<Datom>,
    /// For each retraction in `datoms`, in order, the tx of the assertion it retracts.
    pub retracted_tx: Vec<EntityId>,
}

type Fact = (EntityId, EntityId, Value);

struct Gen<'a> {
    db: &'a Db,
    tx: EntityId,
    /// Ids at or above this user counter were allocated by this transaction.
    fresh_from: u64,
    asserts: Vec<(EntityId, &'a Attribute, Value)>,
    /// The cardinality-many facts asserted (cardinality-one ones are in `card_one`).
    assert_set: HashSet<Fact>,
    /// Facts to retract, with the tx that asserted them, in order.
    retracts: Vec<(Fact, EntityId)>,
    retract_set: HashSet<Fact>,
    /// The value asserted for each cardinality-one (e, a), once `ones_sorted` is false.
    card_one: HashMap<(EntityId, EntityId), Value>,
    /// Whether every cardinality-one assertion so far had a greater (e, a) than the one
    /// before (`last_one`): a large import's shape, map forms of new entities with their
    /// attributes in order. No two of them can share (e, a) then, so none is hashed; the
    /// first one out of order builds `card_one` from `asserts`.
    ones_sorted: bool,
    last_one: Option<(EntityId, EntityId)>,
    /// Facts the transaction asked to retract, present or not (for conflict checks).
    retract_requests: HashSet<Fact>,
    /// Every (e, a) asserted, redundant or not: composite tuples follow them.
    asserted_keys: Vec<(EntityId, EntityId)>,
}

pub(crate) fn generate<'a>(
    db: &'a Db,
    terms: &'a [ResolvedTerm],
    tx: EntityId,
) -> Result<Generated, TxError> {
    let mut g = Gen {
        db,
        tx,
        fresh_from: db.state.next_user,
        asserts: Vec::with_capacity(terms.len()),
        assert_set: HashSet::new(),
        retracts: Vec::new(),
        retract_set: HashSet::new(),
        card_one: HashMap::new(),
        ones_sorted: true,
        last_one: None,
        retract_requests: HashSet::new(),
        asserted_keys: Vec::new(),
    };
    for term in terms {
        g.term(term)?;
    }
    let mut datoms = g.finish_asserts()?;
    g.composites(&mut datoms)?;
    if g.retracts.is_empty() {
        // Only assertions (an import): the list as made, not copied.
        return Ok(Generated {
            datoms,
            retracted_tx: Vec::new(),
        });
    }
    // One spare place: the transaction's instant goes first (`run`).
    let mut out = Vec::with_capacity(datoms.len() + g.retracts.len() + 1);
    let mut retracted_tx = Vec::with_capacity(g.retracts.len());
    for ((e, a, v), asserted) in g.retracts {
        out.push(Datom::new(e, a, v, tx, false));
        retracted_tx.push(asserted);
    }
    out.extend(datoms);
    Ok(Generated {
        datoms: out,
        retracted_tx,
    })
}

impl<'a> Gen<'a> {
    fn is_fresh(&self, e: EntityId) -> bool {
        e == self.tx
            || (ids::partition(e) == ids::PART_USER
                && (e & ((1 << ids::PARTITION_SHIFT) - 1)) >= self.fresh_from)
    }

    /// The current datoms of (e, a) in db-before.
    fn current(&self, e: EntityId, a: EntityId) -> Vec<Datom> {
        if self.is_fresh(e) {
            return Vec::new();
        }
        let mut out = Vec::new();
        self.db.visit_entity_attr(e, a, &mut |d| {
            out.push(d.clone());
            true
        });
        out
    }

    fn term(&mut self, term: &'a ResolvedTerm) -> Result<(), TxError> {
        match term {
            ResolvedTerm::Add { e, a, v } => self.add(*e, a, v.clone()),
            ResolvedTerm::Retract { e, a, v } => {
                if let Some(v) = v {
                    self.retract_requests.insert((*e, a.id, v.clone()));
                }
                for d in self.current(*e, a.id) {
                    if v.as_ref().is_none_or(|v| *v == d.v) {
                        self.retract(d);
                    }
                }
                Ok(())
            }
            ResolvedTerm::RetractEntity { e } => self.retract_entity(*e, &mut HashSet::new()),
            ResolvedTerm::Cas { e, a, old, new } => {
                let actual: Vec<Value> = self.current(*e, a.id).into_iter().map(|d| d.v).collect();
                let matches = match old {
                    None => actual.is_empty(),
                    Some(o) => actual.len() == 1 && actual[0] == *o,
                };
                if !matches {
                    return Err(TxError::CasFailed {
                        entity: EntityName::Id(*e),
                        attribute: a.ident.clone(),
                        expected: old.as_ref().map_or(Edn::Nil, Value::to_edn),
                        actual: match actual.as_slice() {
                            [] => Edn::Nil,
                            [one] => one.to_edn(),
                            many => Edn::Vector(many.iter().map(Value::to_edn).collect()),
                        },
                    });
                }
                self.add(*e, a, new.clone())
            }
        }
    }

    fn add(&mut self, e: EntityId, a: &'a Attribute, v: Value) -> Result<(), TxError> {
        if !a.is_many() {
            if self.ones_sorted {
                if self.last_one.is_none_or(|last| last < (e, a.id)) {
                    self.last_one = Some((e, a.id));
                    self.asserts.push((e, a, v));
                    return Ok(());
                }
                self.ones_sorted = false;
                self.card_one.reserve(self.asserts.len());
                for (e, a, v) in &self.asserts {
                    if !a.is_many() {
                        self.card_one.insert((*e, a.id), v.clone());
                    }
                }
            }
            match self.card_one.get(&(e, a.id)) {
                Some(prev) if *prev != v => {
                    return Err(TxError::DatomsConflict {
                        entity: EntityName::Id(e),
                        attribute: a.ident.clone(),
                        first: prev.to_edn(),
                        second: v.to_edn(),
                    })
                }
                Some(_) => return Ok(()),
                None => {
                    // The first assertion of (e, a): no other can be in `assert_set`.
                    self.card_one.insert((e, a.id), v.clone());
                    self.asserts.push((e, a, v));
                    return Ok(());
                }
            }
        }
        if self.assert_set.insert((e, a.id, v.clone())) {
            self.asserts.push((e, a, v));
        }
        Ok(())
    }

    fn retract(&mut self, d: Datom) {
        let fact = (d.e, d.a, d.v);
        if self.retract_set.insert(fact.clone()) {
            self.retracts.push((fact, d.tx));
        }
    }

    fn retract_entity(&mut self, e: EntityId, seen: &mut HashSet<EntityId>) -> Result<(), TxError> {
        if !seen.insert(e) {
            return Ok(());
        }
        let schema = self.db.schema();
        if ids::partition(e) == ids::PART_DB || schema.attribute(e).is_some() {
            let entity = match schema.ident(e) {
                Some(k) => EntityName::Form(Edn::Keyword(k.clone())),
                None => EntityName::Id(e),
            };
            return Err(TxError::RetractSchemaEntity { entity });
        }
        let own: Vec<Datom> = self
            .db
            .datoms_unchecked(IndexOrder::Eavt, &[Component::Entity(e)])
            .collect();
        for d in own {
            let component = schema.attribute(d.a).is_some_and(|a| a.is_component);
            if let (true, Value::Ref(child)) = (component, &d.v) {
                self.retract_entity(*child, seen)?;
            }
            self.retract(d);
        }
        let refs: Vec<Datom> = self
            .db
            .datoms_unchecked(IndexOrder::Vaet, &[Component::Value(Value::Ref(e))])
            .collect();
        for d in refs {
            self.retract(d);
        }
        Ok(())
    }

    /// Check every assertion against db-before and produce the assertion datoms. Uniqueness
    /// is checked after every cardinality-one replacement is known, so that the outcome does
    /// not depend on the order of the operations (moving a unique value from one entity to
    /// another works in either order).
    fn finish_asserts(&mut self) -> Result<Vec<Datom>, TxError> {
        let asserts = std::mem::take(&mut self.asserts);
        // Without a unique attribute there is nothing to check after this pass: its datoms
        // are made here, with no list in between (a COPY's is millions long).
        let any_unique = asserts.iter().any(|(_, a, _)| a.unique.is_some());
        // One spare place in the datoms' list: the transaction's instant goes first (`run`).
        let (mut kept, mut direct) = match any_unique {
            true => (Vec::with_capacity(asserts.len()), Vec::new()),
            false => (Vec::new(), Vec::with_capacity(asserts.len() + 1)),
        };
        let composites = self.db.schema().has_composites();
        for (e, a, v) in asserts {
            if composites {
                self.asserted_keys.push((e, a.id));
            }
            if !self.retract_set.is_empty() || !self.retract_requests.is_empty() {
                let fact = (e, a.id, v.clone());
                if self.retract_set.contains(&fact) || self.retract_requests.contains(&fact) {
                    return Err(TxError::AssertRetractConflict {
                        entity: EntityName::Id(e),
                        attribute: a.ident.clone(),
                        value: v.to_edn(),
                    });
                }
            }
            let current = self.current(e, a.id);
            if current.iter().any(|d| d.v == v) {
                continue;
            }
            if !a.is_many() {
                for d in current {
                    self.retract(d);
                }
            }
            if any_unique {
                kept.push((e, a, v));
            } else {
                direct.push(Datom::new(e, a.id, v, self.tx, true));
            }
        }
        if !any_unique {
            return Ok(direct);
        }
        let mut unique_in_tx: HashMap<(EntityId, Value), EntityId> = HashMap::new();
        let unique = kept.iter().filter(|(_, a, _)| a.unique.is_some());
        let holders = Holders::prefetch(self.db, unique.map(|(_, a, v)| (a.id, v.clone())));
        let mut out = Vec::with_capacity(kept.len() + 1);
        for (e, a, v) in kept {
            if a.unique.is_some() {
                self.check_unique(e, a, &v, &holders, &mut unique_in_tx)?;
            }
            out.push(Datom::new(e, a.id, v, self.tx, true));
        }
        Ok(out)
    }

    fn check_unique(
        &self,
        e: EntityId,
        a: &Attribute,
        v: &Value,
        holders: &Holders,
        in_tx: &mut HashMap<(EntityId, Value), EntityId>,
    ) -> Result<(), TxError> {
        let conflict = |existing| TxError::UniqueConflict {
            attribute: a.ident.clone(),
            value: v.to_edn(),
            existing,
            entity: EntityName::Id(e),
        };
        if let Some(holder) = holders.get(self.db, a.id, v) {
            if holder != e && !self.retract_set.contains(&(holder, a.id, v.clone())) {
                return Err(conflict(holder));
            }
        }
        match in_tx.insert((a.id, v.clone()), e) {
            Some(other) if other != e => Err(conflict(other)),
            _ => Ok(()),
        }
    }

    /// Recompute the composite tuples of every entity whose tuple components changed.
    fn composites(&mut self, datoms: &mut Vec<Datom>) -> Result<(), TxError> {
        let schema = self.db.schema();
        if !schema.has_composites() {
            return Ok(());
        }
        // Stated composite values are allowed only when they equal the computed ones (so that
        // a transaction can upsert through a unique composite).
        let mut stated: BTreeMap<(EntityId, EntityId), Value> = BTreeMap::new();
        datoms.retain(|d| {
            let composite = schema.attribute(d.a).is_some_and(|a| a.is_composite());
            if composite {
                stated.insert((d.e, d.a), d.v.clone());
            }
            !composite
        });
        let mut touched: Vec<(EntityId, EntityId)> = Vec::new();
        let mut seen = HashSet::new();
        for key in stated.keys() {
            if seen.insert(*key) {
                touched.push(*key);
            }
        }
        let changed = self
            .asserted_keys
            .iter()
            .copied()
            .chain(self.retracts.iter().map(|((e, a, _), _)| (*e, *a)));
        for (e, a) in changed {
            for c in schema.composites_of(a) {
                if seen.insert((e, *c)) {
                    touched.push((e, *c));
                }
            }
        }
        let mut unique_in_tx = HashMap::new();
        // Composite values are computed one by one: nothing to look up ahead.
        let holders = Holders::default();
        for (e, c) in touched {
            let Some(attr) = schema.attribute(c).cloned() else {
                continue;
            };
            let Some(TupleSpec::Composite(parts)) = &attr.tuple else {
                continue;
            };
            let values: Vec<Value> = parts
                .iter()
                .map(|p| self.value_after(e, *p, datoms))
                .collect();
            let new = if values.iter().all(|v| *v == Value::Nil) {
                None
            } else {
                Some(Value::Tuple(Arc::from(values)))
            };
            if let Some(v) = stated.get(&(e, c)) {
                if Some(v) != new.as_ref() {
                    return Err(TxError::CompositeTupleWrite {
                        attribute: attr.ident.clone(),
                    });
                }
            }
            let old = self.current(e, c);
            if old.first().map(|d| &d.v) == new.as_ref() {
                continue;
            }
            for d in old {
                self.retract(d);
            }
            if let Some(v) = new {
                if attr.unique.is_some() {
                    self.check_unique(e, &attr, &v, &holders, &mut unique_in_tx)?;
                }
                datoms.push(Datom::new(e, c, v, self.tx, true));
            }
        }
        Ok(())
    }

    /// The value of cardinality-one attribute `a` of `e` after this transaction.
    fn value_after(&self, e: EntityId, a: EntityId, datoms: &[Datom]) -> Value {
        if let Some(d) = datoms.iter().rev().find(|d| d.e == e && d.a == a) {
            return d.v.clone();
        }
        self.current(e, a)
            .into_iter()
            .find(|d| !self.retract_set.contains(&(d.e, d.a, d.v.clone())))
            .map_or(Value::Nil, |d| d.v)
    }
}
