//! The facade's error: one enum over the operation families, each with a stable code.

use vev_core::{StorageError, TxError};
use vev_edn::ParseError;

#[derive(thiserror::Error, Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Error {
    #[error(transparent)]
    Tx(#[from] TxError),
    /// EDN text that does not read (the CLI's inputs and entity arguments).
    #[error(transparent)]
    Edn(#[from] ParseError),
    #[error(transparent)]
    Query(#[from] vev_query::QueryError),
    #[error(transparent)]
    Storage(#[from] StorageError),
    #[error(transparent)]
    Time(#[from] vev_db::TimePointError),
}

impl Error {
    /// The stable code, e.g. `tx/unique-conflict` or `edn/unexpected-eof`.
    pub fn code(&self) -> &'static str {
        match self {
            Error::Tx(e) => e.code(),
            Error::Edn(e) => e.code(),
            Error::Query(e) => e.code(),
            Error::Storage(e) => e.code(),
            Error::Time(e) => e.code(),
        }
    }
}
