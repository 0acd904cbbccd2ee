//! karpenter-tui: argument parsing and wiring only.

use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

use karpenter_tui::cli;
use karpenter_tui::engine::catalog::report;
use karpenter_tui::engine::disruption::gate::Mode;

#[derive(Parser)]
#[command(name = "karpenter-tui", version, about = "See and steer Karpenter-style node autoscaling")]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// The dashboard on the simulated world (same as `demo`), optionally playing SCENARIO.
    #[arg(long, value_name = "SCENARIO", num_args = 0..=1, default_missing_value = "")]
    sim: Option<String>,
    /// No action that changes the cluster is offered, and the backend refuses them.
    #[arg(long, global = true)]
    readonly: bool,
    /// Colour theme: dark, light, high-contrast, a name under the config's themes/, or a .toml path.
    #[arg(long, global = true)]
    theme: Option<String>,
    /// Kubeconfig file (default: $KUBECONFIG, then ~/.kube/config).
    #[arg(long, global = true, value_name = "FILE")]
    kubeconfig: Option<std::path::PathBuf>,
    /// Kubeconfig context (default: the current context).
    #[arg(long, global = true)]
    context: Option<String>,
    /// The cluster's name for tags and the header (default: from the context's cluster entry).
    #[arg(long, global = true)]
    cluster_name: Option<String>,
    /// Where the engine gets instances on a live cluster: aws (EC2 through CreateFleet) or kwok (Node objects
    /// created directly, for test clusters). Without it the engine observes.
    #[arg(long, global = true, value_enum)]
    cloud: Option<CloudArg>,
    /// --cloud aws: the AWS profile (default: $AWS_PROFILE, then the default chain).
    #[arg(long, global = true)]
    profile: Option<String>,
    /// --cloud aws: the SQS queue EventBridge sends interruption events to (default: interruption handling off).
    #[arg(long, global = true, value_name = "NAME")]
    interruption_queue: Option<String>,
    /// --cloud aws: the API server URL nodes join (default: the kubeconfig's server).
    #[arg(long, global = true, value_name = "URL")]
    cluster_endpoint: Option<String>,
    /// --cloud aws: the cluster CA bundle, base64 PEM (default: the kubeconfig's).
    #[arg(long, global = true, value_name = "BASE64")]
    cluster_ca_bundle: Option<String>,
    /// --cloud aws: the cluster's service CIDR for AL2023 nodes (default: the /16 holding the kubernetes
    /// Service's IP).
    #[arg(long, global = true, value_name = "CIDR")]
    service_cidr: Option<String>,
    /// Disruption mode when acting: auto, approve (default in the dashboard) or dry-run.
    #[arg(long, global = true)]
    mode: Option<String>,
    /// Take the leader Lease at once instead of waiting for the holder's to expire.
    #[arg(long, global = true)]
    takeover: bool,
    /// Namespace of the `karpenter-tui` leader Lease.
    #[arg(long, global = true, default_value = "kube-system")]
    lease_namespace: String,
    /// The dashboard on a live cluster: the region whose prices and instance types apply (with --cloud aws, the
    /// AWS region; default: $AWS_REGION or the profile's, else us-east-1 for the embedded catalog).
    #[arg(long)]
    region: Option<String>,
    /// The dashboard on a live cluster: how long to wait for the initial lists.
    #[arg(long, default_value = "30")]
    sync_timeout_secs: u64,
}

#[derive(Clone, Copy, ValueEnum)]
enum Output {
    Table,
    Json,
}

#[derive(Clone, Copy, ValueEnum)]
enum CloudArg {
    Aws,
    Kwok,
}

#[derive(Clone, Copy, ValueEnum)]
enum Source {
    Aws,
    Kwok,
}

