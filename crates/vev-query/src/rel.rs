//! Relations: the bindings that flow between clauses, as compact rows.
//!
//! A [`Rel`] is a list of variables and a flat `Vec<Value>` holding `len` rows of
//! `vars.len()` values each. Clauses extend, filter and join relations; a variable that no
//! later clause needs is projected away (and the rows deduplicated, since query results are
//! sets over the find and `:with` variables).

use std::collections::HashSet;

use vev_core::Value;

/// A variable of a compiled query scope.
pub(crate) type VarId = usize;

#[derive(Clone, Debug, Default)]
pub(crate) struct Rel {
    pub vars: Vec<VarId>,
    pub data: Vec<Value>,
    pub len: usize,
}

impl Rel {
    /// The relation with no variables and one (empty) row: the identity of joins.
    pub fn unit() -> Rel {
        Rel {
            vars: Vec::new(),
            data: Vec::new(),
            len: 1,
        }
    }

    pub fn empty(vars: Vec<VarId>) -> Rel {
        Rel {
            vars,
            data: Vec::new(),
            len: 0,
        }
    }

    pub fn width(&self) -> usize {
        self.vars.len()
    }

    pub fn col(&self, var: VarId) -> Option<usize> {
        self.vars.iter().position(|v| *v == var)
    }

    pub fn has(&self, var: VarId) -> bool {
        self.vars.contains(&var)
    }

    pub fn row(&self, i: usize) -> &[Value] {
        let w = self.width();
        &self.data[i * w..(i + 1) * w]
    }

    pub fn rows(&self) -> impl Iterator<Item = &[Value]> {
        (0..self.len).map(move |i| self.row(i))
    }

    pub fn push_row(&mut self, row: &[Value]) {
        debug_assert_eq!(row.len(), self.width());
        self.data.extend_from_slice(row);
        self.len += 1;
    }

    /// Keep only the rows for which `keep` holds.
    pub fn retain(&mut self, mut keep: impl FnMut(&[Value]) -> bool) {
        let w = self.width();
        if w == 0 {
            if self.len > 0 && !keep(&[]) {
                self.len = 0;
            }
            return;
        }
        let mut out = Vec::with_capacity(self.data.len());
        let mut len = 0;
        for row in self.data.chunks(w) {
            if keep(row) {
                out.extend_from_slice(row);
                len += 1;
            }
        }
        self.data = out;
        self.len = len;
    }

    /// The relation over `vars` (a subset of this one's), deduplicated.
    pub fn project(&self, vars: &[VarId]) -> Rel {
        let cols: Vec<usize> = vars
            .iter()
            .map(|v| self.col(*v).expect("projected variable is bound"))
            .collect();
        let mut out = Rel::empty(vars.to_vec());
        if vars.is_empty() {
            out.len = usize::from(self.len > 0);
            return out;
        }
        let mut seen: HashSet<Vec<Value>> = HashSet::with_capacity(self.len);
        for row in self.rows() {
            let key: Vec<Value> = cols.iter().map(|c| row[*c].clone()).collect();
            if !seen.contains(&key) {
                out.push_row(&key);
                seen.insert(key);
            }
        }
        out
    }

    /// Drop the variables not in `keep`, deduplicating when any is dropped.
    pub fn retain_vars(self, keep: impl Fn(VarId) -> bool) -> Rel {
        if self.vars.iter().all(|v| keep(*v)) {
            return self;
        }
        let vars: Vec<VarId> = self.vars.iter().copied().filter(|v| keep(*v)).collect();
        self.project(&vars)
    }

    /// Remove duplicate rows, keeping the first of each.
    pub fn dedup(self) -> Rel {
        let vars = self.vars.clone();
        self.project(&vars)
    }

    /// The natural join of two relations (hash join on their shared variables; a cross
    /// product when they share none).
    pub fn join(&self, other: &Rel) -> Rel {
        let shared: Vec<VarId> = self
            .vars
            .iter()
            .copied()
            .filter(|v| other.has(*v))
            .collect();
        let extra: Vec<usize> = (0..other.width())
            .filter(|c| !self.has(other.vars[*c]))
            .collect();
        let mut vars = self.vars.clone();
        vars.extend(extra.iter().map(|c| other.vars[*c]));
        let mut out = Rel::empty(vars);
        let (build, probe, build_is_other) = if other.len <= self.len {
            (other, self, true)
        } else {
            (self, other, false)
        };
        let build_cols: Vec<usize> = shared.iter().map(|v| build.col(*v).unwrap()).collect();
        let probe_cols: Vec<usize> = shared.iter().map(|v| probe.col(*v).unwrap()).collect();
        let mut table: std::collections::HashMap<Vec<Value>, Vec<usize>> =
            std::collections::HashMap::with_capacity(build.len);
        for (i, row) in build.rows().enumerate() {
            let key = build_cols.iter().map(|c| row[*c].clone()).collect();
            table.entry(key).or_default().push(i);
        }
        let mut row_buf: Vec<Value> = Vec::with_capacity(out.width());
        for (j, prow) in probe.rows().enumerate() {
            let key: Vec<Value> = probe_cols.iter().map(|c| prow[*c].clone()).collect();
            let Some(matches) = table.get(&key) else {
                continue;
            };
            for &i in matches {
                let (left, right) = if build_is_other { (j, i) } else { (i, j) };
                let (lrow, rrow) = (self.row(left), other.row(right));
                row_buf.clear();
                row_buf.extend_from_slice(lrow);
                row_buf.extend(extra.iter().map(|c| rrow[*c].clone()));
                out.push_row(&row_buf);
            }
        }
        out
    }

    /// Append the rows of `other`, which has the same variables in any order.
    pub fn union_in(&mut self, other: &Rel) {
        let cols: Vec<usize> = self
            .vars
            .iter()
            .map(|v| other.col(*v).expect("union over the same variables"))
            .collect();
        for row in other.rows() {
            for c in &cols {
                self.data.push(row[*c].clone());
            }
            self.len += 1;
        }
    }
}
