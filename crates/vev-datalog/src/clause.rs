//! `:where` clauses: data patterns, predicates, functions, `not`, `or` and rule calls.
//!
//! A clause is told apart by its shape alone, as in Datomic's grammar:
//!
//! - a vector whose first element is a list is an expression: `[(pred ...)]` or
//!   `[(f ...) binding]`;
//! - any other vector is a data pattern `[$src? e a v tx added]`;
//! - a list, after an optional `$src`, is `not`, `not-join`, `or`, `or-join` or a rule call.
//!
//! `and` is not a clause of its own: it only groups the clauses of one `or` branch.
//!
//! Parsing recurses into `not`, `or` and `and`, at about 4.5 KiB of stack per level in debug
//! builds (2.6 KiB in release), and so will every pass of the engine over the tree. The
//! reader allows 512 levels, which would not fit a spawned thread's 2 MiB stack, so nesting
//! stops at [`CLAUSE_DEPTH_MAX`] with `query/too-deep`, as `serde_json` stops at 128.

use vev_edn::{Spanned, Symbol};

use crate::ast::{Arg, Clause, Pattern, RuleVars, SrcVar, Term, Var};
use crate::binding::{parse_binding, parse_rule_vars, parse_var_vector};
use crate::error::{Invalid, SyntaxError};
use crate::form::{is_blank, list_items, plain_name, src_var, symbol, var, vector_items};

const CLAUSE_FORMS: &str = "expected a data pattern, predicate, function, not, or or rule call";

/// How deeply `not`, `not-join`, `or`, `or-join` and `and` may nest, so that parsing (and
/// every later pass that recurses over clauses) fits in the 2 MiB stack of a spawned thread.
pub const CLAUSE_DEPTH_MAX: usize = 128;

/// Clauses of `:where`, a rule body, `not`, or an `and` branch, nested `depth` levels deep.
pub(crate) fn parse_clauses(forms: &[Spanned], depth: usize) -> Result<Vec<Clause>, SyntaxError> {
    let mut clauses = Vec::with_capacity(forms.len());
    for form in forms {
        clauses.push(parse_clause(form, depth)?);
    }
    Ok(clauses)
}

fn parse_clause(form: &Spanned, depth: usize) -> Result<Clause, SyntaxError> {
    if let Some(items) = vector_items(form) {
        return parse_vector_clause(form, items);
    }
    if let Some(items) = list_items(form) {
        return parse_list_clause(form, items, depth);
    }
    Err(Invalid::Clause.at(form, CLAUSE_FORMS))
}

/// An expression clause or a data pattern.
fn parse_vector_clause(form: &Spanned, items: &[Spanned]) -> Result<Clause, SyntaxError> {
    match items.first() {
        Some(first) if list_items(first).is_some() => parse_expr_clause(form, items),
        _ => parse_pattern(form, items).map(Clause::Pattern),
    }
}

/// `[$src? e a v tx added]`: one to five terms; the ones not written are blanks.
fn parse_pattern(form: &Spanned, items: &[Spanned]) -> Result<Pattern, SyntaxError> {
    let (src, terms) = split_src(items);
    if terms.is_empty() {
        let reason = "expected one to five terms [e a v tx added]";
        return Err(Invalid::Pattern.at(form, reason));
    }
    if let Some(extra) = terms.get(5) {
        let reason = format!("{} terms, at most five [e a v tx added]", terms.len());
        return Err(Invalid::Pattern.error(form.value.clone(), extra.span, reason));
    }
    let mut parsed: [Term; 5] = std::array::from_fn(|_| Term::Blank);
    for (slot, term) in parsed.iter_mut().zip(terms) {
        *slot = parse_term(form, term)?;
    }
    Ok(Pattern {
        src,
        terms: parsed,
        span: form.span,
    })
}

