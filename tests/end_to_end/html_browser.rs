//! The HTML report in a real headless Chromium (Debian `chromium`): the page's own
//! self-test sorts the table both ways and checks that its charts are laid out, and a
//! screenshot must show the charts' colour over a real area of the page.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::*;
use mongotap_analyzers::report::{html, json};

fn chromium(args: &[&str], url: &str) -> std::process::Output {
    // A profile of its own per launch: tests run in parallel, and Chromium locks its profile.
    static LAUNCHES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = LAUNCHES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let profile = std::env::temp_dir().join(format!("mongotap-chromium-{}-{n}", std::process::id()));
    let out = Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
        ])
        .args(args.iter().all(|a| !a.starts_with("--window-size")).then_some("--window-size=1400,1000"))
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .arg(url)
        .output()
        .expect("chromium is missing: run ./scripts/setup.sh (Debian package chromium)");
    let _ = std::fs::remove_dir_all(profile);
    out
}

fn page() -> PathBuf {
    page_of("pymongo.report.json")
}

fn page_of(golden: &str) -> PathBuf {
    let text = std::fs::read_to_string(root().join("analyzers/tests/golden").join(golden)).unwrap();
    let report = json::parse(&text).unwrap();
    let path = std::env::temp_dir().join(format!("mongotap-report-{}-{golden}.html", std::process::id()));
    std::fs::write(&path, html::render(&report)).unwrap();
    path
}

/// Pixels of the charts' blue (#0969da) in a PNG screenshot.
fn chart_pixels(png_path: &Path) -> usize {
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(png_path).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    let step = info.color_type.samples();
    buf[..info.buffer_size()]
        .chunks(step)
        .filter(|p| {
            p.len() >= 3
                && (p[0] as i32 - 9).abs() < 12
                && (p[1] as i32 - 105).abs() < 12
                && (p[2] as i32 - 218).abs() < 12
        })
        .count()
}

#[test]
fn the_html_report_sorts_and_draws_in_a_real_browser() {
    let path = page();
    let url = format!("file://{}", path.display());

    let out = chromium(&["--dump-dom"], &format!("{url}#selftest"));
    let dom = String::from_utf8_lossy(&out.stdout);
    let line = dom.lines().find(|l| l.contains("selftest: ")).unwrap_or("");
    assert!(
        line.contains("selftest: ok"),
        "the page's self-test: {line:?}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let shot = std::env::temp_dir().join(format!("mongotap-shot-{}.png", std::process::id()));
    // Tall enough to reach the charts below the summary, operations and relationships.
    chromium(&[&format!("--screenshot={}", shot.display()), "--window-size=1400,4000"], &url);
    let pixels = chart_pixels(&shot);
    assert!(pixels > 5_000, "the screenshot shows only {pixels} chart pixels");
    let _ = std::fs::remove_file(shot);
    let _ = std::fs::remove_file(path);
}

#[test]
fn findings_render_with_their_evidence_and_fix_in_a_real_browser() {
    let path = page_of("findings.report.json");
    let out = chromium(&["--dump-dom"], &format!("file://{}#selftest", path.display()));
    let dom = String::from_utf8_lossy(&out.stdout);
    assert!(dom.lines().any(|l| l.contains("selftest: ok")), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(dom.matches("<article class=\"finding ").count(), 3, "one article per finding");
    assert!(dom.contains("shop.orders.customerId -&gt; shop.customers._id"), "the N+1's link");
    assert!(dom.contains("<th>typical n</th><td>12</td>"), "the evidence table");
    assert!(dom.contains("db.customers.find({\"_id\": {\"$in\": ids}}"), "the fix");
    let _ = std::fs::remove_file(path);
}

/// The demo's report (`out/before/report.json` of a `./scripts/demo.sh` run: the seven
/// bad examples, long shapes and eleven findings), kept as this test's input.
#[test]
fn the_demo_report_fits_a_laptop_and_a_phone() {
    let text = std::fs::read_to_string(root().join("tests/fixtures/demo.report.json")).unwrap();
    let path = std::env::temp_dir().join(format!("mongotap-demo-{}.html", std::process::id()));
    std::fs::write(&path, html::render(&json::parse(&text).unwrap())).unwrap();
    let url = format!("file://{}#selftest", path.display());
    // Laptops: every column in view. A phone (through the DevTools protocol, as headless
    // windows stay 500 px or wider): the page never scrolls sideways; wide tables
    // scroll inside their box.
    for (width, height, mobile) in [(1280, 800, false), (1366, 768, false), (390, 844, true)] {
        let mut cmd = Command::new("python3");
        cmd.arg(root().join("tests/browser.py")).arg(&url).arg(width.to_string()).arg(height.to_string());
        if mobile {
            cmd.arg("mobile");
        }
        let out = cmd.output().unwrap();
        let line = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        assert!(
            line.starts_with("selftest: ok"),
            "{width} px: {line:?} {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(!mobile || line.contains("width=390"), "the phone's viewport: {line}");
        assert!(line.contains("page_overflow=0"), "the page scrolls sideways at {width} px: {line}");
        if !mobile {
            assert!(line.contains("tables_scrolled=0"), "a table column is cut off at {width} px: {line}");
        }
    }
    let _ = std::fs::remove_file(path);
}
