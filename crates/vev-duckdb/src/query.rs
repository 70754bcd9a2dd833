//! `vev_query(path, query, in1 := ..., in2 := ...)`: a Datalog query's result as a table.
//!
//! The inputs after `$` in `:in` are the named parameters `in1` to `in8`, in order: DuckDB's
//! C API has neither variadic nor overloaded table functions, so they cannot be positional.
//!
//! The columns are the `:find` elements (or the `:keys`), named after their variables
//! (`?name` → `name`, `(avg ?age)` → `avg_age`). Their types come from the attributes the
//! variables are bound through (`[?e :person/age ?a]`: `?a` is BIGINT, `?e` an entity id,
//! BIGINT too), aggregates from their kind (`count` BIGINT, `avg` DOUBLE, `sum`/`min`/`max` their
//! argument's), pulls and collections JSON; a variable the patterns do not type (a function's
//! result, a rule's output) takes the type its values share, VARCHAR (EDN text) if they differ.
//!
//! Bind runs the query, since a column's type may depend on its values; the first scan hands
//! out that result and a statement executed again runs the query again.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use duckdb::core::LogicalTypeId;
use vev::query_ast::{self as ast, Clause, FindElem, Term};
use vev::{Db, Edn, Input, Query, QueryOptions};

use crate::args::{to_edn, Args, TimeView};
use crate::column::ColType;
use crate::dbs::{self, lock, Handle};
use crate::error::{ExtError, Result};
use crate::table::{time_parameters, Columns, Function, Materialized, Producer};

/// `vev_query`.
pub struct VevQuery;

/// How many `:in` inputs after `$` a call may pass (`in1` .. `in8`).
pub const MAX_INPUTS: usize = 8;

/// A bound query call.
pub struct Spec {
    handle: Arc<Handle>,
    view: TimeView,
    query: Query,
    /// The `:in` values after `$`, in order.
    inputs: Vec<Edn>,
    /// The result bind computed, for the first scan.
    first: Mutex<Option<Vec<Vec<Edn>>>>,
}

impl Function for VevQuery {
    const NAME: &'static str = "vev_query";
    type Spec = Spec;

    fn parameters() -> Vec<LogicalTypeId> {
        vec![LogicalTypeId::Varchar, LogicalTypeId::Varchar]
    }

    fn named() -> Vec<(String, LogicalTypeId)> {
        let mut named = time_parameters();
        named.extend((1..=MAX_INPUTS).map(|i| (format!("in{i}"), LogicalTypeId::Any)));
        named
    }

    fn bind(args: &Args<'_>) -> Result<(Columns, Spec)> {
        let handle = dbs::handle(&args.text(0, "database path")?)?;
        let text = args.text(1, "query")?;
        let query = parsed(&text)?;
        let inputs = inputs(&query, args)?;
        let spec = Spec {
            handle,
            view: args.time_view()?,
            query,
            inputs,
            first: Mutex::new(None),
        };
        let db = spec.db()?;
        let rows = spec.run(&db)?;
        let columns = columns(&spec, &db, &rows);
        *lock(&spec.first) = Some(rows);
        Ok((columns, spec))
    }

    fn start(spec: &Spec) -> Result<Box<dyn Producer>> {
        let rows = match lock(&spec.first).take() {
            Some(rows) => rows,
            None => spec.run(&spec.db()?)?,
        };
        Ok(Materialized::boxed(rows))
    }
}

/// The compiled query for `text`: parsed once per process and kept (with the plan its runs
/// choose, which later runs reuse while the index counts hold), up to `KEPT_QUERIES` texts.
fn parsed(text: &str) -> Result<Query> {
    static KEPT: OnceLock<Mutex<HashMap<String, Query>>> = OnceLock::new();
    let kept = KEPT.get_or_init(Mutex::default);
    if let Some(q) = lock(kept).get(text) {
        return Ok(q.clone());
    }
    let q = Query::parse(text)?;
    let mut kept = lock(kept);
    if kept.len() >= KEPT_QUERIES {
        kept.clear();
    }
    kept.insert(text.to_owned(), q.clone());
    Ok(q)
}

/// How many query texts `parsed` keeps.
const KEPT_QUERIES: usize = 512;

impl Spec {
    fn db(&self) -> Result<Db> {
        Ok(self.view.apply(self.handle.db()?))
    }

    fn run(&self, db: &Db) -> Result<Vec<Vec<Edn>>> {
        let mut values = self.inputs.iter();
        let mut inputs = Vec::with_capacity(self.query.ast().inputs.len());
        for input in &self.query.ast().inputs {
            inputs.push(match input {
                ast::Input::Src(..) => Input::Db(db),
                ast::Input::Rules(_) | ast::Input::Binding(..) => match values.next() {
                    Some(v) => Input::Edn(v),
                    None => return Err(ExtError::new("duckdb/internal", "an input went missing")),
                },
            });
        }
        let mut rows = Vec::new();
        self.query
            .run_rows::<ExtError>(&inputs, &QueryOptions::default(), false, |row| {
                rows.push(row);
                Ok(())
            })?;
        Ok(rows)
    }
}

