//! `:where` clauses: data patterns, predicates, functions, not, or, and rule calls.

use super::*;

fn pattern(text: &str) -> Pattern {
    match clause(text) {
        Clause::Pattern(p) => p,
        other => panic!("{other:?}"),
    }
}

fn bvar(name: &str) -> BindElem {
    BindElem::Var(var(name))
}

#[test]
fn pattern_one_to_five_terms() {
    let full = [
        var_term("?e"),
        const_term(":a"),
        var_term("?v"),
        var_term("?tx"),
        const_term("true"),
    ];
    for n in 1..=5 {
        let text = ["?e", ":a", "?v", "?tx", "true"][..n].join(" ");
        let p = pattern(&format!("[{text}]"));
        assert_eq!(p.src, None);
        for (i, term) in p.terms.iter().enumerate() {
            let expected = if i < n { full[i].clone() } else { Term::Blank };
            assert_eq!(*term, expected, "{n} terms, position {i}");
        }
    }
}

#[test]
fn pattern_blanks_and_constants() {
    let p = pattern("[_ :person/age 42]");
    assert_eq!(p.terms[0], Term::Blank);
    assert_eq!(p.terms[2], const_term("42"));
    let p = pattern("[?e :a \"text\" _ false]");
    assert_eq!(p.terms[2], const_term("\"text\""));
    assert_eq!(p.terms[4], const_term("false"));
    assert_eq!(pattern("[17 :a nil]").terms[2], const_term("nil"));
}

#[test]
fn pattern_with_source() {
    let p = pattern("[$hist ?e :a ?v]");
    assert_eq!(p.src, Some(src("$hist")));
    assert_eq!(p.terms[0], var_term("?e"));
    assert_eq!(p.terms[3], Term::Blank);
    assert_eq!(pattern("[$ ?e]").src, Some(src("$")));
}

#[test]
fn pattern_span() {
    let p = pattern("[?e :a]");
    assert_eq!((p.span.start.column, p.span.end.column), (18, 25));
}

#[test]
fn lookup_refs() {
    let p = pattern("[[:person/email \"a@b.c\"] :person/friend [:person/id 7]]");
    assert_eq!(p.terms[0], const_term("[:person/email \"a@b.c\"]"));
    assert_eq!(p.terms[2], const_term("[:person/id 7]"));
}

#[test]
fn predicates() {
    let cases = [
        ("[(> ?a 3)]", ">", vec![arg_var("?a"), arg_const("3")]),
        (
            "[(re-find ?re ?s)]",
            "re-find",
            vec![arg_var("?re"), arg_var("?s")],
        ),
        (
            "[(missing? $ ?e :person/age)]",
            "missing?",
            vec![Arg::Src(src("$")), arg_var("?e"), arg_const(":person/age")],
        ),
        ("[(my.ns/ok?)]", "my.ns/ok?", vec![]),
    ];
    for (text, name, expected) in cases {
        let Clause::Pred { name: n, args, .. } = clause(text) else {
            panic!("{text}")
        };
        assert_eq!((n, args), (sym(name), expected), "{text}");
    }
}

#[test]
fn predicate_constants_include_collections() {
    let Clause::Pred { args, .. } = clause("[(contains? #{1 2} ?x)]") else {
        panic!()
    };
    assert_eq!(args, [arg_const("#{1 2}"), arg_var("?x")]);
}

#[test]
fn functions_with_every_binding() {
    let cases = [
        ("?y", Binding::Scalar(var("?y"))),
        (
            "[?a _ ?b]",
            Binding::Tuple(vec![bvar("?a"), BindElem::Blank, bvar("?b")]),
        ),
        ("[?y ...]", Binding::Coll(bvar("?y"))),
        ("[[?a ?b]]", Binding::Rel(vec![bvar("?a"), bvar("?b")])),
    ];
    for (text, expected) in cases {
        let Clause::Fn {
            name,
            args,
            binding,
            ..
        } = clause(&format!("[(str ?x \"!\") {text}]"))
        else {
            panic!("{text}")
        };
        assert_eq!(name, sym("str"));
        assert_eq!(args, [arg_var("?x"), arg_const("\"!\"")]);
        assert_eq!(binding, expected, "{text}");
    }
}

#[test]
fn functions_get_else_and_ground() {
    let Clause::Fn { name, args, .. } = clause("[(get-else $ ?e :a \"none\") ?v]") else {
        panic!()
    };
    assert_eq!(name, sym("get-else"));
    assert_eq!(args[0], Arg::Src(src("$")));
    let Clause::Fn { args, .. } = clause("[(ground [1 2]) [?x ...]]") else {
        panic!()
    };
    assert_eq!(args, [arg_const("[1 2]")]);
}

