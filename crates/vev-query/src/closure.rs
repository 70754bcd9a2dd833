//! Whole relations of linear rules, computed over interned values: the common shape of a
//! recursive query (`follows`, `ancestor`, `reachable`: a transitive closure).
//!
//! A top-level rule call that binds nothing asks for the whole relation of its rule, and so
//! for the whole relations of every rule it reaches. When each branch of those rules calls at
//! most one rule, and not from inside `not` or `or`, the fixpoint needs none of the general
//! machinery in `rules`: a branch's other clauses (its *base*) do not change from round to
//! round, so they are evaluated once, and each round joins every base with the answers its
//! call found in the round before (semi-naive: with one rule call per branch, every new
//! answer comes from exactly one new answer of the call, so each is derived once). The
//! answers only ever recombine values the bases hold, so those values are interned once, to
//! words, and the rounds hash and compare words: no `Value` is cloned, hashed, compared or
//! dropped per derived answer, and a round costs what its new answers cost.
//!
//! In detail: branches whose bases are the same patterns up to the names of their variables
//! (as a closure's two branches are) share one evaluation; each base row's part of the head
//! is packed once (rows of at most two words in a `u64`, else a `u128`) and grouped by the
//! values it joins the call on (a one-word key through an array indexed by the word, since
//! words are dense); each round ORs a new answer's part into its group's parts and adds the
//! rows to open-addressing tables. Calls with at most four arguments qualify.
//!
//! Everything else goes to `rules`' general evaluation: calls that bind arguments, constants
//! or sources as arguments of inner calls, required-binding heads, rule calls inside
//! `not`/`or`, the naive plan (the reference the differential tests compare this with), and
//! any base whose evaluation fails (the general evaluation then reports the error where it
//! belongs).

use std::borrow::Cow;
use std::collections::HashMap;

use vev_core::Value;
use vev_edn::Symbol;

use crate::compile::{CArg, CClause, CTerm};
use crate::error::QueryError;
use crate::exec::{Ctx, Env};
use crate::rel::{Rel, VarId};
use crate::rules::{CRule, RuleCtx};

/// An interned value: its position in `Interner::values`.
type Word = u32;

type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// The relation of a call `(name args...)` that binds nothing, over the call's variables
/// (first occurrences, in argument order), or `None` when the rules it reaches are not of
/// the shape this module evaluates.
pub(crate) fn whole_relation(
    ctx: &Ctx<'_>,
    src: Option<usize>,
    name: &Symbol,
    args: &[CArg],
) -> Result<Option<Rel>, QueryError> {
    if ctx.limits.naive
        || args
            .iter()
            .any(|a| matches!(a, CArg::Const(_) | CArg::Src(_)))
    {
        return Ok(None);
    }
    let Some(keys) = reached(ctx, src, name) else {
        return Ok(None);
    };
    // Rows of at most two words fit a `u64`: half the memory of a `u128` for every table.
    let widest = keys
        .iter()
        .filter_map(|(rule, _)| ctx.rules.arity(rule))
        .max()
        .unwrap_or(0);
    if widest <= 2 {
        evaluate::<u64>(ctx, &keys, args)
    } else if widest <= 4 {
        evaluate::<u128>(ctx, &keys, args)
    } else {
        Ok(None)
    }
}

fn evaluate<K: Packed>(
    ctx: &Ctx<'_>,
    keys: &[(&Symbol, Option<usize>)],
    args: &[CArg],
) -> Result<Option<Rel>, QueryError> {
    let Some(program) = Program::<K>::compile(ctx, keys)? else {
        return Ok(None);
    };
    let Program {
        mut tables,
        branches,
        interner,
    } = program;
    run(ctx, &mut tables, &branches)?;
    Ok(Some(answers(&tables[0], &interner, args)))
}

