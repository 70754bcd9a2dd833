//! The child side of `vev-bench scale` (the hidden `scale-probe` subcommand): open a database
//! file in a fresh process, touch every index (current and history, all four orders), read
//! the process's peak resident memory, then time issue 24's queries and optionally export
//! two attributes as `e,v` CSV files for DuckDB. Prints one JSON object.

use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::json;
use vev::{Component, Connection, Edn, IndexOrder, Input, Keyword, OpenOptions, Query, Value};
use vev::{Db, QueryOptions};

use crate::error::BenchError;
use crate::latency::status_field;
use crate::stats::{median, ms};

/// Issue 24's aggregate: people and average age per city.
pub const AGGREGATE: &str =
    "[:find ?city (count ?p) (avg ?age) :where [?p :person/city ?city] [?p :person/age ?age]]";
/// A selective join: 30-year-olds in Riga and their friends who live in Riga too.
pub const JOIN: &str = r#"[:find (count ?b) . :where [?a :person/age 30] [?a :person/city "Riga"]
    [?a :person/friend ?b] [?b :person/city "Riga"]]"#;
/// The pull of one person, with their friends' names.
pub const PULL: &str = "[:person/name :person/age :person/city {:person/friend [:person/name]}]";
const RIGHT: &str = r#"[[(reach ?a ?b) [?a :person/friend ?b]]
                        [(reach ?a ?b) [?a :person/friend ?x] (reach ?x ?b)]]"#;
const LEFT: &str = r#"[[(reach ?a ?b) [?a :person/friend ?b]]
                       [(reach ?a ?b) (reach ?a ?x) [?x :person/friend ?b]]]"#;
/// Everyone person `?email` reaches through friends, transitively.
pub const REACH: &str = r#"[:find (count ?b) . :in $ % ?email
                           :where [?a :person/email ?email] (reach ?a ?b)]"#;

/// What the probe is asked to do.
pub struct ProbeArgs<'a> {
    pub path: &'a Path,
    pub people: usize,
    pub runs: usize,
    /// Write `city.csv` and `age.csv` here (after everything is measured).
    pub export: Option<&'a Path>,
}

fn vev_err(e: impl Into<vev::Error>) -> BenchError {
    BenchError::from(e.into())
}

/// Best and median of `runs` calls of `f`, in ms, and the last call's answer.
fn timed<T>(
    runs: usize,
    mut f: impl FnMut() -> Result<T, BenchError>,
) -> Result<(f64, f64, T), BenchError> {
    let mut times = Vec::with_capacity(runs);
    let mut last = None;
    for _ in 0..runs.max(1) {
        let start = Instant::now();
        last = Some(f()?);
        times.push(ms(start.elapsed()));
    }
    let best = times.iter().copied().fold(f64::INFINITY, f64::min);
    let answer = last.ok_or(BenchError::MissingField { field: "a run" })?;
    Ok((best, median(&times), answer))
}

/// Datoms in each of the four orders, current and then history; the time it took.
fn touch_every_index(db: &Db) -> Result<(Vec<u64>, Duration), BenchError> {
    let start = Instant::now();
    let mut counts = Vec::with_capacity(8);
    for view in [db.clone(), db.history()] {
        for order in [
            IndexOrder::Eavt,
            IndexOrder::Aevt,
            IndexOrder::Avet,
            IndexOrder::Vaet,
        ] {
            let mut n = 0u64;
            for d in view.datoms(order, &[]) {
                d.map_err(vev_err)?;
                n += 1;
            }
            counts.push(n);
        }
    }
    Ok((counts, start.elapsed()))
}

fn scalar(result: &vev::QueryResult) -> i64 {
    match result.to_edn() {
        Edn::Integer(n) => n,
        _ => 0,
    }
}

