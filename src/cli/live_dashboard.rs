//! `karpenter-tui` against a kubeconfig: connect, check rights, look for an upstream Karpenter, read the cluster,
//! then hand the terminal to the same dashboard `demo` uses, over the live backend. Everything that can fail
//! before the dashboard starts fails here, on the plain terminal, with what to do about it.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, anyhow};

use crate::config::{Config, Paths, load_theme};
use crate::engine::catalog::Catalog;
use crate::kube::connect::{ConnectOptions, connect};
use crate::kube::writer::Writer;
use crate::kube::{access, upstream, watch};
use crate::runtime::audit::AuditLog;
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
        let conn = connect(&opts.connect).await?;
        eprintln!("connecting to {} (context {}) ...", conn.server, conn.context);
        let rights = access::check(&conn.client)
            .await
            .with_context(|| format!("asking {} what this user may do", conn.server))?;
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

        let readonly = config.readonly_for(opts.readonly, &conn.context) || !rights.can_write();
        let theme = match config.theme_for(opts.theme.as_deref(), &conn.context) {
            Some(t) => load_theme(&paths, &t)?,
            None => crate::ui::theme::Theme::default(),
        };
        let (keymap, warnings) = KeyMap::new(&config.key_overrides(), readonly);
        let mut state = AppState::new(keymap, theme, false, 1.0);
        for w in warnings {
            update(&mut state, Msg::Warn(format!("config: {w}")));
        }
        let mut why = vec![upstream.clone().unwrap_or_else(|| "observing: this build does not act on live clusters".into())];
        if let Some(missing) = rights.summary() {
            why.push(missing);
            update(&mut state, Msg::Warn(format!("read-only: {}", rights.summary().unwrap_or_default())));
        }
        let info = LiveInfo {
            context: conn.context.clone(),
            cluster: conn.cluster_name.clone(),
            leadership: Leadership::Observing(why.join("; ")),
            clock: "live".into(),
        };
        tracing::info!(context = %conn.context, server = %conn.server, readonly, upstream = ?upstream, "live dashboard starting");

        let (ctx, crx) = tokio::sync::mpsc::unbounded_channel();
        let (etx, erx) = tokio::sync::mpsc::unbounded_channel();
        let driver = LiveDriver {
            cache: watches.cache.clone(),
            changed: watches.changed.clone(),
            writer: Writer::new(conn.client.clone(), readonly),
            catalog: Arc::new(opts.catalog),
            info,
        };
        let backend = tokio::spawn(driver.run(crx, etx));
        let session =
            Session { state, commands: ctx, events: erx, audit: AuditLog::new(paths.audit_file()), context: conn.context.clone() };
        let result = run(session).await;
        backend.abort();
        drop(watches);
        result
    })
}
