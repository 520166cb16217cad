//! The checkers' entry points and bookkeeping: the [`Explorer`] trait a
//! test binary implements with [`loom_explorer!`](crate::loom_explorer) or
//! [`shuttle_explorer!`](crate::shuttle_explorer), execution counts and
//! summaries, named models and suites, shuttle's schedule plan, and running
//! a test alone in a child process.

use std::process::Command;
use std::time::Instant;
/// Environment variable through which a test hands itself to a child
/// process that runs it alone (see [`alone`]).
pub const ALONE_ENV: &str = "CRTC_ALONE_CHILD";

/// Runs `f` with the process to itself, for a test that reads process-wide
/// statistics (the gates' retry counters), which other tests' models bump
/// when the harness runs tests in parallel. In the child started for `test`
/// it runs `f`; otherwise it re-runs this test binary's test `test` alone in
/// a child process, prints the child's output, and panics if the child
/// failed.
pub fn alone(test: &str, f: impl FnOnce()) {
    if std::env::var(ALONE_ENV).is_ok_and(|t| t == test) {
        f();
        return;
    }
    let exe = std::env::current_exe().expect("the test binary's path");
    let output = Command::new(exe)
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(ALONE_ENV, test)
        .output()
        .expect("start the child test process");
    print!("{}", String::from_utf8_lossy(&output.stdout));
    eprint!("{}", String::from_utf8_lossy(&output.stderr));
    assert!(
        output.status.success(),
        "{test}, run alone in a child process, failed ({})",
        output.status
    );
}

/// A checker's entry point, supplied by the test binary (the library does
/// not depend on loom or shuttle): [`loom_explorer!`] or [`shuttle_explorer!`].
pub trait Explorer {
    /// Explores `f`: every execution loom's bounds allow, or the configured
    /// shuttle schedules. A failing check panics out of this call.
    /// Returns the number of executions or schedules.
    fn explore(&self, f: Box<dyn Fn() + Send + Sync>) -> u64;
    /// [`Explorer::explore`], stopping after `cap` executions if given (loom
    /// explores depth-first, so a capped run covers the prefix of the
    /// search), at preemption bound `bound` instead of the configured one if
    /// given. Checkers without a cap or a bound (shuttle) ignore them.
    fn explore_bounded(
        &self,
        f: Box<dyn Fn() + Send + Sync>,
        cap: Option<u64>,
        bound: Option<usize>,
    ) -> u64 {
        let _ = (cap, bound);
        self.explore(f)
    }
    /// Runs `f` once inside the checker's runtime (single-threaded setup
    /// that needs the facade's primitives, e.g. serial outcomes).
    fn once(&self, f: Box<dyn Fn() + Send + Sync>);
    /// A short description of the bounds, for reports.
    fn bounds(&self) -> String;
}

/// Defines `struct $name` implementing [`Explorer`] over loom: the
/// preemption bound is `CRTC_LOOM_PREEMPTIONS`, else `LOOM_MAX_PREEMPTIONS`,
/// else 2; the branch limit is `LOOM_MAX_BRANCHES`, else 100 000 (one store
/// on the real tree is a few hundred loom operations, all counted); loom's
/// other `LOOM_*` variables apply. Use it in a test binary that has loom as
/// a dependency.
#[macro_export]
macro_rules! loom_explorer {
    ($name:ident) => {
        /// loom as the models' checker.
        #[derive(Clone, Copy, Debug, Default)]
        struct $name;

        impl $name {
            fn builder() -> ::loom::model::Builder {
                let mut builder = ::loom::model::Builder::new();
                if ::std::env::var("LOOM_MAX_BRANCHES").is_err() {
                    builder.max_branches = 100_000;
                }
                builder
            }
        }

        impl $crate::models::Explorer for $name {
            fn explore(&self, f: Box<dyn Fn() + Send + Sync>) -> u64 {
                $crate::models::Explorer::explore_bounded(self, f, None, None)
            }
            fn explore_bounded(
                &self,
                f: Box<dyn Fn() + Send + Sync>,
                cap: Option<u64>,
                bound: Option<usize>,
            ) -> u64 {
                let mut builder = Self::builder();
                builder.preemption_bound =
                    Some(bound.unwrap_or_else($crate::models::preemption_bound));
                builder.max_permutations = cap.map(|c| c as usize);
                $crate::models::count_executions(move |f| builder.check(f), f)
            }
            fn once(&self, f: Box<dyn Fn() + Send + Sync>) {
                Self::builder().check(f);
            }
            fn bounds(&self) -> String {
                format!("preemption bound {}", $crate::models::preemption_bound())
            }
        }
    };
}

