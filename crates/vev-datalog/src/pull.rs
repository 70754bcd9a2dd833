//! Pull patterns: `[:a :b {:c [...]} *]`.
//!
//! An element is `*`, an attribute spec, or a map from attribute specs to what to pull from
//! the entities they reach. An attribute spec is a keyword (`:ns/_name` for the reverse
//! direction), the same with options (`[:attr :as "x" :limit 5 :default 0]`), or one of the
//! legacy list forms Datomic still reads: `(:attr :limit 5)`, `(limit :attr 5)` and
//! `(default :attr 0)`. A map value is a sub-pattern, `...` (recurse without a depth limit) or
//! a depth.
//!
//! Sub-patterns nest at about 5.4 KiB of stack per level in debug builds, so nesting stops
//! at [`PULL_DEPTH_MAX`] with `query/too-deep` (see the clause module for why).

use vev_edn::{Edn, Keyword, Spanned};

use crate::ast::{PullAttr, PullElem, PullPattern, PullSub};
use crate::error::{Invalid, SyntaxError};
use crate::form::{is_symbol, keyword, list_items, spanned_from_edn, symbol, vector_items};

const ELEM_FORMS: &str =
    "expected *, an attribute, [:attr options...], (:attr options...) or a map {:attr [...]}";

/// Parses a pull pattern from text.
pub fn parse_pull(text: &str) -> Result<PullPattern, SyntaxError> {
    parse_pull_edn(&vev_edn::parse_spanned(text)?)
}

/// Parses a pull pattern passed as a value (a query input); errors have no span.
pub fn parse_pull_value(edn: &Edn) -> Result<PullPattern, SyntaxError> {
    parse_pull_edn(&spanned_from_edn(edn))
}

/// Parses a pull pattern from already-read EDN.
pub fn parse_pull_edn(form: &Spanned) -> Result<PullPattern, SyntaxError> {
    parse_pattern(form, 0)
}

/// How deeply pull maps may nest sub-patterns, so that parsing (and pulling) fits in the
/// 2 MiB stack of a spawned thread.
pub const PULL_DEPTH_MAX: usize = 128;

/// A pattern vector nested in `depth` maps.
fn parse_pattern(form: &Spanned, depth: usize) -> Result<PullPattern, SyntaxError> {
    let Some(items) = vector_items(form) else {
        let reason = "a pull pattern is a vector such as [:db/id :person/name]";
        return Err(Invalid::Pull.at(form, reason));
    };
    let mut elems = Vec::with_capacity(items.len());
    for item in items {
        elems.push(parse_elem(item, depth)?);
    }
    Ok(PullPattern { elems })
}

fn parse_elem(form: &Spanned, depth: usize) -> Result<PullElem, SyntaxError> {
    if is_wildcard(form) {
        return Ok(PullElem::Wildcard);
    }
    if let Edn::Map(_) = form.value {
        return parse_map(form, depth);
    }
    Ok(PullElem::Attr(parse_attr_spec(form)?))
}

/// `*`, or `'*` as a Clojure client sends it: `(quote *)`.
fn is_wildcard(form: &Spanned) -> bool {
    match list_items(form) {
        Some([quote, star]) => is_symbol(quote, "quote") && is_symbol(star, "*"),
        Some(_) => false,
        None => is_symbol(form, "*"),
    }
}

/// `{attr-spec sub, ...}`, in source order.
fn parse_map(form: &Spanned, depth: usize) -> Result<PullElem, SyntaxError> {
    if depth >= PULL_DEPTH_MAX {
        return Err(SyntaxError::TooDeep {
            max: PULL_DEPTH_MAX,
            span: form.span,
        });
    }
    let mut entries = Vec::with_capacity(form.children.len() / 2);
    for pair in form.children.chunks(2) {
        let [key, value] = pair else {
            return Err(Invalid::Pull.at(form, "a map needs a value for each key"));
        };
        entries.push((parse_attr_spec(key)?, parse_sub(value, depth + 1)?));
    }
    Ok(PullElem::Map(entries))
}

