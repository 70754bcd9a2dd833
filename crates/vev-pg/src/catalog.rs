//! Tables over attributes: a table is an attribute namespace, a row an entity.
//!
//! A table created through SQL is recorded as data, beside its attributes:
//! - each column is an attribute `:<table>/<column>` carrying `:vev.sql/type` (the declared
//!   type, e.g. `"char(84)"`), `:vev.sql/position` and, when declared so,
//!   `:vev.sql/not-null true`;
//! - the table is an entity `{:vev.sql/table "<name>" :vev.sql/row <attribute>}`: every row
//!   has a value of its row attribute (the primary key or first NOT NULL column, else a
//!   hidden boolean `:<table>/vev-row`), which is how a scan finds the rows. Primary-key
//!   columns are `:db.unique/identity` and listed under `:vev.sql/primary-key`.
//!
//! Attribute namespaces defined in EDN (no `:vev.sql/table` entity) appear as tables too:
//! their columns are the namespace's attributes, in ident order, after an `id` column
//! holding the entity id; a row is any entity with a value of any of them.

use std::collections::BTreeMap;
use std::sync::Arc;

use vev::{Cardinality, Db, Edn, EntityId, Keyword, Unique, ValueType};

use crate::error::SqlError;
use crate::types::SqlType;

/// The schema of the `:vev.sql/*` attributes, transacted before the first table.
pub const META_SCHEMA: &str = r#"[
 {:db/ident :vev.sql/table :db/valueType :db.type/string :db/cardinality :db.cardinality/one
  :db/unique :db.unique/identity :db/doc "A SQL table's name (on the table's entity)."}
 {:db/ident :vev.sql/row :db/valueType :db.type/ref :db/cardinality :db.cardinality/one
  :db/doc "The attribute every row of the table has."}
 {:db/ident :vev.sql/primary-key :db/valueType :db.type/ref :db/cardinality :db.cardinality/many
  :db/doc "The table's primary-key column attributes."}
 {:db/ident :vev.sql/type :db/valueType :db.type/string :db/cardinality :db.cardinality/one
  :db/doc "A column attribute's declared SQL type."}
 {:db/ident :vev.sql/position :db/valueType :db.type/long :db/cardinality :db.cardinality/one
  :db/doc "A column attribute's position in its table."}
 {:db/ident :vev.sql/not-null :db/valueType :db.type/boolean :db/cardinality :db.cardinality/one
  :db/doc "Whether the column is declared NOT NULL."}]"#;

/// One column of a table.
#[derive(Clone, Debug)]
pub struct Column {
    pub name: String,
    /// The attribute (`None` for the `id` column of an EDN table: the entity id itself).
    pub attr: Option<Keyword>,
    pub ty: SqlType,
    pub not_null: bool,
    /// Cardinality-many: shown as text of its values (arrays are not supported yet).
    pub many: bool,
    pub unique: bool,
}

/// How a scan finds a table's rows.
#[derive(Clone, Debug)]
pub enum Rows {
    /// Every row has a value of this attribute.
    Attr(Keyword),
    /// A row has a value of any of these (an EDN namespace).
    AnyOf(Vec<Keyword>),
}

#[derive(Clone, Debug)]
pub struct Table {
    pub name: String,
    pub columns: Vec<Column>,
    pub rows: Rows,
    /// Created through SQL (it has a `:vev.sql/table` entity).
    pub sql: bool,
    /// Indexes into `columns` of the primary key.
    pub primary_key: Vec<usize>,
}

impl Table {
    pub fn column(&self, name: &str) -> Option<(usize, &Column)> {
        self.columns
            .iter()
            .enumerate()
            .find(|(_, c)| c.name == name)
    }

    /// The hidden row marker attribute of a table with no NOT NULL column.
    pub fn marker_attr(table: &str) -> Keyword {
        Keyword::new(&format!("{table}/vev-row"))
    }
}

/// Every table of a database.
#[derive(Clone, Debug, Default)]
pub struct Catalog {
    pub tables: BTreeMap<String, Arc<Table>>,
    /// A digest of the schema it was read from: a catalog is reused until this changes.
    fingerprint: u64,
}

impl Catalog {
    pub fn table(&self, name: &str) -> Result<&Arc<Table>, SqlError> {
        self.tables
            .get(name)
            .ok_or_else(|| SqlError::undefined_table(name))
    }

    /// Whether the `:vev.sql/*` attributes are installed.
    pub fn has_meta(db: &Db) -> bool {
        db.schema()
            .attribute_by_ident(&Keyword::new("vev.sql/table"))
            .is_some()
    }

    /// This catalog if it was read from `db`'s schema, else the catalog read now.
    pub fn current(cached: &Option<Arc<Catalog>>, db: &Db) -> Result<Arc<Catalog>, SqlError> {
        let fp = fingerprint(db);
        if let Some(c) = cached {
            if c.fingerprint == fp {
                return Ok(c.clone());
            }
        }
        let mut c = Catalog::load(db)?;
        c.fingerprint = fp;
        Ok(Arc::new(c))
    }

