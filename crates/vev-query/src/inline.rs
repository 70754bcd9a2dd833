//! Rule inlining: a call in a query's `:where` to a rule that has one branch, is not
//! recursive and takes no required arguments is replaced by the rule's body, its head
//! variables by the call's and its other variables by fresh ones. The planner then orders
//! the body's clauses with the query's own instead of evaluating the rule as a table of its
//! own first, which for the MusicBrainz sample's `track-info` and `track-search` is most of
//! the query's cost.
//!
//! The answer cannot change: a rule's answers are the set of its head variables' bindings
//! the body allows; the inlined body allows the same bindings, and the fresh variables it
//! adds are projected away (and duplicates removed) before `:find`, aggregates and `:with`
//! see the rows. Only calls at the top of the `:where` (or at the top of an inlined body)
//! are inlined; a call inside `or`, `not` or another rule stays a call. A call with a
//! source (`($src r ?x)`) or a constant or source argument stays a call too, as does every
//! call once the inlined clauses would pass `MAX_CLAUSES`. The naive plan
//! (`Limits::naive`) never inlines, so it checks this rewriting.

use std::collections::{HashMap, HashSet};

use vev_datalog::ast::{Arg, BindElem, Binding, Clause, Pattern, Query, Rule, RuleVars, Term, Var};
use vev_edn::{Span, Symbol};

/// The most clauses inlining may add to a query: chains of rules that call others twice
/// would otherwise grow exponentially.
const MAX_CLAUSES: usize = 256;

/// The query with every call it can inline replaced by the rule's body; `None` when no call
/// can be.
pub(crate) fn inline_rules(query: &Query, rules: &[Rule]) -> Option<Query> {
    let mut by_name: HashMap<&Symbol, Vec<&Rule>> = HashMap::new();
    for r in rules {
        by_name.entry(&r.name).or_default().push(r);
    }
    let recursive = recursive_rules(&by_name);
    let mut inliner = Inliner {
        rules: &by_name,
        recursive: &recursive,
        added: 0,
        fresh: 0,
    };
    let mut clauses = Vec::with_capacity(query.clauses.len());
    let mut changed = false;
    for c in &query.clauses {
        changed |= inliner.clause(c.clone(), None, &mut clauses);
    }
    changed.then(|| Query {
        clauses,
        ..query.clone()
    })
}

struct Inliner<'r> {
    rules: &'r HashMap<&'r Symbol, Vec<&'r Rule>>,
    recursive: &'r HashSet<Symbol>,
    /// Clauses added so far (bodies inlined, less the calls they replaced).
    added: usize,
    /// Numbers the inlined calls, for fresh variable names.
    fresh: usize,
}

impl Inliner<'_> {
    /// Push `c` onto `out`, inlining it if it is a call that can be (its body's clauses
    /// take `site`, the span of the query's call they come from); whether any call was.
    fn clause(&mut self, c: Clause, site: Option<Span>, out: &mut Vec<Clause>) -> bool {
        let site = site.unwrap_or_else(|| c.span());
        let Some(body) = self.body_for(&c, site) else {
            out.push(c);
            return false;
        };
        for inner in body {
            self.clause(inner, Some(site), out);
        }
        true
    }

    /// The body that replaces `c`, renamed for this call and its spans set to `site`, if `c`
    /// is an inlinable call.
    fn body_for(&mut self, c: &Clause, site: Span) -> Option<Vec<Clause>> {
        let Clause::Rule {
            src: None,
            name,
            args,
            ..
        } = c
        else {
            return None;
        };
        let [rule] = self.rules.get(name)?.as_slice() else {
            return None;
        };
        if self.recursive.contains(name)
            || !rule.vars.required.is_empty()
            || rule.vars.free.len() != args.len()
            || args.iter().any(|a| !matches!(a, Arg::Var(_) | Arg::Blank))
            || self.added + rule.clauses.len() > MAX_CLAUSES
        {
            return None;
        }
        self.added += rule.clauses.len().saturating_sub(1);
        self.fresh += 1;
        let n = self.fresh;
        let mut names: HashMap<Symbol, Var> = HashMap::new();
        for (head, arg) in rule.vars.free.iter().zip(args) {
            let to = match arg {
                Arg::Var(v) => v.clone(),
                _ => fresh(head, name, n),
            };
            // A head variable written twice (`(r ?x ?x)`) keeps its first binding; the
            // parser rejects such heads, so this is only defensive.
            names.entry(head.0.clone()).or_insert(to);
        }
        let mut rename = |v: &Var| -> Var {
            names
                .entry(v.0.clone())
                .or_insert_with(|| fresh(v, name, n))
                .clone()
        };
        Some(
            rule.clauses
                .iter()
                .map(|cl| rename_clause(cl, &mut rename, site))
                .collect(),
        )
    }
}

