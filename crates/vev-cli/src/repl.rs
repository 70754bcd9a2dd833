//! `vev repl DB`: an interactive session on one database.
//!
//! An entry is everything up to a line where the brackets balance (`balanced`: strings,
//! character literals and `;` comments are skipped). An entry that starts with `:` is a
//! command (`:tx DATA`, `:as-of T`, ...); anything else is a query, printed as a table.
//! Queries and transactions go through the same code as `vev query` and `vev transact`
//! (`commands::run_query`, `commands::report_edn`), errors through `CliError::render`.
//!
//! Several entries may come in one line (typed ahead, pasted, or written by a script at
//! once): `entries` splits them where a top-level form closes or a line ends, and each runs.
//!
//! The session reads through a read-only connection, so an idle REPL holds no lock and other
//! processes write meanwhile (each query sees their commits). `:tx` opens the file as its
//! writer for that one transaction (waiting for the lock as `--wait` says) and closes it.
//!
//! On a terminal, rustyline edits lines (history, multi-line entries through its validator,
//! Tab completion of attribute idents and commands). Otherwise stdin is read line by line,
//! without prompts, so a session can be scripted; the output is the same, and the exit
//! status is 1 when an entry failed.

use std::borrow::Cow;
use std::io::{self, BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use rustyline::completion::Completer;
use rustyline::highlight::Highlighter;
use rustyline::hint::Hinter;
use rustyline::history::FileHistory;
use rustyline::validate::{ValidationContext, ValidationResult, Validator};
use rustyline::{Context, Editor, Helper};
use vev::{Connection, Db, LockMode, Query};

use crate::commands::{self, QuerySource};
use crate::error::{CliError, CliResult, WithSource};
use crate::output::Format;
use crate::TimeArgs;

/// The commands, for `:help` and completion: name, arguments, what it does.
const COMMANDS: &[(&str, &str, &str)] = &[
    (
        ":tx",
        "DATA",
        "transact EDN transaction data, print the report",
    ),
    (
        ":as-of",
        "[T]",
        "query the database as of T (basis-t, tx id or #inst); no T: now",
    ),
    (
        ":since",
        "[T]",
        "query only what changed after basis-t T; no T: all",
    ),
    (
        ":history",
        "",
        "toggle the history view (every assertion and retraction)",
    ),
    (":now", "", "clear :as-of, :since and :history"),
    (
        ":timing",
        "",
        "toggle printing the row count and elapsed time (stderr)",
    ),
    (
        ":explain",
        "",
        "toggle printing the plan that ran instead of the result",
    ),
    (":help", "", "this text"),
    (":quit", "", "leave (also :exit, Ctrl-D)"),
];

const HELP_INTRO: &str = "\
An entry ends at a line where its brackets balance. Anything not starting with : is a query,
e.g. [:find ?e :where [?e :person/name]], printed as a table. Commands:";

/// Where history is kept: `$VEV_HISTORY`, else `$HOME/.vev_history`, else nowhere.
fn history_path() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("VEV_HISTORY") {
        return (!p.is_empty()).then(|| PathBuf::from(p));
    }
    std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".vev_history"))
}

/// Whether `text` is a complete entry: every bracket opened is closed and no string is open.
/// Strings (with `\` escapes), character literals (`\[`) and `;` comments are skipped. More
/// closers than openers counts as complete, so the reader reports the error.
pub fn balanced(text: &str) -> bool {
    let mut depth: i64 = 0;
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => loop {
                match chars.next() {
                    None => return false,
                    Some('\\') => {
                        chars.next();
                    }
                    Some('"') => break,
                    Some(_) => {}
                }
            },
            ';' => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        break;
                    }
                }
            }
            '\\' => {
                chars.next();
            }
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => depth -= 1,
            _ => {}
        }
    }
    depth <= 0
}

