//! Queries: `[:find ... :keys ... :with ... :in ... :where ...]` or the map form
//! `{:find [...] :in [...] :where [...]}`.
//!
//! Parsing goes in two steps. First the query is cut into sections, each a keyword and the
//! forms that follow it (in the vector form, up to the next keyword; in the map form, the
//! elements of the keyword's value), so both forms share everything after. Then each section
//! is parsed on its own, except `:keys`, whose names are counted against `:find`.

use std::collections::BTreeSet;
use std::sync::Arc;

use vev_edn::{Edn, Keyword, Span, Spanned, Symbol};

use crate::ast::{
    Binding, FindElem, FindSpec, Input, PullSource, Query, ReturnMapKind, ReturnMaps, SrcVar, Var,
};
use crate::binding::parse_binding;
use crate::clause::parse_clauses;
use crate::error::{Invalid, SyntaxError};
use crate::form::{
    is_symbol, keyword, list_items, plain_name, seq_items, src_var, symbol, var, vector_items,
    vector_of,
};
use crate::pull::parse_pull_edn;

/// Parses a query from text.
pub fn parse_query(text: &str) -> Result<Query, SyntaxError> {
    parse_query_edn(&vev_edn::parse_spanned(text)?)
}

/// Parses a query from already-read EDN.
pub fn parse_query_edn(form: &Spanned) -> Result<Query, SyntaxError> {
    let sections = Sections::read(form)?;
    let Some(find_section) = sections.find else {
        return Err(SyntaxError::MissingFind { span: form.span });
    };
    let find = parse_find(&find_section)?;
    let return_maps = match sections.return_maps {
        Some((kind, section)) => Some(parse_return_maps(kind, &section, &find)?),
        None => None,
    };
    let with = match sections.with {
        Some(section) => parse_with(&section)?,
        None => Vec::new(),
    };
    let inputs = match sections.inputs {
        Some(section) => parse_inputs(section.items)?,
        None => vec![Input::Src(SrcVar::default_src(), form.span)],
    };
    let clauses = match sections.clauses {
        Some(section) => parse_clauses(section.items, 0)?,
        None => Vec::new(),
    };
    Ok(Query {
        find,
        return_maps,
        with,
        inputs,
        clauses,
        span: form.span,
    })
}

/// A section keyword and the forms that belong to it.
struct Section<'a> {
    keyword: &'a Spanned,
    items: &'a [Spanned],
}

impl Section<'_> {
    /// From the keyword to the last form.
    fn span(&self) -> Span {
        let end = self
            .items
            .last()
            .map_or(self.keyword.span.end, |f| f.span.end);
        Span {
            start: self.keyword.span.start,
            end,
        }
    }
}

#[derive(Default)]
struct Sections<'a> {
    find: Option<Section<'a>>,
    return_maps: Option<(ReturnMapKind, Section<'a>)>,
    with: Option<Section<'a>>,
    inputs: Option<Section<'a>>,
    clauses: Option<Section<'a>>,
}

impl<'a> Sections<'a> {
    fn read(form: &'a Spanned) -> Result<Sections<'a>, SyntaxError> {
        let list = match &form.value {
            Edn::Vector(_) => vector_sections(&form.children)?,
            Edn::Map(_) => map_sections(&form.children)?,
            _ => {
                let reason = "expected a vector [:find ... :where ...] or a map {:find [...]}";
                return Err(Invalid::Query.at(form, reason));
            }
        };
        let mut sections = Sections::default();
        for section in list {
            sections.add(section)?;
        }
        Ok(sections)
    }

    fn add(&mut self, section: Section<'a>) -> Result<(), SyntaxError> {
        let name = keyword(section.keyword).map_or("", Keyword::as_str);
        let slot = match name {
            "find" => &mut self.find,
            "with" => &mut self.with,
            "in" => &mut self.inputs,
            "where" => &mut self.clauses,
            "keys" | "strs" | "syms" => return self.add_return_maps(name, section),
            _ => {
                return Err(SyntaxError::UnknownSection {
                    section: section.keyword.value.clone(),
                    span: section.keyword.span,
                })
            }
        };
        if slot.is_some() {
            return Err(Invalid::Query.at(section.keyword, "the section appears more than once"));
        }
        *slot = Some(section);
        Ok(())
    }

    fn add_return_maps(&mut self, name: &str, section: Section<'a>) -> Result<(), SyntaxError> {
        if self.return_maps.is_some() {
            let reason = "only one of :keys, :strs and :syms may be given";
            return Err(keys_error(
                &section,
                vector_of(section.items),
                section.span(),
                reason,
            ));
        }
        let kind = match name {
            "keys" => ReturnMapKind::Keys,
            "strs" => ReturnMapKind::Strs,
            _ => ReturnMapKind::Syms,
        };
        self.return_maps = Some((kind, section));
        Ok(())
    }
}

/// The vector form: each keyword starts a section that runs to the next keyword.
fn vector_sections(items: &[Spanned]) -> Result<Vec<Section<'_>>, SyntaxError> {
    let mut sections = Vec::new();
    let mut start = 0;
    while let Some(kw) = items.get(start) {
        if keyword(kw).is_none() {
            let reason = "expected a section keyword such as :find";
            return Err(Invalid::Query.at(kw, reason));
        }
        let rest = &items[start + 1..];
        let len = rest
            .iter()
            .position(|f| keyword(f).is_some())
            .unwrap_or(rest.len());
        sections.push(Section {
            keyword: kw,
            items: &rest[..len],
        });
        start += 1 + len;
    }
    Ok(sections)
}

