//! `karpenter-tui` against a kubeconfig: connect, check rights, look for an upstream Karpenter, read the cluster,
//! then hand the terminal to the same dashboard `demo` uses, over the live backend. Everything that can fail
//! before the dashboard starts fails here, on the plain terminal, with what to do about it.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, anyhow};

use crate::config::{Config, Paths, load_theme};
use crate::controller::Controller;
use crate::engine::catalog::Catalog;
use crate::engine::disruption::gate::Mode;
use crate::engine::version::KarpenterVersion;
use crate::kube::connect::{ConnectOptions, connect};
use crate::kube::leader::{Elector, Role, identity};
use crate::kube::writer::Writer;
use crate::kube::{access, upstream, watch};
use crate::protocol::view::Leadership;
use crate::protocol::{Command, Event};
use crate::shell::acting::Acting;
use crate::shell::live_driver::LiveDriver;
use crate::shell::live_picture::LiveInfo;
use crate::ui::action::KeyMap;
use crate::ui::app::{AppState, Msg, update};
use crate::ui::audit::AuditLog;
use crate::ui::terminal::{Session, run};

#[derive(Clone)]
pub struct LiveOptions {
    pub connect: ConnectOptions,
    pub readonly: bool,
    pub theme: Option<String>,
    pub catalog: Catalog,
    pub sync_timeout: Duration,
    /// Where instances come from; `None` observes.
    pub cloud: Option<CloudChoice>,
    /// Disruption mode when acting.
    pub mode: Mode,
    /// The controller's other settings (the config file's `controller:` block); its mode is `mode`.
    pub settings: crate::controller::Settings,
    /// `--feature-gates`, applied over the config file's when the settings are read.
    pub feature_gates: Option<String>,
    /// `--packing`, over the config file's `packing:` when the settings are read.
    pub packing: Option<crate::engine::packing::Packing>,
    /// The Karpenter version chosen by `--karpenter-version` or the config file (the flag wins); `None` takes the
    /// cluster's (see [`crate::kube::upstream::look`]).
    pub karpenter_version: Option<KarpenterVersion>,
    /// `--scheduler-config`, over the config settings' (none by default).
    pub scheduler_config: Option<crate::engine::api::scheduler_config::SchedulerConfig>,
    /// `--legacy-node-repair`, over the config file's `controller.legacyNodeRepair`.
    pub legacy_node_repair: bool,
    /// `--repairs-without-approval`, over the config file's `controller.repairsWithoutApproval`.
    pub repairs_without_approval: bool,
    pub takeover: bool,
    pub lease_namespace: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CloudChoice {
    Kwok,
    Aws(AwsChoice),
}

impl LiveOptions {
    /// The controller's settings: the config file's, in the mode the flags chose.
    pub fn controller_settings(&self) -> crate::controller::Settings {
        crate::controller::Settings {
            mode: self.mode,
            legacy_node_repair: self.settings.legacy_node_repair || self.legacy_node_repair,
            approve_repairs: self.settings.approve_repairs && !self.repairs_without_approval,
            scheduler_config: self.scheduler_config.clone().unwrap_or_else(|| self.settings.scheduler_config.clone()),
            ..self.settings.clone()
        }
    }
}

/// `--cloud aws` and its settings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AwsChoice {
    pub aws: crate::aws::config::AwsOptions,
    /// SQS queue name for interruption messages (none: interruption handling is off, as upstream).
    pub interruption_queue: Option<String>,
    /// Override the API server URL and CA bundle nodes join with (default: the kubeconfig's).
    pub cluster_endpoint: Option<String>,
    pub cluster_ca_bundle: Option<String>,
    /// The cluster's service CIDR for AL2023 nodes (default: the /16 holding the `kubernetes` Service's IP).
    pub service_cidr: Option<String>,
}

