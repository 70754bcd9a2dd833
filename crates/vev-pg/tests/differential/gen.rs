//! The generator of the differential test: a random schema, rows, SELECTs and writes in the
//! SQL subset `vev serve` translates, from a seed.
//!
//! Everything it writes has one meaning in PostgreSQL: values stay small (no integer
//! overflow), doubles, reals and numerics are multiples of 1/4 (sums are exact), text is ASCII (C collation
//! and byte order agree), a LIMIT comes only after an ORDER BY over every output column (so
//! the rows it keeps are determined), and primary keys are never updated (PostgreSQL checks
//! uniqueness row by row during an UPDATE). An average in HAVING is compared with `<` or
//! `>` only (a double in Vev, a numeric in PostgreSQL). An INSERT that repeats a key says
//! `ON CONFLICT DO NOTHING` or `DO UPDATE SET col = EXCLUDED.col` now and then. A set
//! operation's (UNION, INTERSECT, EXCEPT; `SetOp`, the server's own keywords) second branch
//! is the first with another filter (so the branches' columns have the same
//! types) and its ORDER BY names positions. SELECTs are kept as a small AST so that a
//! failing one can be shrunk (`Select::shrinks`).

pub use vev_pg::sql::union::SetOp;

/// SplitMix64: a fixed seed gives the same statements on every machine.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// True `percent` times in 100.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }

    /// A number in `lo..=hi`.
    pub fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + (self.next() % (hi - lo + 1) as u64) as i64
    }

    pub fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len())]
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ty {
    Int,
    BigInt,
    Text,
    Double,
    Bool,
    Real,
    Numeric,
    Varchar,
}

impl Ty {
    fn sql(self) -> &'static str {
        match self {
            Ty::Int => "int",
            Ty::BigInt => "bigint",
            Ty::Text => "text",
            Ty::Double => "double precision",
            Ty::Bool => "boolean",
            Ty::Real => "real",
            Ty::Numeric => "numeric",
            Ty::Varchar => "varchar(12)",
        }
    }

    fn integer(self) -> bool {
        matches!(self, Ty::Int | Ty::BigInt)
    }

    fn numeric(self) -> bool {
        self.integer() || self.fractional()
    }

    fn fractional(self) -> bool {
        matches!(self, Ty::Double | Ty::Real | Ty::Numeric)
    }

    fn text(self) -> bool {
        matches!(self, Ty::Text | Ty::Varchar)
    }

    /// Whether values of the two types compare with each other.
    fn comparable(self, other: Ty) -> bool {
        self == other || (self.numeric() && other.numeric()) || (self.text() && other.text())
    }
}

#[derive(Clone, Debug)]
pub struct Col {
    pub name: String,
    pub ty: Ty,
    pub not_null: bool,
    /// The table whose `id` values this column holds (a join key).
    pub refs: Option<usize>,
}

#[derive(Clone, Debug)]
pub struct Table {
    pub name: String,
    /// `cols[0]` is the primary key `id`.
    pub cols: Vec<Col>,
    /// The next id an INSERT gives.
    pub next_id: i64,
}

#[derive(Clone, Debug)]
pub struct Schema {
    pub tables: Vec<Table>,
}

const WORDS: [&str; 14] = [
    "apple", "Apple", "banana", "cherry", "date", "", "a b", "x_y", "50%", "zeta", "Zulu", "kiwi",
    "ap", "it's",
];

const PATTERNS: [&str; 12] = [
    "a%", "%an%", "_pple", "%", "%e", "A%", "b_n%", "50\\%", "%\\_%", "ap", "_", "%'%",
];

impl Schema {
    /// 2 or 3 tables named `<prefix>_t<i>`, each with an `id` primary key, 2 to 5 columns of
    /// random types (some NOT NULL) and perhaps an int column of another table's ids.
    pub fn random(rng: &mut Rng, prefix: &str) -> Schema {
        let n = 2 + rng.below(2);
        let mut tables = Vec::new();
        for i in 0..n {
            let mut cols = vec![Col {
                name: "id".into(),
                ty: if rng.chance(70) { Ty::Int } else { Ty::BigInt },
                not_null: true,
                refs: None,
            }];
            for k in 1..=2 + rng.below(4) {
                cols.push(Col {
                    name: format!("c{k}"),
                    ty: *rng.pick(&[
                        Ty::Int,
                        Ty::BigInt,
                        Ty::Text,
                        Ty::Double,
                        Ty::Bool,
                        Ty::Real,
                        Ty::Numeric,
                        Ty::Varchar,
                    ]),
                    not_null: rng.chance(25),
                    refs: None,
                });
            }
            if rng.chance(75) {
                let mut other = rng.below(n);
                if other == i {
                    other = (i + 1) % n;
                }
                cols.push(Col {
                    name: format!("r{other}"),
                    ty: Ty::Int,
                    not_null: false,
                    refs: Some(other),
                });
            }
            tables.push(Table {
                name: format!("{prefix}_t{i}"),
                cols,
                next_id: 1,
            });
        }
        Schema { tables }
    }

