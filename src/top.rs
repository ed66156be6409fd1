//! `mongotap top`: a running proxy watched from a terminal, as `mongotop` and
//! `mongostat` watch a server. Every interval it reads the proxy's admin endpoint
//! (`/report.json` and `/metrics`), works out rates from the change since the last
//! read, and shows the busiest shapes and operations, the findings (new ones
//! marked) and what the analysis lost. On a terminal the screen is redrawn and `q`
//! quits; otherwise (a pipe, a log, `--once`) each read prints plain lines.

use std::collections::{BTreeSet, HashMap};
use std::io::{IsTerminal, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use serde_json::Value;

/// One read of the endpoint.
struct Sample {
    at: Instant,
    report: Value,
    metrics: HashMap<String, f64>,
}

/// What `top` shows, and how often.
pub struct TopOptions {
    pub admin: String,
    pub interval: Duration,
    pub rows: usize,
    pub once: bool,
}

/// Runs until `q` (terminal), the end of `--once`, or the proxy going away.
pub fn run(o: &TopOptions) -> Result<(), String> {
    let terminal = !o.once && std::io::stdout().is_terminal();
    let mut previous: Option<Sample> = None;
    let mut seen: BTreeSet<String> = BTreeSet::new();
    let mut first = true;
    let _screen = if terminal { Some(Screen::enter()?) } else { None };
    loop {
        // One failed read (the proxy busy, restarting) is said and tried again;
        // only --once, or a proxy never reached, ends here.
        let text = match read(&o.admin) {
            Ok(now) => {
                let text = render(&now, previous.as_ref(), &mut seen, first, o, terminal);
                previous = Some(now);
                first = false;
                text
            }
            Err(e) if o.once || first => return Err(e),
            Err(e) => format!("mongotap top  {}  {}\n{e}; trying again\n", o.admin, chrono_like_now()),
        };
        // Home, clear, then the frame with the raw mode's line endings; a pipe's
        // reader that went away (`| head`) ends the watch.
        let frame = if terminal {
            format!("\x1b[H\x1b[2J{}", text.replace('\n', "\r\n"))
        } else {
            format!("{text}\n")
        };
        if !crate::output::print_while_read(&frame)? || o.once {
            return Ok(());
        }
        let quit = if terminal { Screen::quit_within(o.interval)? } else { reader_gone_within(o.interval) };
        if quit {
            return Ok(());
        }
    }
}

/// Waits `d`, or less when stdout is a pipe whose reader goes away meanwhile (`top
/// --interval 60 | head` ends with `head`, not a minute later): true then.
#[cfg(target_os = "linux")]
fn reader_gone_within(d: Duration) -> bool {
    let end = Instant::now() + d;
    let wait_out = || {
        std::thread::sleep(end.saturating_duration_since(Instant::now()));
        false
    };
    loop {
        let left = end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        // Nothing asked for: Linux reports a pipe whose reader left as an error
        // whatever is asked, and anything else just waits.
        let mut out = libc::pollfd { fd: libc::STDOUT_FILENO, events: 0, revents: 0 };
        let ms = left.as_millis().clamp(1, i32::MAX as u128) as i32;
        // SAFETY: one pollfd, owned by this frame for the whole call.
        let ready = unsafe { libc::poll(&mut out, 1, ms) };
        match ready {
            0 => {} // the time is up: the top of the loop says so
            n if n > 0 => return out.revents & (libc::POLLERR | libc::POLLHUP) != 0 || wait_out(),
            _ if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted => {}
            _ => return wait_out(), // no poll to be had: a plain wait, never a spin
        }
    }
}

/// Elsewhere a reader that left is seen at the next write.
#[cfg(not(target_os = "linux"))]
fn reader_gone_within(d: Duration) -> bool {
    std::thread::sleep(d);
    false
}

/// Raw mode and the alternate screen while `top` runs, restored on drop.
struct Screen;

impl Screen {
    fn enter() -> Result<Screen, String> {
        crossterm::terminal::enable_raw_mode().map_err(|e| format!("the terminal: {e}"))?;
        let mut out = std::io::stdout();
        let _ = write!(out, "\x1b[?1049h\x1b[?25l");
        let _ = out.flush();
        Ok(Screen)
    }

    /// Waits up to `d` for `q`, Esc or Ctrl-C.
    fn quit_within(d: Duration) -> Result<bool, String> {
        use crossterm::event::{poll, read, Event, KeyCode, KeyModifiers};
        let end = Instant::now() + d;
        loop {
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(false);
            }
            if poll(left).map_err(|e| e.to_string())? {
                if let Event::Key(k) = read().map_err(|e| e.to_string())? {
                    let ctrl_c = k.code == KeyCode::Char('c') && k.modifiers.contains(KeyModifiers::CONTROL);
                    if matches!(k.code, KeyCode::Char('q') | KeyCode::Esc) || ctrl_c {
                        return Ok(true);
                    }
                }
            }
        }
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        let mut out = std::io::stdout();
        let _ = write!(out, "\x1b[?25h\x1b[?1049l");
        let _ = out.flush();
        let _ = crossterm::terminal::disable_raw_mode();
    }
}

