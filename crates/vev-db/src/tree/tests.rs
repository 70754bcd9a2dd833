use super::pending::RECENT_MAX;
use super::scan::gallop;
use super::*;
use vev_core::Value;

fn d(e: u64) -> Datom {
    Datom::new(e, 1, Value::Long(e as i64), 7, true)
}

#[test]
fn galloping_finds_what_a_binary_search_finds() {
    for len in 0..70usize {
        let items: Vec<usize> = (0..len).map(|i| i * 3).collect();
        for from in 0..=len {
            for target in 0..len * 3 + 2 {
                let want = from + items[from..].partition_point(|x| *x < target);
                assert_eq!(
                    gallop(&items, from, |x| *x < target),
                    want,
                    "len {len} from {from} target {target}"
                );
            }
        }
    }
}

#[test]
fn batch_insert_remove_and_rank() {
    let changes: Vec<Change> = (0..10_000)
        .map(|e| Change {
            datom: d(e * 2),
            insert: true,
        })
        .collect();
    let t = Tree::new(IndexOrder::Eavt).apply_to_nodes(&changes);
    assert_eq!(t.len(), 10_000);
    assert_eq!(t.iter().count(), 10_000);
    assert_eq!(t.rank(|x| x.e < 1000), 500);
    let t2 = t.clone().apply_to_nodes(&[
        Change {
            datom: d(5),
            insert: true,
        },
        Change {
            datom: d(6),
            insert: false,
        },
    ]);
    assert_eq!(t.len(), 10_000, "the old version is unchanged");
    assert_eq!(t2.len(), 10_000);
    assert!(t2.contains(&d(5)) && !t2.contains(&d(6)) && t.contains(&d(6)));
    let firsts: Vec<u64> = t2.iter_from(|x| x.e < 3).take(3).map(|x| x.e).collect();
    assert_eq!(firsts, vec![4, 5, 8]);
    let all_gone: Vec<Change> = (0..10_000)
        .map(|e| Change {
            datom: d(e * 2),
            insert: false,
        })
        .collect();
    let t3 = t.clone().apply_to_nodes(&all_gone);
    assert!(t3.is_empty() && t3.iter().next().is_none());
}

type Model = std::collections::BTreeSet<u64>;
type Batch = std::collections::BTreeMap<u64, bool>;

fn changes_of(batch: &Batch) -> Vec<Change> {
    batch
        .iter()
        .map(|(&e, &insert)| Change {
            datom: d(e),
            insert,
        })
        .collect()
}

fn apply_to_model(model: &mut Model, batch: Batch) {
    for (e, insert) in batch {
        if insert {
            model.insert(e);
        } else {
            model.remove(&e);
        }
    }
}

