//! `karpenter-tui controller`: the engine headless, for running in the cluster (deploy/). It competes for the
//! Lease, reconciles on every change while it holds it, logs what it does, answers `/healthz` (alive), `/readyz`
//! (caches in sync) and `/metrics` (Prometheus, docs/metrics.md) on the health address, and hands the Lease over on
//! SIGTERM or Ctrl-C.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context as _, anyhow};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::kube::cache::Cache;
use crate::kube::leader::Role;
use crate::shell::metrics::Metrics;

use super::live_dashboard::{LiveOptions, Wait, prepare_with, to_log};

/// Why the controller's loop woke.
#[derive(Debug, PartialEq, Eq)]
enum Wake {
    /// SIGTERM or Ctrl-C.
    Stop,
    /// The cache changed, the role changed, a notice came, or the controller's next wake is due: reconcile if
    /// leading.
    Work,
    /// The watches' sender is gone: the cache will never change again.
    WatchesStopped,
}

/// Waits for the next reason to reconcile, at most `wait` (until the controller's next wake). A closed channel is an
/// answer, not a reason to wake again at once: the role channel, once closed, is no longer polled (its last value
/// stands), and closed watches end the loop.
async fn next_wake(
    stop: &mut (impl std::future::Future<Output = ()> + Unpin),
    changed: &mut tokio::sync::watch::Receiver<u64>,
    role: &mut tokio::sync::watch::Receiver<Role>,
    role_open: &mut bool,
    signal: &Option<Arc<tokio::sync::Notify>>,
    wait: Duration,
) -> Wake {
    tokio::select! {
        _ = stop => Wake::Stop,
        r = changed.changed() => if r.is_err() { Wake::WatchesStopped } else { Wake::Work },
        r = role.changed(), if *role_open => {
            match r {
                Ok(()) => tracing::info!(role = ?*role.borrow(), "leadership changed"),
                Err(_) => *role_open = false,
            }
            Wake::Work
        }
        _ = crate::shell::acting::woken(signal) => Wake::Work,
        _ = tokio::time::sleep(wait) => Wake::Work,
    }
}

pub fn run_controller(mut opts: LiveOptions, health: SocketAddr) -> anyhow::Result<()> {
    // In the cluster the config file is where KARPENTER_TUI_CONFIG_DIR points (a mounted ConfigMap), if anywhere.
    let config_file = crate::config::Paths::resolve().config_file();
    let config = crate::config::Config::load(&config_file)?;
    let config_path = config_file.display().to_string();
    opts.settings = config.controller_settings(opts.mode, opts.feature_gates.as_deref(), opts.packing, &config_path)?;
    opts.karpenter_version = opts.karpenter_version.or(config.karpenter_version);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async move {
        let mut p = prepare_with(&opts, |_| false, to_log, Wait::Synced).await?;
        let metrics = Arc::new(Metrics::new(""));
        let Some(acting) = p.acting.take() else {
            return Err(anyhow!(
                "the controller cannot act in context {}: {}",
                p.conn.context,
                p.observe_reason.clone().unwrap_or_default()
            ));
        };
        let mut acting = acting.with_metrics(metrics.clone());
        let listener = tokio::net::TcpListener::bind(health)
            .await
            .with_context(|| format!("listening for health checks and metrics on {health} (--health-addr)"))?;
        tokio::spawn(serve_http(listener, p.watches.cache.clone(), Some(metrics)));
        tracing::info!(context = %p.conn.context, mode = %acting.controller.mode(), packing = %acting.controller.packing(), %health, "controller started");
        let mut changed = p.watches.changed.clone();
        let mut role = p.role.clone();
        let signal = acting.wake_signal();
        let mut role_open = true;
        let mut stop = Box::pin(shutdown_signal());
        let failure = loop {
            // A follower has nothing due: it waits for the role (or the cache) to change.
            let wait = if *role.borrow() == Role::Leader {
                acting.sleep_for(chrono::Utc::now().timestamp_millis())
            } else {
                Duration::from_millis(crate::shell::acting::IDLE_TICK as u64)
            };
            match next_wake(&mut stop, &mut changed, &mut role, &mut role_open, &signal, wait).await {
                Wake::Stop => break None,
                Wake::WatchesStopped => break Some(anyhow!("the cluster watches stopped")),
                Wake::Work => {}
            }
            if !p.electing() {
                break Some(anyhow!("leader election stopped"));
            }
            if *role.borrow() != Role::Leader {
                continue;
            }
            let m = match p.watches.cache.lock() {
                Ok(mut c) if c.synced() && c.failing().is_empty() => c.manifests(),
                Ok(_) => continue,
                Err(_) => break Some(anyhow!("the watch cache is poisoned")),
            };
            let report = acting.tick(&m, chrono::Utc::now().timestamp_millis()).await;
            for d in &report.done {
                tracing::info!("{d}");
            }
            for e in &report.errors {
                tracing::warn!("{e}");
            }
        };
        tracing::info!("stopping: handing over the lease");
        p.release().await;
        // The Lease is handed over first either way; a failure then exits non-zero so the pod is restarted.
        failure.map_or(Ok(()), Err)
    })
}

