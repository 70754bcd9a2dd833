//! `vev repl`: driven through a pseudo-terminal (rustyline's line editing, multi-line entries,
//! Tab completion, history file) and scripted through a pipe (no terminal, same output).

use std::path::Path;

use assert_cmd::Command;

mod common;
use common::Live;

const SCHEMA: &str = r#":tx [{:db/ident :person/name :db/valueType :db.type/string :db/cardinality :db.cardinality/one}
 {:db/ident :person/age :db/valueType :db.type/long :db/cardinality :db.cardinality/one}]
"#;

/// Run a scripted session (stdin a pipe); returns (stdout, stderr) and checks exit status 0.
fn scripted(db: &Path, script: &str) -> (String, String) {
    let (out, err, code) = scripted_status(db, script);
    assert_eq!(code, Some(0), "the session ends with status 0: {err}");
    (out, err)
}

/// Run a scripted session; returns (stdout, stderr, exit code).
fn scripted_status(db: &Path, script: &str) -> (String, String, Option<i32>) {
    let out = Command::cargo_bin("vev")
        .expect("the vev binary is built")
        .args(["repl", db.to_str().expect("utf-8 path")])
        .env("VEV_HISTORY", "")
        .write_stdin(script)
        .output()
        .expect("runs");
    (
        String::from_utf8(out.stdout).expect("utf-8"),
        String::from_utf8(out.stderr).expect("utf-8"),
        out.status.code(),
    )
}

#[test]
fn scripted_session_without_a_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.vev");
    let script = format!(
        "{SCHEMA}:tx [{{:person/name \"Ann\" :person/age 30}}]\n\
         :tx [{{:person/name \"Bo\"\n       :person/age 41}}] ; two lines\n\
         ; a comment alone\n\
         [:find ?n ?a\n :where [?e :person/name ?n] ; not a ] bracket\n        [?e :person/age ?a]]\n\
         [:find ?x :where [?e :person/nmae ?x]]\n\
         :nope\n\
         :as-of 2\n\
         [:find ?n :where [_ :person/name ?n]]\n\
         :as-of\n\
         :history\n\
         [:find (count ?n) . :where [_ :person/name ?n]]\n\
         :quit\n\
         [:find ?n :where [_ :person/name ?n]]\n"
    );
    let (out, err, code) = scripted_status(&db, &script);
    assert_eq!(code, Some(1), "two entries failed");
    let expected = "\
{:basis-t 1, :datoms 7, :tempids {}, :tx 13194139533313}
{:basis-t 2, :datoms 3, :tempids {}, :tx 13194139533314}
{:basis-t 3, :datoms 3, :tempids {}, :tx 13194139533315}
?n  | ?a
----+---
Ann | 30
Bo  | 41
(2 rows)
queries see the database as of 2
?n
---
Ann
(1 row)
as of: cleared
history view on
(count ?n)
----------
2
(1 row)
";
    assert_eq!(out, expected, "stops at :quit");
    assert_eq!(
        err,
        "error[query/unknown-attribute]: unknown attribute :person/nmae\n \
         --> input:1:18\n\
         1 | [:find ?x :where [?e :person/nmae ?x]]\n  \
         |                  ^\n\
         error[cli/invalid-argument]: unknown command :nope (:help lists them)\n"
    );
}

#[test]
fn scripted_unfinished_entry_is_an_error_not_a_hang() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.vev");
    let (out, err, code) = scripted_status(&db, "[:find ?e :where [?e :db/ident]\n");
    assert_eq!(code, Some(1));
    assert_eq!(out, "");
    assert!(err.starts_with("error[edn/"), "{err}");
}

/// Piped input: the exit status says whether every entry succeeded.
#[test]
fn scripted_exit_status_is_one_when_an_entry_failed() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.vev");
    let (_, err, code) = scripted_status(
        &db,
        &format!("{SCHEMA}[:find ?e :where [?e :person/name]]\n"),
    );
    assert_eq!((code, err.as_str()), (Some(0), ""));
    for bad in [
        ":tx [{:person/age \"old\"}]\n",
        "[:find ?x :where [?e :person/nmae ?x]]\n",
        ":as-of soon\n",
        ":nope\n",
    ] {
        let (_, err, code) = scripted_status(
            &db,
            &format!("{bad}[:find ?e . :where [?e :person/name]]\n"),
        );
        assert_eq!(code, Some(1), "{bad}: {err}");
        assert!(err.starts_with("error["), "{err}");
    }
}