/// The (rule, source) pairs a call of `name` reaches, the called one first; `None` if any
/// rule is unknown or not linear (see the module doc).
fn reached<'r>(
    ctx: &Ctx<'r>,
    src: Option<usize>,
    name: &'r Symbol,
) -> Option<Vec<(&'r Symbol, Option<usize>)>> {
    let mut keys: Vec<(&Symbol, Option<usize>)> = vec![(name, src)];
    let mut at = 0;
    while at < keys.len() {
        let (rule, rule_src) = keys[at];
        at += 1;
        for b in ctx.rules.branches(rule)? {
            if b.nested_calls || b.required > 0 {
                return None;
            }
            let mut calls = b.clauses.iter().filter_map(|c| match c {
                CClause::Rule {
                    src, name, args, ..
                } => Some((src, name, args)),
                _ => None,
            });
            let Some((call_src, callee, call_args)) = calls.next() else {
                continue;
            };
            // (A call of the wrong arity is the general evaluation's error to report.)
            if calls.next().is_some()
                || ctx.rules.arity(callee) != Some(call_args.len())
                || call_args
                    .iter()
                    .any(|a| matches!(a, CArg::Const(_) | CArg::Src(_)))
            {
                return None;
            }
            let key = (callee, call_src.or(rule_src));
            if !keys.contains(&key) {
                keys.push(key);
            }
        }
    }
    Some(keys)
}

/// A row of words packed into one integer, word `p` in bits `32 p..32 (p + 1)`: `u64` for
/// rules of at most two arguments, `u128` for at most four.
trait Packed: Copy + Eq + std::fmt::Debug + std::ops::BitOr<Output = Self> {
    const ZERO: Self;
    /// Words at the given positions, the other positions zero.
    fn place(words: impl Iterator<Item = (Word, usize)>) -> Self;
    fn word(self, p: usize) -> Word;
    /// The row plus one (no row is the maximum: see `PackedMap`).
    fn succ(self) -> Self;
    fn pred(self) -> Self;
    /// The row's hash: its bits through MurmurHash3's final avalanche, which spreads every
    /// input bit over the low bits the table's slots are chosen by.
    fn hash(self) -> u64;
    /// Words in positions 0, 1, ...
    fn pack(words: impl Iterator<Item = Word>) -> Self;
}

