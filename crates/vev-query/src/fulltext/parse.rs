//! The query text grammar (`docs/fulltext.md`):
//!
//! ```text
//! query  := group ("OR" group)*
//! group  := clause+                  all of its clauses (AND)
//! clause := "-"? atom                "-": documents matching the atom are left out
//! atom   := word | word "*" | '"' text '"'
//! ```
//!
//! Words are separated by white space; `OR` (upper case, on its own) separates groups, which
//! a document needs to match one of. Every word goes through the document analyzer: a word
//! that folds to several terms (`e-mail`) is a phrase; one that folds to none (`,`) is
//! dropped. A `word*` matches any term that starts with the folded word.

use super::analyze;
use super::FulltextError;

/// A parsed query: documents matching any group.
#[derive(Clone, Debug, PartialEq)]
pub struct FtQuery {
    /// The alternatives (`OR`); never empty.
    pub groups: Vec<Group>,
}

/// Clauses a document must all match, and atoms it must match none of.
#[derive(Clone, Debug, PartialEq)]
pub struct Group {
    /// Atoms the document must match; never empty.
    pub must: Vec<Atom>,
    /// Atoms the document must not match.
    pub not: Vec<Atom>,
}

/// One thing to look for, in analyzed terms.
#[derive(Clone, Debug, PartialEq)]
pub enum Atom {
    /// A term.
    Term(String),
    /// Any term starting with this (folded) text.
    Prefix(String),
    /// These terms at consecutive positions (at least two).
    Phrase(Vec<String>),
}

/// Queries longer than this (in characters) are refused.
pub const QUERY_CHARS_MAX: usize = 10_000;

enum Raw {
    Or,
    Clause {
        negated: bool,
        kind: RawKind,
        text: String,
    },
}

#[derive(PartialEq)]
enum RawKind {
    Word,
    Prefix,
    Phrase,
}

impl FtQuery {
    /// Parse query text.
    pub fn parse(text: &str) -> Result<FtQuery, FulltextError> {
        let invalid = |position: usize, reason: &str| FulltextError::InvalidQuery {
            query: text.to_owned(),
            position,
            reason: reason.to_owned(),
        };
        if text.chars().count() > QUERY_CHARS_MAX {
            return Err(invalid(
                QUERY_CHARS_MAX,
                &format!("the query is longer than {QUERY_CHARS_MAX} characters"),
            ));
        }
        let tokens = lex(text).map_err(|(p, r)| invalid(p, r))?;
        let mut groups: Vec<Group> = Vec::new();
        let mut current = Group {
            must: Vec::new(),
            not: Vec::new(),
        };
        let mut clauses_in_group = 0;
        let mut group_start = 0;
        let mut prev_or: Option<usize> = None;
        for (pos, tok) in tokens.iter().map(|(p, t)| (*p, t)) {
            match tok {
                Raw::Or => {
                    if clauses_in_group == 0 {
                        return Err(invalid(pos, "OR needs words on both sides"));
                    }
                    close_group(&mut groups, &mut current, group_start)
                        .map_err(|(p, r)| invalid(p, r))?;
                    clauses_in_group = 0;
                    prev_or = Some(pos);
                }
                Raw::Clause {
                    negated,
                    kind,
                    text: raw,
                } => {
                    if clauses_in_group == 0 {
                        group_start = pos;
                    }
                    clauses_in_group += 1;
                    prev_or = None;
                    let atom = analyze_atom(kind, raw).map_err(|r| invalid(pos, r))?;
                    match (atom, negated) {
                        (None, _) => {}
                        (Some(a), false) => current.must.push(a),
                        (Some(a), true) => current.not.push(a),
                    }
                }
            }
        }
        if let Some(pos) = prev_or {
            return Err(invalid(pos, "OR needs words on both sides"));
        }
        close_group(&mut groups, &mut current, group_start).map_err(|(p, r)| invalid(p, r))?;
        if groups.is_empty() {
            return Err(invalid(0, "the query has no words to search for"));
        }
        Ok(FtQuery { groups })
    }

    /// Every positive atom of every group (the atoms that can contribute to a score).
    pub fn positive_atoms(&self) -> impl Iterator<Item = &Atom> {
        self.groups.iter().flat_map(|g| g.must.iter())
    }
}

fn close_group(
    groups: &mut Vec<Group>,
    current: &mut Group,
    start: usize,
) -> Result<(), (usize, &'static str)> {
    let group = std::mem::replace(
        current,
        Group {
            must: Vec::new(),
            not: Vec::new(),
        },
    );
    if group.must.is_empty() {
        if !group.not.is_empty() {
            return Err((
                start,
                "a group of only excluded words matches nothing: add a word to search for",
            ));
        }
        return Ok(());
    }
    groups.push(group);
    Ok(())
}

