//! SELECT as a Datalog query.
//!
//! `SELECT a.x, count(*) FROM t a JOIN u b ON ... WHERE ... GROUP BY a.x` becomes
//! `[:find ?c1 (count ?t0) :with ?t1 :in $ ?p1 .. :where ..]`: a variable per table (its
//! row entity), the WHERE and ON conditions as patterns and predicates (`Builder`), the
//! select list as find elements. SQL results are bags, so the row entities go in `:with`
//! (unless DISTINCT). What Datalog does not do is done on the rows afterwards (`Post`):
//! ORDER BY, LIMIT and OFFSET, the output column order, and the one row an aggregate over
//! no rows still returns.

use std::sync::Arc;

use sqlparser::ast::{
    Distinct, Expr, GroupByExpr, LimitClause, OrderByKind, Query, Select, SelectItem,
    SelectItemQualifiedWildcardKind, SetExpr, TableFactor, TableWithJoins, Value as SqlValue,
};

use super::expr::{function_args, ident_name, placeholder, Builder, Scope, Term};
use crate::catalog::{Catalog, Rows};
use crate::error::SqlError;
use crate::types::SqlType;

/// A query input after `$`.
#[derive(Clone, Debug, PartialEq)]
pub enum Input {
    Param(usize),
    /// The statement's time (`now()`, `CURRENT_TIMESTAMP`).
    Now,
}

/// One output column.
#[derive(Clone, Debug)]
pub struct OutCol {
    pub name: String,
    pub ty: SqlType,
}

/// A LIMIT or OFFSET.
#[derive(Clone, Debug)]
pub enum Count {
    Const(u64),
    Param(usize),
}

/// SQL's aggregates over no rows: count gives 0, the others NULL.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Agg {
    Count,
    Other,
}

/// What happens to the query's rows.
#[derive(Clone, Debug, Default)]
pub struct Post {
    /// The find element of each output column.
    pub select: Vec<usize>,
    /// Sort keys: find element, descending, NULLs first.
    pub order: Vec<(usize, bool, bool)>,
    pub limit: Option<Count>,
    pub offset: Option<Count>,
    /// Aggregates without GROUP BY: each find element's aggregate (one row even over no
    /// rows).
    pub global: Option<Vec<Agg>>,
    /// HAVING: which rows to keep (before ORDER BY).
    pub having: Option<super::having::Having>,
    /// `DISTINCT ON (...)`: the find elements of its keys; the first row (in ORDER BY's
    /// order) of each key is kept, before OFFSET and LIMIT.
    pub distinct_on: Option<Vec<usize>>,
    /// Expressions over aggregates (`sum(v) / count(*)`), appended to each row after its
    /// find elements (before HAVING): `select` and `order` name them by those positions.
    pub computed: Vec<super::computed::Computed>,
    /// `SELECT DISTINCT` with computed output columns: rows with the same output are kept
    /// once (the query's own DISTINCT sees only the find elements).
    pub distinct_output: bool,
}

/// Where `select` and `order` name computed column `j` until the find elements are all
/// known: `COMPUTED + j` (then `finds.len() + j`).
const COMPUTED: usize = 1 << 40;

/// A compiled SELECT over tables.
#[derive(Clone, Debug)]
pub struct SelectPlan {
    pub datalog: String,
    pub query: Arc<vev::Query>,
    pub inputs: Vec<Input>,
    /// Parameters whose NULL makes the result empty.
    pub null_rejecting: Vec<usize>,
    pub params: Vec<Option<SqlType>>,
    pub columns: Arc<Vec<OutCol>>,
    pub post: Post,
    /// The row entities' find elements, when the statement locks its rows (FOR UPDATE).
    pub lock: Option<RowLock>,
    /// The tables it reads.
    pub tables: Vec<String>,
    /// How long its query took lately.
    pub cost: Arc<super::QueryCost>,
}

/// `SELECT ... FOR UPDATE`: which find elements hold the row entities to lock.
#[derive(Clone, Debug)]
pub struct RowLock {
    /// Find elements (after the output columns) with the locked tables' row entities.
    pub columns: Vec<usize>,
    /// `NOWAIT`: a row another transaction holds fails the statement (`55P03`) instead of
    /// waiting for it.
    pub nowait: bool,
}

/// One element of `:find`.
pub(crate) struct Find {
    pub(crate) text: String,
    pub(crate) agg: Option<Agg>,
}