/// The map form: keys are section keywords, values vectors (or lists) of their forms.
fn map_sections(children: &[Spanned]) -> Result<Vec<Section<'_>>, SyntaxError> {
    let mut sections = Vec::new();
    for pair in children.chunks(2) {
        let [key, value] = pair else {
            return Err(Invalid::Query.at(&pair[0], "a map query needs a value for each key"));
        };
        if keyword(key).is_none() {
            return Err(SyntaxError::UnknownSection {
                section: key.value.clone(),
                span: key.span,
            });
        }
        let Some(items) = seq_items(value) else {
            let reason = format!("the value of {} must be a vector", key.value);
            return Err(Invalid::Query.at(value, reason));
        };
        sections.push(Section {
            keyword: key,
            items,
        });
    }
    Ok(sections)
}

/// `?a ?b` (relation), `?a .` (scalar), `[?a ...]` (collection) or `[?a ?b]` (tuple).
fn parse_find(section: &Section<'_>) -> Result<FindSpec, SyntaxError> {
    match section.items {
        [] => {
            let reason = "expected at least one element";
            Err(Invalid::Find.error(vector_of(&[]), section.keyword.span, reason))
        }
        [elem, dot] if is_symbol(dot, ".") => Ok(FindSpec::Scalar(parse_find_elem(elem)?)),
        [vector] if vector_items(vector).is_some() => parse_find_vector(vector),
        items => Ok(FindSpec::Rel(parse_find_elems(items)?)),
    }
}

/// `[?a ...]` or `[?a ?b]`.
fn parse_find_vector(form: &Spanned) -> Result<FindSpec, SyntaxError> {
    match vector_items(form).unwrap_or_default() {
        [] => Err(Invalid::Find.at(form, "expected [?x ...] or a tuple [?a ?b]")),
        [elem, dots] if is_symbol(dots, "...") => Ok(FindSpec::Coll(parse_find_elem(elem)?)),
        items => Ok(FindSpec::Tuple(parse_find_elems(items)?)),
    }
}

fn parse_find_elems(items: &[Spanned]) -> Result<Vec<FindElem>, SyntaxError> {
    items.iter().map(parse_find_elem).collect()
}

/// A variable, an aggregate `(count ?x)` or a pull expression `(pull ?e [...])`.
fn parse_find_elem(form: &Spanned) -> Result<FindElem, SyntaxError> {
    if let Some(v) = var(form) {
        return Ok(FindElem::Var(v, form.span));
    }
    if let Some(items) = list_items(form) {
        return parse_find_call(form, items);
    }
    let reason = if is_symbol(form, ".") {
        "'.' may only follow the one element of a scalar find: :find ?x ."
    } else if is_symbol(form, "...") {
        "'...' may only follow the one element of a collection find: :find [?x ...]"
    } else {
        "expected a variable, an aggregate (count ?x) or a pull expression (pull ?e [...])"
    };
    Err(Invalid::Find.at(form, reason))
}

/// `(pull ...)` or `(aggregate const* ?var)`.
fn parse_find_call(form: &Spanned, items: &[Spanned]) -> Result<FindElem, SyntaxError> {
    let Some((name, args)) = items.split_first() else {
        return Err(Invalid::Find.at(form, "expected an aggregate (count ?x) or (pull ?e [...])"));
    };
    let Some(name) = plain_name(name) else {
        return Err(Invalid::Find.at(name, "expected an aggregate or pull name"));
    };
    if name.as_str() == "pull" {
        return parse_find_pull(form, args);
    }
    let Some((last, consts)) = args.split_last() else {
        let reason = format!("aggregate {name} needs a variable as its last argument");
        return Err(Invalid::Find.at(form, reason));
    };
    let Some(v) = var(last) else {
        let reason = format!("the last argument of aggregate {name} must be a variable");
        return Err(Invalid::Find.at(last, reason));
    };
    Ok(FindElem::Aggregate {
        name: name.clone(),
        args: consts
            .iter()
            .map(aggregate_const)
            .collect::<Result<_, _>>()?,
        var: v,
        span: form.span,
    })
}

/// An argument of an aggregate before its variable: a constant.
fn aggregate_const(form: &Spanned) -> Result<Edn, SyntaxError> {
    match symbol(form) {
        Some(s) if s.as_str().starts_with(['?', '$']) || s.as_str() == "_" => {
            let reason = "only the last argument of an aggregate may be a variable; \
                          the others must be constants";
            Err(Invalid::Find.at(form, reason))
        }
        _ => Ok(form.value.clone()),
    }
}

