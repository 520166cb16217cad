//! What a comparison takes: the options, their validation, and the stream
//! they name (a seeded preset, a Mooncake trace run through the engine
//! model, or a recorded event stream), loaded once per run.

use crate::compare::measurement::measure::online_cores;
use crate::compare::registry::UpstreamRows;
use crtc_verification::workload::expand::{self, Timeline, TraceShape};
use crtc_verification::workload::presets::{self, agentx_placement};
use crtc_verification::workload::{
    jsonl, mooncake, EngineConfig, ParseError, RandomPlacement, Workload,
};
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Scale of the built-in preset when none is given: the default run (three
/// capacity rows on 2 cores) then takes well under a minute in release.
pub const DEFAULT_SCALE: f64 = 1.0;
/// Default keep-up offered rate, events per second.
pub const DEFAULT_RATE: f64 = 20_000.0;
/// Default keep-up window.
pub const DEFAULT_WINDOW: Duration = Duration::from_secs(5);
/// Most simulated workers (one rank slot each).
pub const MAX_WORKERS: usize = crtc_strategies::MAX_SLOTS;
/// Default seed.
pub const DEFAULT_SEED: u64 = 1;
/// Most differences `--check-upstream` lists by default.
pub const DEFAULT_CHECK_LIMIT: usize = 200;
/// Most repeats `--repeat` takes.
pub const MAX_REPEAT: usize = 50;
/// Largest `--trace-length-factor` and `--trace-duplication-factor`.
pub const MAX_TRACE_FACTOR: u64 = 1024;
/// Longest benchmark window, ms (one hour).
pub const MAX_WINDOW_MS: u64 = 3_600_000;
/// Most `--sweep-steps`.
pub const MAX_SWEEP_STEPS: usize = 100;

/// Cargo features this binary was built with, in a fixed order.
pub fn features() -> Vec<String> {
    [
        ("seqlock", cfg!(feature = "seqlock")),
        ("epoch", cfg!(feature = "epoch")),
        ("seize", cfg!(feature = "seize")),
        ("upstream", cfg!(feature = "upstream")),
        ("mimalloc", cfg!(feature = "mimalloc")),
    ]
    .into_iter()
    .filter(|(_, on)| *on)
    .map(|(name, _)| name.to_owned())
    .collect()
}

/// Where the stream comes from.
#[derive(Clone, Debug, PartialEq)]
pub enum Source {
    /// A built-in preset ("chat" or "agentx").
    Preset(String),
    /// A Mooncake JSONL request trace run through the engine model.
    Trace(PathBuf),
    /// A recorded event stream (JSON lines, see [`crtc_verification::workload::jsonl`]).
    Events(PathBuf),
}

/// Which measurements to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Write capacity only.
    Capacity,
    /// Keep-up latency only.
    KeepUp,
    /// Both, capacity first.
    Both,
}

impl Mode {
    pub(super) fn capacity(self) -> bool {
        matches!(self, Mode::Capacity | Mode::Both)
    }

    pub(super) fn keepup(self) -> bool {
        matches!(self, Mode::KeepUp | Mode::Both)
    }

    pub(super) fn name(self) -> &'static str {
        match self {
            Mode::Capacity => "capacity",
            Mode::KeepUp => "keepup",
            Mode::Both => "both",
        }
    }
}

/// Everything `crtc compare` takes.
#[derive(Clone, Debug)]
pub struct CompareOptions {
    /// The stream.
    pub source: Source,
    /// Seed of presets, placement and output tokens.
    pub seed: u64,
    /// Preset size multiplier.
    pub scale: f64,
    /// Lane threads per row.
    pub lanes: usize,
    /// Reader threads per row.
    pub readers: usize,
    /// Simulated workers (presets and traces; engine default when `None`).
    pub workers: Option<usize>,
    /// Per-worker cache capacity in blocks (presets and traces).
    pub capacity: Option<usize>,
    /// Which measurements.
    pub mode: Mode,
    /// Keep-up offered rate, events per second.
    pub rate: f64,
    /// Keep-up window.
    pub window: Duration,
    /// Draw progress bars (on stderr).
    pub progress: bool,
    /// The command line, recorded in the report.
    pub argv: Vec<String>,
    /// Also run the serial cross-check against upstream (feature `upstream`).
    pub check_upstream: bool,
    /// Most differences the cross-check lists.
    pub check_limit: usize,
    /// Accept an event file that breaks the chaining rule; the reference
    /// model's verdicts are then not computed.
    pub unchained: bool,
    /// Run even when lanes plus readers exceed the machine's cores (the
    /// report then says so).
    pub oversubscribe: bool,
    /// Runs per configuration, interleaved round-robin; each row reports
    /// medians with their range (`output::repeat`).
    pub repeat: usize,
    /// Only the configurations of these strategies (gate names,
    /// "global-lock", the upstream rows' names); `None`: all.
    pub strategies: Option<Vec<String>>,
    /// Which upstream rows (feature `upstream`): the one `upstream-1.6.1`
    /// row, or every indexer a dynamo user picks (`--upstream-rows all`).
    pub upstream_rows: UpstreamRows,
    /// Upstream's trace shaping flags (traces only; the default shape keeps
    /// the trace as it is, in file order).
    pub shape: TraceShape,
    /// Upstream's windowed replay: the benchmark windows in ms, longest
    /// first (`--benchmark-duration-ms`, or the `--sweep` steps); `None`:
    /// the capacity and keep-up modes.
    pub windows: Option<Vec<u64>>,
    /// The windows come from `--sweep`.
    pub sweep: bool,
    /// Extra threads running find_matches in a loop during a windowed
    /// replay (`--find-matches-concurrency`).
    pub find_matches_concurrency: usize,
}

