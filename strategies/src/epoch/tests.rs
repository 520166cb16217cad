//! White-box tests of the epoch gate: which appends stay in place, which
//! length an older snapshot's readers use, positions against `PlainShape`,
//! and real-thread checks that readers only ever see states the node was in.

use super::*;
use crate::bits::SlotBits;
use crate::shape::{cover_prefix, cut_at, drop_slot, promote_full, split_at, PlainShape};
use crate::sync::atomic::{AtomicBool, AtomicUsize};
use crate::sync::{thread, Arc};
use rustc_hash::FxHashSet;

fn pairs(range: std::ops::Range<u64>) -> Vec<BlockPair> {
    range.map(|h| BlockPair::new(h, h)).collect()
}

fn init(n: u64, full: &[u16]) -> ShapeInit {
    let mut bits = SlotBits::new();
    full.iter().for_each(|&s| {
        bits.insert(Slot(s));
    });
    ShapeInit {
        edge: pairs(1..n + 1),
        full: bits,
        ..ShapeInit::default()
    }
}

fn snap_ptr<R: Reclaim>(g: &EpochGate<R>) -> *mut Snapshot {
    g.snap.load(Ordering::Relaxed)
}

fn append<R: Reclaim>(g: &EpochGate<R>, slot: u16, block: u64) -> Result<usize, AppendMiss> {
    let tail = g.read(|s| s.tail().map_or(0, |t| t.external.0));
    g.try_append_at_tail(
        Slot(slot),
        ExternalSequenceBlockHash(tail),
        &[BlockPair::new(block, block)],
    )
}

fn pure_appends_stay_in_place<R: Reclaim>() {
    let g = EpochGate::<R>::new(init(4, &[0]));
    append(&g, 0, 5).expect("grows the exact-size buffer");
    let grown = snap_ptr(&g);
    for block in 6..=8 {
        append(&g, 0, block).expect("pure append");
        assert_eq!(snap_ptr(&g), grown, "a pure append publishes no snapshot");
    }
    append(&g, 0, 9).expect("past the capacity");
    assert_ne!(snap_ptr(&g), grown, "growth publishes a fresh buffer");
    assert_eq!(g.read(|s| s.len()), 9);
}

fn older_snapshots_stop_at_their_own_length<R: Reclaim>() {
    let g = EpochGate::<R>::new(init(4, &[0]));
    append(&g, 0, 5).expect("grow to capacity 8");
    g.shared_commit(None, |w| promote_full(w, Slot(1)))
        .expect("slot 1 full");
    let guard = R::pin();
    let both_full = g.current(&guard);
    assert!(both_full.shape().cover.full.contains(Slot(1)));
    append(&g, 0, 6).expect("demotes slot 1, in place");
    let demoted = g.current(&guard);
    assert!(Arc::ptr_eq(&both_full.edge, &demoted.edge), "shared buffer");
    append(&g, 0, 7).expect("pure append");
    assert_eq!(both_full.edge.live(), 7);
    assert_eq!(
        g.reader_len(both_full),
        None,
        "slot 1 never held blocks 6, 7, and (both_full, 5) is older than an observed state"
    );
    assert_eq!(
        g.reader_len(demoted),
        Some(7),
        "the current snapshot follows"
    );
    let (len, cut) = g.read(|s| (s.len(), s.cutoff(Slot(1))));
    assert_eq!((len, cut), (7, Some(5)));
}

/// Everything observable, plus every position lookup over a small alphabet.
type Observed = (Vec<BlockPair>, Vec<Slot>, Vec<(Slot, u32)>, bool, Vec<u64>);

const ALPHABET: u64 = 12;

fn observe(s: &impl ShapeRead) -> Observed {
    let mut edge = Vec::new();
    s.copy_pairs(0..s.len(), &mut edge);
    let mut cutoffs = Vec::new();
    s.for_each_cutoff(|slot, k| cutoffs.push((slot, k)));
    let mut found = Vec::new();
    for h in 0..ALPHABET {
        let hash = ExternalSequenceBlockHash(h);
        found.push(s.position(hash).map_or(u64::MAX, |p| p as u64));
        for near in 0..s.len() {
            found.push(s.position_near(hash, near).map_or(u64::MAX, |p| p as u64));
        }
    }
    (edge, s.full_slots(), cutoffs, s.is_internal(), found)
}

struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n.max(1)
    }
    fn blocks(&mut self) -> Vec<BlockPair> {
        let n = if self.below(8) == 0 {
            20
        } else {
            1 + self.below(5)
        };
        (0..n)
            .map(|_| BlockPair::new(self.below(ALPHABET), self.below(ALPHABET)))
            .collect()
    }
}