    pub fn ddl(&self) -> Vec<String> {
        self.tables
            .iter()
            .map(|t| {
                let cols: Vec<String> = t
                    .cols
                    .iter()
                    .enumerate()
                    .map(|(i, c)| {
                        let extra = if i == 0 {
                            " PRIMARY KEY"
                        } else if c.not_null {
                            " NOT NULL"
                        } else {
                            ""
                        };
                        format!("{} {}{extra}", c.name, c.ty.sql())
                    })
                    .collect();
                format!("CREATE TABLE {} ({})", t.name, cols.join(", "))
            })
            .collect()
    }

    /// The largest id a table has been given (join keys point below it).
    fn id_max(&self, table: usize) -> i64 {
        (self.tables[table].next_id - 1).max(1)
    }
}

/// A literal of the generated SQL.
#[derive(Clone, Debug, PartialEq)]
pub enum Lit {
    Null,
    Int(i64),
    /// A multiple of 1/4.
    Quarter(i64),
    /// A multiple of 1/4 written with extra trailing zeros (`2.50`): numerics of
    /// different scales are equal.
    Decimal(i64, usize),
    Text(String),
    Bool(bool),
}

impl Lit {
    fn render(&self) -> String {
        match self {
            Lit::Null => "NULL".into(),
            Lit::Int(n) => n.to_string(),
            Lit::Quarter(q) => {
                let s = format!("{}", *q as f64 / 4.0);
                if s.contains('.') {
                    s
                } else {
                    format!("{s}.0")
                }
            }
            Lit::Decimal(q, zeros) => {
                format!("{}{}", Lit::Quarter(*q).render(), "0".repeat(*zeros))
            }
            Lit::Text(s) => format!("'{}'", s.replace('\'', "''")),
            Lit::Bool(b) => if *b { "TRUE" } else { "FALSE" }.into(),
        }
    }
}

/// A random non-NULL value of a type.
fn value(rng: &mut Rng, ty: Ty) -> Lit {
    match ty {
        Ty::Int => Lit::Int(rng.range(-20, 60)),
        Ty::BigInt if rng.chance(15) => Lit::Int(rng.range(-3, 3) * 3_000_000_000 + 7),
        Ty::BigInt => Lit::Int(rng.range(-100, 400)),
        Ty::Double | Ty::Real => Lit::Quarter(rng.range(-40, 80)),
        Ty::Numeric => Lit::Decimal(rng.range(-40, 80), rng.below(3)),
        Ty::Text | Ty::Varchar => Lit::Text((*rng.pick(&WORDS)).into()),
        Ty::Bool => Lit::Bool(rng.chance(50)),
    }
}

/// A column's value in a new row: NULL sometimes where allowed, a join key in range mostly.
fn cell(rng: &mut Rng, schema: &Schema, col: &Col) -> Lit {
    if !col.not_null && rng.chance(20) {
        return Lit::Null;
    }
    match col.refs {
        Some(t) => Lit::Int(rng.range(1, schema.id_max(t) + 2)),
        None => value(rng, col.ty),
    }
}

