//! What a comparison writes: the report (table and JSON, [`report`]), the
//! SVG charts ([`plots`]) and the paper tables and figures ([`paper`]).

pub mod paper;
pub mod plots;
pub mod provenance;
pub mod repeat;
pub mod report;
pub mod sweep_pairs;
pub mod sweep_plot;
