//! The checks of the case format (see README.md), evaluated against one database view.

use std::collections::BTreeSet;

use vev::schema::sys;
use vev::{Component, Datom, Db, Edn, EntityId, IndexOrder, TimePoint, Value, ValueType};

use crate::{keyword_of, Run};

/// Evaluate one check on `db`.
// One arm per check of the README's table, each a few lines: splitting it would scatter
// the table.
#[allow(clippy::too_many_lines)]
pub fn check(run: &Run, db: &Db, c: &Edn) -> Result<(), String> {
    let items = c.as_seq().ok_or("a check is a vector")?;
    let head = items
        .first()
        .and_then(Edn::as_keyword)
        .ok_or("a check starts with a keyword")?;
    let args = &items[1..];
    let arg = |i: usize| {
        args.get(i)
            .ok_or_else(|| format!("{head} needs argument {}", i + 1))
    };
    match head.as_str() {
        "entity" => check_entity(run, db, arg(0)?, arg(1)?),
        "entity-attr" => check_entity_attr(run, db, arg(0)?, arg(1)?, arg(2)?),
        "reverse" => {
            let e = resolve(run, db, arg(0)?)?;
            let a = keyword_of(arg(1)?)?;
            let got: BTreeSet<EntityId> = stored(db.entity(e).reverse(a))?.into_iter().collect();
            let want = entity_set(run, db, arg(2)?)?;
            expect_eq(&got, &want)
        }
        "datoms" | "seek" | "count" => check_datoms(run, db, head.as_str(), args),
        "index-range" => {
            let a = keyword_of(arg(0)?)?;
            let attr = db
                .attribute(a)
                .ok_or_else(|| format!("unknown attribute {a}"))?
                .clone();
            let bound = |x: &Edn| -> Result<Option<Value>, String> {
                if matches!(x, Edn::Nil) {
                    Ok(None)
                } else {
                    value(run, db, attr.id, x).map(Some)
                }
            };
            let got: Vec<Datom> = stored(
                db.index_range(attr.id, bound(arg(1)?)?, bound(arg(2)?)?)
                    .collect(),
            )?;
            compare_datoms(run, db, &got, arg(3)?)
        }
        "tx-data" => check_tx_data(run, db, arg(0)?, arg(1)?),
        "tx-range" => {
            let start = run.t_of(index(arg(0)?)?)?;
            let end = run.t_of(index(arg(1)?)?).ok();
            let got: Vec<i64> = stored(db.tx_range(Some(start), end))?
                .iter()
                .map(|e| e.datoms.len() as i64)
                .collect();
            let want: Vec<i64> = arg(2)?
                .as_seq()
                .ok_or("expected counts")?
                .iter()
                .filter_map(Edn::as_integer)
                .collect();
            expect_eq(&got, &want)
        }
        "tempid" => expect_eq(&resolve(run, db, arg(0)?)?, &resolve(run, db, arg(1)?)?),
        "distinct" => {
            let (x, y) = (resolve(run, db, arg(0)?)?, resolve(run, db, arg(1)?)?);
            if x == y {
                Err(format!("both name entity {x}"))
            } else {
                Ok(())
            }
        }
        "basis-t" => expect_eq(
            &(db.basis_t() as i64),
            &arg(0)?.as_integer().ok_or("expected an integer")?,
        ),
        "as-of" | "since" | "as-of-instant" | "history" => check_view(run, db, head.as_str(), args),
        "with" => {
            let ops = vev::tx_from_edn(arg(0)?).map_err(|e| e.to_string())?;
            let before = run.conn.db();
            let report = run
                .conn
                .with(db, &ops)
                .map_err(|e| format!("with failed: [{}] {e}", e.code()))?;
            let mut nested = Run {
                conn: run.conn.clone(),
                tempids: run.tempids.clone(),
                txs: run.txs.clone(),
            };
            for (t, id) in &report.tempids {
                if let vev::TempId::Str(s) = t {
                    nested.tempids.insert(Edn::String(s.to_string()), *id);
                }
            }
            for c in &args[1..] {
                check(&nested, &report.db_after, c)?;
            }
            if run.conn.db().basis_t() != before.basis_t() {
                return Err("with changed the connection's database".into());
            }
            Ok(())
        }
        "with-error" => {
            let ops = vev::tx_from_edn(arg(0)?).map_err(vev::Error::Tx);
            let code = keyword_of(arg(1)?)?;
            match ops.and_then(|ops| run.conn.with(db, &ops)) {
                Ok(_) => Err(format!("with succeeded, expected {code}")),
                Err(e) if e.code() == code.as_str() => Ok(()),
                Err(e) => Err(format!("expected {code}, got [{}] {e}", e.code())),
            }
        }
        "q" => check_query(run, db, arg(0)?, arg(1)?, Ok(arg(2)?)),
        "q-error" => check_query(
            run,
            db,
            arg(0)?,
            arg(1)?,
            Err((keyword_of(arg(2)?)?.as_str(), &args[3..])),
        ),
        "pull" => {
            let pattern = subst(run, db, arg(0)?)?;
            let e = resolve(run, db, arg(1)?)?;
            let want = subst(run, db, arg(2)?)?;
            let got = db
                .pull(&pattern.to_string(), e)
                .map_err(|e| format!("pull failed: [{}] {e}", e.code()))?;
            expect_eq(&got, &want)
        }
        "pull-error" => {
            let pattern = subst(run, db, arg(0)?)?;
            let e = resolve(run, db, arg(1)?)?;
            let code = keyword_of(arg(2)?)?;
            match db.pull(&pattern.to_string(), e) {
                Ok(got) => Err(format!("pull returned {got}, expected error {code}")),
                Err(e) if e.code() == code.as_str() => Ok(()),
                Err(e) => Err(format!("expected {code}, got [{}] {e}", e.code())),
            }
        }
        other => Err(format!("unknown check :{other}")),
    }
}

