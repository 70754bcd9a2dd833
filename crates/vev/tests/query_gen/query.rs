//! Random queries over the generated schema.
//!
//! Variables: `?a` (always an entity) and `?b ?c ?d` (each of a random type), plus fresh ones
//! for function results (`?fN`, `?gN`) and for the locals of `not-join`/`or-join` (`?lN`, or a
//! pool name the construct does not join on, shadowing the outer one). In order:
//! - 0 to 2 inputs: scalar, collection or relation bindings of pool variables;
//! - 1 to 5 patterns, each sharing a variable with an earlier one (so that no plan meets a
//!   large cross product), with variables, constants or `_` in entity and value positions;
//!   in the full dialect also transaction and added positions, an attribute variable, or a
//!   constant of the wrong type;
//! - maybe a rule call (`RULES`), an `or`/`or-join` of two branches and a `ground`, inserted
//!   among the patterns;
//! - function calls (`+`, `str`, `missing?`, `get-else`), predicates (`<` `>` `<=` `>=` `=`
//!   `!=` between a variable and a constant or two variables of one type) and `not` (a
//!   pattern, an `or` or a rule call) / `not-join` over bound variables, inserted anywhere;
//! - `:find`: a relation, a collection, or aggregates (`count`, `count-distinct`, `sum`,
//!   `min`, `max`) grouped by 0 to 2 variables, as a relation, scalar or tuple, maybe `:with`.

use std::collections::BTreeMap;

use super::{Attr, Tape, Ty, Val, AGES, KINDS, NAMES, TAGS};

/// The rule set passed as `%` to queries that call a rule.
/// `follows`: transitive closure; `odd`/`even`: paths of odd and even length (mutual
/// recursion); `tagged`: two branches; `older`: a required first argument and a predicate,
/// with body variables named like the callers'; `elder`: the same without the requirement;
/// `kin`: one branch calling `elder`, with a variable of its own (the planned run inlines
/// `elder` and `kin` into the query, the naive one calls them).
pub const RULES: &str = "[[(follows ?x ?y) [?x :follows ?y]]
  [(follows ?x ?y) [?x :follows ?z] (follows ?z ?y)]
  [(odd ?x ?y) [?x :follows ?y]]
  [(odd ?x ?y) [?x :follows ?z] (even ?z ?y)]
  [(even ?x ?y) [?x :follows ?z] (odd ?z ?y)]
  [(tagged ?e ?v) [?e :tag ?v]]
  [(tagged ?e ?v) [?e :age ?v]]
  [(older [?x] ?y) [?x :age ?a] [?y :age ?b] [(> ?a ?b)]]
  [(elder ?x ?y) [?x :age ?a] [?y :age ?b] [(> ?a ?b)]]
  [(kin ?x ?y) (elder ?x ?y) [?y :tag ?a]]]";

/// Which features to generate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dialect {
    /// Everything, for comparing Vev with itself.
    Full,
    /// What DataScript is known to do as Datomic does: no transaction or added positions
    /// (ids differ between engines), no ordering of entity ids (each engine numbers entities
    /// its own way), no function result bound to an already-bound variable, and no variable
    /// twice in one clause (DataScript 1.8.1 does not unify `[?a :follows ?a]` or
    /// `(follows ?a ?a)`, tonsky/datascript#240, and rejects `[(!= ?a ?a)]`), no rule with
    /// required variables (DataScript ignores the join on them, tonsky/datascript#441), and no
    /// mutually recursive rules (`odd`/`even`: DataScript takes minutes on some of them).
    DataScript,
}

#[derive(Clone, Debug)]
pub enum Term {
    Var(String),
    Blank,
    Val(Val),
}

