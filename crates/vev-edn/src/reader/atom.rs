//! Scalars: strings, characters, numbers, symbols and keywords.
//!
//! Numbers are validated against one grammar before any conversion,
//! `[+-]? (0 | [1-9][0-9]*) ('.' [0-9]*)? ([eE] [+-]? [0-9]+)? (N | M)?` (Clojure's, which
//! also takes `1.`), so that conversions only ever see well-formed digits. A `BigDec` is
//! built from its digits and a scale rather than by `BigDecimal::from_str`, which keeps the
//! scale exactly as written and lets the reader bound it (see [`BIGDEC_SCALE_MAX`]).
//!
//! Converting decimal digits to a big integer takes time quadratic in their number (a
//! million digits take about a second), so a literal of more than [`NUMBER_DIGITS_MAX`]
//! digits is refused (`edn/number-too-long`) before any conversion: reading stays linear in
//! the length of the text.

use bigdecimal::BigDecimal;
use num_bigint::BigInt;

use super::{excerpt, is_delimiter, Reader};
use crate::error::{ParseError, ParseErrorKind, Pos};
use crate::name::{is_valid_keyword, is_valid_symbol, Keyword, Symbol};
use crate::value::{Edn, Spanned};

/// The largest scale (digits after the point) a `BigDec` literal may have, and the largest
/// negative one (`1E10000M` has scale -10000). Beyond this, hashing or printing one short
/// literal such as `1E999999999M` would allocate gigabytes.
pub const BIGDEC_SCALE_MAX: i64 = 10_000;

/// The most digits (before and after the point, exponent included) a number literal may
/// have: far more than any `i64`, `f64` or practical big number, and few enough that the
/// conversion takes well under a millisecond.
pub const NUMBER_DIGITS_MAX: usize = 10_000;

/// The parts of a number literal, borrowed from its text.
struct NumberParts<'t> {
    negative: bool,
    int: &'t str,
    frac: Option<&'t str>,
    exp: Option<(bool, &'t str)>,
    suffix: Option<u8>,
}

fn split_digits(text: &str) -> (&str, &str) {
    let end = text
        .bytes()
        .position(|b| !b.is_ascii_digit())
        .unwrap_or(text.len());
    text.split_at(end)
}

fn split_sign(text: &str) -> (bool, &str) {
    match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    }
}

/// Splits a number literal into its parts, or says why it is not one.
fn number_parts(text: &str) -> Result<NumberParts<'_>, &'static str> {
    let (negative, body) = split_sign(text);
    let (body, suffix) = match body.as_bytes().last() {
        Some(&b @ (b'N' | b'M')) => (&body[..body.len() - 1], Some(b)),
        _ => (body, None),
    };
    let (int, mut rest) = split_digits(body);
    if int.is_empty() {
        return Err("expected digits");
    }
    if int.len() > 1 && int.starts_with('0') {
        return Err("leading zeros are not allowed");
    }
    let mut frac = None;
    if let Some(after_point) = rest.strip_prefix('.') {
        let (digits, after) = split_digits(after_point);
        frac = Some(digits);
        rest = after;
    }
    let mut exp = None;
    if let Some(after_e) = rest.strip_prefix(['e', 'E']) {
        let (exp_negative, exp_text) = split_sign(after_e);
        let (digits, after) = split_digits(exp_text);
        if digits.is_empty() {
            return Err("expected digits in the exponent");
        }
        exp = Some((exp_negative, digits));
        rest = after;
    }
    if rest.contains('/') {
        return Err("ratios are not supported");
    }
    if !rest.is_empty() {
        return Err("unexpected characters");
    }
    Ok(NumberParts {
        negative,
        int,
        frac,
        exp,
        suffix,
    })
}

/// Decimal digits as a `BigInt`, negated when asked.
fn big_digits(digits: &str, negative: bool) -> BigInt {
    let magnitude = BigInt::parse_bytes(digits.as_bytes(), 10).unwrap_or_default();
    if negative {
        -magnitude
    } else {
        magnitude
    }
}

