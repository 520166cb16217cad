//! Upstream's trace expansion and replay timeline: how NVIDIA Dynamo's
//! `mooncake_bench` turns one Mooncake trace into a benchmark corpus, written
//! here from its documented semantics so its flags mean the same in
//! `crtc compare` (papers: upstream-benches.md §3).
//!
//! Steps, in order, all before anything is timed:
//! 1. **Length factor** `k`: each hash id `h` becomes the `k` ids
//!    `h·k … h·k+k−1`, and `input_length` is multiplied by `k`, so every shared
//!    prefix is `k` times deeper and the prompt keeps its share of the ids.
//! 2. **Hash-space duplication** `d`: each request is followed by `d − 1`
//!    copies at the same arrival time; copy `j` adds `j·(max id + 1)` to every
//!    id, so the copies are disjoint trees of the same shape.
//! 3. **Simulation span** (optional, ms): arrival times are rescaled linearly
//!    so the first is 0 and the last is the span. The engine model serves a
//!    request at its arrival (events carry that instant), so after step 6's
//!    per-worker rescale this changes the schedule only through rounding; it
//!    is accepted so an upstream command line runs unchanged, and recorded.
//! 4. **Partition**: each request goes to one of `N` workers drawn uniformly
//!    from a generator seeded by the engine seed (no KV awareness); each
//!    worker's requests are kept in arrival order (stable).
//! 5. **Engine**: each worker's requests run through the engine model on
//!    worker `w` (rank `(w, 0)`); every operation a request emits (its lookup,
//!    eviction, prompt store, decode stores) carries the request's arrival.
//! 6. **Per-worker rescale**: each worker's timeline is stretched on its own
//!    so its first operation sits at 0 and its last at 1 (the end of the
//!    benchmark window); a worker whose operations share one instant sits at 0.
//!    The offered rate is therefore corpus size ÷ window.
//! 7. **Worker duplication** `r`: the timeline is replayed `r` times under
//!    worker ids `w + ρ·N` (replica `ρ`), identical copies that multiply the
//!    ranks holding each block.
//! 8. **Order**: operations sorted by (position, lookups before events,
//!    worker id, emission order).
//!
//! Every factor is at least 1, `N·r` ranks at most the tree's slot limit, and
//! an expanded id above [`MAX_HASH_ID`] is an error naming its line.

use super::engine::{Engine, EngineConfig};
use super::mooncake::{check_fits, engine_prompt, TraceRequest, MAX_HASH_ID};
use super::{ParseError, Workload, WorkloadOp};
use crate::chain::mix;
use crate::Rng;
use crtc::types::WorkerId;

/// The shaping flags of upstream's bench, with its defaults (all 1, no
/// simulation span).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TraceShape {
    /// `--trace-length-factor`.
    pub length_factor: u64,
    /// `--trace-duplication-factor`.
    pub duplication_factor: u64,
    /// `-d/--inference-worker-duplication-factor`.
    pub worker_duplication: usize,
    /// `--trace-simulation-duration-ms`.
    pub simulation_ms: Option<u64>,
}

impl Default for TraceShape {
    fn default() -> Self {
        Self {
            length_factor: 1,
            duplication_factor: 1,
            worker_duplication: 1,
            simulation_ms: None,
        }
    }
}

/// A corpus with each operation's place in the benchmark window.
#[derive(Clone, Debug)]
pub struct Timeline {
    /// The operations, in schedule order.
    pub workload: Workload,
    /// For each operation, its deadline as a fraction of the window (0..=1,
    /// non-decreasing).
    pub positions: Vec<f64>,
}

fn line_error(request: &TraceRequest, reason: String) -> ParseError {
    ParseError {
        line: request.line,
        reason,
    }
}

/// Step 1: each id `h` becomes `h·k … h·k+k−1`; `input_length` scales by `k`.
pub fn expand_lengths(requests: &mut [TraceRequest], k: u64) -> Result<(), ParseError> {
    if k <= 1 {
        return Ok(());
    }
    for request in requests.iter_mut() {
        let mut ids = Vec::with_capacity(request.hash_ids.len() * k as usize);
        for &h in &request.hash_ids {
            let base = h
                .checked_mul(k)
                .filter(|b| b.checked_add(k - 1).is_some_and(|top| top <= MAX_HASH_ID))
                .ok_or_else(|| {
                    line_error(
                        request,
                        format!("hash id {h} × --trace-length-factor {k} exceeds {MAX_HASH_ID}"),
                    )
                })?;
            ids.extend(base..base + k);
        }
        request.hash_ids = ids;
        request.input_length = request.input_length.map(|n| n.saturating_mul(k));
    }
    Ok(())
}

