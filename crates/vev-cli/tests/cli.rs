//! The `vev` binary run as a user runs it: every command and format, error lines and exit codes.
//! Each test makes its own database in a temporary directory (a few small transactions).

use std::path::{Path, PathBuf};

use assert_cmd::Command;

mod common;
use common::Live;
use vev::edn::parse;
use vev::Edn;

const SCHEMA: &str = r#"[
 {:db/ident :person/email :db/valueType :db.type/string :db/cardinality :db.cardinality/one
  :db/unique :db.unique/identity}
 {:db/ident :person/name :db/valueType :db.type/string :db/cardinality :db.cardinality/one}
 {:db/ident :person/age :db/valueType :db.type/long :db/cardinality :db.cardinality/one}
 {:db/ident :person/friend :db/valueType :db.type/ref :db/cardinality :db.cardinality/many}]"#;

const PEOPLE: &str = r#"[{:db/id "ann" :person/email "ann@x" :person/name "Ann" :person/age 30}
 {:db/id "bo" :person/email "bo@x" :person/name "Bo, \"the\" second" :person/age 41
  :person/friend ["ann"]}]"#;

struct Fixture {
    _dir: tempfile::TempDir,
    db: PathBuf,
}

fn vev() -> Command {
    Command::cargo_bin("vev").expect("the vev binary is built")
}

fn run_ok(args: &[&str], stdin: &str) -> String {
    let out = vev().args(args).write_stdin(stdin).output().expect("runs");
    assert!(
        out.status.success(),
        "vev {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

/// Run, expect failure; returns stderr.
fn run_err(args: &[&str], stdin: &str) -> String {
    let out = vev().args(args).write_stdin(stdin).output().expect("runs");
    assert_eq!(out.status.code(), Some(1), "vev {args:?} should fail");
    assert!(out.stdout.is_empty(), "nothing on stdout after an error");
    String::from_utf8(out.stderr).expect("utf-8")
}

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// Schema at basis-t 1, Ann and Bo at 2, Ann turns 31 at 3.
fn fixture() -> Fixture {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("t.vev");
    run_ok(&["transact", s(&db)], SCHEMA);
    run_ok(&["transact", s(&db), "-"], PEOPLE);
    run_ok(
        &["transact", s(&db)],
        r#"[{:person/email "ann@x" :person/age 31}]"#,
    );
    Fixture { _dir: dir, db }
}

fn get<'a>(map: &'a Edn, key: &str) -> &'a Edn {
    let Edn::Map(m) = map else {
        panic!("{map} is not a map")
    };
    m.get(&Edn::keyword(key))
        .unwrap_or_else(|| panic!("{map} has no {key}"))
}

#[test]
fn transact_prints_the_report_as_edn() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.vev");
    let schema = dir.path().join("schema.edn");
    std::fs::write(&schema, SCHEMA).unwrap();
    run_ok(&["transact", s(&db), s(&schema)], "");
    let report = parse(&run_ok(&["transact", s(&db)], PEOPLE)).unwrap();
    assert_eq!(get(&report, "basis-t"), &Edn::Integer(2));
    // The txInstant, Ann's three attributes, Bo's four.
    assert_eq!(get(&report, "datoms"), &Edn::Integer(8));
    let tempids = get(&report, "tempids").as_map().unwrap();
    assert!(matches!(
        tempids.get(&Edn::string("ann")),
        Some(Edn::Integer(_))
    ));
    assert!(matches!(get(&report, "tx"), Edn::Integer(_)));
}

#[test]
fn transact_batch_runs_one_transaction_per_vector() {
    let f = fixture();
    let input = r#"[{:person/email "cy@x"}] [{:person/email "di@x"}]
                   [[:db/add "e" :person/email "ed@x"]]"#;
    let out = run_ok(&["transact", s(&f.db), "--batch"], input);
    let reports: Vec<Edn> = out.lines().map(|l| parse(l).unwrap()).collect();
    let ts: Vec<&Edn> = reports.iter().map(|r| get(r, "basis-t")).collect();
    assert_eq!(ts, [&Edn::Integer(4), &Edn::Integer(5), &Edn::Integer(6)]);
}

fn count_emails(db: &Path) -> String {
    let q = "[:find (count ?e) . :where [?e :person/email]]";
    run_ok(&["query", s(db), q], "").trim().to_string()
}

/// `producer | vev transact --batch DB` commits each transaction as it arrives and reports
/// it at once; a stream killed midway has committed what it reported.
#[test]
fn transact_batch_commits_and_reports_each_transaction_as_it_arrives() {
    let f = fixture();
    let mut batch = Live::spawn(&["transact", s(&f.db), "--batch"]);
    batch.write("[{:person/email \"cy@x\"}]\n");
    let report = parse(&batch.line()).unwrap();
    assert_eq!(get(&report, "basis-t"), &Edn::Integer(4));
    // Two in one line, and one over two lines.
    batch.write("[{:person/email \"di@x\"}] [{:person/email \"ed@x\"}]\n[{:person/email\n");
    assert_eq!(
        get(&parse(&batch.line()).unwrap(), "basis-t"),
        &Edn::Integer(5)
    );
    assert_eq!(
        get(&parse(&batch.line()).unwrap(), "basis-t"),
        &Edn::Integer(6)
    );
    batch.write(" \"fa@x\"}]\n");
    assert_eq!(
        get(&parse(&batch.line()).unwrap(), "basis-t"),
        &Edn::Integer(7)
    );
    // Killed while it waits for more: everything reported is in the file.
    batch.child.kill().unwrap();
    let _ = batch.finish();
    assert_eq!(count_emails(&f.db), "6");
}

/// A malformed transaction mid-stream stops it with the error at its line; the ones before
/// it are committed and were reported.
#[test]
fn transact_batch_stops_at_a_bad_transaction_keeping_the_earlier_ones() {
    for (bad, code, at) in [
        (
            "[{:person/age \"old\"}]\n",
            "tx/wrong-value-type",
            "--> stdin:3:1",
        ),
        (
            "[{:person/email \"x@x\" :oops}]\n",
            "edn/odd-map",
            "--> stdin:3:",
        ),
        ("[{:person/email \"x@x\"}]]\n", "edn/", "--> stdin:3:"),
    ] {
        let f = fixture();
        let mut batch = Live::spawn(&["transact", s(&f.db), "--batch"]);
        batch.write("[{:person/email \"cy@x\"}]\n; a comment line\n");
        assert!(batch.line().starts_with("{:basis-t 4,"));
        batch.write(bad);
        let out = batch.finish();
        assert_eq!(out.status.code(), Some(1), "{bad}");
        let err = String::from_utf8(out.stderr).unwrap();
        assert!(err.starts_with(&format!("error[{code}")), "{bad}: {err}");
        assert!(err.contains(at), "{bad}: {err}");
        assert_eq!(count_emails(&f.db), "3", "{bad}");
    }
}

