//! The EDN value model and its total order.
//!
//! `Edn` is used as a key of maps and sets (EDN's own, and Vev's indexes), so it needs `Eq`,
//! `Ord` and `Hash` even though it holds floats. The order is total: values compare first by
//! the rank of their variant (the declaration order below), then by value. Floats compare by
//! [`f64::total_cmp`] after every NaN is made the one canonical NaN, so `##NaN` equals itself
//! (whatever its payload, since the printer cannot keep a payload) and `-0.0` differs from
//! `0.0`. Numbers of different variants never compare equal: `1`, `1N`, `1.0` and `1M` are
//! four different values, as in Datomic. Two `BigDec`s compare numerically (`1.0M == 1.00M`).
//!
//! Comparison, hashing, printing and dropping are recursive. The reader never builds values
//! deeper than [`MAX_DEPTH`](crate::MAX_DEPTH); values built in code should stay similarly
//! shallow.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};
use std::hash::{Hash, Hasher};

use bigdecimal::BigDecimal;
use num_bigint::BigInt;

use crate::error::Span;
use crate::name::{Keyword, Symbol};

/// An EDN value.
#[derive(Clone, Debug)]
pub enum Edn {
    /// `nil`.
    Nil,
    /// `true` or `false`.
    Bool(bool),
    /// A string, with its escapes decoded.
    String(String),
    /// A character literal: `\a`, `\newline`, `\u00e9`.
    Char(char),
    /// An integer literal that fits an `i64`.
    Integer(i64),
    /// `123N`, or an integer literal too large for an `i64`. Boxed, as is `BigDec`, so that
    /// every value is 32 bytes rather than 48 (the common ones are small).
    BigInt(Box<BigInt>),
    /// `1.5`, `1e10`, `##Inf`, `##-Inf`, `##NaN`.
    Float(f64),
    /// `1.5M`, `1M`.
    BigDec(Box<BigDecimal>),
    /// `:name` or `:ns/name`; idents and attributes are keywords.
    Keyword(Keyword),
    /// `name` or `ns/name`, e.g. a query variable `?e` or a function name (not `nil`,
    /// `true` or `false`, which are their own variants).
    Symbol(Symbol),
    /// `(a b c)`. Never equal to a vector of the same elements.
    List(Vec<Edn>),
    /// `[a b c]`: transaction data, queries and pull patterns are vectors.
    Vector(Vec<Edn>),
    /// `{k v ...}`, ordered by key; keys are unique.
    Map(BTreeMap<Edn, Edn>),
    /// `#{a b c}`, ordered; elements are unique.
    Set(BTreeSet<Edn>),
    /// `#inst "..."`: milliseconds since the Unix epoch.
    Inst(i64),
    /// `#uuid "..."`.
    Uuid(u128),
    /// Any other tagged value, `#my/tag value`.
    Tagged(Symbol, Box<Edn>),
}

/// A value with the span of its source text, and the same for its parts.
///
/// `children` follow the source order: the elements of a list, vector or set; for a map its
/// keys and values alternately (`key, value, key, value, ...`); the one tagged value of a
/// `Tagged`. Scalars, including `#inst` and `#uuid`, have no children.
#[derive(Clone, Debug, PartialEq)]
pub struct Spanned {
    /// The whole value, its parts included.
    pub value: Edn,
    /// The source text of the value, from its first character (a `#` for tagged and
    /// namespaced forms) to one past its last.
    pub span: Span,
    /// The parts of the value with their own spans, in source order (see above); empty
    /// for a scalar.
    pub children: Vec<Spanned>,
}

impl Edn {
    /// The keyword with full text `full` (without the colon), e.g. `Edn::keyword("db/ident")`.
    pub fn keyword(full: &str) -> Edn {
        Edn::Keyword(Keyword::new(full))
    }

    /// The symbol with full text `full`, e.g. `Edn::symbol("?e")`.
    pub fn symbol(full: &str) -> Edn {
        Edn::Symbol(Symbol::new(full))
    }

    /// A string value.
    pub fn string(s: &str) -> Edn {
        Edn::String(s.to_owned())
    }

    /// The keyword of a `Keyword` value.
    pub fn as_keyword(&self) -> Option<&Keyword> {
        match self {
            Edn::Keyword(k) => Some(k),
            _ => None,
        }
    }

    /// The symbol of a `Symbol` value.
    pub fn as_symbol(&self) -> Option<&Symbol> {
        match self {
            Edn::Symbol(s) => Some(s),
            _ => None,
        }
    }

