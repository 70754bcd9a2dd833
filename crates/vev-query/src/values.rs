//! Constants and inputs as database values, and entity references resolved against a source.

use std::collections::BTreeMap;
use std::sync::Arc;

use vev_core::value::hex_decode;
use vev_core::{Attribute, Component, EntityId, IndexOrder, TupleSpec, Value, ValueType};
use vev_edn::Edn;

use crate::error::QueryError;
use crate::source::Source;

/// The natural value of an EDN form: integers are longs, vectors and lists tuples, maps maps.
pub(crate) fn edn_to_value(edn: &Edn) -> Value {
    match edn {
        Edn::Nil => Value::Nil,
        Edn::Bool(b) => Value::Boolean(*b),
        Edn::String(s) => Value::String(s.as_str().into()),
        Edn::Char(c) => Value::String((*c).into()),
        Edn::Integer(n) => Value::Long(*n),
        Edn::BigInt(n) => Value::BigInt(Arc::new((**n).clone())),
        Edn::Float(d) => Value::Double(*d),
        Edn::BigDec(d) => Value::BigDec(Arc::new((**d).clone())),
        Edn::Keyword(k) => Value::Keyword(k.clone()),
        Edn::Symbol(s) => Value::Symbol(s.clone()),
        Edn::List(items) | Edn::Vector(items) => {
            Value::Tuple(items.iter().map(edn_to_value).collect())
        }
        Edn::Set(items) => Value::Tuple(items.iter().map(edn_to_value).collect()),
        Edn::Map(m) => Value::Map(Arc::new(
            m.iter()
                .map(|(k, v)| (edn_to_value(k), edn_to_value(v)))
                .collect::<BTreeMap<_, _>>(),
        )),
        Edn::Inst(ms) => Value::Instant(*ms),
        Edn::Uuid(u) => Value::Uuid(u.to_be_bytes()),
        Edn::Tagged(tag, inner) => match (tag.as_str(), &**inner) {
            ("uri", Edn::String(s)) => Value::Uri(Arc::from(s.as_str())),
            ("bytes", Edn::String(s)) => match hex_decode(s) {
                Some(b) => Value::Bytes(Arc::from(b)),
                None => edn_to_value(inner),
            },
            _ => edn_to_value(inner),
        },
    }
}

/// A value as the type of attribute `attr` stores it (`None` if it cannot be one). Refs are
/// left to [`resolve_entity`].
pub(crate) fn coerce_to(attr: &Attribute, v: Value) -> Option<Value> {
    let t = attr.value_type;
    Some(match (t, v) {
        // An entity id (bound by an entity or attribute position) as a long: Datomic's ids
        // are longs, so it matches the long equal to it.
        (ValueType::Long, Value::Ref(e)) => Value::Long(i64::try_from(e).ok()?),
        (ValueType::Double, Value::Long(n)) => Value::Double(n as f64),
        (ValueType::Float, Value::Double(d)) => Value::Float(d as f32),
        (ValueType::Float, Value::Long(n)) => Value::Float(n as f32),
        (ValueType::BigInt, Value::Long(n)) => Value::BigInt(Arc::new(n.into())),
        (ValueType::Uri, Value::String(s)) => Value::Uri(s.into()),
        (ValueType::Tuple, Value::Tuple(items)) => {
            if matches!(attr.tuple, Some(TupleSpec::Homogeneous(ValueType::Ref))) {
                return Some(Value::Tuple(
                    items
                        .iter()
                        .map(|i| match i {
                            Value::Long(n) if *n >= 0 => Value::Ref(*n as u64),
                            other => other.clone(),
                        })
                        .collect(),
                ));
            }
            Value::Tuple(items)
        }
        (_, v) => v,
    })
}

/// The entity a value names: an id (ref or non-negative long), an ident keyword, or a lookup
/// ref `[attr value]`. `Ok(None)` when it names no entity of this source.
pub(crate) fn resolve_entity(src: &dyn Source, v: &Value) -> Result<Option<EntityId>, QueryError> {
    match v {
        Value::Ref(e) => Ok(Some(*e)),
        Value::Long(n) => Ok((*n >= 0).then_some(*n as u64)),
        Value::Keyword(k) => Ok(src.schema().entid(k)),
        Value::Tuple(items) if items.len() == 2 => resolve_lookup_ref(src, &items[0], &items[1]),
        _ => Ok(None),
    }
}

/// The attribute a lookup ref `[k value]` names: it must exist (`query/unknown-attribute`,
/// at `span`) and be unique (`query/invalid-lookup-ref`).
pub(crate) fn lookup_ref_attribute(
    schema: &vev_core::Schema,
    k: &vev_core::Keyword,
    value: &dyn std::fmt::Display,
    span: Option<vev_edn::Span>,
) -> Result<Arc<Attribute>, QueryError> {
    match schema.attribute_by_ident(k) {
        None => Err(QueryError::UnknownAttribute {
            attr: k.to_string(),
            span,
        }),
        Some(a) if a.unique.is_none() => Err(not_unique(a, k, value)),
        Some(a) => Ok(a.clone()),
    }
}

fn not_unique(
    a: &Attribute,
    attr: &dyn std::fmt::Display,
    value: &dyn std::fmt::Display,
) -> QueryError {
    QueryError::InvalidLookupRef {
        lookup: format!("[{attr} {value}]"),
        reason: format!("attribute {} is not :db/unique", a.ident),
    }
}

fn resolve_lookup_ref(
    src: &dyn Source,
    attr: &Value,
    value: &Value,
) -> Result<Option<EntityId>, QueryError> {
    let a = match attr {
        Value::Keyword(k) => lookup_ref_attribute(src.schema(), k, value, None)?,
        Value::Ref(id) => match src.schema().attribute(*id) {
            Some(a) if a.unique.is_some() => a.clone(),
            Some(a) => return Err(not_unique(a, attr, value)),
            None => return Ok(None),
        },
        _ => return Ok(None),
    };
    let v = if a.is_ref() {
        match resolve_entity(src, value)? {
            Some(e) => Value::Ref(e),
            None => return Ok(None),
        }
    } else {
        match coerce_to(&a, value.clone()) {
            Some(v) => v,
            None => return Ok(None),
        }
    };
    let mut found = None;
    src.scan(
        IndexOrder::Avet,
        &[Component::Entity(a.id), Component::Value(v)],
        &mut |d| {
            if d.added {
                found = Some(d.e);
                false
            } else {
                true
            }
        },
    );
    Ok(found)
}

/// Truthiness as Clojure has it: everything but `nil` and `false`.
pub(crate) fn truthy(v: &Value) -> bool {
    !matches!(v, Value::Nil | Value::Boolean(false))
}
