//! SQL column types: how each maps to a Vev value type, its PostgreSQL type (the oid
//! RowDescription and ParameterDescription carry), and the text format of its values.
//!
//! Values cross the wire in PostgreSQL's text format only (every client this server is
//! tested with asks for text). Inside Vev they are ordinary values: every integer type is a
//! long, text types are strings, timestamps are instants (milliseconds: the microseconds a
//! PostgreSQL timestamp can hold are truncated, see docs/sql.md).

use pgwire::api::Type;
use sqlparser::ast::{CharacterLength, DataType, ExactNumberInfo, TimezoneInfo};
use vev::{Edn, ValueType};

use crate::error::SqlError;

/// A column's declared SQL type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SqlType {
    Int2,
    Int4,
    Int8,
    Float4,
    Float8,
    Numeric,
    Text,
    /// `varchar(n)`: at most `n` characters (`None`: no limit).
    Varchar(Option<u32>),
    /// `char(n)`: exactly `n` characters, blank-padded.
    Char(u32),
    Bool,
    Timestamp,
    Timestamptz,
    Uuid,
    Bytea,
    /// A Vev keyword (an EDN-defined attribute's values), shown as its text `:ns/name`.
    Keyword,
}

impl SqlType {
    /// The type of a column declaration, or `0A000` for one Vev does not store.
    pub fn from_ast(t: &DataType) -> Result<SqlType, SqlError> {
        let len = |l: &Option<CharacterLength>| -> Option<u32> {
            match l {
                Some(CharacterLength::IntegerLength { length, .. }) => {
                    Some(u32::try_from(*length).unwrap_or(u32::MAX))
                }
                _ => None,
            }
        };
        Ok(match t {
            DataType::Int2(_) | DataType::SmallInt(_) => SqlType::Int2,
            DataType::Int(_) | DataType::Int4(_) | DataType::Integer(_) => SqlType::Int4,
            DataType::Int8(_) | DataType::BigInt(_) => SqlType::Int8,
            DataType::Float4 | DataType::Real => SqlType::Float4,
            DataType::Float8 | DataType::DoublePrecision | DataType::Double(_) => SqlType::Float8,
            DataType::Float(ExactNumberInfo::Precision(p)) if *p <= 24 => SqlType::Float4,
            DataType::Float(_) => SqlType::Float8,
            DataType::Numeric(_) | DataType::Decimal(_) => SqlType::Numeric,
            DataType::Text => SqlType::Text,
            DataType::Varchar(l) | DataType::CharacterVarying(l) => SqlType::Varchar(len(l)),
            DataType::Char(l) | DataType::Character(l) => SqlType::Char(len(l).unwrap_or(1)),
            DataType::Bool | DataType::Boolean => SqlType::Bool,
            DataType::Timestamp(_, TimezoneInfo::WithTimeZone | TimezoneInfo::Tz) => {
                SqlType::Timestamptz
            }
            DataType::Timestamp(_, _) => SqlType::Timestamp,
            DataType::Uuid => SqlType::Uuid,
            DataType::Bytea => SqlType::Bytea,
            DataType::Custom(name, _) => match name.to_string().to_ascii_lowercase().as_str() {
                "serial" | "serial4" => SqlType::Int4,
                "bigserial" | "serial8" => SqlType::Int8,
                "smallserial" | "serial2" => SqlType::Int2,
                "timestamptz" => SqlType::Timestamptz,
                "bpchar" => SqlType::Char(1),
                other => {
                    return Err(SqlError::unsupported(format!("type \"{other}\"")));
                }
            },
            other => return Err(SqlError::unsupported(format!("type {other}"))),
        })
    }

    /// The name recorded in the schema (`:vev.sql/type`), which `parse_name` reads back.
    pub fn name(self) -> String {
        match self {
            SqlType::Int2 => "int2".into(),
            SqlType::Int4 => "int4".into(),
            SqlType::Int8 => "int8".into(),
            SqlType::Float4 => "float4".into(),
            SqlType::Float8 => "float8".into(),
            SqlType::Numeric => "numeric".into(),
            SqlType::Text => "text".into(),
            SqlType::Varchar(None) => "varchar".into(),
            SqlType::Varchar(Some(n)) => format!("varchar({n})"),
            SqlType::Char(n) => format!("char({n})"),
            SqlType::Bool => "bool".into(),
            SqlType::Timestamp => "timestamp".into(),
            SqlType::Timestamptz => "timestamptz".into(),
            SqlType::Uuid => "uuid".into(),
            SqlType::Bytea => "bytea".into(),
            SqlType::Keyword => "keyword".into(),
        }
    }