/// The loom preemption bound: `CRTC_LOOM_PREEMPTIONS`, else
/// `LOOM_MAX_PREEMPTIONS`, else 2.
pub fn preemption_bound() -> usize {
    ["CRTC_LOOM_PREEMPTIONS", "LOOM_MAX_PREEMPTIONS"]
        .iter()
        .find_map(|name| std::env::var(name).ok())
        .map(|v| v.trim().parse().expect("a preemption bound"))
        .unwrap_or(2)
}

thread_local! {
    /// Executions of the model being explored (the checkers run every
    /// modelled thread on the test's OS thread).
    static EXECUTIONS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Runs `check` (a checker's exploration of a closure) on `f`, counting the
/// executions it runs.
pub fn count_executions(
    check: impl FnOnce(Box<dyn Fn() + Send + Sync>),
    f: Box<dyn Fn() + Send + Sync>,
) -> u64 {
    EXECUTIONS.with(|c| c.set(0));
    check(Box::new(move || {
        EXECUTIONS.with(|c| c.set(c.get() + 1));
        f();
    }));
    EXECUTIONS.with(std::cell::Cell::get)
}

/// Runs `f` once under `explorer` and returns its result (handed out of the
/// checker's closure through a thread-local: the checkers run on the
/// caller's OS thread).
pub fn run_once<T: 'static>(
    explorer: &dyn Explorer,
    f: impl Fn() -> T + Send + Sync + 'static,
) -> T {
    thread_local! {
        static OUT: std::cell::RefCell<Option<Box<dyn std::any::Any>>> =
            const { std::cell::RefCell::new(None) };
    }
    explorer.once(Box::new(move || {
        let value = f();
        OUT.with(|o| *o.borrow_mut() = Some(Box::new(value)));
    }));
    OUT.with(|o| o.borrow_mut().take())
        .and_then(|v| v.downcast::<T>().ok())
        .map(|v| *v)
        .expect("the one-execution run ran")
}

/// [`summarize`], noting when the exploration stopped at `cap`.
pub fn summarize_capped(
    explorer: &dyn Explorer,
    cap: Option<u64>,
    explore: impl FnOnce() -> u64,
) -> String {
    let start = Instant::now();
    let executions = explore();
    let capped = match cap {
        Some(cap) if executions + 1 >= cap => format!(", capped at {cap} executions"),
        _ => String::new(),
    };
    format!(
        "{executions} executions in {:.1} s ({}{capped})",
        start.elapsed().as_secs_f64(),
        explorer.bounds()
    )
}

/// One named model of a test binary.
pub struct NamedModel {
    /// Short name (the negative controls' children find it by this).
    pub name: &'static str,
    /// What it checks, for reports.
    pub what: &'static str,
    /// Explores it; panics when a check fails; returns a summary
    /// (`"<n> executions in <t> s (<bounds>)"`).
    pub run: Box<dyn Fn() -> String>,
}

impl std::fmt::Debug for NamedModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NamedModel")
            .field("name", &self.name)
            .field("what", &self.what)
            .finish_non_exhaustive()
    }
}

/// Times `explore` and formats the usual summary.
pub fn summarize(explorer: &dyn Explorer, explore: impl FnOnce() -> u64) -> String {
    let start = Instant::now();
    let executions = explore();
    format!(
        "{executions} executions in {:.1} s ({})",
        start.elapsed().as_secs_f64(),
        explorer.bounds()
    )
}

/// The models of one test binary, for one gate.
#[derive(Debug)]
pub struct Suite {
    /// `"loom"` or `"shuttle"`.
    pub checker: &'static str,
    /// The gate's name in reports.
    pub gate: &'static str,
    /// The models.
    pub models: Vec<NamedModel>,
}

impl Suite {
    /// The model named `name`.
    pub fn model(&self, name: &str) -> &NamedModel {
        self.models
            .iter()
            .find(|m| m.name == name)
            .unwrap_or_else(|| panic!("no model {name} in the {} suite", self.gate))
    }

