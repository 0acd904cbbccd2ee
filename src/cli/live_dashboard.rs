//! `karpenter-tui` against a kubeconfig: connect, check rights, look for an upstream Karpenter, read the cluster,
//! then hand the terminal to the same dashboard `demo` uses, over the live backend. Everything that can fail
//! before the dashboard starts fails here, on the plain terminal, with what to do about it.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, anyhow};

use crate::config::{Config, Paths, load_theme};
use crate::engine::catalog::Catalog;
use crate::engine::disruption::gate::Mode;
use crate::kube::connect::{ConnectOptions, connect};
use crate::kube::leader::{Elector, Role, identity};
use crate::kube::writer::Writer;
use crate::kube::{access, upstream, watch};
use crate::runtime::audit::AuditLog;
use crate::runtime::controller::Controller;
use crate::runtime::controller::acting::Acting;
use crate::runtime::controller::execute::Cloud;
use crate::runtime::dashboard::{Session, run};
use crate::runtime::live_driver::LiveDriver;
use crate::runtime::live_view::LiveInfo;
use crate::ui::action::KeyMap;
use crate::ui::app::{AppState, Msg, update};
use crate::ui::model::Leadership;

pub struct LiveOptions {
    pub connect: ConnectOptions,
    pub readonly: bool,
    pub theme: Option<String>,
    pub catalog: Catalog,
    pub sync_timeout: Duration,
    /// Where instances come from; `None` observes (the AWS provider is not built yet).
    pub cloud: Option<CloudChoice>,
    /// Disruption mode when acting.
    pub mode: Mode,
    pub takeover: bool,
    pub lease_namespace: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CloudChoice {
    Kwok,
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
    pub role: tokio::sync::watch::Receiver<Role>,
    elector: Option<(tokio::task::JoinHandle<()>, Elector)>,
}

impl Prepared {
    /// Stops competing for the Lease and hands it over if held.
    pub async fn release(self) {
        if let Some((task, elector)) = self.elector {
            task.abort();
            if let Err(e) = elector.release().await {
                tracing::warn!("handing over the lease: {e}");
            }
        }
    }
}

/// Connects, checks rights, looks for upstream Karpenter, waits for the initial lists, and sets up acting
/// (with leader election) when everything allows it. Fails before anything is shown, with what to do.
pub async fn prepare(opts: &LiveOptions, config_readonly: impl Fn(&str) -> bool) -> anyhow::Result<Prepared> {
    let conn = connect(&opts.connect).await?;
    eprintln!("connecting to {} (context {}) ...", conn.server, conn.context);
    let rights =
        access::check(&conn.client).await.with_context(|| format!("asking {} what this user may do", conn.server))?;
    if !rights.can_read() {
        return Err(anyhow!(
            "this user cannot watch what the engine reads in context {}; {}",
            conn.context,
            rights.summary().unwrap_or_default()
        ));
    }
    let upstream = upstream::detect(&conn.client).await;
    let mut watches = watch::spawn(conn.client.clone());
    if let Err(missing) = watches.wait_synced(opts.sync_timeout).await {
        return Err(anyhow!(
            "could not read the cluster at {} (context {}):\n  {}",
            conn.server,
            conn.context,
            missing.join("\n  ")
        ));
    }
    let readonly = opts.readonly || config_readonly(&conn.context) || !rights.can_write();
    let observe_reason = if let Some(u) = upstream {
        Some(format!("{u}; observing so the two never fight"))
    } else if opts.readonly || config_readonly(&conn.context) {
        Some("read-only".to_string())
    } else if let Some(missing) = rights.summary() {
        Some(format!("read-only: {missing}"))
    } else if opts.cloud.is_none() {
        Some("observing: no cloud provider (start with --cloud kwok; the AWS provider is not built yet)".to_string())
    } else {
        None
    };
    let writer = Writer::new(conn.client.clone(), readonly);
    let (tx, role) = tokio::sync::watch::channel(Role::Unknown);
    let (acting, elector) = match (observe_reason.is_none(), opts.cloud) {
        (true, Some(CloudChoice::Kwok)) => {
            let catalog = Arc::new(opts.catalog.clone());
            let now = chrono::Utc::now().timestamp_millis();
            let acting = Acting {
                controller: Controller::new(catalog.clone(), opts.mode, now),
                writer: writer.clone(),
                cloud: Cloud::Kwok { catalog },
            };
            let me = identity();
            let task = tokio::spawn(
                Elector::new(conn.client.clone(), &opts.lease_namespace, me.clone(), opts.takeover).run(tx),
            );
            let releaser = Elector::new(conn.client.clone(), &opts.lease_namespace, me, false);
            (Some(acting), Some((task, releaser)))
        }
        _ => (None, None),
    };
    Ok(Prepared { conn, watches, readonly, observe_reason, rights_summary: rights.summary(), acting, role, elector })
}

pub fn run_live(opts: LiveOptions) -> anyhow::Result<()> {
    let paths = Paths::resolve();
    let config = Config::load(&paths.config_file())?;
    let _guard = super::demo::init_logging(&paths);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async move {
        let mut p = prepare(&opts, |ctx| config.readonly_for(false, ctx)).await?;
        let theme = match config.theme_for(opts.theme.as_deref(), &p.conn.context) {
            Some(t) => load_theme(&paths, &t)?,
            None => crate::ui::theme::Theme::default(),
        };
        let (keymap, warnings) = KeyMap::new(&config.key_overrides(), p.readonly);
        let mut state = AppState::new(keymap, theme, false, 1.0);
        for w in warnings {
            update(&mut state, Msg::Warn(format!("config: {w}")));
        }
        if let Some(missing) = &p.rights_summary {
            update(&mut state, Msg::Warn(format!("read-only: {missing}")));
        }
        let info = LiveInfo {
            context: p.conn.context.clone(),
            cluster: p.conn.cluster_name.clone(),
            leadership: Leadership::Observing(p.observe_reason.clone().unwrap_or_else(|| "electing a leader".into())),
            clock: "live".into(),
        };
        tracing::info!(context = %p.conn.context, server = %p.conn.server, readonly = p.readonly, observe = ?p.observe_reason, "live dashboard starting");

        let (ctx, crx) = tokio::sync::mpsc::unbounded_channel();
        let (etx, erx) = tokio::sync::mpsc::unbounded_channel();
        let driver = LiveDriver {
            cache: p.watches.cache.clone(),
            changed: p.watches.changed.clone(),
            writer: Writer::new(p.conn.client.clone(), p.readonly),
            catalog: Arc::new(opts.catalog.clone()),
            info,
            acting: p.acting.take(),
            role: p.role.clone(),
        };
        let backend = tokio::spawn(driver.run(crx, etx));
        let session = Session {
            state,
            commands: ctx,
            events: erx,
            audit: AuditLog::new(paths.audit_file()),
            context: p.conn.context.clone(),
        };
        let result = run(session).await;
        backend.abort();
        p.release().await;
        result
    })
}