fn assert_matches(t: &Tree, model: &Model, round: usize) {
    let got: Vec<u64> = t.iter().map(|x| x.e).collect();
    assert_eq!(
        got,
        model.iter().copied().collect::<Vec<_>>(),
        "round {round}"
    );
    assert_eq!(t.len(), got.len());
    if let Some(root) = &t.root {
        check_node(t.order, root, None, round);
    }
    for probe in [0, 1, 2, 500, 1501, 2999, 39_999] {
        assert_eq!(
            t.contains(&d(probe)),
            model.contains(&probe),
            "round {round}"
        );
        let below = model.iter().filter(|e| **e < probe).count();
        assert_eq!(t.rank(|x| x.e < probe), below, "round {round}");
        // Ten datoms from the probe on, by each way of reading.
        let want: Vec<u64> = model.range(probe..).take(10).copied().collect();
        let mut seen = Vec::new();
        t.visit_from(|x| x.e < probe, &mut |x| {
            seen.push(x.e);
            seen.len() < 10
        });
        assert_eq!(seen, want, "round {round}: visit_from {probe}");
        let mut seen = Vec::new();
        t.iter_from(|x| x.e < probe).for_each_ref(|x| {
            seen.push(x.e);
            seen.len() < 10
        });
        assert_eq!(seen, want, "round {round}: for_each_ref {probe}");
        let got: Vec<u64> = t.iter_from(|x| x.e < probe).take(10).map(|x| x.e).collect();
        assert_eq!(got, want, "round {round}: iter_from {probe}");
        // Every datom from the probe on, a run at a time: the same datoms, no empty run.
        let mut runs = t.runs_from(|x| x.e < probe);
        assert!(runs.run().is_empty(), "no run before the first advance");
        let mut seen = Vec::new();
        while runs.advance() {
            assert!(!runs.run().is_empty(), "round {round}: an empty run");
            seen.extend(runs.run().iter().map(|x| x.e));
        }
        assert!(runs.run().is_empty(), "no run after the last");
        let all: Vec<u64> = model.range(probe..).copied().collect();
        assert_eq!(seen, all, "round {round}: runs_from {probe}");
    }
    // The nodes' k-th datom (no pending changes: exact).
    if t.pending.is_none() {
        for k in [
            0,
            1,
            model.len() / 2,
            model.len().saturating_sub(1),
            model.len(),
        ] {
            let want = model.iter().nth(k).copied();
            assert_eq!(
                t.nth_in_nodes(k).map(|x| x.e),
                want,
                "round {round}: nth {k}"
            );
        }
    }
    // Ranges of 0-4, 7-29, 100-100, ... in one batch walk.
    let ranges: Vec<(u64, u64)> = (0..40u64)
        .map(|k| (k * k * 7, k * k * 7 + k % 23))
        .collect();
    let mut seen = Vec::new();
    t.visit_batch(
        ranges.len(),
        &|k, x| x.e < ranges[k].0,
        &|k, x| x.e > ranges[k].1,
        &mut |k, x| {
            seen.push((k, x.e));
            true
        },
    );
    let want: Vec<(usize, u64)> = ranges
        .iter()
        .enumerate()
        .flat_map(|(k, &(lo, hi))| model.range(lo..=hi).map(move |&e| (k, e)))
        .collect();
    assert_eq!(seen, want, "round {round}: visit_batch");
    // Stopping inside the batch walk.
    let mut seen = 0;
    t.visit_batch(
        ranges.len(),
        &|k, x| x.e < ranges[k].0,
        &|k, x| x.e > ranges[k].1,
        &mut |_, _| {
            seen += 1;
            seen < 3
        },
    );
    assert_eq!(seen, want.len().min(3), "round {round}: visit_batch stops");
}

/// The tree's shape: every branch's first datoms and sizes are its children's, nodes
/// are within their bounds, every leaf is at the same depth. Returns (first datom, size,
/// height).
fn check_node(
    order: IndexOrder,
    node: &Node,
    parent_min: Option<&Datom>,
    round: usize,
) -> (Datom, usize, usize) {
    match node {
        Node::Leaf(items) => {
            assert!(
                !items.is_empty() && items.len() <= LEAF_MAX,
                "round {round}: leaf of {}",
                items.len()
            );
            assert!(items
                .windows(2)
                .all(|w| order.cmp(&w[0], &w[1]) == Ordering::Less));
            if let Some(m) = parent_min {
                assert_eq!(
                    order.cmp(m, &items[0]),
                    Ordering::Equal,
                    "round {round}: leaf min"
                );
            }
            (items[0].clone(), items.len(), 0)
        }
        Node::Branch(b) => {
            let n = b.children.len();
            assert!(
                (1..=BRANCH_MAX).contains(&n),
                "round {round}: branch of {n}"
            );
            assert_eq!((b.mins.len(), b.sizes.len()), (n, n), "round {round}");
            let mut height = None;
            for i in 0..n {
                let (min, size, h) = check_node(order, &b.children[i], Some(&b.mins[i]), round);
                assert_eq!(
                    order.cmp(&min, &b.mins[i]),
                    Ordering::Equal,
                    "round {round}: mins[{i}]"
                );
                assert_eq!(size, b.sizes[i], "round {round}: sizes[{i}]");
                assert!(
                    height.is_none_or(|x| x == h),
                    "round {round}: leaves at different depths"
                );
                height = Some(h);
            }
            if let Some(m) = parent_min {
                assert_eq!(
                    order.cmp(m, &b.mins[0]),
                    Ordering::Equal,
                    "round {round}: branch min"
                );
            }
            (
                b.mins[0].clone(),
                b.sizes.iter().sum(),
                height.unwrap_or(0) + 1,
            )
        }
        Node::Stored(_) => panic!("in-memory trees hold no stored nodes"),
    }
}

