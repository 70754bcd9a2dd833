//! The EDN printer: `Display` for [`Edn`].
//!
//! The printer's one promise is a lossless round trip: `parse(&v.to_string()) == Ok(v)` for
//! every value the reader can produce, and printing is a fixed point (print, parse, print gives
//! the same text). That decides every choice below:
//!
//! - floats use Rust's shortest round-trip representation (`{:?}`), which always has a `.` or
//!   an `e`, so they never read back as integers; non-finite floats use `##Inf`, `##-Inf` and
//!   `##NaN`;
//! - a `BigInt` always has its `N`, even when small, and a `BigDec` its `M`; a `BigDec` is
//!   printed from its unscaled integer and scale (`0.015M`, or `15E-31M` for large scales)
//!   so that the reader rebuilds the same scale, not just the same number;
//! - characters that the reader would take as whitespace or that are invisible are written
//!   as names (`\newline`) or `\uXXXX`;
//! - `#inst` is always UTC with millisecond precision, exactly what [`Edn::Inst`] stores.
//!
//! Values that only code can build may not survive: a `Keyword` or `Symbol` whose text breaks
//! EDN's naming rules, a `Tagged` whose tag is `inst` or `uuid` (the reader turns those into
//! `Inst` and `Uuid`) or is not a symbol starting with a letter, and a `BigDec` whose scale is
//! beyond [`BIGDEC_SCALE_MAX`](crate::BIGDEC_SCALE_MAX).

use std::fmt::{self, Display, Formatter, Write};

use bigdecimal::BigDecimal;

use crate::inst::{format_inst, format_uuid};
use crate::value::Edn;

/// Scales up to this many digits are printed as a plain decimal (`0.015M`); larger ones with
/// an exponent so that a tiny scale-heavy number does not print thousands of zeros.
const PLAIN_SCALE_MAX: i64 = 30;

impl Display for Edn {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self {
            Edn::Nil => f.write_str("nil"),
            Edn::Bool(b) => write!(f, "{b}"),
            Edn::String(s) => write_string(f, s),
            Edn::Char(c) => write_char(f, *c),
            Edn::Integer(i) => write!(f, "{i}"),
            Edn::BigInt(i) => write!(f, "{i}N"),
            Edn::Float(x) => write_float(f, *x),
            Edn::BigDec(d) => write_bigdec(f, d),
            Edn::Keyword(k) => write!(f, "{k}"),
            Edn::Symbol(s) => write!(f, "{s}"),
            Edn::List(items) => write_seq(f, "(", items, ")"),
            Edn::Vector(items) => write_seq(f, "[", items, "]"),
            Edn::Set(items) => write_seq(f, "#{", items, "}"),
            Edn::Map(map) => {
                f.write_char('{')?;
                for (i, (key, value)) in map.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{key} {value}")?;
                }
                f.write_char('}')
            }
            Edn::Inst(millis) => write!(f, "#inst \"{}\"", format_inst(*millis)),
            Edn::Uuid(u) => write!(f, "#uuid \"{}\"", format_uuid(*u)),
            Edn::Tagged(tag, value) => write!(f, "#{tag} {value}"),
        }
    }
}

fn write_seq<'a>(
    f: &mut Formatter<'_>,
    open: &str,
    items: impl IntoIterator<Item = &'a Edn>,
    close: &str,
) -> fmt::Result {
    f.write_str(open)?;
    for (i, item) in items.into_iter().enumerate() {
        if i > 0 {
            f.write_char(' ')?;
        }
        write!(f, "{item}")?;
    }
    f.write_str(close)
}

fn write_string(f: &mut Formatter<'_>, s: &str) -> fmt::Result {
    f.write_char('"')?;
    for c in s.chars() {
        match c {
            '"' => f.write_str("\\\"")?,
            '\\' => f.write_str("\\\\")?,
            '\n' => f.write_str("\\n")?,
            '\t' => f.write_str("\\t")?,
            '\r' => f.write_str("\\r")?,
            c if c.is_control() => write!(f, "\\u{:04X}", u32::from(c))?,
            c => f.write_char(c)?,
        }
    }
    f.write_char('"')
}

fn write_char(f: &mut Formatter<'_>, c: char) -> fmt::Result {
    match c {
        '\n' => f.write_str("\\newline"),
        ' ' => f.write_str("\\space"),
        '\t' => f.write_str("\\tab"),
        '\r' => f.write_str("\\return"),
        '\u{0C}' => f.write_str("\\formfeed"),
        '\u{08}' => f.write_str("\\backspace"),
        // Every control and whitespace character is in the Basic Multilingual Plane.
        c if c.is_control() || c.is_whitespace() => write!(f, "\\u{:04X}", u32::from(c)),
        c => write!(f, "\\{c}"),
    }
}

fn write_float(f: &mut Formatter<'_>, x: f64) -> fmt::Result {
    if x.is_nan() {
        f.write_str("##NaN")
    } else if x == f64::INFINITY {
        f.write_str("##Inf")
    } else if x == f64::NEG_INFINITY {
        f.write_str("##-Inf")
    } else {
        write!(f, "{x:?}")
    }
}