/// The /16 around the `default/kubernetes` Service's cluster IP: EKS's default service CIDRs are /16s.
async fn guess_service_cidr(client: &kube::Client) -> Option<String> {
    let api: kube::Api<k8s_openapi::api::core::v1::Service> = kube::Api::namespaced(client.clone(), "default");
    let svc = api.get("kubernetes").await.ok()?;
    let ip: std::net::Ipv4Addr = svc.spec?.cluster_ip?.parse().ok()?;
    let [a, b, _, _] = ip.octets();
    Some(format!("{a}.{b}.0.0/16"))
}

/// Connects to AWS, discovers instance types and prices, and starts the interruption queue's poller.
async fn aws_acting(
    choice: &AwsChoice,
    conn: &crate::kube::connect::Connection,
    writer: &Writer,
    settings: crate::controller::Settings,
    progress: Progress,
) -> anyhow::Result<Acting> {
    use crate::aws::cloud::{AwsCloud, PROVIDER_PREFIX};
    use crate::aws::launch::ClusterInfo;
    use crate::aws::nodeclass::AliasContext;
    use crate::aws::upkeep::{AwsUpkeep, poll_queue};
    let sdk = crate::aws::config::load(&choice.aws).await?;
    let version = conn
        .client
        .apiserver_version()
        .await
        .map(|v| format!("{}.{}", v.major.trim_end_matches('+'), v.minor.trim_end_matches('+')));
    let service_cidr = match &choice.service_cidr {
        Some(c) => Some(c.clone()),
        None => guess_service_cidr(&conn.client).await,
    };
    let cluster = ClusterInfo {
        name: conn.cluster_name.clone(),
        endpoint: Some(
            choice.cluster_endpoint.clone().unwrap_or_else(|| conn.server.trim_end_matches('/').to_string()),
        ),
        ca_bundle: choice.cluster_ca_bundle.clone().or_else(|| conn.ca_bundle.clone()),
        service_cidr,
    };
    let alias =
        AliasContext { k8s_version: version.unwrap_or_else(|_| "1.33".into()), ssm_prefix: "/aws/service".into() };
    let gates = settings.gates.for_version(settings.karpenter_version);
    let cloud = Arc::new(
        AwsCloud::new(&sdk, cluster, alias)
            .with_reserved_capacity(gates.reserved_capacity)
            .with_kubelet_expressions(gates.node_class_cel),
    );
    progress(&format!("discovering EC2 instance types in {} ...", cloud.region));
    let n = cloud
        .refresh_types()
        .await
        .context("listing EC2 instance types (check the credentials' ec2:Describe* rights)")?;
    for e in cloud.refresh_prices().await {
        tracing::warn!("{e}");
    }
    if let Err(e) = cloud.hydrate_templates().await {
        tracing::warn!("listing this cluster's launch templates: {e}");
    }
    tracing::info!(types = n, region = %cloud.region, "AWS cloud ready");
    let wake = Arc::new(tokio::sync::Notify::new());
    // Interruption notices: the queue's (with --interruption-queue) and the instance status poller's, which runs
    // either way, as upstream's does.
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    if let Some(name) = &choice.interruption_queue {
        let queue = crate::aws::sqs::Queue::resolve(&sdk, name).await?;
        tokio::spawn(poll_queue(queue, tx.clone(), wake.clone()));
    }
    let listed = cloud.clone();
    tokio::spawn(crate::aws::instancestatus::poll_statuses(
        cloud.ec2.clone(),
        move || listed.live_provider_ids(),
        tx,
        wake.clone(),
    ));
    let notices = Some(rx);
    let now = chrono::Utc::now().timestamp_millis();
    let static_catalog = Arc::new(
        crate::engine::catalog::aws::aws_catalog(&cloud.region, None, None, 0)
            .or_else(|_| crate::engine::catalog::aws::aws_catalog("us-east-1", None, None, 0))?,
    );
    Ok(Acting::new(
        Controller::with_settings(static_catalog, settings, now).with_provider_prefix(PROVIDER_PREFIX),
        writer.clone(),
        Box::new(crate::aws::cloud::AwsProvider::new(cloud.clone(), notices)),
        Some(AwsUpkeep::new(cloud, now, wake)),
    ))
}

