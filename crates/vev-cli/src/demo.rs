//! `vev demo`: a database file with a generated social graph, loaded through `bulk_load` with a
//! progress bar, then example queries with their timings.
//!
//! People are generated in transactions of 500 by `vev::sample::People` (an email, a name, an
//! age, a city and two or three friends among the people before them). After the
//! load, a small transaction moves some people to another city, so that as-of and history
//! have something to show.

use std::io::{self, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use vev::{Connection, Edn};

use crate::error::{CliError, CliResult};

/// People a transaction of the load holds.
const TX_PEOPLE: usize = 500;

/// A database file that did not exist: `STEM.vev` in DIR (created if missing), or the first
/// of `STEM-2.vev`, `STEM-3.vev`, ... not taken there; without DIR, `STEM.vev` in a new
/// directory `vev-demo-PID-SECONDS` of the system's temporary directory. An existing file is
/// never replaced or deleted.
pub(crate) fn fresh_file(dir: Option<PathBuf>, stem: &str) -> CliResult<PathBuf> {
    let io_err = |path: &std::path::Path| {
        let path = path.display().to_string();
        move |err| CliError::Io { path, err }
    };
    let dir = match dir {
        Some(dir) => {
            std::fs::create_dir_all(&dir).map_err(io_err(&dir))?;
            dir
        }
        None => new_temp_dir().map_err(io_err(&std::env::temp_dir()))?,
    };
    let taken = |p: &std::path::Path| {
        ["", "-wal", "-shm"].iter().any(|suffix| {
            let mut name = p.as_os_str().to_owned();
            name.push(suffix);
            std::path::Path::new(&name).exists()
        })
    };
    let path = (1..)
        .map(|n| match n {
            1 => dir.join(format!("{stem}.vev")),
            n => dir.join(format!("{stem}-{n}.vev")),
        })
        .find(|p| !taken(p))
        .unwrap_or_else(|| dir.join(format!("{stem}.vev")));
    Ok(path)
}

/// A directory of the system's temporary directory that this call created.
fn new_temp_dir() -> io::Result<PathBuf> {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let base = format!("vev-demo-{}-{secs}", std::process::id());
    let mut n = 1;
    loop {
        let name = if n == 1 {
            base.clone()
        } else {
            format!("{base}-{n}")
        };
        let dir = std::env::temp_dir().join(name);
        match std::fs::create_dir(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && n < 100 => n += 1,
            Err(e) => return Err(e),
        }
    }
}

/// `1 transaction`, `2 transactions`.
pub(crate) fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

pub fn run(dir: Option<PathBuf>, people: usize) -> CliResult<()> {
    let path = fresh_file(dir, "demo")?;
    let conn = Connection::open(&path)?;
    let mut out = io::stdout().lock();
    writeln!(out, "created {}", path.display())?;
    conn.transact_edn(vev::sample::PEOPLE_SCHEMA)?;
    writeln!(
        out,
        "schema: :person/email :person/name :person/age :person/city :person/friend"
    )?;

    let txs = people.div_ceil(TX_PEOPLE);
    let bar = ProgressBar::new(txs as u64);
    bar.set_style(
        ProgressStyle::with_template("loading {bar:40} {pos}/{len} transactions ({elapsed}) {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let mut generator = vev::sample::People::new(42);
    let mut parse_error = None;
    // The bar moves as the transactor takes each transaction; bulk_load reports the datoms
    // committed after each write batch.
    let generated = bar.clone();
    let batches = (0..txs).map_while(|k| {
        generated.set_position(k as u64);
        let text = generator.tx(k * TX_PEOPLE, ((k + 1) * TX_PEOPLE).min(people));
        match vev::parse_tx(&text) {
            Ok(ops) => Some(ops.into_iter().map(|s| s.op).collect()),
            Err(e) => {
                parse_error = Some(e);
                None
            }
        }
    });
    let loaded = conn.bulk_load(batches, &mut |p| {
        bar.set_message(format!("{} datoms committed", p.datoms));
    })?;
    bar.finish_and_clear();
    if let Some(e) = parse_error {
        return Err(e.into());
    }
    let t_loaded = conn.db().basis_t();
    writeln!(
        out,
        "loaded {}: {} in {} in {:.2?} (basis-t {t_loaded})",
        count(people, "person", "people"),
        count(loaded.datoms as usize, "datom", "datoms"),
        count(loaded.txs as usize, "transaction", "transactions"),
        loaded.elapsed
    )?;

    // Some people move to Oslo, so the past differs from the present.
    let movers: Vec<String> = (0..people.min(100))
        .map(|i| format!(r#"{{:person/email "p{i}@example.com" :person/city "Oslo"}}"#))
        .collect();
    let moved = conn.transact_edn(&format!("[{}]", movers.join(" ")))?;
    writeln!(
        out,
        "moved {} to Oslo at basis-t {}",
        count(movers.len(), "person", "people"),
        moved.db_after.basis_t()
    )?;
    writeln!(out)?;
    queries(&conn, people, t_loaded, &mut out)?;
    writeln!(
        out,
        "try: vev query {} '[:find ?name (count ?p) :where [?p :person/name ?name]]'",
        path.display()
    )?;
    Ok(())
}

const RULES: &str = r#"[[(reach ?a ?b) [?a :person/friend ?b]]
                        [(reach ?a ?b) [?a :person/friend ?x] (reach ?x ?b)]]"#;

/// Rows of a result printed whole before `... N more rows`.
const SHOWN_ROWS: usize = 5;

/// Run a query and print its title, its text, its timing and its first rows (each row
/// whole, one a line), with `edit` applied to each row before it is printed.
pub(crate) fn show(
    out: &mut dyn Write,
    title: &str,
    db: &vev::Db,
    query: &str,
    args: &[Edn],
    edit: &dyn Fn(Vec<Edn>) -> Vec<Edn>,
) -> CliResult<()> {
    let started = Instant::now();
    let result = db.q(query, args)?;
    let elapsed = started.elapsed();
    let n = result.len();
    writeln!(
        out,
        "{title} ({}, {}):",
        count(n, "row", "rows"),
        ms(elapsed)
    )?;
    let query = query.split_whitespace().collect::<Vec<_>>().join(" ");
    writeln!(out, "  {query}")?;
    match result.to_edn() {
        Edn::Set(rows) => write_rows(out, rows.into_iter(), n, edit)?,
        Edn::Vector(rows) | Edn::List(rows) => write_rows(out, rows.into_iter(), n, edit)?,
        scalar => writeln!(out, "  => {scalar}")?,
    }
    writeln!(out)?;
    Ok(())
}

fn write_rows(
    out: &mut dyn Write,
    rows: impl Iterator<Item = Edn>,
    n: usize,
    edit: &dyn Fn(Vec<Edn>) -> Vec<Edn>,
) -> CliResult<()> {
    for row in rows.take(SHOWN_ROWS) {
        let row = match row {
            Edn::Vector(cells) => Edn::Vector(edit(cells)),
            other => other,
        };
        writeln!(out, "  => {row}")?;
    }
    if n > SHOWN_ROWS {
        let more = n - SHOWN_ROWS;
        let rows = if more == 1 { "row" } else { "rows" };
        writeln!(out, "  ... and {more} more {rows}")?;
    }
    Ok(())
}

/// Rows printed as the engine gives them.
pub(crate) fn as_is(row: Vec<Edn>) -> Vec<Edn> {
    row
}

fn queries(conn: &Connection, people: usize, t_loaded: u64, out: &mut impl Write) -> CliResult<()> {
    let db = conn.db();
    let last = people.saturating_sub(1);
    let email = |i: usize| Edn::String(format!("p{i}@example.com"));
    let rules = vev::edn::parse(RULES)?;
    show(
        out,
        "join: 30-year-olds in Riga and their friends who live in Riga too",
        &db,
        r#"[:find ?a-email ?b-email
            :where [?a :person/age 30] [?a :person/city "Riga"] [?a :person/friend ?b]
                   [?b :person/city "Riga"] [?a :person/email ?a-email] [?b :person/email ?b-email]]"#,
        &[],
        &as_is,
    )?;
    show(
        out,
        "aggregate: people and average age per city",
        &db,
        r#"[:find ?city (count ?p) (avg ?age)
            :where [?p :person/city ?city] [?p :person/age ?age]]"#,
        &[],
        &as_is,
    )?;
    show(
        out,
        &format!("rule: how many people p{last} reaches through friends of friends (recursive)"),
        &db,
        r#"[:find (count ?b) . :in $ % ?email
            :where [?a :person/email ?email] (reach ?a ?b)]"#,
        &[rules, email(last)],
        &as_is,
    )?;
    pull_example(&db, out, email(30))?;
    let oslo = r#"[:find (count ?p) . :where [?p :person/city "Oslo"]]"#;
    let title = "as-of: people in Oslo now and as of the load";
    show(out, title, &db, oslo, &[], &as_is)?;
    let title = format!("  ... as of basis-t {t_loaded}");
    show(out, &title, &db.as_of(t_loaded), oslo, &[], &as_is)?;
    // ?tx is a transaction's entity id; its basis-t is what --as-of and the log show.
    let basis_t = |mut row: Vec<Edn>| {
        if let Some(Edn::Integer(tx)) = row.get(1) {
            row[1] = Edn::Integer(vev::ids::t_of(*tx as u64) as i64);
        }
        row
    };
    show(
        out,
        "history: every city p1 has had (?tx printed as its basis-t; true: asserted)",
        &db.history(),
        r#"[:find ?city ?tx ?added :in $ ?email
            :where [?p :person/email ?email] [?p :person/city ?city ?tx ?added]]"#,
        &[email(1)],
        &basis_t,
    )?;
    Ok(())
}

fn pull_example(db: &vev::Db, out: &mut impl Write, email: Edn) -> CliResult<()> {
    let started = Instant::now();
    let p30 = db
        .q(
            "[:find ?p . :in $ ?email :where [?p :person/email ?email]]",
            &[email],
        )?
        .to_edn();
    let pattern =
        "[:person/name :person/age :person/city {:person/friend [:person/name :person/email]}]";
    let pulled = match p30 {
        Edn::Integer(e) => db.pull(pattern, e as u64)?,
        _ => Edn::Nil,
    };
    writeln!(
        out,
        "pull: p30 and their friends ({}):",
        ms(started.elapsed())
    )?;
    writeln!(out, "  {pattern}\n  => {pulled}\n")?;
    Ok(())
}

pub(crate) fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}
