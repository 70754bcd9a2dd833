//! SQL's operators and functions as Datalog functions (registered in the query registry),
//! with SQL's NULL: a Datalog binding cannot hold nil, so a NULL travels through a query as
//! the keyword `:vev.sql/null` (which `get-else` supplies for an absent column), and these
//! functions treat it as SQL does: arithmetic and comparisons on NULL give NULL, AND and OR
//! follow three-valued logic, and a WHERE keeps a row only when its condition is true.
//!
//! Errors carry their SQLSTATE at the front of the message (`22012: division by zero`) so
//! that the server can report it (`coded_message`).

use std::cmp::Ordering;

use vev::{Keyword, Registry, Value};

use crate::error::SqlError;

/// The keyword that stands for SQL NULL inside a query.
pub const NULL_KEYWORD: &str = "vev.sql/null";

pub fn null() -> Value {
    Value::Keyword(Keyword::new(NULL_KEYWORD))
}

pub fn is_null_keyword(k: &Keyword) -> bool {
    k.namespace() == Some("vev.sql") && k.name() == "null"
}

pub fn null_edn() -> vev::Edn {
    vev::Edn::Keyword(Keyword::new(NULL_KEYWORD))
}

pub fn is_null_edn(e: &vev::Edn) -> bool {
    match e {
        vev::Edn::Nil => true,
        vev::Edn::Keyword(k) => is_null_keyword(k),
        _ => false,
    }
}

pub fn is_null(v: &Value) -> bool {
    match v {
        Value::Nil => true,
        Value::Keyword(k) => is_null_keyword(k),
        _ => false,
    }
}

/// The SQL error a function's message carries, if it was one of ours.
pub fn coded_message(text: &str) -> Option<SqlError> {
    const CODES: [&str; 9] = [
        "22012", "22003", "22P02", "42883", "22023", "42804", "23505", "23502", "22011",
    ];
    for code in CODES {
        if let Some(at) = text.find(&format!("{code}: ")) {
            let message = text[at + code.len() + 2..].to_owned();
            return Some(SqlError::new(code, message));
        }
    }
    None
}

fn coded(code: &str, message: impl std::fmt::Display) -> String {
    format!("{code}: {message}")
}

type Fn1 = fn(&[Value]) -> Result<Value, String>;

/// Every scalar function, by its name after `vev.sql/`.
const FNS: [(&str, Fn1); 33] = [
    ("add", |a| arith(a, "+")),
    ("sub", |a| arith(a, "-")),
    ("mul", |a| arith(a, "*")),
    ("div", |a| arith(a, "/")),
    ("mod", |a| arith(a, "%")),
    ("neg", neg),
    ("eq", |a| compare(a, |o| o == Ordering::Equal)),
    ("ne", |a| compare(a, |o| o != Ordering::Equal)),
    ("lt", |a| compare(a, |o| o == Ordering::Less)),
    ("le", |a| compare(a, |o| o != Ordering::Greater)),
    ("gt", |a| compare(a, |o| o == Ordering::Greater)),
    ("ge", |a| compare(a, |o| o != Ordering::Less)),
    ("and", and),
    ("or", or),
    ("not", not),
    ("true?", |a| {
        Ok(Value::Boolean(matches!(a, [Value::Boolean(true)])))
    }),
    ("null?", |a| {
        Ok(Value::Boolean(a.first().is_some_and(is_null)))
    }),
    ("coalesce", |a| {
        Ok(a.iter().find(|v| !is_null(v)).cloned().unwrap_or_else(null))
    }),
    ("lower", |a| text_fn(a, |s| s.to_lowercase())),
    ("upper", |a| text_fn(a, |s| s.to_uppercase())),
    ("length", length),
    ("concat", concat),
    ("like", |a| like(a, false)),
    ("ilike", |a| like(a, true)),
    ("abs", abs),
    ("nullif", nullif),
    ("greatest", |a| extreme(a, Ordering::Greater)),
    ("least", |a| extreme(a, Ordering::Less)),
    ("round", round),
    ("distinct?", is_distinct),
    ("substr", substr),
    ("replace", replace),
    ("trim", trim),
];

