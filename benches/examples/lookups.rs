//! One subject's lookups on its final tree, for counting instructions per
//! `find_matches` under callgrind (`papers/profile-find-matches.py`).
//!
//! Usage: `lookups <subject> <workload> [passes]`, where `subject` is a gate
//! (`rwlock`, `seqlock`, `epoch-crossbeam`, `epoch-seize`, as compiled) or
//! `upstream-1.6.1` (feature `upstream`), and `workload` is `chat`,
//! `agentx` (the presets at seed 1, scale 1), `leaf` (the tree of the
//! `mixed_1r1w` bench's reader alone, see [`leaf`]) or a path to a Mooncake
//! trace.
//!
//! It applies the workload's writes serially (one lane, the fast path on;
//! for upstream its `ThreadPoolIndexer` with one lane, flushed), with no
//! stale-leaf sweep on either side (the serial tree schedules none; 1.6.1's
//! cleanup timer is five minutes away), so both trees hold the same dead
//! nodes. Then it runs every lookup of the workload, in stream order,
//! `passes` times (default 3) on the final tree, and prints the number of
//! lookups and the credited ranks summed over them (the same on every
//! subject, or the trees differ). Only `find_matches` itself is meant to be
//! counted: the profile collects inside `Tree::find_matches` and upstream's
//! `SyncIndexer::find_matches`, so building the tree and converting queries
//! are outside the count.

use crtc::types::{LocalBlockHash, RouterEvent, WorkerWithDpRank};
use crtc_bench::compare::checks::crosscheck::SerialIndex;
use crtc_bench::compare::subjects::serial::build_serial;
use crtc_verification::chain::{chained, locals};
use crtc_verification::workload::mooncake::load_mooncake;
use crtc_verification::workload::{presets, EngineConfig, Workload, WorkloadOp};
use std::process::ExitCode;

/// The allocator of the `crtc` binary's measurements (feature `mimalloc`,
/// on by default), so the counts include the same allocator's code.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn subject(name: &str) -> Option<Box<dyn SerialIndex>> {
    let label = name.to_owned();
    Some(match name {
        "rwlock" => build_serial::<crtc_strategies::RwLockGate>(label, true),
        #[cfg(feature = "seqlock")]
        "seqlock" => build_serial::<crtc_strategies::SeqlockGate>(label, true),
        #[cfg(feature = "epoch")]
        "epoch-crossbeam" => build_serial::<crtc_strategies::CrossbeamEpochGate>(label, true),
        #[cfg(feature = "seize")]
        "epoch-seize" => build_serial::<crtc_strategies::SeizeEpochGate>(label, true),
        #[cfg(feature = "upstream")]
        "upstream-1.6.1" => {
            Box::new(crtc_bench::compare::subjects::upstream::SerialUpstream::new())
        }
        _ => return None,
    })
}

/// The `mixed_1r1w` bench's tree without its writer (that bench's
/// `Fixture::build`, session 0) and its reader's query, asked
/// [`LEAF_LOOKUPS`] times: four sharer ranks hold a 32-block system prompt,
/// two of them continue it (so it is an internal node), and the writer rank
/// holds the prompt plus a 16-block session prompt and 256 one-block decode
/// stores on that leaf's tail. The query is the system prompt plus the
/// session prompt (scores: sharers 32, the writer 48). The local hashes are
/// the bench's namespaces.
fn leaf() -> Workload {
    const PREFIX: u64 = 32;
    const PROMPT: u64 = 16;
    const DECODE: u64 = 256;
    let writer = WorkerWithDpRank::new(1, 0);
    let prefix_locals: Vec<u64> = (0..PREFIX).map(|i| (1 << 40) + i).collect();
    let prefix = chained(None, &prefix_locals);
    let tail = prefix.last().map(|b| b.external);
    let mut ops = Vec::new();
    let mut store = |rank, parent, blocks| {
        ops.push(WorkloadOp::Event(RouterEvent::stored(rank, parent, blocks)))
    };
    for r in 0..4u64 {
        let rank = WorkerWithDpRank::new(100 + r, 0);
        store(rank, None, prefix.clone());
        if r < 2 {
            store(rank, tail, chained(tail, &[(1 << 60) + r]));
        }
    }
    store(writer, None, prefix.clone());
    let session: Vec<u64> = (0..PROMPT + DECODE).map(|i| (2 << 40) + i).collect();
    let prompt = chained(tail, &session[..PROMPT as usize]);
    let mut parent = prompt.last().map(|b| b.external);
    store(writer, tail, prompt);
    for &local in &session[PROMPT as usize..] {
        let block = chained(parent, &[local]);
        let next = block.last().map(|b| b.external);
        store(writer, parent, block);
        parent = next;
    }
    let query = locals(&[&prefix_locals[..], &session[..PROMPT as usize]].concat());
    ops.extend((0..LEAF_LOOKUPS).map(|_| WorkloadOp::Query(query.clone())));
    Workload {
        name: "leaf".into(),
        ops,
        decode_stores: DECODE,
    }
}

/// Lookups of the `leaf` workload per pass.
const LEAF_LOOKUPS: usize = 2000;

fn workload(name: &str) -> Result<Workload, String> {
    match name {
        "chat" => Ok(presets::chat(1, 1.0)),
        "agentx" => Ok(presets::agentx(1, 1.0)),
        "leaf" => Ok(leaf()),
        path => load_mooncake(path, EngineConfig::default())
            .map_err(|e| format!("{path}: line {}: {}", e.line, e.reason)),
    }
}

/// Applies the writes, then returns the lookups in stream order.
fn build(index: &mut dyn SerialIndex, workload: &Workload) -> Vec<Vec<LocalBlockHash>> {
    let mut queries = Vec::new();
    for op in &workload.ops {
        match op {
            WorkloadOp::Event(event) => index.apply(event),
            WorkloadOp::RemoveWorker(worker) => index.remove_worker(*worker),
            WorkloadOp::Query(query) => queries.push(query.clone()),
        }
    }
    // A lookup flushes what the writes left queued (upstream's lane).
    index.find_matches(&[]);
    queries
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(name), Some(source)) = (args.first(), args.get(1)) else {
        eprintln!("usage: lookups <subject> <chat|agentx|leaf|TRACE> [passes]");
        return ExitCode::from(2);
    };
    let Some(mut index) = subject(name) else {
        eprintln!("unknown or not compiled subject {name:?}");
        return ExitCode::from(2);
    };
    let passes: usize = match args.get(2).map(|p| p.parse()) {
        None => 3,
        Some(Ok(p)) => p,
        Some(Err(e)) => {
            eprintln!("passes: {e}");
            return ExitCode::from(2);
        }
    };
    let workload = match workload(source) {
        Ok(w) => w,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let queries = build(&mut *index, &workload);
    let (mut lookups, mut credited) = (0u64, 0u64);
    for _ in 0..passes {
        for query in &queries {
            credited += index.find_matches(query).scores.len() as u64;
            lookups += 1;
        }
    }
    println!("lookups {lookups} credited {credited}");
    ExitCode::SUCCESS
}
