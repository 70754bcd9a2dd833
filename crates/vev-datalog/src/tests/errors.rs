//! One test per error code: the code, and where the span points (line, column).
//! Tables list the text, then the expected start of the span.

use super::*;
use crate::{parse_pull, parse_rules};

fn check(errors: &[(&str, (u32, u32))], code: &str, parse: impl Fn(&str) -> SyntaxError) {
    for &(text, pos) in errors {
        let err = parse(text);
        assert_eq!(err.code(), code, "{text}: {err}");
        assert_eq!(at(&err), pos, "{text}: {err}");
    }
}

fn check_query(code: &str, errors: &[(&str, (u32, u32))]) {
    check(errors, code, query_err);
}

fn rules_err(text: &str) -> SyntaxError {
    parse_rules(text).expect_err(text)
}

fn pull_err(text: &str) -> SyntaxError {
    parse_pull(text).expect_err(text)
}

#[test]
fn error_edn_keeps_the_reader_code() {
    check_query(
        "edn/unexpected-eof",
        &[("[:find ?x\n :where [?x :a]", (1, 1))],
    );
    check_query("edn/unmatched-delimiter", &[("[:find ?x]]", (1, 11))]);
    let err = query_err("");
    assert_eq!(err.code(), "edn/empty-input");
    assert!(matches!(err, SyntaxError::Edn(_)));
}

#[test]
fn error_invalid_query() {
    check_query(
        "query/invalid-query",
        &[
            (":find", (1, 1)),
            ("(:find ?x)", (1, 1)),
            ("[?x :find ?x]", (1, 2)),
            ("[:find ?x\n :where [?x :a]\n :find ?y]", (3, 2)),
            ("{:find ?x}", (1, 8)),
        ],
    );
}

#[test]
fn error_missing_find() {
    check_query(
        "query/missing-find",
        &[
            ("  [:where [?x :a]]", (1, 3)),
            ("[]", (1, 1)),
            ("{:in [$]}", (1, 1)),
        ],
    );
}

#[test]
fn error_unknown_section() {
    check_query(
        "query/unknown-section",
        &[
            ("[:find ?x\n :wher [?x :a]]", (2, 2)),
            ("[:find ?x :db/where [?x :a]]", (1, 11)),
            ("{:find [?x] \"where\" []}", (1, 13)),
        ],
    );
}

#[test]
fn error_invalid_find() {
    check_query(
        "query/invalid-find",
        &[
            ("[:find :where [?x :a]]", (1, 2)),
            ("[:find ?a ?b . :where [?a :b ?b]]", (1, 14)),
            ("[:find . ?a]", (1, 8)),
            ("[:find [?a ... ?b]]", (1, 12)),
            ("[:find [?a] ?b]", (1, 8)),
            ("[:find []]", (1, 8)),
            ("[:find 1]", (1, 8)),
            ("[:find $]", (1, 8)),
            ("[:find ()]", (1, 8)),
            ("[:find (count)]", (1, 8)),
            ("[:find (count 1)]", (1, 15)),
            ("[:find (sample ?n ?x)]", (1, 16)),
            ("[:find (?agg ?x)]", (1, 9)),
            ("[:find (pull ?e)]", (1, 8)),
            ("[:find (pull :e [:a])]", (1, 14)),
            ("[:find (pull ?e :a)]", (1, 17)),
            ("[:find (pull $ ?e [:a] ?x)]", (1, 8)),
            ("{:find []}", (1, 2)),
        ],
    );
}

#[test]
fn error_invalid_find_reports_pull_errors_as_pull() {
    check_query(
        "pull/invalid-pattern",
        &[("[:find (pull ?e [1])]", (1, 18))],
    );
}

#[test]
fn error_invalid_keys() {
    check_query(
        "query/invalid-keys",
        &[
            ("[:find ?a ?b\n :keys a]", (2, 2)),
            ("[:find ?a . :keys a]", (1, 13)),
            ("[:find [?a ...] :syms a]", (1, 17)),
            ("[:find ?a :strs \"a\"]", (1, 17)),
            ("[:find ?a :keys a :strs a]", (1, 19)),
        ],
    );
    let err = query_err("[:find ?a ?b :strs a]");
    assert!(matches!(&err, SyntaxError::InvalidKeys { section, .. } if section.as_str() == "strs"));
    assert_eq!(
        err.to_string(),
        "invalid :strs [a]: 1 names but :find has 2 elements at line 1, column 14"
    );
}

#[test]
fn error_invalid_with() {
    check_query(
        "query/invalid-with",
        &[
            ("[:find ?a :with :where [?a :b]]", (1, 11)),
            ("[:find ?a :with ?b 1]", (1, 20)),
            ("[:find ?a :with _]", (1, 17)),
        ],
    );
}

