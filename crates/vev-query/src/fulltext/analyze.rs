//! The analyzer: text to the terms the index stores and the query looks up.
//!
//! One analyzer for documents and queries, so a query word matches exactly the documents
//! whose text holds the same word after the same folding:
//! 1. words by Unicode's word boundaries (UAX #29, `unicode-segmentation`): runs of letters,
//!    digits and the joiners inside a word (`don't`, `3.14`); punctuation and spaces separate;
//! 2. lower case (Unicode's full mapping);
//! 3. diacritics folded: canonical decomposition (NFD), then every combining mark dropped, so
//!    `Beyoncé` and `beyonce` are one term, as are `Ångström` and `angstrom`.
//!
//! A term's position is its word's ordinal in the text (0, 1, ...), which phrase queries use.
//! There is no stemming and there are no stop words: every word is a term.

use unicode_normalization::char::is_combining_mark;
use unicode_normalization::UnicodeNormalization;
use unicode_segmentation::UnicodeSegmentation;

/// Terms of `text`, in order (the position of each is its index).
pub fn terms(text: &str) -> Vec<String> {
    text.unicode_words().map(fold).collect()
}

/// Call `visit` with each term of `text` and its position, reusing one buffer.
pub fn visit_terms(text: &str, visit: &mut dyn FnMut(u32, &str)) {
    let mut buf = String::new();
    for (pos, word) in text.unicode_words().enumerate() {
        buf.clear();
        fold_into(word, &mut buf);
        visit(pos as u32, &buf);
    }
}

/// One word folded: lower case, diacritics removed.
pub fn fold(word: &str) -> String {
    let mut out = String::with_capacity(word.len());
    fold_into(word, &mut out);
    out
}

fn fold_into(word: &str, out: &mut String) {
    if word.is_ascii() {
        out.extend(word.chars().map(|c| c.to_ascii_lowercase()));
        return;
    }
    for c in word.chars().flat_map(char::to_lowercase).nfd() {
        if !is_combining_mark(c) {
            out.push(c);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_split_lowered_and_folded() {
        assert_eq!(
            terms("Beyoncé — Crazy in Love (Ångström remix), don't stop!"),
            ["beyonce", "crazy", "in", "love", "angstrom", "remix", "don't", "stop"]
        );
        assert_eq!(terms("ÉCOLE école Ecole"), ["ecole", "ecole", "ecole"]);
        assert_eq!(terms("Straße"), ["straße"]);
        assert_eq!(terms("  ,;  "), Vec::<String>::new());
        assert_eq!(terms("3.14 apples"), ["3.14", "apples"]);
    }

    #[test]
    fn visit_terms_gives_positions() {
        let mut seen = Vec::new();
        visit_terms("Hello, Wörld hello", &mut |p, t| {
            seen.push((p, t.to_owned()))
        });
        assert_eq!(
            seen,
            [
                (0, "hello".into()),
                (1, "world".into()),
                (2, "hello".into())
            ]
        );
    }
}