/// A connected, synced cluster with everything decided about acting.
pub struct Prepared {
    pub conn: crate::kube::connect::Connection,
    pub watches: watch::Watches,
    pub readonly: bool,
    /// Why this instance won't act at all, or `None` when it may (subject to the Lease).
    pub observe_reason: Option<String>,
    pub rights_summary: Option<String>,
    pub acting: Option<Acting>,
    /// Whose decisions and validation apply, and why (the header and `info` show it).
    pub version: KarpenterVersion,
    pub version_source: String,
    pub role: tokio::sync::watch::Receiver<Role>,
    /// Kept so `role` stays open while this lives: a closed channel makes every `changed()` return at once,
    /// and a loop selecting on it would spin (when observing nobody else holds the sender).
    _role_tx: tokio::sync::watch::Sender<Role>,
    elector: Option<Election>,
}

/// The task competing for the Lease, and how to hand the Lease over.
struct Election {
    /// Watches `task`: if the elector ever stops (a panic), this instance is demoted so it stops acting.
    supervisor: tokio::task::JoinHandle<()>,
    task: tokio::task::AbortHandle,
    releaser: Elector,
}

impl Prepared {
    /// Stops competing for the Lease and hands it over if held.
    pub async fn release(self) {
        if let Some(e) = self.elector {
            e.supervisor.abort();
            e.task.abort();
            if let Err(err) = e.releaser.release().await {
                tracing::warn!("handing over the lease: {err}");
            }
        }
    }

    /// False once leader election has stopped for good (it only stops by panicking): the role is then a
    /// follower's forever, and a headless controller should exit so it is restarted.
    pub fn electing(&self) -> bool {
        self.elector.as_ref().is_some_and(|e| !e.supervisor.is_finished())
    }
}

/// Where progress before the dashboard goes: the plain terminal for the dashboard, the log for the controller.
pub type Progress = fn(&str);

fn to_terminal(line: &str) {
    eprintln!("{line}");
}

/// Progress as log lines, so a controller's output stays in its log format.
pub fn to_log(line: &str) {
    tracing::info!("{line}");
}

/// How much of the cluster `prepare` waits to have read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// Every kind listed: the headless controller, which has nothing to show meanwhile.
    Synced,
    /// The API server's first complete list: the dashboard, which shows the rest as it arrives.
    FirstList,
}

/// Connects, checks rights, looks for upstream Karpenter, starts the watches and sets up acting (with leader
/// election) when everything allows it, while the initial lists run; returns once the API server has answered
/// one of them, for the dashboard to show the rest as it arrives. Fails before anything is shown, with what to do.
pub async fn prepare(opts: &LiveOptions, config_readonly: impl Fn(&str) -> bool) -> anyhow::Result<Prepared> {
    prepare_with(opts, config_readonly, to_terminal, Wait::FirstList).await
}

