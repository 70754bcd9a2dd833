//! Scalar subqueries (`(SELECT max(x) FROM t)` where a value goes) that read nothing of the
//! statement around them, as PostgreSQL's init plans: each runs once before the statement,
//! and its value is the statement's parameter.
//!
//! Planning rewrites every scalar subquery, innermost first, into a parameter numbered
//! after the statement's own (`$n::type`, its column's type), plans it as a query of its own
//! (which sees the parameters before it, so a subquery inside another is one), and plans the
//! rewritten statement as any other. Running, the session runs the subqueries in order,
//! each with the parameters so far: no row is NULL, one row its value, more is `21000`. The
//! client sees only the statement's own parameters. A subquery that reads the outer
//! statement's tables does not plan on its own and is refused (`0A000`, with what planning
//! it alone said).

use std::ops::ControlFlow;

use sqlparser::ast::{
    CastKind, Expr, Ident, Query, SelectItem, SetExpr, Statement, TableFactor, Value as SqlValue,
    ValueWithSpan, Visit, VisitMut, Visitor, VisitorMut,
};
use sqlparser::dialect::PostgreSqlDialect;
use sqlparser::parser::Parser;

use super::expr::placeholder;
use super::Plan;
use crate::catalog::Catalog;
use crate::error::SqlError;
use crate::types::SqlType;

/// A statement with scalar subqueries.
#[derive(Clone, Debug)]
pub struct ScalarPlan {
    /// The statement's own parameters (the client binds these).
    pub own: usize,
    /// Each subquery's plan and type, in order: the value of parameter `own + 1 + k`.
    pub scalars: Vec<(Plan, SqlType)>,
    /// The statement, with the subqueries as parameters.
    pub body: Plan,
}

impl ScalarPlan {
    /// The types of the statement's own parameters.
    pub fn params(&self) -> Vec<Option<SqlType>> {
        let mut p = self.body.params();
        for (plan, _) in &self.scalars {
            // A parameter that only a subquery uses is typed there.
            for (i, ty) in plan.params().into_iter().enumerate().take(self.own) {
                if p.len() <= i {
                    p.resize(i + 1, None);
                }
                if p[i].is_none() {
                    p[i] = ty;
                }
            }
        }
        p.resize(self.own, None);
        p
    }

    pub fn explain(&self) -> String {
        let mut lines: Vec<String> = self
            .scalars
            .iter()
            .enumerate()
            .map(|(k, (p, _))| format!("${} := {}", self.own + 1 + k, super::explain_plan(p)))
            .collect();
        lines.push(super::explain_plan(&self.body));
        lines.join("\n")
    }
}

/// The highest parameter number in `stmt`.
fn own_params(stmt: &Statement) -> Result<usize, SqlError> {
    struct Max(Result<usize, SqlError>);
    impl Visitor for Max {
        type Break = ();
        fn pre_visit_expr(&mut self, e: &Expr) -> ControlFlow<()> {
            if let (Expr::Value(v), Ok(max)) = (e, &mut self.0) {
                if let SqlValue::Placeholder(p) = &v.value {
                    match placeholder(p) {
                        Ok(n) => *max = (*max).max(n),
                        Err(e) => self.0 = Err(e),
                    }
                }
            }
            ControlFlow::Continue(())
        }
    }
    let mut m = Max(Ok(0));
    let _ = stmt.visit(&mut m);
    m.0
}

/// Replaces scalar subqueries, innermost first, by parameters planned as it goes.
struct Rewrite<'a> {
    catalog: &'a Catalog,
    outer: Outer,
    own: usize,
    scalars: Vec<(Plan, SqlType)>,
    /// Each subquery's column name.
    names: Vec<String>,
    error: Option<SqlError>,
}

impl Rewrite<'_> {
    /// Which subquery `e` (a parameter, perhaps under its cast) stands for.
    fn scalar_of(&self, e: &Expr) -> Option<usize> {
        let e = match e {
            Expr::Cast { expr, .. } => expr,
            e => e,
        };
        let Expr::Value(v) = e else { return None };
        let SqlValue::Placeholder(p) = &v.value else {
            return None;
        };
        let n = placeholder(p).ok()?;
        (n > self.own && n <= self.own + self.scalars.len()).then(|| n - self.own - 1)
    }
}

impl VisitorMut for Rewrite<'_> {
    type Break = ();

    /// A select item that is a scalar subquery is named after the subquery's column, as
    /// PostgreSQL names it (its parameter would be named after its type).
    fn post_visit_query(&mut self, q: &mut Query) -> ControlFlow<()> {
        fn name_items(body: &mut SetExpr, r: &Rewrite<'_>) {
            match body {
                SetExpr::Select(sel) => {
                    for item in &mut sel.projection {
                        let SelectItem::UnnamedExpr(e) = item else {
                            continue;
                        };
                        let Some(k) = r.scalar_of(e) else { continue };
                        *item = SelectItem::ExprWithAlias {
                            expr: e.clone(),
                            alias: Ident::with_quote('"', r.names[k].clone()),
                        };
                    }
                }
                SetExpr::SetOperation { left, right, .. } => {
                    name_items(left, r);
                    name_items(right, r);
                }
                SetExpr::Query(q) => name_items(&mut q.body, r),
                _ => {}
            }
        }
        name_items(&mut q.body, self);
        ControlFlow::Continue(())
    }

    fn post_visit_expr(&mut self, e: &mut Expr) -> ControlFlow<()> {
        let Expr::Subquery(q) = e else {
            return ControlFlow::Continue(());
        };
        let planned = super::query(q, self.catalog).map_err(|err| {
            if self.outer.names(&err) {
                SqlError::unsupported(format!(
                    "a scalar subquery that reads the query around it ({q}; the subquery \
                     alone: {})",
                    err.message
                ))
            } else {
                err
            }
        });
        let plan = match planned {
            Ok(p) => p,
            Err(err) => {
                self.error = Some(err);
                return ControlFlow::Break(());
            }
        };
        let columns = super::result_columns(&plan).unwrap_or_default();
        let [column] = columns.as_slice() else {
            self.error = Some(SqlError::syntax("subquery must return only one column"));
            return ControlFlow::Break(());
        };
        let n = self.own + 1 + self.scalars.len();
        let param = Expr::Value(ValueWithSpan::from(SqlValue::Placeholder(format!("${n}"))));
        *e = match cast_type(column.ty) {
            Some(data_type) => Expr::Cast {
                kind: CastKind::DoubleColon,
                expr: Box::new(param),
                data_type,
                format: None,
            },
            None => param,
        };
        self.names.push(column.name.clone());
        self.scalars.push((plan, column.ty));
        ControlFlow::Continue(())
    }
}

