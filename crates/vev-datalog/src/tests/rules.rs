//! Rule sets: heads with and without required variables, several branches, values.

use super::*;

fn rules(text: &str) -> Vec<Rule> {
    crate::parse_rules(text).unwrap_or_else(|e| panic!("{text}: {e}"))
}

#[test]
fn rules_parse_heads_and_bodies() {
    let all = rules(
        "[[(ancestor ?a ?b) [?a :parent ?b]]
          [(ancestor ?a ?b) [?a :parent ?x] (ancestor ?x ?b)]]",
    );
    assert_eq!(all.len(), 2);
    assert_eq!(all[0].name, sym("ancestor"));
    assert_eq!(all[0].vars.free, [var("?a"), var("?b")]);
    assert!(all[0].vars.required.is_empty());
    assert_eq!(all[1].clauses.len(), 2);
    assert!(matches!(all[1].clauses[1], Clause::Rule { .. }));
    assert_eq!((all[1].span.start.line, all[1].span.start.column), (2, 11));
}

#[test]
fn rules_with_required_vars() {
    let all = rules("[[(named [?e] ?name) [?e :name ?name]]]");
    assert_eq!(all[0].vars.required, [var("?e")]);
    assert_eq!(all[0].vars.free, [var("?name")]);
    let all = rules("[[(check [?a ?b]) [(< ?a ?b)]]]");
    assert_eq!(all[0].vars.required.len(), 2);
    assert!(all[0].vars.free.is_empty());
    assert_eq!(all[0].vars.len(), 2);
}

#[test]
fn rules_with_not_or_and_expressions() {
    let all = rules(
        "[[(lonely ?p) [?p :person/name] (not [?p :person/friend])]
          [(adult ?p) (or [?p :age 18] (and [?p :age ?a] [(> ?a 18)]))]]",
    );
    assert!(matches!(all[0].clauses[1], Clause::Not { .. }));
    assert!(matches!(all[1].clauses[0], Clause::Or { .. }));
}

#[test]
fn rules_empty_set() {
    assert!(rules("[]").is_empty());
}

#[test]
fn rules_from_value() {
    let value = edn("[[(r ?a) [?a :x]] [(r ?a) [?a :y]]]");
    let all = crate::parse_rules_value(&value).unwrap();
    assert_eq!(all.len(), 2);
    let err =
        crate::parse_rules_value(&edn("[[(r ?a) [?a :x]] [(r ?a ?b) [?a :y ?b]]]")).unwrap_err();
    assert_eq!(err.code(), "query/rule-arity");
    assert_eq!(err.span(), None);
    assert!(!err.to_string().contains("line"), "{err}");
}
