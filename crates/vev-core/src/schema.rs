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

/// The type of an attribute's values (`:db/valueType`), one per `db.type` ident. The order of
/// the variants fixes their system entity ids (`sys::TYPE_BASE` + position in `ALL`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ValueType {
    /// `:db.type/keyword`: a keyword such as `:color/red`.
    Keyword,
    /// `:db.type/string`: UTF-8 text.
    String,
    /// `:db.type/boolean`.
    Boolean,
    /// `:db.type/long`: a signed 64-bit integer.
    Long,
    /// `:db.type/bigint`: an arbitrary-precision integer.
    BigInt,
    /// `:db.type/double`: a 64-bit floating-point number.
    Double,
    /// `:db.type/float`: a 32-bit floating-point number.
    Float,
    /// `:db.type/bigdec`: an arbitrary-precision decimal.
    BigDec,
    /// `:db.type/instant`: a point in time, in milliseconds since the Unix epoch.
    Instant,
    /// `:db.type/uuid`: a 128-bit UUID.
    Uuid,
    /// `:db.type/uri`: a URI, written `#uri "..."` in EDN.
    Uri,
    /// `:db.type/ref`: a reference to another entity, by entity id.
    Ref,
    /// `:db.type/bytes`: a byte array, written `#bytes "hex"` in EDN.
    Bytes,
    /// `:db.type/symbol`: an EDN symbol.
    Symbol,
    /// `:db.type/tuple`: a tuple of values, shaped by the attribute's `TupleSpec`.
    Tuple,
}

impl ValueType {
    /// Every value type, in the order of their system entity ids.
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

    /// The type's ident, e.g. `:db.type/long`.
    pub fn ident(self) -> Keyword {
        Keyword::from_parts(Some("db.type"), self.name())
    }

    /// The value type an ident names (`:db.type/long` → `Long`), `None` for any keyword outside
    /// the `db.type` namespace or an unknown name there.
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

/// How many values an attribute has per entity (`:db/cardinality`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Cardinality {
    /// `:db.cardinality/one`: at most one current value; asserting a new one retracts the old.
    One,
    /// `:db.cardinality/many`: a set of values; each assertion adds one.
    Many,
}

/// The uniqueness of an attribute's values across entities (`:db/unique`): no two entities
/// hold the same value at once, and the attribute can serve in lookup refs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Unique {
    /// `:db.unique/identity`: asserting a held value with a tempid resolves the tempid to the
    /// entity that holds it (upsert).
    Identity,
    /// `:db.unique/value`: asserting a value another entity holds is a `tx/unique-conflict`.
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
#[allow(
    clippy::struct_excessive_bools,
    reason = "the four flags are Datomic's four independent boolean schema properties"
)]
pub struct Attribute {
    /// The attribute's entity id: the `a` of its datoms.
    pub id: EntityId,
    /// Its current ident (`:db/ident`), e.g. `:person/name`.
    pub ident: Keyword,
    /// `:db/valueType`: the type of every value it holds.
    pub value_type: ValueType,
    /// `:db/cardinality`.
    pub cardinality: Cardinality,
    /// `:db/unique`, `None` when values need not be unique.
    pub unique: Option<Unique>,
    /// `:db/isComponent`: the ref attribute's targets are part of the entity, so
    /// `:db/retractEntity` retracts them too, and a nested map under it needs neither a
    /// `:db/id` nor an identity attribute.
    pub is_component: bool,
    /// `:db/index`: recorded only; every attribute is in AVET regardless.
    pub index: bool,
    /// `:db/fulltext`: the values are in the full-text index (string attributes only).
    pub fulltext: bool,
    /// `:db/noHistory`: the attribute's retracted values are dropped instead of kept in the
    /// history.
    pub no_history: bool,
    /// The tuple's shape, for `:db.type/tuple` attributes; `None` otherwise.
    pub tuple: Option<TupleSpec>,
}

impl Attribute {
    /// Whether values are entity references (`:db.type/ref`).
    pub fn is_ref(&self) -> bool {
        self.value_type == ValueType::Ref
    }

    /// Whether the attribute is cardinality-many.
    pub fn is_many(&self) -> bool {
        self.cardinality == Cardinality::Many
    }

    /// Whether the attribute is a composite tuple (`:db/tupleAttrs`), maintained by the
    /// transactor and never asserted directly.
    pub fn is_composite(&self) -> bool {
        matches!(self.tuple, Some(TupleSpec::Composite(_)))
    }
}

/// A schema taken apart (`Schema::parts`), for storing it.
#[derive(Clone, Debug, PartialEq)]
pub struct SchemaParts {
    /// Every ident that resolves and its entity, old idents of renamed entities included,
    /// sorted by ident.
    pub idents: Vec<(Keyword, EntityId)>,
    /// Each entity's current ident, sorted by entity id.
    pub current: Vec<(EntityId, Keyword)>,
    /// Every installed attribute, sorted by entity id.
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

    /// The entity an ident resolves to, an old ident of a renamed entity included; `None` if
    /// no entity has it.
    pub fn entid(&self, ident: &Keyword) -> Option<EntityId> {
        self.idents.get(ident).copied()
    }

