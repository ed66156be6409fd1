//! The end-to-end tests in one binary: the Rust driver, the CLI and raw sockets
//! through a real mongotap in front of a real SecantusDB, one module per concern.
//! One binary links once: as nineteen binaries they cost a minute of the test
//! build. The tests that measure the process itself (its memory, its descriptors)
//! stay binaries of their own (`tests/churn.rs`, `leaks.rs`, `backpressure.rs`,
//! `faults.rs`), so that no neighbour in the same process moves their numbers.

#[path = "../support/mod.rs"]
mod support;

mod access_table;
mod admin;
mod cli;
mod detectors;
mod forwarding;
mod hostile;
mod html_browser;
mod idle;
mod indexes;
mod literals;
mod offline;
mod rust_driver;
mod schemas;
mod secrets;
mod shard_keys;
mod tls;
mod top;
mod topology;
mod workload;
