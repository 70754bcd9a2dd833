//! The star join: several patterns on one bound entity answered in one pass over each
//! entity's EAVT datoms (the planner's `star` decides when that beats a lookup per pattern).

use vev_core::{EntityId, IndexOrder, Value};

use crate::error::QueryError;
use crate::rel::{Rel, VarId};
use crate::source::Source;
use crate::values::resolve_entity;

/// Several patterns on one bound entity, `[?e :a ?x] [?e :b ?y] [?e :c 1]`, resolved in one
/// pass over each entity's EAVT datoms instead of one index lookup per pattern.
pub(crate) struct Star<'s> {
    src: &'s dyn Source,
    e_col: usize,
    /// Per member: the attribute, and either a constant value or a new variable.
    members: Vec<(EntityId, StarValue)>,
}

pub(crate) enum StarValue {
    Const(Value),
    Free(VarId),
}

impl<'s> Star<'s> {
    pub fn new(src: &'s dyn Source, e_col: usize, members: Vec<(EntityId, StarValue)>) -> Star<'s> {
        Star {
            src,
            e_col,
            members,
        }
    }

    pub fn join(&self, rel: &Rel) -> Result<Rel, QueryError> {
        let mut vars = rel.vars.clone();
        let free: Vec<usize> = (0..self.members.len())
            .filter(|m| matches!(self.members[*m].1, StarValue::Free(_)))
            .collect();
        vars.extend(free.iter().map(|m| match self.members[*m].1 {
            StarValue::Free(v) => v,
            StarValue::Const(_) => unreachable!("filtered"),
        }));
        let mut out = Rel::empty(vars);
        out.distinct = rel.distinct;
        let mut keyed: Vec<(EntityId, usize)> = Vec::with_capacity(rel.len);
        for (i, row) in rel.rows().enumerate() {
            if let Some(e) = resolve_entity(self.src, &row[self.e_col])? {
                keyed.push((e, i));
            }
        }
        keyed.sort_unstable();
        // One key per distinct entity (as machine words: the batch walk compares ids).
        let mut keys: Vec<[EntityId; 2]> = Vec::new();
        let mut groups: Vec<(usize, usize)> = Vec::new();
        for (i, (e, _)) in keyed.iter().enumerate() {
            if i > 0 && keyed[i - 1].0 == *e {
                groups.last_mut().expect("a group per entity").1 = i + 1;
            } else {
                keys.push([*e, 0]);
                groups.push((i, i + 1));
            }
        }
        // Matches of the current group, per member.
        let mut found: Vec<Vec<Value>> = vec![Vec::new(); self.members.len()];
        let mut current: Option<usize> = None;
        // The odometer of `emit_product`, allocated once.
        let mut idx = vec![0usize; free.len()];
        let mut flush = |g: usize, found: &mut Vec<Vec<Value>>, out: &mut Rel| {
            if found.iter().all(|f| !f.is_empty()) {
                let (from, to) = groups[g];
                for (_, r) in &keyed[from..to] {
                    emit_product(rel.row(*r), &free, found, &mut idx, out);
                }
            }
            found.iter_mut().for_each(Vec::clear);
        };
        self.src
            .scan_id_batch(IndexOrder::Eavt, &keys, 1, &mut |g, d| {
                if current != Some(g) {
                    if let Some(prev) = current {
                        flush(prev, &mut found, &mut out);
                    }
                    current = Some(g);
                }
                if !d.added {
                    return true;
                }
                for (m, (a, v)) in self.members.iter().enumerate() {
                    if d.a == *a {
                        match v {
                            StarValue::Const(c) if d.v == *c => found[m].push(Value::Nil),
                            StarValue::Const(_) => {}
                            StarValue::Free(_) => found[m].push(d.v.clone()),
                        }
                    }
                }
                true
            });
        if let Some(prev) = current {
            flush(prev, &mut found, &mut out);
        }
        Ok(out)
    }
}

/// Append `row` extended by every combination of the free members' values.
/// `idx` is scratch of `free.len()` counters.
fn emit_product(
    row: &[Value],
    free: &[usize],
    found: &[Vec<Value>],
    idx: &mut [usize],
    out: &mut Rel,
) {
    idx.fill(0);
    loop {
        out.data.extend_from_slice(row);
        for (i, m) in free.iter().enumerate() {
            out.data.push(found[*m][idx[i]].clone());
        }
        out.len += 1;
        // Next combination, odometer style.
        let mut i = free.len();
        loop {
            if i == 0 {
                return;
            }
            i -= 1;
            idx[i] += 1;
            if idx[i] < found[free[i]].len() {
                break;
            }
            idx[i] = 0;
        }
    }
}