/// One random step on both shapes; the writer's own view is compared too.
fn step<R: Reclaim>(g: &EpochGate<R>, plain: &mut PlainShape, rng: &mut Lcg) {
    let slot = Slot([0, 1, 2, 300][rng.below(4) as usize]);
    let len = plain.len();
    let pos = rng.below(len as u64 + 1) as usize;
    match rng.below(7) {
        0 => {
            let blocks = rng.blocks();
            let parent = plain
                .tail()
                .map_or(ExternalSequenceBlockHash(0), |t| t.external);
            let expected = append_eligibility(plain, slot, parent, &blocks).map(|()| {
                append_demoting(plain, slot, &blocks);
                len
            });
            assert_eq!(g.try_append_at_tail(slot, parent, &blocks), expected);
        }
        1 if !plain.is_internal() => {
            let blocks = rng.blocks();
            append_demoting(plain, slot, &blocks);
            let seen = g.exclusive_commit(None, |w| {
                append_demoting(w, slot, &blocks);
                Commit::changed(observe(w))
            });
            assert_eq!(seen, Ok(observe(plain)), "the writer's own view");
        }
        2 if len >= 2 => {
            let at = 1 + rng.below(len as u64 - 1) as usize;
            let suffix = split_at(plain, at);
            let seen = g.exclusive_commit(None, |w| Commit::changed(split_at(w, at)));
            let seen = seen.expect("unversioned");
            assert_eq!(
                (seen.edge, seen.full, seen.cutoffs),
                (suffix.edge, suffix.full, suffix.cutoffs)
            );
        }
        3 => {
            let cut = cut_at(plain, slot, pos);
            let seen = g.exclusive_commit(None, |w| Commit::unchanged(cut_at(w, slot, pos)));
            assert_eq!(seen, Ok(cut));
        }
        4 => {
            let changed = cover_prefix(plain, slot, pos);
            assert_eq!(
                g.shared_commit(None, |w| cover_prefix(w, slot, pos)),
                Ok(changed)
            );
        }
        5 => {
            let changed = promote_full(plain, slot);
            assert_eq!(
                g.shared_commit(None, |w| promote_full(w, slot)),
                Ok(changed)
            );
        }
        _ => {
            let dropped = drop_slot(plain, slot);
            let seen = g.exclusive_commit(None, |w| Commit::unchanged(drop_slot(w, slot)));
            assert_eq!(seen, Ok(dropped));
        }
    }
}

/// Rounds of the longer tests: miri interprets every step, so it runs a
/// few of them (still every branch of `step`; the native runs cover the
/// state space, miri the memory accesses).
const ROUNDS: u64 = if cfg!(miri) { 2 } else { 150 };
/// Rounds and steps per round of `matches_a_plain_shape`, whose every step
/// compares every lookup (the heaviest test under miri).
const PLAIN_ROUNDS: u64 = if cfg!(miri) { 1 } else { 150 };
const STEPS: u64 = if cfg!(miri) { 20 } else { 40 };

fn matches_a_plain_shape<R: Reclaim>() {
    let mut rng = Lcg(11);
    for _ in 0..PLAIN_ROUNDS {
        let first = init(1 + rng.below(6), &[0]);
        let mut plain = PlainShape::new(first.clone());
        let g = EpochGate::<R>::new(first);
        for _ in 0..STEPS {
            step(&g, &mut plain, &mut rng);
            assert_eq!(g.read(|s| observe(s)), observe(&plain));
            assert_eq!(g.plan(|s| observe(s)).0, observe(&plain));
        }
    }
}

/// A compact state: length, full word 0, cutoffs.
type State = (usize, u64, Vec<(Slot, u32)>);

fn state(s: &impl ShapeRead) -> State {
    let mut cutoffs = Vec::new();
    s.for_each_cutoff(|slot, k| cutoffs.push((slot, k)));
    (s.len(), s.full_word(0), cutoffs)
}

