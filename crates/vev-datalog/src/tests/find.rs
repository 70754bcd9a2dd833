//! `:find` (the four shapes, aggregates, pull), `:keys`/`:strs`/`:syms`, `:with`, and the
//! two query forms.

use std::sync::Arc;

use super::*;

fn find(text: &str) -> FindSpec {
    query(&format!("[:find {text} :where [?e :a ?v]]")).find
}

fn find_var(name: &str) -> FindElem {
    match find(name) {
        FindSpec::Rel(mut elems) => elems.remove(0),
        other => panic!("{other:?}"),
    }
}

fn elem_names(elems: &[FindElem]) -> Vec<&str> {
    elems
        .iter()
        .map(|e| match e {
            FindElem::Var(v, _) => v.name(),
            other => panic!("{other:?}"),
        })
        .collect()
}

#[test]
fn find_relation() {
    let FindSpec::Rel(elems) = find("?e ?v") else {
        panic!()
    };
    assert_eq!(elem_names(&elems), ["?e", "?v"]);
}

#[test]
fn find_scalar() {
    let FindSpec::Scalar(FindElem::Var(v, span)) = find("?v .") else {
        panic!()
    };
    assert_eq!(v, var("?v"));
    assert_eq!((span.start.column, span.end.column), (8, 10));
}

#[test]
fn find_collection() {
    let FindSpec::Coll(FindElem::Var(v, _)) = find("[?v ...]") else {
        panic!()
    };
    assert_eq!(v, var("?v"));
}

#[test]
fn find_tuple() {
    let FindSpec::Tuple(elems) = find("[?e ?v]") else {
        panic!()
    };
    assert_eq!(elem_names(&elems), ["?e", "?v"]);
}

#[test]
fn find_spec_elems_helper() {
    assert_eq!(find("?v .").elems().len(), 1);
    assert_eq!(find("[?e ?v]").elems().len(), 2);
}

#[test]
fn aggregates() {
    let cases: [(&str, &str, Vec<Edn>); 5] = [
        ("(count ?v)", "count", vec![]),
        ("(min 3 ?v)", "min", vec![Edn::Integer(3)]),
        ("(sample 2 ?v)", "sample", vec![Edn::Integer(2)]),
        ("(count-distinct ?v)", "count-distinct", vec![]),
        (
            "(my.ns/agg :k \"s\" ?v)",
            "my.ns/agg",
            vec![edn(":k"), edn("\"s\"")],
        ),
    ];
    for (text, name, consts) in cases {
        let FindElem::Aggregate {
            name: n,
            args,
            var: v,
            ..
        } = find_var(text)
        else {
            panic!("{text}")
        };
        assert_eq!((n, args, v), (sym(name), consts, var("?v")), "{text}");
    }
}

#[test]
fn aggregates_mixed_with_vars() {
    let FindSpec::Rel(elems) = find("?e (sum ?v) (max ?v)") else {
        panic!()
    };
    assert_eq!(elems.len(), 3);
    assert!(matches!(elems[2], FindElem::Aggregate { ref name, .. } if name.as_str() == "max"));
}

#[test]
fn pull_in_find() {
    let FindElem::Pull {
        src: s,
        var: v,
        pattern,
        ..
    } = find_var("(pull ?e [:person/name {:person/friend [:db/id]}])")
    else {
        panic!()
    };
    assert_eq!((s, v), (SrcVar::default_src(), var("?e")));
    let PullSource::Pattern(pattern) = pattern else {
        panic!()
    };
    assert_eq!(pattern.elems.len(), 2);
}

#[test]
fn pull_in_find_with_source() {
    let FindElem::Pull { src: s, .. } = find_var("(pull $hist ?e [*])") else {
        panic!()
    };
    assert_eq!(s, src("$hist"));
}