/// Split complete text (`balanced`) into entries: an entry ends where a bracket closes its
/// outermost form (a query, or the data of `:tx`) or, outside brackets, at a line's end.
/// Entries with nothing but whitespace and comments are left out.
pub fn entries(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut depth: i64 = 0;
    let mut start = 0;
    let mut chars = text.char_indices();
    let mut end_here = |start: &mut usize, end: usize| {
        let entry = &text[*start..end];
        if has_code(entry) {
            out.push(entry);
        }
        *start = end;
    };
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => loop {
                match chars.next() {
                    None => break,
                    Some((_, '\\')) => {
                        chars.next();
                    }
                    Some((_, '"')) => break,
                    Some(_) => {}
                }
            },
            ';' => {
                // Outside brackets a comment ends the entry before it (a command's
                // argument is the rest of its line) and is dropped with its line.
                if depth <= 0 {
                    end_here(&mut start, i);
                }
                let mut end = text.len();
                for (j, c) in chars.by_ref() {
                    if c == '\n' {
                        end = j + 1;
                        break;
                    }
                }
                if depth <= 0 {
                    start = end;
                }
            }
            '\\' => {
                chars.next();
            }
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => {
                depth -= 1;
                if depth == 0 {
                    end_here(&mut start, i + 1);
                }
            }
            '\n' if depth <= 0 => end_here(&mut start, i + 1),
            _ => {}
        }
    }
    end_here(&mut start, text.len());
    out
}

/// The view and switches a session has set.
#[derive(Default)]
struct State {
    time: TimeArgs,
    timing: bool,
    explain: bool,
}

enum Flow {
    Continue,
    Quit,
}

struct Session {
    /// Read-only: the session holds no lock between transactions.
    conn: Connection,
    path: PathBuf,
    /// How `:tx` waits for the writer lock.
    lock: LockMode,
    state: State,
    /// An entry failed (the exit status of a scripted session).
    failed: bool,
}

impl Session {
    /// Run every entry of complete text, printing their output; errors are printed, never
    /// returned. Stops at `:quit`.
    fn entries(&mut self, text: &str, out: &mut impl Write) -> Flow {
        for entry in entries(text) {
            if let Flow::Quit = self.entry(entry, out) {
                return Flow::Quit;
            }
        }
        Flow::Continue
    }

    /// Run one entry, printing its output; errors are printed, never returned.
    fn entry(&mut self, entry: &str, out: &mut impl Write) -> Flow {
        match self.run(entry, out) {
            Ok(flow) => flow,
            Err(e) => {
                let _ = out.flush();
                eprint!("{}", e.render());
                self.failed = true;
                Flow::Continue
            }
        }
    }

    /// Transact through a writer opened for this transaction only: the lock is held while
    /// it runs, and the reader sees the commit at its next query.
    /// `data` is `entry[offset..]` (so errors point into the entry).
    fn transact(&self, entry: &str, offset: usize) -> CliResult<vev::TxReport> {
        let data = &entry[offset..];
        let opts = vev::OpenOptions {
            lock: self.lock,
            create: false,
            // A checkpoint per REPL transaction would cost more than the transaction; the
            // next long-lived writer checkpoints the tail.
            checkpoint_on_close: false,
            ..vev::OpenOptions::default()
        };
        let writer = Connection::open_with(&self.path, &opts)?;
        writer.transact_edn(data).in_text("input", entry, offset)
    }

    fn run(&mut self, entry: &str, out: &mut impl Write) -> CliResult<Flow> {
        let trimmed = entry.trim();
        if !has_code(trimmed) {
            return Ok(Flow::Continue);
        }
        if !trimmed.starts_with(':') {
            return self.query(entry, out).map(|()| Flow::Continue);
        }
        let (command, rest) = trimmed
            .split_once(char::is_whitespace)
            .map_or((trimmed, ""), |(c, r)| (c, r.trim()));
        match command {
            ":q" | ":quit" | ":exit" => return Ok(Flow::Quit),
            ":help" | ":h" | ":?" => {
                writeln!(out, "{HELP_INTRO}")?;
                for (name, args, what) in COMMANDS {
                    writeln!(out, "  {:<16} {what}", format!("{name} {args}"))?;
                }
            }
            ":tx" | ":transact" => {
                if rest.is_empty() {
                    return Err(CliError::argument(":tx needs transaction data"));
                }
                // Carets point into the whole entry.
                let offset = entry.len() - entry.trim_start().len() + trimmed.len() - rest.len();
                let report = self.transact(entry, offset)?;
                writeln!(out, "{}", commands::report_edn(&report))?;
            }
            ":as-of" | ":since" => {
                let t = (!rest.is_empty()).then(|| rest.to_string());
                if let Some(t) = &t {
                    commands::time_point(t)?;
                }
                let what = if command == ":as-of" {
                    self.state.time.as_of = t.clone();
                    "as of"
                } else {
                    self.state.time.since = t.clone();
                    "since"
                };
                match t {
                    Some(t) => writeln!(out, "queries see the database {what} {t}")?,
                    None => writeln!(out, "{what}: cleared")?,
                }
            }
            ":history" => {
                self.state.time.history = !self.state.time.history;
                let on = if self.state.time.history { "on" } else { "off" };
                writeln!(out, "history view {on}")?;
            }
            ":now" => {
                self.state.time = TimeArgs::default();
                writeln!(out, "queries see the database now")?;
            }
            ":timing" => {
                self.state.timing = !self.state.timing;
                let on = if self.state.timing { "on" } else { "off" };
                writeln!(out, "timing {on}")?;
            }
            ":explain" => {
                self.state.explain = !self.state.explain;
                let on = if self.state.explain { "on" } else { "off" };
                writeln!(out, "explain {on}")?;
            }
            other => {
                return Err(CliError::argument(format!(
                    "unknown command {other} (:help lists them)"
                )))
            }
        }
        out.flush()?;
        Ok(Flow::Continue)
    }

