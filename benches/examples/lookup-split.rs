//! How much of a `find_matches` is the result map, on each side: a paired,
//! interleaved timing of our lookup, upstream 1.6.1's, and each one's
//! result map rebuilt alone from the same (rank, score) pairs.
//!
//! Usage: `lookup-split <gate> <chat|agentx|TRACE> [rounds] [general]`,
//! where `gate` is `rwlock`, `seqlock`, `epoch-crossbeam` or `epoch-seize`
//! (as compiled), `general` turns our fast path off, and `rounds` (default
//! 15) is the number of interleaved rounds.
//!
//! Both trees get the workload's writes on the calling thread (ours through
//! one lane, upstream's through its one-lane `ThreadPoolIndexer`, flushed),
//! with no stale-leaf sweep on either side, as in the `lookups` example.
//! Then every round times four passes over the workload's lookups, in an
//! order that rotates from round to round, each as nanoseconds per lookup
//! (the result dropped inside the pass on every side):
//!
//! * `ours`: `Tree::find_matches`, returning our `OverlapScores`;
//! * `upstream`: the crate's `find_matches` on its indexer's backend, on
//!   queries converted beforehand, returning its `OverlapScores`;
//! * `ours-map`: our result map alone, built as `find_matches` builds it
//!   (reserved for its size, then one insert per credited rank);
//! * `upstream-map`: upstream's result map alone, built as its lookup
//!   builds it (`OverlapScores::new()`, reserved on the first node for the
//!   ranks that node can credit, which is at least the ranks credited: the
//!   reservation here is the credited count, so this floor is at most
//!   upstream's).
//!
//! A map pass inserts each lookup's pairs in rank order (not the order its
//! walk credits them) and runs with nothing between its lookups, so its
//! allocations and writes stay in cache: it is a floor for the map's cost
//! inside a lookup,
//! not the cost itself. `ours - ours-map` is then an upper bound on our walk
//! (everything but the map), and likewise for upstream; the printed walk
//! ratio is ours over upstream's, per round, and its median.
//!
//! Timing is wall clock on a shared machine: read the medians and the
//! spread over rounds, not one round.

use crtc::types::{LocalBlockHash, OverlapScores, WorkerWithDpRank};
use crtc::{Tree, TreeConfig};
use crtc_bench::compare::subjects::upstream::{
    convert_event, convert_query, convert_scores, runtime, BLOCK_TOKENS,
};
use crtc_strategies::ShapeGate;
use crtc_verification::workload::mooncake::load_mooncake;
use crtc_verification::workload::{presets, EngineConfig, Workload, WorkloadOp};
use dynamo_kv_router::indexer::{KvIndexerInterface, SyncIndexer, ThreadPoolIndexer};
use dynamo_kv_router::protocols as up;
use dynamo_kv_router::ConcurrentRadixTreeCompressed;
use std::hint::black_box;
use std::process::ExitCode;
use std::time::Instant;

/// The allocator of the `crtc` binary's measurements (feature `mimalloc`,
/// on by default).
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Passes over the lookups per stage and round.
const PASSES: usize = 5;
/// The stages, in the order of the first round.
const STAGES: [&str; 4] = ["ours", "upstream", "ours-map", "upstream-map"];

/// A ratio of one round's four timings.
type Ratio = fn(&[f64; 4]) -> f64;

/// One side's lookups, timed as nanoseconds per lookup over [`PASSES`].
type Stage<'a> = Box<dyn Fn() -> f64 + 'a>;

/// Both trees built from one workload, and the lookups.
struct Sides<G: ShapeGate> {
    ours: Tree<G>,
    upstream: ThreadPoolIndexer<ConcurrentRadixTreeCompressed>,
    queries: Vec<Vec<LocalBlockHash>>,
    converted: Vec<Vec<up::LocalBlockHash>>,
}

