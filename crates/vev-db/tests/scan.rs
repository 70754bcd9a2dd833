//! The query engine's index access (`Source::scan`, `Source::scan_batch`) against `Db::datoms`,
//! for prefixes of entity ids (which take a machine-word path) and for prefixes with values,
//! on every index order.

use vev_core::{parse_tx, Component, Datom, IndexOrder, Keyword, Value};
use vev_db::{transact, Db, NoFunctions, TxContext};
use vev_query::source::Source;

fn db() -> Db {
    let ctx = TxContext {
        functions: &NoFunctions,
        now_ms: 1_700_000_000_000,
        speculative: false,
    };
    let mut text = String::from(
        r#"[{:db/ident :s/n :db/valueType :db.type/long :db/cardinality :db.cardinality/one}
            {:db/ident :s/tag :db/valueType :db.type/string :db/cardinality :db.cardinality/many}
            {:db/ident :s/ref :db/valueType :db.type/ref :db/cardinality :db.cardinality/one}]"#,
    );
    let mut db = Db::empty();
    for tx in [std::mem::take(&mut text), {
        let mut t = String::from("[");
        for i in 0..400 {
            t.push_str(&format!(
                r#"{{:db/id "e{i}" :s/n {} :s/tag ["t{}" "t{}"] :s/ref "e{}"}}"#,
                i % 37,
                i % 5,
                i % 11,
                (i * 7) % 400
            ));
        }
        t.push(']');
        t
    }] {
        let ops: Vec<_> = parse_tx(&tx).unwrap().into_iter().map(|s| s.op).collect();
        db = transact(&db, &ops, &ctx).unwrap().db_after;
    }
    db
}

fn scanned(db: &Db, order: IndexOrder, prefix: &[Component]) -> Vec<Datom> {
    let mut out = Vec::new();
    db.scan(order, prefix, &mut |d| {
        out.push(d.clone());
        true
    });
    out
}

#[test]
fn scans_match_datoms_for_id_and_value_prefixes() {
    let db = db();
    let a = |k: &str| db.entid(&Keyword::new(k)).unwrap();
    let (n, tag, rf) = (a("s/n"), a("s/tag"), a("s/ref"));
    let entities: Vec<u64> = db
        .datoms(IndexOrder::Aevt, &[Component::Entity(n)])
        .map(|d| d.unwrap().e)
        .collect();
    let mut prefixes: Vec<(IndexOrder, Vec<Component>)> = Vec::new();
    for &e in entities.iter().step_by(13).chain([0, 1, u64::MAX].iter()) {
        prefixes.push((IndexOrder::Eavt, vec![Component::Entity(e)]));
        for at in [n, tag, rf, 0, u64::MAX] {
            prefixes.push((
                IndexOrder::Eavt,
                vec![Component::Entity(e), Component::Entity(at)],
            ));
            prefixes.push((
                IndexOrder::Aevt,
                vec![Component::Entity(at), Component::Entity(e)],
            ));
        }
    }
    for at in [n, tag, rf, 0, u64::MAX] {
        prefixes.push((IndexOrder::Aevt, vec![Component::Entity(at)]));
        prefixes.push((IndexOrder::Avet, vec![Component::Entity(at)]));
        prefixes.push((
            IndexOrder::Avet,
            vec![Component::Entity(at), Component::Value(Value::Long(5))],
        ));
    }
    prefixes.push((
        IndexOrder::Avet,
        vec![
            Component::Entity(tag),
            Component::Value(Value::String("t3".into())),
        ],
    ));
    prefixes.push((
        IndexOrder::Vaet,
        vec![Component::Value(Value::Ref(entities[3]))],
    ));
    let mut nonempty = 0;
    for (order, prefix) in &prefixes {
        let want: Vec<Datom> = db.datoms(*order, prefix).map(Result::unwrap).collect();
        nonempty += usize::from(!want.is_empty());
        assert_eq!(scanned(&db, *order, prefix), want, "{order:?} {prefix:?}");
    }
    assert!(
        nonempty > prefixes.len() / 2,
        "{nonempty} of {}",
        prefixes.len()
    );
}

#[test]
fn batch_scans_match_one_scan_per_prefix() {
    let db = db();
    let a = |k: &str| db.entid(&Keyword::new(k)).unwrap();
    let (n, tag) = (a("s/n"), a("s/tag"));
    let entities: Vec<u64> = db
        .datoms(IndexOrder::Aevt, &[Component::Entity(n)])
        .map(|d| d.unwrap().e)
        .step_by(3)
        .collect();
    let batches: Vec<(IndexOrder, Vec<Vec<Component>>)> = vec![
        (
            IndexOrder::Eavt,
            entities
                .iter()
                .map(|e| vec![Component::Entity(*e)])
                .collect(),
        ),
        (
            IndexOrder::Eavt,
            entities
                .iter()
                .map(|e| vec![Component::Entity(*e), Component::Entity(tag)])
                .collect(),
        ),
        (
            IndexOrder::Aevt,
            entities
                .iter()
                .map(|e| vec![Component::Entity(n), Component::Entity(*e)])
                .collect(),
        ),
    ];
    for (order, prefixes) in &batches {
        let mut got: Vec<(usize, Datom)> = Vec::new();
        db.scan_batch(*order, prefixes, &mut |k, d| {
            got.push((k, d.clone()));
            true
        });
        let want: Vec<(usize, Datom)> = prefixes
            .iter()
            .enumerate()
            .flat_map(|(k, p)| db.datoms(*order, p).map(move |d| (k, d.unwrap())))
            .collect();
        assert!(!want.is_empty());
        assert_eq!(got, want, "{order:?}");
    }
}

