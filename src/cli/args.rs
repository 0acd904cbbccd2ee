//! The command line. Each flag is declared once, in the group it belongs to, and a command takes exactly the groups
//! that mean something for it, so a flag given where it has no effect is refused by the parser instead of being
//! ignored (`simulate --cloud aws`, `catalog --kubeconfig`). The README's Commands table is checked against this
//! in tests/cli_args.rs.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

use super::catalog;
use super::live_dashboard::{AwsChoice, CloudChoice, LiveOptions};
use super::logging::LogFormat;
use crate::engine::disruption::gate::Mode;
use crate::engine::packing::Packing;
use crate::engine::version::KarpenterVersion;
use crate::kube::connect::ConnectOptions;

/// The version and the git commit the binary was built from (build.rs), as `--version` prints it.
pub const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (commit ", env!("KARPENTER_TUI_GIT_COMMIT"), ")");

#[derive(Parser, Debug)]
#[command(name = "karpenter-tui", version = VERSION, about = "See and steer Karpenter-style node autoscaling")]
// The flags before a subcommand are the live dashboard's: `karpenter-tui --cloud aws plan` is refused rather than
// quietly planning without the cloud.
#[command(args_conflicts_with_subcommands = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    /// The dashboard on the simulated world (same as `demo`), optionally playing SCENARIO.
    #[arg(long, value_name = "SCENARIO", num_args = 0..=1, default_missing_value = "",
          conflicts_with_all = ["KubeArgs", "AwsArgs", "ElectionArgs", "cloud", "region", "metrics_addr"])]
    pub sim: Option<String>,
    #[command(flatten)]
    pub live: LiveArgs,
    /// Where the engine gets instances on a live cluster: aws (EC2 through CreateFleet) or kwok (Node objects
    /// created directly, for test clusters). Without it the engine observes.
    #[arg(long, value_enum)]
    pub cloud: Option<CloudArg>,
    /// Serve Prometheus metrics at http://ADDR/metrics while the dashboard runs (docs/metrics.md); off by default.
    #[arg(long, value_name = "ADDR")]
    pub metrics_addr: Option<SocketAddr>,
    #[command(flatten)]
    pub ui: UiArgs,
    #[command(flatten)]
    pub log: LogArgs,
}