fn analyze_atom(kind: &RawKind, raw: &str) -> Result<Option<Atom>, &'static str> {
    let mut terms = analyze::terms(raw);
    match kind {
        RawKind::Prefix => match terms.len() {
            1 => Ok(terms.pop().map(Atom::Prefix)),
            _ => Err("a prefix (word*) must be one word"),
        },
        RawKind::Phrase if raw.trim().is_empty() => Err("the phrase is empty"),
        RawKind::Word | RawKind::Phrase => Ok(match terms.len() {
            0 => None,
            1 => terms.pop().map(Atom::Term),
            _ => Some(Atom::Phrase(terms)),
        }),
    }
}

/// The query's tokens with their character positions.
fn lex(text: &str) -> Result<Vec<(usize, Raw)>, (usize, &'static str)> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        if chars[i].is_whitespace() {
            i += 1;
            continue;
        }
        let start = i;
        let negated = chars[i] == '-';
        if negated {
            i += 1;
            if i == chars.len() || chars[i].is_whitespace() {
                return Err((start, "'-' must be followed by what to exclude"));
            }
        }
        if chars[i] == '"' {
            let open = i;
            let Some(close) = chars[open + 1..].iter().position(|c| *c == '"') else {
                return Err((open, "the quote is not closed"));
            };
            let close = open + 1 + close;
            let phrase: String = chars[open + 1..close].iter().collect();
            i = close + 1;
            if i < chars.len() && !chars[i].is_whitespace() {
                return Err((i, "a closing quote must be followed by a space"));
            }
            out.push((
                start,
                Raw::Clause {
                    negated,
                    kind: RawKind::Phrase,
                    text: phrase,
                },
            ));
            continue;
        }
        let word_start = i;
        while i < chars.len() && !chars[i].is_whitespace() && chars[i] != '"' {
            i += 1;
        }
        if i < chars.len() && chars[i] == '"' {
            return Err((i, "a quote must start a phrase, after a space"));
        }
        let word: String = chars[word_start..i].iter().collect();
        if word == "OR" && !negated {
            out.push((start, Raw::Or));
            continue;
        }
        let (kind, body) = match word.strip_suffix('*') {
            Some(body) => (RawKind::Prefix, body),
            None => (RawKind::Word, word.as_str()),
        };
        if let Some(star) = body.find('*') {
            let at = word_start + body[..star].chars().count();
            return Err((at, "'*' may only end a word (prefix search)"));
        }
        if kind == RawKind::Prefix && body.is_empty() {
            return Err((i - 1, "'*' must follow the start of a word"));
        }
        out.push((
            start,
            Raw::Clause {
                negated,
                kind,
                text: body.to_owned(),
            },
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> Atom {
        Atom::Term(s.into())
    }

    #[test]
    fn terms_phrases_prefixes_or_and_exclusion() {
        let q = FtQuery::parse(r#"Love "crazy in" beyonc* -Remix OR always"#).unwrap();
        assert_eq!(
            q.groups,
            [
                Group {
                    must: vec![
                        t("love"),
                        Atom::Phrase(vec!["crazy".into(), "in".into()]),
                        Atom::Prefix("beyonc".into())
                    ],
                    not: vec![t("remix")],
                },
                Group {
                    must: vec![t("always")],
                    not: vec![],
                }
            ]
        );
        // A word that folds to several terms is a phrase; punctuation is dropped.
        let q = FtQuery::parse("e-mail ,").unwrap();
        assert_eq!(
            q.groups[0].must,
            [Atom::Phrase(vec!["e".into(), "mail".into()])]
        );
        // Lower-case "or" is a word; so is "OR" inside a phrase.
        assert_eq!(FtQuery::parse("this or that").unwrap().groups.len(), 1);
        assert_eq!(FtQuery::parse("\"this OR that\"").unwrap().groups.len(), 1);
    }

    #[test]
    fn malformed_queries_name_the_position() {
        let cases = [
            ("", 0),
            ("   ", 0),
            ("OR love", 0),
            ("love OR", 5),
            ("love OR OR hate", 8),
            ("\"crazy in", 0),
            ("love \"\"", 5),
            ("lo*ve", 2),
            ("*", 0),
            ("love -", 5),
            ("-hate", 0),
            ("love OR -hate", 8),
            ("ab\"c\"", 2),
            ("\"ab\"c", 4),
            ("e-mail*", 0),
            (",,,", 0),
        ];
        for (text, pos) in cases {
            match FtQuery::parse(text) {
                Err(FulltextError::InvalidQuery { position, .. }) => {
                    assert_eq!(position, pos, "{text:?}")
                }
                other => panic!("{text:?} gave {other:?}"),
            }
        }
        let long = "a ".repeat(QUERY_CHARS_MAX);
        assert!(FtQuery::parse(&long).is_err());
    }
}
