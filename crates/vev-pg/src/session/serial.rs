//! SERIALIZABLE (and REPEATABLE READ) transactions: optimistic validation at COMMIT.
//!
//! A serializable transaction records the basis it first read at and the tables it read.
//! At COMMIT, with every other commit of the server held off (`Shared::commit_gate`), it
//! looks at the transactions committed since that basis: if one of them wrote a table this
//! transaction read or writes, the commit fails with `40001` and the transaction is rolled
//! back, as PostgreSQL does when a commit would break serializability. Otherwise every read
//! saw the same data as at the commit point, so the transaction is equivalent to running
//! alone there. The check is per table, coarser than PostgreSQL's predicate locks: it never
//! lets a non-serializable history commit, and it can fail transactions PostgreSQL would let
//! through (clients retry 40001 anyway).

use std::collections::BTreeSet;

use vev::{BasisT, Db};

use super::{Outcome, Session};
use crate::error::SqlError;

/// What a serializable transaction read.
#[derive(Debug, Default)]
pub struct Serial {
    /// The basis of its first read (`None`: it has read nothing yet).
    pub start: Option<BasisT>,
    /// The tables it read.
    pub read: BTreeSet<String>,
}

impl Serial {
    /// Note a read of `tables` from `db`.
    pub fn note_read(&mut self, db: &Db, tables: &[String]) {
        self.start.get_or_insert(db.basis_t());
        self.read.extend(tables.iter().cloned());
    }

    /// `40001` if a transaction committed in `latest` after this one's first read wrote a
    /// table it read or writes (`touched`; `schema`: it changes the schema).
    pub fn validate(
        &self,
        latest: &Db,
        touched: &BTreeSet<String>,
        schema: bool,
    ) -> Result<(), SqlError> {
        let Some(start) = self.start else {
            // Blind writes: serializable at the commit point.
            return Ok(());
        };
        let later = latest
            .tx_range(Some(start + 1), None)
            .map_err(|e| SqlError::new("XX000", format!("reading the log: {e}")))?;
        for entry in later {
            for d in &entry.datoms {
                // A transaction's own facts (`:db/txInstant`) and schema facts are no table's.
                let Some(table) = latest.ident(d.a).and_then(|k| k.namespace()) else {
                    continue;
                };
                if table != "db" && (schema || self.read.contains(table) || touched.contains(table))
                {
                    return Err(SqlError::new(
                        "40001",
                        format!(
                            "could not serialize access due to read/write dependencies among \
                             transactions: table \"{table}\" was changed by a transaction \
                             committed at t {} after this one read at t {start}",
                            entry.t
                        ),
                    ));
                }
            }
        }
        Ok(())
    }
}

impl Session {
    /// Whether `BEGIN` without an isolation level validates at COMMIT.
    pub(super) fn default_serializable(&self) -> bool {
        self.settings
            .get("default_transaction_isolation")
            .is_some_and(|v| matches!(v.as_str(), "serializable" | "repeatable read"))
    }

    pub(super) fn set_isolation(
        &mut self,
        serializable: Option<bool>,
        session: bool,
    ) -> Result<Outcome, SqlError> {
        let Some(serializable) = serializable else {
            return Ok(Outcome::Command("SET".into()));
        };
        let level = if serializable {
            "serializable"
        } else {
            "read committed"
        };
        if session {
            self.settings
                .insert("default_transaction_isolation".into(), level.into());
        } else if let Some(t) = &mut self.txn {
            if t.reads > 0 || !t.pending.is_empty() {
                return Err(SqlError::new(
                    "25001",
                    "SET TRANSACTION ISOLATION LEVEL must be called before any query",
                ));
            }
            t.serial = serializable.then(Serial::default);
        }
        // Outside a transaction block PostgreSQL only warns.
        Ok(Outcome::Command("SET".into()))
    }
}
