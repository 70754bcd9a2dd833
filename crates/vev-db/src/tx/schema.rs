//! Stage 4: validate datoms on attribute entities and build the next schema.
//!
//! Datomic's alteration rules: `:db/valueType` and the tuple definition of an installed
//! attribute never change, and `:db/fulltext` is never removed (adding it, which Datomic
//! refuses, indexes the attribute's values: see `fulltext`); cardinality may go from one to many freely and from many
//! to one only when no entity has several values; uniqueness may be added only when existing
//! values are unique; everything else (`:db/ident`, `:db/isComponent`, `:db/index`,
//! `:db/noHistory`, `:db/doc`) may change.

use std::collections::{BTreeMap, HashMap};

use vev_core::schema::{sys, Attribute, Cardinality, Schema, TupleSpec, Unique, ValueType};
use vev_core::{Component, Datom, Edn, EntityId, IndexOrder, Keyword, TxError, Value};

use crate::db::Db;

pub(crate) const SCHEMA_ATTRS: [EntityId; 11] = [
    sys::IDENT,
    sys::VALUE_TYPE,
    sys::CARDINALITY,
    sys::UNIQUE,
    sys::IS_COMPONENT,
    sys::INDEX,
    sys::FULLTEXT,
    sys::NO_HISTORY,
    sys::TUPLE_ATTRS,
    sys::TUPLE_TYPE,
    sys::TUPLE_TYPES,
];

/// The schema after `tx_data`, or `None` when the transaction changes no schema datom.
pub(crate) fn next_schema(before: &Db, tx_data: &[Datom]) -> Result<Option<Schema>, TxError> {
    let mut touched: BTreeMap<EntityId, Vec<&Datom>> = BTreeMap::new();
    for d in tx_data {
        if SCHEMA_ATTRS.contains(&d.a) {
            touched.entry(d.e).or_default().push(d);
        }
    }
    if touched.is_empty() {
        return Ok(None);
    }
    let mut schema = before.schema().clone();
    // Composite tuples may name attributes installed by the same transaction: do them last.
    let (composite, plain): (Vec<_>, Vec<_>) = touched
        .into_iter()
        .partition(|(_, ds)| ds.iter().any(|d| d.a == sys::TUPLE_ATTRS));
    for (e, datoms) in plain.into_iter().chain(composite) {
        let props = props_after(before, e, &datoms);
        update_entity(before, &mut schema, e, &props)?;
    }
    Ok(Some(schema))
}

/// The schema attributes of entity `e` after the transaction.
fn props_after(before: &Db, e: EntityId, datoms: &[&Datom]) -> HashMap<EntityId, Value> {
    let mut props = HashMap::new();
    for d in before.datoms_unchecked(IndexOrder::Eavt, &[Component::Entity(e)]) {
        if SCHEMA_ATTRS.contains(&d.a) {
            props.insert(d.a, d.v);
        }
    }
    for d in datoms.iter().filter(|d| !d.added) {
        if props.get(&d.a) == Some(&d.v) {
            props.remove(&d.a);
        }
    }
    for d in datoms.iter().filter(|d| d.added) {
        props.insert(d.a, d.v.clone());
    }
    props
}

fn update_entity(
    before: &Db,
    schema: &mut Schema,
    e: EntityId,
    props: &HashMap<EntityId, Value>,
) -> Result<(), TxError> {
    let ident = props.get(&sys::IDENT).and_then(Value::as_keyword).cloned();
    let old = before.schema().attribute(e).cloned();
    let is_attr_def = props.contains_key(&sys::VALUE_TYPE);
    let name = || ident.clone().map_or(Edn::Integer(e as i64), Edn::Keyword);
    if !is_attr_def {
        if let Some(old) = &old {
            return Err(TxError::InvalidAlteration {
                attribute: old.ident.clone(),
                property: Keyword::new("db/valueType"),
            });
        }
        let attr_only = [
            sys::CARDINALITY,
            sys::UNIQUE,
            sys::TUPLE_ATTRS,
            sys::TUPLE_TYPE,
            sys::TUPLE_TYPES,
        ];
        if attr_only.iter().any(|a| props.contains_key(a)) {
            return Err(TxError::IncompleteAttribute {
                attribute: name(),
                missing: ":db/valueType",
            });
        }
        match ident {
            Some(k) => schema.set_ident(e, k),
            None => schema.remove_ident(e),
        }
        return Ok(());
    }
    let Some(ident) = ident.clone() else {
        return Err(TxError::IncompleteAttribute {
            attribute: name(),
            missing: ":db/ident",
        });
    };
    let attr = decode(schema, e, &ident, props)?;
    match &old {
        Some(old) => check_alteration(before, old, &attr)?,
        None => check_new(&attr)?,
    }
    schema.set_ident(e, ident);
    schema.install(attr);
    Ok(())
}

