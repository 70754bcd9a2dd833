//! The star aggregate's typed state: cells (a value as a machine word or an id in a per-variable
//! dictionary), the accumulators of the built-in aggregates, and the groups they sit in.
//!
//! Why: the general path turns every joined row into `Value`s in a relation, groups them in a
//! hash map of value vectors and hands each group's values to `agg::aggregate`. Here a row is
//! a few `Cell`s on the stack and each aggregate folds it in place, so a million entities cost
//! a million small additions, not a million relation rows. Every accumulator gives exactly
//! what `agg::aggregate` gives over the same values; where it cannot (a value of a type it
//! does not fold, an overflow, a comparison error) it reports `Abort` and the query runs on
//! the general path, which gives the answer or the error.

use std::cmp::Ordering;

use hashbrown::{HashMap, HashSet};
use smallvec::SmallVec;
use vev_core::Value;
use vev_edn::Edn;

use crate::agg;
use crate::fsum::ExactSum;
use crate::funcs::{compare, Registry};

/// The star aggregate cannot answer exactly: run the general path instead.
#[derive(Debug)]
pub(super) struct Abort;

type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// One value of a row: longs, doubles and entity ids inline, anything else interned.
#[derive(Clone, Copy, Debug)]
pub(super) enum Cell {
    Long(i64),
    Double(f64),
    Ref(u64),
    /// An index into the variable's `Dict`.
    Id(u32),
}

impl Cell {
    /// The cell as one word, for group keys and distinct sets (a variable's cells are all
    /// ids when it groups, so words of one variable never mix kinds there; distinct sets
    /// add the kind).
    fn word(self) -> u64 {
        match self {
            Cell::Long(n) => n as u64,
            Cell::Double(d) => d.to_bits(),
            Cell::Ref(e) => e,
            Cell::Id(i) => u64::from(i),
        }
    }

    fn tag(self) -> u8 {
        match self {
            Cell::Long(_) => 0,
            Cell::Double(_) => 1,
            Cell::Ref(_) => 2,
            Cell::Id(_) => 3,
        }
    }

    /// The value the cell stands for.
    pub(super) fn value(self, dict: &Dict) -> Value {
        match self {
            Cell::Long(n) => Value::Long(n),
            Cell::Double(d) => Value::Double(d),
            Cell::Ref(e) => Value::Ref(e),
            Cell::Id(i) => dict.values[i as usize].clone(),
        }
    }
}

/// A string of at most 16 bytes as its length and a word of its bytes: equal keys, equal
/// strings. Other values have none.
#[inline]
fn short_key(v: &Value) -> Option<(u8, u128)> {
    let Value::String(s) = v else {
        return None;
    };
    let b = s.as_bytes();
    let n = b.len();
    // Overlapping loads that together cover every byte (with the length, equal keys are
    // equal strings): no copy into a buffer, whose read back stalls on the copy's stores.
    let word = |at: usize| u64::from_le_bytes(b[at..at + 8].try_into().unwrap_or_default());
    let half = |at: usize| u32::from_le_bytes(b[at..at + 4].try_into().unwrap_or_default());
    let (lo, hi) = match n {
        0 => (0, 0),
        1..=3 => (
            u64::from(b[0]) | u64::from(b[n / 2]) << 8 | u64::from(b[n - 1]) << 16,
            0,
        ),
        4..=7 => (u64::from(half(0)), u64::from(half(n - 4))),
        8..=16 => (word(0), word(n - 8)),
        _ => return None,
    };
    Some((n as u8, u128::from(lo) | u128::from(hi) << 64))
}

/// The distinct values of one variable that are not kept inline, numbered as first seen.
#[derive(Default)]
pub(super) struct Dict {
    index: FastMap<Value, u32>,
    /// Short strings, by `short_key` (never also in `index`).
    short: FastMap<(u8, u128), u32>,
    pub(super) values: Vec<Value>,
}

impl Dict {
    /// The id of `v`, numbering it if new.
    #[inline]
    pub(super) fn intern(&mut self, v: &Value) -> u32 {
        // Short strings (the usual grouping values: cities, statuses) are keyed by their
        // bytes as one integer: no string hashing or comparison call per row.
        if let Some(k) = short_key(v) {
            if let Some(id) = self.short.get(&k) {
                return *id;
            }
            let id = self.values.len() as u32;
            self.values.push(v.clone());
            self.short.insert(k, id);
            return id;
        }
        if let Some(id) = self.index.get(v) {
            return *id;
        }
        let id = self.values.len() as u32;
        self.values.push(v.clone());
        self.index.insert(v.clone(), id);
        id
    }

    /// A datom's value as a cell: interned when the variable groups (its cells are then
    /// dense ids), else inline where it can be.
    #[inline]
    pub(super) fn cell(&mut self, v: &Value, grouped: bool) -> Cell {
        if !grouped {
            match v {
                Value::Long(n) => return Cell::Long(*n),
                Value::Double(d) => return Cell::Double(*d),
                Value::Ref(e) => return Cell::Ref(*e),
                _ => {}
            }
        }
        Cell::Id(self.intern(v))
    }