impl Cli {
    /// `--sim [SCENARIO]` as the `demo` command it stands for, with the dashboard's look and log format.
    pub fn sim_as_demo(&mut self) -> Option<Command> {
        let s = self.sim.take()?;
        Some(Command::Demo {
            scenario: (!s.is_empty()).then_some(s),
            speed: None,
            packing: self.live.packing,
            karpenter_version: self.live.karpenter_version,
            ui: self.ui.clone(),
            log: self.log,
        })
    }
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// The dashboard on an embedded simulated cluster and cloud: nothing to install, no cluster needed.
    Demo {
        /// A scenario file to play instead of the built-in demo (scenarios/*.yaml).
        scenario: Option<String>,
        /// Simulated seconds per real second.
        #[arg(long)]
        speed: Option<f64>,
        /// How provisioning sizes new NodeClaims, over the scenario's `settings.packing`.
        #[arg(long, value_enum)]
        packing: Option<PackingArg>,
        /// Whose decisions and validation: 1.14 or 1.15, over the scenario's `settings.karpenterVersion`.
        #[arg(long, value_name = "VERSION")]
        karpenter_version: Option<KarpenterVersion>,
        #[command(flatten)]
        ui: UiArgs,
        #[command(flatten)]
        log: LogArgs,
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
        /// How provisioning sizes new NodeClaims, over the scenario's `settings.packing`.
        #[arg(long, value_enum)]
        packing: Option<PackingArg>,
        /// Whose decisions and validation: 1.14 or 1.15, over the scenario's `settings.karpenterVersion`.
        #[arg(long, value_name = "VERSION")]
        karpenter_version: Option<KarpenterVersion>,
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
    /// (deploy/).
    Controller {
        /// Use the pod's service account instead of a kubeconfig.
        #[arg(long, conflicts_with_all = ["kubeconfig", "context"])]
        in_cluster: bool,
        /// Where /healthz, /readyz and /metrics (Prometheus) answer.
        #[arg(long, default_value = "0.0.0.0:8081")]
        health_addr: SocketAddr,
        /// Where the engine gets instances: aws (EC2 through CreateFleet) or kwok (Node objects created directly).
        #[arg(long, value_enum, required = true)]
        cloud: CloudArg,
        #[command(flatten)]
        live: LiveArgs,
        #[command(flatten)]
        log: LogArgs,
    },
    /// What would be provisioned for the pending pods and disrupted now, and why; writes nothing. Reads the
    /// cluster of the kubeconfig context, or a set of manifests with --file.
    Plan {
        /// Multi-document YAML instead of a cluster: NodePools, EC2NodeClasses, Pods, Deployments, DaemonSets,
        /// Nodes, NodeClaims, PDBs, PVCs, PVs, StorageClasses, Namespaces.
        #[arg(short, long, conflicts_with = "KubeArgs")]
        file: Option<String>,
        #[command(flatten)]
        kube: KubeArgs,
        /// The embedded catalog to plan with: aws (instance types and on-demand prices as of the table's date)
        /// or kwok.
        #[arg(long, value_enum, conflicts_with = "cloud")]
        source: Option<Source>,
        /// aws: plan with the instance types and prices the AWS API gives for the region now (as the dashboard with
        /// --cloud aws does), instead of the embedded table; kwok: the KWOK catalog.
        #[arg(long, value_enum)]
        cloud: Option<CloudArg>,
        /// --cloud aws: the AWS profile (default: $AWS_PROFILE, then the default chain).
        #[arg(long)]
        profile: Option<String>,
        /// The region whose instance types and prices apply (with --cloud aws default: $AWS_REGION or the
        /// profile's; otherwise us-east-1).
        #[arg(long)]
        region: Option<String>,
        #[arg(short, long, value_enum, default_value = "table")]
        output: Output,
        /// The feature gates of the Karpenter the plan stands in for (`NodeOverlay=true` applies the NodeOverlays
        /// found in the cluster or the file).
        #[arg(long, value_name = "GATES")]
        feature_gates: Option<String>,
        /// How the provisioning pass sizes new NodeClaims (default upstream).
        #[arg(long, value_enum)]
        packing: Option<PackingArg>,
        /// Whose decisions and validation to follow: 1.14 or 1.15 (default: on a cluster, the version of the
        /// upstream Karpenter found there, else 1.15; with --file, 1.15).
        #[arg(long, value_name = "VERSION")]
        karpenter_version: Option<KarpenterVersion>,
        /// Karpenter v1.15's `--scheduler-config`: a YAML or JSON document `{podTopologySpread: {defaultConstraints:
        /// [...]}}`, or a file holding one. Pods that declare no topology spread get these constraints, with a selector
        /// deduced from their Services and controller (ReplicaSet, StatefulSet, ReplicationController).
        #[arg(long, value_name = "FILE|DOCUMENT")]
        scheduler_config: Option<String>,
        #[command(flatten)]
        log: LogArgs,
    },
    /// Print a shell completion script: `source <(karpenter-tui completions bash)`.
    Completions {
        #[arg(value_enum)]
        shell: ShellArg,
    },
    /// Print the manual page (roff): `karpenter-tui man > karpenter-tui.1`.
    Man,
}

/// The shells `completions` writes for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ShellArg {
    Bash,
    Zsh,
    Fish,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Output {
    Table,
    Json,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum CloudArg {
    Aws,
    Kwok,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Source {
    Aws,
    Kwok,
}

/// `--mode`, so clap lists the values and refuses others.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ModeArg {
    Auto,
    Approve,
    DryRun,
}

impl From<ModeArg> for Mode {
    fn from(m: ModeArg) -> Mode {
        match m {
            ModeArg::Auto => Mode::Auto,
            ModeArg::Approve => Mode::Approve,
            ModeArg::DryRun => Mode::DryRun,
        }
    }
}

/// `--packing`, so clap lists the values and refuses others.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum PackingArg {
    /// Karpenter's decisions.
    Upstream,
    /// NodeClaims sized for the cheapest fleet.
    Cost,
}

impl From<PackingArg> for Packing {
    fn from(p: PackingArg) -> Packing {
        match p {
            PackingArg::Upstream => Packing::Upstream,
            PackingArg::Cost => Packing::Cost,
        }
    }
}

/// Which cluster, and how long to wait for it.
#[derive(Args, Debug, Clone, Default)]
pub struct KubeArgs {
    /// Kubeconfig file (default: $KUBECONFIG, then ~/.kube/config).
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// Kubeconfig context (default: the current context).
    #[arg(long)]
    pub context: Option<String>,
    /// The cluster's name for tags and the header (default: from the context's cluster entry).
    #[arg(long)]
    pub cluster_name: Option<String>,
    /// How long to wait for the cluster's initial lists.
    #[arg(long, value_name = "SECONDS", default_value = "30")]
    pub sync_timeout_secs: u64,
}

impl KubeArgs {
    pub fn connect(&self, in_cluster: bool) -> ConnectOptions {
        ConnectOptions {
            kubeconfig: self.kubeconfig.clone(),
            context: self.context.clone(),
            cluster_name: self.cluster_name.clone(),
            in_cluster,
        }
    }
}

/// `--cloud aws` settings (the region is shared with the catalog: see `LiveArgs::region`).
#[derive(Args, Debug, Clone, Default)]
pub struct AwsArgs {
    /// --cloud aws: the AWS profile (default: $AWS_PROFILE, then the default chain).
    #[arg(long)]
    pub profile: Option<String>,
    /// --cloud aws: the SQS queue EventBridge sends interruption events to (default: interruption handling off).
    #[arg(long, value_name = "NAME")]
    pub interruption_queue: Option<String>,
    /// --cloud aws: the API server URL nodes join (default: the kubeconfig's server).
    #[arg(long, value_name = "URL")]
    pub cluster_endpoint: Option<String>,
    /// --cloud aws: the cluster CA bundle, base64 PEM (default: the kubeconfig's).
    #[arg(long, value_name = "BASE64")]
    pub cluster_ca_bundle: Option<String>,
    /// --cloud aws: the cluster's service CIDR for AL2023 nodes (default: the /16 holding the kubernetes
    /// Service's IP).
    #[arg(long, value_name = "CIDR")]
    pub service_cidr: Option<String>,
}

impl AwsArgs {
    /// The flags given, by name: they mean nothing without `--cloud aws`.
    fn given(&self) -> Vec<&'static str> {
        [
            ("--profile", self.profile.is_some()),
            ("--interruption-queue", self.interruption_queue.is_some()),
            ("--cluster-endpoint", self.cluster_endpoint.is_some()),
            ("--cluster-ca-bundle", self.cluster_ca_bundle.is_some()),
            ("--service-cidr", self.service_cidr.is_some()),
        ]
        .into_iter()
        .filter_map(|(name, given)| given.then_some(name))
        .collect()
    }
}