/// Reads both documents of the endpoint.
fn read(admin: &str) -> Result<Sample, String> {
    let report = get(admin, "/report.json")?;
    let report: Value =
        serde_json::from_str(&report).map_err(|e| format!("{admin}/report.json is not a report: {e}"))?;
    let metrics = parse_metrics(&get(admin, "/metrics")?);
    Ok(Sample { at: Instant::now(), report, metrics })
}

/// One GET on the admin endpoint (it answers one request per connection).
fn get(admin: &str, path: &str) -> Result<String, String> {
    let unreachable = |e: std::io::Error| {
        format!("cannot read {path} from {admin} (is `mongotap proxy --admin {admin}` running?): {e}")
    };
    let addr = std::net::ToSocketAddrs::to_socket_addrs(admin)
        .map_err(unreachable)?
        .next()
        .ok_or_else(|| format!("{admin}: no address"))?;
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(3)).map_err(unreachable)?;
    s.set_read_timeout(Some(Duration::from_secs(5))).map_err(unreachable)?;
    write!(s, "GET {path} HTTP/1.1\r\nHost: {admin}\r\nConnection: close\r\n\r\n").map_err(unreachable)?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).map_err(unreachable)?;
    let text = String::from_utf8_lossy(&raw);
    let (head, body) = text.split_once("\r\n\r\n").ok_or_else(|| format!("{admin}{path}: no HTTP answer"))?;
    if !head.starts_with("HTTP/1.1 200") && !head.starts_with("HTTP/1.0 200") {
        return Err(format!("{admin}{path}: {}", head.lines().next().unwrap_or("")));
    }
    Ok(body.to_owned())
}

/// Prometheus text as name -> value, labels summed away.
fn parse_metrics(text: &str) -> HashMap<String, f64> {
    let mut m = HashMap::new();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let Some((name, value)) = line.rsplit_once(' ') else { continue };
        let name = name.split('{').next().unwrap_or(name);
        if let Ok(v) = value.parse::<f64>() {
            *m.entry(name.to_owned()).or_default() += v;
        }
    }
    m
}

/// Count per key (shape or operation) of a report section.
fn counts(section: &Value, key: fn(&Value) -> String) -> HashMap<String, u64> {
    section.as_array().into_iter().flatten().map(|r| (key(r), r["count"].as_u64().unwrap_or(0))).collect()
}

fn shape_key(r: &Value) -> String {
    format!(
        "{} {} {}",
        r["namespace"].as_str().unwrap_or(""),
        r["command"].as_str().unwrap_or(""),
        r["shape_id"]
    )
}

fn operation_key(r: &Value) -> String {
    r["id"].as_str().unwrap_or("").to_owned()
}

/// The rows of a report section with their rate now, busiest first.
fn busiest<'r>(
    now: &'r Value,
    before: Option<&Value>,
    key: fn(&Value) -> String,
    dt: f64,
) -> Vec<(f64, &'r Value)> {
    let before = before.map(|b| counts(b, key));
    let mut rows: Vec<(f64, &Value)> = now
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| {
            let was = before.as_ref().map(|m| m.get(&key(p)).copied().unwrap_or(0));
            (rate(p["count"].as_u64().unwrap_or(0), was, dt, p["rate_per_s"].as_f64().unwrap_or(0.0)), p)
        })
        .collect();
    rows.sort_by(|a, b| b.0.total_cmp(&a.0).then(b.1["count"].as_u64().cmp(&a.1["count"].as_u64())));
    rows
}

/// Rate per second from the change since the last sample, or the report's own
/// rate on the first one.
fn rate(now: u64, before: Option<u64>, seconds: f64, fallback: f64) -> f64 {
    match before {
        Some(b) if seconds > 0.0 => now.saturating_sub(b) as f64 / seconds,
        _ => fallback,
    }
}

fn cut(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_owned()
    } else {
        let mut t: String = s.chars().take(n.saturating_sub(1)).collect();
        t.push('…');
        t
    }
}

fn ms(v: &Value) -> String {
    v.as_f64().map_or("-".into(), |x| format!("{x:.2}"))
}

