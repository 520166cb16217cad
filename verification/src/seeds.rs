//! Seeds for the randomized tests, reproducible both ways: each run uses the
//! fixed seeds it always used plus one fresh seed, printed with the
//! environment variable that replays it; setting that variable replaces the
//! fresh seed with the given one. Proptest failures persist to files under
//! `verification/proptest-regressions/` (committed), so a failing case is
//! re-run first on every later run.

use proptest::test_runner::{Config as ProptestConfig, FileFailurePersistence};
use std::hash::{BuildHasher, RandomState};

/// The seed `var` names (decimal or `0x` hex), or else a fresh one; either
/// way printed as `"<label>: seed 0x… (replay with <var>=0x…)"`, which the
/// test harness shows with a failing test's output.
pub fn fresh_or_replayed(var: &str, label: &str) -> u64 {
    let given = std::env::var(var).ok().and_then(|v| parse_seed(&v));
    let seed = given.unwrap_or_else(|| RandomState::new().hash_one(std::time::SystemTime::now()));
    let how = if given.is_some() { "replayed" } else { "fresh" };
    println!("{label}: {how} seed {seed:#x} (replay with {var}={seed:#x})");
    seed
}

/// A seed written in decimal or as `0x` hex.
pub fn parse_seed(text: &str) -> Option<u64> {
    let text = text.trim();
    match text.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => text.parse().ok(),
    }
}

/// A proptest configuration with `cases` cases whose failures persist to
/// `file` (a path from `env!("CARGO_MANIFEST_DIR")`, so it holds from any
/// working directory).
pub fn persisted(cases: u32, file: &'static str) -> ProptestConfig {
    ProptestConfig {
        cases,
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(file))),
        ..ProptestConfig::default()
    }
}

#[cfg(test)]
mod tests {
    use super::parse_seed;

    #[test]
    fn seeds_parse_in_decimal_and_hex() {
        assert_eq!(parse_seed("42"), Some(42));
        assert_eq!(parse_seed(" 0x2a "), Some(42));
        assert_eq!(parse_seed("0xzz"), None);
        assert_eq!(parse_seed("x"), None);
    }
}