    /// The type `name` names, as written by `name`.
    pub fn parse_name(name: &str) -> Option<SqlType> {
        let sized = |prefix: &str| -> Option<u32> {
            name.strip_prefix(prefix)?
                .strip_prefix('(')?
                .strip_suffix(')')?
                .parse()
                .ok()
        };
        Some(match name {
            "int2" => SqlType::Int2,
            "int4" => SqlType::Int4,
            "int8" => SqlType::Int8,
            "float4" => SqlType::Float4,
            "float8" => SqlType::Float8,
            "numeric" => SqlType::Numeric,
            "text" => SqlType::Text,
            "varchar" => SqlType::Varchar(None),
            "bool" => SqlType::Bool,
            "timestamp" => SqlType::Timestamp,
            "timestamptz" => SqlType::Timestamptz,
            "uuid" => SqlType::Uuid,
            "bytea" => SqlType::Bytea,
            "keyword" => SqlType::Keyword,
            _ => {
                if let Some(n) = sized("varchar") {
                    SqlType::Varchar(Some(n))
                } else {
                    SqlType::Char(sized("char")?)
                }
            }
        })
    }

    /// The SQL type of an attribute defined in EDN (no `:vev.sql/type`): refs are `int8`
    /// entity ids.
    pub fn of_value_type(t: ValueType) -> Option<SqlType> {
        Some(match t {
            ValueType::Long | ValueType::Ref => SqlType::Int8,
            ValueType::String | ValueType::Uri => SqlType::Text,
            ValueType::Boolean => SqlType::Bool,
            ValueType::Double => SqlType::Float8,
            ValueType::Float => SqlType::Float4,
            ValueType::BigDec | ValueType::BigInt => SqlType::Numeric,
            ValueType::Instant => SqlType::Timestamptz,
            ValueType::Uuid => SqlType::Uuid,
            ValueType::Bytes => SqlType::Bytea,
            ValueType::Keyword => SqlType::Keyword,
            _ => return None,
        })
    }

    /// The Vev value type a column of this type stores.
    pub fn value_type(self) -> ValueType {
        match self {
            SqlType::Int2 | SqlType::Int4 | SqlType::Int8 => ValueType::Long,
            SqlType::Float4 => ValueType::Float,
            SqlType::Float8 => ValueType::Double,
            SqlType::Numeric => ValueType::BigDec,
            SqlType::Text | SqlType::Varchar(_) | SqlType::Char(_) => ValueType::String,
            SqlType::Bool => ValueType::Boolean,
            SqlType::Timestamp | SqlType::Timestamptz => ValueType::Instant,
            SqlType::Uuid => ValueType::Uuid,
            SqlType::Bytea => ValueType::Bytes,
            SqlType::Keyword => ValueType::Keyword,
        }
    }

    /// The PostgreSQL type clients see.
    pub fn pg_type(self) -> Type {
        match self {
            SqlType::Int2 => Type::INT2,
            SqlType::Int4 => Type::INT4,
            SqlType::Int8 => Type::INT8,
            SqlType::Float4 => Type::FLOAT4,
            SqlType::Float8 => Type::FLOAT8,
            SqlType::Numeric => Type::NUMERIC,
            SqlType::Text | SqlType::Keyword => Type::TEXT,
            SqlType::Varchar(_) => Type::VARCHAR,
            SqlType::Char(_) => Type::BPCHAR,
            SqlType::Bool => Type::BOOL,
            SqlType::Timestamp => Type::TIMESTAMP,
            SqlType::Timestamptz => Type::TIMESTAMPTZ,
            SqlType::Uuid => Type::UUID,
            SqlType::Bytea => Type::BYTEA,
        }
    }

