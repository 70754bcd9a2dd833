//! Reader tests, one per rule and per error code. Positions are 1-based line and column.

use std::collections::{BTreeMap, BTreeSet};
use std::str::FromStr;

use crate::{parse, parse_all, parse_all_spanned, parse_spanned, BigDecimal, BigInt, Edn};
use crate::{Keyword, ParseError, ParseErrorKind, Symbol, MAX_DEPTH};

fn ok(text: &str) -> Edn {
    parse(text).unwrap_or_else(|e| panic!("{text:?} should parse: {e}"))
}

fn err(text: &str) -> ParseError {
    match parse(text) {
        Ok(v) => panic!("{text:?} should fail, parsed {v:?}"),
        Err(e) => e,
    }
}

/// Asserts the error code and the line and column where the error starts.
#[track_caller]
fn assert_err(text: &str, code: &str, line: u32, column: u32) -> ParseError {
    let e = err(text);
    assert_eq!(e.code(), code, "{text:?}: {e}");
    assert_eq!(
        (e.span.start.line, e.span.start.column),
        (line, column),
        "{text:?}: {e}"
    );
    assert!(e.span.start.offset <= e.span.end.offset, "{text:?}");
    assert!(
        e.message.chars().next().is_some_and(|c| !c.is_uppercase()),
        "{e}"
    );
    let spanned = parse_spanned(text).expect_err("parse_spanned fails alike");
    assert_eq!(spanned, e);
    e
}

fn int(i: i64) -> Edn {
    Edn::Integer(i)
}

fn kw(full: &str) -> Edn {
    Edn::keyword(full)
}

fn vector(items: Vec<Edn>) -> Edn {
    Edn::Vector(items)
}

fn map(pairs: Vec<(Edn, Edn)>) -> Edn {
    Edn::Map(pairs.into_iter().collect::<BTreeMap<_, _>>())
}

fn dec(text: &str) -> BigDecimal {
    BigDecimal::from_str(text).unwrap()
}

#[test]
fn whitespace_commas_and_comments() {
    assert_eq!(
        ok(" ,\t\n[1,2 ,3]\r\n"),
        vector(vec![int(1), int(2), int(3)])
    );
    assert_eq!(
        ok("; comment\n[1 ; inside\n 2] ; after"),
        vector(vec![int(1), int(2)])
    );
    assert_eq!(ok("\u{3000}1\u{a0}"), int(1));
}

#[test]
fn discard() {
    assert_eq!(ok("[1 #_ 2 3]"), vector(vec![int(1), int(3)]));
    assert_eq!(ok("[#_ #_ 1 2 3]"), vector(vec![int(3)]));
    assert_eq!(ok("#_ #_ a b c"), Edn::symbol("c"));
    assert_eq!(ok("[1 #_[2 #_ 3] 4]"), vector(vec![int(1), int(4)]));
    assert_eq!(ok("(#_ a)"), Edn::List(vec![]));
    assert_eq!(ok("1 #_ 2"), int(1));
    assert_eq!(ok("{:a #_ :b 1}"), map(vec![(kw("a"), int(1))]));
    assert_eq!(parse_all("#_ 1").unwrap(), vec![]);
    assert_err("#_ 1", "edn/empty-input", 1, 5);
    assert_err("[1 #_]", "edn/unmatched-delimiter", 1, 6);
    assert_err("#_", "edn/unexpected-eof", 1, 1);
    assert_err("#_ #_ 1", "edn/unexpected-eof", 1, 1);
}

#[test]
fn nil_true_false() {
    assert_eq!(ok("nil"), Edn::Nil);
    assert_eq!(ok("true"), Edn::Bool(true));
    assert_eq!(ok("false"), Edn::Bool(false));
    assert_eq!(ok("nil?"), Edn::symbol("nil?"));
    assert_eq!(ok("true."), Edn::symbol("true."));
}

