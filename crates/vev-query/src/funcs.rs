//! Built-in functions and predicates of `:where` expressions, and user-registered ones.
//!
//! Functions take and return database values. Numbers follow Clojure where it matters to
//! results: integer arithmetic stays integral and errors on overflow, `=` does not equate an
//! integer with a double, comparisons order numbers of any kind numerically. Entity ids (refs)
//! act as integers. Functions that need a database (`get-else`, `get-some`, `missing?`) live
//! in the executor.

use std::cell::RefCell;
use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use regex::Regex;
use vev_core::Value;
use vev_edn::Keyword;

use crate::error::QueryError;
use crate::values::truthy;

/// A user function: arguments in, a value (or a message saying what was wrong) out.
pub type UserFn = Arc<dyn Fn(&[Value]) -> Result<Value, String> + Send + Sync>;

/// A user aggregate: the values of the aggregated variable (a bag) in, a value out.
pub type UserAggregate = Arc<dyn Fn(&[Value]) -> Result<Value, String> + Send + Sync>;

/// Functions and aggregates users registered, by symbol.
#[derive(Clone, Default)]
pub struct Registry {
    pub(crate) functions: HashMap<String, UserFn>,
    pub(crate) aggregates: HashMap<String, UserAggregate>,
}

impl Registry {
    /// A registry with no user functions or aggregates (the built-ins are always there).
    pub fn new() -> Registry {
        Registry::default()
    }

    /// Register `f` under `name` (e.g. `"my/discount"`); usable as a predicate or function.
    pub fn register_fn(
        &mut self,
        name: &str,
        f: impl Fn(&[Value]) -> Result<Value, String> + Send + Sync + 'static,
    ) {
        self.functions.insert(name.to_owned(), Arc::new(f));
    }