    /// The current ident of entity `e`, `None` if it has none.
    pub fn ident(&self, e: EntityId) -> Option<&Keyword> {
        self.ident_of.get(&e)
    }

    /// The installed attribute with entity id `a`, `None` if `a` is not an attribute.
    pub fn attribute(&self, a: EntityId) -> Option<&Arc<Attribute>> {
        self.attrs.get(&a)
    }

    /// The installed attribute an ident resolves to (old idents included), `None` if there is
    /// none.
    pub fn attribute_by_ident(&self, ident: &Keyword) -> Option<&Arc<Attribute>> {
        self.entid(ident).and_then(|a| self.attrs.get(&a))
    }

    /// Every installed attribute, system attributes included, in no particular order.
    pub fn attributes(&self) -> impl Iterator<Item = &Arc<Attribute>> {
        self.attrs.values()
    }

    /// Whether any composite tuple attribute was ever installed (transactions skip composite
    /// maintenance when none was).
    pub fn has_composites(&self) -> bool {
        !self.composites_of.is_empty()
    }

    /// The composite tuple attributes whose `:db/tupleAttrs` include attribute `a`: the ones a
    /// change to `a` must update. Empty when there are none.
    pub fn composites_of(&self, a: EntityId) -> &[EntityId] {
        self.composites_of.get(&a).map(Vec::as_slice).unwrap_or(&[])
    }

    /// Every ident that resolves and its entity, old idents of renamed entities included, in
    /// no particular order.
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

    /// Take entity `e`'s current ident away (its `:db/ident` was retracted). The ident stops
    /// resolving unless another entity has taken it since; older idents of `e` still resolve.
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

    /// Install `attr` at its id, replacing the attribute installed there (an alteration), and
    /// keep `composites_of` in step with its tuple spec. The ident maps are left alone: give the
    /// attribute its ident with `set_ident`.
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

/// Fixed ids of the system entities: the built-in attributes and the idents they take as
/// values, all in the db partition below `END`. They are part of the file format: a stored
/// database refers to them by these numbers.
pub mod sys {
    use crate::ids::EntityId;

    /// `:db/ident`: an entity's keyword name (unique identity).
    pub const IDENT: EntityId = 1;
    /// `:db/valueType`: an attribute's value type, a ref to a `:db.type/...` ident.
    pub const VALUE_TYPE: EntityId = 2;
    /// `:db/cardinality`: a ref to `:db.cardinality/one` or `:db.cardinality/many`.
    pub const CARDINALITY: EntityId = 3;
    /// `:db/unique`: a ref to `:db.unique/identity` or `:db.unique/value`.
    pub const UNIQUE: EntityId = 4;
    /// `:db/isComponent`: whether a ref attribute's targets are components.
    pub const IS_COMPONENT: EntityId = 5;
    /// `:db/index`: recorded, with no effect (every attribute is in AVET).
    pub const INDEX: EntityId = 6;
    /// `:db/fulltext`: the attribute's values are in the full-text index.
    pub const FULLTEXT: EntityId = 7;
    /// `:db/noHistory`: whether an attribute's retracted values are dropped from history.
    pub const NO_HISTORY: EntityId = 8;
    /// `:db/doc`: a documentation string on any entity.
    pub const DOC: EntityId = 9;
    /// `:db/txInstant`: the wall-clock instant of a transaction, on its tx entity.
    pub const TX_INSTANT: EntityId = 10;
    /// `:db/tupleAttrs`: the attributes a composite tuple is made of.
    pub const TUPLE_ATTRS: EntityId = 11;
    /// `:db/tupleType`: the element type of a homogeneous tuple.
    pub const TUPLE_TYPE: EntityId = 12;
    /// `:db/tupleTypes`: the element types of a heterogeneous tuple.
    pub const TUPLE_TYPES: EntityId = 13;
    /// `:db.cardinality/one`.
    pub const CARDINALITY_ONE: EntityId = 20;
    /// `:db.cardinality/many`.
    pub const CARDINALITY_MANY: EntityId = 21;
    /// `:db.unique/identity`.
    pub const UNIQUE_IDENTITY: EntityId = 22;
    /// `:db.unique/value`.
    pub const UNIQUE_VALUE: EntityId = 23;
    /// `:db.part/db`: the ident of the db partition.
    pub const PART_DB: EntityId = 24;
    /// `:db.part/tx`: the ident of the tx partition.
    pub const PART_TX: EntityId = 25;
    /// `:db.part/user`: the ident of the user partition.
    pub const PART_USER: EntityId = 26;
    /// `:db/add`: the ident of the assertion operation.
    pub const FN_ADD: EntityId = 27;
    /// `:db/retract`: the ident of the retraction operation.
    pub const FN_RETRACT: EntityId = 28;
    /// `:db/retractEntity`: the ident of the built-in operation that retracts an entity and
    /// its components.
    pub const FN_RETRACT_ENTITY: EntityId = 29;
    /// `:db/cas`: the ident of the built-in compare-and-swap operation.
    pub const FN_CAS: EntityId = 30;
    /// `:db.type/keyword` and the other 14 value types follow in `ValueType::ALL` order.
    pub const TYPE_BASE: EntityId = 40;
    /// The first id the db partition hands out to no one: every system id is below it.
    pub const END: EntityId = 64;
}
