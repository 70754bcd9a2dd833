//! Typed values: what the `v` of a datom can hold.
//!
//! Every variant corresponds to one `:db/valueType`. Values have a total order (variant rank
//! first, then the natural order of the payload) so that they can be index keys; doubles and
//! floats compare with `total_cmp`, so NaN has a place too. Cheap to clone: a string of up to 23
//! bytes is inline (`SmolStr`: no allocation, and an index search comparing strings follows no
//! pointer), and every other payload larger than a word sits behind an `Arc`. A value is 24
//! bytes, a datom 56.

use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

pub use smol_str::SmolStr;

use vev_edn::{BigDecimal, BigInt, Edn, Keyword, Symbol};

use crate::ids::EntityId;
use crate::schema::ValueType;

/// The value position of a datom.
#[derive(Clone, Debug)]
pub enum Value {
    /// Only inside composite tuples, for a missing component.
    Nil,
    /// `:db.type/ref`: the entity id of the entity referred to.
    Ref(EntityId),
    /// `:db.type/keyword`.
    Keyword(Keyword),
    /// `:db.type/string`: up to 23 bytes inline (no allocation, and comparing two does not
    /// follow a pointer), longer behind an `Arc`.
    String(SmolStr),
    /// `:db.type/boolean`.
    Boolean(bool),
    /// `:db.type/long`: a signed 64-bit integer.
    Long(i64),
    /// `:db.type/bigint`: an arbitrary-precision integer.
    BigInt(Arc<BigInt>),
    /// `:db.type/double`: a 64-bit float, ordered by `total_cmp`.
    Double(f64),
    /// `:db.type/float`: a 32-bit float, ordered by `total_cmp`.
    Float(f32),
    /// `:db.type/bigdec`: an arbitrary-precision decimal; `1.0` and `1.00` are distinct values
    /// (equal numbers are ordered by their printed form).
    BigDec(Arc<BigDecimal>),
    /// `:db.type/instant`: milliseconds since the Unix epoch (UTC), negative before 1970.
    Instant(i64),
    /// `:db.type/uuid`: the 16 bytes of the UUID, big-endian.
    Uuid([u8; 16]),
    /// `:db.type/uri`: the URI's text, not validated. (Not a `SmolStr`: one variant only may
    /// be as large as a `String`, whose spare tag values then tag the others.)
    Uri(Arc<str>),
    /// `:db.type/bytes`: a byte array, compared bytewise.
    Bytes(Arc<[u8]>),
    /// `:db.type/symbol`.
    Symbol(Symbol),
    /// `:db.type/tuple`: the elements of a composite, homogeneous or heterogeneous tuple
    /// (`Nil` for a missing component of a composite tuple).
    Tuple(Arc<[Value]>),
    /// Never stored in a datom: a map built inside a query (`hash-map`), or a query input.
    Map(Arc<std::collections::BTreeMap<Value, Value>>),
}

// A value is three words, so a datom is seven: a string's inline bytes must not grow it.
const _: () = assert!(std::mem::size_of::<Value>() == 24);

/// See `Value::sort_key`. Ordered by type, then `head`; `exact` is not compared.
#[derive(Clone, Copy, Debug)]
pub struct SortKey {
    /// The value's variant rank (`Nil` 0, `Ref` 1, ... `Map` 16): values of different
    /// variants order by it alone.
    pub rank: u8,
    /// An order-preserving summary of the payload within the variant: the id, boolean, UUID
    /// or number itself (longs and instants with the sign bit flipped), or the first 15 bytes
    /// and the length of a string, URI or byte array; 0 for the other variants.
    pub head: u128,
    /// Whether `head` is the whole payload, so that equal keys mean equal values.
    pub exact: bool,
}

impl SortKey {
    /// The order of the two values if the keys settle it, `None` when the values themselves
    /// must be compared (equal keys, at least one of them not `exact`).
    pub fn cmp_known(&self, other: &SortKey) -> Option<Ordering> {
        match (self.rank, self.head).cmp(&(other.rank, other.head)) {
            Ordering::Equal if !(self.exact && other.exact) => None,
            ord => Some(ord),
        }
    }
}

impl Value {
    fn rank(&self) -> u8 {
        match self {
            Value::Nil => 0,
            Value::Ref(_) => 1,
            Value::Keyword(_) => 2,
            Value::String(_) => 3,
            Value::Boolean(_) => 4,
            Value::Long(_) => 5,
            Value::BigInt(_) => 6,
            Value::Double(_) => 7,
            Value::Float(_) => 8,
            Value::BigDec(_) => 9,
            Value::Instant(_) => 10,
            Value::Uuid(_) => 11,
            Value::Uri(_) => 12,
            Value::Bytes(_) => 13,
            Value::Symbol(_) => 14,
            Value::Tuple(_) => 15,
            Value::Map(_) => 16,
        }
    }

