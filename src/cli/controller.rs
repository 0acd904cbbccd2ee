//! `karpenter-tui controller`: the engine headless, for running in the cluster (deploy/). It competes for the
//! Lease, reconciles on every change while it holds it, logs what it does, answers `/healthz` (alive) and
//! `/readyz` (caches in sync) on the health address, and hands the Lease over on SIGTERM or Ctrl-C.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context as _, anyhow};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::kube::cache::Cache;
use crate::kube::leader::Role;

use super::live_dashboard::{LiveOptions, prepare};

/// Reconciles at least this often (timeouts and drains move with the clock).
const TICK: Duration = Duration::from_secs(1);

pub fn run_controller(opts: LiveOptions, health: SocketAddr) -> anyhow::Result<()> {
    tracing_subscriber::fmt().with_writer(std::io::stderr).with_max_level(tracing::Level::INFO).try_init().ok();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async move {
        let mut p = prepare(&opts, |_| false).await?;
        let Some(mut acting) = p.acting.take() else {
            return Err(anyhow!(
                "the controller cannot act in context {}: {}",
                p.conn.context,
                p.observe_reason.clone().unwrap_or_default()
            ));
        };
        let listener = tokio::net::TcpListener::bind(health)
            .await
            .with_context(|| format!("listening for health checks on {health}"))?;
        tokio::spawn(serve_health(listener, p.watches.cache.clone()));
        tracing::info!(context = %p.conn.context, mode = %acting.controller.mode(), %health, "controller started");
        let mut changed = p.watches.changed.clone();
        let mut role = p.role.clone();
        let mut tick = tokio::time::interval(TICK);
        let mut stop = Box::pin(shutdown_signal());
        loop {
            tokio::select! {
                _ = &mut stop => break,
                r = changed.changed() => if r.is_err() { break },
                _ = role.changed() => tracing::info!(role = ?*role.borrow(), "leadership changed"),
                _ = tick.tick() => {}
            }
            if *role.borrow() != Role::Leader {
                continue;
            }
            let m = match p.watches.cache.lock() {
                Ok(c) if c.synced() && c.failing().is_empty() => c.manifests(),
                Ok(_) => continue,
                Err(_) => return Err(anyhow!("the watch cache is poisoned")),
            };
            let report = acting.tick(&m, chrono::Utc::now().timestamp_millis()).await;
            for d in &report.done {
                tracing::info!("{d}");
            }
            for e in &report.errors {
                tracing::warn!("{e}");
            }
        }
        tracing::info!("stopping: handing over the lease");
        p.release().await;
        Ok(())
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

/// The two probes, over the smallest HTTP/1.1 that kubelet's probes need.
async fn serve_health(listener: tokio::net::TcpListener, cache: Arc<Mutex<Cache>>) {
    loop {
        let Ok((mut stream, _)) = listener.accept().await else { continue };
        let cache = cache.clone();
        tokio::spawn(async move {
            let mut buf = [0u8; 1024];
            let n = stream.read(&mut buf).await.unwrap_or(0);
            let request = String::from_utf8_lossy(&buf[..n]);
            let path = request.split_whitespace().nth(1).unwrap_or("/");
            let (status, body) = health_answer(path, cache.lock().map(|c| c.synced()).unwrap_or(false));
            let response = format!(
                "HTTP/1.1 {status}\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
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
        assert_eq!(health_answer("/metrics", true).0, "404 Not Found");
    }
}
