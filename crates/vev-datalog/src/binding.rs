//! Binding forms (`?x`, `[?a ?b]`, `[?x ...]`, `[[?a ?b]]`) and variable lists (the heads of
//! rules and the variables of `not-join` and `or-join`).
//!
//! Both appear in more than one place: bindings in `:in` and after function expressions,
//! variable lists in rule heads and clauses. The caller passes the [`Invalid`] family its
//! errors belong to.

use std::collections::BTreeSet;

use vev_edn::Spanned;

use crate::ast::{BindElem, Binding, RuleVars, Var};
use crate::error::{Invalid, SyntaxError};
use crate::form::{is_blank, is_symbol, var, vector_items};

const BINDING_FORMS: &str =
    "expected a variable ?x, a tuple [?a ?b], a collection [?x ...] or a relation [[?a ?b]]";

/// A binding form.
pub(crate) fn parse_binding(form: &Spanned, invalid: Invalid) -> Result<Binding, SyntaxError> {
    if let Some(v) = var(form) {
        return Ok(Binding::Scalar(v));
    }
    let Some(items) = vector_items(form) else {
        return Err(invalid.at(form, BINDING_FORMS));
    };
    match items {
        [] => Err(invalid.at(
            form,
            format!("an empty vector binds nothing; {BINDING_FORMS}"),
        )),
        [inner] if vector_items(inner).is_some() => parse_rel(inner, invalid),
        [elem, dots] if is_symbol(dots, "...") => Ok(Binding::Coll(bind_elem(elem, invalid)?)),
        _ => {
            let elems = items.iter().map(|elem| bind_elem(elem, invalid));
            Ok(Binding::Tuple(elems.collect::<Result<_, _>>()?))
        }
    }
}

/// `[[?a ?b]]`, given the inner vector.
fn parse_rel(inner: &Spanned, invalid: Invalid) -> Result<Binding, SyntaxError> {
    let items = vector_items(inner).unwrap_or_default();
    if items.is_empty() {
        return Err(invalid.at(
            inner,
            "a relation binding needs at least one position: [[?a ?b]]",
        ));
    }
    let elems = items.iter().map(|elem| bind_elem(elem, invalid));
    Ok(Binding::Rel(elems.collect::<Result<_, _>>()?))
}

/// A position of a tuple, collection or relation: a variable or `_`.
fn bind_elem(form: &Spanned, invalid: Invalid) -> Result<BindElem, SyntaxError> {
    if let Some(v) = var(form) {
        return Ok(BindElem::Var(v));
    }
    if is_blank(form) {
        return Ok(BindElem::Blank);
    }
    let reason = if is_symbol(form, "...") {
        "'...' may only follow the one variable of a collection binding [?x ...]"
    } else {
        "expected a variable or _ in this position of a binding"
    };
    Err(invalid.at(form, reason))
}

/// The variables of a rule head or an `or-join`: optionally a vector of required variables
/// first, then free variables. At least one variable, none twice.
pub(crate) fn parse_rule_vars(
    whole: &Spanned,
    items: &[Spanned],
    invalid: Invalid,
) -> Result<RuleVars, SyntaxError> {
    let (required, free) = match items.split_first() {
        Some((first, rest)) if vector_items(first).is_some() => {
            let required = vector_items(first).unwrap_or_default();
            if required.is_empty() {
                let reason = "the vector of required variables must not be empty";
                return Err(invalid.at(first, reason));
            }
            (parse_vars(required, invalid)?, rest)
        }
        _ => (Vec::new(), items),
    };
    let vars = RuleVars {
        required,
        free: parse_vars(free, invalid)?,
    };
    if vars.is_empty() {
        return Err(invalid.at(whole, "expected at least one variable"));
    }
    check_distinct(vars.all().zip(items_flat(items)), invalid)?;
    Ok(vars)
}

/// A vector of variables, as after `not-join`: at least one, none twice.
pub(crate) fn parse_var_vector(form: &Spanned, invalid: Invalid) -> Result<Vec<Var>, SyntaxError> {
    let Some(items) = vector_items(form) else {
        return Err(invalid.at(form, "expected a vector of variables [?a ?b]"));
    };
    if items.is_empty() {
        return Err(invalid.at(form, "expected at least one variable"));
    }
    let vars = parse_vars(items, invalid)?;
    check_distinct(vars.iter().zip(items), invalid)?;
    Ok(vars)
}

fn parse_vars(items: &[Spanned], invalid: Invalid) -> Result<Vec<Var>, SyntaxError> {
    let one = |form: &Spanned| {
        let reason = if vector_items(form).is_some() {
            "only the first element may be a vector of required variables"
        } else {
            "expected a variable"
        };
        var(form).ok_or_else(|| invalid.at(form, reason))
    };
    items.iter().map(one).collect()
}

/// The forms of `items` with the vector of required variables (if any) spliced in, in the
/// order of [`RuleVars::all`].
fn items_flat(items: &[Spanned]) -> impl Iterator<Item = &Spanned> {
    items.iter().flat_map(|form| match vector_items(form) {
        Some(inner) => inner.iter(),
        None => std::slice::from_ref(form).iter(),
    })
}

fn check_distinct<'a>(
    vars: impl Iterator<Item = (&'a Var, &'a Spanned)>,
    invalid: Invalid,
) -> Result<(), SyntaxError> {
    let mut seen = BTreeSet::new();
    for (v, form) in vars {
        if !seen.insert(v) {
            return Err(invalid.at(form, format!("variable {} appears twice", v.name())));
        }
    }
    Ok(())
}
