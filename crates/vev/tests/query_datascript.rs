//! DataScript as an outside reference: the same data and queries through both engines.
//!
//! Deterministic: 20 databases (`VEV_DATASCRIPT_DBS` sets more) and 10 queries on each, from
//! fixed seeds, made by the generator of `query_oracle.rs` in its `Dialect::DataScript`,
//! which leaves out what DataScript 1.8.1 does differently from Datomic (see `Dialect`; where
//! Vev is right, `query_oracle.rs` pins Vev's answer in a named test). Each database is the
//! current view of a Vev database, given to DataScript with entity `i` as id `i + 1`; queries
//! are written with each engine's ids, and with filters after the clauses that bind their
//! inputs (DataScript, like Datomic, runs clauses in written order). Vev's results are put in
//! the JS API's terms (keywords as bare names, entity ids as DataScript's) and compared as
//! sets; an error on both sides counts as agreement.
//!
//! DataScript runs in node (`crates/vev/tests/js/datascript_query.js`), with the `datascript`
//! package of `crates/vev-bench/js` (installed with `npm ci` when missing). When `node` is not
//! on the PATH or `npm ci` fails, the test fails under `CI=true` (CI must run DataScript);
//! elsewhere it says on stderr that it is skipped, and passes (`datascript_node`).

mod datascript_node;
mod query_gen;

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use datascript_node::{datascript_or_skip, in_ci, json_str, run_node};

use query_gen::{build, Attr, DbSpec, Dialect, QuerySpec, Shape, Tape, Ty, DATASCRIPT_SCHEMA};
use vev::{Db, Edn, IndexOrder, Input, Query, QueryOptions, QueryResult, Value};

const QUERIES_PER_DB: u64 = 10;

/// How long DataScript may take for all queries (a few seconds in practice).
const DATASCRIPT_TIMEOUT: Duration = Duration::from_secs(300);