/// One frame of text.
fn render(
    now: &Sample,
    before: Option<&Sample>,
    seen: &mut BTreeSet<String>,
    first: bool,
    o: &TopOptions,
    terminal: bool,
) -> String {
    let r = &now.report;
    let dt = before.map_or(0.0, |b| now.at.duration_since(b.at).as_secs_f64());
    let metric = |s: &Sample, k: &str| s.metrics.get(k).copied().unwrap_or(0.0);
    let requests = metric(now, "mongotap_requests_total");
    let request_rate =
        before.map_or(0.0, |b| (requests - metric(b, "mongotap_requests_total")).max(0.0) / dt.max(1e-9));
    let mut out = String::new();
    let clock = chrono_like_now();
    out.push_str(&format!(
        "mongotap top  {}  {clock}{}\n",
        o.admin,
        if terminal { "   (q quits)" } else { "" }
    ));
    out.push_str(&format!(
        "requests {:.0} ({:.0}/s)   connections {:.0}   shapes {:.0}   events dropped {:.0}   tap queue {:.1} MiB   parse errors {:.0}\n",
        requests,
        request_rate,
        metric(now, "mongotap_connections_open"),
        metric(now, "mongotap_shapes"),
        metric(now, "mongotap_events_dropped_total"),
        metric(now, "mongotap_tap_queued_bytes") / (1024.0 * 1024.0),
        metric(now, "mongotap_parse_errors_total"),
    ));
    // Shapes, busiest now first.
    let shapes = busiest(&r["access_patterns"], before.map(|b| &b.report["access_patterns"]), shape_key, dt);
    out.push_str(&format!(
        "\nSHAPES {:>9} {:>9} {:>8} {:>8}  {:<28} {:<10} shape\n",
        "ops/s", "count", "p50 ms", "p99 ms", "namespace", "command"
    ));
    for (rate, p) in shapes.iter().take(o.rows) {
        out.push_str(&format!(
            "       {:>9.1} {:>9} {:>8} {:>8}  {:<28} {:<10} {}\n",
            rate,
            p["count"].as_u64().unwrap_or(0),
            ms(&p["latency_ms"]["p50"]),
            ms(&p["latency_ms"]["p99"]),
            cut(p["namespace"].as_str().unwrap_or(""), 28),
            cut(p["command"].as_str().unwrap_or(""), 10),
            cut(&p["shape"].to_string(), 60),
        ));
    }
    // Operations: the application's units of work.
    let ops = busiest(&r["operations"], before.map(|b| &b.report["operations"]), operation_key, dt);
    out.push_str(&format!(
        "\nOPERATIONS {:>5} {:>9} {:>6} {:>8} {:>8}  operation\n",
        "ops/s", "count", "trips", "p50 ms", "p99 ms"
    ));
    for (rate, p) in ops.iter().take(o.rows) {
        out.push_str(&format!(
            "       {:>9.1} {:>9} {:>6} {:>8} {:>8}  {}\n",
            rate,
            p["count"].as_u64().unwrap_or(0),
            p["round_trips"]["max"].as_u64().unwrap_or(0),
            ms(&p["latency_ms"]["p50"]),
            ms(&p["latency_ms"]["p99"]),
            cut(p["name"].as_str().unwrap_or(""), 90),
        ));
    }
    // Findings, the new ones marked.
    out.push_str("\nFINDINGS (* new since the last read)\n");
    let findings = r["findings"].as_array().cloned().unwrap_or_default();
    if findings.is_empty() {
        out.push_str("       none yet\n");
    }
    for f in findings.iter().take(o.rows) {
        let kind = f["kind"].as_str().unwrap_or("");
        let ns = f["namespace"].as_str().unwrap_or("");
        let key = format!("{kind} {ns} {}", f["shape_ids"]);
        let new = seen.insert(key) && !first;
        out.push_str(&format!(
            "     {} {:<6} {:<28} {}\n",
            if new { "*" } else { " " },
            f["severity"].as_str().unwrap_or(""),
            kind,
            cut(ns, 60)
        ));
    }
    if findings.len() > o.rows {
        out.push_str(&format!("       ... and {} more (the report has them all)\n", findings.len() - o.rows));
    }
    out
}

/// The wall-clock time as HH:MM:SS UTC (no time-zone database needed).
fn chrono_like_now() -> String {
    let s = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    format!("{:02}:{:02}:{:02} UTC", (s / 3600) % 24, (s / 60) % 60, s % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_are_summed_over_their_labels() {
        let m = parse_metrics(
            "# HELP x\nmongotap_requests_total 12\nmongotap_findings{kind=\"a\"} 2\nmongotap_findings{kind=\"b\"} 3\n",
        );
        assert_eq!(m["mongotap_requests_total"], 12.0);
        assert_eq!(m["mongotap_findings"], 5.0);
    }

    #[test]
    fn rates_come_from_the_change_since_the_last_read() {
        assert_eq!(rate(150, Some(100), 2.0, 9.0), 25.0);
        assert_eq!(rate(150, None, 2.0, 9.0), 9.0, "the first read shows the report's own rate");
        assert_eq!(cut("abcdef", 4), "abc…");
    }
}
