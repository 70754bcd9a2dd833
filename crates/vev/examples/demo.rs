//! The README demo: create a database file, load people, change some of them, reopen it, and
//! answer questions from the indexes, the entity API, Datalog queries, pull and the past.
//!
//! `cargo run --release -p vev --example demo [PATH]` (default: `vev-demo.vev` in the
//! system's temporary directory, replaced on each run).

use vev::{Component, Connection, Db, IndexOrder, Keyword, TimePoint, Value};

const SCHEMA: &str = r#"[
  {:db/ident :person/email :db/valueType :db.type/string :db/cardinality :db.cardinality/one
   :db/unique :db.unique/identity :db/doc "How we find a person."}
  {:db/ident :person/name :db/valueType :db.type/string :db/cardinality :db.cardinality/one}
  {:db/ident :person/age :db/valueType :db.type/long :db/cardinality :db.cardinality/one :db/index true}
  {:db/ident :person/friend :db/valueType :db.type/ref :db/cardinality :db.cardinality/many}
  {:db/ident :person/address :db/valueType :db.type/ref :db/cardinality :db.cardinality/one
   :db/isComponent true}
  {:db/ident :address/city :db/valueType :db.type/string :db/cardinality :db.cardinality/one}]"#;

const NAMES: [&str; 8] = [
    "Ivan", "Petr", "Sergei", "Oleg", "Yuri", "Dmitry", "Fedor", "Denis",
];

