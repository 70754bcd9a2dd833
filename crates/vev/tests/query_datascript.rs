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
//! elsewhere it says on stderr that it is skipped, and passes.

mod query_gen;

use std::collections::HashMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

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

fn js_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../vev-bench/js")
}

fn node_on_path() -> bool {
    Command::new("node")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// `npm ci` in `crates/vev-bench/js` unless DataScript is there already; why not, if it
/// cannot be installed.
fn ensure_datascript() -> Result<PathBuf, String> {
    let modules = js_dir().join("node_modules");
    if !modules.join("datascript/package.json").exists() {
        let status = Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund"])
            .current_dir(js_dir())
            .status()
            .map_err(|e| format!("`npm` cannot run: {e}"))?;
        if !status.success() {
            return Err(format!("`npm ci` in {} failed", js_dir().display()));
        }
    }
    Ok(modules)
}

/// Whether the environment says this is CI (`CI` set to anything but empty, `0` or `false`,
/// as CI services set it), where DataScript must run.
fn in_ci(ci: Option<&str>) -> bool {
    ci.is_some_and(|v| !matches!(v.trim(), "" | "0" | "false" | "FALSE" | "False"))
}

/// DataScript's `node_modules`, or `None` (with a note on stderr) when it cannot run here
/// and this is not CI. Under CI that is a failure.
fn datascript_or_skip() -> Option<PathBuf> {
    let found = if node_on_path() {
        ensure_datascript()
    } else {
        Err("`node` is not on the PATH".to_string())
    };
    match found {
        Ok(modules) => Some(modules),
        Err(why) if in_ci(std::env::var("CI").ok().as_deref()) => {
            panic!("{why}, so DataScript cannot run, and CI must run it (CI is set)")
        }
        Err(why) => {
            // Straight to stderr, not `eprintln!`, so the test harness does not swallow it.
            let _ = writeln!(
                std::io::stderr(),
                "query_datascript: SKIPPED: {why}, so DataScript cannot run"
            );
            None
        }
    }
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

fn json_str(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
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
    let Some(modules) = datascript_or_skip() else {
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
    let mut child = Command::new("node")
        .arg(&script)
        .arg(&path)
        .env("NODE_PATH", modules)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run node");
    // Read stdout on a thread so that a full pipe cannot stall node, and give up on a query
    // that makes DataScript run away instead of hanging the suite.
    let mut stdout = child.stdout.take().expect("piped stdout");
    let reader = std::thread::spawn(move || {
        let mut out = String::new();
        stdout.read_to_string(&mut out).map(|_| out)
    });
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for node") {
            break status;
        }
        if started.elapsed() > DATASCRIPT_TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            let done = reader
                .join()
                .ok()
                .and_then(Result::ok)
                .map_or(0, |o| o.lines().count());
            panic!(
                "DataScript ran past {DATASCRIPT_TIMEOUT:?}; it was at query {done} of {} in {}",
                cases.len(),
                path.display()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut stderr = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut stderr);
    }
    assert!(
        status.success(),
        "node {} failed: {stderr}",
        script.display()
    );
    // Kept when something failed, for a look at what DataScript was given.
    let _ = std::fs::remove_file(&path);
    reader
        .join()
        .expect("the reader thread")
        .expect("DataScript prints UTF-8")
}
