//! Event streams as JSON lines, one operation per line:
//!
//! ```text
//! {"t":"stored","worker":W,"rank":R,"parent":P,"blocks":[[local,external],...]}
//! {"t":"removed","worker":W,"rank":R,"hashes":[external,...]}
//! {"t":"cleared","worker":W,"rank":R}
//! {"t":"remove_worker","worker":W}
//! {"t":"query","locals":[local,...]}
//! ```
//!
//! `P` is a hash or `null` (the root). Hashes are unsigned 64-bit integers.
//! Blank lines are skipped; a repeated key or a field the line's kind does
//! not define is an error, as is a line over the limits of
//! [`super::limits`]. Event ids are not recorded (they are informational)
//! and read back as 0.
//!
//! The chaining rule: a stored block's external hash is
//! `chain_hash(previous external, local)` ([`chain_hash`]), the previous
//! external being the event's parent (or none, the root) for the first
//! block. The reference model identifies blocks by that chain, so a stream
//! that breaks it would make every strategy look wrong; [`read_jsonl`]
//! rejects it, [`read_jsonl_with`] and [`Chaining::Unchecked`] accept it.

use super::limits::{for_each_line, only_fields, parse_object};
use super::{ParseError, Workload, WorkloadOp};
use crate::chain::chain_hash;
use crtc::types::{
    BlockPair, ExternalSequenceBlockHash, KvCacheEventData, LocalBlockHash, RouterEvent,
    WorkerWithDpRank,
};
use rustc_hash::FxHashMap;
use serde_json::{Map, Value};
use std::fmt::Write as _;
use std::io::{self, BufRead, Write};

/// Writes `workload` as JSON lines (its name and decode count are not
/// recorded; [`read_jsonl`] infers the latter).
pub fn write_jsonl(workload: &Workload, out: &mut impl Write) -> io::Result<()> {
    let mut line = String::new();
    for op in &workload.ops {
        line.clear();
        format_op(op, &mut line);
        line.push('\n');
        out.write_all(line.as_bytes())?;
    }
    Ok(())
}

