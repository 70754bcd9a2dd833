//! Vev's core vocabulary: values, datoms, schema, transaction data and the transaction error
//! family. Pure data and pure functions: no I/O, no `unsafe`.

#![warn(missing_docs)]

pub mod datom;
pub mod error;
pub mod ids;
pub mod par;
pub mod schema;
pub mod storage_error;
pub mod sync;
pub mod txdata;
pub mod value;

pub use datom::{Component, Datom, IndexOrder};
pub use error::{EntityName, TxError};
pub use ids::{BasisT, EntityId};
pub use schema::{Attribute, Cardinality, Schema, SchemaParts, TupleSpec, Unique, ValueType};
pub use storage_error::StorageError;
pub use txdata::{
    parse_tx, tx_from_edn, tx_from_spanned, AttrRef, EntityRef, SpannedOp, TempId, TxMap, TxOp,
    TxValue,
};
pub use value::{SmolStr, Value};
pub use vev_edn::{Edn, Keyword, Symbol};
