//! crtc: a compressed concurrent radix tree for KV-cache-aware routing.
#![warn(missing_docs)]

pub mod reference;
pub mod types;
pub mod workload;
pub use crtc_strategies as strategies;