fn format_op(op: &WorkloadOp, line: &mut String) {
    // Writing into a String cannot fail.
    let _ = match op {
        WorkloadOp::Event(event) => format_event(event, line),
        WorkloadOp::RemoveWorker(worker) => {
            write!(line, r#"{{"t":"remove_worker","worker":{worker}}}"#)
        }
        WorkloadOp::Query(locals) => {
            line.push_str(r#"{"t":"query","locals":["#);
            join(line, locals.iter().map(|l| l.0));
            line.push_str("]}");
            Ok(())
        }
    };
}

fn format_event(event: &RouterEvent, line: &mut String) -> std::fmt::Result {
    let (worker, rank) = (event.worker_id, event.event.dp_rank);
    match &event.event.data {
        KvCacheEventData::Stored {
            parent_hash,
            blocks,
        } => {
            write!(
                line,
                r#"{{"t":"stored","worker":{worker},"rank":{rank},"parent":"#
            )?;
            match parent_hash {
                Some(p) => write!(line, "{}", p.0)?,
                None => line.push_str("null"),
            }
            line.push_str(r#","blocks":["#);
            for (i, b) in blocks.iter().enumerate() {
                let sep = if i == 0 { "" } else { "," };
                write!(line, "{sep}[{},{}]", b.local.0, b.external.0)?;
            }
            line.push_str("]}");
        }
        KvCacheEventData::Removed { block_hashes } => {
            write!(
                line,
                r#"{{"t":"removed","worker":{worker},"rank":{rank},"hashes":["#
            )?;
            join(line, block_hashes.iter().map(|h| h.0));
            line.push_str("]}");
        }
        KvCacheEventData::Cleared => {
            write!(line, r#"{{"t":"cleared","worker":{worker},"rank":{rank}}}"#)?;
        }
    }
    Ok(())
}

fn join(line: &mut String, values: impl Iterator<Item = u64>) {
    for (i, v) in values.enumerate() {
        let sep = if i == 0 { "" } else { "," };
        let _ = write!(line, "{sep}{v}");
    }
}

/// Whether [`read_jsonl_with`] checks the chaining rule.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Chaining {
    /// Every stored block's external hash must be
    /// `chain_hash(previous external, local)`, the previous external being
    /// the event's parent (or the root) for the first block.
    #[default]
    Checked,
    /// Any external hashes are accepted; the reference model's verdicts then
    /// do not apply (it derives a block's identity from the chain).
    Unchecked,
}

/// Reads a stream written by [`write_jsonl`] (or by hand) into a workload
/// called `name`, checking the chaining rule ([`Chaining::Checked`]).
///
/// The decode-store count is inferred: a one-block store whose parent is the
/// storing rank's last stored block or the latest lookup's last block (by
/// [`chain_hash`]), and which is not itself the latest lookup's last block.
/// On streams from [`super::engine`] this equals the generator's count.
///
/// A line that cannot be read or parsed, is over a limit of
/// [`super::limits`], repeats a key, has a field its kind does not define, or
/// breaks the chaining rule is a [`ParseError`] naming the 1-based
/// line and what was wrong.
pub fn read_jsonl(input: impl BufRead, name: &str) -> Result<Workload, ParseError> {
    read_jsonl_with(input, name, Chaining::Checked)
}

/// [`read_jsonl`] with the chaining rule checked or not.
pub fn read_jsonl_with(
    input: impl BufRead,
    name: &str,
    chaining: Chaining,
) -> Result<Workload, ParseError> {
    let mut workload = Workload::new(name);
    let mut decode = DecodeCounter::default();
    for_each_line(input, |_, line| {
        let op = parse_op(line)?;
        if chaining == Chaining::Checked {
            check_chained(&op)?;
        }
        decode.observe(&op);
        workload.ops.push(op);
        Ok(())
    })?;
    workload.decode_stores = decode.count;
    Ok(workload)
}

/// The chaining rule on one operation (see [`Chaining::Checked`]).
fn check_chained(op: &WorkloadOp) -> Result<(), String> {
    let WorkloadOp::Event(event) = op else {
        return Ok(());
    };
    let KvCacheEventData::Stored {
        parent_hash,
        blocks,
    } = &event.event.data
    else {
        return Ok(());
    };
    let mut previous = *parent_hash;
    for (i, block) in blocks.iter().enumerate() {
        let expected = chain_hash(previous, block.local);
        if block.external != expected {
            return Err(format!(
                "`blocks` item {i}: external hash {} is not the chain of its parent and local \
                 hash (expected {}; see the chaining rule, or pass --unchained)",
                block.external.0, expected.0
            ));
        }
        previous = Some(block.external);
    }
    Ok(())
}

/// The fields each kind of line may carry.
fn fields_of(kind: &str) -> Option<&'static [&'static str]> {
    Some(match kind {
        "stored" => &["t", "worker", "rank", "parent", "blocks"],
        "removed" => &["t", "worker", "rank", "hashes"],
        "cleared" => &["t", "worker", "rank"],
        "remove_worker" => &["t", "worker"],
        "query" => &["t", "locals"],
        _ => return None,
    })
}

/// Parses one line into an operation.
fn parse_op(line: &str) -> Result<WorkloadOp, String> {
    let obj = parse_object(line)?;
    let kind = field(&obj, "t")?
        .as_str()
        .ok_or_else(|| "field `t`: expected a string".to_string())?;
    if let Some(allowed) = fields_of(kind) {
        only_fields(&obj, allowed, &format!("a {kind:?} line"))?;
    }
    let rank = || -> Result<WorkerWithDpRank, String> {
        let worker = u64_field(&obj, "worker")?;
        let rank = u64_field(&obj, "rank")?;
        let rank =
            u32::try_from(rank).map_err(|_| format!("field `rank`: {rank} exceeds 32 bits"))?;
        Ok(WorkerWithDpRank::new(worker, rank))
    };
    let event = match kind {
        "stored" => {
            let parent = match field(&obj, "parent")? {
                Value::Null => None,
                v => Some(ExternalSequenceBlockHash(as_u64(v, "`parent`")?)),
            };
            let blocks = array_field(&obj, "blocks")?
                .iter()
                .enumerate()
                .map(|(i, v)| parse_pair(v, i))
                .collect::<Result<_, _>>()?;
            RouterEvent::stored(rank()?, parent, blocks)
        }
        "removed" => {
            let hashes = u64_array(&obj, "hashes")?;
            let hashes = hashes.into_iter().map(ExternalSequenceBlockHash).collect();
            RouterEvent::removed(rank()?, hashes)
        }
        "cleared" => RouterEvent::cleared(rank()?),
        "remove_worker" => return Ok(WorkloadOp::RemoveWorker(u64_field(&obj, "worker")?)),
        "query" => {
            let locals = u64_array(&obj, "locals")?;
            return Ok(WorkloadOp::Query(
                locals.into_iter().map(LocalBlockHash).collect(),
            ));
        }
        other => {
            return Err(format!(
                "unknown \"t\" value {other:?} (expected stored, removed, cleared, \
                 remove_worker or query)"
            ))
        }
    };
    Ok(WorkloadOp::Event(event))
}

fn parse_pair(value: &Value, index: usize) -> Result<BlockPair, String> {
    let what = format!("`blocks` item {index}");
    match value.as_array().map(Vec::as_slice) {
        Some([local, external]) => Ok(BlockPair {
            local: LocalBlockHash(as_u64(local, &what)?),
            external: ExternalSequenceBlockHash(as_u64(external, &what)?),
        }),
        _ => Err(format!("{what}: expected [local, external]")),
    }
}

/// The field `name`, or a "missing field" reason.
pub(super) fn field<'a>(obj: &'a Map<String, Value>, name: &str) -> Result<&'a Value, String> {
    obj.get(name)
        .ok_or_else(|| format!("missing field `{name}`"))
}