    /// The PostgreSQL spelling, as `\d` and error messages show it.
    pub fn display(self) -> String {
        match self {
            SqlType::Int2 => "smallint".into(),
            SqlType::Int4 => "integer".into(),
            SqlType::Int8 => "bigint".into(),
            SqlType::Float4 => "real".into(),
            SqlType::Float8 => "double precision".into(),
            SqlType::Numeric => "numeric".into(),
            SqlType::Text | SqlType::Keyword => "text".into(),
            SqlType::Varchar(None) => "character varying".into(),
            SqlType::Varchar(Some(n)) => format!("character varying({n})"),
            SqlType::Char(n) => format!("character({n})"),
            SqlType::Bool => "boolean".into(),
            SqlType::Timestamp => "timestamp without time zone".into(),
            SqlType::Timestamptz => "timestamp with time zone".into(),
            SqlType::Uuid => "uuid".into(),
            SqlType::Bytea => "bytea".into(),
        }
    }

    pub fn is_integer(self) -> bool {
        matches!(self, SqlType::Int2 | SqlType::Int4 | SqlType::Int8)
    }

    pub fn is_text(self) -> bool {
        matches!(
            self,
            SqlType::Text | SqlType::Varchar(_) | SqlType::Char(_) | SqlType::Keyword
        )
    }

    /// A value of this type from its text form (a parameter, a COPY field, a literal
    /// cast), as the EDN that a query input or a transaction takes.
    pub fn parse_text(self, text: &str) -> Result<Edn, SqlError> {
        let invalid = || SqlError::invalid_text(self, text);
        Ok(match self {
            SqlType::Int2 => int_in_range(self, text, i64::from(i16::MIN), i64::from(i16::MAX))?,
            SqlType::Int4 => int_in_range(self, text, i64::from(i32::MIN), i64::from(i32::MAX))?,
            SqlType::Int8 => int_in_range(self, text, i64::MIN, i64::MAX)?,
            SqlType::Float4 | SqlType::Float8 => {
                Edn::Float(positive_zero(parse_float(text.trim()).ok_or_else(invalid)?))
            }
            SqlType::Numeric => Edn::BigDec(Box::new(crate::numeric::normalize(
                text.trim()
                    .parse::<vev::edn::BigDecimal>()
                    .map_err(|_| invalid())?,
            ))),
            SqlType::Text | SqlType::Varchar(None) => Edn::String(text.to_owned()),
            SqlType::Varchar(Some(n)) => Edn::String(fit_varchar(text, n)?),
            SqlType::Char(n) => Edn::String(fit_char(text, n)?),
            SqlType::Bool => Edn::Bool(parse_bool(text).ok_or_else(invalid)?),
            SqlType::Timestamp | SqlType::Timestamptz => {
                Edn::Inst(parse_timestamp(text).ok_or_else(invalid)?)
            }
            SqlType::Uuid => Edn::Uuid(vev::edn::parse_uuid(text.trim()).ok_or_else(invalid)?),
            SqlType::Bytea => Edn::Tagged(
                vev::Symbol::new("bytes"),
                Box::new(Edn::String(parse_bytea(text).ok_or_else(invalid)?)),
            ),
            SqlType::Keyword => {
                let k = text.trim().trim_start_matches(':');
                if !vev::edn::is_valid_keyword(k) {
                    return Err(invalid());
                }
                Edn::Keyword(vev::Keyword::new(k))
            }
        })
    }
}

/// A double with -0 made 0. SQL holds them equal (`-0 = 0`, one value for DISTINCT, GROUP
/// BY and joins); as datoms they are two values, so SQL writes and computes only 0.
/// (PostgreSQL shows a -0 it stored as `-0`; Vev shows `0`.)
pub fn positive_zero(f: f64) -> f64 {
    if f == 0.0 {
        0.0
    } else {
        f
    }
}

/// An integer of type `t`: `22P02` for text that is no integer, `22003` for one out of
/// the type's range (as PostgreSQL tells them apart).
fn int_in_range(t: SqlType, text: &str, min: i64, max: i64) -> Result<Edn, SqlError> {
    let digits = text.trim();
    match digits.parse::<i64>() {
        Ok(n) if (min..=max).contains(&n) => return Ok(Edn::Integer(n)),
        Ok(_) => {}
        Err(_) => {
            let unsigned = digits.strip_prefix(['-', '+']).unwrap_or(digits);
            if unsigned.is_empty() || !unsigned.bytes().all(|b| b.is_ascii_digit()) {
                return Err(SqlError::invalid_text(t, text));
            }
        }
    }
    Err(SqlError::new(
        "22003",
        format!(
            "value \"{digits}\" is out of range for type {}",
            t.display()
        ),
    ))
}

