//! Reading a table function's arguments: DuckDB values as text, EDN and time points.

use duckdb::core::LogicalTypeId;
use duckdb::vtab::{BindInfo, Value as DuckValue};
use vev::{Db, Edn, TimePoint};

use crate::error::{ExtError, Result};

/// The arguments of one call, read at bind.
pub struct Args<'a> {
    bind: &'a BindInfo,
    /// The function's name, for messages.
    pub function: &'static str,
}

impl<'a> Args<'a> {
    /// The arguments of `bind`, a call of `function`.
    pub fn new(bind: &'a BindInfo, function: &'static str) -> Args<'a> {
        Args { bind, function }
    }

    /// Positional argument `i`.
    pub fn get(&self, i: usize) -> DuckValue {
        self.bind.get_parameter(i as u64)
    }

    /// Positional argument `i`, which must be text (not NULL).
    pub fn text(&self, i: usize, what: &str) -> Result<String> {
        let v = self.get(i);
        if v.is_null() {
            return Err(ExtError::argument(format!(
                "{}: the {what} (argument {}) is NULL",
                self.function,
                i + 1
            )));
        }
        if v.logical_type_id() != LogicalTypeId::Varchar {
            return Err(ExtError::argument(format!(
                "{}: the {what} (argument {}) must be text, not {:?} {v}",
                self.function,
                i + 1,
                v.logical_type_id()
            )));
        }
        Ok(v.to_string())
    }

    /// The view the named parameters `as_of`, `since` and `history` ask for.
    pub fn time_view(&self) -> Result<TimeView> {
        let history = self
            .bind
            .get_named_parameter("history")
            .is_some_and(|h| !h.is_null() && h.to_bool());
        Ok(TimeView {
            as_of: self.time_point("as_of")?,
            since: self.time_point("since")?,
            history,
        })
    }

    /// A time point given as a number (basis-t or transaction id), a timestamp, or text.
    fn time_point(&self, name: &str) -> Result<Option<TimePoint>> {
        let Some(v) = self.bind.get_named_parameter(name) else {
            return Ok(None);
        };
        if v.is_null() {
            return Ok(None);
        }
        let point = match to_edn(&v)? {
            Edn::Integer(n) => TimePoint::from_long(n),
            Edn::Inst(ms) => Ok(TimePoint::Instant(ms)),
            Edn::String(s) => TimePoint::parse(&s),
            other => {
                return Err(ExtError::argument(format!(
                    "{}: {name} := {other} is not a basis-t, a transaction id or an instant",
                    self.function
                )))
            }
        };
        point
            .map(Some)
            .map_err(|e| ExtError::new(e.code(), format!("{}: {name}: {e}", self.function)))
    }
}

/// Which database value a reading function reads: the latest, or a past, a since or the
/// history (Datomic's `as-of`, `since` and `history`, in that order).
#[derive(Clone, Debug, Default)]
pub struct TimeView {
    as_of: Option<TimePoint>,
    since: Option<TimePoint>,
    history: bool,
}

impl TimeView {
    /// `db` through this view.
    pub fn apply(&self, db: Db) -> Db {
        let mut db = db;
        if let Some(p) = self.as_of {
            db = db.as_of(p);
        }
        if let Some(p) = self.since {
            db = db.since(p);
        }
        if self.history {
            db = db.history();
        }
        db
    }

    /// Whether this is the latest database, without a view.
    pub fn is_latest(&self) -> bool {
        self.as_of.is_none() && self.since.is_none() && !self.history
    }

    /// Whether the view holds retractions too (history).
    pub fn is_history(&self) -> bool {
        self.history
    }
}

/// A DuckDB value as EDN: numbers, text, booleans, timestamps (to the millisecond), UUIDs,
/// decimals, blobs (`#bytes`) and lists (vectors) of them; NULL is nil.
pub fn to_edn(v: &DuckValue) -> Result<Edn> {
    if v.is_null() {
        return Ok(Edn::Nil);
    }
    let text = || v.to_string();
    Ok(match v.logical_type_id() {
        LogicalTypeId::Boolean => Edn::Bool(v.to_bool()),
        LogicalTypeId::Tinyint
        | LogicalTypeId::Smallint
        | LogicalTypeId::Integer
        | LogicalTypeId::Bigint
        | LogicalTypeId::UTinyint
        | LogicalTypeId::USmallint
        | LogicalTypeId::UInteger => Edn::Integer(v.to_int64()),
        LogicalTypeId::UBigint | LogicalTypeId::Hugeint | LogicalTypeId::Decimal => {
            number(&text())?
        }
        LogicalTypeId::Float | LogicalTypeId::Double => Edn::Float(v.to_double()),
        LogicalTypeId::Varchar => Edn::String(text()),
        LogicalTypeId::Uuid => vev::edn::parse_uuid(&text())
            .map(Edn::Uuid)
            .ok_or_else(|| unreadable(v, "a UUID"))?,
        LogicalTypeId::Timestamp
        | LogicalTypeId::TimestampS
        | LogicalTypeId::TimestampMs
        | LogicalTypeId::TimestampNs
        | LogicalTypeId::TimestampTZ
        | LogicalTypeId::Date => {
            Edn::Inst(instant(&text()).ok_or_else(|| unreadable(v, "an instant"))?)
        }
        LogicalTypeId::List => Edn::Vector(
            v.to_list()
                .unwrap_or_default()
                .iter()
                .map(to_edn)
                .collect::<Result<_>>()?,
        ),
        other => {
            return Err(ExtError::argument(format!(
                "a {other:?} argument ({v}) has no Vev value; pass a number, text, boolean, \
                 timestamp, UUID, decimal or a list of them"
            )))
        }
    })
}

