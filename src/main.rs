//! karpenter-tui: argument parsing and wiring only.

use std::process::ExitCode;

use clap::Parser as _;

use karpenter_tui::cli;
use karpenter_tui::cli::args::{Cli, Command, LogArgs, Output, Source, UiArgs};
use karpenter_tui::cli::logging;
use karpenter_tui::engine::catalog::report;
use karpenter_tui::engine::disruption::gate::Mode;
use karpenter_tui::engine::version::KarpenterVersion;

fn run(mut cli: Cli) -> anyhow::Result<ExitCode> {
    let command = match cli.command.take().or_else(|| cli.sim_as_demo()) {
        Some(c) => c,
        None => {
            let opts = match cli.live.options(cli.cloud, false, Mode::Approve, Some(&cli.ui)) {
                Ok(o) => o,
                Err(e) => {
                    eprintln!("error: {e:#}");
                    return Ok(ExitCode::from(2));
                }
            };
            return match cli::live_dashboard::run_live(
                opts,
                cli.log.log_format,
                cli.metrics_addr,
                cli.ui.node_options(),
            ) {
                Ok(()) => Ok(ExitCode::SUCCESS),
                Err(e) => {
                    eprintln!("error: {e:#}");
                    Ok(ExitCode::from(2))
                }
            };
        }
    };
    match command {
        Command::Demo { scenario, speed, packing, karpenter_version, ui, log: LogArgs { log_format } } => {
            let nodes = ui.node_options();
            let UiArgs { readonly, theme, .. } = ui;
            let opts = cli::demo::DemoOptions {
                scenario: scenario.map(Into::into),
                speed,
                packing: packing.map(Into::into),
                karpenter_version,
                readonly,
                theme,
                nodes,
                log_format,
            };
            cli::demo::run_demo(opts)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Info => emit(&cli::demo::info()),
        Command::Completions { shell } => emit_bytes(&cli::generated::completions(shell)),
        Command::Man => emit_bytes(&cli::generated::man_page()?),
        Command::Controller { in_cluster, health_addr, cloud, live, log } => {
            // A pod's log: everything, the fatal error too, goes through the logger in the chosen format.
            logging::to_stderr(log.log_format, tracing::Level::INFO);
            tracing::info!(version = cli::args::VERSION, "controller starting");
            let result = live
                .options(Some(cloud), in_cluster, Mode::Auto, None)
                .and_then(|opts| cli::controller::run_controller(opts, health_addr));
            match result {
                Ok(()) => Ok(ExitCode::SUCCESS),
                Err(e) => {
                    tracing::error!(error = %format!("{e:#}"), "controller stopped");
                    Ok(ExitCode::from(2))
                }
            }
        }
        Command::Simulate { file, output, until, seed, packing, karpenter_version } => {
            let until = match until.as_deref().map(karpenter_tui::engine::api::duration::parse_go_duration) {
                Some(Err(e)) => {
                    eprintln!("error: --until: {e}");
                    return Ok(ExitCode::from(2));
                }
                Some(Ok(d)) => Some(d),
                None => None,
            };
            let scenario = match cli::simulate::load_scenario(&file, packing.map(Into::into), karpenter_version) {
                Ok(s) => s,
                Err(e) => {
                    eprintln!("error: {e}");
                    return Ok(ExitCode::from(2));
                }
            };
            let report = match karpenter_tui::sim::run::run(&scenario, until, seed) {
                Ok(r) => r,
                Err(e) => {
                    eprintln!("error: {e}");
                    return Ok(ExitCode::from(2));
                }
            };
            match output {
                Output::Json => emit(&format!("{}\n", report.to_json())),
                Output::Table => emit(&karpenter_tui::sim::report::render_table(&report)),
            }
        }
        Command::Catalog { region, source, output } => {
            let catalog = match cli::catalog::load(matches!(source, Source::Kwok), &region, None) {
                Ok(c) => c,
                Err(e) => {
                    eprintln!("error: {e:#}");
                    return Ok(ExitCode::from(2));
                }
            };
            match output {
                Output::Json => emit(&format!("{}\n", serde_json::to_string_pretty(&report::catalog_json(&catalog))?)),
                Output::Table => emit(&report::catalog_table(&catalog)),
            }
        }
        Command::Plan {
            file,
            kube,
            source,
            cloud,
            profile,
            region,
            output,
            feature_gates,
            packing,
            karpenter_version,
            scheduler_config,
            log,
        } => {
            // Stdout is the plan; stderr says what went wrong on the way (a watch failing, prices not readable).
            logging::to_stderr(log.log_format, tracing::Level::WARN);
            let gates = match karpenter_tui::controller::settings::FeatureGates::default()
                .with_flag(feature_gates.as_deref().unwrap_or_default())
            {
                Ok(g) => g,
                Err(e) => {
                    eprintln!("error: --feature-gates: {e}");
                    return Ok(ExitCode::from(2));
                }
            };
            // Bad YAML is said before minutes are spent discovering instance types.
            let file_version = karpenter_version.unwrap_or(KarpenterVersion::NEWEST);
            let spread = match cli::args::scheduler_config_flag(scheduler_config.as_deref()) {
                Ok(c) => c.unwrap_or_default(),
                Err(e) => {
                    eprintln!("error: {e:#}");
                    return Ok(ExitCode::from(2));
                }
            };
            let manifests = match file.as_deref().map(|f| cli::plan::load(f, file_version)) {
                None => None,
                Some(Ok(mut m)) => {
                    if let Err(e) = cli::args::check_default_spread(&spread, file_version) {
                        eprintln!("error: {e:#}");
                        return Ok(ExitCode::from(2));
                    }
                    m.set_default_spread(spread.default_constraints());
                    Some(m)
                }
                Some(Err(e)) => {
                    eprintln!("error: {e:#}");
                    return Ok(ExitCode::from(2));
                }
            };
            let catalog = match cli::args::plan_catalog(source, cloud, profile, region) {
                Ok(c) => c,
                Err(e) => {
                    eprintln!("error: {e:#}");
                    return Ok(ExitCode::from(2));
                }
            };
            let packing = packing.map(Into::into).unwrap_or_default();
            match manifests {
                None => {
                    let choices =
                        cli::live::PlanChoices { gates, packing, version: karpenter_version, default_spread: spread };
                    plan_live(&kube, &catalog, output, &choices)
                }
                Some(m) => plan_manifests(&m, &catalog, output, gates, packing, file_version),
            }
        }
    }
}

fn plan_live(
    kube: &cli::args::KubeArgs,
    catalog: &karpenter_tui::engine::catalog::Catalog,
    output: Output,
    choices: &cli::live::PlanChoices,
) -> anyhow::Result<ExitCode> {
    let format = match output {
        Output::Json => cli::live::PlanOutput::Json,
        Output::Table => cli::live::PlanOutput::Table,
    };
    let timeout = std::time::Duration::from_secs(kube.sync_timeout_secs);
    match cli::live::plan(&kube.connect(false), catalog, timeout, format, choices) {
        Ok(text) => emit(&text),
        Err(e) => {
            eprintln!("error: {e:#}");
            Ok(ExitCode::from(2))
        }
    }
}

fn plan_manifests(
    manifests: &karpenter_tui::engine::manifests::ClusterObjects,
    catalog: &karpenter_tui::engine::catalog::Catalog,
    output: Output,
    gates: karpenter_tui::controller::settings::FeatureGates,
    packing: karpenter_tui::engine::packing::Packing,
    version: KarpenterVersion,
) -> anyhow::Result<ExitCode> {
    let gates = gates.for_version(version);
    let result = cli::plan::plan_packed(manifests, catalog, gates, packing);
    let now = chrono::Utc::now().timestamp_millis();
    let (pass, outlook) = cli::plan::disruption_with(manifests, catalog, &result, now, gates, version);
    let packed = cli::plan::packing_comparison(manifests, catalog, gates);
    let mut notes = manifests.notes.clone();
    notes.extend(karpenter_tui::engine::catalog::classes::pricing_notes(&manifests.nodepools, &manifests.nodeclasses));
    match output {
        Output::Json => {
            let mut v = cli::plan::to_json(manifests, &result);
            if let Some(map) = v.as_object_mut() {
                map.insert("karpenterVersion".into(), serde_json::json!(version));
                map.insert("packing".into(), cli::plan::packing_json(&packed, packing));
                map.insert("disruption".into(), cli::plan::disruption_json(&pass, &outlook));
                map.insert("notes".into(), serde_json::json!(notes));
            }
            emit(&format!("{}\n", serde_json::to_string_pretty(&v)?))
        }
        Output::Table => emit(&format!(
            "{}Karpenter {version} decisions\n\n{}{}{}",
            cli::plan::notes_table(&notes),
            cli::plan::to_table(&result),
            cli::plan::packing_table(&packed, packing),
            cli::plan::disruption_table(&pass, &outlook)
        )),
    }
}

/// Writes a command's output. A closed pipe (`| head`) is not an error worth a panic or a message.
fn emit(text: &str) -> anyhow::Result<ExitCode> {
    emit_bytes(text.as_bytes())
}

fn emit_bytes(bytes: &[u8]) -> anyhow::Result<ExitCode> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(ExitCode::SUCCESS),
        Err(e) => Err(e.into()),
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // Before any thread exists: one allocator arena for the commands that hold a cluster for long (see
    // `memory::limit_arenas`); `simulate` is a batch run whose speed is measured, and keeps the allocator's defaults.
    if !matches!(cli.command, Some(Command::Simulate { .. })) {
        karpenter_tui::memory::limit_arenas();
    }
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
