//! Time one query on a database file, opened read only: the first run in this process (cold:
//! segments load from the file) and the best of N warm runs, with the optimized and the naive
//! plan; optionally export two attributes as `e,v` CSV files for a peer (DuckDB) to load.
//!
//! ```text
//! cargo run --release -p vev --example time_query -- PATH [--runs N] [--query EDN]
//!     [--naive] [--arg STRING]... [--export DIR ATTR...]
//! ```
//!
//! The default query is issue 24's aggregate over the demo's people:
//! `[:find ?city (count ?p) (avg ?age) :where [?p :person/city ?city] [?p :person/age ?age]]`.

use std::io::Write;
use std::time::{Duration, Instant};

use vev::{Component, Connection, IndexOrder, Input, Keyword, Limits, OpenOptions, Query};
use vev::{QueryOptions, Value};

// As the `vev` and `vev-bench` binaries run (`--features mimalloc`).
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: vev::alloc::MiMalloc = vev::alloc::MiMalloc;

const DEFAULT_QUERY: &str =
    "[:find ?city (count ?p) (avg ?age) :where [?p :person/city ?city] [?p :person/age ?age]]";

fn main() -> Result<(), Box<dyn std::error::Error>> {
    #[cfg(feature = "mimalloc")]
    vev::alloc::keep_freed_memory();
    let mut args = std::env::args().skip(1);
    let path = args
        .next()
        .ok_or("usage: time_query PATH [--runs N] [--query EDN] ...")?;
    let (mut runs, mut query, mut naive) = (10usize, DEFAULT_QUERY.to_owned(), false);
    let mut export: Option<(String, Vec<String>)> = None;
    // String inputs for the query's `:in` after `$`, in order.
    let mut strings: Vec<vev::Edn> = Vec::new();
    while let Some(a) = args.next() {
        match a.as_str() {
            "--runs" => runs = args.next().ok_or("--runs N")?.parse()?,
            "--query" => query = args.next().ok_or("--query EDN")?,
            "--naive" => naive = true,
            "--arg" => strings.push(vev::Edn::String(args.next().ok_or("--arg STRING")?)),
            "--export" => {
                let dir = args.next().ok_or("--export DIR ATTR...")?;
                export = Some((dir, args.by_ref().collect()));
            }
            other => return Err(format!("unknown argument {other}").into()),
        }
    }
    let opened = Instant::now();
    let conn = Connection::open_with(
        &path,
        &OpenOptions {
            read_only: true,
            cache_datoms_max: 64_000_000,
            ..OpenOptions::default()
        },
    )?;
    let db = conn.db();
    println!("opened {path} in {:?}", opened.elapsed());
    if let Some((dir, attrs)) = export {
        return export_csv(&db, &dir, &attrs);
    }
    let q = Query::parse(&query)?;
    let opts = QueryOptions {
        limits: Limits {
            naive,
            ..Limits::default()
        },
        ..QueryOptions::default()
    };
    let inputs: Vec<Input> = std::iter::once(Input::Db(&db))
        .chain(strings.iter().map(Input::Edn))
        .collect();
    let mut times: Vec<Duration> = Vec::new();
    let mut last = None;
    for _ in 0..runs.max(1) {
        let t = Instant::now();
        let result = q.run(&inputs, &opts)?;
        times.push(t.elapsed());
        last = Some(result);
    }
    let result = last.ok_or("no run")?;
    let rows = result.len();
    let (_, plan) = q.explain(&inputs, &opts)?;
    let best = times[1.min(times.len() - 1)..].iter().min().copied();
    let entities = db
        .datoms(
            IndexOrder::Aevt,
            &[Component::Entity(first_attr(&db, &query))],
        )
        .count();
    println!("query: {query} (naive plan: {naive})");
    println!("rows: {rows}; first run {:?}", times[0]);
    if let Some(best) = best {
        let mut warm: Vec<Duration> = times[1.min(times.len() - 1)..].to_vec();
        warm.sort();
        println!(
            "warm best of {}: {best:?}, median {:?} ({:.1} ns per datom of the first pattern's {entities})",
            warm.len(),
            warm[warm.len() / 2],
            best.as_nanos() as f64 / entities.max(1) as f64
        );
    }
    if rows <= 20 {
        println!("{}", result.to_edn());
    }
    for step in plan {
        println!("  {} -- {}", step.clause, step.method);
    }
    Ok(())
}

/// The attribute of the query's first data pattern (its datoms are what "per entity" counts).
fn first_attr(db: &vev::Db, query: &str) -> u64 {
    query
        .split_whitespace()
        .find_map(|w| {
            let w = w.trim_end_matches(']');
            w.strip_prefix(':')
                .and_then(|k| db.entid(&Keyword::new(k)))
                .filter(|id| db.schema().attribute(*id).is_some())
        })
        .unwrap_or(0)
}

/// Write each attribute's current datoms as `DIR/NAME.csv` with header `e,v`.
fn export_csv(db: &vev::Db, dir: &str, attrs: &[String]) -> Result<(), Box<dyn std::error::Error>> {
    std::fs::create_dir_all(dir)?;
    for attr in attrs {
        let ident = attr.trim_start_matches(':');
        let a = db.entid(&Keyword::new(ident)).ok_or("unknown attribute")?;
        let name = ident.rsplit('/').next().unwrap_or(ident);
        let file = std::fs::File::create(format!("{dir}/{name}.csv"))?;
        let mut out = std::io::BufWriter::new(file);
        writeln!(out, "e,v")?;
        let mut n = 0;
        for d in db.datoms(IndexOrder::Aevt, &[Component::Entity(a)]) {
            let d = d?;
            match &d.v {
                Value::String(s) => writeln!(out, "{},\"{}\"", d.e, s.replace('"', "\"\""))?,
                Value::Long(x) => writeln!(out, "{},{x}", d.e)?,
                Value::Double(x) => writeln!(out, "{},{x:?}", d.e)?,
                other => writeln!(out, "{},\"{}\"", d.e, other.to_edn())?,
            }
            n += 1;
        }
        println!("{dir}/{name}.csv: {n} rows");
    }
    Ok(())
}
