//! The extension inside its real host: built (debug, with the `testing` hooks) by
//! `scripts/duckdb-extension.sh`, loaded into the PyPI `duckdb` wheel pinned in
//! `scripts/duckdb-requirements.txt` (a virtual environment in cargo's test scratch
//! directory), and driven from Python by `tests/duckdb_check.py`.
//!
//! This side builds a database through Vev's Rust API, answers every case through that API,
//! and writes the cases with their answers; the Python side runs each case's SQL in DuckDB
//! and compares, then checks what only DuckDB can show (column types, errors, threads,
//! panics, `vev_transact`). Afterwards this side reopens what `vev_transact` wrote.
//!
//! When python3 or the wheel cannot be had, the test fails under `CI=true` (CI must run it)
//! and elsewhere says on stderr that it is skipped.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{json, Value as Json};
use vev::{Connection, Edn};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !matches!(v.trim(), "" | "0" | "false" | "FALSE" | "False"))
}

/// The target directory this test binary runs from (`target/debug/deps/...`).
fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test's own path");
    exe.ancestors()
        .nth(3)
        .expect("the test binary is under target/<profile>/deps")
        .to_path_buf()
}

/// The extension, built with the test hooks.
fn build_extension() -> PathBuf {
    let out = Command::new(repo().join("scripts/duckdb-extension.sh"))
        .args(["--debug", "--features", "testing"])
        .env("CARGO_TARGET_DIR", target_dir())
        .output()
        .expect("scripts/duckdb-extension.sh runs");
    assert!(
        out.status.success(),
        "scripts/duckdb-extension.sh failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let path = PathBuf::from(
        stdout
            .lines()
            .last()
            .expect("the script prints the path")
            .trim(),
    );
    assert!(path.is_file(), "{} was not built", path.display());
    path
}

/// A Python with the pinned wheel: a virtual environment made on first use.
fn python() -> Result<PathBuf, String> {
    let venv = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("duckdb-venv");
    let python = venv.join("bin/python");
    let requirements = repo().join("scripts/duckdb-requirements.txt");
    let pinned = std::fs::read_to_string(&requirements).map_err(|e| e.to_string())?;
    let version = pinned.trim().trim_start_matches("duckdb==").to_owned();
    let has_it = |py: &Path| {
        Command::new(py)
            .args(["-c", "import duckdb; print(duckdb.__version__)"])
            .output()
            .is_ok_and(|o| {
                o.status.success() && String::from_utf8_lossy(&o.stdout).trim() == version
            })
    };
    if has_it(&python) {
        return Ok(python);
    }
    let made = Command::new("python3")
        .args(["-m", "venv", "--clear"])
        .arg(&venv)
        .status()
        .is_ok_and(|s| s.success());
    if !made {
        return Err("`python3 -m venv` failed".into());
    }
    let installed = Command::new(&python)
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "-r",
        ])
        .arg(&requirements)
        .status()
        .is_ok_and(|s| s.success());
    if !installed || !has_it(&python) {
        return Err(format!(
            "`pip install -r {}` failed",
            requirements.display()
        ));
    }
    Ok(python)
}

const SCHEMA: &str = r#"[
 {:db/ident :person/name :db/valueType :db.type/string :db/cardinality :db.cardinality/one :db/unique :db.unique/identity}
 {:db/ident :person/email :db/valueType :db.type/string :db/cardinality :db.cardinality/one :db/unique :db.unique/value}
 {:db/ident :person/age :db/valueType :db.type/long :db/cardinality :db.cardinality/one}
 {:db/ident :person/score :db/valueType :db.type/double :db/cardinality :db.cardinality/one}
 {:db/ident :person/active :db/valueType :db.type/boolean :db/cardinality :db.cardinality/one}
 {:db/ident :person/born :db/valueType :db.type/instant :db/cardinality :db.cardinality/one}
 {:db/ident :person/id :db/valueType :db.type/uuid :db/cardinality :db.cardinality/one}
 {:db/ident :person/photo :db/valueType :db.type/bytes :db/cardinality :db.cardinality/one}
 {:db/ident :person/balance :db/valueType :db.type/bigdec :db/cardinality :db.cardinality/one}
 {:db/ident :person/status :db/valueType :db.type/keyword :db/cardinality :db.cardinality/one}
 {:db/ident :person/friends :db/valueType :db.type/ref :db/cardinality :db.cardinality/many}]"#;