/// Default lane and reader threads for a machine with `cores` cores: one
/// reader and up to two lanes, never more busy threads than cores (one
/// core: one lane and no reader). The thread that issues events is not
/// counted: it enqueues the whole stream in a fraction of the run and then
/// waits for the drain.
pub fn default_threads(cores: usize) -> (usize, usize) {
    let lanes = cores.saturating_sub(1).clamp(1, 2);
    (lanes, cores.saturating_sub(lanes).min(1))
}

/// Busy threads of a run (lanes, readers and find_matches stress threads)
/// above the machine's cores, if any: (busy threads, cores).
pub fn oversubscription(options: &CompareOptions, cores: usize) -> Option<(usize, usize)> {
    let busy = options.lanes + options.readers + options.find_matches_concurrency;
    (busy > cores).then_some((busy, cores))
}

impl Default for CompareOptions {
    /// The default run: built-in agentx preset, capacity mode, lanes and
    /// readers fitted to this machine's cores (two lanes and one reader, fewer
    /// below three cores).
    fn default() -> Self {
        let (lanes, readers) = default_threads(online_cores());
        Self {
            source: Source::Preset("agentx".to_owned()),
            seed: DEFAULT_SEED,
            scale: DEFAULT_SCALE,
            lanes,
            readers,
            workers: None,
            capacity: None,
            mode: Mode::Capacity,
            rate: DEFAULT_RATE,
            window: DEFAULT_WINDOW,
            progress: false,
            argv: Vec::new(),
            check_upstream: false,
            check_limit: DEFAULT_CHECK_LIMIT,
            unchained: false,
            oversubscribe: false,
            repeat: 1,
            strategies: None,
            upstream_rows: UpstreamRows::Default,
            shape: TraceShape::default(),
            windows: None,
            sweep: false,
            find_matches_concurrency: 0,
        }
    }
}

/// A failure to run: bad options, an unreadable or malformed file, a thread
/// that could not start. The message names the file and line when there is
/// one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompareError(pub String);

impl fmt::Display for CompareError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for CompareError {}

impl From<String> for CompareError {
    fn from(message: String) -> Self {
        Self(message)
    }
}

/// Why `--check-upstream` fails in a build without feature `upstream`.
pub const UPSTREAM_MISSING: &str =
    "--check-upstream needs the upstream crate: rebuild with `--features upstream`";

/// Why `--upstream-rows all` fails in a build without feature `upstream`.
pub const UPSTREAM_ROWS_MISSING: &str =
    "--upstream-rows all needs the upstream crate: rebuild with `--features upstream`";

fn file_error(path: &Path, error: ParseError) -> CompareError {
    match error {
        ParseError { line: 0, reason } => CompareError(reason),
        ParseError { line, reason } => {
            CompareError(format!("{}: line {line}: {reason}", path.display()))
        }
    }
}

fn engine_config(options: &CompareOptions) -> EngineConfig {
    let default = EngineConfig::default();
    EngineConfig {
        workers: options.workers.unwrap_or(default.workers),
        capacity_blocks: options.capacity.unwrap_or(default.capacity_blocks),
        seed: options.seed,
    }
}

