//! INSERT, with `ON CONFLICT` (`sql/upsert.rs`): the rows as transaction data, the rows
//! whose keys exist skipped or updated, tried again when another client commits one of its
//! new keys first (outside a transaction block).

use vev::{Edn, TxOp};

use super::{now_ms, Outcome, Session, Touch};
use crate::error::SqlError;
use crate::sql::consts::Param;
use crate::sql::upsert::{self, OnConflict};
use crate::sql::write::{InsertPlan, Split};
use crate::sql::{self, Plan};

impl Session {
    /// INSERT: its rows as transaction data, written (pending in a transaction block),
    /// and with `ON CONFLICT DO UPDATE` the updates of the rows whose keys exist.
    ///
    /// Outside a transaction block, a statement whose new key another client commits
    /// between the look and the commit is tried again (PostgreSQL would skip or update
    /// such a row); each refusal means one more of its keys exists, so it succeeds within
    /// one try per row. Inside one, the commit is refused with 23505 (`docs/sql.md`).
    pub(super) async fn insert(
        &mut self,
        p: &InsertPlan,
        params: &[Param],
    ) -> Result<Outcome, SqlError> {
        let retry = !matches!(p.on_conflict, OnConflict::Refuse) && self.txn.is_none();
        let mut tries = if retry { p.rows.len().max(8) + 1 } else { 1 };
        loop {
            tries -= 1;
            match self.insert_once(p, params).await {
                Err(e) if e.code == "23505" && tries > 0 => continue,
                Err(e) => return Err(e),
                Ok((n, rows)) => {
                    return Ok(super::written(p.returning.as_ref(), "INSERT 0", n, rows))
                }
            }
        }
    }

    /// The rows inserted or updated, and RETURNING's rows for them.
    async fn insert_once(
        &mut self,
        p: &InsertPlan,
        params: &[Param],
    ) -> Result<(usize, Vec<Vec<Edn>>), SqlError> {
        let tables = std::slice::from_ref(&p.table.name);
        let found = match &p.select {
            Some(select) => match self.select(select, params).await? {
                Outcome::Rows { rows, .. } => Some(rows),
                _ => return Err(SqlError::internal("a SELECT gave no rows")),
            },
            None => None,
        };
        let rows = {
            let ctx = self.ctx(params, now_ms());
            let db = self.shared.conn.db();
            let next = |col: &crate::catalog::Column| {
                let attr = col.attr.as_ref().expect("a serial column has an attribute");
                self.shared.sequences.next(&db, attr, col.ty)
            };
            let default = |ci| sql::write::default_value(&p.table, ci, &ctx, &next);
            match found {
                Some(found) => p.selected(found, &default)?,
                None => p.values(&ctx, &default)?,
            }
        };
        let split = match p.on_conflict {
            OnConflict::Refuse => Split {
                new: rows,
                ..Split::default()
            },
            _ => {
                let db = self.view_for(Some(tables))?;
                p.split_conflicts(&db, rows)
            }
        };
        let mut next = self.next_row;
        let ops = p.ops(&split.new, &mut next)?;
        self.next_row = next;
        if !matches!(p.on_conflict, OnConflict::Update(_)) {
            let returned = p.returned(&split.new)?;
            self.write(ops, Touch::Tables(tables)).await?;
            return Ok((split.new.len(), returned));
        }
        // DO UPDATE: the new rows and the updates in one transaction.
        if split.repeated {
            return Err(upsert::twice());
        }
        let implicit = self.txn.is_none();
        self.begin(None);
        let result = self.upsert_rows(p, params, ops, &split).await;
        if !implicit {
            return result.map(|n| (n, Vec::new()));
        }
        match result {
            Ok(n) => match self.commit().await? {
                Outcome::End("COMMIT") => Ok((n, Vec::new())),
                _ => Err(SqlError::internal("the INSERT's transaction rolled back")),
            },
            Err(e) => {
                self.rollback();
                Err(e)
            }
        }
    }

    /// DO UPDATE's writes: the new rows (`ops`), then one UPDATE (planned once) for each
    /// row whose key exists.
    async fn upsert_rows(
        &mut self,
        p: &InsertPlan,
        params: &[Param],
        ops: Vec<TxOp>,
        split: &Split,
    ) -> Result<usize, SqlError> {
        self.write(ops, Touch::Tables(std::slice::from_ref(&p.table.name)))
            .await?;
        let mut n = split.new.len();
        if split.old.is_empty() {
            return Ok(n);
        }
        let text = upsert::update_sql(&p.table, &p.on_conflict, params.len())?;
        let plan = match sql::parse(&text)?.first() {
            Some(st) => self.plan(st)?,
            None => return Err(SqlError::internal(format!("no statement in {text}"))),
        };
        let Plan::Update(u) = &plan else {
            return Err(SqlError::internal(format!("not an UPDATE: {text}")));
        };
        for row in &split.old {
            let all: Vec<Param> = params
                .iter()
                .cloned()
                .chain(upsert::excluded(&p.table, row))
                .collect();
            n += self.write_rows(u, &all).await?.0;
        }
        Ok(n)
    }
}
