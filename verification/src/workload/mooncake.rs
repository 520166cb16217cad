//! Mooncake request traces (FAST'25 release format) replayed through the
//! engine model.
//!
//! One JSON object per line:
//! `{"timestamp": ms, "input_length": tokens, "output_length": tokens, "hash_ids": [...]}`.
//! Each hash id stands for one 512-token trace block; equal ids at equal
//! positions mean a shared prefix. A trace block becomes four 128-token
//! engine blocks whose local hashes are derived from (hash id, sub-index),
//! so shared trace prefixes stay shared engine prefixes. The prompt is
//! trimmed to `ceil(input_length / 128)` engine blocks (all of them when
//! `input_length` is absent); the request generates
//! `ceil(output_length / 128)` output blocks (`osl` is accepted as an alias).
//! Requests run in file order; `timestamp` is checked, and used only by the
//! upstream timeline of [`super::expand`].
//!
//! Limits (each a line-numbered error, checked before anything is sized
//! from the value): at most [`MAX_TRACE_BLOCKS`] hash ids per request, ids
//! at most [`MAX_HASH_ID`] (so the ×4 re-chunking neither wraps nor makes
//! two ids collide), `input_length` at most [`MAX_INPUT_TOKENS`],
//! `output_length` at most [`MAX_OUTPUT_TOKENS`], no field besides the five
//! above, no repeated key, and the line limits of [`super::limits`].
//! [`load_mooncake`] also rejects a request whose prompt plus output blocks
//! exceed the per-worker cache: the engine could not hold it, and storing it
//! whole would overflow the cache without a trace in the report.

use super::engine::{Engine, EngineConfig, Placement, RandomPlacement};
use super::jsonl::{array_field, as_u64};
use super::limits::{for_each_line, only_fields, parse_object};
use super::{ParseError, Workload, BLOCK_TOKENS};
use crate::chain::mix;
use crtc::types::LocalBlockHash;
use serde_json::{Map, Value};
use std::io::{BufRead, BufReader};
use std::path::Path;

/// Tokens per trace block (one hash id).
pub const TRACE_BLOCK_TOKENS: u64 = 512;

/// Engine blocks per trace block.
const SUB_BLOCKS: u64 = TRACE_BLOCK_TOKENS / BLOCK_TOKENS;

/// Most hash ids (512-token trace blocks) one request may list: 4,096, a
/// 2 Mi-token prompt of 16,384 engine blocks.
pub const MAX_TRACE_BLOCKS: usize = 4096;
/// Largest `input_length`, in tokens (the longest prompt the ids can cover).
pub const MAX_INPUT_TOKENS: u64 = MAX_TRACE_BLOCKS as u64 * TRACE_BLOCK_TOKENS;
/// Largest `output_length`, in tokens: 1 Mi, 8,192 output blocks.
pub const MAX_OUTPUT_TOKENS: u64 = 1 << 20;
/// Largest hash id: 2^62 - 1, so `id * 4 + sub` neither wraps nor collides.
pub const MAX_HASH_ID: u64 = u64::MAX / SUB_BLOCKS;

/// The fields a trace line may carry.
const TRACE_FIELDS: &[&str] = &[
    "timestamp",
    "input_length",
    "output_length",
    "osl",
    "hash_ids",
];

/// One request of a trace, already re-chunked into engine blocks.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceRequest {
    /// The 1-based line of the trace it came from.
    pub line: usize,
    /// Arrival time in ms (0 when absent).
    pub timestamp_ms: f64,
    /// The trace block ids, as listed (the expansion of
    /// [`super::expand`] rewrites them and rebuilds `prompt`).
    pub hash_ids: Vec<u64>,
    /// The prompt length in tokens, when the line gives it.
    pub input_length: Option<u64>,
    /// The prompt's engine-block local hashes.
    pub prompt: Vec<LocalBlockHash>,
    /// Output blocks to generate.
    pub output_blocks: usize,
}

/// The local hash of engine block `sub` (0..4) of trace block `hash_id`
/// (ids up to [`MAX_HASH_ID`] give distinct keys; larger ones wrap).
pub fn engine_local(hash_id: u64, sub: u64) -> LocalBlockHash {
    let key = hash_id.wrapping_mul(SUB_BLOCKS).wrapping_add(sub);
    LocalBlockHash(mix(key ^ 0x6d6f_6f6e_6361_6b65))
}

