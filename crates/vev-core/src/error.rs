//! Errors of the transaction family. Every variant has a stable code (`TxError::code`);
//! messages are lowercase and quote the offending entity, attribute and value.

use vev_edn::{Edn, Keyword, ParseError, Span};

use crate::ids::EntityId;
use crate::schema::ValueType;

/// How an entity was named in the transaction, for error messages.
#[derive(Clone, Debug, PartialEq)]
pub enum EntityName {
    Id(EntityId),
    TempId(String),
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

#[derive(thiserror::Error, Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum TxError {
    #[error("cannot read transaction text: {0}")]
    Edn(#[from] ParseError),
    #[error("malformed transaction form {form}: {reason}")]
    MalformedForm {
        form: Edn,
        reason: String,
        span: Option<Span>,
    },
    #[error("unknown attribute {ident}")]
    UnknownAttribute { ident: Edn },
    #[error("unknown ident {ident}: no entity has it as :db/ident")]
    UnknownIdent { ident: Keyword },
    #[error("invalid entity id {id}: this database never allocated it")]
    InvalidEntityId { id: i64 },
    #[error("attribute {attribute} has value type :db.type/{} but value {value} for entity {entity} is {found}", expected.name())]
    WrongValueType {
        attribute: Keyword,
        expected: ValueType,
        value: Edn,
        found: &'static str,
        entity: EntityName,
    },
    #[error("unique conflict: attribute {attribute} value {value} is already held by entity {existing}, cannot assert it for entity {entity}")]
    UniqueConflict {
        attribute: Keyword,
        value: Edn,
        existing: EntityId,
        entity: EntityName,
    },
    #[error("conflicting upserts: tempid {tempid:?} resolves to both entity {first} and entity {second}")]
    ConflictingUpserts {
        tempid: String,
        first: EntityId,
        second: EntityId,
    },
    #[error("datoms conflict: attribute {attribute} is cardinality-one but the transaction asserts both {first} and {second} for entity {entity}")]
    DatomsConflict {
        entity: EntityName,
        attribute: Keyword,
        first: Edn,
        second: Edn,
    },
    #[error("datoms conflict: the transaction both asserts and retracts {value} for attribute {attribute} of entity {entity}")]
    AssertRetractConflict {
        entity: EntityName,
        attribute: Keyword,
        value: Edn,
    },
    #[error(
        "cas failed: attribute {attribute} of entity {entity} is {actual}, expected {expected}"
    )]
    CasFailed {
        entity: EntityName,
        attribute: Keyword,
        expected: Edn,
        actual: Edn,
    },
    #[error("lookup ref [{attribute} {value}] names no entity")]
    UnresolvedLookupRef { attribute: Keyword, value: Edn },
    #[error("invalid lookup ref {form}: {reason}")]
    InvalidLookupRef { form: Edn, reason: String },
    #[error("tempid {tempid} used as the value of attribute {attribute}, which is not a ref")]
    TempidNotRef { tempid: String, attribute: Keyword },
    #[error("tempid {tempid:?} is used only as a value, never as an entity")]
    TempidOnlyValue { tempid: String },
    #[error("attribute {attribute} is a composite tuple maintained by the transactor and cannot be asserted or retracted directly")]
    CompositeTupleWrite { attribute: Keyword },
    #[error(":db/txInstant {instant} is before the previous transaction's {previous}")]
    InstantBackwards { instant: Edn, previous: Edn },
    #[error("unknown transaction function {name}")]
    UnknownFunction { name: Edn },
    #[error("transaction function {name} failed: {message}")]
    FunctionFailed { name: Keyword, message: String },
    #[error("cannot retract entity {entity}: it is a system entity or an installed attribute")]
    RetractSchemaEntity { entity: EntityName },
    #[error("attribute {attribute} is missing {missing}")]
    IncompleteAttribute {
        attribute: Edn,
        missing: &'static str,
    },
    #[error("invalid attribute {attribute}: {reason}")]
    InvalidAttribute { attribute: Edn, reason: String },
    #[error("invalid schema alteration of {attribute}: cannot change {property}")]
    InvalidAlteration {
        attribute: Keyword,
        property: Keyword,
    },
    #[error("cannot alter {attribute}: {reason}")]
    ExistingValuesConflict { attribute: Keyword, reason: String },
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

    pub fn malformed(form: &Edn, reason: impl Into<String>) -> TxError {
        TxError::MalformedForm {
            form: form.clone(),
            reason: reason.into(),
            span: None,
        }
    }
}
