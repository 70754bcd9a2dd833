//! The catalog queries `psql` sends for `\dt`, `\d` and `\d name`, answered from Vev's
//! tables.
//!
//! Vev has no `pg_catalog` schema to run arbitrary catalog SQL against. psql's describe
//! commands are a handful of fixed queries (captured from psql 15 against PostgreSQL 15:
//! `\set ECHO_HIDDEN on` prints them); each is recognized by the fragments below and
//! answered with rows computed from the catalog, the same rows PostgreSQL gives for the
//! same tables. A table's oid is a stable number derived from its name, so the several
//! queries of one `\d` agree on it.

use std::sync::Arc;

use vev::Edn;

use crate::catalog::{Catalog, Table};
use crate::session::Outcome;
use crate::sql::select::OutCol;
use crate::types::SqlType;

/// The answer to `sql` if it is one of psql's describe queries.
pub fn answer(sql: &str, catalog: &Catalog, user: &str) -> Option<Outcome> {
    if !sql.contains("pg_catalog.") {
        return None;
    }
    if let Some(outcome) = crate::jdbcmeta::answer(sql, catalog) {
        return Some(outcome);
    }
    let oid = quoted_oid(sql);
    if sql.contains("pg_catalog.pg_get_userbyid(c.relowner)")
        && sql.contains("FROM pg_catalog.pg_class c")
    {
        return Some(relations(sql, catalog, user));
    }
    if sql.contains("SELECT c.oid,\n  n.nspname,\n  c.relname") {
        let pattern = name_pattern(sql);
        let rows = tables(catalog)
            .filter(|t| pattern.as_ref().is_none_or(|p| p.matches(&t.name)))
            .map(|t| {
                vec![
                    text(&table_oid(&t.name).to_string()),
                    text("public"),
                    text(&t.name),
                ]
            })
            .collect();
        return Some(rows_of(
            &[
                ("oid", SqlType::Int8),
                ("nspname", SqlType::Text),
                ("relname", SqlType::Text),
            ],
            rows,
        ));
    }
    let table = oid.and_then(|o| tables(catalog).find(|t| table_oid(&t.name) == o));
    if sql.contains("c.relchecks, c.relkind, c.relhasindex") {
        let rows = table.map(|t| class_row(t)).into_iter().collect();
        return Some(rows_of(&CLASS_COLUMNS, rows));
    }
    if sql.contains("FROM pg_catalog.pg_attribute a")
        && sql.contains("format_type(a.atttypid, a.atttypmod)")
    {
        let rows = table.map(attribute_rows).unwrap_or_default();
        return Some(rows_of(&ATTRIBUTE_COLUMNS, rows));
    }
    if sql.contains("FROM pg_catalog.pg_class c, pg_catalog.pg_class c2, pg_catalog.pg_index i") {
        let rows = table.map(index_rows).unwrap_or_default();
        return Some(rows_of(&INDEX_COLUMNS, rows));
    }
    // The parts of `\d name` Vev has none of: policies, extended statistics, publications,
    // parents and partitions.
    for (fragment, width) in [
        ("FROM pg_catalog.pg_policy pol", 6),
        ("FROM pg_catalog.pg_statistic_ext", 9),
        ("FROM pg_catalog.pg_publication p", 3),
        ("FROM pg_catalog.pg_class c, pg_catalog.pg_inherits i", 4),
    ] {
        if sql.contains(fragment) {
            let cols: Vec<(&str, SqlType)> =
                (0..width).map(|_| ("?column?", SqlType::Text)).collect();
            return Some(rows_of(&cols, Vec::new()));
        }
    }
    None
}

const CLASS_COLUMNS: [(&str, SqlType); 15] = [
    ("relchecks", SqlType::Int2),
    ("relkind", SqlType::Text),
    ("relhasindex", SqlType::Bool),
    ("relhasrules", SqlType::Bool),
    ("relhastriggers", SqlType::Bool),
    ("relrowsecurity", SqlType::Bool),
    ("relforcerowsecurity", SqlType::Bool),
    ("relhasoids", SqlType::Bool),
    ("relispartition", SqlType::Bool),
    ("?column?", SqlType::Text),
    ("reltablespace", SqlType::Int8),
    ("reloftype", SqlType::Text),
    ("relpersistence", SqlType::Text),
    ("relreplident", SqlType::Text),
    ("amname", SqlType::Text),
];

