//! Event-file lines the JSONL reader must refuse: each sits at line 3 of an
//! otherwise valid file and must be refused with that line number and a part
//! of the reason; plus invalid UTF-8 and the chaining switch.

use super::good_store;
use crtc_verification::workload::jsonl::{read_jsonl, read_jsonl_with, Chaining};
use crtc_verification::workload::limits::MAX_LINE_BYTES;
use crtc_verification::workload::ParseError;

/// Reads `bad` as line 3 of an event file; the error's line and reason.
fn event_error(bad: &str) -> Result<(usize, String), String> {
    let (store, ..) = good_store();
    let text = format!("{store}\n{{\"t\":\"query\",\"locals\":[1]}}\n{bad}\n{store}\n");
    match read_jsonl(text.as_bytes(), "bad") {
        Err(ParseError { line, reason }) => Ok((line, reason)),
        other => Err(format!("expected an error, got {other:?}")),
    }
}

/// What the event cases share: the externals of [`good_store`] and a line
/// nested past serde_json's recursion limit.
struct EventVars {
    e1: u64,
    e2: u64,
    deep: String,
}

/// A case: the line and a part of the reason.
fn c(line: &str, needle: &'static str) -> (String, &'static str) {
    (line.to_owned(), needle)
}

/// Event lines that must be refused at line 3, with a part of the reason.
pub(crate) fn event_cases() -> Vec<(String, &'static str)> {
    let (_, e1, e2) = good_store();
    let deep = format!(
        r#"{{"t":"query","locals":{}1{}}}"#,
        "[".repeat(200),
        "]".repeat(200)
    );
    let v = EventVars { e1, e2, deep };
    [
        event_cases_1(&v),
        event_cases_2(&v),
        event_cases_3(&v),
        event_cases_4(&v),
        event_cases_5(&v),
        event_cases_6(&v),
    ]
    .concat()
}

/// Cases 1 of 6 of [`event_cases`].
fn event_cases_1(v: &EventVars) -> Vec<(String, &'static str)> {
    let EventVars { deep, .. } = v;
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
        (deep.clone(), "recursion limit"),
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
    ]
}

/// Cases 2 of 6 of [`event_cases`].
fn event_cases_2(v: &EventVars) -> Vec<(String, &'static str)> {
    let _ = v;
    vec![
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
    ]
}

/// Cases 3 of 6 of [`event_cases`].
fn event_cases_3(v: &EventVars) -> Vec<(String, &'static str)> {
    let _ = v;
    vec![
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
    ]
}

/// Cases 4 of 6 of [`event_cases`].
fn event_cases_4(v: &EventVars) -> Vec<(String, &'static str)> {
    let _ = v;
    vec![
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
    ]
}

/// Cases 5 of 6 of [`event_cases`].
fn event_cases_5(v: &EventVars) -> Vec<(String, &'static str)> {
    let EventVars { e1, e2, .. } = v;
    vec![
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
    ]
}

/// Cases 6 of 6 of [`event_cases`].
fn event_cases_6(v: &EventVars) -> Vec<(String, &'static str)> {
    let _ = v;
    vec![
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
