//! crtc: a compressed concurrent radix tree for KV-cache-aware routing.
#![warn(missing_docs)]

pub mod indexer;
pub mod reference;
pub mod tree;
pub mod types;
pub mod workload;
pub use crtc_strategies as strategies;
pub use indexer::{Indexer, IndexerConfig};
pub use tree::{EventOutcome, Lane, NodeInfo, StoreOutcome, Tree, TreeConfig};