/// Step 2: each request followed by `d − 1` copies in disjoint id ranges.
pub fn duplicate_hash_space(
    requests: Vec<TraceRequest>,
    d: u64,
) -> Result<Vec<TraceRequest>, ParseError> {
    if d <= 1 {
        return Ok(requests);
    }
    let max = requests
        .iter()
        .flat_map(|r| r.hash_ids.iter().copied())
        .max()
        .unwrap_or(0);
    let offset = max + 1;
    let top = offset
        .checked_mul(d)
        .map(|t| t - 1)
        .filter(|&t| t <= MAX_HASH_ID);
    if top.is_none() {
        return Err(ParseError {
            line: 0,
            reason: format!(
                "--trace-duplication-factor {d}: {d} copies of ids up to {max} exceed {MAX_HASH_ID}"
            ),
        });
    }
    let mut out = Vec::with_capacity(requests.len() * d as usize);
    for request in &requests {
        for j in 0..d {
            let mut copy = request.clone();
            copy.hash_ids.iter_mut().for_each(|h| *h += j * offset);
            out.push(copy);
        }
    }
    Ok(out)
}

/// Step 3: arrival times rescaled so the first is 0 and the last `span_ms`.
pub fn rescale_arrivals(requests: &mut [TraceRequest], span_ms: u64) {
    let first = requests
        .iter()
        .map(|r| r.timestamp_ms)
        .fold(f64::INFINITY, f64::min);
    let last = requests.iter().map(|r| r.timestamp_ms).fold(0.0, f64::max);
    let span = last - first;
    for request in requests.iter_mut() {
        request.timestamp_ms = if span > 0.0 {
            (request.timestamp_ms - first) * span_ms as f64 / span
        } else {
            0.0
        };
    }
}

/// Step 4: request indices per worker, each list in arrival order.
pub fn partition(requests: &[TraceRequest], workers: usize, seed: u64) -> Vec<Vec<usize>> {
    let workers = workers.max(1);
    let mut rng = Rng::new(mix(seed ^ 0x7061_7274_6974_696f));
    let mut lists = vec![Vec::new(); workers];
    for index in 0..requests.len() {
        lists[rng.below(workers)].push(index);
    }
    for list in &mut lists {
        list.sort_by(|&a, &b| {
            requests[a]
                .timestamp_ms
                .total_cmp(&requests[b].timestamp_ms)
        });
    }
    lists
}

/// One emitted operation's place: its worker and its position in the
/// window.
#[derive(Clone, Copy)]
struct Stamp {
    worker: usize,
    position: f64,
}

/// Steps 5 and 6: the engine's operations with their per-worker positions.
fn run_engine(
    requests: &[TraceRequest],
    lists: &[Vec<usize>],
    config: EngineConfig,
    name: &str,
) -> (Workload, Vec<Stamp>) {
    let mut engine = Engine::new(EngineConfig {
        workers: lists.len(),
        ..config
    });
    let mut stamps = Vec::new();
    for (worker, list) in lists.iter().enumerate() {
        let arrival = |i: usize| requests[list[i]].timestamp_ms;
        let (first, last) = match list.len() {
            0 => continue,
            n => (arrival(0), arrival(n - 1)),
        };
        for (i, &index) in list.iter().enumerate() {
            let request = &requests[index];
            engine.submit_to(worker, &request.prompt, request.output_blocks);
            let position = if last > first {
                (arrival(i) - first) / (last - first)
            } else {
                0.0
            };
            let emitted = engine.workload().ops.len() - stamps.len();
            stamps.extend(std::iter::repeat_n(Stamp { worker, position }, emitted));
        }
    }
    (engine.finish(name), stamps)
}

/// `op` as replica `replica` of a fleet of `workers`: its worker id moved by
/// `replica · workers`.
fn as_replica(op: &WorkloadOp, replica: usize, workers: usize) -> WorkloadOp {
    let shift = (replica * workers) as WorkerId;
    match op {
        WorkloadOp::Event(event) => {
            let mut event = event.clone();
            event.worker_id += shift;
            WorkloadOp::Event(event)
        }
        WorkloadOp::RemoveWorker(worker) => WorkloadOp::RemoveWorker(worker + shift),
        WorkloadOp::Query(locals) => WorkloadOp::Query(locals.clone()),
    }
}

