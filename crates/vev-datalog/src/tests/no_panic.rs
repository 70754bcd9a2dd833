//! No input, however malformed, makes the parser panic: random EDN built from the parts of
//! queries, rules and pull patterns, fed to every entry point.
//!
//! Run longer with `PROPTEST_CASES=100000 cargo test -p vev-datalog no_panic`.

use proptest::prelude::*;

use super::*;
use crate::{
    parse_pull_edn, parse_pull_value, parse_query_edn, parse_rules_edn, parse_rules_value,
    spanned_from_edn,
};

/// Atoms that mean something in Datalog, and a few that do not.
fn atom() -> impl Strategy<Value = Edn> {
    let words = [
        "?x", "?y", "$", "$h", "_", "%", ".", "...", "*", "not", "not-join", "or", "or-join",
        "and", "pull", "count", "limit", "default", "quote", "f", ">",
    ];
    let keywords = [
        "find", "in", "where", "with", "keys", "strs", "syms", "as", "limit", "default", "a",
        "a/_b", "db/id",
    ];
    prop_oneof![
        prop::sample::select(words.to_vec()).prop_map(Edn::symbol),
        prop::sample::select(keywords.to_vec()).prop_map(Edn::keyword),
        (-3i64..6).prop_map(Edn::Integer),
        Just(Edn::Nil),
        Just(Edn::string("s")),
        Just(Edn::Float(1.5)),
    ]
}

fn form() -> impl Strategy<Value = Edn> {
    atom().prop_recursive(6, 64, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Edn::Vector),
            prop::collection::vec(inner.clone(), 0..6).prop_map(Edn::List),
            prop::collection::btree_map(inner.clone(), inner, 0..3).prop_map(Edn::Map),
        ]
    })
}

fn run_all(edn: &Edn) {
    let spanned = spanned_from_edn(edn);
    let _ = parse_query_edn(&spanned);
    let _ = parse_rules_edn(&spanned);
    let _ = parse_pull_edn(&spanned);
    let _ = parse_rules_value(edn);
    let _ = parse_pull_value(edn);
    // The same through text, so spans from the reader are exercised too.
    let text = edn.to_string();
    for result in [
        crate::parse_query(&text).err(),
        crate::parse_rules(&text).err(),
        crate::parse_pull(&text).err(),
    ]
    .into_iter()
    .flatten()
    {
        let code = result.code();
        assert!(
            code.starts_with("query/")
                || code.starts_with("edn/")
                || code == "pull/invalid-pattern",
            "{code}"
        );
        let _ = result.to_string();
    }
}

proptest! {
    #[test]
    fn no_panic_on_random_forms(edn in form()) {
        run_all(&edn);
    }

    #[test]
    fn no_panic_on_random_queries(
        find in prop::collection::vec(form(), 0..4),
        clauses in prop::collection::vec(form(), 0..4),
    ) {
        let mut items = vec![Edn::keyword("find")];
        items.extend(find);
        items.push(Edn::keyword("where"));
        items.extend(clauses);
        run_all(&Edn::Vector(items));
    }

    #[test]
    fn no_panic_on_random_text(text in "[\\[\\](){}:?$_ a-z.*0-9\"-]{0,40}") {
        let _ = crate::parse_query(&text);
        let _ = crate::parse_rules(&text);
        let _ = crate::parse_pull(&text);
    }
}

/// The deepest forms the reader accepts give an error, not a stack overflow, on the 2 MiB
/// stack of a test thread (debug builds need the most stack).
#[test]
fn no_panic_at_the_readers_maximum_depth() {
    let depth = vev_edn::MAX_DEPTH - 3;
    let text = format!(
        "[:find ?x :where {}[?x :a]{}]",
        "(not ".repeat(depth),
        ")".repeat(depth)
    );
    assert_eq!(query_err(&text).code(), "query/too-deep");
    let text = format!(
        "[:find ?x :where {}[?x :a]{}]",
        "(or ".repeat(depth),
        ")".repeat(depth)
    );
    assert_eq!(query_err(&text).code(), "query/too-deep");
    let depth = vev_edn::MAX_DEPTH / 2 - 1;
    let pull = format!("[{}:a{}]", "{:b [".repeat(depth), "]}".repeat(depth));
    assert_eq!(
        crate::parse_pull(&pull).unwrap_err().code(),
        "query/too-deep"
    );
}
