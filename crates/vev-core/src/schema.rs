//! Schema: attributes are entities, and this is the decoded view of them.
//!
//! The transactor keeps a `Schema` beside the indexes and rebuilds the entries of the
//! attributes a transaction touches. System entities (the built-in attributes and the idents of
//! value types, cardinalities and uniqueness) have fixed ids in the db partition; they are
//! created by the bootstrap transaction (t 0) of every database.

use foldhash::HashMap;
use std::sync::Arc;

use vev_edn::Keyword;

use crate::ids::EntityId;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ValueType {
    Keyword,
    String,
    Boolean,
    Long,
    BigInt,
    Double,
    Float,
    BigDec,
    Instant,
    Uuid,
    Uri,
    Ref,
    Bytes,
    Symbol,
    Tuple,
}

impl ValueType {
    pub const ALL: [ValueType; 15] = [
        ValueType::Keyword,
        ValueType::String,
        ValueType::Boolean,
        ValueType::Long,
        ValueType::BigInt,
        ValueType::Double,
        ValueType::Float,
        ValueType::BigDec,
        ValueType::Instant,
        ValueType::Uuid,
        ValueType::Uri,
        ValueType::Ref,
        ValueType::Bytes,
        ValueType::Symbol,
        ValueType::Tuple,
    ];

