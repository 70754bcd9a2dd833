//! SQL expressions as Datalog clauses.
//!
//! A `Builder` collects the `:where` clauses of one statement over the tables in its FROM
//! list. Each table is an entity variable; each column it reads is bound once, either by a
//! data pattern `[?t :table/col ?v]` (when the statement cannot keep a row whose column is
//! NULL: a NOT NULL column, or a comparison in the WHERE's top-level AND) or by
//! `get-else` with the NULL keyword (so the row survives with a NULL). Expressions become
//! calls of the `vev.sql/*` functions (`sqlfns`), each binding a fresh variable.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use sqlparser::ast::{
    BinaryOperator, CastKind, Expr, Function, FunctionArg, FunctionArgExpr, FunctionArguments,
    Ident, UnaryOperator, Value as SqlValue,
};
use vev::Edn;

use crate::catalog::{Column, Table};
use crate::error::SqlError;
use crate::types::SqlType;

/// A table of the FROM list.
#[derive(Clone, Debug)]
pub struct Scope {
    pub alias: String,
    pub table: Arc<Table>,
    /// Its entity variable, e.g. `?t0`.
    pub var: String,
}

/// A value in a clause: a variable or an EDN literal.
#[derive(Clone, Debug)]
pub struct Term {
    pub text: String,
    /// `None`: not known yet (a NULL literal, or a parameter nothing gives a type).
    pub ty: Option<SqlType>,
    /// Whether the term is a variable (a literal cannot be a find element).
    pub is_var: bool,
    /// The column it reads, for output names.
    pub name: Option<String>,
}

impl Term {
    fn var(text: String, ty: Option<SqlType>) -> Term {
        Term {
            text,
            ty,
            is_var: true,
            name: None,
        }
    }
}

#[derive(Clone, Debug)]
struct Binding {
    var: String,
    /// Bound by a data pattern (the column's value is never NULL in the rows).
    required: bool,
}

/// The clauses of one statement under construction.
pub struct Builder {
    pub scopes: Vec<Scope>,
    pub clauses: Vec<String>,
    columns: BTreeMap<(usize, usize), Binding>,
    /// `params[i]`: the type `$(i + 1)` takes, where the statement implies one.
    pub params: Vec<Option<SqlType>>,
    /// Parameters a NULL value of which makes the statement match no row (they are
    /// compared with `=`/`<`/... where NULL is never true).
    pub null_rejecting: BTreeSet<usize>,
    /// The parameters the clauses use (each an input `?p<n>`).
    pub used_params: BTreeSet<usize>,
    /// Whether the clauses read the statement time (`?now`).
    pub uses_now: bool,
    /// The scopes a LEFT JOIN brought in: outside the join their row may be the NULL row,
    /// so a NOT NULL column of theirs is read with `get-else` too.
    pub outer: BTreeSet<usize>,
    /// Where the scopes of each enclosing subquery start, innermost last: a column name
    /// resolves in the innermost scopes that have it (a subquery's own tables first).
    pub frames: Vec<usize>,
    /// A term bound outside a subquery that its condition compares with (`x IN (SELECT
    /// ...)`), named by the quoted identifier `OUTER_TERM`.
    pub outer_term: Option<Term>,
    next: usize,
    /// How many CASEs the expression being compiled is inside (their operands' errors are
    /// deferred).
    lazy: u32,
    /// Columns an unqualified name does not find: the right side's of a `JOIN ... USING`
    /// (scope, column name), merged into the left side's (`using.rs`).
    pub hidden: BTreeSet<(usize, String)>,
    /// What `SELECT *` shows, in order: every scope's columns, except as USING merges them.
    pub star: Vec<(usize, usize)>,
}

/// The identifier `Builder::outer_term` answers to (quoted: no column is named so by
/// accident, and `"` cannot start a name the client writes unquoted).
pub const OUTER_TERM: &str = "vev.sql outer term";

impl Builder {
    pub fn new(scopes: Vec<Scope>) -> Builder {
        Builder {
            scopes,
            clauses: Vec::new(),
            columns: BTreeMap::new(),
            params: Vec::new(),
            null_rejecting: BTreeSet::new(),
            used_params: BTreeSet::new(),
            uses_now: false,
            outer: BTreeSet::new(),
            frames: Vec::new(),
            outer_term: None,
            lazy: 0,
            hidden: BTreeSet::new(),
            star: Vec::new(),
            next: 0,
        }
    }

    /// Compile the body of a nested clause (an outer join's `or-join`, a subquery's): the
    /// clauses `f` adds are taken out and returned joined, and the column bindings it made
    /// are forgotten, since their variables are not bound outside the nested clause.
    pub fn nested(
        &mut self,
        f: impl FnOnce(&mut Builder) -> Result<(), SqlError>,
    ) -> Result<String, SqlError> {
        let start = self.clauses.len();
        let before: BTreeSet<(usize, usize)> = self.columns.keys().copied().collect();
        let result = f(self);
        let inner = self.clauses.split_off(start).join(" ");
        self.columns.retain(|k, _| before.contains(k));
        result.map(|()| inner)
    }

