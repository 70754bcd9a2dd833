//! Load `vev::sample`'s people graph into a new file through ordinary transactions and print
//! the time: `cargo run --release -p vev --features mimalloc --example load_people -- FILE --people N [--per-tx K]`.
//! The load that `vev-bench scale` times, without the rest of the suite, for profiling.

use std::time::Instant;

#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: vev::alloc::MiMalloc = vev::alloc::MiMalloc;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    #[cfg(feature = "mimalloc")]
    vev::alloc::keep_freed_memory();
    let mut args = std::env::args().skip(1);
    let path = args
        .next()
        .ok_or("usage: load_people FILE --people N [--per-tx K]")?;
    let (mut people, mut per_tx) = (153_847usize, 500usize);
    while let Some(flag) = args.next() {
        let value: usize = args.next().ok_or("a flag needs a value")?.parse()?;
        match flag.as_str() {
            "--people" => people = value,
            "--per-tx" => per_tx = value,
            other => return Err(format!("unknown flag {other}").into()),
        }
    }
    let mut generator = vev::sample::People::new(42);
    let txs = (0..people.div_ceil(per_tx))
        .map(|k| {
            let text = generator.tx(k * per_tx, ((k + 1) * per_tx).min(people));
            Ok(vev::parse_tx(&text)?
                .into_iter()
                .map(|s| s.op)
                .collect::<Vec<_>>())
        })
        .collect::<Result<Vec<_>, vev::Error>>()?;
    let start = Instant::now();
    let conn = vev::Connection::open(&path)?;
    conn.transact_edn(vev::sample::PEOPLE_SCHEMA)?;
    let mut datoms = 0usize;
    for ops in &txs {
        datoms += conn.transact(ops)?.tx_data.len();
    }
    let loaded = start.elapsed();
    drop(conn);
    let closed = start.elapsed();
    println!(
        "{people} people, {} transactions, {datoms} datoms: {:.2} s to the last commit, {:.2} s with close; {:.2} s per million datoms",
        txs.len(),
        loaded.as_secs_f64(),
        closed.as_secs_f64(),
        closed.as_secs_f64() * 1e6 / datoms as f64
    );
    Ok(())
}