#[inline]
fn fmix64(mut h: u64) -> u64 {
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

/// `Packed` for an unsigned integer type, whose bits `fold` brings down to 64 for the hash.
macro_rules! packed {
    ($t:ty, $fold:expr) => {
        impl Packed for $t {
            const ZERO: $t = 0;
            #[inline]
            fn pack(words: impl Iterator<Item = Word>) -> $t {
                let mut row = 0;
                for (p, w) in words.enumerate() {
                    row |= <$t>::from(w) << (32 * p);
                }
                row
            }
            #[inline]
            fn place(words: impl Iterator<Item = (Word, usize)>) -> $t {
                let mut row = 0;
                for (w, p) in words {
                    row |= <$t>::from(w) << (32 * p);
                }
                row
            }
            #[inline]
            fn word(self, p: usize) -> Word {
                (self >> (32 * p)) as Word
            }
            #[inline]
            fn succ(self) -> $t {
                self + 1
            }
            #[inline]
            fn pred(self) -> $t {
                self - 1
            }
            #[inline]
            fn hash(self) -> u64 {
                fmix64($fold(self))
            }
        }
    };
}

packed!(u64, |row: u64| row);
packed!(u128, |row: u128| (row as u64)
    ^ ((row >> 64) as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));

/// A hash map from packed rows to `V`, open addressing with linear probing. Rows are what
/// every round of the fixpoint looks up and adds, so the probe is a few instructions: hash,
/// mask, compare, no indirection. A slot holds its row plus one, so that zero (what a fresh
/// zeroed table holds) means empty: no row is the integer's maximum, since its words would
/// all be `Word::MAX`, which `Interner` never hands out.
struct PackedMap<K, V> {
    slots: Vec<K>,
    values: Vec<V>,
    len: usize,
    mask: usize,
}

impl<K: Packed, V: Copy + Default> PackedMap<K, V> {
    fn with_capacity(n: usize) -> PackedMap<K, V> {
        // At most half full.
        let slots = (n.max(8) * 2).next_power_of_two();
        PackedMap {
            slots: vec![K::ZERO; slots],
            values: vec![V::default(); slots],
            len: 0,
            mask: slots - 1,
        }
    }

    /// The value of `key`, if present.
    #[inline]
    fn get(&self, key: K) -> Option<V> {
        let stored = key.succ();
        let mut i = key.hash() as usize & self.mask;
        loop {
            let s = self.slots[i];
            if s == stored {
                return Some(self.values[i]);
            }
            if s == K::ZERO {
                return None;
            }
            i = (i + 1) & self.mask;
        }
    }

    /// Add `key` with `value` unless present; the value it has then, and whether it is new.
    #[inline]
    fn insert(&mut self, key: K, value: V) -> (V, bool) {
        if (self.len + 1) * 2 > self.slots.len() {
            self.grow();
        }
        let stored = key.succ();
        let mut i = key.hash() as usize & self.mask;
        loop {
            let s = self.slots[i];
            if s == stored {
                return (self.values[i], false);
            }
            if s == K::ZERO {
                self.slots[i] = stored;
                self.values[i] = value;
                self.len += 1;
                return (value, true);
            }
            i = (i + 1) & self.mask;
        }
    }

    /// Change the value of `key`, which is present.
    fn set(&mut self, key: K, value: V) {
        let stored = key.succ();
        let mut i = key.hash() as usize & self.mask;
        while self.slots[i] != stored {
            i = (i + 1) & self.mask;
        }
        self.values[i] = value;
    }

    /// Visit every present key's value, in slot order.
    fn for_each_value(&mut self, mut f: impl FnMut(&mut V)) {
        for (s, v) in self.slots.iter().zip(self.values.iter_mut()) {
            if *s != K::ZERO {
                f(v);
            }
        }
    }

    #[cold]
    fn grow(&mut self) {
        let n = self.slots.len() * 2;
        let slots = std::mem::replace(&mut self.slots, vec![K::ZERO; n]);
        let values = std::mem::replace(&mut self.values, vec![V::default(); n]);
        self.mask = n - 1;
        for (s, v) in slots.into_iter().zip(values) {
            if s != K::ZERO {
                let mut i = s.pred().hash() as usize & self.mask;
                while self.slots[i] != K::ZERO {
                    i = (i + 1) & self.mask;
                }
                self.slots[i] = s;
                self.values[i] = v;
            }
        }
    }
}

/// One rule (of one source) as a table of answers: packed rows, deduplicated, in the order
/// found; `old_end..delta_end` are the rows the last round found.
struct Table<K> {
    rows: Vec<K>,
    set: PackedMap<K, ()>,
    old_end: usize,
    delta_end: usize,
}

impl<K: Packed> Table<K> {
    fn with_capacity(n: usize) -> Table<K> {
        Table {
            rows: Vec::with_capacity(n),
            set: PackedMap::with_capacity(n),
            old_end: 0,
            delta_end: 0,
        }
    }

    /// Add `row` unless present.
    #[inline]
    fn insert(&mut self, row: K) {
        if self.set.insert(row, ()).1 {
            self.rows.push(row);
        }
    }

    /// Start a round: the rows found in the last one become the delta. Whether there are any.
    fn advance(&mut self) -> bool {
        self.old_end = self.delta_end;
        self.delta_end = self.rows.len();
        self.delta_end > self.old_end
    }
}

/// One rule branch, laid out for the rounds: each base row's contribution to the head (the
/// head positions the base fills, packed, the others zero) and, when the branch calls a
/// rule, the base rows grouped by the values they join the call's answers on.
struct Branch<K> {
    /// The table its answers go to.
    table: usize,
    /// The base rows' head parts; with a call, in key order (each key's rows together).
    parts: Vec<K>,
    call: Option<Call<K>>,
}

struct Call<K> {
    /// The called rule's table.
    table: usize,
    /// The answer positions the base's rows are keyed by (in key order).
    key: Vec<usize>,
    /// Answer positions that must be equal (a variable repeated in the call).
    repeats: Vec<(usize, usize)>,
    /// Head positions the answers fill: (answer position, head position).
    fill: Vec<(usize, usize)>,
    /// Each key's rows: `parts[start..end]`.
    groups: Groups<K>,
}

impl<K: Packed> Call<K> {
    /// The answer's part of a head (the positions it fills).
    #[inline]
    fn part(&self, answer: K) -> K {
        K::place(self.fill.iter().map(|&(p, h)| (answer.word(p), h)))
    }

    /// The base rows (head parts) whose key equals the answer's.
    #[inline]
    fn matches(&self, answer: K) -> std::ops::Range<usize> {
        let (start, end) = match &self.groups {
            Groups::Words(words) => words
                .get(answer.word(self.key[0]) as usize)
                .copied()
                .unwrap_or_default(),
            Groups::Keys(map) => map
                .get(K::pack(self.key.iter().map(|p| answer.word(*p))))
                .unwrap_or_default(),
        };
        start..end
    }
}

/// A branch's base rows grouped by their join key, each key's as `(start, end)` in the
/// branch's parts.
enum Groups<K> {
    /// A key of one word (the usual closure, keyed by the entity it steps through), in an
    /// array indexed by the word: words are dense, so each answer finds its rows without
    /// hashing. A word past the end keys no rows.
    Words(Vec<(usize, usize)>),
    /// Any other key, or one word when the largest is far past the number of rows.
    Keys(PackedMap<K, (usize, usize)>),
}

impl<K: Packed> Groups<K> {
    /// Each key of `keys` (the rows' keys, `rows` of them) with its count, as `(0, count)`.
    fn counted(keys: &[K], one_word: bool, rows: usize) -> Groups<K> {
        if one_word {
            let max = keys.iter().map(|k| k.word(0)).max().unwrap_or(0) as usize;
            if max < rows.saturating_mul(4).saturating_add(1024) {
                let mut words = vec![(0, 0); max + 1];
                for k in keys {
                    words[k.word(0) as usize].1 += 1;
                }
                return Groups::Words(words);
            }
        }
        let mut map = PackedMap::with_capacity(rows);
        for k in keys {
            let ((_, n), fresh) = map.insert(*k, (0, 1));
            if !fresh {
                map.set(*k, (0, n + 1));
            }
        }
        Groups::Keys(map)
    }

    /// The group of `key`, one of the keys it was counted from.
    fn get(&self, key: K) -> (usize, usize) {
        match self {
            Groups::Words(words) => words[key.word(0) as usize],
            Groups::Keys(map) => map.get(key).expect("counted"),
        }
    }

    /// Change the group of `key`, one of the keys it was counted from.
    fn set(&mut self, key: K, value: (usize, usize)) {
        match self {
            Groups::Words(words) => words[key.word(0) as usize] = value,
            Groups::Keys(map) => map.set(key, value),
        }
    }

    /// Visit every group (and, for words, the empty entries between them).
    fn for_each_value(&mut self, mut f: impl FnMut(&mut (usize, usize))) {
        match self {
            Groups::Words(words) => words.iter_mut().for_each(f),
            Groups::Keys(map) => map.for_each_value(&mut f),
        }
    }
}

/// The values the bases hold, each once.
#[derive(Default)]
struct Interner {
    refs: FastMap<u64, Word>,
    others: FastMap<Value, Word>,
    values: Vec<Value>,
    /// The entity id of each word that is one (0 for the others).
    ids: Vec<u64>,
}

impl Interner {
    fn intern(&mut self, v: &Value) -> Option<Word> {
        // `Word::MAX` is never a word (see `PackedMap`).
        let next = Word::try_from(self.values.len())
            .ok()
            .filter(|w| *w < Word::MAX)?;
        let w = match v {
            Value::Ref(e) => *self.refs.entry(*e).or_insert(next),
            v => match self.others.get(v) {
                Some(w) => *w,
                None => {
                    self.others.insert(v.clone(), next);
                    next
                }
            },
        };
        if w == next {
            self.values.push(v.clone());
            self.ids.push(match v {
                Value::Ref(e) => *e,
                _ => 0,
            });
        }
        Some(w)
    }
}

struct Program<K> {
    /// One per (rule, source) reached; the called one first.
    tables: Vec<Table<K>>,
    branches: Vec<Branch<K>>,
    interner: Interner,
}

impl<K: Packed> Program<K> {
    /// The bases of the rules reached (`keys`, from `reached`), evaluated and laid out as
    /// words; `None` if one cannot be.
    fn compile(
        ctx: &Ctx<'_>,
        keys: &[(&Symbol, Option<usize>)],
    ) -> Result<Option<Program<K>>, QueryError> {
        let mut interner = Interner::default();
        let mut shared = Vec::new();
        let mut out = Vec::new();
        for (t, (rule, rule_src)) in keys.iter().enumerate() {
            for b in ctx.rules.branches(rule).expect("checked above") {
                match Self::branch(ctx, t, *rule_src, b, keys, &mut interner, &mut shared)? {
                    Some(branch) => out.push(branch),
                    None => return Ok(None),
                }
            }
        }
        // Room from the start for a few times what the bases hold (a closure finds more, but
        // grows from there rather than from nothing); for large bases, twice plus a margin,
        // so that the head start stays in proportion to the memory the bases already take.
        let tables = (0..keys.len())
            .map(|t| {
                let base: usize = out
                    .iter()
                    .filter(|b| b.table == t)
                    .map(|b| b.parts.len())
                    .sum();
                Table::with_capacity((8 * base).min(2 * base + (1 << 19)))
            })
            .collect();
        Ok(Some(Program {
            tables,
            branches: out,
            interner,
        }))
    }

    /// Evaluate a base and intern its values: the columns of `keep` it binds (in the
    /// canonical order when it has a canonical form), `None` when the evaluation fails.
    fn lay_out(
        ctx: &Ctx<'_>,
        src: Option<usize>,
        rule: &CRule,
        base_clauses: &[CClause],
        keep: &[VarId],
        canon: Option<&(CanonKey, Vec<VarId>)>,
        interner: &mut Interner,
    ) -> Result<Option<SharedBase>, QueryError> {
        let consts = crate::rel::Consts::default();
        let env = Env {
            scope: &rule.scope,
            consts: &consts,
            default_src: src,
            record: false,
            cache: None,
            // As a rule body: its last step keeps duplicate rows (the tables drop them).
            rule: RuleCtx::Base { body: base_clauses },
        };
        let base = match ctx.eval(&env, Rel::unit(), base_clauses, keep) {
            Ok(rel) => rel,
            // The limits stop the query here as they would there; any other error (say, a
            // predicate on a variable only the call binds) the general evaluation reports,
            // or does not meet, with the call's answers bound first.
            Err(e) if e.is_limit() => {
                return Err(e);
            }
            Err(_) => return Ok(None),
        };
        // The word columns: canonical variables (in their order) or positions in `keep`.
        let cols: Vec<(usize, usize)> = match canon {
            Some((_, vars)) => (0..vars.len())
                .filter(|c| keep.contains(&vars[*c]))
                .filter_map(|c| base.col(vars[c]).map(|col| (c, col)))
                .collect(),
            None => (0..keep.len())
                .filter_map(|k| base.col(keep[k]).map(|col| (k, col)))
                .collect(),
        };
        let mut words: Vec<Word> = Vec::with_capacity(base.len * cols.len());
        for row in base.rows() {
            for (_, c) in &cols {
                let Some(w) = interner.intern(&row[*c]) else {
                    return Ok(None);
                };
                words.push(w);
            }
        }
        Ok(Some(SharedBase {
            key: canon.map(|(k, _)| k.clone()),
            words,
            rows: base.len,
            cols: cols.into_iter().map(|(c, _)| c).collect(),
        }))
    }

    /// Evaluate one branch's base and lay it out as words.
    fn branch(
        ctx: &Ctx<'_>,
        table: usize,
        src: Option<usize>,
        rule: &CRule,
        keys: &[(&Symbol, Option<usize>)],
        interner: &mut Interner,
        shared: &mut Vec<SharedBase>,
    ) -> Result<Option<Branch<K>>, QueryError> {
        let (base_clauses, call) = base_and_call(rule, src);
        let keep = kept_vars(rule, call);
        // A base of patterns that another branch has already evaluated (the same patterns
        // up to the names of their variables, as the two branches of a transitive closure
        // have) is laid out once.
        let canon = canonical(&base_clauses, src, &keep);
        let at = canon
            .as_ref()
            .and_then(|(key, _)| shared.iter().position(|b| b.key.as_ref() == Some(key)));
        let at = match at {
            Some(at) => at,
            None => {
                let Some(laid) = Self::lay_out(
                    ctx,
                    src,
                    rule,
                    &base_clauses,
                    &keep,
                    canon.as_ref(),
                    interner,
                )?
                else {
                    return Ok(None);
                };
                shared.push(laid);
                shared.len() - 1
            }
        };
        let laid = &shared[at];
        let words = &laid.words;
        let rows = laid.rows;
        let width = laid.cols.len();
        // This branch's variable in each word column.
        let cols: Vec<VarId> = match &canon {
            Some((_, vars)) => laid.cols.iter().map(|c| vars[*c]).collect(),
            None => laid.cols.iter().map(|c| keep[*c]).collect(),
        };
        let Some(head) = HeadMap::new(rule, call.map(|(_, _, args)| args), &cols) else {
            // A head variable nothing binds: the general evaluation reports it.
            return Ok(None);
        };
        let row = |i: usize| &words[i * width..(i + 1) * width];
        let part = |i: usize| K::place(head.from_base.iter().map(|&(c, h)| (row(i)[c], h)));
        let Some((call_src, callee, _)) = call else {
            return Ok(Some(Branch {
                table,
                parts: (0..rows).map(part).collect(),
                call: None,
            }));
        };
        // Group the base rows by key: count each key's rows, then place them.
        let keys_of: Vec<K> = (0..rows)
            .map(|i| K::pack(head.key_cols.iter().map(|&(c, _)| row(i)[c])))
            .collect();
        let mut groups = Groups::counted(&keys_of, head.key_cols.len() == 1, rows);
        // Starts from counts; `end` then counts up as rows are placed.
        let mut next = 0;
        groups.for_each_value(|(start, end)| {
            let n = *end;
            *start = next;
            *end = next;
            next += n;
        });
        let mut parts = vec![K::ZERO; rows];
        for (i, k) in keys_of.iter().enumerate() {
            let (start, end) = groups.get(*k);
            parts[end] = part(i);
            groups.set(*k, (start, end + 1));
        }
        let callee_table = keys
            .iter()
            .position(|k| *k == (callee, call_src))
            .expect("every call's table was collected");
        Ok(Some(Branch {
            table,
            parts,
            call: Some(Call {
                table: callee_table,
                key: head.key_cols.iter().map(|&(_, p)| p).collect(),
                repeats: head.repeats,
                fill: head.fill,
                groups,
            }),
        }))
    }
}

/// A branch's rule call: its source, rule and arguments.
type CallOf<'r> = (Option<usize>, &'r Symbol, &'r [CArg]);

/// A branch's base (its clauses but its rule call) and its rule call, if it has one.
fn base_and_call(rule: &CRule, src: Option<usize>) -> (Cow<'_, [CClause]>, Option<CallOf<'_>>) {
    let call_at = rule
        .clauses
        .iter()
        .position(|c| matches!(c, CClause::Rule { .. }));
    let base: Cow<'_, [CClause]> = match call_at {
        None => Cow::Borrowed(&rule.clauses),
        Some(i) if i + 1 == rule.clauses.len() => Cow::Borrowed(&rule.clauses[..i]),
        Some(i) => Cow::Owned(
            rule.clauses
                .iter()
                .enumerate()
                .filter(|(j, _)| *j != i)
                .map(|(_, c)| c.clone())
                .collect(),
        ),
    };
    let call = call_at.map(|i| match &rule.clauses[i] {
        CClause::Rule {
            src: call_src,
            name,
            args,
            ..
        } => (call_src.or(src), name, args.as_slice()),
        _ => unreachable!("found as a rule call"),
    });
    (base, call)
}

