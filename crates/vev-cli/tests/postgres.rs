//! The `vev` commands on a database stored in PostgreSQL (a `postgres://` URL in place of
//! the file), on a throwaway PostgreSQL 15 the test starts and stops.

use assert_cmd::Command;
use vev_postgres::testing;

fn vev() -> Command {
    Command::cargo_bin("vev").expect("the vev binary is built")
}

#[test]
fn transact_and_query_a_postgres_url() {
    let Some(pg) = testing::for_test("the PostgreSQL URL test") else {
        return;
    };
    let url = pg.create_db("cli").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let tx = dir.path().join("tx.edn");
    std::fs::write(
        &tx,
        r#"[{:db/ident :person/name :db/valueType :db.type/string :db/cardinality :db.cardinality/one}]"#,
    )
    .unwrap();
    vev()
        .args(["transact", &url, tx.to_str().unwrap()])
        .assert()
        .success();
    vev()
        .args(["transact", &url])
        .write_stdin(r#"[{:person/name "Ann"} {:person/name "Bo"}]"#)
        .assert()
        .success();
    let out = vev()
        .args(["query", &url, "[:find ?n :where [_ :person/name ?n]]"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("Ann") && text.contains("Bo"), "{text}");
    // As of the schema transaction: no names yet.
    let out = vev()
        .args([
            "query",
            &url,
            "--as-of",
            "1",
            "[:find ?n :where [_ :person/name ?n]]",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!text.contains("Ann"), "{text}");
    // An unreachable server: the error's code, and never the password.
    let port = testing::free_port().unwrap();
    let bad = format!("postgres://vev:hunter2@127.0.0.1:{port}/cli");
    let out = vev()
        .args(["query", &bad, "[:find ?n :where [_ :person/name ?n]]"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("storage/unavailable"), "{err}");
    assert!(!err.contains("hunter2"), "{err}");
}