/// Compile a SELECT with a FROM list. `None`: the query has no FROM (see `consts`).
pub fn compile(q: &Query, catalog: &Catalog) -> Result<Option<SelectPlan>, SqlError> {
    if q.with.is_some() {
        return Err(SqlError::unsupported("WITH"));
    }
    let SetExpr::Select(sel) = &*q.body else {
        return Err(SqlError::unsupported(format!("the query {}", q.body)));
    };
    if sel.from.is_empty() {
        return Ok(None);
    }
    let scopes = scopes(&sel.from, catalog)?;
    let mut b = Builder::new(scopes);
    // The scopes an outer join brings in: their rows come from its clause.
    let outer = joins(&mut b, sel)?;
    if let Some(w) = &sel.selection {
        super::subquery::condition(&mut b, w, catalog)?;
    }
    row_clauses(&mut b, &outer);
    let mut finds: Vec<Find> = Vec::new();
    let mut columns = Vec::new();
    let mut post = Post::default();
    select_list(&mut b, sel, &mut finds, &mut columns, &mut post)?;
    let has_agg = finds.iter().any(|f| f.agg.is_some()) || sel.having.is_some();
    let keys = group_by(&mut b, sel, &mut finds, has_agg)?;
    if let Some(h) = &sel.having {
        post.having = Some(super::having::compile(&mut b, h, &mut finds)?);
    }
    if let Some(ob) = &q.order_by {
        order_by(&mut b, ob, sel, &columns, &keys, &mut finds, &mut post)?;
    }
    if let Some(Distinct::On(keys)) = &sel.distinct {
        if has_agg {
            return Err(SqlError::unsupported("DISTINCT ON with aggregates"));
        }
        post.distinct_on = Some(distinct_on(&mut b, keys, sel, &columns, &mut finds, &post)?);
    }
    limit(&q.limit_clause, &mut post, &mut b)?;
    if has_agg && matches!(&sel.group_by, GroupByExpr::Expressions(g, _) if g.is_empty()) {
        post.global = Some(finds.iter().map(|f| f.agg.unwrap_or(Agg::Other)).collect());
    }
    let distinct = matches!(sel.distinct, Some(Distinct::Distinct));
    post.distinct_output = distinct && !post.computed.is_empty();
    let lock = row_lock(q, sel, &b, &mut finds, has_agg)?;
    place_computed(&mut post, finds.len());
    let datalog = datalog(&b, &finds, distinct);
    let query = vev::Query::parse(&datalog).map_err(|e| {
        SqlError::internal(format!(
            "the translation of this SELECT is not valid Datalog ({e}): {datalog}"
        ))
    })?;
    Ok(Some(SelectPlan {
        datalog,
        query: Arc::new(query),
        inputs: inputs(&b),
        null_rejecting: b.null_rejecting.iter().copied().collect(),
        params: b.params.clone(),
        columns: Arc::new(columns),
        post,
        lock,
        tables: b.scopes.iter().map(|s| s.table.name.clone()).collect(),
        cost: Arc::default(),
    }))
}

/// Computed columns' places, now that the find elements are all known: after them.
fn place_computed(post: &mut Post, finds: usize) {
    let place = |k: &mut usize| {
        if *k >= COMPUTED {
            *k = finds + (*k - COMPUTED);
        }
    };
    post.select.iter_mut().for_each(place);
    post.order.iter_mut().for_each(|(k, _, _)| place(k));
    if let Some(keys) = &mut post.distinct_on {
        keys.iter_mut().for_each(place);
    }
}

/// The FROM list's joins, chain by chain: ON conditions, USING, outer joins. The scopes
/// outer joins bring in (their rows come from the join's clause).
fn joins(b: &mut Builder, sel: &sqlparser::ast::Select) -> Result<Vec<usize>, SqlError> {
    let mut outer: Vec<usize> = Vec::new();
    let mut si = 0;
    for twj in &sel.from {
        let first = si;
        let mut chain = every_column(b, first);
        si += 1;
        for j in &twj.joins {
            if let Some(names) = super::using::columns(j)? {
                super::using::join(b, &mut chain, si, &names)?;
                si += 1;
                continue;
            }
            chain.extend(every_column(b, si));
            // An ON condition sees the tables of its own join chain up to this one (a
            // comma binds looser than a join), as PostgreSQL checks.
            on_references(j, &b.scopes[first..=si], &b.scopes)?;
            match outer_join_on(j)? {
                Some((Side::Left, on)) => {
                    let before: Vec<usize> = (0..si).filter(|k| !outer.contains(k)).collect();
                    left_join(b, si, &before, on)?;
                    outer.push(si);
                }
                // `a RIGHT JOIN b ON c` is `b LEFT JOIN a ON c` with the columns in a, b's
                // order: only where `a` is one table (a RIGHT JOIN that would make an
                // earlier join's rows NULL is not supported).
                Some((Side::Right, _)) if si != first + 1 => {
                    return Err(SqlError::unsupported("a RIGHT JOIN after another join"))
                }
                // `a FULL JOIN b`: only as the one join of its chain.
                Some((Side::Full, _)) if si != first + 1 || twj.joins.len() != 1 => {
                    return Err(SqlError::unsupported(
                        "a FULL JOIN with another join in its chain",
                    ))
                }
                Some((Side::Full, on)) => {
                    full_join(b, first, si, on)?;
                    outer.push(first);
                    outer.push(si);
                }
                Some((Side::Right, on)) => {
                    let before: Vec<usize> = (0..=si)
                        .filter(|k| *k != first && !outer.contains(k))
                        .collect();
                    left_join(b, first, &before, on)?;
                    outer.push(first);
                }
                None => join_condition(b, j)?,
            }
            si += 1;
        }
        b.star.extend(chain);
    }
    Ok(outer)
}