#[derive(Subcommand)]
enum Command {
    /// The dashboard on an embedded simulated cluster and cloud: nothing to install, no cluster needed.
    Demo {
        /// A scenario file to play instead of the built-in demo (scenarios/*.yaml).
        scenario: Option<String>,
        /// Simulated seconds per real second.
        #[arg(long)]
        speed: Option<f64>,
    },
    /// Where configuration, themes, logs and the audit log live.
    Info,
    /// Replay a scenario on the simulated cluster and cloud, on a virtual clock, and report.
    Simulate {
        /// Scenario file (shared/spec/scenario.md; examples in scenarios/).
        file: String,
        #[arg(short, long, value_enum, default_value = "table")]
        output: Output,
        /// Stop at this simulated time instead of the scenario's `until` (Go duration: 90s, 2h).
        #[arg(long)]
        until: Option<String>,
        /// Override the scenario's seed.
        #[arg(long)]
        seed: Option<u64>,
    },
    /// The instance types, capacities, allocatable and prices the engine uses.
    Catalog {
        #[arg(long, default_value = "us-east-1")]
        region: String,
        #[arg(long, value_enum, default_value = "aws")]
        source: Source,
        #[arg(short, long, value_enum, default_value = "table")]
        output: Output,
    },
    /// The engine headless with leader election, logs to stderr and a health endpoint: for running in the cluster
    /// (deploy/). Needs --cloud.
    Controller {
        /// Use the pod's service account instead of a kubeconfig.
        #[arg(long)]
        in_cluster: bool,
        /// Where /healthz and /readyz answer.
        #[arg(long, default_value = "0.0.0.0:8081")]
        health_addr: std::net::SocketAddr,
    },
    /// What would be provisioned for the pending pods and disrupted now, and why; writes nothing. Reads the
    /// cluster of the kubeconfig context, or a set of manifests with --file.
    Plan {
        /// Multi-document YAML instead of a cluster: NodePools, EC2NodeClasses, Pods, Deployments, DaemonSets,
        /// Nodes, NodeClaims, PDBs, PVCs, PVs, StorageClasses, Namespaces.
        #[arg(short, long)]
        file: Option<String>,
        /// How long to wait for the cluster's initial lists.
        #[arg(long, default_value = "30")]
        sync_timeout_secs: u64,
        #[arg(long, value_enum, default_value = "aws")]
        source: Source,
        #[arg(long, default_value = "us-east-1")]
        region: String,
        #[arg(short, long, value_enum, default_value = "table")]
        output: Output,
    },
}

