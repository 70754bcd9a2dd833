//! Immutable database values for Vev: persistent covering indexes (EAVT, AEVT, AVET, VAET)
//! with history, the transactor that makes the next value from transaction data, and the
//! time-travel and index-access views. No I/O (segments come through `SegmentStore`) and no
//! `unsafe`. It is not single-threaded: large batches are sorted, applied and persisted on
//! two threads (scoped, joined before the call returns), a bulk import sorts set-aside
//! chunks on at most two threads of its own, and the segment cache is behind a mutex; see
//! "Threads and locks" in ARCHITECTURE.md.

#![warn(missing_docs)]

mod bootstrap;
mod codec;
mod compress;
mod db;
mod entity;
pub mod fulltext;
mod indexes;
mod log;
pub mod persist;
mod segment;
mod source;
mod time;
mod tree;
mod tx;

pub use codec::DecodeError;
pub use db::{DatomBatches, Datoms, Db, TimePoint, View};
pub use entity::Entity;
pub use log::TxLogEntry;
pub use time::TimePointError;
pub use tx::{
    transact, transact_owned, Bulk, BulkTx, NoFunctions, TempIds, TxContext, TxFunctions,
    TxOutcome, TxReport,
};

/// Interpret an EDN form as a value of attribute `attr`'s type (not for ref attributes,
/// whose values are entity references). `None` when the form does not have that type.
pub fn coerce_value(
    db: &Db,
    attr: &vev_core::Attribute,
    form: &vev_core::Edn,
) -> Option<vev_core::Value> {
    tx::coerce(db, attr, form)
}