    /// Register an aggregate usable in `:find` as `(name ?x)`.
    pub fn register_aggregate(
        &mut self,
        name: &str,
        f: impl Fn(&[Value]) -> Result<Value, String> + Send + Sync + 'static,
    ) {
        self.aggregates.insert(name.to_owned(), Arc::new(f));
    }
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("functions", &self.functions.keys().collect::<Vec<_>>())
            .field("aggregates", &self.aggregates.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// Whether `name` is a built-in or registered function.
pub(crate) fn exists(registry: &Registry, name: &str) -> bool {
    registry.functions.contains_key(name) || BUILTINS.contains(&name) || DB_FNS.contains(&name)
}

/// Functions the executor implements because they read a database.
pub(crate) const DB_FNS: &[&str] = &["fulltext", "get-else", "get-some", "missing?"];

pub(crate) const BUILTINS: &[&str] = &[
    "=",
    "==",
    "!=",
    "not=",
    "<",
    ">",
    "<=",
    ">=",
    "+",
    "-",
    "*",
    "/",
    "quot",
    "rem",
    "mod",
    "inc",
    "dec",
    "min",
    "max",
    "str",
    "subs",
    "count",
    "re-find",
    "re-matches",
    "re-seq",
    "re-pattern",
    "starts-with?",
    "ends-with?",
    "includes?",
    "clojure.string/starts-with?",
    "clojure.string/ends-with?",
    "clojure.string/includes?",
    "clojure.string/blank?",
    "blank?",
    "nil?",
    "some?",
    "zero?",
    "pos?",
    "neg?",
    "even?",
    "odd?",
    "vector",
    "list",
    "hash-map",
    "type",
    "name",
    "namespace",
    "keyword",
    "identity",
    "ground",
    "tuple",
    "untuple",
    "true?",
    "false?",
    "not",
    "abs",
    "lower-case",
    "upper-case",
    "clojure.string/lower-case",
    "clojure.string/upper-case",
];

/// Call function `name` on `args`.
pub(crate) fn call(registry: &Registry, name: &str, args: &[Value]) -> Result<Value, QueryError> {
    if let Some(f) = registry.functions.get(name) {
        return f(args).map_err(|m| QueryError::type_error(name, m));
    }
    builtin(name, args)
}

fn arity(name: &str, args: &[Value], min: usize, max: usize) -> Result<(), QueryError> {
    if args.len() < min || args.len() > max {
        let want = if min == max {
            format!("{min}")
        } else if max == usize::MAX {
            format!("at least {min}")
        } else {
            format!("{min} to {max}")
        };
        return Err(QueryError::type_error(
            name,
            format!("expects {want} arguments, got {}", args.len()),
        ));
    }
    Ok(())
}

/// A number as the arithmetic sees it.
#[derive(Clone, Copy, Debug)]
enum Num {
    Int(i64),
    Float(f64),
}

fn num(name: &str, v: &Value) -> Result<Num, QueryError> {
    Ok(match v {
        Value::Long(n) => Num::Int(*n),
        Value::Ref(e) => match i64::try_from(*e) {
            Ok(n) => Num::Int(n),
            Err(_) => {
                return Err(QueryError::type_error(
                    name,
                    format!("entity id {e} does not fit a long"),
                ))
            }
        },
        Value::Double(d) => Num::Float(*d),
        Value::Float(f) => Num::Float(*f as f64),
        Value::BigInt(b) => match i64::try_from(&**b) {
            Ok(n) => Num::Int(n),
            Err(_) => Num::Float(b.to_string().parse().unwrap_or(f64::NAN)),
        },
        Value::BigDec(d) => Num::Float(d.to_string().parse().unwrap_or(f64::NAN)),
        other => {
            return Err(QueryError::type_error(
                name,
                format!("expects numbers, got {other}"),
            ))
        }
    })
}

fn is_num(v: &Value) -> bool {
    matches!(
        v,
        Value::Long(_)
            | Value::Ref(_)
            | Value::Double(_)
            | Value::Float(_)
            | Value::BigInt(_)
            | Value::BigDec(_)
    )
}

fn num_value(n: Num) -> Value {
    match n {
        Num::Int(i) => Value::Long(i),
        Num::Float(f) => Value::Double(f),
    }
}

fn as_f64(n: Num) -> f64 {
    match n {
        Num::Int(i) => i as f64,
        Num::Float(f) => f,
    }
}

/// `(name args...)` overflowed a long; the message shows the call.
pub(crate) fn overflow(name: &str, args: &[Value]) -> QueryError {
    let mut call = format!("({name}");
    for a in args {
        call.push(' ');
        call.push_str(&a.to_string());
    }
    call.push(')');
    QueryError::Overflow { call, span: None }
}

fn arith(name: &str, args: &[Value]) -> Result<Value, QueryError> {
    let op = |a: Num, b: Num| -> Result<Num, QueryError> {
        Ok(match (a, b) {
            (Num::Int(x), Num::Int(y)) => Num::Int(
                match name {
                    "+" => x.checked_add(y),
                    "-" => x.checked_sub(y),
                    _ => x.checked_mul(y),
                }
                .ok_or_else(|| overflow(name, args))?,
            ),
            (x, y) => {
                let (x, y) = (as_f64(x), as_f64(y));
                Num::Float(match name {
                    "+" => x + y,
                    "-" => x - y,
                    _ => x * y,
                })
            }
        })
    };
    let nums = args
        .iter()
        .map(|a| num(name, a))
        .collect::<Result<Vec<_>, _>>()?;
    let result = match (name, nums.as_slice()) {
        ("+", []) => Num::Int(0),
        ("*", []) => Num::Int(1),
        ("-", []) => {
            return Err(QueryError::type_error(
                name,
                "expects at least 1 argument".into(),
            ))
        }
        ("-", [x]) => op(Num::Int(0), *x)?,
        (_, [first, rest @ ..]) => {
            let mut acc = *first;
            for n in rest {
                acc = op(acc, *n)?;
            }
            acc
        }
        _ => unreachable!("empty argument lists are matched above"),
    };
    Ok(num_value(result))
}

fn divide(args: &[Value]) -> Result<Value, QueryError> {
    arity("/", args, 1, usize::MAX)?;
    let nums = args
        .iter()
        .map(|a| num("/", a))
        .collect::<Result<Vec<_>, _>>()?;
    let (mut acc, rest) = if nums.len() == 1 {
        (Num::Int(1), &nums[..])
    } else {
        (nums[0], &nums[1..])
    };
    for n in rest {
        acc = match (acc, *n) {
            (Num::Int(_), Num::Int(0)) => {
                return Err(QueryError::type_error("/", "divide by zero".into()))
            }
            // `checked_rem` first: `i64::MIN % -1` overflows too.
            (Num::Int(x), Num::Int(y)) if x.checked_rem(y) == Some(0) => {
                Num::Int(x.checked_div(y).ok_or_else(|| overflow("/", args))?)
            }
            (Num::Int(x), Num::Int(y)) if x.checked_rem(y).is_none() => {
                return Err(overflow("/", args))
            }
            (x, y) => Num::Float(as_f64(x) / as_f64(y)),
        };
    }
    Ok(num_value(acc))
}

fn int_op(name: &str, args: &[Value]) -> Result<Value, QueryError> {
    arity(name, args, 2, 2)?;
    let (x, y) = match (num(name, &args[0])?, num(name, &args[1])?) {
        (Num::Int(x), Num::Int(y)) => (x, y),
        (x, y) => {
            let (x, y) = (as_f64(x), as_f64(y));
            if y == 0.0 {
                return Err(QueryError::type_error(name, "divide by zero".into()));
            }
            let q = (x / y).trunc();
            return Ok(Value::Double(match name {
                "quot" => q,
                "rem" => x - q * y,
                _ => x - (x / y).floor() * y,
            }));
        }
    };
    if y == 0 {
        return Err(QueryError::type_error(name, "divide by zero".into()));
    }
    // Only the quotient can overflow: `i64::MIN % -1` is 0 (as Java's), though Rust's `%`
    // panics on it.
    let r = x.wrapping_rem(y);
    let r = match name {
        "quot" => x.checked_div(y),
        "rem" => Some(r),
        _ => Some(if r != 0 && (r < 0) != (y < 0) {
            r + y
        } else {
            r
        }),
    };
    r.map(Value::Long).ok_or_else(|| overflow(name, args))
}

/// Equality as Clojure's `=`, with entity ids equal to the same integer.
pub(crate) fn values_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Ref(x), Value::Long(y)) | (Value::Long(y), Value::Ref(x)) => {
            *y >= 0 && *x == *y as u64
        }
        _ => a == b,
    }
}

