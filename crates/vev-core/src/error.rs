//! Errors of the transaction family. Every variant has a stable code (`TxError::code`);
//! messages are lowercase and quote the offending entity, attribute and value.

use vev_edn::{Edn, Keyword, ParseError, Span};

use crate::ids::EntityId;
use crate::schema::ValueType;

/// How an entity was named in the transaction, for error messages.
#[derive(Clone, Debug, PartialEq)]
pub enum EntityName {
    /// An entity id, given or already resolved.
    Id(EntityId),
    /// A tempid not yet resolved, as printed (a string tempid with its quotes: `"alice"`).
    TempId(String),
    /// The EDN form that names the entity, such as its ident.
    Form(Edn),
}

impl std::fmt::Display for EntityName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EntityName::Id(e) => write!(f, "{e}"),
            // The text is the tempid as printed (a string tempid with its quotes).
            EntityName::TempId(t) => write!(f, "tempid {t}"),
            EntityName::Form(x) => write!(f, "{x}"),
        }
    }
}

/// Why a transaction was rejected: the transaction family, `tx/...` codes for the data and
/// `schema/...` codes for attribute definitions. A rejected transaction changes nothing.
#[derive(thiserror::Error, Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum TxError {
    /// The transaction text is not valid EDN. Its code is the parse error's (`edn/...`).
    #[error("cannot read transaction text: {0}")]
    Edn(#[from] ParseError),
    /// A form of the transaction data does not have the shape of an operation, entity
    /// reference or map entry (a `[:db/add e a]` missing its value, a map key that is not a
    /// keyword, ...).
    #[error("malformed transaction form {form}: {reason}")]
    MalformedForm {
        /// The offending form.
        form: Edn,
        /// What shape was expected.
        reason: String,
        /// Where the form is in the transaction text; `None` when the data did not come from
        /// text.
        span: Option<Span>,
    },
    /// The attribute position names no installed attribute.
    #[error("unknown attribute {ident}")]
    UnknownAttribute {
        /// The attribute as given: its ident, or an entity id that is not an attribute.
        ident: Edn,
    },
    /// An ident in entity or ref-value position that no entity has as `:db/ident`.
    #[error("unknown ident {ident}: no entity has it as :db/ident")]
    UnknownIdent {
        /// The ident that resolves to nothing.
        ident: Keyword,
    },
    /// An entity id this database has not allocated, or 0 (the transaction's own tx id counts
    /// as allocated).
    #[error("invalid entity id {id}: this database never allocated it")]
    InvalidEntityId {
        /// The id as given.
        id: i64,
    },
    /// A value does not have the attribute's value type (a string for a `:db.type/long`
    /// attribute, a reverse attribute that is not a ref, ...).
    #[error("attribute {attribute} has value type :db.type/{} but value {value} for entity {entity} is {found}", expected.name())]
    WrongValueType {
        /// The attribute's ident.
        attribute: Keyword,
        /// The attribute's value type.
        expected: ValueType,
        /// The offending value, as EDN.
        value: Edn,
        /// What the value is instead: its EDN type name (`"string"`, `"integer"`, ...) or
        /// `"a reverse reference"` for a reverse attribute that is not a ref.
        found: &'static str,
        /// The entity the value was asserted for.
        entity: EntityName,
    },
    /// A `:db/unique` value is held by another entity that the transaction does not retract
    /// it from, or the transaction asserts it for two entities.
    #[error("unique conflict: attribute {attribute} value {value} is already held by entity {existing}, cannot assert it for entity {entity}")]
    UniqueConflict {
        /// The unique attribute's ident.
        attribute: Keyword,
        /// The contested value, as EDN.
        value: Edn,
        /// The other entity: the one holding the value in db-before, or the one this
        /// transaction asserts it for first.
        existing: EntityId,
        /// The entity the transaction asserts it for.
        entity: EntityName,
    },
    /// A tempid upserts through two `:db.unique/identity` values that are held by different
    /// entities.
    #[error("conflicting upserts: tempid {tempid:?} resolves to both entity {first} and entity {second}")]
    ConflictingUpserts {
        /// The tempid, as printed.
        tempid: String,
        /// The entity one identity value resolves it to.
        first: EntityId,
        /// The other entity another identity value resolves it to.
        second: EntityId,
    },
    /// The transaction asserts two different values of a cardinality-one attribute for one
    /// entity.
    #[error("datoms conflict: attribute {attribute} is cardinality-one but the transaction asserts both {first} and {second} for entity {entity}")]
    DatomsConflict {
        /// The entity both values are asserted for.
        entity: EntityName,
        /// The cardinality-one attribute's ident.
        attribute: Keyword,
        /// One asserted value, as EDN.
        first: Edn,
        /// Another asserted value, as EDN.
        second: Edn,
    },
    /// The transaction both asserts and retracts the same datom `[e a v]`.
    #[error("datoms conflict: the transaction both asserts and retracts {value} for attribute {attribute} of entity {entity}")]
    AssertRetractConflict {
        /// The datom's entity.
        entity: EntityName,
        /// The attribute's ident.
        attribute: Keyword,
        /// The value both asserted and retracted, as EDN.
        value: Edn,
    },
    /// A `:db/cas` found a value other than the one it expected.
    #[error(
        "cas failed: attribute {attribute} of entity {entity} is {actual}, expected {expected}"
    )]
    CasFailed {
        /// The entity the `:db/cas` is on.
        entity: EntityName,
        /// The attribute's ident.
        attribute: Keyword,
        /// The value the `:db/cas` expected, `nil` for none.
        expected: Edn,
        /// The attribute's current value: `nil` for none, a vector when a cardinality-many
        /// attribute has several.
        actual: Edn,
    },
    /// A lookup ref `[attribute value]` is well formed, but no entity holds the value.
    #[error("lookup ref [{attribute} {value}] names no entity")]
    UnresolvedLookupRef {
        /// The lookup ref's attribute.
        attribute: Keyword,
        /// The lookup ref's value, as EDN.
        value: Edn,
    },
    /// A lookup ref that cannot be resolved at all: not `[attribute value]`, an attribute that
    /// is unknown or not `:db/unique`, or a value not of the attribute's type.
    #[error("invalid lookup ref {form}: {reason}")]
    InvalidLookupRef {
        /// The lookup ref as given.
        form: Edn,
        /// What is wrong with it.
        reason: String,
    },
    /// A tempid given as the value of an attribute that is not `:db.type/ref`.
    #[error("tempid {tempid} used as the value of attribute {attribute}, which is not a ref")]
    TempidNotRef {
        /// The tempid, as printed.
        tempid: String,
        /// The attribute's ident.
        attribute: Keyword,
    },
    /// A tempid used as a ref value but never in entity position, so no entity is created for
    /// it.
    #[error("tempid {tempid:?} is used only as a value, never as an entity")]
    TempidOnlyValue {
        /// The tempid, without quotes.
        tempid: String,
    },
    /// The transaction asserts or retracts a composite tuple attribute, which only the
    /// transactor maintains.
    #[error("attribute {attribute} is a composite tuple maintained by the transactor and cannot be asserted or retracted directly")]
    CompositeTupleWrite {
        /// The composite tuple attribute's ident.
        attribute: Keyword,
    },
    /// The transaction asserts a `:db/txInstant` earlier than the previous transaction's:
    /// transaction instants never go back.
    #[error(":db/txInstant {instant} is before the previous transaction's {previous}")]
    InstantBackwards {
        /// The instant the transaction gives, as an EDN `#inst`.
        instant: Edn,
        /// The previous transaction's instant, as an EDN `#inst`.
        previous: Edn,
    },
    /// An operation keyword that is neither built in nor a registered transaction function.
    #[error("unknown transaction function {name}")]
    UnknownFunction {
        /// The operation keyword, as EDN.
        name: Edn,
    },
    /// A registered transaction function returned an error, or calls nested too deep.
    #[error("transaction function {name} failed: {message}")]
    FunctionFailed {
        /// The function's name.
        name: Keyword,
        /// The function's own error message, or why the call was refused.
        message: String,
    },
    /// `:db/retractEntity` of a system entity or an installed attribute.
    #[error("cannot retract entity {entity}: it is a system entity or an installed attribute")]
    RetractSchemaEntity {
        /// The entity, by its ident when it has one.
        entity: EntityName,
    },
    /// An attribute definition lacks a required property: `:db/ident`, `:db/cardinality`, or
    /// `:db/valueType` (an entity given cardinality, uniqueness or a tuple property without
    /// one).
    #[error("attribute {attribute} is missing {missing}")]
    IncompleteAttribute {
        /// The attribute: its ident, or its entity id when it has none.
        attribute: Edn,
        /// The missing property (`":db/ident"`, `":db/valueType"`, `":db/cardinality"`).
        missing: &'static str,
    },
    /// An attribute definition that cannot be installed: a bad property value, an ident in a
    /// reserved namespace, a property that does not fit the value type, ...
    #[error("invalid attribute {attribute}: {reason}")]
    InvalidAttribute {
        /// The attribute: its ident, or the entity (id or tempid) when it has none.
        attribute: Edn,
        /// What is wrong with the definition.
        reason: String,
    },
    /// A change to an installed attribute that is not allowed: its value type, removing
    /// `:db/fulltext`, its tuple shape, any property of a system attribute, or retracting its value type.
    #[error("invalid schema alteration of {attribute}: cannot change {property}")]
    InvalidAlteration {
        /// The installed attribute's ident.
        attribute: Keyword,
        /// The property that cannot change, e.g. `:db/valueType`.
        property: Keyword,
    },
    /// An allowed alteration that the attribute's current datoms contradict: cardinality-many
    /// to one while an entity has several values, or adding `:db/unique` while two entities
    /// share a value.
    #[error("cannot alter {attribute}: {reason}")]
    ExistingValuesConflict {
        /// The attribute's ident.
        attribute: Keyword,
        /// Which existing datoms stand in the way.
        reason: String,
    },
}

