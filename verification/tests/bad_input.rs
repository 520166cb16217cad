//! Bad input (C7), for every strategy: each case feeds the `Indexer` a
//! setup, then one bad operation, and expects a clear error value (or a
//! harmless no-op where the contract says so); afterwards the tree must
//! still answer exactly — every query is checked against a reference model
//! fed the accepted events, and no state was lost. Malformed event and trace
//! files must name the offending line. Nothing may panic.

use crtc::types::{
    ExternalSequenceBlockHash, IndexerError, KvError, LocalBlockHash, RouterEvent, WorkerWithDpRank,
};
use crtc::{EventOutcome, Indexer, IndexerConfig, TreeConfig};
use crtc_strategies::ShapeGate;
use crtc_verification::chain::{chained, removed_after, stored_after, tail_hash};
use crtc_verification::reference::{Classification, Reference};
use crtc_verification::workload::jsonl::read_jsonl;
use crtc_verification::workload::mooncake::parse_mooncake;
use crtc_verification::workload::ParseError;

fn rank(worker: u64) -> WorkerWithDpRank {
    WorkerWithDpRank::new(worker, 0)
}

fn store(worker: u64, prefix: &[u64], locals: &[u64]) -> RouterEvent {
    stored_after(rank(worker), prefix, locals)
}

fn remove(worker: u64, prefix: &[u64], locals: &[u64]) -> RouterEvent {
    removed_after(rank(worker), prefix, locals)
}

/// What a bad operation must produce.
#[derive(Clone, Copy, Debug)]
enum Expect {
    ParentNotFound,
    BlockNotFound,
    Exhausted,
    Empty,
    /// Accepted, changing nothing that is creditable.
    Harmless,
    /// Accepted as a duplicate store.
    Duplicate,
}

/// An indexer plus a reference model fed exactly what the indexer accepted.
struct Probe<G: ShapeGate> {
    indexer: Indexer<G>,
    model: Reference,
    queries: Vec<Vec<u64>>,
}

impl<G: ShapeGate> Probe<G> {
    fn new(slot_capacity: usize, lanes: usize) -> Self {
        let tree = TreeConfig {
            slot_capacity,
            ..TreeConfig::default()
        };
        Self {
            indexer: Indexer::new(IndexerConfig { lanes, tree }),
            model: Reference::new(),
            queries: vec![vec![1, 2, 3, 4], vec![1, 2, 9], vec![7, 8], vec![5]],
        }
    }

    fn apply(&mut self, event: RouterEvent) -> Result<EventOutcome, IndexerError> {
        let result = self.indexer.apply_event_acked(event.clone());
        self.model.apply_outcome(&event, result.is_ok());
        result
    }

    /// Applies a setup event that must succeed.
    fn ok(&mut self, event: RouterEvent) {
        if let Err(e) = self.apply(event.clone()) {
            panic!("setup event {event:?} failed: {e}");
        }
    }

    fn remove_worker(&mut self, worker: u64) {
        self.indexer.remove_worker(worker);
        self.model.remove_worker(worker);
    }

    /// Applies the bad event and checks the outcome.
    fn bad(&mut self, event: RouterEvent, expect: Expect) -> Result<(), String> {
        let result = self.apply(event.clone());
        let fine = match (&result, expect) {
            (
                Err(IndexerError::Refused(KvError::ParentBlockNotFound { .. })),
                Expect::ParentNotFound,
            )
            | (Err(IndexerError::Refused(KvError::BlockNotFound { .. })), Expect::BlockNotFound)
            | (Err(IndexerError::Refused(KvError::CapacityExhausted { .. })), Expect::Exhausted)
            | (Err(IndexerError::Refused(KvError::EmptyStore { .. })), Expect::Empty) => true,
            (Ok(EventOutcome::Stored(s)), Expect::Duplicate) => s.duplicate,
            (Ok(_), Expect::Harmless) => true,
            _ => false,
        };
        if !fine {
            return Err(format!("{event:?}: expected {expect:?}, got {result:?}"));
        }
        if let Err(e) = &result {
            if e.to_string().is_empty() {
                return Err("an error without a message".into());
            }
        }
        Ok(())
    }