/// Call scalar function `name` (without its `vev.sql/` namespace) on constant values.
pub fn call(name: &str, args: &[Value]) -> Result<Value, String> {
    match FNS.iter().find(|(n, _)| *n == name) {
        Some((_, f)) => f(args),
        None => Err(coded("42883", format!("function {name} does not exist"))),
    }
}

/// A deferred error: what a function called in a CASE branch (`<name>-lazy`) returns
/// instead of failing, since SQL evaluates only the branch a row takes
/// (`CASE WHEN x = 0 THEN 0 ELSE 1 / x END` divides by nothing). The CASE raises it if its
/// row takes that branch. A string that starts with NUL, which no SQL text holds.
fn deferred(message: &str) -> Value {
    Value::String(format!("\0{message}").into())
}

fn deferred_message(v: &Value) -> Option<&str> {
    match v {
        Value::String(s) => s.strip_prefix('\0'),
        _ => None,
    }
}

/// `CASE`: `[c1 v1 c2 v2 ... else]`, the first `v` whose `c` is true, or `else`.
fn case_pick(args: &[Value]) -> Result<Value, String> {
    let Some((otherwise, pairs)) = args.split_last() else {
        return Err(coded("42883", "CASE without branches"));
    };
    for pair in pairs.chunks(2) {
        if let [cond, value] = pair {
            if let Some(m) = deferred_message(cond) {
                return Ok(deferred(m));
            }
            if matches!(cond, Value::Boolean(true)) {
                return Ok(value.clone());
            }
        }
    }
    Ok(otherwise.clone())
}

/// The registry every translated query runs with.
pub fn registry() -> Registry {
    let mut r = Registry::new();
    for (name, f) in FNS {
        r.register_fn(&format!("vev.sql/{name}"), f);
        // In a CASE branch: a deferred error in, or an error of its own, comes out as a
        // deferred error.
        r.register_fn(&format!("vev.sql/{name}-lazy"), move |args: &[Value]| {
            if let Some(m) = args.iter().find_map(deferred_message) {
                return Ok(deferred(m));
            }
            Ok(f(args).unwrap_or_else(|m| deferred(&m)))
        });
    }
    // The CASE a query computes raises the error of the branch its row took; a CASE
    // inside another's branch passes it on.
    r.register_fn("vev.sql/case", |args: &[Value]| {
        let v = case_pick(args)?;
        match deferred_message(&v) {
            Some(m) => Err(m.to_owned()),
            None => Ok(v),
        }
    });
    r.register_fn("vev.sql/case-lazy", case_pick);
    r.register_aggregate("vev.sql/count", |vs| {
        Ok(Value::Long(vs.iter().filter(|v| !is_null(v)).count() as i64))
    });
    r.register_aggregate("vev.sql/sum", sum);
    r.register_aggregate("vev.sql/avg", avg);
    // `count(DISTINCT x)`, `sum(DISTINCT x)`, `avg(DISTINCT x)`: over the distinct values
    // (stored numerics and doubles have one form per value, so equal values are one).
    r.register_aggregate("vev.sql/count-distinct", |vs| {
        Ok(Value::Long(
            distinct_values(vs).iter().filter(|v| !is_null(v)).count() as i64,
        ))
    });
    r.register_aggregate("vev.sql/sum-distinct", |vs| sum(&distinct_values(vs)));
    r.register_aggregate("vev.sql/avg-distinct", |vs| avg(&distinct_values(vs)));
    r.register_aggregate("vev.sql/min", |vs| extreme(vs, Ordering::Less));
    r.register_aggregate("vev.sql/max", |vs| extreme(vs, Ordering::Greater));
    r
}

