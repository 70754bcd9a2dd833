//! The SQL differential test: the same random schema, rows, SELECTs, UPDATEs and DELETEs
//! run against `vev serve` (in process, on an in-memory database) and a real PostgreSQL 15
//! (a throwaway cluster, `differential/pg.rs`), and the answers must agree.
//!
//! Each case is a seed: `differential/gen.rs` makes 2 or 3 tables, fills them with
//! multi-row INSERTs, then runs a mix of SELECTs (filters, inner joins on keys, GROUP BY
//! with aggregates, DISTINCT, ORDER BY with LIMIT/OFFSET, UNION [ALL] with the same query
//! under another filter) and writes. A SELECT runs on
//! PostgreSQL through the simple query protocol and on Vev through both the simple and the
//! extended protocol (Parse/Bind/Execute with binary results, as drivers do); after each
//! write the written table's contents are compared. Answers compare as multisets of rows
//! (as sequences under ORDER BY, which always covers every output column), numbers by value
//! (PostgreSQL's `avg` of integers is numeric, Vev's a double), column names exactly, and
//! two errors by their SQLSTATE class. A failing SELECT is shrunk before it is reported;
//! the report names the seed and a replay script of the case's DDL and writes.
//!
//! `VEV_DIFF_CASES=<n>` runs more cases, `VEV_DIFF_SEED=<n>` starts from another seed
//! (see `tests/README.md`). The test skips, saying so, only where PostgreSQL 15's server
//! binary is not installed.

#[path = "differential/gen.rs"]
mod gen;
#[path = "differential/pg.rs"]
mod pg;

use std::time::Instant;

use gen::{Rng, Schema, Select};
use pg::connect;
use tokio_postgres::types::{FromSql, Type};
use tokio_postgres::{Client, SimpleQueryMessage};

const SEED: u64 = 0x5EED_0020;
const CASES: u64 = 30;
/// Statements per case after the initial rows.
const STATEMENTS: usize = 60;

#[test]
fn sql_differential_against_postgres_15() {
    if !pg::available() {
        eprintln!(
            "SKIPPED sql_differential_against_postgres_15: {}/postgres is not installed \
             (apt-get install postgresql-15)",
            pg::BIN
        );
        return;
    }
    let cases = env_number("VEV_DIFF_CASES", CASES);
    let seed = env_number("VEV_DIFF_SEED", SEED);
    let started = Instant::now();
    let postgres = pg::Postgres::start().expect("a throwaway PostgreSQL 15 starts");
    let pg_ready = started.elapsed();
    let server = pg::start_vev();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let stats = rt.block_on(async {
        let pg = connect(postgres.port, "postgres").await;
        pg.simple_query("CREATE DATABASE vevdiff")
            .await
            .expect("CREATE DATABASE");
        let pair = Pair {
            pg: connect(postgres.port, "vevdiff").await,
            vev: connect(server.local_addr().port(), "vevdiff").await,
        };
        let mut stats = Stats::default();
        run_regressions(&pair, &mut stats).await;
        for case in 0..cases {
            run_case(&pair, seed.wrapping_add(case), &mut stats).await;
        }
        stats
    });
    eprintln!(
        "differential: {cases} cases from seed {seed:#x}: {} selects ({} with rows, {} both \
         erring, {} set operations, {} through a derived table, {} with a scalar subquery, {} with a FULL JOIN), {} writes, in {:.1?} (PostgreSQL started in {:.1?})",
        stats.selects,
        stats.with_rows,
        stats.both_err,
        stats.unions,
        stats.derived,
        stats.scalars,
        stats.full_joins,
        stats.writes,
        started.elapsed(),
        pg_ready
    );
    // The generator must mostly make statements both systems answer, or the comparison
    // says little.
    assert!(
        stats.both_err * 20 <= stats.selects + stats.writes,
        "too many statements fail on both systems: {stats:?}"
    );
    assert!(
        stats.with_rows * 2 >= stats.selects,
        "too few selects return rows: {stats:?}"
    );
}

