//! Column types and the writing of Vev values into DuckDB vectors.
//!
//! Each Vev value type has one DuckDB type: longs and refs BIGINT, doubles and floats DOUBLE,
//! strings VARCHAR, booleans BOOLEAN, instants TIMESTAMP, UUIDs UUID, bytes BLOB, bigints and
//! bigdecs DECIMAL(38, s) when every value fits (else VARCHAR), and keywords, symbols, URIs and
//! tuples VARCHAR holding their EDN text (`:color/red`). Pulled entities and collections are
//! JSON (`crate::json`).

use bigdecimal::BigDecimal;
use duckdb::core::{FlatVector, Inserter, LogicalTypeHandle, LogicalTypeId};
use num_bigint::BigInt;
use vev::{Edn, Value, ValueType};

use crate::error::{ExtError, Result};
use crate::vector::Slots;

/// The widest DECIMAL DuckDB has.
const DECIMAL_WIDTH: u8 = 38;

/// The DuckDB type of an output column.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ColType {
    /// BIGINT: longs, refs, entity and transaction ids.
    BigInt,
    /// DOUBLE: doubles and floats.
    Double,
    /// VARCHAR: strings, and the EDN text of keywords, symbols, URIs and tuples.
    Varchar,
    /// BOOLEAN.
    Boolean,
    /// TIMESTAMP (microseconds; Vev's instants are milliseconds).
    Timestamp,
    /// UUID.
    Uuid,
    /// BLOB: bytes.
    Blob,
    /// DECIMAL(38, scale): bigints (scale 0) and bigdecs.
    Decimal(u8),
    /// JSON (VARCHAR with DuckDB's JSON alias): pulled entities, maps and collections.
    Json,
}

impl ColType {
    /// The DuckDB logical type.
    pub fn logical(self) -> LogicalTypeHandle {
        match self {
            ColType::BigInt => LogicalTypeId::Bigint.into(),
            ColType::Double => LogicalTypeId::Double.into(),
            ColType::Varchar => LogicalTypeId::Varchar.into(),
            ColType::Boolean => LogicalTypeId::Boolean.into(),
            ColType::Timestamp => LogicalTypeId::Timestamp.into(),
            ColType::Uuid => LogicalTypeId::Uuid.into(),
            ColType::Blob => LogicalTypeId::Blob.into(),
            ColType::Decimal(scale) => LogicalTypeHandle::decimal(DECIMAL_WIDTH, scale),
            ColType::Json => {
                let mut t = LogicalTypeHandle::from(LogicalTypeId::Varchar);
                t.set_alias("JSON");
                t
            }
        }
    }

    /// The column type of an attribute's values. Bigints and bigdecs need their values to
    /// choose (`ColType::for_values`); this gives VARCHAR for them.
    pub fn of_value_type(vt: ValueType) -> ColType {
        match vt {
            ValueType::Long | ValueType::Ref => ColType::BigInt,
            ValueType::Double | ValueType::Float => ColType::Double,
            ValueType::Boolean => ColType::Boolean,
            ValueType::Instant => ColType::Timestamp,
            ValueType::Uuid => ColType::Uuid,
            ValueType::Bytes => ColType::Blob,
            ValueType::String
            | ValueType::Keyword
            | ValueType::Symbol
            | ValueType::Uri
            | ValueType::Tuple
            | ValueType::BigInt
            | ValueType::BigDec => ColType::Varchar,
        }
    }

    /// The type one EDN value calls for on its own (`None` for nil, which fits any).
    pub fn of_edn(v: &Edn) -> Option<ColType> {
        Some(match v {
            Edn::Nil => return None,
            Edn::Integer(_) => ColType::BigInt,
            Edn::Float(_) => ColType::Double,
            Edn::Bool(_) => ColType::Boolean,
            Edn::Inst(_) => ColType::Timestamp,
            Edn::Uuid(_) => ColType::Uuid,
            Edn::BigInt(n) => {
                decimal_of_bigint(n).map_or(ColType::Varchar, |_| ColType::Decimal(0))
            }
            Edn::BigDec(d) => match scaled(d) {
                Some((_, scale)) => ColType::Decimal(scale),
                None => ColType::Varchar,
            },
            Edn::Tagged(tag, inner) if tag.as_str() == "bytes" && inner.as_str().is_some() => {
                ColType::Blob
            }
            Edn::Map(_) | Edn::Vector(_) | Edn::List(_) | Edn::Set(_) => ColType::Json,
            Edn::String(_) | Edn::Char(_) | Edn::Keyword(_) | Edn::Symbol(_) | Edn::Tagged(..) => {
                ColType::Varchar
            }
        })
    }

