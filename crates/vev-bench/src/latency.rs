//! (b) Small-transaction latency and (c) resident memory per datom.
//!
//! Both need a database of a given size, built the way a bulk import would build it: batches
//! of 10,000 five-attribute people through `Connection::transact`. The 1,000,000-datom build
//! is measured for memory (VmRSS before and after, with the database kept alive) and then
//! reused for the latency run, so it is built only once.

use std::time::Instant;

use vev::{Connection, IndexOrder, TxMap, TxOp, Value};

use crate::error::BenchError;
use crate::fixture::{self, Person};
use crate::stats::{median, quantile, us};

const BATCH_PEOPLE: usize = 10_000;
/// Untimed transactions before the timed ones.
const WARMUP_TXS: usize = 100;

/// A connection holding `datoms` user datoms (a multiple of 5) of generated people.
pub fn build(datoms: usize, seed: u64) -> Result<Connection, BenchError> {
    let conn = Connection::open_in_memory();
    conn.transact_edn(fixture::SCHEMA_EDN)?;
    let people = fixture::people(seed, datoms / fixture::ATTRS_PER_PERSON);
    for batch in people.chunks(BATCH_PEOPLE) {
        let ops: Vec<TxOp> = batch.iter().map(Person::tx_op).collect();
        conn.transact(&ops)?;
    }
    Ok(conn)
}

/// Microseconds of each timed transaction, and what else happened meanwhile.
pub struct Latency {
    pub samples_us: Vec<f64>,
    /// Datoms the database gained over the run (the transactions and their tx datoms).
    pub datoms_added: usize,
    /// Times the kernel preempted this process during the timed transactions: on a busy
    /// machine these land in the tail (p95), not in the median.
    pub preemptions: u64,
}

impl Latency {
    pub fn median_us(&self) -> f64 {
        median(&self.samples_us)
    }

    pub fn p95_us(&self) -> f64 {
        quantile(&self.samples_us, 0.95)
    }

    /// The mean: most transactions only join the trees' pending changes, and now and then
    /// one applies a full list to the nodes, which the median does not show.
    pub fn mean_us(&self) -> f64 {
        self.samples_us.iter().sum::<f64>() / self.samples_us.len().max(1) as f64
    }

    pub fn max_us(&self) -> f64 {
        self.samples_us.iter().copied().fold(0.0, f64::max)
    }
}

/// `txs` one-entity, three-attribute transactions, each on the latest database.
pub fn run(conn: &Connection, txs: usize) -> Result<Latency, BenchError> {
    let people = fixture::people(fixture::SEED ^ 0xB, WARMUP_TXS + txs);
    let ops: Vec<[TxOp; 1]> = people
        .iter()
        .map(|p| {
            [TxOp::Map(
                TxMap::new(None)
                    .with("name", Value::string(p.name))
                    .with("age", p.age)
                    .with("salary", p.salary),
            )]
        })
        .collect();
    let datoms_before = conn.db().count(IndexOrder::Eavt, &[])?;
    let (warmup, timed) = ops.split_at(WARMUP_TXS);
    for op in warmup {
        conn.transact(op)?;
    }
    let mut samples_us = Vec::with_capacity(txs);
    let preempted_before = status_field("nonvoluntary_ctxt_switches")?;
    for op in timed {
        let start = Instant::now();
        conn.transact(op)?;
        samples_us.push(us(start.elapsed()));
    }
    let preemptions = status_field("nonvoluntary_ctxt_switches")? - preempted_before;
    let datoms_added = conn.db().count(IndexOrder::Eavt, &[])? - datoms_before;
    Ok(Latency {
        samples_us,
        datoms_added,
        preemptions,
    })
}

/// The resident set size of this process, from `/proc/self/status`.
pub fn rss_bytes() -> Result<u64, BenchError> {
    Ok(status_field("VmRSS")? * 1024)
}

/// A numeric field of `/proc/self/status` (`VmRSS:  1234 kB` gives 1234).
pub(crate) fn status_field(name: &'static str) -> Result<u64, BenchError> {
    let path = "/proc/self/status";
    let status = std::fs::read_to_string(path).map_err(BenchError::io("read", path))?;
    let value = status
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
        .and_then(|rest| {
            rest.trim()
                .trim_end_matches("kB")
                .trim()
                .parse::<u64>()
                .ok()
        });
    value.ok_or(BenchError::StatusField { name })
}
