//! Every read command on a database file with one flipped byte in a segment of each index
//! (or in a log row): each exits 1 with `error[storage/corruption]`, or prints exactly what it
//! prints for the intact file (it did not need that segment or row). None prints less and
//! exits 0. The commands that must read it (a scan of its index; `log` and `export` for a log
//! row; `verify`) fail.

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use vev::{Connection, Edn, OpenOptions};

use vev::testing::CORRUPTION_PEOPLE as PEOPLE;

/// The corruption fixture (`vev::testing`), checkpointed and closed: every tree of the file
/// is in segments, the log tail is empty, and the file is one file (no -wal).
fn build(path: &Path) {
    vev::testing::write_corruption_fixture(path).unwrap();
}

/// The segments of each tree (`eavt`, ..., `retired vaet`).
fn trees(path: &Path) -> Vec<(&'static str, Vec<u64>)> {
    let conn = Connection::open_with(path, &OpenOptions::read_only()).unwrap();
    let trees = conn.db().tree_segment_ids();
    assert!(trees.iter().all(|(_, ids)| !ids.is_empty()), "{trees:?}");
    trees
}

/// A copy of the file with one byte flipped in each of segments `ids`.
fn corrupt_copy(intact: &Path, name: &str, ids: &[u64]) -> PathBuf {
    let path = intact.with_file_name(format!("{}.vev", name.replace(' ', "-")));
    std::fs::copy(intact, &path).unwrap();
    for &id in ids {
        vev::testing::flip_segment_byte(&path, id).unwrap();
    }
    path
}

/// Exit code, stdout and stderr of `vev ARGS`, with DB replaced by `db`.
fn run(args: &[String], db: &Path) -> (Option<i32>, String, String) {
    let args: Vec<String> = args
        .iter()
        .map(|a| {
            if a == "DB" {
                db.display().to_string()
            } else {
                a.clone()
            }
        })
        .collect();
    let out = Command::cargo_bin("vev")
        .unwrap()
        .args(&args)
        .output()
        .unwrap();
    let text = |b: Vec<u8>| String::from_utf8(b).unwrap();
    (out.status.code(), text(out.stdout), text(out.stderr))
}

/// `stats` without its size on disk (the copies' -wal files differ).
fn comparable(args: &[String], stdout: &str) -> String {
    if args[0] != "stats" {
        return stdout.to_string();
    }
    let Ok(Edn::Map(mut m)) = vev::edn::parse(stdout) else {
        panic!("stats printed {stdout}")
    };
    m.remove(&Edn::keyword("size-bytes"));
    Edn::Map(m).to_string()
}

fn commands() -> Vec<Vec<String>> {
    let mut out: Vec<Vec<&str>> = vec![
        vec![
            "query",
            "DB",
            "[:find ?e ?n ?t :where [?e :p/name ?n] [?e :p/tag ?t]]",
        ],
        vec![
            "query",
            "DB",
            "--history",
            "[:find ?e ?a ?v ?op :where [?e ?a ?v _ ?op]]",
        ],
        vec!["query", "DB", "[:find ?e ?f :where [?e :p/friend ?f]]"],
        vec!["log", "DB"],
        vec!["stats", "DB", "--format", "edn"],
        vec!["schema", "DB"],
        vec!["export", "DB"],
        vec!["verify", "DB"],
    ];
    for index in ["eavt", "aevt", "avet", "vaet"] {
        out.push(vec!["datoms", "DB", index]);
        out.push(vec!["datoms", "DB", index, "--history"]);
    }
    let mut out: Vec<Vec<String>> = out
        .into_iter()
        .map(|c| c.into_iter().map(String::from).collect())
        .collect();
    for i in (0..PEOPLE).step_by(PEOPLE / 9) {
        let lookup = format!(r#"[:p/email "p{i}@x"]"#);
        for pattern in ["[*]", "[:p/name {:p/_friend [:p/email]}]"] {
            out.push(vec![
                "pull".into(),
                "DB".into(),
                pattern.into(),
                lookup.clone(),
            ]);
        }
    }
    out
}

/// The commands that must read some segment of `tree`.
fn must_fail(tree: &str) -> Vec<Vec<String>> {
    let cmd = |c: &[&str]| c.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let mut out = vec![cmd(&["verify", "DB"])];
    match tree.split_once(' ') {
        Some((_, index)) => out.push(cmd(&["datoms", "DB", index, "--history"])),
        None if tree == "log" => {
            out.push(cmd(&["log", "DB"]));
            out.push(cmd(&["export", "DB"]));
        }
        None => {
            out.push(cmd(&["datoms", "DB", tree]));
            out.push(cmd(&["datoms", "DB", tree, "--history"]));
        }
    }
    if tree == "eavt" {
        out.push(cmd(&["stats", "DB", "--format", "edn"]));
    }
    out
}

#[test]
fn every_read_command_fails_on_a_corrupt_segment_it_needs_and_never_prints_less() {
    let dir = tempfile::tempdir().unwrap();
    let intact = dir.path().join("intact.vev");
    build(&intact);
    let commands = commands();
    let want: Vec<String> = commands
        .iter()
        .map(|c| {
            let (code, stdout, stderr) = run(c, &intact);
            assert_eq!(code, Some(0), "{c:?} on the intact file: {stderr}");
            comparable(c, &stdout)
        })
        .collect();
    let mut cases: Vec<(&str, PathBuf, String)> = trees(&intact)
        .into_iter()
        .map(|(tree, ids)| {
            let id = ids[ids.len() / 2];
            (
                tree,
                corrupt_copy(&intact, tree, &[id]),
                format!("segment {id}"),
            )
        })
        .collect();
    // A transaction the root covers (the fixture's second of four): only the commands that
    // read the whole log (`log`, `export`, `verify`) read its row.
    let log = intact.with_file_name("log-row.vev");
    std::fs::copy(&intact, &log).unwrap();
    vev::testing::flip_log_byte(&log, 2).unwrap();
    cases.push(("log", log, "log row t=2".into()));
    for (tree, path, id) in cases {
        let required = must_fail(tree);
        for (c, w) in commands.iter().zip(&want) {
            let (code, stdout, stderr) = run(c, &path);
            if code == Some(0) {
                assert!(!required.contains(c), "{tree} {id}: {c:?} succeeded");
                assert!(
                    &comparable(c, &stdout) == w,
                    "{tree} {id}: {c:?} printed otherwise"
                );
            } else {
                assert_eq!(code, Some(1), "{tree} {id}: {c:?}: {stderr}");
                assert!(
                    stderr.starts_with("error[storage/corruption]") && stderr.contains(&id),
                    "{tree} {id}: {c:?}: {stderr}"
                );
            }
        }
    }
}

#[test]
fn pull_through_a_lookup_ref_in_a_corrupt_avet_index_is_corruption_not_not_found() {
    let dir = tempfile::tempdir().unwrap();
    let intact = dir.path().join("intact.vev");
    build(&intact);
    let (_, avet) = trees(&intact)
        .into_iter()
        .find(|(t, _)| *t == "avet")
        .unwrap();
    let path = corrupt_copy(&intact, "avet-all", &avet);
    let pull: Vec<String> = ["pull", "DB", "[*]", r#"[:p/email "p450@x"]"#]
        .map(String::from)
        .to_vec();
    let (code, stdout, stderr) = run(&pull, &path);
    assert_eq!(code, Some(1), "{stdout}");
    assert!(stderr.starts_with("error[storage/corruption]"), "{stderr}");
    assert!(stdout.is_empty());
}
