//! Property tests of every built-in function and aggregate over edge values (issue 17): no
//! call panics, whatever the arguments, and integer arithmetic either gives the exact result
//! or a `query/overflow` error, never a wrapped one.

use std::cmp::Ordering;
use std::str::FromStr;
use std::sync::Arc;

use proptest::prelude::*;
use vev_core::Value;
use vev_edn::{BigDecimal, BigInt, Edn, Keyword};

use crate::funcs::{call, compare, Registry, BUILTINS};
use crate::QueryError;

const LONGS: &[i64] = &[
    i64::MIN,
    i64::MIN + 1,
    -2,
    -1,
    0,
    1,
    2,
    i64::MAX - 1,
    i64::MAX,
];
const DOUBLES: &[f64] = &[
    f64::NAN,
    f64::INFINITY,
    f64::NEG_INFINITY,
    -0.0,
    0.0,
    1.0,
    -1.0,
    0.5,
    f64::MIN_POSITIVE,
    f64::MAX,
    f64::MIN,
    9_223_372_036_854_775_808.0,
    -9_223_372_036_854_775_808.0,
];

fn long() -> impl Strategy<Value = i64> {
    prop_oneof![proptest::sample::select(LONGS), any::<i64>(), -5i64..5]
}

fn double() -> impl Strategy<Value = f64> {
    prop_oneof![proptest::sample::select(DOUBLES), any::<f64>()]
}

fn number() -> impl Strategy<Value = Value> {
    prop_oneof![
        4 => long().prop_map(Value::Long),
        3 => double().prop_map(Value::Double),
        1 => double().prop_map(|d| Value::Float(d as f32)),
        1 => proptest::sample::select(&[0, 1, i64::MAX as u64, i64::MAX as u64 + 1, u64::MAX][..])
            .prop_map(Value::Ref),
        1 => proptest::sample::select(&["0", "-1", "9223372036854775808", "-99999999999999999999999999"][..])
            .prop_map(|s| Value::BigInt(Arc::new(BigInt::from_str(s).expect("a bigint")))),
        1 => proptest::sample::select(&["0.0", "-1.5", "1E+400", "1E-400", "123456789012345678901234567890.5"][..])
            .prop_map(|s| Value::BigDec(Arc::new(BigDecimal::from_str(s).expect("a bigdec")))),
    ]
}

/// Any argument a function might be given: mostly numbers, some of every other kind.
fn value() -> impl Strategy<Value = Value> {
    prop_oneof![
        8 => number(),
        1 => Just(Value::Nil),
        1 => proptest::sample::select(&["", "abc", "a(", "ö", "[0-9]+"][..]).prop_map(Value::string),
        1 => Just(Value::Keyword(Keyword::new("a/b"))),
        1 => any::<bool>().prop_map(Value::Boolean),
        1 => proptest::collection::vec(long().prop_map(Value::Long), 0..3)
            .prop_map(|v| Value::Tuple(v.into())),
    ]
}