/// The variables the base must supply: the head's and those it shares with the call.
fn kept_vars(rule: &CRule, call: Option<CallOf<'_>>) -> Vec<VarId> {
    let mut keep: Vec<VarId> = Vec::new();
    for v in rule.head.iter().chain(call.iter().flat_map(|(_, _, args)| {
        args.iter().filter_map(|a| match a {
            CArg::Var(v) => Some(v),
            _ => None,
        })
    })) {
        if !keep.contains(v) {
            keep.push(*v);
        }
    }
    keep
}

/// Where a branch's head values come from: the base's word columns or the call's answers.
struct HeadMap {
    /// Answer positions that must be equal (a variable repeated in the call).
    repeats: Vec<(usize, usize)>,
    /// The join key: (base column, answer position).
    key_cols: Vec<(usize, usize)>,
    /// (base column, head position).
    from_base: Vec<(usize, usize)>,
    /// (answer position, head position).
    fill: Vec<(usize, usize)>,
}

impl HeadMap {
    /// The map for a base whose word columns hold the variables `cols`; `None` when a head
    /// variable is bound by neither.
    fn new(rule: &CRule, call_args: Option<&[CArg]>, cols: &[VarId]) -> Option<HeadMap> {
        let base_col = |v: VarId| cols.iter().position(|w| *w == v);
        let mut answer_pos: Vec<(VarId, usize)> = Vec::new();
        let mut repeats = Vec::new();
        let mut key_cols: Vec<(usize, usize)> = Vec::new();
        for (p, a) in call_args.unwrap_or_default().iter().enumerate() {
            let CArg::Var(v) = a else { continue };
            if let Some(&(_, q)) = answer_pos.iter().find(|(w, _)| w == v) {
                repeats.push((p, q));
                continue;
            }
            answer_pos.push((*v, p));
            if let Some(c) = base_col(*v) {
                key_cols.push((c, p));
            }
        }
        let mut from_base: Vec<(usize, usize)> = Vec::new();
        let mut fill: Vec<(usize, usize)> = Vec::new();
        for (h, v) in rule.head.iter().enumerate() {
            match base_col(*v) {
                Some(c) => from_base.push((c, h)),
                None => {
                    let &(_, p) = answer_pos.iter().find(|(w, _)| w == v)?;
                    fill.push((p, h));
                }
            }
        }
        Some(HeadMap {
            repeats,
            key_cols,
            from_base,
            fill,
        })
    }
}