fn parse_float(text: &str) -> Option<f64> {
    match text.to_ascii_lowercase().as_str() {
        "nan" => Some(f64::NAN),
        "infinity" | "inf" | "+infinity" => Some(f64::INFINITY),
        "-infinity" | "-inf" => Some(f64::NEG_INFINITY),
        t => t.parse().ok(),
    }
}

fn parse_bool(text: &str) -> Option<bool> {
    match text.trim().to_ascii_lowercase().as_str() {
        "t" | "true" | "y" | "yes" | "on" | "1" => Some(true),
        "f" | "false" | "n" | "no" | "off" | "0" => Some(false),
        _ => None,
    }
}

/// `varchar(n)`: longer text is an error (`22001`), unless only trailing blanks are over.
fn fit_varchar(text: &str, n: u32) -> Result<String, SqlError> {
    let chars = text.chars().count();
    if chars <= n as usize {
        return Ok(text.to_owned());
    }
    let kept: String = text.chars().take(n as usize).collect();
    if text[kept.len()..].chars().all(|c| c == ' ') {
        return Ok(kept);
    }
    Err(SqlError::too_long(SqlType::Varchar(Some(n))))
}

/// `char(n)`: blank-padded to `n`; longer text is an error unless the excess is blanks.
fn fit_char(text: &str, n: u32) -> Result<String, SqlError> {
    let chars = text.chars().count();
    if chars >= n as usize {
        return fit_varchar(text, n).map_err(|_| SqlError::too_long(SqlType::Char(n)));
    }
    let pad = n as usize - chars;
    let mut s = String::with_capacity(text.len() + pad);
    s.push_str(text);
    s.extend(std::iter::repeat_n(' ', pad));
    Ok(s)
}

/// PostgreSQL's timestamp input: `2024-01-31 12:00:00[.fff][+hh[:mm]]`, `T` for the space,
/// or a date alone. Digits past milliseconds are truncated.
pub fn parse_timestamp(text: &str) -> Option<i64> {
    let t = text.trim().replacen(' ', "T", 1);
    // PostgreSQL writes offsets as `+00` (no minutes): RFC 3339 wants `+00:00`.
    let t = match t.rfind(['+', '-']) {
        Some(at) if at > 10 && t[at + 1..].len() == 2 => format!("{t}:00"),
        _ => t,
    };
    let t = truncate_fraction(&t);
    vev::edn::parse_inst(&t)
}

/// Cut a fraction of seconds to milliseconds (RFC 3339 allows more digits; `parse_inst`
/// truncates too, this only keeps the offset after it intact).
fn truncate_fraction(t: &str) -> String {
    let Some(dot) = t.find('.') else {
        return t.to_owned();
    };
    let digits = t[dot + 1..]
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(t.len() - dot - 1);
    let keep = digits.min(3);
    format!("{}{}", &t[..dot + 1 + keep], &t[dot + 1 + digits..])
}

