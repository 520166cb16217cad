//! The one error of every file reader: a line that could not be read or
//! parsed, with its number.

use std::fmt;

/// A line of an event or trace file that could not be read or parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    /// 1-based line number (0: the file as a whole, e.g. it cannot be
    /// opened).
    pub line: usize,
    /// What was wrong.
    pub reason: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.reason)
    }
}

impl std::error::Error for ParseError {}