/// `sum`: NULLs skipped; NULL over no values; integers stay integers (and overflow is an
/// error, as with bigint in PostgreSQL).
fn sum(vs: &[Value]) -> Result<Value, String> {
    let vals: Vec<&Value> = vs.iter().filter(|v| !is_null(v)).collect();
    if vals.is_empty() {
        return Ok(null());
    }
    if vals.iter().all(|v| matches!(v, Value::Long(_))) {
        let mut total: i64 = 0;
        for v in vals {
            if let Value::Long(x) = v {
                total = total
                    .checked_add(*x)
                    .ok_or_else(|| coded("22003", "bigint out of range"))?;
            }
        }
        return Ok(Value::Long(total));
    }
    // Integers and decimals: an exact numeric sum, as PostgreSQL's.
    let decimals: Option<Vec<bigdecimal::BigDecimal>> = vals.iter().map(|v| exact(v)).collect();
    if let Some(decimals) = decimals {
        return Ok(Value::BigDec(std::sync::Arc::new(crate::numeric::sum(
            decimals.iter(),
        ))));
    }
    let mut total = 0.0;
    for v in vals {
        total += as_f64(v)
            .ok_or_else(|| coded("42883", format!("function sum({}) does not exist", kind(v))))?;
    }
    Ok(Value::Double(total))
}

fn avg(vs: &[Value]) -> Result<Value, String> {
    let vals: Vec<f64> = vs
        .iter()
        .filter(|v| !is_null(v))
        .map(|v| {
            as_f64(v)
                .ok_or_else(|| coded("42883", format!("function avg({}) does not exist", kind(v))))
        })
        .collect::<Result<_, _>>()?;
    if vals.is_empty() {
        return Ok(null());
    }
    Ok(Value::Double(vals.iter().sum::<f64>() / vals.len() as f64))
}

/// The values without repeats, in their first order.
fn distinct_values(vs: &[Value]) -> Vec<Value> {
    let mut seen = std::collections::BTreeSet::new();
    vs.iter().filter(|v| seen.insert(*v)).cloned().collect()
}

/// `substring(s FROM start [FOR count])`: the characters at positions `start` to
/// `start + count - 1` (from 1; a start below 1 still counts toward `count`), as
/// PostgreSQL's; a negative count is `22011`.
fn substr(args: &[Value]) -> Result<Value, String> {
    if args.iter().any(is_null) {
        return Ok(null());
    }
    let (s, start, count) = match args {
        [Value::String(s), Value::Long(a)] => (s, *a, None),
        [Value::String(s), Value::Long(a), Value::Long(n)] => (s, *a, Some(*n)),
        _ => {
            return Err(coded(
                "42883",
                "function substring(text, integer[, integer])",
            ))
        }
    };
    if count.is_some_and(|n| n < 0) {
        return Err(coded("22011", "negative substring length not allowed"));
    }
    let end = count.map_or(i64::MAX, |n| start.saturating_add(n));
    let out: String = s
        .chars()
        .zip(1i64..)
        .filter(|(_, p)| *p >= start && *p < end)
        .map(|(c, _)| c)
        .collect();
    Ok(Value::String(out.into()))
}

/// `replace(s, from, to)`: every `from` in `s` replaced (an empty `from` replaces nothing).
fn replace(args: &[Value]) -> Result<Value, String> {
    if args.iter().any(is_null) {
        return Ok(null());
    }
    match args {
        [Value::String(s), Value::String(from), Value::String(to)] => Ok(Value::String(
            if from.is_empty() {
                s.to_string()
            } else {
                s.replace(&**from, to)
            }
            .into(),
        )),
        _ => Err(coded("42883", "function replace(text, text, text)")),
    }
}

/// `trim([BOTH | LEADING | TRAILING] [chars] FROM s)`: the characters of `chars` (a
/// space by default) removed from the ends asked.
fn trim(args: &[Value]) -> Result<Value, String> {
    if args.iter().any(is_null) {
        return Ok(null());
    }
    let [Value::String(s), Value::String(chars), Value::String(side)] = args else {
        return Err(coded("42883", "function trim(text, text)"));
    };
    let set = |c: char| chars.contains(c);
    let out = match &**side {
        "leading" => s.trim_start_matches(set),
        "trailing" => s.trim_end_matches(set),
        _ => s.trim_matches(set),
    };
    Ok(Value::String(out.to_owned().into()))
}

