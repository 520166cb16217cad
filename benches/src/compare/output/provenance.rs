//! Where and how a result was produced, for the header of every file the
//! generators write (issue 33, item 6): the compiler the binary was built
//! with, the date, the CPU and its topology (sockets, physical cores,
//! threads per core, and whether logical cores share a physical core), the
//! kernel, the allocator, and the trace's path and SHA-256 when one is used.
//!
//! Each figure is read where the machine keeps it (`/proc`, `/sys`, the
//! build's `rustc --version`, `sha256sum`); one that cannot be read is
//! "unknown", never a guess.

use serde::Serialize;
use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::fs;
use std::path::Path;
use std::process::Command;

/// The CPU topology of the online logical cores.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Topology {
    /// Online logical cores.
    pub logical: usize,
    /// Sockets (distinct physical package ids).
    pub sockets: usize,
    /// Physical cores (distinct package and core id pairs).
    pub cores: usize,
    /// Logical cores per physical core (rounded down).
    pub threads_per_core: usize,
    /// Whether some logical cores share a physical core (SMT siblings).
    pub smt_siblings: bool,
}

impl Topology {
    /// Reads `/sys/devices/system/cpu/cpu*/topology` for the online cores
    /// (`None` when it is unreadable).
    pub fn detect() -> Option<Self> {
        let online = fs::read_to_string("/sys/devices/system/cpu/online").ok()?;
        let read = |cpu: usize, field: &str| -> Option<i64> {
            fs::read_to_string(format!("/sys/devices/system/cpu/cpu{cpu}/topology/{field}"))
                .ok()?
                .trim()
                .parse()
                .ok()
        };
        let (mut packages, mut cores) = (BTreeSet::new(), BTreeSet::new());
        let cpus = cpu_list(online.trim())?;
        for &cpu in &cpus {
            let package = read(cpu, "physical_package_id")?;
            packages.insert(package);
            cores.insert((package, read(cpu, "core_id")?));
        }
        Some(Self::from_counts(cpus.len(), packages.len(), cores.len()))
    }

    /// The topology of `logical` cores on `sockets` packages and `cores`
    /// physical cores.
    pub fn from_counts(logical: usize, sockets: usize, cores: usize) -> Self {
        let threads_per_core = logical / cores.max(1);
        Self {
            logical,
            sockets,
            cores,
            threads_per_core,
            smt_siblings: logical > cores,
        }
    }

    /// "1 socket, 2 cores, 1 thread per core (no SMT siblings)".
    pub fn describe(&self) -> String {
        format!(
            "{} socket(s), {} physical core(s), {} thread(s) per core, {} logical: {}",
            self.sockets,
            self.cores,
            self.threads_per_core,
            self.logical,
            if self.smt_siblings {
                "logical cores share physical cores (SMT siblings)"
            } else {
                "no two logical cores share a physical core"
            }
        )
    }
}

/// The cpus of a list like "0-3,5,7-8"; `None` when malformed.
pub fn cpu_list(text: &str) -> Option<Vec<usize>> {
    let mut cpus = Vec::new();
    for part in text.split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((lo, hi)) => cpus.extend(lo.parse::<usize>().ok()?..=hi.parse().ok()?),
            None => cpus.push(part.parse().ok()?),
        }
    }
    Some(cpus)
}

/// A trace a result used: where it was read, where it comes from, and its
/// checksum.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TraceOrigin {
    /// The path given on the command line.
    pub path: String,
    /// The paragraph of the `README.md` beside the trace that names its
    /// file ("unrecorded" when there is none).
    pub origin: String,
    /// SHA-256 of its bytes ("unknown" when `sha256sum` could not read it).
    pub sha256: String,
}

impl TraceOrigin {
    /// The origin of the trace at `path`.
    pub fn of(path: &Path) -> Self {
        let sha256 = Command::new("sha256sum")
            .arg(path)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .and_then(|o| {
                let text = String::from_utf8(o.stdout).ok()?;
                Some(text.split_whitespace().next()?.to_owned())
            })
            .unwrap_or_else(|| "unknown".to_owned());
        Self {
            path: path.display().to_string(),
            origin: readme_paragraph(path).unwrap_or_else(|| "unrecorded".to_owned()),
            sha256,
        }
    }
}

