//! Hostile input (issue 15), table-driven: malformed, oversized and
//! contradictory event files, traces and command lines. Reader cases run
//! in-process (each bad line sits at line 3 of an otherwise valid file and
//! must be refused with that line number and a reason); flag, output-path
//! and exit-code cases spawn the `crtc` binary on tiny inputs and assert the
//! exit code (2 usage, 1 data) and the message. A proptest feeds random and
//! mutated lines to both readers: nothing may panic, and what they keep is
//! bounded by the input's size and the stated limits.

use crtc_verification::chain::chained;
use crtc_verification::workload::jsonl::{read_jsonl, read_jsonl_with, Chaining};
use crtc_verification::workload::limits::MAX_LINE_BYTES;
use crtc_verification::workload::mooncake::{
    check_fits, parse_mooncake, MAX_HASH_ID, MAX_OUTPUT_TOKENS, MAX_TRACE_BLOCKS,
};
use crtc_verification::workload::ParseError;
use crtc_verification::workload::{WorkloadOp, BLOCK_TOKENS};
use proptest::prelude::*;
use std::path::PathBuf;
use std::process::Command;

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

/// Reads `bad` as line 3 of an event file; the error's line and reason.
fn event_error(bad: &str) -> Result<(usize, String), String> {
    let (store, ..) = good_store();
    let text = format!("{store}\n{{\"t\":\"query\",\"locals\":[1]}}\n{bad}\n{store}\n");
    match read_jsonl(text.as_bytes(), "bad") {
        Err(ParseError { line, reason }) => Ok((line, reason)),
        other => Err(format!("expected an error, got {other:?}")),
    }
}