/// Slot 0 appends (demoting slot 1 whenever slot 1 was promoted) while
/// slot 1 is promoted and cut back; readers record every state they see.
fn readers_see_only_states_the_node_had<R: Reclaim>() {
    let g = Arc::new(EpochGate::<R>::new(init(2, &[0])));
    let done = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let (g, done) = (Arc::clone(&g), Arc::clone(&done));
            thread::spawn(move || {
                let mut seen = FxHashSet::default();
                // Relaxed: a stop flag only.
                while !done.load(Ordering::Relaxed) {
                    seen.insert(g.read(|s| state(s)));
                }
                seen
            })
        })
        .collect();
    let mut history: FxHashSet<State> = FxHashSet::default();
    history.insert(g.read(|s| state(s)));
    let mut rng = Lcg(5);
    for block in 100..100 + 20 * ROUNDS {
        match rng.below(6) {
            0 => {
                g.shared_commit(None, |w| promote_full(w, Slot(1)))
                    .expect("promote");
            }
            1 => {
                let len = g.read(|s| s.len());
                let at = rng.below(len as u64) as usize;
                g.exclusive_commit(None, |w| Commit::unchanged(cut_at(w, Slot(1), at)))
                    .expect("cut");
            }
            _ => {
                append(&g, 0, block).expect("slot 0 stays full");
            }
        }
        history.insert(g.read(|s| state(s)));
    }
    // Relaxed: a stop flag only.
    done.store(true, Ordering::Relaxed);
    for reader in readers {
        for seen in reader.join().expect("reader") {
            assert!(
                history.contains(&seen),
                "a state the node never had: {seen:?}"
            );
        }
    }
}

/// A side word stands for the tree's child map: an exclusive section changes
/// it together with the edge, and every read must see the two agree.
fn exclusive_sections_are_atomic_for_readers<R: Reclaim>() {
    let g = Arc::new(EpochGate::<R>::new(init(2, &[0])));
    let side = Arc::new(AtomicUsize::new(2));
    let (reads, done) = (
        Arc::new(AtomicUsize::new(0)),
        Arc::new(AtomicBool::new(false)),
    );
    let reader = {
        let (g, side) = (Arc::clone(&g), Arc::clone(&side));
        let (reads, done) = (Arc::clone(&reads), Arc::clone(&done));
        thread::spawn(move || {
            // Relaxed: a stop flag only.
            while !done.load(Ordering::Relaxed) {
                // Relaxed: ordered by the gate's validation, which is the test.
                let (len, kids) = g.read(|s| (s.len(), side.load(Ordering::Relaxed)));
                assert_eq!(len, kids, "edge and child map from different states");
                // Relaxed: a progress count only.
                reads.fetch_add(1, Ordering::Relaxed);
            }
        })
    };
    let mut block = 10;
    // Relaxed: a progress count only.
    while block < 25 * ROUNDS || reads.load(Ordering::Relaxed) < ROUNDS as usize {
        block += 1;
        g.exclusive_commit(None, |w| {
            // The map changes first, as a split's hand-off does.
            if block % 7 == 0 && w.len() > 2 {
                side.store(2, Ordering::Relaxed);
                w.truncate_edge(2);
            } else {
                side.store(w.len() + 1, Ordering::Relaxed);
                w.push_blocks(&[BlockPair::new(block, block)]);
            }
            Commit::changed(())
        })
        .expect("unversioned");
        if block % 8 == 0 {
            thread::yield_now();
        }
    }
    // Relaxed: a stop flag only.
    done.store(true, Ordering::Relaxed);
    reader.join().expect("reader");
}

fn plans_fail_after_pure_appends<R: Reclaim>() {
    let g = EpochGate::<R>::new(init(4, &[0]));
    let (_, version) = g.plan(|_| ());
    append(&g, 0, 5).expect("pure append");
    assert_eq!(g.shared(Some(version), || ()), Err(Stale));
}

macro_rules! gate_tests {
    ($name:ident, $reclaim:ty) => {
        mod $name {
            #[test]
            fn pure_appends_stay_in_place() {
                super::pure_appends_stay_in_place::<$reclaim>();
            }
            #[test]
            fn older_snapshots_stop_at_their_own_length() {
                super::older_snapshots_stop_at_their_own_length::<$reclaim>();
            }
            #[test]
            fn matches_a_plain_shape() {
                super::matches_a_plain_shape::<$reclaim>();
            }
            #[test]
            fn readers_see_only_states_the_node_had() {
                super::readers_see_only_states_the_node_had::<$reclaim>();
            }
            #[test]
            fn exclusive_sections_are_atomic_for_readers() {
                super::exclusive_sections_are_atomic_for_readers::<$reclaim>();
            }
            #[test]
            fn plans_fail_after_pure_appends() {
                super::plans_fail_after_pure_appends::<$reclaim>();
            }
        }
    };
}

gate_tests!(crossbeam, crate::reclaim::EpochReclaim);
#[cfg(feature = "seize")]
gate_tests!(seize, crate::reclaim::SeizeReclaim);