    /// Every query scores exactly what the model holds (holes allowed only
    /// where the case made one).
    fn exact(&mut self, holes: bool) -> Result<(), String> {
        self.indexer.flush();
        for locals in &self.queries {
            let query: Vec<LocalBlockHash> = locals.iter().map(|&l| LocalBlockHash(l)).collect();
            let scores = self.indexer.find_matches(&query);
            for d in self.model.check(&query, &scores) {
                if !(holes && d.class == Classification::HoleUndercount) {
                    return Err(format!("query {locals:?}: {d}"));
                }
            }
        }
        Ok(())
    }
}

type Case<G> = (&'static str, fn(&mut Probe<G>) -> Result<(), String>);

fn parent_cases<G: ShapeGate>() -> Vec<Case<G>> {
    use Expect::*;
    vec![
        ("store under a never-stored parent", |p| {
            p.ok(store(1, &[], &[1, 2]));
            p.bad(store(1, &[7, 7], &[8]), ParentNotFound)
        }),
        ("first event of a rank names an unknown parent", |p| {
            p.bad(store(1, &[9], &[8]), ParentNotFound)
        }),
        ("parent held only by another rank", |p| {
            p.ok(store(1, &[], &[1, 2, 3]));
            p.ok(store(2, &[], &[5]));
            p.bad(store(2, &[1, 2, 3], &[4]), ParentNotFound)
        }),
        ("parent the rank evicted", |p| {
            p.ok(store(1, &[], &[1, 2, 3]));
            p.ok(remove(1, &[1, 2], &[3]));
            p.bad(store(1, &[1, 2, 3], &[4]), ParentNotFound)
        }),
        ("parent after the rank cleared", |p| {
            p.ok(store(1, &[], &[1, 2, 3]));
            p.ok(RouterEvent::cleared(rank(1)));
            p.bad(store(1, &[1, 2, 3], &[4]), ParentNotFound)
        }),
        ("parent behind a hole", |p| {
            p.ok(store(1, &[], &[1, 2, 3]));
            p.ok(remove(1, &[1], &[2]));
            p.bad(store(1, &[1, 2, 3], &[4]), ParentNotFound)
        }),
        ("parent uncovered after another lane split the edge", |p| {
            p.ok(store(1, &[], &[1, 2, 3, 4]));
            p.ok(store(2, &[], &[1, 2, 9]));
            p.ok(remove(1, &[1, 2], &[3, 4]));
            p.bad(store(1, &[1, 2, 3, 4], &[5]), ParentNotFound)
        }),
        ("parent named by an unknown anchor id", |p| {
            p.ok(store(1, &[], &[1]));
            let id = ExternalSequenceBlockHash(0xdead);
            p.bad(
                RouterEvent::stored(rank(1), Some(id), chained(Some(id), &[2])),
                ParentNotFound,
            )
        }),
    ]
}

fn odd_parent_cases<G: ShapeGate>() -> Vec<Case<G>> {
    use Expect::*;
    vec![
        ("parent hash zero", |p| {
            let zero = Some(ExternalSequenceBlockHash(0));
            p.bad(
                RouterEvent::stored(rank(1), zero, chained(zero, &[1])),
                ParentNotFound,
            )
        }),
        ("parent hash u64::MAX", |p| {
            let max = Some(ExternalSequenceBlockHash(u64::MAX));
            p.bad(
                RouterEvent::stored(rank(1), max, chained(max, &[1])),
                ParentNotFound,
            )
        }),
        ("parent of a removed worker", |p| {
            p.ok(store(1, &[], &[1, 2]));
            p.remove_worker(1);
            p.bad(store(1, &[1, 2], &[3]), ParentNotFound)
        }),
        ("parent on another dp rank of the same worker", |p| {
            p.ok(store(1, &[], &[1, 2]));
            let other = WorkerWithDpRank::new(1, 1);
            let parent = tail_hash(&[1, 2]);
            p.bad(
                RouterEvent::stored(other, parent, chained(parent, &[3])),
                ParentNotFound,
            )
        }),
    ]
}

fn removal_cases<G: ShapeGate>() -> Vec<Case<G>> {
    use Expect::*;
    vec![
        ("removal for an unknown rank", |p| {
            p.bad(remove(1, &[], &[1]), BlockNotFound)
        }),
        ("removal for an unknown rank among known ones", |p| {
            p.ok(store(1, &[], &[1, 2]));
            p.bad(remove(2, &[], &[1]), BlockNotFound)
        }),
        ("removal for an unknown dp rank of a known worker", |p| {
            p.ok(store(1, &[], &[1, 2]));
            let other = WorkerWithDpRank::new(1, 3);
            p.bad(
                RouterEvent::removed(other, vec![tail_hash(&[1]).unwrap()]),
                BlockNotFound,
            )
        }),
        ("removal of an unknown block", |p| {
            p.ok(store(1, &[], &[1, 2]));
            p.bad(remove(1, &[1, 2], &[99]), Harmless)
        }),
        ("removal with no hashes", |p| {
            p.ok(store(1, &[], &[1, 2]));
            p.bad(RouterEvent::removed(rank(1), vec![]), Harmless)
        }),
        ("removal naming one block twice", |p| {
            p.ok(store(1, &[], &[1, 2, 3]));
            let h = tail_hash(&[1, 2, 3]).unwrap();
            p.bad(RouterEvent::removed(rank(1), vec![h, h]), Harmless)
        }),
        ("removal of a block already removed", |p| {
            p.ok(store(1, &[], &[1, 2, 3]));
            p.ok(remove(1, &[1, 2], &[3]));
            p.bad(remove(1, &[1, 2], &[3]), Harmless)
        }),
        ("removal of another rank's block", |p| {
            p.ok(store(1, &[], &[1, 2, 3]));
            p.ok(store(2, &[], &[7, 8]));
            p.bad(remove(2, &[1, 2], &[3]), Harmless)
        }),
        ("removal of hash zero", |p| {
            p.ok(store(1, &[], &[1]));
            p.bad(
                RouterEvent::removed(rank(1), vec![ExternalSequenceBlockHash(0)]),
                Harmless,
            )
        }),
        ("clear of a never-seen rank", |p| {
            p.bad(RouterEvent::cleared(rank(5)), Harmless)
        }),
        ("clear twice", |p| {
            p.ok(store(1, &[], &[1, 2]));
            p.ok(RouterEvent::cleared(rank(1)));
            p.bad(RouterEvent::cleared(rank(1)), Harmless)
        }),
    ]
}

fn store_cases<G: ShapeGate>() -> Vec<Case<G>> {
    use Expect::*;
    vec![
        ("empty store from the root", |p| {
            p.bad(RouterEvent::stored(rank(1), None, vec![]), Empty)
        }),
        ("empty store under a valid parent", |p| {
            p.ok(store(1, &[], &[1, 2]));
            p.bad(
                RouterEvent::stored(rank(1), tail_hash(&[1, 2]), vec![]),
                Empty,
            )
        }),
        ("empty store under an unknown parent", |p| {
            p.bad(RouterEvent::stored(rank(1), tail_hash(&[3]), vec![]), Empty)
        }),
        ("duplicate store", |p| {
            p.ok(store(1, &[], &[1, 2, 3]));
            p.bad(store(1, &[], &[1, 2, 3]), Duplicate)
        }),
        ("duplicate of a held prefix", |p| {
            p.ok(store(1, &[], &[1, 2, 3, 4]));
            p.bad(store(1, &[], &[1, 2]), Duplicate)
        }),
        ("duplicate of a held middle", |p| {
            p.ok(store(1, &[], &[1, 2, 3, 4]));
            p.bad(store(1, &[1], &[2, 3]), Duplicate)
        }),
        ("duplicate decode block", |p| {
            p.ok(store(1, &[], &[1, 2]));
            p.ok(store(1, &[1, 2], &[3]));
            p.bad(store(1, &[1, 2], &[3]), Duplicate)
        }),
        (
            "re-store across another rank's split (lookups may move)",
            |p| {
                p.ok(store(1, &[], &[1, 2, 3, 4]));
                p.ok(store(2, &[], &[1, 2, 9]));
                p.bad(store(1, &[], &[1, 2, 3, 4]), Harmless)
            },
        ),
        ("another rank's identical store is not a duplicate", |p| {
            p.ok(store(1, &[], &[1, 2, 3]));
            p.bad(store(2, &[], &[1, 2, 3]), Harmless)?;
            let scores = p.indexer.find_matches(&[1, 2, 3].map(LocalBlockHash));
            (scores.score(rank(2)) == 3)
                .then_some(())
                .ok_or_else(|| "the second rank is credited".into())
        }),
        ("store that repeats a hash inside its blocks", |p| {
            p.bad(store(1, &[], &[5, 5, 5]), Harmless)
        }),
    ]
}

fn exhaustion_cases<G: ShapeGate>() -> Vec<Case<G>> {
    use Expect::*;
    vec![
        ("third rank with two slots", |p| {
            p.ok(store(1, &[], &[1, 2]));
            p.ok(store(2, &[], &[1, 2, 3]));
            p.bad(store(3, &[], &[1, 2, 3]), Exhausted)
        }),
        (
            "exhausted rank is never credited another rank's blocks",
            |p| {
                p.ok(store(1, &[], &[1, 2, 3, 4]));
                p.ok(store(2, &[], &[7, 8]));
                p.bad(store(3, &[], &[1, 2, 3, 4]), Exhausted)?;
                let scores = p.indexer.find_matches(&[1, 2, 3, 4].map(LocalBlockHash));
                (scores.score(rank(3)) == 0 && scores.score(rank(1)) == 4)
                    .then_some(())
                    .ok_or_else(|| format!("credited: {:?}", scores.sorted()))
            },
        ),
        ("removal by an exhausted rank", |p| {
            p.ok(store(1, &[], &[1]));
            p.ok(store(2, &[], &[1]));
            p.bad(store(3, &[], &[1]), Exhausted)?;
            p.bad(remove(3, &[], &[1]), BlockNotFound)
        }),
        ("clear by an exhausted rank", |p| {
            p.ok(store(1, &[], &[1]));
            p.ok(store(2, &[], &[1]));
            p.bad(store(3, &[], &[1]), Exhausted)?;
            p.bad(RouterEvent::cleared(rank(3)), Harmless)
        }),
        ("exhausted anchor", |p| {
            p.ok(store(1, &[], &[1]));
            p.ok(store(2, &[], &[1]));
            let id = ExternalSequenceBlockHash(0xa1);
            match p.indexer.apply_anchor(rank(3), id, LocalBlockHash(0xa1), 4) {
                Err(IndexerError::Refused(KvError::CapacityExhausted { capacity: 2, .. })) => {
                    Ok(())
                }
                other => Err(format!("expected CapacityExhausted, got {other:?}")),
            }
        }),
        (
            "a freed slot goes to the waiting rank without old coverage",
            |p| {
                p.ok(store(1, &[], &[1, 2, 3, 4]));
                p.ok(store(2, &[], &[7, 8]));
                p.bad(store(3, &[], &[1, 2]), Exhausted)?;
                p.remove_worker(1);
                p.bad(store(3, &[], &[1, 2]), Harmless)?;
                let scores = p.indexer.find_matches(&[1, 2, 3, 4].map(LocalBlockHash));
                (scores.score(rank(3)) == 2 && scores.score(rank(1)) == 0)
                    .then_some(())
                    .ok_or_else(|| format!("scores {:?}", scores.sorted()))
            },
        ),
    ]
}

fn late_event_cases<G: ShapeGate>() -> Vec<Case<G>> {
    use Expect::*;
    vec![
        ("removal after the worker was removed", |p| {
            p.ok(store(1, &[], &[1, 2]));
            p.remove_worker(1);
            p.bad(remove(1, &[1], &[2]), BlockNotFound)
        }),
        ("clear after the worker was removed", |p| {
            p.ok(store(1, &[], &[1, 2]));
            p.remove_worker(1);
            p.bad(RouterEvent::cleared(rank(1)), Harmless)
        }),
        ("fresh store after the worker was removed", |p| {
            p.ok(store(1, &[], &[1, 2, 3]));
            p.remove_worker(1);
            p.bad(store(1, &[], &[1]), Harmless)
        }),
        ("removal after a rank removal", |p| {
            p.ok(store(1, &[], &[1, 2]));
            p.indexer.remove_worker_dp_rank(rank(1));
            p.model.remove_worker_dp_rank(rank(1));
            p.bad(remove(1, &[1], &[2]), BlockNotFound)
        }),
        ("worker removed twice", |p| {
            p.ok(store(1, &[], &[1, 2]));
            p.remove_worker(1);
            p.remove_worker(1);
            p.bad(store(2, &[], &[1, 2]), Harmless)
        }),
        ("unknown worker removed", |p| {
            p.ok(store(1, &[], &[1, 2]));
            p.remove_worker(42);
            p.indexer
                .remove_worker_dp_rank(WorkerWithDpRank::new(42, 7));
            p.bad(store(1, &[1, 2], &[3]), Harmless)
        }),
        ("old slot owner's late removal after recycling", |p| {
            p.ok(store(1, &[], &[1, 2, 3]));
            p.remove_worker(1);
            p.ok(store(2, &[], &[1, 2, 3]));
            p.bad(remove(1, &[1, 2], &[3]), BlockNotFound)
        }),
    ]
}

fn run_cases<G: ShapeGate>(cases: Vec<Case<G>>, slot_capacity: usize) -> usize {
    let mut failures = Vec::new();
    for (name, case) in &cases {
        for lanes in [1, 2] {
            let mut probe = Probe::<G>::new(slot_capacity, lanes);
            let holes = name.contains("hole");
            let outcome = case(&mut probe).and_then(|()| probe.exact(holes));
            if let Err(e) = outcome {
                failures.push(format!("{name} ({lanes} lanes): {e}"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    cases.len()
}

fn tree_cases<G: ShapeGate>() -> usize {
    let mut count = run_cases(parent_cases::<G>(), 64);
    count += run_cases(odd_parent_cases::<G>(), 64);
    count += run_cases(removal_cases::<G>(), 64);
    count += run_cases(store_cases::<G>(), 64);
    count += run_cases(exhaustion_cases::<G>(), 2);
    count += run_cases(late_event_cases::<G>(), 64);
    count
}

/// Each malformed line sits at line 4 of an otherwise valid file.
fn malformed_at_line_4(
    bad: &str,
    good: &str,
    parse: impl Fn(&str) -> Result<(), ParseError>,
) -> Result<(), String> {
    let text = format!("{good}\n\n{good}\n{bad}\n{good}\n");
    match parse(&text) {
        Err(ParseError { line: 4, reason }) if !reason.is_empty() => Ok(()),
        other => Err(format!(
            "{bad:?}: expected a ParseError at line 4, got {other:?}"
        )),
    }
}

const EVENT_LINES: &[&str] = &[
    r#"{"t":"stored","worker":1,"rank":0"#,
    r#"not json at all"#,
    r#"[1, 2]"#,
    r#""a string""#,
    r#"{"worker":1,"rank":0}"#,
    r#"{"t":7,"worker":1,"rank":0}"#,
    r#"{"t":"evicted","worker":1,"rank":0}"#,
    r#"{"t":"cleared","rank":0}"#,
    r#"{"t":"cleared","worker":-1,"rank":0}"#,
    r#"{"t":"cleared","worker":1.5,"rank":0}"#,
    r#"{"t":"cleared","worker":1,"rank":4294967296}"#,
    r#"{"t":"stored","worker":1,"rank":0,"blocks":[]}"#,
    r#"{"t":"stored","worker":1,"rank":0,"parent":"x","blocks":[]}"#,
    r#"{"t":"stored","worker":1,"rank":0,"parent":null,"blocks":[[1]]}"#,
    r#"{"t":"stored","worker":1,"rank":0,"parent":null,"blocks":[[1,2,3]]}"#,
    r#"{"t":"stored","worker":1,"rank":0,"parent":null,"blocks":{}}"#,
    r#"{"t":"removed","worker":1,"rank":0,"hashes":[1,2.5]}"#,
    r#"{"t":"removed","worker":1,"rank":0}"#,
    r#"{"t":"remove_worker"}"#,
    r#"{"t":"query","locals":"abc"}"#,
];

const TRACE_LINES: &[&str] = &[
    r#"{"timestamp":0,"input_length":512,"output_length":10"#,
    r#"[]"#,
    r#"{"timestamp":0,"input_length":512,"output_length":10}"#,
    r#"{"timestamp":0,"input_length":512,"output_length":10,"hash_ids":"1,2"}"#,
    r#"{"timestamp":0,"input_length":512,"output_length":10,"hash_ids":[1,-2]}"#,
    r#"{"timestamp":0,"input_length":512,"hash_ids":[1]}"#,
    r#"{"timestamp":"now","input_length":512,"output_length":1,"hash_ids":[1]}"#,
    r#"{"timestamp":0,"input_length":-5,"output_length":1,"hash_ids":[1]}"#,
    r#"{"timestamp":0,"input_length":512,"osl":"x","hash_ids":[1]}"#,
];

macro_rules! bad_input {
    ($name:ident, $gate:ty, $label:literal) => {
        mod $name {
            #[test]
            fn bad_events_are_clear_errors_and_lose_no_state() {
                let count = super::tree_cases::<$gate>();
                println!("bad input: {count} event cases, each on 1 and 2 lanes");
                assert!(count >= 40);
            }
        }
    };
}

crtc_strategies::for_each_gate!(bad_input);

#[test]
fn malformed_event_lines_name_the_line() {
    let good = r#"{"t":"cleared","worker":1,"rank":0}"#;
    let parse = |text: &str| read_jsonl(text.as_bytes(), "bad").map(|_| ());
    let failures: Vec<_> = EVENT_LINES
        .iter()
        .filter_map(|bad| malformed_at_line_4(bad, good, parse).err())
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    println!("bad input: {} malformed event lines", EVENT_LINES.len());
}

#[test]
fn malformed_trace_lines_name_the_line() {
    let good = r#"{"timestamp":0,"input_length":512,"output_length":10,"hash_ids":[1,2]}"#;
    let parse = |text: &str| parse_mooncake(text.as_bytes()).map(|_| ());
    let failures: Vec<_> = TRACE_LINES
        .iter()
        .filter_map(|bad| malformed_at_line_4(bad, good, parse).err())
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    println!("bad input: {} malformed trace lines", TRACE_LINES.len());
}

#[test]
fn there_are_at_least_fifty_cases() {
    type G = crtc_strategies::RwLockGate;
    let events = parent_cases::<G>().len()
        + odd_parent_cases::<G>().len()
        + removal_cases::<G>().len()
        + store_cases::<G>().len()
        + exhaustion_cases::<G>().len()
        + late_event_cases::<G>().len();
    let total = events + EVENT_LINES.len() + TRACE_LINES.len();
    println!(
        "bad input: {events} event cases + {} file lines = {total}",
        EVENT_LINES.len() + TRACE_LINES.len()
    );
    assert!(total >= 50, "{total}");
}