/// Acting on a live cluster: how, and the Lease that decides who acts.
#[derive(Args, Debug, Clone)]
pub struct ElectionArgs {
    /// Disruption mode when acting (default: approve in the dashboard, auto in the controller).
    #[arg(long, value_enum)]
    pub mode: Option<ModeArg>,
    /// Upstream Karpenter's feature gates, as its flag takes them: `NodeRepair=true,StaticCapacity=true`
    /// (over the config file's `controller.featureGates`; `karpenter-tui info` lists the gates and defaults).
    #[arg(long, value_name = "GATES")]
    pub feature_gates: Option<String>,
    /// The AWS provider's feature gates, as its flag takes them (Karpenter v1.15): `RebootForRepair=true` lets its
    /// repair policies reboot a node instead of replacing it; `NodeClassCEL=true` resolves EC2NodeClass kubelet
    /// expressions.
    #[arg(long, value_name = "GATES")]
    pub aws_feature_gates: Option<String>,
    /// Karpenter v1.15's `--legacy-node-repair`: with NodeRepair on, v1.14's forceful node repair runs instead of
    /// repair as a voluntary disruption (over the config file's `controller.legacyNodeRepair`).
    #[arg(long)]
    pub legacy_node_repair: bool,
    /// In approve mode, start v1.15's node repairs without waiting for an operator; other disruptions still wait
    /// (over the config file's `controller.repairsWithoutApproval`).
    #[arg(long)]
    pub repairs_without_approval: bool,
    /// Take the leader Lease at once instead of waiting for the holder's to expire.
    #[arg(long)]
    pub takeover: bool,
    /// Namespace of the `karpenter-tui` leader Lease.
    #[arg(long, value_name = "NAMESPACE", default_value = "kube-system")]
    pub lease_namespace: String,
}