    fn load(db: &Db) -> Result<Catalog, SqlError> {
        let sql_tables = if Catalog::has_meta(db) {
            sql_tables(db)?
        } else {
            BTreeMap::new()
        };
        let mut by_ns: BTreeMap<String, Vec<Column>> = BTreeMap::new();
        for a in db.schema().attributes() {
            let Some(ns) = a.ident.namespace() else {
                continue;
            };
            if ns.starts_with("db") || ns.starts_with("vev.") || ns == "fressian" {
                continue;
            }
            if sql_tables.contains_key(ns) || a.tuple.is_some() {
                continue;
            }
            let Some(ty) = SqlType::of_value_type(a.value_type) else {
                continue;
            };
            by_ns.entry(ns.to_owned()).or_default().push(Column {
                name: a.ident.name().to_owned(),
                attr: Some(a.ident.clone()),
                ty,
                not_null: false,
                many: a.cardinality == Cardinality::Many,
                unique: a.unique.is_some(),
            });
        }
        let mut tables: BTreeMap<String, Arc<Table>> = sql_tables;
        for (ns, mut cols) in by_ns {
            cols.sort_by(|a, b| a.name.cmp(&b.name));
            let attrs = cols.iter().filter_map(|c| c.attr.clone()).collect();
            cols.insert(0, id_column());
            tables.insert(
                ns.clone(),
                Arc::new(Table {
                    name: ns,
                    columns: cols,
                    rows: Rows::AnyOf(attrs),
                    sql: false,
                    primary_key: vec![0],
                }),
            );
        }
        Ok(Catalog {
            tables,
            fingerprint: 0,
        })
    }
}

fn id_column() -> Column {
    Column {
        name: "id".into(),
        attr: None,
        ty: SqlType::Int8,
        not_null: true,
        many: false,
        unique: true,
    }
}

/// A digest of everything a catalog is read from: attribute ids, idents, types and
/// uniqueness. `:vev.sql/*` facts change only together with those.
fn fingerprint(db: &Db) -> u64 {
    // FNV-1a over the bytes: stable, and cheap enough to run per statement.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for b in bytes {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    };
    for a in db.schema().attributes() {
        eat(&a.id.to_le_bytes());
        eat(a.ident.namespace().unwrap_or_default().as_bytes());
        eat(b"/");
        eat(a.ident.name().as_bytes());
        let unique = match a.unique {
            None => 0,
            Some(Unique::Identity) => 1,
            Some(_) => 2,
        };
        eat(&[a.value_type as u8, unique]);
    }
    h
}

/// The tables created through SQL, from their `:vev.sql/*` facts.
fn sql_tables(db: &Db) -> Result<BTreeMap<String, Arc<Table>>, SqlError> {
    let q = |text: &str| -> Result<Vec<Vec<Edn>>, SqlError> {
        match db.q(text, &[]) {
            Ok(vev::QueryResult::Rel(rows)) => Ok(rows.iter().map(<[Edn]>::to_vec).collect()),
            Ok(_) => Ok(Vec::new()),
            Err(e) => Err(SqlError::internal(e)),
        }
    };
    let tables = q("[:find ?name ?row :where [?t :vev.sql/table ?name] \
                    [?t :vev.sql/row ?r] [?r :db/ident ?row]]")?;
    let columns = q(
        "[:find ?ident ?type ?pos ?nn :where [?a :vev.sql/type ?type] \
                     [?a :vev.sql/position ?pos] [?a :db/ident ?ident] \
                     [(get-else $ ?a :vev.sql/not-null false) ?nn]]",
    )?;
    let keys = q("[:find ?name ?ident :where [?t :vev.sql/table ?name] \
                   [?t :vev.sql/primary-key ?a] [?a :db/ident ?ident]]")?;
    let mut out = BTreeMap::new();
    for row in tables {
        let [Edn::String(name), Edn::Keyword(row_attr)] = row.as_slice() else {
            continue;
        };
        let mut cols: Vec<(i64, Column)> = columns
            .iter()
            .filter_map(|c| column_of(db, name, c))
            .collect();
        cols.sort_by_key(|(p, _)| *p);
        let columns: Vec<Column> = cols.into_iter().map(|(_, c)| c).collect();
        let primary_key = keys
            .iter()
            .filter_map(|k| match k.as_slice() {
                [Edn::String(t), Edn::Keyword(a)] if t == name => {
                    columns.iter().position(|c| c.attr.as_ref() == Some(a))
                }
                _ => None,
            })
            .collect();
        out.insert(
            name.clone(),
            Arc::new(Table {
                name: name.clone(),
                columns,
                rows: Rows::Attr(row_attr.clone()),
                sql: true,
                primary_key,
            }),
        );
    }
    Ok(out)
}