/// The engine blocks of a trace prompt: four per hash id, trimmed to
/// `ceil(input_length / 128)` when the length is known.
pub fn engine_prompt(hash_ids: &[u64], input_length: Option<u64>) -> Vec<LocalBlockHash> {
    let all = hash_ids.len() as u64 * SUB_BLOCKS;
    let keep = input_length.map_or(all, |n| n.div_ceil(BLOCK_TOKENS).min(all));
    hash_ids
        .iter()
        .flat_map(|&id| (0..SUB_BLOCKS).map(move |sub| engine_local(id, sub)))
        .take(keep as usize)
        .collect()
}

/// Parses a trace; blank lines are skipped, a bad line (see the module
/// docs for the limits) is [`ParseError`] with its 1-based number.
pub fn parse_mooncake(input: impl BufRead) -> Result<Vec<TraceRequest>, ParseError> {
    let mut requests = Vec::new();
    for_each_line(input, |line, text| {
        requests.push(parse_request(line, text)?);
        Ok(())
    })?;
    Ok(requests)
}

/// An optional unsigned field no larger than `max`.
fn bounded(obj: &Map<String, Value>, name: &str, max: u64) -> Result<Option<u64>, String> {
    let Some(value) = obj.get(name) else {
        return Ok(None);
    };
    let n = as_u64(value, &format!("field `{name}`"))?;
    if n > max {
        return Err(format!("field `{name}`: {n} exceeds the limit of {max}"));
    }
    Ok(Some(n))
}