/// Replace every `#e ref` (an entity reference of the case format) by the entity's id.
pub fn subst(run: &Run, db: &Db, x: &Edn) -> Result<Edn, String> {
    Ok(match x {
        Edn::Tagged(tag, inner) if tag.as_str() == "e" => {
            Edn::Integer(resolve(run, db, inner)? as i64)
        }
        Edn::Vector(items) => Edn::Vector(
            items
                .iter()
                .map(|i| subst(run, db, i))
                .collect::<Result<_, _>>()?,
        ),
        Edn::List(items) => Edn::List(
            items
                .iter()
                .map(|i| subst(run, db, i))
                .collect::<Result<_, _>>()?,
        ),
        Edn::Set(items) => Edn::Set(
            items
                .iter()
                .map(|i| subst(run, db, i))
                .collect::<Result<_, _>>()?,
        ),
        Edn::Map(m) => Edn::Map(
            m.iter()
                .map(|(k, v)| Ok((subst(run, db, k)?, subst(run, db, v)?)))
                .collect::<Result<_, String>>()?,
        ),
        other => other.clone(),
    })
}

/// `[:q query [inputs] expected]` and `[:q-error query [inputs] :code "text"...]`. The symbol
/// `$` among the inputs is the database under check; an expected set matches a collection
/// result in any order; `#approx x` in the expected result matches a double near x; the
/// error's message must include each text.
fn check_query(
    run: &Run,
    db: &Db,
    query: &Edn,
    inputs: &Edn,
    want: Result<&Edn, (&str, &[Edn])>,
) -> Result<(), String> {
    // A string is the query's raw text (so that reader errors can be checked).
    let query = match query {
        Edn::String(text) => text.clone(),
        other => subst(run, db, other)?.to_string(),
    };
    let inputs = inputs.as_seq().ok_or("query inputs are a vector")?;
    let values: Vec<Option<Edn>> = inputs
        .iter()
        .map(|i| match i {
            Edn::Symbol(s) if s.as_str().starts_with('$') => Ok(None),
            other => subst(run, db, other).map(Some),
        })
        .collect::<Result<_, _>>()?;
    let args: Vec<vev::Input<'_>> = values
        .iter()
        .map(|v| match v {
            None => vev::Input::Db(db),
            Some(e) => vev::Input::Edn(e),
        })
        .collect();
    let result =
        vev::Query::parse(&query).and_then(|q| q.run(&args, &vev::QueryOptions::default()));
    check_streamed(&query, &args, &result)?;
    match (result, want) {
        (Ok(got), Ok(want)) => {
            no_duplicate_rows(&got)?;
            let want = subst(run, db, want)?;
            let as_wanted = |got: vev::QueryResult| match (got.to_edn(), &want) {
                (Edn::Vector(items), Edn::Set(_)) => Edn::Set(items.into_iter().collect()),
                (g, _) => g,
            };
            let got = as_wanted(got);
            if !approx_eq(&got, &want) {
                return Err(format!("got {got}, want {want}"));
            }
            // The naive plan (clauses in written order, rules by the general evaluation
            // alone) is the reference every optimization must agree with, where it runs: in
            // written order a predicate can meet a variable only a later clause binds, which
            // the optimized plan orders first.
            let mut naive = vev::QueryOptions::default();
            naive.limits.naive = true;
            match vev::Query::parse(&query).and_then(|q| q.run(&args, &naive)) {
                Ok(reference) => {
                    no_duplicate_rows(&reference)?;
                    let reference = as_wanted(reference);
                    if approx_eq(&reference, &want) {
                        Ok(())
                    } else {
                        Err(format!("the naive plan got {reference}, want {want}"))
                    }
                }
                Err(e) if e.code() == "query/unbound-variable" => Ok(()),
                Err(e) => Err(format!("the naive plan failed: [{}] {e}", e.code())),
            }
        }
        (Ok(got), Err((code, _))) => Err(format!(
            "query returned {}, expected error {code}",
            got.to_edn()
        )),
        (Err(e), Ok(_)) => Err(format!("query failed: [{}] {e}", e.code())),
        (Err(e), Err((code, texts))) if e.code() == code => {
            let message = e.to_string();
            for text in texts {
                let text = text.as_str().ok_or("q-error's message texts are strings")?;
                if !message.contains(text) {
                    return Err(format!(
                        "error message {message:?} does not include {text:?}"
                    ));
                }
            }
            Ok(())
        }
        (Err(e), Err((code, _))) => Err(format!("expected {code}, got [{}] {e}", e.code())),
    }
}

