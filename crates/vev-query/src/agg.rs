//! Aggregates of `:find`: built-ins and user-registered ones, over a bag of values.

use std::cmp::Ordering;
use std::collections::BTreeSet;

use rand::seq::{IndexedRandom, SliceRandom};
use vev_core::Value;
use vev_edn::Edn;

use crate::error::QueryError;
use crate::fsum::ExactSum;
use crate::funcs::{compare, Registry};

pub(crate) const BUILTIN: &[&str] = &[
    "count",
    "count-distinct",
    "sum",
    "avg",
    "min",
    "max",
    "median",
    "variance",
    "stddev",
    "distinct",
    "rand",
    "sample",
];

pub(crate) fn exists(registry: &Registry, name: &str) -> bool {
    BUILTIN.contains(&name) || registry.aggregates.contains_key(name)
}

fn number(name: &str, v: &Value) -> Result<f64, QueryError> {
    match v {
        Value::Long(n) => Ok(*n as f64),
        Value::Ref(n) => Ok(*n as f64),
        Value::Double(d) => Ok(*d),
        Value::Float(f) => Ok(*f as f64),
        Value::BigInt(b) => Ok(b.to_string().parse().unwrap_or(f64::NAN)),
        Value::BigDec(d) => Ok(d.to_string().parse().unwrap_or(f64::NAN)),
        other => Err(QueryError::type_error(
            name,
            format!("expects numbers, got {other}"),
        )),
    }
}

/// The values summed exactly (longs and entity ids as integers, the rest as their doubles),
/// so that `sum` and `avg` do not depend on the order of the rows (`fsum`).
fn exact_sum(name: &str, vals: &[Value]) -> Result<ExactSum, QueryError> {
    let mut sum = ExactSum::default();
    for v in vals {
        match v {
            Value::Long(n) => sum.add_int(i128::from(*n)),
            Value::Ref(n) => sum.add_int(i128::from(*n)),
            other => sum.add_f64(number(name, other)?),
        }
    }
    Ok(sum)
}

fn sort_values(name: &str, vals: &mut [Value]) -> Result<(), QueryError> {
    if let Some(first) = vals.iter().find(|v| !matches!(v, Value::Nil)) {
        for v in vals.iter() {
            compare(name, first, v)?;
        }
    }
    vals.sort_by(|a, b| compare(name, a, b).unwrap_or(Ordering::Equal));
    Ok(())
}

/// The most values `(rand n ?x)` may draw: it draws with replacement, so `n` is not bounded
/// by the data, and a huge `n` would exhaust memory.
const RAND_COUNT_MAX: usize = 1_000_000;

/// The sum of longs (in 128 bits, so only the total has to fit), or an overflow error quoting
/// the values.
fn sum_longs(name: &str, vals: &[Value]) -> Result<Edn, QueryError> {
    let mut total: i128 = 0;
    for v in vals {
        total += match v {
            Value::Long(n) => i128::from(*n),
            Value::Ref(n) => i128::from(*n),
            _ => unreachable!("sum_longs is given longs and refs"),
        };
    }
    i64::try_from(total)
        .map(Edn::Integer)
        .map_err(|_| crate::funcs::overflow(name, vals))
}

/// The median of values sorted by [`compare`]: the middle one, or the mean of the middle two
/// (an integer when two longs have an integral mean, computed without overflow).
fn median(name: &str, mut xs: Vec<Value>) -> Result<Edn, QueryError> {
    sort_values(name, &mut xs)?;
    let n = xs.len();
    if n == 0 {
        return Ok(Edn::Nil);
    }
    if n % 2 == 1 {
        return Ok(xs[n / 2].to_edn());
    }
    if let (Value::Long(a), Value::Long(b)) = (&xs[n / 2 - 1], &xs[n / 2]) {
        let s = i128::from(*a) + i128::from(*b);
        return Ok(if s % 2 == 0 {
            Edn::Integer((s / 2) as i64)
        } else {
            Edn::Float(s as f64 / 2.0)
        });
    }
    let (a, b) = (number(name, &xs[n / 2 - 1])?, number(name, &xs[n / 2])?);
    Ok(Edn::Float(a / 2.0 + b / 2.0))
}