fn env_number(name: &str, default: u64) -> u64 {
    match std::env::var(name) {
        Ok(v) => {
            let v = v.trim();
            let parsed = match v.strip_prefix("0x") {
                Some(hex) => u64::from_str_radix(hex, 16),
                None => v.parse(),
            };
            parsed.unwrap_or_else(|_| panic!("{name}={v} is not a number"))
        }
        Err(_) => default,
    }
}

#[derive(Debug, Default)]
struct Stats {
    selects: usize,
    with_rows: usize,
    both_err: usize,
    writes: usize,
    /// Of the selects, those that are a UNION [ALL].
    unions: usize,
    /// Read through a derived table, and with a scalar subquery.
    derived: usize,
    scalars: usize,
    full_joins: usize,
}

struct Pair {
    pg: Client,
    vev: Client,
}

/// How a statement reached Vev.
#[derive(Clone, Copy, Debug)]
enum Protocol {
    Simple,
    Extended,
}

/// A statement's answer: rows in text form, a count of rows written, or an error.
#[derive(Clone, Debug)]
enum Answer {
    Rows {
        names: Vec<String>,
        rows: Vec<Vec<Option<String>>>,
    },
    Count(u64),
    Error {
        code: String,
        message: String,
    },
}

async fn simple(c: &Client, sql: &str) -> Answer {
    let msgs = match c.simple_query(sql).await {
        Ok(msgs) => msgs,
        Err(e) => return error(e),
    };
    let (mut names, mut rows, mut count) = (None, Vec::new(), 0);
    for m in msgs {
        match m {
            SimpleQueryMessage::RowDescription(cols) => {
                names = Some(cols.iter().map(|c| c.name().to_owned()).collect())
            }
            SimpleQueryMessage::Row(r) => {
                rows.push((0..r.len()).map(|i| r.get(i).map(str::to_owned)).collect())
            }
            SimpleQueryMessage::CommandComplete(n) => count = n,
            _ => {}
        }
    }
    match names {
        Some(names) => Answer::Rows { names, rows },
        None => Answer::Count(count),
    }
}

/// A query through Parse/Describe/Bind/Execute, its values in binary (tokio-postgres asks
/// for binary results), turned into text by `Cell`.
async fn extended(c: &Client, sql: &str) -> Answer {
    let stmt = match c.prepare(sql).await {
        Ok(s) => s,
        Err(e) => return error(e),
    };
    let names = stmt.columns().iter().map(|c| c.name().to_owned()).collect();
    match c.query(&stmt, &[]).await {
        Ok(rows) => Answer::Rows {
            names,
            rows: rows
                .iter()
                .map(|r| {
                    (0..r.len())
                        .map(|i| match r.try_get::<_, Cell>(i) {
                            Ok(c) => c.0,
                            Err(e) => Some(format!("<undecodable: {e}>")),
                        })
                        .collect()
                })
                .collect(),
        },
        Err(e) => error(e),
    }
}

fn error(e: tokio_postgres::Error) -> Answer {
    match e.as_db_error() {
        Some(db) => Answer::Error {
            code: db.code().code().to_owned(),
            message: db.message().to_owned(),
        },
        None => Answer::Error {
            code: "client".into(),
            message: e.to_string(),
        },
    }
}

/// A value of any type the generated SQL yields, decoded from binary into PostgreSQL's text.
struct Cell(Option<String>);

type DecodeError = Box<dyn std::error::Error + Sync + Send>;

