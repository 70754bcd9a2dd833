//! Predicate and function clauses: arguments gathered per row through a plan resolved once
//! per clause (`ArgPlan`), results bound under the clause's binding form, and the functions
//! that read a database (`missing?`, `get-else`, `get-some`).

use vev_core::{Cardinality, Component, IndexOrder, Value};
use vev_edn::Symbol;

use super::{Ctx, Env};
use crate::compile::{CArg, CBinding};
use crate::error::QueryError;
use crate::funcs;
use crate::rel::{Rel, VarId};
use crate::values::{edn_to_value, resolve_entity, truthy};

impl Ctx<'_> {
    /// The function's name, if a built-in or registered function has it.
    fn known_function<'n>(
        &self,
        name: &'n Symbol,
        span: vev_edn::Span,
    ) -> Result<&'n str, QueryError> {
        let fname = name.as_str();
        if !funcs::exists(self.registry, fname) {
            return Err(QueryError::UnknownFunction {
                name: fname.to_owned(),
                span: Some(span),
            });
        }
        Ok(fname)
    }

    pub(super) fn apply_pred(
        &self,
        env: &Env<'_>,
        mut rel: Rel,
        name: &Symbol,
        args: &[CArg],
        span: vev_edn::Span,
    ) -> Result<Rel, QueryError> {
        let fname = self.known_function(name, span)?;
        let mut err = None;
        let plan = ArgPlan::new(args, &rel);
        let mut vals: Vec<Value> = Vec::with_capacity(args.len());
        rel.retain(|row| {
            if err.is_some() {
                return false;
            }
            plan.fill(row, &mut vals);
            match self.call(env, fname, args, &vals, span) {
                Ok(v) => truthy(&v),
                Err(e) => {
                    err = Some(e);
                    false
                }
            }
        });
        match err {
            Some(e) => Err(with_span(e, span)),
            None => Ok(rel),
        }
    }

    pub(super) fn apply_fn(
        &self,
        env: &Env<'_>,
        rel: Rel,
        name: &Symbol,
        args: &[CArg],
        binding: &CBinding,
        span: vev_edn::Span,
    ) -> Result<Rel, QueryError> {
        let fname = self.known_function(name, span)?;
        let mut out = output_rel(&rel, binding);
        let mut buf: Vec<Value> = Vec::new();
        let plan = ArgPlan::new(args, &rel);
        let mut vals: Vec<Value> = Vec::with_capacity(args.len());
        for row in rel.rows() {
            plan.fill(row, &mut vals);
            let result = self
                .call(env, fname, args, &vals, span)
                .map_err(|e| with_span(e, span))?;
            for tuple in bind_tuples(fname, binding, result, span)? {
                // tuple: one value per binding position (None for `_`).
                if fill_row(&rel, &out, row, &mut buf, tuple) {
                    out.push_row_from(&mut buf);
                }
            }
            self.check(out.len)?;
        }
        Ok(out)
    }

    /// `(fulltext $ :attr ?q)` bound to a relation (`[[?e ?v ?tx ?score]]`, Datomic's
    /// form): each hit becomes a row directly, with no tuple value built in between. A
    /// scalar input no later step reads (`later`: the query text, usually) is left out of
    /// the rows rather than copied into each hit's.
    pub(super) fn apply_fulltext(
        &self,
        env: &Env<'_>,
        rel: Rel,
        args: &[CArg],
        binding: &CBinding,
        span: vev_edn::Span,
        later: &dyn Fn(VarId) -> bool,
    ) -> Result<Rel, QueryError> {
        let CBinding::Rel(positions) = binding else {
            unreachable!("the caller checks for a relation binding");
        };
        let mut out = output_rel(&rel, binding);
        let mut buf: Vec<Value> = Vec::new();
        let plan = ArgPlan::new(args, &rel);
        let mut vals: Vec<Value> = Vec::with_capacity(args.len());
        // Values only when the binding takes them (reading each costs a cache miss).
        let values = positions.get(1).is_some_and(Option::is_some);
        // The binding positions in output column order, when no bound variable is already
        // in the input and none repeats (what every Datomic example does); the output rows
        // are then the input's columns `carried` followed by those positions.
        let fresh: Vec<(VarId, usize)> = positions
            .iter()
            .enumerate()
            .filter_map(|(k, p)| p.map(|v| (v, k)))
            .collect();
        let mut seen: Vec<VarId> = fresh.iter().map(|(v, _)| *v).collect();
        seen.sort_unstable();
        seen.dedup();
        let mut carried: Vec<usize> = Vec::new();
        let mut direct: Option<Vec<usize>> = None;
        if positions.len() <= 4
            && seen.len() == fresh.len()
            && fresh.iter().all(|(v, _)| !rel.has(*v))
        {
            carried = (0..rel.width())
                .filter(|c| later(rel.vars[*c]) || !env.consts.contains_key(&rel.vars[*c]))
                .collect();
            let mut vars: Vec<VarId> = carried.iter().map(|c| rel.vars[*c]).collect();
            vars.extend(out.vars[rel.width()..].iter().copied());
            out.vars = vars;
            let mut by_col: Vec<(usize, usize)> = fresh
                .iter()
                .map(|(v, k)| (out.col(*v).expect("new var has a column"), *k))
                .collect();
            by_col.sort_unstable();
            direct = Some(by_col.into_iter().map(|(_, k)| k).collect());
        }
        // Whether the binding tells every two hits apart (so distinct input rows give
        // distinct output rows), for each row's attribute.
        let mut distinct = rel.distinct;
        for row in rel.rows() {
            plan.fill(row, &mut vals);
            let (hits, key) = self.fulltext_hits(env, args, &vals, span, values)?;
            distinct = distinct && key.kept_by(positions);
            if positions.len() > 4 && !hits.is_empty() {
                return Err(QueryError::Type {
                    name: "fulltext".to_owned(),
                    message: format!(
                        "returned a tuple of 4 values, the binding needs {}",
                        positions.len()
                    ),
                    span: Some(span),
                });
            }
            if let Some(cols) = &direct {
                // Every bound position is a new, distinct variable: each hit's values go
                // straight after the input row's.
                out.data.reserve(hits.len() * out.width());
                for h in &hits {
                    out.data.extend(carried.iter().map(|c| row[*c].clone()));
                    for &k in cols {
                        out.data.push(match k {
                            0 => Value::Ref(h.e),
                            1 => h.value.clone().map_or(Value::Nil, Value::String),
                            2 => Value::Ref(h.tx),
                            _ => Value::Double(h.score),
                        });
                    }
                }
                out.len += hits.len();
                self.check(out.len)?;
                continue;
            }
            for h in hits {
                let part = |k: usize| match k {
                    0 => Value::Ref(h.e),
                    1 => h.value.clone().map_or(Value::Nil, Value::String),
                    2 => Value::Ref(h.tx),
                    _ => Value::Double(h.score),
                };
                let tuple = positions
                    .iter()
                    .enumerate()
                    .filter_map(|(k, p)| p.map(|v| (v, part(k))));
                if fill_row(&rel, &out, row, &mut buf, tuple) {
                    out.push_row_from(&mut buf);
                }
            }
            self.check(out.len)?;
        }
        out.distinct = distinct && !self.limits.naive;
        Ok(out)
    }

    /// Call a function, handling those that read a database.
    fn call(
        &self,
        env: &Env<'_>,
        name: &str,
        args: &[CArg],
        vals: &[Value],
        span: vev_edn::Span,
    ) -> Result<Value, QueryError> {
        if name == "fulltext" {
            return self.fulltext_fn(env, args, vals, span);
        }
        if funcs::DB_FNS.contains(&name) {
            return self.db_fn(env, name, args, vals, span);
        }
        funcs::call(self.registry, name, vals)
    }

    fn db_fn(
        &self,
        env: &Env<'_>,
        name: &str,
        args: &[CArg],
        vals: &[Value],
        span: vev_edn::Span,
    ) -> Result<Value, QueryError> {
        let src_idx = match args.first() {
            Some(CArg::Src(i)) => Some(*i),
            _ => {
                return Err(QueryError::type_error(
                    name,
                    "expects a source ($) as its first argument".to_owned(),
                ))
            }
        };
        let src = self.source(env, src_idx, span)?;
        let want = |n: usize| {
            if vals.len() < n {
                Err(QueryError::type_error(
                    name,
                    format!("expects at least {n} arguments, got {}", vals.len()),
                ))
            } else {
                Ok(())
            }
        };
        want(3)?;
        let Some(e) = resolve_entity(src, &vals[1])? else {
            return Ok(match name {
                "missing?" => Value::Boolean(true),
                "get-else" => vals.get(3).cloned().unwrap_or(Value::Nil),
                _ => Value::Nil,
            });
        };
        let attr_of = |v: &Value| fn_attribute(src, v, Some(span));
        let first_value = |a: u64| {
            let mut found = None;
            src.scan(
                IndexOrder::Eavt,
                &[Component::Entity(e), Component::Entity(a)],
                &mut |d| {
                    if d.added {
                        found = Some(d.v.clone());
                        false
                    } else {
                        true
                    }
                },
            );
            found
        };
        match name {
            "missing?" => {
                let a = attr_of(&vals[2])?;
                Ok(Value::Boolean(first_value(a.id).is_none()))
            }
            "get-else" => {
                want(4)?;
                let a = attr_of(&vals[2])?;
                if a.cardinality == Cardinality::Many {
                    return Err(QueryError::type_error(
                        name,
                        format!(
                            "attribute {} is cardinality-many; get-else needs cardinality-one",
                            a.ident
                        ),
                    ));
                }
                if matches!(vals[3], Value::Nil) {
                    return Err(QueryError::type_error(
                        name,
                        "the default value must not be nil".to_owned(),
                    ));
                }
                Ok(first_value(a.id).unwrap_or_else(|| vals[3].clone()))
            }
            _ => {
                for v in &vals[2..] {
                    let a = attr_of(v)?;
                    if let Some(x) = first_value(a.id) {
                        return Ok(Value::Tuple(vec![Value::Ref(a.id), x].into()));
                    }
                }
                Ok(Value::Nil)
            }
        }
    }
}

