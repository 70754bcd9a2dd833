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
//! Everything else goes to `rules`' general evaluation: calls that bind arguments, constants
//! or sources as arguments of inner calls, required-binding heads, rule calls inside
//! `not`/`or`, the naive plan (the reference the differential tests compare this with), and
//! any base whose evaluation fails (the general evaluation then reports the error where it
//! belongs).

use std::collections::HashMap;

use vev_core::Value;
use vev_edn::Symbol;

use crate::compile::{CArg, CClause};
use crate::error::QueryError;
use crate::exec::{Ctx, Env};
use crate::rel::{Rel, VarId};
use crate::rules::CRule;

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
    let Some(program) = Program::compile(ctx, src, name)? else {
        return Ok(None);
    };
    let Program {
        mut tables,
        branches,
        interner,
    } = program;
    run(ctx, &mut tables, &branches)?;
    Ok(Some(answers(&tables[0], &interner.values, args)))
}

/// A row of at most `MAX_ARITY` words, packed: word `p` in bits `32 p..32 (p + 1)`.
type Packed = u128;

/// The widest row a table or a join key may have here (wider rules go to `rules`).
const MAX_ARITY: usize = 4;

#[inline]
fn word(row: Packed, p: usize) -> Word {
    (row >> (32 * p)) as Word
}

#[inline]
fn pack(words: impl Iterator<Item = Word>) -> Packed {
    let mut row = 0;
    for (p, w) in words.enumerate() {
        row |= Packed::from(w) << (32 * p);
    }
    row
}

