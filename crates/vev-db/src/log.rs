//! The transaction log: each transaction's datoms, by basis-t.

use vev_core::ids::{t_of, tx_id, BasisT, EntityId};
use vev_core::{Component, Datom, IndexOrder, StorageError};

use crate::db::Db;

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

impl Db {
    /// The transactions with `start <= t < end` (`None` for open ends), oldest first; an error
    /// when a log segment fails to load.
    pub fn tx_range(
        &self,
        start: Option<BasisT>,
        end: Option<BasisT>,
    ) -> Result<Vec<TxLogEntry>, StorageError> {
        let mark = self.storage_mark();
        let lo = tx_id(start.unwrap_or(0));
        let hi = end.map(tx_id);
        let mut out: Vec<TxLogEntry> = Vec::new();
        let log = &self.state.log;
        let it = log.iter_from(|d| {
            IndexOrder::Log
                .cmp_prefix(d, &[Component::Entity(lo)])
                .is_lt()
        });
        it.for_each_ref(|d| {
            if hi.is_some_and(|hi| d.tx >= hi) {
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