async fn shutdown_signal() {
    #[cfg(unix)]
    {
        let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(s) => s,
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
                return;
            }
        };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// The two probes and, with `metrics`, `/metrics`, over the smallest HTTP/1.1 that kubelet's probes and a
/// Prometheus scrape need.
pub async fn serve_http(listener: tokio::net::TcpListener, cache: Arc<Mutex<Cache>>, metrics: Option<Arc<Metrics>>) {
    loop {
        let mut stream = match listener.accept().await {
            Ok((s, _)) => s,
            Err(e) => {
                // Out of file descriptors, say: retrying at once would spin a core until it passes.
                tracing::warn!("health and metrics endpoint: accepting a connection: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let cache = cache.clone();
        let metrics = metrics.clone();
        tokio::spawn(async move {
            let mut buf = [0u8; 1024];
            let n = stream.read(&mut buf).await.unwrap_or(0);
            let request = String::from_utf8_lossy(&buf[..n]);
            let path = request.split_whitespace().nth(1).unwrap_or("/");
            // A scrape may ask with a query string (`/metrics?name[]=...`): every metric is answered.
            let path = path.split('?').next().unwrap_or(path);
            let (status, content_type, body) = match (path, &metrics) {
                ("/metrics", Some(m)) => {
                    let m = m.clone();
                    let cache = cache.clone();
                    let body = tokio::task::spawn_blocking(move || m.render(Some(&cache))).await.unwrap_or_default();
                    ("200 OK", crate::shell::metrics::CONTENT_TYPE, body)
                }
                _ => {
                    let (status, body) = health_answer(path, cache.lock().map(|c| c.synced()).unwrap_or(false));
                    (status, "text/plain", body.to_string())
                }
            };
            let response = format!(
                "HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = stream.write_all(response.as_bytes()).await;
        });
    }
}

fn health_answer(path: &str, synced: bool) -> (&'static str, &'static str) {
    match path {
        "/healthz" => ("200 OK", "ok\n"),
        "/readyz" if synced => ("200 OK", "ready\n"),
        "/readyz" => ("503 Service Unavailable", "caches not in sync\n"),
        _ => ("404 Not Found", "not found\n"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probes_answer_alive_and_ready_only_when_synced() {
        assert_eq!(health_answer("/healthz", false).0, "200 OK");
        assert_eq!(health_answer("/readyz", false).0, "503 Service Unavailable");
        assert_eq!(health_answer("/readyz", true).0, "200 OK");
        assert_eq!(health_answer("/nothing", true).0, "404 Not Found");
    }

    /// The loop's wait with every sender dropped: it must answer once for the watches and never spin on the
    /// closed role channel.
    #[tokio::test]
    async fn closed_channels_end_the_wait_instead_of_waking_it_forever() {
        let (changed_tx, mut changed) = tokio::sync::watch::channel(0u64);
        let (role_tx, mut role) = tokio::sync::watch::channel(Role::Leader);
        let hour = Duration::from_secs(3600);
        let mut stop = Box::pin(std::future::pending::<()>());
        let mut role_open = true;

        // The elector gone: one wake to notice, then the branch is off and the wait sleeps until its wait is over.
        drop(role_tx);
        assert_eq!(next_wake(&mut stop, &mut changed, &mut role, &mut role_open, &None, hour).await, Wake::Work);
        assert!(!role_open);
        let waited = tokio::time::timeout(
            Duration::from_millis(300),
            next_wake(&mut stop, &mut changed, &mut role, &mut role_open, &None, hour),
        )
        .await;
        assert!(waited.is_err(), "woke with nothing to do: {waited:?}");
        assert_eq!(*role.borrow(), Role::Leader, "the last role stands");

        // The watches gone: the loop is told to end.
        drop(changed_tx);
        assert_eq!(
            next_wake(&mut stop, &mut changed, &mut role, &mut role_open, &None, hour).await,
            Wake::WatchesStopped
        );
    }
}
