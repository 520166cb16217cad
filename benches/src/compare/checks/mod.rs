//! The checks of a comparison: every row's scores against the reference
//! model replayed once ([`oracle`]), and, with `--check-upstream`, the
//! serial cross-check of every gate and upstream's tree ([`crosscheck`]).

pub mod crosscheck;
pub mod oracle;

use crate::compare::CompareError;
#[cfg(feature = "upstream")]
use crate::compare::{serial_trees, subjects::upstream};
use crosscheck::CrossCheck;
use crtc_verification::workload::Workload;

/// The serial cross-check of `workload` against upstream's CRTC.
#[cfg(feature = "upstream")]
pub fn check_upstream(workload: &Workload, limit: usize) -> CrossCheck {
    crosscheck::cross_check(
        workload,
        Box::new(upstream::SerialUpstream::new()),
        serial_trees(),
        limit,
    )
}

pub(super) fn run_check(workload: &Workload, limit: usize) -> Result<CrossCheck, CompareError> {
    #[cfg(feature = "upstream")]
    return Ok(check_upstream(workload, limit));
    #[cfg(not(feature = "upstream"))]
    {
        let _ = (workload, limit);
        Err(CompareError(crate::compare::UPSTREAM_MISSING.to_owned()))
    }
}