/// People in this many transactions of `BATCH`: more rows than one 2048-row chunk.
const PEOPLE: usize = 3000;
const BATCH: usize = 500;

/// The fixture: the schema, `PEOPLE` people, then one transaction that ages the first 100
/// and drops a friendship. Returns the basis-t before that last transaction.
fn fixture(conn: &Connection) -> u64 {
    conn.transact_edn(SCHEMA).unwrap();
    for start in (0..PEOPLE).step_by(BATCH) {
        let mut tx = String::from("[");
        for i in start..start + BATCH {
            tx.push_str(&format!(
                r#"{{:db/id "p{i}" :person/name "person {i}" :person/email "p{i}@example.com"
                   :person/age {} :person/score {}.5 :person/active {}
                   :person/born #inst "{}-01-02T03:04:05.678Z"
                   :person/id #uuid "00000000-0000-4000-8000-{:012x}"
                   :person/photo #bytes "{:06x}" :person/balance {}.{:02}M
                   :person/status {}
                   :person/friends [{}]}}"#,
                i % 90,
                i % 7,
                i % 2 == 0,
                1950 + i % 60,
                i,
                i,
                i,
                i % 100,
                [":status/new", ":status/old", ":status/gone"][i % 3],
                if i % BATCH == 0 {
                    String::new()
                } else {
                    format!(r#""p{}""#, i - 1)
                },
            ));
        }
        tx.push(']');
        conn.transact_edn(&tx).unwrap();
    }
    let before = conn.db().basis_t();
    let mut tx = String::from("[");
    for i in 0..100 {
        tx.push_str(&format!(
            r#"{{:person/name "person {i}" :person/age {}}}"#,
            i % 90 + 1
        ));
    }
    tx.push_str(
        r#"[:db/retract [:person/name "person 2"] :person/friends [:person/name "person 1"]]]"#,
    );
    conn.transact_edn(&tx).unwrap();
    before
}

/// An EDN value as the Python side normalizes DuckDB's: instants, UUIDs, decimals and bytes
/// tagged, keywords and other EDN-only values their text.
fn expect(v: &Edn) -> Json {
    match v {
        Edn::Nil => Json::Null,
        Edn::Bool(b) => json!(b),
        Edn::Integer(n) => json!(n),
        Edn::Float(x) => json!(x),
        Edn::String(s) => json!(s),
        Edn::Inst(ms) => json!({ "inst": ms }),
        Edn::Uuid(u) => json!({ "uuid": vev::edn::format_uuid(*u) }),
        Edn::BigDec(d) => json!({ "dec": d.normalized().to_string() }),
        Edn::Tagged(tag, inner) if tag.as_str() == "bytes" => {
            json!({ "bytes": inner.as_str().unwrap_or_default() })
        }
        other => json!(other.to_string()),
    }
}

/// An EDN value as the extension's JSON (pulls): keyword keys without their colon.
fn expect_json(v: &Edn) -> Json {
    match v {
        Edn::Map(m) => Json::Object(
            m.iter()
                .map(|(k, v)| {
                    let key = match k {
                        Edn::Keyword(k) => k.as_str().to_owned(),
                        other => other.to_string(),
                    };
                    (key, expect_json(v))
                })
                .collect(),
        ),
        Edn::Vector(items) | Edn::List(items) => {
            Json::Array(items.iter().map(expect_json).collect())
        }
        Edn::Set(items) => Json::Array(items.iter().map(expect_json).collect()),
        Edn::Keyword(k) => json!(k.to_string()),
        Edn::Inst(ms) => json!(vev::edn::format_inst(*ms)),
        other => expect(other),
    }
}

