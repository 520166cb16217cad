//! Refuses a preset scale whose stream would not fit in memory, before it
//! is generated, with the size it would need (issue 34, item 9): an
//! allocation failure aborts the process, so it must never be reached.
//!
//! Protocol. A scale above 1 is sized by generating the same preset at
//! [`SAMPLE_SCALE`] and extrapolating its heap linearly (the presets' size
//! is linear in the scale: sessions × turns). The heap of a stream counts
//! each operation's slot and the blocks and hashes it owns. The budget is
//! the smaller of the kernel's `MemAvailable` and what the address-space
//! limit (`ulimit -v`) leaves above the process's current size; a run that
//! holds `copies` streams at once (compare keeps the plan's clone and the
//! reference model besides the stream) must fit `copies` of them.

use crate::compare::{load_workload, CompareError, CompareOptions, Source};
use crtc::types::{KvCacheEventData, LocalBlockHash};
use crtc_verification::workload::{Workload, WorkloadOp};

/// The scale sampled to size a larger one.
pub const SAMPLE_SCALE: f64 = 0.05;

/// Bytes of heap a vector of `n` items of `T` owns.
fn vec_bytes<T>(n: usize) -> u64 {
    (n * std::mem::size_of::<T>()) as u64
}

/// Heap bytes `workload` holds (operation slots and their blocks).
pub fn workload_bytes(workload: &Workload) -> u64 {
    let owned: u64 = workload
        .ops
        .iter()
        .map(|op| match op {
            WorkloadOp::Event(event) => match &event.event.data {
                KvCacheEventData::Stored { blocks, .. } => vec_bytes::<(u64, u64)>(blocks.len()),
                KvCacheEventData::Removed { block_hashes } => vec_bytes::<u64>(block_hashes.len()),
                KvCacheEventData::Cleared => 0,
            },
            WorkloadOp::Query(locals) => vec_bytes::<LocalBlockHash>(locals.len()),
            WorkloadOp::RemoveWorker(_) => 0,
        })
        .sum();
    owned + vec_bytes::<WorkloadOp>(workload.ops.len())
}

fn kib_field(text: &str, key: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with(key))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Bytes this process may still allocate (`None`: unknown).
pub fn available_bytes() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok();
    let free = meminfo.and_then(|m| kib_field(&m, "MemAvailable:"));
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `limit` is a valid, writable rlimit for the call.
    let limited = unsafe { libc::getrlimit(libc::RLIMIT_AS, &mut limit) } == 0
        && limit.rlim_cur != libc::RLIM_INFINITY;
    let headroom = limited.then(|| {
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        let used = kib_field(&status, "VmSize:").unwrap_or(0);
        limit.rlim_cur.saturating_sub(used)
    });
    match (free, headroom) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

fn gib(bytes: u64) -> String {
    format!("{:.1} GiB", bytes as f64 / f64::from(1 << 30))
}

/// Refuses `options`' preset when `copies` of its stream would exceed the
/// memory available (see the module docs); other sources and scales up to
/// 1 pass unchecked.
pub fn check_preset_fits(options: &CompareOptions, copies: u64) -> Result<(), CompareError> {
    let Source::Preset(name) = &options.source else {
        return Ok(());
    };
    if options.scale <= 1.0 {
        return Ok(());
    }
    let sample = load_workload(&CompareOptions {
        scale: SAMPLE_SCALE,
        ..options.clone()
    })?;
    let need = (workload_bytes(&sample) as f64 * options.scale / SAMPLE_SCALE) as u64 * copies;
    match available_bytes() {
        Some(have) if need > have => Err(CompareError(format!(
            "--scale {}: the {name} stream would need about {} of memory ({copies} cop{} of \
             about {}, extrapolated from scale {SAMPLE_SCALE}), more than the {} available \
             (MemAvailable, and the address-space limit of `ulimit -v` above this process); \
             lower --scale",
            options.scale,
            gib(need),
            if copies == 1 { "y" } else { "ies" },
            gib(need / copies),
            gib(have)
        ))),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_counts_its_slots_and_blocks() {
        let w = crtc_verification::workload::presets::agentx(1, 0.01);
        let bytes = workload_bytes(&w);
        assert!(bytes > vec_bytes::<WorkloadOp>(w.ops.len()));
        assert_eq!(
            kib_field("MemAvailable:   10 kB\n", "MemAvailable:"),
            Some(10240)
        );
        let huge = CompareOptions {
            scale: 1000.0,
            ..CompareOptions::default()
        };
        // A machine with under 2 TB available refuses agentx at scale 1000.
        if available_bytes().is_some_and(|a| a < 2 << 40) {
            let error = check_preset_fits(&huge, 1).unwrap_err();
            assert!(error.0.contains("would need about"), "{error}");
        }
    }
}
