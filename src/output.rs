//! Writing reports: every format from one [`Report`], each file written atomically
//! (a temporary file in the same directory, then a rename), so a reader or a crash
//! never sees half a report.

use std::fs;
use std::io::{self, Write};
use std::path::Path;

use mongotap_analyzers::report::{html, json, markdown, Report};

/// Where reports go; any combination.
#[derive(Debug, Clone, Default)]
pub struct Outputs {
    pub json: Option<std::path::PathBuf>,
    pub markdown: Option<std::path::PathBuf>,
    pub html: Option<std::path::PathBuf>,
}

impl Outputs {
    /// Whether any output is asked for.
    pub fn any(&self) -> bool {
        self.json.is_some() || self.markdown.is_some() || self.html.is_some()
    }

    /// Writes every asked-for format, or the Markdown to stdout when none is.
    pub fn write_or_print(&self, r: &Report) -> Result<(), String> {
        match self.any() {
            true => self.write(r).map_err(|e| format!("writing the report: {e}")),
            false => print(&markdown::render(r)),
        }
    }

    /// Writes every asked-for format.
    pub fn write(&self, r: &Report) -> io::Result<()> {
        // The JSON goes to the file as it is written: for 10,000 shapes the text is
        // tens of megabytes, and a proxy building it whole (its buffer doubling as it
        // grew) peaked 60 MiB higher at every report (bench/proxy.sh's memory step).
        if let Some(p) = &self.json {
            write_atomically_with(p, |w| json::write(r, w))?;
        }
        if let Some(p) = &self.markdown {
            write_atomically(p, markdown::render(r).as_bytes())?;
        }
        if let Some(p) = &self.html {
            write_atomically(p, html::render(r).as_bytes())?;
        }
        Ok(())
    }
}

/// Writes `bytes` to `path` through a temporary sibling and a rename.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
    write_atomically_with(path, |w| w.write_all(bytes))
}

/// Writes what `write` writes to `path` through a temporary sibling and a rename.
fn write_atomically_with(
    path: &Path,
    write: impl FnOnce(&mut io::BufWriter<fs::File>) -> io::Result<()>,
) -> io::Result<()> {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    fs::create_dir_all(dir)?;
    let name = path.file_name().ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no file name"))?;
    let tmp = dir.join(format!(".{}.tmp-{}", name.to_string_lossy(), std::process::id()));
    let written = fs::File::create(&tmp).and_then(|f| {
        let mut w = io::BufWriter::with_capacity(64 * 1024, f);
        write(&mut w)?;
        w.into_inner().map_err(io::IntoInnerError::into_error)?.sync_all()
    });
    // On any failure (a full disk, say) the half-written file goes, the old report stays.
    written.and_then(|()| fs::rename(&tmp, path)).inspect_err(|_| {
        let _ = fs::remove_file(&tmp);
    })
}

/// The one-screen summary printed at the end of a run.
pub fn summary(r: &Report) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let t = &r.totals;
    let _ = writeln!(
        s,
        "mongotap: {} operations, {} connections, {:.1} s, {} events dropped, {} parse errors",
        t.operations, t.connections, r.window.seconds, t.events_dropped, t.parse_errors
    );
    if let Some(loss) = r.loss_in_words() {
        let _ = writeln!(s, "{loss}");
    }
    let rows: Vec<_> = r.access_patterns.iter().filter(|p| p.category != "command").take(10).collect();
    if !rows.is_empty() {
        let _ = writeln!(s, "{:>7} {:>6} {:>9}  operation", "count", "share", "p99 ms");
        for p in rows {
            let p99 = p.latency_ms.as_ref().map_or("-".to_string(), |l| format!("{:.2}", l.p99));
            let _ = writeln!(
                s,
                "{:>7} {:>5.1}% {:>9}  {} {} {}",
                if p.count_lower_bound { format!("≥{}", p.count) } else { p.count.to_string() },
                p.share * 100.0,
                p99,
                p.command,
                p.namespace,
                markdown::compact(&p.shape, 70)
            );
        }
    }
    let by = |sev: &str| r.findings.iter().filter(|f| f.severity == sev).count();
    let _ = writeln!(
        s,
        "findings: {} (high {}, medium {}, low {})",
        r.findings.len(),
        by("high"),
        by("medium"),
        by("low")
    );
    for f in r.ranked_findings().into_iter().take(8) {
        let what = f.headline().unwrap_or_else(|| f.namespace.clone());
        let count = f.evidence.get("count").and_then(|c| c.as_u64()).unwrap_or(0);
        let _ = writeln!(s, "  {:<6} {:<16} {what} ({count} operations)", f.severity, f.kind);
    }
    s
}

/// Writes `text` to stdout. A reader that went away (`mongotap analyze t.pcap |
/// head`) ends the output quietly, with success, where `print!` panicked; any
/// other failure (a full disk under `> report.md`) is an error.
pub fn print(text: &str) -> Result<(), String> {
    print_while_read(text).map(drop)
}

/// [`print`] for output that goes on until its reader leaves (`mongotap top |
/// head`): `Ok(false)` once the reader is gone, so the writer stops.
pub fn print_while_read(text: &str) -> Result<bool, String> {
    let mut out = io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(false),
        Err(e) => Err(format!("writing to stdout: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_write_replaces_whole_files_and_leaves_no_temporaries() {
        let dir = std::env::temp_dir().join(format!("mongotap-out-{}", std::process::id()));
        let p = dir.join("r.json");
        write_atomically(&p, b"first").unwrap();
        write_atomically(&p, b"second").unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"second");
        assert_eq!(fs::read_dir(&dir).unwrap().count(), 1);
        fs::remove_dir_all(dir).unwrap();
    }
}