fn bigdec(parts: &NumberParts<'_>) -> Result<Edn, &'static str> {
    let frac = parts.frac.unwrap_or("");
    let exponent = match parts.exp {
        None => 0,
        Some((negative, digits)) => {
            let digits = digits.trim_start_matches('0');
            if digits.len() > 9 {
                return Err("the exponent is too large");
            }
            let value = digits.parse::<i64>().unwrap_or(0);
            if negative {
                -value
            } else {
                value
            }
        }
    };
    let frac_len = i64::try_from(frac.len()).unwrap_or(i64::MAX);
    let scale = frac_len.saturating_sub(exponent);
    if !(-BIGDEC_SCALE_MAX..=BIGDEC_SCALE_MAX).contains(&scale) {
        return Err("the scale of the bigdec is out of range");
    }
    let unscaled = big_digits(&format!("{}{frac}", parts.int), parts.negative);
    Ok(Edn::BigDec(Box::new(BigDecimal::new(unscaled, scale))))
}

/// Converts a number literal (the whole token) to its value.
pub(crate) fn parse_number(text: &str) -> Result<Edn, &'static str> {
    let parts = number_parts(text)?;
    let is_decimal = parts.frac.is_some() || parts.exp.is_some();
    match parts.suffix {
        Some(b'N') if is_decimal => Err("'N' needs an integer"),
        Some(b'N') => Ok(Edn::BigInt(Box::new(big_digits(parts.int, parts.negative)))),
        Some(_) => bigdec(&parts),
        None if is_decimal => text
            .parse::<f64>()
            .map(Edn::Float)
            .map_err(|_| "invalid float"),
        None => Ok(match text.parse::<i64>() {
            Ok(i) => Edn::Integer(i),
            Err(_) => Edn::BigInt(Box::new(big_digits(parts.int, parts.negative))),
        }),
    }
}

/// The character named after a backslash: a single character, a name, or `uXXXX`.
fn named_char(name: &str) -> Option<char> {
    let mut chars = name.chars();
    if let (Some(c), None) = (chars.next(), chars.next()) {
        return Some(c);
    }
    match name {
        "newline" => Some('\n'),
        "space" => Some(' '),
        "tab" => Some('\t'),
        "return" => Some('\r'),
        "formfeed" => Some('\u{0C}'),
        "backspace" => Some('\u{08}'),
        _ => {
            let hex = name.strip_prefix('u')?;
            hex_code(hex).and_then(char::from_u32)
        }
    }
}

/// Exactly four hex digits as a code unit.
fn hex_code(hex: &str) -> Option<u32> {
    if hex.len() != 4 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u32::from_str_radix(hex, 16).ok()
}