    /// A cell of another part's dictionary (`from`) as a cell of this one.
    pub(super) fn adopt(&mut self, c: Cell, from: &Dict) -> Cell {
        match c {
            Cell::Id(i) => Cell::Id(self.intern(&from.values[i as usize])),
            other => other,
        }
    }
}

/// What an aggregate folds its values into.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum AccKind {
    Count,
    CountDistinct,
    Sum,
    Avg,
    Min,
    Max,
    /// Any other aggregate: the values are kept and `agg::aggregate` runs at the end.
    Collect,
}

impl AccKind {
    /// The kind for aggregate `name` with `args` (a user aggregate is collected).
    pub(super) fn of(registry: &Registry, name: &str, args: &[Edn]) -> Option<AccKind> {
        if registry.aggregates.contains_key(name) {
            return Some(AccKind::Collect);
        }
        if !agg::BUILTIN.contains(&name) {
            return None;
        }
        Some(match (name, args.is_empty()) {
            ("count", true) => AccKind::Count,
            ("count-distinct", true) => AccKind::CountDistinct,
            ("sum", true) => AccKind::Sum,
            ("avg", true) => AccKind::Avg,
            ("min", true) => AccKind::Min,
            ("max", true) => AccKind::Max,
            _ => AccKind::Collect,
        })
    }
}

/// One aggregate's state in one group.
pub(super) enum Acc {
    Count(u64),
    CountDistinct(HashSet<(u8, u64), foldhash::fast::RandomState>),
    /// `sum` and `avg`: the exact sum (as `agg::aggregate` keeps it, so the answer does not
    /// depend on the order of the rows), and whether all were longs.
    Sum {
        sum: ExactSum,
        all_long: bool,
        n: u64,
    },
    Best(Option<Cell>),
    Collect(Vec<Cell>),
}

impl Acc {
    pub(super) fn new(kind: AccKind) -> Acc {
        match kind {
            AccKind::Count => Acc::Count(0),
            AccKind::CountDistinct => Acc::CountDistinct(HashSet::default()),
            AccKind::Sum | AccKind::Avg => Acc::Sum {
                sum: ExactSum::default(),
                all_long: true,
                n: 0,
            },
            AccKind::Min | AccKind::Max => Acc::Best(None),
            AccKind::Collect => Acc::Collect(Vec::new()),
        }
    }

    /// Fold in one row's value.
    #[inline]
    pub(super) fn add(&mut self, kind: AccKind, c: Cell, dict: &Dict) -> Result<(), Abort> {
        match self {
            Acc::Count(n) => *n += 1,
            Acc::CountDistinct(set) => {
                set.insert((c.tag(), c.word()));
            }
            Acc::Sum { sum, all_long, n } => {
                match c {
                    Cell::Long(x) => sum.add_int(i128::from(x)),
                    Cell::Ref(e) => sum.add_int(i128::from(e)),
                    Cell::Double(d) => {
                        *all_long = false;
                        sum.add_f64(d);
                    }
                    Cell::Id(i) => match &dict.values[i as usize] {
                        Value::Float(f) => {
                            *all_long = false;
                            sum.add_f64(f64::from(*f));
                        }
                        // Big numbers, and the type errors, are the general path's.
                        _ => return Err(Abort),
                    },
                }
                *n += 1;
            }
            Acc::Best(best) => match best {
                None => *best = Some(c),
                Some(b) => {
                    let name = if kind == AccKind::Min { "min" } else { "max" };
                    let ord = order(name, c, dict, *b, dict)?;
                    if (kind == AccKind::Min && ord == Ordering::Less)
                        || (kind == AccKind::Max && ord == Ordering::Greater)
                    {
                        *b = c;
                    }
                }
            },
            Acc::Collect(cells) => cells.push(c),
        }
        Ok(())
    }

    /// Fold in the same aggregate's state from a later part of the entities (its cells read
    /// through `from`; they become cells of `dict`).
    pub(super) fn merge(
        &mut self,
        kind: AccKind,
        other: Acc,
        dict: &mut Dict,
        from: &Dict,
    ) -> Result<(), Abort> {
        match (self, other) {
            (Acc::Count(a), Acc::Count(b)) => *a += b,
            (Acc::CountDistinct(a), Acc::CountDistinct(b)) => {
                for (tag, word) in b {
                    let c = if tag == 3 {
                        (3, u64::from(dict.intern(&from.values[word as usize])))
                    } else {
                        (tag, word)
                    };
                    a.insert(c);
                }
            }
            (
                Acc::Sum { sum, all_long, n },
                Acc::Sum {
                    sum: s2,
                    all_long: a2,
                    n: n2,
                },
            ) => {
                sum.merge(&s2);
                *all_long &= a2;
                *n += n2;
            }
            (Acc::Best(a), Acc::Best(b)) => {
                if let Some(b) = b {
                    let b = dict.adopt(b, from);
                    match a {
                        None => *a = Some(b),
                        Some(x) => {
                            let name = if kind == AccKind::Min { "min" } else { "max" };
                            let ord = order(name, b, dict, *x, dict)?;
                            if (kind == AccKind::Min && ord == Ordering::Less)
                                || (kind == AccKind::Max && ord == Ordering::Greater)
                            {
                                *x = b;
                            }
                        }
                    }
                }
            }
            (Acc::Collect(a), Acc::Collect(b)) => {
                a.extend(b.into_iter().map(|c| dict.adopt(c, from)));
            }
            _ => return Err(Abort),
        }
        Ok(())
    }