    pub fn fresh(&mut self, prefix: &str) -> String {
        self.next += 1;
        format!("?{prefix}{}", self.next)
    }

    /// The scope and column an identifier names.
    pub fn resolve(&self, parts: &[Ident]) -> Result<(usize, usize), SqlError> {
        let names: Vec<String> = parts.iter().map(ident_name).collect();
        let (alias, col) = match names.as_slice() {
            [col] => (None, col.as_str()),
            [.., alias, col] => (Some(alias.as_str()), col.as_str()),
            [] => return Err(SqlError::syntax("empty column name")),
        };
        // The scopes frame by frame, a subquery's own first.
        let mut bounds: Vec<usize> = vec![0];
        bounds.extend(self.frames.iter().copied());
        bounds.push(self.scopes.len());
        let mut found = None;
        for w in bounds.windows(2).rev() {
            for (si, s) in self.scopes.iter().enumerate().take(w[1]).skip(w[0]) {
                if alias.is_some_and(|a| a != s.alias)
                    || (alias.is_none() && self.hidden.contains(&(si, col.to_owned())))
                {
                    continue;
                }
                if let Some((ci, _)) = s.table.column(col) {
                    if found.is_some() {
                        return Err(SqlError::new(
                            "42702",
                            format!("column reference \"{col}\" is ambiguous"),
                        ));
                    }
                    found = Some((si, ci));
                }
            }
            if found.is_some() {
                break;
            }
        }
        found.ok_or_else(|| match alias {
            Some(a) if !self.scopes.iter().any(|s| s.alias == a) => SqlError::new(
                "42P01",
                format!("missing FROM-clause entry for table \"{a}\""),
            ),
            _ => SqlError::undefined_column(&names.join(".")),
        })
    }

    /// The column (scope, column) whose variable `var` is, if it is one.
    pub fn column_of_var(&self, var: &str) -> Option<(usize, usize)> {
        self.columns
            .iter()
            .find(|(_, b)| b.var == var)
            .map(|(k, _)| *k)
    }

    /// The variable already bound to a column's value, if any.
    pub fn column_var(&self, si: usize, ci: usize) -> Option<&str> {
        self.columns.get(&(si, ci)).map(|b| b.var.as_str())
    }

    pub fn column_def(&self, si: usize, ci: usize) -> &Column {
        &self.scopes[si].table.columns[ci]
    }

    /// The column's value in each row; `required`: rows where it is NULL are not wanted.
    pub fn column(&mut self, si: usize, ci: usize, required: bool) -> Term {
        let col = self.column_def(si, ci).clone();
        let e = self.scopes[si].var.clone();
        let term = |var: String| Term {
            text: var,
            ty: Some(col.ty),
            is_var: true,
            name: Some(col.name.clone()),
        };
        let Some(attr) = &col.attr else {
            return term(e);
        };
        if let Some(b) = self.columns.get(&(si, ci)).cloned() {
            if required && !b.required {
                self.clauses.push(format!("[{e} {attr} {}]", b.var));
                if let Some(b) = self.columns.get_mut(&(si, ci)) {
                    b.required = true;
                }
            }
            return term(b.var);
        }
        let var = self.fresh("c");
        self.bind_column(
            si,
            ci,
            var.clone(),
            required || (col.not_null && !self.outer.contains(&si)),
        );
        term(var)
    }

    /// Bind column `(si, ci)` to `var` (already bound or not).
    fn bind_column(&mut self, si: usize, ci: usize, var: String, required: bool) {
        let e = self.scopes[si].var.clone();
        let attr = self
            .column_def(si, ci)
            .attr
            .clone()
            .expect("an attribute column");
        if required {
            self.clauses.push(format!("[{e} {attr} {var}]"));
        } else if self.column_def(si, ci).many {
            // A row per value, or one row with NULL when there is none (get-else takes
            // cardinality-one attributes only).
            self.clauses.push(format!(
                "(or-join [{e} {var}] [{e} {attr} {var}] (and (not [{e} {attr}]) [(ground :{}) {var}]))",
                crate::sqlfns::NULL_KEYWORD
            ));
        } else {
            self.clauses.push(format!(
                "[(get-else $ {e} {attr} :{}) {var}]",
                crate::sqlfns::NULL_KEYWORD
            ));
        }
        self.columns.insert((si, ci), Binding { var, required });
    }

    /// `$n` as a term; `expected` is the type its context gives it.
    pub fn param(&mut self, n: usize, expected: Option<SqlType>) -> Term {
        if self.params.len() < n {
            self.params.resize(n, None);
        }
        if self.params[n - 1].is_none() {
            self.params[n - 1] = expected;
        }
        self.used_params.insert(n);
        Term::var(format!("?p{n}"), self.params[n - 1])
    }

    /// A literal as a term of the type its context expects.
    pub fn literal(&mut self, v: &SqlValue, expected: Option<SqlType>) -> Result<Term, SqlError> {
        let (edn, ty) = literal_edn(v, expected)?;
        Ok(Term {
            text: edn_text(&edn),
            ty,
            is_var: false,
            name: None,
        })
    }