/// `(pull ?e pattern)` or `(pull $src ?e pattern)`; the pattern is a vector or an input
/// variable.
fn parse_find_pull(form: &Spanned, args: &[Spanned]) -> Result<FindElem, SyntaxError> {
    let (src, rest) = match args
        .split_first()
        .map(|(first, rest)| (src_var(first), rest))
    {
        Some((Some(src), rest)) => (src, rest),
        _ => (SrcVar::default_src(), args),
    };
    let [entity, pattern] = rest else {
        let reason = "expected (pull ?e [pattern]) or (pull $src ?e [pattern])";
        return Err(Invalid::Find.at(form, reason));
    };
    let Some(entity) = var(entity) else {
        return Err(Invalid::Find.at(entity, "the entity of a pull must be a variable"));
    };
    let pattern = match var(pattern).or_else(|| pattern_name(pattern)) {
        Some(input) => PullSource::Input(input),
        None if vector_items(pattern).is_some() => {
            PullSource::Pattern(Arc::new(parse_pull_edn(pattern)?))
        }
        None => {
            let reason = "expected a pull pattern vector or a variable bound to one";
            return Err(Invalid::Find.at(pattern, reason));
        }
    };
    Ok(FindElem::Pull {
        src,
        var: entity,
        pattern,
        span: form.span,
    })
}

/// `:keys a b`, `:strs a b` or `:syms a b`: one symbol per element of a relation or tuple
/// find.
fn parse_return_maps(
    kind: ReturnMapKind,
    section: &Section<'_>,
    find: &FindSpec,
) -> Result<ReturnMaps, SyntaxError> {
    let names = section.items.iter().map(|form| {
        let reason = "expected a symbol naming a key";
        symbol(form)
            .cloned()
            .ok_or_else(|| keys_error(section, form.value.clone(), form.span, reason))
    });
    let names: Vec<Symbol> = names.collect::<Result<_, _>>()?;
    let written = vector_of(section.items);
    if let FindSpec::Scalar(_) | FindSpec::Coll(_) = find {
        let reason = "return maps need a relation or tuple find, not a scalar or collection";
        return Err(keys_error(section, written, section.span(), reason));
    }
    let elems = find.elems().len();
    if names.len() != elems {
        let reason = format!("{} names but :find has {elems} elements", names.len());
        return Err(keys_error(section, written, section.span(), reason));
    }
    Ok(ReturnMaps {
        kind,
        names,
        span: section.span(),
    })
}

fn keys_error(
    section: &Section<'_>,
    form: Edn,
    span: Span,
    reason: impl Into<String>,
) -> SyntaxError {
    let keys = Keyword::new("keys");
    SyntaxError::InvalidKeys {
        section: keyword(section.keyword).cloned().unwrap_or(keys),
        form,
        reason: reason.into(),
        span,
    }
}

/// `:with ?a ?b`: at least one variable.
fn parse_with(section: &Section<'_>) -> Result<Vec<Var>, SyntaxError> {
    if section.items.is_empty() {
        let reason = "expected at least one variable";
        return Err(Invalid::With.error(vector_of(&[]), section.keyword.span, reason));
    }
    let one =
        |form: &Spanned| var(form).ok_or_else(|| Invalid::With.at(form, "expected a variable"));
    section.items.iter().map(one).collect()
}

/// `:in`: sources, `%` and bindings; no variable, source or `%` twice.
/// A plain symbol naming a pull pattern input (Datomic's `pattern-name`), as a variable.
fn pattern_name(form: &Spanned) -> Option<Var> {
    symbol(form)
        .filter(|s| {
            let t = s.as_str();
            !t.starts_with('?') && !t.starts_with('$') && !["_", "...", "%", "."].contains(&t)
        })
        .map(|s| Var(s.clone()))
}

fn parse_inputs(items: &[Spanned]) -> Result<Vec<Input>, SyntaxError> {
    let mut seen = BTreeSet::new();
    let mut inputs = Vec::with_capacity(items.len());
    for form in items {
        inputs.push(parse_input(form)?);
        check_new_names(form, &mut seen)?;
    }
    Ok(inputs)
}

fn parse_input(form: &Spanned) -> Result<Input, SyntaxError> {
    if let Some(src) = src_var(form) {
        return Ok(Input::Src(src, form.span));
    }
    if is_symbol(form, "%") {
        return Ok(Input::Rules(form.span));
    }
    if let Some(name) = pattern_name(form) {
        return Ok(Input::Binding(Binding::Scalar(name), form.span));
    }
    Ok(Input::Binding(parse_binding(form, Invalid::In)?, form.span))
}

/// Records the names an input (already parsed, so its symbols are all names, `_` or `...`)
/// introduces; the first one seen before is a [`SyntaxError::DuplicateInput`].
fn check_new_names<'a>(
    form: &'a Spanned,
    seen: &mut BTreeSet<&'a Symbol>,
) -> Result<(), SyntaxError> {
    if let Some(name) = symbol(form).filter(|s| !["_", "..."].contains(&s.as_str())) {
        if !seen.insert(name) {
            return Err(SyntaxError::DuplicateInput {
                name: name.clone(),
                span: form.span,
            });
        }
    }
    form.children
        .iter()
        .try_for_each(|child| check_new_names(child, seen))
}
