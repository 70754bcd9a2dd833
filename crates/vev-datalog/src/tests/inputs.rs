//! `:in`: sources, `%`, and every binding form.

use super::*;

fn inputs(text: &str) -> Vec<Input> {
    query(&format!("[:find ?x :in {text}]")).inputs
}

fn binding(text: &str) -> Binding {
    match inputs(text).remove(0) {
        Input::Binding(b, _) => b,
        other => panic!("{other:?}"),
    }
}

fn bvar(name: &str) -> BindElem {
    BindElem::Var(var(name))
}

#[test]
fn default_input_is_the_default_source() {
    let q = query("[:find ?e :where [?e :a]]");
    assert!(matches!(&q.inputs[..], [Input::Src(s, _)] if *s == SrcVar::default_src()));
}

#[test]
fn empty_in_means_no_inputs() {
    assert!(query("[:find ?x :in :where [(ground 1) ?x]]")
        .inputs
        .is_empty());
}

#[test]
fn in_sources_and_rules() {
    let all = inputs("$ $hist % ?x");
    assert!(matches!(&all[0], Input::Src(s, _) if *s == src("$")));
    assert!(matches!(&all[1], Input::Src(s, _) if *s == src("$hist")));
    assert!(matches!(&all[2], Input::Rules(span) if span.start.column == 23));
    assert!(matches!(&all[3], Input::Binding(Binding::Scalar(v), _) if *v == var("?x")));
}

#[test]
fn in_scalar_binding() {
    assert_eq!(binding("?x"), Binding::Scalar(var("?x")));
}

#[test]
fn in_tuple_binding() {
    assert_eq!(
        binding("[?x _ ?y]"),
        Binding::Tuple(vec![bvar("?x"), BindElem::Blank, bvar("?y")])
    );
    assert_eq!(binding("[?x]"), Binding::Tuple(vec![bvar("?x")]));
}

#[test]
fn in_collection_binding() {
    assert_eq!(binding("[?x ...]"), Binding::Coll(bvar("?x")));
    assert_eq!(binding("[_ ...]"), Binding::Coll(BindElem::Blank));
}

#[test]
fn in_relation_binding() {
    assert_eq!(
        binding("[[?x _ ?y]]"),
        Binding::Rel(vec![bvar("?x"), BindElem::Blank, bvar("?y")])
    );
}

#[test]
fn in_binding_span() {
    let Input::Binding(_, span) = &inputs("$ [[?x ?y]]")[1] else {
        panic!()
    };
    assert_eq!((span.start.column, span.end.column), (17, 26));
}

#[test]
fn in_blanks_may_repeat() {
    assert_eq!(
        binding("[_ _ ?x]"),
        Binding::Tuple(vec![BindElem::Blank, BindElem::Blank, bvar("?x")])
    );
}
