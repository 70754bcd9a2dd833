//! EDN (extensible data notation) for Vev: the value model, a reader and a printer.
//!
//! Vev speaks EDN the way Datomic does: schemas, transactions, queries and pull patterns are
//! EDN data, and results print as EDN. This crate is the bottom of the dependency graph and
//! does no I/O.
//!
//! - [`Edn`] is the value, with a total order so values can be map keys and index entries.
//! - [`parse`], [`parse_all`] and [`parse_spanned`] read text, following the EDN spec
//!   (<https://github.com/edn-format/edn>) and Clojure's reader where the spec is silent
//!   (`#:ns{}` maps, `##Inf`, `#inst` prefixes). Errors carry a [`Span`] and a stable code.
//! - `Display` for [`Edn`] prints text that reads back to an equal value.
//!
//! ```
//! use vev_edn::{parse, Edn};
//!
//! let tx = parse(r#"[{:db/ident :person/name, :db/cardinality :db.cardinality/one}]"#).unwrap();
//! let entity = &tx.as_seq().unwrap()[0];
//! let ident = &entity.as_map().unwrap()[&Edn::keyword("db/ident")];
//! assert_eq!(ident.as_keyword().unwrap().namespace(), Some("person"));
//! assert_eq!(parse(&tx.to_string()), Ok(tx));
//! ```

#![warn(missing_docs)]

mod error;
mod inst;
mod name;
mod print;
mod reader;
mod value;

pub use bigdecimal::BigDecimal;
pub use num_bigint::BigInt;

pub use error::{ParseError, ParseErrorKind, Pos, Span};
pub use inst::{format_inst, format_uuid, parse_inst, parse_uuid};
pub use name::{is_valid_keyword, is_valid_symbol, Keyword, Symbol};
pub use reader::{BIGDEC_SCALE_MAX, MAX_DEPTH, NUMBER_DIGITS_MAX};
pub use value::{Edn, Spanned};

use reader::{Reader, Spans};

/// Reads exactly one form. Whitespace, comments and `#_` discards may surround it; nothing
/// else may (`EmptyInput`, `TrailingInput`).
pub fn parse(text: &str) -> Result<Edn, ParseError> {
    read_one(text, Spans::Drop).map(|form| form.value)
}

/// Reads exactly one form, with the spans of it and all its parts.
///
/// Every [`Spanned`] node owns its whole value, so memory grows with the size of the input
/// times its nesting depth; use [`parse`] for bulk data and this for text a person wrote
/// (transactions, queries) where errors must point into the source.
pub fn parse_spanned(text: &str) -> Result<Spanned, ParseError> {
    read_one(text, Spans::Keep)
}

/// Reads zero or more forms.
pub fn parse_all(text: &str) -> Result<Vec<Edn>, ParseError> {
    read_all(text, Spans::Drop).map(|forms| forms.into_iter().map(|form| form.value).collect())
}

/// Reads zero or more forms, with their spans.
pub fn parse_all_spanned(text: &str) -> Result<Vec<Spanned>, ParseError> {
    read_all(text, Spans::Keep)
}

fn read_one(text: &str, spans: Spans) -> Result<Spanned, ParseError> {
    let mut reader = Reader::new(text, spans);
    reader.skip_ws()?;
    if reader.at_eof() {
        let message = "empty input: expected one edn form".to_owned();
        return Err(ParseError::new(
            ParseErrorKind::EmptyInput,
            Span::at(reader.pos()),
            message,
        ));
    }
    let form = reader.read_form()?;
    reader.skip_ws()?;
    match reader.peek() {
        None => Ok(form),
        // A stray closer is reported as such: it is the more precise diagnosis.
        Some(')' | ']' | '}') => Err(reader
            .read_form()
            .err()
            .unwrap_or_else(|| trailing(&reader))),
        Some(_) => Err(trailing(&reader)),
    }
}

fn trailing(reader: &Reader<'_>) -> ParseError {
    let start = reader.pos();
    let c = reader.peek().unwrap_or(' ');
    let end = Pos {
        offset: start.offset + c.len_utf8(),
        column: start.column.saturating_add(1),
        ..start
    };
    let message = format!("trailing input after the first form, starting with '{c}'");
    ParseError::new(ParseErrorKind::TrailingInput, Span { start, end }, message)
}

fn read_all(text: &str, spans: Spans) -> Result<Vec<Spanned>, ParseError> {
    let mut reader = Reader::new(text, spans);
    let mut forms = Vec::new();
    loop {
        reader.skip_ws()?;
        if reader.at_eof() {
            return Ok(forms);
        }
        forms.push(reader.read_form()?);
    }
}
