//! Rule sets: `[[(name ?a [?req] ?b) clause ...] ...]`.
//!
//! Each vector is one branch of a rule; branches with the same name are alternatives, so they
//! must agree on the number of head variables (checked here, since it needs no database).

use std::collections::BTreeMap;

use vev_edn::{Edn, Spanned, Symbol};

use crate::ast::Rule;
use crate::binding::parse_rule_vars;
use crate::clause::parse_clauses;
use crate::error::{Invalid, SyntaxError};
use crate::form::{list_items, plain_name, spanned_from_edn, vector_items};

/// Names that are clause keywords, so a rule with such a name could never be called.
const RESERVED: [&str; 5] = ["not", "not-join", "or", "or-join", "and"];

/// Parses a rule set from text.
pub fn parse_rules(text: &str) -> Result<Vec<Rule>, SyntaxError> {
    parse_rules_edn(&vev_edn::parse_spanned(text)?)
}

/// Parses a rule set passed as a value (a query input); errors have no span.
pub fn parse_rules_value(edn: &Edn) -> Result<Vec<Rule>, SyntaxError> {
    parse_rules_edn(&spanned_from_edn(edn))
}

/// Parses a rule set from already-read EDN.
pub fn parse_rules_edn(form: &Spanned) -> Result<Vec<Rule>, SyntaxError> {
    let Some(items) = vector_items(form) else {
        let reason = "a rule set is a vector of rules [[(name ?a) clause ...] ...]";
        return Err(Invalid::Rule.at(form, reason));
    };
    let mut arities: BTreeMap<Symbol, usize> = BTreeMap::new();
    let mut rules = Vec::with_capacity(items.len());
    for item in items {
        let (rule, head) = parse_rule(item)?;
        let expected = *arities.entry(rule.name.clone()).or_insert(rule.vars.len());
        if rule.vars.len() != expected {
            return Err(SyntaxError::RuleArity {
                name: rule.name,
                expected,
                found: rule.vars.len(),
                span: head.span,
            });
        }
        rules.push(rule);
    }
    Ok(rules)
}

/// One branch, `[(name vars...) clause ...]`, and its head form.
fn parse_rule(form: &Spanned) -> Result<(Rule, &Spanned), SyntaxError> {
    let shape = "expected a rule [(name ?a ...) clause ...]";
    let Some(items) = vector_items(form) else {
        return Err(Invalid::Rule.at(form, shape));
    };
    let Some((head, body)) = items.split_first() else {
        return Err(Invalid::Rule.at(form, shape));
    };
    let Some((name, vars)) = list_items(head).and_then(|items| items.split_first()) else {
        return Err(Invalid::Rule.at(head, "expected a rule head (name ?a ...)"));
    };
    let Some(name) = plain_name(name).filter(|s| !RESERVED.contains(&s.as_str())) else {
        return Err(Invalid::Rule.at(name, "expected a rule name"));
    };
    if body.is_empty() {
        return Err(Invalid::Rule.at(form, format!("rule {name} has no clauses")));
    }
    let rule = Rule {
        name: name.clone(),
        vars: parse_rule_vars(head, vars, Invalid::Rule)?,
        clauses: parse_clauses(body, 0)?,
        span: form.span,
    };
    Ok((rule, head))
}
