//! The byte codec of persisted datoms: varints, values and delta-coded datom runs.
//!
//! Why delta coding: datoms in an index segment or a transaction's log record are sorted or
//! share their tx, so consecutive entity, attribute and tx ids differ by little; a zigzag
//! varint of the difference is one or two bytes where the raw id is eight. The byte layout is
//! written down in `docs/design/file-format.md`.
//!
//! Decoding never trusts its input: every read is bounds-checked and every malformed byte is a
//! `DecodeError`, which the storage layer reports as `storage/corruption`.

use std::sync::Arc;

use vev_core::{Datom, Keyword, SmolStr, Symbol, Value};
use vev_edn::{BigDecimal, BigInt};

/// Why bytes could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError(pub String);

pub type DecodeResult<T> = Result<T, DecodeError>;

pub(crate) fn err<T>(msg: impl Into<String>) -> DecodeResult<T> {
    Err(DecodeError(msg.into()))
}

/// Appends encoded items to a byte vector.
#[derive(Default)]
pub struct Writer {
    pub buf: Vec<u8>,
}

impl Writer {
    pub fn new() -> Writer {
        Writer::default()
    }

    pub fn u8(&mut self, x: u8) {
        self.buf.push(x);
    }

    pub fn varint(&mut self, mut x: u64) {
        while x >= 0x80 {
            self.buf.push((x as u8) | 0x80);
            x >>= 7;
        }
        self.buf.push(x as u8);
    }

    pub fn zigzag(&mut self, x: i64) {
        self.varint(((x << 1) ^ (x >> 63)) as u64);
    }

    pub fn bytes(&mut self, b: &[u8]) {
        self.varint(b.len() as u64);
        self.buf.extend_from_slice(b);
    }

    pub fn str(&mut self, s: &str) {
        self.bytes(s.as_bytes());
    }

    pub fn value(&mut self, v: &Value) {
        self.value_flagged(v, false);
    }

    /// A value whose tag byte also carries `flag` in its high bit (tags are below 128).
    pub fn value_flagged(&mut self, v: &Value, flag: bool) {
        let at = self.buf.len();
        self.value_body(v);
        if flag {
            self.buf[at] |= 0x80;
        }
    }

    fn value_body(&mut self, v: &Value) {
        match v {
            Value::Nil => self.u8(0),
            Value::Ref(e) => {
                self.u8(1);
                self.varint(*e);
            }
            Value::Keyword(k) => {
                self.u8(2);
                self.str(k.as_str());
            }
            Value::String(s) => {
                self.u8(3);
                self.str(s);
            }
            Value::Boolean(b) => {
                self.u8(4);
                self.u8(*b as u8);
            }
            Value::Long(n) => {
                self.u8(5);
                self.zigzag(*n);
            }
            Value::BigInt(n) => {
                self.u8(6);
                self.bytes(&n.to_signed_bytes_le());
            }
            Value::Double(x) => {
                self.u8(7);
                self.buf.extend_from_slice(&x.to_bits().to_le_bytes());
            }
            Value::Float(x) => {
                self.u8(8);
                self.buf.extend_from_slice(&x.to_bits().to_le_bytes());
            }
            Value::BigDec(d) => {
                self.u8(9);
                let (digits, scale) = d.as_bigint_and_exponent();
                self.bytes(&digits.to_signed_bytes_le());
                self.zigzag(scale);
            }
            Value::Instant(ms) => {
                self.u8(10);
                self.zigzag(*ms);
            }
            Value::Uuid(u) => {
                self.u8(11);
                self.buf.extend_from_slice(u);
            }
            Value::Uri(s) => {
                self.u8(12);
                self.str(s);
            }
            Value::Bytes(b) => {
                self.u8(13);
                self.bytes(b);
            }
            Value::Symbol(s) => {
                self.u8(14);
                self.str(s.as_str());
            }
            Value::Tuple(items) => {
                self.u8(15);
                self.varint(items.len() as u64);
                for x in items.iter() {
                    self.value(x);
                }
            }
            Value::Map(m) => {
                self.u8(16);
                self.varint(m.len() as u64);
                for (k, x) in m.iter() {
                    self.value(k);
                    self.value(x);
                }
            }
        }
    }
}

/// Reads encoded items from a byte slice, bounds-checked.
pub struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
    /// With `sharing_strings`: the strings read so far, so that equal ones share one
    /// allocation.
    strings: Option<StringMemo<'a>>,
}

