//! COPY FROM STDIN: the data a client sends, kept until CopyDone, then parsed and written.

use super::{now_ms, Copying, Outcome, Session, Touch};
use crate::catalog::Table;
use crate::error::SqlError;
use crate::sql;
use crate::sql::write::CopyPlan;
use vev::Edn;

impl Session {
    /// Feed COPY data (any split of the text into messages). It is kept as it came and
    /// parsed at CopyDone: receiving then costs the server little beside the client, and a
    /// large COPY's lines are parsed on two threads.
    pub fn copy_data(&mut self, data: &[u8]) {
        if let Some(c) = &mut self.copying {
            c.raw.extend_from_slice(data);
        }
    }

    /// The end of COPY data: the rows are written (as one transaction outside BEGIN).
    pub async fn copy_done(&mut self) -> Result<Outcome, SqlError> {
        let Some(c) = self.copying.take() else {
            return Err(SqlError::new("08P01", "CopyDone without COPY"));
        };
        let result = self.copy_rows(c).await;
        if result.is_err() {
            if let Some(t) = &mut self.txn {
                t.failed = true;
            }
        }
        result
    }

    async fn copy_rows(&mut self, c: Copying) -> Result<Outcome, SqlError> {
        let mut rows = parse_copy(&c.plan, c.raw)?;
        let table: &Table = &c.plan.table;
        // The columns the COPY leaves out get their DEFAULT.
        let left_out: Vec<usize> = (0..table.columns.len())
            .filter(|i| table.columns[*i].default.is_some() && !c.plan.columns.contains(i))
            .collect();
        if !left_out.is_empty() {
            let ctx = self.ctx(&[], now_ms());
            let db = self.shared.conn.db();
            let next = |col: &crate::catalog::Column| {
                let attr = col.attr.as_ref().expect("a serial column has an attribute");
                self.shared.sequences.next(&db, attr, col.ty)
            };
            for values in &mut rows {
                for &i in &left_out {
                    values[i] = sql::write::default_value(table, i, &ctx, &next)?;
                }
            }
        }
        let n = rows.len();
        let ops = sql::write::rows_ops(table, rows, &mut self.next_row)?;
        self.write(ops, Touch::Tables(std::slice::from_ref(&c.plan.table.name)))
            .await?;
        Ok(Outcome::Command(format!("COPY {n}")))
    }

    /// The client failed the COPY: nothing is written.
    pub fn copy_fail(&mut self) {
        self.copying = None;
        if let Some(t) = &mut self.txn {
            t.failed = true;
        }
    }
}

/// Where parsing a run of COPY lines stopped.
enum Stop {
    /// At the end of the run.
    End,
    /// At the end-of-data marker `\.`: what follows it is not data.
    Marker,
    Failed(SqlError),
}

/// COPY data bytes from which its lines are parsed on two threads, half each.
const PARALLEL_COPY_BYTES: usize = 256 << 10;

/// The rows of a COPY's text: its lines up to the end-of-data marker (or the end), each
/// parsed as one pass would, with the same line numbers and the same first error.
fn parse_copy(plan: &CopyPlan, raw: Vec<u8>) -> Result<Vec<Vec<Option<Edn>>>, SqlError> {
    // The complete lines; after them, a last line without its newline, if any.
    let lines_end = raw.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
    let (lines, unterminated) = raw.split_at(lines_end);
    let (rows, stop) = if lines.len() >= PARALLEL_COPY_BYTES {
        // Split after the newline nearest the middle.
        let mid = lines[lines.len() / 2..]
            .iter()
            .position(|b| *b == b'\n')
            .map_or(lines.len(), |i| lines.len() / 2 + i + 1);
        let (first, second) = lines.split_at(mid);
        let second_lineno = 1 + first.iter().filter(|b| **b == b'\n').count() as u64;
        let ((mut rows, stop), later) = vev::par::join(
            || parse_lines(plan, first, 1),
            || parse_lines(plan, second, second_lineno),
        );
        match stop {
            Stop::End => {
                let (mut more, stop) = later;
                rows.append(&mut more);
                (rows, stop)
            }
            stop => (rows, stop),
        }
    } else {
        parse_lines(plan, lines, 1)
    };
    match stop {
        Stop::Failed(e) => Err(e),
        Stop::End if !unterminated.is_empty() => Err(SqlError::new(
            "22P04",
            format!("COPY {}: the last line has no newline", plan.table.name),
        )),
        Stop::End | Stop::Marker => Ok(rows),
    }
}