impl<'a> FromSql<'a> for Cell {
    fn from_sql(ty: &Type, raw: &'a [u8]) -> Result<Cell, DecodeError> {
        let text = match *ty {
            Type::BOOL => if bool::from_sql(ty, raw)? { "t" } else { "f" }.to_owned(),
            Type::INT2 => i16::from_sql(ty, raw)?.to_string(),
            Type::INT4 => i32::from_sql(ty, raw)?.to_string(),
            Type::INT8 => i64::from_sql(ty, raw)?.to_string(),
            Type::FLOAT4 => f32::from_sql(ty, raw)?.to_string(),
            Type::FLOAT8 => f64::from_sql(ty, raw)?.to_string(),
            Type::NUMERIC => numeric_text(raw)?,
            _ => String::from_sql(ty, raw)?,
        };
        Ok(Cell(Some(text)))
    }

    fn from_sql_null(_: &Type) -> Result<Cell, DecodeError> {
        Ok(Cell(None))
    }

    fn accepts(_: &Type) -> bool {
        true
    }
}

/// PostgreSQL's binary numeric (digit count, weight, sign, scale, base-10000 digits) as a
/// decimal number's text (through a double: the comparison is by value anyway).
fn numeric_text(raw: &[u8]) -> Result<String, DecodeError> {
    let word = |i: usize| -> Result<u16, DecodeError> {
        raw.get(2 * i..2 * i + 2)
            .map(|b| u16::from_be_bytes([b[0], b[1]]))
            .ok_or_else(|| "a truncated numeric".into())
    };
    let (ndigits, weight, sign) = (word(0)? as usize, word(1)? as i16, word(2)?);
    if sign == 0xC000 {
        return Ok("NaN".into());
    }
    let mut v = 0.0f64;
    for i in 0..ndigits {
        v += f64::from(word(4 + i)?) * 10000f64.powi(i32::from(weight) - i as i32);
    }
    Ok(if sign == 0x4000 { -v } else { v }.to_string())
}

/// A value as compared: numbers by value (to 10 significant digits), the rest as text.
fn canonical(v: &Option<String>) -> String {
    let Some(s) = v else {
        return "\u{0}NULL".into();
    };
    let numeric = !s.is_empty()
        && s.chars().any(|c| c.is_ascii_digit())
        && s.chars().all(|c| c.is_ascii_digit() || "+-.eE".contains(c));
    match s.parse::<f64>() {
        Ok(f) if numeric => format!("{:.9e}", if f == 0.0 { 0.0 } else { f }),
        _ => s.clone(),
    }
}

/// Why two answers differ, or `None` when they agree.
fn difference(pg: &Answer, vev: &Answer, ordered: bool) -> Option<String> {
    match (pg, vev) {
        (Answer::Error { code: a, .. }, Answer::Error { code: b, .. }) => {
            (a.get(..2) != b.get(..2)).then(|| format!("SQLSTATE {a} against {b}"))
        }
        (Answer::Count(a), Answer::Count(b)) => {
            (a != b).then(|| format!("{a} rows written against {b}"))
        }
        (Answer::Rows { names: na, rows: a }, Answer::Rows { names: nb, rows: b }) => {
            if na != nb {
                return Some(format!("column names {na:?} against {nb:?}"));
            }
            let canon = |rows: &[Vec<Option<String>>]| -> Vec<Vec<String>> {
                let mut out: Vec<Vec<String>> = rows
                    .iter()
                    .map(|r| r.iter().map(canonical).collect())
                    .collect();
                if !ordered {
                    out.sort();
                }
                out
            };
            let (ca, cb) = (canon(a), canon(b));
            (ca != cb).then(|| {
                let only = |x: &[Vec<String>], y: &[Vec<String>]| {
                    let mut y = y.to_vec();
                    x.iter()
                        .filter(|r| match y.iter().position(|s| s == *r) {
                            Some(i) => {
                                y.swap_remove(i);
                                false
                            }
                            None => true,
                        })
                        .count()
                };
                format!(
                    "{} rows against {}; {} only in PostgreSQL, {} only in Vev{}",
                    a.len(),
                    b.len(),
                    only(&ca, &cb),
                    only(&cb, &ca),
                    if ordered {
                        " (or in another order)"
                    } else {
                        ""
                    }
                )
            })
        }
        _ => Some("different kinds of answer".into()),
    }
}