/// Compare a long with a double exactly (casting the long would make `i64::MAX` equal
/// `9.223372036854776e18`, and the order intransitive); `None` for NaN.
fn int_float_cmp(x: i64, y: f64) -> Option<Ordering> {
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    if y.is_nan() {
        return None;
    }
    if y >= TWO_63 {
        return Some(Ordering::Less);
    }
    if y < -TWO_63 {
        return Some(Ordering::Greater);
    }
    let whole = y.trunc();
    // In range, so the cast is exact.
    Some(
        x.cmp(&(whole as i64))
            .then_with(|| 0.0_f64.partial_cmp(&(y - whole)).unwrap_or(Ordering::Equal)),
    )
}

/// Numeric order of two numbers; `None` when either is NaN.
fn num_cmp(a: Num, b: Num) -> Option<Ordering> {
    match (a, b) {
        (Num::Int(x), Num::Int(y)) => Some(x.cmp(&y)),
        (Num::Int(x), Num::Float(y)) => int_float_cmp(x, y),
        (Num::Float(x), Num::Int(y)) => int_float_cmp(y, x).map(Ordering::reverse),
        (Num::Float(x), Num::Float(y)) => x.partial_cmp(&y),
    }
}

/// Order two values as the comparison predicates see them: numbers numerically (`None` when
/// one is NaN: every comparison with NaN is false, as in Clojure), otherwise values of one
/// kind, or `nil` with anything.
fn compare_partial(name: &str, a: &Value, b: &Value) -> Result<Option<Ordering>, QueryError> {
    if is_num(a) && is_num(b) {
        return Ok(num_cmp(num(name, a)?, num(name, b)?));
    }
    if std::mem::discriminant(a) == std::mem::discriminant(b)
        || matches!((a, b), (Value::Nil, _) | (_, Value::Nil))
    {
        return Ok(Some(a.cmp(b)));
    }
    Err(QueryError::type_error(
        name,
        format!("cannot compare {a} with {b}"),
    ))
}