/// The `:db/txInstant` of basis-t `t` as DuckDB's TIMESTAMP text (UTC, milliseconds).
fn instant_text(db: &vev::Db, t: u64) -> String {
    let tx = vev::ids::tx_id(t);
    let instant = db
        .entity(tx)
        .get(&vev::Keyword::new("db/txInstant"))
        .unwrap()
        .unwrap();
    let vev::Value::Instant(ms) = instant else {
        panic!("{instant} is not an instant")
    };
    vev::edn::format_inst(ms)
        .replace('T', " ")
        .trim_end_matches('Z')
        .to_owned()
}

/// The rows of a query through the Rust API.
fn query_rows(db: &vev::Db, query: &str, inputs: &[Edn]) -> Vec<Vec<Json>> {
    let q = vev::Query::parse(query).unwrap();
    let mut all: Vec<vev::Input<'_>> = vec![vev::Input::Db(db)];
    all.extend(inputs.iter().map(vev::Input::Edn));
    let mut rows = Vec::new();
    q.run_rows::<vev::QueryError>(&all, &Default::default(), false, |row| {
        rows.push(row.iter().map(expect).collect());
        Ok(())
    })
    .unwrap();
    rows
}

/// The datom rows `vev_datoms` gives: e, a (ident), v (EDN text), tx, added.
fn datom_rows(db: &vev::Db, datoms: impl Iterator<Item = vev::Datom>) -> Vec<Vec<Json>> {
    datoms
        .map(|d| {
            vec![
                json!(d.e),
                json!(db.ident(d.a).map(|k| k.to_string())),
                json!(d.v.to_string()),
                json!(d.tx),
                json!(d.added),
            ]
        })
        .collect()
}

fn case(name: &str, sql: String, rows: Vec<Vec<Json>>) -> Json {
    json!({ "name": name, "sql": sql, "rows": rows })
}

/// The `vev_query` cases, answered through the Rust API.
fn query_cases(db: &vev::Db, path: &str, before: u64) -> Vec<Json> {
    let past = db.as_of(before);
    let recent = db.since(before);
    let history = db.history();
    let q = |text: &str| {
        format!(
            "SELECT * FROM vev_query('{path}', '{}'",
            text.replace('\'', "''")
        )
    };
    let names_ages = "[:find ?name ?age :where [?e :person/name ?name] [?e :person/age ?age]]";
    let typed = "[:find ?e ?age ?score ?name ?active ?born ?id ?photo ?status ?friend \
                 :where [?e :person/age ?age] [?e :person/score ?score] [?e :person/name ?name] \
                 [?e :person/active ?active] [?e :person/born ?born] [?e :person/id ?id] \
                 [?e :person/photo ?photo] [?e :person/status ?status] [?e :person/friends ?friend]]";
    let older = "[:find ?e :in $ ?min :where [?e :person/age ?a] [(> ?a ?min)]]";
    let by_name = "[:find ?age . :in $ ?n :where [?e :person/name ?n] [?e :person/age ?age]]";
    let agg = "[:find (count ?e) (avg ?a) (max ?a) (sum ?a) :where [?e :person/age ?a]]";
    let coll = "[:find [?n ...] :where [?e :person/age 3] [?e :person/name ?n]]";
    let keys =
        "[:find ?n ?a :keys name age :where [?e :person/name ?n] [?e :person/age ?a] [(< ?a 2)]]";
    let hist =
        "[:find ?e ?a ?tx ?added :where [?e :person/age ?a ?tx ?added] [(< ?e 17592186045600)]]";
    let fof = "[:find ?fname :in $ ?n :where [?p :person/name ?n] [?p :person/friends ?f] \
               [?f :person/friends ?ff] [?ff :person/name ?fname]]";
    let many_in = "[:find ?n :in $ [?a ...] :where [?e :person/age ?a] [?e :person/name ?n]]";
    vec![
        case(
            "query rel",
            format!("{})", q(names_ages)),
            query_rows(db, names_ages, &[]),
        ),
        case(
            "query typed",
            format!("{})", q(typed)),
            query_rows(db, typed, &[]),
        ),
        case(
            "query input",
            format!("{}, in1 := 80)", q(older)),
            query_rows(db, older, &[Edn::Integer(80)]),
        ),
        case(
            "query text input",
            format!("{}, in1 := 'person 7')", q(by_name)),
            query_rows(db, by_name, &[Edn::string("person 7")]),
        ),
        case(
            "query collection input",
            format!("{}, in1 := [1, 2])", q(many_in)),
            query_rows(db, many_in, &[vev::edn::parse("[1 2]").unwrap()]),
        ),
        case(
            "query aggregates",
            format!("{})", q(agg)),
            query_rows(db, agg, &[]),
        ),
        case(
            "query coll",
            format!("{})", q(coll)),
            query_rows(db, coll, &[]),
        ),
        case(
            "query keys",
            format!("{})", q(keys)),
            query_rows(db, keys, &[]),
        ),
        case(
            "query friends of friends",
            format!("{}, in1 := 'person 9')", q(fof)),
            query_rows(db, fof, &[Edn::string("person 9")]),
        ),
        case(
            "query as_of",
            format!("{}, as_of := {before})", q(names_ages)),
            query_rows(&past, names_ages, &[]),
        ),
        case(
            "query since",
            format!("{}, since := {before})", q(names_ages)),
            query_rows(&recent, names_ages, &[]),
        ),
        case(
            "query history",
            format!("{}, history := true)", q(hist)),
            query_rows(&history, hist, &[]),
        ),
    ]
}