/// A variable, `_`, or a constant; any other symbol is an error pointing at the term.
fn parse_term(pattern: &Spanned, term: &Spanned) -> Result<Term, SyntaxError> {
    if let Some(v) = var(term) {
        return Ok(Term::Var(v));
    }
    if is_blank(term) {
        return Ok(Term::Blank);
    }
    let Some(sym) = symbol(term) else {
        return Ok(Term::Const(term.value.clone()));
    };
    let reason = if sym.as_str().starts_with('$') {
        format!("source {sym} must be the first element")
    } else {
        format!("symbol {sym} is not a variable ?x, _ or a constant")
    };
    Err(Invalid::Pattern.error(pattern.value.clone(), term.span, reason))
}

/// `[(pred args...)]` or `[(f args...) binding]`.
fn parse_expr_clause(form: &Spanned, items: &[Spanned]) -> Result<Clause, SyntaxError> {
    let (name, args) = parse_call(&items[0])?;
    match &items[1..] {
        [] => Ok(Clause::Pred {
            name,
            args,
            span: form.span,
        }),
        [binding] => Ok(Clause::Fn {
            name,
            args,
            binding: parse_binding(binding, Invalid::Clause)?,
            span: form.span,
        }),
        _ => {
            let reason = "expected [(pred args...)] or [(f args...) binding]";
            Err(Invalid::Clause.at(form, reason))
        }
    }
}

/// `(name args...)` of a predicate or function: arguments are variables, sources and
/// constants.
fn parse_call(call: &Spanned) -> Result<(Symbol, Vec<Arg>), SyntaxError> {
    let items = list_items(call).unwrap_or_default();
    let Some((head, args)) = items.split_first() else {
        return Err(Invalid::Clause.at(call, "expected a function name such as > or re-find"));
    };
    let Some(name) = plain_name(head) else {
        return Err(Invalid::Clause.at(head, "expected a function name such as > or re-find"));
    };
    let arg = |form: &Spanned| {
        if is_blank(form) {
            let reason = "_ is not a function argument; use a variable";
            return Err(Invalid::Clause.at(form, reason));
        }
        Ok(src_var(form).map_or_else(|| value_arg(form), Arg::Src))
    };
    Ok((
        name.clone(),
        args.iter().map(arg).collect::<Result<_, _>>()?,
    ))
}

/// A variable or a constant.
fn value_arg(form: &Spanned) -> Arg {
    var(form).map_or_else(|| Arg::Const(form.value.clone()), Arg::Var)
}

/// `($src? not ...)`, `not-join`, `or`, `or-join`, or a rule call.
fn parse_list_clause(
    form: &Spanned,
    items: &[Spanned],
    depth: usize,
) -> Result<Clause, SyntaxError> {
    let (src, rest) = split_src(items);
    let Some((head, body)) = rest.split_first() else {
        return Err(Invalid::Clause.at(form, CLAUSE_FORMS));
    };
    let Some(name) = plain_name(head) else {
        let reason = "expected not, not-join, or, or-join or a rule name";
        return Err(Invalid::Clause.at(head, reason));
    };
    let nested = Nested { form, src, depth };
    match name.as_str() {
        "not" => nested.not(None, body),
        "not-join" => nested.not_join(body),
        "or" => nested.or(None, body),
        "or-join" => nested.or_join(body),
        "and" => Err(Invalid::Clause.at(form, "and is only allowed as a branch of or or or-join")),
        _ => parse_rule_call(form, nested.src, name, body),
    }
}

/// A `not` or `or` clause being parsed: its form, source and nesting depth.
struct Nested<'a> {
    form: &'a Spanned,
    src: Option<SrcVar>,
    depth: usize,
}

