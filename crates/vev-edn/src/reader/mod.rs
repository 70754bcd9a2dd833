//! The EDN reader: text to [`Spanned`] values.
//!
//! A hand-written reader over a `&str`, one `char` at a time, tracking a [`Pos`] (byte
//! offset, line, column) so that every value and every error has a [`Span`]. This module
//! reads structure (collections, dispatch forms `#{ #: ## #_ #tag`, whitespace and
//! comments); `atom` reads the scalars (strings, characters, numbers, symbols, keywords).
//!
//! Why it is shaped this way:
//!
//! - **No recursion, so no stack overflow.** Nesting constructs (collections, tags, `#_`
//!   discards, namespaced maps) are [`Frame`]s on an explicit heap stack, capped at
//!   [`MAX_DEPTH`]. A recursive-descent reader needed about 1.7 KiB of native stack per level
//!   in release builds and 5 KiB in debug builds, so 512 levels did not fit the 2 MiB stack
//!   of a spawned thread. The loop in [`Reader::read_frames`] alternates three steps: skip
//!   blanks, close the innermost collection if its delimiter is next, or open the next form
//!   (a scalar completes at once, anything else pushes a frame). A completed form is
//!   delivered down the stack: a collection keeps it, a tag wraps it and completes in turn,
//!   a discard drops it.
//! - **No panics on any input.** Text is only sliced at positions the reader produced from
//!   `char` boundaries (and through `str::get`), and numbers are validated before they are
//!   converted with checked arithmetic.
//! - **`#_` is a frame like a tag**, so `#_ #_ a b` discards two forms (the inner discard
//!   completes first and the outer one takes the next form) and `[1 #_ 2]` needs no special
//!   case. Between top-level forms, [`Reader::skip_ws`] consumes discards too.
//! - **One reader for `parse` and `parse_spanned`.** Every form is built as a [`Spanned`];
//!   when the caller does not want the parts' spans ([`Spans::Drop`]) children are moved
//!   into their parent's value instead of being cloned and kept, so `parse` pays only for
//!   the span of the node being built.
//! - **Duplicates are errors, found while building.** Map keys and set elements are inserted
//!   in source order, so the error points at the second occurrence.

mod atom;
#[cfg(test)]
mod tests;

pub use atom::{BIGDEC_SCALE_MAX, NUMBER_DIGITS_MAX};

use std::collections::{BTreeMap, BTreeSet};

use crate::error::{ParseError, ParseErrorKind, Pos, Span};
use crate::inst::{parse_inst, parse_uuid};
use crate::name::{is_symbol_start, is_valid_symbol, Keyword, Symbol};
use crate::value::{Edn, Spanned};

/// The deepest nesting the reader accepts: at most this many collections, tags and `#_`
/// discards may enclose a form.
pub const MAX_DEPTH: usize = 512;

/// Longest excerpt of source text or of a value quoted in an error message, in chars.
const EXCERPT_CHARS_MAX: usize = 60;

/// Quotes `text` for an error message, shortened to [`EXCERPT_CHARS_MAX`] characters.
pub(crate) fn excerpt(text: &str) -> String {
    match text.char_indices().nth(EXCERPT_CHARS_MAX) {
        Some((cut, _)) => format!("'{}...'", &text[..cut]),
        None => format!("'{text}'"),
    }
}

/// Quotes a value for an error message by printing it, shortened like [`excerpt`].
pub(crate) fn quote(value: &Edn) -> String {
    excerpt(&value.to_string())
}

/// Whitespace in EDN: Unicode whitespace and the comma.
pub(crate) fn is_whitespace(c: char) -> bool {
    c.is_whitespace() || c == ','
}

/// Characters that end a token (a number, symbol, keyword, tag or character name).
pub(crate) fn is_delimiter(c: char) -> bool {
    is_whitespace(c) || matches!(c, '(' | ')' | '[' | ']' | '{' | '}' | '"' | ';' | '\\')
}

#[derive(Clone, Copy)]
enum Coll {
    List,
    Vector,
    Map,
    Set,
}

impl Coll {
    fn describe(self) -> &'static str {
        match self {
            Coll::List => "list '('",
            Coll::Vector => "vector '['",
            Coll::Map => "map '{'",
            Coll::Set => "set '#{'",
        }
    }

    fn close(self) -> char {
        match self {
            Coll::List => ')',
            Coll::Vector => ']',
            Coll::Map | Coll::Set => '}',
        }
    }
}