/// Steps 7 and 8: `r` replicas merged into one schedule.
fn replicate(workload: Workload, stamps: &[Stamp], workers: usize, r: usize) -> Timeline {
    let mut order: Vec<(usize, usize)> = (0..r)
        .flat_map(|replica| (0..stamps.len()).map(move |op| (replica, op)))
        .collect();
    let key = |&(replica, op): &(usize, usize)| {
        let is_event = !matches!(workload.ops[op], WorkloadOp::Query(_));
        (is_event, stamps[op].worker + replica * workers, op)
    };
    order.sort_by(|a, b| {
        stamps[a.1]
            .position
            .total_cmp(&stamps[b.1].position)
            .then_with(|| key(a).cmp(&key(b)))
    });
    let ops = order
        .iter()
        .map(|&(replica, op)| as_replica(&workload.ops[op], replica, workers))
        .collect();
    let positions = order.iter().map(|&(_, op)| stamps[op].position).collect();
    Timeline {
        workload: Workload {
            name: workload.name,
            ops,
            decode_stores: workload.decode_stores * r as u64,
        },
        positions,
    }
}

/// Builds the corpus of `requests` under `shape` (steps 1–8) on an engine
/// of `config.workers` workers of `config.capacity_blocks` blocks, named
/// `name`. Errors name the trace line (0: the shape as a whole).
pub fn build_timeline(
    mut requests: Vec<TraceRequest>,
    shape: TraceShape,
    config: EngineConfig,
    name: &str,
) -> Result<Timeline, ParseError> {
    expand_lengths(&mut requests, shape.length_factor)?;
    let mut requests = duplicate_hash_space(requests, shape.duplication_factor)?;
    for request in &mut requests {
        request.prompt = engine_prompt(&request.hash_ids, request.input_length);
    }
    check_fits(&requests, config.capacity_blocks)?;
    if let Some(span) = shape.simulation_ms {
        rescale_arrivals(&mut requests, span);
    }
    let workers = config.workers.max(1);
    let lists = partition(&requests, workers, config.seed);
    let (workload, stamps) = run_engine(&requests, &lists, config, name);
    Ok(replicate(
        workload,
        &stamps,
        workers,
        shape.worker_duplication.max(1),
    ))
}