/// Several entries in one line, and several lines in one write: every entry runs, in order.
#[test]
fn type_ahead_runs_every_entry() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.vev");
    scripted(&db, SCHEMA);
    let (out, err) = scripted(
        &db,
        ":tx [{:person/name \"Ann\"}] :tx [{:person/name \"Bo\"}] ; two\n\
         [:find (count ?e) . :where [?e :person/name]] [:find ?n . :where [?e :person/name ?n] [(= ?n \"Bo\")]]\n\
         :as-of 2 ; a comment\n\
         [:find ?n :where [_ :person/name ?n]] :now\n\
         [:find (count ?e) . :where [?e :person/name]]\n",
    );
    assert_eq!(err, "");
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines[0].starts_with("{:basis-t 2,"), "{out}");
    assert!(lines[1].starts_with("{:basis-t 3,"), "{out}");
    assert_eq!(
        &lines[2..],
        [
            "(count ?e)",
            "----------",
            "2",
            "(1 row)",
            "?n",
            "--",
            "Bo",
            "(1 row)",
            "queries see the database as of 2",
            "?n",
            "---",
            "Ann",
            "(1 row)",
            "queries see the database now",
            "(count ?e)",
            "----------",
            "2",
            "(1 row)",
        ],
        "{out}"
    );
}

/// An idle REPL holds no lock: another process writes meanwhile, and the REPL's next query
/// sees it. Its own `:tx` takes the lock only while it runs.
#[test]
fn an_idle_repl_lets_another_process_write() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.vev");
    scripted(&db, SCHEMA);
    let path = db.to_str().unwrap();
    let mut repl = Live::spawn(&["repl", path]);
    // Entries written in one write run as they arrive, before stdin closes.
    repl.write(":tx [{:person/name \"Ann\"}]\n[:find (count ?e) . :where [?e :person/name]]\n");
    assert!(repl.line().starts_with("{:basis-t 2,"));
    assert_eq!(
        [repl.line(), repl.line(), repl.line(), repl.line()],
        ["(count ?e)", "----------", "1", "(1 row)"]
    );
    // The REPL sits idle, its file open: a writer in another process gets the lock.
    let out = Command::cargo_bin("vev")
        .unwrap()
        .args(["transact", path])
        .write_stdin("[{:person/name \"Bo\"}]")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let writer = vev::Connection::open(&db).expect("no lock is held by the idle repl");
    writer.transact_edn("[{:person/name \"Cy\"}]").unwrap();
    repl.write("[:find (count ?e) . :where [?e :person/name]]\n");
    assert_eq!(
        [repl.line(), repl.line(), repl.line(), repl.line()],
        ["(count ?e)", "----------", "3", "(1 row)"]
    );
    // While another writer holds the lock, a :tx fails at once (no --wait) and the session
    // goes on.
    repl.write(":tx [{:person/name \"Di\"}]\n");
    drop(writer);
    repl.write(":tx [{:person/name \"Ed\"}]\n");
    assert!(repl.line().starts_with("{:basis-t 5,"));
    let out = repl.finish();
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.starts_with("error[storage/locked]: "), "{err}");
    assert_eq!(out.status.code(), Some(1), "an entry failed");

    // With --wait, a :tx waits for the other writer to finish.
    let mut repl = Live::spawn(&["repl", path, "--wait=20"]);
    let writer = vev::Connection::open(&db).unwrap();
    repl.write(":tx [{:person/name \"Fi\"}]\n");
    let early = repl
        .lines
        .recv_timeout(std::time::Duration::from_millis(300));
    assert!(early.is_err(), "the :tx waits for the lock: {early:?}");
    drop(writer);
    assert!(repl.line().starts_with("{:basis-t 6,"));
    assert!(repl.finish().status.success());
}

/// `:as-of` and `:since` take a basis-t, a transaction id or an instant.
#[test]
fn views_take_a_t_a_tx_id_or_an_instant() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.vev");
    scripted(&db, SCHEMA);
    scripted(
        &db,
        ":tx [{:person/name \"Ann\"}]\n:tx [{:person/name \"Bo\"}]\n",
    );
    let tx = vev::ids::tx_id(2);
    let count = "[:find (count ?e) . :where [?e :person/name]]";
    for point in ["2".to_string(), tx.to_string()] {
        let (out, _) = scripted(
            &db,
            &format!(":as-of {point}\n{count}\n:as-of\n:since {point}\n{count}\n"),
        );
        let counts: Vec<&str> = out
            .lines()
            .filter(|l| l.len() == 1 || l.starts_with("(0"))
            .collect();
        assert_eq!(counts, ["1", "1"], "{point}: {out}");
    }
    let (_, err, code) = scripted_status(&db, &format!(":as-of {}\n", vev::ids::user_id(1)));
    assert_eq!(code, Some(1));
    assert!(err.starts_with("error[time/not-a-time]: "), "{err}");
}

#[cfg(unix)]
mod pty {
    use super::*;
    use rexpect::session::PtySession;

    fn spawn(db: &Path, history: &Path) -> PtySession {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_vev"));
        cmd.args(["repl", db.to_str().unwrap()])
            .env("VEV_HISTORY", history)
            .env("TERM", "xterm");
        rexpect::session::spawn_command(cmd, Some(5_000)).expect("spawns on a pty")
    }