/// The other functions' cases, answered through the Rust API.
fn table_cases(db: &vev::Db, path: &str, before: u64) -> Vec<Json> {
    let past = db.as_of(before);
    let history = db.history();
    let age = db.attribute(&vev::Keyword::new("person/age")).unwrap().id;
    let ann = db
        .entity_with_value(
            db.attribute(&vev::Keyword::new("person/name")).unwrap().id,
            &vev::Value::string("person 5"),
        )
        .unwrap()
        .unwrap();
    let pattern = "[:person/name :person/status {:person/friends [:person/name]}]";
    let pulled = vev::pull_many(db, &vev::parse_pull(pattern).unwrap(), &[ann]).unwrap();
    let comp = |e: u64| vev::Component::Entity(e);
    vec![
        case(
            "pull by lookup ref",
            format!("SELECT e, pull::VARCHAR FROM vev_pull('{path}', '{pattern}', '[:person/name \"person 5\"]')"),
            vec![vec![json!(ann), json!(expect_json(&pulled[0]).to_string())]],
        ),
        case(
            "datoms aevt",
            format!("SELECT * FROM vev_datoms('{path}', 'aevt', ':person/age')"),
            datom_rows(db, db.datoms(vev::IndexOrder::Aevt, &[comp(age)]).map(Result::unwrap)),
        ),
        case(
            "datoms eavt",
            format!("SELECT * FROM vev_datoms('{path}', 'eavt', {ann})"),
            datom_rows(db, db.datoms(vev::IndexOrder::Eavt, &[comp(ann)]).map(Result::unwrap)),
        ),
        case(
            "datoms avet history",
            format!("SELECT * FROM vev_datoms('{path}', 'avet', '[:person/age 1]', history := true)"),
            datom_rows(
                &history,
                history
                    .datoms(vev::IndexOrder::Avet, &[comp(age), vev::Component::Value(vev::Value::Long(1))])
                    .map(Result::unwrap),
            ),
        ),
        case(
            "attribute",
            format!("SELECT * FROM vev_attribute('{path}', ':person/age')"),
            query_rows(db, "[:find ?e ?a :where [?e :person/age ?a]]", &[]),
        ),
        case(
            "attribute as_of",
            format!("SELECT * FROM vev_attribute('{path}', ':person/age', as_of := {before})"),
            query_rows(&past, "[:find ?e ?a :where [?e :person/age ?a]]", &[]),
        ),
        case(
            "attribute count",
            format!("SELECT count(*) FROM vev_attribute('{path}', ':person/score')"),
            vec![vec![json!(PEOPLE)]],
        ),
        case(
            "datoms whole index",
            format!("SELECT count(*) FROM vev_datoms('{path}', 'eavt', NULL)"),
            vec![vec![json!(db.datoms(vev::IndexOrder::Eavt, &[]).count())]],
        ),
        case(
            "datoms list of components",
            format!("SELECT * FROM vev_datoms('{path}', 'eavt', ['{ann}', ':person/age'])"),
            datom_rows(
                db,
                db.datoms(vev::IndexOrder::Eavt, &[comp(ann), comp(age)])
                    .map(Result::unwrap),
            ),
        ),
        case(
            "pull a list",
            format!("SELECT e FROM vev_pull('{path}', '[:person/name]', [{ann}, {age}])"),
            vec![vec![json!(ann)], vec![json!(age)]],
        ),
        case(
            "attribute as_of an instant",
            format!(
                "SELECT * FROM vev_attribute('{path}', ':person/age', as_of := TIMESTAMP '{}')",
                instant_text(db, before)
            ),
            query_rows(&past, "[:find ?e ?a :where [?e :person/age ?a]]", &[]),
        ),
        case(
            "log",
            format!("SELECT t, count(*) FROM vev_log('{path}', start := {before}) GROUP BY t"),
            db.tx_range(Some(before), None)
                .unwrap()
                .iter()
                .map(|e| vec![json!(e.t), json!(e.datoms.len())])
                .collect(),
        ),
        case(
            "schema",
            format!("SELECT ident, value_type FROM vev_schema('{path}') WHERE ident LIKE ':person/%'"),
            db.schema()
                .attributes()
                .filter(|a| a.ident.namespace() == Some("person"))
                .map(|a| vec![json!(a.ident.to_string()), json!(a.value_type.ident().to_string())])
                .collect(),
        ),
    ]
}