/// Reads the trace at `path` and builds its corpus ([`build_timeline`]),
/// named after the file and the shape.
pub fn load_timeline(
    path: &std::path::Path,
    shape: TraceShape,
    config: EngineConfig,
) -> Result<Timeline, ParseError> {
    let file = std::fs::File::open(path).map_err(|e| ParseError {
        line: 0,
        reason: format!("cannot open {}: {e}", path.display()),
    })?;
    let requests = super::mooncake::parse_mooncake(std::io::BufReader::new(file))?;
    let name = format!(
        "mooncake:{} (length ×{}, hash space ×{}, {} workers ×{})",
        path.file_name().unwrap_or_default().to_string_lossy(),
        shape.length_factor,
        shape.duplication_factor,
        config.workers.max(1),
        shape.worker_duplication.max(1)
    );
    build_timeline(requests, shape, config, &name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::mooncake::{engine_local, parse_mooncake};
    use crtc::types::KvCacheEventData;

    fn requests(text: &str) -> Vec<TraceRequest> {
        parse_mooncake(text.as_bytes()).unwrap()
    }

    const TWO: &str = "{\"timestamp\": 0, \"output_length\": 0, \"hash_ids\": [1, 2]}\n\
                       {\"timestamp\": 10, \"output_length\": 0, \"hash_ids\": [1, 3]}\n";

    #[test]
    fn length_factor_deepens_each_id() {
        let mut r = requests(TWO);
        expand_lengths(&mut r, 3).unwrap();
        assert_eq!(r[0].hash_ids, [3, 4, 5, 6, 7, 8]);
        assert_eq!(r[1].hash_ids, [3, 4, 5, 9, 10, 11]);
        let mut big = requests(&format!(
            "{{\"output_length\": 0, \"hash_ids\": [{}]}}\n",
            MAX_HASH_ID / 2
        ));
        let error = expand_lengths(&mut big, 3).unwrap_err();
        assert_eq!(error.line, 1);
        assert!(error.reason.contains("--trace-length-factor 3"), "{error}");
    }

    #[test]
    fn duplication_makes_disjoint_interleaved_copies() {
        let r = duplicate_hash_space(requests(TWO), 3).unwrap();
        // max id 3, offset 4: copies j = 0, 1, 2 follow each request.
        let ids: Vec<Vec<u64>> = r.iter().map(|q| q.hash_ids.clone()).collect();
        assert_eq!(
            ids,
            [
                vec![1, 2],
                vec![5, 6],
                vec![9, 10],
                vec![1, 3],
                vec![5, 7],
                vec![9, 11]
            ]
        );
        assert_eq!(r[2].timestamp_ms, 0.0);
        assert_eq!(r[3].timestamp_ms, 10.0);
        let huge = requests(&format!(
            "{{\"output_length\": 0, \"hash_ids\": [{MAX_HASH_ID}]}}\n"
        ));
        assert!(duplicate_hash_space(huge, 2).is_err());
    }

    #[test]
    fn arrivals_rescale_to_the_span() {
        let mut r = requests(TWO);
        rescale_arrivals(&mut r, 1000);
        assert_eq!((r[0].timestamp_ms, r[1].timestamp_ms), (0.0, 1000.0));
    }

    /// Two requests, one worker, two replicas: every count by hand.
    #[test]
    fn one_worker_two_replicas_by_hand() {
        let shape = TraceShape {
            worker_duplication: 2,
            ..TraceShape::default()
        };
        let config = EngineConfig {
            workers: 1,
            capacity_blocks: 100,
            seed: 1,
        };
        let t = build_timeline(requests(TWO), shape, config, "t").unwrap();
        // Per request: a lookup and one prompt store (the second stores
        // only its last 4 engine blocks under the shared first 4): 4 ops,
        // twice (replicas 0 and 1).
        assert_eq!(t.workload.ops.len(), 8);
        assert_eq!(t.positions, [0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0]);
        let workers: Vec<Option<u64>> = t
            .workload
            .ops
            .iter()
            .map(|op| match op {
                WorkloadOp::Event(e) => Some(e.worker_id),
                _ => None,
            })
            .collect();
        // Lookups first at each instant, then events by worker id.
        assert_eq!(
            workers,
            [None, None, Some(0), Some(1), None, None, Some(0), Some(1)]
        );
        let WorkloadOp::Event(second) = &t.workload.ops[6] else {
            panic!("expected an event")
        };
        let KvCacheEventData::Stored { blocks, .. } = &second.event.data else {
            panic!("expected a store")
        };
        assert_eq!(blocks.len(), 4);
        assert_eq!(blocks[0].local, engine_local(3, 0));
    }

    #[test]
    fn workers_are_rescaled_each_to_the_whole_window() {
        let text: String = [0, 5, 7, 100, 200, 300]
            .iter()
            .map(|t| format!("{{\"timestamp\": {t}, \"output_length\": 0, \"hash_ids\": [{t}]}}\n"))
            .collect();
        let config = EngineConfig {
            workers: 2,
            capacity_blocks: 100,
            seed: 9,
        };
        let t = build_timeline(requests(&text), TraceShape::default(), config, "t").unwrap();
        // 6 lookups + 6 stores; each worker's first op at 0 and last at 1.
        assert_eq!(t.workload.ops.len(), 12);
        assert_eq!(t.positions.iter().filter(|&&p| p == 0.0).count(), 4);
        assert_eq!(t.positions.iter().filter(|&&p| p == 1.0).count(), 4);
        assert!(t.positions.windows(2).all(|w| w[0] <= w[1]));
    }

    #[test]
    fn the_synthetic_trace_expands_by_the_factors() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../shared/traces/mooncake_synthetic.jsonl");
        if !path.exists() {
            println!("skipping: {} is absent", path.display());
            return;
        }
        let config = EngineConfig {
            workers: 4,
            capacity_blocks: 16_384,
            seed: 42,
        };
        let shape = |r| TraceShape {
            length_factor: 2,
            duplication_factor: 2,
            worker_duplication: r,
            simulation_ms: Some(1000),
        };
        // The first 400 requests keep a debug-build test short.
        let file = std::io::BufReader::new(std::fs::File::open(&path).unwrap());
        let head: Vec<TraceRequest> = parse_mooncake(file)
            .unwrap()
            .into_iter()
            .take(400)
            .collect();
        let one = build_timeline(head.clone(), shape(1), config, "one").unwrap();
        let two = build_timeline(head, shape(2), config, "two").unwrap();
        assert_eq!(one.workload.queries(), 400 * 2);
        assert_eq!(two.workload.queries(), 400 * 2 * 2);
        assert_eq!(two.workload.events(), 2 * one.workload.events());
        assert_eq!(two.positions.len(), two.workload.ops.len());
        crate::workload::check::check_strict(&two.workload).unwrap();
    }
}
