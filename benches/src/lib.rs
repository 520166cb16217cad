//! The measuring crate of crtc: the `crtc compare` driver with its subjects
//! (every compiled strategy, the global-lock baseline and, with the
//! `upstream` feature, NVIDIA Dynamo's published tree), the checks of every
//! result against the reference model, and the reports, plots and paper
//! tables it writes. The `crtc` binary (`src/main.rs`) is its command line;
//! the criterion benches are in `benches/`.
#![warn(missing_docs)]

pub mod compare;
