//! Random databases and queries for the query oracles: `query_oracle.rs` (optimized plan vs
//! naive plan vs the `VecSource` reference) and `query_datascript.rs` (Vev vs DataScript).
//!
//! Both are generated from a *choice tape*: a list of `u32`s the generator reads one choice
//! at a time (`tape[i] % n`), reading 0 once the tape runs out. Choice 0 is always the simplest
//! option (fewest entities and clauses, no optional feature), so when proptest shrinks a
//! failing tape towards fewer and smaller numbers, the failure shrinks to a small database and
//! a short query. The DataScript test makes its tapes from fixed seeds instead.
//!
//! The data (`db.rs`): five attributes (`:name` string, `:age` long, `:kind` keyword, all
//! cardinality-one; `:tag` long and `:follows` ref, cardinality-many) over 5 to 40 entities,
//! written in 1 to 4 transactions with card-one replacements and retractions, so that as-of
//! and history views differ from the current one.
//!
//! The queries (`query.rs`): typed, so that comparisons only ever see values of one type, and
//! valid by construction: every variable a predicate, function, `not` or `:find` reads is bound
//! by a pattern, an input, an `or`, a rule call or a function.

// Two test binaries include this module, and each uses a part of it.
#![allow(dead_code, unused_imports)]

mod db;
mod query;

pub use db::{build, build_from_texts, Built, DbSpec};
pub use query::{Dialect, FindElem, InputForm, InputSpec, QuerySpec, Shape, RULES};

/// Choices for a generator: `pick(n)` is the next number modulo `n`, 0 once the tape ends.
pub struct Tape<'a> {
    choices: &'a [u32],
    next: usize,
}

impl<'a> Tape<'a> {
    pub fn new(choices: &'a [u32]) -> Tape<'a> {
        Tape { choices, next: 0 }
    }

    /// A number in `0..n` (`n > 0`).
    pub fn pick(&mut self, n: usize) -> usize {
        let choice = self.choices.get(self.next).copied().unwrap_or(0);
        self.next += 1;
        choice as usize % n
    }

    /// True about `percent` times in 100; false once the tape ends.
    pub fn chance(&mut self, percent: usize) -> bool {
        self.pick(100) >= 100 - percent
    }

    pub fn item<T: Clone>(&mut self, items: &[T]) -> T {
        items[self.pick(items.len())].clone()
    }
}

/// A tape of `len` choices from `seed` (SplitMix64), for deterministic generation.
pub fn seeded_tape(seed: u64, len: usize) -> Vec<u32> {
    let mut state = seed;
    (0..len)
        .map(|_| {
            state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            ((z ^ (z >> 31)) >> 32) as u32
        })
        .collect()
}

/// The schema every generated database starts with.
pub const SCHEMA: &str = r#"[
  {:db/ident :name    :db/valueType :db.type/string  :db/cardinality :db.cardinality/one}
  {:db/ident :age     :db/valueType :db.type/long    :db/cardinality :db.cardinality/one}
  {:db/ident :tag     :db/valueType :db.type/long    :db/cardinality :db.cardinality/many}
  {:db/ident :follows :db/valueType :db.type/ref     :db/cardinality :db.cardinality/many}
  {:db/ident :kind    :db/valueType :db.type/keyword :db/cardinality :db.cardinality/one}]"#;

/// The same schema for DataScript (which only needs refs and cardinality-many declared).
pub const DATASCRIPT_SCHEMA: &str = "{:tag {:db/cardinality :db.cardinality/many} \
     :follows {:db/valueType :db.type/ref :db/cardinality :db.cardinality/many}}";

/// Value pools: small, so that joins and constants hit often. Names and kinds never share
/// a spelling, since DataScript's JS API returns keywords as bare name strings.
pub const NAMES: [&str; 5] = ["Ann", "Bob", "Cid", "Dee", "Eve"];
pub const KINDS: [&str; 3] = ["blue", "green", "red"];
pub const AGES: usize = 10;
pub const TAGS: usize = 6;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Attr {
    Name,
    Age,
    Tag,
    Follows,
    Kind,
}

impl Attr {
    pub const ALL: [Attr; 5] = [Attr::Name, Attr::Age, Attr::Tag, Attr::Follows, Attr::Kind];

    pub fn ident(self) -> &'static str {
        match self {
            Attr::Name => "name",
            Attr::Age => "age",
            Attr::Tag => "tag",
            Attr::Follows => "follows",
            Attr::Kind => "kind",
        }
    }

    pub fn by_ident(ident: &str) -> Option<Attr> {
        Attr::ALL.into_iter().find(|a| a.ident() == ident)
    }

    pub fn ty(self) -> Ty {
        match self {
            Attr::Name => Ty::Str,
            Attr::Age | Attr::Tag => Ty::Long,
            Attr::Follows => Ty::Ent,
            Attr::Kind => Ty::Kw,
        }
    }

    pub fn many(self) -> bool {
        matches!(self, Attr::Tag | Attr::Follows)
    }

    /// The attributes whose values have type `ty`.
    pub fn of_type(ty: Ty) -> Vec<Attr> {
        Attr::ALL.into_iter().filter(|a| a.ty() == ty).collect()
    }
}

/// The type of a query variable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ty {
    Ent,
    Str,
    Long,
    Kw,
    /// A transaction id (a pattern's fourth position).
    Tx,
    /// A pattern's fifth position: asserted or retracted.
    Bool,
    /// Any type: an attribute variable and the values it matches.
    Any,
}

/// A constant, with entities as indexes into the generated entities (each engine has its own
/// ids for them).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Val {
    Str(&'static str),
    Long(i64),
    Kw(&'static str),
    Ent(usize),
    Bool(bool),
}

impl Val {
    /// A random value of `attr` (entities among `entities`).
    pub fn of_attr(tape: &mut Tape<'_>, attr: Attr, entities: &[usize]) -> Val {
        match attr {
            Attr::Name => Val::Str(tape.item(&NAMES)),
            Attr::Age => Val::Long(tape.pick(AGES) as i64),
            Attr::Tag => Val::Long(tape.pick(TAGS) as i64),
            Attr::Kind => Val::Kw(tape.item(&KINDS)),
            Attr::Follows => Val::Ent(tape.item(entities)),
        }
    }

    /// EDN for the value; entity `i` is `ids[i]`.
    pub fn render(&self, ids: &[u64]) -> String {
        match self {
            Val::Str(s) => format!("{s:?}"),
            Val::Long(n) => n.to_string(),
            Val::Kw(k) => format!(":{k}"),
            Val::Ent(i) => ids[*i].to_string(),
            Val::Bool(b) => b.to_string(),
        }
    }
}
