//! `vev copy SRC DEST`: round trips (file → file, and file → PostgreSQL → file on a
//! throwaway PostgreSQL 15) compared through `vev export`, which prints every transaction
//! with its instant, the basis-t and the next entity id; a destination with transactions
//! refused; and the copying process killed (SIGKILL) at several moments, after which the
//! destination is absent, empty (and a copy run again succeeds) or complete, never partial.

use std::path::Path;
use std::process::Stdio;
use std::time::Instant;

use assert_cmd::Command;
use vev::edn::parse;
use vev::Edn;
use vev_postgres::testing;

fn vev() -> Command {
    Command::cargo_bin("vev").expect("the vev binary is built")
}

fn run_ok(args: &[&str]) -> String {
    let out = vev().args(args).output().expect("runs");
    assert!(
        out.status.success(),
        "vev {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

fn get<'a>(map: &'a Edn, key: &str) -> &'a Edn {
    match map {
        Edn::Map(m) => m
            .get(&Edn::Keyword(vev::Keyword::new(key)))
            .unwrap_or_else(|| panic!("no {key} in {map}")),
        other => panic!("not a map: {other}"),
    }
}

/// `vev demo` of `people` people in `dir`: its database file.
fn demo(dir: &Path, people: usize) -> std::path::PathBuf {
    run_ok(&["demo", s(dir), "--people", &people.to_string()]);
    let db = dir.join("demo.vev");
    assert!(db.exists());
    db
}

#[test]
fn copy_round_trips_and_refuses_a_database_with_transactions() {
    let dir = tempfile::tempdir().unwrap();
    let src = demo(dir.path(), 300);
    let dest = dir.path().join("copy.vev");
    let out = parse(&run_ok(&["copy", s(&src), s(&dest)])).unwrap();
    let basis_t = get(&out, "basis-t").clone();
    assert_eq!(get(&out, "copy"), &Edn::string(s(&dest)));
    assert_eq!(get(&out, "records"), &basis_t);
    for key in ["datoms", "bytes", "verified-datoms"] {
        assert!(
            matches!(get(&out, key), Edn::Integer(n) if *n > 0),
            "{key}: {out}"
        );
    }
    assert!(matches!(get(&out, "seconds"), Edn::Float(_)), "{out}");
    let exported = run_ok(&["export", s(&src)]);
    assert_eq!(run_ok(&["export", s(&dest)]), exported);
    // Again: the destination now holds transactions.
    let out = vev().args(["copy", s(&src), s(&dest)]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.starts_with("error[storage/not-empty]: "), "{err}");
    assert_eq!(run_ok(&["export", s(&dest)]), exported, "left as it was");
    // A source that does not exist.
    let out = vev()
        .args(["copy", s(&dir.path().join("none.vev")), s(&dest)])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).starts_with("error[cli/not-found]"));

    let Some(pg) = testing::for_test("the PostgreSQL part") else {
        return;
    };
    let url = pg.create_db("copied").unwrap();
    run_ok(&["copy", s(&src), &url]);
    assert_eq!(run_ok(&["export", &url]), exported);
    let back = dir.path().join("back.vev");
    let out = parse(&run_ok(&["copy", &url, s(&back), "--no-verify"])).unwrap();
    assert_eq!(get(&out, "verified-datoms"), &Edn::Integer(0));
    assert_eq!(run_ok(&["export", s(&back)]), exported);
    let out = vev().args(["copy", s(&src), &url]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.starts_with("error[storage/not-empty]: "), "{err}");
}

/// `vev copy` killed with SIGKILL at moments spread over an uninterrupted copy's duration:
/// the destination is then absent, empty or complete (the whole database, as `vev export`
/// shows it), and a copy run again into an absent or empty one succeeds.
#[test]
fn a_killed_copy_leaves_the_destination_empty_or_complete() {
    let dir = tempfile::tempdir().unwrap();
    let src = demo(dir.path(), 3000);
    let exported = run_ok(&["export", s(&src)]);
    let started = Instant::now();
    run_ok(&["copy", s(&src), s(&dir.path().join("timed.vev"))]);
    let whole = started.elapsed();
    let moments = 10;
    let (mut absent, mut empty, mut complete) = (0, 0, 0);
    for k in 0..moments {
        let dest = dir.path().join(format!("killed-{k}.vev"));
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_vev"))
            .args(["copy", s(&src), s(&dest)])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(whole * k / moments);
        child.kill().unwrap(); // SIGKILL
        let status = child.wait().unwrap();
        if !dest.exists() {
            absent += 1;
        } else {
            let out = vev().args(["export", s(&dest)]).output().unwrap();
            assert!(
                out.status.success(),
                "moment {k}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            let text = String::from_utf8(out.stdout).unwrap();
            if text == exported {
                complete += 1;
                continue;
            }
            let header = text.lines().nth(1).unwrap_or_default();
            assert!(
                text.contains(":vev.export/basis-t 0\n"),
                "moment {k} ({status}): neither empty nor complete: {header}"
            );
            empty += 1;
        }
        run_ok(&["copy", s(&src), s(&dest)]);
        assert_eq!(
            run_ok(&["export", s(&dest)]),
            exported,
            "moment {k}: retried"
        );
    }
    eprintln!(
        "{moments} kills over {whole:?}: {absent} absent, {empty} empty, {complete} complete"
    );
    assert_eq!(absent + empty + complete, moments);
    // The moments that fell inside the copy met an unfinished destination at least once.
    assert!(absent + empty > 0, "{absent} absent, {empty} empty");
}
