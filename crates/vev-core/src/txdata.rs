//! Transaction data: the operations a transaction is made of, before resolution.
//!
//! Transactions arrive as EDN text (`parse_tx`) or are built in Rust from these types. Values
//! stay loosely typed (`TxValue::Edn`) until the transactor knows the attribute's value type,
//! because the same EDN form means different things for different attributes: `[:a/b 1]` is a
//! lookup ref for a ref attribute, a tuple for a tuple attribute, and two values for a
//! cardinality-many attribute.

use std::sync::Arc;

use vev_edn::{Edn, Keyword, Span, Spanned};

use crate::error::TxError;
use crate::ids::EntityId;
use crate::value::Value;

/// A temporary id, resolved to an entity by the transaction.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TempId {
    /// A string tempid: `"alice"`.
    Str(Arc<str>),
    /// A negative number: `-1`.
    Num(i64),
    /// A tempid the transactor made for a map form without `:db/id`.
    Internal(u64),
    /// `"datomic.tx"`: the transaction entity itself.
    Tx,
}

impl std::fmt::Display for TempId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TempId::Str(s) => write!(f, "{s:?}"),
            TempId::Num(n) => write!(f, "{n}"),
            TempId::Internal(n) => write!(f, "#tempid{n}"),
            TempId::Tx => write!(f, "\"datomic.tx\""),
        }
    }
}

impl TempId {
    /// The tempid's EDN form: a string (`"datomic.tx"` for `Tx`, `"#tempidN"` for an internal
    /// one) or a negative integer.
    pub fn to_edn(&self) -> Edn {
        match self {
            TempId::Str(s) => Edn::String(s.to_string()),
            TempId::Num(n) => Edn::Integer(*n),
            TempId::Internal(n) => Edn::String(format!("#tempid{n}")),
            TempId::Tx => Edn::string("datomic.tx"),
        }
    }
}

/// How a transaction names an entity.
#[derive(Clone, Debug, PartialEq)]
pub enum EntityRef {
    /// An existing entity by its id (a positive integer in EDN).
    Id(EntityId),
    /// The entity whose `:db/ident` this is.
    Ident(Keyword),
    /// A lookup ref `[attribute value]`: the entity that holds `value` for the `:db/unique`
    /// attribute.
    LookupRef(Keyword, Box<TxValue>),
    /// A tempid: a new entity, or an existing one if it upserts.
    TempId(TempId),
}

impl EntityRef {
    /// The string tempid `name`; `"datomic.tx"` names the transaction entity.
    pub fn tempid(name: &str) -> EntityRef {
        if name == "datomic.tx" {
            EntityRef::TempId(TempId::Tx)
        } else {
            EntityRef::TempId(TempId::Str(Arc::from(name)))
        }
    }

    /// Read an entity reference from its EDN form, as it appears in entity position.
    pub fn from_edn(form: &Edn) -> Result<EntityRef, TxError> {
        match form {
            Edn::Integer(n) if *n > 0 => Ok(EntityRef::Id(*n as u64)),
            Edn::Integer(n) if *n < 0 => Ok(EntityRef::TempId(TempId::Num(*n))),
            Edn::Integer(n) => Err(TxError::InvalidEntityId { id: *n }),
            Edn::String(s) => Ok(EntityRef::tempid(s)),
            Edn::Keyword(k) => Ok(EntityRef::Ident(k.clone())),
            Edn::Vector(items) | Edn::List(items) => match items.as_slice() {
                [Edn::Keyword(a), v] => Ok(EntityRef::LookupRef(
                    a.clone(),
                    Box::new(TxValue::Edn(v.clone())),
                )),
                _ => Err(TxError::InvalidLookupRef {
                    form: form.clone(),
                    reason: "a lookup ref is [attribute value]".into(),
                }),
            },
            _ => Err(TxError::malformed(
                form,
                "expected an entity id, tempid, ident or lookup ref",
            )),
        }
    }

    /// The reference's EDN form, as `from_edn` reads it.
    pub fn to_edn(&self) -> Edn {
        match self {
            EntityRef::Id(e) => Edn::Integer(*e as i64),
            EntityRef::Ident(k) => Edn::Keyword(k.clone()),
            EntityRef::LookupRef(a, v) => Edn::Vector(vec![Edn::Keyword(a.clone()), v.to_edn()]),
            EntityRef::TempId(t) => t.to_edn(),
        }
    }
}

