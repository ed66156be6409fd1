//! # mongotap-analyzers
//!
//! Everything mongotap learns from traffic, with no knowledge of sockets: tap
//! events go in, operations come out of the correlator, and the analyzers build
//! the access-pattern table and the reports from them.
//!
//! # Layout
//! - [`event`]: what the analysis is fed ([`event::TapEvent`]) and its clock.
//! - [`exchange`]: pairing requests with replies ([`exchange::Correlator`]).
//! - [`operation`]: the operation event every analyzer consumes.

pub mod command_shape;
pub mod event;
pub mod exchange;
pub mod operation;
pub mod pipeline;
pub mod report;
pub mod shape;
pub mod table;
