//! Checks of a command line that run before anything is loaded or
//! measured: flags that do nothing with the chosen source or mode are
//! errors (a report must not print a setting that was not used), and output
//! paths are created and tested for writing up front, so a bad path fails
//! in milliseconds rather than after the whole run.
//!
//! Both are usage errors (exit 2 in the `crtc` binary); anything that fails
//! later, while reading a file or running, is a data error (exit 1).

use super::{CompareError, CompareOptions, Mode, Source};
use std::fs::{self, File, OpenOptions};
use std::path::Path;

/// A flag and when it applies.
struct Rule {
    flag: &'static str,
    applies: fn(&CompareOptions) -> bool,
    only: &'static str,
}

fn is_preset(options: &CompareOptions) -> bool {
    matches!(options.source, Source::Preset(_))
}

fn is_generated(options: &CompareOptions) -> bool {
    !matches!(options.source, Source::Events(_))
}

fn is_events(options: &CompareOptions) -> bool {
    matches!(options.source, Source::Events(_))
}

fn has_keepup(options: &CompareOptions) -> bool {
    matches!(options.mode, Mode::KeepUp | Mode::Both)
}

fn checks_upstream(options: &CompareOptions) -> bool {
    options.check_upstream
}

fn is_trace(options: &CompareOptions) -> bool {
    matches!(options.source, Source::Trace(_))
}

fn is_windowed(options: &CompareOptions) -> bool {
    options.windows.is_some()
}

fn not_windowed(options: &CompareOptions) -> bool {
    options.windows.is_none()
}

fn is_sweep(options: &CompareOptions) -> bool {
    options.sweep
}

fn one_window(options: &CompareOptions) -> bool {
    !options.sweep
}

const RULES: &[Rule] = &[
    Rule {
        flag: "scale",
        applies: is_preset,
        only: "the built-in presets (--workload)",
    },
    Rule {
        flag: "seed",
        applies: is_generated,
        only: "presets and traces (an event file is replayed as recorded)",
    },
    Rule {
        flag: "workers",
        applies: is_generated,
        only: "presets and traces (an event file is replayed as recorded)",
    },
    Rule {
        flag: "capacity",
        applies: is_generated,
        only: "presets and traces (an event file is replayed as recorded)",
    },
    Rule {
        flag: "rate",
        applies: has_keepup,
        only: "--mode keepup or both",
    },
    Rule {
        flag: "window-s",
        applies: has_keepup,
        only: "--mode keepup or both",
    },
    Rule {
        flag: "check-limit",
        applies: checks_upstream,
        only: "--check-upstream",
    },
    Rule {
        flag: "unchained",
        applies: is_events,
        only: "--events",
    },
    Rule {
        flag: "trace-length-factor",
        applies: is_trace,
        only: "--trace",
    },
    Rule {
        flag: "trace-duplication-factor",
        applies: is_trace,
        only: "--trace",
    },
    Rule {
        flag: "inference-worker-duplication-factor",
        applies: is_trace,
        only: "--trace",
    },
    Rule {
        flag: "trace-simulation-duration-ms",
        applies: is_trace,
        only: "--trace",
    },
    Rule {
        flag: "find-matches-concurrency",
        applies: is_windowed,
        only: "the windowed replay (--benchmark-duration-ms or --sweep)",
    },
    Rule {
        flag: "sweep-min-ms",
        applies: is_sweep,
        only: "--sweep",
    },
    Rule {
        flag: "sweep-max-ms",
        applies: is_sweep,
        only: "--sweep",
    },
    Rule {
        flag: "sweep-steps",
        applies: is_sweep,
        only: "--sweep",
    },
    Rule {
        flag: "benchmark-duration-ms",
        applies: one_window,
        only: "a single window (--sweep sets its own windows)",
    },
    Rule {
        flag: "mode",
        applies: not_windowed,
        only: "the capacity and keep-up runs (not --sweep or --benchmark-duration-ms)",
    },
    Rule {
        flag: "repeat",
        applies: not_windowed,
        only: "the capacity and keep-up runs (not --sweep or --benchmark-duration-ms)",
    },
    Rule {
        flag: "check-upstream",
        applies: not_windowed,
        only: "the capacity and keep-up runs (not --sweep or --benchmark-duration-ms)",
    },
];

/// Rejects a flag given on the command line (`given(long name)`) that does
/// nothing with `options`' source and mode.
pub fn applicable_flags(
    options: &CompareOptions,
    given: impl Fn(&str) -> bool,
) -> Result<(), CompareError> {
    match RULES
        .iter()
        .find(|rule| given(rule.flag) && !(rule.applies)(options))
    {
        None => Ok(()),
        Some(rule) => Err(CompareError(format!(
            "--{} applies only to {}; remove it",
            rule.flag, rule.only
        ))),
    }
}

/// Creates (or truncates) the output file `path` of `flag` now, so the run
/// does not end on an unwritable path.
pub fn prepare_file(flag: &str, path: &Path) -> Result<(), CompareError> {
    if path.is_dir() {
        return Err(CompareError(format!(
            "{flag} {}: is a directory, expected a file",
            path.display()
        )));
    }
    File::create(path)
        .map(drop)
        .map_err(|e| CompareError(format!("{flag} {}: cannot write: {e}", path.display())))
}

/// Creates the output directory `dir` of `flag` now and checks that a file
/// can be written in it.
pub fn prepare_dir(flag: &str, dir: &Path) -> Result<(), CompareError> {
    let fail =
        |e: std::io::Error| CompareError(format!("{flag} {}: cannot write: {e}", dir.display()));
    fs::create_dir_all(dir).map_err(fail)?;
    let probe = dir.join(format!(".crtc-write-check-{}", std::process::id()));
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)
        .map_err(fail)?;
    fs::remove_file(&probe).map_err(fail)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_rule_names_a_flag_once() {
        let mut flags: Vec<&str> = RULES.iter().map(|r| r.flag).collect();
        flags.sort_unstable();
        flags.dedup();
        assert_eq!(flags.len(), RULES.len());
        let events = CompareOptions {
            source: Source::Events("x".into()),
            ..CompareOptions::default()
        };
        let error = applicable_flags(&events, |f| f == "seed").unwrap_err();
        assert!(error
            .0
            .contains("--seed applies only to presets and traces"));
        assert!(applicable_flags(&CompareOptions::default(), |f| f == "seed").is_ok());
        assert!(applicable_flags(&CompareOptions::default(), |f| f == "rate").is_err());
    }
}
