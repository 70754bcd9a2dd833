//! The star aggregate (the optimized plan's merge of AEVT runs, `vev_query::query::star_agg`)
//! against the naive plan (the general path: relation, projection, grouping) on random data:
//! entities missing attributes, cardinality-many values, duplicate values across entities,
//! longs and doubles mixed, pending changes from small transactions, retractions, and a data
//! set large enough to be read on two threads.

use vev::{Connection, Edn, Input, Limits, Query, QueryOptions, QueryResult};

const SCHEMA: &str = r#"[
  {:db/ident :city :db/valueType :db.type/string :db/cardinality :db.cardinality/one}
  {:db/ident :age :db/valueType :db.type/long :db/cardinality :db.cardinality/one}
  {:db/ident :score :db/valueType :db.type/double :db/cardinality :db.cardinality/one}
  {:db/ident :weight :db/valueType :db.type/double :db/cardinality :db.cardinality/one}
  {:db/ident :tag :db/valueType :db.type/keyword :db/cardinality :db.cardinality/many}
  {:db/ident :lucky :db/valueType :db.type/long :db/cardinality :db.cardinality/many}]"#;

/// Queries, and whether the star aggregate answers them (not when the entity variable is
/// dropped before aggregating: the rows are then distinct over the other variables).
const QUERIES: &[(&str, bool)] = &[
    ("[:find ?c (count ?p) (avg ?a) :where [?p :city ?c] [?p :age ?a]]", true),
    ("[:find ?c (count ?p) (sum ?a) (min ?a) (max ?a) :where [?p :city ?c] [?p :age ?a]]", true),
    ("[:find ?c (sum ?a) :where [?p :city ?c] [?p :age ?a]]", false),
    ("[:find ?c (sum ?a) (avg ?s) :with ?p :where [?p :city ?c] [?p :age ?a] [?p :score ?s]]", true),
    ("[:find ?c ?a (count ?p) :where [?p :city ?c] [?p :age ?a]]", true),
    ("[:find (count ?p) (count-distinct ?a) (median ?a) :where [?p :city] [?p :age ?a]]", true),
    ("[:find ?t (count ?p) (sum ?l) :with ?c :where [?p :city ?c] [?p :tag ?t] [?p :lucky ?l]]", true),
    ("[:find ?c (count ?p) :where [?p :city ?c] [?p :tag _] [?p :lucky ?l]]", true),
    ("[:find ?c (min ?s) (max ?s) (sum ?s) :with ?p :where [?p :city ?c] [?p :score ?s]]", true),
    ("[:find (count ?p) . :where [?p :tag]]", true),
    ("[:find ?p (sum ?l) (count-distinct ?l) :where [?p :lucky ?l]]", true),
    ("[:find ?c (distinct ?t) (variance ?a) :with ?p :where [?p :city ?c] [?p :tag ?t] [?p :age ?a]]", true),
    ("[:find ?c (count ?p) (sum ?x) :with ?y :where [?p :city ?c] [?p :lucky ?x] [?p :lucky ?y]]", true),
    // Doubles whose sums round differently in different orders: both plans sum exactly.
    ("[:find ?c (sum ?w) (avg ?w) :with ?p :where [?p :city ?c] [?p :weight ?w]]", true),
    ("[:find ?c (sum ?w) (avg ?a) :with ?p :where [?p :city ?c] [?p :weight ?w] [?p :age ?a]]", true),
];

/// A small deterministic generator (no dependency, same data every run).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

