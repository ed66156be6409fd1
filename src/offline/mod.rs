//! Offline analysis: traffic that was captured elsewhere, fed through the very
//! pipeline the proxy feeds. Each input is recognised by its first bytes: a trace
//! file (zstd), a pcap or pcapng capture, or mongod's JSON log.

pub mod mongod_log;
pub mod pcap;
pub mod tcp;

use std::cell::Cell;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use mongotap_analyzers::operation::SOURCE_SHIFT;
use mongotap_analyzers::pipeline::{Feed, Pipeline};
use mongotap_events::{Micros, TapEvent};

/// What an input is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputKind {
    /// A mongotap trace file.
    Trace,
    /// A pcap or pcapng capture.
    Capture,
    /// mongod's structured JSON log (4.4+).
    MongodLog,
}

impl InputKind {
    /// Recognises an input by its first bytes.
    pub fn of(head: &[u8]) -> Option<InputKind> {
        if mongotap_trace::looks_like_trace(head) {
            return Some(InputKind::Trace);
        }
        if pcap::looks_like_capture(head) {
            return Some(InputKind::Capture);
        }
        let text = head.iter().position(|b| !b.is_ascii_whitespace()).map(|i| &head[i..]);
        if text.is_some_and(|t| t.starts_with(b"{")) {
            return Some(InputKind::MongodLog);
        }
        None
    }

    /// What it is, in words.
    pub fn name(self) -> &'static str {
        match self {
            InputKind::Trace => "trace",
            InputKind::Capture => "capture",
            InputKind::MongodLog => "mongod log",
        }
    }
}

/// How inputs are read.
#[derive(Debug, Clone, Default)]
pub struct OfflineOptions {
    /// Captures: the server's port, when it cannot be told from the traffic.
    pub port: Option<u16>,
    /// Print progress to stderr.
    pub progress: bool,
    /// Where a log's plans (planSummary, keys and documents examined) are filed for
    /// the index advisor, as explain results are.
    pub catalog: Option<mongotap_analyzers::detectors::indexes::catalog::SharedCatalog>,
}

/// What one input gave.
#[derive(Debug, Clone)]
pub struct InputSummary {
    /// The file.
    pub path: PathBuf,
    /// What it was.
    pub kind: InputKind,
    /// Events fed to the pipeline.
    pub events: u64,
    /// Events the recording proxy had dropped (its gaps), for the report's totals.
    pub dropped: u64,
    /// What the reader has to say: a truncated tail, segments missing, lines skipped.
    pub notes: Vec<String>,
}

/// Feeds every input, in order, into `pipeline`.
pub fn analyze(
    inputs: &[PathBuf],
    pipeline: &mut Pipeline,
    opts: &OfflineOptions,
) -> Result<Vec<InputSummary>, String> {
    let mut feeder = Feeder { last_expire: None, events: 0, dropped: 0, base: 0, sources: Vec::new() };
    let mut out = Vec::new();
    // Each source numbers its connections from 1: the parts of one rotated trace
    // share their numbers, anything else gets numbers of its own.
    for (path, kind, source) in in_order(inputs)? {
        let path = &path;
        feeder.base = match feeder.sources.iter().position(|s| *s == source) {
            Some(i) => (i as u64) << SOURCE_SHIFT,
            None => {
                feeder.sources.push(source);
                ((feeder.sources.len() - 1) as u64) << SOURCE_SHIFT
            }
        };
        let (before_events, before_dropped) = (feeder.events, feeder.dropped);
        // Traces and captures are read, decoded and paired, and their documents
        // walked for the schemas, on a second thread while this one analyses; a log
        // files plans by the operation just fed, so it is read here.
        let feeder = &mut feeder;
        let notes = match kind {
            InputKind::Trace => pipeline.split(|front| read_trace(path, feeder, front, opts))?,
            InputKind::Capture => {
                pipeline.split(|front| pcap::read(path, &mut |ev| feeder.feed(front, ev), opts))?
            }
            InputKind::MongodLog => read_log(path, feeder, pipeline, opts)?,
        };
        out.push(InputSummary {
            path: path.clone(),
            kind,
            events: feeder.events - before_events,
            dropped: feeder.dropped - before_dropped,
            notes,
        });
    }
    Ok(out)
}

/// The inputs with their kinds and sources, the parts of each rotated trace in
/// part order (a shell glob puts `t.mtt.10` before `t.mtt.2`) where its first
/// named part stands. A trace whose header cannot be read is an error.
fn in_order(inputs: &[PathBuf]) -> Result<Vec<(PathBuf, InputKind, String)>, String> {
    let mut all = Vec::new();
    for path in inputs {
        let kind = kind_of(path)?;
        let (source, part) = match kind {
            InputKind::Trace => {
                let r = mongotap_trace::TraceReader::open(path)?;
                (r.header().trace_id.clone(), r.header().part)
            }
            _ => (path.display().to_string(), 0),
        };
        all.push((path.clone(), kind, source, part));
    }
    let mut first: Vec<String> = Vec::new();
    for (_, _, s, _) in &all {
        if !first.contains(s) {
            first.push(s.clone());
        }
    }
    all.sort_by_key(|(_, _, s, part)| (first.iter().position(|f| f == s), *part));
    Ok(all.into_iter().map(|(p, k, s, _)| (p, k, s)).collect())
}