/// `nullif(a, b)`: NULL where `a = b`, else `a`.
fn nullif(args: &[Value]) -> Result<Value, String> {
    let [a, _] = args else {
        return Err(coded("42883", "function nullif takes two arguments"));
    };
    Ok(match compare(args, |o| o == Ordering::Equal)? {
        Value::Boolean(true) => null(),
        _ => a.clone(),
    })
}

/// `a IS DISTINCT FROM b`: `<>` with NULL a value like any other (never NULL itself).
fn is_distinct(args: &[Value]) -> Result<Value, String> {
    let [a, b] = args else {
        return Err(coded("42883", "IS DISTINCT FROM takes two operands"));
    };
    Ok(Value::Boolean(match (is_null(a), is_null(b)) {
        (true, true) => false,
        (true, false) | (false, true) => true,
        _ => !matches!(
            compare(args, |o| o == Ordering::Equal)?,
            Value::Boolean(true)
        ),
    }))
}

/// `round(x)`: a numeric to an integer half away from zero, anything else as a double
/// half to even (PostgreSQL's `round(double precision)`, which integers take);
/// `round(x, n)`: a numeric or an integer to `n` places, half away from zero.
fn round(args: &[Value]) -> Result<Value, String> {
    use bigdecimal::RoundingMode;
    if args.iter().any(is_null) {
        return Ok(null());
    }
    let places = match args {
        [_] => 0,
        [_, Value::Long(n)] => *n,
        _ => {
            return Err(coded(
                "42883",
                "function round takes a number and an integer",
            ))
        }
    };
    match (args, exact(&args[0])) {
        ([Value::BigDec(_)] | [_, _], Some(d)) => Ok(Value::BigDec(std::sync::Arc::new(
            crate::numeric::normalize(d.with_scale_round(places, RoundingMode::HalfUp)),
        ))),
        ([v], _) => as_f64(v)
            .map(|x| Value::Double(crate::types::positive_zero(x.round_ties_even())))
            .ok_or_else(|| {
                coded(
                    "42883",
                    format!("function round({}) does not exist", kind(v)),
                )
            }),
        ([v, _], None) => Err(coded(
            "42883",
            format!("function round({}, integer) does not exist", kind(v)),
        )),
        _ => Err(coded(
            "42883",
            "function round takes a number and an integer",
        )),
    }
}

fn extreme(vs: &[Value], want: Ordering) -> Result<Value, String> {
    let mut best: Option<&Value> = None;
    for v in vs.iter().filter(|v| !is_null(v)) {
        best = match best {
            None => Some(v),
            Some(b) => {
                let ord = match (exact(v), exact(b), as_f64(v), as_f64(b)) {
                    (Some(x), Some(y), _, _) => x.cmp(&y),
                    (_, _, Some(x), Some(y)) => x.total_cmp(&y),
                    _ => v.cmp(b),
                };
                Some(if ord == want { v } else { b })
            }
        };
    }
    Ok(best.cloned().unwrap_or_else(null))
}

fn arith(args: &[Value], op: &str) -> Result<Value, String> {
    let [a, b] = args else {
        return Err(coded("42883", format!("operator {op} takes two operands")));
    };
    if is_null(a) || is_null(b) {
        return Ok(null());
    }
    match (a, b) {
        (Value::Long(x), Value::Long(y)) => int_arith(*x, *y, op),
        // A decimal with an integer or a decimal: exact numeric arithmetic.
        (Value::Long(_) | Value::BigDec(_), Value::Long(_) | Value::BigDec(_)) => {
            let (Some(x), Some(y)) = (exact(a), exact(b)) else {
                unreachable!("integers and decimals are exact")
            };
            crate::numeric::arith(&x, &y, op)
                .map(|d| Value::BigDec(std::sync::Arc::new(d)))
                .map_err(|_| coded("22012", "division by zero"))
        }
        _ => {
            let (Some(x), Some(y)) = (as_f64(a), as_f64(b)) else {
                return Err(coded(
                    "42883",
                    format!("operator does not exist: {} {op} {}", kind(a), kind(b)),
                ));
            };
            if matches!(op, "/" | "%") && y == 0.0 {
                return Err(coded("22012", "division by zero"));
            }
            Ok(Value::Double(crate::types::positive_zero(match op {
                "+" => x + y,
                "-" => x - y,
                "*" => x * y,
                "/" => x / y,
                _ => x % y,
            })))
        }
    }
}