/// `value` as an unsigned 64-bit integer; `what` names it in the reason.
pub(super) fn as_u64(value: &Value, what: &str) -> Result<u64, String> {
    value
        .as_u64()
        .ok_or_else(|| format!("{what}: expected an unsigned integer, got {value}"))
}

/// The field `name` as an unsigned 64-bit integer.
pub(super) fn u64_field(obj: &Map<String, Value>, name: &str) -> Result<u64, String> {
    as_u64(field(obj, name)?, &format!("field `{name}`"))
}

/// The field `name` as an array.
pub(super) fn array_field<'a>(
    obj: &'a Map<String, Value>,
    name: &str,
) -> Result<&'a [Value], String> {
    field(obj, name)?
        .as_array()
        .map(Vec::as_slice)
        .ok_or_else(|| format!("field `{name}`: expected an array"))
}

/// The field `name` as an array of unsigned 64-bit integers.
pub(super) fn u64_array(obj: &Map<String, Value>, name: &str) -> Result<Vec<u64>, String> {
    array_field(obj, name)?
        .iter()
        .enumerate()
        .map(|(i, v)| as_u64(v, &format!("`{name}` item {i}")))
        .collect()
}

/// Infers decode stores from a stream (see [`read_jsonl`]).
#[derive(Default)]
struct DecodeCounter {
    count: u64,
    query_tail: Option<ExternalSequenceBlockHash>,
    rank_tail: FxHashMap<WorkerWithDpRank, ExternalSequenceBlockHash>,
}

impl DecodeCounter {
    fn observe(&mut self, op: &WorkloadOp) {
        match op {
            WorkloadOp::Query(locals) => {
                self.query_tail = locals.iter().fold(None, |t, &l| Some(chain_hash(t, l)));
            }
            WorkloadOp::RemoveWorker(worker) => {
                self.rank_tail.retain(|rank, _| rank.worker_id != *worker);
            }
            WorkloadOp::Event(event) => self.event(event),
        }
    }

