//! `crtc compare` in-process on tiny workloads: every row scores exactly
//! against the reference model and the JSON carries every key for every row.

use crtc::compare::{self, CompareOptions, Mode, Source, REPORT_KEYS, ROW_KEYS};
use std::time::Duration;

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
    }
}

#[test]
fn capacity_and_keepup_on_agentx_score_exactly() {
    let report = compare::run(&tiny("agentx", Mode::Both)).expect("compare runs");
    assert!(report.failures.is_empty(), "{:?}", report.failures);
    let configurations = compare::configurations().len();
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
    assert!(report.render().contains("global-lock"));
}

#[test]
fn recorded_chat_stream_replays_with_zero_overcounts() {
    let options = tiny("chat", Mode::Capacity);
    let workload = compare::load_workload(&options).expect("preset");
    let path = std::env::temp_dir().join(format!("crtc-compare-cli-{}.jsonl", std::process::id()));
    let mut file = std::fs::File::create(&path).expect("temp file");
    crtc::workload::jsonl::write_jsonl(&workload, &mut file).expect("write");
    let replay = CompareOptions {
        source: Source::Events(path.clone()),
        readers: 2,
        lanes: 1,
        ..options
    };
    let report = compare::run(&replay);
    let _ = std::fs::remove_file(&path);
    let report = report.expect("compare runs");
    assert!(report.failures.is_empty(), "{:?}", report.failures);
    assert!(report
        .rows
        .iter()
        .all(|r| r.overcounts == Some(0) && r.undercounts == Some(0)));
    assert_eq!(report.workload.events, workload.events() as u64);
    check_json(&report);
}