/// An open nesting construct on the reader's explicit stack.
enum Frame<'a> {
    /// A collection; `ns` is the namespace of a `#:ns{}` map.
    Coll {
        coll: Coll,
        start: Pos,
        ns: Option<&'a str>,
        items: Vec<Spanned>,
    },
    /// `#tag`, waiting for its value.
    Tag { start: Pos, tag: &'a str },
    /// `#_`, waiting for the form to drop.
    Discard { start: Pos },
}

/// Whether a form read keeps the spans of its parts ([`Spanned::children`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Spans {
    /// Every part keeps its own [`Spanned`], so each value is also cloned into its parent
    /// (`parse_spanned`, `parse_all_spanned`).
    Keep,
    /// Parts are moved into their parent's value and their spans dropped; only a top-level
    /// form has a span and its `children` are empty (`parse`, `parse_all`).
    Drop,
}

pub(crate) struct Reader<'a> {
    text: &'a str,
    pos: Pos,
    spans: Spans,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(text: &'a str, spans: Spans) -> Reader<'a> {
        Reader {
            text,
            pos: Pos::START,
            spans,
        }
    }

    fn rest(&self) -> &'a str {
        self.text.get(self.pos.offset..).unwrap_or("")
    }

    pub(crate) fn peek(&self) -> Option<char> {
        self.rest().chars().next()
    }

    fn peek_second(&self) -> Option<char> {
        self.rest().chars().nth(1)
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.pos.offset += c.len_utf8();
        if c == '\n' {
            self.pos.line = self.pos.line.saturating_add(1);
            self.pos.column = 1;
        } else {
            self.pos.column = self.pos.column.saturating_add(1);
        }
        Some(c)
    }

    fn span_from(&self, start: Pos) -> Span {
        Span {
            start,
            end: self.pos,
        }
    }

    /// The source text from `start` to the current position.
    fn slice_from(&self, start: Pos) -> &'a str {
        self.text.get(start.offset..self.pos.offset).unwrap_or("")
    }

    fn error(&self, kind: ParseErrorKind, start: Pos, message: String) -> ParseError {
        ParseError::new(kind, self.span_from(start), message)
    }

    /// An error spanning just the next character (consumed), e.g. a stray `)`.
    fn char_error(
        &mut self,
        kind: ParseErrorKind,
        message: impl FnOnce(char) -> String,
    ) -> ParseError {
        let start = self.pos;
        let c = self.bump().unwrap_or(' ');
        self.error(kind, start, message(c))
    }

    fn eof_error(&self, start: Pos, what: &str) -> ParseError {
        let message = format!("unexpected end of input: {what}");
        self.error(ParseErrorKind::UnexpectedEof, start, message)
    }

    fn leaf(&self, start: Pos, value: Edn) -> Spanned {
        Spanned {
            value,
            span: self.span_from(start),
            children: Vec::new(),
        }
    }

    /// Consumes a token: everything up to the next delimiter or the end of the input.
    fn take_token(&mut self) -> &'a str {
        let start = self.pos;
        while self.peek().is_some_and(|c| !is_delimiter(c)) {
            self.bump();
        }
        self.slice_from(start)
    }

    /// Moves a child's value out, keeping the child itself when spans were asked for.
    fn take(&self, child: Spanned, children: &mut Vec<Spanned>) -> Edn {
        match self.spans {
            Spans::Keep => {
                let value = child.value.clone();
                children.push(child);
                value
            }
            Spans::Drop => child.value,
        }
    }

    pub(crate) fn at_eof(&self) -> bool {
        self.pos.offset >= self.text.len()
    }

    pub(crate) fn pos(&self) -> Pos {
        self.pos
    }

    /// Skips whitespace, commas and `;` comments (not `#_` discards).
    fn skip_blank(&mut self) {
        loop {
            match self.peek() {
                Some(c) if is_whitespace(c) => {
                    self.bump();
                }
                Some(';') => while self.bump().is_some_and(|c| c != '\n') {},
                _ => return,
            }
        }
    }

    /// Skips whitespace, comments and `#_` discarded forms between top-level forms.
    pub(crate) fn skip_ws(&mut self) -> Result<(), ParseError> {
        loop {
            self.skip_blank();
            if !self.rest().starts_with("#_") {
                return Ok(());
            }
            let start = self.pos;
            self.bump();
            self.bump();
            self.read_frames(vec![Frame::Discard { start }])?;
        }
    }

    /// Reads one top-level form; whitespace before it must already be skipped.
    pub(crate) fn read_form(&mut self) -> Result<Spanned, ParseError> {
        let start = self.pos;
        self.read_frames(Vec::new())?
            .ok_or_else(|| self.eof_error(start, "expected a form"))
    }

    /// The reading loop: alternately skips blanks, closes the innermost open collection if
    /// its delimiter is next, or opens the next form, which either pushes a frame or
    /// completes a scalar. Completed forms are delivered to the frames below. Returns when
    /// the bottom frame completes: the form, or `None` if the bottom frame was a discard.
    fn read_frames(&mut self, mut stack: Vec<Frame<'a>>) -> Result<Option<Spanned>, ParseError> {
        loop {
            self.skip_blank();
            let completed = match self.close_innermost(&mut stack)? {
                Some(form) => form,
                None => match self.open(&mut stack)? {
                    Some(form) => form,
                    None => continue,
                },
            };
            if let Some(done) = self.deliver(&mut stack, completed)? {
                return Ok(done);
            }
        }
    }

    /// Hands a completed form to the innermost frame: a collection keeps it, a tag wraps it
    /// (and is itself completed), a discard drops it. `Some` when the stack is used up.
    fn deliver(
        &self,
        stack: &mut Vec<Frame<'a>>,
        mut form: Spanned,
    ) -> Result<Option<Option<Spanned>>, ParseError> {
        loop {
            match stack.last_mut() {
                None => return Ok(Some(Some(form))),
                Some(Frame::Coll { items, .. }) => {
                    items.push(form);
                    return Ok(None);
                }
                Some(Frame::Tag { start, tag }) => {
                    let (start, tag) = (*start, *tag);
                    stack.pop();
                    form = self.finish_tag(start, tag, form)?;
                }
                Some(Frame::Discard { .. }) => {
                    stack.pop();
                    return Ok(stack.is_empty().then_some(None));
                }
            }
        }
    }

    /// If the innermost frame is a collection and its closing delimiter is next, consumes it
    /// and returns the built collection. Reports the end of input inside a collection and
    /// closing delimiters of the wrong kind.
    fn close_innermost(
        &mut self,
        stack: &mut Vec<Frame<'a>>,
    ) -> Result<Option<Spanned>, ParseError> {
        let Some(&Frame::Coll { coll, start, .. }) = stack.last() else {
            return Ok(None);
        };
        match self.peek() {
            None => Err(self.eof_error(start, &format!("unclosed {}", coll.describe()))),
            Some(c) if c == coll.close() => {
                self.bump();
                let Some(Frame::Coll {
                    coll,
                    start,
                    ns,
                    items,
                }) = stack.pop()
                else {
                    return Ok(None);
                };
                self.build_coll(start, coll, ns, items).map(Some)
            }
            Some(')' | ']' | '}') => {
                let (open, close) = (coll.describe(), coll.close());
                Err(self.char_error(ParseErrorKind::UnmatchedDelimiter, |c| {
                    format!("unmatched delimiter '{c}': expected '{close}' to close the {open} at {start}")
                }))
            }
            Some(_) => Ok(None),
        }
    }

    /// Pushes a frame for a nesting construct starting at `start`, or reports `TooDeep`.
    fn push(
        &self,
        stack: &mut Vec<Frame<'a>>,
        start: Pos,
        frame: Frame<'a>,
    ) -> Result<(), ParseError> {
        if stack.len() >= MAX_DEPTH {
            let message = format!("nesting deeper than {MAX_DEPTH} levels");
            return Err(self.error(ParseErrorKind::TooDeep, start, message));
        }
        stack.push(frame);
        Ok(())
    }

    /// Opens a collection whose opening bracket is the next character.
    fn open_coll(
        &mut self,
        stack: &mut Vec<Frame<'a>>,
        start: Pos,
        coll: Coll,
        ns: Option<&'a str>,
    ) -> Result<Option<Spanned>, ParseError> {
        self.push(
            stack,
            start,
            Frame::Coll {
                coll,
                start,
                ns,
                items: Vec::new(),
            },
        )?;
        self.bump();
        Ok(None)
    }

    /// Starts the next form: returns a scalar, or pushes a frame and returns `None`.
    fn open(&mut self, stack: &mut Vec<Frame<'a>>) -> Result<Option<Spanned>, ParseError> {
        let start = self.pos;
        let Some(c) = self.peek() else {
            return Err(match stack.last() {
                Some(&Frame::Tag { start, tag }) => {
                    self.eof_error(start, &format!("tag '#{tag}' has no value"))
                }
                Some(&Frame::Discard { start }) => {
                    self.eof_error(start, "'#_' has no form to discard")
                }
                _ => self.eof_error(start, "expected a form"),
            });
        };
        let form = match c {
            '(' => return self.open_coll(stack, start, Coll::List, None),
            '[' => return self.open_coll(stack, start, Coll::Vector, None),
            '{' => return self.open_coll(stack, start, Coll::Map, None),
            '#' => return self.open_dispatch(stack, start),
            ')' | ']' | '}' => {
                return Err(self.char_error(ParseErrorKind::UnmatchedDelimiter, |c| {
                    format!("unmatched delimiter '{c}'")
                }))
            }
            '"' => self.read_string(start)?,
            '\\' => self.read_char(start)?,
            ':' => self.read_keyword(start)?,
            c if c.is_ascii_digit() => self.read_number(start)?,
            '+' | '-' if self.peek_second().is_some_and(|c| c.is_ascii_digit()) => {
                self.read_number(start)?
            }
            c if is_symbol_start(c) => self.read_symbol(start)?,
            _ => {
                return Err(self.char_error(ParseErrorKind::UnexpectedChar, |c| {
                    format!("unexpected character {}", excerpt(&c.to_string()))
                }))
            }
        };
        Ok(Some(form))
    }

    /// After a `#`: a set, a discard, a namespaced map, a symbolic value or a tagged value.
    fn open_dispatch(
        &mut self,
        stack: &mut Vec<Frame<'a>>,
        start: Pos,
    ) -> Result<Option<Spanned>, ParseError> {
        self.bump();
        match self.peek() {
            Some('{') => self.open_coll(stack, start, Coll::Set, None),
            Some('_') => {
                self.bump();
                self.push(stack, start, Frame::Discard { start })?;
                Ok(None)
            }
            Some(':') => self.open_namespaced_map(stack, start),
            Some('#') => self.read_symbolic(start).map(Some),
            Some(c) if c.is_alphabetic() => {
                let tag = self.take_token();
                if !is_valid_symbol(tag) {
                    let message = format!("invalid tag {}", excerpt(self.slice_from(start)));
                    return Err(self.error(ParseErrorKind::InvalidSymbol, start, message));
                }
                self.push(stack, start, Frame::Tag { start, tag })?;
                Ok(None)
            }
            Some(c) => {
                self.bump();
                let message = format!("unexpected character {} after '#'", excerpt(&c.to_string()));
                Err(self.error(ParseErrorKind::UnexpectedChar, start, message))
            }
            None => Err(self.eof_error(start, "'#' at the end")),
        }
    }

    /// `#:ns{...}`: a map whose unqualified keyword and symbol keys get the namespace `ns`.
    /// Only whitespace may separate the prefix from the map, as in Clojure.
    fn open_namespaced_map(
        &mut self,
        stack: &mut Vec<Frame<'a>>,
        start: Pos,
    ) -> Result<Option<Spanned>, ParseError> {
        self.bump();
        let ns = self.take_token();
        if ns.starts_with(':') || ns.contains('/') || !is_valid_symbol(ns) {
            let message = if ns.starts_with(':') {
                "auto-resolved namespaced maps ('#::') are not supported".to_owned()
            } else {
                format!(
                    "invalid namespaced map prefix {}",
                    excerpt(self.slice_from(start))
                )
            };
            return Err(self.error(ParseErrorKind::InvalidKeyword, start, message));
        }
        while self.peek().is_some_and(is_whitespace) {
            self.bump();
        }
        match self.peek() {
            Some('{') => self.open_coll(stack, start, Coll::Map, Some(ns)),
            Some(_) => Err(self.char_error(ParseErrorKind::UnexpectedChar, |c| {
                format!(
                    "expected '{{' after '#:{ns}', found {}",
                    excerpt(&c.to_string())
                )
            })),
            None => Err(self.eof_error(start, &format!("'#:{ns}' has no map"))),
        }
    }

    fn build_coll(
        &self,
        start: Pos,
        coll: Coll,
        ns: Option<&str>,
        items: Vec<Spanned>,
    ) -> Result<Spanned, ParseError> {
        match coll {
            Coll::List | Coll::Vector => {
                let mut children = Vec::new();
                let values = items
                    .into_iter()
                    .map(|item| self.take(item, &mut children))
                    .collect();
                let value = if matches!(coll, Coll::List) {
                    Edn::List(values)
                } else {
                    Edn::Vector(values)
                };
                Ok(Spanned {
                    value,
                    span: self.span_from(start),
                    children,
                })
            }
            Coll::Set => self.build_set(start, items),
            Coll::Map => self.build_map(start, items, ns),
        }
    }

    fn build_set(&self, start: Pos, items: Vec<Spanned>) -> Result<Spanned, ParseError> {
        let mut set = BTreeSet::new();
        let mut children = Vec::new();
        for item in items {
            let span = item.span;
            let value = self.take(item, &mut children);
            if set.contains(&value) {
                let message = format!("duplicate element {} in set", quote(&value));
                return Err(ParseError::new(
                    ParseErrorKind::DuplicateElement,
                    span,
                    message,
                ));
            }
            set.insert(value);
        }
        Ok(Spanned {
            value: Edn::Set(set),
            span: self.span_from(start),
            children,
        })
    }

    fn build_map(
        &self,
        start: Pos,
        items: Vec<Spanned>,
        ns: Option<&str>,
    ) -> Result<Spanned, ParseError> {
        if let (true, Some(last)) = (items.len() % 2 == 1, items.last()) {
            let message = format!(
                "map has an odd number of forms ({}): key {} has no value",
                items.len(),
                quote(&last.value)
            );
            return Err(ParseError::new(ParseErrorKind::OddMap, last.span, message));
        }
        let mut map = BTreeMap::new();
        let mut children = Vec::new();
        let mut items = items.into_iter();
        while let (Some(mut key), Some(value)) = (items.next(), items.next()) {
            if let Some(ns) = ns {
                key.value = qualify(key.value, ns);
            }
            let span = key.span;
            let key = self.take(key, &mut children);
            if map.contains_key(&key) {
                let message = format!("duplicate key {} in map", quote(&key));
                return Err(ParseError::new(ParseErrorKind::DuplicateKey, span, message));
            }
            let value = self.take(value, &mut children);
            map.insert(key, value);
        }
        Ok(Spanned {
            value: Edn::Map(map),
            span: self.span_from(start),
            children,
        })
    }

    /// `##Inf`, `##-Inf`, `##NaN`.
    fn read_symbolic(&mut self, start: Pos) -> Result<Spanned, ParseError> {
        self.bump();
        let value = match self.take_token() {
            "Inf" => f64::INFINITY,
            "-Inf" => f64::NEG_INFINITY,
            "NaN" => f64::NAN,
            _ => {
                let message = format!("unknown symbolic value {}", excerpt(self.slice_from(start)));
                return Err(self.error(ParseErrorKind::InvalidNumber, start, message));
            }
        };
        Ok(self.leaf(start, Edn::Float(value)))
    }

    /// Completes `#tag value`: `#inst` and `#uuid` are decoded, other tags kept as `Tagged`.
    fn finish_tag(&self, start: Pos, tag: &str, child: Spanned) -> Result<Spanned, ParseError> {
        let value = match tag {
            "inst" => Edn::Inst(tag_body(
                &child,
                "inst",
                parse_inst,
                "an RFC 3339 timestamp",
            )?),
            "uuid" => Edn::Uuid(tag_body(
                &child,
                "uuid",
                parse_uuid,
                "8-4-4-4-12 hex digits",
            )?),
            _ => {
                let mut children = Vec::new();
                let value = self.take(child, &mut children);
                let value = Edn::Tagged(Symbol::new(tag), Box::new(value));
                return Ok(Spanned {
                    value,
                    span: self.span_from(start),
                    children,
                });
            }
        };
        Ok(self.leaf(start, value))
    }
}

