//! Input limits shared by every file reader (event streams, Mooncake
//! traces), so a hostile or broken file stops with a line-numbered error
//! instead of exhausting memory or time.
//!
//! Protocol. [`for_each_line`] reads at most [`MAX_LINE_BYTES`] (plus the
//! newline) per line and at most [`MAX_INPUT_BYTES`] in all, before any
//! parsing; a longer line (`/dev/zero` has no newline at all) is an error
//! after one bounded read. Every line is then parsed by [`parse_object`],
//! which rejects duplicate keys (serde_json would keep the last one), and
//! checked by [`only_fields`], which rejects fields the format does not
//! define. Values that size an allocation are bounded by the format's own
//! limits (see `mooncake`) before anything is allocated from them.

use super::ParseError;
use serde::de::{Deserialize, Deserializer, Error as _, MapAccess, Visitor};
use serde_json::{Map, Value};
use std::fmt;
use std::io::BufRead;

/// Longest line any reader accepts, in bytes (newline excluded): 1 MiB, room
/// for a query of about 50,000 twenty-digit hashes.
pub const MAX_LINE_BYTES: usize = 1 << 20;

/// Most bytes one file may hold: 1 GiB.
pub const MAX_INPUT_BYTES: u64 = 1 << 30;

/// Calls `each` with every non-blank line of `input` and its 1-based
/// number; the first error (a read failure, a line over a limit, text that
/// is not UTF-8, or a reason `each` returns) is [`ParseError`]
/// naming the line.
pub fn for_each_line(
    input: impl BufRead,
    each: impl FnMut(usize, &str) -> Result<(), String>,
) -> Result<(), ParseError> {
    for_each_line_within(input, MAX_LINE_BYTES, MAX_INPUT_BYTES, each)
}

/// [`for_each_line`] with a per-line limit of `max_line` bytes and a
/// per-file limit of `max_input` bytes.
fn for_each_line_within(
    mut input: impl BufRead,
    max_line: usize,
    max_input: u64,
    mut each: impl FnMut(usize, &str) -> Result<(), String>,
) -> Result<(), ParseError> {
    let mut buf = Vec::new();
    let mut total = 0u64;
    for line in 1.. {
        let malformed = |reason: String| ParseError { line, reason };
        buf.clear();
        let read = std::io::Read::take(&mut input, max_line as u64 + 1)
            .read_until(b'\n', &mut buf)
            .map_err(|e| malformed(format!("cannot read: {e}")))?;
        if read == 0 {
            break;
        }
        total += read as u64;
        if total > max_input {
            return Err(malformed(format!(
                "the file is longer than {max_input} bytes (the input limit)"
            )));
        }
        if buf.last() == Some(&b'\n') {
            buf.pop();
            if buf.last() == Some(&b'\r') {
                buf.pop();
            }
        } else if buf.len() > max_line {
            return Err(malformed(format!(
                "line longer than {max_line} bytes (the per-line limit)"
            )));
        }
        let text = std::str::from_utf8(&buf)
            .map_err(|e| malformed(format!("not UTF-8 at byte {}", e.valid_up_to() + 1)))?;
        if !text.trim().is_empty() {
            each(line, text).map_err(malformed)?;
        }
    }
    Ok(())
}

/// A JSON object whose keys are distinct.
struct DistinctKeys(Map<String, Value>);

impl<'de> Deserialize<'de> for DistinctKeys {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(DistinctKeysVisitor)
    }
}

struct DistinctKeysVisitor;

impl<'de> Visitor<'de> for DistinctKeysVisitor {
    type Value = DistinctKeys;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<DistinctKeys, A::Error> {
        let mut object = Map::new();
        while let Some(key) = access.next_key::<String>()? {
            if object.contains_key(&key) {
                return Err(A::Error::custom(format!("duplicate field `{key}`")));
            }
            let value: Value = access.next_value()?;
            object.insert(key, value);
        }
        Ok(DistinctKeys(object))
    }
}

/// Parses a line as a JSON object with distinct keys; the reason is free of
/// serde's own (always 1) line number.
pub fn parse_object(line: &str) -> Result<Map<String, Value>, String> {
    match serde_json::from_str::<DistinctKeys>(line) {
        Ok(DistinctKeys(object)) => Ok(object),
        Err(e) => {
            let text = e.to_string();
            let text = text.split(" at line ").next().unwrap_or_default();
            Err(format!("invalid JSON at column {}: {text}", e.column()))
        }
    }
}

/// Rejects any field of `object` not in `allowed`; `what` names the record
/// kind in the reason.
pub fn only_fields(
    object: &Map<String, Value>,
    allowed: &[&str],
    what: &str,
) -> Result<(), String> {
    match object.keys().find(|key| !allowed.contains(&key.as_str())) {
        None => Ok(()),
        Some(key) => Err(format!(
            "unknown field `{key}` in {what} (expected only {})",
            allowed.join(", ")
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(text: &[u8]) -> Result<Vec<(usize, String)>, ParseError> {
        let mut seen = Vec::new();
        for_each_line(text, |n, line| {
            seen.push((n, line.to_owned()));
            Ok(())
        })
        .map(|()| seen)
    }

    #[test]
    fn lines_are_numbered_and_bounded() {
        let seen = lines(b"a\r\n\n  \nb").unwrap();
        assert_eq!(seen, [(1, "a".to_owned()), (4, "b".to_owned())]);
        let exact = vec![b'x'; MAX_LINE_BYTES];
        assert_eq!(lines(&exact).unwrap().len(), 1);
        let long = vec![0u8; MAX_LINE_BYTES + 1];
        assert!(
            matches!(lines(&long), Err(ParseError { line: 1, reason }) if reason.contains("per-line limit"))
        );
        assert!(
            matches!(lines(b"ok\n\xff\n"), Err(ParseError { line: 2, reason }) if reason.contains("UTF-8"))
        );
    }

    fn small(text: &[u8]) -> Result<(), ParseError> {
        for_each_line_within(text, 4, 10, |_, _| Ok(()))
    }

    #[test]
    fn the_file_limit_counts_every_byte() {
        assert!(small(b"abcd\n\n\nab").is_ok());
        let over = small(b"abcd\n\n\nabcd");
        assert!(
            matches!(over, Err(ParseError { line: 4, reason }) if reason.contains("input limit"))
        );
        let long = small(b"ab\nabcde\n");
        assert!(
            matches!(long, Err(ParseError { line: 2, reason }) if reason.contains("longer than 4 bytes"))
        );
    }

    #[test]
    fn duplicate_and_unknown_keys_are_rejected() {
        assert!(parse_object(r#"{"t":"query","t":"cleared"}"#)
            .unwrap_err()
            .contains("duplicate field `t`"));
        assert!(parse_object("[1]").unwrap_err().contains("a JSON object"));
        let object = parse_object(r#"{"a":1,"b":{"c":2}}"#).unwrap();
        assert!(only_fields(&object, &["a", "b"], "x").is_ok());
        assert!(only_fields(&object, &["a"], "x")
            .unwrap_err()
            .contains("unknown field `b` in x"));
    }
}
