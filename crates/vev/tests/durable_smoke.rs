use vev::{Connection, OpenOptions};

#[test]
fn reopen_after_commits_and_checkpoint() {
    let dir = std::env::temp_dir().join(format!("vev-smoke-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("a.vev");
    {
        let conn = Connection::open_with(
            &path,
            &OpenOptions {
                checkpoint_datoms: 500,
                ..OpenOptions::default()
            },
        )
        .unwrap();
        conn.transact_edn(r#"[{:db/ident :p/name :db/valueType :db.type/string :db/cardinality :db.cardinality/one :db/unique :db.unique/identity}
                              {:db/ident :p/age :db/valueType :db.type/long :db/cardinality :db.cardinality/one}]"#).unwrap();
        for i in 0..300 {
            conn.transact_edn(&format!(r#"[{{:p/name "n{i}" :p/age {i}}}]"#))
                .unwrap();
        }
        conn.transact_edn(r#"[{:p/name "n5" :p/age 500}]"#).unwrap();
    }
    let conn = Connection::open(&path).unwrap();
    let db = conn.db();
    assert_eq!(db.basis_t(), 302);
    let r = db
        .q(
            "[:find ?a . :where [?e :p/name \"n5\"] [?e :p/age ?a]]",
            &[],
        )
        .unwrap();
    assert_eq!(r.to_edn().to_string(), "500");
    let r = db
        .q("[:find (count ?e) . :where [?e :p/age]]", &[])
        .unwrap();
    assert_eq!(r.to_edn().to_string(), "300");
    let report = conn.verify().unwrap().unwrap();
    assert_eq!(report.log_rows, 302);
    conn.checkpoint().unwrap();
    drop(conn);
    let conn = Connection::open(&path).unwrap();
    let h = conn
        .db()
        .history()
        .q("[:find (count ?a) . :where [?e :p/age ?a _ false]]", &[])
        .unwrap();
    assert_eq!(h.to_edn().to_string(), "1");
    conn.verify().unwrap();
    let second = Connection::open(&path).unwrap_err();
    assert_eq!(second.code(), "storage/locked");
    let reader = Connection::open_with(&path, &OpenOptions::read_only()).unwrap();
    assert_eq!(reader.db().basis_t(), 302);
    conn.transact_edn(r#"[{:p/name "new"}]"#).unwrap();
    assert_eq!(reader.db().basis_t(), 303);
    std::fs::remove_dir_all(&dir).unwrap();
}
