//! Vev's side of the query benchmark: the integration point for Vev's query API.
//!
//! The peers time each query the same way (`js/query.js`, `clj/query.clj`): untimed calls, at
//! least `warmup` of them and for at least `warmup_ms`, then up to `reps` timed ones, stopping
//! early once the timed calls have used `budget_ms` (but never before 3). [`measure`] does
//! exactly that for Vev.

use std::collections::BTreeMap;
use std::time::Instant;

use crate::error::BenchError;
use crate::peers::QueryTiming;
use crate::queries::{QueryForm, QuerySpec, VEV_SCHEMA_EDN};
use crate::query_fixture::{DbShape, FixtureDb, FixtureValue, QueryFixture, RunnerConfig};
use crate::stats::ms;

/// Vev's timings, one per query, in the order of `queries`.
///
/// Each database is loaded once (schema, then all datoms in one transaction, with the
/// fixture's entity numbers as tempids). Each query is parsed and compiled once outside the
/// clock, as DataScript's and Datalevin's query caches do; the timed call runs it on the
/// database with its inputs and returns the result rows (as `Edn` cells, Vev's Rust API).
///
/// Then, on the databases already loaded, `pair`'s two queries in `pairs` alternating pairs
/// (see `PairTiming`).
pub fn run_vev(
    fixture: &QueryFixture,
    queries: &[QuerySpec],
    cfg: &RunnerConfig,
    pair: [&str; 2],
    pairs: usize,
) -> Result<(Vec<QueryTiming>, Option<PairTiming>), BenchError> {
    let mut loaded: Vec<(DbShape, vev::Db, BTreeMap<u64, u64>)> = Vec::new();
    let mut out = Vec::with_capacity(queries.len());
    for spec in queries {
        if !loaded.iter().any(|(s, _, _)| *s == spec.db) {
            let (db, ids) = load(fixture.db(spec.db))?;
            loaded.push((spec.db, db, ids));
        }
        let (_, db, ids) = loaded
            .iter()
            .find(|(s, _, _)| *s == spec.db)
            .expect("loaded above");
        eprintln!("vev: {}", spec.name);
        let timing = match &spec.form {
            QueryForm::Query { text, inputs } => {
                let query = vev::Query::parse(text).map_err(vev::Error::from)?;
                let args: Vec<vev::Edn> = inputs
                    .iter()
                    .map(|i| vev::edn::parse(i).map_err(vev::Error::from))
                    .collect::<Result<_, _>>()?;
                let opts = vev::QueryOptions::default();
                measure(
                    cfg,
                    spec.name,
                    || {
                        Ok(db
                            .q_prepared(&query, &args, &opts)
                            .map_err(vev::Error::from)?)
                    },
                    vev::QueryResult::len,
                )?
            }
            QueryForm::Pull { pattern, root } => {
                let pattern = vev::parse_pull(pattern)
                    .map_err(|e| vev::Error::from(vev::QueryError::from(e)))?;
                let root = *ids
                    .get(root)
                    .ok_or(BenchError::MissingRoot { root: *root })?;
                measure(
                    cfg,
                    spec.name,
                    || {
                        vev::pull_many(db, &pattern, &[root]).map_err(|e| {
                            BenchError::from(vev::Error::from(vev::QueryError::from(e)))
                        })
                    },
                    |maps| maps.iter().map(pulled_entities).sum(),
                )?
            }
        };
        out.push(timing);
    }
    let pair = run_vev_pair(&loaded, queries, pair, pairs, cfg)?;
    Ok((out, pair))
}

/// Two of Vev's queries timed in alternation, for the query target "q2 and q2-switch must cost
/// the same within 1.2x": timed in blocks one after the other (the table), their ratio also
/// measures how the machine's load changed between the blocks. Here each pair of runs
/// alternates which query goes first.
pub struct PairTiming {
    pub first: QueryTiming,
    pub second: QueryTiming,
}

/// `names`' two queries (on the same database, which `run_vev` has loaded) in `pairs`
/// alternating pairs of timed runs, after each has warmed up as in `measure`. `None` when
/// either was not selected.
fn run_vev_pair(
    loaded: &[(DbShape, vev::Db, BTreeMap<u64, u64>)],
    queries: &[QuerySpec],
    names: [&str; 2],
    pairs: usize,
    cfg: &RunnerConfig,
) -> Result<Option<PairTiming>, BenchError> {
    let find = |name: &str| queries.iter().find(|q| q.name == name);
    let (Some(a), Some(b)) = (find(names[0]), find(names[1])) else {
        return Ok(None);
    };
    let (
        QueryForm::Query {
            text: ta,
            inputs: ia,
        },
        QueryForm::Query {
            text: tb,
            inputs: ib,
        },
    ) = (&a.form, &b.form)
    else {
        return Ok(None);
    };
    let Some((_, db, _)) = loaded.iter().find(|(s, _, _)| *s == a.db) else {
        return Ok(None);
    };
    if a.db != b.db || !ia.is_empty() || !ib.is_empty() {
        return Ok(None);
    }
    let parse = |t: &str| vev::Query::parse(t).map_err(vev::Error::from);
    let queries = [parse(ta)?, parse(tb)?];
    let opts = vev::QueryOptions::default();
    let run = |i: usize| -> Result<usize, BenchError> {
        Ok(db
            .q_prepared(&queries[i], &[], &opts)
            .map_err(vev::Error::from)?
            .len())
    };
    for i in 0..2 {
        warm_up(cfg, &mut || run(i))?;
    }
    let mut samples: [Vec<f64>; 2] = [Vec::with_capacity(pairs), Vec::with_capacity(pairs)];
    let mut rows = [0; 2];
    for p in 0..pairs {
        for k in 0..2 {
            let i = (p + k) % 2;
            let start = Instant::now();
            rows[i] = run(i)?;
            samples[i].push(ms(start.elapsed()));
        }
    }
    let [sa, sb] = samples;
    Ok(Some(PairTiming {
        first: QueryTiming {
            query: names[0].to_string(),
            rows: rows[0],
            samples_ms: sa,
        },
        second: QueryTiming {
            query: names[1].to_string(),
            rows: rows[1],
            samples_ms: sb,
        },
    }))
}