/// A total order for sorting and `min`/`max`: [`compare_partial`] with NaN above every other
/// number and equal to itself (Java's `Double.compare`).
pub(crate) fn compare(name: &str, a: &Value, b: &Value) -> Result<Ordering, QueryError> {
    let is_nan = |v: &Value| match v {
        Value::Double(d) => d.is_nan(),
        Value::Float(f) => f.is_nan(),
        _ => false,
    };
    Ok(match compare_partial(name, a, b)? {
        Some(o) => o,
        None => is_nan(a).cmp(&is_nan(b)),
    })
}

fn comparison(name: &str, args: &[Value]) -> Result<Value, QueryError> {
    arity(name, args, 1, usize::MAX)?;
    for pair in args.windows(2) {
        let Some(ord) = compare_partial(name, &pair[0], &pair[1])? else {
            return Ok(Value::Boolean(false));
        };
        let ok = match name {
            "<" => ord == Ordering::Less,
            ">" => ord == Ordering::Greater,
            "<=" => ord != Ordering::Greater,
            _ => ord != Ordering::Less,
        };
        if !ok {
            return Ok(Value::Boolean(false));
        }
    }
    Ok(Value::Boolean(true))
}

fn extreme(name: &str, args: &[Value]) -> Result<Value, QueryError> {
    arity(name, args, 1, usize::MAX)?;
    let mut best = args[0].clone();
    for v in &args[1..] {
        let ord = compare(name, v, &best)?;
        if (name == "min" && ord == Ordering::Less) || (name == "max" && ord == Ordering::Greater) {
            best = v.clone();
        }
    }
    Ok(best)
}

/// The text `str` makes of a value: strings as they are, `nil` as nothing, others as EDN.
pub(crate) fn to_str(v: &Value) -> String {
    match v {
        Value::Nil => String::new(),
        Value::String(s) => String::from(s.as_str()),
        Value::Uri(s) => String::from(&**s),
        other => other.to_string(),
    }
}

fn string<'v>(name: &str, v: &'v Value) -> Result<&'v str, QueryError> {
    match v {
        Value::String(s) => Ok(s),
        other => Err(QueryError::type_error(
            name,
            format!("expects a string, got {other}"),
        )),
    }
}

fn long(name: &str, v: &Value) -> Result<i64, QueryError> {
    match num(name, v)? {
        Num::Int(n) => Ok(n),
        Num::Float(_) => Err(QueryError::type_error(
            name,
            format!("expects an integer, got {v}"),
        )),
    }
}

thread_local! {
    static REGEX_CACHE: RefCell<HashMap<String, Regex>> = RefCell::new(HashMap::new());
}

fn with_regex<T>(
    name: &str,
    pattern: &Value,
    f: impl FnOnce(&Regex) -> T,
) -> Result<T, QueryError> {
    let text = string(name, pattern)?;
    REGEX_CACHE.with(|cache| {
        let mut cache = cache.borrow_mut();
        if !cache.contains_key(text) {
            let re = Regex::new(text).map_err(|e| {
                QueryError::type_error(name, format!("invalid regular expression \"{text}\": {e}"))
            })?;
            if cache.len() > 256 {
                cache.clear();
            }
            cache.insert(text.to_owned(), re);
        }
        Ok(f(&cache[text]))
    })
}