/// The rows of complete COPY lines (each ends in a newline), numbered from `lineno`, up to
/// the first error or end-of-data marker.
fn parse_lines(plan: &CopyPlan, bytes: &[u8], mut lineno: u64) -> (Vec<Vec<Option<Edn>>>, Stop) {
    let mut rows = Vec::with_capacity(bytes.len() / 16);
    for line in bytes.split_inclusive(|b| *b == b'\n') {
        let line = &line[..line.len() - 1];
        let parsed = std::str::from_utf8(line)
            .map_err(|_| SqlError::new("22021", format!("COPY line {lineno}: invalid UTF-8")))
            .and_then(|l| plan.parse_line(l.strip_suffix('\r').unwrap_or(l), lineno));
        match parsed {
            Ok(Some(row)) => rows.push(row),
            Ok(None) => return (rows, Stop::Marker),
            Err(e) => return (rows, Stop::Failed(e)),
        }
        lineno += 1;
    }
    (rows, Stop::End)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> CopyPlan {
        let table = crate::catalog::test_table();
        let a = table.columns.iter().position(|c| c.name == "a").unwrap();
        let b = table.columns.iter().position(|c| c.name == "b").unwrap();
        CopyPlan {
            table,
            columns: vec![a, b],
        }
    }

    /// Lines `0..n` of a COPY, `bad` (if any) not a number.
    fn text(n: usize, bad: Option<usize>) -> String {
        (0..n)
            .map(|i| match Some(i) == bad {
                true => "x\tname\n".to_string(),
                false => format!("{i}\tname {i}\\twith a tab\n"),
            })
            .collect()
    }

    fn one_pass(plan: &CopyPlan, text: &str) -> Result<Vec<Vec<Option<Edn>>>, String> {
        match parse_lines(plan, text.as_bytes(), 1) {
            (rows, Stop::End | Stop::Marker) => Ok(rows),
            (_, Stop::Failed(e)) => Err(e.to_string()),
        }
    }

    /// Data large enough to be parsed in two halves gives one pass's rows, line numbers in
    /// errors, and end-of-data marker.
    #[test]
    fn a_large_copy_parses_as_one_pass() {
        let plan = plan();
        let n = 20_000;
        let whole = text(n, None);
        assert!(whole.len() >= PARALLEL_COPY_BYTES);
        let rows = parse_copy(&plan, whole.clone().into_bytes()).unwrap();
        assert_eq!(rows.len(), n);
        assert_eq!(Ok(rows), one_pass(&plan, &whole));
        // A bad line in the second half: its own line number.
        let bad = text(n, Some(n - 10));
        let e = parse_copy(&plan, bad.clone().into_bytes()).unwrap_err();
        assert!(e.to_string().contains(&format!("line {}", n - 9)), "{e}");
        assert_eq!(Err(e.to_string()), one_pass(&plan, &bad));
        // Bad lines in both halves: the first one's error.
        let both = text(n, Some(3)) + &text(n, Some(n - 10));
        let e = parse_copy(&plan, both.into_bytes()).unwrap_err();
        assert!(e.to_string().contains("line 4,"), "{e}");
        // The end-of-data marker in the first half: what follows is not data.
        let marked = text(n, None) + "\\.\n" + &text(n, Some(5));
        assert_eq!(parse_copy(&plan, marked.into_bytes()).unwrap().len(), n);
        // A last line without its newline.
        let cut = text(n, None) + "7\tlast";
        let e = parse_copy(&plan, cut.into_bytes()).unwrap_err();
        assert!(e.to_string().contains("no newline"), "{e}");
    }
}
