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
    /// Text read from a file or stdin (`name`) is not UTF-8: the first bad `byte` is at
    /// byte `offset` (`cli/invalid-utf8`).
    Utf8 {
        name: String,
        offset: usize,
        byte: u8,
    },
    /// A command-line argument Vev cannot use (`cli/invalid-argument`, `cli/not-found`), or
    /// an import the database cannot take (`import/not-empty`, `import/mismatch`, ...).
    Argument { code: &'static str, message: String },
    /// A record of an import file that cannot be read or typed, with where it is.
    Input(Box<InputError>),
    /// An error and a note on what it means for the command (printed after it).
    Context { err: Box<CliError>, note: String },
}

/// What is wrong with a record of an import file.
#[derive(thiserror::Error, Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum InputErrorKind {
    #[error("invalid JSON: {reason}")]
    Json { reason: String },
    #[error("a JSON Lines record is an object of attributes, not {found}")]
    NotAnObject { found: &'static str },
    #[error("unknown attribute {attribute}")]
    UnknownAttribute { attribute: String },
    #[error("{value} is not a value of {attribute} (type {value_type})")]
    WrongType {
        attribute: vev::Keyword,
        value_type: vev::Keyword,
        value: String,
    },
    #[error(":db/id {value} is neither a tempid string nor a positive entity id")]
    InvalidId { value: String },
    #[error("a quoted CSV field is not closed")]
    UnclosedQuote,
    #[error("a closing quote must end the CSV field (found {found:?})")]
    TextAfterQuote { found: char },
    #[error("the row has {found} fields but the header has {expected}")]
    FieldCount { expected: usize, found: usize },
    #[error("header column {column} names no attribute: {reason}")]
    BadHeader { column: usize, reason: String },
}

impl InputErrorKind {
    pub fn code(&self) -> &'static str {
        match self {
            InputErrorKind::Json { .. } => "import/json",
            InputErrorKind::NotAnObject { .. } => "import/not-an-object",
            InputErrorKind::UnknownAttribute { .. } => "import/unknown-attribute",
            InputErrorKind::WrongType { .. } => "import/wrong-type",
            InputErrorKind::InvalidId { .. } => "import/invalid-id",
            InputErrorKind::UnclosedQuote
            | InputErrorKind::TextAfterQuote { .. }
            | InputErrorKind::FieldCount { .. } => "import/csv",
            InputErrorKind::BadHeader { .. } => "import/csv-header",
        }
    }
}

/// An import error at a line (and column, when known) of a file.
#[derive(Debug, Clone, PartialEq)]
pub struct InputError {
    pub kind: InputErrorKind,
    pub file: String,
    /// 1-based.
    pub line: usize,
    /// 1-based, in characters.
    pub column: Option<usize>,
    /// The text of the line, for the caret.
    pub line_text: String,
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
            CliError::Utf8 { .. } => "cli/invalid-utf8",
            CliError::Argument { code, .. } => code,
            CliError::Input(e) => e.kind.code(),
            CliError::Context { err, .. } => err.code(),
        }
    }

    fn message(&self) -> String {
        match self {
            CliError::Vev { err, .. } => err.to_string(),
            CliError::Io { path, err } => format!("{path}: {err}"),
            CliError::Utf8 { name, offset, byte } => {
                format!("{name} is not valid UTF-8: byte 0x{byte:02x} at byte offset {offset}")
            }
            CliError::Argument { message, .. } => message.clone(),
            CliError::Input(e) => e.kind.to_string(),
            CliError::Context { err, .. } => err.message(),
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
        match self {
            CliError::Context { err, note } => return format!("{}note: {note}\n", err.render()),
            CliError::Input(e) => return render_input(e),
            _ => {}
        }
        let mut out = format!("error[{}]: {}\n", self.code(), cap_words(&self.message()));
        if let Some((offset, source)) = self.offset() {
            if let Some((line_no, column, line)) = locate(&source.text, offset) {
                let (line, column) = window(line, column);
                let gutter = line_no.to_string().len();
                let _ = writeln!(out, "{:gutter$}--> {}:{line_no}:{column}", "", source.name);
                let _ = writeln!(out, "{line_no} | {line}");
                let _ = writeln!(out, "{:gutter$} | {:>column$}", "", "^");
            }
        }
        out
    }
}

fn render_input(e: &InputError) -> String {
    let mut out = format!(
        "error[{}]: {}\n",
        e.kind.code(),
        cap_words(&e.kind.to_string())
    );
    let line_no = e.line;
    let gutter = line_no.to_string().len();
    match e.column {
        Some(column) => {
            let _ = writeln!(out, "{:gutter$}--> {}:{line_no}:{column}", "", e.file);
            let (line, column) = window(&e.line_text, column);
            let _ = writeln!(out, "{line_no} | {line}");
            let _ = writeln!(out, "{:gutter$} | {:>column$}", "", "^");
        }
        None => {
            let _ = writeln!(out, "{:gutter$}--> {}:{line_no}", "", e.file);
            let _ = writeln!(out, "{line_no} | {}", window(&e.line_text, 1).0);
        }
    }
    out
}

