//! SQL's order of values: ORDER BY's (NULLs placed as asked) and HAVING's comparisons.

use bigdecimal::ToPrimitive;
use vev::Edn;

/// Two values neither of which is NULL in SQL's order: numbers by value whatever their
/// types (HAVING's comparisons).
pub fn compare_values(a: &Edn, b: &Edn) -> std::cmp::Ordering {
    compare_sql(a, b, false, false)
}

/// An integer or decimal as an exact decimal.
fn exact(e: &Edn) -> Option<bigdecimal::BigDecimal> {
    match e {
        Edn::Integer(x) => Some((*x).into()),
        Edn::BigInt(x) => Some(bigdecimal::BigDecimal::new((**x).clone(), 0)),
        Edn::BigDec(x) => Some((**x).clone()),
        _ => None,
    }
}

/// A number as a float (to compare a float with an integer or decimal).
fn float(e: &Edn) -> Option<f64> {
    match e {
        Edn::Integer(x) => Some(*x as f64),
        Edn::Float(x) => Some(*x),
        Edn::BigInt(x) => x.to_f64(),
        Edn::BigDec(x) => x.to_f64(),
        _ => None,
    }
}

/// SQL's sort order of two values: NULLs last ascending (first descending, unless told),
/// numbers by value.
pub fn compare_sql(a: &Edn, b: &Edn, nulls_first: bool, desc: bool) -> std::cmp::Ordering {
    use std::cmp::Ordering;
    let (an, bn) = (crate::sqlfns::is_null_edn(a), crate::sqlfns::is_null_edn(b));
    if an || bn {
        return match (an, bn) {
            (true, true) => Ordering::Equal,
            (true, false) => {
                if nulls_first {
                    Ordering::Less
                } else {
                    Ordering::Greater
                }
            }
            _ => {
                if nulls_first {
                    Ordering::Greater
                } else {
                    Ordering::Less
                }
            }
        };
    }
    let ord = match (a, b) {
        (Edn::Integer(x), Edn::Float(y)) => (*x as f64).total_cmp(y),
        (Edn::Float(x), Edn::Integer(y)) => x.total_cmp(&(*y as f64)),
        // -0 sorts with 0 (they are equal in SQL); NaN above every number.
        (Edn::Float(x), Edn::Float(y)) => x
            .partial_cmp(y)
            .unwrap_or_else(|| x.is_nan().cmp(&y.is_nan())),
        _ if std::mem::discriminant(a) != std::mem::discriminant(b) => match (exact(a), exact(b)) {
            (Some(x), Some(y)) => x.cmp(&y),
            _ => match (float(a), float(b)) {
                (Some(x), Some(y)) => x.total_cmp(&y),
                _ => a.cmp(b),
            },
        },
        _ => a.cmp(b),
    };
    if desc {
        ord.reverse()
    } else {
        ord
    }
}