#[test]
fn pull_in_find_pattern_from_input() {
    let q = query("[:find (pull ?e ?pat) . :in $ ?pat :where [?e :a]]");
    let FindSpec::Scalar(FindElem::Pull { pattern, .. }) = q.find else {
        panic!()
    };
    assert_eq!(pattern, PullSource::Input(var("?pat")));
}

#[test]
fn pull_in_find_collection() {
    let FindSpec::Coll(FindElem::Pull { pattern, .. }) = find("[(pull ?e [:a]) ...]") else {
        panic!()
    };
    let expected = PullPattern {
        elems: vec![PullElem::Attr(PullAttr::new(kw("a")))],
    };
    assert_eq!(pattern, PullSource::Pattern(Arc::new(expected)));
}

#[test]
fn return_maps_keys_strs_syms() {
    for (section, kind) in [
        ("keys", ReturnMapKind::Keys),
        ("strs", ReturnMapKind::Strs),
        ("syms", ReturnMapKind::Syms),
    ] {
        let q = query(&format!(
            "[:find ?e ?v :{section} id value :where [?e :a ?v]]"
        ));
        let maps = q.return_maps.unwrap();
        assert_eq!(maps.kind, kind);
        assert_eq!(maps.names, [sym("id"), sym("value")]);
        assert_eq!((maps.span.start.column, maps.span.end.column), (14, 28));
    }
}

#[test]
fn return_maps_with_tuple_find() {
    let q = query("[:find [?e ?v] :keys e v :where [?e :a ?v]]");
    assert_eq!(q.return_maps.unwrap().names.len(), 2);
}

#[test]
fn with_vars() {
    let q = query("[:find ?e (count ?v) :with ?x ?e :where [?e :a ?v] [?x :b ?v]]");
    assert_eq!(q.with, [var("?x"), var("?e")]);
    assert!(query("[:find ?e :where [?e :a]]").with.is_empty());
}

#[test]
fn map_form() {
    let q = query(
        "{:find [?e (count ?v)] :keys [e n] :with [?x] :in [$ ?x] :where [[?e :a ?v] [?x :b ?v]]}",
    );
    assert_eq!(q.find.elems().len(), 2);
    assert!(matches!(q.find, FindSpec::Rel(_)));
    assert_eq!(q.return_maps.unwrap().names, [sym("e"), sym("n")]);
    assert_eq!(q.with, [var("?x")]);
    assert_eq!(q.inputs.len(), 2);
    assert_eq!(q.clauses.len(), 2);
}

#[test]
fn map_form_scalar_and_collection() {
    assert!(matches!(query("{:find [?e .]}").find, FindSpec::Scalar(_)));
    assert!(matches!(
        query("{:find [[?e ...]]}").find,
        FindSpec::Coll(_)
    ));
    assert!(matches!(
        query("{:find ([?e ?v])}").find,
        FindSpec::Tuple(_)
    ));
}

#[test]
fn sections_in_any_order() {
    let q = query("[:where [?e :a ?x] :in $ ?x :find ?e]");
    assert_eq!(q.find.elems().len(), 1);
    assert_eq!(q.inputs.len(), 2);
    assert_eq!(q.clauses.len(), 1);
}

#[test]
fn query_without_where() {
    let q = query("[:find ?x :in [?x ...]]");
    assert!(q.clauses.is_empty());
    assert!(matches!(q.inputs[0], Input::Binding(Binding::Coll(_), _)));
}

#[test]
fn query_span_covers_the_form() {
    let q = query("  [:find ?e\n   :where [?e :a]]");
    assert_eq!((q.span.start.line, q.span.start.column), (1, 3));
    assert_eq!((q.span.end.line, q.span.end.column), (2, 19));
}

#[test]
fn query_from_edn_value() {
    let form = crate::spanned_from_edn(&edn("[:find ?e :where [?e :a 1]]"));
    let q = crate::parse_query_edn(&form).unwrap();
    assert_eq!(q.clauses.len(), 1);
}
