//! The reference model (being written).
