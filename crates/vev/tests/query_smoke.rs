use vev::{Connection, Edn};

fn people() -> Connection {
    let conn = Connection::open_in_memory();
    conn.transact_edn(
        r#"[{:db/ident :name :db/valueType :db.type/string :db/cardinality :db.cardinality/one}
            {:db/ident :age :db/valueType :db.type/long :db/cardinality :db.cardinality/one}
            {:db/ident :follows :db/valueType :db.type/ref :db/cardinality :db.cardinality/many}]"#,
    )
    .unwrap();
    conn.transact_edn(
        r#"[{:db/id "a" :name "Ivan" :age 30 :follows "b"}
            {:db/id "b" :name "Petr" :age 20 :follows "c"}
            {:db/id "c" :name "Oleg" :age 40}]"#,
    )
    .unwrap();
    conn
}

fn q(conn: &Connection, query: &str, args: &[&str]) -> Edn {
    let args: Vec<Edn> = args.iter().map(|a| vev::edn::parse(a).unwrap()).collect();
    conn.db().q(query, &args).unwrap().to_edn()
}

fn edn(s: &str) -> Edn {
    vev::edn::parse(s).unwrap()
}

#[test]
fn smoke_join_predicate_aggregate_rule() {
    let conn = people();
    assert_eq!(
        q(
            &conn,
            r#"[:find ?n ?a :where [?e :name ?n] [?e :age ?a] [(> ?a 25)]]"#,
            &[]
        ),
        edn(r#"#{["Ivan" 30] ["Oleg" 40]}"#)
    );
    assert_eq!(
        q(&conn, r#"[:find (sum ?a) . :where [_ :age ?a]]"#, &[]),
        edn("90")
    );
    assert_eq!(
        q(
            &conn,
            r#"[:find [?n2 ...] :in $ % ?n :where [?e :name ?n] (follows ?e ?e2) [?e2 :name ?n2]]"#,
            &[
                r#"[[(follows ?x ?y) [?x :follows ?y]] [(follows ?x ?y) [?x :follows ?t] (follows ?t ?y)]]"#,
                r#""Ivan""#
            ]
        ),
        edn(r#"["Petr" "Oleg"]"#)
    );
    assert_eq!(
        q(
            &conn,
            r#"[:find ?n :where [?e :name ?n] (not [?e :follows _])]"#,
            &[]
        ),
        edn(r#"#{["Oleg"]}"#)
    );
    assert_eq!(
        q(
            &conn,
            r#"[:find (pull ?e [:name {:follows [:name]}]) . :where [?e :name "Ivan"]]"#,
            &[]
        ),
        edn(r#"{:name "Ivan" :follows [{:name "Petr"}]}"#)
    );
}