/// `FOR UPDATE [OF t, ...] [NOWAIT]` (and `FOR SHARE`, which locks as FOR UPDATE does):
/// the row entities of the tables it names (all of them without `OF`) become find
/// elements after the others, so that the session can lock the rows it returns.
/// PostgreSQL refuses row locks with DISTINCT, GROUP BY and aggregates (a result row is
/// then no table row), and so does Vev, with the same messages.
fn row_lock(
    q: &Query,
    sel: &Select,
    b: &Builder,
    finds: &mut Vec<Find>,
    grouped: bool,
) -> Result<Option<RowLock>, SqlError> {
    let Some(first) = q.locks.first() else {
        return Ok(None);
    };
    let strength = format!("FOR {}", first.lock_type);
    let refused =
        |what: &str| SqlError::new("0A000", format!("{strength} is not allowed with {what}"));
    if matches!(sel.distinct, Some(Distinct::Distinct | Distinct::On(_))) {
        return Err(refused("DISTINCT clause"));
    }
    if !matches!(&sel.group_by, GroupByExpr::Expressions(g, _) if g.is_empty()) {
        return Err(refused("GROUP BY clause"));
    }
    if grouped {
        return Err(refused("aggregate functions"));
    }
    let mut locked: Vec<&Scope> = Vec::new();
    let mut nowait = false;
    for clause in &q.locks {
        match clause.nonblock {
            Some(sqlparser::ast::NonBlock::Nowait) => nowait = true,
            Some(sqlparser::ast::NonBlock::SkipLocked) => {
                return Err(SqlError::unsupported("SKIP LOCKED"))
            }
            None => {}
        }
        match &clause.of {
            None => locked.extend(b.scopes.iter()),
            Some(name) => {
                let name = table_name(name)?;
                let scope = b.scopes.iter().find(|s| s.alias == name).ok_or_else(|| {
                    SqlError::new(
                        "42P01",
                        format!(
                            "relation \"{name}\" in {strength} clause not found in FROM clause"
                        ),
                    )
                })?;
                locked.push(scope);
            }
        }
    }
    let mut columns = Vec::new();
    for scope in locked {
        // A row entity already found (e.g. `SELECT id` of a table made from attributes)
        // is not found twice.
        let i = match finds.iter().position(|f| f.text == scope.var) {
            Some(i) => i,
            None => {
                finds.push(Find {
                    text: scope.var.clone(),
                    agg: None,
                });
                finds.len() - 1
            }
        };
        if !columns.contains(&i) {
            columns.push(i);
        }
    }
    Ok(Some(RowLock { columns, nowait }))
}

/// The query's `:in` inputs after `$`.
pub fn inputs(b: &Builder) -> Vec<Input> {
    let mut out: Vec<Input> = b.used_params.iter().map(|n| Input::Param(*n)).collect();
    if b.uses_now {
        out.push(Input::Now);
    }
    out
}

fn datalog(b: &Builder, finds: &[Find], distinct: bool) -> String {
    let find: Vec<&str> = finds.iter().map(|f| f.text.as_str()).collect();
    let mut text = format!("[:find {}", find.join(" "));
    if !distinct {
        // A variable in `:find` (alone or aggregated) cannot also be in `:with`.
        let in_find = |v: &str| {
            finds.iter().any(|f| {
                f.text
                    .split(|c: char| c.is_whitespace() || c == '(' || c == ')')
                    .any(|tok| tok == v)
            })
        };
        let with: Vec<&str> = b
            .scopes
            .iter()
            .map(|s| s.var.as_str())
            .filter(|v| !in_find(v))
            .collect();
        if !with.is_empty() {
            text.push_str(&format!(" :with {}", with.join(" ")));
        }
    }
    let ins: Vec<String> = inputs(b)
        .iter()
        .map(|i| match i {
            Input::Param(n) => format!("?p{n}"),
            Input::Now => "?now".into(),
        })
        .collect();
    text.push_str(&format!(" :in $ {}", ins.join(" ")));
    text.push_str(&format!(" :where {}]", b.clauses.join(" ")));
    text
}

/// The FROM list's tables (every join is an inner join).
pub fn scopes(from: &[TableWithJoins], catalog: &Catalog) -> Result<Vec<Scope>, SqlError> {
    let mut out = Vec::new();
    for twj in from {
        out.push(scope_of(&twj.relation, catalog, out.len())?);
        for j in &twj.joins {
            out.push(scope_of(&j.relation, catalog, out.len())?);
        }
    }
    Ok(out)
}

pub fn scope_of(t: &TableFactor, catalog: &Catalog, i: usize) -> Result<Scope, SqlError> {
    if let TableFactor::Derived {
        subquery,
        alias: Some(alias),
        lateral: false,
        ..
    } = t
    {
        // Made by `derived::compile` for the statement's own FROM lists.
        let key = super::derived::subquery_key(alias, subquery);
        let table = catalog
            .tables
            .get(&key)
            .ok_or_else(|| SqlError::unsupported("a subquery in FROM inside a subquery"))?;
        return Ok(Scope {
            alias: ident_name(&alias.name),
            table: table.clone(),
            var: format!("?t{i}"),
        });
    }
    let TableFactor::Table {
        name,
        alias,
        args: None,
        ..
    } = t
    else {
        return Err(SqlError::unsupported(format!("FROM {t}")));
    };
    let table = table_name(name)?;
    let table = catalog.table(&table)?.clone();
    let alias = alias
        .as_ref()
        .map_or_else(|| table.name.clone(), |a| ident_name(&a.name));
    Ok(Scope {
        alias,
        table,
        var: format!("?t{i}"),
    })
}

