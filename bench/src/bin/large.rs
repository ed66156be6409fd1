//! Memory under large messages: CONNECTIONS clients insert documents of just under
//! 16 MiB through an in-process proxy, first with the analysis running, then with it
//! stalled (its pipeline lock held), against the canned server. Prints the forwarding
//! rate of both, the proxy's peak RSS beside its tap budget, and what was dropped.
//! The load generator runs in its own process, so the RSS is the proxy's alone.
//! Usage: large CANNED_ADDR [CONNECTIONS] [SECONDS] [TAP_MB]

use mongotap::proxy::{Proxy, ProxyConfig};
use mongotap_bench::rss_kib;

const DOC_BYTES: usize = 16_000_000;

/// The process's own memory, the budget aside (docs/guarantees.md, "Bounded memory").
const BASE_MIB: f64 = 16.0;

fn loadgen(addr: &str, conns: &str, secs: &str) -> f64 {
    mongotap_bench::loadgen(&[addr, conns, secs, "large", &DOC_BYTES.to_string()])
}

// Holding the analysis lock across the stalled round is the point of this harness.
#[allow(clippy::await_holding_lock)]
#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let upstream = args.get(1).cloned().expect("CANNED_ADDR");
    let conns = args.get(2).cloned().unwrap_or_else(|| "16".into());
    let secs = args.get(3).cloned().unwrap_or_else(|| "4".into());
    let tap_mb: u64 = args.get(4).map_or(128, |s| s.parse().expect("TAP_MB"));
    let before = rss_kib("VmRSS:");
    let config = ProxyConfig {
        listen: "127.0.0.1:0".into(),
        upstream,
        tap_bytes: tap_mb * 1024 * 1024,
        ..ProxyConfig::default()
    };
    let proxy = Proxy::start(config).await.expect("starting the proxy");
    let addr = proxy.local_addr().to_string();
    let (a, c, s) = (addr.clone(), conns.clone(), secs.clone());
    let running = tokio::task::spawn_blocking(move || loadgen(&a, &c, &s)).await.unwrap();
    let peak_running = rss_kib("VmHWM:");
    let dropped_before = proxy.shared().tap.dropped();
    let guard = proxy.analysis().pipeline().lock().unwrap();
    let (a, c, s) = (addr.clone(), conns.clone(), secs.clone());
    let stalled = tokio::task::spawn_blocking(move || loadgen(&a, &c, &s)).await.unwrap();
    let peak = rss_kib("VmHWM:");
    let dropped = proxy.shared().tap.dropped() - dropped_before;
    drop(guard);
    let mb = |ops: f64| ops * DOC_BYTES as f64 / 1e6;
    // The documented bound (docs/guarantees.md, "Bounded memory"): the tap budget, plus the process's
    // base, plus at most 256 KiB per connection and direction outside the budget.
    let bound_mib = tap_mb as f64 + BASE_MIB + conns.parse::<f64>().unwrap_or(0.0) * 0.5;
    let within = peak as f64 / 1024.0 <= bound_mib;
    println!(
        "large messages ({DOC_BYTES}-byte documents, {conns} connections): forwarding {:.0} MB/s stalled vs {:.0} MB/s running (ratio {:.2}); peak RSS {:.0} MiB with a tap budget of {tap_mb} MiB ({:.0} MiB while running, {:.0} MiB at start; documented bound {bound_mib:.0} MiB: {}); {dropped} messages dropped and counted while stalled",
        mb(stalled),
        mb(running),
        stalled / running,
        peak as f64 / 1024.0,
        peak_running as f64 / 1024.0,
        before as f64 / 1024.0,
        if within { "within" } else { "EXCEEDED" },
    );
}