/// How far a double may be from an expected `#approx x`: this fraction of |x|, or of 1 when
/// |x| < 1.
const APPROX_TOLERANCE: f64 = 1e-9;

/// `got` equals `want`, except that `#approx x` in `want` matches any double within
/// [`APPROX_TOLERANCE`] of x. In a set holding `#approx`, each expected element must match a
/// different element of the result.
fn approx_eq(got: &Edn, want: &Edn) -> bool {
    if got == want {
        return true;
    }
    match (got, want) {
        (Edn::Float(g), Edn::Tagged(tag, x)) if tag.as_str() == "approx" => match **x {
            Edn::Float(w) => (g - w).abs() <= APPROX_TOLERANCE * w.abs().max(1.0),
            _ => false,
        },
        (Edn::Vector(g), Edn::Vector(w)) | (Edn::List(g), Edn::List(w)) => {
            g.len() == w.len() && g.iter().zip(w).all(|(g, w)| approx_eq(g, w))
        }
        (Edn::Map(g), Edn::Map(w)) => {
            g.len() == w.len()
                && w.iter()
                    .all(|(k, w)| g.get(k).is_some_and(|g| approx_eq(g, w)))
        }
        (Edn::Set(g), Edn::Set(w)) if g.len() == w.len() => {
            let mut unused: Vec<&Edn> = g.iter().collect();
            w.iter()
                .all(|w| match unused.iter().position(|g| approx_eq(g, w)) {
                    Some(i) => {
                        unused.swap_remove(i);
                        true
                    }
                    None => false,
                })
        }
        _ => got == want,
    }
}

