//! Times loading a data set into a new file, phase by phase: generating the transactions
//! (in memory), opening the file and the schema, `bulk_load` (with the time each million
//! datoms was committed), and closing. `cargo run --release -p vev-mbrainz --example
//! time_load -- DIR [tiny|small|medium|large]`; DIR must not hold `mbrainz.vev` yet. A quick
//! look while working; the benchmark with peers is `vev-bench mbrainz`.

use std::time::Instant;

#[global_allocator]
static ALLOCATOR: vev::alloc::MiMalloc = vev::alloc::MiMalloc;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    vev::alloc::keep_freed_memory();
    let mut args = std::env::args().skip(1);
    let dir = args.next().ok_or("usage: time_load DIR [SCALE]")?;
    let scale_name = args.next().unwrap_or_else(|| "small".into());
    let scale = vev_mbrainz::Scale::parse(&scale_name)
        .ok_or_else(|| format!("unknown scale {scale_name:?}"))?;
    let path = std::path::Path::new(&dir).join("mbrainz.vev");
    if path.exists() {
        return Err(format!("{} exists", path.display()).into());
    }
    let t = Instant::now();
    let (txs, counts) = vev_mbrainz::generate(scale);
    println!(
        "generate: {:.2} s, {} transactions, {counts:?}",
        t.elapsed().as_secs_f64(),
        txs.len()
    );
    let start = Instant::now();
    let conn = vev::Connection::open(&path)?;
    let mut next = 1_000_000;
    let done = vev_mbrainz::load_transactions(&conn, txs, &mut |p| {
        if p.datoms >= next {
            println!(
                "  {:>10} datoms at {:.2} s",
                p.datoms,
                p.elapsed.as_secs_f64()
            );
            next += 1_000_000;
        }
    })?;
    println!(
        "bulk_load: {} datoms in {:.2} s (open and schema included)",
        done.datoms,
        start.elapsed().as_secs_f64()
    );
    let t = Instant::now();
    drop(conn);
    println!(
        "close: {:.2} s; load in all {:.2} s",
        t.elapsed().as_secs_f64(),
        start.elapsed().as_secs_f64()
    );
    Ok(())
}
