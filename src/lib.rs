//! crtc: a compressed concurrent radix tree for KV-cache-aware routing.
#![warn(missing_docs)]

pub mod types;
pub use crtc_strategies as strategies;
