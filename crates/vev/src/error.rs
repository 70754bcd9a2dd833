//! The facade's error: one enum over the operation families, each with a stable code.

use vev_core::{StorageError, TxError};
use vev_edn::ParseError;

/// What a facade call can fail with: one variant per operation family, each wrapping that
/// family's own error, whose variants carry the details. Match on the variant, or on the
/// stable [`Error::code`].
#[derive(thiserror::Error, Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Error {
    /// A transaction was rejected: unknown attribute, wrong value type, unique conflict,
    /// failed `:db/cas`, invalid schema alteration, ... (`tx/*` and `schema/*` codes, or
    /// `edn/*` for transaction text that does not read). Nothing was committed.
    #[error(transparent)]
    Tx(#[from] TxError),
    /// EDN text that does not read (the CLI's inputs and entity arguments).
    #[error(transparent)]
    Edn(#[from] ParseError),
    /// A query or pull could not be parsed or run: its syntax, an unknown attribute, rule
    /// or function, inputs that do not match `:in`, ... (`query/*` and `pull/*` codes; a
    /// storage failure met while it ran keeps its `storage/*` code).
    #[error(transparent)]
    Query(#[from] vev_query::QueryError),
    /// The database file could not be opened, locked, read or written, is not a Vev file of
    /// this format version, or holds corrupt bytes (`storage/*` codes).
    #[error(transparent)]
    Storage(#[from] StorageError),
    /// A number or text given as a time point is neither a basis-t, a transaction id nor an
    /// instant (`time/*` codes).
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