/// A sub-pattern, `...`, or a recursion depth.
fn parse_sub(form: &Spanned, depth: usize) -> Result<PullSub, SyntaxError> {
    if vector_items(form).is_some() {
        return Ok(PullSub::Pattern(parse_pattern(form, depth)?));
    }
    if is_symbol(form, "...") {
        return Ok(PullSub::Recurse(None));
    }
    match form.value.as_integer().map(usize::try_from) {
        Some(Ok(depth)) => Ok(PullSub::Recurse(Some(depth))),
        _ => {
            let reason = "expected a pull pattern, ... or a non-negative recursion depth";
            Err(Invalid::Pull.at(form, reason))
        }
    }
}

/// `:attr`, `[:attr options...]`, `(:attr options...)`, `(limit :attr n)` or
/// `(default :attr value)`.
fn parse_attr_spec(form: &Spanned) -> Result<PullAttr, SyntaxError> {
    if let Some(attr) = keyword(form) {
        return Ok(PullAttr::new(attr.clone()));
    }
    if let Some(items) = vector_items(form) {
        return parse_attr_with_options(form, items);
    }
    match list_items(form) {
        Some(items @ [head, ..]) if keyword(head).is_some() => parse_attr_with_options(form, items),
        Some(items @ [head, ..]) if symbol(head).is_some() => parse_legacy_call(form, items),
        _ => Err(Invalid::Pull.at(form, ELEM_FORMS)),
    }
}

/// `[:attr :as x :limit n :default v]`: options in any order, each at most once.
fn parse_attr_with_options(form: &Spanned, items: &[Spanned]) -> Result<PullAttr, SyntaxError> {
    let Some((attr, options)) = items.split_first() else {
        return Err(Invalid::Pull.at(form, ELEM_FORMS));
    };
    let mut spec = PullAttr::new(attr_keyword(attr)?);
    for pair in options.chunks(2) {
        let [option, value] = pair else {
            let reason = "options come in pairs: :as, :limit or :default, then a value";
            return Err(Invalid::Pull.at(form, reason));
        };
        set_option(&mut spec, option, value)?;
    }
    Ok(spec)
}

fn set_option(spec: &mut PullAttr, option: &Spanned, value: &Spanned) -> Result<(), SyntaxError> {
    let name = keyword(option).map_or("", Keyword::as_str);
    let already = match name {
        "as" => spec.as_key.replace(value.value.clone()).is_some(),
        "limit" => spec.limit.replace(parse_limit(value)?).is_some(),
        "default" => spec.default.replace(value.value.clone()).is_some(),
        _ => {
            let reason = "unknown attribute option; expected :as, :limit or :default";
            return Err(Invalid::Pull.at(option, reason));
        }
    };
    if already {
        return Err(Invalid::Pull.at(option, "the option appears more than once"));
    }
    Ok(())
}

/// `(limit :attr n)` or `(default :attr value)`.
fn parse_legacy_call(form: &Spanned, items: &[Spanned]) -> Result<PullAttr, SyntaxError> {
    let [head, attr, value] = items else {
        return Err(Invalid::Pull.at(form, "expected (limit :attr n) or (default :attr value)"));
    };
    let mut spec = PullAttr::new(attr_keyword(attr)?);
    match symbol(head).map_or("", |s| s.as_str()) {
        "limit" => spec.limit = Some(parse_limit(value)?),
        "default" => spec.default = Some(value.value.clone()),
        _ => {
            let reason = "expected limit or default; or use [:attr :limit n :default value]";
            return Err(Invalid::Pull.at(head, reason));
        }
    }
    Ok(spec)
}

fn attr_keyword(form: &Spanned) -> Result<Keyword, SyntaxError> {
    keyword(form)
        .cloned()
        .ok_or_else(|| Invalid::Pull.at(form, "expected an attribute keyword"))
}

/// A non-negative integer, or `nil` for no limit.
fn parse_limit(form: &Spanned) -> Result<Option<usize>, SyntaxError> {
    if let Edn::Nil = form.value {
        return Ok(None);
    }
    match form.value.as_integer().map(usize::try_from) {
        Some(Ok(limit)) => Ok(Some(limit)),
        _ => Err(Invalid::Pull.at(form, "a limit must be a non-negative integer or nil")),
    }
}