fn int_arith(x: i64, y: i64, op: &str) -> Result<Value, String> {
    let out = match op {
        "+" => x.checked_add(y),
        "-" => x.checked_sub(y),
        "*" => x.checked_mul(y),
        "/" | "%" if y == 0 => return Err(coded("22012", "division by zero")),
        "/" => x.checked_div(y),
        _ => x.checked_rem(y),
    };
    out.map(Value::Long)
        .ok_or_else(|| coded("22003", "integer out of range"))
}

fn neg(args: &[Value]) -> Result<Value, String> {
    match args {
        [v] if is_null(v) => Ok(null()),
        [Value::Long(x)] => x
            .checked_neg()
            .map(Value::Long)
            .ok_or_else(|| coded("22003", "integer out of range")),
        [Value::Double(x)] => Ok(Value::Double(crate::types::positive_zero(-x))),
        [Value::Float(x)] => Ok(Value::Float(if *x == 0.0 { 0.0 } else { -x })),
        [Value::BigDec(d)] => Ok(Value::BigDec(std::sync::Arc::new(-&**d))),
        [other] => Err(coded(
            "42883",
            format!("operator does not exist: - {}", kind(other)),
        )),
        _ => Err(coded("42883", "unary minus takes one operand")),
    }
}

fn abs(args: &[Value]) -> Result<Value, String> {
    match args {
        [v] if is_null(v) => Ok(null()),
        [Value::Long(x)] => x
            .checked_abs()
            .map(Value::Long)
            .ok_or_else(|| coded("22003", "integer out of range")),
        [Value::Double(x)] => Ok(Value::Double(x.abs())),
        [Value::Float(x)] => Ok(Value::Float(x.abs())),
        [Value::BigDec(d)] => Ok(Value::BigDec(std::sync::Arc::new(d.abs()))),
        _ => Err(coded("42883", "function abs takes one number")),
    }
}

/// An integer or a decimal as an exact decimal.
fn exact(v: &Value) -> Option<bigdecimal::BigDecimal> {
    match v {
        Value::Long(x) => Some((*x).into()),
        Value::BigDec(d) => Some((**d).clone()),
        _ => None,
    }
}

fn as_f64(v: &Value) -> Option<f64> {
    match v {
        Value::Long(x) => Some(*x as f64),
        Value::Double(x) => Some(*x),
        Value::Float(x) => Some(f64::from(*x)),
        Value::BigDec(d) => d.to_string().parse().ok(),
        _ => None,
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Long(_) => "bigint",
        Value::Double(_) => "double precision",
        Value::Float(_) => "real",
        Value::BigDec(_) => "numeric",
        Value::String(_) => "text",
        Value::Boolean(_) => "boolean",
        Value::Instant(_) => "timestamp",
        Value::Uuid(_) => "uuid",
        Value::Bytes(_) => "bytea",
        _ => "unknown",
    }
}