/// `bytea` input: `\x` hex (the default output form), as the lowercase hex `#bytes` takes.
fn parse_bytea(text: &str) -> Option<String> {
    let hex = text.strip_prefix("\\x")?;
    (hex.len() % 2 == 0 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
        .then(|| hex.to_ascii_lowercase())
}

/// A result value in PostgreSQL's text format (`None` is NULL).
pub fn edn_to_text(v: &Edn, t: SqlType) -> Option<String> {
    Some(match v {
        Edn::Nil => return None,
        Edn::Keyword(k) if crate::sqlfns::is_null_keyword(k) => return None,
        Edn::Bool(b) => if *b { "t" } else { "f" }.to_owned(),
        Edn::Integer(n) => n.to_string(),
        Edn::Float(f) => format_float(*f, t),
        Edn::BigDec(d) => d.to_string(),
        Edn::BigInt(n) => n.to_string(),
        Edn::String(s) => s.clone(),
        Edn::Keyword(k) => k.to_string(),
        Edn::Inst(ms) => format_timestamp(*ms, t == SqlType::Timestamptz),
        Edn::Uuid(u) => vev::edn::format_uuid(*u),
        Edn::Tagged(tag, inner) if tag.as_str() == "bytes" => match &**inner {
            Edn::String(hex) => format!("\\x{hex}"),
            other => other.to_string(),
        },
        Edn::Tagged(_, inner) => return edn_to_text(inner, t),
        other => other.to_string(),
    })
}

fn format_float(f: f64, t: SqlType) -> String {
    if f.is_nan() {
        return "NaN".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    if t == SqlType::Float4 {
        return (f as f32).to_string();
    }
    f.to_string()
}

/// PostgreSQL's timestamp output: `2024-01-31 12:00:00.5` (`+00` with a time zone).
pub fn format_timestamp(ms: i64, tz: bool) -> String {
    let iso = vev::edn::format_inst(ms);
    let body = iso.trim_end_matches('Z').replacen('T', " ", 1);
    let body = body.trim_end_matches('0').trim_end_matches('.').to_owned();
    // `trim_end_matches('0')` must not eat the seconds' zeros when there is no fraction.
    let body = if body.len() < 19 {
        iso.trim_end_matches('Z')
            .replacen('T', " ", 1)
            .split('.')
            .next()
            .unwrap_or_default()
            .to_owned()
    } else {
        body
    };
    if tz {
        format!("{body}+00")
    } else {
        body
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_round_trip_through_text() {
        let ms = parse_timestamp("2024-01-31 12:00:00.5").unwrap();
        assert_eq!(format_timestamp(ms, false), "2024-01-31 12:00:00.5");
        let ms = parse_timestamp("2024-01-31 12:00:00").unwrap();
        assert_eq!(format_timestamp(ms, false), "2024-01-31 12:00:00");
        assert_eq!(format_timestamp(ms, true), "2024-01-31 12:00:00+00");
        let ms2 = parse_timestamp("2024-01-31 13:00:00.123456+01").unwrap();
        assert_eq!(format_timestamp(ms2, false), "2024-01-31 12:00:00.123");
        assert_eq!(
            parse_timestamp("2024-01-31"),
            vev::edn::parse_inst("2024-01-31")
        );
        assert_eq!(parse_timestamp("yesterday-ish"), None);
    }

    #[test]
    fn char_pads_and_varchar_checks_length() {
        assert_eq!(fit_char("", 3).unwrap(), "   ");
        assert_eq!(fit_char("ab  ", 2).unwrap(), "ab");
        assert!(fit_char("abc", 2).is_err());
        assert!(fit_varchar("abc", 2).is_err());
        assert_eq!(fit_varchar("ab ", 2).unwrap(), "ab");
    }

    #[test]
    fn numerics_have_one_scale_per_value() {
        let n = |t: &str| SqlType::Numeric.parse_text(t).unwrap();
        assert_eq!(n("2.50"), n("2.5"));
        assert_eq!(n("100.00").to_string(), "100M");
        assert_eq!(n("0.000").to_string(), "0M");
        assert_eq!(n("-1.250").to_string(), "-1.25M");
    }

    #[test]
    fn integers_are_range_checked() {
        assert_eq!(
            SqlType::Int4.parse_text("-2442").unwrap(),
            Edn::Integer(-2442)
        );
        assert!(SqlType::Int4.parse_text("2147483648").is_err());
        assert!(SqlType::Int2.parse_text("40000").is_err());
        assert!(SqlType::Int8.parse_text("12x").is_err());
    }

    #[test]
    fn type_names_round_trip() {
        for t in [
            SqlType::Int2,
            SqlType::Int4,
            SqlType::Int8,
            SqlType::Float4,
            SqlType::Float8,
            SqlType::Numeric,
            SqlType::Text,
            SqlType::Varchar(None),
            SqlType::Varchar(Some(12)),
            SqlType::Char(84),
            SqlType::Bool,
            SqlType::Timestamp,
            SqlType::Timestamptz,
            SqlType::Uuid,
            SqlType::Bytea,
            SqlType::Keyword,
        ] {
            assert_eq!(SqlType::parse_name(&t.name()), Some(t));
        }
    }
}