/// Generates or loads the stream `options` names.
pub fn load_workload(options: &CompareOptions) -> Result<Workload, CompareError> {
    let (seed, scale, config) = (options.seed, options.scale, engine_config(options));
    match &options.source {
        Source::Preset(name) => match name.as_str() {
            "chat" => Ok(presets::chat_with(
                seed,
                scale,
                config,
                RandomPlacement::new(seed),
            )),
            "agentx" => Ok(presets::agentx_with(
                seed,
                scale,
                config,
                agentx_placement(seed),
            )),
            other => Err(CompareError(format!(
                "unknown workload {other:?} (expected one of: {})",
                presets::PRESETS.join(", ")
            ))),
        },
        Source::Trace(path) if options.shape != TraceShape::default() => {
            Ok(trace_timeline(options, path)?.0.workload)
        }
        Source::Trace(path) => {
            mooncake::load_mooncake(path, config).map_err(|e| file_error(path, e))
        }
        Source::Events(path) => {
            if options.workers.is_some() || options.capacity.is_some() {
                return Err(CompareError(
                    "--workers and --capacity shape generated streams; they do not apply to --events".to_owned(),
                ));
            }
            let file = std::fs::File::open(path)
                .map_err(|e| CompareError(format!("cannot open {}: {e}", path.display())))?;
            let mut name = format!(
                "events:{}",
                path.file_name().unwrap_or_default().to_string_lossy()
            );
            let chaining = if options.unchained {
                name.push_str(" (--unchained: the reference model's verdicts do not apply)");
                jsonl::Chaining::Unchecked
            } else {
                jsonl::Chaining::Checked
            };
            jsonl::read_jsonl_with(std::io::BufReader::new(file), &name, chaining)
                .map_err(|e| file_error(path, e))
        }
    }
}

/// The trace at `path` expanded and laid out as upstream's bench does
/// ([`expand`]), with the engine configuration it ran on.
pub fn trace_timeline(
    options: &CompareOptions,
    path: &Path,
) -> Result<(Timeline, EngineConfig), CompareError> {
    let config = engine_config(options);
    let timeline =
        expand::load_timeline(path, options.shape, config).map_err(|e| file_error(path, e))?;
    Ok((timeline, config))
}

fn validate_shape(options: &CompareOptions) -> Result<(), CompareError> {
    let bad = |message: String| Err(CompareError(message));
    let shape = options.shape;
    for (flag, value) in [
        ("--trace-length-factor", shape.length_factor),
        ("--trace-duplication-factor", shape.duplication_factor),
    ] {
        if !(1..=MAX_TRACE_FACTOR).contains(&value) {
            return bad(format!("{flag} must be between 1 and {MAX_TRACE_FACTOR}"));
        }
    }
    let workers = options.workers.unwrap_or(EngineConfig::default().workers);
    let ranks = workers.checked_mul(shape.worker_duplication);
    if shape.worker_duplication == 0 || ranks.is_none_or(|r| r > MAX_WORKERS) {
        return bad(format!(
            "--inference-worker-duplication-factor must be at least 1, and workers ({workers}) \
             × it at most {MAX_WORKERS} ranks"
        ));
    }
    if shape
        .simulation_ms
        .is_some_and(|ms| !(1..=MAX_WINDOW_MS).contains(&ms))
    {
        return bad(format!(
            "--trace-simulation-duration-ms must be between 1 and {MAX_WINDOW_MS}"
        ));
    }
    Ok(())
}

fn validate_windows(options: &CompareOptions) -> Result<(), CompareError> {
    let bad = |message: String| Err(CompareError(message));
    if options.find_matches_concurrency > 256 {
        return bad("--find-matches-concurrency must be at most 256".to_owned());
    }
    let Some(windows) = &options.windows else {
        return Ok(());
    };
    if windows.is_empty() || windows.iter().any(|w| !(1..=MAX_WINDOW_MS).contains(w)) {
        return bad(format!(
            "benchmark windows (--benchmark-duration-ms, --sweep-min-ms, --sweep-max-ms) must be \
             between 1 and {MAX_WINDOW_MS} ms"
        ));
    }
    if !matches!(options.source, Source::Trace(_)) {
        return bad("--sweep and --benchmark-duration-ms replay a trace: give --trace PATH".into());
    }
    if options.readers == 0 {
        return bad(
            "the windowed replay times lookups on reader threads: --readers must be at least 1"
                .into(),
        );
    }
    Ok(())
}

fn validate_strategies(options: &CompareOptions) -> Result<(), CompareError> {
    let Some(names) = options.strategies.as_deref() else {
        return Ok(());
    };
    let known = crate::compare::registry::strategy_names(options.upstream_rows);
    let unknown: Vec<&String> = names
        .iter()
        .filter(|n| !known.contains(&n.as_str()))
        .collect();
    if names.is_empty() || !unknown.is_empty() {
        return Err(CompareError(format!(
            "--strategies: unknown or missing strategy names {unknown:?}; this build has {}",
            known.join(", ")
        )));
    }
    Ok(())
}