/// SQL comparison: NULL when either side is NULL; numbers of any kind compare by value;
/// other values only with their own kind.
fn compare(args: &[Value], holds: fn(Ordering) -> bool) -> Result<Value, String> {
    let [a, b] = args else {
        return Err(coded("42883", "a comparison takes two operands"));
    };
    if is_null(a) || is_null(b) {
        return Ok(null());
    }
    let ord = match (as_f64(a), as_f64(b)) {
        (Some(x), Some(y)) => match (a, b) {
            (Value::Long(p), Value::Long(q)) => p.cmp(q),
            // Integers and decimals exactly.
            (Value::BigDec(p), Value::BigDec(q)) => p.cmp(q),
            (Value::Long(_) | Value::BigDec(_), Value::Long(_) | Value::BigDec(_)) => {
                match (exact(a), exact(b)) {
                    (Some(p), Some(q)) => p.cmp(&q),
                    _ => x.total_cmp(&y),
                }
            }
            // PostgreSQL's float order: -0 equals 0, NaN equals NaN and is above all.
            _ => x
                .partial_cmp(&y)
                .unwrap_or_else(|| x.is_nan().cmp(&y.is_nan())),
        },
        _ if std::mem::discriminant(a) == std::mem::discriminant(b) => a.cmp(b),
        _ => {
            return Err(coded(
                "42883",
                format!("operator does not exist: {} = {}", kind(a), kind(b)),
            ))
        }
    };
    Ok(Value::Boolean(holds(ord)))
}

fn truth(v: &Value) -> Result<Option<bool>, String> {
    match v {
        Value::Boolean(b) => Ok(Some(*b)),
        v if is_null(v) => Ok(None),
        other => Err(coded(
            "42804",
            format!(
                "argument of AND/OR/NOT must be type boolean, not {}",
                kind(other)
            ),
        )),
    }
}

fn three_valued(v: Option<bool>) -> Value {
    v.map_or_else(null, Value::Boolean)
}

fn and(args: &[Value]) -> Result<Value, String> {
    let mut out = Some(true);
    for a in args {
        match truth(a)? {
            Some(false) => return Ok(Value::Boolean(false)),
            None => out = None,
            Some(true) => {}
        }
    }
    Ok(three_valued(out))
}

fn or(args: &[Value]) -> Result<Value, String> {
    let mut out = Some(false);
    for a in args {
        match truth(a)? {
            Some(true) => return Ok(Value::Boolean(true)),
            None => out = None,
            Some(false) => {}
        }
    }
    Ok(three_valued(out))
}

fn not(args: &[Value]) -> Result<Value, String> {
    match args {
        [v] => Ok(three_valued(truth(v)?.map(|b| !b))),
        _ => Err(coded("42883", "NOT takes one operand")),
    }
}

fn text_fn(args: &[Value], f: fn(&str) -> String) -> Result<Value, String> {
    match args {
        [v] if is_null(v) => Ok(null()),
        [Value::String(s)] => Ok(Value::String(f(s).into())),
        _ => Err(coded("42883", "the function takes one text argument")),
    }
}

fn length(args: &[Value]) -> Result<Value, String> {
    match args {
        [v] if is_null(v) => Ok(null()),
        [Value::String(s)] => Ok(Value::Long(s.chars().count() as i64)),
        _ => Err(coded("42883", "function length takes one text argument")),
    }
}

fn concat(args: &[Value]) -> Result<Value, String> {
    let mut out = String::new();
    for a in args {
        if is_null(a) {
            return Ok(null());
        }
        match a {
            Value::String(s) => out.push_str(s),
            other => out.push_str(&crate::sql::consts::value_edn(other).to_string()),
        }
    }
    Ok(Value::String(out.into()))
}

/// `LIKE` (`ilike`: case-insensitive): `%` any run, `_` one character, `\` escapes.
fn like(args: &[Value], fold: bool) -> Result<Value, String> {
    let [s, p] = args else {
        return Err(coded("42883", "LIKE takes two operands"));
    };
    if is_null(s) || is_null(p) {
        return Ok(null());
    }
    let (Value::String(s), Value::String(p)) = (s, p) else {
        return Err(coded("42883", "LIKE compares text"));
    };
    let (s, p): (Vec<char>, Vec<char>) = if fold {
        (
            s.to_lowercase().chars().collect(),
            p.to_lowercase().chars().collect(),
        )
    } else {
        (s.chars().collect(), p.chars().collect())
    };
    Ok(Value::Boolean(like_match(&s, &p)))
}

