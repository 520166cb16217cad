//! Hostile input, table-driven: malformed, oversized and
//! contradictory event files, traces and command lines. Reader cases run
//! in-process (each bad line sits at line 3 of an otherwise valid file and
//! must be refused with that line number and a reason); flag, output-path
//! and exit-code cases spawn the `crtc` binary on tiny inputs and assert the
//! exit code (2 usage, 1 data) and the message. A proptest feeds random and
//! mutated lines to both readers: nothing may panic, and what they keep is
//! bounded by the input's size and the stated limits.

#[path = "bad_input/events.rs"]
mod events;
#[path = "bad_input/flags.rs"]
mod flags;
#[path = "bad_input/traces.rs"]
mod traces;

use crtc_verification::chain::chained;
use crtc_verification::workload::jsonl::{read_jsonl_with, Chaining};
use crtc_verification::workload::mooncake::{parse_mooncake, MAX_OUTPUT_TOKENS, MAX_TRACE_BLOCKS};
use crtc_verification::workload::{WorkloadOp, BLOCK_TOKENS};
use proptest::prelude::*;

/// A valid chained store of locals 1, 2 on worker 1 rank 0, and its
/// externals.
fn good_store() -> (String, u64, u64) {
    let blocks = chained(None, &[1, 2]);
    let (e1, e2) = (blocks[0].external.0, blocks[1].external.0);
    let line = format!(
        r#"{{"t":"stored","worker":1,"rank":0,"parent":null,"blocks":[[1,{e1}],[2,{e2}]]}}"#
    );
    (line, e1, e2)
}

#[test]
fn there_are_at_least_150_cases() {
    let dir = flags::scratch("count");
    let (events, traces, flags) = (
        events::event_cases().len(),
        traces::trace_cases().len(),
        flags::flag_cases(&dir).len(),
    );
    let _ = std::fs::remove_dir_all(&dir);
    // Plus the UTF-8 and chaining-switch test and the limit-edge test.
    let total = events + 1 + traces + 1 + flags;
    assert!(total >= 150, "only {total} cases");
    println!("{total} hostile-input cases: {events} event lines, {traces} trace lines, {flags} command lines, 2 more");
}

/// A line that may be valid, near-valid or garbage.
fn hostile_line() -> impl Strategy<Value = String> {
    let number = prop_oneof![
        any::<u64>().prop_map(|n| n.to_string()),
        Just("-1".to_owned()),
        Just("1e400".to_owned()),
        Just("18446744073709551616".to_owned()),
        Just("4611686018427387905".to_owned()),
        Just("null".to_owned()),
    ];
    let numbers = proptest::collection::vec(number, 0..6).prop_map(|v| v.join(","));
    let key = prop_oneof![
        Just("t"),
        Just("worker"),
        Just("rank"),
        Just("parent"),
        Just("blocks"),
        Just("hashes"),
        Just("locals"),
        Just("hash_ids"),
        Just("output_length"),
        Just("input_length"),
        Just("osl"),
        Just("timestamp"),
        Just("x"),
    ];
    let kind = prop_oneof![
        Just("\"stored\""),
        Just("\"removed\""),
        Just("\"cleared\""),
        Just("\"remove_worker\""),
        Just("\"query\""),
        Just("5"),
    ];
    let value = prop_oneof![
        numbers.clone().prop_map(|n| format!("[{n}]")),
        numbers.prop_map(|n| format!("[[{n}],[{n}]]")),
        kind.prop_map(str::to_owned),
        any::<u32>().prop_map(|n| n.to_string()),
    ];
    let object = proptest::collection::vec((key, value), 0..7).prop_map(|fields| {
        let body: Vec<String> = fields.iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
        format!("{{{}}}", body.join(","))
    });
    // Mutations: cut a prefix or suffix, splice random text in.
    (object, any::<String>(), 0usize..64, 0u8..4).prop_map(|(line, noise, at, how)| {
        let at = line.char_indices().nth(at).map_or(line.len(), |(i, _)| i);
        match how {
            0 => line,
            1 => line[..at].to_owned(),
            2 => format!("{}{noise}{}", &line[..at], &line[at..]),
            _ => noise,
        }
    })
}

proptest! {
    #![proptest_config(crtc_verification::seeds::persisted(512, concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../verification/proptest-regressions/bad_input_cli.txt"
    )))]

    #[test]
    fn hostile_lines_never_panic_and_stay_bounded(lines in proptest::collection::vec(hostile_line(), 1..8)) {
        let text = lines.join("\n");
        for chaining in [Chaining::Checked, Chaining::Unchecked] {
            if let Ok(w) = read_jsonl_with(text.as_bytes(), "p", chaining) {
                // Every kept hash came from at least one byte of input.
                let kept: usize = w.ops.iter().map(|op| match op {
                    WorkloadOp::Query(locals) => locals.len(),
                    WorkloadOp::Event(e) => e.block_count(),
                    WorkloadOp::RemoveWorker(_) => 1,
                }).sum();
                prop_assert!(w.ops.len() <= lines.len() && kept <= text.len());
            }
        }
        if let Ok(requests) = parse_mooncake(text.as_bytes()) {
            prop_assert!(requests.len() <= lines.len());
            for r in &requests {
                prop_assert!(r.prompt.len() <= 4 * MAX_TRACE_BLOCKS);
                prop_assert!(r.output_blocks as u64 <= MAX_OUTPUT_TOKENS / BLOCK_TOKENS);
            }
        }
    }
}

#[test]
fn a_tree_out_of_rank_slots_counts_the_refusals_by_reason() {
    use crtc::types::{RouterEvent, WorkerWithDpRank};
    use crtc::Refusal;
    use crtc_bench::compare::subjects::backend::{Backend, IndexerBackend};
    let backend = IndexerBackend::<crtc_strategies::RwLockGate>::new(1, true);
    let over = 5;
    let blocks = chained(None, &[1]);
    for worker in 0..(crtc_strategies::MAX_SLOTS + over) as u64 {
        let rank = WorkerWithDpRank::new(worker, 0);
        backend.apply(RouterEvent::stored(rank, None, blocks.clone()));
    }
    let empty = RouterEvent::stored(WorkerWithDpRank::new(0, 0), None, Vec::new());
    backend.apply(empty);
    backend.flush();
    let stats = backend.stats();
    assert_eq!(stats.refusals[Refusal::SlotsExhausted.index()], over as u64);
    assert_eq!(stats.refusals[Refusal::EmptyStore.index()], 1);
    assert_eq!(stats.errors, over as u64 + 1);
}