fn run(mut cli: Cli) -> anyhow::Result<ExitCode> {
    let command = match (cli.command.take(), cli.sim.take()) {
        (Some(c), _) => c,
        (None, Some(s)) => Command::Demo { scenario: (!s.is_empty()).then_some(s), speed: None },
        (None, None) => {
            let opts = match live_options(&cli, false, Mode::Approve) {
                Ok(o) => o,
                Err(e) => {
                    eprintln!("error: {e:#}");
                    return Ok(ExitCode::from(2));
                }
            };
            return match cli::live_dashboard::run_live(opts) {
                Ok(()) => Ok(ExitCode::SUCCESS),
                Err(e) => {
                    eprintln!("error: {e:#}");
                    Ok(ExitCode::from(2))
                }
            };
        }
    };
    match command {
        Command::Demo { scenario, speed } => {
            let opts = cli::demo::DemoOptions {
                scenario: scenario.map(Into::into),
                speed,
                readonly: cli.readonly,
                theme: cli.theme,
            };
            cli::demo::run_demo(opts)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Info => emit(&cli::demo::info()),
        Command::Controller { in_cluster, health_addr } => {
            let result = live_options(&cli, in_cluster, Mode::Auto)
                .and_then(|opts| cli::controller::run_controller(opts, health_addr));
            match result {
                Ok(()) => Ok(ExitCode::SUCCESS),
                Err(e) => {
                    eprintln!("error: {e:#}");
                    Ok(ExitCode::from(2))
                }
            }
        }
        Command::Simulate { file, output, until, seed } => {
            let until = match until.as_deref().map(karpenter_tui::engine::api::duration::parse_go_duration) {
                Some(Err(e)) => {
                    eprintln!("error: --until: {e}");
                    return Ok(ExitCode::from(2));
                }
                Some(Ok(d)) => Some(d),
                None => None,
            };
            let text = match std::fs::read_to_string(&file) {
                Ok(t) => t,
                Err(e) => {
                    eprintln!("error: reading {file}: {e}");
                    return Ok(ExitCode::from(2));
                }
            };
            let scenario = match karpenter_tui::sim::scenario::parse_scenario(&text, &file) {
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
        Command::Plan { file: None, source, region, output, sync_timeout_secs } => {
            let catalog = cli::catalog::load(matches!(source, Source::Kwok), &region, None)?;
            let opts = karpenter_tui::kube::connect::ConnectOptions {
                kubeconfig: cli.kubeconfig,
                context: cli.context,
                cluster_name: cli.cluster_name,
                in_cluster: false,
            };
            let format = match output {
                Output::Json => cli::live::PlanOutput::Json,
                Output::Table => cli::live::PlanOutput::Table,
            };
            match cli::live::plan(&opts, &catalog, std::time::Duration::from_secs(sync_timeout_secs), format) {
                Ok(text) => emit(&text),
                Err(e) => {
                    eprintln!("error: {e:#}");
                    Ok(ExitCode::from(2))
                }
            }
        }
        Command::Plan { file: Some(file), source, region, output, .. } => {
            let manifests = match cli::plan::load(&file) {
                Ok(m) => m,
                Err(e) => {
                    eprintln!("error: {e:#}");
                    return Ok(ExitCode::from(2));
                }
            };
            let catalog = cli::catalog::load(matches!(source, Source::Kwok), &region, None)?;
            let result = cli::plan::plan(&manifests, &catalog);
            let now = chrono::Utc::now().timestamp_millis();
            let (pass, outlook) = cli::plan::disruption(&manifests, &catalog, &result, now);
            match output {
                Output::Json => {
                    let mut v = cli::plan::to_json(&manifests, &result);
                    if let Some(map) = v.as_object_mut() {
                        map.insert("disruption".into(), cli::plan::disruption_json(&pass, &outlook));
                    }
                    emit(&format!("{}\n", serde_json::to_string_pretty(&v)?))
                }
                Output::Table => {
                    emit(&format!("{}{}", cli::plan::to_table(&result), cli::plan::disruption_table(&pass, &outlook)))
                }
            }
        }
    }
}

/// The live-cluster options shared by the dashboard and the controller.
fn live_options(cli: &Cli, in_cluster: bool, default_mode: Mode) -> anyhow::Result<cli::live_dashboard::LiveOptions> {
    let kwok = matches!(cli.cloud, Some(CloudArg::Kwok));
    let mode = match cli.mode.as_deref() {
        Some(m) => m.parse::<Mode>().map_err(|e| anyhow::anyhow!("--mode: {e}"))?,
        None => default_mode,
    };
    Ok(cli::live_dashboard::LiveOptions {
        connect: karpenter_tui::kube::connect::ConnectOptions {
            kubeconfig: cli.kubeconfig.clone(),
            context: cli.context.clone(),
            cluster_name: cli.cluster_name.clone(),
            in_cluster,
        },
        readonly: cli.readonly,
        theme: cli.theme.clone(),
        catalog: cli::catalog::load(kwok, cli.region.as_deref().unwrap_or("us-east-1"), None)?,
        sync_timeout: std::time::Duration::from_secs(cli.sync_timeout_secs),
        cloud: match cli.cloud {
            None => None,
            Some(CloudArg::Kwok) => Some(cli::live_dashboard::CloudChoice::Kwok),
            Some(CloudArg::Aws) => Some(cli::live_dashboard::CloudChoice::Aws(cli::live_dashboard::AwsChoice {
                aws: karpenter_tui::aws::config::AwsOptions {
                    profile: cli.profile.clone(),
                    region: cli.region.clone(),
                },
                interruption_queue: cli.interruption_queue.clone(),
                cluster_endpoint: cli.cluster_endpoint.clone(),
                cluster_ca_bundle: cli.cluster_ca_bundle.clone(),
                service_cidr: cli.service_cidr.clone(),
            })),
        },
        mode,
        takeover: cli.takeover,
        lease_namespace: cli.lease_namespace.clone(),
    })
}

/// Writes a command's output. A closed pipe (`| head`) is not an error worth a panic or a message.
fn emit(text: &str) -> anyhow::Result<ExitCode> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(ExitCode::SUCCESS),
        Err(e) => Err(e.into()),
    }
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