impl Ctx<'_> {
    /// `(fulltext $ :attr "query")`: a relation of `[entity value tx score]` tuples, from
    /// the source's full-text index (or, in the naive plan, the reference scan).
    fn fulltext_fn(
        &self,
        env: &Env<'_>,
        args: &[CArg],
        vals: &[Value],
        span: vev_edn::Span,
    ) -> Result<Value, QueryError> {
        let rows: Vec<Value> = self
            .fulltext_hits(env, args, vals, span, true)?
            .0
            .into_iter()
            .map(|h| {
                Value::Tuple(
                    vec![
                        Value::Ref(h.e),
                        h.value.map_or(Value::Nil, Value::String),
                        Value::Ref(h.tx),
                        Value::Double(h.score),
                    ]
                    .into(),
                )
            })
            .collect();
        Ok(Value::Tuple(rows.into()))
    }

    /// The hits of a `fulltext` call with these argument values: from the source's index,
    /// or, in the naive plan, the reference scan (`values`: the source may leave the hits'
    /// values out when false); and what tells two of them apart.
    fn fulltext_hits(
        &self,
        env: &Env<'_>,
        args: &[CArg],
        vals: &[Value],
        span: vev_edn::Span,
        values: bool,
    ) -> Result<(Vec<crate::fulltext::Hit>, HitKey), QueryError> {
        let Some(CArg::Src(i)) = args.first() else {
            return Err(with_span(
                QueryError::type_error(
                    "fulltext",
                    "expects a source ($) as its first argument".to_owned(),
                ),
                span,
            ));
        };
        let src = self.source(env, Some(*i), span)?;
        let (attr, query) = fulltext_args(src, vals, Some(span))?;
        let key = HitKey {
            history: src.is_history(),
            one_per_entity: !attr.is_many() && src.obeys_schema(),
        };
        let hits = if self.limits.naive {
            crate::fulltext::scan_search(src, attr.id, &query)
        } else {
            src.fulltext(attr.id, &query, values)?
        };
        Ok((hits, key))
    }
}