/// The oracle for `Query::run_rows`: the rows it streams (sorted) are the rows `run` returns,
/// as a set for a set-shaped result and as a multiset for a bag, and it fails with the same
/// code. A scalar or tuple find may pick a different one of several rows, and `rand` and
/// `sample` differ run to run, so those are not compared.
fn check_streamed(
    query: &str,
    args: &[vev::Input<'_>],
    result: &Result<vev::QueryResult, vev::QueryError>,
) -> Result<(), String> {
    let Ok(q) = vev::Query::parse(query) else {
        return Ok(());
    };
    let mut rows: Vec<Edn> = Vec::new();
    let streamed = q.run_rows(args, &vev::QueryOptions::default(), true, |row| {
        rows.push(Edn::Vector(row));
        Ok::<(), vev::QueryError>(())
    });
    let got = match (streamed, result) {
        (Err(a), Err(b)) if a.code() == b.code() => return Ok(()),
        (Ok(n), Ok(got)) if n == rows.len() => got,
        (s, r) => {
            return Err(format!(
                "run_rows gave {:?} ({} rows), run gave {:?}",
                s.map_err(|e| e.code()),
                rows.len(),
                r.as_ref().map(|r| r.len()).map_err(|e| e.code())
            ))
        }
    };
    let random = query.contains("rand") || query.contains("sample");
    let mut want: Vec<Edn> = match got {
        _ if random => return Ok(()),
        vev::QueryResult::Rel(r) | vev::QueryResult::Bag(r) => {
            r.iter().map(|r| Edn::Vector(r.to_vec())).collect()
        }
        vev::QueryResult::Coll(c) => c.iter().map(|v| Edn::Vector(vec![v.clone()])).collect(),
        vev::QueryResult::Maps(m) => {
            rows = rows
                .into_iter()
                .map(|r| match r {
                    Edn::Vector(cells) => q.row_map(cells),
                    other => other,
                })
                .collect();
            m.clone()
        }
        _ => return Ok(()),
    };
    want.sort();
    rows.sort();
    expect_eq(&rows, &want).map_err(|e| format!("run_rows differs from run: {e}"))
}

fn index(x: &Edn) -> Result<usize, String> {
    x.as_integer()
        .filter(|n| *n >= 0)
        .map(|n| n as usize)
        .ok_or_else(|| format!("expected a tx number, got {x}"))
}

fn check_view(run: &Run, db: &Db, head: &str, args: &[Edn]) -> Result<(), String> {
    let (view, rest) = match head {
        "history" => (db.history(), args),
        "as-of" => (
            db.as_of(run.t_of(index(args.first().ok_or("as-of needs a tx")?)?)?),
            &args[1..],
        ),
        "since" => (
            db.since(run.t_of(index(args.first().ok_or("since needs a tx")?)?)?),
            &args[1..],
        ),
        _ => match args.first() {
            Some(Edn::Inst(ms)) => (db.as_of(TimePoint::Instant(*ms)), &args[1..]),
            _ => return Err("as-of-instant needs an #inst".into()),
        },
    };
    for c in rest {
        check(run, &view, c)?;
    }
    Ok(())
}

fn expect_eq<T: PartialEq + std::fmt::Debug>(got: &T, want: &T) -> Result<(), String> {
    if got == want {
        Ok(())
    } else {
        Err(format!("got {got:?}, want {want:?}"))
    }
}

/// Resolve an entity reference of the case format.
pub fn resolve(run: &Run, db: &Db, r: &Edn) -> Result<EntityId, String> {
    match r {
        Edn::String(s)
            if s.len() > 2 && s.starts_with("tx") && s[2..].bytes().all(|b| b.is_ascii_digit()) =>
        {
            let k: usize = s[2..].parse().map_err(|_| format!("bad tx label {s}"))?;
            Ok(run
                .txs
                .get(&k)
                .ok_or_else(|| format!("no successful tx {k}"))?
                .tx())
        }
        Edn::String(_) => run
            .tempids
            .get(r)
            .copied()
            .ok_or_else(|| format!("unknown tempid {r}")),
        Edn::Integer(n) if *n < 0 => run
            .tempids
            .get(r)
            .copied()
            .ok_or_else(|| format!("unknown tempid {r}")),
        Edn::Integer(n) => Ok(*n as u64),
        Edn::Keyword(k) => db.entid(k).ok_or_else(|| format!("unknown ident {k}")),
        Edn::Vector(items) if items.len() == 2 => {
            let a = keyword_of(&items[0])?;
            let attr = db
                .attribute(a)
                .ok_or_else(|| format!("unknown attribute {a}"))?
                .id;
            let v = value(run, db, attr, &items[1])?;
            stored(db.current().entity_with_value(attr, &v))?
                .ok_or_else(|| format!("lookup ref {r} names no entity"))
        }
        _ => Err(format!("not an entity reference: {r}")),
    }
}

fn entity_set(run: &Run, db: &Db, x: &Edn) -> Result<BTreeSet<EntityId>, String> {
    let items: Vec<&Edn> = match x {
        Edn::Set(s) => s.iter().collect(),
        Edn::Vector(v) | Edn::List(v) => v.iter().collect(),
        _ => return Err(format!("expected a set of entities, got {x}")),
    };
    items.into_iter().map(|i| resolve(run, db, i)).collect()
}

/// The expected value `x` of attribute `a`.
pub fn value(run: &Run, db: &Db, a: EntityId, x: &Edn) -> Result<Value, String> {
    let attr = db
        .schema()
        .attribute(a)
        .ok_or_else(|| format!("{a} is not an attribute"))?;
    if attr.value_type == ValueType::Ref {
        return resolve(run, db, x).map(Value::Ref);
    }
    vev::coerce_value(db, attr, x).ok_or_else(|| format!("{x} is not a value of {}", attr.ident))
}

fn value_set(
    run: &Run,
    db: &Db,
    a: EntityId,
    x: &Edn,
    many: bool,
) -> Result<BTreeSet<Value>, String> {
    match x {
        Edn::Nil => Ok(BTreeSet::new()),
        Edn::Set(s) if many => s.iter().map(|i| value(run, db, a, i)).collect(),
        Edn::Vector(v)
            if many
                && db
                    .schema()
                    .attribute(a)
                    .is_some_and(|x| x.value_type != ValueType::Tuple) =>
        {
            v.iter().map(|i| value(run, db, a, i)).collect()
        }
        one => Ok(BTreeSet::from([value(run, db, a, one)?])),
    }
}

fn check_entity(run: &Run, db: &Db, e: &Edn, want: &Edn) -> Result<(), String> {
    let id = resolve(run, db, e)?;
    let got = stored(db.entity(id).attrs())?;
    let want_map = want.as_map().ok_or("expected an attribute map")?;
    let got_keys: BTreeSet<String> = got.keys().map(|k| k.to_string()).collect();
    let want_keys: BTreeSet<String> = want_map.keys().map(|k| k.to_string()).collect();
    if got_keys != want_keys {
        return Err(format!(
            "entity {e} has attributes {got_keys:?}, want {want_keys:?}; entity is {got:?}"
        ));
    }
    for (k, v) in want_map {
        check_entity_attr(run, db, e, k, v)?;
    }
    Ok(())
}

fn check_entity_attr(run: &Run, db: &Db, e: &Edn, a: &Edn, want: &Edn) -> Result<(), String> {
    let id = resolve(run, db, e)?;
    let k = keyword_of(a)?;
    let attr = db
        .attribute(k)
        .ok_or_else(|| format!("unknown attribute {k}"))?
        .clone();
    let got: BTreeSet<Value> = stored(db.entity(id).get_all(k))?.into_iter().collect();
    let want = value_set(run, db, attr.id, want, attr.is_many())?;
    expect_eq(&got, &want).map_err(|m| format!("entity {e} attribute {k}: {m}"))
}

/// Resolve the components of an index prefix, by position in the index order.
fn components(run: &Run, db: &Db, order: IndexOrder, xs: &[Edn]) -> Result<Vec<Component>, String> {
    let positions: &[char] = match order {
        IndexOrder::Eavt => &['e', 'a', 'v', 't'],
        IndexOrder::Aevt => &['a', 'e', 'v', 't'],
        IndexOrder::Avet => &['a', 'v', 'e', 't'],
        _ => &['v', 'a', 'e', 't'],
    };
    let attr = xs
        .iter()
        .zip(positions)
        .find(|(_, p)| **p == 'a')
        .map(|(x, _)| resolve(run, db, x))
        .transpose()?;
    let mut out = Vec::new();
    for (x, p) in xs.iter().zip(positions) {
        out.push(match (p, attr) {
            ('v', Some(a)) => Component::Value(value(run, db, a, x)?),
            ('v', None) => Component::Value(Value::Ref(resolve(run, db, x)?)),
            _ => Component::Entity(resolve(run, db, x)?),
        });
    }
    Ok(out)
}

fn check_datoms(run: &Run, db: &Db, head: &str, args: &[Edn]) -> Result<(), String> {
    let order_kw = args
        .first()
        .and_then(Edn::as_keyword)
        .ok_or("expected an index keyword")?;
    let order = vev::IndexOrder::from_name(order_kw.as_str())
        .filter(|o| *o != IndexOrder::Log)
        .ok_or_else(|| format!("unknown index {order_kw}"))?;
    let comps_edn = args
        .get(1)
        .and_then(Edn::as_seq)
        .ok_or("expected components")?;
    let comps = components(run, db, order, comps_edn)?;
    match head {
        "count" => {
            let n = args
                .get(2)
                .and_then(Edn::as_integer)
                .ok_or("expected a count")?;
            expect_eq(&(stored(db.count(order, &comps))? as i64), &n)
        }
        "seek" => {
            let n = args
                .get(2)
                .and_then(Edn::as_integer)
                .ok_or("expected a count")? as usize;
            let got: Vec<Datom> = stored(db.seek_datoms(order, &comps).take(n).collect())?;
            compare_datoms(run, db, &got, args.get(3).ok_or("expected datoms")?)
        }
        _ => {
            let got: Vec<Datom> = stored(db.datoms(order, &comps).collect())?;
            compare_datoms(run, db, &got, args.get(2).ok_or("expected datoms")?)
        }
    }
}

/// An expected datom's e, a, v, and its tx and added flag where the case gives them.
type ExpectedDatom = (EntityId, EntityId, Value, Option<EntityId>, Option<bool>);

/// An expected datom: `[e a v]`, `[e a v tx]` or `[e a v tx added]`.
fn expected_datom(run: &Run, db: &Db, x: &Edn) -> Result<ExpectedDatom, String> {
    let items = x
        .as_seq()
        .filter(|i| (3..=5).contains(&i.len()))
        .ok_or_else(|| format!("bad datom {x}"))?;
    let e = resolve(run, db, &items[0])?;
    let a = resolve(run, db, &items[1])?;
    let v = value(run, db, a, &items[2])?;
    let tx = items.get(3).map(|t| resolve(run, db, t)).transpose()?;
    let added = items
        .get(4)
        .map(|b| b.as_bool().ok_or("added is a boolean"))
        .transpose()?;
    Ok((e, a, v, tx, added))
}

fn compare_datoms(run: &Run, db: &Db, got: &[Datom], want: &Edn) -> Result<(), String> {
    let want = want.as_seq().ok_or("expected a list of datoms")?;
    if got.len() != want.len() {
        return Err(format!(
            "got {} datoms {got:?}, want {}",
            got.len(),
            want.len()
        ));
    }
    for (g, w) in got.iter().zip(want) {
        let (e, a, v, tx, added) = expected_datom(run, db, w)?;
        let ok = g.e == e
            && g.a == a
            && g.v == v
            && tx.is_none_or(|t| g.tx == t)
            && added.is_none_or(|b| g.added == b);
        if !ok {
            return Err(format!("got datom {g:?}, want {w} in {got:?}"));
        }
    }
    Ok(())
}

fn check_tx_data(run: &Run, db: &Db, k: &Edn, want: &Edn) -> Result<(), String> {
    let k = index(k)?;
    let report = run
        .txs
        .get(&k)
        .ok_or_else(|| format!("no successful tx {k}"))?;
    let tx = report.tx();
    let mut got: Vec<(EntityId, EntityId, Value, bool)> = report
        .tx_data
        .iter()
        .filter(|d| !(d.e == tx && d.a == sys::TX_INSTANT))
        .map(|d| (d.e, d.a, d.v.clone(), d.added))
        .collect();
    let mut expected = Vec::new();
    for w in want.as_seq().ok_or("expected a list of datoms")? {
        let items = w
            .as_seq()
            .filter(|i| i.len() == 4)
            .ok_or_else(|| format!("tx-data datoms are [e a v added], not {w}"))?;
        let e = resolve(run, db, &items[0])?;
        let a = resolve(run, db, &items[1])?;
        let v = value(run, db, a, &items[2])?;
        let added = items[3].as_bool().ok_or("added is a boolean")?;
        expected.push((e, a, v, added));
    }
    got.sort();
    expected.sort();
    expect_eq(&got, &expected)
}

/// A storage failure as a check failure.
fn stored<T>(r: Result<T, vev::StorageError>) -> Result<T, String> {
    r.map_err(|e| format!("error[{}]: {e}", e.code()))
}

/// A relation or collection find is a set: the expected values are written as one (and a
/// relation prints as one), which would hide a row given twice, so the rows are counted.
fn no_duplicate_rows(got: &vev::QueryResult) -> Result<(), String> {
    let (rows, distinct) = match got {
        vev::QueryResult::Rel(rows) => (
            rows.len(),
            rows.iter()
                .map(|r| r.to_vec())
                .collect::<BTreeSet<_>>()
                .len(),
        ),
        vev::QueryResult::Coll(items) => (items.len(), items.iter().collect::<BTreeSet<_>>().len()),
        _ => return Ok(()),
    };
    if distinct == rows {
        Ok(())
    } else {
        Err(format!(
            "{rows} rows, {distinct} distinct: a set result repeats a row"
        ))
    }
}
