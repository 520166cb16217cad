//! Command lines run through the `crtc` binary on tiny files: each must exit
//! with its code (2 usage, 1 data) and a part of the expected message, and an
//! output file created before a failed run is removed again.

use super::good_store;
use std::path::PathBuf;
use std::process::Command;

/// A fresh scratch directory.
pub(crate) fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("crtc-bad-input-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch directory");
    dir
}

/// One command line and what it must do: exit code and a part of stderr.
pub(crate) struct FlagCase {
    args: Vec<String>,
    code: i32,
    needle: &'static str,
}

/// Command lines over files in `dir`: `ok.jsonl` (a valid two-line event
/// file), `trace.jsonl` (a valid one-line trace) and bad files.
pub(crate) fn flag_cases(dir: &std::path::Path) -> Vec<FlagCase> {
    let (store, ..) = good_store();
    let ok = case_file(
        dir,
        "ok.jsonl",
        &format!("{store}\n{{\"t\":\"query\",\"locals\":[1,2]}}\n"),
    );
    let trace = case_file(
        dir,
        "trace.jsonl",
        "{\"input_length\": 600, \"output_length\": 100, \"hash_ids\": [1, 2]}\n",
    );
    let mut cases = replay_cases(&trace, &ok);
    cases.extend(older_cases(dir, &ok, &trace));
    cases
}

/// Writes `text` to `dir/name`; returns the path.
fn case_file(dir: &std::path::Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write a case file");
    path.display().to_string()
}

/// The bad files of the older cases: (a plain file, a missing file, a path
/// in a missing directory, a duplicate key, a huge output, a wrapping id,
/// an unchained store).
#[allow(clippy::type_complexity)]
fn older_files(dir: &std::path::Path) -> (String, String, String, String, String, String, String) {
    let file = |name: &str, text: &str| case_file(dir, name, text);
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
    (a_file, missing, in_missing, dup, huge, wrap, unchained)
}

/// A usage error of `compare --trace TRACE` plus `extra`.
fn on_trace(trace: &str, extra: &[&str], needle: &'static str) -> FlagCase {
    let mut args = vec!["compare", "--trace", trace];
    args.extend_from_slice(extra);
    case(&args, 2, needle)
}

/// A usage error of a one-lane, one-reader `--sweep` on `trace` plus `extra`.
fn with_sweep(trace: &str, extra: &[&str], needle: &'static str) -> FlagCase {
    let mut args = vec!["--sweep", "--readers", "1", "--lanes", "1"];
    args.extend_from_slice(extra);
    on_trace(trace, &args, needle)
}

/// Upstream's expansion and windowed-replay flags with values no run can
/// use, or where they do nothing (every one a usage error, exit 2).
fn replay_cases(trace: &str, events: &str) -> Vec<FlagCase> {
    let mut cases = expansion_cases(trace, events);
    cases.extend(window_cases(trace));
    cases
}

/// The expansion flags out of range or without a trace.
fn expansion_cases(trace: &str, events: &str) -> Vec<FlagCase> {
    vec![
        on_trace(
            trace,
            &["--trace-length-factor", "0"],
            "--trace-length-factor must be between 1",
        ),
        on_trace(
            trace,
            &["--trace-duplication-factor", "5000"],
            "--trace-duplication-factor must be between 1",
        ),
        on_trace(
            trace,
            &["-d", "0"],
            "--inference-worker-duplication-factor must be at least 1",
        ),
        on_trace(trace, &["-n", "65536", "-d", "2"], "at most 65536 ranks"),
        on_trace(
            trace,
            &["--trace-simulation-duration-ms", "0"],
            "--trace-simulation-duration-ms must be",
        ),
        on_trace(
            trace,
            &["--trace-length-factor", "-1"],
            "unexpected argument",
        ),
        case(
            &["compare", "--events", events, "--trace-length-factor", "2"],
            2,
            "--trace-length-factor applies only to --trace",
        ),
    ]
}

