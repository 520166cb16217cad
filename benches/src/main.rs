//! The `crtc` command: `compare` (the default) replays a workload through
//! every compiled strategy and the global-lock baseline; `gen` records a
//! workload's event stream as JSON lines.

use clap::parser::ValueSource;
use clap::{
    ArgGroup, ArgMatches, Args, CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum,
};
use crtc_bench::compare::budget::check_preset_fits;
use crtc_bench::compare::output::sweep_plot::write_sweep_chart;
use crtc_bench::compare::sweep::{run_sweep, sweep_windows};
use crtc_bench::compare::validate::{applicable_flags, prepare_dir, prepare_file};
use crtc_bench::compare::{self, CompareError, CompareOptions, Mode, Source, UpstreamRows};
use crtc_verification::workload::expand::TraceShape;
use crtc_verification::workload::jsonl::write_jsonl;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

/// A compressed concurrent radix tree for KV-cache-aware routing: compare
/// its synchronization strategies on one workload.
#[derive(Parser, Debug)]
#[command(name = "crtc", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Replay a workload through every strategy (fast path on and off) and
    /// the global-lock baseline; check every result against the reference
    /// model and print one table (the default command).
    Compare(CompareArgs),
    /// Write a workload's operations as JSON lines (replay them with
    /// `compare --events FILE`).
    Gen(GenArgs),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Preset {
    Chat,
    Agentx,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum ModeArg {
    Capacity,
    Keepup,
    Both,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum UpstreamRowsArg {
    Default,
    All,
}

/// Where the stream comes from and how it is shaped.
#[derive(Args, Debug, Clone)]
#[command(group(ArgGroup::new("source").args(["workload", "trace", "events"])))]
struct SourceArgs {
    /// Built-in seeded preset (the default is agentx).
    #[arg(long, value_enum)]
    workload: Option<Preset>,
    /// Mooncake JSONL request trace, run through the engine model.
    #[arg(long, value_name = "PATH")]
    trace: Option<PathBuf>,
    /// Recorded event stream (JSON lines, as written by `crtc gen`).
    #[arg(long, value_name = "PATH")]
    events: Option<PathBuf>,
    /// Seed of the preset, placement and output tokens.
    #[arg(long, default_value_t = compare::DEFAULT_SEED)]
    seed: u64,
    /// Preset size multiplier.
    #[arg(long, default_value_t = compare::DEFAULT_SCALE)]
    scale: f64,
    /// Simulated workers (presets and traces; default 8); upstream's
    /// -n/--num-unique-inference-workers.
    #[arg(long, short = 'n', visible_alias = "num-unique-inference-workers")]
    workers: Option<usize>,
    /// Per-worker KV cache capacity in blocks (presets and traces; default
    /// 4096).
    #[arg(long, value_name = "BLOCKS")]
    capacity: Option<usize>,
    /// Accept an event file whose external hashes break the chaining rule
    /// (see the README); the reference model's verdicts then do not apply
    /// and are not computed.
    #[arg(long)]
    unchained: bool,
    /// Upstream's trace expansion (traces only): each hash id h becomes the
    /// K ids h·K … h·K+K−1, so every shared prefix is K times deeper.
    #[arg(long, value_name = "K", default_value_t = 1)]
    trace_length_factor: u64,
    /// Upstream's trace expansion (traces only): D disjoint copies of the
    /// trace's hash space, each request followed by its copies.
    #[arg(long, value_name = "D", default_value_t = 1)]
    trace_duplication_factor: u64,
    /// Upstream's trace expansion (traces only): R replicas of each worker
    /// (worker ids w + ρ·workers), identical timelines.
    #[arg(short = 'd', long, value_name = "R", default_value_t = 1)]
    inference_worker_duplication_factor: usize,
    /// Upstream's trace expansion (traces only): arrival times rescaled to
    /// this span before the engine runs (recorded; see the README).
    #[arg(long, value_name = "MS")]
    trace_simulation_duration_ms: Option<u64>,
}

#[derive(Args, Debug)]
struct CompareArgs {
    #[command(flatten)]
    source: SourceArgs,
    /// Lane (event) threads per row [default: 2, or 1 on a machine with
    /// fewer than 3 cores].
    #[arg(long)]
    lanes: Option<usize>,
    /// Reader threads running find_matches during each run [default: 1, or
    /// 0 on one core].
    #[arg(long)]
    readers: Option<usize>,
    /// Run even when lanes plus readers exceed the machine's cores (refused
    /// otherwise: preemption would dominate the latencies); the report then
    /// says so.
    #[arg(long)]
    oversubscribe: bool,
    /// Write the report as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Write capacity (as fast as possible, drain included), keep-up
    /// latency (open loop at --rate), or both.
    #[arg(long, value_enum, default_value_t = ModeArg::Capacity)]
    mode: ModeArg,
    /// Keep-up offered rate, events per second.
    #[arg(long, value_name = "EVENTS_PER_S", default_value_t = compare::DEFAULT_RATE)]
    rate: f64,
    /// Keep-up window, seconds.
    #[arg(long, value_name = "S", default_value_t = compare::DEFAULT_WINDOW.as_secs_f64())]
    window_s: f64,
    /// Write SVG charts into DIR: throughput per strategy (fast path on and
    /// off), reader latency, fast/general ratio per gate.
    #[arg(long, value_name = "DIR")]
    plots: Option<PathBuf>,
    /// Also apply the stream serially to upstream's CRTC (dynamo-kv-router
    /// 1.6.1) and to each of ours, diff every lookup's scores, and let the
    /// reference model say who deviates (needs `--features upstream`).
    #[arg(long)]
    check_upstream: bool,
    /// Most differences --check-upstream lists.
    #[arg(long, value_name = "N", default_value_t = compare::DEFAULT_CHECK_LIMIT)]
    check_limit: usize,
    /// Measure every row N times (1 to 50), interleaved round-robin; the
    /// tables and JSON report medians, with each figure's range over the
    /// repeats (JSON `spread`, `repeats`) and the worst repeat's correctness
    /// counts.
    #[arg(long, value_name = "N", default_value_t = 1)]
    repeat: usize,
    /// Only these strategies' rows, comma-separated: gate names (rwlock,
    /// seqlock, epoch-crossbeam, epoch-seize, as compiled), global-lock,
    /// upstream-1.6.1 (feature upstream).
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    strategies: Option<Vec<String>>,
    /// Which upstream rows (needs `--features upstream`; capacity mode):
    /// `default`, the one upstream-1.6.1 row at --lanes; `all`, also every
    /// dynamo-kv-router 1.6.1 indexer a router would pick (KvIndexer, the
    /// pool over CRTC and over PositionalIndexer, BranchShardedIndexer over
    /// CRTC shards) and each crtc gate inside upstream's pool beside crtc's
    /// own Indexer, at 1 and at 4 event threads (4 is upstream's default;
    /// rows that oversubscribe the cores say so).
    #[arg(long, value_enum, default_value_t = UpstreamRowsArg::Default)]
    upstream_rows: UpstreamRowsArg,
    /// Write the evaluation files into DIR (e.g. papers/results): markdown
    /// tables, JSON and charts for the agentx and chat presets and the
    /// Mooncake trace (--trace, default ../shared/traces/mooncake_synthetic.jsonl;
    /// skipped with a note when absent), plus targets.md.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["json", "plots", "workload", "events"])]
    paper: Option<PathBuf>,
    /// Upstream's windowed replay of the expanded trace: each worker's
    /// timeline stretched over this window (offered rate = corpus ÷
    /// window), drain included; prints offered and achieved ops/s,
    /// find_matches p50/p99/p99.9 and whether each row kept up.
    #[arg(long, value_name = "MS")]
    benchmark_duration_ms: Option<u64>,
    /// Upstream's sweep: the windowed replay at --sweep-steps windows
    /// log-spaced from --sweep-max-ms down to --sweep-min-ms, every strategy
    /// (and upstream 1.6.1 with feature upstream) on the same schedule.
    #[arg(long)]
    sweep: bool,
    /// Shortest sweep window.
    #[arg(long, value_name = "MS", default_value_t = 1000)]
    sweep_min_ms: u64,
    /// Longest sweep window.
    #[arg(long, value_name = "MS", default_value_t = 50_000)]
    sweep_max_ms: u64,
    /// Number of sweep windows (2 to 100).
    #[arg(long, value_name = "N", default_value_t = 10)]
    sweep_steps: usize,
    /// Extra threads running find_matches in a loop during the windowed
    /// replay (their lookups are not part of the corpus).
    #[arg(long, value_name = "N", default_value_t = 0)]
    find_matches_concurrency: usize,
}

#[derive(Args, Debug)]
struct GenArgs {
    #[command(flatten)]
    source: SourceArgs,
    /// Output file (JSON lines).
    #[arg(long, value_name = "FILE")]
    out: PathBuf,
}

impl SourceArgs {
    fn options(&self) -> CompareOptions {
        let source = match (&self.trace, &self.events, self.workload) {
            (Some(path), _, _) => Source::Trace(path.clone()),
            (_, Some(path), _) => Source::Events(path.clone()),
            (_, _, Some(Preset::Chat)) => Source::Preset("chat".to_owned()),
            _ => Source::Preset("agentx".to_owned()),
        };
        CompareOptions {
            source,
            seed: self.seed,
            scale: self.scale,
            workers: self.workers,
            capacity: self.capacity,
            unchained: self.unchained,
            shape: TraceShape {
                length_factor: self.trace_length_factor,
                duplication_factor: self.trace_duplication_factor,
                worker_duplication: self.inference_worker_duplication_factor,
                simulation_ms: self.trace_simulation_duration_ms,
            },
            argv: std::env::args_os()
                .map(|a| a.to_string_lossy().into_owned())
                .collect(),
            ..CompareOptions::default()
        }
    }
}

/// The benchmark windows of `--sweep` or `--benchmark-duration-ms`.
fn windows(args: &CompareArgs) -> Result<Option<Vec<u64>>, CompareError> {
    if !args.sweep {
        return Ok(args.benchmark_duration_ms.map(|w| vec![w]));
    }
    if args.sweep_min_ms > args.sweep_max_ms {
        return Err(CompareError(format!(
            "--sweep-min-ms {} is above --sweep-max-ms {}",
            args.sweep_min_ms, args.sweep_max_ms
        )));
    }
    if !(2..=compare::MAX_SWEEP_STEPS).contains(&args.sweep_steps) {
        return Err(CompareError(format!(
            "--sweep-steps must be between 2 and {}",
            compare::MAX_SWEEP_STEPS
        )));
    }
    Ok(Some(sweep_windows(
        args.sweep_min_ms,
        args.sweep_max_ms,
        args.sweep_steps,
    )))
}

fn compare_options(args: &CompareArgs) -> Result<CompareOptions, CompareError> {
    if !(args.window_s.is_finite() && args.window_s > 0.0 && args.window_s <= 3600.0) {
        return Err(CompareError(
            "--window-s must be above 0 and at most 3600".to_owned(),
        ));
    }
    let defaults = CompareOptions::default();
    Ok(CompareOptions {
        lanes: args.lanes.unwrap_or(defaults.lanes),
        readers: args.readers.unwrap_or(defaults.readers),
        oversubscribe: args.oversubscribe,
        mode: match args.mode {
            ModeArg::Capacity => Mode::Capacity,
            ModeArg::Keepup => Mode::KeepUp,
            ModeArg::Both => Mode::Both,
        },
        rate: args.rate,
        window: Duration::from_secs_f64(args.window_s),
        progress: std::io::stdout().is_terminal(),
        check_upstream: args.check_upstream,
        check_limit: args.check_limit,
        repeat: args.repeat,
        strategies: args.strategies.clone(),
        upstream_rows: match args.upstream_rows {
            UpstreamRowsArg::Default => UpstreamRows::Default,
            UpstreamRowsArg::All => UpstreamRows::All,
        },
        windows: windows(args)?,
        sweep: args.sweep,
        find_matches_concurrency: args.find_matches_concurrency,
        ..args.source.options()
    })
}

/// Writes `text` to stdout; a closed pipe is not an error worth a panic.
fn say(text: &str) {
    let _ = std::io::stdout().lock().write_all(text.as_bytes());
}

/// Writes `text` to stderr, ignoring failures.
fn complain(text: &str) {
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
}

/// Why a command stopped: a usage error (exit 2: a flag, its value or an
/// output path) or a failure while loading or running (exit 1).
enum Failure {
    Usage(CompareError),
    Run(CompareError),
}

impl From<CompareError> for Failure {
    fn from(error: CompareError) -> Self {
        Failure::Run(error)
    }
}

fn usage<T>(result: Result<T, CompareError>) -> Result<T, Failure> {
    result.map_err(Failure::Usage)
}

/// Whether `flag` (a long name; its clap id has `_` for `-`) was typed on
/// the command line of `matches`.
fn given(matches: &ArgMatches) -> impl Fn(&str) -> bool + '_ {
    |flag| {
        let id = flag.replace('-', "_");
        matches
            .try_get_raw(&id)
            .is_ok_and(|_| matches.value_source(&id) == Some(ValueSource::CommandLine))
    }
}

fn write_file(
    path: &Path,
    write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<(), CompareError> {
    let fail = |e: std::io::Error| CompareError(format!("cannot write {}: {e}", path.display()));
    let file = std::fs::File::create(path).map_err(fail)?;
    let mut out = std::io::BufWriter::new(file);
    write(&mut out).map_err(fail)?;
    out.flush().map_err(fail)
}

fn exit_code(failures: &[String]) -> ExitCode {
    if failures.is_empty() {
        return ExitCode::SUCCESS;
    }
    complain("error: results disagree with the reference model:\n");
    failures.iter().for_each(|f| complain(&format!("  {f}\n")));
    ExitCode::from(1)
}

fn run_paper(
    options: &CompareOptions,
    args: &CompareArgs,
    dir: &Path,
) -> Result<ExitCode, Failure> {
    let trace = args
        .source
        .trace
        .clone()
        .unwrap_or_else(|| PathBuf::from(compare::paper::DEFAULT_TRACE));
    // A trace that is there must load before the presets run for minutes
    // (an absent one is skipped with a note by the paper itself).
    if trace.exists() {
        compare::load_workload(&CompareOptions {
            source: Source::Trace(trace.clone()),
            ..options.clone()
        })?;
    }
    let reports = compare::paper::write_paper(options, dir, &trace, say)?;
    let failures: Vec<String> = reports
        .iter()
        .flat_map(|(stem, r)| r.failures.iter().map(move |f| format!("{stem}: {f}")))
        .collect();
    Ok(exit_code(&failures))
}

/// Removes an output file created before a run that then failed, so no
/// empty file is left looking like a result.
fn discard(path: Option<&Path>) {
    if let Some(path) = path {
        let _ = std::fs::remove_file(path);
    }
}

/// Every check of a compare command line that needs no input file.
fn compare_usage(args: &CompareArgs, matches: &ArgMatches) -> Result<CompareOptions, CompareError> {
    let mut options = compare_options(args)?;
    // A windowed replay with --paper replays the paper's trace by default.
    if let (Some(_), Some(_), Source::Preset(_)) = (&args.paper, &options.windows, &options.source)
    {
        options.source = Source::Trace(PathBuf::from(compare::paper::DEFAULT_TRACE));
    }
    compare::validate(&options)?;
    // --paper runs the presets and the trace, so preset flags apply.
    let runs = match &args.paper {
        Some(_) if options.windows.is_none() => CompareOptions {
            source: Source::Preset("agentx".to_owned()),
            ..options.clone()
        },
        _ => options.clone(),
    };
    applicable_flags(&runs, given(matches))?;
    if let Some(path) = &args.json {
        prepare_file("--json", path)?;
    }
    if let Some(dir) = &args.plots {
        prepare_dir("--plots", dir)?;
    }
    if let Some(dir) = &args.paper {
        prepare_dir("--paper", dir)?;
    }
    Ok(options)
}

/// The windowed replay: one table, and its JSON (`--json`) or the paper's
/// `mooncake-sweep.md`, `.json` and `.svg` (`--paper DIR`).
fn run_windows(options: &CompareOptions, args: &CompareArgs) -> Result<ExitCode, Failure> {
    let report = run_sweep(options).inspect_err(|_| discard(args.json.as_deref()))?;
    let markdown = report.render_markdown();
    say(&markdown);
    let mut outputs: Vec<(PathBuf, String)> = Vec::new();
    if let Some(path) = &args.json {
        outputs.push((path.clone(), report.to_json()));
    }
    if let Some(dir) = &args.paper {
        outputs.push((dir.join("mooncake-sweep.md"), markdown));
        outputs.push((dir.join("mooncake-sweep.json"), report.to_json()));
    }
    for (path, text) in outputs {
        write_file(&path, |out| writeln!(out, "{text}"))?;
        say(&format!("wrote {}\n", path.display()));
    }
    if let Some(dir) = &args.paper {
        let chart = dir.join("mooncake-sweep.svg");
        write_sweep_chart(&report, &chart)?;
        say(&format!("wrote {}\n", chart.display()));
    }
    Ok(ExitCode::SUCCESS)
}

fn run_compare(args: &CompareArgs, matches: &ArgMatches) -> Result<ExitCode, Failure> {
    let options = usage(compare_usage(args, matches))?;
    if options.windows.is_some() {
        return run_windows(&options, args);
    }
    if let Some(dir) = &args.paper {
        return run_paper(&options, args, dir);
    }
    let report = compare::run(&options).inspect_err(|_| discard(args.json.as_deref()))?;
    say(&report.render());
    if let Some(path) = &args.json {
        write_file(path, |out| writeln!(out, "{}", report.to_json()))?;
        say(&format!("wrote {}\n", path.display()));
    }
    if let Some(dir) = &args.plots {
        for path in compare::plots::write_plots(&report, dir, "")? {
            say(&format!("wrote {}\n", path.display()));
        }
    }
    Ok(exit_code(&report.failures))
}

fn run_gen(args: &GenArgs, matches: &ArgMatches) -> Result<ExitCode, Failure> {
    let options = args.source.options();
    usage(compare::validate(&options))?;
    usage(applicable_flags(&options, given(matches)))?;
    usage(check_preset_fits(&options, 1))?;
    usage(prepare_file("--out", &args.out))?;
    let workload = compare::load_workload(&options).inspect_err(|_| discard(Some(&args.out)))?;
    write_file(&args.out, |mut out| write_jsonl(&workload, &mut out))?;
    say(&format!(
        "wrote {} ({}: {}, {} ops)\n",
        args.out.display(),
        workload.name,
        workload.stats(),
        workload.ops.len()
    ));
    Ok(ExitCode::SUCCESS)
}

/// Counts the heap the compared indexes hold (switched on only in the
/// untimed memory replay; see `measurement::heap`).
#[global_allocator]
static ALLOCATOR: crtc_bench::compare::measurement::heap::CountingAlloc =
    crtc_bench::compare::measurement::heap::CountingAlloc;

fn main() -> ExitCode {
    // No subcommand means `compare` with its defaults. Clap itself exits 2
    // on a flag it cannot parse.
    let mut matches = Cli::command().get_matches();
    if matches.subcommand().is_none() {
        matches = Cli::command().get_matches_from(["crtc", "compare"]);
    }
    let result = match (Cli::from_arg_matches(&matches), matches.subcommand()) {
        (
            Ok(Cli {
                command: Some(Command::Compare(args)),
            }),
            Some((_, sub)),
        ) => run_compare(&args, sub),
        (
            Ok(Cli {
                command: Some(Command::Gen(args)),
            }),
            Some((_, sub)),
        ) => run_gen(&args, sub),
        (Err(e), _) => Err(Failure::Usage(CompareError(e.to_string()))),
        _ => Err(Failure::Usage(CompareError("no command".to_owned()))),
    };
    result.unwrap_or_else(|failure| {
        let (error, code) = match failure {
            Failure::Usage(e) => (e, 2),
            Failure::Run(e) => (e, 1),
        };
        complain(&format!("error: {error}\n"));
        ExitCode::from(code)
    })
}
