//! The `mongotap` command. See `mongotap --help`.

mod cli;

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use cli::{AnalyzeArgs, Cli, Commands, ProxyArgs, ReplayArgs, ReportArgs};
use mongotap::output::{print, summary, Outputs};
use mongotap::proxy::Proxy;
use mongotap::side_connection::{SideConfig, SideConnection};
use mongotap_analyzers::detectors::indexes::catalog::IndexCatalog;
use mongotap_analyzers::detectors::{Detectors, Thresholds};
use mongotap_analyzers::exchange::Limits;
use mongotap_analyzers::pipeline::Pipeline;
use mongotap_analyzers::report::{gate, json, Report, RunFacts};
use mongotap_analyzers::table::TableLimits;

/// The analysis allocates many small, short-lived buffers per message; mimalloc
/// serves them at a fraction of glibc's cost (measured by bench/analysis).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    mongotap::memory::no_huge_pages();
    // The config file only fills in MONGOTAP_* variables the environment lacks; this
    // runs before any thread exists, so changing the environment is sound.
    let args: Vec<String> = std::env::args().collect();
    let mut thresholds = Thresholds::default();
    if let Some(path) = mongotap::config::path_from(&args) {
        match mongotap::config::read(&path) {
            Ok(file) => {
                file.vars.into_iter().for_each(|(k, v)| std::env::set_var(k, v));
                thresholds = file.detectors.unwrap_or_default();
            }
            Err(e) => {
                eprintln!("mongotap: {e}");
                return ExitCode::from(2);
            }
        }
    }
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "mongotap=info".into()),
        )
        .with_writer(std::io::stderr)
        // Colour only on a terminal, and never with NO_COLOR (https://no-color.org).
        .with_ansi(
            std::io::IsTerminal::is_terminal(&std::io::stderr()) && std::env::var_os("NO_COLOR").is_none(),
        )
        .init();
    let result = match cli.command {
        Commands::Record(args) if args.trace.trace.is_none() => {
            eprintln!("mongotap: record needs --trace PATH: the file to record into");
            return ExitCode::from(2);
        }
        Commands::Proxy(args) | Commands::Record(args) => match args.config() {
            Ok(config) => run_proxy(args, config, thresholds).map(|()| ExitCode::SUCCESS),
            Err(e) => {
                eprintln!("mongotap: {e}");
                return ExitCode::from(2);
            }
        },
        Commands::Analyze(args) => match (args.max_shapes, args.outputs.check()) {
            (0, _) => {
                eprintln!("mongotap: --max-shapes 0 means nothing: give 1 or more distinct shapes to keep");
                return ExitCode::from(2);
            }
            (_, Err(e)) => {
                eprintln!("mongotap: {e}");
                return ExitCode::from(2);
            }
            _ => run_analyze(args, thresholds).map(|ended| match ended {}),
        },
        Commands::Replay(args) => run_replay(args, thresholds),
        Commands::Report(args) => run_report(args),
        Commands::Detectors(_) => print(&thresholds.to_toml_comments()).map(|()| ExitCode::SUCCESS),
        Commands::Top(args) => {
            if !(0.1..=3600.0).contains(&args.interval) || args.rows == 0 {
                eprintln!("mongotap: --interval takes 0.1 to 3600 seconds, --rows 1 or more");
                return ExitCode::from(2);
            }
            let o = mongotap::top::TopOptions {
                admin: args.admin,
                interval: std::time::Duration::from_secs_f64(args.interval),
                rows: args.rows,
                once: args.once,
            };
            mongotap::top::run(&o).map(|()| ExitCode::SUCCESS)
        }
        Commands::Completions(args) => {
            use clap::CommandFactory;
            let mut script = Vec::new();
            clap_complete::generate(args.shell, &mut Cli::command(), "mongotap", &mut script);
            print(&String::from_utf8_lossy(&script)).map(|()| ExitCode::SUCCESS)
        }
        Commands::Man => {
            use clap::CommandFactory;
            let mut page = Vec::new();
            clap_mangen::Man::new(Cli::command())
                .render(&mut page)
                .map_err(|e| format!("writing the man page: {e}"))
                .and_then(|()| print(&String::from_utf8_lossy(&page)))
                .map(|()| ExitCode::SUCCESS)
        }
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("mongotap: {e}");
            ExitCode::from(1)
        }
    }
}

fn outputs(o: &cli::ReportOutputs) -> Outputs {
    Outputs { json: o.report_json.clone(), markdown: o.report_md.clone(), html: o.report_html.clone() }
}