    /// A term bound to a variable (literals go through `ground`).
    pub fn as_var(&mut self, t: Term) -> Term {
        if t.is_var {
            return t;
        }
        let var = self.fresh("k");
        self.clauses.push(format!("[(ground {}) {var}]", t.text));
        Term {
            text: var,
            is_var: true,
            ..t
        }
    }

    /// A call of a `vev.sql/*` function binding a fresh variable.
    fn call(&mut self, f: &str, args: &[&Term], ty: Option<SqlType>) -> Term {
        let var = self.fresh("x");
        let args: Vec<&str> = args.iter().map(|t| t.text.as_str()).collect();
        // Inside a CASE's operands, an error is deferred to the CASE (`sqlfns::deferred`).
        let lazy = if self.lazy > 0 { "-lazy" } else { "" };
        self.clauses
            .push(format!("[(vev.sql/{f}{lazy} {}) {var}]", args.join(" ")));
        Term::var(var, ty)
    }

    /// `CASE [operand] WHEN ... THEN ... [ELSE ...] END`: every condition and result is
    /// computed (with its errors deferred) and `vev.sql/case` picks the first result whose
    /// condition is true, raising the error of the branch taken if it had one. The result
    /// types must agree (integer widths widen; text types are text).
    fn case(
        &mut self,
        operand: Option<&Expr>,
        whens: &[sqlparser::ast::CaseWhen],
        otherwise: Option<&Expr>,
        expected: Option<SqlType>,
    ) -> Result<Term, SqlError> {
        self.lazy += 1;
        let picked = self.case_operands(operand, whens, otherwise, expected);
        self.lazy -= 1;
        let (terms, ty) = picked?;
        let refs: Vec<&Term> = terms.iter().collect();
        Ok(self.call("case", &refs, ty))
    }

    fn case_operands(
        &mut self,
        operand: Option<&Expr>,
        whens: &[sqlparser::ast::CaseWhen],
        otherwise: Option<&Expr>,
        expected: Option<SqlType>,
    ) -> Result<(Vec<Term>, Option<SqlType>), SqlError> {
        let mut terms = Vec::new();
        let mut ty = expected;
        let widen = |ty: Option<SqlType>, t: Option<SqlType>| match (ty, t) {
            (None, t) | (t, None) => Ok(t),
            (Some(a), Some(b)) if a == b => Ok(Some(a)),
            (Some(a), Some(b)) if a.is_integer() && b.is_integer() => Ok(Some(SqlType::Int8)),
            (Some(a), Some(b)) if a.is_text() && b.is_text() => Ok(Some(SqlType::Text)),
            (Some(a), Some(b)) => Err(SqlError::unsupported(format!(
                "CASE results of types {} and {}",
                a.name(),
                b.name()
            ))),
        };
        for w in whens {
            let cond = match operand {
                Some(x) => Expr::BinaryOp {
                    left: Box::new(x.clone()),
                    op: sqlparser::ast::BinaryOperator::Eq,
                    right: Box::new(w.condition.clone()),
                },
                None => w.condition.clone(),
            };
            terms.push(self.expr(&cond, Some(SqlType::Bool))?);
            let r = self.expr(&w.result, ty)?;
            ty = widen(ty, r.ty)?;
            terms.push(r);
        }
        let otherwise = match otherwise {
            Some(e) => self.expr(e, ty)?,
            None => self.literal(&SqlValue::Null, ty)?,
        };
        ty = widen(ty, otherwise.ty)?;
        terms.push(otherwise);
        Ok((terms, ty))
    }

