//! `Connection::transact` with group commit: transactions that arrive while another group
//! is being synced are committed together, in one write batch with one sync.
//!
//! Callers meet in a queue. The first to find no leader becomes the leader and commits its
//! own transaction at once (an uncontended caller never waits for company). Callers that
//! arrive meanwhile queue their transaction (copied, since the leader's thread runs it) and
//! wait. When the leader is done, it hands leadership to the first queued caller, which takes
//! the queue (up to `GROUP_TXS_MAX` transactions and `GROUP_OPS_MAX` operations) as its
//! group: the group is whatever queued while the previous sync ran.
//!
//! A leader, holding the writer lock, runs the transactor on each transaction of its group in
//! arrival order, each against the previous one's result (so each gets its own tx id and
//! basis-t, exactly as if they ran one by one); one that fails, or whose transaction
//! function panics, fails only its own caller. Then it appends the log records (with their
//! full-text segments) in one synced write batch, publishes the last database, sends the
//! reports to subscribers in commit order, and hands each caller its own report. Every
//! caller returns only after the sync that covers its transaction. A failed write fails
//! every caller of the group, publishes nothing, and makes the writer re-read the log before
//! the next group (`needs_catch_up`). In memory there is no write: the group is applied in
//! order and published.

use std::any::Any;
use std::collections::VecDeque;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};

use vev_core::TxOp;
use vev_db::{Db, TxReport};

use super::{Connection, Writer};
use crate::error::Error;

/// Transactions one group holds at most.
const GROUP_TXS_MAX: usize = 256;
/// Operations one group holds at most (datoms are known only once a transaction is applied;
/// its operations stand in for them), so that one caller's wait stays bounded. A group
/// takes its first transaction whatever its size.
const GROUP_OPS_MAX: usize = 100_000;

/// What a queued caller is told.
enum Outcome {
    /// Its transaction's report or error.
    Done(Result<TxReport, Error>),
    /// Running its transaction panicked (its transaction function, say): the panic, for the
    /// caller to resume in its own thread.
    Panicked(Box<dyn Any + Send>),
    /// It leads now: its group starts with its own transaction.
    Lead,
}

/// Where a queued caller waits for its outcome.
#[derive(Default)]
struct Slot {
    outcome: Mutex<Option<Outcome>>,
    ready: Condvar,
}

impl Slot {
    fn put(&self, outcome: Outcome) {
        *vev_core::sync::lock(&self.outcome) = Some(outcome);
        self.ready.notify_one();
    }

    fn wait(&self) -> Outcome {
        let mut outcome = vev_core::sync::lock(&self.outcome);
        loop {
            if let Some(o) = outcome.take() {
                return o;
            }
            outcome = self
                .ready
                .wait(outcome)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }
}

/// A queued transaction.
struct Request {
    ops: Vec<TxOp>,
    prepared: Option<Prepared>,
    slot: Arc<Slot>,
}

/// One transaction of a group: its operations, and what `prepare` made of them, if the
/// caller prepared them.
struct Job<'a> {
    ops: &'a [TxOp],
    prepared: Option<Prepared>,
}

/// A transaction applied ahead of its commit: `Connection::prepare` makes one,
/// `Connection::transact_prepared` commits it.
///
/// Why: a client that must see its transaction's effect before committing it (a SQL
/// session reading its own writes) already paid for applying it once. When nothing has
/// been committed since, committing that result is exactly what applying the operations
/// again would give, and skips the second application, which for a large transaction
/// (a `COPY` of a million rows) is most of its cost.
pub struct Prepared {
    report: TxReport,
    /// How many operations it was made from (a check that the commit names the same ones).
    ops: usize,
    /// `Inner::functions_version` before it was applied.
    functions_version: u64,
}

impl Prepared {
    /// What applying the operations gave: the database after them, the datoms, the tempids.
    pub fn report(&self) -> &TxReport {
        &self.report
    }
}

/// The queue of transactions waiting for a leader, and the commit counters.
#[derive(Default)]
pub(super) struct Queue {
    state: Mutex<QueueState>,
    transactions: AtomicU64,
    write_batches: AtomicU64,
}

#[derive(Default)]
struct QueueState {
    pending: VecDeque<Request>,
    /// A caller leads (or has been told to): newcomers queue. Whenever `pending` is not
    /// empty, this is true.
    leading: bool,
}

