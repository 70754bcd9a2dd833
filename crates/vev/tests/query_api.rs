//! The query API beyond the conformance files: prepared queries on newer databases, explain,
//! limits, user functions and aggregates, several sources.

use std::time::Duration;

use vev::{Connection, Edn, Input, Limits, Query, QueryOptions, QueryResult, Value};

fn people(n: usize) -> Connection {
    let conn = Connection::open_in_memory();
    conn.transact_edn(
        r#"[{:db/ident :name :db/valueType :db.type/string :db/cardinality :db.cardinality/one}
            {:db/ident :age :db/valueType :db.type/long :db/cardinality :db.cardinality/one}]"#,
    )
    .unwrap();
    let mut tx = String::from("[");
    for i in 0..n {
        tx.push_str(&format!(r#"{{:name "p{}" :age {}}}"#, i, i % 50));
    }
    tx.push(']');
    conn.transact_edn(&tx).unwrap();
    conn
}

fn edn(s: &str) -> Edn {
    vev::edn::parse(s).unwrap()
}

#[test]
fn prepared_query_runs_on_newer_databases_with_new_inputs() {
    let conn = people(100);
    let q =
        Query::parse("[:find (count ?e) . :in $ ?min :where [?e :age ?a] [(>= ?a ?min)]]").unwrap();
    let opts = QueryOptions::default();
    let db1 = conn.db();
    assert_eq!(
        db1.q_prepared(&q, &[Edn::Integer(40)], &opts).unwrap(),
        QueryResult::Scalar(Some(Edn::Integer(20)))
    );
    assert_eq!(
        db1.q_prepared(&q, &[Edn::Integer(0)], &opts).unwrap(),
        QueryResult::Scalar(Some(Edn::Integer(100)))
    );
    conn.transact_edn(r#"[{:name "new" :age 45}]"#).unwrap();
    let db2 = conn.db();
    assert_eq!(
        db2.q_prepared(&q, &[Edn::Integer(40)], &opts).unwrap(),
        QueryResult::Scalar(Some(Edn::Integer(21)))
    );
    // The old value is unchanged.
    assert_eq!(
        db1.q_prepared(&q, &[Edn::Integer(40)], &opts).unwrap(),
        QueryResult::Scalar(Some(Edn::Integer(20)))
    );
}

#[test]
fn explain_names_clause_order_indexes_and_row_counts() {
    let conn = people(200);
    let db = conn.db();
    // Written with the unselective clause first: the plan must start from the selective one.
    let q = Query::parse(r#"[:find ?a :where [?e :age ?a] [?e :name "p7"]]"#).unwrap();
    let (result, plan) = q
        .explain(&[Input::Db(&db)], &QueryOptions::default())
        .unwrap();
    let QueryResult::Rel(rows) = result else {
        panic!("a relation find gives a relation: {result:?}")
    };
    assert_eq!(rows.to_vecs(), vec![vec![Edn::Integer(7)]]);
    assert_eq!(plan.len(), 2, "{plan:?}");
    assert_eq!(plan[0].clause, r#"[?e :name "p7"]"#);
    assert!(plan[0].method.starts_with("avet"), "{plan:?}");
    assert_eq!(plan[0].estimated_rows, Some(1));
    assert_eq!(plan[0].actual_rows, 1);
    assert_eq!(plan[1].actual_rows, 1);
    // Run again: the plan is reused while the statistics hold.
    let (_, again) = q
        .explain(&[Input::Db(&db)], &QueryOptions::default())
        .unwrap();
    assert!(again[0].method.ends_with("(cached plan)"), "{again:?}");
}

#[test]
fn predicate_on_a_scalar_input_becomes_a_range_scan() {
    let conn = people(100);
    let db = conn.db();
    let q = Query::parse("[:find ?e :in $ ?min :where [?e :age ?a] [(> ?a ?min)]]").unwrap();
    let min = Edn::Integer(45);
    let (result, plan) = q
        .explain(
            &[Input::Db(&db), Input::Edn(&min)],
            &QueryOptions::default(),
        )
        .unwrap();
    assert_eq!(result.len(), 8);
    assert!(plan[0].method.contains("range"), "{plan:?}");
    assert_eq!(plan[0].actual_rows, 8);
}

#[test]
fn a_prepared_query_takes_a_new_rule_set_each_run() {
    // The compiled rule set is kept between runs of a query; a different one replaces it.
    let conn = people(100);
    let db = conn.db();
    let q = Query::parse("[:find (count ?e) . :in $ % :where (pick ?e)]").unwrap();
    let opts = QueryOptions::default();
    let young = edn("[[(pick ?e) [?e :age ?a] [(< ?a 10)]]]");
    let old = edn("[[(pick ?e) [?e :age ?a] [(>= ?a 40)]]]");
    let unbound = edn("[[(pick ?e) [(< ?a 10)]]]");
    for (rules, want) in [(&young, 20), (&old, 20), (&young, 20)] {
        let got = q.run(&[Input::Db(&db), Input::Edn(rules)], &opts).unwrap();
        assert_eq!(got, QueryResult::Scalar(Some(Edn::Integer(want))));
    }
    let old_only = edn("[[(pick ?e) [?e :age ?a] [(>= ?a 45)]]]");
    let got = q
        .run(&[Input::Db(&db), Input::Edn(&old_only)], &opts)
        .unwrap();
    assert_eq!(got, QueryResult::Scalar(Some(Edn::Integer(10))));
    // A rule set that fails its checks fails every run, not only the first.
    for _ in 0..2 {
        let err = q
            .run(&[Input::Db(&db), Input::Edn(&unbound)], &opts)
            .unwrap_err();
        assert_eq!(err.code(), "query/unbound-variable", "{err}");
    }
}

#[test]
fn a_prepared_query_keeps_only_its_passed_binding_checks() {
    // Binding checks that passed once are skipped on later runs; the ones that failed
    // run (and fail) again, and the checks that depend on the database run every time.
    let conn = people(10);
    let db = conn.db();
    let opts = QueryOptions::default();
    let unbound = Query::parse("[:find ?e ?x :where [?e :age ?a]]").unwrap();
    for _ in 0..2 {
        let err = unbound.run(&[Input::Db(&db)], &opts).unwrap_err();
        assert_eq!(err.code(), "query/unbound-variable", "{err}");
    }
    let q = Query::parse("[:find (count ?e) . :where [?e :age ?a]]").unwrap();
    for _ in 0..2 {
        let got = q.run(&[Input::Db(&db)], &opts).unwrap();
        assert_eq!(got, QueryResult::Scalar(Some(Edn::Integer(10))));
    }
    let empty = Connection::open_in_memory().db();
    let err = q.run(&[Input::Db(&empty)], &opts).unwrap_err();
    assert_eq!(err.code(), "query/unknown-attribute", "{err}");
}

#[test]
fn row_limit_stops_with_a_typed_error() {
    let conn = people(300);
    let db = conn.db();
    let q = Query::parse("[:find ?e ?f :where [?e :age ?a] [?f :age ?b]]").unwrap();
    let opts = QueryOptions {
        limits: Limits {
            max_rows: Some(1000),
            ..Limits::default()
        },
        ..QueryOptions::default()
    };
    let err = db.q_prepared(&q, &[], &opts).unwrap_err();
    assert_eq!(err.code(), "query/too-many-rows");
}

#[test]
fn row_limit_stops_a_whole_relation_rule() {
    // A chain of 100: its closure has 4,950 rows, past the limit of 1,000.
    let conn = Connection::open_in_memory();
    conn.transact_edn(
        "[{:db/ident :name :db/valueType :db.type/string :db/cardinality :db.cardinality/one}
          {:db/ident :next :db/valueType :db.type/ref :db/cardinality :db.cardinality/many}]",
    )
    .unwrap();
    let mut tx = String::from("[");
    for i in 0..100 {
        tx.push_str(&format!("[:db/add \"n{i}\" :name \"n{i}\"]"));
    }
    for i in 0..99 {
        tx.push_str(&format!("[:db/add \"n{i}\" :next \"n{}\"]", i + 1));
    }
    tx.push(']');
    conn.transact_edn(&tx).unwrap();
    let db = conn.db();
    let q = Query::parse("[:find ?x ?y :in $ % :where (reach ?x ?y)]").unwrap();
    let rules = vev::edn::parse(
        "[[(reach ?x ?y) [?x :next ?y]] [(reach ?x ?y) [?x :next ?z] (reach ?z ?y)]]",
    )
    .unwrap();
    let opts = |max_rows| QueryOptions {
        limits: Limits {
            max_rows,
            ..Limits::default()
        },
        ..QueryOptions::default()
    };
    let all = db
        .q_prepared(&q, std::slice::from_ref(&rules), &opts(None))
        .unwrap();
    assert_eq!(all.len(), 4950);
    let err = db
        .q_prepared(&q, std::slice::from_ref(&rules), &opts(Some(1000)))
        .unwrap_err();
    assert_eq!(err.code(), "query/too-many-rows");
}

#[test]
fn a_cross_join_larger_than_memory_stops_at_the_row_limit() {
    // 30,000 x 30,000 rows of four values: the join once reserved all of it up front
    // (about 100 GB) and the process aborted before the limit could stop it.
    let conn = people(30_000);
    let db = conn.db();
    let q = Query::parse("[:find (count ?e) . :where [?e :age ?a] [?f :age ?b]]").unwrap();
    let opts = QueryOptions {
        limits: Limits {
            max_rows: Some(100_000),
            ..Limits::default()
        },
        ..QueryOptions::default()
    };
    let err = db.q_prepared(&q, &[], &opts).unwrap_err();
    assert_eq!(err.code(), "query/too-many-rows");
}

#[test]
fn a_cancel_flag_stops_a_running_query_with_a_typed_error() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let conn = people(2000);
    let db = conn.db();
    let flag = Arc::new(AtomicBool::new(false));
    let opts = QueryOptions {
        limits: Limits {
            cancel: Some(flag.clone()),
            ..Limits::default()
        },
        ..QueryOptions::default()
    };
    let small = Query::parse("[:find (count ?e) . :where [?e :age 3]]").unwrap();
    assert_eq!(
        db.q_prepared(&small, &[], &opts).unwrap(),
        QueryResult::Scalar(Some(Edn::Integer(40)))
    );
    // Eight billion rows: only the flag, set from another thread, ends it.
    let q =
        Query::parse("[:find (count ?e) . :where [?e :age ?a] [?f :age ?b] [?g :age ?c]]").unwrap();
    let setter = std::thread::spawn({
        let flag = flag.clone();
        move || {
            std::thread::sleep(Duration::from_millis(100));
            flag.store(true, Ordering::Relaxed);
        }
    });
    let err = db.q_prepared(&q, &[], &opts).unwrap_err();
    setter.join().unwrap();
    assert_eq!(err.code(), "query/canceled", "{err}");
}

#[test]
fn time_limit_stops_with_a_typed_error() {
    let conn = people(2000);
    let db = conn.db();
    // A cross product of 4,000,000 rows takes far longer than a millisecond.
    let q = Query::parse("[:find (count ?e) . :where [?e :age ?a] [?f :age ?b]]").unwrap();
    let opts = QueryOptions {
        limits: Limits {
            timeout: Some(Duration::from_millis(1)),
            ..Limits::default()
        },
        ..QueryOptions::default()
    };
    let err = db.q_prepared(&q, &[], &opts).unwrap_err();
    assert_eq!(err.code(), "query/timeout");
}

#[test]
fn user_functions_predicates_and_aggregates() {
    let conn = people(10);
    let db = conn.db();
    let mut opts = QueryOptions::default();
    opts.registry.register_fn("my/double", |args| match args {
        [Value::Long(n)] => Ok(Value::Long(n * 2)),
        other => Err(format!("expects one long, got {other:?}")),
    });
    opts.registry.register_fn("my/small?", |args| {
        Ok(Value::Boolean(matches!(args, [Value::Long(n)] if *n < 3)))
    });
    opts.registry.register_aggregate("my/product", |vals| {
        Ok(Value::Long(
            vals.iter().filter_map(Value::as_long).product(),
        ))
    });
    let q = Query::parse("[:find (my/product ?d) . :where [_ :age ?a] [(my/small? ?a)] [(my/double ?a) ?d] [(> ?d 0)]]").unwrap();
    // Ages 0..10; small: 0, 1, 2; doubled 0, 2, 4; positive: 2, 4.
    assert_eq!(
        db.q_prepared(&q, &[], &opts).unwrap(),
        QueryResult::Scalar(Some(Edn::Integer(8)))
    );
    let bad = Query::parse(r#"[:find ?d :where [_ :name ?n] [(my/double ?n) ?d]]"#).unwrap();
    assert_eq!(
        db.q_prepared(&bad, &[], &opts).unwrap_err().code(),
        "query/type-error"
    );
    let unknown = Query::parse("[:find ?d :where [_ :age ?a] [(nope/fn ?a) ?d]]").unwrap();
    assert_eq!(
        db.q_prepared(&unknown, &[], &opts).unwrap_err().code(),
        "query/unknown-function"
    );
}

#[test]
fn two_databases_joined_in_one_query() {
    let a = people(5);
    let b = Connection::open_in_memory();
    b.transact_edn(
        r#"[{:db/ident :label :db/valueType :db.type/string :db/cardinality :db.cardinality/one}
            {:db/ident :age :db/valueType :db.type/long :db/cardinality :db.cardinality/one}]"#,
    )
    .unwrap();
    b.transact_edn(r#"[{:label "x" :age 3} {:label "y" :age 30}]"#)
        .unwrap();
    let (da, db) = (a.db(), b.db());
    let q = Query::parse("[:find ?n ?l :in $a $b :where [$a ?p :age ?x] [$a ?p :name ?n] [$b ?q :age ?x] [$b ?q :label ?l]]").unwrap();
    let r = q
        .run(&[Input::Db(&da), Input::Db(&db)], &QueryOptions::default())
        .unwrap();
    assert_eq!(r.to_edn(), edn(r#"#{["p3" "x"]}"#));
}

#[test]
fn wrong_inputs_are_typed_errors() {
    let conn = people(3);
    let db = conn.db();
    let q = Query::parse("[:find ?e :in $ [?a ...] :where [?e :age ?a]]").unwrap();
    let err = db
        .q_prepared(&q, &[], &QueryOptions::default())
        .unwrap_err();
    assert_eq!(err.code(), "query/input-count");
    let err = db
        .q_prepared(&q, &[Edn::Integer(1)], &QueryOptions::default())
        .unwrap_err();
    assert_eq!(err.code(), "query/input-shape");
    assert!(err.to_string().contains('1'), "{err}");
}

/// Large enough that the planner scans and hash-joins (and uses the star join and range
/// scans); every answer must equal the naive plan's.
#[test]
fn hash_joins_star_joins_and_ranges_agree_with_the_naive_plan() {
    let conn = Connection::open_in_memory();
    conn.transact_edn(
        r#"[{:db/ident :name :db/valueType :db.type/string :db/cardinality :db.cardinality/one}
            {:db/ident :tag :db/valueType :db.type/keyword :db/cardinality :db.cardinality/many}
            {:db/ident :age :db/valueType :db.type/long :db/cardinality :db.cardinality/one}
            {:db/ident :boss :db/valueType :db.type/ref :db/cardinality :db.cardinality/one}]"#,
    )
    .unwrap();
    let mut tx = String::from("[");
    for i in 0..3000 {
        tx.push_str(&format!(
            r#"{{:db/id "p{i}" :name "n{}" :age {} :tag [:t{} :t{}] :boss "p{}"}}"#,
            i % 7,
            i % 90,
            i % 3,
            i % 5,
            (i * 31) % 3000
        ));
    }
    tx.push(']');
    conn.transact_edn(&tx).unwrap();
    conn.transact_edn(r#"[[:db/retract [:name "n1"] :age 1]]"#)
        .ok();
    let db = conn.db();
    let naive = naive_options();
    let queries = [
        r#"[:find ?e ?a :where [?e :name "n3"] [?e :age ?a]]"#,
        r#"[:find ?e ?a :where [?e :age ?a] [?e :name "n3"]]"#,
        r#"[:find ?e ?a ?t :where [?e :name "n3"] [?e :age ?a] [?e :tag ?t]]"#,
        r#"[:find ?e ?b ?n :where [?e :name "n2"] [?e :boss ?b] [?b :name ?n]]"#,
        r#"[:find ?n ?a :where [?e :age ?a] [(>= ?a 80)] [?e :name ?n] [?e :tag :t2]]"#,
        r#"[:find ?e1 ?n :where [?e :name "n4"] [?e :age ?a] [?e1 :age ?a] [?e1 :name ?n]]"#,
        r#"[:find (count ?e) . :where [?e :tag :t1] [?e :age ?a] [(< ?a 10)]]"#,
    ];
    let as_set = |r: QueryResult| match r.to_edn() {
        Edn::Vector(items) => Edn::Set(items.into_iter().collect()),
        other => other,
    };
    let mut methods = String::new();
    for text in queries {
        let q = Query::parse(text).unwrap();
        let (fast, plan) = q
            .explain(&[Input::Db(&db)], &QueryOptions::default())
            .unwrap();
        let slow = q.run(&[Input::Db(&db)], &naive).unwrap();
        assert!(!slow.is_empty(), "{text} finds something");
        assert_eq!(as_set(fast), as_set(slow), "{text}");
        for step in plan {
            methods.push_str(&step.method);
            methods.push('\n');
        }
    }
    for used in ["hash join", "range"] {
        assert!(methods.contains(used), "no {used} in\n{methods}");
    }
}

/// `q2` and `q2-switch` (the same clauses in the other order) must run the same plan.
#[test]
fn written_clause_order_does_not_change_the_plan() {
    let conn = people(500);
    let db = conn.db();
    let plan_of = |text: &str| {
        let q = Query::parse(text).unwrap();
        let (result, plan) = q
            .explain(&[Input::Db(&db)], &QueryOptions::default())
            .unwrap();
        let steps: Vec<(String, String)> = plan.into_iter().map(|s| (s.clause, s.method)).collect();
        (result, steps)
    };
    let (r1, p1) = plan_of(r#"[:find ?e ?a :where [?e :name "p7"] [?e :age ?a]]"#);
    let (r2, p2) = plan_of(r#"[:find ?e ?a :where [?e :age ?a] [?e :name "p7"]]"#);
    assert_eq!(r1, r2);
    assert_eq!(p1, p2);
    assert_eq!(p1[0].0, r#"[?e :name "p7"]"#);
}

/// Issue 17: the index orders doubles by `total_cmp` (-0.0 below 0.0, NaN above or below every
/// number), the comparison predicates numerically (-0.0 = 0.0, NaN compares false). A range
/// scan from `[(<= ?v -0.0)]` must still find 0.0, and one from `[(> ?v 1.0)]` not a NaN.
#[test]
fn double_ranges_agree_with_the_predicates_on_signed_zeros_and_nan() {
    let conn = Connection::open_in_memory();
    conn.transact_edn(
        r#"[{:db/ident :x :db/valueType :db.type/double :db/cardinality :db.cardinality/one}]"#,
    )
    .unwrap();
    conn.transact_edn(
        r#"[{:db/id "a" :x -0.0} {:db/id "b" :x 0.0} {:db/id "c" :x 1.5} {:db/id "d" :x ##NaN}
            {:db/id "e" :x -1.0} {:db/id "f" :x ##Inf}]"#,
    )
    .unwrap();
    let db = conn.db();
    let naive = naive_options();
    let expected = [
        ("[(<= ?v -0.0)]", vec![-1.0, -0.0, 0.0]),
        ("[(>= ?v 0.0)]", vec![-0.0, 0.0, 1.5, f64::INFINITY]),
        ("[(< ?v 0.0)]", vec![-1.0]),
        ("[(> ?v 1.0)]", vec![1.5, f64::INFINITY]),
        ("[(< ?v 2.0)]", vec![-1.0, -0.0, 0.0, 1.5]),
        ("[(< ?v ##NaN)]", vec![]),
        ("[(>= ?v ##NaN)]", vec![]),
    ];
    for (pred, want) in expected {
        let text = format!("[:find [?v ...] :where [?e :x ?v] {pred}]");
        let q = Query::parse(&text).unwrap();
        for opts in [&QueryOptions::default(), &naive] {
            let QueryResult::Coll(got) = q.run(&[Input::Db(&db)], opts).unwrap() else {
                panic!("{text}: not a collection");
            };
            let mut got: Vec<f64> = got
                .iter()
                .map(|e| match e {
                    Edn::Float(d) => *d,
                    other => panic!("{text}: {other} is not a double"),
                })
                .collect();
            got.sort_by(f64::total_cmp);
            assert_eq!(
                got.iter().map(|d| d.to_bits()).collect::<Vec<_>>(),
                want.iter().map(|d| d.to_bits()).collect::<Vec<_>>(),
                "{text} (naive: {}): {got:?}",
                opts.limits.naive
            );
        }
    }
}

/// Options that run the written-order, row-at-a-time plan the optimized one is checked against.
fn naive_options() -> QueryOptions {
    QueryOptions {
        limits: Limits {
            naive: true,
            ..Limits::default()
        },
        ..QueryOptions::default()
    }
}

/// A variable bound by an attribute or entity position holds an entity id (a ref); joined
/// with a long attribute's values it matches the longs equal to that id, in whichever order
/// the plan runs the patterns (Datomic's ids are longs). Found by the `query_run` fuzzer: the
/// optimized plan (long first, then used as an attribute id) gave rows, the naive plan
/// (attribute id first, then compared with the longs) none.
#[test]
fn ids_and_longs_join_the_same_in_every_plan() {
    let conn = Connection::open_in_memory();
    conn.transact_edn(
        r#"[{:db/ident :name :db/valueType :db.type/string :db/cardinality :db.cardinality/one
             :db/unique :db.unique/identity}
            {:db/ident :age :db/valueType :db.type/long :db/cardinality :db.cardinality/one}]"#,
    )
    .unwrap();
    conn.transact_edn(
        r#"[{:name "a" :age 1} {:name "b" :age 2} {:name "c" :age 3}
            {:name "d" :age -9223372036854775808} {:name "e" :age 9223372036854775807}]"#,
    )
    .unwrap();
    let db = conn.db();
    let queries = [
        "[:find ?n1 ?n2 :where [?x ?a] [?e2 :age ?a] [?e1 :name ?n1] [?e2 :name ?n2] [(< ?n1 ?n2)]]",
        "[:find ?n ?a :where [?x ?a] [?e :age ?a] [?e :name ?n]]",
        "[:find ?n ?a :where [?e :age ?a] [?x ?a] [?e :name ?n]]",
        "[:find ?n :where [?x :name] [?e :age ?x] [?e :name ?n]]",
        "[:find ?n :where [?e :age ?x] [?x :name] [?e :name ?n]]",
    ];
    let naive = naive_options();
    for text in queries {
        let q = Query::parse(text).unwrap();
        let run = |opts: &QueryOptions| {
            let mut rows = q.run(&[Input::Db(&db)], opts).unwrap().to_edn().to_string();
            rows.push(' ');
            let mut parsed: Vec<String> = match vev::edn::parse(&rows).unwrap() {
                Edn::Set(items) => items.iter().map(|r| r.to_string()).collect(),
                other => vec![other.to_string()],
            };
            parsed.sort();
            parsed
        };
        assert_eq!(run(&QueryOptions::default()), run(&naive), "{text}");
    }
}

/// A constant lookup ref whose attribute does not exist, or is not unique, is an error in
/// every plan, even when an earlier clause leaves no rows for it (found by `query_run`: the
/// naive plan, running clauses in written order, never reached it and answered no rows).
#[test]
fn a_bad_lookup_ref_is_an_error_in_every_plan() {
    let conn = people(3);
    let db = conn.db();
    let naive = naive_options();
    for (text, code) in [
        (
            "[:find ?a :where [:nothing ?x] [[:nope \"Ann\"] :age ?a]]",
            "query/unknown-attribute",
        ),
        (
            "[:find ?a :where [:nothing ?x] [[:age 3] :age ?a]]",
            "query/invalid-lookup-ref",
        ),
    ] {
        let q = Query::parse(text).unwrap();
        for opts in [&QueryOptions::default(), &naive] {
            let err = q.run(&[Input::Db(&db)], opts).unwrap_err();
            assert_eq!(err.code(), code, "{text}");
        }
    }
}

/// A pattern without a source in a query whose `:in` binds no `$` is `query/unknown-source`
/// in every plan, even when an earlier clause leaves no rows for it (found by `query_run`:
/// the naive plan never reached the pattern and answered nil).
#[test]
fn a_pattern_without_its_source_is_an_error_in_every_plan() {
    let conn = people(3);
    let db = conn.db();
    let naive = naive_options();
    let q = Query::parse("[:find ?e . :in $b :where [$b ?e :age 30] [?e :name ?n]]").unwrap();
    for opts in [&QueryOptions::default(), &naive] {
        let err = q.run(&[Input::Db(&db)], opts).unwrap_err();
        assert_eq!(err.code(), "query/unknown-source");
    }
    // A source named by the enclosing `not` is the pattern's source.
    let q = Query::parse("[:find ?e . :in $b :where [$b ?e :age 1] ($b not [?e :age 2])]").unwrap();
    for opts in [&QueryOptions::default(), &naive] {
        assert!(q.run(&[Input::Db(&db)], opts).is_ok());
    }
}

#[test]
fn an_unknown_attribute_in_a_not_join_of_a_named_source_is_an_error_in_every_plan() {
    // Found by the query_run fuzz target: the optimized plan answered rows, the naive plan
    // `query/unknown-attribute`.
    let conn = people(10);
    let db = conn.db();
    let text =
        "[:find ?n :in $b :where [$b ?e :name ?n] ($b not-join [?e] [?e :e ?a] [(< ?e 25)])]";
    for first_naive in [false, true] {
        let q = Query::parse(text).unwrap();
        let (a, b) = if first_naive {
            (naive_options(), QueryOptions::default())
        } else {
            (QueryOptions::default(), naive_options())
        };
        for opts in [a, b] {
            let err = q.run(&[Input::Db(&db)], &opts).unwrap_err();
            assert_eq!(err.code(), "query/unknown-attribute", "{err}");
        }
    }
}