fn show(a: &Answer) -> String {
    match a {
        Answer::Rows { names, rows } => {
            let mut s = format!("  columns {names:?}, {} rows\n", rows.len());
            for r in rows.iter().take(40) {
                let cells: Vec<&str> = r.iter().map(|c| c.as_deref().unwrap_or("NULL")).collect();
                s.push_str(&format!("  | {}\n", cells.join(" | ")));
            }
            if rows.len() > 40 {
                s.push_str("  | ...\n");
            }
            s
        }
        Answer::Count(n) => format!("  {n} rows written\n"),
        Answer::Error { code, message } => format!("  ERROR {code}: {message}\n"),
    }
}

/// Statements that once answered differently (each fixed in vev-pg), run first.
const REGRESSIONS: &[&str] = &[
    "CREATE TABLE reg (id int PRIMARY KEY, i int, b bigint, d double precision)",
    "INSERT INTO reg VALUES (1, 2, 5, 16.5), (2, -3, NULL, -2.5), (3, NULL, 7, 0.0), \
     (4, 20, 3000000007, 18.5), (5, 0, 0, 0.5)",
    // An integer column against a decimal or a bigint literal compares by value.
    "SELECT id FROM reg WHERE i < 2.5",
    "SELECT id FROM reg WHERE i = 20.0",
    "SELECT id FROM reg WHERE 1.5 < i OR i > 3000000000",
    "SELECT id FROM reg WHERE i > -3000000000",
    "SELECT id FROM reg WHERE i BETWEEN -2.5 AND 2.5",
    // -0 equals 0.
    "UPDATE reg SET d = - d WHERE id = 3",
    "SELECT id, d = - d, d = 0 FROM reg",
    "SELECT id FROM reg WHERE d = 0",
    // A double assigned to an integer column rounds half to even, a numeric half away
    // from zero.
    "UPDATE reg SET i = d",
    "UPDATE reg SET b = 2.5 WHERE id = 1",
    "UPDATE reg SET b = -2.5 WHERE id = 2",
    "SELECT * FROM reg",
    // -0 sorts with 0.
    "SELECT id, d * 0.0 FROM reg ORDER BY 2 DESC, 1",
    "DROP TABLE reg",
    // `b` is bound by the first term's `get-else` (NULL in row 5) and `b > i` compared
    // before the pattern on `b` dropped the row (`i` has the fewest values: the planner
    // starts there).
    "CREATE TABLE reg2 (id int PRIMARY KEY, b bigint, i int)",
    "INSERT INTO reg2 VALUES (1, 1, NULL), (2, 2, NULL), (3, 3, NULL), (4, 4, NULL), \
     (5, NULL, 55)",
    "SELECT id FROM reg2 WHERE (b + id) = id AND b > i",
    "SELECT id FROM reg2 WHERE (b + id) > 0 AND b > i",
    "DROP TABLE reg2",
    // Numerics of different scales are one value: one group, one DISTINCT row, equal.
    "CREATE TABLE reg3 (id int PRIMARY KEY, n numeric, r real)",
    "INSERT INTO reg3 VALUES (1, 2.5, 1.5), (2, 2.50, NULL), (3, -2.500, 0.25)",
    "SELECT n, count(*) FROM reg3 GROUP BY n",
    "SELECT DISTINCT n FROM reg3",
    "SELECT id FROM reg3 WHERE n = 2.500",
    // Minus and abs of a numeric.
    "SELECT id, - n, abs(n) FROM reg3",
    // A numeric assigned to a real column.
    "UPDATE reg3 SET r = n",
    "SELECT * FROM reg3",
    "DROP TABLE reg3",
    // HAVING: aggregates shown and hidden, keys, NULLs, numerics against integers, and the
    // one row of an aggregate without GROUP BY kept or dropped.
    "CREATE TABLE hav (id int PRIMARY KEY, k text, v int, n numeric)",
    "INSERT INTO hav VALUES (1, 'a', 1, 1.5), (2, 'a', 2, NULL), (3, 'b', 5, 2.5), \
     (4, 'c', NULL, NULL), (5, 'c', 7, 0.5), (6, 'c', 8, 1)",
    "SELECT k, count(*) FROM hav GROUP BY k HAVING count(*) > 1",
    "SELECT k FROM hav GROUP BY k HAVING sum(v) >= 8 AND max(v) < 8",
    "SELECT k, sum(v) FROM hav GROUP BY k HAVING NOT (min(v) = 1) OR k = 'a'",
    "SELECT k FROM hav GROUP BY k HAVING avg(v) > 3.5",
    "SELECT k FROM hav GROUP BY k HAVING sum(n) > 1",
    "SELECT k FROM hav GROUP BY k HAVING sum(n) = 1.5",
    "SELECT k FROM hav GROUP BY k HAVING max(n) IS NULL OR min(v) IS NULL",
    "SELECT count(*) FROM hav HAVING count(*) > 10",
    "SELECT count(*) FROM hav WHERE id > 100 HAVING count(*) = 0",
    "SELECT k, count(v) FROM hav GROUP BY k HAVING count(v) <> 2 ORDER BY 2 DESC, 1",
    "SELECT k FROM hav GROUP BY k HAVING k > 'a' AND count(*) > -1",
    "DROP TABLE hav",
    // ON CONFLICT DO NOTHING: keys in the table and repeated within the statement skipped
    // (the count says how many went in); a target other than the key is 42P10.
    "CREATE TABLE upk (id int PRIMARY KEY, v text)",
    "INSERT INTO upk VALUES (1, 'a'), (2, 'b')",
    "INSERT INTO upk VALUES (2, 'x'), (3, 'c'), (3, 'd') ON CONFLICT DO NOTHING",
    "INSERT INTO upk VALUES (1, 'y') ON CONFLICT (id) DO NOTHING",
    "INSERT INTO upk VALUES (4, 'e') ON CONFLICT (v) DO NOTHING",
    "SELECT * FROM upk",
    "DELETE FROM upk WHERE id = 1",
    "INSERT INTO upk VALUES (1, 'z'), (5, 'f') ON CONFLICT DO NOTHING",
    "SELECT * FROM upk",
    "DROP TABLE upk",
    // ON CONFLICT DO UPDATE: EXCLUDED and the existing row, a WHERE that holds or not, a
    // key twice in one statement (21000), no target (42601).
    "CREATE TABLE ups (id int PRIMARY KEY, v int, t text)",
    "INSERT INTO ups VALUES (1, 10, 'a'), (2, 20, 'b')",
    "INSERT INTO ups VALUES (2, 5, 'x'), (3, 30, 'c') \
     ON CONFLICT (id) DO UPDATE SET v = ups.v + EXCLUDED.v",
    "SELECT * FROM ups",
    "INSERT INTO ups VALUES (1, 1, 'y') ON CONFLICT (id) DO UPDATE SET t = EXCLUDED.t, v = NULL \
     WHERE ups.v > 100",
    "INSERT INTO ups VALUES (1, 1, 'y') ON CONFLICT (id) DO UPDATE SET t = EXCLUDED.t || '!' \
     WHERE ups.v < 100",
    "SELECT * FROM ups",
    "INSERT INTO ups VALUES (4, 1, 'p'), (4, 2, 'q') ON CONFLICT (id) DO UPDATE SET v = EXCLUDED.v",
    "INSERT INTO ups VALUES (1, 1, 'p'), (1, 2, 'q') ON CONFLICT (id) DO UPDATE SET v = EXCLUDED.v",
    "INSERT INTO ups VALUES (5, 1, 'z') ON CONFLICT DO UPDATE SET v = 1",
    "INSERT INTO ups (id, t) VALUES (3, 'n') ON CONFLICT (id) DO UPDATE SET v = EXCLUDED.v",
    "SELECT * FROM ups",
    "DROP TABLE ups",
];