#[test]
fn the_extension_answers_in_duckdb_as_vev_does() {
    let python = match python() {
        Ok(p) => p,
        Err(why) if in_ci() => {
            panic!("{why}: the DuckDB extension's test cannot run, and CI must run it")
        }
        Err(why) => {
            let _ = writeln!(
                std::io::stderr(),
                "skipped: the DuckDB extension's test: {why}"
            );
            return;
        }
    };
    let extension = build_extension();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("app.vev");
    let before = {
        let conn = Connection::open(&path).unwrap();
        fixture(&conn)
    };
    let reader = Connection::open_with(&path, &vev::OpenOptions::read_only()).unwrap();
    let path_text = path.to_str().unwrap();
    let db = reader.db();
    let mut cases = query_cases(&db, path_text, before);
    cases.extend(table_cases(&db, path_text, before));
    let cases_file = dir.path().join("cases.json");
    std::fs::write(&cases_file, serde_json::to_vec(&cases).unwrap()).unwrap();
    let written = dir.path().join("written.vev");
    let out = Command::new(&python)
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/duckdb_check.py"))
        .arg(&extension)
        .arg(&path)
        .arg(&cases_file)
        .arg(&written)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the DuckDB checks failed ({:?}):\n{stdout}\n{stderr}",
        out.status
    );
    assert!(stdout.contains("checks passed"), "{stdout}");
    eprintln!("{}", stdout.trim());
    // What `vev_transact` wrote from DuckDB is a Vev database like any other.
    let conn = Connection::open(&written).unwrap();
    let names = vev::q(
        "[:find ?n ?a :where [?e :city/name ?n] [?e :city/population ?a]]",
        &[vev::Input::Db(&conn.db())],
    )
    .unwrap();
    assert_eq!(
        names.to_edn(),
        vev::edn::parse(r#"#{["Oslo" 720000] ["Bergen" 290000]}"#).unwrap()
    );
}
