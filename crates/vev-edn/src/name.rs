//! Keywords and symbols, and the EDN rules for their names.
//!
//! Both are stored as one shared `Arc<str>` holding the full text (`"db/ident"`), because
//! idents are cloned into every datom and query binding: a clone must be a reference-count
//! bump, and comparing or hashing must not re-join a namespace and a name. The namespace is
//! found on demand by splitting at the `/`.
//!
//! Constructors do not validate: [`Keyword::new`] accepts any text so that callers building
//! values in code pay nothing. The reader validates with [`is_valid_symbol`] and
//! [`is_valid_keyword`]; printing a name that would fail them produces text that does not
//! read back.

use std::fmt;
use std::sync::Arc;

/// Splits `full` into namespace and name at the first `/`, except for the bare name `/`.
fn split(full: &str) -> (Option<&str>, &str) {
    match full.find('/') {
        Some(i) if i > 0 && i + 1 < full.len() => (Some(&full[..i]), &full[i + 1..]),
        _ => (None, full),
    }
}

fn join(ns: Option<&str>, name: &str) -> Arc<str> {
    match ns {
        Some(ns) => Arc::from(format!("{ns}/{name}")),
        None => Arc::from(name),
    }
}

/// Characters allowed anywhere in a symbol or keyword (besides the one `/`).
pub(crate) fn is_constituent(c: char) -> bool {
    c.is_alphanumeric() || "*+!-_?$%&=<>.:#'".contains(c)
}

/// Characters that may begin a symbol (digits begin numbers, `:` keywords, `#` dispatch).
pub(crate) fn is_symbol_start(c: char) -> bool {
    c.is_alphabetic() || "*+!-_?$%&=<>./".contains(c)
}

/// One side of `ns/name`: non-empty, constituent characters only, beginning like a symbol,
/// `+ - .` not followed by a digit, and not ending in `:` (as Clojure's reader).
fn is_valid_part(part: &str) -> bool {
    let mut chars = part.chars();
    let Some(first) = chars.next() else {
        return false;
    };
    if !is_symbol_start(first) || first == '/' || !part.chars().all(is_constituent) {
        return false;
    }
    let looks_numeric = "+-.".contains(first) && chars.next().is_some_and(|c| c.is_ascii_digit());
    !looks_numeric && !part.ends_with(':')
}

/// Whether `text` is a valid EDN symbol: `name`, `ns/name`, or the bare `/`.
pub fn is_valid_symbol(text: &str) -> bool {
    if text == "/" {
        return true;
    }
    match text.split_once('/') {
        None => is_valid_part(text),
        Some((ns, name)) => is_valid_part(ns) && is_valid_part(name),
    }
}

/// Whether `text` (without the leading colon) is a valid EDN keyword.
pub fn is_valid_keyword(text: &str) -> bool {
    text != "/" && is_valid_symbol(text)
}

macro_rules! name_methods {
    ($ty:ident) => {
        impl $ty {
            /// Makes a name from its full text without any sigil, e.g. `"db/ident"`.
            pub fn new(full: &str) -> $ty {
                $ty(Arc::from(full))
            }

            /// Makes a name from an optional namespace and a name.
            pub fn from_parts(ns: Option<&str>, name: &str) -> $ty {
                $ty(join(ns, name))
            }

            /// The part before the `/`, if any.
            pub fn namespace(&self) -> Option<&str> {
                split(&self.0).0
            }

            /// The part after the `/` (the whole text when there is no namespace).
            pub fn name(&self) -> &str {
                split(&self.0).1
            }

            /// The full text without any sigil, e.g. `"db/ident"`.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl From<&str> for $ty {
            fn from(full: &str) -> $ty {
                $ty::new(full)
            }
        }

        /// By the full text's bytes. The first bytes decide most comparisons (the keys of
        /// one map), so they are compared inline before the general slice comparison.
        impl Ord for $ty {
            #[inline]
            fn cmp(&self, other: &$ty) -> std::cmp::Ordering {
                let (a, b) = (self.0.as_bytes(), other.0.as_bytes());
                match (a.first(), b.first()) {
                    (Some(x), Some(y)) if x != y => x.cmp(y),
                    _ => a.cmp(b),
                }
            }
        }

        impl PartialOrd for $ty {
            #[inline]
            fn partial_cmp(&self, other: &$ty) -> Option<std::cmp::Ordering> {
                Some(self.cmp(other))
            }
        }
    };
}