impl TxError {
    /// The stable code of this error, e.g. `tx/unique-conflict`.
    pub fn code(&self) -> &'static str {
        match self {
            TxError::Edn(e) => e.code(),
            TxError::MalformedForm { .. } => "tx/malformed-form",
            TxError::UnknownAttribute { .. } => "tx/unknown-attribute",
            TxError::UnknownIdent { .. } => "tx/unknown-ident",
            TxError::InvalidEntityId { .. } => "tx/invalid-entity-id",
            TxError::WrongValueType { .. } => "tx/wrong-value-type",
            TxError::UniqueConflict { .. } => "tx/unique-conflict",
            TxError::ConflictingUpserts { .. } => "tx/conflicting-upserts",
            TxError::DatomsConflict { .. } | TxError::AssertRetractConflict { .. } => {
                "tx/datoms-conflict"
            }
            TxError::CasFailed { .. } => "tx/cas-failed",
            TxError::UnresolvedLookupRef { .. } => "tx/unresolved-lookup-ref",
            TxError::InvalidLookupRef { .. } => "tx/invalid-lookup-ref",
            TxError::TempidNotRef { .. } => "tx/tempid-not-ref",
            TxError::TempidOnlyValue { .. } => "tx/tempid-only-value",
            TxError::CompositeTupleWrite { .. } => "tx/composite-tuple-write",
            TxError::InstantBackwards { .. } => "tx/instant-backwards",
            TxError::UnknownFunction { .. } => "tx/unknown-function",
            TxError::FunctionFailed { .. } => "tx/function-failed",
            TxError::RetractSchemaEntity { .. } => "tx/retract-entity-of-schema",
            TxError::IncompleteAttribute { .. } => "schema/incomplete-attribute",
            TxError::InvalidAttribute { .. } => "schema/invalid-attribute",
            TxError::InvalidAlteration { .. } => "schema/invalid-alteration",
            TxError::ExistingValuesConflict { .. } => "schema/existing-values-conflict",
        }
    }

    /// The span of the offending form, when the transaction came from text.
    pub fn span(&self) -> Option<Span> {
        match self {
            TxError::Edn(e) => Some(e.span),
            TxError::MalformedForm { span, .. } => *span,
            _ => None,
        }
    }

    /// A `MalformedForm` error for `form`, without a span (`parse_tx` adds the span of the
    /// operation the form is in).
    pub fn malformed(form: &Edn, reason: impl Into<String>) -> TxError {
        TxError::MalformedForm {
            form: form.clone(),
            reason: reason.into(),
            span: None,
        }
    }
}