    fn event(&mut self, event: &RouterEvent) {
        let rank = event.rank();
        match &event.event.data {
            KvCacheEventData::Stored {
                parent_hash,
                blocks,
            } => {
                if let (Some(parent), [block]) = (*parent_hash, blocks.as_slice()) {
                    let on_tail = self.rank_tail.get(&rank) == Some(&parent)
                        || self.query_tail == Some(parent);
                    let is_prompt = self.query_tail == Some(block.external);
                    self.count += u64::from(on_tail && !is_prompt);
                }
                if let Some(last) = blocks.last() {
                    self.rank_tail.insert(rank, last.external);
                }
            }
            KvCacheEventData::Removed { .. } => {}
            KvCacheEventData::Cleared => {
                self.rank_tail.remove(&rank);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chain;
    use crate::workload::presets;

    fn round_trip(workload: &Workload) -> Workload {
        let mut bytes = Vec::new();
        write_jsonl(workload, &mut bytes).unwrap();
        read_jsonl(bytes.as_slice(), &workload.name).unwrap()
    }

    #[test]
    fn round_trip_equals_for_every_kind_and_presets() {
        let rank = WorkerWithDpRank::new(u64::MAX, 7);
        let blocks = chain::chained(None, &[u64::MAX, 0, 42]);
        let mut w = Workload::new("kinds");
        w.ops = vec![
            WorkloadOp::Query(chain::locals(&[])),
            WorkloadOp::Event(RouterEvent::stored(rank, None, blocks.clone())),
            WorkloadOp::Event(RouterEvent::stored(rank, Some(blocks[2].external), vec![])),
            WorkloadOp::Event(RouterEvent::removed(rank, vec![blocks[2].external])),
            WorkloadOp::Event(RouterEvent::removed(rank, vec![])),
            WorkloadOp::Event(RouterEvent::cleared(rank)),
            WorkloadOp::RemoveWorker(3),
            WorkloadOp::Query(chain::locals(&[1, u64::MAX])),
        ];
        assert_eq!(round_trip(&w), w);
        for preset in [presets::chat(9, 0.05), presets::agentx(9, 0.05)] {
            assert!(preset.decode_stores > 0);
            assert_eq!(round_trip(&preset), preset);
        }
    }

    #[test]
    fn blank_lines_are_skipped() {
        let text =
            "\n{\"t\":\"remove_worker\",\"worker\":2}\n   \n{\"t\":\"query\",\"locals\":[5]}\n";
        let w = read_jsonl(text.as_bytes(), "b").unwrap();
        assert_eq!(
            w.ops,
            vec![
                WorkloadOp::RemoveWorker(2),
                WorkloadOp::Query(chain::locals(&[5]))
            ]
        );
    }

    fn error_for(bad: &str) -> (usize, String) {
        let good = r#"{"t":"cleared","worker":1,"rank":0}"#;
        let text = format!("{good}\n\n{good}\n{bad}\n{good}\n");
        match read_jsonl(text.as_bytes(), "bad") {
            Err(ParseError { line, reason }) => (line, reason),
            other => panic!("expected a ParseError for {bad}, got {other:?}"),
        }
    }

    #[test]
    fn malformed_lines_name_line_and_reason() {
        let cases = [
            (r#"{"t":"stored","worker":1,"rank":0"#, "invalid JSON"),
            ("[1, 2]", "expected a JSON object"),
            (r#"{"worker":1}"#, "missing field `t`"),
            (r#"{"t":5}"#, "field `t`: expected a string"),
            (
                r#"{"t":"evicted","worker":1,"rank":0}"#,
                "unknown \"t\" value \"evicted\"",
            ),
            (r#"{"t":"cleared","rank":0}"#, "missing field `worker`"),
            (
                r#"{"t":"cleared","worker":-1,"rank":0}"#,
                "field `worker`: expected an unsigned",
            ),
            (
                r#"{"t":"cleared","worker":1,"rank":4294967296}"#,
                "exceeds 32 bits",
            ),
            (
                r#"{"t":"stored","worker":1,"rank":0,"blocks":[]}"#,
                "missing field `parent`",
            ),
            (
                r#"{"t":"stored","worker":1,"rank":0,"parent":"x","blocks":[]}"#,
                "`parent`",
            ),
            (
                r#"{"t":"stored","worker":1,"rank":0,"parent":null,"blocks":[[1]]}"#,
                "item 0",
            ),
            (
                r#"{"t":"stored","worker":1,"rank":0,"parent":null,"blocks":{}}"#,
                "expected an array",
            ),
            (
                r#"{"t":"removed","worker":1,"rank":0,"hashes":[1,2.5]}"#,
                "`hashes` item 1",
            ),
            (
                r#"{"t":"query","locals":"abc"}"#,
                "field `locals`: expected an array",
            ),
        ];
        for (bad, needle) in cases {
            let (line, reason) = error_for(bad);
            assert_eq!(line, 4, "{bad}");
            assert!(reason.contains(needle), "{bad}: {reason}");
        }
    }

    #[test]
    fn decode_inference_follows_the_rank_tail() {
        let rank = WorkerWithDpRank::new(0, 0);
        let prompt = chain::chained(None, &[1, 2]);
        let tail = prompt[1].external;
        let d1 = chain::chained(Some(tail), &[3]);
        let d1_tail = d1[0].external;
        let d2 = chain::chained(Some(d1_tail), &[4]);
        let stray = chain::chained(Some(prompt[0].external), &[5]);
        let mut w = Workload::new("d");
        w.ops = vec![
            WorkloadOp::Query(chain::locals(&[1, 2])),
            WorkloadOp::Event(RouterEvent::stored(rank, None, prompt.clone())),
            WorkloadOp::Event(RouterEvent::stored(rank, Some(tail), d1)),
            WorkloadOp::Event(RouterEvent::stored(rank, Some(prompt[0].external), stray)),
            WorkloadOp::Event(RouterEvent::stored(rank, Some(d1_tail), d2)),
        ];
        // d1 is on the rank tail; the stray store is not; d2's parent (d1) is
        // no longer the rank tail.
        assert_eq!(round_trip(&w).decode_stores, 1);
    }
}