    /// The text of a string value.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Edn::String(s) => Some(s),
            _ => None,
        }
    }

    /// The value of an `Integer` (not of a `BigInt`, even a small one).
    pub fn as_integer(&self) -> Option<i64> {
        match self {
            Edn::Integer(i) => Some(*i),
            _ => None,
        }
    }

    /// The value of a `Bool`.
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Edn::Bool(b) => Some(*b),
            _ => None,
        }
    }

    /// The elements of a vector or a list.
    pub fn as_seq(&self) -> Option<&[Edn]> {
        match self {
            Edn::Vector(items) | Edn::List(items) => Some(items),
            _ => None,
        }
    }

    /// The entries of a map, ordered by key.
    pub fn as_map(&self) -> Option<&BTreeMap<Edn, Edn>> {
        match self {
            Edn::Map(map) => Some(map),
            _ => None,
        }
    }

    /// A short lowercase name of the variant, for error messages.
    pub fn type_name(&self) -> &'static str {
        match self {
            Edn::Nil => "nil",
            Edn::Bool(_) => "boolean",
            Edn::String(_) => "string",
            Edn::Char(_) => "char",
            Edn::Integer(_) => "integer",
            Edn::BigInt(_) => "bigint",
            Edn::Float(_) => "float",
            Edn::BigDec(_) => "bigdec",
            Edn::Keyword(_) => "keyword",
            Edn::Symbol(_) => "symbol",
            Edn::List(_) => "list",
            Edn::Vector(_) => "vector",
            Edn::Map(_) => "map",
            Edn::Set(_) => "set",
            Edn::Inst(_) => "inst",
            Edn::Uuid(_) => "uuid",
            Edn::Tagged(_, _) => "tagged",
        }
    }

    /// The position of the variant in the total order.
    fn rank(&self) -> u8 {
        match self {
            Edn::Nil => 0,
            Edn::Bool(_) => 1,
            Edn::String(_) => 2,
            Edn::Char(_) => 3,
            Edn::Integer(_) => 4,
            Edn::BigInt(_) => 5,
            Edn::Float(_) => 6,
            Edn::BigDec(_) => 7,
            Edn::Keyword(_) => 8,
            Edn::Symbol(_) => 9,
            Edn::List(_) => 10,
            Edn::Vector(_) => 11,
            Edn::Map(_) => 12,
            Edn::Set(_) => 13,
            Edn::Inst(_) => 14,
            Edn::Uuid(_) => 15,
            Edn::Tagged(_, _) => 16,
        }
    }
}

/// Every NaN becomes the one positive quiet NaN, so all NaNs are equal and hash alike.
fn canonical_float(f: f64) -> f64 {
    if f.is_nan() {
        f64::NAN
    } else {
        f
    }
}

impl Ord for Edn {
    fn cmp(&self, other: &Edn) -> Ordering {
        use Edn::*;
        match (self, other) {
            (Nil, Nil) => Ordering::Equal,
            (Bool(a), Bool(b)) => a.cmp(b),
            (String(a), String(b)) => a.cmp(b),
            (Char(a), Char(b)) => a.cmp(b),
            (Integer(a), Integer(b)) => a.cmp(b),
            (BigInt(a), BigInt(b)) => a.cmp(b),
            (Float(a), Float(b)) => canonical_float(*a).total_cmp(&canonical_float(*b)),
            (BigDec(a), BigDec(b)) => a.cmp(b),
            (Keyword(a), Keyword(b)) => a.cmp(b),
            (Symbol(a), Symbol(b)) => a.cmp(b),
            (List(a), List(b)) | (Vector(a), Vector(b)) => a.cmp(b),
            (Map(a), Map(b)) => a.cmp(b),
            (Set(a), Set(b)) => a.cmp(b),
            (Inst(a), Inst(b)) => a.cmp(b),
            (Uuid(a), Uuid(b)) => a.cmp(b),
            (Tagged(ta, a), Tagged(tb, b)) => ta.cmp(tb).then_with(|| a.cmp(b)),
            _ => self.rank().cmp(&other.rank()),
        }
    }
}

