//! Output formats. Every command produces either one EDN value or rows under a header; rows
//! are written as they come. `table` measures its columns on the first `TABLE_SAMPLE` rows
//! and then writes the rest as they come (a later cell wider than its column widens only its
//! own line), so a large result never waits in memory.
//!
//! - `edn`: printed as the EDN reader reads it back (one value; rows one vector a line).
//! - `json`: see `edn_to_json` (and the crate README).
//! - `csv`: RFC 4180, a header row, strings bare, other values as EDN.
//! - `table`: aligned columns for people, strings bare; control characters and backslashes
//!   escaped (`table_cell`), so one row is always one line.

use std::io::{self, Write};

use vev::Edn;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Table,
    Edn,
    Json,
    Csv,
}

impl Format {
    /// The format asked for, or `table` on a terminal and `edn` otherwise.
    pub fn resolve(asked: Option<Format>) -> Format {
        use std::io::IsTerminal;
        asked.unwrap_or(if io::stdout().is_terminal() {
            Format::Table
        } else {
            Format::Edn
        })
    }
}

/// EDN → JSON. nil, booleans, strings and `i64`s map to themselves; floats to numbers (`##NaN`,
/// `##Inf`, `##-Inf` to those strings); keywords to `":ns/name"`, symbols to their name,
/// characters to one-character strings; big integers and decimals to their EDN text
/// (`"12N"`, `"1.5M"`), so they keep every digit; `#inst` to an RFC 3339 string; `#uuid` to
/// its string; lists, vectors and sets to arrays; maps to objects (keys: see `json_keys`);
/// other tagged values to `{"#tag": value}`.
pub fn edn_to_json(edn: &Edn) -> serde_json::Value {
    use serde_json::Value as J;
    match edn {
        Edn::Nil => J::Null,
        Edn::Bool(b) => J::Bool(*b),
        Edn::String(s) => J::String(s.clone()),
        Edn::Char(c) => J::String(c.to_string()),
        Edn::Integer(n) => J::from(*n),
        Edn::Float(f) => {
            serde_json::Number::from_f64(*f).map_or_else(|| J::String(edn.to_string()), J::Number)
        }
        Edn::BigInt(_) | Edn::BigDec(_) => J::String(edn.to_string()),
        Edn::Keyword(k) => J::String(format!(":{}", k.as_str())),
        Edn::Symbol(s) => J::String(s.as_str().to_string()),
        Edn::List(items) | Edn::Vector(items) => J::Array(items.iter().map(edn_to_json).collect()),
        Edn::Set(items) => J::Array(items.iter().map(edn_to_json).collect()),
        Edn::Map(map) => J::Object(
            json_keys(map.keys())
                .into_iter()
                .zip(map.values().map(edn_to_json))
                .collect(),
        ),
        Edn::Inst(ms) => J::String(vev::edn::format_inst(*ms)),
        Edn::Uuid(u) => J::String(vev::edn::format_uuid(*u)),
        Edn::Tagged(tag, value) => {
            let mut obj = serde_json::Map::new();
            obj.insert(format!("#{}", tag.as_str()), edn_to_json(value));
            J::Object(obj)
        }
    }
}

/// The JSON keys of a map's keys, in order: strings, keywords and symbols plain (`:keys`,
/// `:strs` and `:syms` maps all give `{"name": ...}`, a pulled entity `{"person/name": ...}`),
/// anything else as its EDN text. When two keys of one map would give the same text (`"a"`
/// and `:a`), every key of that map is written as its EDN text instead (`"\"a\""`, `":a"`),
/// so no value is silently lost.
fn json_keys<'a>(keys: impl Iterator<Item = &'a Edn> + Clone) -> Vec<String> {
    let plain: Vec<String> = keys
        .clone()
        .map(|k| match k {
            Edn::String(s) => s.clone(),
            Edn::Keyword(k) => k.as_str().to_string(),
            Edn::Symbol(s) => s.as_str().to_string(),
            other => other.to_string(),
        })
        .collect();
    let distinct: std::collections::HashSet<&str> = plain.iter().map(String::as_str).collect();
    if distinct.len() == plain.len() {
        plain
    } else {
        keys.map(Edn::to_string).collect()
    }
}