/// A scalar or boolean expression, rendered fully parenthesized.
#[derive(Clone, Debug, PartialEq)]
pub enum Expr {
    Col(String, Ty),
    Lit(Lit, Ty),
    Arith(Box<Expr>, &'static str, Box<Expr>, Ty),
    Neg(Box<Expr>, Ty),
    Cmp(Box<Expr>, &'static str, Box<Expr>),
    And(Box<Expr>, Box<Expr>),
    Or(Box<Expr>, Box<Expr>),
    Not(Box<Expr>),
    IsNull(Box<Expr>, bool),
    In(Box<Expr>, Vec<Expr>, bool),
    Between(Box<Expr>, Box<Expr>, Box<Expr>, bool),
    Like(Box<Expr>, String, bool),
    /// `count(*)` when the argument is `None`.
    Agg(&'static str, Option<Box<Expr>>, Ty),
    /// A scalar subquery that reads nothing of the statement around it.
    Sub(String, Ty),
}

impl Expr {
    pub fn render(&self) -> String {
        let not = |n: bool| if n { "NOT " } else { "" };
        match self {
            Expr::Col(name, _) => name.clone(),
            Expr::Lit(l, _) => l.render(),
            Expr::Arith(a, op, b, _) => format!("({} {op} {})", a.render(), b.render()),
            Expr::Neg(a, _) => format!("(- {})", a.render()),
            Expr::Cmp(a, op, b) => format!("({} {op} {})", a.render(), b.render()),
            Expr::And(a, b) => format!("({} AND {})", a.render(), b.render()),
            Expr::Or(a, b) => format!("({} OR {})", a.render(), b.render()),
            Expr::Not(a) => format!("(NOT {})", a.render()),
            Expr::IsNull(a, n) => format!("({} IS {}NULL)", a.render(), not(*n)),
            Expr::In(a, xs, n) => {
                let xs: Vec<String> = xs.iter().map(Expr::render).collect();
                format!("({} {}IN ({}))", a.render(), not(*n), xs.join(", "))
            }
            Expr::Between(a, lo, hi, n) => format!(
                "({} {}BETWEEN {} AND {})",
                a.render(),
                not(*n),
                lo.render(),
                hi.render()
            ),
            Expr::Like(a, p, n) => format!(
                "({} {}LIKE {})",
                a.render(),
                not(*n),
                Lit::Text(p.clone()).render()
            ),
            Expr::Agg(f, None, _) => format!("{f}(*)"),
            Expr::Agg(f, Some(a), _) => format!("{f}({})", a.render()),
            Expr::Sub(text, _) => text.clone(),
        }
    }

    /// The boolean sub-conditions a failing condition may shrink to.
    fn bool_children(&self) -> Vec<Expr> {
        match self {
            Expr::And(a, b) | Expr::Or(a, b) => vec![(**a).clone(), (**b).clone()],
            Expr::Not(a) => vec![(**a).clone()],
            _ => Vec::new(),
        }
    }
}

/// The columns a statement can name: (rendered name, type, may be NULL).
#[derive(Clone, Debug, Default)]
/// The columns in scope (name, type, nullable), and the scalar subqueries an expression
/// may use (text, type): `(SELECT max(c) FROM t)` over any table of the schema.
pub struct Columns(pub Vec<(String, Ty, bool)>, pub Vec<(String, Ty)>);

impl Columns {
    fn of(&self, rng: &mut Rng, want: impl Fn(Ty) -> bool) -> Option<Expr> {
        let fits: Vec<&(String, Ty, bool)> = self.0.iter().filter(|c| want(c.1)).collect();
        if fits.is_empty() {
            return None;
        }
        let c = *rng.pick(&fits);
        Some(Expr::Col(c.0.clone(), c.1))
    }

    fn types(&self) -> Vec<Ty> {
        let mut out: Vec<Ty> = Vec::new();
        for c in &self.0 {
            if !out.contains(&c.1) {
                out.push(c.1);
            }
        }
        out
    }
}

/// A value expression of type `ty` (or a comparable one).
fn scalar(rng: &mut Rng, cols: &Columns, ty: Ty, depth: u32) -> Expr {
    let r = rng.below(100);
    if r < 55 {
        if let Some(c) = cols.of(rng, |t| t == ty || (ty.integer() && t.integer())) {
            return c;
        }
    }
    if r >= 80 && depth > 0 && ty.numeric() {
        // A column on one side: `NULL + NULL` and `- NULL` do not type in PostgreSQL.
        let Some(col) = cols.of(rng, |t| t == ty || (ty.integer() && t.integer())) else {
            return Expr::Lit(value(rng, ty), ty);
        };
        if rng.chance(10) {
            return Expr::Neg(Box::new(col), ty);
        }
        let a = if rng.chance(50) {
            scalar(rng, cols, ty, depth - 1)
        } else {
            col.clone()
        };
        let a = if matches!(a, Expr::Lit(..)) { col } else { a };
        let op = *rng.pick(&["+", "-", "*"]);
        let small = if ty.fractional() {
            Lit::Quarter(rng.range(-8, 8))
        } else {
            Lit::Int(rng.range(-5, 5))
        };
        let b = if rng.chance(50) && op != "*" {
            scalar(rng, cols, ty, 0)
        } else {
            Expr::Lit(small, ty)
        };
        let (a, b) = if rng.chance(50) { (a, b) } else { (b, a) };
        return Expr::Arith(Box::new(a), op, Box::new(b), ty);
    }
    if depth > 0 && rng.chance(4) {
        let fits: Vec<&(String, Ty)> = cols
            .1
            .iter()
            .filter(|(_, t)| *t == ty || (ty.integer() && t.integer()))
            .collect();
        if !fits.is_empty() {
            let (text, t) = fits[rng.below(fits.len())];
            return Expr::Sub(text.clone(), *t);
        }
    }
    if rng.chance(5) {
        return Expr::Lit(Lit::Null, ty);
    }
    Expr::Lit(value(rng, ty), ty)
}

/// A column (or an expression over columns) of a random type: the left side of a test.
fn subject(rng: &mut Rng, cols: &Columns, depth: u32) -> Expr {
    let ty = *rng.pick(&cols.types());
    let e = scalar(rng, cols, ty, depth);
    if matches!(e, Expr::Lit(..)) {
        cols.of(rng, |t| t == ty).unwrap_or(e)
    } else {
        e
    }
}

fn ty_of(e: &Expr) -> Ty {
    match e {
        Expr::Col(_, t) | Expr::Lit(_, t) | Expr::Arith(.., t) | Expr::Neg(_, t) => *t,
        Expr::Agg(_, _, t) | Expr::Sub(_, t) => *t,
        _ => Ty::Bool,
    }
}

/// A boolean condition over `cols`.
pub fn condition(rng: &mut Rng, cols: &Columns, depth: u32) -> Expr {
    let r = rng.below(100);
    if depth > 0 && r < 30 {
        let a = condition(rng, cols, depth - 1);
        // OR more often than AND: random tests are selective, and rows should remain.
        return match rng.below(4) {
            0 => Expr::And(Box::new(a), Box::new(condition(rng, cols, depth - 1))),
            1 | 2 => Expr::Or(Box::new(a), Box::new(condition(rng, cols, depth - 1))),
            _ => Expr::Not(Box::new(a)),
        };
    }
    let s = subject(rng, cols, 1);
    let ty = ty_of(&s);
    let neg = rng.chance(25);
    match rng.below(10) {
        0 => Expr::IsNull(Box::new(s), neg),
        1 => {
            let xs = (0..1 + rng.below(4))
                .map(|_| {
                    if rng.chance(8) {
                        Expr::Lit(Lit::Null, ty)
                    } else {
                        Expr::Lit(value(rng, ty), ty)
                    }
                })
                .collect();
            Expr::In(Box::new(s), xs, neg)
        }
        2 if ty != Ty::Bool => {
            let lo = scalar(rng, cols, ty, 0);
            let hi = scalar(rng, cols, ty, 0);
            Expr::Between(Box::new(s), Box::new(lo), Box::new(hi), neg)
        }
        3 if ty.text() => Expr::Like(Box::new(s), (*rng.pick(&PATTERNS)).into(), neg),
        4 if ty == Ty::Bool => s,
        _ => {
            let op = if ty == Ty::Bool {
                *rng.pick(&["=", "<>"])
            } else {
                *rng.pick(&["=", "=", "<>", "<", "<=", ">", ">="])
            };
            let other = if ty.integer() && rng.chance(8) {
                Expr::Lit(Lit::Quarter(rng.range(-40, 120)), Ty::Double)
            } else if rng.chance(25) {
                cols.of(rng, |t| t.comparable(ty))
                    .unwrap_or_else(|| scalar(rng, cols, ty, 1))
            } else {
                scalar(rng, cols, ty, 1)
            };
            let (a, b) = if rng.chance(80) {
                (s, other)
            } else {
                (other, s)
            };
            Expr::Cmp(Box::new(a), op, Box::new(b))
        }
    }
}

/// A table of a FROM list: the table, its alias and the ON condition joining it.
#[derive(Clone, Debug)]
pub struct From {
    pub table: usize,
    pub alias: String,
    pub on: Option<Expr>,
    /// Joined with `LEFT JOIN` (its columns are then NULL in the rows no row of it matches).
    pub left: bool,
    /// The second table, joined with `RIGHT JOIN` (the first table's columns may be NULL).
    pub right: bool,
    /// The second of two tables, joined with `FULL JOIN` (both tables' columns may be NULL).
    pub full: bool,
}

/// A subquery conjunct of WHERE: `[NOT] EXISTS (SELECT 1 FROM t AS s WHERE <key> [AND
/// <cond>])`, or `<outer> [NOT] IN (SELECT s.<col> FROM t AS s [WHERE <cond>])`.
#[derive(Clone, Debug)]
pub struct Sub {
    pub table: usize,
    /// EXISTS: the correlation (`s.x = <outer>.y`) and whether it is NOT EXISTS.
    pub exists: Option<(Expr, bool)>,
    /// IN: the outer expression, the subquery's column, and whether it is NOT IN.
    pub within: Option<(Expr, String, bool)>,
    pub cond: Option<Expr>,
}

impl Sub {
    pub fn render(&self, schema: &Schema) -> String {
        let name = &schema.tables[self.table].name;
        let cond = self.cond.as_ref().map(Expr::render);
        match (&self.exists, &self.within) {
            (Some((key, negated)), _) => {
                let mut conds = vec![key.render()];
                conds.extend(cond);
                format!(
                    "({}EXISTS (SELECT 1 FROM {name} AS s WHERE {}))",
                    if *negated { "NOT " } else { "" },
                    conds.join(" AND ")
                )
            }
            (None, Some((outer, col, negated))) => format!(
                "({} {}IN (SELECT {col} FROM {name} AS s{}))",
                outer.render(),
                if *negated { "NOT " } else { "" },
                cond.map_or_else(String::new, |c| format!(" WHERE {c}"))
            ),
            (None, None) => "TRUE".into(),
        }
    }
}

#[derive(Clone, Debug)]
pub struct Select {
    /// A subquery conjunct of WHERE.
    pub sub: Option<Sub>,
    pub distinct: bool,
    /// `None`: `*` (its width).
    pub items: Result<Vec<Expr>, usize>,
    pub from: Vec<From>,
    /// The FROM list as `a, b WHERE ...` rather than `a JOIN b ON ...`.
    pub comma_joins: bool,
    pub filter: Option<Expr>,
    pub group_by: Vec<Expr>,
    /// HAVING over the groups' aggregates and keys.
    pub having: Option<Expr>,
    /// Output position (from 0), descending, NULLS FIRST/LAST.
    pub order: Vec<(usize, bool, Option<bool>)>,
    /// ORDER BY the item expressions rather than their positions.
    pub order_by_expr: bool,
    pub limit: Option<u64>,
    pub offset: Option<u64>,
    /// `UNION`, `INTERSECT` or `EXCEPT` (`true`: with ALL) with a second SELECT of the
    /// same items and FROM list under another filter; the ORDER BY and LIMIT above are then
    /// the set operation's.
    pub union: Option<(SetOp, bool, Box<Select>)>,
    /// Read through a derived table when the statement is unordered (`true`: `WITH d AS
    /// (...) SELECT * FROM d`, `false`: `SELECT * FROM (...) AS d`): the same rows.
    pub derived: Option<bool>,
}

impl Select {
    pub fn width(&self) -> usize {
        match &self.items {
            Ok(items) => items.len(),
            Err(w) => *w,
        }
    }

    /// Whether the statement fixes the order of its rows.
    pub fn ordered(&self) -> bool {
        !self.order.is_empty()
    }

    pub fn render(&self, schema: &Schema) -> String {
        let mut s = self.render_body(schema);
        if let Some((op, all, other)) = &self.union {
            s.push(' ');
            s.push_str(op.keyword());
            s.push_str(if *all { " ALL " } else { " " });
            s.push_str(&other.render_body(schema));
        }
        self.render_tail(&mut s);
        match self.derived {
            Some(true) if !self.ordered() => format!("WITH d AS ({s}) SELECT * FROM d"),
            Some(false) if !self.ordered() => format!("SELECT * FROM ({s}) AS d"),
            _ => s,
        }
    }

    /// Whether the statement reads through a derived table.
    pub fn derived(&self) -> bool {
        self.derived.is_some() && !self.ordered()
    }

    /// The SELECT up to HAVING.
    fn render_body(&self, schema: &Schema) -> String {
        let mut s = String::from("SELECT ");
        if self.distinct {
            s.push_str("DISTINCT ");
        }
        match &self.items {
            Ok(items) => {
                let items: Vec<String> = items.iter().map(Expr::render).collect();
                s.push_str(&items.join(", "));
            }
            Err(_) => s.push('*'),
        }
        s.push_str(" FROM ");
        let mut filter: Vec<String> = Vec::new();
        // `a, b LEFT JOIN c ON <a>` is not SQL (a comma binds looser than a join): a FROM
        // list with a LEFT JOIN is written with JOINs only.
        let comma_joins =
            self.comma_joins && !self.from.iter().any(|f| f.left || f.right || f.full);
        for (i, f) in self.from.iter().enumerate() {
            let name = &schema.tables[f.table].name;
            match (i, &f.on, comma_joins) {
                (0, _, _) => s.push_str(&format!("{name} AS {}", f.alias)),
                (_, Some(on), _) if f.left || f.right || f.full => s.push_str(&format!(
                    " {} JOIN {name} AS {} ON {}",
                    if f.left {
                        "LEFT"
                    } else if f.full {
                        "FULL"
                    } else {
                        "RIGHT"
                    },
                    f.alias,
                    on.render()
                )),
                (_, Some(on), false) => {
                    s.push_str(&format!(" JOIN {name} AS {} ON {}", f.alias, on.render()))
                }
                (_, on, _) => {
                    s.push_str(&format!(", {name} AS {}", f.alias));
                    filter.extend(on.iter().map(Expr::render));
                }
            }
        }
        filter.extend(self.filter.iter().map(Expr::render));
        filter.extend(self.sub.iter().map(|sub| sub.render(schema)));
        if !filter.is_empty() {
            s.push_str(&format!(" WHERE {}", filter.join(" AND ")));
        }
        if !self.group_by.is_empty() {
            let keys: Vec<String> = self.group_by.iter().map(Expr::render).collect();
            s.push_str(&format!(" GROUP BY {}", keys.join(", ")));
        }
        if let Some(h) = &self.having {
            s.push_str(&format!(" HAVING {}", h.render()));
        }
        s
    }

    /// ORDER BY, LIMIT and OFFSET.
    fn render_tail(&self, s: &mut String) {
        if !self.order.is_empty() {
            let keys: Vec<String> = self
                .order
                .iter()
                .map(|(k, desc, nulls)| {
                    // A constant in ORDER BY is a position (or an error) in SQL.
                    let key = match (&self.items, self.order_by_expr && self.union.is_none()) {
                        (Ok(items), true) if !matches!(items[*k], Expr::Lit(..)) => {
                            items[*k].render()
                        }
                        _ => (k + 1).to_string(),
                    };
                    let dir = if *desc { " DESC" } else { "" };
                    let nulls = match nulls {
                        Some(true) => " NULLS FIRST",
                        Some(false) => " NULLS LAST",
                        None => "",
                    };
                    format!("{key}{dir}{nulls}")
                })
                .collect();
            s.push_str(&format!(" ORDER BY {}", keys.join(", ")));
        }
        if let Some(l) = self.limit {
            s.push_str(&format!(" LIMIT {l}"));
        }
        if let Some(o) = self.offset {
            s.push_str(&format!(" OFFSET {o}"));
        }
    }

    /// Smaller statements that may fail the same way: each is one step simpler.
    pub fn shrinks(&self) -> Vec<Select> {
        let mut out = Vec::new();
        if self.derived.is_some() {
            out.push(Select {
                derived: None,
                ..self.clone()
            });
        }
        if let Some((op, all, other)) = &self.union {
            out.push(Select {
                union: None,
                ..self.clone()
            });
            if !all {
                out.push(Select {
                    union: Some((*op, true, other.clone())),
                    ..self.clone()
                });
            }
            if *op != SetOp::Union {
                out.push(Select {
                    union: Some((SetOp::Union, *all, other.clone())),
                    ..self.clone()
                });
            }
        }
        if self.sub.is_some() {
            out.push(Select {
                sub: None,
                ..self.clone()
            });
        }
        if self.having.is_some() {
            out.push(Select {
                having: None,
                ..self.clone()
            });
        }
        if let Some(f) = &self.filter {
            out.push(Select {
                filter: None,
                ..self.clone()
            });
            for c in f.bool_children() {
                out.push(Select {
                    filter: Some(c),
                    ..self.clone()
                });
            }
        }
        if self.limit.is_some() || self.offset.is_some() {
            out.push(Select {
                limit: None,
                offset: None,
                ..self.clone()
            });
        } else if !self.order.is_empty() {
            out.push(Select {
                order: Vec::new(),
                ..self.clone()
            });
        }
        if self.distinct {
            out.push(Select {
                distinct: false,
                ..self.clone()
            });
        }
        if let Ok(items) = &self.items {
            for drop in 0..items.len() {
                if items.len() == 1 {
                    break;
                }
                let mut s = self.clone();
                s.items = Ok(items
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| *i != drop)
                    .map(|(_, e)| e.clone())
                    .collect());
                s.order = self
                    .order
                    .iter()
                    .filter(|o| o.0 != drop)
                    .map(|&(k, d, n)| (if k > drop { k - 1 } else { k }, d, n))
                    .collect();
                if s.order.is_empty() {
                    s.limit = None;
                    s.offset = None;
                }
                out.push(s);
            }
        }
        out
    }
}

/// The FROM list of a query: one table, or two or three joined on keys.
fn from_list(rng: &mut Rng, schema: &Schema) -> (Vec<From>, Columns) {
    let n = match rng.below(10) {
        0..=4 => 1,
        5..=8 => 2,
        _ => 3,
    };
    let mut from: Vec<From> = Vec::new();
    let mut cols = Columns::default();
    for t in &schema.tables {
        cols.1
            .push((format!("(SELECT count(*) FROM {})", t.name), Ty::BigInt));
        for c in t.cols.iter().filter(|c| c.ty != Ty::Bool) {
            let f = if c.name.len() % 2 == 0 { "max" } else { "min" };
            cols.1
                .push((format!("(SELECT {f}({}) FROM {})", c.name, t.name), c.ty));
        }
    }
    for i in 0..n {
        let table = rng.below(schema.tables.len());
        let alias = format!("{}", (b'a' + i as u8) as char);
        let on = (i > 0).then(|| join_key(rng, schema, &from, table, &alias));
        let left = i > 0 && rng.chance(30);
        let right = i == 1 && !left && rng.chance(20);
        let full = n == 2 && i == 1 && !left && !right && rng.chance(20);
        if right || full {
            // The first table's columns may be NULL now.
            for c in &mut cols.0 {
                c.2 = true;
            }
        }
        for c in &schema.tables[table].cols {
            cols.0.push((
                format!("{alias}.{}", c.name),
                c.ty,
                left || full || !c.not_null,
            ));
        }
        from.push(From {
            table,
            alias,
            on,
            left,
            right,
            full,
        });
    }
    (from, cols)
}

/// `x.r<t> = new.id`, `new.r<t> = x.id`, or `x.id = new.id`.
fn join_key(rng: &mut Rng, schema: &Schema, from: &[From], table: usize, alias: &str) -> Expr {
    let mut keys: Vec<(String, String)> = Vec::new();
    for f in from {
        for c in &schema.tables[f.table].cols {
            if c.refs == Some(table) {
                keys.push((format!("{}.{}", f.alias, c.name), format!("{alias}.id")));
            }
        }
        for c in &schema.tables[table].cols {
            if c.refs == Some(f.table) {
                keys.push((format!("{alias}.{}", c.name), format!("{}.id", f.alias)));
            }
        }
        keys.push((format!("{}.id", f.alias), format!("{alias}.id")));
    }
    let (l, r) = rng.pick(&keys).clone();
    Expr::Cmp(
        Box::new(Expr::Col(l, Ty::Int)),
        "=",
        Box::new(Expr::Col(r, Ty::Int)),
    )
}

/// A subquery over a random table (alias `s`), correlated with the FROM list's tables.
fn subquery(rng: &mut Rng, schema: &Schema, from: &[From], cols: &Columns) -> Sub {
    let table = rng.below(schema.tables.len());
    let mut inner = Columns::default();
    for c in &schema.tables[table].cols {
        inner.0.push((format!("s.{}", c.name), c.ty, !c.not_null));
    }
    let cond = rng.chance(30).then(|| condition(rng, &inner, 1));
    if rng.chance(40) {
        // IN over an integer column of each side.
        let outer = cols.of(rng, |t| t == Ty::Int);
        let col = inner.of(rng, |t| t == Ty::Int);
        if let (Some(outer), Some(Expr::Col(col, _))) = (outer, col) {
            return Sub {
                table,
                exists: None,
                within: Some((outer, col, rng.chance(35))),
                cond,
            };
        }
    }
    Sub {
        table,
        exists: Some((join_key(rng, schema, from, table, "s"), rng.chance(25))),
        within: None,
        cond,
    }
}

/// A random SELECT: plain, DISTINCT, or grouped with aggregates.
pub fn select(rng: &mut Rng, schema: &Schema) -> Select {
    let (from, cols) = from_list(rng, schema);
    let comma_joins = rng.chance(20);
    let filter = rng.chance(70).then(|| condition(rng, &cols, 2));
    // A subquery where there is no other filter: together they would leave too few rows.
    let sub = (filter.is_none() && rng.chance(20)).then(|| subquery(rng, schema, &from, &cols));
    let mut s = Select {
        sub,
        distinct: false,
        items: Ok(Vec::new()),
        comma_joins,
        from,
        filter,
        group_by: Vec::new(),
        having: None,
        order: Vec::new(),
        order_by_expr: false,
        limit: None,
        offset: None,
        union: None,
        derived: None,
    };
    match rng.below(10) {
        0..=4 => {
            if s.from.len() == 1 && rng.chance(15) {
                s.items = Err(cols.0.len());
            } else {
                s.items = Ok((0..1 + rng.below(4)).map(|_| item(rng, &cols)).collect());
                s.order_by_expr = rng.chance(30);
            }
        }
        5..=6 => {
            s.distinct = true;
            s.items = Ok((0..1 + rng.below(3))
                .map(|_| cols.of(rng, |_| true).expect("a table has columns"))
                .collect());
        }
        _ => grouped(rng, &cols, &mut s),
    }
    if rng.chance(50) {
        let mut positions: Vec<usize> = (0..s.width()).collect();
        for i in (1..positions.len()).rev() {
            positions.swap(i, rng.below(i + 1));
        }
        s.order = positions
            .into_iter()
            .map(|k| {
                (
                    k,
                    rng.chance(40),
                    [None, None, Some(true), Some(false)][rng.below(4)],
                )
            })
            .collect();
        if rng.chance(60) {
            s.limit = Some(rng.below(12) as u64);
        }
        if rng.chance(40) {
            s.offset = Some(rng.below(8) as u64);
        }
    }
    if rng.chance(15) {
        let other = Select {
            filter: Some(condition(rng, &cols, 1)),
            sub: None,
            order: Vec::new(),
            limit: None,
            offset: None,
            union: None,
            ..s.clone()
        };
        let op = match rng.below(4) {
            0 => SetOp::Intersect,
            1 => SetOp::Except,
            _ => SetOp::Union,
        };
        s.union = Some((op, rng.chance(50), Box::new(other)));
    }
    if rng.chance(12) {
        s.derived = Some(rng.chance(50));
    }
    s
}

/// A select-list item of a plain query: mostly a column, sometimes arithmetic or a test.
fn item(rng: &mut Rng, cols: &Columns) -> Expr {
    match rng.below(10) {
        0..=5 => cols.of(rng, |_| true).expect("a table has columns"),
        6..=8 => {
            let ty = *rng.pick(&cols.types());
            scalar(rng, cols, ty, 1)
        }
        _ => condition(rng, cols, 0),
    }
}

/// GROUP BY 0 to 2 columns, the select list some of them and 1 to 3 aggregates.
fn grouped(rng: &mut Rng, cols: &Columns, s: &mut Select) {
    let keys: Vec<Expr> = (0..rng.below(3))
        .map(|_| cols.of(rng, |_| true).expect("a table has columns"))
        .collect();
    let mut items: Vec<Expr> = keys.iter().filter(|_| rng.chance(85)).cloned().collect();
    for _ in 0..1 + rng.below(3) {
        items.push(aggregate(rng, cols));
    }
    for i in (1..items.len()).rev() {
        items.swap(i, rng.below(i + 1));
    }
    s.items = Ok(items);
    if rng.chance(35) {
        s.having = Some(having(rng, cols, &keys, 1));
    }
    s.group_by = keys;
}

/// A HAVING condition: aggregates (or GROUP BY keys) compared with literals, or tested for
/// NULL, combined with AND, OR and NOT.
fn having(rng: &mut Rng, cols: &Columns, keys: &[Expr], depth: u32) -> Expr {
    if depth > 0 && rng.chance(30) {
        let a = having(rng, cols, keys, depth - 1);
        return match rng.below(3) {
            0 => Expr::And(Box::new(a), Box::new(having(rng, cols, keys, depth - 1))),
            1 => Expr::Or(Box::new(a), Box::new(having(rng, cols, keys, depth - 1))),
            _ => Expr::Not(Box::new(a)),
        };
    }
    let subject = match keys {
        [] => aggregate(rng, cols),
        _ if rng.chance(20) => rng.pick(keys).clone(),
        _ => aggregate(rng, cols),
    };
    let ty = ty_of(&subject);
    if rng.chance(10) {
        return Expr::IsNull(Box::new(subject), rng.chance(50));
    }
    // An average is a double in Vev and a numeric in PostgreSQL: compare it with < and >
    // only, so that no answer turns on the last digit.
    let op = match subject {
        Expr::Agg("avg", ..) => *rng.pick(&["<", ">"]),
        _ if ty == Ty::Bool => *rng.pick(&["=", "<>"]),
        _ => *rng.pick(&["=", "<>", "<", "<=", ">", ">="]),
    };
    let lit = match subject {
        // Counts are small: compare with small numbers, so that both answers occur.
        Expr::Agg("count", ..) => Lit::Int(rng.range(0, 4)),
        _ => value(rng, ty),
    };
    let lit_ty = match subject {
        Expr::Agg("count", ..) => Ty::BigInt,
        _ => ty,
    };
    Expr::Cmp(Box::new(subject), op, Box::new(Expr::Lit(lit, lit_ty)))
}

fn aggregate(rng: &mut Rng, cols: &Columns) -> Expr {
    let f = *rng.pick(&["count", "count", "sum", "avg", "min", "max"]);
    if f == "count" && rng.chance(50) {
        return Expr::Agg("count", None, Ty::BigInt);
    }
    let arg = match f {
        "count" => cols.of(rng, |_| true),
        "sum" | "avg" => cols.of(rng, Ty::numeric),
        _ => cols.of(rng, |t| t != Ty::Bool),
    };
    let Some(arg) = arg else {
        return Expr::Agg("count", None, Ty::BigInt);
    };
    let ty = ty_of(&arg);
    // Over an expression sometimes, never a bare literal (`sum(NULL)` does not type).
    let arg = match scalar(rng, cols, ty, 1) {
        e if ty.numeric() && rng.chance(20) && !matches!(e, Expr::Lit(..)) => e,
        _ => arg,
    };
    Expr::Agg(f, Some(Box::new(arg)), ty)
}

/// A multi-row INSERT of new rows (one in 20 has an id given before: a unique violation
/// unless that row was deleted).
pub fn insert(rng: &mut Rng, schema: &mut Schema, table: usize, rows: usize) -> String {
    let snapshot = schema.clone();
    let t = &mut schema.tables[table];
    let cols: Vec<usize> = (0..t.cols.len())
        .filter(|&i| i == 0 || t.cols[i].not_null || rng.chance(80))
        .collect();
    let mut values = Vec::new();
    let duplicate_at = (t.next_id > 1 && rng.chance(5)).then(|| rng.below(rows));
    for row in 0..rows {
        let id = if duplicate_at == Some(row) {
            rng.range(1, t.next_id - 1)
        } else {
            t.next_id += 1;
            t.next_id - 1
        };
        let row: Vec<String> = cols
            .iter()
            .map(|&c| match c {
                0 => id.to_string(),
                _ => cell(rng, &snapshot, &t.cols[c]).render(),
            })
            .collect();
        values.push(format!("({})", row.join(", ")));
    }
    let names: Vec<&str> = cols.iter().map(|&c| t.cols[c].name.as_str()).collect();
    format!(
        "INSERT INTO {} ({}) VALUES {}{}",
        t.name,
        names.join(", "),
        values.join(", "),
        // A duplicate key skipped or updated rather than refused, now and then.
        match duplicate_at.map(|_| rng.below(5)) {
            Some(0) => " ON CONFLICT DO NOTHING".to_owned(),
            Some(1) => " ON CONFLICT (id) DO NOTHING".to_owned(),
            Some(2) if names.len() > 1 => {
                let col = names[1 + rng.below(names.len() - 1)];
                format!(" ON CONFLICT (id) DO UPDATE SET {col} = EXCLUDED.{col}")
            }
            _ => String::new(),
        }
    )
}

/// An UPDATE of 1 or 2 columns (never the primary key) of the rows a condition finds.
pub fn update(rng: &mut Rng, schema: &Schema, table: usize) -> String {
    let t = &schema.tables[table];
    let cols = table_columns(t);
    let mut sets = Vec::new();
    let mut used = Vec::new();
    for _ in 0..1 + rng.below(2) {
        let c = 1 + rng.below(t.cols.len() - 1);
        if used.contains(&c) {
            continue;
        }
        used.push(c);
        let col = &t.cols[c];
        let v = match rng.below(10) {
            0 if !col.not_null => "NULL".into(),
            1..=3 => cell(rng, schema, col).render(),
            4..=5 if col.ty.numeric() => {
                let step = match col.ty {
                    Ty::Double | Ty::Real | Ty::Numeric => Lit::Quarter(rng.range(-6, 6)),
                    _ => Lit::Int(rng.range(-3, 3)),
                };
                format!("{} + {}", col.name, step.render())
            }
            6 if col.ty == Ty::Bool => format!("NOT {}", col.name),
            7 if col.ty.numeric() => match cols.of(rng, Ty::fractional) {
                Some(d) => d.render(),
                None => cell(rng, schema, col).render(),
            },
            _ => {
                // Only columns that fit: a statement failing on two rows for two reasons
                // (a NULL in a NOT NULL column, an int overflowing) may report either.
                let fit = Columns(
                    cols.0
                        .iter()
                        .filter(|c| {
                            !((col.not_null && c.2) || (col.ty == Ty::Int && c.1 == Ty::BigInt))
                        })
                        .cloned()
                        .collect(),
                    Vec::new(),
                );
                match scalar(rng, &fit, col.ty, 1) {
                    Expr::Lit(Lit::Null, _) if col.not_null => cell(rng, schema, col).render(),
                    e => e.render(),
                }
            }
        };
        if v == "NULL" && col.not_null {
            continue;
        }
        sets.push(format!("{} = {v}", col.name));
    }
    if sets.is_empty() {
        sets.push(format!("{0} = {0}", t.cols[1].name));
    }
    let filter = condition(rng, &cols, 2).render();
    format!("UPDATE {} SET {} WHERE {filter}", t.name, sets.join(", "))
}

/// A DELETE of the rows a condition finds (rarely of every row).
pub fn delete(rng: &mut Rng, schema: &Schema, table: usize) -> String {
    let t = &schema.tables[table];
    if rng.chance(3) {
        return format!("DELETE FROM {}", t.name);
    }
    let filter = condition(rng, &table_columns(t), 2).render();
    format!("DELETE FROM {} WHERE {filter}", t.name)
}

/// A table's columns by their bare names (for UPDATE and DELETE).
fn table_columns(t: &Table) -> Columns {
    Columns(
        t.cols
            .iter()
            .map(|c| (c.name.clone(), c.ty, !c.not_null))
            .collect(),
        Vec::new(),
    )
}
