//! Pull patterns: every element form, options, maps, recursion, and values.

use super::*;
use crate::{parse_pull, parse_pull_value};

fn pull(text: &str) -> Vec<PullElem> {
    parse_pull(text)
        .unwrap_or_else(|e| panic!("{text}: {e}"))
        .elems
}

fn one(text: &str) -> PullElem {
    let mut elems = pull(&format!("[{text}]"));
    assert_eq!(elems.len(), 1, "{text}");
    elems.remove(0)
}

fn attr(text: &str) -> PullAttr {
    match one(text) {
        PullElem::Attr(a) => a,
        other => panic!("{other:?}"),
    }
}

fn with(attr: &str, f: impl FnOnce(&mut PullAttr)) -> PullAttr {
    let mut a = PullAttr::new(kw(attr));
    f(&mut a);
    a
}

#[test]
fn pull_wildcard() {
    assert_eq!(one("*"), PullElem::Wildcard);
    let quoted = Edn::Vector(vec![Edn::List(vec![edn("quote"), edn("*")])]);
    assert_eq!(
        parse_pull_value(&quoted).unwrap().elems,
        [PullElem::Wildcard]
    );
}

#[test]
fn pull_attributes() {
    assert_eq!(
        pull("[:db/id :person/name :person/_friend]"),
        [
            PullElem::Attr(PullAttr::new(kw("db/id"))),
            PullElem::Attr(PullAttr::new(kw("person/name"))),
            PullElem::Attr(PullAttr::new(kw("person/_friend"))),
        ]
    );
    assert!(attr(":person/_friend").attr.is_reverse());
}

#[test]
fn pull_attr_options() {
    assert_eq!(
        attr("[:a :as \"x\"]"),
        with("a", |a| a.as_key = Some(edn("\"x\"")))
    );
    assert_eq!(
        attr("[:a :limit 5]"),
        with("a", |a| a.limit = Some(Some(5)))
    );
    assert_eq!(attr("[:a :limit nil]"), with("a", |a| a.limit = Some(None)));
    assert_eq!(
        attr("[:a :default 0]"),
        with("a", |a| a.default = Some(edn("0")))
    );
    assert_eq!(attr("[:a]"), PullAttr::new(kw("a")));
}

#[test]
fn pull_attr_options_combined() {
    let expected = with("p/_f", |a| {
        a.as_key = Some(edn(":friends"));
        a.limit = Some(Some(2));
        a.default = Some(edn("[]"));
    });
    assert_eq!(attr("[:p/_f :limit 2 :as :friends :default []]"), expected);
}

#[test]
fn pull_legacy_list_forms() {
    assert_eq!(
        attr("(:a :limit 5 :as x)"),
        with("a", |a| {
            a.limit = Some(Some(5));
            a.as_key = Some(edn("x"));
        })
    );
    assert_eq!(attr("(limit :a 5)"), with("a", |a| a.limit = Some(Some(5))));
    assert_eq!(attr("(limit :a nil)"), with("a", |a| a.limit = Some(None)));
    assert_eq!(
        attr("(default :a \"none\")"),
        with("a", |a| a.default = Some(edn("\"none\"")))
    );
}

#[test]
fn pull_maps() {
    let PullElem::Map(entries) = one("{:friend [:name {:pet [*]}], (:kids :limit 2) [:db/id]}")
    else {
        panic!()
    };
    assert_eq!(entries.len(), 2);
    assert_eq!(entries[0].0, PullAttr::new(kw("friend")));
    let PullSub::Pattern(sub) = &entries[0].1 else {
        panic!()
    };
    assert_eq!(sub.elems.len(), 2);
    assert!(
        matches!(&sub.elems[1], PullElem::Map(m) if m[0].1 == PullSub::Pattern(PullPattern { elems: vec![PullElem::Wildcard] }))
    );
    assert_eq!(entries[1].0.limit, Some(Some(2)));
}

#[test]
fn pull_map_keeps_source_order() {
    let PullElem::Map(entries) = one("{:z [:a] :a [:b] [:m :as \"m\"] [:c]}") else {
        panic!()
    };
    let names: Vec<&str> = entries.iter().map(|(a, _)| a.attr.as_str()).collect();
    assert_eq!(names, ["z", "a", "m"]);
}

#[test]
fn pull_recursion() {
    let PullElem::Map(entries) = one("{:friend ... :parent 3 :child 0}") else {
        panic!()
    };
    let subs: Vec<&PullSub> = entries.iter().map(|(_, s)| s).collect();
    assert_eq!(
        subs,
        [
            &PullSub::Recurse(None),
            &PullSub::Recurse(Some(3)),
            &PullSub::Recurse(Some(0))
        ]
    );
}

#[test]
fn pull_empty_pattern() {
    assert!(pull("[]").is_empty());
}

#[test]
fn pull_from_value() {
    let pattern = parse_pull_value(&edn("[:a {:b [:c]}]")).unwrap();
    assert_eq!(pattern.elems.len(), 2);
    let err = parse_pull_value(&edn("[:a 1]")).unwrap_err();
    assert_eq!(err.code(), "pull/invalid-pattern");
    assert_eq!(err.span(), None);
}