impl PartialOrd for Edn {
    fn partial_cmp(&self, other: &Edn) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Edn {
    fn eq(&self, other: &Edn) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Edn {}

impl Hash for Edn {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u8(self.rank());
        match self {
            Edn::Nil => {}
            Edn::Bool(b) => b.hash(state),
            Edn::String(s) => s.hash(state),
            Edn::Char(c) => c.hash(state),
            Edn::Integer(i) | Edn::Inst(i) => i.hash(state),
            Edn::BigInt(i) => i.hash(state),
            Edn::Float(f) => canonical_float(*f).to_bits().hash(state),
            // BigDecimal's own hash agrees with its numeric equality (1.0 and 1.00 hash alike).
            Edn::BigDec(d) => d.hash(state),
            Edn::Keyword(k) => k.hash(state),
            Edn::Symbol(s) => s.hash(state),
            Edn::List(items) | Edn::Vector(items) => items.hash(state),
            Edn::Map(map) => map.hash(state),
            Edn::Set(set) => set.hash(state),
            Edn::Uuid(u) => u.hash(state),
            Edn::Tagged(tag, value) => {
                tag.hash(state);
                value.hash(state);
            }
        }
    }
}

impl From<bool> for Edn {
    fn from(b: bool) -> Edn {
        Edn::Bool(b)
    }
}

impl From<i64> for Edn {
    fn from(i: i64) -> Edn {
        Edn::Integer(i)
    }
}

impl From<f64> for Edn {
    fn from(f: f64) -> Edn {
        Edn::Float(f)
    }
}

impl From<&str> for Edn {
    fn from(s: &str) -> Edn {
        Edn::string(s)
    }
}

impl From<String> for Edn {
    fn from(s: String) -> Edn {
        Edn::String(s)
    }
}

impl From<Keyword> for Edn {
    fn from(k: Keyword) -> Edn {
        Edn::Keyword(k)
    }
}

impl From<Symbol> for Edn {
    fn from(s: Symbol) -> Edn {
        Edn::Symbol(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::hash_map::DefaultHasher;
    use std::str::FromStr;

    fn hash_of(v: &Edn) -> u64 {
        let mut h = DefaultHasher::new();
        v.hash(&mut h);
        h.finish()
    }

    #[test]
    #[cfg(target_pointer_width = "64")]
    fn a_value_is_32_bytes() {
        // Results hold one per cell: the big numbers are boxed to keep the rest small.
        assert_eq!(std::mem::size_of::<Edn>(), 32);
    }

    #[test]
    fn variants_order_by_rank_first() {
        let ordered = [
            Edn::Nil,
            Edn::Bool(true),
            Edn::string("a"),
            Edn::Char('a'),
            Edn::Integer(i64::MAX),
            Edn::BigInt(Box::new(BigInt::from(-5))),
            Edn::Float(f64::NEG_INFINITY),
            Edn::BigDec(Box::new(BigDecimal::from(0))),
            Edn::keyword("a"),
            Edn::symbol("a"),
            Edn::List(vec![]),
            Edn::Vector(vec![]),
            Edn::Map(BTreeMap::new()),
            Edn::Set(BTreeSet::new()),
            Edn::Inst(i64::MIN),
            Edn::Uuid(0),
            Edn::Tagged(Symbol::new("a"), Box::new(Edn::Nil)),
        ];
        for pair in ordered.windows(2) {
            assert!(pair[0] < pair[1], "{:?} < {:?}", pair[0], pair[1]);
        }
    }

    #[test]
    fn numbers_of_different_variants_differ() {
        assert_ne!(Edn::Integer(1), Edn::BigInt(Box::new(BigInt::from(1))));
        assert_ne!(Edn::Integer(1), Edn::Float(1.0));
    }

    #[test]
    fn floats_total_order() {
        let nan = Edn::Float(f64::NAN);
        let other_nan = Edn::Float(f64::from_bits(f64::NAN.to_bits() | 1).copysign(-1.0));
        assert_eq!(nan, other_nan);
        assert_eq!(hash_of(&nan), hash_of(&other_nan));
        assert!(Edn::Float(f64::INFINITY) < nan);
        assert!(Edn::Float(-0.0) < Edn::Float(0.0));
        assert!(Edn::Float(f64::NEG_INFINITY) < Edn::Float(-1e300));
    }

    #[test]
    fn bigdecs_compare_numerically() {
        let a = Edn::BigDec(Box::new(BigDecimal::from_str("1.0").unwrap()));
        let b = Edn::BigDec(Box::new(BigDecimal::from_str("1.00").unwrap()));
        assert_eq!(a, b);
        assert_eq!(hash_of(&a), hash_of(&b));
    }

    #[test]
    fn list_and_vector_differ() {
        assert_ne!(Edn::List(vec![Edn::Nil]), Edn::Vector(vec![Edn::Nil]));
        assert!(Edn::Vector(vec![Edn::Integer(1)]) < Edn::Vector(vec![Edn::Integer(1), Edn::Nil]));
    }

    #[test]
    fn accessors() {
        let v = Edn::Vector(vec![
            Edn::keyword("a/b"),
            Edn::symbol("?x"),
            Edn::string("s"),
        ]);
        let items = v.as_seq().unwrap();
        assert_eq!(items[0].as_keyword().unwrap().name(), "b");
        assert_eq!(items[1].as_symbol().unwrap().as_str(), "?x");
        assert_eq!(items[2].as_str(), Some("s"));
        assert_eq!(Edn::Integer(3).as_integer(), Some(3));
        assert_eq!(Edn::BigInt(Box::new(BigInt::from(3))).as_integer(), None);
        assert_eq!(Edn::Bool(false).as_bool(), Some(false));
        assert!(Edn::List(vec![]).as_seq().is_some());
        assert!(Edn::Map(BTreeMap::new()).as_map().is_some());
        assert!(Edn::Nil.as_map().is_none());
        assert_eq!(Edn::Inst(0).type_name(), "inst");
        assert_eq!(
            Edn::BigDec(Box::new(BigDecimal::from(1))).type_name(),
            "bigdec"
        );
        assert_eq!(Edn::from("x"), Edn::string("x"));
        assert_eq!(Edn::from(2i64), Edn::Integer(2));
    }
}
