//! The gate list, written once: [`for_each_gate!`] names every gate the
//! enabled features compile, so benches, tests and the compare harness
//! instantiate the same gates in the same order without repeating `#[cfg]`
//! lists. The features are this crate's, so a caller needs no features of
//! its own to get the list right.

/// Calls `$callback!(module, Gate, "label" $(, extra)*)` once for every gate
/// the enabled features compile, in report order: the RwLock gate, the
/// seqlock gate, the epoch gate over crossbeam-epoch, the epoch gate over
/// seize. `module` is a lower-case identifier for a per-gate module or test
/// name; `"label"` is the gate's [`ShapeGate::NAME`](crate::ShapeGate::NAME)
/// as a literal, for callers that build test or module names from it. Works
/// in item and statement position; `extra` tokens are passed through.
#[macro_export]
macro_rules! for_each_gate {
    ($callback:ident $(, $extra:tt)*) => {
        $callback!(rwlock, $crate::RwLockGate, "rwlock" $(, $extra)*);
        $crate::__if_seqlock! { $callback!(seqlock, $crate::SeqlockGate, "seqlock" $(, $extra)*); }
        $crate::__if_epoch! { $callback!(epoch, $crate::CrossbeamEpochGate, "epoch-crossbeam" $(, $extra)*); }
        $crate::__if_seize! { $callback!(seize, $crate::SeizeEpochGate, "epoch-seize" $(, $extra)*); }
    };
}

/// Keeps its tokens when feature `seqlock` is on.
#[cfg(feature = "seqlock")]
#[doc(hidden)]
#[macro_export]
macro_rules! __if_seqlock {
    ($($tokens:tt)*) => { $($tokens)* };
}

/// Drops its tokens: feature `seqlock` is off.
#[cfg(not(feature = "seqlock"))]
#[doc(hidden)]
#[macro_export]
macro_rules! __if_seqlock {
    ($($tokens:tt)*) => {};
}

/// Keeps its tokens when feature `epoch` is on.
#[cfg(feature = "epoch")]
#[doc(hidden)]
#[macro_export]
macro_rules! __if_epoch {
    ($($tokens:tt)*) => { $($tokens)* };
}

/// Drops its tokens: feature `epoch` is off.
#[cfg(not(feature = "epoch"))]
#[doc(hidden)]
#[macro_export]
macro_rules! __if_epoch {
    ($($tokens:tt)*) => {};
}

/// Keeps its tokens when feature `seize` is on.
#[cfg(feature = "seize")]
#[doc(hidden)]
#[macro_export]
macro_rules! __if_seize {
    ($($tokens:tt)*) => { $($tokens)* };
}

/// Drops its tokens: feature `seize` is off.
#[cfg(not(feature = "seize"))]
#[doc(hidden)]
#[macro_export]
macro_rules! __if_seize {
    ($($tokens:tt)*) => {};
}