/// How a transaction names an attribute.
#[derive(Clone, Debug, PartialEq)]
pub enum AttrRef {
    /// By ident, e.g. `:person/name`.
    Ident(Keyword),
    /// By the attribute's entity id.
    Id(EntityId),
}

impl AttrRef {
    /// Read an attribute reference from its EDN form: a keyword, or a positive integer entity
    /// id.
    pub fn from_edn(form: &Edn) -> Result<AttrRef, TxError> {
        match form {
            Edn::Keyword(k) => Ok(AttrRef::Ident(k.clone())),
            Edn::Integer(n) if *n > 0 => Ok(AttrRef::Id(*n as u64)),
            _ => Err(TxError::malformed(form, "expected an attribute ident")),
        }
    }

    /// The reference's EDN form, as `from_edn` reads it.
    pub fn to_edn(&self) -> Edn {
        match self {
            AttrRef::Ident(k) => Edn::Keyword(k.clone()),
            AttrRef::Id(e) => Edn::Integer(*e as i64),
        }
    }
}

impl From<Keyword> for AttrRef {
    fn from(k: Keyword) -> AttrRef {
        AttrRef::Ident(k)
    }
}

impl From<&str> for AttrRef {
    fn from(s: &str) -> AttrRef {
        AttrRef::Ident(Keyword::new(s.trim_start_matches(':')))
    }
}

/// A value in transaction data.
#[derive(Clone, Debug, PartialEq)]
pub enum TxValue {
    /// An EDN form, interpreted by the attribute's value type.
    Edn(Edn),
    /// An already typed value (it must have the attribute's type).
    Value(Value),
    /// An entity, for ref attributes.
    Entity(EntityRef),
    /// A nested entity, for ref attributes.
    Map(TxMap),
    /// Several values, for cardinality-many attributes.
    Many(Vec<TxValue>),
}

impl TxValue {
    /// The value's EDN form (`Many` becomes a vector), as error messages quote it.
    pub fn to_edn(&self) -> Edn {
        match self {
            TxValue::Edn(e) => e.clone(),
            TxValue::Value(v) => v.to_edn(),
            TxValue::Entity(r) => r.to_edn(),
            TxValue::Map(m) => m.to_edn(),
            TxValue::Many(vs) => Edn::Vector(vs.iter().map(TxValue::to_edn).collect()),
        }
    }
}

impl<T: Into<Value>> From<T> for TxValue {
    fn from(v: T) -> TxValue {
        TxValue::Value(v.into())
    }
}

/// A map form: `{:db/id e, :attr value, ...}`.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct TxMap {
    /// The entity (`:db/id`); `None` makes a new entity, or upserts through an identity
    /// attribute among `attrs`.
    pub id: Option<EntityRef>,
    /// Each attribute's ident and value(s), in the order given; a reverse ident
    /// (`:person/_friend`) makes the values refer to this entity instead.
    pub attrs: Vec<(Keyword, TxValue)>,
}

impl TxMap {
    /// A map form for entity `id` with no attributes yet.
    pub fn new(id: Option<EntityRef>) -> TxMap {
        TxMap {
            id,
            attrs: Vec::new(),
        }
    }

    /// This map with one more attribute: `attr` is the ident, with or without its colon
    /// (`"person/name"` or `":person/name"`).
    pub fn with(mut self, attr: &str, value: impl Into<TxValue>) -> TxMap {
        self.attrs
            .push((Keyword::new(attr.trim_start_matches(':')), value.into()));
        self
    }

    /// The map's EDN form, `:db/id` included when given.
    pub fn to_edn(&self) -> Edn {
        let mut m = std::collections::BTreeMap::new();
        if let Some(id) = &self.id {
            m.insert(Edn::keyword("db/id"), id.to_edn());
        }
        for (k, v) in &self.attrs {
            m.insert(Edn::Keyword(k.clone()), v.to_edn());
        }
        Edn::Map(m)
    }
}