/// `prepare`, saying what it does through `progress`, waiting for as much of the cluster as `wait` says.
pub async fn prepare_with(
    opts: &LiveOptions,
    config_readonly: impl Fn(&str) -> bool,
    progress: Progress,
    wait: Wait,
) -> anyhow::Result<Prepared> {
    let conn = connect(&opts.connect).await?;
    progress(&format!("connecting to {} (context {}) ...", conn.server, conn.context));
    let rights =
        access::check(&conn.client, !opts.controller_settings().scheduler_config.default_constraints().is_empty())
            .await
            .with_context(|| format!("asking {} what this user may do", conn.server))?;
    if !rights.can_read() {
        return Err(anyhow!(
            "this user cannot watch what the engine reads in context {}; {}",
            conn.context,
            rights.summary().unwrap_or_default()
        ));
    }
    // The lists run while the rest is set up: at thousands of pods they are most of the wait.
    let mut settings = opts.controller_settings();
    let mut watches = watch::spawn(conn.client.clone(), settings.scheduler_config.default_constraints());
    // One look: whether upstream Karpenter acts, and which release the cluster runs.
    let upstream::Upstream { active: upstream, version: detected } = upstream::look(&conn.client).await;
    let (version, version_source) = resolve_version(opts.karpenter_version, detected);
    tracing::info!(version = %version, source = %version_source, "Karpenter version");
    super::args::check_default_spread(&settings.scheduler_config, version)?;
    settings.karpenter_version = version;
    let readonly = opts.readonly || config_readonly(&conn.context) || !rights.can_write();
    let observe_reason = if let Some(u) = upstream {
        Some(format!("{u}; hands off so the two never fight"))
    } else if opts.readonly || config_readonly(&conn.context) {
        Some("read-only".to_string())
    } else if let Some(missing) = rights.summary() {
        Some(format!("read-only: {missing}"))
    } else if opts.cloud.is_none() {
        // The header says "observing: " before the reason; the reason doesn't repeat it.
        Some("no cloud provider (start with --cloud aws, or --cloud kwok on a test cluster)".to_string())
    } else {
        None
    };
    let writer = Writer::new(conn.client.clone(), readonly);
    let (tx, role) = tokio::sync::watch::channel(Role::Unknown);
    let (acting, elector) = match (observe_reason.is_none(), &opts.cloud) {
        (true, Some(choice)) => {
            let acting = match choice {
                CloudChoice::Kwok => {
                    let catalog = Arc::new(opts.catalog.clone());
                    let now = chrono::Utc::now().timestamp_millis();
                    Acting::new(
                        Controller::with_settings(catalog.clone(), settings, now),
                        writer.clone(),
                        Box::new(crate::kube::kwok::KwokCloud::new(catalog, writer.clone())),
                        None,
                    )
                }
                CloudChoice::Aws(aws) => aws_acting(aws, &conn, &writer, settings, progress).await?,
            };
            let me = identity();
            let elector = Elector::new(conn.client.clone(), &opts.lease_namespace, me.clone(), opts.takeover);
            let releaser = Elector::new(conn.client.clone(), &opts.lease_namespace, me, false);
            (Some(acting), Some(supervise(elector, tx.clone(), releaser)))
        }
        _ => (None, None),
    };
    let read = match wait {
        Wait::Synced => watches.wait_synced(opts.sync_timeout).await,
        Wait::FirstList => watches.wait_first_list(opts.sync_timeout).await,
    };
    if let Err(missing) = read {
        return Err(anyhow!(
            "could not read the cluster at {} (context {}):\n  {}",
            conn.server,
            conn.context,
            missing.join("\n  ")
        ));
    }
    Ok(Prepared {
        conn,
        watches,
        readonly,
        observe_reason,
        rights_summary: rights.summary(),
        acting,
        version,
        version_source,
        role,
        _role_tx: tx,
        elector,
    })
}

/// The version in force: the one chosen (flag or config file), else the cluster's upstream Karpenter's, else the
/// newest modelled; with where it came from, in words for the header and `info`.
pub fn resolve_version(
    chosen: Option<KarpenterVersion>,
    detected: Option<upstream::DetectedVersion>,
) -> (KarpenterVersion, String) {
    match (chosen, detected) {
        (Some(v), Some(d)) if d.version != v => {
            (v, format!("as set, though {} runs Karpenter {}", d.deployment, d.release))
        }
        (Some(v), _) => (v, "as set".to_string()),
        (None, Some(d)) => (d.version, format!("{} runs Karpenter {}", d.deployment, d.release)),
        (None, None) => (KarpenterVersion::NEWEST, "no upstream Karpenter found: the newest modelled".to_string()),
    }
}