/// A base laid out as words, kept for the other branches whose bases are the same.
struct SharedBase {
    key: Option<CanonKey>,
    words: Vec<Word>,
    rows: usize,
    /// Each word column's variable: a canonical variable, or a position in the `keep` of
    /// the branch that made it (no canonical form, not shared).
    cols: Vec<usize>,
}

/// A pattern term with its variable numbered by first occurrence in the base.
#[derive(Clone, PartialEq)]
enum CanonTerm {
    Var(usize),
    Blank,
    Const(vev_edn::Edn),
}

/// A base of patterns with its variables numbered by first occurrence: the default source,
/// each pattern's source and terms, and which variables the branch keeps.
type CanonKey = (
    Option<usize>,
    Vec<(Option<usize>, [CanonTerm; 5])>,
    Vec<usize>,
);

/// The canonical form of a base made only of patterns, and the branch's variable for each
/// canonical number; `None` for any other base.
fn canonical(
    clauses: &[CClause],
    src: Option<usize>,
    keep: &[VarId],
) -> Option<(CanonKey, Vec<VarId>)> {
    let mut vars: Vec<VarId> = Vec::new();
    let mut patterns = Vec::with_capacity(clauses.len());
    for c in clauses {
        let CClause::Pattern {
            src: pattern_src,
            terms,
            ..
        } = c
        else {
            return None;
        };
        let canon = terms.clone().map(|t| match t {
            CTerm::Var(v) => CanonTerm::Var(match vars.iter().position(|w| *w == v) {
                Some(i) => i,
                None => {
                    vars.push(v);
                    vars.len() - 1
                }
            }),
            CTerm::Blank => CanonTerm::Blank,
            CTerm::Const(e) => CanonTerm::Const(e),
        });
        patterns.push((*pattern_src, canon));
    }
    let kept = (0..vars.len())
        .filter(|i| keep.contains(&vars[*i]))
        .collect();
    Some(((src, patterns, kept), vars))
}