    /// Runs the model named `name` and prints
    /// `"<checker> model <gate> <name> (<what>): <summary>"`.
    pub fn report(&self, name: &str) {
        let model = self.model(name);
        let summary = (model.run)();
        println!(
            "{} model {} {} ({}): {summary}",
            self.checker, self.gate, model.name, model.what
        );
    }
}

/// Schedules of a shuttle exploration: random and PCT schedulers, each
/// seeded with every seed, `iters` schedules per (scheduler, seed).
#[derive(Clone, Debug)]
pub struct ShuttlePlan {
    /// Schedules per (scheduler, seed).
    pub iters: usize,
    /// Seeds.
    pub seeds: Vec<u64>,
    /// PCT's bug depth.
    pub pct_depth: usize,
}

impl ShuttlePlan {
    /// `CRTC_SHUTTLE_ITERS` (default `default_iters`) schedules per
    /// scheduler and seed, seeds `CRTC_SHUTTLE_SEEDS` (default `1 2 3`),
    /// PCT depth 3.
    pub fn from_env(default_iters: usize) -> Self {
        Self::with_iters(env_number("CRTC_SHUTTLE_ITERS", default_iters))
    }

    /// `iters` schedules per scheduler and seed, seeds from the environment.
    pub fn with_iters(iters: usize) -> Self {
        let spec = std::env::var("CRTC_SHUTTLE_SEEDS").unwrap_or_else(|_| "1 2 3".to_string());
        let seeds = spec
            .split(|c: char| c == ',' || c.is_whitespace())
            .filter(|s| !s.is_empty())
            .map(|s| s.parse().expect("CRTC_SHUTTLE_SEEDS: numbers"))
            .collect();
        Self {
            iters,
            seeds,
            pct_depth: 3,
        }
    }

    /// A description for reports.
    pub fn describe(&self) -> String {
        format!(
            "random + pct depth {}, seeds {:?}, {} each",
            self.pct_depth, self.seeds, self.iters
        )
    }
}

/// A numeric environment variable, or `default`.
pub fn env_number(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .map(|v| {
            v.trim()
                .parse()
                .unwrap_or_else(|_| panic!("{name}: a number"))
        })
        .unwrap_or(default)
}

/// Defines `struct $name(ShuttlePlan)` implementing [`Explorer`] over
/// shuttle's random and PCT schedulers (every atomic is SeqCst under
/// shuttle, and its warning about that is silenced). Use it in a test
/// binary that has shuttle as a dependency.
#[macro_export]
macro_rules! shuttle_explorer {
    ($name:ident) => {
        /// shuttle as the models' checker.
        #[derive(Clone, Debug)]
        struct $name($crate::models::ShuttlePlan);

        impl $name {
            fn config() -> ::shuttle::Config {
                let mut config = ::shuttle::Config::new();
                config.stack_size = 0x40000;
                config.silence_warnings = true;
                config
            }
        }

        impl $crate::models::Explorer for $name {
            fn explore(&self, f: Box<dyn Fn() + Send + Sync>) -> u64 {
                use ::shuttle::scheduler::{PctScheduler, RandomScheduler};
                let f = ::crtc_strategies::sync::Arc::new(f);
                let mut total = 0u64;
                for &seed in &self.0.seeds {
                    for pct in [false, true] {
                        let start = ::std::time::Instant::now();
                        let run = ::crtc_strategies::sync::Arc::clone(&f);
                        let body = move || run();
                        let ran = if pct {
                            let scheduler =
                                PctScheduler::new_from_seed(seed, self.0.pct_depth, self.0.iters);
                            ::shuttle::Runner::new(scheduler, Self::config()).run(body)
                        } else {
                            let scheduler = RandomScheduler::new_from_seed(seed, self.0.iters);
                            ::shuttle::Runner::new(scheduler, Self::config()).run(body)
                        };
                        println!(
                            "  shuttle {} seed {seed}: {ran} schedules in {:.1} s",
                            if pct { "pct" } else { "random" },
                            start.elapsed().as_secs_f64()
                        );
                        total += ran as u64;
                    }
                }
                total
            }
            fn once(&self, f: Box<dyn Fn() + Send + Sync>) {
                let scheduler = ::shuttle::scheduler::RandomScheduler::new_from_seed(0, 1);
                ::shuttle::Runner::new(scheduler, Self::config()).run(f);
            }
            fn bounds(&self) -> String {
                self.0.describe()
            }
        }
    };
}
