//! Fuzz the query parser and engine: arbitrary text is read as a query and, when it parses,
//! run against a small database (with a row and time limit) in both the optimized and the
//! naive plan. Nothing may panic, and both plans must agree on success or failure code.
#![no_main]

use std::sync::OnceLock;
use std::time::Duration;

use libfuzzer_sys::fuzz_target;

fn base() -> &'static vev::Db {
    static DB: OnceLock<vev::Db> = OnceLock::new();
    DB.get_or_init(|| {
        let conn = vev::Connection::open_in_memory();
        conn.transact_edn(
            r#"[{:db/ident :name :db/valueType :db.type/string :db/cardinality :db.cardinality/one :db/unique :db.unique/identity}
                {:db/ident :age :db/valueType :db.type/long :db/cardinality :db.cardinality/one}
                {:db/ident :follows :db/valueType :db.type/ref :db/cardinality :db.cardinality/many}]"#,
        )
        .expect("schema");
        conn.transact_edn(
            r#"[{:db/id "a" :name "a" :age 1 :follows "b"} {:db/id "b" :name "b" :age 2 :follows "c"}
                {:db/id "c" :name "c" :age 3 :follows "a"}]"#,
        )
        .expect("data");
        conn.db()
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(query) = vev::Query::parse(text) else { return };
    let db = base();
    let rules = vev::edn::parse("[[(r ?x ?y) [?x :follows ?y]] [(r ?x ?y) [?x :follows ?t] (r ?t ?y)]]")
        .expect("rules");
    // Feed every input the same few values; shape errors are fine.
    let inputs: Vec<vev::Input<'_>> = query
        .ast()
        .inputs
        .iter()
        .map(|i| match i {
            vev::query_ast::Input::Src(..) => vev::Input::Db(db),
            _ => vev::Input::Edn(&rules),
        })
        .collect();
    let limits = vev::Limits {
        timeout: Some(Duration::from_millis(200)),
        max_rows: Some(10_000),
        naive: false,
    };
    let opts = vev::QueryOptions { limits, ..Default::default() };
    let naive = vev::QueryOptions { limits: vev::Limits { naive: true, ..limits }, ..Default::default() };
    let a = query.run(&inputs, &opts);
    let b = query.run(&inputs, &naive);
    match (&a, &b) {
        (Ok(_), Ok(_)) | (Err(_), Err(_)) => {}
        // A limit may stop one plan and not the other.
        (Err(e), _) | (_, Err(e)) if matches!(e.code(), "query/timeout" | "query/too-many-rows") => {}
        _ => panic!("plans disagree on {text}: {a:?} vs {b:?}"),
    }
});
