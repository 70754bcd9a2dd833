//! The parts of a statement that run before it: derived tables (`sql/derived.rs`), each
//! one's rows made into a speculative database in turn before the query runs on it, and
//! scalar subqueries (`sql/scalar.rs`), whose values become parameters of the statement.

use std::sync::Arc;

use super::{Outcome, Session};
use crate::error::SqlError;
use crate::sql::consts::Param;
use crate::sql::derived::{self, WithPlan};
use crate::sql::scalar::ScalarPlan;

impl Session {
    /// Run each derived table's plan on the database the statement reads (with the derived
    /// tables before it), assert its rows in a speculative transaction, then run the query
    /// on the database with all of them. The statement reads nothing else meanwhile: every
    /// part sees `derived`.
    pub(super) async fn with_derived(
        &mut self,
        w: &Arc<WithPlan>,
        params: &[Param],
    ) -> Result<Outcome, SqlError> {
        if self.reading_the_past() {
            return Err(SqlError::unsupported(
                "WITH or a subquery in FROM under vev.as_of",
            ));
        }
        let outer = self.derived.clone();
        let result = self.run_derived(w, params).await;
        self.derived = outer;
        result
    }

    async fn run_derived(
        &mut self,
        w: &Arc<WithPlan>,
        params: &[Param],
    ) -> Result<Outcome, SqlError> {
        let mut db = self.view_for(Some(&w.tables))?;
        self.derived = Some(db.clone());
        let conn = self.shared.conn.clone();
        for d in &w.derived {
            let Outcome::Rows { rows, .. } = Box::pin(self.execute_inner(&d.plan, params)).await?
            else {
                return Err(SqlError::internal(
                    "a derived table's query returned no rows",
                ));
            };
            let made = |e: vev::Error| {
                SqlError::internal(format!(
                    "making the derived table \"{}\": {e}",
                    derived::shown(&d.table.name)
                ))
            };
            db = conn
                .with_edn(&db, &derived::schema_tx(&d.table))
                .map_err(made)?
                .db_after;
            let ops = derived::rows_tx(&d.table, rows);
            if !ops.is_empty() {
                db = conn.with(&db, &ops).map_err(made)?.db_after;
            }
            self.derived = Some(db.clone());
        }
        Box::pin(self.execute_inner(&w.body, params)).await
    }
}

impl Session {
    /// Run each scalar subquery with the parameters so far (the statement's own, then the
    /// values of those before it), then the statement with all of them. A read-only
    /// statement reads one database value throughout; a write's row lookups and checks read
    /// what they always do.
    pub(super) async fn with_scalars(
        &mut self,
        s: &Arc<ScalarPlan>,
        params: &[Param],
    ) -> Result<Outcome, SqlError> {
        if !s.body.writes() && self.pinned.is_none() {
            self.pinned = Some(self.shared.conn.db());
        }
        let mut all: Vec<Param> = params.iter().take(s.own).cloned().collect();
        if all.len() < s.own {
            return Err(SqlError::new(
                "08P01",
                format!(
                    "bind message supplies {} parameters, but the statement needs {}",
                    all.len(),
                    s.own
                ),
            ));
        }
        for (plan, ty) in &s.scalars {
            let Outcome::Rows { rows, .. } = Box::pin(self.execute_inner(plan, &all)).await? else {
                return Err(SqlError::internal("a scalar subquery returned no rows"));
            };
            let value = match rows.as_slice() {
                [] => Param::Null,
                [row] => match row.first() {
                    Some(v) if !crate::sqlfns::is_null_edn(v) => {
                        Param::Typed(crate::sql::union::conform(v.clone(), *ty), *ty)
                    }
                    _ => Param::Null,
                },
                _ => {
                    return Err(SqlError::new(
                        "21000",
                        "more than one row returned by a subquery used as an expression",
                    ))
                }
            };
            all.push(value);
        }
        Box::pin(self.execute_inner(&s.body, &all)).await
    }
}
