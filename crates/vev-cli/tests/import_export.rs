//! `vev export` and `vev import`: a database with history goes out and comes back with every
//! index and the log equal; JSON Lines and CSV imports type values by the schema and point
//! at the line (and column) of a bad record.

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use vev::{Connection, Db, IndexOrder, OpenOptions};

fn vev() -> Command {
    Command::cargo_bin("vev").expect("the vev binary is built")
}

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

fn run_ok(args: &[&str]) -> String {
    let out = vev().args(args).output().expect("runs");
    assert!(
        out.status.success(),
        "vev {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

fn run_err(args: &[&str]) -> String {
    let out = vev().args(args).output().expect("runs");
    assert_eq!(out.status.code(), Some(1), "vev {args:?} should fail");
    String::from_utf8(out.stderr).expect("utf-8")
}

fn open(path: &Path) -> Db {
    let conn = Connection::open_with(path, &OpenOptions::read_only()).expect("opens");
    conn.sync().expect("reads the log")
}

const SCHEMA: &str = r#"[
 [:db/add "datomic.tx" :db/txInstant #inst "2001-02-03T04:05:06.789Z"]
 {:db/ident :p/email :db/valueType :db.type/string :db/cardinality :db.cardinality/one
  :db/unique :db.unique/identity}
 {:db/ident :p/name :db/valueType :db.type/string :db/cardinality :db.cardinality/one}
 {:db/ident :p/age :db/valueType :db.type/long :db/cardinality :db.cardinality/one :db/index true}
 {:db/ident :p/tag :db/valueType :db.type/keyword :db/cardinality :db.cardinality/many}
 {:db/ident :p/friend :db/valueType :db.type/ref :db/cardinality :db.cardinality/many}
 {:db/ident :p/address :db/valueType :db.type/ref :db/cardinality :db.cardinality/one
  :db/isComponent true}
 {:db/ident :addr/city :db/valueType :db.type/string :db/cardinality :db.cardinality/one}
 {:db/ident :p/score :db/valueType :db.type/double :db/cardinality :db.cardinality/one}
 {:db/ident :p/born :db/valueType :db.type/instant :db/cardinality :db.cardinality/one}
 {:db/ident :p/id :db/valueType :db.type/uuid :db/cardinality :db.cardinality/one}
 {:db/ident :p/big :db/valueType :db.type/bigint :db/cardinality :db.cardinality/one}
 {:db/ident :p/dec :db/valueType :db.type/bigdec :db/cardinality :db.cardinality/one}
 {:db/ident :p/seen :db/valueType :db.type/long :db/cardinality :db.cardinality/one
  :db/noHistory true}
 {:db/ident :p/first :db/valueType :db.type/string :db/cardinality :db.cardinality/one}
 {:db/ident :p/last :db/valueType :db.type/string :db/cardinality :db.cardinality/one}
 {:db/ident :p/full :db/valueType :db.type/tuple :db/tupleAttrs [:p/first :p/last]
  :db/cardinality :db.cardinality/one}
 {:db/ident :tx/note :db/valueType :db.type/string :db/cardinality :db.cardinality/one}
 {:db/ident :tx/about :db/valueType :db.type/ref :db/cardinality :db.cardinality/one}]"#;

/// A database with history: replacements, retractions of many values, a retracted
/// component, tx metadata, a renamed attribute, a tempid that wrote nothing, noHistory.
fn build(path: &Path) {
    let conn = Connection::open(path).expect("opens");
    for tx in [
        SCHEMA,
        r#"[{:db/id "ann" :p/email "ann@x" :p/name "Ann" :p/age 30 :p/tag [:a :b]
             :p/score 1.5 :p/born #inst "1990-01-02T03:04:05.006Z" :p/big 123456789012345678901N
             :p/dec 1.25M :p/id #uuid "0b6b5e5c-3b2a-4f8e-9c1d-2e3f4a5b6c7d" :p/seen 1
             :p/first "Ann" :p/last "Lee" :p/address {:addr/city "Oslo"}}
            {:db/id "bo" :p/email "bo@x" :p/name "Bo \"B\" Ek" :p/friend ["ann"]}
            [:db/add "datomic.tx" :tx/note "first people"]]"#,
        r#"[{:p/email "ann@x" :p/age 31 :p/seen 2 :p/last "Lund" :p/tag [:c]}
            [:db/retract [:p/email "ann@x"] :p/tag :a]
            [:db/retract "nobody" :p/name "x"]
            {:db/id "cy" :p/email "cy@x" :p/friend [[:p/email "bo@x"]]}
            [:db/add "datomic.tx" :tx/about [:p/email "ann@x"]]]"#,
        r#"[{:db/id :p/name :db/ident :p/fullname}]"#,
        r#"[{:p/email "bo@x" :p/fullname "Bo Ek"}
            [:db/retractEntity [:p/email "cy@x"]]]"#,
    ] {
        conn.transact_edn(tx)
            .unwrap_or_else(|e| panic!("{e}: {tx}"));
    }
    // Retract Ann's address, a component entity.
    let ann = conn
        .db()
        .q(
            r#"[:find ?a . :where [?e :p/email "ann@x"] [?e :p/address ?a]]"#,
            &[],
        )
        .expect("query")
        .to_edn();
    conn.transact_edn(&format!("[[:db/retractEntity {ann}]]"))
        .expect("retracts");
}