/// The number of databases: `VEV_DATASCRIPT_DBS`, default 20 (200 queries).
fn dbs() -> u64 {
    std::env::var("VEV_DATASCRIPT_DBS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20)
}

/// One query, with what Vev said, in the JS API's terms.
struct Case {
    db: usize,
    shape: Shape,
    vev_text: String,
    ds_text: String,
    ds_inputs: Vec<String>,
    vev: Result<Edn, String>,
}

/// The generated databases (as DataScript datoms, and as transactions for a report) and the
/// queries on them, run in Vev.
#[derive(Default)]
struct Fixture {
    dbs_json: Vec<String>,
    dbs_described: Vec<String>,
    cases: Vec<Case>,
}

#[test]
fn ci_is_recognised_as_ci_services_set_it() {
    assert!(in_ci(Some("true")));
    assert!(in_ci(Some("1")));
    assert!(!in_ci(None));
    assert!(!in_ci(Some("")));
    assert!(!in_ci(Some("false")));
    assert!(!in_ci(Some("0")));
}

/// The user datoms of the current view as JSON `[e, attr, value]`, entities renumbered.
fn datoms_json(db: &Db, ds_id: &HashMap<u64, u64>) -> String {
    let mut rows = Vec::new();
    for d in db.datoms(IndexOrder::Eavt, &[]) {
        let d = d.expect("an in-memory database");
        let Some(attr) = db.ident(d.a).and_then(|k| Attr::by_ident(k.name())) else {
            continue;
        };
        let v = match &d.v {
            Value::Ref(e) => ds_id[e].to_string(),
            Value::Long(n) => n.to_string(),
            Value::String(s) => json_str(s),
            Value::Keyword(k) => json_str(k.name()),
            other => panic!("unexpected value {other:?} of :{}", attr.ident()),
        };
        rows.push(format!("[{},{},{v}]", ds_id[&d.e], json_str(attr.ident())));
    }
    format!("[{}]", rows.join(","))
}

/// A result in DataScript's JS terms: keywords as names, entity columns as DataScript ids,
/// relations and collections sorted.
fn js_terms(result: QueryResult, columns: &[Ty], ds_id: &HashMap<u64, u64>) -> Edn {
    let cell = |ty: Ty, v: Edn| match (ty, v) {
        (_, Edn::Keyword(k)) => Edn::String(k.name().to_owned()),
        (Ty::Ent, Edn::Integer(e)) => {
            Edn::Integer(ds_id.get(&(e as u64)).map_or(-1, |i| *i as i64))
        }
        (_, v) => v,
    };
    let row = |r: Vec<Edn>| -> Vec<Edn> {
        r.into_iter()
            .zip(columns)
            .map(|(v, ty)| cell(*ty, v))
            .collect()
    };
    match result {
        QueryResult::Rel(rows) | QueryResult::Bag(rows) => sorted(
            rows.into_vecs()
                .into_iter()
                .map(|r| Edn::Vector(row(r)))
                .collect(),
        ),
        QueryResult::Coll(items) => {
            sorted(items.into_iter().map(|v| cell(columns[0], v)).collect())
        }
        QueryResult::Scalar(v) => v.map_or(Edn::Nil, |v| cell(columns[0], v)),
        QueryResult::Tuple(t) => t.map_or(Edn::Nil, |t| Edn::Vector(row(t))),
        QueryResult::Maps(_) => panic!("the generator makes no :keys queries"),
    }
}

fn sorted(mut items: Vec<Edn>) -> Edn {
    items.sort();
    Edn::Vector(items)
}

/// DataScript's printed result in the same form: relations and collections sorted.
fn ds_terms(printed: &str, shape: Shape) -> Result<Edn, String> {
    let edn = vev::edn::parse(printed)
        .map_err(|e| format!("unreadable DataScript result {printed}: {e}"))?;
    Ok(match (shape, edn) {
        (Shape::Rel | Shape::Coll, Edn::Vector(items)) => sorted(items),
        (_, edn) => edn,
    })
}

fn run_vev(db: &Db, text: &str, inputs: &[String]) -> Result<QueryResult, String> {
    let query = Query::parse(text).map_err(|e| format!("{}: {e}", e.code()))?;
    let args: Vec<Edn> = inputs
        .iter()
        .map(|i| vev::edn::parse(i).expect("generated input parses"))
        .collect();
    let mut all = vec![Input::Db(db)];
    all.extend(args.iter().map(Input::Edn));
    query
        .run(&all, &QueryOptions::default())
        .map_err(|e| format!("{}: {e}", e.code()))
}

#[test]
fn vev_agrees_with_datascript() {
    let Some(modules) = datascript_or_skip("query_datascript") else {
        return;
    };
    let mut fixture = Fixture::default();
    for seed in 0..dbs() {
        add_db(&mut fixture, seed);
    }
    let output = run_datascript(&modules, &fixture.dbs_json, &fixture.cases);
    let lines: Vec<&str> = output.lines().collect();
    let cases = &fixture.cases;
    assert_eq!(
        lines.len(),
        cases.len(),
        "DataScript printed a result per query"
    );
    let disagreements: Vec<String> = cases
        .iter()
        .zip(&lines)
        .filter_map(|(case, line)| disagreement(case, line, &fixture.dbs_described[case.db]))
        .collect();
    assert!(
        disagreements.is_empty(),
        "{} of {} queries disagree:\n\n{}",
        disagreements.len(),
        cases.len(),
        disagreements.join("\n\n")
    );
}

/// Database `seed` and its queries, run in Vev.
fn add_db(fixture: &mut Fixture, seed: u64) {
    let spec = DbSpec::generate(&mut Tape::new(&query_gen::seeded_tape(seed, 600)));
    let built = build(&spec);
    let db = built.conn.db();
    let ds_ids: Vec<u64> = (1..=built.ids.len() as u64).collect();
    let ds_id: HashMap<u64, u64> = built
        .ids
        .iter()
        .copied()
        .zip(ds_ids.iter().copied())
        .collect();
    fixture.dbs_json.push(datoms_json(&db, &ds_id));
    fixture.dbs_described.push(built.describe());
    for j in 0..QUERIES_PER_DB {
        let tape = query_gen::seeded_tape(1_000_000 + seed * 1000 + j, 120);
        let q = QuerySpec::generate(&mut Tape::new(&tape), built.ids.len(), Dialect::DataScript);
        let vev_text = q.text_in_binding_order(&built.ids);
        let vev = run_vev(&db, &vev_text, &q.input_edns(&built.ids))
            .map(|r| js_terms(r, &q.column_types(), &ds_id));
        fixture.cases.push(Case {
            db: fixture.dbs_json.len() - 1,
            shape: q.shape,
            vev_text,
            ds_text: q.text_in_binding_order(&ds_ids),
            ds_inputs: q.input_edns(&ds_ids),
            vev,
        });
    }
}

/// A report of the case when DataScript's output line disagrees with Vev's result.
fn disagreement(case: &Case, line: &str, data: &str) -> Option<String> {
    let ds = match line.split_once(' ') {
        Some(("ok", printed)) => ds_terms(printed, case.shape),
        Some((_, message)) => Err(message.to_owned()),
        None => Err(line.to_owned()),
    };
    let agree = match (&case.vev, &ds) {
        (Ok(v), Ok(d)) => v == d,
        (Err(_), Err(_)) => true,
        _ => false,
    };
    (!agree).then(|| {
        format!(
            "db {} (DataScript ids are entity index + 1)\nVev query: {}\nDataScript query: {}\n\
             inputs: {:?}\nVev:        {:?}\nDataScript: {:?}\ndata:\n{data}",
            case.db, case.vev_text, case.ds_text, case.ds_inputs, case.vev, ds
        )
    })
}

/// Write the fixture, run the JS script, return its output.
fn run_datascript(modules: &Path, dbs_json: &[String], cases: &[Case]) -> String {
    let queries: Vec<String> = cases
        .iter()
        .map(|c| {
            let inputs: Vec<String> = c.ds_inputs.iter().map(|i| json_str(i)).collect();
            format!(
                "{{\"db\":{},\"query\":{},\"inputs\":[{}]}}",
                c.db,
                json_str(&c.ds_text),
                inputs.join(",")
            )
        })
        .collect();
    let fixture = format!(
        "{{\"schema\":{},\"keyword_attrs\":[\"kind\"],\"dbs\":[{}],\"queries\":[{}]}}",
        json_str(DATASCRIPT_SCHEMA),
        dbs_json.join(","),
        queries.join(",\n")
    );
    let name = format!("query_datascript_fixture_{}.json", std::process::id());
    let path = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    std::fs::write(&path, fixture).expect("write the fixture");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/js/datascript_query.js");
    run_node(modules, &script, &path, DATASCRIPT_TIMEOUT)
}
