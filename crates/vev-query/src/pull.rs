//! Datomic's pull API: a pull pattern applied to entities gives nested maps.
//!
//! A pull runs in three steps, each for a reason:
//!
//! 1. **Plan.** The pattern tree is resolved against the schema once per call (an explicit
//!    work list, no recursion): every attribute keyword becomes its installed attribute, and
//!    an ident that names no attribute, a reverse of a non-ref attribute or a sub-pattern
//!    under a non-ref attribute is an error before any datom is read, whatever the entities.
//!    Resolved patterns live in a `Vec`; a recursion (`{:friend ...}`) points back at the
//!    pattern that holds it, so a recursive pattern is a cycle of indexes, not a deep tree.
//! 2. **Expand.** Each entity to pull is a node of an arena, expanded in creation order: its
//!    attributes are read (EAVT for forward attributes and `*`, VAET for reverse ones) and
//!    every referenced entity that gets a nested pull becomes a new node whose slot in the
//!    parent names it. Nothing recurses on the Rust stack, however long a chain of refs is.
//! 3. **Assemble.** Children are created after their parents, so walking the arena backwards
//!    finishes every child's map before its parent needs it.
//!
//! Semantics follow Datomic and, where Datomic's documentation is silent, DataScript (which
//! our conformance tests use as an outside reference):
//!
//! - A pull that finds nothing gives `nil`; `:db/id` counts as found, and `*` implies
//!   `:db/id`. A nested pull that finds nothing is dropped from its vector (and an attribute
//!   whose nested pulls all found nothing is left out).
//! - `*` pulls every attribute of the entity. An explicit spec of an attribute replaces the
//!   wildcard's entry for it (even under another key with `:as`).
//! - Refs without a sub-pattern are `{:db/id n}`, except component attributes (named or
//!   reached through `*`), which pull their entity with `*`, recursively.
//! - Reverse attributes give a vector, or a single value for a component attribute (a
//!   component has one owner).
//! - Card-many values are capped at 1000 unless `:limit` says otherwise (`:limit nil`: no
//!   cap). The cap counts values read, whether or not their nested pulls find anything.
//! - Recursion (`...` or a depth) and component expansion stop at an entity already entered
//!   through a recursion or component attribute on the path from the root; it appears as
//!   `{:db/id n}`. A depth `n` lets that map entry recurse `n` times along a path.
//!
//! Two caps keep any pull safe: nesting stops at [`PULL_DEPTH_MAX`] entity levels, below
//! which entities appear as `{:db/id n}` (so every result stays within the nesting the EDN
//! reader accepts, and the recursive comparison, printing and dropping of [`Edn`] stay
//! shallow); and one pull may build at most [`PULL_ENTITIES_MAX`] entity maps
//! (`pull/result-too-large`), since recursion over a graph with many paths grows
//! exponentially.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use smallvec::SmallVec;
use vev_core::{Attribute, Component, Datom, EntityId, IndexOrder, Schema, Value};
use vev_datalog::ast::{PullAttr, PullElem, PullPattern, PullSub};
use vev_edn::{BigInt, Edn, Keyword};

use crate::source::Source;

/// The deepest nesting of entity maps below the root; deeper entities appear as `{:db/id n}`.
///
/// Each level costs at most two EDN collections (a vector and a map), and the deepest map may
/// hold a vector of tuples of tagged values: 254 levels keep the whole result within
/// [`vev_edn::MAX_DEPTH`].
pub const PULL_DEPTH_MAX: usize = (vev_edn::MAX_DEPTH - 4) / 2;

/// The most entity maps (the root and every nested pull) one pull may build.
pub const PULL_ENTITIES_MAX: usize = 1_000_000;

/// How many values of a card-many attribute a pull returns without a `:limit`.
pub const PULL_LIMIT_DEFAULT: usize = 1000;