/// An EDN keyword such as `:db/ident`, stored without its leading colon.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Keyword(Arc<str>);

name_methods!(Keyword);

impl Keyword {
    /// Whether this is a reverse attribute reference: the name starts with `_`, as in
    /// `:person/_friend`.
    pub fn is_reverse(&self) -> bool {
        self.name().starts_with('_')
    }

    /// The other direction of an attribute: `:a/_b` becomes `:a/b` and `:a/b` becomes `:a/_b`.
    pub fn reversed(&self) -> Keyword {
        let name = self.name();
        match name.strip_prefix('_') {
            Some(forward) => Keyword::from_parts(self.namespace(), forward),
            None => Keyword::from_parts(self.namespace(), &format!("_{name}")),
        }
    }
}

impl fmt::Display for Keyword {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, ":{}", self.0)
    }
}

impl fmt::Debug for Keyword {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// An EDN symbol such as `?e` or `my.ns/fn`.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Symbol(Arc<str>);

name_methods!(Symbol);

impl fmt::Display for Symbol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for Symbol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Names order as their full texts do (the inline first-byte comparison agrees).
        #[test]
        fn names_order_as_their_text(a in "[a-c/é]{0,4}", b in "[a-c/é]{0,4}") {
            let want = a.cmp(&b);
            prop_assert_eq!(Keyword::new(&a).cmp(&Keyword::new(&b)), want);
            prop_assert_eq!(Symbol::new(&a).partial_cmp(&Symbol::new(&b)), Some(want));
        }
    }

    #[test]
    fn keyword_parts() {
        let k = Keyword::new("db/ident");
        assert_eq!(k.namespace(), Some("db"));
        assert_eq!(k.name(), "ident");
        assert_eq!(k.as_str(), "db/ident");
        assert_eq!(k.to_string(), ":db/ident");
        assert_eq!(format!("{k:?}"), ":db/ident");
        let plain = Keyword::new("name");
        assert_eq!(plain.namespace(), None);
        assert_eq!(plain.name(), "name");
        assert_eq!(
            Keyword::from_parts(Some("a.b"), "c-d?"),
            Keyword::new("a.b/c-d?")
        );
        assert_eq!(Keyword::from_parts(None, "x"), Keyword::new("x"));
    }

    #[test]
    fn keyword_reverse() {
        let fwd = Keyword::new("person/friend");
        let rev = Keyword::new("person/_friend");
        assert!(!fwd.is_reverse());
        assert!(rev.is_reverse());
        assert_eq!(fwd.reversed(), rev);
        assert_eq!(rev.reversed(), fwd);
    }

    #[test]
    fn symbol_parts() {
        let s = Symbol::new("clojure.core/inc");
        assert_eq!(s.namespace(), Some("clojure.core"));
        assert_eq!(s.name(), "inc");
        assert_eq!(s.to_string(), "clojure.core/inc");
        let slash = Symbol::new("/");
        assert_eq!(slash.namespace(), None);
        assert_eq!(slash.name(), "/");
        assert_eq!(Symbol::from_parts(Some("a"), "b").as_str(), "a/b");
    }

    #[test]
    fn symbol_rules() {
        for ok in [
            "a", "?e", "/", "a/b", "a.b/c-d?", "+", "-", ".", "-a", "+.5", "a#", "a:b", "a'",
            "<=>", "é", "$x", "...",
        ] {
            assert!(is_valid_symbol(ok), "{ok} should be valid");
        }
        for bad in [
            "", "1a", "-1", "+1", ".5", "a/", "/a", "a/b/c", "a//", "#a", ":a", "a:", "a b", "a@b",
            "'a", "a/1",
        ] {
            assert!(!is_valid_symbol(bad), "{bad} should be invalid");
        }
    }

    #[test]
    fn keyword_rules() {
        for ok in ["a", "a/b", "a.b/c-d?", "person/_friend", "-"] {
            assert!(is_valid_keyword(ok), "{ok} should be valid");
        }
        for bad in ["", ":a", "/", "a/", "1", "a/b/c"] {
            assert!(!is_valid_keyword(bad), "{bad} should be invalid");
        }
    }
}
