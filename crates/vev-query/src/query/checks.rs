//! Checks that do not depend on the data, made before a query runs: unknown functions,
//! rules, aggregates and attributes (`check_static`), and variables that no clause can bind
//! where they must be bound (`check_bindings`), so that such errors never depend on which
//! rows the data happens to hold.

use std::collections::HashSet;

use vev_datalog::ast;
use vev_edn::Edn;

use super::{find_var, CompiledRules, Find, Query, QueryOptions};
use crate::agg;
use crate::compile::{CClause, CTerm, Scope};
use crate::error::QueryError;
use crate::funcs;
use crate::rel::VarId;
use crate::rules::RuleSet;
use crate::source::Source;

/// A check of one clause, given the source its patterns read when they name none.
type Check<'a> = dyn FnMut(&CClause, Option<usize>) -> Result<(), QueryError> + 'a;

impl Query {
    /// Every check that does not depend on the data, before anything runs: unknown names
    /// (`check_static`, every run), then, until they pass once for a compiled rule set,
    /// variables no clause can bind (`check_bindings`, for the query and every rule body) and
    /// `:find` elements nothing binds.
    pub(super) fn check(
        &self,
        compiled: &CompiledRules,
        opts: &QueryOptions,
        sources: &[Option<&dyn Source>],
    ) -> Result<(), QueryError> {
        let rules = &compiled.set;
        // Unknown functions and attributes depend on the options and the sources: every run.
        self.check_static(rules, opts, sources)?;
        // The binding checks depend only on this query and `compiled` (its own): once they
        // passed, a prepared query's later runs skip them.
        if compiled.checked.load(std::sync::atomic::Ordering::Relaxed) {
            return Ok(());
        }
        let input_vars: HashSet<VarId> = self.bindings.iter().flat_map(|(_, b)| b.vars()).collect();
        check_bindings(&self.scope, &self.clauses, &input_vars, rules)?;
        for (_, branches) in rules.iter() {
            for r in branches {
                check_bindings(
                    &r.scope,
                    &r.clauses,
                    &r.head.iter().copied().collect(),
                    rules,
                )?;
            }
        }
        let bindable = bindable_vars(&self.clauses, &input_vars);
        for f in self.find.iter() {
            let v = find_var(f);
            if !bindable.contains(&v) {
                return Err(QueryError::UnboundVariable {
                    var: self.scope.name(v).to_owned(),
                    context: "in :find: no clause binds it",
                    span: Some(f_span(&self.ast, f, &self.find)),
                });
            }
        }
        compiled
            .checked
            .store(true, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }

    /// Errors that must not depend on the data: unknown functions, rules, aggregates, attributes.
    fn check_static(
        &self,
        rules: &RuleSet,
        opts: &QueryOptions,
        sources: &[Option<&dyn Source>],
    ) -> Result<(), QueryError> {
        let default_src = self.default_src;
        let mut check = |c: &CClause, default_src: Option<usize>| -> Result<(), QueryError> {
            match c {
                CClause::Pred { name, span, .. } | CClause::Fn { name, span, .. }
                    if !funcs::exists(&opts.registry, name.as_str()) =>
                {
                    return Err(QueryError::UnknownFunction {
                        name: name.to_string(),
                        span: Some(*span),
                    });
                }
                CClause::Fn {
                    name, args, span, ..
                }
                | CClause::Pred {
                    name, args, span, ..
                } if name.as_str() == "fulltext" => check_fulltext(args, sources, *span)?,
                CClause::Fn {
                    name, args, span, ..
                }
                | CClause::Pred {
                    name, args, span, ..
                } if matches!(name.as_str(), "get-else" | "get-some" | "missing?") => {
                    check_attribute_args(name.as_str(), args, sources, *span)?
                }
                CClause::Rule { name, span, .. } if !rules.contains(name) => {
                    return Err(QueryError::UnknownRule {
                        rule: name.to_string(),
                        span: Some(*span),
                    });
                }
                CClause::Pattern { src, terms, span } => {
                    let source = src
                        .or(default_src)
                        .and_then(|i| sources.get(i).copied().flatten());
                    if let (Some(source), CTerm::Const(Edn::Keyword(k))) = (source, &terms[1]) {
                        if source.schema().entid(k).is_none() {
                            return Err(QueryError::UnknownAttribute {
                                attr: k.to_string(),
                                span: Some(*span),
                            });
                        }
                    }
                    if let Some(source) = source {
                        check_lookup_ref(source, &terms[0], *span)?;
                    }
                }
                _ => {}
            }
            Ok(())
        };
        for c in self.clauses.iter() {
            walk(c, default_src, &mut check)?;
            walk(c, default_src, &mut check_default_source)?;
        }
        for f in self.find.iter() {
            if let Find::Agg { name, .. } = f {
                if !agg::exists(&opts.registry, name) {
                    return Err(QueryError::UnknownAggregate {
                        name: name.clone(),
                        span: None,
                    });
                }
            }
        }
        Ok(())
    }
}

/// `c` and the clauses inside it, first to last, each with the source its patterns read when
/// they name none (`default`, or the one an enclosing `($b not ...)` / `($b or ...)` names).
fn walk(c: &CClause, default: Option<usize>, f: &mut Check<'_>) -> Result<(), QueryError> {
    f(c, default)?;
    match c {
        CClause::Not { src, clauses, .. } => {
            clauses.iter().try_for_each(|x| walk(x, src.or(default), f))
        }
        CClause::Or { src, branches, .. } => branches
            .iter()
            .flatten()
            .try_for_each(|x| walk(x, src.or(default), f)),
        _ => Ok(()),
    }
}

/// A pattern that names no source reads the default one (`$`, or the source its enclosing
/// `not`/`or` names): with none given, that is an error whatever rows reach the pattern (so
/// every plan reports it, however early it finds the relation empty).
fn check_default_source(c: &CClause, default: Option<usize>) -> Result<(), QueryError> {
    match c {
        CClause::Pattern {
            src: None, span, ..
        } if default.is_none() => Err(QueryError::UnknownSource {
            name: "$".to_owned(),
            span: Some(*span),
        }),
        _ => Ok(()),
    }
}

/// The constant attribute arguments of `get-else`, `get-some` and `missing?` (the third, or
/// for `get-some` every one from the third on) name attributes of the source, whatever rows
/// reach the call: otherwise a plan that finds the relation empty before the call would
/// answer no rows where another reports the unknown attribute.
fn check_attribute_args(
    name: &str,
    args: &[crate::compile::CArg],
    sources: &[Option<&dyn Source>],
    span: vev_edn::Span,
) -> Result<(), QueryError> {
    use crate::compile::CArg;
    let Some(CArg::Src(i)) = args.first() else {
        return Ok(()); // the call reports a missing source
    };
    let Some(source) = sources.get(*i).copied().flatten() else {
        return Ok(());
    };
    let attrs = if name == "get-some" {
        args.get(2..).unwrap_or(&[])
    } else {
        args.get(2..3).unwrap_or(&[])
    };
    for a in attrs {
        if let CArg::Const(attr) = a {
            crate::exec::fn_attribute(source, &crate::values::edn_to_value(attr), Some(span))?;
        }
    }
    Ok(())
}

/// A `fulltext` call's constant arguments: an attribute that exists and has `:db/fulltext`,
/// query text that parses (whatever rows reach the call).
fn check_fulltext(
    args: &[crate::compile::CArg],
    sources: &[Option<&dyn Source>],
    span: vev_edn::Span,
) -> Result<(), QueryError> {
    use crate::compile::CArg;
    let Some(CArg::Src(i)) = args.first() else {
        return Err(QueryError::Type {
            name: "fulltext".to_owned(),
            message: "expects a source ($) as its first argument".to_owned(),
            span: Some(span),
        });
    };
    let Some(source) = sources.get(*i).copied().flatten() else {
        return Ok(());
    };
    if args.len() != 3 {
        return Ok(()); // the call reports the count
    }
    if let CArg::Const(Edn::String(text)) = &args[2] {
        crate::fulltext::FtQuery::parse(text)?;
    }
    if let CArg::Const(attr) = &args[1] {
        let vals = [
            vev_core::Value::Nil,
            crate::values::edn_to_value(attr),
            vev_core::Value::String("x".into()),
        ];
        crate::exec::fulltext_args(source, &vals, Some(span))?;
    }
    Ok(())
}

/// A constant lookup ref in a pattern's entity position names a unique attribute of the
/// source, whatever rows reach the pattern (so every plan reports the same error, however
/// early it finds the relation empty).
fn check_lookup_ref(
    source: &dyn Source,
    term: &CTerm,
    span: vev_edn::Span,
) -> Result<(), QueryError> {
    let CTerm::Const(Edn::Vector(items)) = term else {
        return Ok(());
    };
    let [Edn::Keyword(k), value] = items.as_slice() else {
        return Ok(());
    };
    crate::values::lookup_ref_attribute(source.schema(), k, value, Some(span)).map(|_| ())
}

/// The span of a find element.
fn f_span(ast: &ast::Query, f: &Find, all: &[Find]) -> vev_edn::Span {
    let i = all.iter().position(|x| std::ptr::eq(x, f)).unwrap_or(0);
    ast.find.elems().get(i).map_or(ast.span, |e| e.span())
}

/// The variables some clause of the list (or an input) can bind.
fn bindable_vars(clauses: &[CClause], inputs: &HashSet<VarId>) -> HashSet<VarId> {
    let mut out = inputs.clone();
    for c in clauses {
        match c {
            CClause::Pred { .. } | CClause::Not { .. } => {}
            CClause::Fn { binding, .. } => out.extend(binding.vars()),
            // A plain `or` binds only what every branch uses; the rest it needs bound.
            CClause::Or { .. } => {
                let required = c.or_required();
                out.extend(c.vars().into_iter().filter(|v| !required.contains(v)));
            }
            other => out.extend(other.vars()),
        }
    }
    out
}

/// Checks that do not depend on the data: every predicate and function argument, `not`
/// variable and `not-join`/`or-join` required variable can be bound; a variable only some
/// branches of an `or`/`or-join` use is bound outside it (`CClause::or_required`); rule
/// calls have their rule's arity.
fn check_bindings(
    scope: &Scope,
    clauses: &[CClause],
    outer: &HashSet<VarId>,
    rules: &RuleSet,
) -> Result<(), QueryError> {
    let bindable = bindable_vars(clauses, outer);
    let unbound = |v: VarId, context: &'static str, span| QueryError::UnboundVariable {
        var: scope.name(v).to_owned(),
        context,
        span: Some(span),
    };
    for c in clauses {
        match c {
            CClause::Pred { args, span, .. } | CClause::Fn { args, span, .. } => {
                for a in args {
                    if let crate::compile::CArg::Var(v) = a {
                        if !bindable.contains(v) {
                            let context = if matches!(c, CClause::Pred { .. }) {
                                "in predicate"
                            } else {
                                "in function call"
                            };
                            return Err(unbound(*v, context, *span));
                        }
                    }
                }
            }
            CClause::Not {
                join,
                clauses: inner,
                span,
                ..
            } => {
                let vars = c.vars();
                match join {
                    Some(j) => {
                        if let Some(v) = j.iter().find(|v| !bindable.contains(v)) {
                            return Err(unbound(
                                *v,
                                "in not-join: the query never binds it",
                                *span,
                            ));
                        }
                    }
                    None => {
                        if !vars.iter().any(|v| bindable.contains(v)) {
                            if let Some(v) = vars.first() {
                                return Err(unbound(
                                    *v,
                                    "in not clause: none of its variables is bound outside it",
                                    *span,
                                ));
                            }
                        }
                    }
                }
                check_bindings(scope, inner, &bindable, rules)?;
            }
            CClause::Or {
                join,
                branches,
                span,
                ..
            } => {
                let missing = c.or_required().into_iter().find(|v| !bindable.contains(v));
                if let (Some((req, _)), Some(v)) = (join, missing) {
                    let context = if req.contains(&v) {
                        "in or-join's required variables"
                    } else {
                        "in or-join: a branch does not use it and nothing outside binds it"
                    };
                    return Err(unbound(v, context, *span));
                } else if let Some(v) = missing {
                    return Err(QueryError::Invalid {
                        message: format!(
                            "every branch of or must use the same variables, but {} is not in all of them and nothing outside the or binds it",
                            scope.name(v)
                        ),
                        span: Some(*span),
                    });
                }
                for b in branches {
                    check_bindings(scope, b, &bindable, rules)?;
                }
            }
            CClause::Rule {
                name, args, span, ..
            } => {
                if let Some(expected) = rules.arity(name) {
                    if expected != args.len() {
                        return Err(QueryError::RuleArity {
                            rule: name.to_string(),
                            given: args.len(),
                            expected,
                            span: Some(*span),
                        });
                    }
                }
            }
            CClause::Pattern { .. } => {}
        }
    }
    Ok(())
}
