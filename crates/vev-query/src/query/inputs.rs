//! A run's inputs: each given value matched against its `:in` declaration (a database, a
//! collection of tuples used as a source, the rule set, or a binding turned into a
//! relation), and the storage failure marks that tell a run whether its scans saw all the
//! data.

use std::sync::Arc;

use vev_datalog::ast;
use vev_edn::Edn;

use super::{CompiledRules, Input, Query};
use crate::compile::{CBinding, Scope};
use crate::error::QueryError;
use crate::rel::{Consts, Rel, VarId};
use crate::source::Source;
use crate::values::edn_to_value;

/// What a run's inputs give it.
pub(super) struct BoundInputs<'i> {
    /// The database of each input position that is one.
    pub sources: Vec<Option<&'i dyn Source>>,
    /// The tuples of each input position that is a collection used as a source.
    pub collections: Vec<Option<Vec<Vec<vev_core::Value>>>>,
    /// The rule set (`%`), compiled; empty without one.
    pub rules: Arc<CompiledRules>,
    /// The binding inputs, joined.
    pub rel: Rel,
    /// The scalar inputs' values, which the planner can inline (as range bounds, say).
    pub consts: Consts,
}

impl Query {
    /// The inputs given to a run, matched against the `:in` declarations: databases,
    /// collections of tuples, the rule set, and the binding inputs joined into one relation.
    pub(super) fn bind_inputs<'i>(
        &self,
        inputs: &[Input<'i>],
    ) -> Result<BoundInputs<'i>, QueryError> {
        if inputs.len() != self.ast.inputs.len() {
            return Err(QueryError::InputCount {
                expected: self.ast.inputs.len(),
                given: inputs.len(),
                names: self.input_names(),
            });
        }
        let mut bound = BoundInputs {
            sources: vec![None; inputs.len()],
            collections: vec![None; inputs.len()],
            rules: self.no_rules.clone(),
            rel: Rel::unit(),
            consts: Consts::default(),
        };
        for (i, (decl, given)) in self.ast.inputs.iter().zip(inputs).enumerate() {
            match (decl, given) {
                (ast::Input::Src(..), Input::Db(db)) => bound.sources[i] = Some(*db),
                (ast::Input::Src(..), Input::Edn(edn)) if collection_of_tuples(edn).is_some() => {
                    bound.collections[i] = collection_of_tuples(edn);
                }
                (ast::Input::Rules(_), Input::Edn(edn)) => bound.rules = self.rules_of(edn)?,
                (ast::Input::Binding(..), Input::Edn(edn)) => {
                    let binding = &self
                        .bindings
                        .iter()
                        .find(|(p, _)| *p == i)
                        .expect("compiled binding")
                        .1;
                    let input_rel = bind_input(&self.scope, binding, edn, &mut bound.consts)?;
                    bound.rel = bound.rel.join(&input_rel);
                }
                (decl, given) => {
                    return Err(QueryError::InputShape {
                        name: input_name(decl),
                        expected: match decl {
                            ast::Input::Src(..) => "a database",
                            ast::Input::Rules(_) => "a rule set",
                            ast::Input::Binding(..) => "a value",
                        },
                        got: match given {
                            Input::Db(_) => "a database".to_owned(),
                            Input::Edn(e) => e.to_string(),
                        },
                    })
                }
            }
        }
        Ok(bound)
    }

    pub(super) fn input_names(&self) -> String {
        let names: Vec<String> = self.ast.inputs.iter().map(input_name).collect();
        format!("[{}]", names.join(" "))
    }
}

/// A collection of tuples given as a source, as values.
fn collection_of_tuples(edn: &Edn) -> Option<Vec<Vec<vev_core::Value>>> {
    let items: Vec<&Edn> = match edn {
        Edn::Vector(v) | Edn::List(v) => v.iter().collect(),
        Edn::Set(s) => s.iter().collect(),
        _ => return None,
    };
    items
        .into_iter()
        .map(|t| match t {
            Edn::Vector(v) | Edn::List(v) => Some(v.iter().map(edn_to_value).collect()),
            _ => None,
        })
        .collect()
}

fn input_name(i: &ast::Input) -> String {
    match i {
        ast::Input::Src(s, _) => s.name().to_owned(),
        ast::Input::Rules(_) => "%".to_owned(),
        ast::Input::Binding(b, _) => binding_text(b),
    }
}

