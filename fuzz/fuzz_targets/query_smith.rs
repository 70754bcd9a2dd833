//! Structure-aware query fuzzing: the fuzz input is the choice tape of the query oracle's
//! generator (`crates/vev/tests/query_gen`, one byte per choice), which builds a database (5
//! to 40 entities over 1 to 4 transactions, with retractions) and a well-formed, typed query
//! on it (patterns, inputs, rules, `or`/`or-join`, `not`/`not-join`, predicates, functions,
//! aggregates). The query runs on one view of the database (current, as-of, since, history)
//! through the optimized and the naive plan, and on the same datoms in a trivial `VecSource`:
//! the rows (as a bag) or the error code must be the same in every run, and nothing may
//! panic. libFuzzer's coverage feedback steers the bytes towards new engine paths, so this
//! finds the wrong answers `query_oracle.rs` would, beyond what its proptest cases reach.
#![no_main]

#[path = "../../crates/vev/tests/query_gen/mod.rs"]
mod query_gen;

mod common;

use libfuzzer_sys::fuzz_target;
use vev::{Db, Edn, IndexOrder, Input, Query, Source};
use vev_query::testing::VecSource;

use common::{assert_same, run, Strictness};
use query_gen::{build, DbSpec, Dialect, QuerySpec, Tape};

/// The view the query runs on, picked from the tape.
fn view(db: &Db, t: u64, pick: usize) -> Db {
    match pick {
        0 => db.clone(),
        1 => db.as_of(t),
        2 => db.since(t),
        3 => db.history(),
        _ => db.as_of(t).history(),
    }
}

fn run_all(query: &Query, src: &dyn Source, args: &[Edn], naive: bool) -> common::Outcome {
    let mut inputs = vec![Input::Db(src)];
    inputs.extend(args.iter().map(Input::Edn));
    run(query, &inputs, naive)
}

fuzz_target!(|data: &[u8]| {
    let choices: Vec<u32> = data.iter().map(|b| u32::from(*b)).collect();
    let mut tape = Tape::new(&choices);
    let spec = DbSpec::generate(&mut tape);
    let built = build(&spec);
    let db = built.conn.db();
    let t = built.ts[tape.pick(built.ts.len())];
    let view = view(&db, t, tape.pick(5));
    let q = QuerySpec::generate(&mut tape, built.ids.len(), Dialect::Full);
    let text = q.text(&built.ids);
    let query =
        Query::parse(&text).unwrap_or_else(|e| panic!("generated query fails: {e}\n{text}"));
    let args: Vec<Edn> = q
        .input_edns(&built.ids)
        .iter()
        .map(|e| vev::edn::parse(e).expect("generated inputs parse"))
        .collect();
    let strict = Strictness {
        rows: true,
        eval_errors: true,
    };
    let what = format!("{text}\ninputs: {args:?}\ndata:\n{}", built.describe());
    let optimized = run_all(&query, &view, &args, false);
    assert_same(
        &what,
        &optimized,
        &run_all(&query, &view, &args, true),
        strict,
    );
    let datoms = view
        .datoms(IndexOrder::Eavt, &[])
        .collect::<Result<_, _>>()
        .expect("an in-memory database reads no storage");
    let reference =
        VecSource::new(view.schema().clone(), datoms).with_history(Source::is_history(&view));
    let fresh = Query::parse(&text).expect("compiled before");
    assert_same(
        &what,
        &optimized,
        &run_all(&fresh, &reference, &args, false),
        strict,
    );
});
