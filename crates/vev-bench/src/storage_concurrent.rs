//! Concurrent small durable transactions: 1, 4 and 8 threads committing through one
//! `Connection` at once, which group commit serves with shared syncs.
//!
//! Two kinds of transaction. `disjoint`: each inserts a new account of its own, so the
//! threads touch no common entity. `hot`: each sets the balance of one of 8 shared accounts,
//! so the threads update the same few entities (as pgbench's tpcb-like does its branches).
//! One thread is the uncontended case. Each cell is a fresh file holding the schema and the
//! hot accounts; its timed region runs from starting the threads to the last commit. The
//! syncs are `Connection::commit_stats`'s write batches.

use std::path::Path;
use std::time::Instant;

use vev::{Connection, EntityRef, Keyword, TxOp, TxValue, Value};

use crate::error::BenchError;
use crate::storage_fixture as fx;

/// Threads of each cell.
pub const THREADS: [usize; 3] = [1, 4, 8];

/// Shared accounts the `hot` transactions update.
const HOT_ACCOUNTS: u64 = 8;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Disjoint,
    Hot,
}

impl Kind {
    pub const ALL: [Kind; 2] = [Kind::Disjoint, Kind::Hot];

    pub fn label(self) -> &'static str {
        match self {
            Kind::Disjoint => "insert a new account (threads share no entity)",
            Kind::Hot => "set the balance of 1 of 8 shared accounts",
        }
    }

    /// Transaction `i` of thread `k`.
    fn tx(self, k: usize, i: usize) -> Vec<TxOp> {
        match self {
            Kind::Disjoint => vec![fx::account(1_000_000 * (k as u64 + 1) + i as u64)],
            Kind::Hot => {
                let id = (k + i) as u64 % HOT_ACCOUNTS + 1;
                let e = EntityRef::LookupRef(
                    Keyword::new("acct/id"),
                    Box::new(TxValue::Value(Value::Long(id as i64))),
                );
                vec![TxOp::add(e, "acct/balance", Value::Long(i as i64))]
            }
        }
    }
}

/// One cell's measurement.
pub struct ConcurrentRun {
    pub kind: Kind,
    pub threads: usize,
    pub txs: u64,
    pub seconds: f64,
    pub write_batches: u64,
}

/// Every cell, about `txs` transactions each, on fresh files in `scratch`.
pub fn run(scratch: &Path, txs: usize) -> Result<Vec<ConcurrentRun>, BenchError> {
    let mut out = Vec::new();
    for kind in Kind::ALL {
        for threads in THREADS {
            let path = scratch.join(format!("concurrent-{threads}-{kind:?}.vev"));
            eprintln!("concurrent: {threads} threads, {kind:?}");
            out.push(run_cell(&path, kind, threads, txs.div_ceil(threads))?);
            crate::storage::remove_db(&path);
        }
    }
    Ok(out)
}

fn run_cell(
    path: &Path,
    kind: Kind,
    threads: usize,
    per_thread: usize,
) -> Result<ConcurrentRun, BenchError> {
    let conn = Connection::open(path)?;
    conn.transact_edn(fx::SCHEMA_EDN)?;
    conn.transact(&(1..=HOT_ACCOUNTS).map(fx::account).collect::<Vec<_>>())?;
    let before = conn.commit_stats();
    let start = Instant::now();
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|k| {
                let conn = &conn;
                s.spawn(move || -> Result<(), vev::Error> {
                    for i in 0..per_thread {
                        conn.transact(&kind.tx(k, i))?;
                    }
                    Ok(())
                })
            })
            .collect();
        handles
            .into_iter()
            .try_for_each(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
    })?;
    let seconds = start.elapsed().as_secs_f64();
    let after = conn.commit_stats();
    Ok(ConcurrentRun {
        kind,
        threads,
        txs: after.transactions - before.transactions,
        seconds,
        write_batches: after.write_batches - before.write_batches,
    })
}