    /// A key that orders values without looking behind a pointer: when `x.sort_key() <
    /// y.sort_key()` then `x < y`. When the keys are equal and both are `exact`, so are the
    /// values; otherwise compare the values. Numbers and ids are their own key; strings, URIs,
    /// bytes and UUIDs contribute their first 15 bytes (zero-padded) and their length up to
    /// 16, so strings of up to 15 bytes are exact. Sorting many values by this key first saves
    /// a cache miss per comparison.
    pub fn sort_key(&self) -> SortKey {
        fn head(bytes: &[u8]) -> (u128, bool) {
            let mut buf = [0u8; 16];
            let n = bytes.len().min(15);
            buf[..n].copy_from_slice(&bytes[..n]);
            buf[15] = bytes.len().min(16) as u8;
            (u128::from_be_bytes(buf), bytes.len() <= 15)
        }
        let flip = |n: i64| ((n as u64) ^ (1 << 63)) as u128;
        let (head, exact) = match self {
            Value::Nil => (0, true),
            Value::Ref(e) => (*e as u128, true),
            Value::String(s) => head(s.as_bytes()),
            Value::Uri(s) => head(s.as_bytes()),
            Value::Bytes(b) => head(b),
            Value::Boolean(b) => (*b as u128, true),
            Value::Long(n) | Value::Instant(n) => (flip(*n), true),
            Value::Uuid(u) => (u128::from_be_bytes(*u), true),
            _ => (0, false),
        };
        SortKey {
            rank: self.rank(),
            head,
            exact,
        }
    }

    /// The value type this value has, `None` for `Nil` and `Map` (which no attribute holds).
    pub fn value_type(&self) -> Option<ValueType> {
        Some(match self {
            Value::Nil | Value::Map(_) => return None,
            Value::Ref(_) => ValueType::Ref,
            Value::Keyword(_) => ValueType::Keyword,
            Value::String(_) => ValueType::String,
            Value::Boolean(_) => ValueType::Boolean,
            Value::Long(_) => ValueType::Long,
            Value::BigInt(_) => ValueType::BigInt,
            Value::Double(_) => ValueType::Double,
            Value::Float(_) => ValueType::Float,
            Value::BigDec(_) => ValueType::BigDec,
            Value::Instant(_) => ValueType::Instant,
            Value::Uuid(_) => ValueType::Uuid,
            Value::Uri(_) => ValueType::Uri,
            Value::Bytes(_) => ValueType::Bytes,
            Value::Symbol(_) => ValueType::Symbol,
            Value::Tuple(_) => ValueType::Tuple,
        })
    }

    /// A `:db.type/string` value.
    pub fn string(s: &str) -> Value {
        Value::String(SmolStr::new(s))
    }

    /// A `:db.type/keyword` value from its text without the colon: `"person/name"`.
    pub fn keyword(full: &str) -> Value {
        Value::Keyword(Keyword::new(full))
    }

    /// The entity id of a `Ref`, `None` for any other variant.
    pub fn as_ref(&self) -> Option<EntityId> {
        match self {
            Value::Ref(e) => Some(*e),
            _ => None,
        }
    }

    /// The integer of a `Long`, `None` for any other variant (instants included).
    pub fn as_long(&self) -> Option<i64> {
        match self {
            Value::Long(n) => Some(*n),
            _ => None,
        }
    }

    /// The text of a `String` or a `Uri`, `None` for any other variant.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            Value::Uri(s) => Some(s),
            _ => None,
        }
    }

    /// The keyword of a `Keyword` value, `None` for any other variant.
    pub fn as_keyword(&self) -> Option<&Keyword> {
        match self {
            Value::Keyword(k) => Some(k),
            _ => None,
        }
    }

    /// The boolean of a `Boolean` value, `None` for any other variant.
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Boolean(b) => Some(*b),
            _ => None,
        }
    }

    /// The EDN form of this value. Refs become integers; uris and bytes become tagged
    /// literals (`#uri "..."`, `#bytes "hex"`) so that they read back with their type.
    pub fn to_edn(&self) -> Edn {
        match self {
            Value::Nil => Edn::Nil,
            Value::Ref(e) => Edn::Integer(*e as i64),
            Value::Keyword(k) => Edn::Keyword(k.clone()),
            Value::String(s) => Edn::String(String::from(&**s)),
            Value::Boolean(b) => Edn::Bool(*b),
            Value::Long(n) => Edn::Integer(*n),
            Value::BigInt(n) => Edn::BigInt(Box::new((**n).clone())),
            Value::Double(d) => Edn::Float(*d),
            Value::Float(f) => Edn::Float(*f as f64),
            Value::BigDec(d) => Edn::BigDec(Box::new((**d).clone())),
            Value::Instant(ms) => Edn::Inst(*ms),
            Value::Uuid(u) => Edn::Uuid(u128::from_be_bytes(*u)),
            Value::Uri(s) => Edn::Tagged(
                Symbol::new("uri"),
                Box::new(Edn::String(String::from(&**s))),
            ),
            Value::Bytes(b) => {
                Edn::Tagged(Symbol::new("bytes"), Box::new(Edn::String(hex_encode(b))))
            }
            Value::Symbol(s) => Edn::Symbol(s.clone()),
            Value::Tuple(items) => Edn::Vector(items.iter().map(Value::to_edn).collect()),
            Value::Map(m) => Edn::Map(m.iter().map(|(k, v)| (k.to_edn(), v.to_edn())).collect()),
        }
    }
}