/// The paragraph of the README beside `path` that names the file, on one
/// line.
fn readme_paragraph(path: &Path) -> Option<String> {
    let name = path.file_name()?.to_str()?;
    let readme = fs::read_to_string(path.with_file_name("README.md")).ok()?;
    readme
        .split("\n\n")
        .find(|p| p.contains(name) && !p.starts_with('#'))
        .map(|p| p.split_whitespace().collect::<Vec<_>>().join(" "))
}

/// Everything a results header names besides the command and revision.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Provenance {
    /// `rustc --version` of the compiler that built this binary.
    pub rustc: String,
    /// When the run started, UTC (`date -u`).
    pub date: String,
    /// The CPU topology (`None` when `/sys` is unreadable).
    pub topology: Option<Topology>,
    /// `/proc/sys/kernel/osrelease`.
    pub kernel: String,
    /// The global allocator the binary was built with.
    pub allocator: String,
    /// The trace, when the stream came from one.
    pub trace: Option<TraceOrigin>,
}

fn unknown_or(text: Option<String>) -> String {
    text.map(|t| t.trim().to_owned())
        .filter(|t| !t.is_empty())
        .unwrap_or_else(|| "unknown".to_owned())
}

/// The allocator of this build.
pub fn allocator() -> &'static str {
    if cfg!(feature = "mimalloc") {
        "mimalloc (feature mimalloc)"
    } else {
        "system allocator (glibc malloc on Linux)"
    }
}

impl Provenance {
    /// Describes this run; `trace` is the trace file the stream came from.
    pub fn detect(trace: Option<&Path>) -> Self {
        let date = Command::new("date")
            .args(["-u", "+%Y-%m-%dT%H:%M:%SZ"])
            .output()
            .ok()
            .and_then(|o| String::from_utf8(o.stdout).ok());
        Self {
            rustc: env!("CRTC_RUSTC_VERSION").to_owned(),
            date: unknown_or(date),
            topology: Topology::detect(),
            kernel: unknown_or(fs::read_to_string("/proc/sys/kernel/osrelease").ok()),
            allocator: allocator().to_owned(),
            trace: trace.map(TraceOrigin::of),
        }
    }

    /// Markdown list items, one per figure (the header's lines after the
    /// command, machine and revision).
    pub fn markdown(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "- rustc: {}", self.rustc);
        let _ = writeln!(out, "- date: {}", self.date);
        let topology = self
            .topology
            .as_ref()
            .map_or_else(|| "unknown".to_owned(), Topology::describe);
        let _ = writeln!(out, "- topology: {topology}");
        let _ = writeln!(out, "- kernel: {}", self.kernel);
        let _ = writeln!(out, "- allocator: {}", self.allocator);
        if let Some(trace) = &self.trace {
            let _ = writeln!(
                out,
                "- trace: {}, sha256 {} (origin: {})",
                trace.path, trace.sha256, trace.origin
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_and_topologies() {
        assert_eq!(cpu_list("0-3,5,7-8"), Some(vec![0, 1, 2, 3, 5, 7, 8]));
        assert_eq!(cpu_list("0"), Some(vec![0]));
        assert_eq!(cpu_list("x"), None);
        let smt = Topology::from_counts(4, 1, 2);
        assert_eq!((smt.threads_per_core, smt.smt_siblings), (2, true));
        let plain = Topology::from_counts(2, 1, 2);
        assert_eq!((plain.threads_per_core, plain.smt_siblings), (1, false));
        assert!(plain.describe().contains("no two logical cores share"));
    }

    #[test]
    fn provenance_names_every_figure() {
        let text = Provenance::detect(Some(Path::new("Cargo.toml"))).markdown();
        for key in [
            "rustc: rustc ",
            "date:",
            "topology:",
            "kernel:",
            "allocator:",
            "sha256 ",
        ] {
            assert!(text.contains(key), "{key} missing from {text}");
        }
    }
}