/// `--wait[=SECS]`: a second writer waits for the first instead of failing at once.
#[test]
fn a_second_writer_waits_with_wait() {
    let f = fixture();
    // A first writer holds the lock while its batch stream is open.
    let mut first = Live::spawn(&["transact", s(&f.db), "--batch"]);
    first.write("[{:person/email \"cy@x\"}]\n");
    assert!(first.line().starts_with("{:basis-t 4,"));
    let err = run_err(&["transact", s(&f.db)], r#"[{:person/email "di@x"}]"#);
    assert!(err.starts_with("error[storage/locked]: "), "{err}");
    let started = std::time::Instant::now();
    let err = run_err(
        &["transact", s(&f.db), "--wait=0.3"],
        r#"[{:person/email "di@x"}]"#,
    );
    assert!(err.starts_with("error[storage/locked]: "), "{err}");
    assert!(err.contains("waited 300 ms"), "{err}");
    assert!(started.elapsed() >= std::time::Duration::from_millis(300));
    // Waiting without a limit (global flag before the command): done once the first ends.
    let second = std::process::Command::new(env!("CARGO_BIN_EXE_vev"))
        .args(["--wait", "transact", s(&f.db)])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut second = second;
    {
        use std::io::Write;
        let mut stdin = second.stdin.take().unwrap();
        stdin.write_all(br#"[{:person/email "di@x"}]"#).unwrap();
    }
    std::thread::sleep(std::time::Duration::from_millis(500));
    assert!(
        second.try_wait().unwrap().is_none(),
        "the second writer waits"
    );
    assert!(first.finish().status.success());
    let out = second.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report = parse(&String::from_utf8(out.stdout).unwrap()).unwrap();
    assert_eq!(get(&report, "basis-t"), &Edn::Integer(5));
    assert_eq!(count_emails(&f.db), "4");
    vev()
        .args(["transact", s(&f.db), "--wait=soon"])
        .assert()
        .code(2);
}

/// `vev backup` copies a database another process is writing to; the copy opens on its own.
#[test]
fn backup_copies_a_live_database() {
    let f = fixture();
    let writer = vev::Connection::open(&f.db).unwrap();
    writer
        .transact_edn(r#"[{:person/email "cy@x" :person/age 5}]"#)
        .unwrap();
    let dest = f.db.with_file_name("copy.vev");
    let out = parse(&run_ok(&["backup", s(&f.db), s(&dest)], "")).unwrap();
    assert_eq!(get(&out, "basis-t"), &Edn::Integer(4));
    assert_eq!(get(&out, "backup"), &Edn::string(s(&dest)));
    let verified = parse(&run_ok(&["verify", s(&dest)], "")).unwrap();
    assert_eq!(get(&verified, "log-rows"), &Edn::Integer(4));
    let q = "[:find ?e ?a ?v :where [?e ?a ?v]]";
    assert_eq!(
        run_ok(&["query", s(&dest), q], ""),
        run_ok(&["query", s(&f.db), q, "--as-of", "4"], "")
    );
    // Into a directory, under the source's name; never over an existing file.
    let dir = tempfile::tempdir().unwrap();
    run_ok(&["backup", s(&f.db), s(dir.path())], "");
    assert_eq!(count_emails(&dir.path().join("t.vev")), "3");
    let err = run_err(&["backup", s(&f.db), s(&dest)], "");
    assert!(err.starts_with("error[storage/exists]: "), "{err}");
    drop(writer);
}

#[test]
fn query_edn_reads_back_as_the_result() {
    let f = fixture();
    let q = "[:find ?n ?a :where [?e :person/name ?n] [?e :person/age ?a]]";
    let out = run_ok(&["query", s(&f.db), q], "");
    assert_eq!(
        parse(&out).unwrap(),
        parse(r#"#{["Ann" 31] ["Bo, \"the\" second" 41]}"#).unwrap()
    );
    // Default off a terminal is EDN; --format edn says the same.
    assert_eq!(out, run_ok(&["query", s(&f.db), q, "--format", "edn"], ""));
}

#[test]
fn query_values_of_every_kind_round_trip_through_edn() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.vev");
    let types = [
        "string", "long", "bigint", "double", "instant", "uuid", "keyword", "boolean", "bigdec",
    ];
    let schema: Vec<String> = types
        .iter()
        .map(|t| format!("{{:db/ident :v/{t} :db/valueType :db.type/{t} :db/cardinality :db.cardinality/one}}"))
        .collect();
    run_ok(&["transact", s(&db)], &format!("[{}]", schema.join(" ")));
    let values = r#"["tab\t \"q\" \\ é\n" -7 123456789012345678901234567890N 2.5
                     #inst "2020-02-03T04:05:06.007-00:00" #uuid "1b4e28ba-2fa1-11d2-883f-0016d3cca427"
                     :a/b true 1.25M]"#;
    let Edn::Vector(values) = parse(values).unwrap() else {
        unreachable!()
    };
    let attrs: Vec<String> = types
        .iter()
        .zip(&values)
        .map(|(t, v)| format!(":v/{t} {v}"))
        .collect();
    run_ok(&["transact", s(&db)], &format!("[{{{}}}]", attrs.join(" ")));
    let vars: Vec<String> = types.iter().map(|t| format!("?{t}")).collect();
    let clauses: Vec<String> = types.iter().map(|t| format!("[?e :v/{t} ?{t}]")).collect();
    let q = format!("[:find [{}] :where {}]", vars.join(" "), clauses.join(" "));
    let out = run_ok(&["query", s(&db), &q], "");
    assert_eq!(parse(&out).unwrap(), Edn::Vector(values));
}

#[test]
fn query_json_csv_and_table() {
    let f = fixture();
    let q = "[:find ?n ?a :where [?e :person/name ?n] [?e :person/age ?a]]";
    let json: serde_json::Value =
        serde_json::from_str(&run_ok(&["query", s(&f.db), q, "--format", "json"], "")).unwrap();
    assert_eq!(
        json,
        serde_json::json!([["Ann", 31], ["Bo, \"the\" second", 41]])
    );
    let csv = run_ok(&["query", s(&f.db), q, "--format", "csv"], "");
    assert_eq!(csv, "?n,?a\nAnn,31\n\"Bo, \"\"the\"\" second\",41\n");
    let table = run_ok(&["query", s(&f.db), q, "--format", "table"], "");
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines[0], format!("{:<16} | ?a", "?n"));
    assert_eq!(lines[2], format!("{:<16} | 31", "Ann"));
    assert_eq!(lines.last(), Some(&"(2 rows)"));
    // Map keys are plain JSON strings; :keys rows are objects.
    let pulled = run_ok(
        &[
            "query",
            s(&f.db),
            "[:find [(pull ?e [:person/name]) ...] :where [?e :person/age 31]]",
            "--format",
            "json",
        ],
        "",
    );
    let pulled: serde_json::Value = serde_json::from_str(&pulled).unwrap();
    assert_eq!(pulled, serde_json::json!([{"person/name": "Ann"}]));
    let keyed = run_ok(
        &[
            "query",
            s(&f.db),
            "[:find ?n :keys name :where [_ :person/name ?n]]",
            "--format",
            "json",
        ],
        "",
    );
    let keyed: serde_json::Value = serde_json::from_str(&keyed).unwrap();
    // Table columns follow :keys, whatever order the row maps keep.
    let q = "[:find ?n ?a :keys zname age :where [?e :person/name ?n] [?e :person/age ?a]]";
    let table = run_ok(&["query", s(&f.db), q, "--format", "csv"], "");
    assert_eq!(
        table.lines().take(2).collect::<Vec<_>>(),
        ["zname,age", "Ann,31"]
    );
    assert!(keyed
        .as_array()
        .unwrap()
        .contains(&serde_json::json!({"name": "Ann"})));
}

#[test]
fn query_inputs_files_and_time_travel() {
    let f = fixture();
    let qfile = f.db.with_file_name("q.edn");
    std::fs::write(
        &qfile,
        "[:find ?a . :in $ ?email :where [?e :person/email ?email] [?e :person/age ?a]]",
    )
    .unwrap();
    let at = format!("@{}", s(&qfile));
    let ask = |extra: &[&str]| {
        let mut args = vec!["query", s(&f.db), &at, r#""ann@x""#];
        args.extend_from_slice(extra);
        run_ok(&args, "").trim().to_string()
    };
    assert_eq!(ask(&[]), "31");
    assert_eq!(ask(&["--as-of", "2"]), "30");
    assert_eq!(ask(&["--since", "3"]), "nil"); // the email was asserted at t 2
    let h = run_ok(
        &[
            "query",
            s(&f.db),
            "[:find ?a ?added :where [?e :person/age ?a _ ?added] [?e :person/email \"ann@x\"]]",
            "--history",
        ],
        "",
    );
    assert_eq!(
        parse(&h).unwrap(),
        parse("#{[30 true] [30 false] [31 true]}").unwrap()
    );
}

/// `--as-of`, `--since` and `vev log --from/--to` take a basis-t, a transaction id (what `?tx`
/// binds to) or an instant, and each names the same point.
#[test]
fn time_flags_take_a_t_a_tx_id_or_an_instant() {
    let f = fixture();
    // Transaction 2 (Ann and Bo): its id and its instant.
    let q_tx = "[:find ?tx . :where [?e :person/email \"bo@x\" ?tx]]";
    let tx = run_ok(&["query", s(&f.db), q_tx], "").trim().to_string();
    let q_inst = format!("[:find ?i . :where [{tx} :db/txInstant ?i]]");
    let inst = run_ok(&["query", s(&f.db), &q_inst], "").trim().to_string();
    assert!(inst.starts_with("#inst \""), "{inst}");
    let bare = inst
        .trim_start_matches("#inst ")
        .trim_matches('"')
        .to_string();
    let age = "[:find ?a . :where [?e :person/email \"ann@x\"] [?e :person/age ?a]]";
    let names = "[:find ?n :where [?e :person/name ?n]]";
    for point in ["2", tx.as_str(), inst.as_str(), bare.as_str()] {
        let as_of = run_ok(&["query", s(&f.db), age, "--as-of", point], "");
        assert_eq!(as_of.trim(), "30", "--as-of {point}");
        let since = run_ok(&["query", s(&f.db), names, "--since", point], "");
        assert_eq!(
            parse(&since).unwrap(),
            parse("#{}").unwrap(),
            "--since {point}"
        );
        let log = run_ok(&["log", s(&f.db), "--from", point, "--to", point], "");
        assert_eq!(log, "", "--from {point} --to {point}");
        let log = run_ok(&["log", s(&f.db), "--from", point], "");
        let ts: std::collections::BTreeSet<String> = log
            .lines()
            .map(|l| parse(l).unwrap().as_seq().unwrap()[0].to_string())
            .collect();
        assert_eq!(
            ts.into_iter().collect::<Vec<_>>(),
            ["2", "3"],
            "--from {point}"
        );
    }
    // Since the schema: Ann and Bo were both added after it.
    let since = run_ok(&["query", s(&f.db), names, "--since", "1"], "");
    assert_eq!(
        parse(&since).unwrap(),
        parse(r#"#{["Ann"] ["Bo, \"the\" second"]}"#).unwrap()
    );
    // A user entity's id is neither a t nor a transaction id.
    let ann = run_ok(
        &[
            "query",
            s(&f.db),
            "[:find ?e . :where [?e :person/email \"ann@x\"]]",
        ],
        "",
    );
    let err = run_err(&["query", s(&f.db), age, "--as-of", ann.trim()], "");
    assert!(err.starts_with("error[time/not-a-time]: "), "{err}");
    assert!(err.contains("partition 4"), "{err}");
    let err = run_err(&["log", s(&f.db), "--from", "yesterday"], "");
    assert!(err.starts_with("error[time/unreadable]: "), "{err}");
}

#[test]
fn query_explain_and_timing() {
    let f = fixture();
    let q = "[:find ?n :where [?e :person/age ?a] [(> ?a 35)] [?e :person/name ?n]]";
    let out = vev()
        .args([
            "query",
            s(&f.db),
            q,
            "--explain",
            "--timing",
            "--format",
            "csv",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    let plan = String::from_utf8(out.stdout).unwrap();
    assert!(
        plan.starts_with("step,clause,method,estimated,rows,ms\n"),
        "{plan}"
    );
    assert!(plan.contains(":person/name"), "{plan}");
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.starts_with("1 rows in "), "{stderr}");
}

#[test]
fn pull_by_lookup_ref_ident_and_id() {
    let f = fixture();
    let out = run_ok(
        &[
            "pull",
            s(&f.db),
            "[:person/name {:person/friend [:person/email]}]",
            r#"[:person/email "bo@x"]"#,
        ],
        "",
    );
    assert_eq!(
        parse(&out).unwrap(),
        parse(r#"{:person/name "Bo, \"the\" second" :person/friend [{:person/email "ann@x"}]}"#)
            .unwrap()
    );
    let attr = run_ok(&["pull", s(&f.db), "[:db/ident]", ":person/age"], "");
    assert_eq!(
        parse(&attr).unwrap(),
        parse("{:db/ident :person/age}").unwrap()
    );
    let json = run_ok(
        &[
            "pull",
            s(&f.db),
            "[:person/age]",
            r#"[:person/email "ann@x"]"#,
            "--as-of",
            "2",
            "--format",
            "json",
        ],
        "",
    );
    assert_eq!(json.trim(), r#"{"person/age":30}"#);
    let err = run_err(
        &["pull", s(&f.db), "[*]", r#"[:person/email "nobody"]"#],
        "",
    );
    assert!(err.starts_with("error[pull/not-found]: "), "{err}");
}

#[test]
fn datoms_by_index_prefix() {
    let f = fixture();
    let out = run_ok(
        &[
            "datoms",
            s(&f.db),
            "eavt",
            r#"[:person/email "ann@x"]"#,
            ":person/age",
        ],
        "",
    );
    let rows: Vec<Edn> = out.lines().map(|l| parse(l).unwrap()).collect();
    assert_eq!(rows.len(), 1);
    let Edn::Vector(row) = &rows[0] else { panic!() };
    assert_eq!(row[1], Edn::keyword("person/age"));
    assert_eq!(row[2], Edn::Integer(31));
    assert_eq!(row[4], Edn::Bool(true));
    let avet = run_ok(
        &["datoms", s(&f.db), "avet", ":person/email", r#""bo@x""#],
        "",
    );
    assert_eq!(avet.lines().count(), 1);
    let all = run_ok(
        &[
            "datoms",
            s(&f.db),
            "aevt",
            ":person/name",
            "--format",
            "csv",
        ],
        "",
    );
    assert_eq!(all.lines().next(), Some("e,a,v,tx,added"));
    assert_eq!(all.lines().count(), 3);
    let limited = run_ok(&["datoms", s(&f.db), "eavt", "--limit", "2"], "");
    assert_eq!(limited.lines().count(), 2);
    let hist = run_ok(
        &["datoms", s(&f.db), "aevt", ":person/age", "--history"],
        "",
    );
    assert_eq!(hist.lines().count(), 4); // 30 asserted, 41, 30 retracted, 31 asserted
    let refs = run_ok(
        &["datoms", s(&f.db), "vaet", r#"[:person/email "ann@x"]"#],
        "",
    );
    assert_eq!(refs.lines().count(), 1);
}

#[test]
fn log_schema_stats_verify() {
    let f = fixture();
    let log = run_ok(&["log", s(&f.db), "--from", "3", "--to", "4"], "");
    let rows: Vec<Edn> = log.lines().map(|l| parse(l).unwrap()).collect();
    // txInstant, the new age, the retracted old age.
    assert_eq!(rows.len(), 3);
    assert!(rows
        .iter()
        .all(|r| r.as_seq().unwrap()[0] == Edn::Integer(3)));
    let schema = parse(&run_ok(&["schema", s(&f.db)], "")).unwrap();
    let attrs = schema.as_seq().unwrap();
    assert_eq!(attrs.len(), 4);
    assert_eq!(
        get(&attrs[1], "db/unique"),
        &Edn::keyword("db.unique/identity")
    );
    let table = run_ok(&["schema", s(&f.db), "--format", "table"], "");
    assert!(table.contains(":person/friend | :db.type/ref"), "{table}");
    let stats = parse(&run_ok(&["stats", s(&f.db)], "")).unwrap();
    assert_eq!(get(&stats, "attributes"), &Edn::Integer(4));
    assert_eq!(get(&stats, "basis-t"), &Edn::Integer(3));
    let per = get(&stats, "attribute-datoms");
    assert_eq!(get(per, "person/email"), &Edn::Integer(2));
    assert_eq!(get(per, "person/friend"), &Edn::Integer(1));
    assert!(matches!(get(&stats, "size-bytes"), Edn::Integer(n) if *n > 0));
    let json: serde_json::Value =
        serde_json::from_str(&run_ok(&["stats", s(&f.db), "--format", "json"], "")).unwrap();
    assert_eq!(json["attribute-datoms"]["person/age"], 2);
    let verified = parse(&run_ok(&["verify", s(&f.db)], "")).unwrap();
    assert_eq!(get(&verified, "ok"), &Edn::Bool(true));
    assert_eq!(get(&verified, "log-rows"), &Edn::Integer(3));
}

#[test]
fn errors_name_their_code_and_point_at_the_column() {
    let f = fixture();
    let err = run_err(&["transact", s(&f.db)], r#"[{:person/emali "x"}]"#);
    assert!(err.starts_with("error[tx/unknown-attribute]: "), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    let err = run_err(
        &["query", s(&f.db), "[:find ?e\n :where [?e :person/nmae]]"],
        "",
    );
    let lines: Vec<&str> = err.lines().collect();
    assert!(
        lines[0].starts_with("error[query/unknown-attribute]: "),
        "{err}"
    );
    assert_eq!(lines[1].trim(), "--> query:2:9");
    assert_eq!(lines[2], "2 |  :where [?e :person/nmae]]");
    assert_eq!(lines[3], "  |         ^");
    let err = run_err(&["transact", s(&f.db)], "[{:person/name \"x\"}\n  {:a }]");
    assert!(err.starts_with("error[edn/odd-map]: "), "{err}");
    assert!(err.contains("2 |   {:a }]"), "{err}");
    // In a batch, an error without a span points at its transaction.
    // The transactions before it stay, and their reports were printed.
    let out = vev()
        .args(["transact", s(&f.db), "--batch"])
        .write_stdin("[{:person/email \"ok@x\"}]\n[{:person/age \"old\"}]")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 1);
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.starts_with("error[tx/wrong-value-type]: "), "{err}");
    assert!(err.contains("--> stdin:2:1"), "{err}");
    let missing = f.db.with_file_name("missing.vev");
    let err = run_err(&["stats", s(&missing)], "");
    assert!(err.starts_with("error[cli/not-found]: "), "{err}");
    assert!(!missing.exists(), "read commands never create a file");
    let err = run_err(
        &[
            "query",
            s(&f.db),
            "[:find ?e :where [?e :person/age ?a]]",
            "--as-of",
            "soon",
        ],
        "",
    );
    assert!(err.starts_with("error[time/unreadable]: "), "{err}");
    let not_db = f.db.with_file_name("not.vev");
    std::fs::write(
        &not_db,
        "hello, this is not a database file at all, not even close",
    )
    .unwrap();
    let err = run_err(&["verify", s(&not_db)], "");
    assert!(err.starts_with("error[storage/"), "{err}");
    // clap's own usage errors exit with 2.
    vev().args(["query"]).assert().code(2);
}

#[test]
fn read_commands_work_while_a_writer_holds_the_file() {
    let f = fixture();
    let writer = vev::Connection::open(&f.db).unwrap();
    writer
        .transact_edn(r#"[{:person/email "cy@x" :person/age 5}]"#)
        .unwrap();
    let out = run_ok(
        &[
            "query",
            s(&f.db),
            "[:find (count ?e) . :where [?e :person/email]]",
        ],
        "",
    );
    assert_eq!(out.trim(), "3");
    let err = run_err(&["transact", s(&f.db)], r#"[{:person/email "dd@x"}]"#);
    assert!(err.starts_with("error[storage/locked]: "), "{err}");
    drop(writer);
}

#[test]
fn demo_loads_and_queries() {
    let dir = tempfile::tempdir().unwrap();
    let out = run_ok(&["demo", s(dir.path()), "--people", "600"], "");
    for needle in [
        "loaded 600 people",
        "join:",
        "aggregate:",
        "rule:",
        "pull:",
        "as-of:",
        "history:",
    ] {
        assert!(out.contains(needle), "no {needle:?} in:\n{out}");
    }
    let db = dir.path().join("demo.vev");
    let n = run_ok(
        &[
            "query",
            s(&db),
            "[:find (count ?e) . :where [?e :person/email]]",
        ],
        "",
    );
    assert_eq!(n.trim(), "600");
    run_ok(&["verify", s(&db)], "");
}

/// `vev demo mbrainz`: the data set, then the query files of the repository run on it through
/// `vev query` with `@FILE` query and rules, as docs/mbrainz.md shows.
#[test]
fn demo_mbrainz_writes_a_database_the_query_files_run_on() {
    let dir = tempfile::tempdir().unwrap();
    let out = run_ok(&["demo", "mbrainz", s(dir.path()), "--scale", "tiny"], "");
    for needle in ["loaded ", " tracks: ", "q1 (", "q5 (", "q6 (", "q8 ("] {
        assert!(out.contains(needle), "no {needle:?} in:\n{out}");
    }
    let db = dir.path().join("mbrainz.vev");
    let queries = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../queries/mbrainz");
    let file = |name: &str| format!("@{}", queries.join(name).display());
    let janis = run_ok(
        &["query", s(&db), &file("artist.edn"), r#""Janis Joplin""#],
        "",
    );
    assert!(
        janis.contains(":artist.type/person :artist.gender/female"),
        "{janis}"
    );
    let q7 = run_ok(
        &[
            "query",
            s(&db),
            &file("q7.edn"),
            &file("rules.edn"),
            r#"["George Harrison"]"#,
            "--format",
            "csv",
        ],
        "",
    );
    // As many rows as vev-mbrainz's tests/expected/tiny.edn records for q7, each from him.
    let expected = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../vev-mbrainz/tests/expected/tiny.edn"),
    )
    .unwrap();
    let expected = parse(&expected).unwrap();
    let Edn::Map(by_name) = &expected else {
        panic!("{expected}")
    };
    let Some(Edn::Map(q7_expected)) = by_name.get(&Edn::String("q7".into())) else {
        panic!("no q7 in {expected}")
    };
    let Some(Edn::Integer(n)) = q7_expected.get(&Edn::keyword("rows")) else {
        panic!("{expected}")
    };
    let rows = q7
        .lines()
        .filter(|l| l.starts_with("George Harrison,"))
        .count();
    assert_eq!(rows as i64, *n, "{q7}");
    assert!(rows > 5, "{q7}");
    // A second run never replaces the first file.
    run_ok(&["demo", "mbrainz", s(dir.path()), "--scale", "tiny"], "");
    assert!(dir.path().join("mbrainz-2.vev").exists());
    run_ok(&["verify", s(&db)], "");
}

/// A database of `n` people with names of growing length (the last ones are the widest),
/// made through the library (faster than `vev transact` for thousands of entities).
fn many_people(dir: &Path, n: usize) -> PathBuf {
    let path = dir.join("many.vev");
    let conn = vev::Connection::open(&path).unwrap();
    conn.transact_edn(SCHEMA).unwrap();
    for chunk in (0..n).collect::<Vec<_>>().chunks(1000) {
        let people: Vec<String> = chunk
            .iter()
            .map(|i| {
                format!(
                    r#"{{:person/email "p{i:06}@x" :person/name "{}" :person/age {i}}}"#,
                    "n".repeat(1 + i / 1000)
                )
            })
            .collect();
        conn.transact_edn(&format!("[{}]", people.join(" ")))
            .unwrap();
    }
    path
}

#[test]
fn large_results_stream_in_every_format() {
    let dir = tempfile::tempdir().unwrap();
    let n = 3_500;
    let db = many_people(dir.path(), n);
    let q = "[:find ?a ?n :where [?e :person/age ?a] [?e :person/name ?n]]";
    let want: Vec<(i64, String)> = (0..n)
        .map(|i| (i as i64, "n".repeat(1 + i / 1000)))
        .collect();
    // EDN: a set, a row a line, reading back as the result.
    let edn = run_ok(&["query", s(&db), q, "--format", "edn"], "");
    assert_eq!(edn.lines().count(), n);
    let Edn::Set(rows) = parse(&edn).unwrap() else {
        panic!("not a set")
    };
    let got: Vec<(i64, String)> = rows
        .iter()
        .map(|r| match r.as_seq().unwrap() {
            [Edn::Integer(a), Edn::String(n)] => (*a, n.clone()),
            other => panic!("row {other:?}"),
        })
        .collect();
    assert_eq!(got, want);
    // JSON: one array, rows sorted by value.
    let json: serde_json::Value =
        serde_json::from_str(&run_ok(&["query", s(&db), q, "--format", "json"], "")).unwrap();
    let json = json.as_array().unwrap();
    assert_eq!(json.len(), n);
    assert_eq!(json[n - 1], serde_json::json!([n - 1, "nnnn"]));
    // CSV: the header, then the rows in value order.
    let csv = run_ok(&["query", s(&db), q, "--format", "csv"], "");
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), n + 1);
    assert_eq!(
        (lines[0], lines[1], lines[n]),
        ("?a,?n", "0,n", "3499,nnnn")
    );
    // Table: columns measured on the first 1,000 rows; later, wider cells widen only their
    // own line, and every row is there.
    let table = run_ok(&["query", s(&db), q, "--format", "table"], "");
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), n + 3);
    assert_eq!(lines[0], "?a  | ?n");
    assert_eq!(lines[1], "----+---");
    assert_eq!(lines[2], "0   | n");
    assert_eq!(lines[n + 1], "3499 | nnnn");
    assert_eq!(lines[n + 2], format!("({n} rows)"));
    // A collection, :keys maps and a bag (:with) stream too.
    let coll = run_ok(
        &[
            "query",
            s(&db),
            "[:find [?a ...] :where [_ :person/age ?a]]",
            "--format",
            "edn",
        ],
        "",
    );
    assert_eq!(
        parse(&coll).unwrap(),
        Edn::Vector((0..n as i64).map(Edn::Integer).collect())
    );
    let keyed = run_ok(
        &[
            "query",
            s(&db),
            "[:find ?a :keys age :where [_ :person/age ?a]]",
            "--format",
            "json",
        ],
        "",
    );
    let keyed: serde_json::Value = serde_json::from_str(&keyed).unwrap();
    assert_eq!(keyed[0], serde_json::json!({"age": 0}));
    assert_eq!(keyed.as_array().unwrap().len(), n);
    let bag = run_ok(
        &[
            "query",
            s(&db),
            "[:find ?n :with ?e :where [?e :person/name ?n]]",
            "--format",
            "edn",
        ],
        "",
    );
    assert_eq!(parse(&bag).unwrap().as_seq().unwrap().len(), n);
}

#[test]
fn empty_and_single_results_in_every_format() {
    let f = fixture();
    let none = "[:find ?n :where [_ :person/name ?n] [(= ?n \"nobody\")]]";
    let cases: &[(&str, &str, &str)] = &[
        (none, "edn", "#{}"),
        (none, "json", "[]"),
        (none, "csv", "?n"),
        (none, "table", "?n\n--\n(0 rows)"),
        (
            "[:find [?n ...] :where [_ :person/age 99] [_ :person/name ?n]]",
            "edn",
            "[]",
        ),
        (
            "[:find ?n . :where [_ :person/age 99] [_ :person/name ?n]]",
            "edn",
            "nil",
        ),
        (
            "[:find ?n . :where [_ :person/age 99] [_ :person/name ?n]]",
            "json",
            "null",
        ),
        (
            "[:find ?a . :where [_ :person/age ?a] [(< ?a 35)]]",
            "edn",
            "31",
        ),
        (
            "[:find [?a ?n] :where [?e :person/age 41] [?e :person/age ?a] [?e :person/name ?n]]",
            "json",
            r#"[41,"Bo, \"the\" second"]"#,
        ),
        (
            "[:find ?a :keys age :where [_ :person/age ?a] [(< ?a 35)]]",
            "edn",
            "[{:age 31}]",
        ),
        ("[:find (count ?e) . :where [?e :person/age]]", "edn", "2"),
    ];
    for (q, format, want) in cases {
        let out = run_ok(&["query", s(&f.db), q, "--format", format], "");
        assert_eq!(out.trim_end(), *want, "{q} as {format}");
    }
}

#[test]
fn a_reader_that_stops_early_ends_the_query_quietly() {
    use std::io::{BufRead, BufReader};
    let dir = tempfile::tempdir().unwrap();
    let db = many_people(dir.path(), 20_000);
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("vev"))
        .args([
            "query",
            s(&db),
            "[:find ?e ?n ?m :where [?e :person/name ?n] [?e :person/email ?m]]",
            "--format",
            "csv",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert_eq!(first, "?e,?n,?m\n");
    // The pipe is closed now (as `| head -1` does): the rest of the rows cannot be written.
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{:?}", out.status);
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
}

// ---- issue 17: JSON keys, error codes by cause, demo, tables and help ------------------

#[test]
fn json_map_keys_are_plain_for_keys_strs_and_syms() {
    let f = fixture();
    let q = |find: &str| {
        let text = format!("[:find ?n ?a {find} :where [?e :person/name ?n] [?e :person/age ?a]]");
        let out = run_ok(&["query", s(&f.db), &text, "--format", "json"], "");
        serde_json::from_str::<serde_json::Value>(&out).unwrap()
    };
    let expected = serde_json::json!({"name": "Ann", "age": 31});
    for find in [":keys name age", ":strs name age", ":syms name age"] {
        let rows = q(find);
        assert!(
            rows.as_array().unwrap().contains(&expected),
            "{find}: {rows}"
        );
    }
}

#[test]
fn json_and_csv_write_each_kind_of_value_as_documented() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("v.vev");
    run_ok(
        &["transact", s(&db)],
        r#"[{:db/ident :v/k :db/valueType :db.type/keyword :db/cardinality :db.cardinality/one}
            {:db/ident :v/big :db/valueType :db.type/bigint :db/cardinality :db.cardinality/one}
            {:db/ident :v/dec :db/valueType :db.type/bigdec :db/cardinality :db.cardinality/one}
            {:db/ident :v/d :db/valueType :db.type/double :db/cardinality :db.cardinality/one}
            {:db/ident :v/inst :db/valueType :db.type/instant :db/cardinality :db.cardinality/one}
            {:db/ident :v/uuid :db/valueType :db.type/uuid :db/cardinality :db.cardinality/one}
            {:db/ident :v/bytes :db/valueType :db.type/bytes :db/cardinality :db.cardinality/one}]"#,
    );
    run_ok(
        &["transact", s(&db)],
        r#"[{:db/id "x" :v/k :color/red :v/big 123456789012345678901234567890N :v/dec 1.50M
             :v/d ##NaN :v/inst #inst "2020-02-03T04:05:06.007Z"
             :v/uuid #uuid "0b5f6a8e-7c55-4d3c-9d1e-2f0a4b6c8d9e" :v/bytes #bytes "00ff10"}]"#,
    );
    let q = "[:find ?k ?big ?dec ?d ?inst ?uuid ?bytes \
             :where [?e :v/k ?k] [?e :v/big ?big] [?e :v/dec ?dec] [?e :v/d ?d] \
             [?e :v/inst ?inst] [?e :v/uuid ?uuid] [?e :v/bytes ?bytes]]";
    let json: serde_json::Value =
        serde_json::from_str(&run_ok(&["query", s(&db), q, "--format", "json"], "")).unwrap();
    assert_eq!(
        json,
        serde_json::json!([[
            ":color/red",
            "123456789012345678901234567890N",
            "1.50M",
            "##NaN",
            "2020-02-03T04:05:06.007Z",
            "0b5f6a8e-7c55-4d3c-9d1e-2f0a4b6c8d9e",
            {"#bytes": "00ff10"}
        ]])
    );
    let csv = run_ok(&["query", s(&db), q, "--format", "csv"], "");
    assert_eq!(
        csv.lines().nth(1).unwrap(),
        r###":color/red,123456789012345678901234567890N,1.50M,##NaN,"#inst ""2020-02-03T04:05:06.007Z""","#uuid ""0b5f6a8e-7c55-4d3c-9d1e-2f0a4b6c8d9e""","#bytes ""00ff10""""###
    );
}

/// The first line of an error, its code checked.
fn error_line(err: &str, code: &str) -> String {
    let first = err.lines().next().unwrap_or("").to_string();
    assert!(first.starts_with(&format!("error[{code}]: ")), "{err}");
    first
}

#[test]
fn each_cause_of_an_unopenable_database_has_its_own_code() {
    let f = fixture();
    let dir = f.db.parent().unwrap();
    // A file cut short: a copy of the first 3,000 bytes.
    let bytes = std::fs::read(&f.db).unwrap();
    let cut = dir.join("cut.vev");
    std::fs::write(&cut, &bytes[..3000]).unwrap();
    for cmd in ["stats", "verify"] {
        let line = error_line(&run_err(&[cmd, s(&cut)], ""), "storage/truncated");
        assert!(line.contains("the file has 3000 bytes"), "{line}");
    }
    let text = dir.join("notes.vev");
    std::fs::write(&text, "just some text\n").unwrap();
    let sqlite = dir.join("other.db");
    other_applications_sqlite_file(&sqlite, &bytes);
    for path in [&text, &sqlite] {
        error_line(&run_err(&["stats", s(path)], ""), "storage/not-vev");
        error_line(&run_err(&["transact", s(path)], "[]"), "storage/not-vev");
    }
    let sub = dir.join("a-directory.vev");
    std::fs::create_dir(&sub).unwrap();
    error_line(&run_err(&["stats", s(&sub)], ""), "storage/is-directory");
    error_line(
        &run_err(&["transact", s(&sub)], "[]"),
        "storage/is-directory",
    );
}

/// A SQLite file of another application: a Vev file whose application_id is changed
/// (bytes 68..72 of the SQLite header), which is all that tells the two apart.
fn other_applications_sqlite_file(path: &Path, vev_file: &[u8]) {
    let mut bytes = vev_file.to_vec();
    bytes[68..72].copy_from_slice(&[0, 0, 0, 7]);
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn a_writer_in_a_read_only_directory_says_so() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let ro = dir.path().join("ro");
    std::fs::create_dir(&ro).unwrap();
    std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o555)).unwrap();
    let db = ro.join("new.vev");
    let out = vev()
        .args(["transact", s(&db)])
        .write_stdin("[]")
        .output()
        .unwrap();
    // Whether this process can write there anyway (root can) decides what must happen.
    let writable = std::fs::File::create(ro.join("probe")).is_ok();
    std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o755)).unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    if writable {
        assert!(out.status.success(), "{err}");
    } else {
        assert_eq!(out.status.code(), Some(1));
        let line = error_line(&err, "storage/read-only-directory");
        assert!(line.contains("is read-only"), "{line}");
    }
}

#[test]
fn text_that_is_not_utf8_names_the_byte_offset() {
    let f = fixture();
    let dir = f.db.parent().unwrap();
    let tx = dir.join("bad.edn");
    std::fs::write(&tx, b"[{:person/name \"A\xff\"}]").unwrap();
    let q = dir.join("q.edn");
    std::fs::write(&q, b"[:find ?e :where [?e :person/name \"\xc3\"]]").unwrap();
    let expected = "is not valid UTF-8: byte 0xff at byte offset 17";
    let line = error_line(
        &run_err(&["transact", s(&f.db), s(&tx)], ""),
        "cli/invalid-utf8",
    );
    assert!(line.ends_with(&format!("bad.edn {expected}")), "{line}");
    let out = vev()
        .args(["transact", s(&f.db)])
        .write_stdin(std::fs::read(&tx).unwrap())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        error_line(&err, "cli/invalid-utf8"),
        format!("error[cli/invalid-utf8]: stdin {expected}")
    );
    let at = format!("@{}", s(&q));
    let line = error_line(&run_err(&["query", s(&f.db), &at], ""), "cli/invalid-utf8");
    assert!(line.ends_with("byte 0xc3 at byte offset 35"), "{line}");
}

#[test]
fn pull_errors_are_one_family() {
    let f = fixture();
    let pull = |pattern: &str, entity: &str| run_err(&["pull", s(&f.db), pattern, entity], "");
    error_line(&pull("[*]", ":no/such"), "pull/not-found");
    error_line(&pull("[*]", r#"[:no/such "x"]"#), "pull/not-found");
    error_line(
        &pull("[*]", r#"[:person/name "Ann"]"#),
        "pull/invalid-entity",
    );
    error_line(&pull("[*]", r#""ann""#), "pull/invalid-entity");
    error_line(
        &pull("[1]", r#"[:person/email "ann@x"]"#),
        "pull/invalid-pattern",
    );
    error_line(
        &pull("[:no/such]", r#"[:person/email "ann@x"]"#),
        "pull/unknown-attribute",
    );
}

#[test]
fn a_million_digit_literal_is_refused_and_no_message_echoes_it_whole() {
    let f = fixture();
    let digits = "7".repeat(1_000_000);
    let err = run_err(
        &["transact", s(&f.db)],
        &format!(r#"[{{:person/email "z@x" :person/name {digits}}}]"#),
    );
    let line = error_line(&err, "edn/number-too-long");
    assert!(err.len() < 600, "{} bytes: {line}", err.len());
    // A value the reader takes but the transactor refuses is echoed cut too.
    let digits = "7".repeat(10_000);
    let err = run_err(
        &["transact", s(&f.db)],
        &format!(r#"[{{:person/email "z@x" :person/name {digits}}}]"#),
    );
    let line = error_line(&err, "tx/wrong-value-type");
    // The word is the printed bigint, `777…7N`.
    assert!(line.contains("… (10001 chars)"), "{line}");
    assert!(err.len() < 600, "{} bytes: {line}", err.len());
}

#[test]
fn table_cells_with_newlines_and_tabs_keep_one_row_a_line() {
    let f = fixture();
    run_ok(
        &["transact", s(&f.db)],
        r#"[{:person/email "nl@x" :person/name "two\nlines\tand a tab"}]"#,
    );
    let q = r#"[:find ?n :where [?e :person/email "nl@x"] [?e :person/name ?n]]"#;
    let table = run_ok(&["query", s(&f.db), q, "--format", "table"], "");
    assert_eq!(
        table.lines().collect::<Vec<_>>(),
        [
            "?n",
            "---------------------",
            r"two\nlines\tand a tab",
            "(1 row)"
        ]
    );
}

#[test]
fn help_lists_every_command_and_describes_every_positional_argument() {
    // The summary `-h` starts with is the one sentence on Vev, not a list that can go stale
    // (it was the crate description, which left out export and import).
    let short = run_ok(&["-h"], "");
    assert!(
        short.starts_with("Vev: an embedded database of immutable facts"),
        "{short}"
    );
    let help = run_ok(&["--help"], "");
    assert!(
        short.contains("\n  export ") && short.contains("\n  import "),
        "{short}"
    );
    for cmd in [
        "transact", "query", "pull", "datoms", "log", "schema", "stats", "export", "import",
        "repl", "verify", "demo",
    ] {
        assert!(
            help.contains(&format!("\n  {cmd} ")),
            "{cmd} missing from --help"
        );
        let sub = run_ok(&[cmd, "--help"], "");
        let args = sub
            .split("Arguments:\n")
            .nth(1)
            .map_or("", |rest| rest.split("\nOptions:").next().unwrap_or(""));
        let lines: Vec<&str> = args.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            let name = line.trim_start();
            if !(name.starts_with('<') || name.starts_with('[')) {
                continue;
            }
            // `  <DB>  The database file`, or the description on the next line.
            let same_line = name
                .split_once("  ")
                .is_some_and(|(_, d)| !d.trim().is_empty());
            let next_line = lines.get(i + 1).is_some_and(|next| {
                let text = next.trim_start();
                next.len() - text.len() > 4 && !text.is_empty() && !text.starts_with(['<', '['])
            });
            assert!(
                same_line || next_line,
                "vev {cmd}: positional argument without a description: {line}"
            );
        }
    }
}

#[test]
fn the_demo_never_replaces_an_existing_database() {
    let dir = tempfile::tempdir().unwrap();
    let existing = dir.path().join("demo.vev");
    std::fs::write(&existing, "precious").unwrap();
    let out = run_ok(&["demo", s(dir.path()), "--people", "600"], "");
    assert_eq!(std::fs::read_to_string(&existing).unwrap(), "precious");
    let created = dir.path().join("demo-2.vev");
    assert!(
        out.starts_with(&format!("created {}\n", created.display())),
        "{out}"
    );
    assert!(created.exists());
    // Plurals, basis-t instead of tx ids, and rows printed whole.
    assert!(out.contains("in 2 transactions"), "{out}");
    assert!(
        !out.contains("1 rows") && !out.contains("1 transactions"),
        "{out}"
    );
    assert!(!out.contains("13194139"), "a raw tx id: {out}");
    for line in out.lines().filter(|l| l.trim_start().starts_with("=> [")) {
        assert!(line.trim_end().ends_with(']'), "a row cut short: {line}");
    }
    // Without a directory: a new one each run.
    let a = run_ok(&["demo", "--people", "10"], "");
    let b = run_ok(&["demo", "--people", "10"], "");
    let path = |out: &str| {
        out.lines()
            .next()
            .unwrap()
            .trim_start_matches("created ")
            .to_string()
    };
    assert_ne!(path(&a), path(&b));
    for out in [&a, &b] {
        let file = PathBuf::from(path(out));
        assert!(file.exists());
        std::fs::remove_dir_all(file.parent().unwrap()).unwrap();
    }
}

/// Full text from the command line: `fulltext` in `vev query`, its error with a position,
/// the index's counters in `vev stats` (EDN and table) and its check in `vev verify`.
#[test]
fn fulltext_query_stats_and_verify() {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("ft.vev");
    run_ok(
        &["transact", s(&db)],
        r#"[{:db/ident :track/name :db/valueType :db.type/string
             :db/cardinality :db.cardinality/one :db/fulltext true}]"#,
    );
    run_ok(
        &["transact", s(&db)],
        r#"[{:track/name "Crazy in Love"} {:track/name "Love Me Do"} {:track/name "Intro"}]"#,
    );
    run_ok(
        &["transact", s(&db)],
        r#"[{:track/name "Always on My Mind"}]"#,
    );
    let q = r#"[:find ?name :in $ ?q :where [(fulltext $ :track/name ?q) [[_ ?name]]]]"#;
    let out = run_ok(
        &["query", s(&db), q, "\"love -crazy\"", "--format", "csv"],
        "",
    );
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        ["?name", "Love Me Do"],
        "{out}"
    );
    let err = run_err(&["query", s(&db), q, "\"love \\\"me\""], "");
    assert!(err.starts_with("error[fulltext/invalid-query]: "), "{err}");
    assert!(err.contains("position 5"), "{err}");
    let stats = parse(&run_ok(&["stats", s(&db)], "")).unwrap();
    let ft = get(&stats, "fulltext");
    assert_eq!(get(ft, "segments-written"), &Edn::Integer(2));
    assert_eq!(get(ft, "manifest-appends"), &Edn::Integer(2));
    assert_eq!(get(ft, "documents"), &Edn::Integer(4));
    let table = run_ok(&["stats", s(&db), "--format", "table"], "");
    assert!(table.contains("fulltext live-segments"), "{table}");
    let verified = parse(&run_ok(&["verify", s(&db)], "")).unwrap();
    assert_eq!(get(&verified, "fulltext-documents"), &Edn::Integer(4));
    assert_eq!(get(&verified, "fulltext-segments"), &Edn::Integer(2));
}

/// `vev serve` stops on SIGTERM and on SIGINT: it closes its connections, checkpoints (the
/// file's root is at the last transaction, so the next start replays no log) and exits 0.
#[cfg(unix)]
#[test]
fn serve_stops_and_checkpoints_on_sigterm_and_sigint() {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("served.vev");
    let root_t = |db: &Path| -> Option<i64> {
        let conn =
            rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
                .unwrap();
        conn.query_row("SELECT t FROM vev_root WHERE slot = 0", [], |r| r.get(0))
            .ok()
    };
    for (signal, sql) in [
        (
            "TERM",
            "CREATE TABLE pet (id int PRIMARY KEY, name text); \
             INSERT INTO pet VALUES (1, 'Rex'), (2, 'Tom')",
        ),
        ("INT", "INSERT INTO pet VALUES (3, 'Kit')"),
    ] {
        let server = Live::spawn(&["serve", s(&db), "--port", "0"]);
        let first = server.line();
        let port =
            common::served_port(&first).unwrap_or_else(|| panic!("vev serve printed {first:?}"));
        let psql = common::psql(port)
            .args(["-c", sql])
            .output()
            .expect("psql runs");
        assert!(
            psql.status.success(),
            "{}",
            String::from_utf8_lossy(&psql.stderr)
        );
        let pid = server.child.id().to_string();
        let kill = std::process::Command::new("kill")
            .args([&format!("-{signal}"), &pid])
            .status()
            .expect("kill runs");
        assert!(kill.success());
        assert_eq!(
            server.line(),
            format!("vev serve: SIG{signal}: connections closed, checkpointing")
        );
        assert_eq!(server.line(), "vev serve: stopped");
        let out = server.finish();
        assert!(
            out.status.success(),
            "SIG{signal}: {:?} {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        let stats = parse(&run_ok(&["stats", s(&db), "--format", "edn"], "")).unwrap();
        let Edn::Integer(basis) = get(&stats, "basis-t") else {
            panic!("{stats}")
        };
        assert_eq!(root_t(&db), Some(*basis), "SIG{signal}: the checkpoint's t");
    }
    let names = run_ok(&["query", s(&db), "[:find ?n :where [_ :pet/name ?n]]"], "");
    for name in ["Rex", "Tom", "Kit"] {
        assert!(names.contains(name), "{names}");
    }
    // A server whose segment cache holds one datom reads every segment from the file
    // again, and answers the same.
    let server = Live::spawn(&["serve", s(&db), "--port", "0", "--cache-datoms", "1"]);
    let first = server.line();
    let port = common::served_port(&first).unwrap_or_else(|| panic!("vev serve printed {first:?}"));
    let psql = common::psql(port)
        .args(["-At", "-c", "SELECT name FROM pet ORDER BY id"])
        .output()
        .expect("psql runs");
    assert_eq!(String::from_utf8_lossy(&psql.stdout), "Rex\nTom\nKit\n");
    let kill = std::process::Command::new("kill")
        .args(["-TERM", &server.child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(kill.success());
    assert!(server.finish().status.success());
}