fn run_proxy(
    args: ProxyArgs,
    config: mongotap::proxy::ProxyConfig,
    mut thresholds: Thresholds,
) -> Result<(), String> {
    let outs = outputs(&args.outputs);
    if let Some(rtt) = args.assumed_rtt_ms {
        if !(rtt > 0.0 && rtt.is_finite()) {
            return Err(format!("--assumed-rtt-ms must be a positive number of milliseconds, not {rtt}"));
        }
        thresholds.assumed_rtt_ms = rtt;
    }
    if args.trace.capture_values {
        tracing::warn!("--capture-values: the trace keeps every value as it was sent, that is your data: keep it on staging, share it as you would the database, delete it when done (auth commands are still reduced to their names)");
    }
    let catalog = IndexCatalog::shared();
    let pipeline = analysis_pipeline(thresholds, args.max_shapes, args.show_values, &catalog);
    let rt = tokio::runtime::Runtime::new().map_err(|e| format!("starting the runtime: {e}"))?;
    rt.block_on(async move {
        let proxy = Proxy::start_with(config.clone(), pipeline)
            .await
            .map_err(|e| format!("cannot listen on {}: {e}", config.listen))?;
        let side = if args.no_side_connection {
            catalog.lock().unwrap_or_else(|e| e.into_inner()).set_side("off (--no-side-connection)");
            None
        } else {
            let config = SideConfig {
                upstream: args.upstream.clone(),
                refresh: Duration::from_secs(args.index_refresh),
            };
            if args.explain {
                catalog.lock().unwrap_or_else(|e| e.into_inner()).enable_explain();
                tracing::warn!("--explain: one real request per unserved query shape is run with explain on the upstream (staging only)");
            }
            let side = SideConnection::new(config, catalog);
            tokio::spawn(side.clone().run());
            Some(side)
        };
        if args.admin != "off" {
            match tokio::net::TcpListener::bind(&args.admin).await {
                Ok(l) => {
                    tracing::info!(admin = %args.admin, "admin endpoint: /metrics /report.json /report.html /healthz");
                    let (shared, pipeline) = (proxy.shared().clone(), proxy.analysis().pipeline().clone());
                    tokio::spawn(mongotap::admin::serve(l, shared, pipeline));
                }
                Err(e) => tracing::warn!("admin endpoint not started: cannot listen on {}: {e}", args.admin),
            }
        }
        let mut every = tokio::time::interval(Duration::from_secs(args.report_interval));
        every.tick().await;
        let stop = shutdown_signal();
        tokio::pin!(stop);
        // A failing write (a full disk) is said once, and its end once: forwarding goes on.
        let mut failing = false;
        loop {
            tokio::select! {
                _ = &mut stop => break,
                _ = every.tick() => {
                    if outs.any() {
                        match outs.write(&report(&proxy)) {
                            Ok(()) if std::mem::take(&mut failing) => tracing::info!("reports written again"),
                            Ok(()) => {}
                            Err(e) if !failing => {
                                failing = true;
                                tracing::error!("writing the report failed: {e}; forwarding goes on, the previous report stays, and the write is retried every interval (said again once it works)");
                            }
                            Err(_) => {}
                        }
                    }
                }
            }
        }
        tracing::info!("shutting down");
        let dropped = proxy.shared().tap.dropped();
        let analysis = proxy.shutdown().await;
        if let Some(side) = side {
            // A short run may end before the side connection read its collections.
            let _ = tokio::time::timeout(Duration::from_secs(5), side.last_look()).await;
        }
        let p = analysis.pipeline().lock().unwrap_or_else(|e| e.into_inner());
        let r = Report::build(&p, RunFacts { events_dropped: dropped });
        outs.write(&r).map_err(|e| format!("writing the report: {e}"))?;
        eprint!("{}", summary(&r));
        Ok(())
    })
}

/// The pipeline every command analyses with: the table's bounds and every
/// detector, the index advisor reading `catalog`.
fn analysis_pipeline(
    thresholds: Thresholds,
    max_shapes: usize,
    show_values: bool,
    catalog: &mongotap_analyzers::detectors::indexes::catalog::SharedCatalog,
) -> Pipeline {
    Pipeline::with_detectors(
        Limits::default(),
        TableLimits { max_shapes: max_shapes.max(1), show_values, ..TableLimits::default() },
        Detectors::with_catalog(thresholds, catalog.clone()),
    )
}