/// The result of `name` on two longs, in 128 bits, when it is defined and fits a long.
fn exact(name: &str, x: i64, y: i64) -> Option<Option<i128>> {
    let (x, y) = (i128::from(x), i128::from(y));
    let r = match name {
        "+" => x + y,
        "-" => x - y,
        "*" => x * y,
        "quot" | "rem" | "mod" if y == 0 => return None,
        "quot" => x / y,
        "rem" => x % y,
        "mod" => x.rem_euclid(y) + if y < 0 && x.rem_euclid(y) != 0 { y } else { 0 },
        _ => return None,
    };
    Some(i64::try_from(r).ok().map(i128::from))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(
        std::env::var("VEV_PROPTEST_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(2048)
    ))]

    /// Every built-in, with 0 to 3 arguments of any kind, returns (a value or a typed error).
    #[test]
    fn no_builtin_panics(name in proptest::sample::select(BUILTINS), args in proptest::collection::vec(value(), 0..4)) {
        let _ = call(&Registry::new(), name, &args);
    }

    /// Integer `+ - * quot rem mod` give the exact result or `query/overflow`.
    #[test]
    fn integer_arithmetic_is_exact_or_overflows(
        name in proptest::sample::select(&["+", "-", "*", "quot", "rem", "mod"][..]),
        x in long(),
        y in long(),
    ) {
        let got = call(&Registry::new(), name, &[Value::Long(x), Value::Long(y)]);
        match (exact(name, x, y), got) {
            (Some(Some(want)), Ok(Value::Long(n))) => prop_assert_eq!(i128::from(n), want),
            (Some(None), Err(e)) => prop_assert_eq!(e.code(), "query/overflow"),
            (None, Err(e)) => prop_assert_eq!(e.code(), "query/type-error"),
            (want, got) => prop_assert!(false, "({} {} {}): want {:?}, got {:?}", name, x, y, want, got),
        }
    }

    /// `/` on longs: exact quotients as longs, others as doubles, `/ 0` a type error and
    /// `(/ i64::MIN -1)` an overflow.
    #[test]
    fn integer_division(x in long(), y in long()) {
        let got = call(&Registry::new(), "/", &[Value::Long(x), Value::Long(y)]);
        let (wx, wy) = (i128::from(x), i128::from(y));
        match got {
            _ if y == 0 => prop_assert_eq!(got.map_err(|e| e.code()), Err("query/type-error")),
            Ok(Value::Long(q)) => prop_assert!(wx % wy == 0 && i128::from(q) == wx / wy),
            Ok(Value::Double(d)) => prop_assert!(wx % wy != 0 && d == x as f64 / y as f64),
            Err(e) => prop_assert!(e.code() == "query/overflow" && x == i64::MIN && y == -1),
            Ok(other) => prop_assert!(false, "(/ {} {}) gave {}", x, y, other),
        }
    }

    /// `inc`, `dec`, `abs` and unary `-` on longs: exact or `query/overflow`.
    #[test]
    fn unary_integer_functions(name in proptest::sample::select(&["inc", "dec", "abs", "-"][..]), x in long()) {
        let w = i128::from(x);
        let want = match name { "inc" => w + 1, "dec" => w - 1, "abs" => w.abs(), _ => -w };
        match call(&Registry::new(), name, &[Value::Long(x)]) {
            Ok(Value::Long(n)) => prop_assert_eq!(i128::from(n), want),
            Err(e) => prop_assert!(e.code() == "query/overflow" && i64::try_from(want).is_err()),
            Ok(other) => prop_assert!(false, "({} {}) gave {}", name, x, other),
        }
    }

    /// The order sorting uses is total over numbers of every kind: antisymmetric and
    /// transitive, with NaN above every other number; the comparison predicates are false
    /// with NaN.
    #[test]
    fn number_order_is_total(a in number(), b in number(), c in number()) {
        let cmp = |x: &Value, y: &Value| compare("<", x, y);
        let (ab, ba) = (cmp(&a, &b), cmp(&b, &a));
        if let (Ok(ab), Ok(ba)) = (&ab, &ba) {
            prop_assert_eq!(*ab, ba.reverse());
            if let (Ok(bc), Ok(ac)) = (cmp(&b, &c), cmp(&a, &c)) {
                if *ab != Ordering::Greater && bc != Ordering::Greater {
                    prop_assert_ne!(ac, Ordering::Greater, "{} <= {} <= {}", a, b, c);
                }
            }
        }
        let nan = |v: &Value| matches!(v, Value::Double(d) if d.is_nan()) || matches!(v, Value::Float(f) if f.is_nan());
        if nan(&a) || nan(&b) {
            for p in ["<", "<=", ">", ">="] {
                if let Ok(r) = call(&Registry::new(), p, &[a.clone(), b.clone()]) {
                    prop_assert_eq!(r, Value::Boolean(false), "({} {} {})", p, a, b);
                }
            }
        }
    }

    /// Every built-in aggregate over a bag of edge values returns (a value or a typed error);
    /// `sum` of longs is exact or `query/overflow`; `median` of longs lies between the extremes.
    #[test]
    fn no_aggregate_panics(
        name in proptest::sample::select(crate::agg::BUILTIN),
        vals in proptest::collection::vec(value(), 1..6),
        longs in proptest::collection::vec(long(), 1..6),
        n in prop_oneof![Just(0i64), Just(2), Just(i64::MAX)],
    ) {
        let reg = Registry::new();
        let args: Vec<Edn> = match name {
            "rand" | "sample" => vec![Edn::Integer(n)],
            _ => Vec::new(),
        };
        let _ = crate::agg::aggregate(&reg, name, &args, vals);
        let lv: Vec<Value> = longs.iter().copied().map(Value::Long).collect();
        let got = crate::agg::aggregate(&reg, name, &args, lv);
        match (name, got) {
            ("sum", got) => {
                let want: i128 = longs.iter().map(|x| i128::from(*x)).sum();
                match got {
                    Ok(Edn::Integer(s)) => prop_assert_eq!(i128::from(s), want),
                    Err(QueryError::Overflow { .. }) => prop_assert!(i64::try_from(want).is_err()),
                    other => prop_assert!(false, "sum of {:?} gave {:?}", longs, other),
                }
            }
            ("median", Ok(m)) => {
                let (lo, hi) = (*longs.iter().min().unwrap(), *longs.iter().max().unwrap());
                let m = match m { Edn::Integer(i) => i as f64, Edn::Float(f) => f, other => panic!("median {other}") };
                prop_assert!(lo as f64 <= m && m <= hi as f64, "median of {:?} is {}", longs, m);
            }
            _ => {}
        }
    }
}