pub(crate) fn like_match(s: &[char], p: &[char]) -> bool {
    // Iterative matching with one backtrack point per `%` (linear in practice).
    let (mut i, mut j) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while i < s.len() {
        match p.get(j) {
            Some('%') => {
                star = Some((j, i));
                j += 1;
            }
            Some('\\') if p.get(j + 1) == Some(&s[i]) => {
                i += 1;
                j += 2;
            }
            Some('_') => {
                i += 1;
                j += 1;
            }
            Some(c) if *c == s[i] && *c != '\\' => {
                i += 1;
                j += 1;
            }
            _ => match star {
                Some((sj, si)) => {
                    j = sj + 1;
                    i = si + 1;
                    star = Some((sj, si + 1));
                }
                None => return false,
            },
        }
    }
    p[j..].iter().all(|c| *c == '%')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn l(n: i64) -> Value {
        Value::Long(n)
    }

    #[test]
    fn null_propagates_through_arithmetic_and_comparison() {
        assert!(is_null(&arith(&[null(), l(1)], "+").unwrap()));
        assert!(is_null(
            &compare(&[l(1), null()], |o| o == Ordering::Equal).unwrap()
        ));
        assert_eq!(arith(&[l(2), l(3)], "*").unwrap(), l(6));
        assert_eq!(arith(&[l(7), l(2)], "/").unwrap(), l(3));
        assert!(arith(&[l(1), l(0)], "/").unwrap_err().starts_with("22012"));
        assert!(arith(&[l(i64::MAX), l(1)], "+")
            .unwrap_err()
            .starts_with("22003"));
    }

    #[test]
    fn floats_compare_as_in_postgres() {
        let eq = |a: f64, b: f64| {
            compare(&[Value::Double(a), Value::Double(b)], |o| {
                o == Ordering::Equal
            })
        };
        assert_eq!(eq(0.0, -0.0).unwrap(), Value::Boolean(true));
        assert_eq!(eq(f64::NAN, f64::NAN).unwrap(), Value::Boolean(true));
        let gt = compare(&[Value::Double(f64::NAN), Value::Double(1e300)], |o| {
            o == Ordering::Greater
        });
        assert_eq!(gt.unwrap(), Value::Boolean(true));
    }

    #[test]
    fn numerics_negate() {
        let d = |t: &str| Value::BigDec(std::sync::Arc::new(t.parse().unwrap()));
        assert_eq!(neg(&[d("2.25")]).unwrap(), d("-2.25"));
        assert_eq!(abs(&[d("-2.25")]).unwrap(), d("2.25"));
    }

    #[test]
    fn three_valued_logic() {
        let t = Value::Boolean(true);
        let f = Value::Boolean(false);
        assert_eq!(and(&[null(), f.clone()]).unwrap(), f);
        assert!(is_null(&and(&[null(), t.clone()]).unwrap()));
        assert_eq!(or(&[null(), t.clone()]).unwrap(), t);
        assert!(is_null(&or(&[null(), f.clone()]).unwrap()));
        assert!(is_null(&not(&[null()]).unwrap()));
    }

    #[test]
    fn like_patterns() {
        let m = |s: &str, p: &str| {
            like_match(
                &s.chars().collect::<Vec<_>>(),
                &p.chars().collect::<Vec<_>>(),
            )
        };
        assert!(m("hello", "h%o"));
        assert!(m("hello", "_ello"));
        assert!(!m("hello", "h%x"));
        assert!(m("100%", "100\\%"));
        assert!(m("", "%"));
        assert!(m("abcabc", "%bc"));
    }

    #[test]
    fn coded_messages_map_back_to_sqlstates() {
        let e = coded_message("query/function-failed: vev.sql/div failed: 22012: division by zero")
            .unwrap();
        assert_eq!(e.code, "22012");
        assert_eq!(e.message, "division by zero");
    }
}
