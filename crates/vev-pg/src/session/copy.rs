//! COPY FROM STDIN: the data a client sends, parsed line by line, written at CopyDone.

use vev::{Edn, TxOp};

use super::{now_ms, Copying, Outcome, Session, Touch};
use crate::catalog::Table;
use crate::error::SqlError;
use crate::sql;

impl Session {
    /// Feed COPY data (any split of the text into messages).
    pub fn copy_data(&mut self, data: &[u8]) {
        let Some(c) = &mut self.copying else { return };
        if c.error.is_some() || c.done {
            return;
        }
        c.partial.extend_from_slice(data);
        let mut start = 0;
        while let Some(nl) = c.partial[start..].iter().position(|b| *b == b'\n') {
            let line = &c.partial[start..start + nl];
            start += nl + 1;
            c.lines += 1;
            let parsed = std::str::from_utf8(line)
                .map_err(|_| {
                    SqlError::new("22021", format!("COPY line {}: invalid UTF-8", c.lines))
                })
                .and_then(|l| {
                    c.plan
                        .parse_line(l.strip_suffix('\r').unwrap_or(l), c.lines)
                });
            match parsed {
                Ok(Some(row)) => c.rows.push(row),
                Ok(None) => {
                    c.done = true;
                    break;
                }
                Err(e) => {
                    c.error = Some(e);
                    break;
                }
            }
        }
        c.partial.drain(..start);
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

    async fn copy_rows(&mut self, mut c: Copying) -> Result<Outcome, SqlError> {
        if let Some(e) = c.error.take() {
            return Err(e);
        }
        if !c.partial.is_empty() && !c.done {
            return Err(SqlError::new(
                "22P04",
                format!("COPY {}: the last line has no newline", c.plan.table.name),
            ));
        }
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
            for values in &mut c.rows {
                for &i in &left_out {
                    values[i] = sql::write::default_value(table, i, &ctx, &next)?;
                }
            }
        }
        let n = c.rows.len();
        let mut ops = Vec::with_capacity(n + 1);
        let mut keys: Vec<Vec<Edn>> = vec![Vec::new(); table.primary_key.len()];
        // Each row's text values go as soon as its operation is made: a large COPY would
        // otherwise hold them all until the end of the transaction.
        for values in std::mem::take(&mut c.rows) {
            sql::write::collect_keys(table, &values, &mut keys);
            ops.push(TxOp::Map(sql::write::row_map(
                table,
                values,
                &mut self.next_row,
            )?));
        }
        ops.extend(sql::write::key_guards(table, keys));
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
