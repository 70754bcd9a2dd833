//! Datoms and the four index orders.

use std::cmp::Ordering;

use crate::ids::EntityId;
use crate::value::Value;

/// One fact: entity, attribute, value, transaction, and whether it was asserted or retracted.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Datom {
    pub e: EntityId,
    pub a: EntityId,
    pub v: Value,
    pub tx: EntityId,
    pub added: bool,
}

impl Datom {
    pub fn new(e: EntityId, a: EntityId, v: Value, tx: EntityId, added: bool) -> Datom {
        Datom { e, a, v, tx, added }
    }
}

/// The index orders. Every order ends with tx then added, so the operations on one fact
/// `(e a v)` are adjacent in each of them, oldest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IndexOrder {
    Eavt,
    Aevt,
    Avet,
    Vaet,
    /// The log's order: tx, then e, a, v. Not an index users can name.
    Log,
}

impl IndexOrder {
    pub const ALL: [IndexOrder; 4] = [
        IndexOrder::Eavt,
        IndexOrder::Aevt,
        IndexOrder::Avet,
        IndexOrder::Vaet,
    ];

    pub fn name(self) -> &'static str {
        match self {
            IndexOrder::Eavt => "eavt",
            IndexOrder::Aevt => "aevt",
            IndexOrder::Avet => "avet",
            IndexOrder::Vaet => "vaet",
            IndexOrder::Log => "log",
        }
    }

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
    Entity(EntityId),
    Value(Value),
}