fn invalid(ident: &Keyword, reason: String) -> TxError {
    TxError::InvalidAttribute {
        attribute: Edn::Keyword(ident.clone()),
        reason,
    }
}

fn decode(
    schema: &Schema,
    e: EntityId,
    ident: &Keyword,
    props: &HashMap<EntityId, Value>,
) -> Result<Attribute, TxError> {
    let ref_of = |a| props.get(&a).and_then(Value::as_ref);
    let flag = |a| props.get(&a).and_then(Value::as_bool).unwrap_or(false);
    let vt_ref = ref_of(sys::VALUE_TYPE).unwrap_or(0);
    let value_type = type_of(vt_ref)
        .ok_or_else(|| invalid(ident, format!("entity {vt_ref} is not a :db.type ident")))?;
    let cardinality = match ref_of(sys::CARDINALITY) {
        Some(sys::CARDINALITY_ONE) => Cardinality::One,
        Some(sys::CARDINALITY_MANY) => Cardinality::Many,
        None => {
            return Err(TxError::IncompleteAttribute {
                attribute: Edn::Keyword(ident.clone()),
                missing: ":db/cardinality",
            })
        }
        Some(other) => {
            return Err(invalid(
                ident,
                format!("entity {other} is not a :db.cardinality ident"),
            ))
        }
    };
    let unique = match ref_of(sys::UNIQUE) {
        None => None,
        Some(sys::UNIQUE_IDENTITY) => Some(Unique::Identity),
        Some(sys::UNIQUE_VALUE) => Some(Unique::Value),
        Some(other) => {
            return Err(invalid(
                ident,
                format!("entity {other} is not a :db.unique ident"),
            ))
        }
    };
    let tuple = decode_tuple(schema, ident, value_type, props)?;
    let attr = Attribute {
        id: e,
        ident: ident.clone(),
        value_type,
        cardinality,
        unique,
        is_component: flag(sys::IS_COMPONENT),
        index: flag(sys::INDEX),
        fulltext: flag(sys::FULLTEXT),
        no_history: flag(sys::NO_HISTORY),
        tuple,
    };
    if attr.is_composite() && attr.is_many() {
        return Err(invalid(
            ident,
            "a composite tuple is cardinality-one".into(),
        ));
    }
    if attr.is_component && !attr.is_ref() {
        return Err(invalid(
            ident,
            ":db/isComponent requires :db.type/ref".into(),
        ));
    }
    if attr.fulltext && attr.value_type != ValueType::String {
        return Err(invalid(
            ident,
            ":db/fulltext requires :db.type/string".into(),
        ));
    }
    Ok(attr)
}

fn type_of(e: EntityId) -> Option<ValueType> {
    ValueType::ALL.into_iter().find(|t| t.entity_id() == e)
}

