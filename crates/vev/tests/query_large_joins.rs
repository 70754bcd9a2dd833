//! Joins and projections over relations of thousands of rows, where the engine joins by
//! scanning one attribute and probing the rows (merge join when the rows are sorted by the
//! shared variable, hash join otherwise) and deduplicates sorted projections run by run:
//! every query's result equals the naive plan's (clauses in written order, one lookup per
//! row).

use std::time::Duration;

use vev::{Connection, Edn, Input, Limits, Query, QueryOptions, QueryResult};

fn options(naive: bool) -> QueryOptions {
    QueryOptions {
        limits: Limits {
            naive,
            max_rows: Some(2_000_000),
            timeout: Some(Duration::from_secs(60)),
        },
        ..QueryOptions::default()
    }
}

fn canonical(result: QueryResult) -> Edn {
    match result {
        QueryResult::Rel(mut rows) | QueryResult::Bag(mut rows) => {
            rows.sort();
            Edn::Vector(rows.into_iter().map(Edn::Vector).collect())
        }
        QueryResult::Coll(mut items) | QueryResult::Maps(mut items) => {
            items.sort();
            Edn::Vector(items)
        }
        other => other.to_edn(),
    }
}

/// 3,000 people: most with an id, a name and an age; tags (some people have 40, so runs of
/// one entity pass the projection's linear limit); friends in earlier batches.
fn db() -> Connection {
    let conn = Connection::open_in_memory();
    conn.transact_edn(
        r#"[{:db/ident :p/id :db/valueType :db.type/long :db/cardinality :db.cardinality/one :db/unique :db.unique/identity}
            {:db/ident :p/name :db/valueType :db.type/string :db/cardinality :db.cardinality/one}
            {:db/ident :p/age :db/valueType :db.type/long :db/cardinality :db.cardinality/one}
            {:db/ident :p/tag :db/valueType :db.type/keyword :db/cardinality :db.cardinality/many}
            {:db/ident :p/friend :db/valueType :db.type/ref :db/cardinality :db.cardinality/many}]"#,
    )
    .unwrap();
    let mut people = Vec::new();
    for i in 0..3000u64 {
        let mut p = format!("{{:p/id {i}");
        if i % 11 != 3 {
            p.push_str(&format!(r#" :p/name "n{}""#, i % 700));
        }
        if i % 7 != 5 {
            p.push_str(&format!(" :p/age {}", i % 90));
        }
        let tags = if i % 97 == 0 { 40 } else { i % 4 };
        if tags > 0 {
            let t: Vec<String> = (0..tags).map(|k| format!(":t{}", (i + k) % 50)).collect();
            p.push_str(&format!(" :p/tag [{}]", t.join(" ")));
        }
        if i >= 500 && i % 3 == 0 {
            // Lookup refs resolve against the database before the transaction: earlier
            // batches only.
            p.push_str(&format!(
                " :p/friend [[:p/id {}] [:p/id {}]]",
                i - 500,
                (i * 7) % 500
            ));
        }
        p.push('}');
        people.push(p);
        if people.len() == 500 {
            conn.transact_edn(&format!("[{}]", people.join(" ")))
                .unwrap();
            people.clear();
        }
    }
    conn
}

#[test]
fn large_joins_and_projections_match_the_naive_plan() {
    let conn = db();
    let db = conn.db();
    let queries = [
        // Sorted by ?e on both sides: merge joins, then a projection to ?e.
        "[:find (count ?e) . :where [?e :p/id ?i] [?e :p/name ?n] [?e :p/age ?a]]",
        "[:find ?e ?n ?a :where [?e :p/id] [?e :p/name ?n] [?e :p/age ?a]]",
        // A cardinality-many attribute: several datoms per key, runs of up to 40 rows.
        "[:find ?e ?t :where [?e :p/name] [?e :p/tag ?t]]",
        "[:find ?e :where [?e :p/tag ?t] [?e :p/age ?a]]",
        "[:find ?n (count ?t) :where [?e :p/tag ?t] [?e :p/name ?n]]",
        "[:find ?a ?t :where [?e :p/age ?a] [?e :p/tag ?t]]",
        // The shared variable in value position: probe keys out of order.
        "[:find ?x ?n :where [?e :p/name ?n] [?x :p/friend ?e]]",
        "[:find ?x ?y :where [?e :p/age 30] [?x :p/friend ?e] [?x :p/friend ?y]]",
        // Rows sorted by ?e; the scan (an AVET range, by age then entity) hands the keys over
        // out of order: the cursor moves back.
        "[:find ?e ?a :where [?e :p/tag :t7] [?e :p/age ?a] [(< ?a 40)]]",
        "[:find ?x ?e :where [?e :p/tag :t7] [?x :p/friend ?e]]",
        // Runs of more than 16 distinct kept rows for one ?e (40 tags, crossed with friends).
        "[:find ?e ?t :where [?e :p/tag ?t] [?e :p/friend ?f]]",
        // Projections that keep a sorted column among others.
        "[:find ?e ?a :where [?e :p/tag ?t] [?e :p/age ?a] [?e :p/name ?n]]",
        "[:find ?t :where [?e :p/tag ?t] [?e :p/id]]",
    ];
    for text in queries {
        let q = Query::parse(text).unwrap();
        let run = |naive| canonical(q.run(&[Input::Db(&db)], &options(naive)).unwrap());
        let (fast, naive) = (run(false), run(true));
        assert_eq!(fast, naive, "{text}");
        assert!(fast != Edn::Vector(vec![]), "{text} found nothing");
    }
    // The cursor join runs where meant to: rows and scan sorted by ?e, and rows sorted by
    // ?e with a scan that is not.
    for text in [queries[1], queries[8]] {
        let q = Query::parse(text).unwrap();
        let (_, plan) = q
            .explain(&[Input::Db(&db)], &QueryOptions::default())
            .unwrap();
        assert!(
            plan.iter().any(|s| s.method.starts_with("merge join")),
            "{text}: {plan:?}"
        );
    }
}
