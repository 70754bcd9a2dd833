//! The transaction log: each transaction's datoms, by basis-t.
//!
//! Why the log is not an index tree of its own: a durable database already stores every
//! transaction's record in its log (one row per transaction, kept for good), so a fifth tree
//! of every datom in memory and in segments would hold the same datoms again (about a fifth
//! of the memory and of the file). A `Db` keeps only the log's *tail* as a tree: the
//! transactions after `State::log_stored`, whose records a checkpoint has not yet covered
//! (and a database in memory, whose tail is its whole log). `tx_range` reads the rest from the
//! store's records through the segment cache's store, and the bootstrap transaction (t 0,
//! never a record) from `bootstrap`.

use vev_core::ids::{t_of, tx_id, BasisT, EntityId};
use vev_core::{Component, Datom, IndexOrder, StorageError};

use crate::db::Db;
use crate::tree::{Change, Tree};

/// One transaction in the log.
#[derive(Clone, Debug, PartialEq)]
pub struct TxLogEntry {
    /// The transaction's basis-t.
    pub t: BasisT,
    /// The transaction's entity id (its tx id), the `tx` of each of its datoms.
    pub tx: EntityId,
    /// The datoms the transaction asserted and retracted (its tx-data), in log order: by
    /// entity, attribute and value; the `:db/txInstant` of `tx` among them.
    pub datoms: Vec<Datom>,
}

impl TxLogEntry {
    fn of(t: BasisT, mut datoms: Vec<Datom>) -> TxLogEntry {
        datoms.sort_by(|x, y| IndexOrder::Log.cmp(x, y));
        TxLogEntry {
            t,
            tx: tx_id(t),
            datoms,
        }
    }
}

impl Db {
    /// The transactions with `start <= t < end` (`None` for open ends), oldest first; an error
    /// when the store's log records (or a log segment of a file from before format 5) fail
    /// to load.
    pub fn tx_range(
        &self,
        start: Option<BasisT>,
        end: Option<BasisT>,
    ) -> Result<Vec<TxLogEntry>, StorageError> {
        let start = start.unwrap_or(0);
        let end = end.unwrap_or(BasisT::MAX);
        let mut out: Vec<TxLogEntry> = Vec::new();
        if start >= end {
            return Ok(out);
        }
        if let Some(stored) = self.state.log_stored {
            if start == 0 {
                out.push(TxLogEntry::of(0, crate::bootstrap::datoms()));
            }
            let (first, last) = (start.max(1), stored.min(end - 1));
            if first <= last {
                let cache = self.state.segments.as_ref().ok_or_else(|| {
                    StorageError::corruption("log", "its records are stored but there is no store")
                })?;
                for rec in cache.read_log(first, last)? {
                    out.push(TxLogEntry::of(rec.t, rec.datoms));
                }
            }
        }
        let mark = self.storage_mark();
        let lo = tx_id(start);
        let it = self.state.log.iter_from(|d| {
            IndexOrder::Log
                .cmp_prefix(d, &[Component::Entity(lo)])
                .is_lt()
        });
        it.for_each_ref(|d| {
            if t_of(d.tx) >= end {
                return false;
            }
            match out.last_mut() {
                Some(entry) if entry.tx == d.tx => entry.datoms.push(d.clone()),
                _ => out.push(TxLogEntry {
                    t: t_of(d.tx),
                    tx: d.tx,
                    datoms: vec![d.clone()],
                }),
            }
            true
        });
        self.storage_check(mark).map(|()| out)
    }
}

/// The log tail `log` without the transactions up to basis-t `t` (which the store's records
/// now hold): a new tree of the datoms after them, built in time proportional to those.
pub(crate) fn tail_after(log: &Tree, t: BasisT) -> Tree {
    let from = tx_id(t + 1);
    let mut kept: Vec<Change> = Vec::new();
    log.iter_from(|d| d.tx < from).for_each_ref(|d| {
        kept.push(Change {
            datom: d.clone(),
            insert: true,
        });
        true
    });
    if kept.len() == log.len() {
        return log.clone();
    }
    Tree::new(IndexOrder::Log).apply_to_nodes(&kept)
}