/// Everything a command on a live cluster (the dashboard, the controller) takes besides `--cloud`.
#[derive(Args, Debug, Clone)]
pub struct LiveArgs {
    #[command(flatten)]
    pub kube: KubeArgs,
    #[command(flatten)]
    pub aws: AwsArgs,
    #[command(flatten)]
    pub election: ElectionArgs,
    /// The region whose prices and instance types apply (with --cloud aws, the AWS region; default: $AWS_REGION or
    /// the profile's, else us-east-1 for the embedded catalog).
    #[arg(long)]
    pub region: Option<String>,
    /// How provisioning sizes new NodeClaims: upstream (Karpenter's decisions) or cost (over the config file's
    /// `packing:`; with `--sim`, over the scenario's `settings.packing`).
    #[arg(long, value_enum)]
    pub packing: Option<PackingArg>,
    /// Whose decisions and validation to follow: 1.14 or 1.15 (over the config file's `karpenterVersion:`;
    /// default: the version of the upstream Karpenter found in the cluster, else 1.15).
    #[arg(long, value_name = "VERSION")]
    pub karpenter_version: Option<KarpenterVersion>,
    /// Karpenter v1.15's `--scheduler-config`: a YAML or JSON document `{podTopologySpread: {defaultConstraints:
    /// [...]}}`, or a file holding one. Pods that declare no topology spread get these constraints, with a selector
    /// deduced from their Services and controller (ReplicaSet, StatefulSet, ReplicationController).
    #[arg(long, value_name = "FILE|DOCUMENT")]
    pub scheduler_config: Option<String>,
}

/// The dashboards' look and rights.
#[derive(Args, Debug, Clone, Default)]
pub struct UiArgs {
    /// No action that changes the cluster is offered, and the backend refuses them.
    #[arg(long)]
    pub readonly: bool,
    /// Colour theme: dark, light, high-contrast, a name under the config's themes/, or a .toml path.
    #[arg(long)]
    pub theme: Option<String>,
    /// The Nodes & NodeClaims pane shows only the nodes (and NodeClaims) whose labels match, as `kubectl get -l`
    /// takes it: `k=v`, `k!=v`, `k in (a,b)`, `k notin (a,b)`, `k`, `!k`, comma-separated, all must hold.
    #[arg(long, short = 'l', value_name = "SELECTOR")]
    pub selector: Option<crate::ui::rows::NodeSelector>,
    /// Label keys to show as columns of the Nodes & NodeClaims pane (comma-separated), over the config file's
    /// `extraLabels`.
    #[arg(long, value_name = "K1,K2", value_delimiter = ',')]
    pub extra_labels: Vec<String>,
}

impl UiArgs {
    /// What the Nodes pane is narrowed to and shows more of.
    pub fn node_options(&self) -> NodeOptions {
        NodeOptions { selector: self.selector.clone(), extra_labels: self.extra_labels.clone() }
    }
}

/// `--selector` and `--extra-labels`, as the dashboards take them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeOptions {
    pub selector: Option<crate::ui::rows::NodeSelector>,
    pub extra_labels: Vec<String>,
}

impl NodeOptions {
    /// Sets them on the dashboard's state, the flag's extra labels over the config file's.
    pub fn apply(self, state: &mut crate::ui::app::AppState, config: &crate::config::Config) {
        let extra = if self.extra_labels.is_empty() { config.extra_labels.clone() } else { self.extra_labels };
        state.set_node_options(self.selector, extra);
    }
}

#[derive(Args, Debug, Clone, Copy, Default)]
pub struct LogArgs {
    /// Log lines as plain text (coloured only on a terminal) or JSON, one object per line.
    #[arg(long, value_enum, value_name = "FORMAT", default_value = "plain")]
    pub log_format: LogFormat,
}

/// `--feature-gates` and `--aws-feature-gates` as one list for [`crate::controller::settings::FeatureGates`], each
/// flag holding only its own gates (as upstream's two binaries' flags do).
fn gate_flags(core: Option<&str>, aws: Option<&str>) -> anyhow::Result<Option<String>> {
    use crate::controller::settings::FeatureGates;
    let names = |text: &str| -> Vec<String> {
        text.split(',')
            .filter_map(|e| e.split('=').next())
            .map(str::trim)
            .filter(|n| !n.is_empty())
            .map(String::from)
            .collect()
    };
    if let Some(n) =
        core.map(names).unwrap_or_default().into_iter().find(|n| FeatureGates::AWS_NAMES.contains(&n.as_str()))
    {
        anyhow::bail!("--feature-gates: {n} is the AWS provider's gate; give it with --aws-feature-gates");
    }
    if let Some(n) =
        aws.map(names).unwrap_or_default().into_iter().find(|n| !FeatureGates::AWS_NAMES.contains(&n.as_str()))
    {
        anyhow::bail!(
            "--aws-feature-gates: {n} is not an AWS provider gate (those are: {})",
            FeatureGates::AWS_NAMES.join(", ")
        );
    }
    Ok(match (core, aws) {
        (None, None) => None,
        (a, b) => Some([a, b].into_iter().flatten().collect::<Vec<_>>().join(",")),
    })
}