const ATTRIBUTE_COLUMNS: [(&str, SqlType); 7] = [
    ("attname", SqlType::Text),
    ("format_type", SqlType::Text),
    ("pg_get_expr", SqlType::Text),
    ("attnotnull", SqlType::Bool),
    ("attcollation", SqlType::Text),
    ("attidentity", SqlType::Text),
    ("attgenerated", SqlType::Text),
];

const INDEX_COLUMNS: [(&str, SqlType); 12] = [
    ("relname", SqlType::Text),
    ("indisprimary", SqlType::Bool),
    ("indisunique", SqlType::Bool),
    ("indisclustered", SqlType::Bool),
    ("indisvalid", SqlType::Bool),
    ("pg_get_indexdef", SqlType::Text),
    ("pg_get_constraintdef", SqlType::Text),
    ("contype", SqlType::Text),
    ("condeferrable", SqlType::Bool),
    ("condeferred", SqlType::Bool),
    ("indisreplident", SqlType::Bool),
    ("reltablespace", SqlType::Int8),
];

fn tables(catalog: &Catalog) -> impl Iterator<Item = &Arc<Table>> {
    catalog.tables.values()
}

/// A table's oid: a stable number from its name, in the range PostgreSQL gives user
/// objects.
pub fn table_oid(name: &str) -> i64 {
    // FNV-1a: stable across processes and versions, unlike std's hasher.
    let mut h: u32 = 0x811c_9dc5;
    for b in name.bytes() {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    16_384 + i64::from(h % 2_000_000_000)
}

pub(crate) fn text(s: &str) -> Edn {
    Edn::String(s.to_owned())
}

pub(crate) fn rows_of(columns: &[(&str, SqlType)], rows: Vec<Vec<Edn>>) -> Outcome {
    Outcome::Rows {
        columns: Arc::new(
            columns
                .iter()
                .map(|(n, t)| OutCol {
                    name: (*n).to_owned(),
                    ty: *t,
                })
                .collect(),
        ),
        rows,
    }
}

/// `\dt` / `\d`: schema, name, type and owner of each table (matching the pattern).
fn relations(sql: &str, catalog: &Catalog, user: &str) -> Outcome {
    let wants_tables = sql.contains("c.relkind IN ('r'");
    let pattern = name_pattern(sql);
    let rows = tables(catalog)
        .filter(|_| wants_tables)
        .filter(|t| pattern.as_ref().is_none_or(|p| p.matches(&t.name)))
        .map(|t| vec![text("public"), text(&t.name), text("table"), text(user)])
        .collect();
    rows_of(
        &[
            ("Schema", SqlType::Text),
            ("Name", SqlType::Text),
            ("Type", SqlType::Text),
            ("Owner", SqlType::Text),
        ],
        rows,
    )
}

fn class_row(t: &Table) -> Vec<Edn> {
    let b = Edn::Bool;
    vec![
        Edn::Integer(0),
        text("r"),
        b(!t.primary_key.is_empty()),
        b(false),
        b(false),
        b(false),
        b(false),
        b(false),
        b(false),
        text(""),
        Edn::Integer(0),
        text(""),
        text("p"),
        text("d"),
        text("heap"),
    ]
}

fn attribute_rows(t: &Arc<Table>) -> Vec<Vec<Edn>> {
    t.columns
        .iter()
        .map(|c| {
            vec![
                text(&c.name),
                text(&c.ty.display()),
                c.default
                    .as_ref()
                    .map_or_else(crate::sqlfns::null_edn, |d| text(&d.text())),
                Edn::Bool(c.not_null),
                crate::sqlfns::null_edn(),
                text(""),
                text(""),
            ]
        })
        .collect()
}

fn index_rows(t: &Arc<Table>) -> Vec<Vec<Edn>> {
    let mut rows = Vec::new();
    for (k, unique_only) in t.primary_key.iter().map(|k| (*k, false)).chain(
        t.columns
            .iter()
            .enumerate()
            .filter(|(i, c)| c.unique && !t.primary_key.contains(i))
            .map(|(i, _)| (i, true)),
    ) {
        let col = &t.columns[k].name;
        let (name, def, contype) = if unique_only {
            (
                format!("{}_{col}_key", t.name),
                format!("UNIQUE ({col})"),
                "u",
            )
        } else {
            (
                format!("{}_pkey", t.name),
                format!("PRIMARY KEY ({col})"),
                "p",
            )
        };
        rows.push(vec![
            text(&name),
            Edn::Bool(!unique_only),
            Edn::Bool(true),
            Edn::Bool(false),
            Edn::Bool(true),
            text(&format!(
                "CREATE UNIQUE INDEX {name} ON {} USING btree ({col})",
                t.name
            )),
            text(&def),
            text(contype),
            Edn::Bool(false),
            Edn::Bool(false),
            Edn::Bool(false),
            Edn::Integer(0),
        ]);
    }
    rows
}

/// The oid in `= '16385'` (how psql passes the table it describes).
fn quoted_oid(sql: &str) -> Option<i64> {
    for marker in [
        "c.oid = '",
        "a.attrelid = '",
        "pol.polrelid = '",
        "stxrelid = '",
        "pc.oid ='",
        "i.inhrelid = '",
        "i.inhparent = '",
    ] {
        if let Some(at) = sql.find(marker) {
            let rest = &sql[at + marker.len()..];
            let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
            if let Ok(n) = digits.parse() {
                return Some(n);
            }
        }
    }
    None
}

/// psql's name pattern, `c.relname OPERATOR(pg_catalog.~) '^(t.*)$'`: a regular expression
/// of the shape psql makes from `\d` patterns (literals, `.`, `.*`, `[...]`-free).
fn name_pattern(sql: &str) -> Option<Pattern> {
    let marker = "OPERATOR(pg_catalog.~) '";
    let at = sql.find(marker)?;
    let rest = &sql[at + marker.len()..];
    let end = rest.find('\'')?;
    Some(Pattern(rest[..end].to_owned()))
}

struct Pattern(String);

impl Pattern {
    /// Whether `name` matches: `^(` and `)$` anchor; `.*` is any run, `.` any character;
    /// `\` escapes; alternatives `|` are tried each.
    fn matches(&self, name: &str) -> bool {
        let body = self.0.trim_start_matches("^(").trim_end_matches(")$");
        body.split('|').any(|alt| {
            glob(
                &alt.chars().collect::<Vec<_>>(),
                &name.chars().collect::<Vec<_>>(),
            )
        })
    }
}

fn glob(p: &[char], s: &[char]) -> bool {
    match p {
        [] => s.is_empty(),
        ['.', '*', rest @ ..] => (0..=s.len()).any(|k| glob(rest, &s[k..])),
        ['.', rest @ ..] => !s.is_empty() && glob(rest, &s[1..]),
        ['\\', c, rest @ ..] => s.first() == Some(c) && glob(rest, &s[1..]),
        [c, rest @ ..] => s.first() == Some(c) && glob(rest, &s[1..]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn psql_patterns() {
        let p = |re: &str| Pattern(re.to_owned());
        assert!(p("^(t)$").matches("t"));
        assert!(!p("^(t)$").matches("tt"));
        assert!(p("^(pgbench_.*)$").matches("pgbench_accounts"));
        assert!(p("^(a.c)$").matches("abc"));
        assert!(p("^(x|y)$").matches("y"));
    }

    #[test]
    fn oids_are_stable_and_in_the_user_range() {
        assert_eq!(table_oid("t"), table_oid("t"));
        assert_ne!(table_oid("t"), table_oid("u"));
        assert!(table_oid("pgbench_accounts") >= 16_384);
    }
}