/// Runs the elector; should it ever stop, the role says so and nothing acts on a Lease nobody renews.
fn supervise(elector: Elector, tx: tokio::sync::watch::Sender<Role>, releaser: Elector) -> Election {
    let inner = tokio::spawn(elector.run(tx.clone()));
    let task = inner.abort_handle();
    let supervisor = tokio::spawn(async move {
        let why = match inner.await {
            Err(e) if e.is_panic() => "panicked",
            _ => "stopped",
        };
        tracing::error!("leader election {why}; this instance no longer acts");
        tx.send_replace(Role::Follower { holder: format!("nobody known (leader election {why})") });
    });
    Election { supervisor, task, releaser }
}

/// The live dashboard; with `metrics_addr`, Prometheus metrics served there (`/metrics`) while it runs.
pub fn run_live(
    mut opts: LiveOptions,
    log_format: super::logging::LogFormat,
    metrics_addr: Option<std::net::SocketAddr>,
    nodes: super::args::NodeOptions,
) -> anyhow::Result<()> {
    let paths = Paths::resolve();
    let config = Config::load(&paths.config_file())?;
    let config_path = paths.config_file().display().to_string();
    opts.settings = config.controller_settings(opts.mode, opts.feature_gates.as_deref(), opts.packing, &config_path)?;
    opts.karpenter_version = opts.karpenter_version.or(config.karpenter_version);
    let _guard = super::logging::to_file(&paths, log_format);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async move {
        // A taken address fails before anything else is done.
        let metrics_listener = match metrics_addr {
            Some(addr) => Some(
                tokio::net::TcpListener::bind(addr)
                    .await
                    .with_context(|| format!("listening for metrics on {addr} (--metrics-addr)"))?,
            ),
            None => None,
        };
        let p = prepare(&opts, |ctx| config.readonly_for(false, ctx)).await?;
        let metrics = metrics_listener.map(|listener| {
            let metrics = Arc::new(crate::shell::metrics::Metrics::new(&crate::shell::operator()));
            tokio::spawn(super::controller::serve_http(listener, p.watches.cache.clone(), Some(metrics.clone())));
            tracing::info!(addr = ?metrics_addr, "serving metrics");
            metrics
        });
        let theme = match config.theme_for(opts.theme.as_deref(), &p.conn.context) {
            Some(t) => load_theme(&paths, &t)?,
            None => crate::ui::theme::Theme::default(),
        };
        let (keymap, warnings) = KeyMap::new(&config.key_overrides(), p.readonly);
        let mut state = AppState::new(keymap, theme, false, 1.0);
        nodes.apply(&mut state, &config);
        for w in warnings {
            update(&mut state, Msg::Warn(format!("config: {w}")));
        }
        if let Some(missing) = &p.rights_summary {
            update(&mut state, Msg::Warn(format!("read-only: {missing}")));
        }
        tracing::info!(context = %p.conn.context, server = %p.conn.server, readonly = p.readonly, observe = ?p.observe_reason, "live dashboard starting");

        // The contexts `:ctx` offers: the kubeconfig's, as kubectl lists them.
        state.contexts = crate::kube::connect::read_kubeconfig(opts.connect.kubeconfig.as_ref())
            .map(|kc| kc.contexts.iter().map(|c| c.name.clone()).collect())
            .unwrap_or_default();
        let context = p.conn.context.clone();
        let (ctx, crx) = tokio::sync::mpsc::unbounded_channel();
        let (etx, erx) = tokio::sync::mpsc::unbounded_channel();
        let readonly_for = move |c: &str| config.readonly_for(false, c);
        let backend = tokio::spawn(supervise_backend(opts, readonly_for, p, metrics, crx, etx));
        let session = Session {
            state,
            commands: ctx,
            events: erx,
            audit: AuditLog::new(paths.audit_file()),
            context,
        };
        let result = run(session).await;
        // The supervisor hands the Lease over once the UI's Shutdown reaches it; give it the moment it needs.
        let _ = tokio::time::timeout(Duration::from_secs(5), backend).await;
        result
    })
}