#[derive(Clone, Debug)]
pub enum Clause {
    Pattern(Vec<Term>),
    Pred(&'static str, Term, Term),
    /// `[(+ ?x n) ?out]`
    Plus(String, i64, String),
    /// `[(str ?x "x") ?out]`
    Str(String, String),
    /// `[(ground [...]) [?out ...]]`
    Ground(Vec<i64>, String),
    /// `[(missing? $ ?x :attr)]`
    Missing(String, Attr),
    /// `[(get-else $ ?x :attr default) ?out]`
    GetElse(String, Attr, Val, String),
    Not(Vec<Clause>),
    NotJoin(Vec<String>, Vec<Clause>),
    Or(Vec<Vec<Clause>>),
    OrJoin(Vec<String>, Vec<Vec<Clause>>),
    Rule(&'static str, Term, Term),
}

impl Clause {
    /// The variables that must be bound before the clause can run (in Datomic and DataScript,
    /// which run clauses in written order).
    fn inputs(&self) -> Vec<String> {
        match self {
            Clause::Pred(_, x, y) => [x, y].into_iter().filter_map(var).collect(),
            Clause::Plus(x, _, _)
            | Clause::Str(x, _)
            | Clause::Missing(x, _)
            | Clause::GetElse(x, ..) => {
                vec![x.clone()]
            }
            Clause::Not(body) => body.iter().flat_map(Clause::vars).collect(),
            Clause::NotJoin(join, _) => join.clone(),
            Clause::Rule("older", x, _) => var(x).into_iter().collect(),
            _ => Vec::new(),
        }
    }

    fn calls_rule(&self) -> bool {
        match self {
            Clause::Rule(..) => true,
            Clause::Not(body) | Clause::NotJoin(_, body) => body.iter().any(Clause::calls_rule),
            Clause::Or(branches) | Clause::OrJoin(_, branches) => {
                branches.iter().flatten().any(Clause::calls_rule)
            }
            _ => false,
        }
    }

    /// Every variable the clause mentions.
    fn vars(&self) -> Vec<String> {
        match self {
            Clause::Pattern(terms) => terms.iter().filter_map(var).collect(),
            Clause::Pred(_, x, y) | Clause::Rule(_, x, y) => {
                [x, y].into_iter().filter_map(var).collect()
            }
            Clause::Plus(x, _, o) | Clause::Str(x, o) | Clause::GetElse(x, _, _, o) => {
                vec![x.clone(), o.clone()]
            }
            Clause::Missing(x, _) => vec![x.clone()],
            Clause::Ground(_, o) => vec![o.clone()],
            Clause::Not(body) => body.iter().flat_map(Clause::vars).collect(),
            Clause::Or(branches) => branches.iter().flatten().flat_map(Clause::vars).collect(),
            Clause::NotJoin(join, _) | Clause::OrJoin(join, _) => join.clone(),
        }
    }

    fn render(&self, ids: &[u64], out: &mut String) {
        let t = |term: &Term| match term {
            Term::Var(v) => v.clone(),
            Term::Blank => "_".to_owned(),
            Term::Val(v) => v.render(ids),
        };
        let body = |clauses: &[Clause], out: &mut String| {
            for c in clauses {
                out.push(' ');
                c.render(ids, out);
            }
        };
        let branch = |clauses: &[Clause], out: &mut String| {
            if clauses.len() == 1 {
                body(clauses, out);
            } else {
                out.push_str(" (and");
                body(clauses, out);
                out.push(')');
            }
        };
        match self {
            Clause::Pattern(terms) => {
                let terms: Vec<String> = terms.iter().map(t).collect();
                out.push_str(&format!("[{}]", terms.join(" ")));
            }
            Clause::Pred(op, x, y) => out.push_str(&format!("[({op} {} {})]", t(x), t(y))),
            Clause::Plus(x, n, o) => out.push_str(&format!("[(+ {x} {n}) {o}]")),
            Clause::Str(x, o) => out.push_str(&format!("[(str {x} \"x\") {o}]")),
            Clause::Ground(ns, o) => {
                let ns: Vec<String> = ns.iter().map(|n| n.to_string()).collect();
                out.push_str(&format!("[(ground [{}]) [{o} ...]]", ns.join(" ")));
            }
            Clause::Missing(x, a) => out.push_str(&format!("[(missing? $ {x} :{})]", a.ident())),
            Clause::GetElse(x, a, d, o) => out.push_str(&format!(
                "[(get-else $ {x} :{} {}) {o}]",
                a.ident(),
                d.render(ids)
            )),
            Clause::Rule(name, x, y) => out.push_str(&format!("({name} {} {})", t(x), t(y))),
            Clause::Not(clauses) => {
                out.push_str("(not");
                body(clauses, out);
                out.push(')');
            }
            Clause::NotJoin(join, clauses) => {
                out.push_str(&format!("(not-join [{}]", join.join(" ")));
                body(clauses, out);
                out.push(')');
            }
            Clause::Or(branches) => {
                out.push_str("(or");
                branches.iter().for_each(|b| branch(b, out));
                out.push(')');
            }
            Clause::OrJoin(join, branches) => {
                out.push_str(&format!("(or-join [{}]", join.join(" ")));
                branches.iter().for_each(|b| branch(b, out));
                out.push(')');
            }
        }
    }
}

fn var(term: &Term) -> Option<String> {
    match term {
        Term::Var(v) => Some(v.clone()),
        _ => None,
    }
}

#[derive(Clone, Debug)]
pub enum FindElem {
    Var(String),
    Agg(&'static str, String),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    Rel,
    Coll,
    Scalar,
    Tuple,
}

/// An input after `$` (and `%`): a scalar `?x`, a collection `[?x ...]` or a relation
/// `[[?x ?y]]`, with its rows (one row of one value for a scalar, one value per row for a
/// collection).
#[derive(Clone, Debug)]
pub struct InputSpec {
    pub vars: Vec<String>,
    pub form: InputForm,
    pub rows: Vec<Vec<Val>>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InputForm {
    Scalar,
    Coll,
    Rel,
}

#[derive(Clone, Debug)]
pub struct QuerySpec {
    pub find: Vec<FindElem>,
    pub shape: Shape,
    pub with: Vec<String>,
    pub inputs: Vec<InputSpec>,
    pub rules: bool,
    pub clauses: Vec<Clause>,
    pub types: BTreeMap<String, Ty>,
}

impl QuerySpec {
    /// A random query over a database of `entities` entities.
    pub fn generate(tape: &mut Tape<'_>, entities: usize, dialect: Dialect) -> QuerySpec {
        let mut g = Gen {
            tape,
            dialect,
            entities,
            types: BTreeMap::new(),
            bound: Vec::new(),
            fresh: 0,
        };
        g.types.insert("?a".into(), Ty::Ent);
        for v in ["?b", "?c", "?d"] {
            let ty = g
                .tape
                .item(&[Ty::Ent, Ty::Ent, Ty::Long, Ty::Long, Ty::Str, Ty::Kw]);
            g.types.insert(v.into(), ty);
        }
        let inputs = g.inputs();
        let mut clauses = g.generators();
        let filters = g.filters();
        let rules = clauses.iter().chain(&filters).any(Clause::calls_rule);
        for filter in filters {
            let at = clauses.len() - g.tape.pick(clauses.len() + 1);
            clauses.insert(at, filter);
        }
        let (find, shape, with) = g.find();
        QuerySpec {
            find,
            shape,
            with,
            inputs,
            rules,
            clauses,
            types: g.types,
        }
    }

    /// The query text, clauses in generated order (filters anywhere); entity `i` is `ids[i]`.
    pub fn text(&self, ids: &[u64]) -> String {
        self.render(ids, &self.clauses)
    }

    /// The query text with each filter moved after the clauses that bind its inputs, as
    /// Datomic and DataScript require (they run clauses in written order).
    pub fn text_in_binding_order(&self, ids: &[u64]) -> String {
        let mut bound: Vec<String> = self.inputs.iter().flat_map(|i| i.vars.clone()).collect();
        let mut left: Vec<&Clause> = self.clauses.iter().collect();
        let mut ordered = Vec::new();
        while !left.is_empty() {
            let ready = left
                .iter()
                .position(|c| c.inputs().iter().all(|v| bound.contains(v)))
                .expect("every filter's inputs are bound by some clause");
            let c = left.remove(ready);
            bound.extend(c.vars());
            ordered.push(c.clone());
        }
        self.render(ids, &ordered)
    }

    fn render(&self, ids: &[u64], clauses: &[Clause]) -> String {
        let elem = |e: &FindElem| match e {
            FindElem::Var(v) => v.clone(),
            FindElem::Agg(f, v) => format!("({f} {v})"),
        };
        let elems: Vec<String> = self.find.iter().map(elem).collect();
        let mut out = match self.shape {
            Shape::Rel => format!("[:find {}", elems.join(" ")),
            Shape::Coll => format!("[:find [{} ...]", elems[0]),
            Shape::Scalar => format!("[:find {} .", elems[0]),
            Shape::Tuple => format!("[:find [{}]", elems.join(" ")),
        };
        if !self.with.is_empty() {
            out.push_str(&format!(" :with {}", self.with.join(" ")));
        }
        out.push_str(" :in $");
        if self.rules {
            out.push_str(" %");
        }
        for input in &self.inputs {
            let vars = input.vars.join(" ");
            out.push_str(&match input.form {
                InputForm::Scalar => format!(" {vars}"),
                InputForm::Coll => format!(" [{vars} ...]"),
                InputForm::Rel => format!(" [[{vars}]]"),
            });
        }
        out.push_str(" :where");
        for c in clauses {
            out.push_str("\n ");
            c.render(ids, &mut out);
        }
        out.push(']');
        out
    }

    /// The inputs after `$`, as EDN: the rule set (if any), then the values.
    pub fn input_edns(&self, ids: &[u64]) -> Vec<String> {
        let mut out = Vec::new();
        if self.rules {
            out.push(RULES.to_owned());
        }
        for input in &self.inputs {
            let rows: Vec<Vec<String>> = input
                .rows
                .iter()
                .map(|r| r.iter().map(|v| v.render(ids)).collect())
                .collect();
            out.push(match input.form {
                InputForm::Scalar => rows[0][0].clone(),
                InputForm::Coll => format!(
                    "[{}]",
                    rows.iter()
                        .map(|r| r[0].clone())
                        .collect::<Vec<_>>()
                        .join(" ")
                ),
                InputForm::Rel => {
                    let rows: Vec<String> =
                        rows.iter().map(|r| format!("[{}]", r.join(" "))).collect();
                    format!("[{}]", rows.join(" "))
                }
            });
        }
        out
    }

    /// The type of each `:find` column.
    pub fn column_types(&self) -> Vec<Ty> {
        self.find
            .iter()
            .map(|e| match e {
                FindElem::Var(v) | FindElem::Agg("min" | "max", v) => self.types[v],
                FindElem::Agg(..) => Ty::Long,
            })
            .collect()
    }
}

struct Gen<'g, 't> {
    tape: &'g mut Tape<'t>,
    dialect: Dialect,
    entities: usize,
    types: BTreeMap<String, Ty>,
    /// Variables of the query's scope bound so far, in binding order.
    bound: Vec<String>,
    fresh: usize,
}

impl Gen<'_, '_> {
    fn full(&self) -> bool {
        self.dialect == Dialect::Full
    }

    fn bind(&mut self, v: &str) {
        if !self.bound.iter().any(|b| b == v) {
            self.bound.push(v.to_owned());
        }
    }

    fn fresh(&mut self, prefix: &str, ty: Ty) -> String {
        let name = format!("?{prefix}{}", self.fresh);
        self.fresh += 1;
        self.types.insert(name.clone(), ty);
        name
    }

    /// A variable of type `ty`: a bound one, or (unless `bound_only`) any pool variable.
    fn var_of(&mut self, ty: Ty, bound_only: bool) -> Option<String> {
        let pool = ["?a", "?b", "?c", "?d"];
        let candidates: Vec<String> = self
            .types
            .iter()
            .filter(|(v, t)| {
                **t == ty && (self.bound.contains(v) || (!bound_only && pool.contains(&v.as_str())))
            })
            .map(|(v, _)| v.clone())
            .collect();
        (!candidates.is_empty()).then(|| self.tape.item(&candidates))
    }

    fn constant(&mut self, ty: Ty) -> Val {
        let all: Vec<usize> = (0..self.entities).collect();
        match ty {
            Ty::Ent => Val::Ent(self.tape.item(&all)),
            Ty::Str => Val::Str(self.tape.item(&NAMES)),
            Ty::Long => Val::Long(self.tape.pick(AGES.max(TAGS)) as i64),
            Ty::Kw => Val::Kw(self.tape.item(&KINDS)),
            Ty::Tx | Ty::Bool | Ty::Any => Val::Bool(self.tape.chance(50)),
        }
    }

    /// A value `attr` can have.
    fn value(&mut self, attr: Attr) -> Val {
        let all: Vec<usize> = (0..self.entities).collect();
        Val::of_attr(self.tape, attr, &all)
    }

    fn inputs(&mut self) -> Vec<InputSpec> {
        let count = match self.tape.chance(35) {
            true => 1 + usize::from(self.tape.chance(30)),
            false => 0,
        };
        let mut out: Vec<InputSpec> = Vec::new();
        for _ in 0..count {
            let form = self
                .tape
                .item(&[InputForm::Scalar, InputForm::Coll, InputForm::Rel]);
            let mut free: Vec<&str> = ["?b", "?c", "?d"]
                .into_iter()
                .filter(|v| !out.iter().any(|i| i.vars.iter().any(|x| x == v)))
                .collect();
            let width = if form == InputForm::Rel { 2 } else { 1 };
            if free.len() < width {
                continue;
            }
            let vars: Vec<String> = (0..width)
                .map(|_| free.remove(self.tape.pick(free.len())).to_owned())
                .collect();
            let height = if form == InputForm::Scalar {
                1
            } else {
                1 + self.tape.pick(3)
            };
            let tys: Vec<Ty> = vars.iter().map(|v| self.types[v]).collect();
            let rows = (0..height)
                .map(|_| tys.iter().map(|ty| self.constant(*ty)).collect())
                .collect();
            for v in &vars {
                self.bind(v);
            }
            out.push(InputSpec { vars, form, rows });
        }
        out
    }

    /// Patterns, with maybe a rule call, an `or` and a `ground` among them.
    fn generators(&mut self) -> Vec<Clause> {
        let mut out = vec![self.pattern(true)];
        for _ in 0..self.tape.pick(5) {
            out.push(self.pattern(false));
        }
        let mut extra = Vec::new();
        if self.tape.chance(30) {
            extra.push(self.rule_call());
        }
        if self.tape.chance(30) {
            extra.push(self.or_clause());
        }
        if self.tape.chance(10) {
            extra.push(self.ground());
        }
        for c in extra {
            let at = out.len() - self.tape.pick(out.len() + 1);
            out.insert(at, c);
        }
        out
    }

    /// A pattern; unless `first`, it shares a variable with what is bound already.
    fn pattern(&mut self, first: bool) -> Clause {
        let attr = self.tape.item(&Attr::ALL);
        let mut e = if first {
            Term::Var("?a".into())
        } else if self.tape.chance(6) {
            Term::Val(self.constant(Ty::Ent))
        } else {
            self.var_of(Ty::Ent, false).map_or(Term::Blank, Term::Var)
        };
        let mut v = match self.tape.pick(7) {
            0..=3 => Term::Var(
                self.var_of(attr.ty(), false)
                    .unwrap_or_else(|| self.fresh("v", attr.ty())),
            ),
            4 | 5 => Term::Blank,
            _ => Term::Val(self.value(attr)),
        };
        if self.full() && self.tape.chance(4) {
            // A constant of another type than the attribute's: matches nothing.
            let ty = self.tape.item(&[Ty::Str, Ty::Long, Ty::Kw, Ty::Ent]);
            v = Term::Val(self.constant(ty));
        }
        let connected = [&e, &v]
            .into_iter()
            .filter_map(var)
            .any(|x| self.bound.contains(&x));
        if !first && !connected {
            e = Term::Var(
                self.var_of(Ty::Ent, true)
                    .expect("?a is bound by the first pattern"),
            );
        }
        if self.dialect == Dialect::DataScript && var(&e).is_some() && var(&e) == var(&v) {
            v = Term::Blank;
        }
        let mut terms = vec![e, Term::Val(Val::Kw(attr.ident())), v];
        if self.full() && !first && self.tape.chance(5) {
            // Any attribute: values of every type, system datoms too when ?a is unbound.
            let x = self.var_of(Ty::Ent, true).expect("?a is bound");
            self.types.insert("?at".into(), Ty::Any);
            self.types.insert("?any".into(), Ty::Any);
            let v = match self.tape.chance(50) {
                true => Term::Var("?any".into()),
                false => Term::Blank,
            };
            terms = vec![Term::Var(x), Term::Var("?at".into()), v];
        }
        if self.full() && self.tape.chance(10) {
            terms.push(match self.tape.chance(70) {
                true => Term::Var("?tx".into()),
                false => Term::Blank,
            });
            if self.tape.chance(50) {
                terms.push(match self.tape.chance(60) {
                    true => Term::Var("?op".into()),
                    false => Term::Val(Val::Bool(self.tape.chance(50))),
                });
            }
        }
        self.types.insert("?tx".into(), Ty::Tx);
        self.types.insert("?op".into(), Ty::Bool);
        for x in terms.iter().filter_map(var) {
            self.bind(&x);
        }
        Clause::Pattern(terms)
    }

    fn rule_call(&mut self) -> Clause {
        let names: &[&'static str] = match self.dialect {
            Dialect::Full => &[
                "follows", "follows", "tagged", "odd", "even", "older", "elder", "kin",
            ],
            Dialect::DataScript => &["follows", "follows", "tagged", "elder", "kin"],
        };
        let name = self.tape.item(names);
        let ty = if name == "tagged" { Ty::Long } else { Ty::Ent };
        // Sometimes a call that nothing binds: the whole relation, which linear rules get
        // from `closure.rs` (and the others from unseeded tables with kept prefixes).
        if name != "older" && self.tape.chance(25) {
            let (x, y) = (self.fresh("w", Ty::Ent), self.fresh("w", ty));
            self.bind(&x);
            self.bind(&y);
            return Clause::Rule(name, Term::Var(x), Term::Var(y));
        }
        let x = Term::Var(self.var_of(Ty::Ent, true).expect("?a is bound"));
        let mut y = match self.tape.chance(20) {
            true => Term::Val(self.constant(ty)),
            false => self
                .var_of(ty, false)
                .map_or_else(|| Term::Var(self.fresh("f", ty)), Term::Var),
        };
        if self.dialect == Dialect::DataScript && var(&y).as_ref() == var(&x).as_ref() {
            y = Term::Var(self.fresh("f", ty));
        }
        if let Term::Var(v) = &y {
            self.bind(&v.clone());
        }
        // `older` requires its first argument bound: it stays the bound variable.
        match name != "tagged" && name != "older" && self.tape.chance(50) {
            true => Clause::Rule(name, y, x),
            false => Clause::Rule(name, x, y),
        }
    }

    /// `(or ...)` or `(or-join [...] ...)` with two branches over an entity variable that is
    /// bound and maybe a value variable of one attribute type (which the second branch may
    /// leave out when it is bound outside the `or`).
    fn or_clause(&mut self) -> Clause {
        let join = self.tape.chance(50);
        let x = self.var_of(Ty::Ent, true).expect("?a is bound");
        let ty = self.tape.item(&[Ty::Long, Ty::Ent, Ty::Str, Ty::Kw]);
        let y = match self.tape.chance(50) {
            true => self.var_of(ty, false).filter(|y| *y != x),
            false => None,
        };
        // A branch may leave out a value variable bound outside the `or` (Datomic's rule is
        // the same *free* variables); only in the full dialect, as DataScript checks this in
        // written order and the `or` may be inserted before the clause that binds it.
        let skip_y = self.full()
            && y.as_ref().is_some_and(|y| self.bound.contains(y))
            && self.tape.chance(60);
        let branches: Vec<Vec<Clause>> = (0..2)
            .map(|i| {
                let y = y.as_deref().filter(|_| !(skip_y && i == 1));
                self.or_branch(&x, y, ty, join)
            })
            .collect();
        let mut vars = vec![x.clone()];
        vars.extend(y.clone());
        for v in &vars {
            self.bind(v);
        }
        match join {
            true => Clause::OrJoin(vars, branches),
            false => Clause::Or(branches),
        }
    }

    fn or_branch(&mut self, x: &str, y: Option<&str>, ty: Ty, join: bool) -> Vec<Clause> {
        let xv = Term::Var(x.to_owned());
        let kw = |a: Attr| Term::Val(Val::Kw(a.ident()));
        let mut out = Vec::new();
        match y {
            Some(y) => {
                let attr = self.tape.item(&Attr::of_type(ty));
                out.push(Clause::Pattern(vec![
                    xv.clone(),
                    kw(attr),
                    Term::Var(y.to_owned()),
                ]));
            }
            None => {
                let attr = self.tape.item(&Attr::ALL);
                let v = match self.tape.chance(50) {
                    true => Term::Val(self.value(attr)),
                    false => Term::Blank,
                };
                out.push(Clause::Pattern(vec![xv.clone(), kw(attr), v]));
            }
        }
        if self.tape.chance(40) {
            let attr = self.tape.item(&Attr::ALL);
            let c = Term::Val(self.value(attr));
            if join && self.tape.chance(60) {
                // Through a local: x follows someone with this value.
                let local = self.local(&[x, y.unwrap_or("")]);
                out.push(Clause::Pattern(vec![
                    xv,
                    kw(Attr::Follows),
                    Term::Var(local.clone()),
                ]));
                out.push(Clause::Pattern(vec![Term::Var(local), kw(attr), c]));
            } else if let (Some(y), Ty::Long) = (y, ty) {
                let k = Term::Val(self.constant(Ty::Long));
                out.push(Clause::Pred(
                    self.tape.item(&["<", ">=", "!="]),
                    Term::Var(y.into()),
                    k,
                ));
            } else {
                out.push(Clause::Pattern(vec![xv, kw(attr), c]));
            }
        }
        out
    }

    /// A name for a variable local to a `not-join`/`or-join`: fresh, or a pool variable the
    /// construct does not join on (shadowing it).
    fn local(&mut self, join: &[&str]) -> String {
        let free: Vec<&str> = ["?b", "?c", "?d"]
            .into_iter()
            .filter(|v| !join.contains(v))
            .collect();
        match self.tape.chance(30) && !free.is_empty() {
            true => self.tape.item(&free).to_owned(),
            false => {
                let name = format!("?l{}", self.fresh);
                self.fresh += 1;
                name
            }
        }
    }

    fn ground(&mut self) -> Clause {
        let values = (0..1 + self.tape.pick(3))
            .map(|_| self.tape.pick(TAGS) as i64)
            .collect();
        let out = match self.full() && self.tape.chance(50) {
            true => self.var_of(Ty::Long, false),
            false => None,
        };
        let out = out.unwrap_or_else(|| self.fresh("g", Ty::Long));
        self.bind(&out);
        Clause::Ground(values, out)
    }

    /// Function calls, predicates and `not`s over bound variables.
    fn filters(&mut self) -> Vec<Clause> {
        let mut out = Vec::new();
        for _ in 0..self.tape.pick(3) {
            out.extend(self.call());
        }
        if self.tape.chance(15) {
            out.push(self.entity_fn());
        }
        for _ in 0..self.tape.pick(5) {
            out.extend(self.pred());
        }
        if self.tape.chance(25) {
            out.extend(self.not_clause());
        }
        if self.tape.chance(25) {
            out.push(self.not_join());
        }
        out
    }

    fn call(&mut self) -> Option<Clause> {
        let string = self.tape.chance(40);
        let ty = if string { Ty::Str } else { Ty::Long };
        let x = self.var_of(ty, true)?;
        let out = match self.full() && self.tape.chance(20) {
            true => self.var_of(ty, true),
            false => None,
        };
        let out = out.unwrap_or_else(|| self.fresh("f", ty));
        self.bind(&out);
        Some(match string {
            true => Clause::Str(x, out),
            false => Clause::Plus(x, self.tape.item(&[1, -1, 0]), out),
        })
    }

    /// `missing?` or `get-else` on a bound entity and a cardinality-one attribute.
    fn entity_fn(&mut self) -> Clause {
        let x = self.var_of(Ty::Ent, true).expect("?a is bound");
        let attr = self.tape.item(&[Attr::Name, Attr::Age, Attr::Kind]);
        if self.tape.chance(50) {
            return Clause::Missing(x, attr);
        }
        let default = match attr {
            Attr::Name => Val::Str("none"),
            Attr::Kind => Val::Kw("none"),
            _ => Val::Long(-1),
        };
        let out = self.fresh("f", attr.ty());
        self.bind(&out);
        Clause::GetElse(x, attr, default, out)
    }

    fn pred(&mut self) -> Option<Clause> {
        let tys: Vec<Ty> = [Ty::Long, Ty::Str, Ty::Kw, Ty::Ent]
            .into_iter()
            .filter(|ty| self.bound.iter().any(|v| self.types[v] == *ty))
            .collect();
        let ty = self.tape.item(&tys);
        let x = self.var_of(ty, true)?;
        let ops: &[&'static str] = match (ty, self.dialect) {
            (Ty::Ent, Dialect::DataScript) => &["=", "!="],
            _ => &["<", ">", "<=", ">=", "=", "!="],
        };
        let op = self.tape.item(ops);
        let other = match self.tape.chance(35) {
            true => self
                .var_of(ty, true)
                .filter(|o| self.dialect == Dialect::Full || *o != x)
                .map(Term::Var),
            false => None,
        };
        let other = other.unwrap_or_else(|| Term::Val(self.constant(ty)));
        Some(match self.tape.chance(30) {
            true => Clause::Pred(op, other, Term::Var(x)),
            false => Clause::Pred(op, Term::Var(x), other),
        })
    }

    /// `(not ...)` over bound variables only: a pattern on a bound entity (maybe with a
    /// predicate), an `or` of two, or a rule call.
    fn not_clause(&mut self) -> Option<Clause> {
        let x = self.var_of(Ty::Ent, true)?;
        let body = match self.tape.pick(5) {
            0..=2 => {
                let mut body = vec![self.bound_pattern(&x, true)];
                if self.tape.chance(30) {
                    body.extend(self.pred());
                }
                body
            }
            // The branches of an `or` must use the same variables: only `x`.
            3 => vec![Clause::Or(vec![
                vec![self.bound_pattern(&x, false)],
                vec![self.bound_pattern(&x, false)],
            ])],
            _ => {
                let y = match self.tape.chance(30) {
                    true => Some(Term::Val(self.constant(Ty::Ent))),
                    false => self
                        .var_of(Ty::Ent, true)
                        .filter(|y| self.full() || *y != x)
                        .map(Term::Var),
                };
                let y = y.unwrap_or_else(|| Term::Val(self.constant(Ty::Ent)));
                vec![Clause::Rule("follows", Term::Var(x), y)]
            }
        };
        Some(Clause::Not(body))
    }

    /// A pattern on bound entity `x` whose value is a constant, `_` or (if `vars`) a bound
    /// variable.
    fn bound_pattern(&mut self, x: &str, vars: bool) -> Clause {
        let attr = self.tape.item(&Attr::ALL);
        let v = match self.tape.pick(3) {
            0 => Term::Val(self.value(attr)),
            1 if vars => self
                .var_of(attr.ty(), true)
                .filter(|v| self.full() || v != x)
                .map_or(Term::Blank, Term::Var),
            _ => Term::Blank,
        };
        Clause::Pattern(vec![
            Term::Var(x.to_owned()),
            Term::Val(Val::Kw(attr.ident())),
            v,
        ])
    }

    /// `(not-join [?x] ...)` where the body reaches other entities through locals.
    fn not_join(&mut self) -> Clause {
        let x = self.var_of(Ty::Ent, true).expect("?a is bound");
        let kw = |a: Attr| Term::Val(Val::Kw(a.ident()));
        let local = self.local(&[&x]);
        let attr = self.tape.item(&Attr::ALL);
        let c = match self.tape.chance(70) {
            true => Term::Val(self.value(attr)),
            false => Term::Blank,
        };
        let (xv, lv) = (Term::Var(x.clone()), Term::Var(local.clone()));
        let body = match self.tape.pick(4) {
            0 => vec![
                Clause::Pattern(vec![xv, kw(Attr::Follows), lv.clone()]),
                Clause::Pattern(vec![lv, kw(attr), c]),
            ],
            3 => vec![
                Clause::Rule("follows", xv, lv.clone()),
                Clause::Pattern(vec![lv, kw(attr), c]),
            ],
            1 => vec![
                Clause::Pattern(vec![lv.clone(), kw(Attr::Follows), xv]),
                Clause::Pattern(vec![lv, kw(attr), c]),
            ],
            _ => {
                // Compare a value of x with a local value of another entity.
                let a = self.tape.item(&[Attr::Age, Attr::Tag]);
                let other = self.local(&[&x, &local]);
                vec![
                    Clause::Pattern(vec![xv, kw(a), lv.clone()]),
                    Clause::Pattern(vec![Term::Blank, kw(a), Term::Var(other.clone())]),
                    Clause::Pred(self.tape.item(&["<", ">"]), lv, Term::Var(other)),
                ]
            }
        };
        Clause::NotJoin(vec![x], body)
    }

    fn find(&mut self) -> (Vec<FindElem>, Shape, Vec<String>) {
        let candidates = self.bound.clone();
        let choose = |g: &mut Gen<'_, '_>, n: usize| -> Vec<String> {
            let mut left = candidates.clone();
            (0..n.min(left.len()))
                .map(|_| left.remove(g.tape.pick(left.len())))
                .collect()
        };
        match self.tape.pick(4) {
            0 | 1 => {
                let n = 1 + self.tape.pick(3);
                (
                    choose(self, n).into_iter().map(FindElem::Var).collect(),
                    Shape::Rel,
                    Vec::new(),
                )
            }
            2 => (
                choose(self, 1).into_iter().map(FindElem::Var).collect(),
                Shape::Coll,
                Vec::new(),
            ),
            _ => {
                let n = self.tape.pick(3);
                let groups = choose(self, n);
                let aggs: Vec<FindElem> = (0..1 + self.tape.pick(2))
                    .map(|_| self.aggregate())
                    .collect();
                let mut used: Vec<String> = groups.clone();
                used.extend(aggs.iter().map(|a| match a {
                    FindElem::Agg(_, v) | FindElem::Var(v) => v.clone(),
                }));
                let unused: Vec<String> = candidates
                    .iter()
                    .filter(|v| !used.contains(v))
                    .cloned()
                    .collect();
                let with = match self.tape.chance(30) && !unused.is_empty() {
                    true => vec![self.tape.item(&unused)],
                    false => Vec::new(),
                };
                let shape = match (groups.is_empty(), aggs.len()) {
                    (true, 1) if self.tape.chance(50) => Shape::Scalar,
                    (true, _) if self.tape.chance(30) => Shape::Tuple,
                    _ => Shape::Rel,
                };
                let mut find: Vec<FindElem> = groups.into_iter().map(FindElem::Var).collect();
                find.extend(aggs);
                (find, shape, with)
            }
        }
    }

    fn aggregate(&mut self) -> FindElem {
        let name = self
            .tape
            .item(&["count", "count-distinct", "sum", "min", "max"]);
        let typed = match name {
            "sum" => self.var_of(Ty::Long, true),
            "min" | "max" => {
                let mut tys = vec![Ty::Long, Ty::Str, Ty::Kw];
                if self.full() {
                    tys.push(Ty::Ent);
                }
                let ty = self.tape.item(&tys);
                self.var_of(ty, true)
            }
            _ => None,
        };
        match typed {
            Some(v) => FindElem::Agg(name, v),
            None => {
                let v = self.tape.item(&self.bound);
                FindElem::Agg(
                    if name == "count-distinct" {
                        name
                    } else {
                        "count"
                    },
                    v,
                )
            }
        }
    }
}