    /// Wait for a prompt: rustyline is in raw mode and reading (input sent before may be
    /// dropped when the terminal mode changes).
    fn prompt(p: &mut PtySession) {
        p.exp_regex(r"vev\*?> ").expect("a prompt");
    }

    #[test]
    fn interactive_session_on_a_terminal() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("t.vev");
        let history = dir.path().join("history");
        scripted(&db, SCHEMA);
        let mut p = spawn(&db, &history);
        p.exp_string("vev repl on").unwrap();

        // A transaction.
        prompt(&mut p);
        p.send_line(r#":tx [{:person/name "Ann" :person/age 30}]"#)
            .unwrap();
        p.exp_string("{:basis-t 2, :datoms 3").unwrap();
        prompt(&mut p);
        p.send_line(r#":tx [{:person/name "Bo" :person/age 41}]"#)
            .unwrap();
        p.exp_string("{:basis-t 3, :datoms 3").unwrap();

        // A query over two lines: the first does not run on its own.
        prompt(&mut p);
        p.send_line("[:find ?n ?a").unwrap();
        p.send_line(" :where [?e :person/name ?n] [?e :person/age ?a]]")
            .unwrap();
        p.exp_string("Ann | 30").unwrap();
        p.exp_string("Bo  | 41").unwrap();
        p.exp_string("(2 rows)").unwrap();

        // An error, then the session goes on.
        prompt(&mut p);
        p.send_line("[:find ?x :where [?e :person/nmae ?x]]")
            .unwrap();
        p.exp_string("error[query/unknown-attribute]: unknown attribute :person/nmae")
            .unwrap();
        prompt(&mut p);
        p.send_line(":as-of 2").unwrap();
        p.exp_string("queries see the database as of 2").unwrap();

        // Tab completes the attribute ident.
        prompt(&mut p);
        p.send("[:find ?n :where [_ :person/na").unwrap();
        p.send("\t").unwrap();
        p.flush().unwrap();
        p.exp_string("person/name").unwrap();
        p.send_line(" ?n]]").unwrap();
        p.exp_string("Ann").unwrap();
        p.exp_string("(1 row)").unwrap();

        // :history toggles the history view: datoms with their added flag.
        prompt(&mut p);
        p.send_line(":as-of").unwrap();
        p.exp_string("as of: cleared").unwrap();
        prompt(&mut p);
        p.send_line(":history").unwrap();
        p.exp_string("history view on").unwrap();
        prompt(&mut p);
        p.send_line("[:find ?a ?added :where [_ :person/age ?a _ ?added]]")
            .unwrap();
        p.exp_string("41 | true").unwrap();
        prompt(&mut p);
        p.send_line(":history").unwrap();
        p.exp_string("history view off").unwrap();

        prompt(&mut p);
        p.send_line(":quit").unwrap();
        p.exp_eof().unwrap();

        let saved = std::fs::read_to_string(&history).expect("history is saved");
        assert!(saved.contains(":as-of 2"), "{saved}");
        assert!(saved.contains(":person/name ?n]]"), "{saved}");
    }

    /// Lines typed ahead (pasted, or typed while an entry runs) all run, and so do two
    /// entries on one line.
    #[test]
    fn type_ahead_on_a_terminal_runs_every_entry() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("t.vev");
        scripted(&db, SCHEMA);
        let mut p = spawn(&db, &dir.path().join("history"));
        prompt(&mut p);
        p.send(
            ":tx [{:person/name \"Ann\"}]\n:tx [{:person/name \"Bo\"}]\n\
             [:find (count ?e) . :where [?e :person/name]] :timing\n:as-of 2\n",
        )
        .unwrap();
        p.flush().unwrap();
        p.exp_string("{:basis-t 2,").unwrap();
        p.exp_string("{:basis-t 3,").unwrap();
        p.exp_string("(count ?e)").unwrap();
        p.exp_string("timing on").unwrap();
        p.exp_string("queries see the database as of 2").unwrap();
        prompt(&mut p);
        p.send_line(":quit").unwrap();
        p.exp_eof().unwrap();
    }

    #[test]
    fn tab_completes_commands_and_ctrl_c_drops_an_entry() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("t.vev");
        let mut p = spawn(&db, &dir.path().join("history"));
        prompt(&mut p);
        p.send(":hi\t").unwrap();
        p.flush().unwrap();
        p.exp_string("story").unwrap();
        p.send_line("").unwrap();
        p.exp_string("history view on").unwrap();
        // Ctrl-C drops the entry being typed; Ctrl-D leaves.
        prompt(&mut p);
        p.send("[:find ?e").unwrap();
        p.flush().unwrap();
        p.send_control('c').unwrap();
        prompt(&mut p);
        p.send_line(":timing").unwrap();
        p.exp_string("timing on").unwrap();
        prompt(&mut p);
        p.send_control('d').unwrap();
        p.exp_eof().unwrap();
    }
}
