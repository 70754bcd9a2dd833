//! The CLI's error: a Vev error with the text it came from (so a parse error can point at its
//! column), or a problem with the command line or a file. Printed as one line with the code,
//! then for errors with a span the offending line and a caret under the column.

use std::fmt::Write as _;

/// Where a span's offsets point: the text the error was found in, and how to name it.
#[derive(Debug)]
pub struct SourceText {
    pub name: String,
    pub text: String,
    /// Added to the error's byte offsets (the error came from a slice starting here); also
    /// where to point when the error has no span of its own, if `point_anyway`.
    pub offset: usize,
    pub point_anyway: bool,
}

#[derive(Debug)]
pub enum CliError {
    /// An error from Vev, with the text it was reading when there was one.
    Vev {
        err: Box<vev::Error>,
        source: Option<SourceText>,
    },
    /// A file could not be read.
    Io { path: String, err: std::io::Error },
    /// A command-line argument Vev cannot use (`cli/invalid-argument`, `cli/not-found`).
    Argument { code: &'static str, message: String },
}

pub type CliResult<T> = Result<T, CliError>;

impl CliError {
    pub fn argument(message: impl Into<String>) -> CliError {
        CliError::Argument {
            code: "cli/invalid-argument",
            message: message.into(),
        }
    }

    /// The reader of our output went away (`vev datoms DB eavt | head`): not an error.
    pub fn is_broken_pipe(&self) -> bool {
        matches!(self, CliError::Io { err, .. } if err.kind() == std::io::ErrorKind::BrokenPipe)
    }

    pub fn code(&self) -> &'static str {
        match self {
            CliError::Vev { err, .. } => err.code(),
            CliError::Io { .. } => "cli/io",
            CliError::Argument { code, .. } => code,
        }
    }

    fn message(&self) -> String {
        match self {
            CliError::Vev { err, .. } => err.to_string(),
            CliError::Io { path, err } => format!("{path}: {err}"),
            CliError::Argument { message, .. } => message.clone(),
        }
    }

    /// The byte offset the error points at, in its source text.
    fn offset(&self) -> Option<(usize, &SourceText)> {
        let CliError::Vev {
            err,
            source: Some(source),
        } = self
        else {
            return None;
        };
        let span = match &**err {
            vev::Error::Edn(e) => Some(e.span),
            vev::Error::Tx(e) => e.span(),
            vev::Error::Query(e) => e.span(),
            _ => None,
        };
        match span {
            Some(span) => Some((span.start.offset + source.offset, source)),
            None if source.point_anyway => Some((source.offset, source)),
            None => None,
        }
    }

    /// The text printed on stderr: `error[code]: message`, then the offending line and a
    /// caret when the error has a span.
    pub fn render(&self) -> String {
        let mut out = format!("error[{}]: {}\n", self.code(), self.message());
        if let Some((offset, source)) = self.offset() {
            if let Some((line_no, column, line)) = locate(&source.text, offset) {
                let gutter = line_no.to_string().len();
                let _ = writeln!(out, "{:gutter$}--> {}:{line_no}:{column}", "", source.name);
                let _ = writeln!(out, "{line_no} | {line}");
                let _ = writeln!(out, "{:gutter$} | {:>column$}", "", "^");
            }
        }
        out
    }
}

/// The 1-based line number, 1-based column (in chars) and text of the line holding `offset`.
fn locate(text: &str, offset: usize) -> Option<(usize, usize, &str)> {
    let offset = offset.min(text.len());
    if !text.is_char_boundary(offset) {
        return None;
    }
    let line_start = text[..offset].rfind('\n').map_or(0, |i| i + 1);
    let line_end = text[offset..].find('\n').map_or(text.len(), |i| offset + i);
    let line_no = text[..line_start].matches('\n').count() + 1;
    let column = text[line_start..offset].chars().count() + 1;
    let line = text[line_start..line_end].trim_end_matches('\r');
    Some((line_no, column, line))
}

impl From<vev::Error> for CliError {
    fn from(err: vev::Error) -> CliError {
        CliError::Vev {
            err: Box::new(err),
            source: None,
        }
    }
}

macro_rules! from_vev {
    ($($ty:ty),*) => {$(
        impl From<$ty> for CliError {
            fn from(err: $ty) -> CliError {
                CliError::Vev { err: Box::new(err.into()), source: None }
            }
        }
    )*};
}
from_vev!(
    vev::QueryError,
    vev::TxError,
    vev::edn::ParseError,
    vev::StorageError
);

/// Attach the text an error came from (for its caret).
pub trait WithSource<T> {
    /// The error's span is in `text` from byte `offset` on.
    fn in_text(self, name: &str, text: &str, offset: usize) -> CliResult<T>;
    /// As `in_text`, and an error without a span points at `offset` (the start of the
    /// transaction it came from).
    fn in_form(self, name: &str, text: &str, offset: usize) -> CliResult<T>;
}

fn with_source<T, E: Into<vev::Error>>(
    r: Result<T, E>,
    name: &str,
    text: &str,
    offset: usize,
    point_anyway: bool,
) -> CliResult<T> {
    r.map_err(|e| CliError::Vev {
        err: Box::new(e.into()),
        source: Some(SourceText {
            name: name.to_string(),
            text: text.to_string(),
            offset,
            point_anyway,
        }),
    })
}

impl<T, E: Into<vev::Error>> WithSource<T> for Result<T, E> {
    fn in_text(self, name: &str, text: &str, offset: usize) -> CliResult<T> {
        with_source(self, name, text, offset, false)
    }

    fn in_form(self, name: &str, text: &str, offset: usize) -> CliResult<T> {
        with_source(self, name, text, offset, true)
    }
}

impl From<std::io::Error> for CliError {
    fn from(err: std::io::Error) -> CliError {
        CliError::Io {
            path: "stdout".into(),
            err,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locate_counts_lines_and_chars() {
        let text = "[:a\n  é :b}";
        let off = text.find(':').unwrap();
        assert_eq!(locate(text, off), Some((1, 2, "[:a")));
        let off = text.find(":b").unwrap();
        assert_eq!(locate(text, off), Some((2, 5, "  é :b}")));
        assert_eq!(locate(text, text.len()), Some((2, 8, "  é :b}")));
    }
}