impl LiveArgs {
    /// The options of the dashboard (`ui`) or the controller (`ui: None`) on a live cluster.
    pub fn options(
        &self,
        cloud: Option<CloudArg>,
        in_cluster: bool,
        default_mode: Mode,
        ui: Option<&UiArgs>,
    ) -> anyhow::Result<LiveOptions> {
        let aws_only = self.aws.given();
        if !aws_only.is_empty() && cloud != Some(CloudArg::Aws) {
            anyhow::bail!("{} only apply with --cloud aws", aws_only.join(", "));
        }
        let kwok = cloud == Some(CloudArg::Kwok);
        let feature_gates =
            gate_flags(self.election.feature_gates.as_deref(), self.election.aws_feature_gates.as_deref())?;
        Ok(LiveOptions {
            connect: self.kube.connect(in_cluster),
            readonly: ui.is_some_and(|u| u.readonly),
            theme: ui.and_then(|u| u.theme.clone()),
            catalog: catalog::load(kwok, self.region.as_deref().unwrap_or("us-east-1"), None)?,
            sync_timeout: std::time::Duration::from_secs(self.kube.sync_timeout_secs),
            cloud: match cloud {
                None => None,
                Some(CloudArg::Kwok) => Some(CloudChoice::Kwok),
                Some(CloudArg::Aws) => Some(CloudChoice::Aws(AwsChoice {
                    aws: crate::aws::config::AwsOptions {
                        profile: self.aws.profile.clone(),
                        region: self.region.clone(),
                    },
                    interruption_queue: self.aws.interruption_queue.clone(),
                    cluster_endpoint: self.aws.cluster_endpoint.clone(),
                    cluster_ca_bundle: self.aws.cluster_ca_bundle.clone(),
                    service_cidr: self.aws.service_cidr.clone(),
                })),
            },
            mode: self.election.mode.map(Mode::from).unwrap_or(default_mode),
            settings: crate::controller::Settings::default(),
            feature_gates,
            packing: self.packing.map(Packing::from),
            karpenter_version: self.karpenter_version,
            scheduler_config: scheduler_config_flag(self.scheduler_config.as_deref())?,
            legacy_node_repair: self.election.legacy_node_repair,
            repairs_without_approval: self.election.repairs_without_approval,
            takeover: self.election.takeover,
            lease_namespace: self.election.lease_namespace.clone(),
        })
    }
}

/// `--scheduler-config`: a file holding the document, or the document itself (as upstream's flag takes it). Every
/// problem is named with its line and column; `None` without the flag.
pub fn scheduler_config_flag(
    value: Option<&str>,
) -> anyhow::Result<Option<crate::engine::api::scheduler_config::SchedulerConfig>> {
    let Some(value) = value else { return Ok(None) };
    let path = std::path::Path::new(value);
    let (text, source) = if path.is_file() {
        let text =
            std::fs::read_to_string(path).map_err(|e| anyhow::anyhow!("--scheduler-config: reading {value}: {e}"))?;
        (text, value.to_string())
    } else {
        (value.to_string(), "--scheduler-config".to_string())
    };
    crate::engine::api::strict::parse_scheduler_config_strict(&text, &source).map(Some).map_err(|errs| {
        let lines: Vec<String> = errs.iter().map(|e| e.to_string()).collect();
        anyhow::anyhow!("{}", lines.join("\n"))
    })
}

/// Default topology spread is Karpenter v1.15's: under 1.14 a configured one is an error rather than ignored.
pub fn check_default_spread(
    config: &crate::engine::api::scheduler_config::SchedulerConfig,
    version: KarpenterVersion,
) -> anyhow::Result<()> {
    if !config.is_empty() && !version.has_default_spread() {
        anyhow::bail!(
            "--scheduler-config: default topology spread is new in Karpenter 1.15, and the decisions followed are \
             {version}'s (--karpenter-version, or the Karpenter found in the cluster)"
        );
    }
    Ok(())
}

/// The catalog `plan` works with: the embedded one (`--source`), or with `--cloud aws` what the AWS API says now.
pub fn plan_catalog(
    source: Option<Source>,
    cloud: Option<CloudArg>,
    profile: Option<String>,
    region: Option<String>,
) -> anyhow::Result<crate::engine::catalog::Catalog> {
    if profile.is_some() && cloud != Some(CloudArg::Aws) {
        anyhow::bail!("--profile only applies with --cloud aws");
    }
    let kwok = source == Some(Source::Kwok) || cloud == Some(CloudArg::Kwok);
    if cloud == Some(CloudArg::Aws) {
        let opts = crate::aws::config::AwsOptions { profile, region };
        return catalog::discover_aws_blocking(&opts);
    }
    catalog::load(kwok, region.as_deref().unwrap_or("us-east-1"), None)
}
