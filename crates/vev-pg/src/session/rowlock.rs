//! Row locks taken by reads and writes: `SELECT ... FOR UPDATE`, UPDATE and DELETE find
//! their rows, lock the row entities, and find them again if a lock had to wait.

use vev::{Edn, EntityId};

use super::{Session, Touch};
use crate::error::SqlError;
use crate::sql::write::RowsPlan;

/// What `find_and_lock` runs and locks.
pub(super) struct Found<'a> {
    pub(super) tables: &'a [String],
    pub(super) query: &'a vev::Query,
    pub(super) cost: &'a crate::sql::QueryCost,
    pub(super) args: &'a [Edn],
    /// What happens to the query's rows before their entities are locked (a SELECT's
    /// ORDER BY and LIMIT: only the rows returned are locked).
    pub(super) arrange: &'a (dyn Fn(Vec<Vec<Edn>>) -> Result<Vec<Vec<Edn>>, SqlError> + Sync),
    /// The columns holding the row entities to lock.
    pub(super) entities: &'a [usize],
    pub(super) nowait: bool,
}

impl Session {
    /// Locks taken by a statement: the transaction's until it ends, or released now.
    pub(super) fn keep_locks(&mut self, held: Vec<EntityId>) {
        match &mut self.txn {
            Some(t) => t.locks.extend(held),
            None => self.shared.locks.release(self.id, &held),
        }
    }

    /// Run a query and lock the row entities it returns; run it again if a lock had to
    /// wait or anything committed in between (another transaction may have changed the
    /// rows: READ COMMITTED's re-check). `held` gets every lock taken.
    pub(super) async fn find_and_lock(
        &mut self,
        f: &Found<'_>,
        held: &mut Vec<EntityId>,
    ) -> Result<Vec<Vec<Edn>>, SqlError> {
        let lock_timeout = self
            .timeout("lock_timeout")
            .or(self.timeout("statement_timeout"));
        for _ in 0..100 {
            // Rows read before their locks are taken are only good if nothing committed
            // in between: the basis tells.
            let basis = self.shared.conn.db().basis_t();
            let db = self.view_for(Some(f.tables))?;
            let rows = (f.arrange)(self.query_rows(&db, f.query, f.args, f.cost)?)?;
            let ids: Vec<EntityId> = rows
                .iter()
                .flat_map(|r| f.entities.iter().filter_map(|&k| r.get(k)))
                .filter_map(|v| match v {
                    Edn::Integer(e) => Some(*e as EntityId),
                    _ => None,
                })
                .collect();
            let waited = if f.nowait {
                self.shared.locks.try_lock(self.id, &ids, held)?;
                false
            } else {
                self.shared
                    .locks
                    .lock(self.id, &ids, held, lock_timeout, Some(&self.canceler))
                    .await?
            };
            if !waited && self.shared.conn.db().basis_t() == basis {
                return Ok(rows);
            }
        }
        Err(SqlError::serialization(
            "could not settle the rows to lock after 100 lock waits",
        ))
    }

    pub(super) async fn write_rows_locked(
        &mut self,
        p: &RowsPlan,
        args: &[Edn],
        held: &mut Vec<EntityId>,
    ) -> Result<(usize, Vec<Vec<Edn>>), SqlError> {
        let found = Found {
            tables: &p.reads,
            query: &p.query,
            cost: &p.cost,
            args,
            arrange: &Ok,
            entities: &[0],
            nowait: false,
        };
        let mut rows = self.find_and_lock(&found, held).await?;
        if p.joined {
            // A row joined to several rows of FROM (or USING) is written once, with the
            // first of them.
            let mut seen = std::collections::HashSet::new();
            rows.retain(|r| seen.insert(r[0].clone()));
        }
        let ops = p.tx(&rows, &|e| self.entity_ref(e))?;
        let returned = p.returned(&rows)?;
        let n = rows.len();
        self.write(ops, Touch::Tables(std::slice::from_ref(&p.table.name)))
            .await?;
        Ok((n, returned))
    }
}
