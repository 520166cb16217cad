//! The indexes a comparison measures, behind one [`backend::Backend`]
//! trait: our indexer over any gate, the global-lock baseline, our tree
//! applied serially, and (feature `upstream`) NVIDIA Dynamo's published
//! tree.

pub mod backend;
pub mod baseline;
pub mod serial;
#[cfg(feature = "upstream")]
pub mod upstream;

/// The upstream row's strategy name (feature `upstream`).
pub const UPSTREAM_NAME: &str = "upstream-1.6.1";
