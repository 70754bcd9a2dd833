//! A query over derived tables (`sql/derived.rs`): each one's rows made into a speculative
//! database in turn, then the query run on it.

use std::sync::Arc;

use super::{Outcome, Session};
use crate::error::SqlError;
use crate::sql::consts::Param;
use crate::sql::derived::{self, WithPlan};

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
                    d.table.name.trim_start_matches('\u{1}')
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
