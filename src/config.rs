//! The optional TOML file for `mongotap proxy` (`--config PATH` or `MONGOTAP_CONFIG`).
//! Its keys are the long flags with `_` for `-` (`listen`, `upstream`, `report_json`,
//! `max_shapes`, `show_values`, ...). Precedence: flags, then `MONGOTAP_*` environment
//! variables, then the file, then the defaults. The file works by filling in the
//! environment variables that are not set, so clap applies that order by itself.
//!
//! A `[detectors]` table overrides detector thresholds (`mongotap detectors` lists
//! them with their sources); its keys are checked when the file is read.

use std::path::{Path, PathBuf};

use mongotap_analyzers::detectors::Thresholds;
use serde::Deserialize;

/// The keys a file may set.
const KEYS: &[&str] = &[
    "listen",
    "upstream",
    "report_json",
    "report_md",
    "report_html",
    "admin",
    "report_interval",
    "max_connections",
    "idle_timeout",
    "shutdown_grace",
    "max_shapes",
    "show_values",
    "tap_capacity",
    "tap_mb",
    "assumed_rtt_ms",
    "no_side_connection",
    "index_refresh",
    "explain",
    "tls_certificate_key_file",
    "tls_ca_file",
    "rewrite_topology",
    "advertise_host",
];

/// What a config file says.
#[derive(Debug, Default)]
pub struct FileConfig {
    /// The environment variables it sets: (name, value), for keys not already in the environment.
    pub vars: Vec<(String, String)>,
    /// Its `[detectors]` table, checked.
    pub detectors: Option<Thresholds>,
}

/// The config file named on the command line or in `MONGOTAP_CONFIG`, if any.
pub fn path_from(args: &[String]) -> Option<PathBuf> {
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "--config" {
            return it.next().map(PathBuf::from);
        }
        if let Some(p) = a.strip_prefix("--config=") {
            return Some(PathBuf::from(p));
        }
    }
    std::env::var_os("MONGOTAP_CONFIG").map(PathBuf::from)
}

/// Reads a config file.
pub fn read(path: &Path) -> Result<FileConfig, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
    let table: toml::Table = text.parse().map_err(|e| format!("{}: {e}", path.display()))?;
    let mut out = FileConfig::default();
    for (key, value) in table {
        if key == "detectors" {
            let t = Thresholds::deserialize(value)
                .map_err(|e| format!("{}: [detectors]: {e} (see `mongotap detectors`)", path.display()))?;
            t.validate().map_err(|e| format!("{}: [detectors]: {e}", path.display()))?;
            out.detectors = Some(t);
            continue;
        }
        if !KEYS.contains(&key.as_str()) {
            return Err(format!("{}: unknown key {key:?} (known: {})", path.display(), KEYS.join(", ")));
        }
        let value = match value {
            toml::Value::String(s) => s,
            toml::Value::Integer(i) => i.to_string(),
            toml::Value::Boolean(b) => b.to_string(),
            other => {
                return Err(format!(
                    "{}: {key} must be a string, integer or boolean, not {other}",
                    path.display()
                ))
            }
        };
        let var = format!("MONGOTAP_{}", key.to_uppercase());
        if std::env::var_os(&var).is_none() {
            out.vars.push((var, value));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_become_environment_variables_and_unknown_keys_are_errors() {
        let dir = std::env::temp_dir().join(format!("mongotap-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let good = dir.join("good.toml");
        std::fs::write(&good, "listen = \"127.0.0.1:1\"\nmax_shapes = 50\nshow_values = true\n").unwrap();
        let vars = read(&good).unwrap().vars;
        assert!(vars.contains(&("MONGOTAP_LISTEN".into(), "127.0.0.1:1".into())));
        assert!(vars.contains(&("MONGOTAP_MAX_SHAPES".into(), "50".into())));
        assert!(vars.contains(&("MONGOTAP_SHOW_VALUES".into(), "true".into())));
        let bad = dir.join("bad.toml");
        std::fs::write(&bad, "listn = \"x\"\n").unwrap();
        assert!(read(&bad).unwrap_err().contains("unknown key \"listn\""));
        let detectors = dir.join("detectors.toml");
        std::fs::write(&detectors, "[detectors]\nn_plus_one_min_children = 3\nassumed_rtt_ms = 2.5\n")
            .unwrap();
        let t = read(&detectors).unwrap().detectors.unwrap();
        assert_eq!((t.n_plus_one_min_children, t.assumed_rtt_ms), (3, 2.5));
        assert_eq!(t.lookup_min_count, Thresholds::default().lookup_min_count);
        std::fs::write(&detectors, "[detectors]\nassumed_rtt_ms = -1.0\n").unwrap();
        assert!(read(&detectors).unwrap_err().contains("assumed_rtt_ms must be a positive number"));
        std::fs::write(&detectors, "[detectors]\nn_plus_one_min_childs = 3\n").unwrap();
        let e = read(&detectors).unwrap_err();
        assert!(e.contains("n_plus_one_min_childs") && e.contains("mongotap detectors"), "{e}");
        assert_eq!(
            path_from(&["mongotap".into(), "proxy".into(), "--config=a.toml".into()]),
            Some("a.toml".into())
        );
        std::fs::remove_dir_all(dir).unwrap();
    }
}
