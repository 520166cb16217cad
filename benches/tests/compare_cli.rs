//! `crtc compare` in-process on tiny workloads: every row scores exactly
//! against the reference model and the JSON carries every key for every row;
//! the charts of `--plots` are written; and the binary's `--json`, `--plots`
//! and `--paper` flags work end to end. With feature `upstream`, the serial
//! cross-check against upstream's CRTC runs on the built-in presets.

use crtc_bench::compare::{self, CompareOptions, Mode, Source, REPORT_KEYS, ROW_KEYS};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// A fresh scratch directory for one test.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("crtc-compare-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch directory");
    dir
}

/// Asserts `path` is a non-empty SVG document with a title and a
/// description.
fn assert_svg(path: &Path) {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{} not readable: {e}", path.display()));
    assert!(
        text.trim_start().starts_with("<svg") && text.trim_end().ends_with("</svg>"),
        "{} is not an SVG document",
        path.display()
    );
    assert!(
        text.contains("<title>") && text.contains("<desc>produced by: "),
        "{} lacks its title or provenance",
        path.display()
    );
    assert!(text.contains("<rect"), "{} draws no bar", path.display());
}

fn tiny(preset: &str, mode: Mode) -> CompareOptions {
    CompareOptions {
        source: Source::Preset(preset.to_owned()),
        scale: 0.02,
        mode,
        rate: 50_000.0,
        window: Duration::from_millis(200),
        ..CompareOptions::default()
    }
}

fn check_json(report: &compare::Report) {
    let json: serde_json::Value = serde_json::from_str(&report.to_json()).expect("valid JSON");
    for key in REPORT_KEYS {
        assert!(json.get(key).is_some(), "missing top-level key {key}");
    }
    let rows = json["rows"].as_array().expect("rows is a list");
    assert_eq!(rows.len(), report.rows.len());
    for row in rows {
        for key in ROW_KEYS {
            assert!(
                row.get(key).is_some(),
                "row {} lacks {key}",
                row["strategy"]
            );
        }
        let capacity = row["mode"] == "capacity";
        // The read-retry counters: every gate's rows (each gate reports its
        // own through `ShapeGate::read_counters`), not the baseline's nor
        // upstream's.
        let counted = row["strategy"] != "global-lock"
            && !row["strategy"]
                .as_str()
                .unwrap_or("")
                .starts_with("upstream");
        // Read-only percentiles on capacity rows with readers.
        assert_eq!(
            row["read_only_p99_ns"].is_u64(),
            capacity && report.settings.readers > 0,
            "{row}"
        );
        assert_eq!(row["restarts_per_read"].is_f64(), counted, "{row}");
        assert_eq!(row["fallbacks"].is_u64(), counted, "{row}");
    }
    for key in [
        "read_only_p50_ns",
        "read_only_p99_ns",
        "restarts_per_read",
        "fallbacks",
    ] {
        assert!(ROW_KEYS.contains(&key), "{key} is not in the schema");
    }
}

