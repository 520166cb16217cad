//! The scenario suite, instantiated for every strategy with the fast path on
//! and off. Adding a strategy is one line at the bottom.

mod suite;

macro_rules! scenarios {
    ($name:ident, $gate:ty, $fast:expr) => {
        mod $name {
            use super::suite::*;
            type G = $gate;
            const FAST: bool = $fast;

            fn fixture(lanes: usize) -> Fixture<G> {
                Fixture::new(FAST, lanes)
            }

            #[test]
            fn decode_tail_extends_in_place() {
                let mut f = fixture(1);
                f.apply(0, store(1, &[], &[1, 2, 3]));
                f.apply(0, store(1, &[1, 2, 3], &[4]));
                f.apply(0, store(1, &[1, 2, 3, 4], &[5]));
                f.apply(0, store(1, &[1, 2, 3, 4, 5], &[6]));
                assert_eq!(f.edge_lengths(), vec![6]);
                assert_eq!(f.score(1, &[1, 2, 3, 4, 5, 6, 7]), 6);
                let dump = f.tree.dump_events();
                assert_eq!(dump.len(), 1);
                assert_eq!(dump[0], crtc::types::RouterEvent { ..store(1, &[], &[1, 2, 3, 4, 5, 6]) });
            }
        }
    };
}

scenarios!(rwlock_fast, crtc_strategies::RwLockGate, true);
scenarios!(rwlock_general, crtc_strategies::RwLockGate, false);