/// A regex match as Clojure returns it: the match, or `[match group...]` with groups.
fn match_value(caps: &regex::Captures<'_>) -> Value {
    if caps.len() == 1 {
        return Value::string(caps.get(0).map_or("", |m| m.as_str()));
    }
    Value::Tuple(
        caps.iter()
            .map(|m| m.map_or(Value::Nil, |m| Value::string(m.as_str())))
            .collect(),
    )
}

fn predicate(
    name: &str,
    args: &[Value],
    f: impl Fn(&Value) -> Result<bool, QueryError>,
) -> Result<Value, QueryError> {
    arity(name, args, 1, 1)?;
    f(&args[0]).map(Value::Boolean)
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Nil => "nil",
        Value::Ref(_) | Value::Long(_) => "java.lang.Long",
        Value::Keyword(_) => "clojure.lang.Keyword",
        Value::String(_) => "java.lang.String",
        Value::Boolean(_) => "java.lang.Boolean",
        Value::BigInt(_) => "clojure.lang.BigInt",
        Value::Double(_) => "java.lang.Double",
        Value::Float(_) => "java.lang.Float",
        Value::BigDec(_) => "java.math.BigDecimal",
        Value::Instant(_) => "java.util.Date",
        Value::Uuid(_) => "java.util.UUID",
        Value::Uri(_) => "java.net.URI",
        Value::Bytes(_) => "[B",
        Value::Symbol(_) => "clojure.lang.Symbol",
        Value::Tuple(_) => "clojure.lang.PersistentVector",
        Value::Map(_) => "clojure.lang.PersistentArrayMap",
    }
}