    fn query(&self, text: &str, out: &mut impl Write) -> CliResult<()> {
        let query = Query::parse(text).in_text("input", text, 0)?;
        let db = commands::view(self.conn.sync()?, &self.state.time)?;
        let source = QuerySource {
            name: "input",
            text,
            query: &query,
            inputs: &[],
        };
        let (timing, explain) = (self.state.timing, self.state.explain);
        commands::run_query(out, &db, &source, Format::Table, explain, timing)
    }
}

/// Whether the text has anything but comments and whitespace.
fn has_code(text: &str) -> bool {
    text.lines()
        .any(|l| !l.trim().is_empty() && !l.trim_start().starts_with(';'))
}

/// Every ident of an attribute, sorted.
fn attribute_idents(db: &Db) -> Vec<String> {
    let mut idents: Vec<String> = db
        .schema()
        .attributes()
        .map(|a| format!(":{}", a.ident.as_str()))
        .collect();
    idents.sort();
    idents
}

/// rustyline's helper: completion and the multi-line validator.
struct ReplHelper {
    idents: Vec<String>,
}

impl Completer for ReplHelper {
    type Candidate = String;

    fn complete(
        &self,
        line: &str,
        pos: usize,
        _ctx: &Context<'_>,
    ) -> rustyline::Result<(usize, Vec<String>)> {
        let before = &line[..pos];
        let start = before
            .rfind(|c: char| c.is_whitespace() || "()[]{}\"".contains(c))
            .map_or(0, |i| i + 1);
        let word = &before[start..];
        if !word.starts_with(':') {
            return Ok((start, Vec::new()));
        }
        let mut candidates: Vec<String> = Vec::new();
        if before[..start].trim().is_empty() {
            candidates.extend(COMMANDS.iter().map(|(c, _, _)| c.to_string()));
        }
        candidates.extend(self.idents.iter().cloned());
        candidates.retain(|c| c.starts_with(word));
        Ok((start, candidates))
    }
}

impl Hinter for ReplHelper {
    type Hint = String;
}

impl Highlighter for ReplHelper {
    fn highlight_prompt<'b, 's: 'b, 'p: 'b>(
        &'s self,
        prompt: &'p str,
        _default: bool,
    ) -> Cow<'b, str> {
        Cow::Borrowed(prompt)
    }
}

impl Validator for ReplHelper {
    fn validate(&self, ctx: &mut ValidationContext<'_>) -> rustyline::Result<ValidationResult> {
        Ok(if balanced(ctx.input()) {
            ValidationResult::Valid(None)
        } else {
            ValidationResult::Incomplete
        })
    }
}

impl Helper for ReplHelper {}

