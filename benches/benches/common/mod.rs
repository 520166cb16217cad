//! Pieces every bench shares: the call of a bench over every gate the
//! enabled features build, and the timing loop of the benches whose timed
//! events use up their fixture (each fixture is built untimed, run for as
//! many events as it holds, and rebuilt until criterion's iteration count is
//! reached).

use criterion::measurement::WallTime;

/// With feature `mimalloc` the benches allocate through mimalloc, as the
/// `crtc` binary does (see `compare::measurement::heap`).
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use criterion::{BenchmarkGroup, BenchmarkId};
use std::time::Duration;

/// Times `iters` events over as many fixtures as they take: `build` makes
/// one (untimed), `events` says how many events it holds, and `run(fx, n)`
/// runs the next `n` and returns their time.
#[allow(dead_code)] // the benches with a reusable fixture do not need it
fn time_over_builds<F>(
    iters: u64,
    mut build: impl FnMut() -> F,
    events: impl Fn(&F) -> usize,
    mut run: impl FnMut(&mut F, usize) -> Duration,
) -> Duration {
    let mut timed = Duration::ZERO;
    let mut left = iters as usize;
    while left > 0 {
        let mut fx = build();
        let n = left.min(events(&fx));
        assert!(n > 0, "a fixture holds no events");
        timed += run(&mut fx, n);
        left -= n;
    }
    timed
}

/// Registers `id` on `group`, timed by [`time_over_builds`] over fixtures
/// from `build` (`events` per fixture, `run(fx, n)` times the next `n`).
#[allow(dead_code)] // the benches with a reusable fixture do not need it
pub fn bench_over_builds<F>(
    group: &mut BenchmarkGroup<'_, WallTime>,
    id: BenchmarkId,
    build: impl Fn() -> F,
    events: impl Fn(&F) -> usize,
    run: impl Fn(&mut F, usize) -> Duration,
) {
    group.bench_function(id, |b| {
        b.iter_custom(|iters| time_over_builds(iters, &build, &events, &run))
    });
}

/// Calls `$bench::<G>($args)` for every gate the enabled features build,
/// in the order of [`crtc_bench::for_each_bench_gate`].
macro_rules! every_gate {
    ($bench:ident($($arg:expr),*)) => {{
        crtc_bench::for_each_bench_gate!(call_bench, $bench, ($($arg),*));
    }};
}

/// One call of [`every_gate!`]: `$bench::<$gate>($args)`.
macro_rules! call_bench {
    ($module:ident, $gate:ty, $label:literal, $bench:ident, ($($arg:expr),*)) => {
        $bench::<$gate>($($arg),*);
    };
}
pub(crate) use call_bench;
pub(crate) use every_gate;
