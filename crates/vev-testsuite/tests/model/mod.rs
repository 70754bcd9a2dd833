//! A reference model of Vev's transactions and time-travel views, for `model_oracle.rs`.
//!
//! Obviously correct rather than fast: the whole database is `log`, a `Vec` of every datom
//! ever transacted (assertions and retractions, each with its tx), and every question is
//! answered with linear scans and nested loops over it. Nothing is indexed, cached or
//! maintained incrementally, so there is nothing to get out of sync. The only thing borrowed
//! from Vev is `IndexOrder::cmp`, to put a model view into index order.
//!
//! The semantics are Datomic's, stated once here:
//! - every operation of a transaction sees db-before, never the transaction's own effects;
//! - asserting a true fact is redundant (no datom), retracting a false one does nothing;
//! - asserting a new value of a cardinality-one attribute retracts the old value;
//! - a cardinality-one attribute asserted with two values for one entity, or a fact both
//!   asserted and retracted (by name, or as a true fact a retraction covers), is
//!   `tx/datoms-conflict`;
//! - `cas` compares with db-before (`tx/cas-failed`);
//! - after the transaction no unique value may be held by two entities (`tx/unique-conflict`);
//! - a retracted value of a `:db/noHistory` attribute leaves no trace in the history and
//!   as-of views (neither its assertion nor its retraction); the log keeps everything.

use std::collections::BTreeSet;

use vev::ids::{t_of, BasisT};
use vev::{Component, Datom, EntityId, IndexOrder, Value};

/// What the model needs to know about one attribute.
#[derive(Clone, Debug)]
// The model mirrors the schema's flags one for one.
#[allow(clippy::struct_excessive_bools)]
pub struct AttrInfo {
    pub id: EntityId,
    pub ident: &'static str,
    pub many: bool,
    pub is_ref: bool,
    pub unique: bool,
    pub no_history: bool,
}

/// One operation with every entity and value resolved.
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    Add {
        e: EntityId,
        a: EntityId,
        v: Value,
    },
    Retract {
        e: EntityId,
        a: EntityId,
        v: Value,
    },
    RetractAll {
        e: EntityId,
        a: EntityId,
    },
    RetractEntity {
        e: EntityId,
    },
    Cas {
        e: EntityId,
        a: EntityId,
        old: Option<Value>,
        new: Value,
    },
}

/// Which datoms a database value shows, as in `vev::View`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ViewSpec {
    pub as_of: Option<BasisT>,
    pub since: Option<BasisT>,
    pub history: bool,
}

/// An (e, a, v) fact.
pub type Fact = (EntityId, EntityId, Value);

pub fn fact(d: &Datom) -> Fact {
    (d.e, d.a, d.v.clone())
}

fn push_new(list: &mut Vec<Fact>, f: Fact) {
    if !list.contains(&f) {
        list.push(f);
    }
}

pub struct Model {
    /// The user attributes. Any other attribute (`:db/txInstant`) is plain: cardinality-one,
    /// not a ref, not unique, with history.
    pub attrs: Vec<AttrInfo>,
    /// Every datom ever transacted, oldest transaction first.
    pub log: Vec<Datom>,
}

impl Model {
    pub fn new(attrs: Vec<AttrInfo>) -> Model {
        Model {
            attrs,
            log: Vec::new(),
        }
    }

    fn info(&self, a: EntityId) -> Option<&AttrInfo> {
        self.attrs.iter().find(|x| x.id == a)
    }

    fn is_many(&self, a: EntityId) -> bool {
        self.info(a).is_some_and(|x| x.many)
    }

    fn is_ref(&self, a: EntityId) -> bool {
        self.info(a).is_some_and(|x| x.is_ref)
    }

    fn is_unique(&self, a: EntityId) -> bool {
        self.info(a).is_some_and(|x| x.unique)
    }

    fn no_history(&self, a: EntityId) -> bool {
        self.info(a).is_some_and(|x| x.no_history)
    }

