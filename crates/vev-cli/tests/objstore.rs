//! The `vev` commands on a database whose segments are in an S3-compatible object store
//! (an `s3://...?log=postgres://...` URL): `copy` from a file into it and back, `query`,
//! `verify`, and `serve` answering psql, on a throwaway PostgreSQL 15 and moto server the
//! test starts and stops.

use std::io::{BufRead, BufReader};
use std::process::{Command as Process, Stdio};

use assert_cmd::Command;

mod common;
use vev_postgres::testing;

fn vev() -> Command {
    Command::cargo_bin("vev").expect("the vev binary is built")
}

fn ok(out: &std::process::Output) -> String {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn copy_query_verify_and_serve_an_s3_url() {
    let Some(pg) = testing::for_test("the object-store CLI test") else {
        return;
    };
    let tmp = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
    let Some(moto) = vev_objstore::testing::for_test("the object-store CLI test", tmp) else {
        return;
    };
    moto.create_bucket("cli").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("app.vev");
    let file = file.to_str().unwrap();
    vev()
        .args(["transact", file])
        .write_stdin(
            r#"[{:db/ident :person/name :db/valueType :db.type/string :db/cardinality :db.cardinality/one}]"#,
        )
        .assert()
        .success();
    vev()
        .args(["transact", file])
        .write_stdin(r#"[{:person/name "Ann"} {:person/name "Bo"}]"#)
        .assert()
        .success();
    let url = moto.url("cli", "app", &pg.create_db("cli").unwrap());
    let copied = ok(&vev().args(["copy", file, &url]).output().unwrap());
    assert!(copied.contains(":records 2"), "{copied}");
    let text = ok(&vev()
        .args(["query", &url, "[:find ?n :where [_ :person/name ?n]]"])
        .output()
        .unwrap());
    assert!(text.contains("Ann") && text.contains("Bo"), "{text}");
    ok(&vev().args(["verify", &url]).output().unwrap());
    let back = dir.path().join("back.vev");
    ok(&vev()
        .args(["copy", &url, back.to_str().unwrap()])
        .output()
        .unwrap());
    let text = ok(&vev()
        .args([
            "query",
            back.to_str().unwrap(),
            "[:find ?n :where [_ :person/name ?n]]",
        ])
        .output()
        .unwrap());
    assert!(text.contains("Ann") && text.contains("Bo"), "{text}");
    serve_answers_psql(&url);
}

/// `vev serve` on the URL (its store's requests run on a runtime of their own, inside the
/// server's): psql creates a table, inserts and reads back.
fn serve_answers_psql(url: &str) {
    let mut server = Process::new(env!("CARGO_BIN_EXE_vev"))
        .args(["serve", url, "--port", "0"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(server.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let Some(port) = common::served_port(&line) else {
        let _ = server.kill();
        panic!("vev serve printed {line:?}");
    };
    let out = common::psql(port)
        .args([
            "-A",
            "-t",
            "-c",
            "CREATE TABLE pet (id int PRIMARY KEY, name text)",
            "-c",
            "INSERT INTO pet VALUES (1, 'Rex'), (2, 'Tom')",
            "-c",
            "SELECT name FROM pet ORDER BY id",
        ])
        .output();
    let _ = server.kill();
    let _ = server.wait();
    let out = out.expect("psql runs");
    let text = ok(&out);
    assert!(text.contains("Rex\nTom"), "{text}");
}