/// The query's `:in` values from the named parameters `in1`, `in2`, ...: one per `:in`
/// element after the database. A rule set (`%`), and a collection, tuple or relation binding given as text, is
/// read as EDN; other arguments become the EDN of their DuckDB value.
fn inputs(query: &Query, args: &Args<'_>) -> Result<Vec<Edn>> {
    let wanted: Vec<&ast::Input> = query
        .ast()
        .inputs
        .iter()
        .filter(|i| !matches!(i, ast::Input::Src(..)))
        .collect();
    let sources = query.ast().inputs.len() - wanted.len();
    if sources != 1 {
        return Err(ExtError::argument(format!(
            "vev_query: the query's :in names {sources} databases; a call has exactly one ($)"
        )));
    }
    let given: Vec<_> = (1..=MAX_INPUTS)
        .map(|i| args.named(&format!("in{i}")))
        .collect();
    let count = given.iter().filter(|v| v.is_some()).count();
    if given.iter().skip(count).any(Option::is_some) {
        return Err(ExtError::argument(
            "vev_query: the inputs are in1, in2, ... without gaps",
        ));
    }
    if count != wanted.len() {
        return Err(ExtError::argument(format!(
            "vev_query: the query's :in takes {} input(s) after $ (in1 := ...), the call gives {count}",
            wanted.len()
        )));
    }
    let mut out = Vec::with_capacity(count);
    for (input, value) in wanted.into_iter().zip(given.into_iter().flatten()) {
        let v = to_edn(&value)?;
        let edn_text = matches!(
            input,
            ast::Input::Rules(_)
                | ast::Input::Binding(
                    ast::Binding::Coll(_) | ast::Binding::Tuple(_) | ast::Binding::Rel(_),
                    _
                )
        );
        out.push(match v {
            Edn::String(text) if edn_text => vev::edn::parse(&text)?,
            v => v,
        });
    }
    Ok(out)
}

/// The output columns: names from the find elements (or `:keys`), types from the schema,
/// checked against (and, where the schema says nothing, taken from) the values.
fn columns(spec: &Spec, db: &Db, rows: &[Vec<Edn>]) -> Vec<(String, ColType)> {
    let ast = spec.query.ast();
    let elems = ast.find.elems();
    let mut names: Vec<String> = match &ast.return_maps {
        Some(maps) => maps.names.iter().map(|n| n.as_str().to_owned()).collect(),
        None => elems.iter().map(elem_name).collect(),
    };
    dedupe(&mut names);
    let mut out = Vec::with_capacity(elems.len());
    for (i, (elem, name)) in elems.iter().zip(names).enumerate() {
        let values = || rows.iter().filter_map(move |r| r.get(i));
        let declared = static_type(ast, db, elem, &spec.inputs);
        let ty = match declared {
            Some(t) if values().all(|v| t.fits(v)) => t,
            _ => match ColType::for_values(values()) {
                Some(t) if values().all(|v| t.fits(v)) => t,
                Some(_) => ColType::Varchar,
                None => declared.unwrap_or(ColType::Varchar),
            },
        };
        out.push((name, ty));
    }
    out
}

fn elem_name(elem: &FindElem) -> String {
    let var = |v: &ast::Var| v.name().trim_start_matches('?').to_owned();
    match elem {
        FindElem::Var(v, _) => var(v),
        FindElem::Aggregate { name, var: v, .. } => format!("{}_{}", name.as_str(), var(v))
            .chars()
            .map(|c| if c.is_alphanumeric() { c } else { '_' })
            .collect(),
        FindElem::Pull { var: v, .. } => var(v),
    }
}

/// Repeated names get `_2`, `_3`, ...: DuckDB needs each column's name once.
fn dedupe(names: &mut [String]) {
    for i in 1..names.len() {
        let mut n = 2;
        let base = names[i].clone();
        while names[..i].contains(&names[i]) {
            names[i] = format!("{base}_{n}");
            n += 1;
        }
    }
}

/// The type a find element has by the query's text and the schema, if they settle it.
fn static_type(q: &ast::Query, db: &Db, elem: &FindElem, inputs: &[Edn]) -> Option<ColType> {
    match elem {
        FindElem::Var(v, _) => var_type(q, db, v, inputs),
        FindElem::Pull { .. } => Some(ColType::Json),
        FindElem::Aggregate {
            name, args, var, ..
        } => match name.as_str() {
            "count" | "count-distinct" => Some(ColType::BigInt),
            "avg" | "median" | "variance" | "stddev" => Some(ColType::Double),
            "sum" => var_type(q, db, var, inputs)
                .filter(|t| matches!(t, ColType::BigInt | ColType::Double)),
            "min" | "max" if args.is_empty() => var_type(q, db, var, inputs),
            "min" | "max" | "distinct" | "sample" | "rand" => Some(ColType::Json),
            _ => None,
        },
    }
}

/// The type of `?v` by the first pattern that binds it, or the `:in` value it is bound to.
fn var_type(q: &ast::Query, db: &Db, v: &ast::Var, inputs: &[Edn]) -> Option<ColType> {
    for clause in &q.clauses {
        let Clause::Pattern(p) = clause else { continue };
        let is = |t: &Term| matches!(t, Term::Var(x) if x == v);
        if is(&p.terms[0]) || is(&p.terms[1]) || is(&p.terms[3]) {
            return Some(ColType::BigInt);
        }
        if is(&p.terms[4]) {
            return Some(ColType::Boolean);
        }
        if is(&p.terms[2]) {
            if let Term::Const(Edn::Keyword(k)) = &p.terms[1] {
                let attr = db.attribute(k)?;
                return Some(ColType::of_value_type(attr.value_type)).filter(|t| {
                    *t != ColType::Varchar || attr.value_type == vev::ValueType::String
                });
            }
        }
    }
    let bindings = q
        .inputs
        .iter()
        .filter(|i| !matches!(i, ast::Input::Src(..)));
    for (input, value) in bindings.zip(inputs) {
        if let ast::Input::Binding(ast::Binding::Scalar(x), _) = input {
            if x == v {
                return ColType::of_edn(value);
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeated_names_are_numbered() {
        let mut names = vec![
            "e".to_owned(),
            "e".to_owned(),
            "x".to_owned(),
            "e".to_owned(),
        ];
        dedupe(&mut names);
        assert_eq!(names, ["e", "e_2", "x", "e_3"]);
    }
}
