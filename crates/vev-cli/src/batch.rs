//! `vev transact --batch`: a stream of transactions, each committed as soon as it has arrived
//! and its report line written and flushed at once, so `producer | vev transact --batch DB`
//! works as a pipeline and a stream cut off anywhere has committed exactly what it reported.
//!
//! Input is read a line at a time. Once the lines read so far close every bracket they open
//! (`Brackets`, the rule of `repl::balanced` kept across lines, so a transaction of many
//! lines is scanned once), they hold whole forms: each is one transaction, run in order.
//! Only the text of the forms not yet run is kept, and the number of lines before it, so
//! that an error points at its line and column in the whole input.

use std::io::{self, BufRead, BufReader, Write};
use std::path::Path;

use vev::{Connection, LockMode};

use crate::commands::{open_write, report_edn};
use crate::error::{CliError, CliResult, WithSource};

/// Where the stream comes from, and its name in error messages.
fn input(file: Option<&str>) -> CliResult<(String, Box<dyn BufRead>)> {
    match file {
        None | Some("-") => Ok(("stdin".into(), Box::new(io::stdin().lock()))),
        Some(path) => {
            let f = std::fs::File::open(path).map_err(|err| CliError::Io {
                path: path.to_string(),
                err,
            })?;
            Ok((path.to_string(), Box::new(BufReader::new(f))))
        }
    }
}

/// Brackets open so far in the text fed, skipping strings, character literals (`\\[`) and
/// `;` comments, as `repl::balanced` does.
#[derive(Default)]
struct Brackets {
    depth: i64,
    in_string: bool,
    in_comment: bool,
    /// The last character was a `\\` (in a string, or a character literal).
    escape: bool,
}

impl Brackets {
    fn feed(&mut self, text: &str) {
        for c in text.chars() {
            if std::mem::take(&mut self.escape) {
                continue;
            }
            match c {
                '\n' if self.in_comment => self.in_comment = false,
                _ if self.in_comment => {}
                '\\' => self.escape = true,
                '"' => self.in_string = !self.in_string,
                _ if self.in_string => {}
                ';' => self.in_comment = true,
                '(' | '[' | '{' => self.depth += 1,
                ')' | ']' | '}' => self.depth -= 1,
                _ => {}
            }
        }
    }

    /// Whether the text fed so far is whole forms (or has more closers than openers, which
    /// the reader then reports).
    fn complete(&self) -> bool {
        !self.in_string && self.depth <= 0
    }
}

/// The text read but not yet run, and where it starts in the whole input.
struct Pending {
    text: String,
    /// Lines of the input before `text`.
    lines_before: usize,
}

impl Pending {
    /// `text` as it sits in the input (blank lines stand for the lines before it), and the
    /// offset of `at` in that: what an error's caret needs.
    fn in_input(&self, at: usize) -> (String, usize) {
        let mut shown = "\n".repeat(self.lines_before);
        shown.push_str(&self.text);
        (shown, self.lines_before + at)
    }

    /// Run every form of `text` as a transaction, writing and flushing each report as it
    /// commits.
    fn run(&mut self, conn: &Connection, name: &str, out: &mut impl Write) -> CliResult<()> {
        let forms = match vev::edn::parse_all_spanned(&self.text) {
            Ok(forms) => forms,
            Err(e) => {
                let (shown, offset) = self.in_input(0);
                return Err(e).in_text(name, &shown, offset);
            }
        };
        for form in forms {
            let (start, end) = (form.span.start.offset, form.span.end.offset);
            let report = match conn.transact_edn(&self.text[start..end]) {
                Ok(report) => report,
                Err(e) => {
                    let (shown, offset) = self.in_input(start);
                    return Err(e).in_form(name, &shown, offset);
                }
            };
            writeln!(out, "{}", report_edn(&report))?;
            out.flush()?;
        }
        self.lines_before += self.text.matches('\n').count();
        self.text.clear();
        Ok(())
    }
}

/// Transact each form of the input as it arrives (`file`, or stdin when it is `-` or
/// absent). Stops at the first error: the transactions before it are committed and were
/// reported.
pub fn transact_stream(path: &Path, file: Option<&str>, lock: LockMode) -> CliResult<()> {
    let conn = open_write(path, lock)?;
    let (name, mut reader) = input(file)?;
    let mut out = io::stdout().lock();
    let mut pending = Pending {
        text: String::new(),
        lines_before: 0,
    };
    let mut brackets = Brackets::default();
    loop {
        let from = pending.text.len();
        let read = reader
            .read_line(&mut pending.text)
            .map_err(|err| CliError::Io {
                path: name.clone(),
                err,
            })?;
        brackets.feed(&pending.text[from..]);
        // At the end, whatever is left is run (or reported as the error it is).
        if read == 0 || brackets.complete() {
            pending.run(&conn, &name, &mut out)?;
            brackets = Brackets::default();
        }
        if read == 0 {
            return Ok(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Brackets;

    /// Fed line by line, `Brackets` agrees with `repl::balanced` on the whole text.
    #[test]
    fn brackets_across_lines_agree_with_balanced() {
        for text in [
            "[:a\n :b]\n",
            "[{:a \"]\n\"}\n]\n",
            "[:a ; ]\n]\n",
            "[:a \\[ ]\n",
            "[\"esc \\\" still\"]\n",
            "]\n",
            "[:a\n",
            "\"open\n",
        ] {
            let mut b = Brackets::default();
            for line in text.split_inclusive('\n') {
                b.feed(line);
            }
            assert_eq!(b.complete(), crate::repl::balanced(text), "{text:?}");
        }
    }
}
