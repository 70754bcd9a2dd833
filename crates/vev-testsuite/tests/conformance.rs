//! Runs every conformance case as its own test, on each backend: memory, a SQLite file that
//! is checkpointed along the way and reopened before the final checks, and the same on
//! PostgreSQL (a schema per case in a throwaway PostgreSQL 15 this runner starts and stops;
//! skipped, with a note, where PostgreSQL 15 is not installed, and a failure under CI), and
//! with the segments in an S3-compatible object store (moto, which this runner starts too).
//! Every case runs on every backend; `VEV_OBJSTORE_EVERY=N` runs only every Nth on the
//! object store, for a quicker local run (each case costs a few dozen requests to a Python
//! server: about 3 minutes for all of them on a 2-core machine).

use libtest_mimic::{Arguments, Failed, Trial};

fn main() {
    let args = Arguments::from_args();
    let dir = vev_testsuite::cases_dir();
    let mut trials = Vec::new();
    let server = postgres_server();
    let moto = server.as_ref().and_then(|_| objstore_server());
    let mut backends = vec![
        ("memory", vev_testsuite::Backend::Memory),
        ("sqlite", vev_testsuite::Backend::Sqlite),
    ];
    if server.is_some() {
        backends.push(("postgres", vev_testsuite::Backend::Postgres));
    }
    let every: usize = std::env::var("VEV_OBJSTORE_EVERY")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1)
        .max(1);
    let mut case_number = 0usize;
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
                    let mut these = backends.clone();
                    if moto.is_some() && case_number.is_multiple_of(every) {
                        these.push(("objstore", vev_testsuite::Backend::Objstore));
                    }
                    case_number += 1;
                    for (prefix, backend) in these {
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
    // Stop the servers before exiting (`exit` runs no destructors).
    drop(moto);
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

/// A throwaway moto with a bucket for the object-store backend (its logs go in the
/// PostgreSQL backend's database).
fn objstore_server() -> Option<vev_objstore::testing::MotoServer> {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
    let moto = vev_objstore::testing::for_test("the objstore backend", dir)?;
    moto.create_bucket("vev-cases").expect("create its bucket");
    vev_testsuite::set_objstore_url(
        "s3://vev-cases".to_owned(),
        format!("endpoint={}&allow_http=true", moto.endpoint()),
    );
    Some(moto)
}