/// The live driver of a prepared context.
fn driver_for(
    p: &mut Prepared,
    opts: &LiveOptions,
    metrics: Option<&Arc<crate::shell::metrics::Metrics>>,
) -> LiveDriver {
    let info = LiveInfo {
        context: p.conn.context.clone(),
        cluster: p.conn.cluster_name.clone(),
        leadership: Leadership::Observing(p.observe_reason.clone().unwrap_or_else(|| "electing a leader".into())),
        clock: "live".into(),
        // The gates the cluster's version has: v1.15's own change nothing under 1.14.
        gates: opts.settings.gates.for_version(p.version),
        packing: opts.settings.packing,
        version: p.version,
        version_source: p.version_source.clone(),
    };
    LiveDriver {
        cache: p.watches.cache.clone(),
        changed: p.watches.changed.clone(),
        writer: Writer::new(p.conn.client.clone(), p.readonly),
        catalog: Arc::new(opts.catalog.clone()),
        info,
        acting: p.acting.take().map(|a| match metrics {
            Some(m) => a.with_metrics(m.clone()),
            None => a,
        }),
        role: p.role.clone(),
        wakes: Default::default(),
    }
}

/// The dashboard's backend: the driver of the context in use, with `:ctx` switching it in place. A switch
/// prepares the new context first (connection, rights, the first lists) and only then stops the old driver and
/// hands its Lease over, so a context that can't be reached leaves the dashboard where it was. A switched-to
/// context is observed: the cloud flags (`--cloud aws --cluster-name ...`) name the cluster the dashboard started
/// on, not the new one.
pub async fn supervise_backend(
    opts: LiveOptions,
    readonly_for: impl Fn(&str) -> bool,
    mut p: Prepared,
    metrics: Option<Arc<crate::shell::metrics::Metrics>>,
    mut commands: tokio::sync::mpsc::UnboundedReceiver<Command>,
    events: tokio::sync::mpsc::UnboundedSender<Event>,
) {
    let driver = driver_for(&mut p, &opts, metrics.as_ref());
    let (mut to_driver, rx) = tokio::sync::mpsc::unbounded_channel();
    let mut task = tokio::spawn(driver.run(rx, events.clone()));
    while let Some(cmd) = commands.recv().await {
        match cmd {
            Command::SwitchContext { request, context } => {
                let _ = events.send(Event::Progress(format!("connecting to context {context} ...")));
                let mut o = LiveOptions {
                    connect: ConnectOptions {
                        context: Some(context.clone()),
                        cluster_name: None,
                        ..opts.connect.clone()
                    },
                    cloud: None,
                    ..opts.clone()
                };
                o.takeover = false;
                let outcome = match prepare_with(&o, &readonly_for, quiet, Wait::FirstList).await {
                    Ok(mut next) => {
                        let _ = to_driver.send(Command::Shutdown);
                        task.abort();
                        std::mem::swap(&mut p, &mut next);
                        next.release().await;
                        let driver = driver_for(&mut p, &o, None);
                        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
                        to_driver = tx;
                        task = tokio::spawn(driver.run(rx, events.clone()));
                        tracing::info!(context = %p.conn.context, server = %p.conn.server, "switched context");
                        Ok(format!("context {context} ({}): observing", p.conn.server))
                    }
                    Err(e) => {
                        tracing::warn!(context, error = %format!("{e:#}"), "could not switch context");
                        Err(format!("context {context}: {e:#}; still on {}", p.conn.context))
                    }
                };
                let _ = events.send(Event::Done { request, outcome });
            }
            Command::Shutdown => {
                let _ = to_driver.send(Command::Shutdown);
                break;
            }
            other => {
                let _ = to_driver.send(other);
            }
        }
    }
    let _ = tokio::time::timeout(Duration::from_secs(2), &mut task).await;
    task.abort();
    p.release().await;
}

/// Progress of a context switch goes to the log: the terminal belongs to the dashboard.
fn quiet(line: &str) {
    tracing::info!("{line}");
}