/// Why a pull was refused. Every variant is found before any datom is read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum PullError {
    /// The pattern names an ident that is not an installed attribute. Datomic rejects such
    /// patterns too (the ident does not resolve), where DataScript, having no schema for
    /// plain attributes, pulls nothing for them.
    #[error("the pull pattern names {attr}, which is not an attribute of this database")]
    UnknownAttribute {
        /// The ident as written.
        attr: Keyword,
    },
    /// A reverse attribute (`:ns/_name`) whose forward attribute is not a ref, or `:db/_id`.
    #[error("reverse attribute {attr} needs {forward} to be a ref attribute")]
    InvalidReverse {
        /// The reverse attribute as written.
        attr: Keyword,
        /// Its forward attribute.
        forward: Keyword,
    },
    /// A sub-pattern or recursion (`{:ns/name [...]}`) under an attribute that is not a ref.
    #[error("{attr} is not a ref attribute, so it cannot have a sub-pattern or recursion")]
    NotARef {
        /// The attribute.
        attr: Keyword,
    },
    /// The source is a history view, where an attribute has no single current value.
    #[error("pull reads current facts and cannot read a history view")]
    HistoryView,
    /// The pull would build more than [`PULL_ENTITIES_MAX`] entity maps.
    #[error("the pull of entity {e} reaches more than {entities_max} entities")]
    ResultTooLarge {
        /// The entity pulled.
        e: EntityId,
        /// The limit.
        entities_max: usize,
    },
    /// The database's storage failed while the pull read it.
    #[error(transparent)]
    Storage(#[from] vev_core::StorageError),
}

impl PullError {
    /// The stable code of this error.
    pub fn code(&self) -> &'static str {
        match self {
            PullError::UnknownAttribute { .. } => "pull/unknown-attribute",
            PullError::InvalidReverse { .. } => "pull/invalid-reverse",
            PullError::NotARef { .. } => "pull/not-a-ref",
            PullError::HistoryView => "pull/history-view",
            PullError::ResultTooLarge { .. } => "pull/result-too-large",
            PullError::Storage(e) => e.code(),
        }
    }
}

/// Pull `pattern` from entity `e`: a map, or `nil` when the pattern finds nothing.
pub fn pull(src: &dyn Source, pattern: &PullPattern, e: EntityId) -> Result<Edn, PullError> {
    let mut out = pull_many(src, pattern, std::slice::from_ref(&e))?;
    Ok(out.pop().unwrap_or(Edn::Nil))
}

/// Pull `pattern` from each entity of `es`, in order.
pub fn pull_many(
    src: &dyn Source,
    pattern: &PullPattern,
    es: &[EntityId],
) -> Result<Vec<Edn>, PullError> {
    if src.is_history() {
        return Err(PullError::HistoryView);
    }
    let plan = Plan::new(src.schema(), pattern)?;
    let mark = src.storage_mark();
    let mut puller = Puller {
        src,
        plan: &plan,
        nodes: Vec::new(),
        scratch: Vec::new(),
    };
    let out: Result<Vec<Edn>, PullError> = es.iter().map(|&e| puller.pull(e)).collect();
    match src.storage_failure_since(mark) {
        Some(f) => Err(PullError::Storage(f)),
        None => out,
    }
}

/// The index of the root pattern in [`Plan::patterns`].
const ROOT: usize = 0;
/// The index of `[*]`, the pattern of component entities reached without a sub-pattern.
const COMPONENT: usize = 1;

/// A pull pattern resolved against a schema.
struct Plan {
    patterns: Vec<Pat>,
}

#[derive(Default)]
struct Pat {
    wildcard: bool,
    /// Whether the pattern names `:db/id` (so `*` does not add it).
    names_db_id: bool,
    /// Forward attributes named explicitly (so `*` does not pull them).
    named: HashSet<EntityId>,
    specs: Vec<Spec>,
}

struct Spec {
    key: Edn,
    target: Target,
    /// `None`: no cap.
    limit: Option<usize>,
    default: Option<Edn>,
    sub: Sub,
}

enum Target {
    DbId,
    Forward(Arc<Attribute>),
    Reverse(Arc<Attribute>),
}