/// Load one fixture database: its schema, then every datom in one transaction.
fn load(db: &FixtureDb) -> Result<(vev::Db, BTreeMap<u64, u64>), BenchError> {
    load_into(&vev::Connection::open_in_memory(), db)
}

/// Transact the schema and the fixture `db` (one transaction) into `conn`; the database and
/// the fixture's entity ids mapped to Vev's.
pub fn load_into(
    conn: &vev::Connection,
    db: &FixtureDb,
) -> Result<(vev::Db, BTreeMap<u64, u64>), BenchError> {
    conn.transact_edn(VEV_SCHEMA_EDN)?;
    let mut tx = String::with_capacity(db.datoms.len() * 32);
    tx.push('[');
    for d in &db.datoms {
        let v = match &d.v {
            FixtureValue::Str(s) => format!("{:?}", s),
            FixtureValue::Keyword(k) => format!(":{k}"),
            FixtureValue::Long(n) => n.to_string(),
            FixtureValue::Ref(e) => format!("\"e{e}\""),
        };
        tx.push_str(&format!("[:db/add \"e{}\" :{} {}]", d.e, d.a.ident(), v));
    }
    tx.push(']');
    let report = conn.transact_edn(&tx)?;
    let ids = report
        .tempids
        .iter()
        .filter_map(|(t, id)| match t {
            vev::TempId::Str(s) => s.strip_prefix('e')?.parse().ok().map(|n: u64| (n, *id)),
            _ => None,
        })
        .collect();
    Ok((conn.db(), ids))
}

/// The entities in a pulled tree: the map itself and every map under `:follows`.
fn pulled_entities(tree: &vev::Edn) -> usize {
    let mut n = 0;
    let mut stack = vec![tree];
    while let Some(m) = stack.pop() {
        let vev::Edn::Map(map) = m else { continue };
        n += 1;
        if let Some(vev::Edn::Vector(children)) = map.get(&vev::Edn::keyword("follows")) {
            stack.extend(children.iter());
        }
    }
    n
}

/// Untimed calls of `run`: at least `cfg.warmup` of them, for at least `cfg.warmup_ms`.
fn warm_up<T>(
    cfg: &RunnerConfig,
    run: &mut impl FnMut() -> Result<T, BenchError>,
) -> Result<(), BenchError> {
    let warm_start = Instant::now();
    let mut warm_runs = 0;
    while warm_runs < cfg.warmup || warm_start.elapsed().as_millis() < u128::from(cfg.warmup_ms) {
        run()?;
        warm_runs += 1;
    }
    Ok(())
}

/// Time `run` the way the peers do; `rows` counts the last result (outside the clock).
pub fn measure<T>(
    cfg: &RunnerConfig,
    query: &str,
    mut run: impl FnMut() -> Result<T, BenchError>,
    rows: impl Fn(&T) -> usize,
) -> Result<QueryTiming, BenchError> {
    warm_up(cfg, &mut run)?;
    let mut samples_ms = Vec::with_capacity(cfg.reps);
    let mut spent_ms = 0.0;
    let mut last = None;
    while samples_ms.len() < cfg.reps && (samples_ms.len() < 3 || spent_ms < cfg.budget_ms as f64) {
        let start = Instant::now();
        let result = run()?;
        let elapsed = ms(start.elapsed());
        samples_ms.push(elapsed);
        spent_ms += elapsed;
        last = Some(result);
    }
    Ok(QueryTiming {
        query: query.to_string(),
        rows: last.as_ref().map_or(0, rows),
        samples_ms,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn measure_runs_warmup_then_reps_within_budget() {
        let mut calls = 0;
        let cfg = RunnerConfig {
            warmup: 2,
            warmup_ms: 0,
            reps: 5,
            budget_ms: 60_000,
        };
        let t = measure(
            &cfg,
            "q",
            || {
                calls += 1;
                Ok(vec![calls])
            },
            Vec::len,
        )
        .unwrap();
        assert_eq!((calls, t.samples_ms.len(), t.rows), (7, 5, 1));
        let over = RunnerConfig {
            budget_ms: 0,
            ..cfg
        };
        let t = measure(&over, "q", || Ok(()), |_| 0).unwrap();
        assert_eq!(t.samples_ms.len(), 3, "at least 3 timed runs");
    }
}