/// A cell for `csv`: strings bare, everything else as EDN.
pub fn cell(edn: &Edn) -> String {
    match edn {
        Edn::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// A cell for `table`: as `cell`, with a backslash written `\\` and control characters as
/// their EDN escapes (`\n`, `\t`, `\r`, else `\uXXXX`), so a value never breaks its row
/// or its column.
pub fn table_cell(edn: &Edn) -> String {
    escape_controls(&cell(edn))
}

fn escape_controls(text: &str) -> String {
    if !text.contains(|c: char| c == '\\' || c.is_control()) {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

/// Writes rows under a header in one format.
pub struct Rows<W: Write> {
    out: W,
    format: Format,
    header: Vec<String>,
    /// `table` only: the first rows' cells, until the column widths are known.
    buffered: Vec<Vec<String>>,
    /// `table` only: the column widths, once the header is written.
    widths: Option<Vec<usize>>,
    /// `json` only: rows written so far.
    count: usize,
}

impl<W: Write> Rows<W> {
    pub fn new(out: W, format: Format, header: Vec<String>) -> io::Result<Rows<W>> {
        let mut rows = Rows {
            out,
            format,
            header,
            buffered: Vec::new(),
            widths: None,
            count: 0,
        };
        match format {
            Format::Csv => {
                let line: Vec<String> = rows.header.iter().map(|h| csv_field(h)).collect();
                writeln!(rows.out, "{}", line.join(","))?;
            }
            Format::Json => write!(rows.out, "[")?,
            Format::Table => {
                rows.header = rows.header.iter().map(|h| escape_controls(h)).collect();
            }
            Format::Edn => {}
        }
        Ok(rows)
    }

    pub fn row(&mut self, row: &[Edn]) -> io::Result<()> {
        match self.format {
            Format::Edn => writeln!(self.out, "{}", Edn::Vector(row.to_vec())),
            Format::Json => {
                let sep = if self.count == 0 { "\n" } else { ",\n" };
                self.count += 1;
                let value = serde_json::Value::Array(row.iter().map(edn_to_json).collect());
                write!(self.out, "{sep}{value}")
            }
            Format::Csv => {
                let line: Vec<String> = row.iter().map(|v| csv_field(&cell(v))).collect();
                writeln!(self.out, "{}", line.join(","))
            }
            Format::Table => {
                self.count += 1;
                let cells: Vec<String> = row.iter().map(table_cell).collect();
                match &self.widths {
                    Some(widths) => writeln!(self.out, "{}", table_line(widths, &cells)),
                    None => {
                        self.buffered.push(cells);
                        if self.buffered.len() >= TABLE_SAMPLE {
                            self.start_table()?;
                        }
                        Ok(())
                    }
                }
            }
        }
    }

    /// Measure the columns on the rows so far, write the header and those rows.
    fn start_table(&mut self) -> io::Result<()> {
        let widths = table_widths(&self.header, &self.buffered);
        writeln!(self.out, "{}", table_line(&widths, &self.header))?;
        let rule: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
        writeln!(self.out, "{}", rule.join("-+-"))?;
        for row in std::mem::take(&mut self.buffered) {
            writeln!(self.out, "{}", table_line(&widths, &row))?;
        }
        self.widths = Some(widths);
        Ok(())
    }

    pub fn finish(mut self) -> io::Result<()> {
        match self.format {
            Format::Json => writeln!(self.out, "{}]", if self.count > 0 { "\n" } else { "" })?,
            Format::Table => {
                if self.widths.is_none() {
                    self.start_table()?;
                }
                let n = self.count;
                writeln!(self.out, "({n} row{})", if n == 1 { "" } else { "s" })?;
            }
            Format::Edn | Format::Csv => {}
        }
        self.out.flush()
    }
}

fn csv_field(text: &str) -> String {
    if text.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_string()
    }
}

/// Rows a table measures its columns on before it writes anything.
const TABLE_SAMPLE: usize = 1000;

fn table_widths(header: &[String], rows: &[Vec<String>]) -> Vec<usize> {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (i, c) in row.iter().enumerate() {
            if i >= widths.len() {
                widths.push(0);
            }
            widths[i] = widths[i].max(c.chars().count());
        }
    }
    widths
}

/// Cells padded to the widths (a wider cell is written whole), ` | ` between them.
fn table_line(widths: &[usize], cells: &[String]) -> String {
    let padded: Vec<String> = widths
        .iter()
        .enumerate()
        .map(|(i, w)| {
            let c = cells.get(i).map_or("", String::as_str);
            format!("{c}{}", " ".repeat(w.saturating_sub(c.chars().count())))
        })
        .collect();
    padded.join(" | ").trim_end().to_string()
}

/// Write one EDN value in a format (`table` and `csv` show a scalar as one cell, a
/// collection of scalars as one column, a collection of rows as rows).
pub fn write_value(
    out: &mut impl Write,
    format: Format,
    header: &str,
    value: &Edn,
) -> io::Result<()> {
    match format {
        Format::Edn => writeln!(out, "{value}"),
        Format::Json => writeln!(out, "{}", edn_to_json(value)),
        Format::Table | Format::Csv => {
            let mut rows = Rows::new(&mut *out, format, vec![header.to_string()])?;
            match value {
                Edn::Vector(items) | Edn::List(items) => {
                    for item in items {
                        rows.row(std::slice::from_ref(item))?;
                    }
                }
                Edn::Set(items) => {
                    for item in items {
                        rows.row(std::slice::from_ref(item))?;
                    }
                }
                other => rows.row(std::slice::from_ref(other))?,
            }
            rows.finish()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_maps_keywords_to_strings() {
        let edn = vev::edn::parse(r#"{:person/name "Ann" "k" [1 2.5 nil :a/b] :n 12N :t #inst "2020-01-01T00:00:00.000-00:00"}"#).unwrap();
        let json = edn_to_json(&edn);
        assert_eq!(json["person/name"], "Ann");
        assert_eq!(json["k"], serde_json::json!([1, 2.5, null, ":a/b"]));
        assert_eq!(json["n"], "12N");
        assert!(json["t"]
            .as_str()
            .unwrap()
            .starts_with("2020-01-01T00:00:00"));
    }

    #[test]
    fn json_map_keys_are_plain_unless_they_collide() {
        let json = |text: &str| edn_to_json(&vev::edn::parse(text).unwrap()).to_string();
        assert_eq!(
            json(r#"{:name "Ann" :age 30}"#),
            r#"{"age":30,"name":"Ann"}"#
        );
        assert_eq!(json(r#"{name "Ann"}"#), r#"{"name":"Ann"}"#);
        assert_eq!(json(r#"{"name" "Ann"}"#), r#"{"name":"Ann"}"#);
        assert_eq!(json(r#"{1 [2] [1 2] 3}"#), r#"{"1":[2],"[1 2]":3}"#);
        // "a" and :a would both be "a": every key of that map keeps its EDN text.
        assert_eq!(json(r#"{"a" 1 :a 2}"#), r#"{"\"a\"":1,":a":2}"#);
    }

    #[test]
    fn table_cells_escape_control_characters() {
        let cell = |text: &str| table_cell(&vev::edn::parse(text).unwrap());
        assert_eq!(cell(r#""two\nlines""#), "two\\nlines");
        assert_eq!(cell(r#""a\tb\rc""#), "a\\tb\\rc");
        assert_eq!(cell(r#""back\\slash""#), "back\\\\slash");
        assert_eq!(cell(r#""bell\u0007""#), "bell\\u0007");
        assert_eq!(cell(r#""plain é""#), "plain é");
        let mut out = Vec::new();
        let mut rows = Rows::new(&mut out, Format::Table, vec!["?s".into()]).unwrap();
        rows.row(&[Edn::String("a\nb".into())]).unwrap();
        rows.finish().unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(text, "?s\n----\na\\nb\n(1 row)\n");
    }

    #[test]
    fn csv_quotes_when_needed() {
        assert_eq!(csv_field("plain"), "plain");
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
    }
}