/// What tells two hits of one full-text search apart. A hit is a datom: in a view of facts
/// at one time, one per entity and value (one per entity of a cardinality-one attribute,
/// where the source promises the schema holds); in a history view, one per entity, value
/// and transaction.
struct HitKey {
    history: bool,
    one_per_entity: bool,
}

impl HitKey {
    /// Whether a binding (`positions`: `?e ?v ?tx ?score`, `None` for `_`) keeps it.
    fn kept_by(&self, positions: &[Option<VarId>]) -> bool {
        let kept = |k: usize| positions.get(k).is_some_and(Option::is_some);
        if self.history {
            kept(0) && kept(1) && kept(2)
        } else {
            kept(0) && (kept(1) || self.one_per_entity)
        }
    }
}

/// The attribute a database function's argument names (a keyword, an entity id or a lookup
/// ref), or `query/unknown-attribute` naming the argument.
pub(crate) fn fn_attribute(
    src: &dyn crate::source::Source,
    v: &Value,
    span: Option<vev_edn::Span>,
) -> Result<std::sync::Arc<vev_core::Attribute>, QueryError> {
    let found = match v {
        Value::Keyword(k) => src.schema().attribute_by_ident(k),
        other => resolve_entity(src, other)?.and_then(|id| src.schema().attribute(id)),
    };
    found.cloned().ok_or_else(|| QueryError::UnknownAttribute {
        attr: v.to_string(),
        span,
    })
}