/// A table name, without a `public.` schema.
pub fn table_name(name: &sqlparser::ast::ObjectName) -> Result<String, SqlError> {
    let parts: Vec<String> = name
        .0
        .iter()
        .filter_map(|p| p.as_ident().map(ident_name))
        .collect();
    match parts.as_slice() {
        [t] => Ok(t.clone()),
        [s, t] if s == "public" => Ok(t.clone()),
        _ => Err(SqlError::undefined_table(&name.to_string())),
    }
}

pub(super) fn join_condition(b: &mut Builder, j: &sqlparser::ast::Join) -> Result<(), SqlError> {
    use sqlparser::ast::{JoinConstraint, JoinOperator};
    let c = match &j.join_operator {
        JoinOperator::Join(c) | JoinOperator::Inner(c) => c,
        JoinOperator::CrossJoin(_) => return Ok(()),
        other => {
            return Err(SqlError::unsupported(format!(
                "{} (inner, left and right joins are)",
                match other {
                    JoinOperator::FullOuter(_) => "FULL JOIN",
                    _ => "this join",
                }
            )))
        }
    };
    match c {
        JoinConstraint::On(e) => b.condition(e),
        JoinConstraint::None => Ok(()),
        other => Err(SqlError::unsupported(format!(
            "the join constraint {other:?}"
        ))),
    }
}

/// A clause per table whose rows no pattern finds yet: its row attribute (`outer`: the
/// tables of LEFT JOINs, whose rows their join's clause finds).
fn row_clauses(b: &mut Builder, outer: &[usize]) {
    for (i, s) in b.scopes.clone().iter().enumerate() {
        if outer.contains(&i)
            || b.clauses
                .iter()
                .any(|c| c.starts_with(&format!("[{} :", s.var)))
        {
            continue;
        }
        b.clauses.push(row_clause(s));
    }
}

/// Add scope `si`'s row clause unless a pattern of its entity's finds its rows already.
pub(super) fn find_rows(b: &mut Builder, si: usize) {
    let var = b.scopes[si].var.clone();
    if !b
        .clauses
        .iter()
        .any(|c| c.starts_with(&format!("[{var} :")))
    {
        let clause = row_clause(&b.scopes[si]);
        b.clauses.push(clause);
    }
}

/// The clause that finds a table's rows.
pub(super) fn row_clause(s: &Scope) -> String {
    match &s.table.rows {
        Rows::Attr(a) => format!("[{} {a}]", s.var),
        Rows::AnyOf(attrs) => {
            let alts: Vec<String> = attrs.iter().map(|a| format!("[{} {a}]", s.var)).collect();
            format!("(or-join [{}] {})", s.var, alts.join(" "))
        }
    }
}

/// `42P01` when join `j`'s ON condition names (`alias.column`) a table of `all` that is not
/// among `visible`.
fn on_references(
    j: &sqlparser::ast::Join,
    visible: &[Scope],
    all: &[Scope],
) -> Result<(), SqlError> {
    use sqlparser::ast::{JoinConstraint, JoinOperator, Visit, Visitor};
    use std::ops::ControlFlow;
    let (JoinOperator::Join(JoinConstraint::On(on))
    | JoinOperator::Inner(JoinConstraint::On(on))
    | JoinOperator::Left(JoinConstraint::On(on))
    | JoinOperator::LeftOuter(JoinConstraint::On(on))) = &j.join_operator
    else {
        return Ok(());
    };
    struct Names<'a>(&'a [Scope], &'a [Scope]);
    impl Visitor for Names<'_> {
        type Break = String;
        fn pre_visit_expr(&mut self, e: &Expr) -> ControlFlow<String> {
            if let Expr::CompoundIdentifier(p) = e {
                if p.len() == 2 {
                    let alias = ident_name(&p[0]);
                    if !self.0.iter().any(|s| s.alias == alias)
                        && self.1.iter().any(|s| s.alias == alias)
                    {
                        return ControlFlow::Break(alias);
                    }
                }
            }
            ControlFlow::Continue(())
        }
    }
    match on.visit(&mut Names(visible, all)) {
        ControlFlow::Break(alias) => Err(SqlError::new(
            "42P01",
            format!("invalid reference to FROM-clause entry for table \"{alias}\""),
        )),
        ControlFlow::Continue(()) => Ok(()),
    }
}

/// Which table of an outer join keeps its rows.
enum Side {
    Left,
    Right,
    /// Both (`FULL JOIN`).
    Full,
}

/// An outer join's kept side and ON condition; `None` for an inner join.
fn outer_join_on(j: &sqlparser::ast::Join) -> Result<Option<(Side, &Expr)>, SqlError> {
    use sqlparser::ast::{JoinConstraint, JoinOperator};
    let (side, c) = match &j.join_operator {
        JoinOperator::Left(c) | JoinOperator::LeftOuter(c) => (Side::Left, c),
        JoinOperator::Right(c) | JoinOperator::RightOuter(c) => (Side::Right, c),
        JoinOperator::FullOuter(c) => (Side::Full, c),
        _ => return Ok(None),
    };
    match c {
        JoinConstraint::On(e) => Ok(Some((side, e))),
        other => Err(SqlError::unsupported(format!(
            "the outer join constraint {other:?}"
        ))),
    }
}