fn parse_request(line: usize, text: &str) -> Result<TraceRequest, String> {
    let obj = parse_object(text)?;
    only_fields(&obj, TRACE_FIELDS, "a trace line")?;
    let timestamp_ms = match obj.get("timestamp") {
        None => 0.0,
        Some(v) => v
            .as_f64()
            .filter(|t| *t >= 0.0)
            .ok_or_else(|| format!("field `timestamp`: expected a non-negative number, got {v}"))?,
    };
    let input_length = bounded(&obj, "input_length", MAX_INPUT_TOKENS)?;
    let output_length = match (obj.contains_key("output_length"), obj.contains_key("osl")) {
        (true, true) => return Err("both `output_length` and its alias `osl`".to_owned()),
        (false, true) => bounded(&obj, "osl", MAX_OUTPUT_TOKENS)?,
        _ => bounded(&obj, "output_length", MAX_OUTPUT_TOKENS)?,
    }
    .ok_or_else(|| "missing field `output_length`".to_owned())?;
    let ids = array_field(&obj, "hash_ids")?;
    if ids.len() > MAX_TRACE_BLOCKS {
        return Err(format!(
            "field `hash_ids`: {} ids exceed the limit of {MAX_TRACE_BLOCKS}",
            ids.len()
        ));
    }
    let hash_ids = ids
        .iter()
        .enumerate()
        .map(|(i, v)| match as_u64(v, &format!("`hash_ids` item {i}"))? {
            id if id > MAX_HASH_ID => Err(format!(
                "`hash_ids` item {i}: {id} exceeds the limit of {MAX_HASH_ID}"
            )),
            id => Ok(id),
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(TraceRequest {
        line,
        timestamp_ms,
        prompt: engine_prompt(&hash_ids, input_length),
        hash_ids,
        input_length,
        output_blocks: output_length.div_ceil(BLOCK_TOKENS) as usize,
    })
}

/// Rejects the first request whose prompt and output blocks together exceed
/// `capacity_blocks`, the per-worker cache.
pub fn check_fits(requests: &[TraceRequest], capacity_blocks: usize) -> Result<(), ParseError> {
    let Some(request) = requests
        .iter()
        .find(|r| r.prompt.len() + r.output_blocks > capacity_blocks)
    else {
        return Ok(());
    };
    Err(ParseError {
        line: request.line,
        reason: format!(
            "the request needs {} blocks ({} prompt + {} output), more than the per-worker \
             cache of {capacity_blocks} blocks (raise --capacity)",
            request.prompt.len() + request.output_blocks,
            request.prompt.len(),
            request.output_blocks
        ),
    })
}

/// Runs `requests` in order through an engine with `placement`.
pub fn replay_mooncake<P: Placement>(
    requests: &[TraceRequest],
    config: EngineConfig,
    placement: P,
    name: &str,
) -> Workload {
    let mut engine = Engine::with_placement(config, placement);
    for request in requests {
        engine.submit(&request.prompt, request.output_blocks);
    }
    engine.finish(name)
}

/// Loads the trace at `path` and replays it with random placement seeded
/// from `config.seed`. A file that cannot be opened is
/// `ParseError { line: 0, .. }`; a request larger than the
/// per-worker cache is an error naming its line ([`check_fits`]).
pub fn load_mooncake(path: impl AsRef<Path>, config: EngineConfig) -> Result<Workload, ParseError> {
    let path = path.as_ref();
    let file = std::fs::File::open(path).map_err(|e| ParseError {
        line: 0,
        reason: format!("cannot open {}: {e}", path.display()),
    })?;
    let requests = parse_mooncake(BufReader::new(file))?;
    check_fits(&requests, config.capacity_blocks)?;
    let name = format!(
        "mooncake:{}",
        path.file_name().unwrap_or_default().to_string_lossy()
    );
    Ok(replay_mooncake(
        &requests,
        config,
        RandomPlacement::new(config.seed),
        &name,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::check::check_strict;
    use std::path::PathBuf;

    fn trace_path() -> Option<PathBuf> {
        let path =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/traces/mooncake_synthetic.jsonl");
        if path.exists() {
            Some(path)
        } else {
            println!("skipping: {} is absent", path.display());
            None
        }
    }

    #[test]
    fn rechunks_and_trims_and_shares_prefixes() {
        let text = "{\"timestamp\": 0, \"input_length\": 1100, \"output_length\": 129, \"hash_ids\": [7, 8, 9]}\n\
                    \n\
                    {\"input_length\": 600, \"osl\": 0, \"hash_ids\": [7, 9]}\n";
        let requests = parse_mooncake(text.as_bytes()).unwrap();
        assert_eq!(requests.len(), 2);
        // ceil(1100 / 128) = 9 of the 12 engine blocks; ceil(129 / 128) = 2.
        assert_eq!(requests[0].prompt.len(), 9);
        assert_eq!(requests[0].output_blocks, 2);
        assert_eq!(requests[0].prompt[4], engine_local(8, 0));
        // Same id at the same position: same first four blocks; then differs.
        assert_eq!(requests[1].prompt[..4], requests[0].prompt[..4]);
        assert_ne!(requests[1].prompt[4], requests[0].prompt[4]);
        assert_eq!(requests[1].prompt.len(), 5);
        assert_eq!(requests[1].output_blocks, 0);
        // Without input_length, every block is kept.
        assert_eq!(engine_prompt(&[1, 2], None).len(), 8);
        assert_eq!(engine_prompt(&[1, 2], Some(100_000)).len(), 8);
    }

    #[test]
    fn malformed_trace_lines_are_reported() {
        let good = r#"{"timestamp": 1, "input_length": 10, "output_length": 1, "hash_ids": [1]}"#;
        let cases = [
            (
                r#"{"timestamp": 1, "output_length": 1}"#,
                "missing field `hash_ids`",
            ),
            (
                r#"{"input_length": 10, "hash_ids": [1]}"#,
                "missing field `output_length`",
            ),
            (
                r#"{"output_length": 1, "hash_ids": [1, -2]}"#,
                "`hash_ids` item 1",
            ),
            (
                r#"{"timestamp": "x", "output_length": 1, "hash_ids": []}"#,
                "`timestamp`",
            ),
            (
                r#"{"input_length": -4, "output_length": 1, "hash_ids": []}"#,
                "`input_length`",
            ),
            ("not json", "invalid JSON"),
        ];
        for (bad, needle) in cases {
            let text = format!("{good}\n\n{bad}\n{good}\n");
            match parse_mooncake(text.as_bytes()) {
                Err(ParseError { line: 3, reason }) => {
                    assert!(reason.contains(needle), "{bad}: {reason}")
                }
                other => panic!("{bad}: {other:?}"),
            }
        }
        let missing = load_mooncake("/nonexistent/trace.jsonl", EngineConfig::default());
        assert!(matches!(missing, Err(ParseError { line: 0, .. })));
    }

    #[test]
    fn synthetic_trace_replays_strictly() {
        let Some(path) = trace_path() else { return };
        let config = EngineConfig {
            capacity_blocks: 16_384,
            ..EngineConfig::default()
        };
        let w = load_mooncake(&path, config).unwrap();
        assert_eq!(w.queries(), 3993);
        let stats = w.stats();
        assert!(stats.removed > 0 && stats.stored >= 3993 / 2);
        check_strict(&w).unwrap();
    }
}