fn build<G: ShapeGate>(workload: &Workload, fast_path: bool) -> Sides<G> {
    let ours = Tree::<G>::new(TreeConfig {
        fast_path,
        ..TreeConfig::default()
    });
    let mut lane = ours.new_lane();
    let runtime = runtime();
    let upstream = ThreadPoolIndexer::new(ConcurrentRadixTreeCompressed::new(), 1, BLOCK_TOKENS);
    let mut queries = Vec::new();
    for op in &workload.ops {
        match op {
            WorkloadOp::Event(event) => {
                // A rejected event is rejected on both sides (the
                // cross-check's finding); the scores would tell.
                let _ = ours.apply_event(&mut lane, event);
                let _ = upstream.enqueue_event(convert_event(event));
            }
            WorkloadOp::RemoveWorker(worker) => {
                ours.remove_worker(&mut [&mut lane], *worker);
                runtime.block_on(KvIndexerInterface::remove_worker(&upstream, *worker));
            }
            WorkloadOp::Query(query) => queries.push(query.clone()),
        }
    }
    runtime.block_on(upstream.flush());
    let converted = queries.iter().map(|q| convert_query(q)).collect();
    Sides {
        ours,
        upstream,
        queries,
        converted,
    }
}

/// Nanoseconds per call of `lookup` over every item, [`PASSES`] times.
fn per_lookup<T>(items: &[T], mut lookup: impl FnMut(&T) -> usize) -> f64 {
    let start = Instant::now();
    let mut sink = 0usize;
    for _ in 0..PASSES {
        for item in items {
            sink = sink.wrapping_add(lookup(item));
        }
    }
    black_box(sink);
    start.elapsed().as_nanos() as f64 / (PASSES * items.len().max(1)) as f64
}

fn ours_map(pairs: &[(WorkerWithDpRank, u32)]) -> usize {
    let mut scores = OverlapScores::default();
    scores.scores.reserve(pairs.len());
    for &(rank, score) in pairs {
        scores.scores.insert(rank, score);
    }
    black_box(scores).scores.len()
}

fn upstream_map(pairs: &[(up::WorkerWithDpRank, u32)]) -> usize {
    let mut scores = up::OverlapScores::new();
    scores.scores.reserve(pairs.len());
    for &(rank, score) in pairs {
        scores.scores.insert(rank, score);
    }
    black_box(scores).scores.len()
}

/// The four stages' timings, `rounds` times, in rotating order.
fn measure<G: ShapeGate>(sides: &Sides<G>, rounds: usize) -> Result<Vec<[f64; 4]>, String> {
    let pairs: Vec<Vec<(WorkerWithDpRank, u32)>> = sides
        .queries
        .iter()
        .map(|q| sides.ours.find_matches(q, false).sorted())
        .collect();
    for (i, (query, ours)) in sides.converted.iter().zip(&pairs).enumerate() {
        let theirs = convert_scores(&sides.upstream.backend().find_matches(query, false)).sorted();
        if theirs != *ours {
            return Err(format!(
                "the two trees score lookup {i} differently: ours {ours:?}, upstream's {theirs:?}"
            ));
        }
    }
    let up_pairs: Vec<Vec<(up::WorkerWithDpRank, u32)>> = pairs
        .iter()
        .map(|p| {
            p.iter()
                .map(|&(r, s)| (up::WorkerWithDpRank::new(r.worker_id, r.dp_rank), s))
                .collect()
        })
        .collect();
    let stages: [Stage; 4] = [
        Box::new(|| {
            per_lookup(&sides.queries, |q| {
                black_box(sides.ours.find_matches(q, false)).scores.len()
            })
        }),
        Box::new(|| {
            per_lookup(&sides.converted, |q| {
                black_box(sides.upstream.backend().find_matches(q, false))
                    .scores
                    .len()
            })
        }),
        Box::new(|| per_lookup(&pairs, |p| ours_map(p))),
        Box::new(|| per_lookup(&up_pairs, |p| upstream_map(p))),
    ];
    Ok((0..rounds)
        .map(|round| {
            let mut row = [0.0; 4];
            for k in 0..STAGES.len() {
                let stage = (k + round) % STAGES.len();
                row[stage] = stages[stage]();
            }
            row
        })
        .collect())
}

