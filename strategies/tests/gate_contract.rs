//! The `ShapeGate` contract, checked the same way for every strategy:
//! validation after shape changes, the decode append's checks (each
//! declined append changes nothing), and reads and plans under a caller's
//! pin. Adding a strategy is one line.

use crtc_strategies::shape::{split_at, ShapeInit};
use crtc_strategies::{
    AppendMiss, BlockPair, Commit, ExternalSequenceBlockHash, Reclaim, ShapeGate, ShapeRead, Slot,
    SlotBits, Stale,
};

fn edge(n: u64) -> Vec<BlockPair> {
    (1..=n).map(|h| BlockPair::new(h, h)).collect()
}

fn gate<G: ShapeGate>(n: u64, full: &[u16], cutoffs: &[(u16, u32)], internal: bool) -> G {
    let mut bits = SlotBits::new();
    full.iter().for_each(|&s| {
        bits.insert(Slot(s));
    });
    G::new(ShapeInit {
        edge: edge(n),
        full: bits,
        cutoffs: cutoffs.iter().map(|&(s, k)| (Slot(s), k)).collect(),
        internal,
        anchor: false,
    })
}

/// Everything observable about a gate's shape: edge, full slots, cutoffs, internal.
type Observed = (Vec<BlockPair>, Vec<Slot>, Vec<(Slot, u32)>, bool);

fn observe<G: ShapeGate>(g: &G) -> Observed {
    g.read(|s| {
        let mut pairs = Vec::new();
        s.copy_pairs(0..s.len(), &mut pairs);
        let mut cutoffs = Vec::new();
        s.for_each_cutoff(|slot, k| cutoffs.push((slot, k)));
        (pairs, s.full_slots(), cutoffs, s.is_internal())
    })
}

fn declines<G: ShapeGate>(g: &G, slot: u16, parent: u64, blocks: &[BlockPair], reason: AppendMiss) {
    let before = observe(g);
    let (_, version) = g.plan(|_| ());
    let result = g.try_append_at_tail(Slot(slot), ExternalSequenceBlockHash(parent), blocks);
    assert_eq!(result, Err(reason));
    assert_eq!(observe(g), before, "a declined append changes nothing");
    assert!(
        g.shared(Some(version), || ()).is_ok(),
        "and invalidates nothing"
    );
}

fn append_checks<G: ShapeGate>() {
    let one = [BlockPair::new(9, 9)];
    declines(
        &gate::<G>(4, &[0], &[], false),
        0,
        4,
        &[],
        AppendMiss::Empty,
    );
    declines(
        &gate::<G>(4, &[0], &[], true),
        0,
        4,
        &one,
        AppendMiss::Internal,
    );
    declines(
        &gate::<G>(4, &[0], &[], false),
        0,
        3,
        &one,
        AppendMiss::NotTail,
    );
    declines(
        &gate::<G>(4, &[1], &[(0, 3)], false),
        0,
        4,
        &one,
        AppendMiss::Uncovered,
    );
    declines(
        &gate::<G>(4, &[1], &[], false),
        0,
        4,
        &one,
        AppendMiss::Uncovered,
    );
}

fn append_demotes_and_invalidates<G: ShapeGate>() {
    let g = gate::<G>(4, &[0, 1, 300], &[(2, 2)], false);
    let (_, version) = g.plan(|_| ());
    assert_eq!(
        g.try_append_at_tail(
            Slot(0),
            ExternalSequenceBlockHash(4),
            &[BlockPair::new(5, 5)]
        ),
        Ok(4)
    );
    let (pairs, full, cutoffs, _) = observe(&g);
    assert_eq!(pairs, edge(5));
    assert_eq!(full, vec![Slot(0)]);
    assert_eq!(cutoffs, vec![(Slot(1), 4), (Slot(2), 2), (Slot(300), 4)]);
    assert_eq!(
        g.shared(Some(version), || ()),
        Err(Stale),
        "older plans fail validation"
    );
}

fn stale_plans_fail_after_a_split_promoted_their_cutoff<G: ShapeGate>() {
    let g = gate::<G>(6, &[0], &[(1, 4)], false);
    let (_, version) = g.plan(|_| ());
    g.exclusive_commit(None, |w| {
        split_at(w, 3);
        Commit::changed(())
    })
    .expect("unversioned commit");
    assert!(
        g.read(|s| s.is_full(Slot(1))),
        "the split promoted the cutoff"
    );
    assert_eq!(g.shared_commit(Some(version), |_| ()), Err(Stale));
    assert_eq!(
        g.exclusive_commit(Some(version), |_| Commit::unchanged(())),
        Err(Stale)
    );
    let (_, fresh) = g.plan(|_| ());
    assert!(g.shared_commit(Some(fresh), |_| ()).is_ok());
}

fn coverage_commits_do_not_invalidate<G: ShapeGate>() {
    let g = gate::<G>(4, &[0], &[], false);
    let (_, version) = g.plan(|_| ());
    g.exclusive_commit(Some(version), |w| {
        Commit::unchanged(crtc_strategies::shape::promote_full(w, Slot(1)))
    })
    .expect("valid");
    g.shared_commit(Some(version), |w| {
        crtc_strategies::shape::cover_prefix(w, Slot(2), 2)
    })
    .expect("valid");
    assert!(g.shared(Some(version), || ()).is_ok());
}

/// `read_in` and `plan_in` under one caller's pin see what `read` and
/// `plan` see, and their versions validate and go stale alike.
fn pinned_reads_and_plans_match_their_own_pins<G: ShapeGate>() {
    let g = gate::<G>(20, &[0], &[(1, 7)], false);
    let guard = <G::Reclaim as Reclaim>::pin();
    let len_and_cut = |s: &G::View<'_>| (s.len(), s.covered_len(Slot(1)));
    assert_eq!(g.read_in(&guard, len_and_cut), g.read(len_and_cut));
    let (planned, version) = g.plan_in(&guard, len_and_cut);
    assert_eq!(planned, (20, 7));
    assert!(g.shared(Some(version), || ()).is_ok());
    let appended = g.try_append_at_tail(
        Slot(0),
        ExternalSequenceBlockHash(20),
        &[BlockPair::new(21, 21)],
    );
    assert_eq!(appended, Ok(20));
    assert_eq!(g.read_in(&guard, len_and_cut), (21, 7));
    assert_eq!(g.shared(Some(version), || ()), Err(Stale));
    let (_, fresh) = g.plan_in(&guard, len_and_cut);
    assert!(g.shared(Some(fresh), || ()).is_ok());
}

macro_rules! contract {
    ($name:ident, $gate:ty, $label:literal) => {
        mod $name {
            #[test]
            fn append_checks() {
                super::append_checks::<$gate>();
            }
            #[test]
            fn append_demotes_and_invalidates() {
                super::append_demotes_and_invalidates::<$gate>();
            }
            #[test]
            fn stale_plans_fail_after_a_split_promoted_their_cutoff() {
                super::stale_plans_fail_after_a_split_promoted_their_cutoff::<$gate>();
            }
            #[test]
            fn coverage_commits_do_not_invalidate() {
                super::coverage_commits_do_not_invalidate::<$gate>();
            }
            #[test]
            fn pinned_reads_and_plans_match_their_own_pins() {
                super::pinned_reads_and_plans_match_their_own_pins::<$gate>();
            }
            #[test]
            fn the_gate_list_labels_the_gate_by_its_name() {
                assert_eq!(<$gate as crtc_strategies::ShapeGate>::NAME, $label);
            }
        }
    };
}

crtc_strategies::for_each_gate!(contract);