/// The window and sweep flags out of range, contradictory or without a
/// trace.
fn window_cases(trace: &str) -> Vec<FlagCase> {
    vec![
        on_trace(
            trace,
            &["--benchmark-duration-ms", "0", "--readers", "1"],
            "benchmark windows",
        ),
        on_trace(
            trace,
            &["--benchmark-duration-ms", "10", "--readers", "0"],
            "--readers must be at least 1",
        ),
        on_trace(
            trace,
            &["--find-matches-concurrency", "1", "--readers", "0"],
            "--find-matches-concurrency applies only",
        ),
        on_trace(
            trace,
            &["--sweep-steps", "3"],
            "--sweep-steps applies only to --sweep",
        ),
        with_sweep(
            trace,
            &["--sweep-steps", "1"],
            "--sweep-steps must be between 2 and 100",
        ),
        with_sweep(
            trace,
            &["--sweep-min-ms", "900", "--sweep-max-ms", "800"],
            "is above --sweep-max-ms",
        ),
        with_sweep(
            trace,
            &["--benchmark-duration-ms", "100"],
            "--benchmark-duration-ms applies only",
        ),
        with_sweep(trace, &["--mode", "keepup"], "--mode applies only"),
        with_sweep(trace, &["--find-matches-concurrency", "999"], "at most 256"),
        case(
            &["compare", "--sweep", "--readers", "1", "--lanes", "1"],
            2,
            "give --trace PATH",
        ),
    ]
}

/// The files and paths the older cases name.
struct FlagVars {
    ok: String,
    trace: String,
    here: String,
    a_file: String,
    missing: String,
    in_missing: String,
    dup: String,
    huge: String,
    wrap: String,
    unchained: String,
}

/// One command line and what it must do.
fn case(args: &[&str], code: i32, needle: &'static str) -> FlagCase {
    FlagCase {
        args: args.iter().map(|a| (*a).to_owned()).collect(),
        code,
        needle,
    }
}

/// The cases from before the windowed replay.
fn older_cases(dir: &std::path::Path, ok: &str, trace: &str) -> Vec<FlagCase> {
    let (a_file, missing, in_missing, dup, huge, wrap, unchained) = older_files(dir);
    let v = FlagVars {
        ok: ok.to_owned(),
        trace: trace.to_owned(),
        here: dir.display().to_string(),
        a_file,
        missing,
        in_missing,
        dup,
        huge,
        wrap,
        unchained,
    };
    [
        older_cases_1(&v),
        older_cases_2(&v),
        older_cases_3(&v),
        older_cases_4(&v),
        older_cases_5(&v),
        older_cases_6(&v),
        older_cases_7(&v),
        older_cases_8(&v),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// Cases 1 of 8 of [`older_cases`].
fn older_cases_1(v: &FlagVars) -> Vec<FlagCase> {
    let FlagVars { trace, ok, .. } = v;
    let events = |extra: &[&str], code: i32, needle: &'static str| {
        let mut args = vec!["compare", "--events", ok];
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
            &["compare", "--trace", trace, "--scale", "2"],
            2,
            "--scale applies only",
        ),
        case(
            &["compare", "--workload", "chat", "--unchained"],
            2,
            "--unchained applies only to --events",
        ),
        case(
            &["compare", "--trace", trace, "--unchained"],
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
            &["compare", "--repeat", "0"],
            2,
            "--repeat must be between 1 and 50",
        ),
    ]
}