type StringMemo<'a> = hashbrown::HashMap<&'a str, SmolStr, foldhash::fast::RandomState>;

/// Strings longer than this are not shared (they are rarely repeated: names, texts); those
/// up to `SmolStr::INLINE_CAP` bytes need no sharing, being inline.
const SHARED_STRING_MAX: usize = 64;

/// Values nest only through tuples; a tuple deeper than this is corrupt.
const VALUE_DEPTH_MAX: usize = 64;

impl<'a> Reader<'a> {
    pub fn new(bytes: &'a [u8]) -> Reader<'a> {
        Reader {
            bytes,
            pos: 0,
            strings: None,
        }
    }

    /// A reader whose equal short strings share one `Arc<str>`: for a segment, whose values
    /// of an attribute repeat (a city, a status) across its entities. Each would otherwise be
    /// an allocation of its own, somewhere else on the heap: memory per datom, and a cache
    /// miss for every reader that looks at the string (a group-by on it, say).
    pub fn sharing_strings(bytes: &'a [u8]) -> Reader<'a> {
        Reader {
            strings: Some(StringMemo::default()),
            ..Reader::new(bytes)
        }
    }

    /// A string value read from the bytes.
    fn string_value(&mut self) -> DecodeResult<SmolStr> {
        let s = self.str()?;
        match &mut self.strings {
            _ if s.len() <= SmolStr::INLINE_CAP => Ok(SmolStr::new_inline(s)),
            Some(memo) if s.len() <= SHARED_STRING_MAX => {
                Ok(memo.entry(s).or_insert_with(|| SmolStr::new(s)).clone())
            }
            _ => Ok(SmolStr::new(s)),
        }
    }

    pub fn is_at_end(&self) -> bool {
        self.pos == self.bytes.len()
    }

    pub fn position(&self) -> usize {
        self.pos
    }

    /// The bytes not read yet.
    pub fn rest(&self) -> &'a [u8] {
        &self.bytes[self.pos..]
    }

    pub fn u8(&mut self) -> DecodeResult<u8> {
        match self.bytes.get(self.pos) {
            Some(b) => {
                self.pos += 1;
                Ok(*b)
            }
            None => err(format!("truncated at byte {}", self.pos)),
        }
    }

    fn take(&mut self, n: usize) -> DecodeResult<&'a [u8]> {
        match self.pos.checked_add(n) {
            Some(end) if end <= self.bytes.len() => {
                let out = &self.bytes[self.pos..end];
                self.pos = end;
                Ok(out)
            }
            _ => err(format!(
                "truncated: {n} bytes wanted at byte {} of {}",
                self.pos,
                self.bytes.len()
            )),
        }
    }

