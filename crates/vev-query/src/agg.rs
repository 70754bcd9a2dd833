//! Aggregates of `:find`: built-ins and user-registered ones, over a bag of values.

use std::cmp::Ordering;
use std::collections::BTreeSet;

use rand::seq::{IndexedRandom, SliceRandom};
use vev_core::Value;
use vev_edn::Edn;

use crate::error::QueryError;
use crate::funcs::{compare, Registry};

const BUILTIN: &[&str] = &[
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

fn numbers(name: &str, vals: &[Value]) -> Result<Vec<f64>, QueryError> {
    vals.iter()
        .map(|v| match v {
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
        })
        .collect()
}

fn sort_values(name: &str, vals: &mut [Value]) -> Result<(), QueryError> {
    let mut err = None;
    vals.sort_by(|a, b| match compare(name, a, b) {
        Ok(o) => o,
        Err(e) => {
            err.get_or_insert(e);
            Ordering::Equal
        }
    });
    err.map_or(Ok(()), Err)
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
                let mut total: i64 = 0;
                for v in &vals {
                    let n = match v {
                        Value::Long(n) => *n,
                        Value::Ref(n) => *n as i64,
                        _ => unreachable!("checked above"),
                    };
                    total = total
                        .checked_add(n)
                        .ok_or_else(|| QueryError::type_error(name, "integer overflow".into()))?;
                }
                Edn::Integer(total)
            } else {
                Edn::Float(numbers(name, &vals)?.iter().sum())
            }
        }
        "avg" => {
            let xs = numbers(name, &vals)?;
            Edn::Float(xs.iter().sum::<f64>() / xs.len() as f64)
        }
        "variance" | "stddev" => {
            let xs = numbers(name, &vals)?;
            let mean = xs.iter().sum::<f64>() / xs.len() as f64;
            let var = xs.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / xs.len() as f64;
            Edn::Float(if name == "variance" { var } else { var.sqrt() })
        }
        "median" => {
            let mut xs = vals;
            sort_values(name, &mut xs)?;
            let n = xs.len();
            if n % 2 == 1 {
                xs[n / 2].to_edn()
            } else {
                let pair = numbers(name, &xs[n / 2 - 1..=n / 2])?;
                let m = (pair[0] + pair[1]) / 2.0;
                match (&xs[n / 2 - 1], &xs[n / 2]) {
                    (Value::Long(_), Value::Long(_)) if m.fract() == 0.0 => Edn::Integer(m as i64),
                    _ => Edn::Float(m),
                }
            }
        }
        "min" | "max" if !with_n => {
            let mut best = vals[0].clone();
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
