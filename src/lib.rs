//! # mongotap
//!
//! A transparent MongoDB wire-protocol proxy that builds the access-pattern table
//! of the traffic it forwards.
//!
//! # Layout
//! - [`proxy`]: the forwarding side: [`proxy::listener`] (accept, connection cap,
//!   shutdown), [`proxy::session`] (one client and its upstream connection),
//!   [`proxy::pump`] (one direction: read, forward, tap), [`proxy::tap`] (bounded,
//!   drops and counts), [`proxy::upstream`] (connecting, outage logging).
//! - [`analysis`]: the thread that drains the tap into the analyzers' pipeline.
//! - [`config`]: the optional TOML file.
//! - [`output`]: writing reports atomically, and the end-of-run summary.
//! - [`admin`]: the live HTTP endpoint; [`metrics`]: its Prometheus text.
//! - [`memory`]: large blocks given back to the system after large messages.
//! - [`side_connection`]: mongotap's own connection to the upstream, reading the
//!   indexes of the collections in use for the index advisor.
//! - [`top`]: `mongotap top`, a running proxy watched from a terminal.
//!
//! The codec is the `mongotap-wire` crate; everything learned from the traffic is in
//! `mongotap-analyzers`.

pub mod admin;
pub mod analysis;
pub mod config;
pub mod memory;
pub mod metrics;
pub mod offline;
pub mod output;
pub mod proxy;
pub mod recording;
pub mod replay;
pub mod side_connection;
pub mod top;