    /// The aggregate's result, as `agg::aggregate` gives it.
    pub(super) fn finish(
        self,
        registry: &Registry,
        name: &str,
        args: &[Edn],
        kind: AccKind,
        dict: &Dict,
    ) -> Result<Edn, Abort> {
        Ok(match self {
            Acc::Count(n) => Edn::Integer(n as i64),
            Acc::CountDistinct(set) => Edn::Integer(set.len() as i64),
            Acc::Sum { sum, all_long, n } => match kind {
                AccKind::Avg => Edn::Float(sum.value() / n as f64),
                _ if all_long => Edn::Integer(i64::try_from(sum.integer()).map_err(|_| Abort)?),
                _ => Edn::Float(sum.value()),
            },
            Acc::Best(best) => best.ok_or(Abort)?.value(dict).to_edn(),
            Acc::Collect(cells) => {
                let vals = cells.into_iter().map(|c| c.value(dict)).collect();
                agg::aggregate(registry, name, args, vals).map_err(|_| Abort)?
            }
        })
    }
}

/// `compare` on two cells: longs directly, anything else as values.
#[inline]
fn order(name: &str, a: Cell, da: &Dict, b: Cell, db: &Dict) -> Result<Ordering, Abort> {
    if let (Cell::Long(x), Cell::Long(y)) = (a, b) {
        return Ok(x.cmp(&y));
    }
    compare(name, &a.value(da), &b.value(db)).map_err(|_| Abort)
}

/// A group's key: the words of its grouping cells, in `:find` order.
pub(super) type Key = SmallVec<[u64; 2]>;

/// How a row finds its group.
pub(super) enum GroupIndex {
    /// No grouping variable: one group.
    One,
    /// One interned grouping variable: its id indexes the groups (`u32::MAX`: none yet).
    Dense(Vec<u32>),
    Hashed(FastMap<Key, u32>),
}

/// The groups of one part of the entities, in first-seen order, with their aggregates'
/// states (`accs[g * aggs + j]`).
pub(super) struct Groups {
    pub(super) index: GroupIndex,
    pub(super) keys: Vec<Key>,
    pub(super) accs: Vec<Acc>,
}

impl Groups {
    /// The group of key `key` (computed by the caller), made with fresh states if new.
    #[inline]
    pub(super) fn find(&mut self, key: &[u64], kinds: &[AccKind]) -> usize {
        let found = match &mut self.index {
            GroupIndex::One => (!self.keys.is_empty()).then_some(0),
            GroupIndex::Dense(slots) => {
                let i = key[0] as usize;
                if i >= slots.len() {
                    slots.resize(i + 1, u32::MAX);
                }
                (slots[i] != u32::MAX).then_some(slots[i] as usize)
            }
            GroupIndex::Hashed(map) => map.get(key).map(|g| *g as usize),
        };
        if let Some(g) = found {
            return g;
        }
        let g = self.keys.len();
        match &mut self.index {
            GroupIndex::One => {}
            GroupIndex::Dense(slots) => slots[key[0] as usize] = g as u32,
            GroupIndex::Hashed(map) => {
                map.insert(Key::from_slice(key), g as u32);
            }
        }
        self.keys.push(Key::from_slice(key));
        self.accs.extend(kinds.iter().map(|k| Acc::new(*k)));
        g
    }
}

/// The key word of a cell, as `Groups` keys it.
#[inline]
pub(super) fn key_word(c: Cell) -> u64 {
    c.word()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn key(s: &str) -> Option<(u8, u128)> {
        short_key(&Value::string(s))
    }

    proptest! {
        /// Short keys are equal exactly when the strings are (every length up to 16, and
        /// strings that differ in one byte at any position).
        #[test]
        fn short_keys_tell_strings_apart(
            a in proptest::collection::vec(any::<u8>(), 0..=17),
            flip in any::<usize>(),
            bit in 0u8..7,
        ) {
            let a = String::from_utf8_lossy(&a).chars().take(16).collect::<String>();
            prop_assert_eq!(key(&a).is_some(), a.len() <= 16);
            if a.is_empty() || a.len() > 16 {
                return Ok(());
            }
            let mut b = a.clone().into_bytes();
            let i = flip % b.len();
            b[i] ^= 1 << bit;
            if let Ok(b) = String::from_utf8(b) {
                prop_assert_ne!(key(&a), key(&b));
            }
            let longer = format!("{a}\0");
            if longer.len() <= 16 {
                prop_assert_ne!(key(&a), key(&longer));
            }
            prop_assert_eq!(key(&a), key(&a.clone()));
        }
    }
}