/// Every index, current and history, the log, basis-t and the entity counter.
fn assert_same(a: &Db, b: &Db) {
    assert_eq!(a.basis_t(), b.basis_t());
    assert_eq!(a.next_user(), b.next_user());
    assert_eq!(a.last_instant(), b.last_instant());
    for order in [
        IndexOrder::Eavt,
        IndexOrder::Aevt,
        IndexOrder::Avet,
        IndexOrder::Vaet,
    ] {
        let (x, y): (Vec<_>, Vec<_>) = (
            a.datoms(order, &[]).collect(),
            b.datoms(order, &[]).collect(),
        );
        assert_eq!(x, y, "current {order:?}");
        assert!(!x.is_empty());
        let (x, y): (Vec<_>, Vec<_>) = (
            a.history().datoms(order, &[]).collect(),
            b.history().datoms(order, &[]).collect(),
        );
        assert_eq!(x, y, "history {order:?}");
    }
    assert_eq!(a.tx_range(None, None), b.tx_range(None, None), "log");
}

#[test]
fn export_then_import_gives_the_same_indexes_and_log() {
    let dir = tempfile::tempdir().unwrap();
    let (original, copy) = (dir.path().join("a.vev"), dir.path().join("b.vev"));
    let file: PathBuf = dir.path().join("a.edn");
    build(&original);
    run_ok(&["export", s(&original), "--out", s(&file)]);
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(
        text.contains(r#"[:db/add "datomic.tx" :db/txInstant #inst "2001-02-03T04:05:06.789Z"]"#)
    );
    assert!(text.contains(r#"[:db/add "datomic.tx" :tx/note "first people"]"#));
    // The gap left by the tempid that wrote nothing is consumed again.
    assert!(text.contains(":db/doc \"\"]"));
    let out = run_ok(&["import", s(&copy), s(&file)]);
    assert!(out.contains(":basis-t 6"), "{out}");
    assert_same(&open(&original), &open(&copy));
    // stdout gives the same text as --out.
    assert_eq!(run_ok(&["export", s(&original)]), text);
    // An export of the copy is the same file.
    assert_eq!(run_ok(&["export", s(&copy)]), text);
    // Into a database that has transactions, ids could not line up: refused.
    let err = run_err(&["import", s(&copy), s(&file)]);
    assert!(err.starts_with("error[import/not-empty]"), "{err}");
}

fn schema_db(dir: &Path) -> PathBuf {
    let db = dir.join("t.vev");
    let schema = dir.join("schema.edn");
    std::fs::write(
        &schema,
        r#"[{:db/ident :p/email :db/valueType :db.type/string :db/cardinality :db.cardinality/one
             :db/unique :db.unique/identity}
            {:db/ident :p/age :db/valueType :db.type/long :db/cardinality :db.cardinality/one}
            {:db/ident :p/score :db/valueType :db.type/double :db/cardinality :db.cardinality/one}
            {:db/ident :p/born :db/valueType :db.type/instant :db/cardinality :db.cardinality/one}
            {:db/ident :p/vip :db/valueType :db.type/boolean :db/cardinality :db.cardinality/one}
            {:db/ident :p/tag :db/valueType :db.type/keyword :db/cardinality :db.cardinality/many}
            {:db/ident :p/code :db/valueType :db.type/string :db/cardinality :db.cardinality/one
             :db/unique :db.unique/value}
            {:db/ident :p/friend :db/valueType :db.type/ref :db/cardinality :db.cardinality/many}]"#,
    )
    .unwrap();
    run_ok(&["transact", s(&db), s(&schema)]);
    db
}

/// A query's EDN output, printed again in `Edn`'s one-line form (results put a row a line).
fn q(db: &Path, query: &str) -> String {
    let out = run_ok(&["query", s(db), query, "--format", "edn"]);
    vev::edn::parse(&out)
        .unwrap_or_else(|e| panic!("{e}: {out}"))
        .to_string()
}

#[test]
fn json_lines_are_typed_by_the_schema() {
    let dir = tempfile::tempdir().unwrap();
    let db = schema_db(dir.path());
    let file = dir.path().join("people.jsonl");
    std::fs::write(
        &file,
        concat!(
            r#"{":p/email": "ann@x", "p/age": 30, ":p/score": 2, ":p/born": "2000-01-02T00:00:00Z", ":p/vip": true, ":p/tag": [":a", "b"]}"#,
            "\n\n",
            r#"{":p/email": "bo@x", ":p/age": null, ":p/born": 86400000, ":p/friend": [[":p/email", "ann@x"]]}"#,
            "\n",
        ),
    )
    .unwrap();
    let out = run_ok(&["import", s(&db), s(&file), "--batch-records", "1"]);
    assert!(out.contains(":txs 2"), "{out}");
    assert_eq!(
        q(
            &db,
            r#"[:find ?a ?s ?b ?v :where [?e :p/email "ann@x"] [?e :p/age ?a] [?e :p/score ?s] [?e :p/born ?b] [?e :p/vip ?v]]"#
        ),
        r#"#{[30 2.0 #inst "2000-01-02T00:00:00.000Z" true]}"#
    );
    assert_eq!(
        q(
            &db,
            r#"[:find [?t ...] :where [?e :p/email "ann@x"] [?e :p/tag ?t]]"#
        ),
        "[:a :b]"
    );
    assert_eq!(
        q(
            &db,
            r#"[:find ?b ?f :where [?e :p/email "bo@x"] [?e :p/born ?b] [?e :p/friend ?x] [?x :p/email ?f]]"#
        ),
        r#"#{[#inst "1970-01-02T00:00:00.000Z" "ann@x"]}"#
    );
}

#[test]
fn json_lines_errors_name_the_line_and_column_and_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = schema_db(dir.path());
    let file = dir.path().join("bad.jsonl");
    let cases: [(&str, &str, &str); 4] = [
        (
            "{\"p/email\": \"a\"}\n{\"p/email\": \"b\",}\n",
            "error[import/json]",
            "bad.jsonl:2:",
        ),
        (
            "{\"p/email\": \"a\"}\n\n{\"p/email\": \"b\", \"p/agee\": 3}\n",
            "error[import/unknown-attribute]: unknown attribute :p/agee",
            "bad.jsonl:3:18",
        ),
        (
            "{\"p/email\": \"a\", \"p/age\": \"old\"}\n",
            "error[import/wrong-type]: \"old\" is not a value of :p/age (type :db.type/long)",
            "bad.jsonl:1:18",
        ),
        ("[1]\n", "error[import/not-an-object]", "bad.jsonl:1:1"),
    ];
    for (text, first, at) in cases {
        std::fs::write(&file, text).unwrap();
        let err = run_err(&["import", s(&db), s(&file)]);
        assert!(err.starts_with(first), "{err}");
        assert!(err.contains(at), "{err}");
        assert!(err.contains(" ^"), "a caret: {err}");
    }
    // Nothing was committed.
    assert_eq!(q(&db, "[:find (count ?e) . :where [?e :p/email]]"), "nil");

    // The transactor's errors name the record's transaction and what was committed.
    std::fs::write(
        &file,
        "{\"p/email\": \"a\", \"p/code\": \"x\"}\n{\"p/email\": \"b\", \"p/code\": \"x\"}\n",
    )
    .unwrap();
    let err = run_err(&["import", s(&db), s(&file), "--batch-records", "1"]);
    assert!(err.contains("bad.jsonl:2:1"), "{err}");
    assert!(
        err.contains("note: the transaction of line 2 (transaction 2 of 2) failed"),
        "{err}"
    );
}

