//! The live backend behind the dashboard on a real cluster: pictures from the watch cache, redrawn when the cache
//! changes (at most once a second, and every few seconds for the clock), NodePool edits previewed by the engine
//! and applied by server-side apply after a server-side dry run. This instance observes: it does not launch
//! capacity or carry out disruptions, and it says so to every request that would need it to act.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender};
use tokio::sync::watch;

use crate::engine::catalog::Catalog;
use crate::engine::provisioning::Millis;
use crate::engine::whatif::preview_nodepool_edit;
use crate::kube::cache::{Cache, Problem};
use crate::kube::writer::Writer;
use crate::runtime::backend::{Command, Event};
use crate::runtime::live_view::{LiveInfo, picture};
use crate::sim::manifests::Manifests;
use crate::ui::editor::validate_nodepool_text;

/// Pictures are built at most this often while the cluster changes...
const MIN_VIEW_GAP: Duration = Duration::from_secs(1);
/// ...and at least this often while it doesn't (ages, budget windows).
const MAX_VIEW_GAP: Duration = Duration::from_secs(5);

/// Why an acting request is refused on a live cluster.
pub const OBSERVE_ONLY: &str = "this instance observes the live cluster: approving, rejecting and mode changes need the acting engine, which \
     runs in the simulated world (`demo`) today";

pub struct LiveDriver {
    pub cache: Arc<Mutex<Cache>>,
    pub changed: watch::Receiver<u64>,
    pub writer: Writer,
    pub catalog: Arc<Catalog>,
    pub info: LiveInfo,
}

/// What the cache held when it was last read.
#[derive(Clone)]
struct Read {
    manifests: Arc<Manifests>,
    skipped: Arc<Vec<Problem>>,
    /// Kinds not in sync ("pods: failing (...)"), empty when all are.
    lagging: Vec<String>,
}

fn now_ms() -> Millis {
    chrono::Utc::now().timestamp_millis()
}

impl LiveDriver {
    fn read(&self) -> Option<Read> {
        let cache = self.cache.lock().ok()?;
        Some(Read {
            manifests: Arc::new(cache.manifests()),
            skipped: Arc::new(cache.problems().cloned().collect()),
            lagging: if cache.synced() { Vec::new() } else { cache.not_synced() },
        })
    }

    /// Runs until `Shutdown` or until the dashboard goes away.
    pub async fn run(mut self, mut commands: UnboundedReceiver<Command>, events: UnboundedSender<Event>) {
        let mut generation = 0u64;
        let mut dirty = true;
        let mut last_view: Option<Instant> = None;
        let mut latest: Option<Read> = None;
        let mut tick = tokio::time::interval(MIN_VIEW_GAP);
        loop {
            tokio::select! {
                cmd = commands.recv() => match cmd {
                    None | Some(Command::Shutdown) => return,
                    Some(cmd) => {
                        for e in self.handle(cmd, latest.as_ref()).await {
                            if events.send(e).is_err() {
                                return;
                            }
                        }
                        dirty = true;
                    }
                },
                changed = self.changed.changed() => {
                    if changed.is_err() {
                        let _ = events.send(Event::Stopped(Some("the cluster watches stopped".into())));
                        return;
                    }
                    dirty = true;
                }
                _ = tick.tick() => {}
            }
            let due = match last_view {
                None => true,
                Some(t) => (dirty && t.elapsed() >= MIN_VIEW_GAP) || t.elapsed() >= MAX_VIEW_GAP,
            };
            if !due {
                continue;
            }
            let Some(read) = self.read() else {
                let _ = events.send(Event::Stopped(Some("the watch cache is poisoned".into())));
                return;
            };
            latest = Some(read.clone());
            generation += 1;
            let mut info = self.info.clone();
            if !read.lagging.is_empty() {
                info.clock = format!("live (catching up: {})", read.lagging.join("; "));
            }
            let catalog = self.catalog.clone();
            let built = tokio::task::spawn_blocking(move || {
                picture(&read.manifests, &catalog, now_ms(), &info, &read.skipped, generation)
            })
            .await;
            match built {
                Ok(view) => {
                    if events.send(Event::View(Arc::new(view))).is_err() {
                        return;
                    }
                }
                Err(e) => {
                    tracing::error!("building the picture failed: {e}");
                    let _ = events.send(Event::Notice(format!("could not build the picture: {e}")));
                }
            }
            last_view = Some(Instant::now());
            dirty = false;
        }
    }

    async fn handle(&self, cmd: Command, latest: Option<&Read>) -> Vec<Event> {
        match cmd {
            Command::Approve { request, .. } | Command::Reject { request, .. } | Command::SetMode { request, .. } => {
                vec![Event::Done { request, outcome: Err(OBSERVE_ONLY.into()) }]
            }
            Command::ApplyNodePool { request, name, yaml } => {
                vec![Event::Done { request, outcome: self.apply(&name, &yaml).await }]
            }
            Command::PreviewNodePool { request, name, yaml } => {
                let result = match (self.parse(&name, &yaml, "preview"), latest) {
                    (Err(e), _) => Err(e),
                    (Ok(_), None) => Err("the cluster has not been read yet".into()),
                    (Ok(edited), Some(read)) => {
                        let (m, catalog) = (read.manifests.clone(), self.catalog.clone());
                        tokio::task::spawn_blocking(move || {
                            Box::new(preview_nodepool_edit(&m.snapshot(), &catalog, now_ms(), &edited))
                        })
                        .await
                        .map_err(|e| format!("the preview failed: {e}"))
                    }
                };
                vec![Event::Preview { request, result }]
            }
            Command::SetSpeed { .. } | Command::SetPaused { .. } | Command::Shutdown => Vec::new(),
        }
    }

    fn parse(&self, name: &str, yaml: &str, what: &str) -> Result<crate::engine::api::NodePool, String> {
        validate_nodepool_text(yaml, name, &self.catalog.label_policy).map_err(|diags| {
            let first: Vec<String> = diags.iter().take(3).map(|d| d.to_string()).collect();
            format!("{what}: {}", first.join("; "))
        })
    }

    /// Validates as the editor does, asks the API server (dry run), then applies.
    async fn apply(&self, name: &str, yaml: &str) -> Result<String, String> {
        let pool = self.parse(name, yaml, "not applied")?;
        self.writer.apply_nodepool(&pool, true).await.map_err(|e| format!("not applied: {e}"))?;
        self.writer.apply_nodepool(&pool, false).await.map_err(|e| format!("not applied: {e}"))?;
        tracing::info!(nodepool = name, "NodePool applied by server-side apply");
        Ok(format!("NodePool {name} applied (server-side apply as karpenter-tui)"))
    }
}
