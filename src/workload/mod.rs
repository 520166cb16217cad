//! Workloads (being written).