/// Feeds events as the live analysis thread does, expiring by the events' own time
/// (the live thread expires once a second).
struct Feeder {
    last_expire: Option<Micros>,
    events: u64,
    dropped: u64,
    /// Added to the current input's connection numbers.
    base: u64,
    /// The sources seen, in order: a trace's id, or a file's path.
    sources: Vec<String>,
}

impl Feeder {
    fn feed(&mut self, pipeline: &mut impl Feed, ev: TapEvent) {
        let ev = rebase(ev, self.base);
        let at = ev.at();
        if let TapEvent::Gap { dropped, .. } = &ev {
            self.dropped += dropped;
        }
        self.events += 1;
        pipeline.feed(ev);
        let last = *self.last_expire.get_or_insert(at);
        if at.saturating_sub(last) > 1_000_000 {
            pipeline.expire(at);
            self.last_expire = Some(at);
        }
    }
}

/// The event with `base` added to its connection numbers.
pub(crate) fn rebase(ev: TapEvent, base: u64) -> TapEvent {
    if base == 0 {
        return ev;
    }
    match ev {
        TapEvent::Opened { conn, client, at } => TapEvent::Opened { conn: conn + base, client, at },
        TapEvent::Message { conn, dir, at, frame } => TapEvent::Message { conn: conn + base, dir, at, frame },
        TapEvent::Recorded { conn, dir, at, frame, wire_len, compressor } => {
            TapEvent::Recorded { conn: conn + base, dir, at, frame, wire_len, compressor }
        }
        TapEvent::TooLarge { conn, dir, at, header } => {
            TapEvent::TooLarge { conn: conn + base, dir, at, header }
        }
        TapEvent::Unframeable { conn, dir, at, error } => {
            TapEvent::Unframeable { conn: conn + base, dir, at, error }
        }
        TapEvent::Closed { conn, at } => TapEvent::Closed { conn: conn + base, at },
        TapEvent::Gap { at, dropped, mut lost } => {
            lost.iter_mut().for_each(|l| l.conn += base);
            TapEvent::Gap { at, dropped, lost }
        }
    }
}

fn kind_of(path: &Path) -> Result<InputKind, String> {
    let mut head = [0u8; 64];
    let mut f = std::fs::File::open(path).map_err(|e| format!("opening {}: {e}", path.display()))?;
    let mut n = 0;
    while n < head.len() {
        match f.read(&mut head[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) => return Err(format!("reading {}: {e}", path.display())),
        }
    }
    InputKind::of(&head[..n]).ok_or_else(|| {
        format!(
            "{}: not a mongotap trace, a pcap/pcapng capture or a mongod JSON log (its first bytes are {:02x?})",
            path.display(),
            &head[..n.min(8)]
        )
    })
}

fn read_trace(
    path: &Path,
    feeder: &mut Feeder,
    pipeline: &mut impl Feed,
    opts: &OfflineOptions,
) -> Result<Vec<String>, String> {
    let (mut progress, file) = Progress::of_file(path, opts.progress)?;
    let mut r = mongotap_trace::TraceReader::new(Box::new(std::io::BufReader::with_capacity(1 << 20, file)))
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let h = r.header().clone();
    let mut notes = vec![format!(
        "trace of {} ({}), part {}, started {}",
        h.upstream,
        h.redaction,
        h.part,
        mongotap_analyzers::report::rfc3339(h.started_at)
    )];
    while let Some(ev) = r.next_event() {
        feeder.feed(pipeline, ev);
        progress.tick(feeder.events);
    }
    progress.done(feeder.events);
    if let Some(t) = r.truncated() {
        notes.push(format!("{}: {t}; everything before it was read", path.display()));
    }
    Ok(notes)
}