// An example meant to be read top to bottom, as the steps a user takes.
#[allow(clippy::too_many_lines)]
fn main() -> Result<(), vev::Error> {
    let path = std::env::args()
        .nth(1)
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::env::temp_dir().join("vev-demo.vev"));
    for suffix in ["", "-wal", "-shm"] {
        let mut p = path.clone().into_os_string();
        p.push(suffix);
        let _ = std::fs::remove_file(p);
    }
    let conn = Connection::open(&path)?;
    println!("created {}", path.display());
    conn.transact_edn(SCHEMA)?;
    println!("schema installed at basis-t {}", conn.db().basis_t());

    // Load 1,000 people in one transaction, each with a component address, friends by tempid.
    let mut tx = String::from("[");
    for i in 0..1000 {
        let friend = (i * 7 + 3) % 1000;
        tx.push_str(&format!(
            r#"{{:db/id "p{i}" :person/email "p{i}@example.com" :person/name "{}" :person/age {}
                :person/friend ["p{friend}"] :person/address {{:address/city "{}"}}}}"#,
            NAMES[i % 8],
            (i * 37) % 90 + 10,
            ["Oslo", "Riga", "Turku"][i % 3]
        ));
    }
    tx.push(']');
    let load = conn.transact_edn(&tx)?;
    println!(
        "loaded 1,000 people: {} datoms in one transaction",
        load.tx_data.len()
    );
    let t_loaded = load.db_after.basis_t();

    // Upsert through :person/email, and a retraction.
    conn.transact_edn(
        r#"[{:person/email "p1@example.com" :person/age 99}
                          [:db/retract [:person/email "p2@example.com"] :person/name]
                          [:db/add "datomic.tx" :db/doc "birthday batch"]]"#,
    )?;
    // Every transaction above was synced to the file before it returned; checkpoint the
    // indexes, close, and reopen: the reopened database reads the root and loads index
    // segments only as queries touch them.
    let started = std::time::Instant::now();
    let small = conn.transact_edn(r#"[{:person/email "p4@example.com" :person/age 44}]"#)?;
    println!(
        "a small durable transaction ({} datoms) took {:?}",
        small.tx_data.len(),
        started.elapsed()
    );
    conn.checkpoint()?;
    drop(conn);
    let started = std::time::Instant::now();
    let conn = Connection::open(&path)?;
    println!(
        "reopened at basis-t {} in {:?} ({} bytes on disk)",
        conn.db().basis_t(),
        started.elapsed(),
        std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0)
    );
    let db = conn.db();
    let kw = Keyword::new;
    let p1 = db.entity(lookup(&db, "p1@example.com")?);
    println!(
        "p1 is now {:?} years old; as of t {t_loaded} they were {:?}",
        p1.get(&kw("person/age"))?.and_then(|v| v.as_long()),
        db.as_of(TimePoint::T(t_loaded))
            .entity(p1.id())
            .get(&kw("person/age"))?
            .and_then(|v| v.as_long())
    );

    // Range over the AVET index: people aged 20 to 24.
    let age = db.entid(&kw("person/age")).expect("installed");
    let young = db
        .index_range(age, Some(Value::Long(20)), Some(Value::Long(25)))
        .collect::<Result<Vec<_>, _>>()?
        .len();
    println!("{young} people are aged 20 to 24 (AVET index range)");

    // Reverse navigation and components.
    let who_befriends_p3 = db
        .entity(lookup(&db, "p3@example.com")?)
        .reverse(&kw("person/friend"))?;
    let city = match p1.get_ref(&kw("person/address"))? {
        Some(address) => address.get(&kw("address/city"))?,
        None => None,
    };
    println!(
        "p3 is befriended by {} people; p1 lives in {}",
        who_befriends_p3.len(),
        city.map(|c| c.to_string()).unwrap_or_default()
    );

    // History: every assertion and retraction of p2's name.
    let p2 = lookup(&db, "p2@example.com")?;
    let name = db.entid(&kw("person/name")).expect("installed");
    for d in db.history().datoms(
        IndexOrder::Eavt,
        &[Component::Entity(p2), Component::Entity(name)],
    ) {
        let d = d?;
        println!(
            "history of p2's name: {} at t {} ({})",
            d.v,
            vev::ids::t_of(d.tx),
            if d.added { "asserted" } else { "retracted" }
        );
    }
    // Datalog: a join with a predicate, an aggregate, a recursive rule, a pull, and as-of.
    let show = |title: &str, query: &str, args: &[vev::Edn]| -> Result<(), vev::Error> {
        let started = std::time::Instant::now();
        let result = db.q(query, args)?;
        let text = result.to_edn().to_string();
        let shown: String = text.chars().take(160).collect();
        let more = if shown.len() < text.len() { " ..." } else { "" };
        println!(
            "{title} ({} rows, {:?}): {shown}{more}",
            result.len(),
            started.elapsed()
        );
        Ok(())
    };
    show(
        "Ivans in Riga",
        r#"[:find ?email :where [?p :person/name "Ivan"] [?p :person/address ?a]
                             [?a :address/city "Riga"] [?p :person/email ?email]]"#,
        &[],
    )?;
    show(
        "average age per city",
        r#"[:find ?city (avg ?age) :with ?p
            :where [?p :person/age ?age] [?p :person/address ?a] [?a :address/city ?city]]"#,
        &[],
    )?;
    let rules = vev::edn::parse(
        r#"[[(reach ?a ?b) [?a :person/friend ?b]]
            [(reach ?a ?b) [?a :person/friend ?x] (reach ?x ?b)]]"#,
    )?;
    show(
        "people p0 reaches through friends",
        r#"[:find (count ?b) . :in $ % ?email
            :where [?a :person/email ?email] (reach ?a ?b)]"#,
        &[rules, vev::Edn::String("p0@example.com".into())],
    )?;
    show(
        "pull p1 with friends",
        r#"[:find (pull ?p [:person/name :person/age {:person/friend [:person/name]}
                          {:person/address [:address/city]}]) .
            :where [?p :person/email "p1@example.com"]]"#,
        &[],
    )?;
    let then = db.as_of(TimePoint::T(t_loaded));
    let age_then = then.q(
        r#"[:find ?age . :where [?p :person/email "p1@example.com"] [?p :person/age ?age]]"#,
        &[],
    )?;
    println!(
        "as of t {t_loaded}, the query says p1 was {}",
        age_then.to_edn()
    );
    let history = db.history();
    let changes = history.q(
        r#"[:find ?name ?added :where [?p :person/email "p2@example.com"]
                                      [?p :person/name ?name _ ?added]]"#,
        &[],
    )?;
    println!("history query of p2's name: {}", changes.to_edn());

    let report = conn.verify()?.expect("a file-backed connection");
    println!(
        "verified {} log rows and {} index segments ({} datoms)",
        report.log_rows, report.segments, report.index_datoms
    );
    let last = db.tx_range(Some(db.basis_t()), None)?;
    println!(
        "the last transaction has {} datoms; the database holds {} datoms",
        last[0].datoms.len(),
        db.count(IndexOrder::Eavt, &[])?
    );
    Ok(())
}

fn lookup(db: &Db, email: &str) -> Result<u64, vev::StorageError> {
    let a = db.entid(&Keyword::new("person/email")).expect("installed");
    let found = db.entity_with_value(a, &Value::string(email))?;
    Ok(found.expect("a person with that email"))
}