fn unreadable(v: &DuckValue, what: &str) -> ExtError {
    ExtError::argument(format!("{v} does not read as {what}"))
}

/// A DuckDB number printed as text: an integer (i64, else a bigint) or a decimal.
fn number(text: &str) -> Result<Edn> {
    if let Ok(n) = text.parse::<i64>() {
        return Ok(Edn::Integer(n));
    }
    if let Ok(n) = text.parse::<num_bigint::BigInt>() {
        return Ok(Edn::BigInt(Box::new(n)));
    }
    text.parse::<bigdecimal::BigDecimal>()
        .map(|d| Edn::BigDec(Box::new(d)))
        .map_err(|_| ExtError::argument(format!("{text} does not read as a number")))
}

/// DuckDB's text of a date or timestamp (`2024-01-31`, `2024-01-31 12:00:00.123456`, with
/// `+01` or `+05:30` for a TIMESTAMPTZ) as milliseconds since the epoch.
fn instant(text: &str) -> Option<i64> {
    let (date, rest) = text.split_once(' ').unwrap_or((text, "00:00:00"));
    // The offset, if any, starts at the first sign after the time's digits.
    let split = rest.find(['+', '-']).unwrap_or(rest.len());
    let (time, offset) = rest.split_at(split);
    // Vev's instants are milliseconds: further digits are dropped (truncated, as a cast is).
    let time = match time.split_once('.') {
        Some((whole, frac)) => format!("{whole}.{:0<3}", &frac[..frac.len().min(3)]),
        None => time.to_owned(),
    };
    let offset = match offset {
        "" => "Z".to_owned(),
        o if o.len() == 3 => format!("{o}:00"),
        o => o.to_owned(),
    };
    vev::edn::parse_inst(&format!("{date}T{time}{offset}"))
}

/// The entity an argument names: an id, an ident (`:person/ann` or its text), or a lookup ref
/// (`[:person/email "a@b"]`, as text). `None` when no entity has the ident or value.
pub fn entity(db: &Db, v: &Edn) -> Result<Option<vev::EntityId>> {
    match v {
        Edn::Integer(n) => vev::EntityId::try_from(*n)
            .map(Some)
            .map_err(|_| ExtError::argument(format!("{n} is not an entity id"))),
        Edn::String(text) => entity(db, &vev::edn::parse(text)?),
        Edn::Keyword(k) => Ok(db.entid(k)),
        Edn::Vector(items) if items.len() == 2 => {
            let attr = attribute(db, &items[0])?;
            if attr.unique.is_none() {
                return Err(ExtError::new(
                    "duckdb/not-unique",
                    format!("lookup ref {v}: {} is not :db/unique", attr.ident),
                ));
            }
            let value = coerce(db, &attr, &items[1])?;
            Ok(db.entity_with_value(attr.id, &value)?)
        }
        other => Err(ExtError::argument(format!(
            "{other} is not an entity id, an ident or a lookup ref"
        ))),
    }
}

/// The attribute an argument names: its ident (`:person/age`, or that text) or its id.
pub fn attribute(db: &Db, v: &Edn) -> Result<std::sync::Arc<vev::Attribute>> {
    let found = match v {
        Edn::Keyword(k) => db.attribute(k).cloned(),
        Edn::String(text) => return attribute(db, &vev::edn::parse(text)?),
        Edn::Integer(n) => vev::EntityId::try_from(*n)
            .ok()
            .and_then(|id| db.schema().attribute(id).cloned()),
        _ => None,
    };
    found.ok_or_else(|| ExtError::new("duckdb/unknown-attribute", format!("unknown attribute {v}")))
}

/// `v` as a value of `attr` (text read as EDN when the attribute is not a string one).
pub fn coerce(db: &Db, attr: &vev::Attribute, v: &Edn) -> Result<vev::Value> {
    let parsed;
    let v = match v {
        Edn::String(text) if attr.value_type != vev::ValueType::String => {
            parsed = vev::edn::parse(text)?;
            &parsed
        }
        other => other,
    };
    vev::coerce_value(db, attr, v).ok_or_else(|| {
        ExtError::new(
            "duckdb/bad-value",
            format!(
                "{v} is not a value of {} (type {})",
                attr.ident,
                attr.value_type.ident()
            ),
        )
    })
}

impl Args<'_> {
    /// A named parameter as given (NULL included), `None` when the call does not name it.
    pub fn named(&self, name: &str) -> Option<DuckValue> {
        self.bind.get_named_parameter(name)
    }

    /// A named parameter's EDN, `None` when it is not given or NULL.
    pub fn named_edn(&self, name: &str) -> Result<Option<Edn>> {
        match self.bind.get_named_parameter(name) {
            Some(v) if !v.is_null() => Ok(Some(to_edn(&v)?)),
            _ => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_read_as_instants() {
        assert_eq!(instant("1970-01-01 00:00:01"), Some(1000));
        assert_eq!(instant("1970-01-01 00:00:01.5"), Some(1500));
        assert_eq!(instant("1970-01-01 00:00:01.123456"), Some(1123));
        assert_eq!(instant("1970-01-01 01:00:00+01"), Some(0));
        assert_eq!(instant("1970-01-02"), Some(86_400_000));
        assert_eq!(instant("not a time"), None);
    }

    #[test]
    fn numbers_read_as_the_smallest_edn_that_holds_them() {
        assert_eq!(number("12").unwrap(), Edn::Integer(12));
        assert!(matches!(
            number("18446744073709551615").unwrap(),
            Edn::BigInt(_)
        ));
        assert!(matches!(number("1.50").unwrap(), Edn::BigDec(_)));
        assert!(number("x").is_err());
    }
}