/// `n` random entities as map forms.
fn entities(rng: &mut Lcg, n: usize, first: usize) -> String {
    let mut tx = String::from("[");
    for i in first..first + n {
        tx.push_str(&format!("{{:db/id \"e{i}\""));
        if rng.next(10) < 8 {
            tx.push_str(&format!(" :city \"c{}\"", rng.next(7)));
        }
        if rng.next(10) < 8 {
            tx.push_str(&format!(" :age {}", rng.next(90) as i64 - 5));
        }
        if rng.next(10) < 6 {
            // Quarters: every sum of these is exact in any order.
            tx.push_str(&format!(" :score {:?}", rng.next(400) as f64 / 4.0 - 20.0));
        }
        if rng.next(10) < 5 {
            // Tenths at magnitudes from 1e-3 to 1e12: no order sums these exactly.
            let scale = 10f64.powi(rng.next(16) as i32 - 3);
            tx.push_str(&format!(
                " :weight {:?}",
                (rng.next(2000) as f64 - 1000.0) / 10.0 * scale
            ));
        }
        if rng.next(10) < 5 {
            let tags: Vec<String> = (0..1 + rng.next(3))
                .map(|_| format!(":t{}", rng.next(4)))
                .collect();
            tx.push_str(&format!(" :tag [{}]", tags.join(" ")));
        }
        if rng.next(10) < 4 {
            let lucky: Vec<String> = (0..1 + rng.next(4))
                .map(|_| rng.next(20).to_string())
                .collect();
            tx.push_str(&format!(" :lucky [{}]", lucky.join(" ")));
        }
        if rng.next(10) == 0 {
            // The same entity twice in one transaction merges its attributes.
            tx.push_str(&format!("}} {{:db/id \"e{i}\" :lucky [{}]", rng.next(20)));
        }
        tx.push('}');
    }
    tx.push(']');
    tx
}

fn naive() -> QueryOptions {
    QueryOptions {
        limits: Limits {
            naive: true,
            ..Limits::default()
        },
        ..QueryOptions::default()
    }
}

/// Run every query both ways on `conn`'s database; they must agree exactly.
fn agree(conn: &Connection, label: &str, threads: usize) {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let method = format!("on {} thread(s)", threads.min(cores));
    let db = conn.db();
    for (text, star) in QUERIES {
        let q = Query::parse(text).unwrap();
        let fast = q.run(&[Input::Db(&db)], &QueryOptions::default()).unwrap();
        let slow = q.run(&[Input::Db(&db)], &naive()).unwrap();
        assert_eq!(
            canonical(&fast),
            canonical(&slow),
            "{label}: {text}\nfast: {fast:?}\nnaive: {slow:?}"
        );
        let (_, plan) = q
            .explain(&[Input::Db(&db)], &QueryOptions::default())
            .unwrap();
        assert_eq!(
            plan.iter().any(|s| s.method.starts_with("star aggregate")),
            *star,
            "{label}: {text} took the star aggregate or not: {plan:?}"
        );
        if *star {
            assert!(plan[0].method.ends_with(&method), "{label}: {plan:?}");
        }
    }
}

/// A result with its rows sorted (a set's order is not part of it).
fn canonical(r: &QueryResult) -> Edn {
    match r.to_edn() {
        Edn::Set(rows) => Edn::Vector(rows.into_iter().collect()),
        other => other,
    }
}

#[test]
fn star_aggregates_agree_with_the_naive_plan() {
    let conn = Connection::open_in_memory();
    conn.transact_edn(SCHEMA).unwrap();
    let mut rng = Lcg(24);
    conn.transact_edn(&entities(&mut rng, 3000, 0)).unwrap();
    agree(&conn, "one large transaction", 1);
    // Small transactions stay pending in the trees; the runs merge them in.
    for k in 0..20 {
        conn.transact_edn(&entities(&mut rng, 5, 10_000 + k * 5))
            .unwrap();
    }
    agree(&conn, "with pending transactions", 1);
}

#[test]
fn a_large_star_aggregate_read_on_two_threads_agrees() {
    let conn = Connection::open_in_memory();
    conn.transact_edn(SCHEMA).unwrap();
    let mut rng = Lcg(7);
    for chunk in 0..12 {
        conn.transact_edn(&entities(&mut rng, 20_000, chunk * 20_000))
            .unwrap();
    }
    agree(&conn, "240k entities", 2);
}