impl Nested<'_> {
    /// The depth of the clauses inside, or an error if that is too deep.
    fn inner_depth(&self, form: &Spanned) -> Result<usize, SyntaxError> {
        if self.depth >= CLAUSE_DEPTH_MAX {
            return Err(SyntaxError::TooDeep {
                max: CLAUSE_DEPTH_MAX,
                span: form.span,
            });
        }
        Ok(self.depth + 1)
    }

    fn not_join(self, body: &[Spanned]) -> Result<Clause, SyntaxError> {
        let (vars, body) = split_join_vars(self.form, body)?;
        let vars = parse_var_vector(vars, Invalid::Clause)?;
        self.not(Some(vars), body)
    }

    fn not(self, vars: Option<Vec<Var>>, body: &[Spanned]) -> Result<Clause, SyntaxError> {
        if body.is_empty() {
            return Err(Invalid::Clause.at(self.form, "not needs at least one clause"));
        }
        let clauses = parse_clauses(body, self.inner_depth(self.form)?)?;
        Ok(Clause::Not {
            src: self.src,
            vars,
            clauses,
            span: self.form.span,
        })
    }

    fn or_join(self, body: &[Spanned]) -> Result<Clause, SyntaxError> {
        let (vars, body) = split_join_vars(self.form, body)?;
        let items = vector_items(vars).unwrap_or_default();
        let vars = parse_rule_vars(vars, items, Invalid::Clause)?;
        self.or(Some(vars), body)
    }

    fn or(self, vars: Option<RuleVars>, body: &[Spanned]) -> Result<Clause, SyntaxError> {
        if body.is_empty() {
            return Err(Invalid::Clause.at(self.form, "or needs at least one clause"));
        }
        let depth = self.inner_depth(self.form)?;
        let mut branches = Vec::with_capacity(body.len());
        for branch in body {
            branches.push(parse_branch(branch, depth)?);
        }
        Ok(Clause::Or {
            src: self.src,
            vars,
            branches,
            span: self.form.span,
        })
    }
}

/// The vector after `not-join` or `or-join`, and the clauses after it.
fn split_join_vars<'a>(
    form: &Spanned,
    body: &'a [Spanned],
) -> Result<(&'a Spanned, &'a [Spanned]), SyntaxError> {
    match body.split_first() {
        Some((vars, rest)) if vector_items(vars).is_some() => Ok((vars, rest)),
        Some((other, _)) => Err(Invalid::Clause.at(other, "expected a vector of variables")),
        None => Err(Invalid::Clause.at(form, "expected a vector of variables, then clauses")),
    }
}

/// One branch of `or`: `(and clause...)` or a single clause.
fn parse_branch(form: &Spanned, depth: usize) -> Result<Vec<Clause>, SyntaxError> {
    let and_body = list_items(form)
        .and_then(|items| items.split_first())
        .filter(|(head, _)| plain_name(head).is_some_and(|s| s.as_str() == "and"))
        .map(|(_, body)| body);
    let Some(body) = and_body else {
        return Ok(vec![parse_clause(form, depth)?]);
    };
    if body.is_empty() {
        return Err(Invalid::Clause.at(form, "and needs at least one clause"));
    }
    if depth >= CLAUSE_DEPTH_MAX {
        return Err(SyntaxError::TooDeep {
            max: CLAUSE_DEPTH_MAX,
            span: form.span,
        });
    }
    parse_clauses(body, depth + 1)
}

/// `(name args...)`: arguments are variables, constants and `_`.
fn parse_rule_call(
    form: &Spanned,
    src: Option<SrcVar>,
    name: &Symbol,
    args: &[Spanned],
) -> Result<Clause, SyntaxError> {
    if args.is_empty() {
        return Err(Invalid::Clause.at(form, format!("rule call {name} needs arguments")));
    }
    let arg = |form: &Spanned| {
        if is_blank(form) {
            return Ok(Arg::Blank);
        }
        if let Some(src) = src_var(form) {
            let reason = format!(
                "source {src} must come before the rule name",
                src = src.name()
            );
            return Err(Invalid::Clause.at(form, reason));
        }
        Ok(value_arg(form))
    };
    Ok(Clause::Rule {
        src,
        name: name.clone(),
        args: args.iter().map(arg).collect::<Result<_, _>>()?,
        span: form.span,
    })
}

/// An optional leading `$src`, and the rest.
fn split_src(items: &[Spanned]) -> (Option<SrcVar>, &[Spanned]) {
    match items.split_first() {
        Some((first, rest)) => match src_var(first) {
            Some(src) => (Some(src), rest),
            None => (None, items),
        },
        None => (None, items),
    }
}