fn builtin(name: &str, args: &[Value]) -> Result<Value, QueryError> {
    let b = Value::Boolean;
    match name {
        "=" | "==" => {
            arity(name, args, 1, usize::MAX)?;
            Ok(b(args.windows(2).all(|p| values_equal(&p[0], &p[1]))))
        }
        "!=" | "not=" => {
            arity(name, args, 1, usize::MAX)?;
            Ok(b(!args.windows(2).all(|p| values_equal(&p[0], &p[1]))))
        }
        "<" | ">" | "<=" | ">=" => comparison(name, args),
        "+" | "-" | "*" => arith(name, args),
        "/" => divide(args),
        "quot" | "rem" | "mod" => int_op(name, args),
        "inc" | "dec" => inc_dec(name, args),
        "abs" => abs(name, args),
        "min" | "max" => extreme(name, args),
        "str" => Ok(Value::from(args.iter().map(to_str).collect::<String>())),
        "subs" => subs(name, args),
        "count" => count(name, args),
        "re-pattern" => {
            arity(name, args, 1, 1)?;
            with_regex(name, &args[0], |_| ())?;
            Ok(args[0].clone())
        }
        "re-find" => re_find(name, args),
        "re-matches" => re_matches(name, args),
        "re-seq" => re_seq(name, args),
        "starts-with?" | "clojure.string/starts-with?" => {
            arity(name, args, 2, 2)?;
            Ok(b(
                string(name, &args[0])?.starts_with(string(name, &args[1])?)
            ))
        }
        "ends-with?" | "clojure.string/ends-with?" => {
            arity(name, args, 2, 2)?;
            Ok(b(string(name, &args[0])?.ends_with(string(name, &args[1])?)))
        }
        "includes?" | "clojure.string/includes?" => {
            arity(name, args, 2, 2)?;
            Ok(b(string(name, &args[0])?.contains(string(name, &args[1])?)))
        }
        "lower-case" | "clojure.string/lower-case" => {
            arity(name, args, 1, 1)?;
            Ok(Value::from(string(name, &args[0])?.to_lowercase()))
        }
        "upper-case" | "clojure.string/upper-case" => {
            arity(name, args, 1, 1)?;
            Ok(Value::from(string(name, &args[0])?.to_uppercase()))
        }
        "blank?" | "clojure.string/blank?" => predicate(name, args, |v| match v {
            Value::Nil => Ok(true),
            v => Ok(string(name, v)?.trim().is_empty()),
        }),
        "nil?" => predicate(name, args, |v| Ok(matches!(v, Value::Nil))),
        "some?" => predicate(name, args, |v| Ok(!matches!(v, Value::Nil))),
        "true?" => predicate(name, args, |v| Ok(matches!(v, Value::Boolean(true)))),
        "false?" => predicate(name, args, |v| Ok(matches!(v, Value::Boolean(false)))),
        "not" => predicate(name, args, |v| Ok(!truthy(v))),
        "zero?" | "pos?" | "neg?" => predicate(name, args, |v| {
            let x = as_f64(num(name, v)?);
            Ok(match name {
                "zero?" => x == 0.0,
                "pos?" => x > 0.0,
                _ => x < 0.0,
            })
        }),
        "even?" | "odd?" => predicate(name, args, |v| {
            let n = long(name, v)?;
            Ok((n % 2 == 0) == (name == "even?"))
        }),
        "vector" | "list" | "tuple" => Ok(Value::Tuple(args.iter().cloned().collect())),
        "hash-map" => hash_map(name, args),
        "type" => {
            arity(name, args, 1, 1)?;
            Ok(Value::Symbol(vev_edn::Symbol::new(type_name(&args[0]))))
        }
        "name" | "namespace" => name_or_namespace(name, args),
        "keyword" => keyword(name, args),
        "identity" | "ground" | "untuple" => {
            arity(name, args, 1, 1)?;
            Ok(args[0].clone())
        }
        _ => Err(QueryError::UnknownFunction {
            name: name.to_owned(),
            span: None,
        }),
    }
}

/// `inc`, `dec`: checked for longs.
fn inc_dec(name: &str, args: &[Value]) -> Result<Value, QueryError> {
    arity(name, args, 1, 1)?;
    Ok(match num(name, &args[0])? {
        Num::Int(n) => Value::Long(
            match name {
                "inc" => n.checked_add(1),
                _ => n.checked_sub(1),
            }
            .ok_or_else(|| overflow(name, args))?,
        ),
        Num::Float(f) => Value::Double(if name == "inc" { f + 1.0 } else { f - 1.0 }),
    })
}

/// `abs`: checked for longs (the absolute value of the least long overflows).
fn abs(name: &str, args: &[Value]) -> Result<Value, QueryError> {
    arity(name, args, 1, 1)?;
    Ok(match num(name, &args[0])? {
        Num::Int(n) => Value::Long(n.checked_abs().ok_or_else(|| overflow(name, args))?),
        Num::Float(f) => Value::Double(f.abs()),
    })
}

/// `subs`: a substring by character positions.
fn subs(name: &str, args: &[Value]) -> Result<Value, QueryError> {
    arity(name, args, 2, 3)?;
    let s: Vec<char> = string(name, &args[0])?.chars().collect();
    let start = long(name, &args[1])?;
    let end = match args.get(2) {
        Some(e) => long(name, e)?,
        None => s.len() as i64,
    };
    if start < 0 || end < start || end as usize > s.len() {
        return Err(QueryError::type_error(
            name,
            format!(
                "index out of range: {start} to {end} of a string of length {}",
                s.len()
            ),
        ));
    }
    Ok(Value::from(
        s[start as usize..end as usize].iter().collect::<String>(),
    ))
}

