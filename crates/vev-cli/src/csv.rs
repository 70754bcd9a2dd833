//! A reader of RFC 4180 CSV that keeps where each field starts, so that import errors name
//! the line and column. Quoted fields may hold commas, doubled quotes and line breaks; lines
//! end in LF or CRLF; blank lines are skipped.

use crate::error::InputErrorKind;

/// A field and the 1-based column (in characters) it starts at.
#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    pub text: String,
    pub column: usize,
}

/// One row: the 1-based line it starts on, and its fields.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    pub line: usize,
    pub fields: Vec<Field>,
}

/// An error at a 1-based line and column.
pub type CsvError = (usize, usize, InputErrorKind);

pub fn records(text: &str) -> Result<Vec<Record>, CsvError> {
    let mut out = Vec::new();
    let mut chars = text.chars().peekable();
    let (mut line, mut column) = (1usize, 1usize);
    let mut record = Record {
        line,
        fields: Vec::new(),
    };
    let mut field = Field {
        text: String::new(),
        column,
    };
    let mut at_field_start = true;
    while let Some(c) = chars.next() {
        match c {
            '"' if at_field_start => {
                let (start_line, start_column) = (line, column);
                column += 1;
                loop {
                    match chars.next() {
                        None => {
                            return Err((start_line, start_column, InputErrorKind::UnclosedQuote))
                        }
                        Some('"') if chars.peek() == Some(&'"') => {
                            chars.next();
                            column += 2;
                            field.text.push('"');
                        }
                        Some('"') => {
                            column += 1;
                            break;
                        }
                        Some('\n') => {
                            line += 1;
                            column = 1;
                            field.text.push('\n');
                        }
                        Some(other) => {
                            column += 1;
                            field.text.push(other);
                        }
                    }
                }
                match chars.peek() {
                    None | Some(',') | Some('\n') | Some('\r') => {}
                    Some(&found) => {
                        return Err((line, column, InputErrorKind::TextAfterQuote { found }))
                    }
                }
                at_field_start = false;
            }
            ',' => {
                column += 1;
                record.fields.push(std::mem::replace(
                    &mut field,
                    Field {
                        text: String::new(),
                        column,
                    },
                ));
                at_field_start = true;
            }
            '\r' if chars.peek() == Some(&'\n') => {}
            '\n' => {
                end_record(&mut out, &mut record, &mut field, line + 1);
                line += 1;
                column = 1;
                at_field_start = true;
            }
            other => {
                column += 1;
                field.text.push(other);
                at_field_start = false;
            }
        }
    }
    end_record(&mut out, &mut record, &mut field, line);
    Ok(out)
}

/// Close the record in progress (a blank line is no record) and start the next at `next_line`.
fn end_record(out: &mut Vec<Record>, record: &mut Record, field: &mut Field, next_line: usize) {
    let blank = record.fields.is_empty() && field.text.is_empty() && field.column == 1;
    let last = std::mem::replace(
        field,
        Field {
            text: String::new(),
            column: 1,
        },
    );
    let done = std::mem::replace(
        record,
        Record {
            line: next_line,
            fields: Vec::new(),
        },
    );
    if !blank {
        let mut done = done;
        done.fields.push(last);
        out.push(done);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(r: &Record) -> Vec<&str> {
        r.fields.iter().map(|f| f.text.as_str()).collect()
    }

    #[test]
    fn quoted_fields_commas_quotes_and_line_breaks() {
        let rs = records("a,b\r\n\"x, \"\"y\"\"\",2\n\n\"multi\nline\",3\nlast,").unwrap();
        assert_eq!(rs.len(), 4);
        assert_eq!(texts(&rs[0]), ["a", "b"]);
        assert_eq!(texts(&rs[1]), ["x, \"y\"", "2"]);
        assert_eq!(rs[1].line, 2);
        assert_eq!(rs[1].fields[1].column, 12);
        assert_eq!(texts(&rs[2]), ["multi\nline", "3"]);
        assert_eq!(rs[2].line, 4);
        assert_eq!(texts(&rs[3]), ["last", ""]);
        assert_eq!(rs[3].line, 6);
    }

    #[test]
    fn errors_point_at_the_quote() {
        assert_eq!(
            records("a\n\"open").unwrap_err(),
            (2, 1, InputErrorKind::UnclosedQuote)
        );
        assert_eq!(
            records("\"a\"b").unwrap_err(),
            (1, 4, InputErrorKind::TextAfterQuote { found: 'b' })
        );
    }
}