/// Analyses the inputs and writes the report; once it is written the process ends
/// there, without freeing the analysis (dropping it on the way out of this function
/// cost a 10 MB capture 2 ms of its 20).
fn run_analyze(args: AnalyzeArgs, thresholds: Thresholds) -> Result<std::convert::Infallible, String> {
    let outs = outputs(&args.outputs);
    let catalog = IndexCatalog::shared();
    let mut pipeline = analysis_pipeline(thresholds, args.max_shapes, args.show_values, &catalog);
    let opts = mongotap::offline::OfflineOptions {
        catalog: Some(catalog),
        port: args.port,
        progress: args.progress || std::io::IsTerminal::is_terminal(&std::io::stderr()),
    };
    let inputs = mongotap::offline::analyze(&args.inputs, &mut pipeline, &opts)?;
    let mut dropped = 0;
    for i in &inputs {
        dropped += i.dropped;
        eprintln!("{}: {}, {} events", i.path.display(), i.kind.name(), i.events);
        for n in &i.notes {
            eprintln!("  {n}");
        }
    }
    let r = Report::build(&pipeline, RunFacts { events_dropped: dropped });
    outs.write_or_print(&r)?;
    eprint!("{}", summary(&r));
    mongotap::memory::exit_without_freeing()
}

fn run_replay(args: ReplayArgs, thresholds: Thresholds) -> Result<ExitCode, String> {
    if !(args.speed > 0.0 && args.speed.is_finite()) {
        return Err(format!("--speed must be a positive number, not {}", args.speed));
    }
    let target = mongotap::proxy::upstream::parse_upstream(&args.target)?;
    let max_shapes = TableLimits::default().max_shapes;
    let pipeline = || analysis_pipeline(thresholds.clone(), max_shapes, false, &IndexCatalog::shared());
    let (mut before, mut after) = (pipeline(), pipeline());
    let rt = tokio::runtime::Runtime::new().map_err(|e| format!("starting the runtime: {e}"))?;
    let stats =
        rt.block_on(mongotap::replay::replay(&args.traces, &target, args.speed, &mut before, &mut after))?;
    let (b, a) = (Report::build(&before, RunFacts::default()), Report::build(&after, RunFacts::default()));
    outputs(&args.outputs).write(&a).map_err(|e| format!("writing the report: {e}"))?;
    print(&format!(
        "Replayed {} requests on {} connections to {target} ({} answered; left out: {} auth commands, {} awaitable hellos; {} cursor ids mapped)\n\n",
        stats.sent, stats.connections, stats.answered, stats.auth_skipped, stats.monitoring_skipped, stats.cursors_mapped
    ))?;
    print(&mongotap::replay::compare(&b, &a))?;
    if stats.failed_connections > 0 {
        eprintln!(
            "mongotap: {} connections could not be replayed to the end; the first: {}",
            stats.failed_connections,
            stats.first_failure.unwrap_or_default()
        );
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

fn report(proxy: &Proxy) -> Report {
    let p = proxy.analysis().pipeline().lock().unwrap_or_else(|e| e.into_inner());
    Report::build(&p, RunFacts { events_dropped: proxy.shared().tap.dropped() })
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("installing the SIGTERM handler");
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}

fn read_report(path: &std::path::Path) -> Result<Report, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
    json::parse(&text).map_err(|e| format!("{} is not a mongotap JSON report: {e}", path.display()))
}

fn run_report(args: ReportArgs) -> Result<ExitCode, String> {
    if let Err(e) = gate::check_fail_on(&args.fail_on) {
        eprintln!("mongotap: {e}");
        return Ok(ExitCode::from(2));
    }
    if let Some(cli::ReportCommand::Merge(m)) = &args.command {
        let reports = m.inputs.iter().map(|p| read_report(p)).collect::<Result<Vec<_>, _>>()?;
        let r = mongotap_analyzers::report::merge::merge(&reports)?;
        let outs = outputs(&m.outputs);
        outs.write_or_print(&r)?;
        eprint!("{}", summary(&r));
        return Ok(ExitCode::SUCCESS);
    }
    let input = args.input.as_deref().ok_or("a report to read")?;
    let r = read_report(input)?;
    let outs = outputs(&args.outputs);
    // A gate prints its verdict, not the report, unless a file is asked for.
    if outs.any() || args.baseline.is_none() {
        outs.write_or_print(&r)?;
    }
    let Some(baseline) = &args.baseline else { return Ok(ExitCode::SUCCESS) };
    let verdict = gate::compare(&r, &read_report(baseline)?, &args.fail_on);
    for line in verdict.new_findings.iter().chain(&verdict.new_shapes) {
        print(&format!("{line}\n"))?;
    }
    if verdict.fails() {
        print(&format!(
            "mongotap gate: FAILED ({} new findings, {} new shapes versus {})\n",
            verdict.new_findings.len(),
            verdict.new_shapes.len(),
            baseline.display()
        ))?;
        return Ok(ExitCode::from(3));
    }
    print(&format!(
        "mongotap gate: passed (nothing new of {} versus {})\n",
        args.fail_on.join(","),
        baseline.display()
    ))?;
    Ok(ExitCode::SUCCESS)
}
