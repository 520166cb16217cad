//! Measurement helpers: nearest-rank percentiles, per-thread CPU clocks read
//! from `/proc`, absolute-deadline sleeps, and a description of the machine.
//!
//! CPU time of lane threads. The lanes are threads the indexer spawns, so
//! they cannot read their own clock for us. Instead a [`ThreadCpu`] snapshot
//! lists the process's threads before a backend starts; afterwards the new
//! threads whose name starts with the backend's lane prefix are its lanes,
//! and their on-CPU time is read from `/proc/self/task/<tid>/schedstat`
//! (nanoseconds), or from `/proc/self/task/<tid>/stat` (clock ticks) when
//! schedstat is missing. Without `/proc` the process CPU time from
//! `getrusage` is used instead and the column says so ([`CpuClock`]).

use rustc_hash::FxHashSet;
use serde::Serialize;
use std::fs;
use std::time::{Duration, Instant};

/// The nearest-rank `p`-th percentile (`0 < p ≤ 100`) of `sorted`, which
/// must be sorted ascending; `None` when empty.
pub fn percentile(sorted: &[u64], p: f64) -> Option<u64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (p / 100.0 * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

/// p50 and p99 of `samples` (sorted in place).
pub fn p50_p99(samples: &mut [u64]) -> (Option<u64>, Option<u64>) {
    samples.sort_unstable();
    (percentile(samples, 50.0), percentile(samples, 99.0))
}

/// Nanoseconds in `d`, saturating.
pub fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// Sleeps until `deadline`: a plain sleep while more than [`SPIN_BELOW`] is
/// left (the kernel may overshoot by tens of microseconds; callers issue
/// whatever fell due meanwhile), then a short spin. Returns at or after the
/// deadline.
pub fn sleep_until(deadline: Instant) {
    loop {
        let now = Instant::now();
        if now >= deadline {
            return;
        }
        let left = deadline - now;
        if left > SPIN_BELOW {
            crtc_strategies::sync::thread::sleep(left);
        } else {
            crtc_strategies::sync::spin_loop();
        }
    }
}

/// Below this much time left, [`sleep_until`] spins instead of sleeping.
pub const SPIN_BELOW: Duration = Duration::from_micros(20);

/// Which clock the CPU column was read from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CpuClock {
    /// On-CPU time of the lane threads, in nanoseconds (schedstat).
    LaneThreadsSchedstat,
    /// User plus system time of the lane threads, in clock ticks (stat).
    LaneThreadsStat,
    /// CPU time of the whole process (getrusage): lanes, readers and issuer.
    #[default]
    Process,
}

impl CpuClock {
    /// A short label for table headers.
    pub fn label(self) -> &'static str {
        match self {
            CpuClock::LaneThreadsSchedstat | CpuClock::LaneThreadsStat => "lane cpu ns/ev",
            CpuClock::Process => "proc cpu ns/ev",
        }
    }
}

/// The threads that existed before a backend was built (see the module
/// docs).
pub struct ThreadCpu {
    before: FxHashSet<u64>,
    start_process_ns: u64,
}

fn task_ids() -> Option<Vec<u64>> {
    let dir = fs::read_dir("/proc/self/task").ok()?;
    Some(
        dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
            .collect(),
    )
}

fn task_cpu_ns(tid: u64) -> Option<(u64, CpuClock)> {
    if let Ok(text) = fs::read_to_string(format!("/proc/self/task/{tid}/schedstat")) {
        if let Some(ns) = text.split_whitespace().next().and_then(|v| v.parse().ok()) {
            return Some((ns, CpuClock::LaneThreadsSchedstat));
        }
    }
    let stat = fs::read_to_string(format!("/proc/self/task/{tid}/stat")).ok()?;
    // Fields after the parenthesized name: state is field 3, utime 14, stime 15.
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    // SAFETY: sysconf only reads a configuration value.
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    let per_second = u64::try_from(per_second).ok().filter(|&t| t > 0)?;
    Some((
        ticks * (1_000_000_000 / per_second),
        CpuClock::LaneThreadsStat,
    ))
}

/// User plus system CPU time of the whole process, in nanoseconds.
pub fn process_cpu_ns() -> u64 {
    // SAFETY: an all-zero `rusage` is a valid value of the plain C struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `usage` is a valid, writable rusage for the call.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } != 0 {
        return 0;
    }
    let ns = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1_000;
    ns(usage.ru_utime) + ns(usage.ru_stime)
}

impl ThreadCpu {
    /// Records the threads alive now (call before building the backend).
    pub fn start() -> Self {
        Self {
            before: task_ids().unwrap_or_default().into_iter().collect(),
            start_process_ns: process_cpu_ns(),
        }
    }

