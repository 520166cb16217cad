//! The scenario suite, instantiated for every strategy (the gate list of
//! `crtc_strategies::for_each_gate!`) with the fast path on and off.

mod suite;

/// One module of the catalogue for gate `$gate` with the fast path `$fast`.
macro_rules! scenarios_with {
    ($name:ident, $gate:ty, $fast:expr) => {
        mod $name {
            use crate::suite::*;
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

/// The catalogue for gate `$gate`, fast path on (`fast`) and off
/// (`general`).
macro_rules! scenarios {
    ($name:ident, $gate:ty, $label:literal) => {
        mod $name {
            scenarios_with!(fast, $gate, true);
            scenarios_with!(general, $gate, false);
        }
    };
}

crtc_strategies::for_each_gate!(scenarios);