    pub fn varint(&mut self) -> DecodeResult<u64> {
        let mut x: u64 = 0;
        for shift in (0..64).step_by(7) {
            let b = self.u8()?;
            if shift == 63 && b > 1 {
                return err(format!("varint overflows 64 bits at byte {}", self.pos));
            }
            x |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(x);
            }
        }
        err(format!("varint longer than 10 bytes at byte {}", self.pos))
    }

    /// A varint that counts items each taking at least one byte: bounded by what is left.
    pub fn count(&mut self) -> DecodeResult<usize> {
        let n = self.varint()?;
        let left = (self.bytes.len() - self.pos) as u64;
        if n > left {
            return err(format!("count {n} exceeds the {left} bytes left"));
        }
        Ok(n as usize)
    }

    pub fn zigzag(&mut self) -> DecodeResult<i64> {
        let x = self.varint()?;
        Ok(((x >> 1) as i64) ^ -((x & 1) as i64))
    }

    pub fn bytes(&mut self) -> DecodeResult<&'a [u8]> {
        let n = self.count()?;
        self.take(n)
    }

    pub fn str(&mut self) -> DecodeResult<&'a str> {
        let at = self.pos;
        std::str::from_utf8(self.bytes()?)
            .or_else(|_| err(format!("invalid utf-8 in the string at byte {at}")))
    }

    /// A value written by `value_flagged`, and its flag.
    pub fn value_flagged(&mut self) -> DecodeResult<(Value, bool)> {
        let at = self.pos;
        let tag = self.u8()?;
        let v = self.value_tagged(tag & 0x7f, at, 0)?;
        Ok((v, tag & 0x80 != 0))
    }

    fn value_at(&mut self, depth: usize) -> DecodeResult<Value> {
        let at = self.pos;
        let tag = self.u8()?;
        self.value_tagged(tag, at, depth)
    }

    fn value_tagged(&mut self, tag: u8, at: usize, depth: usize) -> DecodeResult<Value> {
        if depth > VALUE_DEPTH_MAX {
            return err("values nested deeper than 64");
        }
        Ok(match tag {
            0 => Value::Nil,
            1 => Value::Ref(self.varint()?),
            2 => Value::Keyword(Keyword::new(self.str()?)),
            3 => Value::String(self.string_value()?),
            4 => match self.u8()? {
                0 => Value::Boolean(false),
                1 => Value::Boolean(true),
                b => return err(format!("boolean byte {b} at byte {at}")),
            },
            5 => Value::Long(self.zigzag()?),
            6 => Value::BigInt(Arc::new(BigInt::from_signed_bytes_le(self.bytes()?))),
            7 => {
                let raw: [u8; 8] = self
                    .take(8)?
                    .try_into()
                    .map_err(|_| DecodeError("f64".into()))?;
                Value::Double(f64::from_bits(u64::from_le_bytes(raw)))
            }
            8 => {
                let raw: [u8; 4] = self
                    .take(4)?
                    .try_into()
                    .map_err(|_| DecodeError("f32".into()))?;
                Value::Float(f32::from_bits(u32::from_le_bytes(raw)))
            }
            9 => {
                let digits = BigInt::from_signed_bytes_le(self.bytes()?);
                let scale = self.zigzag()?;
                Value::BigDec(Arc::new(BigDecimal::new(digits, scale)))
            }
            10 => Value::Instant(self.zigzag()?),
            11 => {
                let raw: [u8; 16] = self
                    .take(16)?
                    .try_into()
                    .map_err(|_| DecodeError("uuid".into()))?;
                Value::Uuid(raw)
            }
            12 => Value::Uri(Arc::from(self.str()?)),
            13 => Value::Bytes(Arc::from(self.bytes()?)),
            14 => Value::Symbol(Symbol::new(self.str()?)),
            15 => {
                let n = self.count()?;
                let mut items = Vec::with_capacity(n);
                for _ in 0..n {
                    items.push(self.value_at(depth + 1)?);
                }
                Value::Tuple(Arc::from(items))
            }
            16 => {
                let n = self.count()?;
                let mut m = std::collections::BTreeMap::new();
                for _ in 0..n {
                    let k = self.value_at(depth + 1)?;
                    let x = self.value_at(depth + 1)?;
                    m.insert(k, x);
                }
                Value::Map(Arc::new(m))
            }
            tag => return err(format!("unknown value tag {tag} at byte {at}")),
        })
    }
}

/// Delta state for a run of datoms: each datom's e, a and tx are coded as the difference
/// from the previous datom's.
#[derive(Default, Clone, Copy)]
pub struct DatomDelta {
    e: u64,
    a: u64,
    tx: u64,
}

impl DatomDelta {
    pub fn new() -> DatomDelta {
        DatomDelta::default()
    }

    pub fn write(&mut self, w: &mut Writer, d: &Datom) {
        w.zigzag(d.e.wrapping_sub(self.e) as i64);
        w.zigzag(d.a.wrapping_sub(self.a) as i64);
        w.value_flagged(&d.v, d.added);
        w.zigzag(d.tx.wrapping_sub(self.tx) as i64);
        self.e = d.e;
        self.a = d.a;
        self.tx = d.tx;
    }

    pub fn read(&mut self, r: &mut Reader<'_>) -> DecodeResult<Datom> {
        let e = self.e.wrapping_add(r.zigzag()? as u64);
        let a = self.a.wrapping_add(r.zigzag()? as u64);
        let (v, added) = r.value_flagged()?;
        let tx = self.tx.wrapping_add(r.zigzag()? as u64);
        self.e = e;
        self.a = a;
        self.tx = tx;
        Ok(Datom { e, a, v, tx, added })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_sharing_reader_gives_equal_short_strings_one_allocation() {
        let medium = |c: &str| c.repeat(SmolStr::INLINE_CAP + 2);
        let (lima, riga) = (medium("l"), medium("r"));
        let long = "x".repeat(SHARED_STRING_MAX + 1);
        let values = ["Oslo", &lima, "Oslo", &riga, &lima, &long, &long];
        let mut w = Writer::new();
        let mut delta = DatomDelta::new();
        for (i, v) in values.iter().enumerate() {
            let d = Datom::new(i as u64, 7, Value::string(v), 1, true);
            delta.write(&mut w, &d);
        }
        let read = |mut r: Reader<'_>| -> Vec<SmolStr> {
            let mut delta = DatomDelta::new();
            (0..values.len())
                .map(|_| match delta.read(&mut r).unwrap().v {
                    Value::String(s) => s,
                    other => panic!("{other:?}"),
                })
                .collect()
        };
        let shared = read(Reader::sharing_strings(&w.buf));
        let plain = read(Reader::new(&w.buf));
        assert_eq!(shared, plain);
        let same = |x: &SmolStr, y: &SmolStr| std::ptr::eq(x.as_ptr(), y.as_ptr());
        assert!(!shared[0].is_heap_allocated(), "short strings are inline");
        assert!(same(&shared[1], &shared[4]));
        assert!(!same(&shared[1], &shared[3]));
        assert!(!same(&shared[5], &shared[6]), "long strings are not shared");
        assert!(!same(&plain[1], &plain[4]));
    }