/// `LEFT JOIN` of scope `r` ON `on` (`before`: the tables whose rows it keeps, found
/// first): every row of the tables before it with each row of `r`
/// that satisfies `on`, or with NULLs for `r` when none does. One clause:
/// `(or-join [[<bound>] ?tr] (and <r's rows> <on>) (and (not-join [<bound>] <r's rows> <on>)
/// [(ground :vev.sql/null) ?tr]))`, where `<bound>` are the variables bound outside that the
/// condition reads (the earlier tables' rows, their columns, parameters). A NULL row entity
/// makes every column of `r` NULL (`get-else` finds no entity for the keyword).
fn left_join(b: &mut Builder, r: usize, before: &[usize], on: &Expr) -> Result<(), SqlError> {
    // The kept tables' rows are found before the join reads them.
    for &k in before {
        find_rows(b, k);
    }
    let right = b.scopes[r].clone();
    let inner = b.nested(|b| {
        b.clauses.push(row_clause(&right));
        b.condition(on)
    })?;
    let bound: Vec<String> = bound_outside(b, &inner)
        .into_iter()
        .filter(|v| *v != right.var)
        .collect();
    if bound.is_empty() {
        return Err(SqlError::unsupported(
            "a LEFT JOIN whose ON condition reads no earlier table",
        ));
    }
    let bound = bound.join(" ");
    b.clauses.push(format!(
        "(or-join [[{bound}] {tr}] (and {inner}) (and (not-join [{bound}] {inner}) [(ground :{null}) {tr}]))",
        tr = right.var,
        null = crate::sqlfns::NULL_KEYWORD,
    ));
    b.outer.insert(r);
    Ok(())
}

/// `FULL JOIN` of scopes `l` and `r` ON `on`: each pair of their rows that satisfies `on`,
/// each row of either that pairs with none, with NULLs for the other. One clause:
/// `(or-join [[<inputs>] ?tl ?tr] (and <l's rows> <r's rows> <on>) (and <l's rows>
/// (not-join [?tl <inputs>] <r's rows> <on>) [(ground :vev.sql/null) ?tr]) (and <r's rows>
/// (not-join [?tr <inputs>] <l's rows> <on>) [(ground :vev.sql/null) ?tl]))`, where
/// `<inputs>` are the parameters the condition reads (it reads no other table).
fn full_join(b: &mut Builder, l: usize, r: usize, on: &Expr) -> Result<(), SqlError> {
    let (left, right) = (b.scopes[l].clone(), b.scopes[r].clone());
    let cond = b.nested(|b| b.condition(on))?;
    let inputs: Vec<String> = bound_outside(b, &cond)
        .into_iter()
        .filter(|v| *v != left.var && *v != right.var)
        .collect();
    let required = if inputs.is_empty() {
        String::new()
    } else {
        format!("[{}] ", inputs.join(" "))
    };
    let (rl, rr) = (row_clause(&left), row_clause(&right));
    let (tl, tr) = (&left.var, &right.var);
    let with = |v: &str| {
        std::iter::once(v.to_owned())
            .chain(inputs.iter().cloned())
            .collect::<Vec<_>>()
            .join(" ")
    };
    b.clauses.push(format!(
        "(or-join [{required}{tl} {tr}] (and {rl} {rr} {cond}) \
         (and {rl} (not-join [{wl}] {rr} {cond}) [(ground :{null}) {tr}]) \
         (and {rr} (not-join [{wr}] {rl} {cond}) [(ground :{null}) {tl}]))",
        wl = with(tl),
        wr = with(tr),
        null = crate::sqlfns::NULL_KEYWORD,
    ));
    b.outer.insert(l);
    b.outer.insert(r);
    Ok(())
}

/// The variables of `inner` (clauses taken out of `b` into a nested clause) that are bound
/// outside it: in `b`'s other clauses, or inputs (parameters, the statement time).
pub(super) fn bound_outside(b: &Builder, inner: &str) -> Vec<String> {
    let outside = variables(&b.clauses.join(" "));
    variables(inner)
        .into_iter()
        .filter(|v| {
            outside.contains(v)
                || v == "?now"
                || v.strip_prefix("?p")
                    .is_some_and(|n| n.parse::<usize>().is_ok())
        })
        .collect()
}

/// The variables (`?name`) of Datalog text, outside its string literals.
pub(super) fn variables(text: &str) -> std::collections::BTreeSet<String> {
    let mut out = std::collections::BTreeSet::new();
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => {
                // Skip the string, with its escapes.
                while let Some((_, c)) = chars.next() {
                    match c {
                        '\\' => {
                            chars.next();
                        }
                        '"' => break,
                        _ => {}
                    }
                }
            }
            '?' => {
                let mut end = i + 1;
                while let Some(&(j, c)) = chars.peek() {
                    if c.is_alphanumeric() || matches!(c, '_' | '-' | '*' | '.') {
                        end = j + c.len_utf8();
                        chars.next();
                    } else {
                        break;
                    }
                }
                if end > i + 1 {
                    out.insert(text[i..end].to_owned());
                }
            }
            _ => {}
        }
    }
    out
}

