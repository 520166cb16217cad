//! Trace lines the Mooncake reader must refuse at line 3, and the trace
//! limits' edges (accepted at the bound, refused past it; a request must fit
//! the per-worker cache).

use crtc_verification::workload::limits::MAX_LINE_BYTES;
use crtc_verification::workload::mooncake::{
    check_fits, parse_mooncake, MAX_HASH_ID, MAX_OUTPUT_TOKENS, MAX_TRACE_BLOCKS,
};
use crtc_verification::workload::ParseError;
use crtc_verification::workload::BLOCK_TOKENS;

/// Reads `bad` as line 3 of a trace; the error's line and reason.
fn trace_error(bad: &str) -> Result<(usize, String), String> {
    let good = r#"{"timestamp": 1, "input_length": 10, "output_length": 1, "hash_ids": [1]}"#;
    let text = format!("{good}\n\n{bad}\n{good}\n");
    match parse_mooncake(text.as_bytes()) {
        Err(ParseError { line, reason }) => Ok((line, reason)),
        other => Err(format!("expected an error, got {other:?}")),
    }
}

/// A case: the line and a part of the reason.
fn c(line: &str, needle: &'static str) -> (String, &'static str) {
    (line.to_owned(), needle)
}

/// `n` hash ids, comma-separated.
fn ids(n: usize) -> String {
    vec!["7"; n].join(",")
}

/// Trace lines that must be refused at line 3.
pub(crate) fn trace_cases() -> Vec<(String, &'static str)> {
    [
        trace_cases_1(),
        trace_cases_2(),
        trace_cases_3(),
        trace_cases_4(),
    ]
    .concat()
}

/// Cases 1 of 4 of [`trace_cases`].
fn trace_cases_1() -> Vec<(String, &'static str)> {
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
    ]
}

/// Cases 2 of 4 of [`trace_cases`].
fn trace_cases_2() -> Vec<(String, &'static str)> {
    vec![
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
    ]
}

/// Cases 3 of 4 of [`trace_cases`].
fn trace_cases_3() -> Vec<(String, &'static str)> {
    vec![
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
    ]
}

/// Cases 4 of 4 of [`trace_cases`].
fn trace_cases_4() -> Vec<(String, &'static str)> {
    vec![
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
