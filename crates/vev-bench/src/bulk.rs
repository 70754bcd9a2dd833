//! (a) Vev's side of the fixture load: all people in one transaction, in one transaction
//! each, and (as an extra) from EDN text in one transaction.
//!
//! Each repetition starts from a fresh connection with the schema already transacted. The
//! transaction data is built before the clock starts, as an embedded user would hold it;
//! dropping the database afterwards is not timed. One untimed warm-up run precedes the
//! timed ones so allocator and cache warm-up do not land in the first sample.

use std::time::Instant;

use vev::{Connection, TxOp};

use crate::error::BenchError;
use crate::fixture::{self, Person};
use crate::stats::ms;

/// Milliseconds of each timed repetition.
pub struct BulkTimes {
    pub one_tx_ms: Vec<f64>,
    pub many_tx_ms: Vec<f64>,
    pub edn_one_tx_ms: Vec<f64>,
}

fn fresh_connection() -> Result<Connection, BenchError> {
    let conn = Connection::open_in_memory();
    conn.transact_edn(fixture::SCHEMA_EDN)?;
    Ok(conn)
}

fn one_tx(ops: &[TxOp]) -> Result<f64, BenchError> {
    let conn = fresh_connection()?;
    let start = Instant::now();
    conn.transact(ops)?;
    let elapsed = ms(start.elapsed());
    assert_eq!(conn.db().basis_t(), 2, "schema plus one data transaction");
    Ok(elapsed)
}

fn many_tx(ops: &[TxOp]) -> Result<f64, BenchError> {
    let conn = fresh_connection()?;
    let start = Instant::now();
    for op in ops {
        conn.transact(std::slice::from_ref(op))?;
    }
    let elapsed = ms(start.elapsed());
    assert_eq!(
        conn.db().basis_t(),
        1 + ops.len() as u64,
        "one transaction per person"
    );
    Ok(elapsed)
}

fn edn_one_tx(text: &str) -> Result<f64, BenchError> {
    let conn = fresh_connection()?;
    let start = Instant::now();
    conn.transact_edn(text)?;
    Ok(ms(start.elapsed()))
}

/// Run `f` once untimed, then `reps` times.
fn repeat(
    reps: usize,
    mut f: impl FnMut() -> Result<f64, BenchError>,
) -> Result<Vec<f64>, BenchError> {
    f()?;
    (0..reps).map(|_| f()).collect()
}

pub fn run(people: &[Person], reps: usize) -> Result<BulkTimes, BenchError> {
    let ops: Vec<TxOp> = people.iter().map(Person::tx_op).collect();
    let text = fixture::edn_text(people);
    Ok(BulkTimes {
        one_tx_ms: repeat(reps, || one_tx(&ops))?,
        many_tx_ms: repeat(reps, || many_tx(&ops))?,
        edn_one_tx_ms: repeat(reps, || edn_one_tx(&text))?,
    })
}
