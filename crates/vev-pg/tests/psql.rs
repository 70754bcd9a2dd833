//! `vev serve` through the machine's `psql` (PostgreSQL 15's libpq and its simple query
//! protocol): a round trip of SQL, error messages as psql prints them, and ON_ERROR_STOP.

mod common;

use std::process::Output;
use std::time::Duration;

use common::{describe, run, script, TestServer};

/// `psql` on PATH, or a message saying why the test does nothing.
fn have_psql() -> bool {
    if common::on_path("psql") {
        return true;
    }
    eprintln!("SKIPPED: psql is not on PATH (install postgresql-client-15 to run this test)");
    false
}

/// psql against the server: unaligned, tuples only, no psqlrc, then `args`.
fn psql(server: &TestServer, args: &[&str]) -> Output {
    let port = server.port.to_string();
    let mut all = vec![
        "-h",
        "127.0.0.1",
        "-p",
        &port,
        "-U",
        "vev",
        "-d",
        "app",
        "-X",
        "-A",
        "-t",
        "-w",
    ];
    all.extend_from_slice(args);
    run("psql", &all, Duration::from_secs(30))
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn psql_creates_inserts_and_selects() {
    if !have_psql() {
        return;
    }
    let server = TestServer::start();
    let (_dir, file) = script(
        "setup.sql",
        "CREATE TABLE city (id int PRIMARY KEY, name text, pop bigint);\n\
         INSERT INTO city VALUES (1, 'Oslo', 709000), (2, 'Bergen', 286000);\n\
         INSERT INTO city (id, name) VALUES (3, 'Nowhere');\n\
         UPDATE city SET pop = pop + 1000 WHERE name = 'Bergen';\n\
         SELECT id, name, pop FROM city ORDER BY id;\n\
         SELECT count(*), sum(pop) FROM city WHERE pop IS NOT NULL;\n",
    );
    let out = psql(&server, &["-f", file.to_str().unwrap()]);
    assert!(out.status.success(), "{}", describe(&out));
    let text = stdout(&out);
    // psql -A -t prints command tags of non-queries and each row as `a|b|c`.
    let lines: Vec<&str> = text.lines().filter(|l| !l.is_empty()).collect();
    assert_eq!(
        lines,
        [
            "CREATE TABLE",
            "INSERT 0 2",
            "INSERT 0 1",
            "UPDATE 1",
            "1|Oslo|709000",
            "2|Bergen|287000",
            "3|Nowhere|",
            "2|996000",
        ],
        "{}",
        describe(&out)
    );
    // A second psql session sees what the first committed.
    let out = psql(&server, &["-c", "SELECT name FROM city WHERE id = 3"]);
    assert!(out.status.success(), "{}", describe(&out));
    assert_eq!(stdout(&out).trim(), "Nowhere");
    server.stop();
}

#[test]
fn psql_prints_the_error_and_its_text() {
    if !have_psql() {
        return;
    }
    let server = TestServer::start();
    let out = psql(&server, &["-c", "SELECT * FROM no_such_table"]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("ERROR:  relation \"no_such_table\" does not exist"),
        "{}",
        describe(&out)
    );
    let out = psql(
        &server,
        &[
            "-v",
            "VERBOSITY=verbose",
            "-c",
            "CREATE TABLE k (id int PRIMARY KEY)",
            "-c",
            "INSERT INTO k VALUES (1), (1)",
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("ERROR:  23505:"),
        "the SQLSTATE: {}",
        describe(&out)
    );
    server.stop();
}

/// Without ON_ERROR_STOP psql runs every statement of a script; with it, psql stops at the
/// first error and exits 3.
#[test]
fn psql_on_error_stop() {
    if !have_psql() {
        return;
    }
    let server = TestServer::start();
    let body = "INSERT INTO log VALUES (1);\n\
                INSERT INTO log VALUES ('not a number');\n\
                INSERT INTO log VALUES (2);\n";
    let out = psql(&server, &["-c", "CREATE TABLE log (n int)"]);
    assert!(out.status.success(), "{}", describe(&out));

    let (_d1, go_on) = script("go_on.sql", body);
    let out = psql(&server, &["-f", go_on.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("invalid input syntax for type integer: \"not a number\""),
        "{}",
        describe(&out)
    );
    let out = psql(&server, &["-c", "SELECT n FROM log ORDER BY n"]);
    assert_eq!(stdout(&out).trim(), "1\n2", "{}", describe(&out));

    let (_d2, stop) = script(
        "stop.sql",
        &format!("\\set ON_ERROR_STOP on\nDELETE FROM log;\n{body}"),
    );
    let out = psql(&server, &["-f", stop.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(3), "{}", describe(&out));
    let out = psql(&server, &["-c", "SELECT n FROM log ORDER BY n"]);
    assert_eq!(
        stdout(&out).trim(),
        "1",
        "the statement after the error did not run: {}",
        describe(&out)
    );
    server.stop();
}
