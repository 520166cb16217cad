//! How a row is measured: the stream split into writes and lookups
//! ([`plan`]), write capacity ([`capacity`]), keep-up latency at an offered
//! rate ([`keepup`]), upstream's windowed trace replay ([`window`]), memory counted by a global allocator ([`heap`]), and
//! the clocks, percentiles and machine description they share
//! ([`measure`]).

pub mod capacity;
pub mod heap;
pub mod keepup;
pub mod measure;
pub mod plan;
pub mod window;