impl Reader<'_> {
    pub(super) fn read_number(&mut self, start: Pos) -> Result<Spanned, ParseError> {
        let text = self.take_token();
        let digits = text.bytes().filter(u8::is_ascii_digit).count();
        if digits > NUMBER_DIGITS_MAX {
            let message = format!(
                "number {} has {digits} digits, more than the {NUMBER_DIGITS_MAX} a number may have",
                excerpt(text)
            );
            return Err(self.error(ParseErrorKind::NumberTooLong, start, message));
        }
        match parse_number(text) {
            Ok(value) => Ok(self.leaf(start, value)),
            Err(why) => {
                let message = format!("invalid number {}: {why}", excerpt(text));
                Err(self.error(ParseErrorKind::InvalidNumber, start, message))
            }
        }
    }

    pub(super) fn read_symbol(&mut self, start: Pos) -> Result<Spanned, ParseError> {
        let value = match self.take_token() {
            "nil" => Edn::Nil,
            "true" => Edn::Bool(true),
            "false" => Edn::Bool(false),
            text if is_valid_symbol(text) => Edn::Symbol(Symbol::new(text)),
            text => {
                let message = format!("invalid symbol {}", excerpt(text));
                return Err(self.error(ParseErrorKind::InvalidSymbol, start, message));
            }
        };
        Ok(self.leaf(start, value))
    }

    pub(super) fn read_keyword(&mut self, start: Pos) -> Result<Spanned, ParseError> {
        self.bump();
        let text = self.take_token();
        if is_valid_keyword(text) {
            return Ok(self.leaf(start, Edn::Keyword(Keyword::new(text))));
        }
        let message = if text.is_empty() {
            "keyword ':' has no name".to_owned()
        } else if text.starts_with(':') {
            format!(
                "auto-resolved keyword {} is not supported",
                excerpt(self.slice_from(start))
            )
        } else {
            format!("invalid keyword {}", excerpt(self.slice_from(start)))
        };
        Err(self.error(ParseErrorKind::InvalidKeyword, start, message))
    }

    pub(super) fn read_char(&mut self, start: Pos) -> Result<Spanned, ParseError> {
        self.bump();
        let Some(first) = self.bump() else {
            return Err(self.eof_error(start, "'\\' at the end"));
        };
        if first.is_whitespace() {
            let message = "a backslash must not be followed by whitespace".to_owned();
            return Err(self.error(ParseErrorKind::InvalidChar, start, message));
        }
        if !is_delimiter(first) {
            self.take_token();
        }
        let name = self.slice_from(start).get(1..).unwrap_or("");
        match named_char(name) {
            Some(c) => Ok(self.leaf(start, Edn::Char(c))),
            None => {
                let message = format!(
                    "invalid character literal {}",
                    excerpt(self.slice_from(start))
                );
                Err(self.error(ParseErrorKind::InvalidChar, start, message))
            }
        }
    }

    pub(super) fn read_string(&mut self, start: Pos) -> Result<Spanned, ParseError> {
        self.bump();
        let mut out = String::new();
        loop {
            let escape_start = self.pos;
            match self.bump() {
                None => return Err(self.eof_error(start, "unterminated string")),
                Some('"') => return Ok(self.leaf(start, Edn::String(out))),
                Some('\\') => out.push(self.read_escape(start, escape_start)?),
                Some(c) => out.push(c),
            }
        }
    }

    /// The character of an escape in a string; the backslash at `escape_start` is consumed.
    fn read_escape(&mut self, string_start: Pos, escape_start: Pos) -> Result<char, ParseError> {
        let c = match self.bump() {
            None => return Err(self.eof_error(string_start, "unterminated string")),
            Some('t') => '\t',
            Some('r') => '\r',
            Some('n') => '\n',
            Some('\\') => '\\',
            Some('"') => '"',
            Some('b') => '\u{08}',
            Some('f') => '\u{0C}',
            Some('u') => return self.read_unicode_escape(escape_start),
            Some(_) => {
                let message = format!(
                    "invalid escape {} in string",
                    excerpt(self.slice_from(escape_start))
                );
                return Err(self.error(ParseErrorKind::InvalidEscape, escape_start, message));
            }
        };
        Ok(c)
    }

    /// Four hex digits after `\u`, consumed only while they are hex digits.
    fn read_hex4(&mut self, escape_start: Pos) -> Result<u32, ParseError> {
        let digits_start = self.pos;
        for _ in 0..4 {
            if !self.peek().is_some_and(|c| c.is_ascii_hexdigit()) {
                break;
            }
            self.bump();
        }
        hex_code(self.slice_from(digits_start)).ok_or_else(|| {
            let message = format!(
                "invalid escape {} in string: expected four hex digits",
                excerpt(self.slice_from(escape_start))
            );
            self.error(ParseErrorKind::InvalidEscape, escape_start, message)
        })
    }

    /// `\uXXXX`, where a UTF-16 surrogate pair `\uD83D\uDE00` makes one character.
    fn read_unicode_escape(&mut self, escape_start: Pos) -> Result<char, ParseError> {
        let unit = self.read_hex4(escape_start)?;
        let code = if (0xD800..=0xDBFF).contains(&unit) {
            let low = if self.rest().starts_with("\\u") {
                self.bump();
                self.bump();
                self.read_hex4(escape_start)?
            } else {
                0
            };
            if !(0xDC00..=0xDFFF).contains(&low) {
                let message = format!(
                    "invalid escape {} in string: unpaired surrogate",
                    excerpt(self.slice_from(escape_start))
                );
                return Err(self.error(ParseErrorKind::InvalidEscape, escape_start, message));
            }
            0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00)
        } else {
            unit
        };
        char::from_u32(code).ok_or_else(|| {
            let message = format!(
                "invalid escape {} in string: unpaired surrogate",
                excerpt(self.slice_from(escape_start))
            );
            self.error(ParseErrorKind::InvalidEscape, escape_start, message)
        })
    }
}