fn select_list(
    b: &mut Builder,
    sel: &Select,
    finds: &mut Vec<Find>,
    columns: &mut Vec<OutCol>,
    post: &mut Post,
) -> Result<(), SqlError> {
    for item in &sel.projection {
        match item {
            SelectItem::Wildcard(_) => {
                for (si, ci) in b.star.clone() {
                    output_column(b, si, ci, finds, columns, post);
                }
            }
            SelectItem::QualifiedWildcard(SelectItemQualifiedWildcardKind::ObjectName(n), _) => {
                let alias = table_name(n)?;
                let si = b
                    .scopes
                    .iter()
                    .position(|s| s.alias == alias)
                    .ok_or_else(|| SqlError::undefined_table(&alias))?;
                all_columns(b, si, finds, columns, post);
            }
            SelectItem::UnnamedExpr(e) => {
                let name = output_name(e);
                item_expr(b, e, name, finds, columns, post)?;
            }
            SelectItem::ExprWithAlias { expr, alias } => {
                item_expr(b, expr, ident_name(alias), finds, columns, post)?;
            }
            other => return Err(SqlError::unsupported(format!("the select item {other}"))),
        }
    }
    Ok(())
}

fn all_columns(
    b: &mut Builder,
    si: usize,
    finds: &mut Vec<Find>,
    columns: &mut Vec<OutCol>,
    post: &mut Post,
) {
    for (si, ci) in every_column(b, si) {
        output_column(b, si, ci, finds, columns, post);
    }
}

/// Scope `si`'s columns, in order.
fn every_column(b: &Builder, si: usize) -> Vec<(usize, usize)> {
    (0..b.scopes[si].table.columns.len())
        .map(|ci| (si, ci))
        .collect()
}

/// Column `ci` of scope `si` as an output column.
fn output_column(
    b: &mut Builder,
    si: usize,
    ci: usize,
    finds: &mut Vec<Find>,
    columns: &mut Vec<OutCol>,
    post: &mut Post,
) {
    let c = b.scopes[si].table.columns[ci].clone();
    let t = b.column(si, ci, false);
    post.select.push(finds.len());
    finds.push(Find {
        text: t.text,
        agg: None,
    });
    columns.push(OutCol {
        name: c.name.clone(),
        ty: c.ty,
    });
}

/// PostgreSQL's name for an unaliased select item.
pub(super) fn output_name(e: &Expr) -> String {
    match e {
        Expr::Identifier(i) => ident_name(i),
        Expr::CompoundIdentifier(p) => p.last().map(ident_name).unwrap_or_default(),
        Expr::Function(f) => f
            .name
            .0
            .last()
            .and_then(|p| p.as_ident())
            .map(ident_name)
            .unwrap_or_default(),
        Expr::Cast { expr, .. } | Expr::Nested(expr) => output_name(expr),
        _ => "?column?".into(),
    }
}

fn item_expr(
    b: &mut Builder,
    e: &Expr,
    name: String,
    finds: &mut Vec<Find>,
    columns: &mut Vec<OutCol>,
    post: &mut Post,
) -> Result<(), SqlError> {
    let (text, ty, agg) = match aggregate(b, e)? {
        Some(found) => found,
        None if super::computed::has_aggregate(e) => {
            let c = super::computed::compile(b, e, finds, true)?;
            post.select.push(COMPUTED + post.computed.len());
            columns.push(OutCol {
                name,
                ty: c.ty.unwrap_or(SqlType::Text),
            });
            post.computed.push(c);
            return Ok(());
        }
        None => {
            let t = b.expr(e, None)?;
            let t = b.as_var(t);
            (t.text, t.ty.unwrap_or(SqlType::Text), None)
        }
    };
    post.select.push(finds.len());
    finds.push(Find { text, agg });
    columns.push(OutCol { name, ty });
    Ok(())
}

/// `count(*)`, `count(x)`, `sum`, `avg`, `min`, `max` as a find element.
pub(crate) fn aggregate(
    b: &mut Builder,
    e: &Expr,
) -> Result<Option<(String, SqlType, Option<Agg>)>, SqlError> {
    let Expr::Function(f) = e else {
        return Ok(None);
    };
    let name = f.name.to_string().to_ascii_lowercase();
    if !matches!(name.as_str(), "count" | "sum" | "avg" | "min" | "max") {
        return Ok(None);
    }
    // `count(DISTINCT x)` and the like: over distinct values (`min`, `max` are the same).
    let mut distinct = false;
    if let sqlparser::ast::FunctionArguments::List(l) = &f.args {
        if matches!(
            l.duplicate_treatment,
            Some(sqlparser::ast::DuplicateTreatment::Distinct)
        ) {
            distinct = true;
        }
        if l.args.len() == 1 {
            if let sqlparser::ast::FunctionArg::Unnamed(sqlparser::ast::FunctionArgExpr::Wildcard) =
                &l.args[0]
            {
                if distinct {
                    return Err(SqlError::syntax(format!("{name}(DISTINCT *)")));
                }
                let var = b.scopes.first().map(|s| s.var.clone()).unwrap_or_default();
                return Ok(Some((
                    format!("(count {var})"),
                    SqlType::Int8,
                    Some(Agg::Count),
                )));
            }
        }
    }
    let args = function_args(f)?;
    let [x] = args.as_slice() else {
        return Err(SqlError::new(
            "42883",
            format!("function {name} takes one argument"),
        ));
    };
    let t: Term = b.expr(x, None)?;
    let t = b.as_var(t);
    let arg_ty = t.ty.unwrap_or(SqlType::Text);
    let (ty, agg) = match name.as_str() {
        "count" => (SqlType::Int8, Agg::Count),
        "sum" if arg_ty.is_integer() => (SqlType::Int8, Agg::Other),
        "sum" => (arg_ty, Agg::Other),
        "avg" => (SqlType::Float8, Agg::Other),
        _ => (arg_ty, Agg::Other),
    };
    let suffix = if distinct && matches!(name.as_str(), "count" | "sum" | "avg") {
        "-distinct"
    } else {
        ""
    };
    Ok(Some((
        format!("(vev.sql/{name}{suffix} {})", t.text),
        ty,
        Some(agg),
    )))
}