#[test]
fn capacity_and_keepup_on_agentx_score_exactly() {
    let report = compare::run(&tiny("agentx", Mode::Both)).expect("compare runs");
    assert!(report.failures.is_empty(), "{:?}", report.failures);
    let configurations = compare::configurations(compare::UpstreamRows::Default).len();
    assert_eq!(report.rows.len(), 2 * configurations);
    assert!(report.workload.strict && report.workload.events > 0);
    for row in report.rows.iter().filter(|r| r.mode == "capacity") {
        assert_eq!(row.overcounts, Some(0), "{}", row.label());
        assert_eq!(row.undercounts, Some(0), "{}", row.label());
        assert_eq!(row.hole_undercounts, Some(0), "{}", row.label());
        assert_eq!(row.events, report.workload.events);
        assert_eq!(row.rejected_events, 0, "{}", row.label());
    }
    for row in report.rows.iter().filter(|r| r.mode == "keepup") {
        assert!(row.backlog_at_end.is_some() && row.overcounts.is_none());
    }
    let fast = report
        .rows
        .iter()
        .find(|r| r.fast_path == Some(true))
        .expect("a fast row");
    assert!(
        fast.fast_path_hit_rate.unwrap_or(0.0) > 0.5,
        "{:?}",
        fast.fast_path_hit_rate
    );
    check_json(&report);
    let text = report.render();
    assert!(text.contains("global-lock") && text.contains("read-only p99"));
    for gate in compare::gates() {
        assert!(
            report
                .rows
                .iter()
                .any(|r| r.strategy == gate.name && r.mode == "capacity"),
            "no row for {}",
            gate.name
        );
    }
    assert_eq!(
        report
            .rows
            .iter()
            .any(|r| r.strategy.starts_with("upstream")),
        cfg!(feature = "upstream")
    );

    let dir = scratch("plots");
    let written = compare::plots::write_plots(&report, &dir, "").expect("plots");
    assert_eq!(written.len(), compare::plots::CHARTS.len());
    for chart in compare::plots::CHARTS {
        assert_svg(&dir.join(format!("{chart}.svg")));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn recorded_chat_stream_replays_with_zero_overcounts() {
    let options = tiny("chat", Mode::Capacity);
    let workload = compare::load_workload(&options).expect("preset");
    let path = std::env::temp_dir().join(format!("crtc-compare-cli-{}.jsonl", std::process::id()));
    let mut file = std::fs::File::create(&path).expect("temp file");
    crtc_verification::workload::jsonl::write_jsonl(&workload, &mut file).expect("write");
    let replay = CompareOptions {
        source: Source::Events(path.clone()),
        readers: 2,
        lanes: 1,
        oversubscribe: true,
        ..options
    };
    let report = compare::run(&replay);
    let _ = std::fs::remove_file(&path);
    let report = report.expect("compare runs");
    let cores = report.machine.cores;
    assert_eq!(report.settings.oversubscribed, 3 > cores, "{cores} cores");
    assert!(report.failures.is_empty(), "{:?}", report.failures);
    assert!(report
        .rows
        .iter()
        .all(|r| r.overcounts == Some(0) && r.undercounts == Some(0)));
    assert_eq!(report.workload.events, workload.events() as u64);
    check_json(&report);
}

#[test]
fn the_binary_writes_json_and_plots() {
    let dir = scratch("binary");
    let json = dir.join("report.json");
    let plots = dir.join("plots");
    let output = Command::new(env!("CARGO_BIN_EXE_crtc"))
        .args(["compare", "--workload", "chat", "--scale", "0.02", "--json"])
        .arg(&json)
        .arg("--plots")
        .arg(&plots)
        .output()
        .expect("crtc runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("read-only p99") && stdout.contains("wrote"));
    let allocator = format!("allocator {}", compare::measurement::heap::ALLOCATOR);
    assert!(
        stdout.contains(&allocator),
        "the header names the heap: {stdout}"
    );
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("json written"))
            .expect("valid JSON");
    for row in report["rows"].as_array().expect("rows") {
        for key in ROW_KEYS {
            assert!(
                row.get(key).is_some(),
                "row {} lacks {key}",
                row["strategy"]
            );
        }
    }
    assert!(report["argv"][0].is_string() && report["features"].is_array());
    let mimalloc = report["features"]
        .as_array()
        .expect("features")
        .contains(&"mimalloc".into());
    assert_eq!(
        mimalloc,
        cfg!(feature = "mimalloc"),
        "the features name the heap"
    );
    for chart in compare::plots::CHARTS {
        assert_svg(&plots.join(format!("{chart}.svg")));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn paper_mode_writes_every_file_and_notes_a_missing_trace() {
    let dir = scratch("paper");
    let output = Command::new(env!("CARGO_BIN_EXE_crtc"))
        .args([
            "compare",
            "--scale",
            "0.01",
            "--trace",
            "/no/such/trace.jsonl",
            "--paper",
        ])
        .arg(&dir)
        .output()
        .expect("crtc runs");
    assert!(
        output.status.success(),
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    for stem in ["agentx", "chat"] {
        let md = std::fs::read_to_string(dir.join(format!("{stem}.md"))).expect("markdown");
        assert!(md.starts_with(&format!("# crtc compare: {stem}")), "{md}");
        for field in [
            "- command: `",
            "- machine: ",
            "- git revision: ",
            "- features: ",
        ] {
            assert!(md.contains(field), "{stem}.md lacks {field}");
        }
        assert!(md.contains("| strategy |") && md.contains("| readers |"));
        assert!(dir.join(format!("{stem}.json")).exists());
        for chart in compare::plots::CHARTS {
            assert_svg(&dir.join(format!("{stem}-{chart}.svg")));
        }
    }
    let mooncake = std::fs::read_to_string(dir.join("mooncake.md")).expect("note");
    assert!(mooncake.contains("Skipped") && mooncake.contains("/no/such/trace.jsonl"));
    let targets = std::fs::read_to_string(dir.join("targets.md")).expect("targets");
    assert!(targets.contains("global-lock") && targets.contains("Bytes per membership"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[cfg(not(feature = "upstream"))]
#[test]
fn repeats_report_medians_with_ranges_for_the_chosen_strategies() {
    let options = CompareOptions {
        repeat: 3,
        strategies: Some(vec!["rwlock".to_owned(), "global-lock".to_owned()]),
        ..tiny("agentx", Mode::Capacity)
    };
    let report = compare::run(&options).expect("a run");
    assert!(report.failures.is_empty(), "{:?}", report.failures);
    let labels: Vec<String> = report.rows.iter().map(|r| r.label()).collect();
    assert_eq!(labels, ["rwlock fast", "rwlock general", "global-lock"]);
    let json: serde_json::Value = serde_json::from_str(&report.to_json()).expect("valid JSON");
    for row in json["rows"].as_array().expect("rows") {
        assert_eq!(row["repeats"], serde_json::json!(3));
        let [min, max] =
            [0, 1].map(|i| row["spread"]["events_per_s"][i].as_f64().expect("a range"));
        let median = row["events_per_s"].as_f64().expect("a median");
        assert!(min <= median && median <= max, "{min} <= {median} <= {max}");
    }
    assert!(report.header().contains("medians of 3 repeats"));
    assert!(report.render().contains("range over repeats"));
    // Error bars: each throughput bar of a repeated run gains a whisker
    // (three segments) that the same report drawn as one run lacks.
    let mut single = report.clone();
    single.rows.iter_mut().for_each(|r| r.repeats = 1);
    let segments = |report: &compare::Report, name: &str| {
        let dir = scratch(name);
        compare::plots::write_plots(report, &dir, "").expect("plots");
        let svg = std::fs::read_to_string(dir.join("throughput.svg")).expect("throughput.svg");
        let _ = std::fs::remove_dir_all(&dir);
        svg.matches("<polyline").count()
    };
    assert_eq!(
        segments(&report, "bars-repeated"),
        segments(&single, "bars-single") + 3 * report.rows.len()
    );
}

#[cfg(not(feature = "upstream"))]
#[test]
fn check_upstream_needs_the_feature() {
    let options = CompareOptions {
        check_upstream: true,
        ..tiny("agentx", Mode::Capacity)
    };
    let error = compare::run(&options).expect_err("no upstream in this build");
    assert!(error.0.contains("--features upstream"), "{error}");
}

#[cfg(feature = "upstream")]
#[test]
fn check_upstream_on_the_presets_finds_ours_exact() {
    for preset in ["agentx", "chat"] {
        let options = CompareOptions {
            check_upstream: true,
            ..tiny(preset, Mode::Capacity)
        };
        let report = compare::run(&options).expect("compare runs");
        assert!(report.failures.is_empty(), "{:?}", report.failures);
        let check = report.upstream_check.as_ref().expect("a cross-check");
        assert!(check.strict && check.queries > 0, "{check:?}");
        assert_eq!(check.ours.len(), 2 * compare::gates().len());
        assert_eq!(check.ours_failures, 0, "{}", check.render());
        assert!(check.ours_inexact.is_empty(), "{}", check.render());
        // Differences, if any, are upstream's: ours never deviates.
        assert!(
            !check.by_deviator.contains_key("ours") && !check.by_deviator.contains_key("both"),
            "{}",
            check.render()
        );
        let upstream = report
            .rows
            .iter()
            .find(|r| r.strategy == "upstream-1.6.1")
            .expect("an upstream row");
        assert_eq!(upstream.overcounts, Some(0));
        assert_eq!(upstream.rejected_events, 0);
        assert!(upstream.bytes_per_membership.is_none());
        let json: serde_json::Value = serde_json::from_str(&report.to_json()).expect("JSON");
        assert!(json["upstream_check"]["queries"].is_u64());
    }
}

/// `--upstream-rows all`: every indexer of 1.6.1 a router would pick and
/// every crtc gate inside upstream's pool, at 1 and 4 event threads, each
/// checked against the reference model (the exact rows with no difference;
/// the approximate ones report theirs, not failures), each with read-only
/// lookups/s; keep-up is refused.
#[cfg(feature = "upstream")]
#[test]
fn upstream_rows_all_are_checked_against_the_model() {
    let options = CompareOptions {
        upstream_rows: compare::UpstreamRows::All,
        ..tiny("chat", Mode::Capacity)
    };
    let report = compare::run(&options).expect("compare runs");
    assert!(report.failures.is_empty(), "{:?}", report.failures);
    let names = [
        "upstream-kvindexer",
        "upstream-pool-crtc",
        "upstream-pool-positional",
        "upstream-branch-sharded",
        "rwlock-upstream-pool",
    ];
    for name in names {
        assert!(
            report.rows.iter().any(|r| r.strategy == name),
            "no {name} row"
        );
    }
    for threads in [1, 4] {
        let label = format!("upstream-pool-crtc ×{threads}");
        assert!(report.rows.iter().any(|r| r.label() == label), "no {label}");
    }
    for row in report.rows.iter().filter(|r| !r.approximate) {
        assert_eq!(row.overcounts, Some(0), "{}", row.label());
        assert_eq!(row.undercounts, Some(0), "{}", row.label());
    }
    for row in &report.rows {
        let readers = report.settings.readers > 0;
        assert_eq!(
            row.read_only_lookups_per_s.is_some(),
            readers,
            "{}",
            row.label()
        );
    }
    check_json(&report);
    let keepup = CompareOptions {
        upstream_rows: compare::UpstreamRows::All,
        ..tiny("chat", Mode::Both)
    };
    let error = compare::run(&keepup).expect_err("capacity only");
    assert!(error.0.contains("capacity mode only"), "{error}");
}

/// A 20-request trace in `dir`: three shared first blocks, one own block
/// each, 50 ms apart.
fn small_trace(dir: &Path) -> PathBuf {
    let trace = dir.join("trace.jsonl");
    let lines: String = (0..20)
        .map(|i| {
            format!(
                "{{\"timestamp\": {}, \"output_length\": 300, \"hash_ids\": [{}, {i}]}}\n",
                i * 50,
                i % 3
            )
        })
        .collect();
    std::fs::write(&trace, lines).unwrap();
    trace
}

/// Upstream's windowed replay on a small expanded trace: every row of every
/// window names offered and achieved rates, find_matches percentiles and a
/// kept-up verdict, and the corpus counts follow the expansion factors.
#[test]
fn sweep_replays_the_expanded_trace_in_every_window() {
    let dir = scratch("sweep");
    let trace = small_trace(&dir);
    let json = dir.join("sweep.json");
    let output = Command::new(env!("CARGO_BIN_EXE_crtc"))
        .args(["compare", "--trace"])
        .arg(&trace)
        .args([
            "--trace-length-factor",
            "2",
            "--trace-duplication-factor",
            "3",
        ])
        .args(["-d", "2", "-n", "4", "--lanes", "1", "--readers", "1"])
        .args(["--sweep", "--sweep-min-ms", "20", "--sweep-max-ms", "80"])
        .args([
            "--sweep-steps",
            "2",
            "--strategies",
            "rwlock,global-lock",
            "--json",
        ])
        .arg(&json)
        .output()
        .expect("run crtc");
    assert!(output.status.success(), "{output:?}");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    // 20 requests × 3 hash-space copies × 2 worker replicas.
    assert_eq!(report["corpus"]["lookups"], 120);
    assert_eq!(report["corpus"]["ranks"], 8);
    let rows = report["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 4);
    for row in rows {
        for key in [
            "offered_ops_per_s",
            "achieved_ops_per_s",
            "find_matches_p99_ns",
            "kept_up",
        ] {
            assert!(!row[key].is_null(), "{key} missing in {row}");
        }
    }
    assert_eq!(rows[0]["window_ms"], 80);
    assert_eq!(rows[3]["window_ms"], 20);
    for key in ["rustc", "date", "topology", "kernel", "allocator", "trace"] {
        assert!(
            !report["provenance"][key].is_null(),
            "provenance.{key} missing"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--sweep --paper DIR` writes the sweep's markdown, JSON and chart, each
/// headed by its provenance.
#[test]
fn sweep_paper_writes_markdown_json_and_chart() {
    let dir = scratch("sweep-paper");
    let trace = small_trace(&dir);
    let out = dir.join("results");
    let output = Command::new(env!("CARGO_BIN_EXE_crtc"))
        .args(["compare", "--trace"])
        .arg(&trace)
        .args(["--lanes", "1", "--readers", "1", "--strategies", "rwlock"])
        .args(["--sweep", "--sweep-min-ms", "20", "--sweep-max-ms", "40"])
        .args(["--sweep-steps", "2", "--paper"])
        .arg(&out)
        .output()
        .expect("run crtc");
    assert!(output.status.success(), "{output:?}");
    let markdown = std::fs::read_to_string(out.join("mooncake-sweep.md")).unwrap();
    for needle in [
        "- rustc: ",
        "thread(s) per core",
        "sha256 ",
        "| rwlock | 40 |",
    ] {
        assert!(
            markdown.contains(needle),
            "{needle} missing from {markdown}"
        );
    }
    assert!(out.join("mooncake-sweep.json").exists());
    assert_svg(&out.join("mooncake-sweep.svg"));
    let _ = std::fs::remove_dir_all(&dir);
}