/// A variable no query can write: its name holds a space.
fn fresh(v: &Var, rule: &Symbol, n: usize) -> Var {
    Var(Symbol::new(&format!("{} in {}#{}", v.name(), rule, n)))
}

/// The rules that reach themselves through their calls (anywhere in their bodies).
fn recursive_rules(rules: &HashMap<&Symbol, Vec<&Rule>>) -> HashSet<Symbol> {
    let mut calls: HashMap<&Symbol, HashSet<Symbol>> = HashMap::new();
    for (name, branches) in rules {
        let mut called = HashSet::new();
        for b in branches {
            for c in &b.clauses {
                called_rules(c, &mut called);
            }
        }
        calls.insert(*name, called);
    }
    let mut recursive = HashSet::new();
    for start in rules.keys() {
        let mut seen: HashSet<&Symbol> = HashSet::new();
        let mut stack: Vec<&Symbol> = calls[start].iter().collect();
        while let Some(n) = stack.pop() {
            if n == *start {
                recursive.insert((*start).clone());
                break;
            }
            if seen.insert(n) {
                if let Some(next) = calls.get(n) {
                    stack.extend(next.iter());
                }
            }
        }
    }
    recursive
}

fn called_rules(c: &Clause, out: &mut HashSet<Symbol>) {
    match c {
        Clause::Rule { name, .. } => {
            out.insert(name.clone());
        }
        Clause::Not { clauses, .. } => clauses.iter().for_each(|c| called_rules(c, out)),
        Clause::Or { branches, .. } => branches.iter().flatten().for_each(|c| called_rules(c, out)),
        Clause::Pattern(_) | Clause::Pred { .. } | Clause::Fn { .. } => {}
    }
}

/// `c` with its variables renamed by `f` and its spans, its parts' too, set to `span` (the
/// call it is inlined for), so that errors and `explain` point at the query's text.
fn rename_clause(c: &Clause, f: &mut impl FnMut(&Var) -> Var, span: Span) -> Clause {
    let args = |args: &[Arg], f: &mut dyn FnMut(&Var) -> Var| -> Vec<Arg> {
        args.iter()
            .map(|a| match a {
                Arg::Var(v) => Arg::Var(f(v)),
                other => other.clone(),
            })
            .collect()
    };
    match c {
        Clause::Pattern(p) => Clause::Pattern(Pattern {
            src: p.src.clone(),
            terms: p.terms.clone().map(|t| match t {
                Term::Var(v) => Term::Var(f(&v)),
                other => other,
            }),
            span,
        }),
        Clause::Pred { name, args: a, .. } => Clause::Pred {
            name: name.clone(),
            args: args(a, f),
            span,
        },
        Clause::Fn {
            name,
            args: a,
            binding,
            ..
        } => Clause::Fn {
            name: name.clone(),
            args: args(a, f),
            binding: rename_binding(binding, f),
            span,
        },
        Clause::Not {
            src, vars, clauses, ..
        } => Clause::Not {
            src: src.clone(),
            vars: vars.as_ref().map(|vs| vs.iter().map(&mut *f).collect()),
            clauses: clauses.iter().map(|c| rename_clause(c, f, span)).collect(),
            span,
        },
        Clause::Or {
            src,
            vars,
            branches,
            ..
        } => Clause::Or {
            src: src.clone(),
            vars: vars.as_ref().map(|rv| RuleVars {
                required: rv.required.iter().map(&mut *f).collect(),
                free: rv.free.iter().map(&mut *f).collect(),
            }),
            branches: branches
                .iter()
                .map(|b| b.iter().map(|c| rename_clause(c, f, span)).collect())
                .collect(),
            span,
        },
        Clause::Rule {
            src, name, args: a, ..
        } => Clause::Rule {
            src: src.clone(),
            name: name.clone(),
            args: args(a, f),
            span,
        },
    }
}