/// GROUP BY expressions the select list does not show become hidden find elements (so
/// that the groups are theirs).
fn group_by(
    b: &mut Builder,
    sel: &Select,
    finds: &mut Vec<Find>,
    has_agg: bool,
) -> Result<Vec<String>, SqlError> {
    let GroupByExpr::Expressions(exprs, _) = &sel.group_by else {
        return Err(SqlError::unsupported("GROUP BY ALL"));
    };
    if exprs.is_empty() {
        if has_agg && finds.iter().any(|f| f.agg.is_none()) {
            return Err(SqlError::new(
                "42803",
                "a column must appear in the GROUP BY clause or be used in an aggregate function",
            ));
        }
        return Ok(Vec::new());
    }
    let selected = finds.len();
    let mut keys = Vec::new();
    for e in exprs {
        let t = b.expr(e, None)?;
        let t = b.as_var(t);
        if !finds.iter().any(|f| f.text == t.text) {
            finds.push(Find {
                text: t.text.clone(),
                agg: None,
            });
        }
        keys.push(t.text);
    }
    // A selected column that is not grouped would split the groups (each find element is
    // a grouping key to Datalog).
    for f in finds[..selected].iter().filter(|f| f.agg.is_none()) {
        grouped(b, &f.text, &keys)?;
    }
    Ok(keys)
}

/// Whether the find element `text` may be read in a query grouped by `keys`: it is one of
/// them, or not a plain column (an expression, left to the query), or a column whose
/// table's primary key (or row entity) is grouped, which determines it; else PostgreSQL's
/// `42803`.
fn grouped(b: &Builder, text: &str, keys: &[String]) -> Result<(), SqlError> {
    if keys.iter().any(|k| k == text) {
        return Ok(());
    }
    let Some((si, ci)) = b.column_of_var(text) else {
        return Ok(());
    };
    let scope = &b.scopes[si];
    let pk = &scope.table.primary_key;
    let keyed = keys.contains(&scope.var)
        || (!pk.is_empty()
            && pk.iter().all(|&k| {
                b.column_var(si, k)
                    .is_some_and(|v| keys.iter().any(|x| x == v))
            }));
    if keyed {
        return Ok(());
    }
    let name = &scope.table.columns[ci].name;
    Err(SqlError::new(
        "42803",
        format!(
            "column \"{}.{name}\" must appear in the GROUP BY clause or be used in an \
             aggregate function",
            scope.alias
        ),
    ))
}

fn order_by(
    b: &mut Builder,
    ob: &sqlparser::ast::OrderBy,
    sel: &Select,
    columns: &[OutCol],
    keys: &[String],
    finds: &mut Vec<Find>,
    post: &mut Post,
) -> Result<(), SqlError> {
    let OrderByKind::Expressions(exprs) = &ob.kind else {
        return Err(SqlError::unsupported("ORDER BY ALL"));
    };
    for o in exprs {
        let (position, desc, nulls_first) = order_item(o, columns.len())?;
        let at = match (position, &o.expr) {
            (Some(k), _) => post.select[k],
            (None, e) => {
                match output_position(e, sel, columns) {
                    Some(k) => post.select[k],
                    // Over a grouped or aggregate query's groups (in any other the
                    // aggregate is refused below, as one alone is).
                    None if super::computed::has_aggregate(e)
                        && (finds.iter().any(|f| f.agg.is_some()) || !keys.is_empty()) =>
                    {
                        let c = super::computed::compile(b, e, finds, false)?;
                        post.computed.push(c);
                        COMPUTED + post.computed.len() - 1
                    }
                    None => {
                        let aggregated = finds.iter().any(|f| f.agg.is_some());
                        match find_element(b, e, finds, !aggregated)? {
                            // A column of a grouped query must be grouped (or determined).
                            Some(i) if !keys.is_empty() => {
                                grouped(b, &finds[i].text, keys)?;
                                i
                            }
                            Some(i) => i,
                            None => return Err(SqlError::unsupported("ORDER BY an expression not in the select list of an aggregate query")),
                        }
                    }
                }
            }
        };
        post.order.push((at, desc, nulls_first));
    }
    Ok(())
}

/// The find element that computes `e`: one already there, or (`add`) a new one; `None`
/// when it is not there and may not be added.
fn find_element(
    b: &mut Builder,
    e: &Expr,
    finds: &mut Vec<Find>,
    add: bool,
) -> Result<Option<usize>, SqlError> {
    let t = b.expr(e, None)?;
    let t = b.as_var(t);
    if let Some(i) = finds.iter().position(|f| f.text == t.text) {
        return Ok(Some(i));
    }
    if !add {
        return Ok(None);
    }
    finds.push(Find {
        text: t.text,
        agg: None,
    });
    Ok(Some(finds.len() - 1))
}

