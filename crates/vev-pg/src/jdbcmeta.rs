//! The catalog queries of the PostgreSQL JDBC driver's `DatabaseMetaData` (`getTables`,
//! `getColumns`, `getPrimaryKeys`, what BI tools and ORMs call to list a schema), answered
//! from Vev's tables.
//!
//! Like psql's describe commands (`pgcatalog.rs`) these are fixed queries, captured from
//! pgjdbc 42.5 against PostgreSQL 15 with `log_statement = all`; each is recognized by its
//! fragments, its filters (`c.relname LIKE 'pattern'`, `ct.relname = 'name'`, the schema) are
//! read from the text, and the rows are those PostgreSQL gives for the same tables: the
//! driver derives `DATA_TYPE`, `COLUMN_SIZE` and the rest from the type oids and modifiers.

use std::sync::Arc;

use vev::Edn;

use crate::catalog::{Catalog, Table};
use crate::pgcatalog::{rows_of, text};
use crate::session::Outcome;
use crate::sqlfns::{like_match, null_edn};
use crate::types::SqlType;

/// The answer to `sql` if it is one of pgjdbc's metadata queries.
pub fn answer(sql: &str, catalog: &Catalog) -> Option<Outcome> {
    if sql.contains("AS TABLE_CAT, n.nspname AS TABLE_SCHEM, c.relname AS TABLE_NAME")
        && sql.contains("FROM pg_catalog.pg_namespace n, pg_catalog.pg_class c")
    {
        return Some(get_tables(sql, catalog));
    }
    if sql.contains("row_number() OVER (PARTITION BY a.attrelid ORDER BY a.attnum) AS attnum")
        && sql.contains("JOIN pg_catalog.pg_attribute a ON (a.attrelid=c.oid)")
    {
        return Some(get_columns(sql, catalog));
    }
    if sql.contains("information_schema._pg_expandarray(i.indkey)")
        && sql.contains("i.indisprimary")
    {
        return Some(get_primary_keys(sql, catalog));
    }
    None
}

/// The string literal after `marker` (`c.relname LIKE '`), with `''` read as one quote.
fn literal_after(sql: &str, marker: &str) -> Option<String> {
    let at = sql.find(marker)?;
    let mut out = String::new();
    let mut chars = sql[at + marker.len()..].chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\'' {
            if chars.peek() == Some(&'\'') {
                chars.next();
            } else {
                return Some(out);
            }
        }
        out.push(c);
    }
    None
}

fn like(pattern: Option<&String>, s: &str) -> bool {
    pattern.is_none_or(|p| {
        like_match(
            &s.chars().collect::<Vec<_>>(),
            &p.chars().collect::<Vec<_>>(),
        )
    })
}

/// Every table is in schema `public`: a schema filter either keeps all or none.
fn in_schema(sql: &str, markers: &[&str]) -> bool {
    markers.iter().all(|m| match literal_after(sql, m) {
        Some(p) if m.contains("LIKE") => like(Some(&p), "public"),
        Some(name) => name == "public",
        None => true,
    })
}

fn tables<'a>(catalog: &'a Catalog, sql: &str, marker: &str) -> Vec<&'a Arc<Table>> {
    let pattern = literal_after(sql, marker);
    catalog
        .tables
        .values()
        .filter(|t| like(pattern.as_ref(), &t.name))
        .collect()
}

/// `getTables(catalog, schemaPattern, tableNamePattern, types)`.
fn get_tables(sql: &str, catalog: &Catalog) -> Outcome {
    // With a types argument the driver ORs one clause per type; ordinary tables are the
    // `'r'` clause outside the system schemas.
    let typed = sql.contains("AND (false ");
    let wants_tables = !typed
        || sql.contains("c.relkind = 'r' AND n.nspname !~ '^pg_'")
        || sql.contains("c.relkind IN ('r','p') AND n.nspname !~ '^pg_'");
    let rows = if wants_tables && in_schema(sql, &["n.nspname LIKE '"]) {
        tables(catalog, sql, "c.relname LIKE '")
            .into_iter()
            .map(|t| {
                vec![
                    null_edn(),
                    text("public"),
                    text(&t.name),
                    text("TABLE"),
                    null_edn(),
                    text(""),
                    text(""),
                    text(""),
                    text(""),
                    text(""),
                ]
            })
            .collect()
    } else {
        Vec::new()
    };
    rows_of(
        &[
            ("table_cat", SqlType::Text),
            ("table_schem", SqlType::Text),
            ("table_name", SqlType::Text),
            ("table_type", SqlType::Text),
            ("remarks", SqlType::Text),
            ("type_cat", SqlType::Text),
            ("type_schem", SqlType::Text),
            ("type_name", SqlType::Text),
            ("self_referencing_col_name", SqlType::Text),
            ("ref_generation", SqlType::Text),
        ],
        rows,
    )
}