fn decode_tuple(
    schema: &Schema,
    ident: &Keyword,
    value_type: ValueType,
    props: &HashMap<EntityId, Value>,
) -> Result<Option<TupleSpec>, TxError> {
    let attrs = props.get(&sys::TUPLE_ATTRS);
    let one = props.get(&sys::TUPLE_TYPE).and_then(Value::as_ref);
    let many = props.get(&sys::TUPLE_TYPES);
    let given = attrs.is_some() as u8 + one.is_some() as u8 + many.is_some() as u8;
    if value_type != ValueType::Tuple {
        if given > 0 {
            return Err(invalid(
                ident,
                "tuple definitions require :db.type/tuple".into(),
            ));
        }
        return Ok(None);
    }
    if given != 1 {
        return Err(invalid(
            ident,
            "a tuple attribute needs exactly one of :db/tupleAttrs, :db/tupleType, :db/tupleTypes"
                .into(),
        ));
    }
    let keywords = |v: &Value| -> Result<Vec<Keyword>, TxError> {
        let Value::Tuple(items) = v else {
            return Err(invalid(ident, "expected a tuple of keywords".into()));
        };
        if !(2..=8).contains(&items.len()) {
            return Err(invalid(
                ident,
                format!("a tuple has 2 to 8 elements, not {}", items.len()),
            ));
        }
        items
            .iter()
            .map(|i| {
                i.as_keyword()
                    .cloned()
                    .ok_or_else(|| invalid(ident, format!("{i} is not a keyword")))
            })
            .collect()
    };
    if let Some(v) = attrs {
        let mut ids = Vec::new();
        for k in keywords(v)? {
            let Some(part) = schema.attribute_by_ident(&k) else {
                return Err(invalid(
                    ident,
                    format!("tuple component {k} is not an attribute"),
                ));
            };
            if part.is_many() || part.value_type == ValueType::Tuple {
                return Err(invalid(
                    ident,
                    format!("tuple component {k} must be cardinality-one and not a tuple"),
                ));
            }
            ids.push(part.id);
        }
        return Ok(Some(TupleSpec::Composite(ids)));
    }
    if let Some(t) = one {
        return match type_of(t) {
            Some(ValueType::Tuple) | None => Err(invalid(
                ident,
                format!("entity {t} is not a scalar :db.type"),
            )),
            Some(t) => Ok(Some(TupleSpec::Homogeneous(t))),
        };
    }
    let mut types = Vec::new();
    for k in keywords(many.unwrap_or(&Value::Nil))? {
        match ValueType::from_ident(&k) {
            Some(ValueType::Tuple) | None => {
                return Err(invalid(ident, format!("{k} is not a scalar :db.type")))
            }
            Some(t) => types.push(t),
        }
    }
    Ok(Some(TupleSpec::Heterogeneous(types)))
}

fn check_new(attr: &Attribute) -> Result<(), TxError> {
    let ns = attr.ident.namespace().unwrap_or("");
    if ns == "db" || ns.starts_with("db.") {
        return Err(invalid(
            &attr.ident,
            format!("namespace {ns:?} is reserved for the system"),
        ));
    }
    Ok(())
}

fn check_alteration(before: &Db, old: &Attribute, new: &Attribute) -> Result<(), TxError> {
    let forbid = |p: &str| TxError::InvalidAlteration {
        attribute: old.ident.clone(),
        property: Keyword::new(p),
    };
    if old.value_type != new.value_type {
        return Err(forbid("db/valueType"));
    }
    // Adding full text indexes the attribute's values (in this transaction's segment);
    // removing it would make a search of the past lose documents, so it stays refused.
    if old.fulltext && !new.fulltext {
        return Err(forbid("db/fulltext"));
    }
    if old.tuple != new.tuple {
        let p = match &old.tuple {
            Some(TupleSpec::Composite(_)) => "db/tupleAttrs",
            Some(TupleSpec::Homogeneous(_)) => "db/tupleType",
            _ => "db/tupleTypes",
        };
        return Err(forbid(p));
    }
    if old.id < sys::END && old != new {
        return Err(forbid("db/ident"));
    }
    if old.is_many() && !new.is_many() {
        if let Some(e) = entity_with_many_values(before, old.id) {
            return Err(TxError::ExistingValuesConflict {
                attribute: old.ident.clone(),
                reason: format!(
                    "entity {e} has several values, so it cannot become cardinality-one"
                ),
            });
        }
    }
    if old.unique.is_none() && new.unique.is_some() {
        if let Some(v) = duplicate_value(before, old.id) {
            return Err(TxError::ExistingValuesConflict {
                attribute: old.ident.clone(),
                reason: format!(
                    "value {v} is held by several entities, so it cannot become unique"
                ),
            });
        }
    }
    Ok(())
}

fn entity_with_many_values(db: &Db, a: EntityId) -> Option<EntityId> {
    let mut prev: Option<EntityId> = None;
    let mut found = None;
    db.datoms_unchecked(IndexOrder::Aevt, &[Component::Entity(a)])
        .find(|d| {
            let dup = prev == Some(d.e);
            prev = Some(d.e);
            if dup {
                found = Some(d.e);
            }
            dup
        });
    found
}

fn duplicate_value(db: &Db, a: EntityId) -> Option<Value> {
    let mut prev: Option<Value> = None;
    for d in db.datoms_unchecked(IndexOrder::Avet, &[Component::Entity(a)]) {
        if prev.as_ref() == Some(&d.v) {
            return Some(d.v);
        }
        prev = Some(d.v);
    }
    None
}