#[test]
fn error_invalid_in() {
    check_query(
        "query/invalid-in",
        &[
            ("[:find ?a :in 1]", (1, 15)),
            ("[:find ?a :in $ _]", (1, 17)),
            ("[:find ?a :in []]", (1, 15)),
            ("[:find ?a :in [[]]]", (1, 16)),
            ("[:find ?a :in [...]]", (1, 16)),
            ("[:find ?a :in [?a ... ?b]]", (1, 19)),
            ("[:find ?a :in [?a [?b]]]", (1, 19)),
            ("[:find ?a :in [[?a] ?b]]", (1, 16)),
            ("[:find ?a :in [[?a 1]]]", (1, 20)),
        ],
    );
}

#[test]
fn error_duplicate_input() {
    check_query(
        "query/duplicate-input",
        &[
            ("[:find ?a :in $ ?a [?b ?a]]", (1, 24)),
            ("[:find ?a :in $ $]", (1, 17)),
            ("[:find ?a :in % ?a\n %]", (2, 2)),
            ("[:find ?a :in [[?a ?a]]]", (1, 20)),
        ],
    );
    let err = query_err("[:find ?a :in ?a ?a]");
    assert!(matches!(err, SyntaxError::DuplicateInput { ref name, .. } if name.as_str() == "?a"));
}

#[test]
fn error_invalid_clause() {
    check_query(
        "query/invalid-clause",
        &[
            ("[:find ?x :where \"s\"]", (1, 18)),
            ("[:find ?x :where ()]", (1, 18)),
            ("[:find ?x :where ($)]", (1, 18)),
            ("[:find ?x :where (?r ?x)]", (1, 19)),
            ("[:find ?x :where (not)]", (1, 18)),
            ("[:find ?x :where (or)]", (1, 18)),
            ("[:find ?x :where\n  (and [?x :a])]", (2, 3)),
            ("[:find ?x :where (or (and) [?x :a])]", (1, 22)),
            ("[:find ?x :where (not-join [?x ?x] [?x :a])]", (1, 32)),
            ("[:find ?x :where (not-join ?x [?x :a])]", (1, 28)),
            ("[:find ?x :where (not-join [] [?x :a])]", (1, 28)),
            ("[:find ?x :where (or-join)]", (1, 18)),
            ("[:find ?x :where (or-join [[] ?x] [?x :a])]", (1, 28)),
            ("[:find ?x :where (or-join [?x [?y]] [?x :a])]", (1, 31)),
            ("[:find ?x :where (rule)]", (1, 18)),
            ("[:find ?x :where (rule ?x $y)]", (1, 27)),
            ("[:find ?x :where [()]]", (1, 19)),
            ("[:find ?x :where [(?f ?x)]]", (1, 20)),
            ("[:find ?x :where [(f _)]]", (1, 22)),
            ("[:find ?x :where [(f) ?x ?y]]", (1, 18)),
            ("[:find ?x :where [(f) 1]]", (1, 23)),
            ("[:find ?x :where [(f) [?x ... ?y]]]", (1, 27)),
            ("[:find ?x :where (not (and [?x :a]))]", (1, 23)),
        ],
    );
    let err = query_err("[:find ?x :where \"s\"]");
    assert_eq!(
        err.to_string(),
        "invalid clause \"s\": expected a data pattern, predicate, function, not, or or rule call \
         at line 1, column 18"
    );
}

#[test]
fn error_invalid_pattern() {
    check_query(
        "query/invalid-pattern",
        &[
            ("[:find ?x :where [?x foo 1]]", (1, 22)),
            ("[:find ?x :where []]", (1, 18)),
            ("[:find ?x :where [$]]", (1, 18)),
            ("[:find ?x :where [?x :a 1 2 true :extra]]", (1, 34)),
            ("[:find ?x :where [?x $src]]", (1, 22)),
            ("[:find ?x :where\n  (not [?x ... 1])]", (2, 12)),
        ],
    );
    let err = query_err("[:find ?x :where [?x foo 1]]");
    assert_eq!(
        err.to_string(),
        "invalid data pattern [?x foo 1]: symbol foo is not a variable ?x, _ or a constant \
         at line 1, column 22"
    );
}

#[test]
fn error_invalid_rule() {
    check(
        &[
            ("(r ?a)", (1, 1)),
            ("[(r ?a)]", (1, 2)),
            ("[[]]", (1, 2)),
            ("[[(r ?a)]]", (1, 2)),
            ("[[r ?a [?a :b]]]", (1, 3)),
            ("[[() [?a :b]]]", (1, 3)),
            ("[[(not ?a) [?a :b]]]", (1, 4)),
            ("[[(?r ?a) [?a :b]]]", (1, 4)),
            ("[[(r) [?a :b]]]", (1, 3)),
            ("[[(r _) [?a :b]]]", (1, 6)),
            ("[[(r :a) [?a :b]]]", (1, 6)),
            ("[[(r ?a\n ?a) [?a :b]]]", (2, 2)),
            ("[[(r [] ?a) [?a :b]]]", (1, 6)),
            ("[[(r [?a] [?b]) [?a :b ?b]]]", (1, 11)),
        ],
        "query/invalid-rule",
        rules_err,
    );
}

#[test]
fn error_invalid_rule_clause_keeps_clause_code() {
    let err = rules_err("[[(r ?a) [?a foo]]]");
    assert_eq!((err.code(), at(&err)), ("query/invalid-pattern", (1, 14)));
}