/// Cases 2 of 8 of [`older_cases`].
fn older_cases_2(v: &FlagVars) -> Vec<FlagCase> {
    let FlagVars { ok, here, .. } = v;
    vec![
        case(
            &["compare", "--repeat", "51"],
            2,
            "--repeat must be between 1 and 50",
        ),
        case(&["compare", "--repeat", "two"], 2, "invalid value 'two'"),
        // Without feature upstream: it needs the crate; with it: capacity only.
        case(
            &["compare", "--upstream-rows", "all", "--mode", "keepup"],
            2,
            "--upstream-rows all",
        ),
        case(
            &["compare", "--upstream-rows", "some"],
            2,
            "invalid value 'some'",
        ),
        case(
            &["compare", "--strategies", "rwlock,bogus"],
            2,
            "unknown or missing strategy names [\"bogus\"]; this build has rwlock",
        ),
        case(
            &[
                "gen",
                "--events",
                ok,
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
                ok,
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
    ]
}

/// Cases 3 of 8 of [`older_cases`].
fn older_cases_3(v: &FlagVars) -> Vec<FlagCase> {
    let FlagVars { ok, .. } = v;
    let events = |extra: &[&str], code: i32, needle: &'static str| {
        let mut args = vec!["compare", "--events", ok];
        args.extend_from_slice(extra);
        case(&args, code, needle)
    };
    vec![
        case(
            &["compare", "--readers", "257"],
            2,
            "--readers must be at most 256",
        ),
        // More busy threads than cores: refused unless asked for, then said.
        events(
            &["--lanes", "200", "--readers", "200"],
            2,
            "pass --oversubscribe to run anyway",
        ),
        events(
            &["--lanes", "64", "--oversubscribe"],
            0,
            "(--oversubscribe): latencies include preemption",
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
    ]
}

/// Cases 4 of 8 of [`older_cases`].
fn older_cases_4(v: &FlagVars) -> Vec<FlagCase> {
    let _ = v;
    vec![
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
    ]
}

/// Cases 5 of 8 of [`older_cases`].
fn older_cases_5(v: &FlagVars) -> Vec<FlagCase> {
    let FlagVars {
        ok,
        trace,
        here,
        a_file,
        in_missing,
        ..
    } = v;
    let events = |extra: &[&str], code: i32, needle: &'static str| {
        let mut args = vec!["compare", "--events", ok];
        args.extend_from_slice(extra);
        case(&args, code, needle)
    };
    vec![
        // Sources that exclude each other.
        case(
            &["compare", "--trace", trace, "--events", ok],
            2,
            "cannot be used with",
        ),
        case(
            &["compare", "--workload", "chat", "--events", ok],
            2,
            "cannot be used with",
        ),
        case(
            &[
                "compare",
                "--paper",
                here,
                "--json",
                &format!("{here}/r.json"),
            ],
            2,
            "cannot be used with",
        ),
        case(
            &["compare", "--paper", here, "--events", ok],
            2,
            "cannot be used with",
        ),
        case(
            &["compare", "--paper", here, "--workload", "chat"],
            2,
            "cannot be used with",
        ),
        // Output paths, checked before anything runs.
        events(&["--json", in_missing], 2, "--json"),
        events(&["--json", here], 2, "is a directory"),
        events(&["--plots", a_file], 2, "--plots"),
        events(&["--plots", &format!("{a_file}/sub")], 2, "--plots"),
        case(
            &["compare", "--paper", &format!("{a_file}/paper")],
            2,
            "--paper",
        ),
    ]
}

/// Cases 6 of 8 of [`older_cases`].
fn older_cases_6(v: &FlagVars) -> Vec<FlagCase> {
    let FlagVars {
        here,
        missing,
        in_missing,
        huge,
        ..
    } = v;
    vec![
        case(
            &[
                "gen",
                "--workload",
                "chat",
                "--scale",
                "0.01",
                "--out",
                in_missing,
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
                here,
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
                huge,
            ],
            1,
            "line 1: field `output_length`",
        ),
        case(&["compare", "--events", missing], 1, "cannot open"),
        case(&["compare", "--trace", missing], 1, "cannot open"),
        case(&["compare", "--events", here], 1, "line 1: cannot read"),
        case(
            &["compare", "--events", "/dev/zero"],
            1,
            "line 1: line longer than 1048576 bytes",
        ),
    ]
}

/// Cases 7 of 8 of [`older_cases`].
fn older_cases_7(v: &FlagVars) -> Vec<FlagCase> {
    let FlagVars {
        trace,
        here,
        dup,
        huge,
        wrap,
        unchained,
        ..
    } = v;
    vec![
        case(
            &["compare", "--trace", "/dev/zero"],
            1,
            "line 1: line longer than 1048576 bytes",
        ),
        case(
            &["compare", "--events", dup],
            1,
            "line 1: invalid JSON at column 16: duplicate field `t`",
        ),
        case(
            &["compare", "--trace", huge],
            1,
            "line 1: field `output_length`: 18446744073709551615 exceeds",
        ),
        case(
            &["compare", "--trace", wrap],
            1,
            "line 2: `hash_ids` item 0: 4611686018427387905 exceeds",
        ),
        case(
            &["compare", "--events", unchained],
            1,
            "line 1: `blocks` item 0: external hash 1 is not the chain",
        ),
        case(
            &["compare", "--trace", trace, "--capacity", "4"],
            1,
            "line 1: the request needs 6 blocks",
        ),
        case(
            &["gen", "--events", dup, "--out", &format!("{here}/g2.jsonl")],
            1,
            "duplicate field `t`",
        ),
    ]
}

/// Cases 8 of 8 of [`older_cases`].
fn older_cases_8(v: &FlagVars) -> Vec<FlagCase> {
    let FlagVars { here, huge, .. } = v;
    vec![case(
        &["gen", "--trace", huge, "--out", &format!("{here}/g3.jsonl")],
        1,
        "exceeds the limit",
    )]
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