#[test]
fn large_batches_split_across_threads_match_a_model() {
    let mut t = Tree::new(IndexOrder::Eavt);
    let mut model = std::collections::BTreeSet::new();
    let mut x: u64 = 7;
    for round in 0..6 {
        let mut batch = std::collections::BTreeMap::new();
        while batch.len() < PARALLEL_APPLY_MIN + 500 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            batch.insert(
                (x >> 33) % 40_000,
                round == 0 || !(x >> 20).is_multiple_of(3),
            );
        }
        let changes = changes_of(&batch);
        let kept = (round % 2 == 1).then(|| t.clone());
        t = t.apply_to_nodes(&changes);
        drop(kept);
        apply_to_model(&mut model, batch);
        assert_matches(&t, &model, round);
    }
}

#[test]
fn in_place_batches_match_a_model_and_leave_shared_versions_alone() {
    // Batches applied to a uniquely owned tree (updated in place) and, every few rounds,
    // to a tree an older version still shares (copied): both must match the model, and
    // the older version must not change.
    let mut t = Tree::new(IndexOrder::Eavt);
    let mut model = std::collections::BTreeSet::new();
    let mut kept: Vec<(Tree, Vec<u64>)> = Vec::new();
    let mut x: u64 = 99;
    for round in 0..300 {
        let mut batch = std::collections::BTreeMap::new();
        for _ in 0..(1 + round % 40) {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            batch.insert((x >> 33) % 3000, !(x >> 20).is_multiple_of(4));
        }
        let changes = changes_of(&batch);
        if round % 7 == 0 {
            kept.push((t.clone(), model.iter().copied().collect()));
        }
        t = t.apply_to_nodes(&changes);
        apply_to_model(&mut model, batch);
        assert_matches(&t, &model, round);
    }
    for (old, want) in kept {
        let got: Vec<u64> = old.iter().map(|x| x.e).collect();
        assert_eq!(got, want);
    }
}

#[test]
fn single_inserts_match_a_sorted_vec() {
    let mut t = Tree::new(IndexOrder::Eavt);
    let mut model = std::collections::BTreeSet::new();
    let mut x: u64 = 12345;
    for _ in 0..5000 {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let e = (x >> 33) % 2000;
        let insert = !(x >> 20).is_multiple_of(3);
        t = t.clone().apply_to_nodes(&[Change {
            datom: d(e),
            insert,
        }]);
        if insert {
            model.insert(e);
        } else {
            model.remove(&e);
        }
    }
    assert_matches(&t, &model, 0);
}

#[test]
fn changes_spread_over_several_children_keep_the_shape() {
    // Small batches touching a few far-apart children of a shared tree (as one
    // transaction's datoms do in AEVT and AVET): copied each time, checked each time.
    let mut t = Tree::new(IndexOrder::Eavt)
        .apply_to_nodes(&changes_of(&(0..3000).map(|e| (e * 2, true)).collect()));
    let mut model: Model = (0..3000).map(|e| e * 2).collect();
    let mut x: u64 = 4242;
    for round in 0..400 {
        let mut batch = Batch::new();
        for _ in 0..(1 + round % 5) {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let e = (x >> 33) % 6100;
            batch.insert(e, !(x >> 20).is_multiple_of(3) || e == 0);
        }
        let kept = t.clone();
        t = t.apply_to_nodes(&changes_of(&batch));
        drop(kept);
        apply_to_model(&mut model, batch);
        assert_matches(&t, &model, round);
    }
}