    fn value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            any::<u64>().prop_map(Value::Ref),
            "[a-z]{1,5}/[a-z]{1,5}".prop_map(|s| Value::Keyword(Keyword::new(&s))),
            ".{0,30}".prop_map(|s| Value::string(&s)),
            any::<bool>().prop_map(Value::Boolean),
            any::<i64>().prop_map(Value::Long),
            any::<i64>().prop_map(|n| Value::BigInt(Arc::new(BigInt::from(n) * BigInt::from(n)))),
            any::<u64>().prop_map(|b| Value::Double(f64::from_bits(b))),
            any::<u32>().prop_map(|b| Value::Float(f32::from_bits(b))),
            (any::<i64>(), -40i64..40)
                .prop_map(|(n, s)| Value::BigDec(Arc::new(BigDecimal::new(BigInt::from(n), s)))),
            any::<i64>().prop_map(Value::Instant),
            any::<[u8; 16]>().prop_map(Value::Uuid),
            "[a-z:/.]{0,10}".prop_map(|s| Value::Uri(Arc::from(s.as_str()))),
            proptest::collection::vec(any::<u8>(), 0..10).prop_map(|b| Value::Bytes(Arc::from(b))),
            "[a-z]{1,5}".prop_map(|s| Value::Symbol(Symbol::new(&s))),
            Just(Value::Nil),
        ];
        leaf.prop_recursive(2, 8, 4, |inner| {
            proptest::collection::vec(inner, 0..4).prop_map(|v| Value::Tuple(Arc::from(v)))
        })
    }

    fn same(x: &Value, y: &Value) -> bool {
        match (x, y) {
            (Value::Double(a), Value::Double(b)) => a.to_bits() == b.to_bits(),
            (Value::Float(a), Value::Float(b)) => a.to_bits() == b.to_bits(),
            (Value::Tuple(a), Value::Tuple(b)) => {
                a.len() == b.len() && a.iter().zip(b.iter()).all(|(p, q)| same(p, q))
            }
            _ => x == y,
        }
    }

    proptest! {
        #[test]
        fn datom_runs_round_trip(
            ds in proptest::collection::vec((any::<u64>(), 0u64..1000, value(), any::<u64>(), any::<bool>()), 0..20)
        ) {
            let datoms: Vec<Datom> = ds.into_iter().map(|(e, a, v, tx, added)| Datom { e, a, v, tx, added }).collect();
            let mut w = Writer::new();
            let mut delta = DatomDelta::new();
            for d in &datoms {
                delta.write(&mut w, d);
            }
            let mut r = Reader::new(&w.buf);
            let mut delta = DatomDelta::new();
            for d in &datoms {
                let got = delta.read(&mut r).unwrap();
                prop_assert_eq!((got.e, got.a, got.tx, got.added), (d.e, d.a, d.tx, d.added));
                prop_assert!(same(&got.v, &d.v));
            }
            prop_assert!(r.is_at_end());
        }

        #[test]
        fn garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let mut r = Reader::new(&bytes);
            let mut delta = DatomDelta::new();
            while !r.is_at_end() {
                if delta.read(&mut r).is_err() {
                    break;
                }
            }
        }
    }

    #[test]
    fn varint_rejects_overflow() {
        let bytes = [0xffu8; 11];
        assert!(Reader::new(&bytes).varint().is_err());
        let mut w = Writer::new();
        w.varint(u64::MAX);
        assert_eq!(Reader::new(&w.buf).varint(), Ok(u64::MAX));
    }
}