/// Counters of a connection's transactions (`Connection::commit_stats`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CommitStats {
    /// Transactions committed through `transact` (`bulk_load` not counted).
    pub transactions: u64,
    /// Synced write batches those transactions took (none in memory): with several threads
    /// committing at once, fewer than the transactions.
    pub write_batches: u64,
    /// Transactions queued now, waiting for a leader to take them.
    pub waiting: usize,
}

/// The leader's duty, done even if it panics: tell every caller it took an outcome (a
/// panic, when it did not get to) and pass leadership on.
struct Leading<'a> {
    queue: &'a Queue,
    taken: Vec<Arc<Slot>>,
}

impl Drop for Leading<'_> {
    fn drop(&mut self) {
        for slot in self.taken.drain(..) {
            slot.put(Outcome::Panicked(Box::new(
                "the thread committing this transaction's group panicked",
            )));
        }
        let mut state = vev_core::sync::lock(&self.queue.state);
        match state.pending.front() {
            Some(next) => next.slot.put(Outcome::Lead),
            None => state.leading = false,
        }
    }
}

impl Connection {
    /// Transact operations built in Rust. On a durable connection the transaction is in the
    /// log and synced before this returns; transactions from several threads at once share
    /// write batches (group commit: see `connection::group`).
    pub fn transact(&self, ops: &[TxOp]) -> Result<TxReport, Error> {
        self.transact_job(ops, None)
    }

    /// Apply `ops` to `db` without committing them, as `with` does, keeping the result for
    /// `transact_prepared`.
    pub fn prepare(&self, db: &Db, ops: &[TxOp]) -> Result<Prepared, Error> {
        let functions_version = self.inner.functions_version.load(Ordering::SeqCst);
        Ok(Prepared {
            report: self.with(db, ops)?,
            ops: ops.len(),
            functions_version,
        })
    }

    /// Commit `ops`, which `prepared` was made from, like `transact`. When its turn comes
    /// and the database it was applied to is still the latest (nothing committed, no
    /// checkpoint or catch-up published since, no transaction function registered), the
    /// prepared result is committed as it is, without applying the operations again; its
    /// `:db/txInstant` is then the time it was prepared. Otherwise the operations are applied
    /// afresh, exactly as `transact` does (and may fail where the preparation did not).
    pub fn transact_prepared(&self, ops: &[TxOp], prepared: Prepared) -> Result<TxReport, Error> {
        self.transact_job(ops, Some(prepared))
    }

    fn transact_job(&self, ops: &[TxOp], prepared: Option<Prepared>) -> Result<TxReport, Error> {
        let queue = &self.inner.queue;
        let slot = {
            let mut state = vev_core::sync::lock(&queue.state);
            if state.leading {
                let slot = Arc::new(Slot::default());
                state.pending.push_back(Request {
                    ops: ops.to_vec(),
                    prepared,
                    slot: slot.clone(),
                });
                slot
            } else {
                state.leading = true;
                drop(state);
                let _leading = Leading {
                    queue,
                    taken: Vec::new(),
                };
                let mut outcomes = self.commit_group(vec![Job { ops, prepared }]);
                return finish(outcomes.pop().expect("one outcome per transaction"));
            }
        };
        loop {
            match slot.wait() {
                Outcome::Lead => self.lead(),
                outcome => return finish(outcome),
            }
        }
    }

    /// Commit the queue's first group and tell each of its callers their outcome.
    fn lead(&self) {
        let queue = &self.inner.queue;
        let mut requests = take_group(&mut vev_core::sync::lock(&queue.state).pending);
        let mut leading = Leading {
            queue,
            taken: requests.iter().map(|r| r.slot.clone()).collect(),
        };
        let group: Vec<Job<'_>> = requests
            .iter_mut()
            .map(|r| Job {
                ops: &r.ops,
                prepared: r.prepared.take(),
            })
            .collect();
        let outcomes = self.commit_group(group);
        for (slot, outcome) in leading.taken.drain(..).zip(outcomes) {
            slot.put(outcome);
        }
    }

    /// The counters of `transact`'s commits.
    pub fn commit_stats(&self) -> CommitStats {
        let queue = &self.inner.queue;
        CommitStats {
            transactions: queue.transactions.load(Ordering::Relaxed),
            write_batches: queue.write_batches.load(Ordering::Relaxed),
            waiting: vev_core::sync::lock(&queue.state).pending.len(),
        }
    }

