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

            fn lane_hits(f: &Fixture<G>, lane: usize) -> u64 {
                f.lanes[lane].counters().fast_path_hits.get()
            }

            include!("suite/catalogue.rs");
        }
    };
}

scenarios!(rwlock_fast, crtc_strategies::RwLockGate, true);
scenarios!(rwlock_general, crtc_strategies::RwLockGate, false);
#[cfg(feature = "seqlock")]
scenarios!(seqlock_fast, crtc_strategies::SeqlockGate, true);
#[cfg(feature = "seqlock")]
scenarios!(seqlock_general, crtc_strategies::SeqlockGate, false);
#[cfg(feature = "epoch")]
scenarios!(epoch_fast, crtc_strategies::CrossbeamEpochGate, true);
#[cfg(feature = "epoch")]
scenarios!(epoch_general, crtc_strategies::CrossbeamEpochGate, false);
#[cfg(feature = "seize")]
scenarios!(seize_fast, crtc_strategies::SeizeEpochGate, true);
#[cfg(feature = "seize")]
scenarios!(seize_general, crtc_strategies::SeizeEpochGate, false);