fn median(mut values: Vec<f64>) -> (f64, f64, f64) {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    let mid = if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    };
    (mid, values[0], values[n - 1])
}

fn report(label: &str, rows: &[[f64; 4]]) {
    println!("{label}: {} rounds of {PASSES} passes", rows.len());
    for (k, name) in STAGES.iter().enumerate() {
        let (mid, lo, hi) = median(rows.iter().map(|r| r[k]).collect());
        println!("  {name:<13} {mid:7.1} ns/lookup ({lo:.1}-{hi:.1})");
    }
    let lines: [(&str, Ratio); 4] = [
        ("ours / upstream", |r| r[0] / r[1]),
        ("ours-map / upstream", |r| r[2] / r[1]),
        ("upstream-map / upstream", |r| r[3] / r[1]),
        ("walk: (ours - ours-map) / (upstream - upstream-map)", |r| {
            (r[0] - r[2]) / (r[1] - r[3])
        }),
    ];
    for (name, ratio) in lines {
        let (mid, lo, hi) = median(rows.iter().map(ratio).collect());
        println!("  {name}: {mid:.3} ({lo:.3}-{hi:.3}), paired per round");
    }
}

fn run<G: ShapeGate>(workload: &Workload, fast_path: bool, rounds: usize) -> Result<(), String> {
    let sides = build::<G>(workload, fast_path);
    let rows = measure(&sides, rounds)?;
    let path = if fast_path { "fast" } else { "general" };
    report(
        &format!(
            "{} ({} lookups), our {path} path",
            workload.name,
            sides.queries.len()
        ),
        &rows,
    );
    Ok(())
}

fn workload(name: &str) -> Result<Workload, String> {
    match name {
        "chat" => Ok(presets::chat(1, 1.0)),
        "agentx" => Ok(presets::agentx(1, 1.0)),
        path => load_mooncake(path, EngineConfig::default())
            .map_err(|e| format!("{path}: line {}: {}", e.line, e.reason)),
    }
}

/// A gate's measurement: the workload, the fast path, the rounds.
type Runner = fn(&Workload, bool, usize) -> Result<(), String>;

/// The measurement for `gate`, if this build compiled it.
fn runner(gate: &str) -> Option<Runner> {
    Some(match gate {
        "rwlock" => run::<crtc_strategies::RwLockGate>,
        #[cfg(feature = "seqlock")]
        "seqlock" => run::<crtc_strategies::SeqlockGate>,
        #[cfg(feature = "epoch")]
        "epoch-crossbeam" => run::<crtc_strategies::CrossbeamEpochGate>,
        #[cfg(feature = "seize")]
        "epoch-seize" => run::<crtc_strategies::SeizeEpochGate>,
        _ => return None,
    })
}

/// Checks the arguments, then runs the measurement they name.
fn run_args(args: &[String]) -> Result<(), String> {
    const USAGE: &str = "usage: lookup-split <gate> <chat|agentx|TRACE> [rounds] [general]";
    let ([gate, source] | [gate, source, _] | [gate, source, _, _]) = args else {
        return Err(USAGE.into());
    };
    let runner = runner(gate).ok_or_else(|| format!("unknown or not compiled gate {gate:?}"))?;
    let rounds = match args.get(2).map(|r| r.parse::<usize>()) {
        None => 15,
        Some(Ok(r)) if r > 0 => r,
        Some(_) => {
            return Err(format!(
                "rounds: expected a positive number, got {:?}",
                args[2]
            ))
        }
    };
    let fast_path = match args.get(3).map(String::as_str) {
        None => true,
        Some("general") => false,
        Some(other) => return Err(format!("expected `general` or nothing, got {other:?}")),
    };
    runner(&workload(source)?, fast_path, rounds)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run_args(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("lookup-split: {e}");
            ExitCode::from(2)
        }
    }
}