/// A packed row's hash: its two halves folded, then MurmurHash3's final avalanche, which
/// spreads every input bit over the high bits the table's tags use and the low bits its
/// buckets use.
#[inline]
fn hash(row: Packed) -> u64 {
    let mut h = (row as u64) ^ ((row >> 64) as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

/// A hash map from packed rows to `V`, open addressing with linear probing. Rows are what
/// every round of the fixpoint looks up and adds, so the probe is a few instructions: hash,
/// mask, compare, no indirection. A slot holds its row plus one, so that zero (what a fresh
/// zeroed table holds) means empty: no row is `Packed::MAX`, since its words would all be
/// `Word::MAX`, which `Interner` never hands out.
struct PackedMap<V> {
    slots: Vec<Packed>,
    values: Vec<V>,
    len: usize,
    mask: usize,
}

impl<V: Copy + Default> PackedMap<V> {
    fn with_capacity(n: usize) -> PackedMap<V> {
        // At most half full.
        let slots = (n.max(8) * 2).next_power_of_two();
        PackedMap {
            slots: vec![0; slots],
            values: vec![V::default(); slots],
            len: 0,
            mask: slots - 1,
        }
    }

    /// The value of `key`, if present.
    #[inline]
    fn get(&self, key: Packed) -> Option<V> {
        let stored = key + 1;
        let mut i = hash(key) as usize & self.mask;
        loop {
            let s = self.slots[i];
            if s == stored {
                return Some(self.values[i]);
            }
            if s == 0 {
                return None;
            }
            i = (i + 1) & self.mask;
        }
    }

    /// Add `key` with `value` unless present; the value it has then, and whether it is new.
    #[inline]
    fn insert(&mut self, key: Packed, value: V) -> (V, bool) {
        if (self.len + 1) * 2 > self.slots.len() {
            self.grow();
        }
        let stored = key + 1;
        let mut i = hash(key) as usize & self.mask;
        loop {
            let s = self.slots[i];
            if s == stored {
                return (self.values[i], false);
            }
            if s == 0 {
                self.slots[i] = stored;
                self.values[i] = value;
                self.len += 1;
                return (value, true);
            }
            i = (i + 1) & self.mask;
        }
    }

    #[cold]
    fn grow(&mut self) {
        let n = self.slots.len() * 2;
        let slots = std::mem::replace(&mut self.slots, vec![0; n]);
        let values = std::mem::replace(&mut self.values, vec![V::default(); n]);
        self.mask = n - 1;
        for (s, v) in slots.into_iter().zip(values) {
            if s != 0 {
                let mut i = hash(s - 1) as usize & self.mask;
                while self.slots[i] != 0 {
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
struct Table {
    rows: Vec<Packed>,
    set: PackedMap<()>,
    old_end: usize,
    delta_end: usize,
}

impl Table {
    fn with_capacity(n: usize) -> Table {
        Table {
            rows: Vec::with_capacity(n),
            set: PackedMap::with_capacity(n),
            old_end: 0,
            delta_end: 0,
        }
    }

    /// Add `row` unless present.
    #[inline]
    fn insert(&mut self, row: Packed) {
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

/// Where a head value of a branch comes from.
#[derive(Clone, Copy)]
enum From {
    /// A column of the branch's base.
    Base(usize),
    /// An argument position of the call's answers.
    Answer(usize),
}

/// One rule branch: its base (rows of words) and, when it calls a rule, how the call's
/// answers join it.
struct Branch {
    /// The table its answers go to.
    table: usize,
    /// The base's rows, `width` words each.
    base: Vec<Word>,
    width: usize,
    rows: usize,
    head: Vec<From>,
    call: Option<Call>,
}

struct Call {
    /// The called rule's table.
    table: usize,
    /// The join: these base columns equal these answer positions.
    base_cols: Vec<usize>,
    answer_cols: Vec<usize>,
    /// Answer positions that must be equal (a variable repeated in the call).
    repeats: Vec<(usize, usize)>,
    /// The base rows by their `base_cols` (packed): each key's first row, then `next`.
    heads: PackedMap<usize>,
    next: Vec<usize>,
}

impl Call {
    fn index(&mut self, base: &[Word], width: usize, rows: usize) {
        self.next = vec![usize::MAX; rows];
        let mut last = vec![usize::MAX; rows];
        for i in 0..rows {
            let row = &base[i * width..(i + 1) * width];
            let key = pack(self.base_cols.iter().map(|c| row[*c]));
            match self.heads.insert(key, i) {
                (head, false) => {
                    self.next[last[head]] = i;
                    last[head] = i;
                }
                (_, true) => last[i] = i,
            }
        }
    }

    /// The first base row whose key equals `answer`'s join positions (`usize::MAX` if none).
    #[inline]
    fn first(&self, answer: Packed) -> usize {
        let key = pack(self.answer_cols.iter().map(|p| word(answer, *p)));
        self.heads.get(key).unwrap_or(usize::MAX)
    }
}

/// The values the bases hold, each once.
#[derive(Default)]
struct Interner {
    refs: FastMap<u64, Word>,
    others: FastMap<Value, Word>,
    values: Vec<Value>,
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
        }
        Some(w)
    }
}

struct Program {
    /// One per (rule, source) reached; the called one first.
    tables: Vec<Table>,
    branches: Vec<Branch>,
    interner: Interner,
}

impl Program {
    /// The rules reached from `name`, their bases evaluated; `None` if any is not linear.
    fn compile(
        ctx: &Ctx<'_>,
        src: Option<usize>,
        name: &Symbol,
    ) -> Result<Option<Program>, QueryError> {
        // The (rule, source) pairs reached, breadth first, checking each rule's shape.
        let mut keys: Vec<(&Symbol, Option<usize>)> = vec![(name, src)];
        let mut at = 0;
        while at < keys.len() {
            let (rule, rule_src) = keys[at];
            at += 1;
            let Some(branches) = ctx.rules.branches(rule) else {
                return Ok(None);
            };
            for b in branches {
                if b.nested_calls || b.required > 0 {
                    return Ok(None);
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
                if calls.next().is_some()
                    || call_args
                        .iter()
                        .any(|a| matches!(a, CArg::Const(_) | CArg::Src(_)))
                {
                    return Ok(None);
                }
                let key = (callee, call_src.or(rule_src));
                if !keys.contains(&key) {
                    keys.push(key);
                }
            }
        }
        if keys
            .iter()
            .any(|(rule, _)| ctx.rules.arity(rule).is_none_or(|a| a > MAX_ARITY))
        {
            return Ok(None);
        }
        let mut interner = Interner::default();
        let mut out = Vec::new();
        for (t, (rule, rule_src)) in keys.iter().enumerate() {
            for b in ctx.rules.branches(rule).expect("checked above") {
                match Self::branch(ctx, t, *rule_src, b, &keys, &mut interner)? {
                    Some(branch) => out.push(branch),
                    None => return Ok(None),
                }
            }
        }
        // Room from the start for a few times what the bases hold (a closure finds more, but
        // grows from there rather than from nothing).
        let tables = (0..keys.len())
            .map(|t| {
                let base: usize = out.iter().filter(|b| b.table == t).map(|b| b.rows).sum();
                Table::with_capacity(4 * base)
            })
            .collect();
        Ok(Some(Program {
            tables,
            branches: out,
            interner,
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
    ) -> Result<Option<Branch>, QueryError> {
        let call_at = rule
            .clauses
            .iter()
            .position(|c| matches!(c, CClause::Rule { .. }));
        let rest: Vec<CClause>;
        let base_clauses: &[CClause] = match call_at {
            None => &rule.clauses,
            Some(i) if i + 1 == rule.clauses.len() => &rule.clauses[..i],
            Some(i) => {
                rest = rule
                    .clauses
                    .iter()
                    .enumerate()
                    .filter(|(j, _)| *j != i)
                    .map(|(_, c)| c.clone())
                    .collect();
                &rest
            }
        };
        let call = call_at.map(|i| match &rule.clauses[i] {
            CClause::Rule {
                src: call_src,
                name,
                args,
                ..
            } => (call_src.or(src), name, args),
            _ => unreachable!("found as a rule call"),
        });
        // The variables the base must supply: the head's and those it shares with the call.
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
        let consts = HashMap::new();
        let env = Env {
            scope: &rule.scope,
            consts: &consts,
            default_src: src,
            tables: None,
            pass: None,
            // As a rule body: its last step keeps duplicate rows (the tables drop them).
            body: Some(base_clauses),
            record: false,
            cache: None,
            prefix: None,
        };
        let base = match ctx.eval(&env, Rel::unit(), base_clauses, &keep) {
            Ok(rel) => rel,
            // The limits stop the query here as they would there; any other error (say, a
            // predicate on a variable only the call binds) the general evaluation reports,
            // or does not meet, with the call's answers bound first.
            Err(e @ (QueryError::Timeout { .. } | QueryError::TooManyRows { .. })) => {
                return Err(e);
            }
            Err(_) => return Ok(None),
        };
        // The base's columns, as words.
        let cols: Vec<(VarId, usize)> = keep
            .iter()
            .filter_map(|v| base.col(*v).map(|c| (*v, c)))
            .collect();
        let width = cols.len();
        let mut words = Vec::with_capacity(base.len * width);
        for row in base.rows() {
            for (_, c) in &cols {
                let Some(w) = interner.intern(&row[*c]) else {
                    return Ok(None);
                };
                words.push(w);
            }
        }
        let base_col = |v: VarId| cols.iter().position(|(w, _)| *w == v);
        let mut call_plan = None;
        let mut answer_pos: Vec<(VarId, usize)> = Vec::new();
        if let Some((call_src, callee, args)) = call {
            let callee_table = keys
                .iter()
                .position(|k| *k == (callee, call_src))
                .expect("every call's table was collected");
            let (mut base_cols, mut answer_cols, mut repeats) =
                (Vec::new(), Vec::new(), Vec::new());
            for (p, a) in args.iter().enumerate() {
                let CArg::Var(v) = a else { continue };
                if let Some(&(_, q)) = answer_pos.iter().find(|(w, _)| w == v) {
                    repeats.push((p, q));
                    continue;
                }
                answer_pos.push((*v, p));
                if let Some(c) = base_col(*v) {
                    base_cols.push(c);
                    answer_cols.push(p);
                }
            }
            let mut plan = Call {
                table: callee_table,
                base_cols,
                answer_cols,
                repeats,
                heads: PackedMap::with_capacity(base.len),
                next: Vec::new(),
            };
            plan.index(&words, width, base.len);
            call_plan = Some(plan);
        }
        let mut head = Vec::with_capacity(rule.head.len());
        for v in &rule.head {
            match base_col(*v) {
                Some(c) => head.push(From::Base(c)),
                None => match answer_pos.iter().find(|(w, _)| w == v) {
                    Some(&(_, p)) => head.push(From::Answer(p)),
                    // A head variable nothing binds: the general evaluation reports it.
                    None => return Ok(None),
                },
            }
        }
        Ok(Some(Branch {
            table,
            base: words,
            width,
            rows: base.len,
            head,
            call: call_plan,
        }))
    }
}

/// Fill the tables to a fixpoint.
fn run(ctx: &Ctx<'_>, tables: &mut [Table], branches: &[Branch]) -> Result<(), QueryError> {
    // The branches without a call: their bases' head tuples.
    for b in branches.iter().filter(|b| b.call.is_none()) {
        for i in 0..b.rows {
            let row = &b.base[i * b.width..(i + 1) * b.width];
            let head = pack(b.head.iter().map(|f| match f {
                From::Base(c) => row[*c],
                From::Answer(_) => unreachable!("a branch without a call"),
            }));
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
                    .any(|(p, q)| word(answer, *p) != word(answer, *q))
                {
                    continue;
                }
                let mut j = call.first(answer);
                while j != usize::MAX {
                    let row = &b.base[j * b.width..(j + 1) * b.width];
                    let head = pack(b.head.iter().map(|f| match f {
                        From::Base(c) => row[*c],
                        From::Answer(p) => word(answer, *p),
                    }));
                    tables[b.table].insert(head);
                    j = call.next[j];
                }
                ctx.check(tables[b.table].rows.len())?;
            }
        }
    }
}

/// The called table's rows as a relation over the call's variables (first occurrences),
/// values restored.
fn answers(table: &Table, values: &[Value], args: &[CArg]) -> Rel {
    let mut vars: Vec<VarId> = Vec::new();
    let mut cols: Vec<usize> = Vec::new();
    let mut repeats: Vec<(usize, usize)> = Vec::new();
    for (p, a) in args.iter().enumerate() {
        if let CArg::Var(v) = a {
            match vars.iter().position(|x| x == v) {
                Some(i) => repeats.push((p, cols[i])),
                None => {
                    vars.push(*v);
                    cols.push(p);
                }
            }
        }
    }
    let mut rel = Rel::empty(vars);
    // Distinct rows stay distinct unless a position is dropped (`_`).
    rel.distinct = !args.iter().any(|a| matches!(a, CArg::Blank));
    rel.data.reserve(table.rows.len() * cols.len());
    for &row in &table.rows {
        if repeats.iter().any(|(p, q)| word(row, *p) != word(row, *q)) {
            continue;
        }
        rel.data
            .extend(cols.iter().map(|c| values[word(row, *c) as usize].clone()));
        rel.len += 1;
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
        let row = pack([7, 0, Word::MAX - 1, 3].into_iter());
        assert_eq!(
            (0..4).map(|p| word(row, p)).collect::<Vec<_>>(),
            vec![7, 0, Word::MAX - 1, 3]
        );
        // The all-zero row is a row, not an empty slot.
        let mut m: PackedMap<usize> = PackedMap::with_capacity(0);
        assert_eq!(m.insert(0, 9), (9, true));
        assert_eq!(m.get(0), Some(9));
    }

    #[test]
    fn the_packed_map_agrees_with_a_hash_map_through_its_growth() {
        let mut m: PackedMap<usize> = PackedMap::with_capacity(0);
        let mut reference: std::collections::HashMap<Packed, usize> = Default::default();
        // A fixed pseudo-random walk over a small key space, so keys repeat.
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        for i in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let key = pack([(x % 3000) as Word, (x >> 40) as Word % 5].into_iter());
            let want = *reference.entry(key).or_insert(i);
            assert_eq!(m.insert(key, i), (want, want == i));
        }
        assert_eq!(m.len, reference.len());
        for (k, v) in &reference {
            assert_eq!(m.get(*k), Some(*v));
        }
        assert_eq!(m.get(pack([3001, 0].into_iter())), None);
    }
}
