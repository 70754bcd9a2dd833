//! Reading the parts of a spanned EDN form: variables, source variables, `_`, and the
//! children of collections; and [`spanned_from_edn`] for forms that arrive without text.
//!
//! Datalog gives meaning to symbols by their first character: `?x` is a variable, `$` and
//! `$name` are sources, `_` is a blank and `%` the rule set. Everything else is a name (of a
//! function, rule or aggregate) or, where a value is expected, a constant.

use vev_edn::{Edn, Keyword, Spanned, Symbol};

use crate::ast::{SrcVar, Var};
use crate::error::NO_SPAN;

/// Wraps a value without text in a [`Spanned`] tree whose spans are all empty, so that the
/// spanned parsers can read values passed as query inputs.
///
/// Map children are keys and values alternately, in the map's (sorted) order.
pub fn spanned_from_edn(edn: &Edn) -> Spanned {
    let children = match edn {
        Edn::List(items) | Edn::Vector(items) => items.iter().map(spanned_from_edn).collect(),
        Edn::Set(items) => items.iter().map(spanned_from_edn).collect(),
        Edn::Map(map) => map
            .iter()
            .flat_map(|(k, v)| [spanned_from_edn(k), spanned_from_edn(v)])
            .collect(),
        Edn::Tagged(_, value) => vec![spanned_from_edn(value)],
        _ => Vec::new(),
    };
    Spanned {
        value: edn.clone(),
        span: NO_SPAN,
        children,
    }
}

pub(crate) fn symbol(form: &Spanned) -> Option<&Symbol> {
    form.value.as_symbol()
}

pub(crate) fn keyword(form: &Spanned) -> Option<&Keyword> {
    form.value.as_keyword()
}

/// Whether `form` is the symbol with text `text`.
pub(crate) fn is_symbol(form: &Spanned, text: &str) -> bool {
    symbol(form).is_some_and(|s| s.as_str() == text)
}

/// `_`
pub(crate) fn is_blank(form: &Spanned) -> bool {
    is_symbol(form, "_")
}

/// `?name`
pub(crate) fn var(form: &Spanned) -> Option<Var> {
    symbol(form)
        .filter(|s| s.as_str().starts_with('?'))
        .map(|s| Var(s.clone()))
}

/// `$` or `$name`
pub(crate) fn src_var(form: &Spanned) -> Option<SrcVar> {
    symbol(form)
        .filter(|s| s.as_str().starts_with('$'))
        .map(|s| SrcVar(s.clone()))
}

/// A symbol that names something (a function, rule or aggregate): not a variable, source,
/// `_`, `%`, `.` or `...`.
pub(crate) fn plain_name(form: &Spanned) -> Option<&Symbol> {
    symbol(form).filter(|s| {
        let text = s.as_str();
        !text.starts_with(['?', '$']) && !["_", "%", ".", "..."].contains(&text)
    })
}

/// The children of a vector.
pub(crate) fn vector_items(form: &Spanned) -> Option<&[Spanned]> {
    matches!(form.value, Edn::Vector(_)).then_some(form.children.as_slice())
}

/// The children of a list.
pub(crate) fn list_items(form: &Spanned) -> Option<&[Spanned]> {
    matches!(form.value, Edn::List(_)).then_some(form.children.as_slice())
}

/// The children of a vector or a list.
pub(crate) fn seq_items(form: &Spanned) -> Option<&[Spanned]> {
    form.value.as_seq().map(|_| form.children.as_slice())
}

/// The vector of several forms, for quoting a run of section elements in an error.
pub(crate) fn vector_of(forms: &[Spanned]) -> Edn {
    Edn::Vector(forms.iter().map(|f| f.value.clone()).collect())
}
