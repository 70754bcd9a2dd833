//! Datoms and the four index orders.
//!
//! A datom is one fact `[e a v tx added]`. Each index of a database holds the same datoms
//! sorted by one `IndexOrder`; the comparators here define those orders, and a scan of an
//! index takes a prefix of `Component`s in the order's positions.

use std::cmp::Ordering;

use crate::ids::EntityId;
use crate::value::Value;

/// One fact: entity, attribute, value, transaction, and whether it was asserted or retracted.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Datom {
    /// The entity the fact is about.
    pub e: EntityId,
    /// The entity id of the attribute (not its ident).
    pub a: EntityId,
    /// The value, of the attribute's value type (a ref's target entity is `Value::Ref`).
    pub v: Value,
    /// The entity id of the transaction that asserted or retracted the fact (tx partition;
    /// `ids::t_of` gives its basis-t).
    pub tx: EntityId,
    /// `true` for an assertion, `false` for a retraction.
    pub added: bool,
}

impl Datom {
    /// A datom from its five parts, in `[e a v tx added]` order.
    pub fn new(e: EntityId, a: EntityId, v: Value, tx: EntityId, added: bool) -> Datom {
        Datom { e, a, v, tx, added }
    }
}

/// The index orders. Every order ends with tx then added, so the operations on one fact
/// `(e a v)` are adjacent in each of them, oldest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IndexOrder {
    /// Entity, attribute, value: all facts about an entity together (entity lookups, pull).
    Eavt,
    /// Attribute, entity, value: every entity that has an attribute.
    Aevt,
    /// Attribute, value, entity: lookup by value (lookup refs, unique checks, range scans).
    /// Every attribute is in AVET, `:db/index` or not.
    Avet,
    /// Value, attribute, entity: reverse references. Only ref datoms are in VAET.
    Vaet,
    /// The log's order: tx, then e, a, v. Not an index users can name.
    Log,
}

impl IndexOrder {
    /// The four user-visible indexes (every order but `Log`), in the order above.
    pub const ALL: [IndexOrder; 4] = [
        IndexOrder::Eavt,
        IndexOrder::Aevt,
        IndexOrder::Avet,
        IndexOrder::Vaet,
    ];

    /// The index's lowercase name, as in Datomic's `(d/datoms db :eavt ...)`: `"eavt"`, ...,
    /// `"log"`.
    pub fn name(self) -> &'static str {
        match self {
            IndexOrder::Eavt => "eavt",
            IndexOrder::Aevt => "aevt",
            IndexOrder::Avet => "avet",
            IndexOrder::Vaet => "vaet",
            IndexOrder::Log => "log",
        }
    }

    /// The index named `name` (`"eavt"`, `"aevt"`, `"avet"` or `"vaet"`); `None` for any
    /// other name, `"log"` included.
    pub fn from_name(name: &str) -> Option<IndexOrder> {
        IndexOrder::ALL.into_iter().find(|o| o.name() == name)
    }

    /// Compare two datoms in this order.
    #[inline]
    pub fn cmp(self, x: &Datom, y: &Datom) -> Ordering {
        let head = match self {
            IndexOrder::Eavt => {
                x.e.cmp(&y.e)
                    .then(x.a.cmp(&y.a))
                    .then_with(|| x.v.cmp(&y.v))
            }
            IndexOrder::Aevt => {
                x.a.cmp(&y.a)
                    .then(x.e.cmp(&y.e))
                    .then_with(|| x.v.cmp(&y.v))
            }
            IndexOrder::Avet => {
                x.a.cmp(&y.a)
                    .then_with(|| x.v.cmp(&y.v))
                    .then(x.e.cmp(&y.e))
            }
            IndexOrder::Vaet => x.v.cmp(&y.v).then(x.a.cmp(&y.a)).then(x.e.cmp(&y.e)),
            IndexOrder::Log => {
                return x
                    .tx
                    .cmp(&y.tx)
                    .then(x.e.cmp(&y.e))
                    .then(x.a.cmp(&y.a))
                    .then_with(|| x.v.cmp(&y.v).then(x.added.cmp(&y.added)))
            }
        };
        head.then(x.tx.cmp(&y.tx)).then(x.added.cmp(&y.added))
    }

    /// Compare a datom with a prefix of components given in this order's positions
    /// (e.g. `[a, v]` for AVET). Components past the prefix are not compared.
    pub fn cmp_prefix(self, d: &Datom, prefix: &[Component]) -> Ordering {
        for (i, c) in prefix.iter().enumerate() {
            let ord = match (self.position(i), c) {
                (Pos::E, Component::Entity(e)) => d.e.cmp(e),
                (Pos::A, Component::Entity(a)) => d.a.cmp(a),
                (Pos::V, Component::Value(v)) => d.v.cmp(v),
                (Pos::V, Component::Entity(e)) => d.v.cmp(&Value::Ref(*e)),
                (Pos::T, Component::Entity(t)) => d.tx.cmp(t),
                (pos, Component::Value(v)) => {
                    // A value given where an id belongs: a ref or a long names the id; any
                    // other value names nothing, so every datom sorts before it.
                    let id = match v {
                        Value::Ref(e) => *e,
                        Value::Long(n) if *n >= 0 => *n as u64,
                        _ => return Ordering::Less,
                    };
                    match pos {
                        Pos::E => d.e.cmp(&id),
                        Pos::A => d.a.cmp(&id),
                        _ => d.tx.cmp(&id),
                    }
                }
            };
            if ord != Ordering::Equal {
                return ord;
            }
        }
        Ordering::Equal
    }

    fn position(self, i: usize) -> Pos {
        const EAVT: [Pos; 4] = [Pos::E, Pos::A, Pos::V, Pos::T];
        const AEVT: [Pos; 4] = [Pos::A, Pos::E, Pos::V, Pos::T];
        const AVET: [Pos; 4] = [Pos::A, Pos::V, Pos::E, Pos::T];
        const VAET: [Pos; 4] = [Pos::V, Pos::A, Pos::E, Pos::T];
        const LOG: [Pos; 4] = [Pos::T, Pos::E, Pos::A, Pos::V];
        let table = match self {
            IndexOrder::Eavt => &EAVT,
            IndexOrder::Aevt => &AEVT,
            IndexOrder::Avet => &AVET,
            IndexOrder::Vaet => &VAET,
            IndexOrder::Log => &LOG,
        };
        table[i.min(3)]
    }
}

#[derive(Clone, Copy)]
enum Pos {
    E,
    A,
    V,
    T,
}

/// One resolved component of an index prefix: an entity id (for e, a, tx, or a ref value) or a
/// value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Component {
    /// An entity id: for the e, a or tx position, or a ref value in the v position.
    Entity(EntityId),
    /// A value for the v position. Given for e, a or tx, a ref or non-negative long names
    /// that id and any other value matches nothing.
    Value(Value),
}
