//! The README demo: create a database, load people, change some of them, and answer
//! questions from the indexes, the entity API and the past.

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

fn main() -> Result<(), vev::Error> {
    let conn = Connection::open_in_memory();
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
    let db = conn.db();
    let kw = Keyword::new;
    let p1 = db.entity(lookup(&db, "p1@example.com"));
    println!(
        "p1 is now {:?} years old; as of t {t_loaded} they were {:?}",
        p1.get(&kw("person/age")).and_then(|v| v.as_long()),
        db.as_of(TimePoint::T(t_loaded))
            .entity(p1.id())
            .get(&kw("person/age"))
            .and_then(|v| v.as_long())
    );

    // Range over the AVET index: people aged 20 to 24.
    let age = db.entid(&kw("person/age")).expect("installed");
    let young = db
        .index_range(age, Some(Value::Long(20)), Some(Value::Long(25)))
        .count();
    println!("{young} people are aged 20 to 24 (AVET index range)");

    // Reverse navigation and components.
    let who_befriends_p3 = db
        .entity(lookup(&db, "p3@example.com"))
        .reverse(&kw("person/friend"));
    let city = p1
        .get_ref(&kw("person/address"))
        .and_then(|a| a.get(&kw("address/city")));
    println!(
        "p3 is befriended by {} people; p1 lives in {}",
        who_befriends_p3.len(),
        city.map(|c| c.to_string()).unwrap_or_default()
    );

    // History: every assertion and retraction of p2's name.
    let p2 = lookup(&db, "p2@example.com");
    let name = db.entid(&kw("person/name")).expect("installed");
    for d in db.history().datoms(
        IndexOrder::Eavt,
        &[Component::Entity(p2), Component::Entity(name)],
    ) {
        println!(
            "history of p2's name: {} at t {} ({})",
            d.v,
            vev::ids::t_of(d.tx),
            if d.added { "asserted" } else { "retracted" }
        );
    }
    let last = db.tx_range(Some(db.basis_t()), None);
    println!(
        "the last transaction has {} datoms; the database holds {} datoms",
        last[0].datoms.len(),
        db.count(IndexOrder::Eavt, &[])
    );
    Ok(())
}

fn lookup(db: &Db, email: &str) -> u64 {
    let a = db.entid(&Keyword::new("person/email")).expect("installed");
    db.datoms(
        IndexOrder::Avet,
        &[Component::Entity(a), Component::Value(Value::string(email))],
    )
    .next()
    .map(|d| d.e)
    .expect("a person with that email")
}
