//! Functional dependencies between a relation's variables, from the patterns that bound them,
//! so that dropping a variable the kept ones determine skips the deduplication pass.
//!
//! Why: after `[?e :doc/id ?id]` (a unique attribute) the rows' `?id` determines their `?e`,
//! so when a later step drops `?e` the rows stay as distinct as they were; deduplicating them
//! anyway hashed every row (a tenth of a full-text search joined to an id). A dependency is
//! recorded only where the source promises the schema holds for every datom it shows (a
//! database's current view: `Source::obeys_schema`), and only where equal values of the
//! determining variable cannot stand for different values of the determined one: a
//! cardinality-one attribute's value variable must be new in the pattern (its values are the
//! datoms'), and a unique attribute's entity variable must hold entity ids only (checked
//! when the dependency is used). The naive plan records none: it is the reference.

use vev_core::{EntityId, Value};

use super::{Ctx, Env};
use crate::compile::{CClause, CTerm};
use crate::rel::{Rel, VarId};
use crate::values::{edn_to_value, resolve_entity};

/// In every row, `to`'s value is a function of `from`'s.
#[derive(Clone, Copy, Debug)]
pub(super) struct Fd {
    from: VarId,
    to: VarId,
    /// Holds only while `to`'s column holds entity ids (`Value::Ref`) alone.
    refs_only: bool,
}

impl Ctx<'_> {
    /// The dependencies data pattern `clause` gives the rows it is about to join with `rel`
    /// (what `rel` binds before it), appended to `fds`. Nothing for other clauses, in the
    /// naive plan, or when the source does not promise its schema holds.
    pub(super) fn pattern_fds(
        &self,
        env: &Env<'_>,
        clause: &CClause,
        rel: &Rel,
        fds: &mut Vec<Fd>,
    ) {
        if self.limits.naive {
            return;
        }
        let CClause::Pattern { src, terms, span } = clause else {
            return;
        };
        let (CTerm::Var(e), CTerm::Const(a), CTerm::Var(v)) = (&terms[0], &terms[1], &terms[2])
        else {
            return;
        };
        if e == v {
            return;
        }
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
        if !attr.is_many() && !rel.has(*v) {
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

/// Whether dropping from `rel` every variable `keep` refuses leaves no two rows equal: the
/// rows are distinct now and the kept variables (with the query's scalar inputs, which hold
/// one value in every row) determine each dropped one through `fds`.
pub(super) fn drop_keeps_distinct(
    rel: &Rel,
    keep: impl Fn(VarId) -> bool,
    constant: impl Fn(VarId) -> bool,
    fds: &[Fd],
) -> bool {
    if !rel.distinct || fds.is_empty() {
        return false;
    }
    let mut known: Vec<VarId> = rel
        .vars
        .iter()
        .copied()
        .filter(|v| keep(*v) || constant(*v))
        .collect();
    let usable = |fd: &Fd| {
        !fd.refs_only
            || rel
                .col(fd.to)
                .is_some_and(|c| rel.rows().all(|r| matches!(r[c], Value::Ref(_))))
    };
    let mut checked: Vec<bool> = vec![false; fds.len()];
    loop {
        let mut grew = false;
        for (i, fd) in fds.iter().enumerate() {
            if checked[i] || !known.contains(&fd.from) || known.contains(&fd.to) {
                continue;
            }
            checked[i] = true;
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