#[test]
fn not_clause() {
    let Clause::Not {
        src: s,
        vars,
        clauses,
        span,
    } = clause("(not [?x :a 1] [?x :b 2])")
    else {
        panic!()
    };
    assert_eq!((s, vars, clauses.len()), (None, None, 2));
    assert_eq!((span.start.column, span.end.column), (18, 43));
}

#[test]
fn not_join_clause() {
    let Clause::Not { vars, clauses, .. } = clause("(not-join [?x ?y] [?x :a ?z] [?z :b ?y])")
    else {
        panic!()
    };
    assert_eq!(vars, Some(vec![var("?x"), var("?y")]));
    assert_eq!(clauses.len(), 2);
}

#[test]
fn not_with_source() {
    let Clause::Not { src: s, .. } = clause("($hist not [?x :a])") else {
        panic!()
    };
    assert_eq!(s, Some(src("$hist")));
    let Clause::Not { src: s, vars, .. } = clause("($ not-join [?x] [?x :a])") else {
        panic!()
    };
    assert_eq!((s, vars.map(|v| v.len())), (Some(src("$")), Some(1)));
}

#[test]
fn or_clause() {
    let Clause::Or {
        src: s,
        vars,
        branches,
        ..
    } = clause("(or [?x :a 1] (and [?x :b 2] [(> ?x 3)]) (not [?x :c]))")
    else {
        panic!()
    };
    assert_eq!((s, vars), (None, None));
    let lens: Vec<usize> = branches.iter().map(Vec::len).collect();
    assert_eq!(lens, [1, 2, 1]);
    assert!(matches!(branches[1][1], Clause::Pred { .. }));
    assert!(matches!(branches[2][0], Clause::Not { .. }));
}

#[test]
fn or_join_clause() {
    let Clause::Or { vars, branches, .. } = clause("(or-join [?x] [?x :a ?y] [?x :b ?z])") else {
        panic!()
    };
    let vars = vars.unwrap();
    assert_eq!((vars.required, vars.free), (vec![], vec![var("?x")]));
    assert_eq!(branches.len(), 2);
}

#[test]
fn or_join_required_vars() {
    let Clause::Or { vars, .. } = clause("(or-join [[?x ?w] ?y] (and [?x :a ?y] [?w :b]))") else {
        panic!()
    };
    let vars = vars.unwrap();
    assert_eq!(vars.required, [var("?x"), var("?w")]);
    assert_eq!(vars.free, [var("?y")]);
    assert_eq!(vars.all().count(), 3);
}

#[test]
fn or_with_source() {
    let Clause::Or { src: s, .. } = clause("($h or [?x :a] [?x :b])") else {
        panic!()
    };
    assert_eq!(s, Some(src("$h")));
}

#[test]
fn nested_not_and_or() {
    let c = clause("(not (or (not [?x :a]) (and (not [?x :b]) [?x :c])))");
    let Clause::Not { clauses, .. } = c else {
        panic!()
    };
    let Clause::Or { branches, .. } = &clauses[0] else {
        panic!()
    };
    assert_eq!(branches.len(), 2);
}

#[test]
fn deeply_nested_not() {
    let depth = crate::CLAUSE_DEPTH_MAX;
    let text = format!("{}[?x :a]{}", "(not ".repeat(depth), ")".repeat(depth));
    let mut c = clause(&text);
    for _ in 0..depth {
        let Clause::Not { mut clauses, .. } = c else {
            panic!()
        };
        c = clauses.remove(0);
    }
    assert!(matches!(c, Clause::Pattern(_)));
}

#[test]
fn rule_calls() {
    let Clause::Rule {
        src: s, name, args, ..
    } = clause("(friends ?a \"bob\" _ :k)")
    else {
        panic!()
    };
    assert_eq!((s, name), (None, sym("friends")));
    assert_eq!(
        args,
        [
            arg_var("?a"),
            arg_const("\"bob\""),
            Arg::Blank,
            arg_const(":k")
        ]
    );
}

#[test]
fn rule_calls_with_source() {
    let Clause::Rule { src: s, name, .. } = clause("($hist my.rules/ancestor ?a ?b)") else {
        panic!()
    };
    assert_eq!((s, name), (Some(src("$hist")), sym("my.rules/ancestor")));
}

#[test]
fn clause_spans() {
    let all = clauses("[?e :a ?v]\n  [(> ?v 1)]\n  (r ?e)");
    let starts: Vec<(u32, u32)> = all
        .iter()
        .map(|c| (c.span().start.line, c.span().start.column))
        .collect();
    assert_eq!(starts, [(1, 18), (2, 3), (3, 3)]);
}