/// Fill the tables to a fixpoint.
fn run<K: Packed>(
    ctx: &Ctx<'_>,
    tables: &mut [Table<K>],
    branches: &[Branch<K>],
) -> Result<(), QueryError> {
    // The branches without a call: their bases are their answers.
    for b in branches.iter().filter(|b| b.call.is_none()) {
        for &head in &b.parts {
            tables[b.table].insert(head);
        }
        ctx.check(tables[b.table].rows.len())?;
    }
    loop {
        let mut changed = false;
        for t in tables.iter_mut() {
            changed |= t.advance();
        }
        if !changed {
            return Ok(());
        }
        for b in branches {
            let Some(call) = &b.call else { continue };
            let delta = tables[call.table].old_end..tables[call.table].delta_end;
            for i in delta {
                let answer = tables[call.table].rows[i];
                if call
                    .repeats
                    .iter()
                    .any(|(p, q)| answer.word(*p) != answer.word(*q))
                {
                    continue;
                }
                let part = call.part(answer);
                let target = &mut tables[b.table];
                for &base in &b.parts[call.matches(answer)] {
                    target.insert(base | part);
                }
                ctx.check(target.rows.len())?;
            }
        }
    }
}

/// The called table's rows as a relation over the call's variables (first occurrences),
/// values restored.
fn answers<K: Packed>(table: &Table<K>, interner: &Interner, args: &[CArg]) -> Rel {
    let (vars, cols, repeats) = crate::rules::call_columns(args);
    let mut rel = Rel::empty(vars);
    // Distinct rows stay distinct unless a position is dropped (`_`).
    rel.distinct = !args.iter().any(|a| matches!(a, CArg::Blank));
    rel.data.reserve(table.rows.len() * cols.len());
    let rows = table
        .rows
        .iter()
        .filter(|row| repeats.iter().all(|(p, q)| row.word(*p) == row.word(*q)));
    if interner.others.is_empty() {
        // Only entity ids (a closure over refs, the common case): made, not cloned.
        let ids = &interner.ids;
        for row in rows {
            rel.data
                .extend(cols.iter().map(|c| Value::Ref(ids[row.word(*c) as usize])));
            rel.len += 1;
        }
    } else {
        let values = &interner.values;
        for row in rows {
            rel.data
                .extend(cols.iter().map(|c| values[row.word(*c) as usize].clone()));
            rel.len += 1;
        }
    }
    rel
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entity_id_and_an_equal_long_are_different_words() {
        let mut i = Interner::default();
        let e = i.intern(&Value::Ref(5)).unwrap();
        let n = i.intern(&Value::Long(5)).unwrap();
        assert_ne!(e, n);
        assert_eq!(i.intern(&Value::Ref(5)), Some(e));
        assert_eq!(i.intern(&Value::Long(5)), Some(n));
        assert_eq!(i.values, vec![Value::Ref(5), Value::Long(5)]);
    }

    #[test]
    fn packed_rows_keep_their_words() {
        let row = u128::pack([7, 0, Word::MAX - 1, 3].into_iter());
        assert_eq!(
            (0..4).map(|p| row.word(p)).collect::<Vec<_>>(),
            vec![7, 0, Word::MAX - 1, 3]
        );
        let row = u64::pack([Word::MAX - 1, 9].into_iter());
        assert_eq!((row.word(0), row.word(1)), (Word::MAX - 1, 9));
        // The all-zero row is a row, not an empty slot.
        let mut m: PackedMap<u64, usize> = PackedMap::with_capacity(0);
        assert_eq!(m.insert(0, 9), (9, true));
        assert_eq!(m.get(0), Some(9));
    }

    fn agrees_with_a_hash_map<K: Packed + std::hash::Hash>() {
        let mut m: PackedMap<K, usize> = PackedMap::with_capacity(0);
        let mut reference: std::collections::HashMap<K, usize> = Default::default();
        // A fixed pseudo-random walk over a small key space, so keys repeat.
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        for i in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let key = K::pack([(x % 3000) as Word, (x >> 40) as Word % 5].into_iter());
            let want = *reference.entry(key).or_insert(i);
            assert_eq!(m.insert(key, i), (want, want == i));
        }
        assert_eq!(m.len, reference.len());
        for (k, v) in &reference {
            assert_eq!(m.get(*k), Some(*v));
        }
        assert_eq!(m.get(K::pack([3001, 0].into_iter())), None);
    }

    #[test]
    fn the_packed_map_agrees_with_a_hash_map_through_its_growth() {
        agrees_with_a_hash_map::<u64>();
        agrees_with_a_hash_map::<u128>();
    }
}