/// One operation of a transaction.
#[derive(Clone, Debug, PartialEq)]
pub enum TxOp {
    /// `[:db/add e a v]`: assert one value (several with `TxValue::Many`).
    Add {
        /// The entity the datom is about.
        e: EntityRef,
        /// The attribute, by ident or id.
        a: AttrRef,
        /// The value to assert.
        v: TxValue,
    },
    /// `[:db/retract e a v]`, or `[:db/retract e a]` to retract every value of the attribute.
    Retract {
        /// The entity whose value is retracted.
        e: EntityRef,
        /// The attribute, by ident or id.
        a: AttrRef,
        /// The value to retract; `None` retracts every current value.
        v: Option<TxValue>,
    },
    /// `[:db/retractEntity e]`: retract every datom of the entity, every ref to it, and its
    /// components, recursively.
    RetractEntity {
        /// The entity to retract.
        e: EntityRef,
    },
    /// `[:db/cas e a old new]`: assert `new` if the attribute's current value is `old`, else
    /// fail the transaction with `tx/cas-failed`.
    Cas {
        /// The entity whose value is compared and swapped.
        e: EntityRef,
        /// The attribute, by ident or id.
        a: AttrRef,
        /// The value expected; `None` (`nil`) means the attribute must have no value.
        old: Option<TxValue>,
        /// The value to assert.
        new: TxValue,
    },
    /// A map form: assert each of its attributes for its entity.
    Map(TxMap),
    /// `[:my/fn arg ...]`: a call of a registered transaction function, which returns more
    /// operations.
    Call {
        /// The function's ident.
        name: Keyword,
        /// Its arguments, as EDN.
        args: Vec<Edn>,
    },
}

impl TxOp {
    /// `[:db/add e a v]`.
    pub fn add(e: EntityRef, a: impl Into<AttrRef>, v: impl Into<TxValue>) -> TxOp {
        TxOp::Add {
            e,
            a: a.into(),
            v: v.into(),
        }
    }

    /// `[:db/retract e a v]`, or `[:db/retract e a]` with `v: None`.
    pub fn retract(e: EntityRef, a: impl Into<AttrRef>, v: Option<TxValue>) -> TxOp {
        TxOp::Retract { e, a: a.into(), v }
    }

    /// Read one operation from its EDN form.
    pub fn from_edn(form: &Edn) -> Result<TxOp, TxError> {
        match form {
            Edn::Map(m) => map_from_edn(m, form).map(TxOp::Map),
            Edn::Vector(items) | Edn::List(items) => list_from_edn(items, form),
            _ => Err(TxError::malformed(
                form,
                "each transaction item is a list form or a map",
            )),
        }
    }

    /// The operation's EDN form, as `from_edn` reads it.
    pub fn to_edn(&self) -> Edn {
        let kw = Edn::keyword;
        match self {
            TxOp::Add { e, a, v } => {
                Edn::Vector(vec![kw("db/add"), e.to_edn(), a.to_edn(), v.to_edn()])
            }
            TxOp::Retract { e, a, v } => {
                let mut items = vec![kw("db/retract"), e.to_edn(), a.to_edn()];
                items.extend(v.as_ref().map(TxValue::to_edn));
                Edn::Vector(items)
            }
            TxOp::RetractEntity { e } => Edn::Vector(vec![kw("db/retractEntity"), e.to_edn()]),
            TxOp::Cas { e, a, old, new } => Edn::Vector(vec![
                kw("db/cas"),
                e.to_edn(),
                a.to_edn(),
                old.as_ref().map(TxValue::to_edn).unwrap_or(Edn::Nil),
                new.to_edn(),
            ]),
            TxOp::Map(m) => m.to_edn(),
            TxOp::Call { name, args } => {
                let mut items = vec![Edn::Keyword(name.clone())];
                items.extend(args.iter().cloned());
                Edn::Vector(items)
            }
        }
    }
}