    /// A value expression (SELECT list, SET, or a condition not handled as a pattern).
    pub fn expr(&mut self, e: &Expr, expected: Option<SqlType>) -> Result<Term, SqlError> {
        match e {
            Expr::Identifier(i) if i.quote_style.is_some() && i.value == OUTER_TERM => self
                .outer_term
                .clone()
                .ok_or_else(|| SqlError::undefined_column(OUTER_TERM)),
            Expr::Identifier(i) => {
                let (si, ci) = self.resolve(std::slice::from_ref(i))?;
                Ok(self.column(si, ci, false))
            }
            Expr::CompoundIdentifier(parts) => {
                let (si, ci) = self.resolve(parts)?;
                Ok(self.column(si, ci, false))
            }
            Expr::Value(v) => match &v.value {
                SqlValue::Placeholder(p) => Ok(self.param(placeholder(p)?, expected)),
                other => self.literal(other, expected),
            },
            Expr::Nested(inner) => self.expr(inner, expected),
            Expr::BinaryOp { left, op, right } => self.binary(left, op, right),
            Expr::UnaryOp { op, expr } => self.unary(op, expr, expected),
            Expr::IsNull(x) | Expr::IsNotNull(x) => {
                let t = self.expr(x, None)?;
                let test = self.call("null?", &[&t], Some(SqlType::Bool));
                Ok(if matches!(e, Expr::IsNotNull(_)) {
                    self.call("not", &[&test], Some(SqlType::Bool))
                } else {
                    test
                })
            }
            Expr::Cast {
                kind: CastKind::Cast | CastKind::DoubleColon,
                expr,
                data_type,
                ..
            } => self.cast(expr, data_type),
            Expr::Like { .. } | Expr::ILike { .. } | Expr::In { .. } | Expr::Between { .. } => {
                self.predicate_expr(e)
            }
            Expr::IsDistinctFrom(l, r) | Expr::IsNotDistinctFrom(l, r) => {
                let a = self.expr(l, None)?;
                let b = self.expr(r, a.ty)?;
                let test = self.call("distinct?", &[&a, &b], Some(SqlType::Bool));
                Ok(if matches!(e, Expr::IsNotDistinctFrom(..)) {
                    self.call("not", &[&test], Some(SqlType::Bool))
                } else {
                    test
                })
            }
            Expr::Function(f) => self.function(f),
            Expr::Substring {
                expr,
                substring_from,
                substring_for,
                ..
            } => {
                let text = self.expr(expr, Some(SqlType::Text))?;
                let mut args = vec![text];
                let one = Expr::Value(SqlValue::Number("1".into(), false).into());
                let from = substring_from.as_deref().unwrap_or(&one);
                args.push(self.expr(from, Some(SqlType::Int4))?);
                if let Some(n) = substring_for {
                    args.push(self.expr(n, Some(SqlType::Int4))?);
                }
                let refs: Vec<&Term> = args.iter().collect();
                Ok(self.call("substr", &refs, Some(SqlType::Text)))
            }
            Expr::Trim {
                trim_where,
                trim_what,
                expr,
                trim_characters: None,
            } => {
                let text = self.expr(expr, Some(SqlType::Text))?;
                let chars = match trim_what {
                    Some(w) => self.expr(w, Some(SqlType::Text))?,
                    None => self.literal(&SqlValue::SingleQuotedString(" ".into()), None)?,
                };
                let side = match trim_where {
                    Some(sqlparser::ast::TrimWhereField::Leading) => "leading",
                    Some(sqlparser::ast::TrimWhereField::Trailing) => "trailing",
                    _ => "both",
                };
                let side = self.literal(&SqlValue::SingleQuotedString(side.into()), None)?;
                Ok(self.call("trim", &[&text, &chars, &side], Some(SqlType::Text)))
            }
            Expr::Case {
                operand,
                conditions,
                else_result,
                ..
            } => self.case(
                operand.as_deref(),
                conditions,
                else_result.as_deref(),
                expected,
            ),
            other => Err(SqlError::unsupported(format!("the expression {other}"))),
        }
    }

    fn cast(
        &mut self,
        expr: &Expr,
        data_type: &sqlparser::ast::DataType,
    ) -> Result<Term, SqlError> {
        let ty = SqlType::from_ast(data_type)?;
        let t = self.expr(expr, Some(ty))?;
        let same_kind = t.ty.is_none()
            || t.ty == Some(ty)
            || (t.ty.is_some_and(SqlType::is_text) && ty.is_text())
            || (t.ty.is_some_and(SqlType::is_integer) && ty.is_integer());
        if same_kind {
            return Ok(Term { ty: Some(ty), ..t });
        }
        Err(SqlError::unsupported(format!(
            "a cast of a {} value to {}",
            t.ty.map_or("NULL".into(), SqlType::display),
            ty.display()
        )))
    }

    /// LIKE, ILIKE, IN (list) and BETWEEN, as calls of the comparison functions.
    fn predicate_expr(&mut self, e: &Expr) -> Result<Term, SqlError> {
        let bool_ty = Some(SqlType::Bool);
        let (t, negated) = match e {
            Expr::Like {
                negated,
                expr,
                pattern,
                ..
            }
            | Expr::ILike {
                negated,
                expr,
                pattern,
                ..
            } => {
                let s = self.expr(expr, Some(SqlType::Text))?;
                let p = self.expr(pattern, Some(SqlType::Text))?;
                let f = if matches!(e, Expr::ILike { .. }) {
                    "ilike"
                } else {
                    "like"
                };
                (self.call(f, &[&s, &p], bool_ty), *negated)
            }
            Expr::In {
                expr,
                target: sqlparser::ast::InTarget::List(list),
                negated,
                ..
            } => {
                let x = self.expr(expr, None)?;
                let mut tests = Vec::new();
                for item in list {
                    let v = self.expr(item, x.ty)?;
                    tests.push(self.call("eq", &[&x, &v], bool_ty));
                }
                let refs: Vec<&Term> = tests.iter().collect();
                (self.call("or", &refs, bool_ty), *negated)
            }
            Expr::Between {
                expr,
                negated,
                low,
                high,
            } => {
                let x = self.expr(expr, None)?;
                let lo = self.expr(low, x.ty)?;
                let hi = self.expr(high, x.ty)?;
                let a = self.call("ge", &[&x, &lo], bool_ty);
                let b = self.call("le", &[&x, &hi], bool_ty);
                (self.call("and", &[&a, &b], bool_ty), *negated)
            }
            other => return Err(SqlError::unsupported(format!("the expression {other}"))),
        };
        Ok(if negated {
            self.call("not", &[&t], bool_ty)
        } else {
            t
        })
    }