/// Event lines that must be refused at line 3, with a part of the reason.
fn event_cases() -> Vec<(String, &'static str)> {
    let (_, e1, e2) = good_store();
    let c = |line: &str, needle: &'static str| (line.to_owned(), needle);
    let deep = format!(
        r#"{{"t":"query","locals":{}1{}}}"#,
        "[".repeat(200),
        "]".repeat(200)
    );
    vec![
        // Syntax and shape.
        c(r#"{"t":"stored""#, "invalid JSON"),
        c("not json", "invalid JSON"),
        c("[1, 2]", "a JSON object"),
        c(r#""text""#, "a JSON object"),
        c("42", "a JSON object"),
        c("null", "a JSON object"),
        c("true", "a JSON object"),
        c("{}", "missing field `t`"),
        c(r#"{"t":"query","locals":[1]} trailing"#, "invalid JSON"),
        c(
            r#"{"t":"query","locals":[1]}{"t":"query","locals":[1]}"#,
            "invalid JSON",
        ),
        c("\u{feff}{\"t\":\"query\",\"locals\":[1]}", "invalid JSON"),
        (deep, "recursion limit"),
        c("{'t':'query','locals':[1]}", "invalid JSON"),
        c(r#"{"t":"query","locals":[1,]}"#, "invalid JSON"),
        c(r#"{"t":"query","locals":[01]}"#, "invalid JSON"),
        c(r#"{"t":"query","locals":[NaN]}"#, "invalid JSON"),
        c(r#"{"t":"query","locals":[1e400]}"#, "invalid JSON"),
        c("{\"t\":\"query\",\"locals\":[1]\u{0}}", "invalid JSON"),
        c(r#"{"t":"query" "locals":[1]}"#, "invalid JSON"),
        // The kind.
        c(r#"{"t":5}"#, "field `t`: expected a string"),
        c(r#"{"t":null}"#, "field `t`: expected a string"),
        c(r#"{"t":["query"]}"#, "field `t`: expected a string"),
        c(
            r#"{"t":"evicted","worker":1,"rank":0}"#,
            "unknown \"t\" value",
        ),
        c(
            r#"{"t":"STORED","worker":1,"rank":0}"#,
            "unknown \"t\" value",
        ),
        c(r#"{"t":"","worker":1}"#, "unknown \"t\" value"),
        // Repeated keys (serde_json alone would keep the last).
        c(
            r#"{"t":"query","t":"cleared","worker":1,"rank":0,"locals":[1]}"#,
            "duplicate field `t`",
        ),
        c(
            r#"{"t":"cleared","worker":1,"worker":2,"rank":0}"#,
            "duplicate field `worker`",
        ),
        c(
            r#"{"t":"cleared","worker":1,"rank":0,"rank":1}"#,
            "duplicate field `rank`",
        ),
        c(
            r#"{"t":"stored","worker":1,"rank":0,"parent":null,"parent":null,"blocks":[]}"#,
            "duplicate field `parent`",
        ),
        c(
            r#"{"t":"stored","worker":1,"rank":0,"parent":null,"blocks":[],"blocks":[]}"#,
            "duplicate field `blocks`",
        ),
        c(
            r#"{"t":"removed","worker":1,"rank":0,"hashes":[],"hashes":[1]}"#,
            "duplicate field `hashes`",
        ),
        c(
            r#"{"t":"query","locals":[1],"locals":[2]}"#,
            "duplicate field `locals`",
        ),
        c(r#"{"t":"query","x":1,"x":2}"#, "duplicate field `x`"),
        // Fields the kind does not define.
        c(
            r#"{"t":"stored","worker":1,"rank":0,"parent":null,"blocks":[],"id":7}"#,
            "unknown field `id`",
        ),
        c(
            r#"{"t":"removed","worker":1,"rank":0,"hashes":[],"parent":null}"#,
            "unknown field `parent`",
        ),
        c(
            r#"{"t":"cleared","worker":1,"rank":0,"hashes":[]}"#,
            "unknown field `hashes`",
        ),
        c(
            r#"{"t":"remove_worker","worker":1,"rank":0}"#,
            "unknown field `rank`",
        ),
        c(
            r#"{"t":"query","locals":[1],"worker":1}"#,
            "unknown field `worker`",
        ),
        c(
            r#"{"t":"cleared","Worker":1,"worker":1,"rank":0}"#,
            "unknown field `Worker`",
        ),
        c(r#"{"t":"query","locals":[1],"":0}"#, "unknown field ``"),
        // Missing fields.
        c(r#"{"t":"cleared","rank":0}"#, "missing field `worker`"),
        c(r#"{"t":"cleared","worker":1}"#, "missing field `rank`"),
        c(
            r#"{"t":"stored","worker":1,"rank":0,"blocks":[]}"#,
            "missing field `parent`",
        ),
        c(
            r#"{"t":"stored","worker":1,"rank":0,"parent":null}"#,
            "missing field `blocks`",
        ),
        c(
            r#"{"t":"removed","worker":1,"rank":0}"#,
            "missing field `hashes`",
        ),
        c(r#"{"t":"remove_worker"}"#, "missing field `worker`"),
        c(r#"{"t":"query"}"#, "missing field `locals`"),
        c(
            r#"{"t":"stored","worker":1,"parent":null,"blocks":[]}"#,
            "missing field `rank`",
        ),
        // Values.
        c(
            r#"{"t":"cleared","worker":-1,"rank":0}"#,
            "field `worker`: expected an unsigned",
        ),
        c(
            r#"{"t":"cleared","worker":1.5,"rank":0}"#,
            "field `worker`: expected an unsigned",
        ),
        c(
            r#"{"t":"cleared","worker":"1","rank":0}"#,
            "field `worker`: expected an unsigned",
        ),
        c(
            r#"{"t":"cleared","worker":18446744073709551616,"rank":0}"#,
            "field `worker`: expected an unsigned",
        ),
        c(
            r#"{"t":"cleared","worker":null,"rank":0}"#,
            "field `worker`: expected an unsigned",
        ),
        c(
            r#"{"t":"cleared","worker":1,"rank":4294967296}"#,
            "exceeds 32 bits",
        ),
        c(
            r#"{"t":"cleared","worker":1,"rank":-1}"#,
            "field `rank`: expected an unsigned",
        ),
        c(
            r#"{"t":"cleared","worker":1,"rank":true}"#,
            "field `rank`: expected an unsigned",
        ),
        c(
            r#"{"t":"stored","worker":1,"rank":0,"parent":"x","blocks":[]}"#,
            "`parent`",
        ),
        c(
            r#"{"t":"stored","worker":1,"rank":0,"parent":-1,"blocks":[]}"#,
            "`parent`",
        ),
        c(
            r#"{"t":"stored","worker":1,"rank":0,"parent":[1],"blocks":[]}"#,
            "`parent`",
        ),
        c(
            r#"{"t":"stored","worker":1,"rank":0,"parent":null,"blocks":{}}"#,
            "field `blocks`: expected an array",
        ),
        c(
            r#"{"t":"stored","worker":1,"rank":0,"parent":null,"blocks":[[1]]}"#,
            "`blocks` item 0: expected [local, external]",
        ),
        c(
            r#"{"t":"stored","worker":1,"rank":0,"parent":null,"blocks":[[1,2,3]]}"#,
            "`blocks` item 0: expected [local, external]",
        ),
        c(
            r#"{"t":"stored","worker":1,"rank":0,"parent":null,"blocks":[1]}"#,
            "`blocks` item 0: expected [local, external]",
        ),
        c(
            r#"{"t":"stored","worker":1,"rank":0,"parent":null,"blocks":[["1","2"]]}"#,
            "`blocks` item 0: expected an unsigned",
        ),
        c(
            r#"{"t":"stored","worker":1,"rank":0,"parent":null,"blocks":[[-1,2]]}"#,
            "`blocks` item 0: expected an unsigned",
        ),
        c(
            r#"{"t":"removed","worker":1,"rank":0,"hashes":[1,2.5]}"#,
            "`hashes` item 1",
        ),
        c(
            r#"{"t":"removed","worker":1,"rank":0,"hashes":"abc"}"#,
            "field `hashes`: expected an array",
        ),
        c(r#"{"t":"query","locals":[-1]}"#, "`locals` item 0"),
        c(r#"{"t":"query","locals":[1,null]}"#, "`locals` item 1"),
        c(
            r#"{"t":"query","locals":{}}"#,
            "field `locals`: expected an array",
        ),
        c(
            r#"{"t":"remove_worker","worker":1e3}"#,
            "field `worker`: expected an unsigned",
        ),
        // The chaining rule.
        (
            format!(
                r#"{{"t":"stored","worker":1,"rank":0,"parent":null,"blocks":[[1,{}]]}}"#,
                e1 ^ 1
            ),
            "`blocks` item 0: external hash",
        ),
        (
            format!(
                r#"{{"t":"stored","worker":1,"rank":0,"parent":null,"blocks":[[1,{e1}],[2,{e1}]]}}"#
            ),
            "`blocks` item 1: external hash",
        ),
        (
            format!(r#"{{"t":"stored","worker":1,"rank":0,"parent":{e1},"blocks":[[1,{e1}]]}}"#),
            "is not the chain of its parent",
        ),
        (
            format!(r#"{{"t":"stored","worker":1,"rank":0,"parent":null,"blocks":[[2,{e2}]]}}"#),
            "--unchained",
        ),
        (
            format!(
                r#"{{"t":"stored","worker":1,"rank":0,"parent":null,"blocks":[[2,{e2}],[1,{e1}]]}}"#
            ),
            "`blocks` item 0: external hash",
        ),
        c(
            r#"{"t":"stored","worker":1,"rank":0,"parent":null,"blocks":[[5,5]]}"#,
            "not the chain",
        ),
        // Bytes that are not a line of text.
        c("{\"t\":\"query\",\"locals\":[1]}\u{7f}", "invalid JSON"),
        (
            format!(
                r#"{{"t":"query","locals":[{}1]}}"#,
                " ".repeat(MAX_LINE_BYTES)
            ),
            "per-line limit",
        ),
        ("\0".repeat(2 * MAX_LINE_BYTES), "per-line limit"),
        ("x".repeat(MAX_LINE_BYTES + 1), "per-line limit"),
    ]
}

#[test]
fn malformed_event_lines_name_line_3() {
    for (bad, needle) in event_cases() {
        let shown = &bad[..bad.len().min(80)];
        let (line, reason) = event_error(&bad).unwrap_or_else(|e| panic!("{shown}: {e}"));
        assert_eq!(line, 3, "{shown}: {reason}");
        assert!(
            reason.contains(needle),
            "{shown}: {reason:?} lacks {needle:?}"
        );
    }
}

#[test]
fn invalid_utf8_and_unchained_streams() {
    let (store, e1, _) = good_store();
    let mut bytes = format!("{store}\n\n").into_bytes();
    bytes.extend_from_slice(b"{\"t\":\"query\",\"locals\":[1]}\xff\n");
    match read_jsonl(bytes.as_slice(), "utf8") {
        Err(ParseError { line: 3, reason }) => assert!(reason.contains("UTF-8")),
        other => panic!("{other:?}"),
    }
    // With the rule unchecked, the same broken chain is accepted.
    let broken = format!(
        "{store}\r\n\r\n{{\"t\":\"stored\",\"worker\":1,\"rank\":0,\"parent\":{e1},\"blocks\":[[9,9]]}}\r\n"
    );
    assert!(read_jsonl(broken.as_bytes(), "b").is_err());
    let w = read_jsonl_with(broken.as_bytes(), "b", Chaining::Unchecked).unwrap();
    assert_eq!(w.ops.len(), 2);
}

/// Reads `bad` as line 3 of a trace; the error's line and reason.
fn trace_error(bad: &str) -> Result<(usize, String), String> {
    let good = r#"{"timestamp": 1, "input_length": 10, "output_length": 1, "hash_ids": [1]}"#;
    let text = format!("{good}\n\n{bad}\n{good}\n");
    match parse_mooncake(text.as_bytes()) {
        Err(ParseError { line, reason }) => Ok((line, reason)),
        other => Err(format!("expected an error, got {other:?}")),
    }
}

/// Trace lines that must be refused at line 3.
fn trace_cases() -> Vec<(String, &'static str)> {
    let c = |line: &str, needle: &'static str| (line.to_owned(), needle);
    let ids = |n: usize| vec!["7"; n].join(",");
    vec![
        c("not json", "invalid JSON"),
        c("[1]", "a JSON object"),
        c("7", "a JSON object"),
        c(r#"{"output_length": 1, "hash_ids": [1]"#, "invalid JSON"),
        c(
            r#"{"output_length": 1, "hash_ids": [1], "hash_ids": [2]}"#,
            "duplicate field `hash_ids`",
        ),
        c(
            r#"{"output_length": 1, "output_length": 2, "hash_ids": []}"#,
            "duplicate field `output_length`",
        ),
        c(
            r#"{"timestamp": 1, "timestamp": 2, "output_length": 1, "hash_ids": []}"#,
            "duplicate field `timestamp`",
        ),
        c(
            r#"{"output_length": 1, "hash_ids": [], "session_id": "a"}"#,
            "unknown field `session_id`",
        ),
        c(
            r#"{"output_length": 1, "hash_id": [1]}"#,
            "unknown field `hash_id`",
        ),
        c(
            r#"{"t": "query", "output_length": 1, "hash_ids": []}"#,
            "unknown field `t`",
        ),
        c(
            r#"{"output_length": 1, "osl": 1, "hash_ids": []}"#,
            "both `output_length` and its alias `osl`",
        ),
        c(
            r#"{"timestamp": 1, "output_length": 1}"#,
            "missing field `hash_ids`",
        ),
        c(r#"{"hash_ids": [1]}"#, "missing field `output_length`"),
        c(
            r#"{"output_length": 1, "hash_ids": 5}"#,
            "field `hash_ids`: expected an array",
        ),
        c(
            r#"{"output_length": 1, "hash_ids": {"a": 1}}"#,
            "field `hash_ids`: expected an array",
        ),
        c(
            r#"{"output_length": 1, "hash_ids": [1, -2]}"#,
            "`hash_ids` item 1",
        ),
        c(
            r#"{"output_length": 1, "hash_ids": [1.5]}"#,
            "`hash_ids` item 0",
        ),
        c(
            r#"{"output_length": 1, "hash_ids": ["1"]}"#,
            "`hash_ids` item 0",
        ),
        c(
            r#"{"output_length": 1, "hash_ids": [null]}"#,
            "`hash_ids` item 0",
        ),
        c(
            r#"{"output_length": 1, "hash_ids": [4611686018427387904]}"#,
            "exceeds the limit of 4611686018427387903",
        ),
        c(
            r#"{"output_length": 1, "hash_ids": [1, 4611686018427387905]}"#,
            "`hash_ids` item 1",
        ),
        c(
            r#"{"output_length": 1, "hash_ids": [18446744073709551615]}"#,
            "exceeds the limit",
        ),
        (
            format!(
                r#"{{"output_length": 1, "hash_ids": [{}]}}"#,
                ids(MAX_TRACE_BLOCKS + 1)
            ),
            "ids exceed the limit of 4096",
        ),
        (
            format!(r#"{{"output_length": 1, "hash_ids": [{}]}}"#, ids(400_000)),
            "ids exceed the limit",
        ),
        c(
            r#"{"input_length": -4, "output_length": 1, "hash_ids": []}"#,
            "`input_length`",
        ),
        c(
            r#"{"input_length": 1.5, "output_length": 1, "hash_ids": []}"#,
            "`input_length`",
        ),
        c(
            r#"{"input_length": 2097153, "output_length": 1, "hash_ids": []}"#,
            "field `input_length`: 2097153 exceeds the limit",
        ),
        c(
            r#"{"input_length": 1e30, "output_length": 1, "hash_ids": []}"#,
            "`input_length`",
        ),
        c(
            r#"{"output_length": 18446744073709551615, "hash_ids": [1]}"#,
            "field `output_length`: 18446744073709551615 exceeds the limit of 1048576",
        ),
        c(
            r#"{"output_length": 1048577, "hash_ids": [1]}"#,
            "exceeds the limit of 1048576",
        ),
        c(
            r#"{"osl": 1099511627776, "hash_ids": [1]}"#,
            "field `osl`: 1099511627776 exceeds",
        ),
        c(r#"{"osl": -1, "hash_ids": [1]}"#, "field `osl`"),
        c(
            r#"{"output_length": "5", "hash_ids": [1]}"#,
            "field `output_length`: expected an unsigned",
        ),
        c(
            r#"{"timestamp": "x", "output_length": 1, "hash_ids": []}"#,
            "`timestamp`",
        ),
        c(
            r#"{"timestamp": -1, "output_length": 1, "hash_ids": []}"#,
            "non-negative",
        ),
        c(
            r#"{"timestamp": null, "output_length": 1, "hash_ids": []}"#,
            "`timestamp`",
        ),
        c(
            r#"{"timestamp": [], "output_length": 1, "hash_ids": []}"#,
            "`timestamp`",
        ),
        (
            format!(
                r#"{{"output_length": 1, "hash_ids": [{}]}}"#,
                " ".repeat(MAX_LINE_BYTES)
            ),
            "per-line limit",
        ),
        ("\0".repeat(MAX_LINE_BYTES + 5), "per-line limit"),
        (
            format!(
                r#"{{"output_length": 1, "hash_ids": {}1{}}}"#,
                "[".repeat(300),
                "]".repeat(300)
            ),
            "recursion limit",
        ),
    ]
}

#[test]
fn malformed_trace_lines_name_line_3() {
    for (bad, needle) in trace_cases() {
        let shown = &bad[..bad.len().min(80)];
        let (line, reason) = trace_error(&bad).unwrap_or_else(|e| panic!("{shown}: {e}"));
        assert_eq!(line, 3, "{shown}: {reason}");
        assert!(
            reason.contains(needle),
            "{shown}: {reason:?} lacks {needle:?}"
        );
    }
}

#[test]
fn trace_limits_accept_their_bounds_and_requests_must_fit_the_cache() {
    let edge = format!(
        "{{\"output_length\": {MAX_OUTPUT_TOKENS}, \"hash_ids\": [{MAX_HASH_ID}, {}]}}\n\n\
         {{\"osl\": 0, \"hash_ids\": [{}]}}\n",
        MAX_HASH_ID - 1,
        vec!["3"; MAX_TRACE_BLOCKS].join(",")
    );
    let requests = parse_mooncake(edge.as_bytes()).unwrap();
    assert_eq!(
        requests[0].output_blocks as u64,
        MAX_OUTPUT_TOKENS / BLOCK_TOKENS
    );
    assert_ne!(requests[0].prompt[0], requests[0].prompt[4]);
    assert_eq!(requests[1].prompt.len(), 4 * MAX_TRACE_BLOCKS);
    assert_eq!(requests[1].line, 3);
    // 4 ids = 16 prompt blocks, plus 1 output block: fits 17, not 16.
    let text = "{\"output_length\": 1, \"hash_ids\": [1]}\n\n{\"output_length\": 100, \"hash_ids\": [1,2,3,4]}\n";
    let requests = parse_mooncake(text.as_bytes()).unwrap();
    assert!(check_fits(&requests, 17).is_ok());
    match check_fits(&requests, 16) {
        Err(ParseError { line: 3, reason }) => {
            assert!(
                reason.contains("17 blocks (16 prompt + 1 output)"),
                "{reason}"
            );
            assert!(reason.contains("per-worker cache of 16 blocks"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
}

/// A fresh scratch directory.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("crtc-bad-input-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch directory");
    dir
}

/// One command line and what it must do: exit code and a part of stderr.
struct FlagCase {
    args: Vec<String>,
    code: i32,
    needle: &'static str,
}

/// Command lines over files in `dir`: `ok.jsonl` (a valid two-line event
/// file), `trace.jsonl` (a valid one-line trace) and bad files.
fn flag_cases(dir: &std::path::Path) -> Vec<FlagCase> {
    let (store, ..) = good_store();
    let file = |name: &str, text: &str| {
        let path = dir.join(name);
        std::fs::write(&path, text).expect("write a case file");
        path.display().to_string()
    };
    let ok = file(
        "ok.jsonl",
        &format!("{store}\n{{\"t\":\"query\",\"locals\":[1,2]}}\n"),
    );
    let trace = file(
        "trace.jsonl",
        "{\"input_length\": 600, \"output_length\": 100, \"hash_ids\": [1, 2]}\n",
    );
    let dup = file(
        "dup.jsonl",
        "{\"t\":\"query\",\"t\":\"cleared\",\"locals\":[1]}\n",
    );
    let huge = file(
        "huge.jsonl",
        "{\"output_length\": 18446744073709551615, \"hash_ids\": [1]}\n",
    );
    let wrap = file(
        "wrap.jsonl",
        "{\"output_length\": 1, \"hash_ids\": [1]}\n{\"output_length\": 1, \"hash_ids\": [4611686018427387905]}\n",
    );
    let unchained = file(
        "unchained.jsonl",
        "{\"t\":\"stored\",\"worker\":1,\"rank\":0,\"parent\":null,\"blocks\":[[1,1]]}\n",
    );
    let a_file = file("plain.txt", "x");
    let missing = dir.join("no-such-file").display().to_string();
    let in_missing = dir.join("no/such/dir/out.json").display().to_string();
    let here = dir.display().to_string();
    let case = |args: &[&str], code: i32, needle: &'static str| FlagCase {
        args: args.iter().map(|a| (*a).to_owned()).collect(),
        code,
        needle,
    };
    let events = |extra: &[&str], code: i32, needle: &'static str| {
        let mut args = vec!["compare", "--events", &ok];
        args.extend_from_slice(extra);
        case(&args, code, needle)
    };
    vec![
        // Flags that do nothing with the chosen source or mode.
        events(
            &["--seed", "3"],
            2,
            "--seed applies only to presets and traces",
        ),
        events(
            &["--scale", "2"],
            2,
            "--scale applies only to the built-in presets",
        ),
        events(&["--workers", "4"], 2, "--workers applies only"),
        events(&["--capacity", "64"], 2, "--capacity applies only"),
        case(
            &["compare", "--trace", &trace, "--scale", "2"],
            2,
            "--scale applies only",
        ),
        case(
            &["compare", "--workload", "chat", "--unchained"],
            2,
            "--unchained applies only to --events",
        ),
        case(
            &["compare", "--trace", &trace, "--unchained"],
            2,
            "--unchained applies only",
        ),
        case(
            &["compare", "--rate", "5000"],
            2,
            "--rate applies only to --mode keepup or both",
        ),
        case(
            &["compare", "--mode", "capacity", "--window-s", "2"],
            2,
            "--window-s applies only",
        ),
        case(
            &["compare", "--check-limit", "5"],
            2,
            "--check-limit applies only to --check-upstream",
        ),
        case(
            &[
                "gen",
                "--events",
                &ok,
                "--seed",
                "2",
                "--out",
                &format!("{here}/g.jsonl"),
            ],
            2,
            "--seed applies only",
        ),
        case(
            &[
                "gen",
                "--events",
                &ok,
                "--scale",
                "2",
                "--out",
                &format!("{here}/g.jsonl"),
            ],
            2,
            "--scale applies only",
        ),
        // Values out of range.
        case(
            &["compare", "--lanes", "0"],
            2,
            "--lanes must be between 1 and 256",
        ),
        case(
            &["compare", "--lanes", "257"],
            2,
            "--lanes must be between 1 and 256",
        ),
        case(
            &["compare", "--readers", "257"],
            2,
            "--readers must be at most 256",
        ),
        case(
            &["compare", "--workers", "0"],
            2,
            "--workers must be between 1 and 65536",
        ),
        case(
            &["compare", "--workers", "65537"],
            2,
            "--workers must be between 1 and 65536",
        ),
        case(
            &["compare", "--capacity", "0"],
            2,
            "--capacity must be at least 1",
        ),
        case(&["compare", "--scale", "0"], 2, "--scale must be above 0"),
        case(&["compare", "--scale=-1"], 2, "--scale must be above 0"),
        case(&["compare", "--scale", "NaN"], 2, "--scale must be above 0"),
        case(&["compare", "--scale", "inf"], 2, "--scale must be above 0"),
        case(&["compare", "--scale", "1001"], 2, "at most 1000"),
        case(
            &["compare", "--mode", "keepup", "--rate", "0"],
            2,
            "--rate must be a positive",
        ),
        case(
            &["compare", "--mode", "keepup", "--rate=-5"],
            2,
            "--rate must be a positive",
        ),
        case(
            &["compare", "--mode", "keepup", "--rate", "NaN"],
            2,
            "--rate must be a positive",
        ),
        case(
            &["compare", "--mode", "keepup", "--rate", "inf"],
            2,
            "--rate must be a positive",
        ),
        case(
            &["compare", "--mode", "keepup", "--window-s", "0"],
            2,
            "--window-s must be above 0",
        ),
        case(
            &["compare", "--mode", "keepup", "--window-s", "3601"],
            2,
            "at most 3600",
        ),
        case(
            &["compare", "--mode", "both", "--window-s", "NaN"],
            2,
            "--window-s must be above 0",
        ),
        // Values clap cannot parse.
        case(&["compare", "--lanes", "abc"], 2, "invalid value 'abc'"),
        case(&["compare", "--lanes", "-1"], 2, "unexpected argument '-1'"),
        case(
            &["compare", "--seed=-1"],
            2,
            "invalid value '-1' for '--seed <SEED>'",
        ),
        case(
            &["compare", "--seed", "18446744073709551616"],
            2,
            "invalid value",
        ),
        case(&["compare", "--mode", "fast"], 2, "invalid value 'fast'"),
        case(&["compare", "--workload", "foo"], 2, "invalid value 'foo'"),
        case(&["compare", "--bogus"], 2, "unexpected argument '--bogus'"),
        case(&["compare", "--events"], 2, "a value is required"),
        case(&["frobnicate"], 2, "unrecognized subcommand"),
        case(&["gen", "--workload", "chat"], 2, "--out"),
        // Sources that exclude each other.
        case(
            &["compare", "--trace", &trace, "--events", &ok],
            2,
            "cannot be used with",
        ),
        case(
            &["compare", "--workload", "chat", "--events", &ok],
            2,
            "cannot be used with",
        ),
        case(
            &[
                "compare",
                "--paper",
                &here,
                "--json",
                &format!("{here}/r.json"),
            ],
            2,
            "cannot be used with",
        ),
        case(
            &["compare", "--paper", &here, "--events", &ok],
            2,
            "cannot be used with",
        ),
        case(
            &["compare", "--paper", &here, "--workload", "chat"],
            2,
            "cannot be used with",
        ),
        // Output paths, checked before anything runs.
        events(&["--json", &in_missing], 2, "--json"),
        events(&["--json", &here], 2, "is a directory"),
        events(&["--plots", &a_file], 2, "--plots"),
        events(&["--plots", &format!("{a_file}/sub")], 2, "--plots"),
        case(
            &["compare", "--paper", &format!("{a_file}/paper")],
            2,
            "--paper",
        ),
        case(
            &[
                "gen",
                "--workload",
                "chat",
                "--scale",
                "0.01",
                "--out",
                &in_missing,
            ],
            2,
            "--out",
        ),
        case(
            &[
                "gen",
                "--workload",
                "chat",
                "--scale",
                "0.01",
                "--out",
                &here,
            ],
            2,
            "is a directory",
        ),
        // Data errors: exit 1, naming the file and line.
        case(
            &[
                "compare",
                "--paper",
                &format!("{here}/paper"),
                "--trace",
                &huge,
            ],
            1,
            "line 1: field `output_length`",
        ),
        case(&["compare", "--events", &missing], 1, "cannot open"),
        case(&["compare", "--trace", &missing], 1, "cannot open"),
        case(&["compare", "--events", &here], 1, "line 1: cannot read"),
        case(
            &["compare", "--events", "/dev/zero"],
            1,
            "line 1: line longer than 1048576 bytes",
        ),
        case(
            &["compare", "--trace", "/dev/zero"],
            1,
            "line 1: line longer than 1048576 bytes",
        ),
        case(
            &["compare", "--events", &dup],
            1,
            "line 1: invalid JSON at column 16: duplicate field `t`",
        ),
        case(
            &["compare", "--trace", &huge],
            1,
            "line 1: field `output_length`: 18446744073709551615 exceeds",
        ),
        case(
            &["compare", "--trace", &wrap],
            1,
            "line 2: `hash_ids` item 0: 4611686018427387905 exceeds",
        ),
        case(
            &["compare", "--events", &unchained],
            1,
            "line 1: `blocks` item 0: external hash 1 is not the chain",
        ),
        case(
            &["compare", "--trace", &trace, "--capacity", "4"],
            1,
            "line 1: the request needs 6 blocks",
        ),
        case(
            &[
                "gen",
                "--events",
                &dup,
                "--out",
                &format!("{here}/g2.jsonl"),
            ],
            1,
            "duplicate field `t`",
        ),
        case(
            &[
                "gen",
                "--trace",
                &huge,
                "--out",
                &format!("{here}/g3.jsonl"),
            ],
            1,
            "exceeds the limit",
        ),
    ]
}

#[test]
fn flags_and_files_exit_with_their_code_and_message() {
    let dir = scratch("flags");
    let mut failures = Vec::new();
    for case in flag_cases(&dir) {
        let output = Command::new(env!("CARGO_BIN_EXE_crtc"))
            .args(&case.args)
            .output()
            .expect("run crtc");
        let stderr = String::from_utf8_lossy(&output.stderr);
        if output.status.code() != Some(case.code) || !stderr.contains(case.needle) {
            failures.push(format!(
                "{:?}: exit {:?} (want {}), stderr {stderr:?} (want {:?})",
                case.args,
                output.status.code(),
                case.code,
                case.needle
            ));
        }
    }
    // Output files created before a run that failed are removed again.
    for name in ["g2.jsonl", "g3.jsonl"] {
        assert!(!dir.join(name).exists(), "{name} left behind");
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn there_are_at_least_150_cases() {
    let dir = scratch("count");
    let (events, traces, flags) = (
        event_cases().len(),
        trace_cases().len(),
        flag_cases(&dir).len(),
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
    #![proptest_config(ProptestConfig::with_cases(512))]

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
    use crtc::tree::Refusal;
    use crtc::types::{RouterEvent, WorkerWithDpRank};
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