/// `pg_attribute.atttypmod`: the declared length plus the 4-byte header, or -1.
fn typmod(ty: SqlType) -> i64 {
    match ty {
        SqlType::Varchar(Some(n)) | SqlType::Char(n) => i64::from(n) + 4,
        _ => -1,
    }
}

/// `pg_type.typlen`: the fixed width in bytes, -1 for variable-length types.
fn typlen(ty: SqlType) -> i64 {
    match ty {
        SqlType::Bool => 1,
        SqlType::Int2 => 2,
        SqlType::Int4 | SqlType::Float4 => 4,
        SqlType::Int8 | SqlType::Float8 | SqlType::Timestamp | SqlType::Timestamptz => 8,
        SqlType::Uuid => 16,
        _ => -1,
    }
}

/// `getColumns(catalog, schemaPattern, tableNamePattern, columnNamePattern)`.
fn get_columns(sql: &str, catalog: &Catalog) -> Outcome {
    let mut rows = Vec::new();
    if in_schema(sql, &["n.nspname LIKE '"]) {
        let column_pattern = literal_after(sql, "attname LIKE '");
        for t in tables(catalog, sql, "c.relname LIKE '") {
            for (i, c) in t.columns.iter().enumerate() {
                if !like(column_pattern.as_ref(), &c.name) {
                    continue;
                }
                // Cardinality-many columns are shown as the text of their values.
                let ty = if c.many { SqlType::Text } else { c.ty };
                rows.push(vec![
                    text("public"),
                    text(&t.name),
                    text(&c.name),
                    Edn::Integer(i64::from(ty.pg_type().oid())),
                    Edn::Bool(c.not_null),
                    Edn::Integer(typmod(ty)),
                    Edn::Integer(typlen(ty)),
                    Edn::Integer(-1),
                    Edn::Integer(i64::try_from(i + 1).unwrap_or(i64::MAX)),
                    null_edn(),
                    null_edn(),
                    null_edn(),
                    null_edn(),
                    Edn::Integer(0),
                    text("b"),
                ]);
            }
        }
    }
    rows_of(
        &[
            ("nspname", SqlType::Text),
            ("relname", SqlType::Text),
            ("attname", SqlType::Text),
            ("atttypid", SqlType::Int8),
            ("attnotnull", SqlType::Bool),
            ("atttypmod", SqlType::Int4),
            ("attlen", SqlType::Int2),
            ("typtypmod", SqlType::Int4),
            ("attnum", SqlType::Int8),
            ("attidentity", SqlType::Text),
            ("attgenerated", SqlType::Text),
            ("adsrc", SqlType::Text),
            ("description", SqlType::Text),
            ("typbasetype", SqlType::Int8),
            ("typtype", SqlType::Text),
        ],
        rows,
    )
}

/// `getPrimaryKeys(catalog, schema, table)`.
fn get_primary_keys(sql: &str, catalog: &Catalog) -> Outcome {
    let mut rows = Vec::new();
    if in_schema(sql, &["n.nspname = '"]) {
        let name = literal_after(sql, "ct.relname = '");
        for t in catalog.tables.values() {
            if name.as_ref().is_some_and(|n| *n != t.name) {
                continue;
            }
            for (seq, &k) in t.primary_key.iter().enumerate() {
                rows.push(vec![
                    null_edn(),
                    text("public"),
                    text(&t.name),
                    text(&t.columns[k].name),
                    Edn::Integer(i64::try_from(seq + 1).unwrap_or(i64::MAX)),
                    text(&format!("{}_pkey", t.name)),
                ]);
            }
        }
    }
    rows_of(
        &[
            ("table_cat", SqlType::Text),
            ("table_schem", SqlType::Text),
            ("table_name", SqlType::Text),
            ("column_name", SqlType::Text),
            ("key_seq", SqlType::Int4),
            ("pk_name", SqlType::Text),
        ],
        rows,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_and_schema_filters() {
        let sql = "WHERE c.relname LIKE 'o''neil' AND n.nspname LIKE 'pub%'";
        assert_eq!(
            literal_after(sql, "c.relname LIKE '").as_deref(),
            Some("o'neil")
        );
        assert!(in_schema(sql, &["n.nspname LIKE '"]));
        assert!(!in_schema(
            "n.nspname LIKE 'pg_catalog'",
            &["n.nspname LIKE '"]
        ));
        assert!(in_schema("no schema filter", &["n.nspname = '"]));
        assert!(!in_schema("n.nspname = 'other'", &["n.nspname = '"]));
        assert!(like(Some(&"acc\\_%".to_owned()), "acc_x"));
        assert!(!like(Some(&"acc\\_%".to_owned()), "accx"));
    }
}