#[test]
fn csv_rows_are_typed_by_the_header_attributes() {
    let dir = tempfile::tempdir().unwrap();
    let db = schema_db(dir.path());
    let file = dir.path().join("people.csv");
    std::fs::write(
        &file,
        "email,age,:p/score,born,vip,tag,tag\r\n\
         ann@x,30,1.5,2000-01-02T00:00:00Z,true,:a,b\r\n\
         \"bo, \"\"the\"\" second\",41,,86400000,false,,\n",
    )
    .unwrap();
    run_ok(&["import", s(&db), s(&file), "--attr-prefix", "p"]);
    assert_eq!(
        q(
            &db,
            "[:find ?m ?a ?v :where [?e :p/email ?m] [?e :p/age ?a] [?e :p/vip ?v]]"
        ),
        r#"#{["ann@x" 30 true] ["bo, \"the\" second" 41 false]}"#
    );
    assert_eq!(
        q(
            &db,
            r#"[:find [?t ...] :where [?e :p/email "ann@x"] [?e :p/tag ?t]]"#
        ),
        "[:a :b]"
    );
    // Rows without a value for an attribute have no datom for it.
    assert_eq!(q(&db, "[:find (count ?e) . :where [?e :p/score]]"), "1");
}

#[test]
fn csv_errors_name_the_line_and_column() {
    let dir = tempfile::tempdir().unwrap();
    let db = schema_db(dir.path());
    let file = dir.path().join("bad.csv");
    let cases: [(&str, &[&str], &str, &str); 4] = [
        (
            "email,age\nann@x,30\nbo@x,forty\n",
            &["--attr-prefix", "p"],
            "error[import/wrong-type]: \"forty\" is not a value of :p/age (type :db.type/long)",
            "bad.csv:3:6",
        ),
        (
            "email,age\nann@x,30,1\n",
            &["--attr-prefix", "p"],
            "error[import/csv]: the row has 3 fields but the header has 2",
            "bad.csv:2:1",
        ),
        (
            "email,age\n",
            &[],
            "error[import/csv-header]",
            "bad.csv:1:1",
        ),
        (
            "p/email\n\"ann\n",
            &[],
            "error[import/csv]: a quoted CSV field is not closed",
            "bad.csv:2:1",
        ),
    ];
    for (text, flags, first, at) in cases {
        std::fs::write(&file, text).unwrap();
        let mut args = vec!["import", s(&db), s(&file)];
        args.extend_from_slice(flags);
        let err = run_err(&args);
        assert!(err.starts_with(first), "{err}");
        assert!(err.contains(at), "{err}");
    }
    assert_eq!(q(&db, "[:find (count ?e) . :where [?e :p/email]]"), "nil");
    // No extension to go by.
    let err = run_err(&["import", s(&db), s(&dir.path().join("people.txt"))]);
    assert!(err.starts_with("error[cli/invalid-argument]"), "{err}");
}
