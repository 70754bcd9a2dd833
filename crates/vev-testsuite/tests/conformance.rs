//! Runs every conformance case file as its own test (memory backend).

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
                    let name = format!("memory::{}::{}", case.file, case.name);
                    trials.push(Trial::test(name, move || {
                        vev_testsuite::run_case(&case).map_err(Failed::from)
                    }));
                }
            }
            Err(e) => trials.push(Trial::test(format!("load::{label}"), move || {
                Err(Failed::from(e))
            })),
        }
    }
    libtest_mimic::run(&args, trials).exit();
}