/// The most characters of one word of an error message (a run without spaces: a quoted
/// value, a number, a path) and of the source line under it that the CLI prints. Every
/// message is printed through `cap_words`, so no error, from the CLI or from Vev, echoes a
/// huge value whole, whatever its own message does.
pub const ECHO_CHARS_MAX: usize = 80;

/// `message` with each word longer than `ECHO_CHARS_MAX` characters cut there, followed by
/// `…` and its length: `'77777…' (1000002 chars)`.
fn cap_words(message: &str) -> String {
    let words: Vec<String> = message
        .split(' ')
        .map(|word| {
            let n = word.chars().count();
            if n <= ECHO_CHARS_MAX {
                return word.to_string();
            }
            let head: String = word.chars().take(ECHO_CHARS_MAX).collect();
            format!("{head}… ({n} chars)")
        })
        .collect();
    words.join(" ")
}

/// At most `ECHO_CHARS_MAX` characters of `line` around the 1-based char `column`, with `…`
/// where it was cut, and the column in what is kept.
fn window(line: &str, column: usize) -> (String, usize) {
    let n = line.chars().count();
    if n <= ECHO_CHARS_MAX {
        return (line.to_string(), column);
    }
    let start = column
        .saturating_sub(1 + ECHO_CHARS_MAX / 2)
        .min(n - ECHO_CHARS_MAX);
    let end = start + ECHO_CHARS_MAX;
    let mut text = String::new();
    if start > 0 {
        text.push('…');
    }
    text.extend(line.chars().skip(start).take(ECHO_CHARS_MAX));
    if end < n {
        text.push('…');
    }
    (text, column - start + usize::from(start > 0))
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

/// An error of `vev pull`'s entity argument in the pull family: an entity or lookup-ref
/// attribute that is not there is `pull/not-found`, an argument that names no entity
/// `pull/invalid-entity` (the pattern's own errors are `pull/*` already).
pub fn in_pull(err: CliError) -> CliError {
    match err {
        CliError::Argument { code, message } => CliError::Argument {
            code: match code {
                "cli/not-found" => "pull/not-found",
                "cli/invalid-argument" => "pull/invalid-entity",
                other => other,
            },
            message,
        },
        other => other,
    }
}

/// The bytes read from `name` as text, or where they stop being UTF-8.
pub fn utf8_text(name: &str, bytes: Vec<u8>) -> CliResult<String> {
    String::from_utf8(bytes).map_err(|e| {
        let offset = e.utf8_error().valid_up_to();
        CliError::Utf8 {
            name: name.to_string(),
            offset,
            byte: e.as_bytes()[offset],
        }
    })
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
    fn invalid_utf8_names_the_byte_and_its_offset() {
        assert_eq!(utf8_text("f", b"ok \xc3\xa9".to_vec()).unwrap(), "ok é");
        let e = utf8_text("q.edn", b"[:find \"\xff\"]".to_vec()).unwrap_err();
        assert_eq!(e.code(), "cli/invalid-utf8");
        assert_eq!(
            e.render(),
            "error[cli/invalid-utf8]: q.edn is not valid UTF-8: byte 0xff at byte offset 8\n"
        );
        // A sequence cut short at the end.
        let e = utf8_text("stdin", b"ab\xc3".to_vec()).unwrap_err();
        assert!(
            e.render().contains("byte 0xc3 at byte offset 2"),
            "{}",
            e.render()
        );
    }

    #[test]
    fn long_words_and_lines_are_cut_with_their_length() {
        let long = "7".repeat(1_000_000);
        let capped = cap_words(&format!("value '{long}' is not a string"));
        assert!(capped.len() < 150, "{} bytes", capped.len());
        assert!(
            capped.ends_with("… (1000002 chars) is not a string"),
            "{capped}"
        );
        assert_eq!(cap_words("short words stay"), "short words stay");
        // The caret stays under the same character.
        let line = format!("[{long} x]");
        let column = line.find('x').unwrap() + 1;
        let (shown, at) = window(&line, column);
        assert!(shown.chars().count() <= ECHO_CHARS_MAX + 2, "{shown}");
        assert_eq!(shown.chars().nth(at - 1), Some('x'), "{shown} {at}");
        let (shown, at) = window(&line, 2);
        assert_eq!(
            (shown.chars().nth(at - 1), shown.chars().last()),
            (Some('7'), Some('…'))
        );
        assert_eq!(window("[short]", 3), ("[short]".to_string(), 3));
    }

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