#[test]
fn exact_changes_kept_pending_match_a_model() {
    // Small exact batches (as transactions make them) go to the pending list and, when
    // it fills, to the nodes; versions kept along the way must not change, and a general
    // `apply_to_nodes` now and then takes the pending list with it.
    let mut t = Tree::new(IndexOrder::Eavt)
        .apply_to_nodes(&changes_of(&(0..2000).map(|e| (e * 3, true)).collect()));
    let mut model: Model = (0..2000).map(|e| e * 3).collect();
    let mut kept: Vec<(Tree, Vec<u64>)> = Vec::new();
    let mut x: u64 = 2024;
    let mut pending_seen = 0;
    let mut flushes = 0;
    for round in 0..1500 {
        let mut batch = Batch::new();
        for _ in 0..(1 + round % 9) {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let e = (x >> 33) % 20_000;
            // Exact: insert what is absent, remove what is present (also what an
            // earlier batch inserted and left pending).
            batch.insert(e, !model.contains(&e));
        }
        if round % 11 == 0 {
            kept.push((t.clone(), model.iter().copied().collect()));
        }
        let pending_len = |t: &Tree| t.pending.as_ref().map_or(0, |p| p.flattened(t.order).len());
        let before = pending_len(&t);
        let general = round % 500 == 499;
        let size = batch.len();
        t = if general {
            t.apply_to_nodes(&changes_of(&batch))
        } else {
            t.apply_through_pending(&changes_of(&batch), Bound::Shared)
        };
        pending_seen = pending_seen.max(pending_len(&t));
        if !general && pending_len(&t) + size < before {
            flushes += 1;
        }
        apply_to_model(&mut model, batch);
        assert_matches(&t, &model, round);
    }
    assert!(pending_seen > PENDING_MAX / 2, "the pending list was used");
    assert!(flushes > 0, "a full pending list went to the nodes");
    for (old, want) in kept {
        let got: Vec<u64> = old.iter().map(|x| x.e).collect();
        assert_eq!(got, want);
    }
    let settled = t.apply_to_nodes(&[]);
    assert!(settled.pending.is_none());
    assert_matches(&settled, &model, 1500);
}

/// A speculative value (`Bound::Loose`) keeps up to `PENDING_LOOSE_MAX` changes pending
/// instead of `PENDING_MAX`, reads the same, leaves the versions it was made from alone, and
/// a later `Shared` application brings its pending changes back within `PENDING_MAX` at the
/// next overflow of `recent`.
#[test]
fn loose_bound_keeps_more_pending_and_reads_the_same() {
    let base = Tree::new(IndexOrder::Eavt)
        .apply_to_nodes(&changes_of(&(0..5000).map(|e| (e * 2, true)).collect()));
    let base_model: Model = (0..5000).map(|e| e * 2).collect();
    let pending_len = |t: &Tree| t.pending.as_ref().map_or(0, |p| p.flattened(t.order).len());
    let mut x: u64 = 77;
    let mut next = |model: &Model| {
        let mut batch = Batch::new();
        for _ in 0..7 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let e = (x >> 33) % 50_000;
            batch.insert(e, !model.contains(&e));
        }
        batch
    };
    let (mut t, mut model) = (base.clone(), base_model.clone());
    let mut most = 0;
    for round in 0..400 {
        let batch = next(&model);
        t = t.apply_through_pending(&changes_of(&batch), Bound::Loose);
        apply_to_model(&mut model, batch);
        assert_matches(&t, &model, round);
        most = most.max(pending_len(&t));
    }
    assert!(most > PENDING_MAX, "loose: {most} pending at most");
    assert!(
        most <= PENDING_LOOSE_MAX + RECENT_MAX,
        "loose: {most} pending at most"
    );
    // The base is untouched.
    let got: Model = base.iter().map(|d| d.e).collect();
    assert_eq!(got, base_model);
    // Shared again: within PENDING_MAX once `recent` has overflowed.
    for round in 0..40 {
        let batch = next(&model);
        t = t.apply_through_pending(&changes_of(&batch), Bound::Shared);
        apply_to_model(&mut model, batch);
        assert_matches(&t, &model, 400 + round);
    }
    assert!(
        pending_len(&t) <= PENDING_MAX,
        "{} pending",
        pending_len(&t)
    );
}