/// `count` of a string (in characters), tuple, map or bytes; 0 for nil.
fn count(name: &str, args: &[Value]) -> Result<Value, QueryError> {
    arity(name, args, 1, 1)?;
    Ok(Value::Long(match &args[0] {
        Value::Nil => 0,
        Value::String(s) => s.chars().count() as i64,
        Value::Tuple(items) => items.len() as i64,
        Value::Map(m) => m.len() as i64,
        Value::Bytes(bytes) => bytes.len() as i64,
        other => {
            return Err(QueryError::type_error(
                name,
                format!("count not supported on {other}"),
            ))
        }
    }))
}

/// `re-find`: the first match of a regex in a string.
fn re_find(name: &str, args: &[Value]) -> Result<Value, QueryError> {
    arity(name, args, 2, 2)?;
    let s = string(name, &args[1])?;
    with_regex(name, &args[0], |re| {
        re.captures(s).map_or(Value::Nil, |c| match_value(&c))
    })
}

/// `re-matches`: the match of a regex against the whole string.
fn re_matches(name: &str, args: &[Value]) -> Result<Value, QueryError> {
    arity(name, args, 2, 2)?;
    let s = string(name, &args[1])?;
    with_regex(name, &args[0], |re| {
        re.captures(s)
            .filter(|c| {
                c.get(0)
                    .is_some_and(|m| m.start() == 0 && m.end() == s.len())
            })
            .map_or(Value::Nil, |c| match_value(&c))
    })
}

/// `re-seq`: every match of a regex in a string.
fn re_seq(name: &str, args: &[Value]) -> Result<Value, QueryError> {
    arity(name, args, 2, 2)?;
    let s = string(name, &args[1])?;
    with_regex(name, &args[0], |re| {
        let all: Vec<Value> = re.captures_iter(s).map(|c| match_value(&c)).collect();
        if all.is_empty() {
            Value::Nil
        } else {
            Value::Tuple(all.into())
        }
    })
}

/// `hash-map` of alternating keys and values.
fn hash_map(name: &str, args: &[Value]) -> Result<Value, QueryError> {
    if !args.len().is_multiple_of(2) {
        return Err(QueryError::type_error(
            name,
            format!("expects an even number of arguments, got {}", args.len()),
        ));
    }
    let m: BTreeMap<Value, Value> = args
        .chunks(2)
        .map(|kv| (kv[0].clone(), kv[1].clone()))
        .collect();
    Ok(Value::Map(Arc::new(m)))
}

/// `name`, `namespace` of a keyword or symbol (`name` also of a string).
fn name_or_namespace(name: &str, args: &[Value]) -> Result<Value, QueryError> {
    arity(name, args, 1, 1)?;
    let (ns, n) = match &args[0] {
        Value::Keyword(k) => (k.namespace().map(str::to_owned), k.name().to_owned()),
        Value::Symbol(s) => (s.namespace().map(str::to_owned), s.name().to_owned()),
        Value::String(s) if name == "name" => (None, String::from(&**s)),
        other => {
            return Err(QueryError::type_error(
                name,
                format!("expects a keyword or symbol, got {other}"),
            ))
        }
    };
    Ok(if name == "name" {
        Value::from(n)
    } else {
        ns.map_or(Value::Nil, Value::from)
    })
}

/// `keyword` from a name, or a namespace and a name.
fn keyword(name: &str, args: &[Value]) -> Result<Value, QueryError> {
    arity(name, args, 1, 2)?;
    let text = match args {
        [Value::Keyword(k)] => return Ok(Value::Keyword(k.clone())),
        [one] => to_str(one),
        [Value::Nil, n] => to_str(n),
        [ns, n] => format!("{}/{}", to_str(ns), to_str(n)),
        _ => unreachable!("arity is checked"),
    };
    if !vev_edn::is_valid_keyword(&text) {
        return Err(QueryError::type_error(
            name,
            format!("\"{text}\" is not a valid keyword"),
        ));
    }
    Ok(Value::Keyword(Keyword::new(&text)))
}