/// `Db::datom_batches` lends exactly the datoms `Db::datoms` yields, in order, at any batch
/// size and through every view (the in-place walk without a view, the merge with one).
#[test]
fn datom_batches_match_datoms() {
    let base = db();
    let a = |k: &str| base.entid(&Keyword::new(k)).unwrap();
    let (n, tag) = (a("s/n"), a("s/tag"));
    let e = base
        .datoms(IndexOrder::Aevt, &[Component::Entity(n)])
        .nth(17)
        .unwrap()
        .unwrap()
        .e;
    let t = base.basis_t();
    let views = [
        base.clone(),
        base.as_of(t - 1),
        base.since(t - 1),
        base.history(),
    ];
    let prefixes: Vec<(IndexOrder, Vec<Component>)> = vec![
        (IndexOrder::Eavt, vec![]),
        (IndexOrder::Aevt, vec![Component::Entity(n)]),
        (IndexOrder::Aevt, vec![Component::Entity(tag)]),
        (IndexOrder::Aevt, vec![Component::Entity(u64::MAX)]),
        (IndexOrder::Eavt, vec![Component::Entity(e)]),
        (
            IndexOrder::Avet,
            vec![Component::Entity(n), Component::Value(Value::Long(5))],
        ),
    ];
    let mut seen = 0;
    for db in &views {
        for (order, prefix) in &prefixes {
            let want: Vec<Datom> = db.datoms(*order, prefix).map(Result::unwrap).collect();
            for size in [1, 7, 2048] {
                let mut scan = db.datom_batches(*order, prefix);
                let mut got = Vec::new();
                loop {
                    let k = scan.next_batch(size, |d| got.push(d.clone())).unwrap();
                    assert!(k <= size);
                    if k == 0 {
                        break;
                    }
                }
                assert_eq!(got, want, "{order:?} {prefix:?} batches of {size}");
                seen += got.len();
            }
        }
    }
    assert!(seen > 10_000, "the cases cover {seen} datoms");
}

/// A database of `n` entities with two attributes each.
fn big_db(n: usize) -> Db {
    let ctx = TxContext {
        functions: &NoFunctions,
        now_ms: 1_700_000_000_000,
        speculative: false,
    };
    let schema = r#"[{:db/ident :b/n :db/valueType :db.type/long :db/cardinality :db.cardinality/one}
                     {:db/ident :b/s :db/valueType :db.type/string :db/cardinality :db.cardinality/one}]"#;
    let mut db = Db::empty();
    let mut texts = vec![schema.to_owned()];
    for start in (0..n).step_by(10_000) {
        let mut t = String::from("[");
        for i in start..(start + 10_000).min(n) {
            t.push_str(&format!(r#"{{:b/n {} :b/s "s{}"}}"#, i % 97, i % 13));
        }
        t.push(']');
        texts.push(t);
    }
    for text in texts {
        let ops: Vec<_> = parse_tx(&text).unwrap().into_iter().map(|s| s.op).collect();
        db = transact(&db, &ops, &ctx).unwrap().db_after;
    }
    db
}

/// `Db::datom_batches_split`'s ranges, read one after another, lend what one scan does.
#[test]
fn split_batches_cover_the_range_once() {
    let base = big_db(40_000);
    let n = base.entid(&Keyword::new("b/n")).unwrap();
    let s = base.entid(&Keyword::new("b/s")).unwrap();
    let mut split = 0;
    for (order, prefix) in [
        (IndexOrder::Aevt, vec![Component::Entity(n)]),
        (IndexOrder::Aevt, vec![Component::Entity(s)]),
        (IndexOrder::Eavt, vec![]),
        (IndexOrder::Aevt, vec![Component::Entity(u64::MAX)]),
        (IndexOrder::Avet, vec![Component::Entity(n)]),
    ] {
        let want: Vec<Datom> = base.datoms(order, &prefix).map(Result::unwrap).collect();
        for parts in [1, 2, 3, 8] {
            let scans = base.datom_batches_split(order, &prefix, parts);
            assert!(scans.len() <= parts);
            split += usize::from(scans.len() > 1);
            let mut got = Vec::new();
            for mut scan in scans {
                while scan.next_batch(1000, |d| got.push(d.clone())).unwrap() > 0 {}
            }
            assert_eq!(got, want, "{order:?} {prefix:?} in {parts} parts");
        }
    }
    assert!(split >= 6, "only {split} of the scans were cut");
    // Through a view, or over a short range, one scan.
    let history = base.history();
    assert_eq!(
        history
            .datom_batches_split(IndexOrder::Aevt, &[Component::Entity(n)], 4)
            .len(),
        1
    );
    let small = db();
    let tag = small.entid(&Keyword::new("s/tag")).unwrap();
    assert_eq!(
        small
            .datom_batches_split(IndexOrder::Aevt, &[Component::Entity(tag)], 4)
            .len(),
        1
    );
}
