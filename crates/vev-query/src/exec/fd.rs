//! Functional dependencies between a relation's variables, from the patterns that bound them,
//! so that dropping a variable the kept ones determine skips the deduplication pass.
//!
//! Why: after `[?e :doc/id ?id]` (a unique attribute) the rows' `?id` determines their `?e`,
//! so when a later step drops `?e` the rows stay as distinct as they were; deduplicating them
//! anyway hashed every row (a tenth of a full-text search joined to an id). A dependency is
//! used only where the source promises the schema holds for every datom it shows (a
//! database's current view: `Source::obeys_schema`), and only where equal values of the
//! determining variable cannot stand for different values of the determined one: a
//! cardinality-one attribute's value variable must be new in the pattern (its values are the
//! datoms'), and a unique attribute's entity variable must hold entity ids only (checked
//! when the dependency is used). The naive plan uses none: it is the reference.
//!
//! The evaluation loop only notes each applied pattern (`Applied`, no lookup); the
//! attributes are resolved when a projection would otherwise deduplicate, so a query whose
//! steps never drop a variable pays nothing for this.

use smallvec::SmallVec;
use vev_core::{EntityId, Value};

use super::{Ctx, Env};
use crate::compile::{CClause, CTerm};
use crate::rel::{Rel, VarId};
use crate::values::{edn_to_value, resolve_entity};

/// The data patterns applied so far in one evaluation (the usual query has a few).
pub(super) type Applied<'c> = SmallVec<[Pattern<'c>; 4]>;

/// A data pattern `[?e :attr ?v ...]` applied to the rows, and whether `?v` was new in it.
#[derive(Clone, Copy)]
pub(super) struct Pattern<'c> {
    clause: &'c CClause,
    v_new: bool,
}

/// Note `clause`, about to be joined with `rel`, when it is a pattern of two distinct
/// variables around a constant attribute (the only shape a dependency comes from).
pub(super) fn note<'c>(applied: &mut Applied<'c>, clause: &'c CClause, rel: &Rel) {
    if let CClause::Pattern { terms, .. } = clause {
        if let (CTerm::Var(e), CTerm::Const(_), CTerm::Var(v)) = (&terms[0], &terms[1], &terms[2]) {
            if e != v {
                applied.push(Pattern {
                    clause,
                    v_new: !rel.has(*v),
                });
            }
        }
    }
}

/// In every row, `to`'s value is a function of `from`'s.
#[derive(Clone, Copy, Debug)]
struct Fd {
    from: VarId,
    to: VarId,
    /// Holds only while `to`'s column holds entity ids (`Value::Ref`) alone.
    refs_only: bool,
}

impl Ctx<'_> {
    /// Whether dropping from `rel` every variable `keep` refuses leaves no two rows equal:
    /// the rows are distinct now and the kept variables (with the query's scalar inputs,
    /// which hold one value in every row) determine each dropped one through the
    /// dependencies of the `applied` patterns.
    pub(super) fn drop_keeps_distinct(
        &self,
        env: &Env<'_>,
        rel: &Rel,
        keep: impl Fn(VarId) -> bool,
        applied: &[Pattern<'_>],
    ) -> bool {
        if self.limits.naive || !rel.distinct || applied.is_empty() {
            return false;
        }
        let constant = |v: VarId| env.consts.contains_key(&v);
        let mut known: Vec<VarId> = rel
            .vars
            .iter()
            .copied()
            .filter(|v| keep(*v) || constant(*v))
            .collect();
        let mut fds: Vec<Fd> = Vec::new();
        for p in applied {
            self.pattern_fds(env, p, &mut fds);
        }
        let usable = |fd: &Fd| {
            !fd.refs_only
                || rel
                    .col(fd.to)
                    .is_some_and(|c| rel.rows().all(|r| matches!(r[c], Value::Ref(_))))
        };
        let mut tried: Vec<bool> = vec![false; fds.len()];
        loop {
            let mut grew = false;
            for (i, fd) in fds.iter().enumerate() {
                if tried[i] || !known.contains(&fd.from) || known.contains(&fd.to) {
                    continue;
                }
                tried[i] = true;
                if usable(fd) {
                    known.push(fd.to);
                    grew = true;
                }
            }
            if !grew {
                break;
            }
        }
        rel.vars.iter().all(|v| known.contains(v))
    }

    /// The dependencies pattern `p` gives its rows, appended to `fds`: nothing when its
    /// source does not promise its schema holds.
    fn pattern_fds(&self, env: &Env<'_>, p: &Pattern<'_>, fds: &mut Vec<Fd>) {
        let CClause::Pattern { src, terms, span } = p.clause else {
            return;
        };
        let (CTerm::Var(e), CTerm::Const(a), CTerm::Var(v)) = (&terms[0], &terms[1], &terms[2])
        else {
            return;
        };
        let Ok(source) = self.source(env, *src, *span) else {
            return;
        };
        if !source.obeys_schema() {
            return;
        }
        let id: Option<EntityId> = match edn_to_value(a) {
            Value::Keyword(k) => source.schema().entid(&k),
            other => resolve_entity(source, &other).ok().flatten(),
        };
        let Some(attr) = id.and_then(|id| source.schema().attribute(id)) else {
            return;
        };
        if !attr.is_many() && p.v_new {
            fds.push(Fd {
                from: *e,
                to: *v,
                refs_only: false,
            });
        }
        if attr.unique.is_some() {
            fds.push(Fd {
                from: *v,
                to: *e,
                refs_only: true,
            });
        }
    }
}