/// Lowercase hexadecimal text of `bytes`, two digits a byte: the payload of `#bytes "..."`.
pub fn hex_encode(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(DIGITS[(b >> 4) as usize] as char);
        out.push(DIGITS[(b & 15) as usize] as char);
    }
    out
}

/// The bytes of hexadecimal `text` (either case, two digits a byte), `None` if its length is
/// odd or it has a character that is not a hex digit.
pub fn hex_decode(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    let digit = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    text.as_bytes()
        .chunks(2)
        .map(|pair| Some(digit(pair[0])? << 4 | digit(pair[1])?))
        .collect()
}

impl PartialEq for Value {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Value {}

impl PartialOrd for Value {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Value {
    #[inline]
    fn cmp(&self, other: &Self) -> Ordering {
        use Value::*;
        match (self, other) {
            (Nil, Nil) => Ordering::Equal,
            (Ref(a), Ref(b)) => a.cmp(b),
            (Keyword(a), Keyword(b)) => a.cmp(b),
            (String(a), String(b)) => a.as_str().cmp(b.as_str()),
            (Uri(a), Uri(b)) => a.cmp(b),
            (Boolean(a), Boolean(b)) => a.cmp(b),
            (Long(a), Long(b)) => a.cmp(b),
            (BigInt(a), BigInt(b)) => a.cmp(b),
            (Double(a), Double(b)) => a.total_cmp(b),
            (Float(a), Float(b)) => a.total_cmp(b),
            (BigDec(a), BigDec(b)) => a.cmp(b).then_with(|| a.to_string().cmp(&b.to_string())),
            (Instant(a), Instant(b)) => a.cmp(b),
            (Uuid(a), Uuid(b)) => a.cmp(b),
            (Bytes(a), Bytes(b)) => a.cmp(b),
            (Symbol(a), Symbol(b)) => a.cmp(b),
            (Tuple(a), Tuple(b)) => a.cmp(b),
            (Map(a), Map(b)) => a.cmp(b),
            _ => self.rank().cmp(&other.rank()),
        }
    }
}

impl Hash for Value {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.rank().hash(state);
        match self {
            Value::Nil => {}
            Value::Ref(e) => e.hash(state),
            Value::Keyword(k) => k.hash(state),
            Value::String(s) => s.as_str().hash(state),
            Value::Uri(s) => s.hash(state),
            Value::Boolean(b) => b.hash(state),
            Value::Long(n) => n.hash(state),
            Value::BigInt(n) => n.hash(state),
            Value::Double(d) => d.to_bits().hash(state),
            Value::Float(f) => f.to_bits().hash(state),
            Value::BigDec(d) => d.to_string().hash(state),
            Value::Instant(ms) => ms.hash(state),
            Value::Uuid(u) => u.hash(state),
            Value::Bytes(b) => b.hash(state),
            Value::Symbol(s) => s.hash(state),
            Value::Tuple(items) => items.hash(state),
            Value::Map(m) => {
                for (k, v) in m.iter() {
                    k.hash(state);
                    v.hash(state);
                }
            }
        }
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.to_edn())
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Value {
        Value::string(s)
    }
}

impl From<String> for Value {
    fn from(s: String) -> Value {
        Value::String(SmolStr::from(s))
    }
}

impl From<i64> for Value {
    fn from(n: i64) -> Value {
        Value::Long(n)
    }
}

impl From<bool> for Value {
    fn from(b: bool) -> Value {
        Value::Boolean(b)
    }
}

impl From<f64> for Value {
    fn from(d: f64) -> Value {
        Value::Double(d)
    }
}

impl From<Keyword> for Value {
    fn from(k: Keyword) -> Value {
        Value::Keyword(k)
    }
}