fn count_arg(name: &str, args: &[Edn]) -> Result<usize, QueryError> {
    match args {
        [Edn::Integer(n)] if *n >= 0 => Ok(*n as usize),
        _ => Err(QueryError::type_error(
            name,
            format!("expects a count argument, as in ({name} 3 ?x)"),
        )),
    }
}

/// Aggregate `vals` (the aggregated variable's values in one group, duplicates kept).
pub(crate) fn aggregate(
    registry: &Registry,
    name: &str,
    args: &[Edn],
    vals: Vec<Value>,
) -> Result<Edn, QueryError> {
    if let Some(f) = registry.aggregates.get(name) {
        return f(&vals)
            .map(|v| v.to_edn())
            .map_err(|m| QueryError::type_error(name, m));
    }
    let with_n = !args.is_empty();
    Ok(match name {
        "count" => Edn::Integer(vals.len() as i64),
        "count-distinct" => Edn::Integer(vals.iter().collect::<BTreeSet<_>>().len() as i64),
        "distinct" => Edn::Set(vals.iter().map(Value::to_edn).collect()),
        "sum" => {
            if vals
                .iter()
                .all(|v| matches!(v, Value::Long(_) | Value::Ref(_)))
            {
                sum_longs(name, &vals)?
            } else {
                Edn::Float(exact_sum(name, &vals)?.value())
            }
        }
        "avg" => Edn::Float(exact_sum(name, &vals)?.value() / vals.len() as f64),
        "variance" | "stddev" => {
            let mean = exact_sum(name, &vals)?.value() / vals.len() as f64;
            let mut squares = ExactSum::default();
            for v in &vals {
                let x = number(name, v)?;
                squares.add_f64((x - mean) * (x - mean));
            }
            let var = squares.value() / vals.len() as f64;
            Edn::Float(if name == "variance" { var } else { var.sqrt() })
        }
        "median" => median(name, vals)?,
        "min" | "max" if !with_n => {
            let Some(mut best) = vals.first().cloned() else {
                return Ok(Edn::Nil);
            };
            for v in &vals[1..] {
                let ord = compare(name, v, &best)?;
                if (name == "min" && ord == Ordering::Less)
                    || (name == "max" && ord == Ordering::Greater)
                {
                    best = v.clone();
                }
            }
            best.to_edn()
        }
        "min" | "max" => {
            let n = count_arg(name, args)?;
            let mut xs: Vec<Value> = vals;
            sort_values(name, &mut xs)?;
            if name == "max" {
                xs.reverse();
            }
            Edn::Vector(xs.iter().take(n).map(Value::to_edn).collect())
        }
        "rand" => {
            let n = count_arg(name, args)?;
            if n > RAND_COUNT_MAX {
                return Err(QueryError::type_error(
                    name,
                    format!("count {n} is over the limit of {RAND_COUNT_MAX}"),
                ));
            }
            let mut rng = rand::rng();
            Edn::Vector(
                (0..n)
                    .filter_map(|_| vals.choose(&mut rng))
                    .map(Value::to_edn)
                    .collect(),
            )
        }
        "sample" => {
            let n = count_arg(name, args)?;
            let mut xs: Vec<Value> = vals
                .into_iter()
                .collect::<BTreeSet<_>>()
                .into_iter()
                .collect();
            xs.shuffle(&mut rand::rng());
            Edn::Vector(xs.iter().take(n).map(Value::to_edn).collect())
        }
        _ => {
            return Err(QueryError::UnknownAggregate {
                name: name.to_owned(),
                span: None,
            })
        }
    })
}