    /// The ident's name in the `db.type` namespace: `:db.type/long` → "long".
    pub fn name(self) -> &'static str {
        match self {
            ValueType::Keyword => "keyword",
            ValueType::String => "string",
            ValueType::Boolean => "boolean",
            ValueType::Long => "long",
            ValueType::BigInt => "bigint",
            ValueType::Double => "double",
            ValueType::Float => "float",
            ValueType::BigDec => "bigdec",
            ValueType::Instant => "instant",
            ValueType::Uuid => "uuid",
            ValueType::Uri => "uri",
            ValueType::Ref => "ref",
            ValueType::Bytes => "bytes",
            ValueType::Symbol => "symbol",
            ValueType::Tuple => "tuple",
        }
    }

    pub fn ident(self) -> Keyword {
        Keyword::from_parts(Some("db.type"), self.name())
    }

    pub fn from_ident(k: &Keyword) -> Option<ValueType> {
        if k.namespace() != Some("db.type") {
            return None;
        }
        ValueType::ALL.into_iter().find(|t| t.name() == k.name())
    }

    /// The system entity id of this type's ident.
    pub fn entity_id(self) -> EntityId {
        sys::TYPE_BASE + ValueType::ALL.iter().position(|t| *t == self).unwrap_or(0) as u64
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Cardinality {
    One,
    Many,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Unique {
    Identity,
    Value,
}

/// The element types of a tuple attribute.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TupleSpec {
    /// `:db/tupleAttrs`: maintained by the transactor from other attributes of the entity.
    Composite(Vec<EntityId>),
    /// `:db/tupleType`: any number (2 to 8) of elements of one type.
    Homogeneous(ValueType),
    /// `:db/tupleTypes`: a fixed list of element types.
    Heterogeneous(Vec<ValueType>),
}

/// One installed attribute, decoded from its entity.
#[derive(Clone, Debug, PartialEq)]
// Datomic's schema has these flags (`:db/isComponent`, `:db/index`, ...); one field each.
#[allow(clippy::struct_excessive_bools)]
pub struct Attribute {
    pub id: EntityId,
    pub ident: Keyword,
    pub value_type: ValueType,
    pub cardinality: Cardinality,
    pub unique: Option<Unique>,
    pub is_component: bool,
    pub index: bool,
    pub fulltext: bool,
    pub no_history: bool,
    pub tuple: Option<TupleSpec>,
}

impl Attribute {
    pub fn is_ref(&self) -> bool {
        self.value_type == ValueType::Ref
    }

    pub fn is_many(&self) -> bool {
        self.cardinality == Cardinality::Many
    }

    pub fn is_composite(&self) -> bool {
        matches!(self.tuple, Some(TupleSpec::Composite(_)))
    }
}

/// A schema taken apart (`Schema::parts`), for storing it.
#[derive(Clone, Debug, PartialEq)]
pub struct SchemaParts {
    pub idents: Vec<(Keyword, EntityId)>,
    pub current: Vec<(EntityId, Keyword)>,
    pub attributes: Vec<Attribute>,
}

/// Idents and installed attributes of one database value. Cloned on write by schema
/// transactions only, so ordinary transactions share it.
#[derive(Clone, Debug, Default)]
pub struct Schema {
    idents: HashMap<Keyword, EntityId>,
    ident_of: HashMap<EntityId, Keyword>,
    attrs: HashMap<EntityId, Arc<Attribute>>,
    /// For each attribute, the composite tuple attributes that include it.
    composites_of: HashMap<EntityId, Vec<EntityId>>,
}

impl Schema {
    /// The system attributes and idents every database starts with, at their fixed ids
    /// ([`sys`]): what the bootstrap transaction installs.
    pub fn system() -> Schema {
        use ValueType as T;
        let mut schema = Schema::default();
        let attrs = [
            (sys::IDENT, "db/ident", T::Keyword),
            (sys::VALUE_TYPE, "db/valueType", T::Ref),
            (sys::CARDINALITY, "db/cardinality", T::Ref),
            (sys::UNIQUE, "db/unique", T::Ref),
            (sys::IS_COMPONENT, "db/isComponent", T::Boolean),
            (sys::INDEX, "db/index", T::Boolean),
            (sys::FULLTEXT, "db/fulltext", T::Boolean),
            (sys::NO_HISTORY, "db/noHistory", T::Boolean),
            (sys::DOC, "db/doc", T::String),
            (sys::TX_INSTANT, "db/txInstant", T::Instant),
            (sys::TUPLE_ATTRS, "db/tupleAttrs", T::Tuple),
            (sys::TUPLE_TYPE, "db/tupleType", T::Ref),
            (sys::TUPLE_TYPES, "db/tupleTypes", T::Tuple),
        ];
        for (id, ident, value_type) in attrs {
            let ident = Keyword::new(ident);
            schema.set_ident(id, ident.clone());
            schema.install(Attribute {
                id,
                ident,
                value_type,
                cardinality: Cardinality::One,
                unique: (id == sys::IDENT).then_some(Unique::Identity),
                is_component: false,
                index: id == sys::TX_INSTANT,
                fulltext: false,
                no_history: false,
                tuple: matches!(id, sys::TUPLE_ATTRS | sys::TUPLE_TYPES)
                    .then_some(TupleSpec::Homogeneous(T::Keyword)),
            });
        }
        let idents = [
            (sys::CARDINALITY_ONE, "db.cardinality/one"),
            (sys::CARDINALITY_MANY, "db.cardinality/many"),
            (sys::UNIQUE_IDENTITY, "db.unique/identity"),
            (sys::UNIQUE_VALUE, "db.unique/value"),
            (sys::PART_DB, "db.part/db"),
            (sys::PART_TX, "db.part/tx"),
            (sys::PART_USER, "db.part/user"),
            (sys::FN_ADD, "db/add"),
            (sys::FN_RETRACT, "db/retract"),
            (sys::FN_RETRACT_ENTITY, "db/retractEntity"),
            (sys::FN_CAS, "db/cas"),
        ];
        for (id, ident) in idents {
            schema.set_ident(id, Keyword::new(ident));
        }
        for t in ValueType::ALL {
            schema.set_ident(t.entity_id(), t.ident());
        }
        schema
    }

    pub fn entid(&self, ident: &Keyword) -> Option<EntityId> {
        self.idents.get(ident).copied()
    }

    pub fn ident(&self, e: EntityId) -> Option<&Keyword> {
        self.ident_of.get(&e)
    }

    pub fn attribute(&self, a: EntityId) -> Option<&Arc<Attribute>> {
        self.attrs.get(&a)
    }

    pub fn attribute_by_ident(&self, ident: &Keyword) -> Option<&Arc<Attribute>> {
        self.entid(ident).and_then(|a| self.attrs.get(&a))
    }

    pub fn attributes(&self) -> impl Iterator<Item = &Arc<Attribute>> {
        self.attrs.values()
    }

    /// Whether any composite tuple attribute was ever installed (transactions skip composite
    /// maintenance when none was).
    pub fn has_composites(&self) -> bool {
        !self.composites_of.is_empty()
    }

    pub fn composites_of(&self, a: EntityId) -> &[EntityId] {
        self.composites_of.get(&a).map(Vec::as_slice).unwrap_or(&[])
    }

    pub fn idents(&self) -> impl Iterator<Item = (&Keyword, EntityId)> {
        self.idents.iter().map(|(k, e)| (k, *e))
    }

    /// Give entity `e` an ident. As in Datomic, an ident it had before keeps resolving to it
    /// until another entity takes that ident.
    pub fn set_ident(&mut self, e: EntityId, ident: Keyword) {
        self.ident_of.insert(e, ident.clone());
        self.idents.insert(ident.clone(), e);
        if let Some(attr) = self.attrs.get_mut(&e) {
            Arc::make_mut(attr).ident = ident;
        }
    }

    pub fn remove_ident(&mut self, e: EntityId) {
        if let Some(old) = self.ident_of.remove(&e) {
            if self.idents.get(&old) == Some(&e) {
                self.idents.remove(&old);
            }
        }
    }

    /// Everything the schema holds, for storing it: every ident that resolves (old idents of
    /// renamed entities included), each entity's current ident, and the installed attributes,
    /// each list sorted.
    pub fn parts(&self) -> SchemaParts {
        let mut idents: Vec<(Keyword, EntityId)> =
            self.idents.iter().map(|(k, e)| (k.clone(), *e)).collect();
        idents.sort();
        let mut current: Vec<(EntityId, Keyword)> =
            self.ident_of.iter().map(|(e, k)| (*e, k.clone())).collect();
        current.sort();
        let mut attributes: Vec<Attribute> = self.attrs.values().map(|a| (**a).clone()).collect();
        attributes.sort_by_key(|a| a.id);
        SchemaParts {
            idents,
            current,
            attributes,
        }
    }

    /// The schema `parts` described, checked for consistency (composite tuples name other
    /// installed attributes; no attribute twice).
    pub fn from_parts(parts: SchemaParts) -> Result<Schema, String> {
        let mut schema = Schema::default();
        schema.idents.extend(parts.idents);
        schema.ident_of.extend(parts.current);
        let ids: std::collections::HashSet<EntityId> =
            parts.attributes.iter().map(|a| a.id).collect();
        if ids.len() != parts.attributes.len() {
            return Err("an attribute is listed twice".into());
        }
        for attr in parts.attributes {
            if let Some(TupleSpec::Composite(parts)) = &attr.tuple {
                if let Some(missing) = parts.iter().find(|p| !ids.contains(p) || **p == attr.id) {
                    return Err(format!(
                        "composite tuple {} names entity {missing}, which is not another attribute",
                        attr.ident
                    ));
                }
            }
            schema.install(attr);
        }
        Ok(schema)
    }

    pub fn install(&mut self, attr: Attribute) {
        let id = attr.id;
        if let Some(old) = self.attrs.get(&id) {
            if let Some(TupleSpec::Composite(parts)) = &old.tuple {
                for p in parts.clone() {
                    if let Some(v) = self.composites_of.get_mut(&p) {
                        v.retain(|c| *c != id);
                    }
                }
            }
        }
        if let Some(TupleSpec::Composite(parts)) = &attr.tuple {
            for p in parts {
                self.composites_of.entry(*p).or_default().push(id);
            }
        }
        self.attrs.insert(id, Arc::new(attr));
    }
}

/// Fixed ids of the system entities.
pub mod sys {
    use crate::ids::EntityId;

    pub const IDENT: EntityId = 1;
    pub const VALUE_TYPE: EntityId = 2;
    pub const CARDINALITY: EntityId = 3;
    pub const UNIQUE: EntityId = 4;
    pub const IS_COMPONENT: EntityId = 5;
    pub const INDEX: EntityId = 6;
    pub const FULLTEXT: EntityId = 7;
    pub const NO_HISTORY: EntityId = 8;
    pub const DOC: EntityId = 9;
    pub const TX_INSTANT: EntityId = 10;
    pub const TUPLE_ATTRS: EntityId = 11;
    pub const TUPLE_TYPE: EntityId = 12;
    pub const TUPLE_TYPES: EntityId = 13;
    pub const CARDINALITY_ONE: EntityId = 20;
    pub const CARDINALITY_MANY: EntityId = 21;
    pub const UNIQUE_IDENTITY: EntityId = 22;
    pub const UNIQUE_VALUE: EntityId = 23;
    pub const PART_DB: EntityId = 24;
    pub const PART_TX: EntityId = 25;
    pub const PART_USER: EntityId = 26;
    pub const FN_ADD: EntityId = 27;
    pub const FN_RETRACT: EntityId = 28;
    pub const FN_RETRACT_ENTITY: EntityId = 29;
    pub const FN_CAS: EntityId = 30;
    /// `:db.type/keyword` and the other 14 value types follow in `ValueType::ALL` order.
    pub const TYPE_BASE: EntityId = 40;
    /// The first id the db partition hands out to no one: every system id is below it.
    pub const END: EntityId = 64;
}