    /// The one type that holds all of `values`: the type they share, DECIMAL at the largest
    /// scale for decimals, VARCHAR (their EDN text) when they differ; `None` when every value
    /// is nil. A decimal may still not fit at the common scale: callers check `fits`.
    pub fn for_values<'a>(values: impl IntoIterator<Item = &'a Edn>) -> Option<ColType> {
        let mut found: Option<ColType> = None;
        for v in values {
            let Some(t) = ColType::of_edn(v) else {
                continue;
            };
            found = Some(match (found, t) {
                (None, t) => t,
                (Some(a), b) if a == b => a,
                (Some(ColType::Decimal(a)), ColType::Decimal(b)) => ColType::Decimal(a.max(b)),
                (Some(ColType::Json), _) | (_, ColType::Json) => ColType::Json,
                _ => ColType::Varchar,
            });
        }
        found
    }

    /// Whether `v` can be written to a column of this type as itself (nil always can; any
    /// value can be written to VARCHAR, as its EDN text, and to JSON).
    pub fn fits(self, v: &Edn) -> bool {
        match (self, v) {
            (_, Edn::Nil) | (ColType::Varchar | ColType::Json, _) => true,
            (ColType::Decimal(scale), Edn::BigDec(d)) => {
                scaled(d).is_some_and(|(_, s)| s <= scale) && rescale(d, scale).is_some()
            }
            (ColType::Decimal(scale), Edn::BigInt(n)) => decimal_of_bigint(n)
                .is_some_and(|x| x.checked_mul(10i128.pow(scale.into())).is_some()),
            (ColType::Decimal(scale), Edn::Integer(n)) => i128::from(*n)
                .checked_mul(10i128.pow(scale.into()))
                .is_some(),
            (ColType::Double, Edn::Integer(_)) => true,
            (t, v) => ColType::of_edn(v) == Some(t),
        }
    }
}

/// A bigint as an i128, if it has at most 38 digits.
fn decimal_of_bigint(n: &BigInt) -> Option<i128> {
    let x = i128::try_from(n).ok()?;
    (x.unsigned_abs() < 10u128.pow(DECIMAL_WIDTH.into())).then_some(x)
}

/// A bigdec as its unscaled digits and scale, if it fits DECIMAL(38, s) with s ≥ 0.
fn scaled(d: &BigDecimal) -> Option<(i128, u8)> {
    let (digits, scale) = d.as_bigint_and_exponent();
    let scale = u8::try_from(scale).ok().filter(|s| *s <= DECIMAL_WIDTH)?;
    Some((decimal_of_bigint(&digits)?, scale))
}

/// A bigdec's unscaled digits at `scale` (≥ its own), if they fit 38 digits.
fn rescale(d: &BigDecimal, scale: u8) -> Option<i128> {
    let (digits, own) = scaled(d)?;
    let x = digits.checked_mul(10i128.checked_pow(u32::from(scale.checked_sub(own)?))?)?;
    (x.unsigned_abs() < 10u128.pow(DECIMAL_WIDTH.into())).then_some(x)
}

/// A value that does not fit its column: a bug in the type choice, reported, not panicked.
fn misfit(ty: ColType, v: &dyn std::fmt::Display) -> ExtError {
    ExtError::new(
        "duckdb/type-mismatch",
        format!("value {v} does not fit the column's type {ty:?}"),
    )
}

/// One output column of a chunk, and its type.
pub struct Out<'a> {
    vec: FlatVector<'a>,
    ty: ColType,
    slots: Slots,
}