async fn run_regressions(pair: &Pair, stats: &mut Stats) {
    let mut case = Case {
        pair,
        seed: 0,
        schema: Schema { tables: Vec::new() },
        history: Vec::new(),
    };
    for sql in REGRESSIONS {
        if sql.starts_with("SELECT") {
            case.check(sql, stats).await;
        } else {
            case.write(sql, None, stats).await;
        }
    }
}

/// One case: its schema and the statements run so far (the writes, to replay it).
struct Case<'p> {
    pair: &'p Pair,
    seed: u64,
    schema: Schema,
    history: Vec<String>,
}

async fn run_case(pair: &Pair, seed: u64, stats: &mut Stats) {
    let mut rng = Rng::new(seed);
    let schema = Schema::random(&mut rng, &format!("s{seed:x}"));
    let mut case = Case {
        pair,
        seed,
        schema: schema.clone(),
        history: Vec::new(),
    };
    for ddl in schema.ddl() {
        case.write(&ddl, None, stats).await;
    }
    for t in 0..schema.tables.len() {
        for _ in 0..1 + rng.below(3) {
            let rows = 3 + rng.below(12);
            let sql = gen::insert(&mut rng, &mut case.schema, t, rows);
            case.write(&sql, Some(t), stats).await;
        }
    }
    for _ in 0..STATEMENTS {
        let t = rng.below(schema.tables.len());
        match rng.below(100) {
            0..=64 => {
                let s = gen::select(&mut rng, &case.schema);
                case.select(&s, stats).await;
            }
            65..=74 => {
                let rows = 1 + rng.below(4);
                let sql = gen::insert(&mut rng, &mut case.schema, t, rows);
                case.write(&sql, Some(t), stats).await;
            }
            75..=88 => {
                let sql = gen::update(&mut rng, &case.schema, t);
                case.write(&sql, Some(t), stats).await;
            }
            _ => {
                let sql = gen::delete(&mut rng, &case.schema, t);
                case.write(&sql, Some(t), stats).await;
            }
        }
    }
    let names: Vec<&str> = schema.tables.iter().map(|t| t.name.as_str()).collect();
    case.write(&format!("DROP TABLE {}", names.join(", ")), None, stats)
        .await;
}