/// Decodes the string of a built-in tag, or reports `InvalidTagValue` at the value.
fn tag_body<T>(
    child: &Spanned,
    tag: &str,
    decode: fn(&str) -> Option<T>,
    expected: &str,
) -> Result<T, ParseError> {
    let message = match &child.value {
        Edn::String(body) => match decode(body) {
            Some(decoded) => return Ok(decoded),
            None => format!(
                "invalid #{tag} {}: expected {expected}",
                quote(&child.value)
            ),
        },
        other => format!(
            "#{tag} expects a string, found the {} {}",
            other.type_name(),
            quote(other)
        ),
    };
    Err(ParseError::new(
        ParseErrorKind::InvalidTagValue,
        child.span,
        message,
    ))
}

/// Qualifies a key of a `#:ns{}` map as Clojure does: an unqualified keyword or symbol gets
/// the namespace `ns`, the namespace `_` is removed, other keys stay as they are.
fn qualify(key: Edn, ns: &str) -> Edn {
    match key {
        Edn::Keyword(k) => match k.namespace() {
            None => Edn::Keyword(Keyword::from_parts(Some(ns), k.name())),
            Some("_") => Edn::Keyword(Keyword::new(k.name())),
            Some(_) => Edn::Keyword(k),
        },
        // The bare symbol `/` has no name to qualify.
        Edn::Symbol(s) if s.as_str() != "/" => match s.namespace() {
            None => Edn::Symbol(Symbol::from_parts(Some(ns), s.name())),
            Some("_") => Edn::Symbol(Symbol::new(s.name())),
            Some(_) => Edn::Symbol(s),
        },
        other => other,
    }
}