/// `--upstream-rows all` needs the upstream crate, and runs capacity mode
/// only: the branch-sharded indexer's shards count the pieces of a split
/// event, so its live applied count (keep-up backlogs, windowed replays)
/// would not be events.
fn validate_upstream_rows(options: &CompareOptions) -> Result<(), CompareError> {
    if options.upstream_rows == UpstreamRows::Default {
        return Ok(());
    }
    if !cfg!(feature = "upstream") {
        return Err(CompareError(UPSTREAM_ROWS_MISSING.to_owned()));
    }
    if options.mode != Mode::Capacity || options.windows.is_some() {
        return Err(CompareError(
            "--upstream-rows all runs in capacity mode only (no --mode keepup/both, \
             --benchmark-duration-ms or --sweep)"
                .to_owned(),
        ));
    }
    Ok(())
}

/// Rejects options no run can use.
pub fn validate(options: &CompareOptions) -> Result<(), CompareError> {
    let bad = |message: &str| Err(CompareError(message.to_owned()));
    if !(options.scale > 0.0 && options.scale <= 1000.0) {
        return bad("--scale must be above 0 and at most 1000");
    }
    if !(1..=256).contains(&options.lanes) {
        return bad("--lanes must be between 1 and 256");
    }
    if options.readers > 256 {
        return bad("--readers must be at most 256");
    }
    if !options
        .workers
        .is_none_or(|w| (1..=MAX_WORKERS).contains(&w))
    {
        return bad("--workers must be between 1 and 65536");
    }
    if options.capacity == Some(0) {
        return bad("--capacity must be at least 1 block");
    }
    if !(options.rate.is_finite() && options.rate > 0.0) {
        return bad("--rate must be a positive number of events per second");
    }
    if options.window.is_zero() || options.window > Duration::from_secs(3600) {
        return bad("--window-s must be above 0 and at most 3600");
    }
    if options.check_upstream && !cfg!(feature = "upstream") {
        return bad(UPSTREAM_MISSING);
    }
    if !(1..=MAX_REPEAT).contains(&options.repeat) {
        return bad("--repeat must be between 1 and 50");
    }
    validate_upstream_rows(options)?;
    validate_strategies(options)?;
    validate_shape(options)?;
    validate_windows(options)?;
    if let (Some((busy, cores)), false) = (
        oversubscription(options, online_cores()),
        options.oversubscribe,
    ) {
        return Err(CompareError(format!(
            "{} lanes + {} readers + {} find_matches stress threads = {busy} busy threads on \
             {cores} cores: preemption would dominate the latencies; lower --lanes/--readers/\
             --find-matches-concurrency, or pass --oversubscribe to run anyway (the report then \
             says so)",
            options.lanes, options.readers, options.find_matches_concurrency
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_options_are_errors() {
        let ok = CompareOptions::default();
        assert!(validate(&ok).is_ok());
        let cases = [
            CompareOptions {
                scale: f64::NAN,
                ..ok.clone()
            },
            CompareOptions {
                scale: 0.0,
                ..ok.clone()
            },
            CompareOptions {
                lanes: 0,
                ..ok.clone()
            },
            CompareOptions {
                rate: -1.0,
                ..ok.clone()
            },
            CompareOptions {
                window: Duration::ZERO,
                ..ok.clone()
            },
            CompareOptions {
                workers: Some(0),
                ..ok.clone()
            },
        ];
        for options in &cases {
            assert!(crate::compare::run(options).is_err(), "{options:?}");
        }
        let unknown = CompareOptions {
            source: Source::Preset("nope".to_owned()),
            ..ok.clone()
        };
        assert!(load_workload(&unknown).unwrap_err().0.contains("agentx"));
        let missing = CompareOptions {
            source: Source::Events("/no/such/file".into()),
            ..ok.clone()
        };
        assert!(load_workload(&missing)
            .unwrap_err()
            .0
            .contains("/no/such/file"));
    }

    #[test]
    fn malformed_event_files_name_the_file_and_line() {
        let path =
            std::env::temp_dir().join(format!("crtc-compare-bad-{}.jsonl", std::process::id()));
        std::fs::write(
            &path,
            "{\"t\":\"query\",\"locals\":[1]}\n{\"t\":\"stored\"}\n",
        )
        .unwrap();
        let options = CompareOptions {
            source: Source::Events(path.clone()),
            ..CompareOptions::default()
        };
        let error = load_workload(&options).unwrap_err().0;
        let _ = std::fs::remove_file(&path);
        assert!(
            error.contains(&path.display().to_string()) && error.contains("line 2"),
            "{error}"
        );
    }
}