#[test]
fn error_rule_arity() {
    let text = "[[(r ?a ?b) [?a :x ?b]]\n [(s ?a) [?a :y]]\n [(r [?a] ?b ?c) [?a :x ?b]]]";
    check(&[(text, (3, 3))], "query/rule-arity", rules_err);
    let err = rules_err(text);
    assert!(matches!(
        err,
        SyntaxError::RuleArity { ref name, expected: 2, found: 3, .. } if name.as_str() == "r"
    ));
    assert_eq!(
        err.to_string(),
        "rule r has 3 head variables in this branch but 2 in its first branch at line 3, column 3"
    );
}

#[test]
fn error_invalid_pull() {
    check(
        &[
            (":a", (1, 1)),
            ("[:a\n 1]", (2, 2)),
            ("[\"a\"]", (1, 2)),
            ("[[:a :limit -1]]", (1, 13)),
            ("[[:a :limit 1.5]]", (1, 13)),
            ("[[:a :limit]]", (1, 2)),
            ("[[:a :xform inc]]", (1, 6)),
            ("[[:a :as 1 :as 2]]", (1, 12)),
            ("[[]]", (1, 2)),
            ("[[1 :as 2]]", (1, 3)),
            ("[(limit :a)]", (1, 2)),
            ("[(limit :a -2)]", (1, 12)),
            ("[(deflt :a 2)]", (1, 3)),
            ("[(default \"a\" 2)]", (1, 11)),
            ("[()]", (1, 2)),
            ("[{:a :b}]", (1, 6)),
            ("[{:a -1}]", (1, 6)),
            ("[{* [:a]}]", (1, 3)),
            ("[{:a [1]}]", (1, 7)),
            ("[?x]", (1, 2)),
        ],
        "pull/invalid-pattern",
        pull_err,
    );
}

#[test]
fn error_messages_shorten_long_forms() {
    let long = format!("[:find ?x :where \"{}\"]", "a".repeat(200));
    let message = query_err(&long).to_string();
    assert!(
        message.starts_with(&format!("invalid clause \"{}...", "a".repeat(59))),
        "{message}"
    );
    assert!(message.len() < 200, "{message}");
}

#[test]
fn error_codes_are_distinct_and_prefixed() {
    let errors = [
        query_err("[?x]"),
        query_err("[]"),
        query_err("[:find ?x :foo]"),
        query_err("[:find]"),
        query_err("[:find ?x ?y :keys a]"),
        query_err("[:find ?x :with]"),
        query_err("[:find ?x :in 1]"),
        query_err("[:find ?x :in ?x ?x]"),
        query_err("[:find ?x :where 1]"),
        query_err("[:find ?x :where [?x y]]"),
        rules_err("[1]"),
        rules_err("[[(r ?a) [?a]] [(r ?a ?b) [?a]]]"),
        pull_err("[1]"),
        query_err(&format!(
            "[:find ?x :where {}]",
            "(not ".repeat(200) + "[?x]" + &")".repeat(200)
        )),
    ];
    let codes: std::collections::BTreeSet<&str> = errors.iter().map(|e| e.code()).collect();
    assert_eq!(codes.len(), errors.len(), "{codes:?}");
    // Pull pattern errors are in the pull family, with the engine's pull errors.
    assert!(
        codes
            .iter()
            .all(|c| c.starts_with("query/") || *c == "pull/invalid-pattern"),
        "{codes:?}"
    );
}

#[test]
fn error_too_deep() {
    let max = crate::CLAUSE_DEPTH_MAX;
    let nots = |n: usize| {
        format!(
            "[:find ?x :where {}[?x :a]{}]",
            "(not ".repeat(n),
            ")".repeat(n)
        )
    };
    assert!(crate::parse_query(&nots(max)).is_ok());
    let err = query_err(&nots(max + 1));
    assert_eq!(err.code(), "query/too-deep");
    // The innermost `(not`, the one past the limit, starts after `max` others.
    assert_eq!(at(&err), (1, 18 + 5 * max as u32));
    assert_eq!(
        err.to_string(),
        format!(
            "nested more than {max} levels deep at line 1, column {}",
            18 + 5 * max
        )
    );

    let half = max / 2;
    let or_and = format!(
        "[:find ?x :where {}[?x :a]{}]",
        "(or (and ".repeat(half + 1),
        "))".repeat(half + 1)
    );
    let err = query_err(&or_and);
    assert_eq!(
        (err.code(), at(&err)),
        ("query/too-deep", (1, 18 + 9 * half as u32))
    );

    let max = crate::PULL_DEPTH_MAX;
    let maps = |n: usize| format!("[{}:a{}]", "{:b [".repeat(n), "]}".repeat(n));
    assert!(parse_pull(&maps(max)).is_ok());
    let err = pull_err(&maps(max + 1));
    assert_eq!(
        (err.code(), at(&err)),
        ("query/too-deep", (1, 2 + 5 * max as u32))
    );
}