/// The attribute and the parsed query of a `fulltext` call's arguments (`$`, attribute,
/// query text): the attribute must exist and have `:db/fulltext`, the text must parse.
pub(crate) fn fulltext_args(
    src: &dyn crate::source::Source,
    vals: &[Value],
    span: Option<vev_edn::Span>,
) -> Result<
    (
        std::sync::Arc<vev_core::Attribute>,
        crate::fulltext::FtQuery,
    ),
    QueryError,
> {
    if vals.len() != 3 {
        return Err(QueryError::type_error(
            "fulltext",
            format!(
                "expects 3 arguments ($, an attribute, the query text), got {}",
                vals.len()
            ),
        ));
    }
    let attr = fn_attribute(src, &vals[1], span)?;
    if !attr.fulltext {
        return Err(crate::fulltext::FulltextError::NotIndexed {
            attr: attr.ident.to_string(),
        }
        .into());
    }
    let Value::String(text) = &vals[2] else {
        return Err(QueryError::type_error(
            "fulltext",
            format!("the query must be a string, got {}", vals[2]),
        ));
    };
    Ok((attr, crate::fulltext::FtQuery::parse(text)?))
}

/// The relation a function clause's rows go to: the input's variables, then the binding's
/// variables not bound yet (output variables already bound are checked for equality, not
/// rebound).
fn output_rel(rel: &Rel, binding: &CBinding) -> Rel {
    let mut vars = rel.vars.clone();
    for v in binding.vars() {
        if !rel.has(v) && !vars.contains(&v) {
            vars.push(v);
        }
    }
    let mut out = Rel::empty(vars);
    out.distinct = rel.distinct && matches!(binding, CBinding::Scalar(_));
    out
}

