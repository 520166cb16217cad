//! The measuring crate of crtc: the `crtc compare` driver with its subjects
//! (every compiled strategy, the global-lock baseline and, with the
//! `upstream` feature, NVIDIA Dynamo's published tree), the checks of every
//! result against the reference model, and the reports, plots and paper
//! tables it writes. The `crtc` binary (`src/main.rs`) is its command line;
//! the criterion benches are in `benches/`.
#![warn(missing_docs)]

pub mod compare;

/// Calls `$callback!(module, Gate, "label" $(, extra)*)` for every gate
/// crtc-bench measures: the gates of `crtc_strategies::for_each_gate!`, then
/// those of [`outside_gates!`]. The compare registry and the criterion
/// benches enumerate gates through it and nothing else.
#[macro_export]
macro_rules! for_each_bench_gate {
    ($callback:ident $(, $extra:tt)*) => {
        ::crtc_strategies::for_each_gate!($callback $(, $extra)*);
        $crate::outside_gates!($callback $(, $extra)*);
    };
}

/// The hook for gates written outside crtc-strategies: one line per gate,
/// `$callback!(module, path::to::Gate, "its ShapeGate::NAME" $(, $extra)*)`
/// under the crtc-bench feature that pulls in its crate. The `cfg` is read
/// where the macro expands, so it is for crtc-bench's own targets (the
/// binary, the benches), which share the package's features.
#[macro_export]
macro_rules! outside_gates {
    ($callback:ident $(, $extra:tt)*) => {
        #[cfg(feature = "mutex-gate")]
        $callback!(mutex, ::crtc_mutex_gate::MutexGate, "mutex" $(, $extra)*);
    };
}