/// Run the probe; the JSON line it prints.
pub fn probe(args: &ProbeArgs) -> Result<String, BenchError> {
    let start = Instant::now();
    let opts = OpenOptions {
        read_only: true,
        // Keep every loaded segment: the measure is the whole database resident.
        cache_datoms_max: usize::MAX / 2,
        ..OpenOptions::default()
    };
    let conn = Connection::open_with(args.path, &opts).map_err(vev_err)?;
    let db = conn.db();
    let open_ms = ms(start.elapsed());
    let (counts, touch) = touch_every_index(&db)?;
    let hwm = status_field("VmHWM")? * 1024;
    let rss = status_field("VmRSS")? * 1024;

    let qopts = QueryOptions::default();
    let aggregate = Query::parse(AGGREGATE).map_err(vev_err)?;
    let (agg_best, agg_median, groups) = timed(args.runs, || {
        let r = aggregate.run(&[Input::Db(&db)], &qopts).map_err(vev_err)?;
        Ok(r.to_edn().to_string())
    })?;
    let join = Query::parse(JOIN).map_err(vev_err)?;
    let (join_best, join_median, join_rows) = timed(args.runs, || {
        let r = join.run(&[Input::Db(&db)], &qopts).map_err(vev_err)?;
        Ok(scalar(&r))
    })?;
    let pull_us = pulls(&db, args.people)?;
    let last = vev::sample::email(args.people.saturating_sub(1));
    let mut reach = serde_json::Map::new();
    for (name, rules) in [("right", RIGHT), ("left", LEFT)] {
        let inputs = [
            vev::edn::parse(rules).map_err(vev_err)?,
            Edn::String(last.clone()),
        ];
        let (best, med, found) = timed(args.runs.min(5), || {
            Ok(scalar(&db.q(REACH, &inputs).map_err(vev_err)?))
        })?;
        reach.insert(
            name.into(),
            json!({"best_ms": best, "median_ms": med, "found": found}),
        );
    }
    let hwm_after = status_field("VmHWM")? * 1024;
    if let Some(dir) = args.export {
        for (attr, file) in [("person/city", "city"), ("person/age", "age")] {
            export_csv(&db, attr, &dir.join(format!("{file}.csv")))?;
        }
    }
    Ok(json!({
        "open_ms": open_ms,
        "touch_ms": ms(touch),
        "index_datoms": counts,
        "vm_hwm": hwm,
        "vm_rss": rss,
        "vm_hwm_after_queries": hwm_after,
        "aggregate": {"best_ms": agg_best, "median_ms": agg_median, "groups": groups},
        "join": {"best_ms": join_best, "median_ms": join_median, "rows": join_rows},
        "pull_p50_us": pull_us,
        "reach": reach,
    })
    .to_string())
}

/// The median time of pulling 1,000 people spread over the database, µs.
fn pulls(db: &Db, people: usize) -> Result<f64, BenchError> {
    let email = db
        .entid(&Keyword::new("person/email"))
        .ok_or(BenchError::MissingAttribute {
            ident: "person/email",
        })?;
    let step = (people / 1_000).max(1);
    let mut ids = Vec::new();
    for i in (0..people).step_by(step).take(1_000) {
        let v = Value::String(vev::sample::email(i).into());
        let e = db
            .datoms(
                IndexOrder::Avet,
                &[Component::Entity(email), Component::Value(v)],
            )
            .next()
            .ok_or(BenchError::MissingAccount { id: i as u64 })?
            .map_err(vev_err)?
            .e;
        ids.push(e);
    }
    // One untimed round first, so the segments on the way are loaded.
    for &e in &ids {
        db.pull(PULL, e).map_err(vev_err)?;
    }
    let mut times = Vec::with_capacity(ids.len());
    for &e in &ids {
        let start = Instant::now();
        db.pull(PULL, e).map_err(vev_err)?;
        times.push(start.elapsed().as_secs_f64() * 1e6);
    }
    Ok(median(&times))
}

/// One attribute's current datoms as `e,v` CSV.
fn export_csv(db: &Db, ident: &'static str, path: &Path) -> Result<(), BenchError> {
    let a = db
        .entid(&Keyword::new(ident))
        .ok_or(BenchError::MissingAttribute { ident })?;
    let file = std::fs::File::create(path).map_err(BenchError::io("create", path))?;
    let mut out = std::io::BufWriter::new(file);
    let io = |e| BenchError::io("write", path)(e);
    writeln!(out, "e,v").map_err(io)?;
    for d in db.datoms(IndexOrder::Aevt, &[Component::Entity(a)]) {
        let d = d.map_err(vev_err)?;
        match &d.v {
            Value::String(s) => writeln!(out, "{},\"{}\"", d.e, s.replace('"', "\"\"")),
            Value::Long(x) => writeln!(out, "{},{x}", d.e),
            other => writeln!(out, "{},\"{}\"", d.e, other.to_edn()),
        }
        .map_err(io)?;
    }
    out.flush().map_err(io)
}