fn write_bigdec(f: &mut Formatter<'_>, d: &BigDecimal) -> fmt::Result {
    let (unscaled, scale) = d.as_bigint_and_exponent();
    if scale == 0 {
        return write!(f, "{unscaled}M");
    }
    if !(1..=PLAIN_SCALE_MAX).contains(&scale) {
        return write!(f, "{unscaled}E{}M", -i128::from(scale));
    }
    let sign = if unscaled.sign() == num_bigint::Sign::Minus {
        "-"
    } else {
        ""
    };
    let digits = unscaled.magnitude().to_string();
    let scale = usize::try_from(scale).unwrap_or(0);
    let padded = format!("{digits:0>width$}", width = scale + 1);
    let (whole, fraction) = padded.split_at(padded.len() - scale);
    write!(f, "{sign}{whole}.{fraction}M")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::name::Symbol;
    use num_bigint::BigInt;
    use std::collections::{BTreeMap, BTreeSet};
    use std::str::FromStr;

    fn dec(text: &str) -> Edn {
        Edn::BigDec(Box::new(BigDecimal::from_str(text).unwrap()))
    }

    #[test]
    fn scalars() {
        assert_eq!(Edn::Nil.to_string(), "nil");
        assert_eq!(Edn::Bool(true).to_string(), "true");
        assert_eq!(Edn::Integer(-42).to_string(), "-42");
        assert_eq!(Edn::BigInt(Box::new(BigInt::from(7))).to_string(), "7N");
        assert_eq!(Edn::keyword("db/ident").to_string(), ":db/ident");
        assert_eq!(Edn::symbol("?e").to_string(), "?e");
        assert_eq!(
            Edn::Uuid(1).to_string(),
            "#uuid \"00000000-0000-0000-0000-000000000001\""
        );
        assert_eq!(
            Edn::Inst(0).to_string(),
            "#inst \"1970-01-01T00:00:00.000Z\""
        );
    }

    #[test]
    fn floats_always_look_like_floats() {
        assert_eq!(Edn::Float(1.0).to_string(), "1.0");
        assert_eq!(Edn::Float(-0.0).to_string(), "-0.0");
        assert_eq!(Edn::Float(1e100).to_string(), "1e100");
        assert_eq!(Edn::Float(1.5e-7).to_string(), "1.5e-7");
        assert_eq!(Edn::Float(f64::INFINITY).to_string(), "##Inf");
        assert_eq!(Edn::Float(f64::NEG_INFINITY).to_string(), "##-Inf");
        assert_eq!(Edn::Float(f64::NAN).to_string(), "##NaN");
    }

    #[test]
    fn bigdecs_keep_their_scale() {
        assert_eq!(dec("1.5").to_string(), "1.5M");
        assert_eq!(dec("1").to_string(), "1M");
        assert_eq!(dec("1.00").to_string(), "1.00M");
        assert_eq!(dec("-0.015").to_string(), "-0.015M");
        assert_eq!(dec("0.000").to_string(), "0.000M");
        assert_eq!(dec("1e3").to_string(), "1E3M");
        assert_eq!(dec("15e-31").to_string(), "15E-31M");
    }

    #[test]
    fn strings_escape_quotes_and_controls() {
        let s = Edn::string("a\"b\\c\nd\te\rf\u{0}g\u{7f}h\u{85}é😀");
        assert_eq!(
            s.to_string(),
            "\"a\\\"b\\\\c\\nd\\te\\rf\\u0000g\\u007Fh\\u0085é😀\""
        );
    }

    #[test]
    fn chars_use_names_for_invisible_ones() {
        let cases = [
            ('a', "\\a"),
            ('\n', "\\newline"),
            (' ', "\\space"),
            ('\t', "\\tab"),
            ('\r', "\\return"),
            ('\u{0C}', "\\formfeed"),
            ('\u{08}', "\\backspace"),
            ('\u{0}', "\\u0000"),
            ('\u{3000}', "\\u3000"),
            ('(', "\\("),
            ('\\', "\\\\"),
            (',', "\\,"),
            ('😀', "\\😀"),
        ];
        for (c, text) in cases {
            assert_eq!(Edn::Char(c).to_string(), text);
        }
    }

    #[test]
    fn collections_use_single_spaces() {
        let items = vec![Edn::Integer(1), Edn::Integer(2)];
        assert_eq!(Edn::Vector(items.clone()).to_string(), "[1 2]");
        assert_eq!(Edn::List(items.clone()).to_string(), "(1 2)");
        assert_eq!(
            Edn::Set(items.iter().cloned().collect::<BTreeSet<_>>()).to_string(),
            "#{1 2}"
        );
        let map: BTreeMap<Edn, Edn> = [
            (Edn::keyword("a"), Edn::Integer(1)),
            (Edn::keyword("b"), Edn::Integer(2)),
        ]
        .into_iter()
        .collect();
        assert_eq!(Edn::Map(map).to_string(), "{:a 1, :b 2}");
        assert_eq!(Edn::Vector(vec![]).to_string(), "[]");
        assert_eq!(Edn::Map(BTreeMap::new()).to_string(), "{}");
        assert_eq!(Edn::Set(BTreeSet::new()).to_string(), "#{}");
        assert_eq!(Edn::List(vec![]).to_string(), "()");
        let tagged = Edn::Tagged(Symbol::new("my/tag"), Box::new(Edn::Vector(items)));
        assert_eq!(tagged.to_string(), "#my/tag [1 2]");
    }
}