/// Fill `buf` with the output row of input `row` under `assignments` (variable, value):
/// false when an assignment contradicts a bound variable, or one bound twice in the binding
/// gets two values.
fn fill_row(
    rel: &Rel,
    out: &Rel,
    row: &[Value],
    buf: &mut Vec<Value>,
    assignments: impl IntoIterator<Item = (VarId, Value)>,
) -> bool {
    buf.clear();
    buf.extend_from_slice(row);
    buf.resize(out.width(), Value::Nil);
    for (var, val) in assignments {
        if let Some(col) = rel.col(var) {
            if !funcs::values_equal(&row[col], &val) {
                return false;
            }
            continue;
        }
        let col = out.col(var).expect("new var has a column");
        if col < row.len() {
            continue;
        }
        if !matches!(buf[col], Value::Nil) && buf[col] != val {
            return false;
        }
        buf[col] = val;
    }
    true
}

/// Where each argument of a call comes from, resolved once per clause: a column of the
/// relation or a constant.
struct ArgPlan {
    parts: Vec<Result<usize, Value>>,
}

impl ArgPlan {
    fn new(args: &[CArg], rel: &Rel) -> ArgPlan {
        ArgPlan {
            parts: args
                .iter()
                .map(|a| match a {
                    CArg::Var(v) => Ok(rel.col(*v).expect("argument bound")),
                    CArg::Const(c) => Err(edn_to_value(c)),
                    CArg::Src(i) => Err(Value::Long(*i as i64)),
                    CArg::Blank => Err(Value::Nil),
                })
                .collect(),
        }
    }

    fn fill(&self, row: &[Value], out: &mut Vec<Value>) {
        out.clear();
        out.extend(self.parts.iter().map(|p| match p {
            Ok(col) => row[*col].clone(),
            Err(v) => v.clone(),
        }));
    }
}

fn with_span(e: QueryError, span: vev_edn::Span) -> QueryError {
    match e {
        QueryError::Type {
            name,
            message,
            span: None,
        } => QueryError::Type {
            name,
            message,
            span: Some(span),
        },
        QueryError::Overflow { call, span: None } => QueryError::Overflow {
            call,
            span: Some(span),
        },
        QueryError::UnknownFunction { name, span: None } => QueryError::UnknownFunction {
            name,
            span: Some(span),
        },
        other => other,
    }
}

/// The assignments a function result makes under a binding form: one list per output tuple.
fn bind_tuples(
    name: &str,
    binding: &CBinding,
    result: Value,
    span: vev_edn::Span,
) -> Result<Vec<Vec<(VarId, Value)>>, QueryError> {
    if matches!(result, Value::Nil) {
        return Ok(Vec::new());
    }
    let seq = |v: Value| -> Result<Vec<Value>, QueryError> {
        match v {
            Value::Tuple(items) => Ok(items.to_vec()),
            Value::Nil => Ok(Vec::new()),
            other => Err(QueryError::Type {
                name: name.to_owned(),
                message: format!(
                    "returned {other}, which cannot be bound to a collection or tuple"
                ),
                span: Some(span),
            }),
        }
    };
    let tuple =
        |vars: &[Option<VarId>], v: Value| -> Result<Option<Vec<(VarId, Value)>>, QueryError> {
            let items = seq(v)?;
            if items.len() < vars.len() {
                return Err(QueryError::Type {
                    name: name.to_owned(),
                    message: format!(
                        "returned a tuple of {} values, the binding needs {}",
                        items.len(),
                        vars.len()
                    ),
                    span: Some(span),
                });
            }
            Ok(Some(
                vars.iter()
                    .zip(items)
                    .filter_map(|(var, val)| var.map(|var| (var, val)))
                    .collect(),
            ))
        };
    Ok(match binding {
        CBinding::Scalar(v) => vec![vec![(*v, result)]],
        CBinding::Tuple(vars) => tuple(vars, result)?.into_iter().collect(),
        CBinding::Coll(var) => seq(result)?
            .into_iter()
            .map(|v| var.map(|var| vec![(var, v)]).unwrap_or_default())
            .collect(),
        CBinding::Rel(vars) => {
            let mut out = Vec::new();
            for row in seq(result)? {
                if let Some(t) = tuple(vars, row)? {
                    out.push(t);
                }
            }
            out
        }
    })
}