    /// The latest operation on fact `f` among `datoms` with t <= `t_max`. `datoms` is in log
    /// order, and one transaction holds at most one operation per fact.
    fn latest<'a>(datoms: &'a [Datom], f: &Fact, t_max: BasisT) -> Option<&'a Datom> {
        datoms
            .iter()
            .rfind(|d| fact(d) == *f && t_of(d.tx) <= t_max)
    }

    /// The datoms that are true now: assertions that are the latest operation on their fact.
    pub fn current(&self) -> Vec<Datom> {
        let log = &self.log;
        log.iter()
            .filter(|d| d.added && Self::latest(log, &fact(d), BasisT::MAX) == Some(*d))
            .cloned()
            .collect()
    }

    /// The log minus what `:db/noHistory` drops: of such an attribute, only the assertions
    /// that are still true remain.
    pub fn history(&self) -> Vec<Datom> {
        let log = &self.log;
        log.iter()
            .filter(|d| {
                !self.no_history(d.a)
                    || (d.added && Self::latest(log, &fact(d), BasisT::MAX) == Some(*d))
            })
            .cloned()
            .collect()
    }

    /// The assertions of the history whose fact was true as of `t`.
    pub fn as_of(&self, t: BasisT) -> Vec<Datom> {
        let history = self.history();
        history
            .iter()
            .filter(|d| {
                d.added && t_of(d.tx) <= t && Self::latest(&history, &fact(d), t) == Some(*d)
            })
            .cloned()
            .collect()
    }

    /// The datoms of a view, unordered.
    pub fn view(&self, spec: ViewSpec) -> Vec<Datom> {
        let since = spec.since.unwrap_or(0);
        let base = if spec.history {
            let as_of = spec.as_of.unwrap_or(BasisT::MAX);
            self.history()
                .into_iter()
                .filter(|d| t_of(d.tx) <= as_of)
                .collect()
        } else {
            self.as_of(spec.as_of.unwrap_or(BasisT::MAX))
        };
        base.into_iter()
            .filter(|d| spec.since.is_none() || t_of(d.tx) > since)
            .collect()
    }

    /// What `ops` would do to the current database: the facts retracted (`false`) and
    /// asserted (`true`), or every error code the transaction deserves.
    pub fn transact(&self, ops: &[Op]) -> Result<Vec<(Fact, bool)>, BTreeSet<&'static str>> {
        let before: Vec<Fact> = self.current().iter().map(fact).collect();
        let values = |e: EntityId, a: EntityId| -> Vec<Value> {
            before
                .iter()
                .filter(|f| f.0 == e && f.1 == a)
                .map(|f| f.2.clone())
                .collect()
        };
        let mut errors = BTreeSet::new();
        let mut asserts: Vec<Fact> = Vec::new();
        let mut named_retracts: Vec<Fact> = Vec::new();
        let mut retracts: Vec<Fact> = Vec::new();
        for op in ops {
            match op.clone() {
                Op::Add { e, a, v } => push_new(&mut asserts, (e, a, v)),
                Op::Retract { e, a, v } => {
                    let f = (e, a, v);
                    if before.contains(&f) {
                        push_new(&mut retracts, f.clone());
                    }
                    push_new(&mut named_retracts, f);
                }
                Op::RetractAll { e, a } => {
                    for v in values(e, a) {
                        push_new(&mut retracts, (e, a, v));
                    }
                }
                Op::RetractEntity { e } => {
                    for f in &before {
                        if f.0 == e || (self.is_ref(f.1) && f.2 == Value::Ref(e)) {
                            push_new(&mut retracts, f.clone());
                        }
                    }
                }
                Op::Cas { e, a, old, new } => {
                    let actual = values(e, a);
                    let ok = match old {
                        None => actual.is_empty(),
                        Some(o) => actual == [o],
                    };
                    if ok {
                        push_new(&mut asserts, (e, a, new));
                    } else {
                        errors.insert("tx/cas-failed");
                    }
                }
            }
        }
        for x in &asserts {
            for y in &asserts {
                if x.0 == y.0 && x.1 == y.1 && x.2 != y.2 && !self.is_many(x.1) {
                    errors.insert("tx/datoms-conflict");
                }
            }
            if named_retracts.contains(x) || retracts.contains(x) {
                errors.insert("tx/datoms-conflict");
            }
        }
        let mut added: Vec<Fact> = Vec::new();
        for f in &asserts {
            if before.contains(f) {
                continue;
            }
            if !self.is_many(f.1) {
                for v in values(f.0, f.1) {
                    push_new(&mut retracts, (f.0, f.1, v));
                }
            }
            added.push(f.clone());
        }
        let after: Vec<&Fact> = before
            .iter()
            .filter(|f| !retracts.contains(f))
            .chain(added.iter())
            .collect();
        for x in &after {
            for y in &after {
                if self.is_unique(x.1) && x.1 == y.1 && x.2 == y.2 && x.0 != y.0 {
                    errors.insert("tx/unique-conflict");
                }
            }
        }
        if !errors.is_empty() {
            return Err(errors);
        }
        let mut out: Vec<(Fact, bool)> = retracts.into_iter().map(|f| (f, false)).collect();
        out.extend(added.into_iter().map(|f| (f, true)));
        Ok(out)
    }

    /// Append a committed transaction to the log.
    pub fn commit(&mut self, tx: EntityId, instant: Datom, changes: &[(Fact, bool)]) {
        self.log.push(instant);
        for ((e, a, v), added) in changes {
            self.log.push(Datom::new(*e, *a, v.clone(), tx, *added));
        }
    }
}