fn binding_text(b: &ast::Binding) -> String {
    let elem = |e: &ast::BindElem| match e {
        ast::BindElem::Var(v) => v.name().to_owned(),
        ast::BindElem::Blank => "_".to_owned(),
    };
    match b {
        ast::Binding::Scalar(v) => v.name().to_owned(),
        ast::Binding::Tuple(es) => {
            format!("[{}]", es.iter().map(elem).collect::<Vec<_>>().join(" "))
        }
        ast::Binding::Coll(e) => format!("[{} ...]", elem(e)),
        ast::Binding::Rel(es) => {
            format!("[[{}]]", es.iter().map(elem).collect::<Vec<_>>().join(" "))
        }
    }
}

/// The relation an input value makes under its binding; scalars are also recorded as
/// constants so the planner can inline them (e.g. as range bounds).
fn bind_input(
    scope: &Scope,
    binding: &CBinding,
    edn: &Edn,
    consts: &mut Consts,
) -> Result<Rel, QueryError> {
    let shape_err = |expected: &'static str| QueryError::InputShape {
        name: match binding {
            CBinding::Scalar(v) => scope.name(*v).to_owned(),
            other => format!(
                "{:?}",
                other
                    .vars()
                    .iter()
                    .map(|v| scope.name(*v))
                    .collect::<Vec<_>>()
            ),
        },
        expected,
        got: edn.to_string(),
    };
    let seq = |e: &Edn| -> Option<Vec<Edn>> {
        match e {
            Edn::Vector(items) | Edn::List(items) => Some(items.clone()),
            Edn::Set(items) => Some(items.iter().cloned().collect()),
            _ => None,
        }
    };
    let tuple_row = |vars: &[Option<VarId>], e: &Edn| -> Option<Vec<(VarId, vev_core::Value)>> {
        let items = seq(e)?;
        if items.len() != vars.len() {
            return None;
        }
        Some(
            vars.iter()
                .zip(items)
                .filter_map(|(v, x)| v.map(|v| (v, edn_to_value(&x))))
                .collect(),
        )
    };
    let rel_of = |vars: Vec<VarId>, rows: Vec<Vec<(VarId, vev_core::Value)>>| -> Rel {
        let mut rel = Rel::empty(vars.clone());
        for row in rows {
            let vals: Vec<vev_core::Value> = vars
                .iter()
                .map(|v| row.iter().find(|(x, _)| x == v).expect("bound").1.clone())
                .collect();
            rel.push_row(&vals);
        }
        rel.dedup()
    };
    match binding {
        CBinding::Scalar(v) => {
            let value = edn_to_value(edn);
            consts.insert(*v, value.clone());
            let mut rel = Rel::empty(vec![*v]);
            rel.push_row(&[value]);
            rel.distinct = true;
            Ok(rel)
        }
        CBinding::Tuple(vars) => {
            let row =
                tuple_row(vars, edn).ok_or_else(|| shape_err("a tuple of matching length"))?;
            for (v, x) in &row {
                consts.insert(*v, x.clone());
            }
            Ok(rel_of(vars.iter().flatten().copied().collect(), vec![row]))
        }
        CBinding::Coll(var) => {
            let items = seq(edn).ok_or_else(|| shape_err("a collection"))?;
            let vars: Vec<VarId> = var.iter().copied().collect();
            let rows = items
                .iter()
                .map(|x| var.map(|v| vec![(v, edn_to_value(x))]).unwrap_or_default())
                .collect();
            let mut rel = rel_of(vars, rows);
            if var.is_none() {
                rel.len = usize::from(!items.is_empty());
            }
            Ok(rel)
        }
        CBinding::Rel(vars) => {
            let items = seq(edn).ok_or_else(|| shape_err("a collection of tuples"))?;
            let rows = items
                .iter()
                .map(|x| {
                    tuple_row(vars, x)
                        .ok_or_else(|| shape_err("a collection of tuples of matching length"))
                })
                .collect::<Result<Vec<_>, _>>()?;
            Ok(rel_of(vars.iter().flatten().copied().collect(), rows))
        }
    }
}

/// The storage failure marks of the database inputs, taken before a run (one per input).
pub(super) fn storage_marks(inputs: &[Input<'_>]) -> Vec<u64> {
    inputs
        .iter()
        .map(|i| match i {
            Input::Db(src) => src.storage_mark(),
            Input::Edn(_) => 0,
        })
        .collect()
}

/// The storage failure any database input met since its mark, as an error.
pub(super) fn storage_failure(inputs: &[Input<'_>], marks: &[u64]) -> Result<(), QueryError> {
    let failure = inputs.iter().zip(marks).find_map(|(i, &mark)| match i {
        Input::Db(src) => src.storage_failure_since(mark),
        Input::Edn(_) => None,
    });
    match failure {
        Some(f) => Err(QueryError::Storage(f)),
        None => Ok(()),
    }
}