/// The tables of a statement (by alias and name) and their columns: a subquery that fails
/// to plan alone for want of one of these names reads the statement around it.
struct Outer {
    tables: Vec<String>,
    columns: Vec<String>,
}

impl Outer {
    fn of(stmt: &Statement, catalog: &Catalog) -> Outer {
        struct Tables<'a>(&'a Catalog, Outer);
        impl Visitor for Tables<'_> {
            type Break = ();
            fn pre_visit_query(&mut self, q: &Query) -> ControlFlow<()> {
                // A CTE is a table of the statement too.
                for cte in q.with.iter().flat_map(|w| &w.cte_tables) {
                    self.1.tables.push(super::expr::ident_name(&cte.alias.name));
                }
                ControlFlow::Continue(())
            }

            fn pre_visit_table_factor(&mut self, t: &TableFactor) -> ControlFlow<()> {
                if let TableFactor::Derived { alias: Some(a), .. } = t {
                    self.1.tables.push(super::expr::ident_name(&a.name));
                }
                if let TableFactor::Table { name, alias, .. } = t {
                    let found = super::select::table_name(name)
                        .ok()
                        .and_then(|n| self.0.table(&n).ok());
                    if let Some(table) = found {
                        if let Some(a) = alias {
                            self.1.tables.push(super::expr::ident_name(&a.name));
                        }
                        self.1.tables.push(table.name.clone());
                        self.1
                            .columns
                            .extend(table.columns.iter().map(|c| c.name.clone()));
                    }
                }
                ControlFlow::Continue(())
            }
        }
        let mut v = Tables(
            catalog,
            Outer {
                tables: Vec::new(),
                columns: Vec::new(),
            },
        );
        let _ = stmt.visit(&mut v);
        v.1
    }

    /// Whether `err` (of planning a subquery alone) is a table or column the statement has.
    fn names(&self, err: &SqlError) -> bool {
        let quoted = err.message.split('"').nth(1).unwrap_or_default();
        match err.code {
            "42P01" => self.tables.iter().any(|t| t == quoted),
            "42703" => {
                let mut parts = quoted.rsplitn(2, '.');
                let column = parts.next().unwrap_or_default();
                let qualified_by_outer = parts
                    .next()
                    .is_some_and(|t| self.tables.iter().any(|x| x == t));
                qualified_by_outer || self.columns.iter().any(|c| c == column)
            }
            _ => false,
        }
    }
}

/// The SQL type `ty` as a cast names it (`None` for Vev's keyword type, which SQL cannot
/// name: its parameter is typed by where it is used).
fn cast_type(ty: SqlType) -> Option<sqlparser::ast::DataType> {
    if ty == SqlType::Keyword {
        return None;
    }
    Parser::new(&PostgreSqlDialect {})
        .try_with_sql(&ty.name())
        .ok()?
        .parse_data_type()
        .ok()
}

/// The plan of `stmt` when it has scalar subqueries (`None` when it has none).
pub fn compile(stmt: &Statement, catalog: &Catalog) -> Result<Option<ScalarPlan>, SqlError> {
    struct Any(bool, bool);
    impl Visitor for Any {
        type Break = ();
        fn pre_visit_expr(&mut self, e: &Expr) -> ControlFlow<()> {
            match e {
                Expr::AnyOp { right, .. } | Expr::AllOp { right, .. }
                    if matches!(**right, Expr::Subquery(_)) =>
                {
                    self.1 = true;
                    ControlFlow::Break(())
                }
                Expr::Subquery(_) => {
                    self.0 = true;
                    ControlFlow::Continue(())
                }
                _ => ControlFlow::Continue(()),
            }
        }
    }
    let mut any = Any(false, false);
    let _ = stmt.visit(&mut any);
    if any.1 {
        return Err(SqlError::unsupported("ANY or ALL over a subquery"));
    }
    if !any.0 {
        return Ok(None);
    }
    let own = own_params(stmt)?;
    let mut body = stmt.clone();
    let mut rewrite = Rewrite {
        catalog,
        outer: Outer::of(stmt, catalog),
        own,
        scalars: Vec::new(),
        names: Vec::new(),
        error: None,
    };
    let _ = VisitMut::visit(&mut body, &mut rewrite);
    if let Some(e) = rewrite.error {
        return Err(e);
    }
    let body = super::plan(&body, catalog)?;
    Ok(Some(ScalarPlan {
        own,
        scalars: rewrite.scalars,
        body,
    }))
}
