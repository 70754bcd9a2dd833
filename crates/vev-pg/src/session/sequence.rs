//! The sequences of `serial` and identity columns: the next number of each, kept in the
//! server's memory.
//!
//! As in PostgreSQL, `nextval` is not transactional: a number is handed out once, whether
//! or not the transaction that took it commits, so concurrent inserts never wait for each
//! other or conflict on it. A column's sequence starts after the largest value the column
//! ever held (its history included, so a deleted row's number is not handed out again)
//! when the server first needs it. What is not kept: numbers handed out to transactions
//! that never committed may be handed out again after a restart (PostgreSQL logs its
//! sequences and never repeats one), and a value inserted explicitly above the sequence
//! is not skipped until the next restart (PostgreSQL never skips it: the insert that
//! reaches it fails with 23505, as it does here).

use std::collections::HashMap;
use std::sync::Mutex;

use vev::{Db, Edn, EntityId, Keyword};

use crate::error::SqlError;
use crate::types::SqlType;

/// The next number of each sequence, by its column's attribute id (a table dropped and
/// created again has new attributes, so a new sequence).
#[derive(Default)]
pub struct Sequences(Mutex<HashMap<EntityId, i64>>);

impl Sequences {
    /// The next number of the sequence of column `attr` (of type `ty`) in `db`.
    pub fn next(&self, db: &Db, attr: &Keyword, ty: SqlType) -> Result<i64, SqlError> {
        let id = db
            .schema()
            .attribute_by_ident(attr)
            .map(|a| a.id)
            .ok_or_else(|| SqlError::internal(format!("no attribute {attr} for a sequence")))?;
        let mut next = lock(&self.0);
        let n = match next.get(&id) {
            Some(n) => *n,
            None => largest(db, attr)?.saturating_add(1).max(1),
        };
        let max = match ty {
            SqlType::Int2 => i64::from(i16::MAX),
            SqlType::Int4 => i64::from(i32::MAX),
            _ => i64::MAX,
        };
        if n > max {
            return Err(SqlError::new(
                "2200H",
                format!(
                    "nextval: reached maximum value of sequence \"{}_{}_seq\" ({max})",
                    attr.namespace().unwrap_or_default(),
                    attr.name()
                ),
            ));
        }
        next.insert(id, n + 1);
        Ok(n)
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The largest value `attr` ever held in `db` (0 when none).
fn largest(db: &Db, attr: &Keyword) -> Result<i64, SqlError> {
    let result = db
        .history()
        .q(
            "[:find (max ?v) :in $ ?a :where [_ ?a ?v]]",
            &[Edn::Keyword(attr.clone())],
        )
        .map_err(SqlError::internal)?;
    let rows = match result {
        vev::QueryResult::Rel(rows) | vev::QueryResult::Bag(rows) => rows.into_vecs(),
        _ => Vec::new(),
    };
    Ok(match rows.first().and_then(|r| r.first()) {
        Some(Edn::Integer(n)) => *n,
        _ => 0,
    })
}