#[derive(Clone, Copy)]
enum Sub {
    /// Refs appear as `{:db/id n}`.
    Ids,
    /// Referenced entities are pulled with this pattern.
    Pattern(usize),
    /// Referenced entities are pulled with `pattern` (the one holding this spec), at most
    /// `depth` times along a path; `id` tells this spec's depth budget from others.
    Recurse {
        pattern: usize,
        depth: Option<usize>,
        id: usize,
    },
}

impl Plan {
    fn new(schema: &Schema, root: &PullPattern) -> Result<Plan, PullError> {
        let component = Pat {
            wildcard: true,
            ..Pat::default()
        };
        let mut patterns = vec![Pat::default(), component];
        let mut todo = vec![(ROOT, root)];
        let mut recursions = 0;
        while let Some((index, pattern)) = todo.pop() {
            let mut pat = Pat::default();
            for elem in &pattern.elems {
                let entries = match elem {
                    PullElem::Wildcard => {
                        pat.wildcard = true;
                        continue;
                    }
                    PullElem::Attr(attr) => {
                        pat.push(resolve(schema, attr, None)?);
                        continue;
                    }
                    PullElem::Map(entries) => entries,
                };
                for (attr, sub) in entries {
                    let sub = match sub {
                        PullSub::Pattern(p) => {
                            patterns.push(Pat::default());
                            todo.push((patterns.len() - 1, p));
                            Sub::Pattern(patterns.len() - 1)
                        }
                        PullSub::Recurse(depth) => {
                            recursions += 1;
                            let (pattern, depth, id) = (index, *depth, recursions);
                            Sub::Recurse { pattern, depth, id }
                        }
                    };
                    pat.push(resolve(schema, attr, Some(sub))?);
                }
            }
            patterns[index] = pat;
        }
        Ok(Plan { patterns })
    }
}

impl Pat {
    fn push(&mut self, spec: Spec) {
        match &spec.target {
            Target::DbId => self.names_db_id = true,
            Target::Forward(attr) => {
                self.named.insert(attr.id);
            }
            Target::Reverse(_) => {}
        }
        self.specs.push(spec);
    }
}

fn is_db_id(k: &Keyword) -> bool {
    k.namespace() == Some("db") && k.name() == "id"
}

/// Resolve one attribute spec; `sub` is what a map entry gives it.
fn resolve(schema: &Schema, attr: &PullAttr, sub: Option<Sub>) -> Result<Spec, PullError> {
    let written = &attr.attr;
    let lookup = |k: &Keyword| {
        let found = schema.attribute_by_ident(k).cloned();
        found.ok_or_else(|| PullError::UnknownAttribute {
            attr: written.clone(),
        })
    };
    let not_a_ref = || PullError::NotARef {
        attr: written.clone(),
    };
    let (target, sub) = if is_db_id(written) {
        if sub.is_some() {
            return Err(not_a_ref());
        }
        (Target::DbId, Sub::Ids)
    } else if written.is_reverse() {
        let forward = written.reversed();
        let invalid = || PullError::InvalidReverse {
            attr: written.clone(),
            forward: forward.clone(),
        };
        if is_db_id(&forward) {
            return Err(invalid());
        }
        let a = lookup(&forward)?;
        if !a.is_ref() {
            return Err(invalid());
        }
        (Target::Reverse(a), sub.unwrap_or(Sub::Ids))
    } else {
        let a = lookup(written)?;
        if sub.is_some() && !a.is_ref() {
            return Err(not_a_ref());
        }
        let sub = sub.unwrap_or_else(|| default_sub(&a));
        (Target::Forward(a), sub)
    };
    Ok(Spec {
        key: attr
            .as_key
            .clone()
            .unwrap_or_else(|| Edn::Keyword(written.clone())),
        target,
        limit: attr.limit.unwrap_or(Some(PULL_LIMIT_DEFAULT)),
        default: attr.default.clone(),
        sub,
    })
}

/// What a forward attribute without a sub-pattern pulls from the entities it refers to.
fn default_sub(attr: &Attribute) -> Sub {
    if attr.is_ref() && attr.is_component {
        Sub::Pattern(COMPONENT)
    } else {
        Sub::Ids
    }
}

