//! Property tests: printing then reading any value gives it back, printing is a fixed point,
//! and no input (valid, almost valid or random) makes the reader panic.
//!
//! Run longer with `PROPTEST_CASES=100000 cargo test -p vev-edn --test roundtrip`.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;
use vev_edn::{
    is_valid_keyword, is_valid_symbol, parse, parse_all, parse_spanned, BigDecimal, BigInt, Edn,
    Keyword, Symbol,
};

/// One side of `ns/name`, from every class of characters EDN allows in names.
fn name_part() -> impl Strategy<Value = String> {
    "[+\\-.]?[a-zA-Zé*!_?$%&=<>][a-zA-Z0-9é*+!\\-_?$%&=<>.#:']{0,6}"
}

fn full_name() -> impl Strategy<Value = String> {
    (proptest::option::of(name_part()), name_part()).prop_map(|(ns, name)| match ns {
        Some(ns) => format!("{ns}/{name}"),
        None => name,
    })
}

fn keyword() -> impl Strategy<Value = Keyword> {
    full_name()
        .prop_filter("valid keyword", |s| is_valid_keyword(s))
        .prop_map(|s| Keyword::new(&s))
}

fn symbol() -> impl Strategy<Value = Symbol> {
    let named = full_name().prop_filter("valid symbol", |s| {
        is_valid_symbol(s) && !["nil", "true", "false"].contains(&s.as_str())
    });
    prop_oneof![
        8 => named,
        1 => prop::sample::select(vec!["/", "+", "-", ".", "..."]).prop_map(str::to_owned),
    ]
    .prop_map(|s| Symbol::new(&s))
}

/// A tag: a symbol that begins with a letter and is not one of the built-in tags.
fn tag() -> impl Strategy<Value = Symbol> {
    symbol().prop_filter("user tag", |s| {
        s.as_str().starts_with(|c: char| c.is_alphabetic())
            && !["inst", "uuid"].contains(&s.as_str())
    })
}

fn bigint() -> impl Strategy<Value = BigInt> {
    prop_oneof![
        any::<i128>().prop_map(BigInt::from),
        (any::<bool>(), prop::collection::vec(any::<u32>(), 0..8)).prop_map(
            |(negative, digits)| {
                let sign = if negative {
                    num_bigint::Sign::Minus
                } else {
                    num_bigint::Sign::Plus
                };
                BigInt::from_slice(sign, &digits)
            }
        ),
    ]
}

fn bigdec() -> impl Strategy<Value = BigDecimal> {
    let scale = prop_oneof![4 => -40i64..40, 1 => -10_000i64..=10_000];
    (bigint(), scale).prop_map(|(unscaled, scale)| BigDecimal::new(unscaled, scale))
}

fn float() -> impl Strategy<Value = f64> {
    prop_oneof![
        any::<f64>(),
        prop::sample::select(vec![
            f64::NAN,
            -f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            0.0,
            -0.0,
            f64::MIN_POSITIVE,
            5e-324,
            f64::MAX,
            1e16,
            1e-7,
            0.1
        ]),
    ]
}

fn scalar() -> impl Strategy<Value = Edn> {
    prop_oneof![
        Just(Edn::Nil),
        any::<bool>().prop_map(Edn::Bool),
        any::<String>().prop_map(Edn::String),
        "[\\u{0}-\\u{1f}\\u{7f}-\\u{a0}\"\\\\ a]{0,8}".prop_map(Edn::String),
        any::<char>().prop_map(Edn::Char),
        any::<i64>().prop_map(Edn::Integer),
        bigint().prop_map(|n| Edn::BigInt(Box::new(n))),
        float().prop_map(Edn::Float),
        bigdec().prop_map(|d| Edn::BigDec(Box::new(d))),
        keyword().prop_map(Edn::Keyword),
        symbol().prop_map(Edn::Symbol),
        any::<i64>().prop_map(Edn::Inst),
        (-62_135_596_800_000i64..253_402_300_800_000).prop_map(Edn::Inst),
        any::<u128>().prop_map(Edn::Uuid),
    ]
}

fn edn() -> impl Strategy<Value = Edn> {
    scalar().prop_recursive(5, 96, 8, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..8).prop_map(Edn::List),
            prop::collection::vec(inner.clone(), 0..8).prop_map(Edn::Vector),
            prop::collection::btree_map(inner.clone(), inner.clone(), 0..6)
                .prop_map(|m: BTreeMap<Edn, Edn>| Edn::Map(m)),
            prop::collection::btree_set(inner.clone(), 0..6)
                .prop_map(|s: BTreeSet<Edn>| Edn::Set(s)),
            (tag(), inner).prop_map(|(tag, value)| Edn::Tagged(tag, Box::new(value))),
        ]
    })
}

/// Text made of the characters that matter to the reader, so that random input reaches
/// deep into it rather than failing on the first character.
fn ednish_text() -> impl Strategy<Value = String> {
    "([\\[\\]{}()#_:;\"\\\\ \n,a-z0-9.+\\-/NMEe^@~'é*?!$%&=<>\\u{0}\\u{85}]|#inst|#uuid|##Inf|##NaN|\\\\u00|\\\\newline){0,48}"
}

/// Whatever parses must print to text that parses back to the same value.
fn check_reparse(text: &str) -> Result<(), TestCaseError> {
    let parsed = parse(text);
    let spanned = parse_spanned(text);
    prop_assert_eq!(parsed.clone(), spanned.map(|s| s.value));
    let _ = parse_all(text);
    if let Ok(value) = parsed {
        let printed = value.to_string();
        prop_assert_eq!(parse(&printed), Ok(value), "printed as {}", printed);
    }
    Ok(())
}

proptest! {
    #[test]
    fn print_then_parse_round_trips(value in edn()) {
        let text = value.to_string();
        let parsed = parse(&text);
        prop_assert_eq!(parsed.as_ref(), Ok(&value), "text: {}", text);
        let spanned = parse_spanned(&text).expect("parses");
        prop_assert_eq!(&spanned.value, &value);
        prop_assert_eq!((spanned.span.start.offset, spanned.span.end.offset), (0, text.len()));
        let reprinted = parsed.expect("parses").to_string();
        prop_assert_eq!(reprinted, text);
    }

    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        check_reparse(&String::from_utf8_lossy(&bytes))?;
    }

    #[test]
    fn ednish_garbage_never_panics(text in ednish_text()) {
        check_reparse(&text)?;
    }

    #[test]
    fn printed_values_cut_short_never_panic(value in edn(), cut in any::<prop::sample::Index>()) {
        let text = value.to_string();
        let boundaries: Vec<usize> = text.char_indices().map(|(i, _)| i).collect();
        if !boundaries.is_empty() {
            check_reparse(&text[..boundaries[cut.index(boundaries.len())]])?;
        }
    }
}