/// A prefix component in canonical form: an entity id given in value position means the ref.
fn canonical(order: IndexOrder, i: usize, c: &Component) -> Component {
    match (key_positions(order)[i], c) {
        ('v', Component::Entity(e)) => Component::Value(Value::Ref(*e)),
        _ => c.clone(),
    }
}

fn key_positions(order: IndexOrder) -> [char; 4] {
    match order {
        IndexOrder::Eavt => ['e', 'a', 'v', 't'],
        IndexOrder::Aevt => ['a', 'e', 'v', 't'],
        IndexOrder::Avet => ['a', 'v', 'e', 't'],
        IndexOrder::Vaet => ['v', 'a', 'e', 't'],
        IndexOrder::Log => ['t', 'e', 'a', 'v'],
    }
}

/// The datom's components in `order`'s positions.
pub fn key(order: IndexOrder, d: &Datom) -> Vec<Component> {
    key_positions(order)
        .iter()
        .map(|p| match p {
            'e' => Component::Entity(d.e),
            'a' => Component::Entity(d.a),
            'v' => Component::Value(d.v.clone()),
            _ => Component::Entity(d.tx),
        })
        .collect()
}

fn cmp_component(x: &Component, y: &Component) -> std::cmp::Ordering {
    match (x, y) {
        (Component::Entity(a), Component::Entity(b)) => a.cmp(b),
        (Component::Value(a), Component::Value(b)) => a.cmp(b),
        _ => panic!("the oracle only builds prefixes with components of the right kind"),
    }
}

/// How the datom's leading components compare with `prefix`.
pub fn cmp_prefix(order: IndexOrder, d: &Datom, prefix: &[Component]) -> std::cmp::Ordering {
    let k = key(order, d);
    for (i, c) in prefix.iter().enumerate() {
        let ord = cmp_component(&k[i], &canonical(order, i, c));
        if ord.is_ne() {
            return ord;
        }
    }
    std::cmp::Ordering::Equal
}

/// Sort datoms into index order.
pub fn sorted(order: IndexOrder, mut datoms: Vec<Datom>) -> Vec<Datom> {
    datoms.sort_by(|x, y| order.cmp(x, y));
    datoms
}