    /// Apply `group` in order, write it in one synced write batch, publish: one outcome per
    /// transaction.
    fn commit_group(&self, group: Vec<Job<'_>>) -> Vec<Outcome> {
        let mut writer = vev_core::sync::lock(&self.inner.writer);
        if let Err(e) = self.catch_up_locked(&mut writer) {
            return group
                .iter()
                .map(|_| Outcome::Done(Err(e.clone())))
                .collect();
        }
        let mut db = self.latest();
        let mut outcomes = Vec::with_capacity(group.len());
        for job in group {
            let outcome = match catch_unwind(AssertUnwindSafe(|| self.run_job(&db, job))) {
                Ok(applied) => Outcome::Done(applied),
                Err(panic) => Outcome::Panicked(panic),
            };
            if let Outcome::Done(Ok(report)) = &outcome {
                db = report.db_after.clone();
            }
            outcomes.push(outcome);
        }
        let mut reports: Vec<&mut TxReport> = outcomes
            .iter_mut()
            .filter_map(|o| match o {
                Outcome::Done(Ok(report)) => Some(report),
                _ => None,
            })
            .collect();
        if reports.is_empty() {
            return outcomes;
        }
        if let Err(e) = self.write_group(&mut writer, &mut reports) {
            return outcomes
                .into_iter()
                .map(|o| match o {
                    Outcome::Done(Ok(_)) => Outcome::Done(Err(e.clone())),
                    other => other,
                })
                .collect();
        }
        self.published(&mut writer, &reports);
        outcomes
    }

    /// A group's transaction applied to `db`: its prepared result if that was applied to
    /// `db` itself, with the same operations and transaction functions.
    fn run_job(&self, db: &Db, job: Job<'_>) -> Result<TxReport, Error> {
        if let Some(p) = job.prepared {
            let functions = self.inner.functions_version.load(Ordering::SeqCst);
            if p.report.db_before.same_state(db)
                && p.ops == job.ops.len()
                && p.functions_version == functions
            {
                return Ok(p.report);
            }
        }
        self.apply(db, job.ops, false)
    }

    /// Append the group's log records in one synced write batch (durable connections); each
    /// report's database then holds its full-text segment as stored.
    fn write_group(&self, writer: &mut Writer, reports: &mut [&mut TxReport]) -> Result<(), Error> {
        let Some(durable) = &self.inner.durable else {
            return Ok(());
        };
        let records: Vec<_> = reports
            .iter()
            .map(|r| (&r.db_after, r.tx_data.as_slice()))
            .collect();
        if let Err(e) = durable.store.append(&records) {
            writer.needs_catch_up = true;
            return Err(e.into());
        }
        self.inner
            .queue
            .write_batches
            .fetch_add(1, Ordering::Relaxed);
        for report in reports.iter_mut() {
            report.db_after = report.db_after.fulltext_stored();
            writer.tail_datoms += report.tx_data.len();
        }
        Ok(())
    }

    /// After a group's write: publish its last database, tell subscribers, and start what
    /// runs in the background (full-text compaction, checkpoint) by the usual rules.
    fn published(&self, writer: &mut Writer, reports: &[&mut TxReport]) {
        let Some(last) = reports.last() else {
            return;
        };
        self.publish(last.db_after.clone());
        self.inner
            .queue
            .transactions
            .fetch_add(reports.len() as u64, Ordering::Relaxed);
        self.finish_compaction(writer, false);
        if writer.auto_compact {
            self.start_compaction(writer, false);
        }
        for report in reports {
            writer
                .listeners
                .retain(|tx| tx.send((**report).clone()).is_ok());
        }
        if let Some(durable) = &self.inner.durable {
            self.finish_background(writer, false);
            if writer.tail_datoms >= durable.checkpoint_datoms.max(writer.retry_at_tail) {
                // On its own thread: the commit path never waits for a checkpoint.
                self.start_background(durable, writer);
            }
        }
    }
}

/// Take the next group off the queue: its first transaction, and those after it up to the
/// bounds.
fn take_group(pending: &mut VecDeque<Request>) -> Vec<Request> {
    let mut group = Vec::new();
    let mut ops = 0;
    while let Some(next) = pending.front() {
        let full = group.len() >= GROUP_TXS_MAX || ops + next.ops.len() > GROUP_OPS_MAX;
        if full && !group.is_empty() {
            break;
        }
        ops += next.ops.len();
        group.extend(pending.pop_front());
    }
    group
}

/// A caller's result from its outcome.
fn finish(outcome: Outcome) -> Result<TxReport, Error> {
    match outcome {
        Outcome::Done(result) => result,
        Outcome::Panicked(panic) => resume_unwind(panic),
        Outcome::Lead => unreachable!("a leader's outcome is its report"),
    }
}