/// A batch of at least `BATCH_PAST_PENDING` changes goes to the nodes after what is
/// pending (not merged with it): the outcome is the model's, where the batch removes what a
/// pending change inserted and inserts again what one removed, and a version kept before
/// is untouched.
#[test]
fn an_import_batch_after_pending_changes_matches_a_model() {
    let mut t = Tree::new(IndexOrder::Eavt)
        .apply_to_nodes(&changes_of(&(0..3000).map(|e| (e * 2, true)).collect()));
    let mut model: Model = (0..3000).map(|e| e * 2).collect();
    // Pending: odd numbers inserted, multiples of 4 removed.
    for k in 0..40u64 {
        let batch: Batch = [(k * 8 + 1, true), (k * 8 + 4, false)]
            .into_iter()
            .collect();
        t = t.apply_through_pending(&changes_of(&batch), Bound::Loose);
        apply_to_model(&mut model, batch);
    }
    assert!(t.pending.is_some(), "changes are pending");
    let kept = (t.clone(), model.clone());
    // The batch: removes the pending inserts of 1, 9, 17, ..., inserts again the pending
    // removals of 4, 12, 20, ..., and inserts a long run of new datoms.
    let mut batch = Batch::new();
    for k in 0..40u64 {
        batch.insert(k * 8 + 1, false);
        batch.insert(k * 8 + 4, true);
    }
    for e in 0..BATCH_PAST_PENDING as u64 {
        batch.insert(100_000 + e, true);
    }
    t = t.apply_through_pending(&changes_of(&batch), Bound::Shared);
    apply_to_model(&mut model, batch);
    assert!(t.pending.is_none(), "everything went to the nodes");
    assert_matches(&t, &model, 0);
    let got: Model = kept.0.iter().map(|d| d.e).collect();
    assert_eq!(got, kept.1, "the version kept before is unchanged");
}

/// A batch of at least `PARALLEL_LEAF_MIN` changes landing in one leaf (an import into a
/// small tree) is merged in two halves on two threads: the tree matches the model, whether
/// the leaf is owned or shared with a kept version, with datoms of the leaf on both sides
/// of the split and removals among the changes.
#[test]
fn a_huge_batch_into_one_leaf_matches_a_model() {
    for shared in [false, true] {
        let start: Batch = (0..12u64).map(|e| (e * 8_000, true)).collect();
        let mut model = Model::new();
        apply_to_model(&mut model, start.clone());
        let t = Tree::new(IndexOrder::Eavt).apply_to_nodes(&changes_of(&start));
        assert!(matches!(t.root, Some(Node::Leaf(_))), "one leaf");
        let mut batch: Batch = (0..PARALLEL_LEAF_MIN as u64 * 2 + 7)
            .map(|e| (e * 3 + 1, true))
            .collect();
        for e in (0..12u64).step_by(3) {
            batch.insert(e * 8_000, false);
        }
        let kept = shared.then(|| t.clone());
        let t = t.apply_to_nodes(&changes_of(&batch));
        let before = model.clone();
        apply_to_model(&mut model, batch);
        assert_matches(&t, &model, usize::from(shared));
        if let Some(kept) = kept {
            let got: Model = kept.iter().map(|d| d.e).collect();
            assert_eq!(got, before, "the kept version is unchanged");
        }
    }
}

/// The split of a huge batch for one leaf falls on a datom of the leaf that the batch
/// removes: the datom goes to the half with its change, and is removed.
#[test]
fn a_huge_batch_split_on_a_removed_datom_removes_it() {
    let n = PARALLEL_LEAF_MIN as u64 * 2;
    // Odd keys 1, 3, ..., 2n - 1 inserted; the even key with (n + 1) / 2 of them below it
    // removed: its change is the batch's middle one.
    let pivot = 2 * n.div_ceil(2);
    let start: Batch = [0, 10_000, pivot, 2 * n + 10]
        .into_iter()
        .map(|e| (e, true))
        .collect();
    let mut model = Model::new();
    apply_to_model(&mut model, start.clone());
    let t = Tree::new(IndexOrder::Eavt).apply_to_nodes(&changes_of(&start));
    let mut batch: Batch = (0..n).map(|k| (2 * k + 1, true)).collect();
    batch.insert(pivot, false);
    let changes = changes_of(&batch);
    assert_eq!(changes[changes.len() / 2].datom.e, pivot);
    let t = t.apply_to_nodes(&changes);
    apply_to_model(&mut model, batch);
    assert!(!t.contains(&d(pivot)));
    assert_matches(&t, &model, 0);
}