    fn binary(&mut self, l: &Expr, op: &BinaryOperator, r: &Expr) -> Result<Term, SqlError> {
        let (lt, rt) = self.operands(l, r)?;
        let (f, ty) = match op {
            BinaryOperator::Plus => ("add", numeric_result(lt.ty, rt.ty)),
            BinaryOperator::Minus => ("sub", numeric_result(lt.ty, rt.ty)),
            BinaryOperator::Multiply => ("mul", numeric_result(lt.ty, rt.ty)),
            BinaryOperator::Divide => ("div", numeric_result(lt.ty, rt.ty)),
            BinaryOperator::Modulo => ("mod", numeric_result(lt.ty, rt.ty)),
            BinaryOperator::StringConcat => ("concat", Some(SqlType::Text)),
            BinaryOperator::And => ("and", Some(SqlType::Bool)),
            BinaryOperator::Or => ("or", Some(SqlType::Bool)),
            op => match comparison(op) {
                Some(f) => (f, Some(SqlType::Bool)),
                None => return Err(SqlError::unsupported(format!("the operator {op}"))),
            },
        };
        Ok(self.call(f, &[&lt, &rt], ty))
    }

    /// Both operands, each typed by the other where it has no type of its own.
    pub fn operands(&mut self, l: &Expr, r: &Expr) -> Result<(Term, Term), SqlError> {
        let hint = self.static_type(l);
        let rt = self.expr(r, hint)?;
        let lt = self.expr(l, rt.ty)?;
        Ok((lt, rt))
    }

    /// The type of a column reference, without binding it.
    pub fn static_type(&self, e: &Expr) -> Option<SqlType> {
        match e {
            Expr::Identifier(i) => self
                .resolve(std::slice::from_ref(i))
                .ok()
                .map(|(s, c)| self.column_def(s, c).ty),
            Expr::CompoundIdentifier(p) => {
                self.resolve(p).ok().map(|(s, c)| self.column_def(s, c).ty)
            }
            Expr::Nested(x) => self.static_type(x),
            _ => None,
        }
    }

    fn unary(
        &mut self,
        op: &UnaryOperator,
        x: &Expr,
        expected: Option<SqlType>,
    ) -> Result<Term, SqlError> {
        match op {
            UnaryOperator::Not => {
                let t = self.expr(x, Some(SqlType::Bool))?;
                Ok(self.call("not", &[&t], Some(SqlType::Bool)))
            }
            UnaryOperator::Plus => self.expr(x, None),
            UnaryOperator::Minus => {
                if let Expr::Value(v) = x {
                    if let SqlValue::Number(n, _) = &v.value {
                        let negated = SqlValue::Number(format!("-{n}"), false);
                        return self.literal(&negated, expected);
                    }
                }
                let t = self.expr(x, None)?;
                Ok(self.call("neg", &[&t], t.ty))
            }
            other => Err(SqlError::unsupported(format!("the operator {other}"))),
        }
    }

    /// `greatest(...)`, `least(...)`: arguments of one type family (integer widths widen,
    /// text types are text).
    fn greatest_least(&mut self, name: &str, xs: &[&Expr]) -> Result<Term, SqlError> {
        let mut terms = Vec::new();
        let mut ty: Option<SqlType> = None;
        for x in xs {
            let t = self.expr(x, ty)?;
            ty = match (ty, t.ty) {
                (None, t) | (t, None) => t,
                (Some(a), Some(b)) if a == b => Some(a),
                (Some(a), Some(b)) if a.is_integer() && b.is_integer() => Some(SqlType::Int8),
                (Some(a), Some(b)) if a.is_text() && b.is_text() => Some(SqlType::Text),
                (Some(a), Some(b)) => {
                    return Err(SqlError::unsupported(format!(
                        "{name} over {} and {}",
                        a.name(),
                        b.name()
                    )))
                }
            };
            terms.push(t);
        }
        let refs: Vec<&Term> = terms.iter().collect();
        Ok(self.call(name, &refs, ty))
    }

    /// `round(x)`: numeric for a numeric, else `double precision` (PostgreSQL's choice for
    /// integers too); `round(x, n)`: numeric, not for floats (`42883`).
    fn round(&mut self, x: &Expr, places: Option<&Expr>) -> Result<Term, SqlError> {
        let t = self.expr(x, None)?;
        let Some(n) = places else {
            let ty = if t.ty == Some(SqlType::Numeric) {
                SqlType::Numeric
            } else {
                SqlType::Float8
            };
            return Ok(self.call("round", &[&t], Some(ty)));
        };
        if let Some(ty @ (SqlType::Float4 | SqlType::Float8)) = t.ty {
            return Err(SqlError::new(
                "42883",
                format!("function round({}, integer) does not exist", ty.name()),
            ));
        }
        let n = self.expr(n, Some(SqlType::Int4))?;
        Ok(self.call("round", &[&t, &n], Some(SqlType::Numeric)))
    }

