//! Times every workload query on an existing database file: the first run after open, then
//! the median of five more. `cargo run --release -p vev-mbrainz --example time_queries -- DB
//! [NAME ...]` (`REPS=N`: N warm runs instead of 5), or `-- DB @QUERY-FILE INPUT ...` for
//! one ad-hoc query (`RULES` as an input is the rule set). A quick look while working; the benchmark with peers is `vev-bench mbrainz`.

use std::time::Instant;

#[global_allocator]
static ALLOCATOR: vev::alloc::MiMalloc = vev::alloc::MiMalloc;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    vev::alloc::keep_freed_memory();
    let mut args = std::env::args().skip(1);
    let path = args.next().ok_or("usage: time_queries DB [NAME ...]")?;
    let only: Vec<String> = args.collect();
    let conn = vev::Connection::open_with(&path, &vev::OpenOptions::read_only())?;
    let db = conn.db();
    if let Some(text) = only.first().and_then(|a| a.strip_prefix('@')) {
        // `@FILE INPUT...`: one ad-hoc query with EDN inputs (the rule set as `%` is `RULES`).
        let text = std::fs::read_to_string(text)?;
        let args = only[1..]
            .iter()
            .map(|a| match a.as_str() {
                "RULES" => vev::edn::parse(vev_mbrainz::RULES),
                a => vev::edn::parse(a),
            })
            .collect::<Result<Vec<_>, _>>()?;
        let q = vev::Query::parse(&text)?;
        for i in 0..6 {
            let t = Instant::now();
            let r = db.q_prepared(&q, &args, &vev::QueryOptions::default())?;
            println!(
                "run {i}: {} rows, {:.2} ms",
                r.len(),
                t.elapsed().as_secs_f64() * 1e3
            );
        }
        if std::env::var_os("EXPLAIN").is_some() {
            let mut inputs = vec![vev::Input::Db(&db)];
            inputs.extend(args.iter().map(vev::Input::Edn));
            let (_, plan) = q.explain(&inputs, &vev::QueryOptions::default())?;
            for step in plan {
                println!(
                    "  {:60} {:28} {:8} rows {:8.2} ms",
                    step.clause,
                    step.method,
                    step.actual_rows,
                    step.elapsed.as_secs_f64() * 1e3
                );
            }
        }
        return Ok(());
    }
    for q in vev_mbrainz::all_queries() {
        if !only.is_empty() && !only.iter().any(|n| n == q.name) {
            continue;
        }
        let started = Instant::now();
        let (rows, digest) = vev_mbrainz::digest(&vev_mbrainz::run(&db, q)?);
        let first = started.elapsed();
        let reps: usize = std::env::var("REPS")
            .ok()
            .and_then(|r| r.parse().ok())
            .unwrap_or(5)
            .max(1);
        let mut warm: Vec<f64> = (0..reps)
            .map(|_| {
                let t = Instant::now();
                let r = vev_mbrainz::run(&db, q);
                let ms = t.elapsed().as_secs_f64() * 1e3;
                drop(r);
                ms
            })
            .collect();
        warm.sort_by(f64::total_cmp);
        println!(
            "{:14} rows {rows:7} digest {digest}  first {:9.2} ms  warm median {:9.2} ms",
            q.name,
            first.as_secs_f64() * 1e3,
            warm[reps / 2]
        );
    }
    Ok(())
}
