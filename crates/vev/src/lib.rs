//! Vev: an embedded database of immutable facts with Datomic's data model.
//!
//! ```
//! use vev::Connection;
//!
//! let conn = Connection::open_in_memory();
//! conn.transact_edn(r#"[{:db/ident :person/name :db/valueType :db.type/string
//!                        :db/cardinality :db.cardinality/one :db/unique :db.unique/identity}
//!                       {:db/ident :person/age :db/valueType :db.type/long
//!                        :db/cardinality :db.cardinality/one}]"#).unwrap();
//! let report = conn.transact_edn(r#"[{:db/id "ivan" :person/name "Ivan" :person/age 30}]"#).unwrap();
//! let ivan = report.tempid("ivan").unwrap();
//! // Upsert through the identity attribute: same entity, new age.
//! conn.transact_edn(r#"[{:person/name "Ivan" :person/age 31}]"#).unwrap();
//! let db = conn.db();
//! assert_eq!(db.entity(ivan).get(&vev::Keyword::new("person/age")).unwrap(), Some(vev::Value::Long(31)));
//! // The past stays: as of the first data transaction Ivan was 30.
//! let then = db.as_of(report.db_after.basis_t());
//! assert_eq!(then.entity(ivan).get(&vev::Keyword::new("person/age")).unwrap(), Some(vev::Value::Long(30)));
//! ```

#![warn(missing_docs)]

/// The README's example runs as a doctest too.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
struct ReadmeDoctest;

/// mimalloc as a global allocator (the `mimalloc` feature): the `vev-alloc` crate.
#[cfg(feature = "mimalloc")]
pub use vev_alloc as alloc;
mod connection;
mod error;
pub mod sample;

pub use connection::{
    BulkProgress, CommitStats, Connection, CopyOptions, CopyProgress, CopyReport, CopyStage,
    FulltextCompaction, OpenOptions, Prepared, TxFn,
};
pub use error::Error;
pub use vev_core::par;
pub use vev_core::StorageError;
pub use vev_core::{
    ids, parse_tx, schema, tx_from_edn, tx_from_spanned, AttrRef, Attribute, BasisT, Cardinality,
    Component, Datom, Edn, EntityId, EntityName, EntityRef, IndexOrder, Keyword, Schema, SpannedOp,
    Symbol, TempId, TupleSpec, TxError, TxMap, TxOp, TxValue, Unique, Value, ValueType,
};
pub use vev_datalog::{ast as query_ast, parse_pull, parse_query, parse_rules};
pub use vev_db::fulltext::{FulltextStats, FulltextVerify};
pub use vev_db::{
    coerce_value, DatomBatches, Datoms, Db, Entity, TempIds, TimePoint, TimePointError, TxContext,
    TxFunctions, TxLogEntry, TxReport, View,
};
pub use vev_edn as edn;
pub use vev_query::fulltext::{FtQuery, FulltextError, Hit as FulltextHit};
pub use vev_query::{
    pull_many, q, Input, Limits, PlanStep, PullError, Query, QueryError, QueryOptions, QueryResult,
    Registry, ResultKind, Rows, Source,
};
/// Fault injection for tests (the `testing` feature).
#[cfg(feature = "testing")]
pub use vev_sqlite::FaultPlan;

#[cfg(feature = "testing")]
pub mod testing;
/// Whether a database location is a PostgreSQL URL (`postgres://` or `postgresql://`)
/// rather than a file path: `Connection::open` stores in PostgreSQL then.
pub use vev_postgres::is_postgres_url;

/// Whether a database location is an object-store URL (`s3://BUCKET/PREFIX?log=...`):
/// segments in an S3-compatible object store, the log in PostgreSQL.
pub fn is_objstore_url(location: &str) -> bool {
    location.starts_with("s3://")
}

/// Whether a database location is a storage URL (PostgreSQL or an object store) rather
/// than a file path.
pub fn is_storage_url(location: &str) -> bool {
    is_postgres_url(location) || is_objstore_url(location)
}
pub use vev_sqlite::{BackupProgress, BackupReport, LockMode, VerifyReport};