    fn function(&mut self, f: &Function) -> Result<Term, SqlError> {
        let name = f.name.to_string().to_ascii_lowercase();
        let name = name.trim_start_matches("pg_catalog.");
        let args = function_args(f)?;
        match (name, args.as_slice()) {
            (
                "now"
                | "current_timestamp"
                | "localtimestamp"
                | "transaction_timestamp"
                | "statement_timestamp",
                [],
            ) => {
                self.uses_now = true;
                Ok(Term::var("?now".into(), Some(SqlType::Timestamptz)))
            }
            ("lower" | "upper" | "length" | "abs", [x]) => {
                let t = self.expr(x, None)?;
                let ty = match name {
                    "length" => Some(SqlType::Int4),
                    "abs" => t.ty,
                    _ => Some(SqlType::Text),
                };
                Ok(self.call(name, &[&t], ty))
            }
            ("replace", [x, from, to]) => {
                let x = self.expr(x, Some(SqlType::Text))?;
                let from = self.expr(from, Some(SqlType::Text))?;
                let to = self.expr(to, Some(SqlType::Text))?;
                Ok(self.call("replace", &[&x, &from, &to], Some(SqlType::Text)))
            }
            ("substr", [x, rest @ ..]) if matches!(rest.len(), 1 | 2) => {
                let mut terms = vec![self.expr(x, Some(SqlType::Text))?];
                for r in rest {
                    terms.push(self.expr(r, Some(SqlType::Int4))?);
                }
                let refs: Vec<&Term> = terms.iter().collect();
                Ok(self.call("substr", &refs, Some(SqlType::Text)))
            }
            ("nullif", [x, y]) => {
                let a = self.expr(x, None)?;
                let b = self.expr(y, a.ty)?;
                let ty = a.ty.or(b.ty);
                Ok(self.call("nullif", &[&a, &b], ty))
            }
            ("greatest" | "least", xs) if !xs.is_empty() => self.greatest_least(name, xs),
            ("round", [x]) => self.round(x, None),
            ("round", [x, n]) => self.round(x, Some(n)),
            ("coalesce", xs) if !xs.is_empty() => {
                let mut terms = Vec::new();
                let mut ty = None;
                for x in xs {
                    let t = self.expr(x, ty)?;
                    ty = ty.or(t.ty);
                    terms.push(t);
                }
                let refs: Vec<&Term> = terms.iter().collect();
                Ok(self.call("coalesce", &refs, ty))
            }
            // Aggregates are find elements (`select::aggregate`), only at the top of a select
            // item or a HAVING comparison.
            ("count" | "sum" | "avg" | "min" | "max", _) => Err(SqlError::unsupported(format!(
                "the aggregate {name} inside an expression ({f})"
            ))),
            _ => Err(SqlError::new(
                "42883",
                format!("function {name}({} arguments) does not exist", args.len()),
            )),
        }
    }

    /// A WHERE (or ON) condition: each top-level AND term that compares a column with a
    /// value or another column becomes a data pattern or a built-in predicate (rows with a
    /// NULL there are dropped, as SQL's WHERE drops them); anything else is evaluated with
    /// three-valued logic and kept when true.
    pub fn condition(&mut self, e: &Expr) -> Result<(), SqlError> {
        let mut terms = Vec::new();
        conjuncts(e, &mut terms);
        // Simple comparisons first: they bind columns as patterns, which the rest reuse.
        terms.sort_by_key(|t| usize::from(!self.is_simple(t)));
        for t in terms {
            if !self.simple_condition(t)? {
                let v = self.expr(t, Some(SqlType::Bool))?;
                self.clauses.push(format!("[(vev.sql/true? {})]", v.text));
            }
        }
        Ok(())
    }

    fn is_simple(&self, e: &Expr) -> bool {
        match e {
            Expr::BinaryOp { left, op, right } => {
                comparison(op).is_some() && (self.is_column(left) || self.is_column(right))
            }
            Expr::IsNotNull(x) => self.is_column(x),
            _ => false,
        }
    }

    fn is_column(&self, e: &Expr) -> bool {
        match e {
            Expr::Identifier(i) => self.resolve(std::slice::from_ref(i)).is_ok(),
            Expr::CompoundIdentifier(p) => self.resolve(p).is_ok(),
            Expr::Nested(x) => self.is_column(x),
            _ => false,
        }
    }

    fn column_of(&self, e: &Expr) -> Option<(usize, usize)> {
        match e {
            Expr::Identifier(i) => self.resolve(std::slice::from_ref(i)).ok(),
            Expr::CompoundIdentifier(p) => self.resolve(p).ok(),
            Expr::Nested(x) => self.column_of(x),
            _ => None,
        }
    }