/// One entity being pulled.
struct Node {
    e: EntityId,
    pattern: usize,
    parent: Option<usize>,
    /// Entity maps above this one.
    depth: usize,
    /// Set when this node was entered through a recursion or a component attribute: its
    /// descendants show `e` as `{:db/id e}` instead of pulling it again.
    guards: bool,
    /// The depth budget left to a recursion spec (its id) below this node.
    budget: Option<(usize, usize)>,
    entries: Vec<(Edn, Slot)>,
}

/// The value of one attribute of a node, before assembly.
enum Slot {
    Done(Edn),
    One(Item),
    Many(Vec<Item>),
}

enum Item {
    Done(Edn),
    Node(usize),
    /// A recursion whose depth is spent: contributes nothing.
    Nothing,
}

struct Puller<'a> {
    src: &'a dyn Source,
    plan: &'a Plan,
    nodes: Vec<Node>,
    /// The datoms of the entity being expanded (kept between entities for its allocation).
    scratch: Vec<Datom>,
}

impl Puller<'_> {
    fn pull(&mut self, e: EntityId) -> Result<Edn, PullError> {
        self.nodes.clear();
        self.nodes.push(Node {
            e,
            pattern: ROOT,
            parent: None,
            depth: 0,
            guards: false,
            budget: None,
            entries: Vec::new(),
        });
        let mut next = 0;
        while next < self.nodes.len() {
            self.expand(next)?;
            next += 1;
        }
        Ok(self.assemble())
    }

    /// Read the attributes of node `i`.
    fn expand(&mut self, i: usize) -> Result<(), PullError> {
        let (e, plan) = (self.nodes[i].e, self.plan);
        let pat = &plan.patterns[self.nodes[i].pattern];
        let mut entries = Vec::with_capacity(pat.specs.len() + 1);
        if pat.wildcard {
            self.wildcard(i, pat, &mut entries)?;
        }
        // Several forward attributes: one pass over the entity's datoms serves them all (in
        // EAVT order, so each attribute's values are one run).
        let forward = pat
            .specs
            .iter()
            .filter(|s| matches!(s.target, Target::Forward(_)))
            .count();
        let mut datoms = std::mem::take(&mut self.scratch);
        datoms.clear();
        let gathered = forward >= 2;
        if gathered {
            self.src
                .scan(IndexOrder::Eavt, &[Component::Entity(e)], &mut |d| {
                    datoms.push(d.clone());
                    true
                });
        }
        for spec in &pat.specs {
            let values: SmallVec<[Value; 2]> = match &spec.target {
                Target::DbId => {
                    entries.push((spec.key.clone(), Slot::Done(id_edn(e))));
                    continue;
                }
                Target::Forward(a) => {
                    let cap = if a.is_many() { spec.limit } else { Some(1) };
                    if gathered {
                        // The attribute's run of the entity's datoms, read in place.
                        let start = datoms.partition_point(|d| d.a < a.id);
                        let run = &datoms[start..];
                        let n = run
                            .iter()
                            .take_while(|d| d.a == a.id)
                            .take(cap.unwrap_or(usize::MAX))
                            .count();
                        if let Some(slot) = self.slot(i, spec, run[..n].iter().map(|d| &d.v))? {
                            entries.push((spec.key.clone(), slot));
                        }
                        continue;
                    } else {
                        self.values(IndexOrder::Eavt, [e, a.id], cap, |d| d.v.clone())
                    }
                }
                Target::Reverse(a) => {
                    let cap = if a.is_component { Some(1) } else { spec.limit };
                    self.values(IndexOrder::Vaet, [e, a.id], cap, |d| Value::Ref(d.e))
                }
            };
            if let Some(slot) = self.slot(i, spec, values.iter())? {
                entries.push((spec.key.clone(), slot));
            }
        }
        self.scratch = datoms;
        self.nodes[i].entries = entries;
        Ok(())
    }

    /// The entries `*` gives node `i`: `:db/id` and every attribute the pattern does not name.
    fn wildcard(
        &mut self,
        i: usize,
        pat: &Pat,
        entries: &mut Vec<(Edn, Slot)>,
    ) -> Result<(), PullError> {
        let e = self.nodes[i].e;
        if !pat.names_db_id {
            entries.push((Edn::Keyword(Keyword::new("db/id")), Slot::Done(id_edn(e))));
        }
        let mut datoms: Vec<Datom> = Vec::new();
        self.src
            .scan(IndexOrder::Eavt, &[Component::Entity(e)], &mut |d| {
                datoms.push(d.clone());
                true
            });
        let schema = self.src.schema();
        for group in datoms.chunk_by(|x, y| x.a == y.a) {
            let a = group[0].a;
            if pat.named.contains(&a) {
                continue;
            }
            let values = group.iter().map(|d| d.v.clone());
            let Some(attr) = schema.attribute(a) else {
                // A datom of an attribute the schema lacks: shown as is, keyed by its ident
                // or id, rather than dropped.
                let key = schema
                    .ident(a)
                    .map_or(id_edn(a), |k| Edn::Keyword(k.clone()));
                let mut vs: Vec<Edn> = values.map(|v| v.to_edn()).collect();
                let value = if vs.len() == 1 {
                    vs.remove(0)
                } else {
                    Edn::Vector(vs)
                };
                entries.push((key, Slot::Done(value)));
                continue;
            };
            let cap = if attr.is_many() {
                PULL_LIMIT_DEFAULT
            } else {
                1
            };
            let spec = Spec {
                key: Edn::Keyword(attr.ident.clone()),
                target: Target::Forward(attr.clone()),
                limit: Some(PULL_LIMIT_DEFAULT),
                default: None,
                sub: default_sub(attr),
            };
            let values: SmallVec<[Value; 2]> = values.take(cap).collect();
            if let Some(slot) = self.slot(i, &spec, values.iter())? {
                entries.push((spec.key, slot));
            }
        }
        Ok(())
    }

    /// The values under `[e a]` in `order`, at most `cap` of them.
    fn values(
        &self,
        order: IndexOrder,
        [e, a]: [EntityId; 2],
        cap: Option<usize>,
        value: impl Fn(&Datom) -> Value,
    ) -> SmallVec<[Value; 2]> {
        let cap = cap.unwrap_or(usize::MAX);
        let mut out = SmallVec::new();
        if cap == 0 {
            return out;
        }
        let prefix = [Component::Entity(e), Component::Entity(a)];
        self.src.scan(order, &prefix, &mut |d| {
            out.push(value(d));
            out.len() < cap
        });
        out
    }

    /// The slot of `spec` with `values` (refs for ref and reverse attributes); `None` when
    /// there is nothing to show.
    fn slot<'v>(
        &mut self,
        i: usize,
        spec: &Spec,
        mut values: impl ExactSizeIterator<Item = &'v Value>,
    ) -> Result<Option<Slot>, PullError> {
        if values.len() == 0 {
            return Ok(spec.default.clone().map(Slot::Done));
        }
        let (is_ref, single) = match &spec.target {
            Target::DbId => (false, true),
            Target::Forward(a) => (a.is_ref(), !a.is_many()),
            Target::Reverse(a) => (true, a.is_component),
        };
        if !is_ref {
            return Ok(Some(Slot::Done(if single {
                values.next().map_or(Edn::Nil, Value::to_edn)
            } else {
                Edn::Vector(values.map(Value::to_edn).collect())
            })));
        }
        if single {
            return match values.next() {
                Some(first) => Ok(Some(Slot::One(self.value_item(i, spec, first)?))),
                None => Ok(None),
            };
        }
        let mut items = Vec::with_capacity(values.len());
        for v in values {
            items.push(self.value_item(i, spec, v)?);
        }
        Ok(Some(Slot::Many(items)))
    }

    /// What node `i` shows for one value of a ref or reverse attribute.
    fn value_item(&mut self, i: usize, spec: &Spec, v: &Value) -> Result<Item, PullError> {
        match v {
            Value::Ref(t) => self.item(i, spec, *t),
            other => Ok(Item::Done(other.to_edn())),
        }
    }

    /// What node `i` shows for entity `t`, reached through `spec`.
    fn item(&mut self, i: usize, spec: &Spec, t: EntityId) -> Result<Item, PullError> {
        let (pattern, recursion) = match spec.sub {
            Sub::Ids => return Ok(Item::Done(id_map(t))),
            Sub::Pattern(p) => (p, None),
            Sub::Recurse { pattern, depth, id } => (pattern, Some((id, depth))),
        };
        let depth = self.nodes[i].depth + 1;
        if depth > PULL_DEPTH_MAX {
            return Ok(Item::Done(id_map(t)));
        }
        let component = match &spec.target {
            Target::Forward(a) | Target::Reverse(a) => a.is_component,
            Target::DbId => false,
        };
        let guards = recursion.is_some() || component;
        let mut budget = None;
        if guards {
            if self.entered(i, t) {
                return Ok(Item::Done(id_map(t)));
            }
            if let Some((id, depth_max)) = recursion {
                match self.budget(i, id).or(depth_max) {
                    Some(0) => return Ok(Item::Nothing),
                    Some(left) => budget = Some((id, left - 1)),
                    None => {}
                }
            }
        }
        if self.nodes.len() >= PULL_ENTITIES_MAX {
            return Err(PullError::ResultTooLarge {
                e: self.nodes[0].e,
                entities_max: PULL_ENTITIES_MAX,
            });
        }
        self.nodes.push(Node {
            e: t,
            pattern,
            parent: Some(i),
            depth,
            guards,
            budget,
            entries: Vec::new(),
        });
        Ok(Item::Node(self.nodes.len() - 1))
    }

    /// Node `i` and its ancestors, up to the root.
    fn path(&self, i: usize) -> impl Iterator<Item = &Node> {
        std::iter::successors(Some(&self.nodes[i]), |n| n.parent.map(|p| &self.nodes[p]))
    }

    /// Whether `t` was entered through a recursion or component attribute on the path to `i`.
    fn entered(&self, i: usize, t: EntityId) -> bool {
        self.path(i).any(|n| n.guards && n.e == t)
    }

    /// The depth budget recursion `id` has left at node `i`, if it recursed above it.
    fn budget(&self, i: usize, id: usize) -> Option<usize> {
        self.path(i)
            .find_map(|n| n.budget.filter(|(b, _)| *b == id).map(|(_, left)| left))
    }

    /// Build the maps, children (later nodes) first.
    fn assemble(&mut self) -> Edn {
        let mut built = vec![Edn::Nil; self.nodes.len()];
        for i in (0..self.nodes.len()).rev() {
            let mut map = BTreeMap::new();
            for (key, slot) in std::mem::take(&mut self.nodes[i].entries) {
                let mut take = |item| match item {
                    Item::Done(v) => Some(v),
                    Item::Node(j) => match std::mem::replace(&mut built[j], Edn::Nil) {
                        Edn::Nil => None,
                        v => Some(v),
                    },
                    Item::Nothing => None,
                };
                let value = match slot {
                    Slot::Done(v) => Some(v),
                    Slot::One(item) => take(item),
                    Slot::Many(items) => {
                        let vs: Vec<Edn> = items.into_iter().filter_map(take).collect();
                        (!vs.is_empty()).then_some(Edn::Vector(vs))
                    }
                };
                if let Some(v) = value {
                    map.insert(key, v);
                }
            }
            if !map.is_empty() {
                built[i] = Edn::Map(map);
            }
        }
        built.swap_remove(0)
    }
}

/// An entity id as EDN: an integer, or a bigint past `i64::MAX` (ids a caller made up).
fn id_edn(e: EntityId) -> Edn {
    i64::try_from(e).map_or_else(|_| Edn::BigInt(Box::new(BigInt::from(e))), Edn::Integer)
}

fn id_map(e: EntityId) -> Edn {
    Edn::Map(BTreeMap::from([(
        Edn::Keyword(Keyword::new("db/id")),
        id_edn(e),
    )]))
}

#[cfg(test)]
mod tests;