impl<'a> Out<'a> {
    /// The column `vec`, of type `ty` (the type bind declared for it).
    pub fn new(vec: FlatVector<'a>, ty: ColType) -> Out<'a> {
        let slots = Slots::of(&vec);
        Out { vec, ty, slots }
    }

    /// Write a BIGINT at `row` (a column known to be BIGINT: ids, counts).
    pub fn id(&mut self, row: usize, x: i64) -> Result<()> {
        self.slots.i64(row, x)
    }

    /// Write a BOOLEAN at `row`.
    pub fn flag(&mut self, row: usize, x: bool) -> Result<()> {
        self.slots.bool(row, x)
    }

    /// Write text at `row` (a VARCHAR column).
    pub fn text(&mut self, row: usize, s: &str) {
        self.vec.insert(row, s);
    }

    /// Write `v` at `row`.
    pub fn edn(&mut self, row: usize, v: &Edn) -> Result<()> {
        match (self.ty, v) {
            (_, Edn::Nil) => self.vec.set_null(row),
            (ColType::BigInt, Edn::Integer(n)) => self.slots.i64(row, *n)?,
            (ColType::Double, Edn::Float(x)) => self.slots.f64(row, *x)?,
            (ColType::Double, Edn::Integer(n)) => self.slots.f64(row, *n as f64)?,
            (ColType::Boolean, Edn::Bool(b)) => self.slots.bool(row, *b)?,
            (ColType::Timestamp, Edn::Inst(ms)) => self.timestamp(row, *ms)?,
            (ColType::Uuid, Edn::Uuid(u)) => self.uuid(row, *u)?,
            (ColType::Blob, Edn::Tagged(_, inner)) => {
                let hex = inner.as_str().unwrap_or_default();
                let bytes = hex_decode(hex).ok_or_else(|| misfit(self.ty, v))?;
                self.vec.insert(row, bytes.as_slice());
            }
            (ColType::Decimal(scale), _) => {
                let x = match v {
                    Edn::BigDec(d) => rescale(d, scale),
                    Edn::BigInt(n) => {
                        decimal_of_bigint(n).and_then(|x| x.checked_mul(10i128.pow(scale.into())))
                    }
                    Edn::Integer(n) => i128::from(*n).checked_mul(10i128.pow(scale.into())),
                    _ => None,
                };
                self.slots.i128(row, x.ok_or_else(|| misfit(self.ty, v))?)?;
            }
            (ColType::Varchar, Edn::String(s)) => self.vec.insert(row, s.as_str()),
            (ColType::Varchar, other) => self.vec.insert(row, other.to_string().as_str()),
            (ColType::Json, other) => self.vec.insert(row, crate::json::to_json(other).as_str()),
            _ => return Err(misfit(self.ty, v)),
        }
        Ok(())
    }

    /// Write a datom's value at `row` (the scans' path: no EDN built for the common types).
    pub fn value(&mut self, row: usize, v: &Value) -> Result<()> {
        match (self.ty, v) {
            (ColType::BigInt, Value::Long(n)) => self.slots.i64(row, *n)?,
            (ColType::BigInt, Value::Ref(e)) => self.slots.i64(row, *e as i64)?,
            (ColType::Double, Value::Double(x)) => self.slots.f64(row, *x)?,
            (ColType::Double, Value::Float(x)) => self.slots.f64(row, f64::from(*x))?,
            (ColType::Boolean, Value::Boolean(b)) => self.slots.bool(row, *b)?,
            (ColType::Timestamp, Value::Instant(ms)) => self.timestamp(row, *ms)?,
            (ColType::Uuid, Value::Uuid(u)) => self.uuid(row, u128::from_be_bytes(*u))?,
            (ColType::Blob, Value::Bytes(b)) => self.vec.insert(row, &b[..]),
            (ColType::Varchar, Value::String(s)) => self.vec.insert(row, &**s),
            _ => return self.edn(row, &v.to_edn()),
        }
        Ok(())
    }

    fn timestamp(&mut self, row: usize, ms: i64) -> Result<()> {
        let micros = ms.checked_mul(1000).ok_or_else(|| {
            ExtError::new(
                "duckdb/out-of-range",
                format!("instant {ms} ms is outside DuckDB's TIMESTAMP range"),
            )
        })?;
        self.slots.i64(row, micros)?;
        Ok(())
    }

    fn uuid(&mut self, row: usize, u: u128) -> Result<()> {
        // DuckDB stores a UUID as a hugeint with the top bit flipped, so that the numbers sort
        // as the texts do.
        self.slots.i128(row, (u ^ (1u128 << 127)) as i128)?;
        Ok(())
    }
}

/// The bytes of lowercase or uppercase hexadecimal text.
fn hex_decode(hex: &str) -> Option<Vec<u8>> {
    if !hex.len().is_multiple_of(2) {
        return None;
    }
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_type_for_mixed_values() {
        let ints = [Edn::Integer(1), Edn::Nil, Edn::Integer(2)];
        assert_eq!(ColType::for_values(&ints), Some(ColType::BigInt));
        let mixed = [Edn::Integer(1), Edn::string("a")];
        assert_eq!(ColType::for_values(&mixed), Some(ColType::Varchar));
        assert_eq!(ColType::for_values(&[Edn::Nil]), None);
        let decs = [
            Edn::BigDec(Box::new("1.5".parse().unwrap())),
            Edn::BigDec(Box::new("2.25".parse().unwrap())),
        ];
        assert_eq!(ColType::for_values(&decs), Some(ColType::Decimal(2)));
        assert!(ColType::Decimal(2).fits(&decs[0]));
        let huge = Edn::BigDec(Box::new("1e50".parse().unwrap()));
        assert_eq!(ColType::of_edn(&huge), Some(ColType::Varchar));
    }

    #[test]
    fn fits_checks_the_value_against_the_type() {
        assert!(ColType::BigInt.fits(&Edn::Integer(3)));
        assert!(!ColType::BigInt.fits(&Edn::string("3")));
        assert!(ColType::Double.fits(&Edn::Integer(3)));
        assert!(ColType::Varchar.fits(&Edn::Integer(3)));
        assert!(ColType::Timestamp.fits(&Edn::Nil));
    }

    #[test]
    fn hex_decodes_and_refuses_odd_text() {
        assert_eq!(hex_decode("00ff10"), Some(vec![0, 255, 16]));
        assert_eq!(hex_decode("0"), None);
        assert_eq!(hex_decode("zz"), None);
    }
}