    /// A comparison with a column on one side as a pattern or predicate; false when the
    /// condition is not of that shape.
    fn simple_condition(&mut self, e: &Expr) -> Result<bool, SqlError> {
        if let Expr::IsNotNull(x) = e {
            if let Some((si, ci)) = self.column_of(x) {
                self.column(si, ci, true);
                return Ok(true);
            }
            return Ok(false);
        }
        let Expr::BinaryOp { left, op, right } = e else {
            return Ok(false);
        };
        let Some(_) = comparison(op) else {
            return Ok(false);
        };
        let (col_side, other, op) = match (self.column_of(left), self.column_of(right)) {
            (Some(c), _) => (c, &**right, op.clone()),
            (None, Some(c)) => (c, &**left, flip(op)),
            _ => return Ok(false),
        };
        let (si, ci) = col_side;
        let col = self.column_def(si, ci).clone();
        // Only plain values and other columns: anything that may be NULL through an
        // expression goes the general way.
        let other_col = self.column_of(other);
        // `col = NULL` is never true: the general way says so.
        let other_simple = other_col.is_some() || (is_value(other) && !is_null_literal(other));
        if !other_simple {
            return Ok(false);
        }
        // Numbers of different kinds (an integer column against `2.5` or a double
        // column) are equal by value, not as datoms, and so are floats (-0 = 0 and
        // NaN = NaN in SQL): the general way compares them.
        let by_value = number_kind(col.ty) == Some(1)
            || match other_col {
                Some((s2, c2)) => number_kind(col.ty)
                    .zip(number_kind(self.column_def(s2, c2).ty))
                    .is_some_and(|(a, b)| a != b),
                None => {
                    (col.ty.is_integer() && is_decimal_literal(other))
                        || cast_type(other).is_some_and(|t| number_kind(t) != number_kind(col.ty))
                }
            };
        // A column an earlier term bound with `get-else` may hold the NULL keyword, and
        // the planner may run a built-in predicate before the pattern that would drop
        // it: the general way, which knows NULL.
        let loose = |(s, c): (usize, usize)| self.columns.get(&(s, c)).is_some_and(|b| !b.required);
        if by_value || loose(col_side) || other_col.is_some_and(loose) {
            return Ok(false);
        }
        if op == BinaryOperator::Eq && col.attr.is_some() && !self.columns.contains_key(&(si, ci)) {
            // `col = value`: a pattern on the value (an index lookup).
            let v = match other_col {
                Some((s2, c2)) => self.column(s2, c2, true),
                None => self.value_term(other, Some(col.ty))?,
            };
            let v = self.as_var(v);
            self.bind_column(si, ci, v.text.clone(), true);
            return Ok(true);
        }
        let c = self.column(si, ci, true);
        let v = match other_col {
            Some((s2, c2)) => self.column(s2, c2, true),
            None => self.value_term(other, Some(col.ty))?,
        };
        let pred = match op {
            BinaryOperator::Eq => "=",
            BinaryOperator::NotEq => "!=",
            BinaryOperator::Lt => "<",
            BinaryOperator::LtEq => "<=",
            BinaryOperator::Gt => ">",
            _ => ">=",
        };
        self.clauses
            .push(format!("[({pred} {} {})]", c.text, v.text));
        Ok(true)
    }

    /// A literal or parameter compared with a column: NULL there matches nothing.
    fn value_term(&mut self, e: &Expr, ty: Option<SqlType>) -> Result<Term, SqlError> {
        let t = self.expr(e, ty)?;
        if let Some(n) = t.text.strip_prefix("?p").and_then(|n| n.parse().ok()) {
            self.null_rejecting.insert(n);
        }
        Ok(t)
    }
}

/// Which numbers compare as equal values in a pattern: integers, floats, numerics.
fn number_kind(t: SqlType) -> Option<u8> {
    match t {
        t if t.is_integer() => Some(0),
        SqlType::Float4 | SqlType::Float8 => Some(1),
        SqlType::Numeric => Some(2),
        _ => None,
    }
}

/// The type a value is cast to (`3::real`, `$1::float8`, a scalar subquery's parameter).
fn cast_type(e: &Expr) -> Option<SqlType> {
    match e {
        Expr::Cast { data_type, .. } => SqlType::from_ast(data_type).ok(),
        Expr::Nested(x) => cast_type(x),
        _ => None,
    }
}

/// `2.5`, `-1e3`: a number literal with a fraction or an exponent.
fn is_decimal_literal(e: &Expr) -> bool {
    match e {
        Expr::Value(v) => matches!(&v.value, SqlValue::Number(n, _) if n.contains(['.', 'e', 'E'])),
        Expr::Nested(x) => is_decimal_literal(x),
        Expr::UnaryOp {
            op: UnaryOperator::Minus,
            expr,
        } => is_decimal_literal(expr),
        _ => false,
    }
}

fn is_null_literal(e: &Expr) -> bool {
    match e {
        Expr::Value(v) => matches!(v.value, SqlValue::Null),
        Expr::Nested(x) => is_null_literal(x),
        _ => false,
    }
}