pub fn repl(path: &Path, lock: LockMode) -> CliResult<ExitCode> {
    if !commands::is_storage_url(path) && !path.exists() {
        // Create the file, then let go of it.
        drop(commands::open_write(path, lock)?);
    }
    let mut session = Session {
        conn: commands::open_read(path)?,
        path: path.to_path_buf(),
        lock,
        state: State::default(),
        failed: false,
    };
    if io::stdin().is_terminal() {
        interactive(&mut session, path)?;
        return Ok(ExitCode::SUCCESS);
    }
    scripted(&mut session)?;
    Ok(if session.failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// Stdin is not a terminal: one entry per balanced run of lines, no prompts.
fn scripted(session: &mut Session) -> CliResult<()> {
    let stdin = io::stdin();
    let mut out = io::stdout().lock();
    let mut entry = String::new();
    for line in stdin.lock().lines() {
        let line = line.map_err(|err| CliError::Io {
            path: "stdin".into(),
            err,
        })?;
        entry.push_str(&line);
        entry.push('\n');
        if !balanced(&entry) {
            continue;
        }
        let flow = session.entries(&entry, &mut out);
        entry.clear();
        if let Flow::Quit = flow {
            return Ok(());
        }
    }
    if has_code(&entry) {
        // Unfinished: the reader says what is missing.
        session.entry(&entry, &mut out);
    }
    Ok(())
}

fn readline_error(err: rustyline::error::ReadlineError) -> CliError {
    CliError::Io {
        path: "terminal".into(),
        err: io::Error::other(err),
    }
}

fn interactive(session: &mut Session, path: &Path) -> CliResult<()> {
    let config = rustyline::Config::builder()
        .auto_add_history(false)
        .completion_type(rustyline::CompletionType::List)
        .build();
    let mut editor: Editor<ReplHelper, FileHistory> =
        Editor::with_config(config).map_err(readline_error)?;
    editor.set_helper(Some(ReplHelper {
        idents: attribute_idents(&session.conn.db()),
    }));
    let history = history_path();
    if let Some(h) = &history {
        // A missing file is a first session.
        let _ = editor.load_history(h);
    }
    println!(
        "vev repl on {} (basis-t {}; read-only until a :tx takes the writer lock for its \
         transaction). :help for commands, :quit to leave.",
        path.display(),
        session.conn.db().basis_t()
    );
    let mut out = io::stdout();
    loop {
        let prompt = if session.state.time.as_of.is_some()
            || session.state.time.since.is_some()
            || session.state.time.history
        {
            "vev*> "
        } else {
            "vev> "
        };
        let entry = match editor.readline(prompt) {
            Ok(entry) => entry,
            Err(rustyline::error::ReadlineError::Interrupted) => continue,
            Err(rustyline::error::ReadlineError::Eof) => break,
            Err(e) => return Err(readline_error(e)),
        };
        if !entry.trim().is_empty() {
            let _ = editor.add_history_entry(entry.as_str());
            if let Some(h) = &history {
                if let Err(e) = editor.save_history(h) {
                    eprintln!("warning: history not saved to {}: {e}", h.display());
                }
            }
        }
        let flow = session.entries(&entry, &mut out);
        if let Some(helper) = editor.helper_mut() {
            // A transaction may have installed attributes.
            helper.idents = attribute_idents(&session.conn.db());
        }
        if let Flow::Quit = flow {
            break;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{balanced, entries};

    #[test]
    fn entries_end_where_a_form_closes_or_a_line_ends() {
        for (text, expected) in [
            ("[:find ?e]\n", vec!["[:find ?e]"]),
            ("[:a] [:b]\n", vec!["[:a]", " [:b]"]),
            (
                ":tx [{:a 1}] :history\n",
                vec![":tx [{:a 1}]", " :history\n"],
            ),
            (":as-of 2 ; why\n:now\n", vec![":as-of 2 ", ":now\n"]),
            (
                "[:find ?e\n ; a ] comment\n :where [?e :a]]",
                vec!["[:find ?e\n ; a ] comment\n :where [?e :a]]"],
            ),
            ("[:a \"]\" \\]] [:b]", vec!["[:a \"]\" \\]]", " [:b]"]),
            ("; only a comment\n\n", vec![]),
        ] {
            assert_eq!(entries(text), expected, "{text:?}");
        }
    }

    #[test]
    fn balanced_skips_strings_chars_and_comments() {
        for (text, expected) in [
            ("[:find ?e", false),
            ("[:find ?e]", true),
            ("[:find ?e :where [?e :a \"]\"]", false),
            ("[:find ?e :where [?e :a \"]\"]]", true),
            ("[:a \\[ ]", true),
            ("[:a ; ]\n", false),
            ("[:a ; ]\n]", true),
            ("\"open", false),
            ("\"esc \\\" still open", false),
            ("]", true),
            (":help", true),
        ] {
            assert_eq!(balanced(text), expected, "{text:?}");
        }
    }
}