fn rename_binding(b: &Binding, f: &mut impl FnMut(&Var) -> Var) -> Binding {
    let elem = |e: &BindElem, f: &mut dyn FnMut(&Var) -> Var| match e {
        BindElem::Var(v) => BindElem::Var(f(v)),
        BindElem::Blank => BindElem::Blank,
    };
    match b {
        Binding::Scalar(v) => Binding::Scalar(f(v)),
        Binding::Tuple(es) => Binding::Tuple(es.iter().map(|e| elem(e, f)).collect()),
        Binding::Coll(e) => Binding::Coll(elem(e, f)),
        Binding::Rel(es) => Binding::Rel(es.iter().map(|e| elem(e, f)).collect()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The query's `:where` after inlining, as the names of its clauses' kinds and rules:
    /// `p` a pattern, `f` a function or predicate, `not`, `or`, or the rule's name.
    fn inlined(query: &str, rules: &str) -> Option<Vec<String>> {
        let q = vev_datalog::parse_query(query).unwrap();
        let r = vev_datalog::parse_rules(rules).unwrap();
        inline_rules(&q, &r).map(|q| {
            q.clauses
                .iter()
                .map(|c| match c {
                    Clause::Pattern(_) => "p".to_owned(),
                    Clause::Pred { .. } | Clause::Fn { .. } => "f".to_owned(),
                    Clause::Not { .. } => "not".to_owned(),
                    Clause::Or { .. } => "or".to_owned(),
                    Clause::Rule { name, .. } => name.to_string(),
                })
                .collect()
        })
    }

    const RULES: &str = "[[(one ?a ?b) [?a :x ?m] [?m :y ?b]]
        [(outer ?a ?b) (one ?a ?c) [?c :z ?b]]
        [(two ?a ?b) [?a :x ?b]] [(two ?a ?b) [?a :y ?b]]
        [(rec ?a ?b) [?a :x ?b]] [(rec ?a ?b) [?a :x ?c] (rec ?c ?b)]
        [(ping ?a) (pong ?a)] [(pong ?a) [?a :x ?b] (ping ?b)]
        [(req [?a] ?b) [?a :x ?b]]
        [(via-rec ?a ?b) (rec ?a ?b) [?b :y ?c]]]";

    #[test]
    fn one_branch_rules_inline_nested_ones_too() {
        let q = "[:find ?x :in $ % :where (outer ?e ?x) [?e :n ?x]]";
        assert_eq!(inlined(q, RULES).unwrap(), ["p", "p", "p", "p"]);
    }

    #[test]
    fn calls_that_stay_calls() {
        for q in [
            "[:find ?x :in $ % :where (two ?e ?x)]",
            "[:find ?x :in $ % :where (rec ?e ?x)]",
            "[:find ?x :in $ % :where (ping ?x)]",
            "[:find ?x :in $ % :where [?e :n 1] (req ?e ?x)]",
            "[:find ?x :in $ % :where ($ one ?e ?x)]",
            "[:find ?x :in $ % :where (one 5 ?x)]",
            "[:find ?x :in $ % :where (or (one ?e ?x) [?e :n ?x])]",
            "[:find ?x :in $ % :where (not (one ?x 1)) [?x :n 1]]",
            "[:find ?x :in $ % :where (unknown ?x)]",
            "[:find ?x :in $ % :where (one ?x)]",
        ] {
            assert_eq!(inlined(q, RULES), None, "{q}");
        }
        // A body's own recursive call stays a call.
        let q = "[:find ?x :in $ % :where (via-rec ?e ?x)]";
        assert_eq!(inlined(q, RULES).unwrap(), ["rec", "p"]);
    }

    #[test]
    fn body_variables_are_renamed_apart_per_call() {
        let q =
            vev_datalog::parse_query("[:find ?b :in $ % :where (one ?b ?m) (one ?m _)]").unwrap();
        let r = vev_datalog::parse_rules(RULES).unwrap();
        let out = inline_rules(&q, &r).unwrap();
        let vars: Vec<String> = out
            .clauses
            .iter()
            .flat_map(|c| match c {
                Clause::Pattern(p) => p.terms.to_vec(),
                _ => Vec::new(),
            })
            .filter_map(|t| match t {
                Term::Var(v) => Some(v.name().to_owned()),
                _ => None,
            })
            .collect();
        assert_eq!(
            vars,
            [
                "?b",
                "?m in one#1",
                "?m in one#1",
                "?m",
                "?m",
                "?m in one#2",
                "?m in one#2",
                "?b in one#2"
            ]
        );
    }

    #[test]
    fn inlining_stops_at_the_clause_budget() {
        // Each level calls the one below twice: 2^10 patterns if all were inlined.
        let mut rules = String::from("[[(r0 ?a ?b) [?a :x ?b]]");
        for i in 1..=10 {
            rules.push_str(&format!(
                "[(r{i} ?a ?b) (r{p} ?a ?c) (r{p} ?c ?b)]",
                p = i - 1
            ));
        }
        rules.push(']');
        let out = inlined("[:find ?x :in $ % :where (r10 ?e ?x)]", &rules).unwrap();
        assert!(out.len() <= MAX_CLAUSES + 1, "{}", out.len());
        assert!(out.iter().any(|c| c != "p"), "some calls stay calls");
    }
}