fn is_value(e: &Expr) -> bool {
    match e {
        Expr::Value(_) => true,
        Expr::Nested(x) => is_value(x),
        Expr::UnaryOp {
            op: UnaryOperator::Minus,
            expr,
        } => matches!(&**expr, Expr::Value(_)),
        Expr::Cast { expr, .. } => is_value(expr),
        _ => false,
    }
}

/// The top-level AND terms of a condition.
pub fn conjuncts<'e>(e: &'e Expr, out: &mut Vec<&'e Expr>) {
    match e {
        Expr::BinaryOp {
            left,
            op: BinaryOperator::And,
            right,
        } => {
            conjuncts(left, out);
            conjuncts(right, out);
        }
        Expr::Nested(x) => conjuncts(x, out),
        other => out.push(other),
    }
}

/// The `vev.sql/*` function of a comparison operator.
pub fn comparison(op: &BinaryOperator) -> Option<&'static str> {
    Some(match op {
        BinaryOperator::Eq => "eq",
        BinaryOperator::NotEq => "ne",
        BinaryOperator::Lt => "lt",
        BinaryOperator::LtEq => "le",
        BinaryOperator::Gt => "gt",
        BinaryOperator::GtEq => "ge",
        _ => return None,
    })
}

fn flip(op: &BinaryOperator) -> BinaryOperator {
    match op {
        BinaryOperator::Lt => BinaryOperator::Gt,
        BinaryOperator::LtEq => BinaryOperator::GtEq,
        BinaryOperator::Gt => BinaryOperator::Lt,
        BinaryOperator::GtEq => BinaryOperator::LtEq,
        other => other.clone(),
    }
}

fn numeric_result(a: Option<SqlType>, b: Option<SqlType>) -> Option<SqlType> {
    use SqlType::*;
    match (a.or(b), b.or(a)) {
        (Some(Float8 | Float4), _) | (_, Some(Float8 | Float4)) => Some(Float8),
        (Some(Numeric), _) | (_, Some(Numeric)) => Some(Numeric),
        (Some(Int8), _) | (_, Some(Int8)) => Some(Int8),
        (Some(Int4), _) | (_, Some(Int4)) => Some(Int4),
        (Some(Int2), Some(Int2)) => Some(Int2),
        (x, _) => x,
    }
}

pub fn ident_name(i: &Ident) -> String {
    if i.quote_style.is_some() {
        i.value.clone()
    } else {
        i.value.to_ascii_lowercase()
    }
}

/// `$3` → 3.
pub fn placeholder(p: &str) -> Result<usize, SqlError> {
    p.strip_prefix('$')
        .and_then(|n| n.parse::<usize>().ok())
        .filter(|n| (1..=65535).contains(n))
        .ok_or_else(|| SqlError::syntax(format!("invalid parameter {p}")))
}

pub fn function_args(f: &Function) -> Result<Vec<&Expr>, SqlError> {
    match &f.args {
        FunctionArguments::None => Ok(Vec::new()),
        FunctionArguments::List(list) => list
            .args
            .iter()
            .map(|a| match a {
                FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => Ok(e),
                other => Err(SqlError::unsupported(format!("the argument {other}"))),
            })
            .collect(),
        FunctionArguments::Subquery(_) => Err(SqlError::unsupported("a subquery argument")),
    }
}

/// A literal's EDN value and type (typed by its context where it has none of its own).
pub fn literal_edn(
    v: &SqlValue,
    expected: Option<SqlType>,
) -> Result<(Edn, Option<SqlType>), SqlError> {
    Ok(match v {
        SqlValue::Null => (
            Edn::Keyword(vev::Keyword::new(crate::sqlfns::NULL_KEYWORD)),
            expected,
        ),
        SqlValue::Boolean(b) => (Edn::Bool(*b), Some(SqlType::Bool)),
        SqlValue::Number(n, _) => {
            let decimal = n.contains(['.', 'e', 'E']);
            let ty = match expected {
                // `int_col < 2.5` and `int_col < 3000000000` compare by value: the
                // literal keeps its fraction or its size.
                Some(t) if t.is_integer() && !decimal && t.parse_text(n).is_ok() => t,
                Some(t @ (SqlType::Float4 | SqlType::Float8 | SqlType::Numeric)) => t,
                _ if decimal => SqlType::Numeric,
                _ => match n.parse::<i64>() {
                    Ok(x) if i32::try_from(x).is_ok() => SqlType::Int4,
                    Ok(_) => SqlType::Int8,
                    Err(_) => SqlType::Numeric,
                },
            };
            (ty.parse_text(n)?, Some(ty))
        }
        SqlValue::SingleQuotedString(s) | SqlValue::EscapedStringLiteral(s) => {
            let ty = expected.unwrap_or(SqlType::Text);
            (ty.parse_text(s)?, Some(ty))
        }
        other => return Err(SqlError::unsupported(format!("the literal {other}"))),
    })
}

/// A value as Datalog text (strings escaped as EDN).
pub fn edn_text(e: &Edn) -> String {
    e.to_string()
}
