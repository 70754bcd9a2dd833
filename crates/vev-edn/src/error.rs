//! Parse errors and source positions.
//!
//! Every error carries a [`Span`] so a front end (the CLI, the pg server) can point at the
//! offending character, a [`ParseErrorKind`] to match on, and a stable [`ParseError::code`]
//! that never changes between releases even if the wording of the message does.

use std::fmt;

/// A position in the source text.
///
/// `offset` is a byte offset into the `&str` that was parsed; `line` and `column` are 1-based,
/// and `column` counts `char`s (not bytes) from the start of the line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Pos {
    /// Byte offset from the start of the text; always on a `char` boundary.
    pub offset: usize,
    /// Line number, 1-based; only `\n` starts a new line.
    pub line: u32,
    /// Column number, 1-based, in `char`s from the start of the line.
    pub column: u32,
}

impl Pos {
    /// The position of the first character of a text.
    pub const START: Pos = Pos {
        offset: 0,
        line: 1,
        column: 1,
    };
}

impl fmt::Display for Pos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}, column {}", self.line, self.column)
    }
}

/// A half-open range of source text: `start` is the first character, `end` is one past the last.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Span {
    /// The position of the first character.
    pub start: Pos,
    /// The position just after the last character (equal to `start` for an empty span).
    pub end: Pos,
}

impl Span {
    /// A zero-width span at `pos`, used for errors at the end of the input.
    pub fn at(pos: Pos) -> Span {
        Span {
            start: pos,
            end: pos,
        }
    }
}

/// What went wrong while reading EDN. Each kind has a stable code, see [`ParseErrorKind::code`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ParseErrorKind {
    /// The text ends inside a form: an unclosed collection or string, a tag or `#_` with
    /// no form after it, a `#` or `\` as the last character.
    UnexpectedEof,
    /// A character that cannot start a form here: one that starts no token (e.g. `~`),
    /// `#` followed by neither `{`, `_`, `:`, `#` nor a letter, or something other than `{`
    /// after a `#:ns` prefix.
    UnexpectedChar,
    /// A malformed number literal (`1.2.3`, `08`, `1e`), or a symbolic value other than
    /// `##Inf`, `##-Inf` and `##NaN`.
    InvalidNumber,
    /// A bad escape in a string: an unknown `\x`, a `\u` without four hex digits, or an
    /// unpaired UTF-16 surrogate.
    InvalidEscape,
    /// A bad character literal: an unknown name after `\`, or whitespace right after it.
    InvalidChar,
    /// A closing `)`, `]` or `}` with no open collection, or of the wrong kind for the
    /// innermost one.
    UnmatchedDelimiter,
    /// A map with the same key twice (after `#:ns{}` qualification); the span is the
    /// second occurrence.
    DuplicateKey,
    /// A set with the same element twice; the span is the second occurrence.
    DuplicateElement,
    /// `#inst` or `#uuid` applied to something other than a string in its format (an
    /// RFC 3339 timestamp, or 8-4-4-4-12 hex digits).
    InvalidTagValue,
    /// Collections, tags and `#_` discards nested deeper than [`MAX_DEPTH`](crate::MAX_DEPTH).
    TooDeep,
    /// More text after the one form that [`parse`](crate::parse) or
    /// [`parse_spanned`](crate::parse_spanned) reads.
    TrailingInput,
    /// No form at all (only whitespace, comments or discards) where exactly one was expected.
    EmptyInput,
    /// A map literal with an odd number of forms: its last key has no value.
    OddMap,
    /// A token that is not a valid symbol, or a tag (`#tag`) that is not one.
    InvalidSymbol,
    /// A token after `:` that is not a valid keyword (including `:` alone and auto-resolved
    /// `::kw`), or an invalid `#:ns` map prefix.
    InvalidKeyword,
    /// A number literal with more digits than [`NUMBER_DIGITS_MAX`](crate::NUMBER_DIGITS_MAX).
    NumberTooLong,
}

impl ParseErrorKind {
    /// The stable, machine-readable code of this kind, e.g. `"edn/unexpected-eof"`.
    pub fn code(self) -> &'static str {
        match self {
            ParseErrorKind::UnexpectedEof => "edn/unexpected-eof",
            ParseErrorKind::UnexpectedChar => "edn/unexpected-char",
            ParseErrorKind::InvalidNumber => "edn/invalid-number",
            ParseErrorKind::InvalidEscape => "edn/invalid-escape",
            ParseErrorKind::InvalidChar => "edn/invalid-char",
            ParseErrorKind::UnmatchedDelimiter => "edn/unmatched-delimiter",
            ParseErrorKind::DuplicateKey => "edn/duplicate-key",
            ParseErrorKind::DuplicateElement => "edn/duplicate-element",
            ParseErrorKind::InvalidTagValue => "edn/invalid-tag-value",
            ParseErrorKind::TooDeep => "edn/too-deep",
            ParseErrorKind::TrailingInput => "edn/trailing-input",
            ParseErrorKind::EmptyInput => "edn/empty-input",
            ParseErrorKind::OddMap => "edn/odd-map",
            ParseErrorKind::InvalidSymbol => "edn/invalid-symbol",
            ParseErrorKind::InvalidKeyword => "edn/invalid-keyword",
            ParseErrorKind::NumberTooLong => "edn/number-too-long",
        }
    }
}

/// An error from [`parse`](crate::parse), [`parse_all`](crate::parse_all) or
/// [`parse_spanned`](crate::parse_spanned).
///
/// `message` is lowercase and quotes the offending text; `Display` appends the line and column
/// of `span.start`.
#[derive(thiserror::Error, Debug, Clone, PartialEq)]
#[error("{message} at line {}, column {}", .span.start.line, .span.start.column)]
#[non_exhaustive]
pub struct ParseError {
    /// What went wrong; match on this (or on [`ParseError::code`]), not on `message`.
    pub kind: ParseErrorKind,
    /// The offending text: the bad token, the duplicate key, or the opening of the form
    /// that the input ended inside.
    pub span: Span,
    /// A human-readable explanation, without the position (which `Display` appends).
    pub message: String,
}

impl ParseError {
    pub(crate) fn new(kind: ParseErrorKind, span: Span, message: impl Into<String>) -> ParseError {
        ParseError {
            kind,
            span,
            message: message.into(),
        }
    }

    /// The stable code of this error, e.g. `"edn/duplicate-key"`.
    pub fn code(&self) -> &'static str {
        self.kind.code()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_appends_line_and_column() {
        let start = Pos {
            offset: 4,
            line: 2,
            column: 3,
        };
        let err = ParseError::new(ParseErrorKind::OddMap, Span::at(start), "odd map");
        assert_eq!(err.to_string(), "odd map at line 2, column 3");
        assert_eq!(err.code(), "edn/odd-map");
    }

    #[test]
    fn codes_are_distinct_and_prefixed() {
        use ParseErrorKind::*;
        let kinds = [
            UnexpectedEof,
            UnexpectedChar,
            InvalidNumber,
            InvalidEscape,
            InvalidChar,
            UnmatchedDelimiter,
            DuplicateKey,
            DuplicateElement,
            InvalidTagValue,
            TooDeep,
            TrailingInput,
            EmptyInput,
            OddMap,
            InvalidSymbol,
            InvalidKeyword,
            NumberTooLong,
        ];
        let codes: std::collections::BTreeSet<_> = kinds.iter().map(|k| k.code()).collect();
        assert_eq!(codes.len(), kinds.len());
        assert!(codes.iter().all(|c| c.starts_with("edn/")));
    }
}