impl Case<'_> {
    /// Run a write (or DDL) on both systems, compare the answers and then the table's rows.
    async fn write(&mut self, sql: &str, table: Option<usize>, stats: &mut Stats) {
        self.history.push(sql.to_owned());
        stats.writes += 1;
        let pg = simple(&self.pair.pg, sql).await;
        let vev = simple(&self.pair.vev, sql).await;
        if let Some(why) = difference(&pg, &vev, false) {
            self.fail(sql, None, &why, &pg, &vev, Protocol::Simple);
        }
        if matches!(pg, Answer::Error { .. }) {
            stats.both_err += 1;
        }
        let Some(t) = table else { return };
        let contents = format!("SELECT * FROM {}", self.schema.tables[t].name);
        let pg = simple(&self.pair.pg, &contents).await;
        let vev = simple(&self.pair.vev, &contents).await;
        if let Some(why) = difference(&pg, &vev, false) {
            let why = format!("after the write, the table differs: {why}");
            self.fail(sql, None, &why, &pg, &vev, Protocol::Simple);
        }
    }

    /// Run a SELECT on PostgreSQL and, through both protocols, on Vev; shrink and report
    /// a difference.
    async fn select(&self, s: &Select, stats: &mut Stats) {
        stats.selects += 1;
        stats.unions += usize::from(s.union.is_some());
        stats.derived += usize::from(s.derived());
        let sql = s.render(&self.schema);
        stats.full_joins += usize::from(sql.contains(" FULL JOIN "));
        stats.scalars += usize::from(
            ["(SELECT count(*) FROM ", "(SELECT max(", "(SELECT min("]
                .iter()
                .any(|p| sql.contains(p)),
        );
        let pg = simple(&self.pair.pg, &sql).await;
        match &pg {
            Answer::Rows { rows, .. } if !rows.is_empty() => stats.with_rows += 1,
            Answer::Error { .. } => stats.both_err += 1,
            _ => {}
        }
        for protocol in [Protocol::Simple, Protocol::Extended] {
            let vev = self.run_vev(&sql, protocol).await;
            if let Some(why) = difference(&pg, &vev, s.ordered()) {
                let small = self.shrink(s, protocol).await;
                let small_sql = small.render(&self.schema);
                let pg = simple(&self.pair.pg, &small_sql).await;
                let vev = self.run_vev(&small_sql, protocol).await;
                let why = difference(&pg, &vev, small.ordered()).unwrap_or(why);
                self.fail(&sql, Some(&small_sql), &why, &pg, &vev, protocol);
            }
        }
    }

    /// Run a fixed SELECT (compared as a multiset unless it orders) on both systems, through both protocols
    /// at Vev.
    async fn check(&self, sql: &str, stats: &mut Stats) {
        stats.selects += 1;
        let pg = simple(&self.pair.pg, sql).await;
        if matches!(&pg, Answer::Rows { rows, .. } if !rows.is_empty()) {
            stats.with_rows += 1;
        }
        for protocol in [Protocol::Simple, Protocol::Extended] {
            let vev = self.run_vev(sql, protocol).await;
            if let Some(why) = difference(&pg, &vev, sql.contains("ORDER BY")) {
                self.fail(sql, None, &why, &pg, &vev, protocol);
            }
        }
    }

    async fn run_vev(&self, sql: &str, protocol: Protocol) -> Answer {
        match protocol {
            Protocol::Simple => simple(&self.pair.vev, sql).await,
            Protocol::Extended => extended(&self.pair.vev, sql).await,
        }
    }

    /// The smallest variant of a failing SELECT (one simplification at a time) that still
    /// fails.
    async fn shrink(&self, s: &Select, protocol: Protocol) -> Select {
        let mut best = s.clone();
        let mut tries = 0;
        'smaller: loop {
            for candidate in best.shrinks() {
                tries += 1;
                if tries > 400 {
                    break 'smaller;
                }
                let sql = candidate.render(&self.schema);
                let pg = simple(&self.pair.pg, &sql).await;
                let vev = self.run_vev(&sql, protocol).await;
                if difference(&pg, &vev, candidate.ordered()).is_some() {
                    best = candidate;
                    continue 'smaller;
                }
            }
            break;
        }
        best
    }

    fn fail(
        &self,
        sql: &str,
        shrunk: Option<&str>,
        why: &str,
        pg: &Answer,
        vev: &Answer,
        protocol: Protocol,
    ) -> ! {
        let script = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("vev-diff-{:#x}.sql", self.seed));
        let mut text: String = self.history.iter().map(|s| format!("{s};\n")).collect();
        text.push_str(&format!("-- the statement that differs:\n{sql};\n"));
        let saved = match std::fs::write(&script, text) {
            Ok(()) => format!("replay script (DDL and writes): {}", script.display()),
            Err(e) => format!("cannot write the replay script {}: {e}", script.display()),
        };
        panic!(
            "Vev and PostgreSQL differ (seed {seed:#x}; rerun with VEV_DIFF_SEED={seed:#x} \
             VEV_DIFF_CASES=1)\nschema:\n  {schema}\n{saved}\nstatement:\n  {sql}\n{shrunk}\
             difference ({protocol:?} protocol at Vev): {why}\nPostgreSQL:\n{pg}Vev:\n{vev}",
            seed = self.seed,
            schema = self.schema.ddl().join(";\n  "),
            shrunk = shrunk.map_or(String::new(), |s| format!("shrunk to:\n  {s}\n")),
            pg = show(pg),
            vev = show(vev),
        );
    }
}
