//! Forwarding throughput with the analysis running and with it stalled (its pipeline
//! lock held), in interleaved rounds against the canned server: the two must match
//! within noise, and the stalled rounds' events must show up as dropped, counted.
//! Usage: stall CANNED_ADDR [ROUNDS] [SECONDS]

use mongotap::proxy::{Proxy, ProxyConfig};

fn loadgen(addr: &str, secs: &str) -> f64 {
    mongotap_bench::loadgen(&[addr, "32", secs, "stall"])
}

// Holding the analysis lock across the stalled round is the point of this harness.
#[allow(clippy::await_holding_lock)]
#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let upstream = args.get(1).cloned().expect("CANNED_ADDR");
    let rounds: usize = args.get(2).map_or(3, |s| s.parse().unwrap());
    let secs = args.get(3).cloned().unwrap_or_else(|| "3".into());
    let proxy =
        Proxy::start(ProxyConfig { listen: "127.0.0.1:0".into(), upstream, ..ProxyConfig::default() })
            .await
            .expect("starting the proxy");
    let addr = proxy.local_addr().to_string();
    let pipeline = proxy.analysis().pipeline().clone();
    let (mut running, mut stalled) = (Vec::new(), Vec::new());
    let mut dropped_stalled = 0;
    for _ in 0..rounds {
        let (a, s) = (addr.clone(), secs.clone());
        running.push(tokio::task::spawn_blocking(move || loadgen(&a, &s)).await.unwrap());
        let before = proxy.shared().tap.dropped();
        let guard = pipeline.lock().unwrap();
        let (a, s) = (addr.clone(), secs.clone());
        stalled.push(tokio::task::spawn_blocking(move || loadgen(&a, &s)).await.unwrap());
        drop(guard);
        dropped_stalled += proxy.shared().tap.dropped() - before;
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (r, s) = (median(&mut running), median(&mut stalled));
    println!(
        "stalled analysis: forwarding {s:.0} ops/s stalled vs {r:.0} ops/s running (ratio {:.2}); {dropped_stalled} events dropped and counted while stalled",
        s / r
    );
}