fn read_log(
    path: &Path,
    feeder: &mut Feeder,
    pipeline: &mut Pipeline,
    opts: &OfflineOptions,
) -> Result<Vec<String>, String> {
    let (mut progress, file) = Progress::of_file(path, opts.progress)?;
    let mut input = std::io::BufReader::with_capacity(1 << 20, file);
    let mut reader = mongod_log::LogReader::new();
    let (mut line, mut events) = (Vec::new(), Vec::new());
    loop {
        line.clear();
        let n = mongod_log::read_capped(&mut input, &mut line, mongod_log::MAX_LINE)
            .map_err(|e| format!("reading {}: {e}", path.display()))?;
        if n == 0 {
            break;
        }
        let plan = reader.read_line(&String::from_utf8_lossy(&line), &mut events);
        let before = pipeline.operations();
        for ev in events.drain(..) {
            feeder.feed(pipeline, ev);
        }
        // The log's own explain of the operation just fed (if it was: not when its
        // connection was not analysed), the worst one per shape.
        let fed = pipeline.operations() > before;
        let shape = pipeline.last_shape().filter(|_| fed);
        if let (Some(plan), Some(shape), Some(catalog)) = (plan, shape, &opts.catalog) {
            let mut c = catalog.lock().unwrap_or_else(|e| e.into_inner());
            let waste = |e: &mongotap_analyzers::detectors::indexes::catalog::Explained| {
                e.docs_examined.max(e.keys_examined).saturating_sub(e.returned)
            };
            if c.explained(shape).is_none_or(|old| waste(old) < waste(&plan)) {
                c.set_explained(shape, plan);
            }
        }
        progress.tick(reader.stats().lines);
    }
    progress.done(reader.stats().lines);
    let s = reader.stats();
    let mut notes =
        vec![format!("{} lines: {} operations, {} other lines", s.lines, s.operations, s.not_operations)];
    let left_out = [
        (s.truncated_commands, "operations were logged with their command truncated (maxLogSizeKB) and were left out: a part of a command makes a wrong shape"),
        (s.write_summaries, "write commands were logged without their statements (the statements are logged apart) and were counted there"),
        (s.internal, "operations of the server's own threads were left out (a proxy never sees them)"),
        (s.malformed, "lines were not whole JSON entries (a cut-off tail, or another log) and were skipped"),
    ];
    notes.extend(left_out.iter().filter(|(n, _)| *n > 0).map(|(n, what)| format!("{n} {what}")));
    notes.push(
        "a log has no reply values: N+1 and the other detectors that compare values have nothing to go on"
            .into(),
    );
    Ok(notes)
}

/// Progress on stderr (on a terminal, or with --progress): events and their rate,
/// and for a file read through [`Counted`], how far into it, the bytes per second
/// and the time left.
pub struct Progress {
    on: bool,
    name: String,
    started: std::time::Instant,
    last: std::time::Instant,
    /// Bytes read so far, and the file's size.
    bytes: Option<(Rc<Cell<u64>>, u64)>,
}

/// A reader that counts the bytes read through it (for [`Progress`]).
pub struct Counted<R> {
    inner: R,
    read: Rc<Cell<u64>>,
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read.set(self.read.get() + n as u64);
        Ok(n)
    }
}

impl Progress {
    /// Progress for `path`, shown when `on`.
    pub fn new(path: &Path, on: bool) -> Progress {
        let now = std::time::Instant::now();
        Progress { on, name: path.display().to_string(), started: now, last: now, bytes: None }
    }

    /// `path` opened for reading, with progress in bytes.
    pub fn of_file(path: &Path, on: bool) -> Result<(Progress, Counted<std::fs::File>), String> {
        let file = std::fs::File::open(path).map_err(|e| format!("opening {}: {e}", path.display()))?;
        let total = file.metadata().map(|m| m.len()).unwrap_or(0);
        let read = Rc::new(Cell::new(0));
        let mut p = Progress::new(path, on);
        p.bytes = Some((read.clone(), total));
        Ok((p, Counted { inner: file, read }))
    }

    /// Called often; prints at most twice a second.
    pub fn tick(&mut self, events: u64) {
        if self.on && events % 4096 == 0 && self.last.elapsed().as_millis() >= 500 {
            self.last = std::time::Instant::now();
            let seconds = self.started.elapsed().as_secs_f64().max(1e-9);
            match &self.bytes {
                Some((read, total)) if *total > 0 => {
                    let done = read.get().min(*total);
                    let mb = |b: u64| b as f64 / 1e6;
                    let speed = mb(done) / seconds;
                    let left = if speed > 0.0 { mb(total - done) / speed } else { 0.0 };
                    eprint!(
                        "\r{}: {:>3.0}% ({:.1} of {:.1} MB, {speed:.1} MB/s, about {left:.0} s left), {events} events ",
                        self.name,
                        100.0 * done as f64 / *total as f64,
                        mb(done),
                        mb(*total),
                    );
                }
                _ => eprint!("\r{}: {events} events, {:.0}/s ", self.name, events as f64 / seconds),
            }
        }
    }

    /// The last line.
    pub fn done(&mut self, events: u64) {
        if self.on {
            let pad = " ".repeat(40);
            eprintln!(
                "\r{}: {events} events in {:.1} s{pad}",
                self.name,
                self.started.elapsed().as_secs_f64()
            );
        }
    }
}