/// `DISTINCT ON (keys)`: each key's find element (an output column, or one added), checked
/// against ORDER BY as PostgreSQL checks it: once an ORDER BY item that is not a key has
/// come, no key may follow or be left out (`42P10`).
fn distinct_on(
    b: &mut Builder,
    keys: &[Expr],
    sel: &Select,
    columns: &[OutCol],
    finds: &mut Vec<Find>,
    post: &Post,
) -> Result<Vec<usize>, SqlError> {
    let mut at = Vec::new();
    for e in keys {
        let k = match output_position(e, sel, columns) {
            Some(k) => post.select[k],
            None => find_element(b, e, finds, true)?.unwrap_or_default(),
        };
        at.push(k);
    }
    if !post.order.is_empty() {
        let mismatch = || {
            SqlError::new(
                "42P10",
                "SELECT DISTINCT ON expressions must match initial ORDER BY expressions",
            )
        };
        let mut skipped = false;
        let mut matched = 0;
        for (k, _, _) in &post.order {
            if at.contains(k) {
                if skipped {
                    return Err(mismatch());
                }
                matched += 1;
            } else {
                skipped = true;
            }
        }
        let distinct_keys: std::collections::BTreeSet<&usize> = at.iter().collect();
        if skipped && matched < distinct_keys.len() {
            return Err(mismatch());
        }
    }
    Ok(at)
}

/// One ORDER BY item: the output position it names when it is a number (`42P10` when
/// there is no such column), whether it is descending, and whether NULLs come first (by
/// default last ascending, first descending, as in PostgreSQL).
pub(super) fn order_item(
    o: &sqlparser::ast::OrderByExpr,
    width: usize,
) -> Result<(Option<usize>, bool, bool), SqlError> {
    let desc = matches!(o.options.sort, Some(sqlparser::ast::OrderBySort::Desc));
    let nulls_first = o.options.nulls_first.unwrap_or(desc);
    let position = match &o.expr {
        Expr::Value(v) => match &v.value {
            SqlValue::Number(n, _) => {
                let k: usize = n.parse().unwrap_or(0);
                if k == 0 || k > width {
                    return Err(SqlError::new(
                        "42P10",
                        format!("ORDER BY position {n} is not in select list"),
                    ));
                }
                Some(k - 1)
            }
            _ => None,
        },
        _ => None,
    };
    Ok((position, desc, nulls_first))
}

/// The select item an ORDER BY expression names (by alias, or the same expression).
fn output_position(e: &Expr, sel: &Select, columns: &[OutCol]) -> Option<usize> {
    if let Expr::Identifier(i) = e {
        let name = ident_name(i);
        if let Some(k) = sel.projection.iter().position(|item| {
            matches!(item, SelectItem::ExprWithAlias { alias, .. } if ident_name(alias) == name)
        }) {
            return Some(k);
        }
    }
    sel.projection
        .iter()
        .position(|item| match item {
            SelectItem::UnnamedExpr(x) | SelectItem::ExprWithAlias { expr: x, .. } => x == e,
            _ => false,
        })
        .filter(|k| *k < columns.len())
}

fn limit(l: &Option<LimitClause>, post: &mut Post, b: &mut Builder) -> Result<(), SqlError> {
    let (limit, offset) = limit_clause(l)?;
    for c in [&limit, &offset] {
        if let Some(Count::Param(n)) = c {
            b.param(*n, Some(SqlType::Int8));
            b.used_params.remove(n);
        }
    }
    post.limit = limit;
    post.offset = offset;
    Ok(())
}

/// LIMIT and OFFSET (`None`: none, or `NULL`); a parameter there is a `bigint`.
pub(super) fn limit_clause(
    l: &Option<LimitClause>,
) -> Result<(Option<Count>, Option<Count>), SqlError> {
    let Some(l) = l else { return Ok((None, None)) };
    let LimitClause::LimitOffset {
        limit,
        offset,
        limit_by,
    } = l
    else {
        return Err(SqlError::unsupported("LIMIT offset, count"));
    };
    if !limit_by.is_empty() {
        return Err(SqlError::unsupported("LIMIT BY"));
    }
    let count = |e: &Expr| -> Result<Option<Count>, SqlError> {
        match e {
            Expr::Value(v) => match &v.value {
                SqlValue::Number(n, _) => n.parse().map(|n| Some(Count::Const(n))).map_err(|_| {
                    SqlError::new("2201W", format!("LIMIT must not be negative: {n}"))
                }),
                SqlValue::Null => Ok(None),
                SqlValue::Placeholder(p) => Ok(Some(Count::Param(placeholder(p)?))),
                other => Err(SqlError::syntax(format!("invalid LIMIT {other}"))),
            },
            other => Err(SqlError::unsupported(format!("LIMIT {other}"))),
        }
    };
    let limit = match limit {
        Some(e) => count(e)?,
        None => None,
    };
    let offset = match offset {
        Some(o) => count(&o.value)?,
        None => None,
    };
    Ok((limit, offset))
}
