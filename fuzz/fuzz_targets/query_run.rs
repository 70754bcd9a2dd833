//! Fuzz the query parser and engine: arbitrary text is read as a query and, when it parses,
//! run against a small database (with a row and time limit) in both the optimized and the
//! naive plan. Nothing may panic, and both plans must give the same rows (as a bag: sorted,
//! duplicates kept) or the same error code. Where the text makes that undefined, less is
//! compared (see `common::rows_comparable` and `common::Strictness`).
#![no_main]

mod common;

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;

use common::{assert_same, rows_comparable, run, Strictness};

fn base() -> &'static vev::Db {
    static DB: OnceLock<vev::Db> = OnceLock::new();
    DB.get_or_init(|| {
        let conn = vev::Connection::open_in_memory();
        conn.transact_edn(
            r#"[{:db/ident :name :db/valueType :db.type/string :db/cardinality :db.cardinality/one :db/unique :db.unique/identity}
                {:db/ident :age :db/valueType :db.type/long :db/cardinality :db.cardinality/one}
                {:db/ident :score :db/valueType :db.type/double :db/cardinality :db.cardinality/one}
                {:db/ident :follows :db/valueType :db.type/ref :db/cardinality :db.cardinality/many}]"#,
        )
        .expect("schema");
        conn.transact_edn(
            r#"[{:db/id "a" :name "a" :age 1 :score -0.0 :follows "b"}
                {:db/id "b" :name "b" :age 2 :score 0.0 :follows "c"}
                {:db/id "c" :name "c" :age 3 :score ##NaN :follows "a"}
                {:db/id "d" :name "d" :age -9223372036854775808 :score 1.5}
                {:db/id "e" :name "e" :age 9223372036854775807 :score ##-Inf}]"#,
        )
        .expect("data");
        conn.db()
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(query) = vev::Query::parse(text) else {
        return;
    };
    let db = base();
    let rules =
        vev::edn::parse("[[(r ?x ?y) [?x :follows ?y]] [(r ?x ?y) [?x :follows ?t] (r ?t ?y)]]")
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
    let strict = Strictness {
        rows: rows_comparable(&query),
        eval_errors: false,
    };
    assert_same(
        text,
        &run(&query, &inputs, false),
        &run(&query, &inputs, true),
        strict,
    );
});