fn list_from_edn(items: &[Edn], form: &Edn) -> Result<TxOp, TxError> {
    let Some(Edn::Keyword(op)) = items.first() else {
        return Err(TxError::malformed(
            form,
            "a list form starts with an operation keyword",
        ));
    };
    let arity = |n: usize, shape: &str| -> Result<(), TxError> {
        if items.len() == n {
            Ok(())
        } else {
            Err(TxError::malformed(
                form,
                format!("expected {shape}, got {} elements", items.len()),
            ))
        }
    };
    match op.as_str() {
        "db/add" => {
            arity(4, "[:db/add e a v]")?;
            Ok(TxOp::Add {
                e: EntityRef::from_edn(&items[1])?,
                a: AttrRef::from_edn(&items[2])?,
                v: value_from_edn(&items[3], form)?,
            })
        }
        "db/retract" => {
            if items.len() != 3 && items.len() != 4 {
                arity(4, "[:db/retract e a v] or [:db/retract e a]")?;
            }
            let v = items.get(3).map(|v| value_from_edn(v, form)).transpose()?;
            Ok(TxOp::Retract {
                e: EntityRef::from_edn(&items[1])?,
                a: AttrRef::from_edn(&items[2])?,
                v,
            })
        }
        "db/retractEntity" | "db.fn/retractEntity" => {
            arity(2, "[:db/retractEntity e]")?;
            Ok(TxOp::RetractEntity {
                e: EntityRef::from_edn(&items[1])?,
            })
        }
        "db/cas" | "db.fn/cas" => {
            arity(5, "[:db/cas e a old new]")?;
            let old = match &items[3] {
                Edn::Nil => None,
                v => Some(value_from_edn(v, form)?),
            };
            Ok(TxOp::Cas {
                e: EntityRef::from_edn(&items[1])?,
                a: AttrRef::from_edn(&items[2])?,
                old,
                new: value_from_edn(&items[4], form)?,
            })
        }
        _ => Ok(TxOp::Call {
            name: op.clone(),
            args: items[1..].to_vec(),
        }),
    }
}

/// Values stay EDN until the attribute's type is known (`nil` then fails its type check).
fn value_from_edn(v: &Edn, _form: &Edn) -> Result<TxValue, TxError> {
    Ok(TxValue::Edn(v.clone()))
}

fn map_from_edn(m: &std::collections::BTreeMap<Edn, Edn>, form: &Edn) -> Result<TxMap, TxError> {
    let mut out = TxMap::default();
    for (k, v) in m {
        let Edn::Keyword(k) = k else {
            return Err(TxError::malformed(
                form,
                format!("map keys are attribute idents, not {k}"),
            ));
        };
        if k.as_str() == "db/id" {
            out.id = Some(EntityRef::from_edn(v)?);
        } else {
            out.attrs.push((k.clone(), value_from_edn(v, form)?));
        }
    }
    Ok(out)
}

/// One operation read from text, with the span of its form.
#[derive(Clone, Debug)]
pub struct SpannedOp {
    /// The operation read.
    pub op: TxOp,
    /// Where its form is in the text.
    pub span: Span,
}

/// Read transaction data from EDN text: a vector (or list) of operations.
pub fn parse_tx(text: &str) -> Result<Vec<SpannedOp>, TxError> {
    let spanned = vev_edn::parse_spanned(text)?;
    tx_from_spanned(&spanned)
}

/// Read transaction data from EDN parsed with spans (`vev_edn::parse_spanned`); errors in
/// an operation's form carry that operation's span.
pub fn tx_from_spanned(spanned: &Spanned) -> Result<Vec<SpannedOp>, TxError> {
    let items = match &spanned.value {
        Edn::Vector(_) | Edn::List(_) => &spanned.children,
        other => {
            return Err(TxError::MalformedForm {
                form: other.clone(),
                reason: "transaction data is a vector of operations".into(),
                span: Some(spanned.span),
            })
        }
    };
    items
        .iter()
        .map(|item| {
            TxOp::from_edn(&item.value)
                .map(|op| SpannedOp {
                    op,
                    span: item.span,
                })
                .map_err(|e| with_span(e, item.span))
        })
        .collect()
}

/// Read transaction data from an EDN value (no spans).
pub fn tx_from_edn(data: &Edn) -> Result<Vec<TxOp>, TxError> {
    match data {
        Edn::Vector(items) | Edn::List(items) => items.iter().map(TxOp::from_edn).collect(),
        other => Err(TxError::malformed(
            other,
            "transaction data is a vector of operations",
        )),
    }
}

fn with_span(e: TxError, span: Span) -> TxError {
    match e {
        TxError::MalformedForm {
            form,
            reason,
            span: None,
        } => TxError::MalformedForm {
            form,
            reason,
            span: Some(span),
        },
        other => other,
    }
}
