//! `Connection::bulk_load`: a stream of transactions imported fast.
//!
//! Two threads, so that neither waits for the other: this one runs each transaction through
//! the transactor and gathers its log record; once a batch holds `bulk_batch_datoms`, it goes
//! to a log thread that appends it in one synced write batch while the next batch is
//! computed (the channel holds one batch, so memory stays bounded). The log thread answers
//! each batch with the counts it committed, which drive `progress`.
//!
//! Without subscribers nothing needs db-before or db-after, so the import goes through
//! `vev_db::Bulk`: unshared index nodes are updated in place and AVET entries of non-unique
//! attributes are merged in large batches. With subscribers, each transaction gets its full
//! report. The import's database is published only when it ends; one checkpoint then
//! writes the index segments.
//!
//! A failure (a transaction, a log write, or a segment that failed to load during the
//! import) stops it: the batches committed before it stay, and the connection adopts them
//! from the log.

use std::sync::mpsc::{channel, sync_channel, Receiver, Sender, SyncSender};
use std::time::{Duration, Instant};

use vev_core::TxOp;
use vev_db::persist::LogRecord;
use vev_db::Db;

use super::{BulkProgress, Connection, Durable, Writer};
use crate::error::Error;

/// What a `bulk_load` builds: a `Bulk` import, or (with subscribers) one full report after
/// another; `Failed` once a transaction failed (the `Bulk` is consumed then).
enum Importing {
    Bulk(vev_db::Bulk),
    Reports(Db),
    Failed,
}

/// A batch on its way to the log: its records, the transaction data it came from (dropped
/// on the log thread, off the transactor's path), and the counts after it.
struct Batch {
    records: Vec<LogRecord>,
    #[allow(dead_code)] // only dropped, on the log thread
    ops: Vec<Vec<TxOp>>,
    /// The full-text entries of the batch's transactions (one, merged).
    fulltext: Vec<vev_db::fulltext::NewEntry>,
    txs: u64,
    datoms: u64,
}

/// The log thread's answer to a batch: the transactions and datoms committed so far.
type Ack = Result<(u64, u64), Error>;

/// The main thread's view of the log thread's answers: progress so far, and the first
/// failure.
struct Acks<'p> {
    from_log: Receiver<Ack>,
    started: Instant,
    progress: &'p mut dyn FnMut(&BulkProgress),
    done: BulkProgress,
    failed: Option<Error>,
}

impl Acks<'_> {
    fn take(&mut self, ack: Ack) {
        match ack {
            Ok((txs, datoms)) => {
                self.done.txs = txs;
                self.done.datoms = datoms;
                self.done.elapsed = self.started.elapsed();
                (self.progress)(&self.done);
            }
            Err(e) => {
                self.failed.get_or_insert(e);
            }
        }
    }

    /// Take the answers that have arrived, without waiting.
    fn take_ready(&mut self) {
        while let Ok(ack) = self.from_log.try_recv() {
            self.take(ack);
        }
    }

    /// Wait for every answer (the log thread has been sent its last batch).
    fn take_all(&mut self) {
        while let Ok(ack) = self.from_log.recv() {
            self.take(ack);
        }
    }
}

/// The log thread: append each batch, unless a segment load failed meanwhile (the import's
/// database would then be missing datoms); stop at the first failure.
fn log_batches(
    durable: Option<&Durable>,
    from_main: Receiver<Batch>,
    to_main: Sender<Ack>,
    load_failure: &dyn Fn() -> Option<vev_core::StorageError>,
) {
    for batch in from_main {
        if let Some(f) = load_failure() {
            let _ = to_main.send(Err(f.into()));
            return;
        }
        let written = match durable {
            Some(d) => d
                .store
                .append_many(&batch.records, &batch.fulltext)
                .map_err(Error::from),
            None => Ok(()),
        };
        let stop = written.is_err();
        let counts = (batch.txs, batch.datoms);
        drop(batch);
        let _ = to_main.send(written.map(|()| counts));
        if stop {
            return;
        }
    }
}

/// Log records gathered for the next batch.
#[derive(Default)]
struct Gathered {
    records: Vec<LogRecord>,
    ops: Vec<Vec<TxOp>>,
    datoms: usize,
    txs_seen: u64,
    datoms_seen: u64,
}

impl Gathered {
    /// Send what is gathered to the log thread; false when it has stopped.
    fn send(&mut self, to_log: &SyncSender<Batch>, state: &mut Importing) -> bool {
        let fulltext = match state {
            Importing::Bulk(bulk) => bulk.take_fulltext(),
            Importing::Reports(db) => {
                let (next, entries) = std::mem::replace(db, Db::empty()).take_fulltext();
                *db = next;
                entries
            }
            Importing::Failed => Vec::new(),
        };
        let batch = Batch {
            records: std::mem::take(&mut self.records),
            ops: std::mem::take(&mut self.ops),
            fulltext,
            txs: self.txs_seen,
            datoms: self.datoms_seen,
        };
        self.datoms = 0;
        to_log.send(batch).is_ok()
    }
}