    /// CPU nanoseconds of the threads started since [`ThreadCpu::start`]
    /// whose name starts with `prefix`, or the process CPU time since then
    /// when no such thread can be read.
    pub fn read(&self, prefix: &str) -> (u64, CpuClock) {
        let lanes: Vec<u64> = self
            .spawned()
            .into_iter()
            .filter(|tid| {
                fs::read_to_string(format!("/proc/self/task/{tid}/comm"))
                    .is_ok_and(|name| name.starts_with(prefix))
            })
            .collect();
        self.read_threads(&lanes)
    }

    /// The threads started since [`ThreadCpu::start`] and still alive. For a
    /// backend whose lane threads carry no recognizable name, call it right
    /// after building the backend: those are its lanes (plus any thread
    /// another test of the same process started meanwhile).
    pub fn spawned(&self) -> Vec<u64> {
        task_ids()
            .unwrap_or_default()
            .into_iter()
            .filter(|tid| !self.before.contains(tid))
            .collect()
    }

    /// CPU nanoseconds of the threads `tids`, or the process CPU time since
    /// [`ThreadCpu::start`] when none of them can be read.
    pub fn read_threads(&self, tids: &[u64]) -> (u64, CpuClock) {
        let readings: Option<Vec<(u64, CpuClock)>> = tids.iter().map(|&t| task_cpu_ns(t)).collect();
        match readings {
            Some(readings) if !readings.is_empty() => {
                let clock = readings[0].1;
                (readings.iter().map(|r| r.0).sum(), clock)
            }
            _ => (
                process_cpu_ns().saturating_sub(self.start_process_ns),
                CpuClock::Process,
            ),
        }
    }
}

/// Where the numbers were measured.
#[derive(Clone, Debug, Serialize)]
pub struct Machine {
    /// Host name ("unknown" when unavailable).
    pub hostname: String,
    /// Online logical CPUs.
    pub cores: usize,
    /// CPU model from `/proc/cpuinfo` ("unknown" when unavailable).
    pub cpu_model: String,
    /// One-minute load average when the run started (from `/proc/loadavg`):
    /// other work on the machine competes with the measured threads.
    pub load_average: Option<f64>,
}

impl Machine {
    /// Describes this machine.
    pub fn detect() -> Self {
        let hostname = fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_owned())
            .ok()
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| "unknown".to_owned());
        let cpu_model = fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|info| {
                info.lines()
                    .find(|l| l.starts_with("model name"))
                    .and_then(|l| l.split_once(':'))
                    .map(|(_, v)| v.trim().to_owned())
            })
            .unwrap_or_else(|| "unknown".to_owned());
        let load_average = fs::read_to_string("/proc/loadavg")
            .ok()
            .and_then(|l| l.split_whitespace().next()?.parse().ok());
        Self {
            hostname,
            cores: online_cores(),
            cpu_model,
            load_average,
        }
    }
}

/// Online logical CPUs (at least 1).
pub fn online_cores() -> usize {
    // SAFETY: sysconf only reads a configuration value.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    usize::try_from(n).ok().filter(|&n| n > 0).unwrap_or(1)
}

/// Whether tracked files in the current directory's work tree differ from
/// `HEAD` (`false` when git cannot tell).
pub fn git_dirty() -> bool {
    std::process::Command::new("git")
        .args(["status", "--porcelain", "--untracked-files=no"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .is_some_and(|o| !o.stdout.is_empty())
}

/// `git rev-parse HEAD` in the current directory, or "unknown".
pub fn git_revision() -> String {
    std::process::Command::new("git")
        .args(["rev-parse", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        assert_eq!(percentile(&[], 50.0), None);
        assert_eq!(percentile(&[7], 50.0), Some(7));
        assert_eq!(percentile(&[7], 99.0), Some(7));
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile(&v, 50.0), Some(50));
        assert_eq!(percentile(&v, 99.0), Some(99));
        assert_eq!(percentile(&v, 100.0), Some(100));
        assert_eq!(percentile(&v, 0.0), Some(1));
        let v: Vec<u64> = (1..=10).collect();
        assert_eq!(percentile(&v, 50.0), Some(5));
        assert_eq!(percentile(&v, 99.0), Some(10));
        let mut unsorted = vec![5, 1, 4, 2, 3];
        assert_eq!(p50_p99(&mut unsorted), (Some(3), Some(5)));
    }

    #[test]
    fn clocks_and_machine_are_readable() {
        let cpu = ThreadCpu::start();
        let (_, clock) = cpu.read("no-such-thread-prefix");
        assert_eq!(clock, CpuClock::Process);
        let machine = Machine::detect();
        assert!(machine.cores >= 1);
        assert!(!machine.hostname.is_empty());
    }

    #[test]
    fn sleep_until_reaches_the_deadline() {
        let deadline = Instant::now() + Duration::from_millis(2);
        sleep_until(deadline);
        assert!(Instant::now() >= deadline);
    }
}
