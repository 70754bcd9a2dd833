//! SQL's `numeric` arithmetic, exact as PostgreSQL's: `+ - * %` of integers and decimals
//! are exact, and `/` rounds to the scale PostgreSQL chooses (at least 16 significant
//! digits, and no fewer fraction digits than either operand shows), half away from zero.
//! A float on either side makes the operation a float one, as in PostgreSQL. Results are
//! kept at one scale per value (`normalize`), as stored numerics are, so that equal values
//! group, join and compare as one: `1.5 * 2` is `3` (PostgreSQL shows `3.0`).

use bigdecimal::num_bigint::{BigInt, Sign};
use bigdecimal::{BigDecimal, Signed, Zero};

/// At least this many significant digits in a quotient (PostgreSQL's
/// `NUMERIC_MIN_SIG_DIGITS`).
const MIN_SIG_DIGITS: i64 = 16;
/// The most fraction digits a quotient gets (`NUMERIC_MAX_DISPLAY_SCALE`).
const MAX_SCALE: i64 = 1000;

/// Why an operation has no result.
#[derive(Debug, PartialEq)]
pub enum NumericError {
    DivisionByZero,
}

/// `x op y` for `op` in `+ - * / %`.
pub fn arith(x: &BigDecimal, y: &BigDecimal, op: &str) -> Result<BigDecimal, NumericError> {
    Ok(normalize(match op {
        "+" => x + y,
        "-" => x - y,
        "*" => x * y,
        _ if y.is_zero() => return Err(NumericError::DivisionByZero),
        "/" => divide(x, y),
        // The remainder has the dividend's sign (truncated division), as PostgreSQL's.
        _ => x % y,
    }))
}

/// Exact sum.
pub fn sum<'a>(values: impl Iterator<Item = &'a BigDecimal>) -> BigDecimal {
    normalize(values.fold(BigDecimal::zero(), |total, v| total + v))
}

/// A numeric without trailing fractional zeros. Vev's bigdec values, like Datomic's, differ
/// by scale (2.5M is not 2.50M), SQL's numerics do not: one scale per value makes 2.50 and
/// 2.5 the same datom, so that `=`, GROUP BY, DISTINCT and joins hold them equal. (The
/// scale is not kept for output: PostgreSQL would show 2.50.)
pub fn normalize(d: BigDecimal) -> BigDecimal {
    let n = d.normalized();
    if n.as_bigint_and_exponent().1 < 0 {
        n.with_scale(0)
    } else {
        n
    }
}

/// `x / y` (y not zero) at PostgreSQL's result scale (`select_div_scale` in its
/// `numeric.c`), rounded half away from zero.
fn divide(x: &BigDecimal, y: &BigDecimal) -> BigDecimal {
    let (w1, f1) = base_10000(x);
    let (w2, f2) = base_10000(y);
    // The quotient's weight in base-10000 digits; when the leading digits give no answer,
    // assume the smaller one.
    let mut qweight = w1 - w2;
    if f1 <= f2 {
        qweight -= 1;
    }
    let shown = |d: &BigDecimal| d.fractional_digit_count().max(0);
    let scale = (MIN_SIG_DIGITS - qweight * 4)
        .max(shown(x))
        .max(shown(y))
        .clamp(0, MAX_SCALE);
    // x / y * 10^scale = mx * 10^(scale + sy - sx) / my, with x = mx * 10^-sx.
    let (mx, sx) = x.as_bigint_and_exponent();
    let (my, sy) = y.as_bigint_and_exponent();
    let shift = scale + sy - sx;
    let (num, den) = if shift >= 0 {
        (mx * pow10(shift), my)
    } else {
        (mx, my * pow10(-shift))
    };
    BigDecimal::new(round_half_away(&num, &den), scale)
}

/// `num / den` rounded to an integer, half away from zero.
fn round_half_away(num: &BigInt, den: &BigInt) -> BigInt {
    let negative = (num.sign() == Sign::Minus) != (den.sign() == Sign::Minus);
    let (n, d) = (num.abs(), den.abs());
    let q: BigInt = (&n * 2 + &d) / (&d * 2);
    if negative {
        -q
    } else {
        q
    }
}

fn pow10(n: i64) -> BigInt {
    BigInt::from(10).pow(u32::try_from(n).unwrap_or(u32::MAX))
}

/// A value's weight and first digit in base 10000 (PostgreSQL's digits): `(0, 0)` for zero.
fn base_10000(d: &BigDecimal) -> (i64, i64) {
    if d.is_zero() {
        return (0, 0);
    }
    let (m, scale) = d.as_bigint_and_exponent();
    let m = m.abs();
    let digits = m.to_string().len() as i64;
    // The decimal exponent of the leading digit.
    let lead = digits - 1 - scale;
    let weight = lead.div_euclid(4);
    // floor(|d| / 10000^weight) = |m| * 10^(-scale - 4 weight), in 1..=9999.
    let e = -scale - 4 * weight;
    let first = if e >= 0 { m * pow10(e) } else { m / pow10(-e) };
    let first: i64 = first.to_string().parse().unwrap_or(0);
    (weight, first)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(s: &str) -> BigDecimal {
        s.parse().unwrap()
    }

    fn op(x: &str, o: &str, y: &str) -> String {
        arith(&d(x), &d(y), o).unwrap().to_string()
    }

    /// The quotients PostgreSQL 15 gives (`SELECT x / y`).
    #[test]
    fn division_has_postgresqls_scale() {
        // (Trailing zeros dropped: PostgreSQL shows 10 / 4 as 2.5000000000000000.)
        assert_eq!(op("1.0", "/", "3"), "0.33333333333333333333");
        assert_eq!(op("1", "/", "3"), "0.33333333333333333333");
        assert_eq!(op("2", "/", "3"), "0.66666666666666666667");
        assert_eq!(op("10", "/", "4"), "2.5");
        assert_eq!(op("1", "/", "4"), "0.25");
        assert_eq!(op("-1", "/", "3"), "-0.33333333333333333333");
        assert_eq!(op("100000", "/", "3"), "33333.333333333333");
        assert_eq!(op("1", "/", "30000"), "0.000033333333333333333333");
        assert!(arith(&d("0"), &d("7"), "/").unwrap().is_zero());
        assert_eq!(
            op("7.123456789012345678901", "/", "1"),
            "7.123456789012345678901"
        );
    }

    #[test]
    fn sums_products_and_remainders_are_exact() {
        assert_eq!(op("0.1", "+", "0.2"), "0.3");
        assert_eq!(op("0.1", "*", "3"), "0.3");
        assert_eq!(op("19.99", "*", "3"), "59.97");
        assert_eq!(op("1", "-", "0.9"), "0.1");
        assert_eq!(op("-7.5", "%", "2"), "-1.5");
        assert_eq!(op("7.5", "%", "-2"), "1.5");
        let tenths = vec![d("0.1"); 10];
        assert_eq!(sum(tenths.iter()).to_string(), "1");
        assert_eq!(op("1.5", "*", "2"), op("3", "+", "0"));
        assert_eq!(
            arith(&d("1"), &d("0"), "/"),
            Err(NumericError::DivisionByZero)
        );
        assert_eq!(
            arith(&d("1"), &d("0.00"), "%"),
            Err(NumericError::DivisionByZero)
        );
    }
}
