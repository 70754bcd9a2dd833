//! Runs every conformance case as its own test, on each backend: memory, and a SQLite file
//! that is checkpointed along the way and reopened before the final checks.

use libtest_mimic::{Arguments, Failed, Trial};

fn main() {
    let args = Arguments::from_args();
    let dir = vev_testsuite::cases_dir();
    let mut trials = Vec::new();
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
                    for (prefix, backend) in [
                        ("memory", vev_testsuite::Backend::Memory),
                        ("sqlite", vev_testsuite::Backend::Sqlite),
                    ] {
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
    libtest_mimic::run(&args, trials).exit();
}
