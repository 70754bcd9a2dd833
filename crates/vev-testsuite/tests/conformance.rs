//! Runs every conformance case as its own test, on each backend: memory, a SQLite file that
//! is checkpointed along the way and reopened before the final checks, and the same on
//! PostgreSQL (a schema per case in a throwaway PostgreSQL 15 this runner starts and stops;
//! skipped, with a note, where PostgreSQL 15 is not installed, and a failure under CI).

use libtest_mimic::{Arguments, Failed, Trial};

fn main() {
    let args = Arguments::from_args();
    let dir = vev_testsuite::cases_dir();
    let mut trials = Vec::new();
    let server = postgres_server();
    let backends: &[(&str, vev_testsuite::Backend)] = if server.is_some() {
        &[
            ("memory", vev_testsuite::Backend::Memory),
            ("sqlite", vev_testsuite::Backend::Sqlite),
            ("postgres", vev_testsuite::Backend::Postgres),
        ]
    } else {
        &[
            ("memory", vev_testsuite::Backend::Memory),
            ("sqlite", vev_testsuite::Backend::Sqlite),
        ]
    };
    for path in vev_testsuite::case_files(&dir) {
        let label = path
            .strip_prefix(&dir)
            .unwrap_or(&path)
            .with_extension("")
            .display()
            .to_string();
        match vev_testsuite::load_file(&path, &label) {
            Ok(cases) => {
                for case in cases {
                    for &(prefix, backend) in backends {
                        let name = format!("{prefix}::{}::{}", case.file, case.name);
                        let case = case.clone();
                        trials.push(Trial::test(name, move || {
                            vev_testsuite::run_case_on(&case, backend).map_err(Failed::from)
                        }));
                    }
                }
            }
            Err(e) => trials.push(Trial::test(format!("load::{label}"), move || {
                Err(Failed::from(e))
            })),
        }
    }
    let conclusion = libtest_mimic::run(&args, trials);
    // Stop the server before exiting (`exit` runs no destructors).
    drop(server);
    conclusion.exit();
}

/// A throwaway PostgreSQL with a database for the cases, unless the run lists tests only or
/// PostgreSQL 15 is not installed.
fn postgres_server() -> Option<vev_postgres::testing::TempServer> {
    if std::env::args().any(|a| a == "--list") {
        return None;
    }
    if !vev_postgres::testing::available() {
        assert!(
            std::env::var_os("CI").is_none(),
            "PostgreSQL 15 is not installed at {} (scripts/test installs it)",
            vev_postgres::testing::BIN
        );
        eprintln!("postgres backend skipped: PostgreSQL 15 is not installed");
        return None;
    }
    let server = vev_postgres::testing::TempServer::start().expect("start a throwaway postgresql");
    let url = server
        .create_db("conformance")
        .expect("create its database");
    vev_testsuite::set_postgres_url(url);
    Some(server)
}