#[test]
fn strings() {
    assert_eq!(ok(r#""""#), Edn::string(""));
    assert_eq!(
        ok(r#""a\tb\rc\nd\\e\"f\bg\fh""#),
        Edn::string("a\tb\rc\nd\\e\"f\u{8}g\u{c}h")
    );
    assert_eq!(ok(r#""\u00e9\u0000""#), Edn::string("é\u{0}"));
    assert_eq!(ok(r#""\uD83D\uDE00""#), Edn::string("😀"));
    assert_eq!(ok("\"line\nbreak 😀\""), Edn::string("line\nbreak 😀"));
}

#[test]
fn invalid_escapes() {
    assert_err(r#""ab\q""#, "edn/invalid-escape", 1, 4);
    assert_err(r#""\u12""#, "edn/invalid-escape", 1, 2);
    assert_err(r#""\u12g4""#, "edn/invalid-escape", 1, 2);
    assert_err(r#""x\uD83D""#, "edn/invalid-escape", 1, 3);
    assert_err(r#""\uD83D\u0041""#, "edn/invalid-escape", 1, 2);
    assert_err(r#""\uDE00""#, "edn/invalid-escape", 1, 2);
    assert_err("\"\n\\x\"", "edn/invalid-escape", 2, 1);
    assert_err(r#""\u+123""#, "edn/invalid-escape", 1, 2);
}

#[test]
fn unterminated_string() {
    let e = assert_err("[\"abc", "edn/unexpected-eof", 1, 2);
    assert!(e.message.contains("unterminated string"), "{e}");
    assert_eq!(e.span.end.offset, 5);
    assert_err("\"abc\\", "edn/unexpected-eof", 1, 1);
}

#[test]
fn chars() {
    let cases = [
        ("\\a", 'a'),
        ("\\newline", '\n'),
        ("\\space", ' '),
        ("\\tab", '\t'),
        ("\\return", '\r'),
        ("\\formfeed", '\u{c}'),
        ("\\backspace", '\u{8}'),
        ("\\u0041", 'A'),
        ("\\u00e9", 'é'),
        ("\\(", '('),
        ("\\\"", '"'),
        ("\\\\", '\\'),
        ("\\,", ','),
        ("\\;", ';'),
        ("\\u", 'u'),
        ("\\n", 'n'),
        ("\\😀", '😀'),
        ("\\é", 'é'),
    ];
    for (text, c) in cases {
        assert_eq!(ok(text), Edn::Char(c), "{text}");
    }
    assert_eq!(ok("[\\a\\b]"), vector(vec![Edn::Char('a'), Edn::Char('b')]));
    assert_eq!(ok("[\\a]"), vector(vec![Edn::Char('a')]));
    assert_eq!(
        ok("(\\) \\])"),
        Edn::List(vec![Edn::Char(')'), Edn::Char(']')])
    );
}

#[test]
fn invalid_chars() {
    assert_err("\\abc", "edn/invalid-char", 1, 1);
    assert_err("[1 \\newlines]", "edn/invalid-char", 1, 4);
    assert_err("\\u12", "edn/invalid-char", 1, 1);
    assert_err("\\uD800", "edn/invalid-char", 1, 1);
    assert_err("\\u+041", "edn/invalid-char", 1, 1);
    assert_err("\\ a", "edn/invalid-char", 1, 1);
    assert_err("\\\n", "edn/invalid-char", 1, 1);
    assert_err("\\", "edn/unexpected-eof", 1, 1);
}

#[test]
fn integers() {
    assert_eq!(ok("0"), int(0));
    assert_eq!(ok("-0"), int(0));
    assert_eq!(ok("+5"), int(5));
    assert_eq!(ok("-42"), int(-42));
    assert_eq!(ok("9223372036854775807"), int(i64::MAX));
    assert_eq!(ok("-9223372036854775808"), int(i64::MIN));
    let big = BigInt::from(i64::MAX) + 1;
    assert_eq!(ok("9223372036854775808"), Edn::BigInt(Box::new(big)));
    let small = BigInt::from(i64::MIN) - 1;
    assert_eq!(ok("-9223372036854775809"), Edn::BigInt(Box::new(small)));
    assert_eq!(ok("1N"), Edn::BigInt(Box::new(BigInt::from(1))));
    assert_eq!(ok("-0N"), Edn::BigInt(Box::new(BigInt::from(0))));
    assert_eq!(
        ok("+12345678901234567890123N").to_string(),
        "12345678901234567890123N"
    );
}

#[test]
fn floats() {
    assert_eq!(ok("1.5"), Edn::Float(1.5));
    assert_eq!(ok("-1.5"), Edn::Float(-1.5));
    assert_eq!(ok("+1.5"), Edn::Float(1.5));
    assert_eq!(ok("1e10"), Edn::Float(1e10));
    assert_eq!(ok("1E-3"), Edn::Float(1e-3));
    assert_eq!(ok("1.5e+3"), Edn::Float(1500.0));
    assert_eq!(ok("1."), Edn::Float(1.0));
    assert_eq!(ok("0.5"), Edn::Float(0.5));
    assert_eq!(ok("1e999"), Edn::Float(f64::INFINITY));
    assert_eq!(ok("-0.0"), Edn::Float(-0.0));
    assert_ne!(ok("-0.0"), Edn::Float(0.0));
    assert_eq!(ok("##Inf"), Edn::Float(f64::INFINITY));
    assert_eq!(ok("##-Inf"), Edn::Float(f64::NEG_INFINITY));
    assert!(matches!(ok("##NaN"), Edn::Float(x) if x.is_nan()));
    assert_eq!(ok("[##Inf]"), vector(vec![Edn::Float(f64::INFINITY)]));
    assert_err("##Infinity", "edn/invalid-number", 1, 1);
    assert_err("[1 ##]", "edn/invalid-number", 1, 4);
}

#[test]
fn bigdecs() {
    let cases = [
        ("1M", "1", 0),
        ("1.5M", "1.5", 1),
        ("1.50M", "1.50", 2),
        ("-0.015M", "-0.015", 3),
        ("1e3M", "1e3", -3),
        ("1.5E-3M", "0.0015", 4),
        ("0M", "0", 0),
    ];
    for (text, value, scale) in cases {
        let Edn::BigDec(d) = ok(text) else {
            panic!("{text} is not a bigdec")
        };
        assert_eq!(*d, dec(value), "{text}");
        assert_eq!(d.as_bigint_and_exponent().1, scale, "{text}");
    }
    assert_err("1e10001M", "edn/invalid-number", 1, 1);
    assert_err("1e-9999999999999M", "edn/invalid-number", 1, 1);
    assert_eq!(
        ok("1e0000000000000000000000003M"),
        Edn::BigDec(Box::new(dec("1e3")))
    );
}

#[test]
fn a_number_of_a_million_digits_is_refused_with_a_short_message() {
    // Converting these digits would take about a second; refusing them takes one pass.
    let million = "7".repeat(1_000_000);
    for text in [
        format!("[1 {million}]"),
        format!("[1 {million}N]"),
        format!("[1 -1.{million}M]"),
        format!("[1 1.{million}]"),
    ] {
        let e = assert_err(&text, "edn/number-too-long", 1, 4);
        assert!(
            e.message.contains(" digits, more than the 10000"),
            "{}",
            e.message
        );
        assert!(e.message.len() < 200, "{} bytes", e.message.len());
        assert_eq!(e.kind, ParseErrorKind::NumberTooLong);
    }
    // The limit itself is a number of digits, not of characters.
    let at_limit = "9".repeat(crate::NUMBER_DIGITS_MAX);
    assert!(matches!(ok(&at_limit), Edn::BigInt(_)));
    assert!(matches!(ok(&format!("-{at_limit}N")), Edn::BigInt(_)));
    assert_err(&format!("{at_limit}9"), "edn/number-too-long", 1, 1);
}

#[test]
fn invalid_numbers() {
    for (text, column) in [
        ("01", 1),
        ("-01", 1),
        ("00", 1),
        ("01.5", 1),
        ("[1 1/2]", 4),
        ("0x10", 1),
        ("1.5N", 1),
        ("1e3N", 1),
        ("1a", 1),
        ("1e", 1),
        ("1eM", 1),
        ("1MN", 1),
        ("1.2.3", 1),
        ("1#", 1),
        ("-1-", 1),
        ("1e+", 1),
    ] {
        assert_err(text, "edn/invalid-number", 1, column);
    }
    let e = err("1/2");
    assert!(e.message.contains("ratio"), "{e}");
    assert!(e.message.contains("'1/2'"), "{e}");
}

#[test]
fn symbols() {
    for text in [
        "a",
        "?e",
        "/",
        "a/b",
        "my.ns/fn-name?",
        "+",
        "-",
        ".",
        "...",
        "-a",
        "+.5",
        "a#b",
        "a:b",
        "a'",
        "<=>",
        "*x*",
        "$",
        "%",
        "&",
        "!",
        "_",
        "=",
        "é",
        "ns/_b",
    ] {
        assert_eq!(ok(text), Edn::symbol(text), "{text}");
    }
    let s = ok("a.b/c");
    assert_eq!(s.as_symbol().unwrap().namespace(), Some("a.b"));
}

#[test]
fn invalid_symbols() {
    for (text, column) in [
        (".5", 1),
        ("a/", 1),
        ("/a", 1),
        ("a/b/c", 1),
        ("a//", 1),
        ("[x a@b]", 4),
        ("a/1", 1),
        ("a:", 1),
        ("a^b", 1),
        ("+a/", 1),
    ] {
        assert_err(text, "edn/invalid-symbol", 1, column);
    }
}

#[test]
fn keywords() {
    assert_eq!(ok(":a"), kw("a"));
    assert_eq!(ok(":a/b"), kw("a/b"));
    let k = ok(":a.b/c-d?");
    assert_eq!(k.as_keyword().unwrap().namespace(), Some("a.b"));
    assert_eq!(k.as_keyword().unwrap().name(), "c-d?");
    assert!(ok(":person/_friend").as_keyword().unwrap().is_reverse());
    assert_eq!(ok("[:a:b]"), vector(vec![kw("a:b")]));
    assert_eq!(
        parse_all(":a\"s\"").unwrap(),
        vec![kw("a"), Edn::string("s")]
    );
}

#[test]
fn invalid_keywords() {
    for (text, column) in [
        ("::a", 1),
        (":", 1),
        (":a/", 1),
        (":/", 1),
        ("[1 :1]", 4),
        (":a/b/c", 1),
        (": a", 1),
        (":a/1", 1),
    ] {
        assert_err(text, "edn/invalid-keyword", 1, column);
    }
    assert!(err("::a").message.contains("auto-resolved"));
}

#[test]
fn collections() {
    assert_eq!(ok("()"), Edn::List(vec![]));
    assert_eq!(ok("[]"), vector(vec![]));
    assert_eq!(ok("{}"), map(vec![]));
    assert_eq!(ok("#{}"), Edn::Set(BTreeSet::new()));
    assert_eq!(
        ok("(1 (2) [3])"),
        Edn::List(vec![int(1), Edn::List(vec![int(2)]), vector(vec![int(3)])])
    );
    assert_eq!(
        ok("{:a 1, :b [2]}"),
        map(vec![(kw("a"), int(1)), (kw("b"), vector(vec![int(2)]))])
    );
    assert_eq!(
        ok("#{1 :a \"s\"}"),
        Edn::Set([int(1), kw("a"), Edn::string("s")].into_iter().collect())
    );
    assert_eq!(
        ok("{[1 2] #{3}}"),
        map(vec![(
            vector(vec![int(1), int(2)]),
            Edn::Set([int(3)].into())
        )])
    );
    assert_eq!(ok("#{1 1N 1.0 1M}").to_string(), "#{1 1N 1.0 1M}");
}

#[test]
fn odd_maps() {
    let e = assert_err("{:a 1\n :b}", "edn/odd-map", 2, 2);
    assert!(e.message.contains(":b"), "{e}");
    assert_err("{:a}", "edn/odd-map", 1, 2);
}

#[test]
fn duplicates() {
    let e = assert_err("{:a 1 :b 2 :a 3}", "edn/duplicate-key", 1, 12);
    assert!(e.message.contains(":a"), "{e}");
    assert_err("{1 :x 1N :y 1 :z}", "edn/duplicate-key", 1, 13);
    assert_err("{{:a 1} 1 {:a 1} 2}", "edn/duplicate-key", 1, 11);
    assert_err("{##NaN 1 ##NaN 2}", "edn/duplicate-key", 1, 10);
    let e = assert_err("#{1 2\n 1}", "edn/duplicate-element", 2, 2);
    assert!(e.message.contains("1"), "{e}");
    assert_err("#{1.5M 1.50M}", "edn/duplicate-element", 1, 8);
}

#[test]
fn namespaced_maps() {
    let v = ok(r#"#:person{:name "Ann", :_/id 1, :other/k 2, "s" 3, n 4}"#);
    let expected = map(vec![
        (kw("person/name"), Edn::string("Ann")),
        (kw("id"), int(1)),
        (kw("other/k"), int(2)),
        (Edn::string("s"), int(3)),
        (Edn::symbol("person/n"), int(4)),
    ]);
    assert_eq!(v, expected);
    assert_eq!(ok("#:a.b {:c 1}"), map(vec![(kw("a.b/c"), int(1))]));
    assert_err("#:a{:b 1 :a/b 2}", "edn/duplicate-key", 1, 10);
    assert_err("#::{:a 1}", "edn/invalid-keyword", 1, 1);
    assert_err("#:{:a 1}", "edn/invalid-keyword", 1, 1);
    assert_err("#:a/b{:a 1}", "edn/invalid-keyword", 1, 1);
    assert_err("#:a [1]", "edn/unexpected-char", 1, 5);
    assert_err("#:a", "edn/unexpected-eof", 1, 1);
    assert_err("#:a{:b}", "edn/odd-map", 1, 5);
}

#[test]
fn built_in_tags() {
    assert_eq!(
        ok(r#"#inst "2020-01-01T00:00:00.000Z""#),
        Edn::Inst(1_577_836_800_000)
    );
    assert_eq!(
        ok(r#"#inst "2020-01-01T01:00:00+01:00""#),
        Edn::Inst(1_577_836_800_000)
    );
    assert_eq!(ok(r#"#inst "2020-01-01""#), Edn::Inst(1_577_836_800_000));
    assert_eq!(ok("#inst\n \"1970-01-01T00:00:00.0019Z\""), Edn::Inst(1));
    let uuid = ok(r#"#uuid "f81d4fae-7dec-11d0-a765-00a0c91e6bf6""#);
    assert_eq!(uuid, Edn::Uuid(0xf81d4fae_7dec_11d0_a765_00a0c91e6bf6));
    assert_eq!(ok("#inst #_ 1 \"1970\""), Edn::Inst(0));
}

#[test]
fn invalid_tag_values() {
    let e = assert_err(r#"[#inst "2020-13-01"]"#, "edn/invalid-tag-value", 1, 8);
    assert!(e.message.contains("2020-13-01"), "{e}");
    assert_err("#inst 1", "edn/invalid-tag-value", 1, 7);
    assert_err("#uuid \"xyz\"", "edn/invalid-tag-value", 1, 7);
    let e = assert_err("#uuid\n[1]", "edn/invalid-tag-value", 2, 1);
    assert!(e.message.contains("vector"), "{e}");
}

#[test]
fn tagged_values() {
    let v = ok("#my/tag [1 2]");
    assert_eq!(
        v,
        Edn::Tagged(
            Symbol::new("my/tag"),
            Box::new(vector(vec![int(1), int(2)]))
        )
    );
    let nested = ok("#a #b 1");
    let inner = Edn::Tagged(Symbol::new("b"), Box::new(int(1)));
    assert_eq!(nested, Edn::Tagged(Symbol::new("a"), Box::new(inner)));
    assert_eq!(ok("#a{:x 1}").to_string(), "#a {:x 1}");
    assert_err("#a/ 1", "edn/invalid-symbol", 1, 1);
    assert_err("#my/tag", "edn/unexpected-eof", 1, 1);
    assert_err("[#my/tag]", "edn/unmatched-delimiter", 1, 9);
}

#[test]
fn bad_dispatch() {
    assert_err("# a", "edn/unexpected-char", 1, 1);
    assert_err("[1 #1]", "edn/unexpected-char", 1, 4);
    assert_err("#\"re\"", "edn/unexpected-char", 1, 1);
    assert_err("#", "edn/unexpected-eof", 1, 1);
}

#[test]
fn unexpected_chars() {
    assert_err("@a", "edn/unexpected-char", 1, 1);
    assert_err("[1 ^:m x]", "edn/unexpected-char", 1, 4);
    assert_err("~x", "edn/unexpected-char", 1, 1);
    assert_err("'a", "edn/unexpected-char", 1, 1);
    assert_err("é\u{1}", "edn/invalid-symbol", 1, 1);
    assert_err("\u{1}", "edn/unexpected-char", 1, 1);
}

#[test]
fn unmatched_delimiters() {
    assert_err(")", "edn/unmatched-delimiter", 1, 1);
    let e = assert_err("[1\n 2)", "edn/unmatched-delimiter", 2, 3);
    assert!(
        e.message.contains("']'") && e.message.contains("line 1, column 1"),
        "{e}"
    );
    assert_err("{:a 1]", "edn/unmatched-delimiter", 1, 6);
    assert_err("#{1)", "edn/unmatched-delimiter", 1, 4);
    assert_err("1 )", "edn/unmatched-delimiter", 1, 3);
    assert_eq!(
        parse_all("1 ]").unwrap_err().code(),
        "edn/unmatched-delimiter"
    );
}

#[test]
fn unexpected_eof() {
    for (text, line, column) in [
        ("[1 2", 1, 1),
        ("(", 1, 1),
        ("{:a", 1, 1),
        ("#{", 1, 1),
        ("[1 [2\n (3", 2, 2),
        ("[\"a\"", 1, 1),
        ("[1 ; comment ]", 1, 1),
    ] {
        let e = assert_err(text, "edn/unexpected-eof", line, column);
        assert_eq!(e.span.end.offset, text.len(), "{text}");
    }
}

#[test]
fn empty_and_trailing_input() {
    assert_err("", "edn/empty-input", 1, 1);
    assert_err("  ; only a comment\n", "edn/empty-input", 2, 1);
    assert_err("1 2", "edn/trailing-input", 1, 3);
    assert_err("[1]\n\n  :a", "edn/trailing-input", 3, 3);
    assert_err("1 @", "edn/trailing-input", 1, 3);
    assert_eq!(parse_all("").unwrap(), vec![]);
    assert_eq!(
        parse_all("1 :a [2] ; c").unwrap(),
        vec![int(1), kw("a"), vector(vec![int(2)])]
    );
}

fn nested(depth: usize) -> String {
    format!("{}{}", "[".repeat(depth), "]".repeat(depth))
}

#[test]
fn too_deep() {
    assert!(parse(&nested(MAX_DEPTH)).is_ok());
    assert!(parse_spanned(&nested(MAX_DEPTH)).is_ok());
    assert_err(&nested(MAX_DEPTH + 1), "edn/too-deep", 1, 513);
    assert_err(&"(".repeat(1_000_000), "edn/too-deep", 1, 513);
    assert_err(&"#{".repeat(100_000), "edn/too-deep", 1, 1025);
    assert_err(&"#_ ".repeat(100_000), "edn/too-deep", 1, 1537);
    assert_err(&"#a ".repeat(100_000), "edn/too-deep", 1, 1537);
    assert_err(&"#:a{:k ".repeat(100_000), "edn/too-deep", 1, 3585);
    let deep_in_map = format!("{{:a {}}}", nested(MAX_DEPTH));
    assert_err(&deep_in_map, "edn/too-deep", 1, 5 + MAX_DEPTH as u32 - 1);
}

#[test]
fn deep_input_fits_a_small_stack() {
    // A reader thread with a modest stack must survive the deepest accepted input.
    let handle = std::thread::Builder::new()
        .stack_size(1 << 20)
        .spawn(|| {
            let groups = MAX_DEPTH / 5;
            let text = format!("{}1{}", "[{:a #{(#t ".repeat(groups), ")}}]".repeat(groups));
            parse_spanned(&text).is_ok() && parse(&format!("{text} 1")).is_err()
        })
        .unwrap();
    assert!(handle.join().unwrap());
}

#[test]
fn spans_cover_whole_forms() {
    let s = parse_spanned("  {:b [1 2]\n :a \"é\"}  ").unwrap();
    assert_eq!((s.span.start.offset, s.span.end.offset), (2, 21));
    assert_eq!(
        (
            s.span.start.line,
            s.span.start.column,
            s.span.end.line,
            s.span.end.column
        ),
        (1, 3, 2, 9)
    );
    // Map children are keys and values in source order, not sorted order.
    let kids: Vec<String> = s.children.iter().map(|c| c.value.to_string()).collect();
    assert_eq!(kids, [":b", "[1 2]", ":a", "\"é\""]);
    let vec_node = &s.children[1];
    assert_eq!(
        (vec_node.span.start.column, vec_node.span.end.column),
        (7, 12)
    );
    assert_eq!(vec_node.children.len(), 2);
    assert_eq!(vec_node.children[1].span.start.column, 10);
    let string_node = &s.children[3];
    assert_eq!(
        (string_node.span.start.line, string_node.span.start.column),
        (2, 5)
    );
    assert_eq!(string_node.span.end.column, 8);
    assert_eq!(
        string_node.span.end.offset - string_node.span.start.offset,
        4
    );
}

#[test]
fn spanned_children_of_sets_tags_and_scalars() {
    let s = parse_spanned("#{3 1 2}").unwrap();
    let kids: Vec<String> = s.children.iter().map(|c| c.value.to_string()).collect();
    assert_eq!(kids, ["3", "1", "2"]);
    let t = parse_spanned("#my/t [1]").unwrap();
    assert_eq!(t.children.len(), 1);
    assert_eq!(t.children[0].span.start.column, 7);
    assert_eq!((t.span.start.column, t.span.end.column), (1, 10));
    let i = parse_spanned("#inst \"1970\"").unwrap();
    assert!(i.children.is_empty());
    assert_eq!(i.span.end.column, 13);
    let n = parse_spanned("#:p{:a 1}").unwrap();
    assert_eq!(n.children[0].value, kw("p/a"));
    assert_eq!(n.children[0].span.start.column, 5);
    let d = parse_spanned("#_ x [#_ y 1]").unwrap();
    assert_eq!(d.span.start.column, 6);
    assert_eq!(d.children[0].span.start.column, 12);
    assert_eq!(parse_spanned("[1 2]").unwrap().value, ok("[1 2]"));
}

#[test]
fn parse_all_spanned_positions() {
    let forms = parse_all_spanned("1\n:a ; c\n  [x]").unwrap();
    let starts: Vec<(u32, u32)> = forms
        .iter()
        .map(|f| (f.span.start.line, f.span.start.column))
        .collect();
    assert_eq!(starts, [(1, 1), (2, 1), (3, 3)]);
}

#[test]
fn error_display_has_position() {
    let e = err("[1\n  01]");
    assert_eq!(
        e.to_string(),
        "invalid number '01': leading zeros are not allowed at line 2, column 3"
    );
    assert_eq!(e.kind, ParseErrorKind::InvalidNumber);
}

#[test]
fn long_offending_text_is_shortened() {
    let e = err(&format!("0{}", "1".repeat(10_000)));
    assert!(e.message.len() < 200, "{}", e.message);
    assert_eq!(e.span.end.offset, 10_001);
}

#[test]
fn keyword_values_are_shared_names() {
    let v = ok("[:a/b :a/b]");
    let items = v.as_seq().unwrap();
    assert_eq!(items[0].as_keyword(), Some(&Keyword::new("a/b")));
}
