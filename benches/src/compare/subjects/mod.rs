//! The indexes a comparison measures, behind one [`backend::Backend`]
//! trait: our indexer over any gate, the global-lock baseline, our tree
//! applied serially, and (feature `upstream`) NVIDIA Dynamo's published
//! indexers, run by one driver (`upstream`), with crtc's tree as a backend
//! of upstream's pool (`crtc_backend`, the module upstream's own suite runs
//! on crtc; its file lives in `upstream-suite/`).

pub mod backend;
pub mod baseline;
#[cfg(feature = "upstream")]
#[path = "../../../../upstream-suite/crtc_backend.rs"]
pub mod crtc_backend;
#[cfg(feature = "upstream")]
pub mod dynamo;
pub mod serial;
#[cfg(feature = "upstream")]
pub mod upstream;

/// The upstream row's strategy name (feature `upstream`).
pub const UPSTREAM_NAME: &str = "upstream-1.6.1";