fn column_of(db: &Db, table: &str, row: &[Edn]) -> Option<(i64, Column)> {
    let [Edn::Keyword(ident), Edn::String(ty), Edn::Integer(pos), Edn::Bool(nn)] = row else {
        return None;
    };
    if ident.namespace() != Some(table) {
        return None;
    }
    let attr = db.schema().attribute_by_ident(ident)?;
    Some((
        *pos,
        Column {
            name: ident.name().to_owned(),
            attr: Some(ident.clone()),
            ty: SqlType::parse_name(ty)?,
            not_null: *nn,
            many: attr.cardinality == Cardinality::Many,
            unique: attr.unique.is_some(),
        },
    ))
}

/// A column of `CREATE TABLE`.
#[derive(Clone, Debug)]
pub struct ColumnDef {
    pub name: String,
    pub ty: SqlType,
    pub not_null: bool,
    pub primary_key: bool,
    pub unique: bool,
}

/// The transaction data of `CREATE TABLE name (columns)`: the column attributes, then the
/// table entity (the meta schema must be installed already).
pub fn create_table_tx(name: &str, columns: &[ColumnDef]) -> Result<String, SqlError> {
    check_name(name)?;
    let mut tx = String::from("[");
    for (i, c) in columns.iter().enumerate() {
        check_name(&c.name)?;
        let unique = if c.primary_key {
            " :db/unique :db.unique/identity"
        } else if c.unique {
            " :db/unique :db.unique/value"
        } else {
            ""
        };
        tx.push_str(&format!(
            "{{:db/id \"vev.sql.col-{col}\" :db/ident :{name}/{col} :db/valueType :db.type/{vt} \
              :db/cardinality :db.cardinality/one{unique} \
              :vev.sql/type {ty:?} :vev.sql/position {i} :vev.sql/not-null {nn}}}\n",
            col = c.name,
            vt = value_type_name(c.ty.value_type()),
            ty = c.ty.name(),
            nn = c.not_null || c.primary_key,
        ));
    }
    let row = match columns
        .iter()
        .find(|c| c.primary_key)
        .or_else(|| columns.iter().find(|c| c.not_null))
    {
        Some(c) => format!("\"vev.sql.col-{}\"", c.name),
        None => {
            let marker = Table::marker_attr(name);
            tx.push_str(&format!(
                "{{:db/id \"vev.sql.row\" :db/ident {marker} :db/valueType :db.type/boolean \
                  :db/cardinality :db.cardinality/one}}\n"
            ));
            "\"vev.sql.row\"".to_owned()
        }
    };
    let keys: Vec<String> = columns
        .iter()
        .filter(|c| c.primary_key)
        .map(|c| format!("\"vev.sql.col-{}\"", c.name))
        .collect();
    tx.push_str(&format!(
        "{{:vev.sql/table {name:?} :vev.sql/row {row}{pk}}}]",
        pk = if keys.is_empty() {
            String::new()
        } else {
            format!(" :vev.sql/primary-key [{}]", keys.join(" "))
        }
    ));
    Ok(tx)
}

/// Table and column names become keyword parts: letters, digits and `_ - .` only.
fn check_name(name: &str) -> Result<(), SqlError> {
    let ok = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | '.'))
        && !name.starts_with(|c: char| c.is_ascii_digit());
    if ok {
        Ok(())
    } else {
        Err(SqlError::new(
            "42602",
            format!("invalid name \"{name}\": Vev table and column names are letters, digits, _, - and ."),
        ))
    }
}

fn value_type_name(t: ValueType) -> &'static str {
    match t {
        ValueType::Long => "long",
        ValueType::Float => "float",
        ValueType::Double => "double",
        ValueType::BigDec => "bigdec",
        ValueType::String => "string",
        ValueType::Boolean => "boolean",
        ValueType::Instant => "instant",
        ValueType::Uuid => "uuid",
        ValueType::Bytes => "bytes",
        ValueType::Keyword => "keyword",
        ValueType::Ref => "ref",
        ValueType::BigInt => "bigint",
        _ => "string",
    }
}

/// The entity ids of every row of `table` in `db`.
pub fn row_ids(db: &Db, table: &Table) -> Result<Vec<EntityId>, SqlError> {
    let attrs: Vec<&Keyword> = match &table.rows {
        Rows::Attr(a) => vec![a],
        Rows::AnyOf(attrs) => attrs.iter().collect(),
    };
    let mut ids = Vec::new();
    for a in attrs {
        let Some(attr) = db.schema().attribute_by_ident(a) else {
            continue;
        };
        for d in db.datoms(vev::IndexOrder::Aevt, &[vev::Component::Entity(attr.id)]) {
            ids.push(d.map_err(|e| SqlError::internal(vev::Error::from(e)))?.e);
        }
    }
    ids.sort_unstable();
    ids.dedup();
    Ok(ids)
}