impl Connection {
    /// Import a stream of transactions fast: each runs through the transactor as usual, but
    /// their log records are written in large synced batches (`bulk_batch_datoms`) by a second
    /// thread while the next batch is computed, and one checkpoint at the end writes the index
    /// segments. `progress` is called after each batch is committed. The import's database is
    /// published when it ends (no other value shares its index nodes meanwhile, so they are
    /// updated in place). A failure stops the import: the batches committed before it stay,
    /// and the connection adopts them from the log.
    pub fn bulk_load<I>(
        &self,
        txs: I,
        progress: &mut dyn FnMut(&BulkProgress),
    ) -> Result<BulkProgress, Error>
    where
        I: IntoIterator<Item = Vec<TxOp>>,
    {
        let started = Instant::now();
        let mut writer = vev_core::sync::lock(&self.inner.writer);
        self.catch_up_locked(&mut writer)?;
        let durable = self.inner.durable.as_ref();
        // Segment loads that fail during the import (in the transactor or in `Bulk`'s merges)
        // fail it: the log thread checks before each batch, and the end before publishing.
        let mark = durable.map(|d| d.store.cache().mark());
        let load_failure = move || {
            durable
                .zip(mark)
                .and_then(|(d, m)| d.store.cache().failure_since(m))
        };
        let (to_log, from_main) = sync_channel::<Batch>(1);
        let (to_main, from_log) = channel::<Ack>();
        let mut acks = Acks {
            from_log,
            started,
            progress,
            done: BulkProgress {
                txs: 0,
                datoms: 0,
                elapsed: Duration::ZERO,
            },
            failed: None,
        };
        let imported = std::thread::scope(|scope| {
            scope.spawn(|| log_batches(durable, from_main, to_main, &load_failure));
            let state = self.import(txs, &mut writer, to_log, &mut acks);
            // The last merges run while the log thread commits the last batches.
            let imported = match state {
                // A failed import's value is dropped unfinished (merging would be wasted).
                _ if acks.failed.is_some() => Db::empty(),
                Importing::Bulk(bulk) => bulk.finish(),
                Importing::Reports(db) => db,
                Importing::Failed => Db::empty(),
            };
            acks.take_all();
            if let Some(f) = load_failure() {
                acks.failed.get_or_insert(f.into());
            }
            imported
        });
        let mut done = acks.done;
        if let Some(e) = acks.failed {
            // In memory nothing was committed; on a file, adopt the batches that were.
            if let Some(durable) = durable {
                match durable.store.catch_up(&self.latest()) {
                    Ok(db) => drop(self.publish(db)),
                    Err(_) => writer.needs_catch_up = true,
                }
            }
            return Err(e);
        }
        self.publish(imported);
        if let Some(durable) = durable {
            writer.tail_datoms += done.datoms as usize;
            self.checkpoint_locked(durable, &mut writer)?;
        }
        done.elapsed = started.elapsed();
        Ok(done)
    }

    /// Run the transactions through the transactor, sending their log records to the log
    /// thread in batches, until they end or something fails (recorded in `acks`). Dropping
    /// `to_log` at the end tells the log thread there is no more.
    fn import<I>(
        &self,
        txs: I,
        writer: &mut Writer,
        to_log: SyncSender<Batch>,
        acks: &mut Acks<'_>,
    ) -> Importing
    where
        I: IntoIterator<Item = Vec<TxOp>>,
    {
        let batch_datoms = self
            .inner
            .durable
            .as_ref()
            .map_or(usize::MAX, |d| d.bulk_batch_datoms);
        let mut state = if writer.listeners.is_empty() {
            Importing::Bulk(vev_db::Bulk::new(self.latest()).log_in_store())
        } else {
            Importing::Reports(self.latest())
        };
        let mut gathered = Gathered::default();
        for ops in txs {
            acks.take_ready();
            if acks.failed.is_some() {
                break;
            }
            let (next, applied) = self.import_one(state, &ops, writer);
            state = next;
            let (tx_data, t, next_user) = match applied {
                Ok(x) => x,
                Err(e) => {
                    acks.failed = Some(e);
                    break;
                }
            };
            gathered.txs_seen += 1;
            gathered.datoms_seen += tx_data.len() as u64;
            gathered.datoms += tx_data.len();
            gathered.records.push(LogRecord {
                t,
                next_user,
                datoms: tx_data,
            });
            gathered.ops.push(ops);
            if gathered.datoms >= batch_datoms && !gathered.send(&to_log, &mut state) {
                break;
            }
        }
        if acks.failed.is_none() && !gathered.records.is_empty() {
            gathered.send(&to_log, &mut state);
        }
        state
    }

    /// One transaction of an import: the next state, and the transaction's datoms, basis-t
    /// and next user id.
    #[allow(clippy::type_complexity)]
    fn import_one(
        &self,
        state: Importing,
        ops: &[TxOp],
        writer: &mut Writer,
    ) -> (
        Importing,
        Result<(Vec<vev_core::Datom>, vev_core::BasisT, u64), Error>,
    ) {
        match state {
            Importing::Bulk(bulk) => {
                let cache = bulk.segment_cache().cloned();
                match self.run_transactor(cache, false, |ctx| bulk.transact(ops, ctx)) {
                    Ok((bulk, tx)) => {
                        let done = (tx.tx_data, bulk.basis_t(), bulk.next_user());
                        (Importing::Bulk(bulk), Ok(done))
                    }
                    Err(e) => (Importing::Failed, Err(e)),
                }
            }
            Importing::Reports(db) => match self.apply(&db, ops, false) {
                Ok(report) => {
                    writer
                        .listeners
                        .retain(|tx| tx.send(report.clone()).is_ok());
                    let db = report.db_after;
                    let done = (report.tx_data, db.basis_t(), db.next_user());
                    (Importing::Reports(db), Ok(done))
                }
                Err(e) => (Importing::Failed, Err(e)),
            },
            Importing::Failed => unreachable!("an import stops at its first failure"),
        }
    }
}
