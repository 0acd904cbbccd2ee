//! The live backend behind the dashboard on a real cluster: pictures from the watch cache, redrawn when the cache
//! changes (at most once a second, and every few seconds for the clock), NodePool edits previewed by the engine
//! and applied by server-side apply after a server-side dry run. With a cloud provider and the leader Lease it
//! also acts: the controller reconciles on every change and operators' approvals go through it. Without them it
//! observes, and says why to every request that would need it to act.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender};
use tokio::sync::watch;

use crate::engine::api::strict::validate_nodepool_text;
use crate::engine::catalog::Catalog;
use crate::engine::manifests::ClusterObjects;
use crate::engine::provisioning::Millis;
use crate::kube::cache::{Cache, Listing, Problem};
use crate::kube::leader::Role;
use crate::kube::writer::Writer;
use crate::protocol::view::Leadership;
use crate::protocol::{Command, Event};
use crate::shell::acting::{Acting, woken};
use crate::shell::live_picture::{LiveInfo, objects_picture, picture};

/// Pictures are built at most this often while the cluster changes (and, on a cluster so large that a picture takes
/// long to build, no more often than four times the time the last one took, so pictures never use more than about a
/// fifth of a core).
const MIN_VIEW_GAP: Duration = Duration::from_secs(1);
/// With nothing changed, the clock line and ages move this often, without any engine pass...
const CLOCK_EVERY: Duration = Duration::from_secs(5);
/// ...and the engine's parts of the picture are built again this often, for what moves with time alone (budget
/// windows opening, consolidateAfter running out).
const REFRESH_EVERY: Duration = Duration::from_secs(30);
/// A cloud with live prices (AWS) gives the dashboard a fresh catalog this often.
const CATALOG_EVERY: Duration = Duration::from_secs(60);
/// While the initial lists run, the progress line moves this often.
const PROGRESS_EVERY: Duration = Duration::from_millis(250);

pub struct LiveDriver {
    pub cache: Arc<Mutex<Cache>>,
    pub changed: watch::Receiver<u64>,
    pub writer: Writer,
    pub catalog: Arc<Catalog>,
    pub info: LiveInfo,
    /// The engine's hands, when this instance may act at all (a cloud provider, rights, no upstream Karpenter).
    pub acting: Option<Acting>,
    /// Leadership: only the Lease holder acts.
    pub role: watch::Receiver<Role>,
    /// How many times the loop has woken up: what an idle dashboard costs, counted (and tested: it must not spin).
    pub wakes: Arc<AtomicU64>,
}

/// What the cache held when it was last read.
#[derive(Clone)]
struct Read {
    manifests: Arc<ClusterObjects>,
    skipped: Arc<Vec<Problem>>,
    /// Kinds not in sync or whose watch is failing ("pods: ..."), empty when all are well.
    lagging: Vec<String>,
}

fn now_ms() -> Millis {
    chrono::Utc::now().timestamp_millis()
}

impl LiveDriver {
    fn read(&self) -> Option<Read> {
        let mut cache = self.cache.lock().ok()?;
        Some(Read {
            manifests: Arc::new(cache.manifests()),
            skipped: Arc::new(cache.problems().cloned().collect()),
            lagging: {
                let mut l = if cache.synced() { Vec::new() } else { cache.not_synced() };
                for f in cache.failing() {
                    if !l.contains(&f) {
                        l.push(f);
                    }
                }
                l
            },
        })
    }

    /// Whether this instance acts now, and if not, why.
    fn leadership(&self) -> Leadership {
        if self.acting.is_none() {
            return self.info.leadership.clone();
        }
        match &*self.role.borrow() {
            Role::Leader => Leadership::Acting,
            Role::Unknown => Leadership::Observing("electing a leader".into()),
            Role::Follower { holder } => Leadership::Observing(format!("{holder} holds the karpenter-tui lease")),
        }
    }

    fn leading(&self) -> bool {
        self.acting.is_some() && *self.role.borrow() == Role::Leader
    }

    /// Runs until `Shutdown` or until the dashboard goes away. It sleeps until something happens: a command, a
    /// change in the cache, a change of leadership, or the next moment something is due (the controller's next
    /// reconcile while leading, a picture held back by [`MIN_VIEW_GAP`], the clock line).
    pub async fn run(mut self, mut commands: UnboundedReceiver<Command>, events: UnboundedSender<Event>) {
        let mut generation = 0u64;
        // Something the picture's engine passes read changed since the last picture.
        let mut dirty = true;
        let mut last_view: Option<Instant> = None;
        let mut last_clock = Instant::now();
        let mut last_build = Duration::ZERO;
        let mut latest: Option<Read> = None;
        let mut catalog_at: Option<Instant> = None;
        // Without an elector nobody sends on the role channel; once its sender is gone, `changed()` answers at once,
        // forever, so the branch is switched off instead of spinning.
        let mut role_open = true;
        // While leading: the controller runs when the cluster, the role or a command changed something, a notice
        // came, or its next wake is due; otherwise the loop sleeps.
        let mut act = true;
        let mut next_act = Instant::now();
        // Until the cache is first in sync the panes fill as the lists complete, with a progress line; `whole`
        // once the first picture with the engine's decisions is on its way.
        let mut whole = false;
        let mut shown = Shown { kinds: usize::MAX, nodes: false, at: None };
        let mut last_progress = Instant::now();
        loop {
            let min_gap = MIN_VIEW_GAP.max(last_build * 4);
            let signal = self.acting.as_ref().and_then(Acting::wake_signal);
            let since = |t: Option<Instant>| t.map_or(Duration::MAX, |t| t.elapsed());
            let leading = self.leading();
            let picture_wait = if dirty {
                min_gap.saturating_sub(since(last_view))
            } else {
                CLOCK_EVERY.saturating_sub(last_clock.elapsed()).min(REFRESH_EVERY.saturating_sub(since(last_view)))
            };
            let wait = if leading {
                picture_wait.min(next_act.saturating_duration_since(Instant::now()))
            } else {
                picture_wait
            };
            let wait = if whole { wait } else { wait.min(PROGRESS_EVERY.saturating_sub(last_progress.elapsed())) };
            tokio::select! {
                cmd = commands.recv() => match cmd {
                    None | Some(Command::Shutdown) => return,
                    Some(cmd) => {
                        let fresh = self.read();
                        for e in self.handle(cmd, fresh.as_ref().or(latest.as_ref())).await {
                            if events.send(e).is_err() {
                                return;
                            }
                        }
                        dirty = true;
                        act = true;
                    }
                },
                changed = self.changed.changed() => {
                    if changed.is_err() {
                        let _ = events.send(Event::Stopped(Some("the cluster watches stopped".into())));
                        return;
                    }
                    dirty = true;
                    act = true;
                }
                changed = self.role.changed(), if role_open => {
                    role_open = changed.is_ok();
                    dirty = true;
                    act = true;
                }
                _ = woken(&signal), if leading => act = true,
                _ = tokio::time::sleep(wait) => {}
            }
            self.wakes.fetch_add(1, Ordering::Relaxed);
            if !whole {
                let Some(loading) = self.loading(&mut generation, &mut shown) else {
                    let _ = events.send(Event::Stopped(Some("the watch cache is poisoned".into())));
                    return;
                };
                last_progress = Instant::now();
                match loading {
                    Loading::Listing(event) => {
                        if events.send(event).is_err() {
                            return;
                        }
                        continue;
                    }
                    Loading::Synced(view) => {
                        if events.send(Event::View(view)).is_err() {
                            return;
                        }
                        // The picture with the engine's decisions follows at once, below.
                        whole = true;
                        dirty = true;
                        last_view = None;
                    }
                }
            }
            let leading = self.leading();
            act = leading && (act || Instant::now() >= next_act);
            let due = |dirty: bool, last_view: Option<Instant>| {
                since(last_view) >= REFRESH_EVERY.max(min_gap) || (dirty && since(last_view) >= min_gap)
            };
            // Only an acting engine needs the cache on every change; an observing dashboard reads it when a picture
            // is due (a read shares the pods but still costs milliseconds at tens of thousands of them, and a busy
            // cluster changes all the time).
            if !act && !due(dirty, last_view) {
                if last_clock.elapsed() >= CLOCK_EVERY {
                    if events.send(Event::Clock(now_ms())).is_err() {
                        return;
                    }
                    last_clock = Instant::now();
                }
                continue;
            }
            let Some(read) = self.read() else {
                let _ = events.send(Event::Stopped(Some("the watch cache is poisoned".into())));
                return;
            };
            // The controller runs only on a cache that is in sync: deciding on a partial picture could launch
            // capacity twice (the cache catching up is a change, which wakes it again).
            if act
                && read.lagging.is_empty()
                && let Some(acting) = self.acting.as_mut()
            {
                let report = acting.tick(&read.manifests, now_ms()).await;
                if let Some(first) = report.errors.first() {
                    let more = report.errors.len() - 1;
                    let text = if more > 0 { format!("{first} (and {more} more)") } else { first.clone() };
                    let _ = events.send(Event::Notice(text));
                }
                if !report.done.is_empty() {
                    dirty = true;
                }
                next_act = Instant::now() + acting.sleep_for(now_ms());
                act = false;
            } else if act {
                // Lagging: look again in a second (a failing watch may send nothing for a while).
                next_act = Instant::now() + Duration::from_secs(1);
            }
            // With AWS the dashboard prices nodes from the live catalog and says where its prices came from.
            if let Some(cloud) = self.acting.as_ref().map(|a| &a.cloud)
                && catalog_at.is_none_or(|t| t.elapsed() >= CATALOG_EVERY)
                && let Some(c) = cloud.live_catalog(now_ms())
            {
                self.catalog = Arc::new(c);
                catalog_at = Some(Instant::now());
                dirty = true;
            }
            if !due(dirty, last_view) {
                if last_clock.elapsed() >= CLOCK_EVERY {
                    if events.send(Event::Clock(now_ms())).is_err() {
                        return;
                    }
                    last_clock = Instant::now();
                }
                continue;
            }
            latest = Some(read.clone());
            generation += 1;
            let mut info = self.info.clone();
            info.leadership = self.leadership();
            if !read.lagging.is_empty() {
                // Every kind failing at once is the API server gone, not one watch in trouble.
                let all = read.lagging.len() >= crate::kube::kinds::Kind::ALL.iter().filter(|k| !k.optional()).count();
                let what = if all { "disconnected" } else { "catching up" };
                info.clock = format!("live ({what}: {})", read.lagging.join("; "));
            }
            // Building a picture runs two engine passes: off the async workers' hot path, but with the engine's
            // state borrowed, so in place rather than on another thread.
            let engine = self.acting.as_ref().filter(|_| self.leading()).map(|a| &a.controller);
            let started = Instant::now();
            let view = tokio::task::block_in_place(|| {
                picture(&read.manifests, &self.catalog, now_ms(), &info, &read.skipped, generation, engine)
            });
            last_build = started.elapsed();
            // The passes free tens of megabytes at this scale; hand them back rather than keep them resident.
            crate::memory::release_free_memory();
            if events.send(Event::View(Arc::new(view))).is_err() {
                return;
            }
            last_view = Some(Instant::now());
            last_clock = Instant::now();
            dirty = false;
        }
    }

    /// Before the cache is first in sync: a picture of what is listed so far whenever another kind's list has
    /// completed, else the progress line; once in sync, the picture of every object, without the engine's
    /// decisions, to show while its first pass runs. `None` if the cache is poisoned.
    fn loading(&self, generation: &mut u64, shown: &mut Shown) -> Option<Loading> {
        let (listing, synced) = {
            let cache = self.cache.lock().ok()?;
            (cache.listing(), cache.synced())
        };
        let mut info = self.info.clone();
        info.leadership = self.leadership();
        let (progress, clock, read) = if synced {
            let read = self.read()?;
            let m = &read.manifests;
            let who = if self.leading() { "the controller's" } else { "the engine's" };
            let text = format!(
                "{} pods, {} nodes and {} NodeClaims read; {who} first pass is running (reasons and proposals follow)",
                thousands(m.pods.len()),
                thousands(m.nodes.len()),
                thousands(m.nodeclaims.len())
            );
            (text, "live", read)
        } else {
            let kinds = crate::kube::kinds::Kind::ALL.len() - listing.len();
            // A picture takes tens of milliseconds at a thousand nodes, taken from the lists still running: at
            // most one a second, each with every kind listed since the last.
            // ...but nodes go on screen as soon as they are in: they are what the operator looks for first.
            let nodes = !listing.iter().any(|l| l.kind == crate::kube::kinds::Kind::Node);
            let recent = shown.at.is_some_and(|t| t.elapsed() < MIN_VIEW_GAP) && nodes == shown.nodes;
            if kinds == shown.kinds || recent {
                return Some(Loading::Listing(Event::Progress(progress_line(&listing))));
            }
            *shown = Shown { kinds, nodes, at: Some(Instant::now()) };
            (progress_line(&listing), "live (listing)", self.read()?)
        };
        info.clock = clock.into();
        *generation += 1;
        let mut view = tokio::task::block_in_place(|| {
            objects_picture(&read.manifests, &self.catalog, now_ms(), &info, &read.skipped, *generation)
        });
        view.progress = Some(progress);
        let view = Arc::new(view);
        Some(if synced { Loading::Synced(view) } else { Loading::Listing(Event::View(view)) })
    }

    /// Why an acting request can't be done now, or the engine to do it with.
    fn engine(&mut self) -> Result<&mut Acting, String> {
        let why = match self.leadership() {
            Leadership::Acting => None,
            Leadership::Observing(why) => Some(why),
        };
        match (self.acting.as_mut(), why) {
            (Some(a), None) => Ok(a),
            (_, Some(why)) => Err(format!("this instance observes ({why}); nothing was done")),
            (None, None) => Err("this instance observes; nothing was done".into()),
        }
    }

    async fn handle(&mut self, cmd: Command, latest: Option<&Read>) -> Vec<Event> {
        let now = now_ms();
        match cmd {
            Command::Approve { request, id } => {
                let outcome = match (self.engine(), latest) {
                    (Err(e), _) => Err(e),
                    (Ok(_), None) => Err("the cluster has not been read yet".into()),
                    (Ok(a), Some(read)) => a.approve(&read.manifests, &id, now).await,
                };
                vec![Event::Done { request, outcome }]
            }
            Command::Reject { request, id } => {
                let outcome = match (self.engine(), latest) {
                    (Err(e), _) => Err(e),
                    (Ok(_), None) => Err("the cluster has not been read yet".into()),
                    (Ok(a), Some(read)) => a.reject(&read.manifests, &id, now),
                };
                vec![Event::Done { request, outcome }]
            }
            Command::ScaleNodePool { request, name, replicas } => {
                // An operator's edit of the NodePool, like an apply: written whoever acts on the cluster.
                let outcome = match self.writer.scale_nodepool(&name, replicas).await {
                    Ok(()) => {
                        tracing::info!(nodepool = %name, replicas, "NodePool scaled through its scale subresource");
                        Ok(format!("NodePool {name} scaled to {replicas} replicas"))
                    }
                    Err(e) => Err(format!("not scaled: {e}")),
                };
                vec![Event::Done { request, outcome }]
            }
            Command::RepairNode { request, node } => {
                let outcome = match (self.engine(), latest) {
                    (Err(e), _) => Err(e),
                    (Ok(_), None) => Err("the cluster has not been read yet".into()),
                    (Ok(a), Some(read)) => a.repair_now(&read.manifests, &node, now).await,
                };
                vec![Event::Done { request, outcome }]
            }
            Command::SetMode { request, mode } => {
                let outcome = self.engine().map(|a| a.set_mode(mode, now));
                vec![Event::Done { request, outcome }]
            }
            // The dashboard's supervisor switches contexts; a driver on its own (the tests') cannot.
            Command::SwitchContext { request, context } => {
                vec![Event::Done {
                    request,
                    outcome: Err(format!("context {context}: switching is not available here")),
                }]
            }
            Command::DescribeNode { request, node } => {
                let result = match latest {
                    None => Err("the cluster has not been read yet".into()),
                    Some(read) => {
                        let view = read.manifests.view();
                        if view.nodes.iter().any(|n| n.metadata.name.as_deref() == Some(node.as_str())) {
                            Ok(crate::shell::node_pods::on_node(view.pods.iter(), view.pdbs.iter(), &node, now))
                        } else {
                            Err(format!("no node {node} (it may have been deleted)"))
                        }
                    }
                };
                vec![Event::NodePods { request, node, result }]
            }
            Command::PauseDisruption { request, pause, budgets } => {
                let by = crate::shell::operator();
                let outcome = match (self.engine(), latest) {
                    // This instance acts: its controller holds every command (unless asked for the budgets).
                    (Ok(a), _) if !budgets => {
                        a.set_hold(pause.then_some(crate::controller::Hold { since: now, by }), now)
                    }
                    (_, None) => Err("the cluster has not been read yet".into()),
                    // Someone else acts (upstream Karpenter, or another instance), or the pause is to survive a
                    // restart: the NodePools' budgets hold it, and every Karpenter honours them.
                    (_, Some(read)) => {
                        let since = chrono::DateTime::from_timestamp_millis(now)
                            .unwrap_or_default()
                            .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
                        crate::shell::disruption_pause::apply(
                            &self.writer,
                            &read.manifests.nodepools,
                            pause,
                            &since,
                            &by,
                        )
                        .await
                    }
                };
                vec![Event::Done { request, outcome }]
            }
            Command::SetPacking { request, packing } => {
                let outcome = self.engine().map(|a| a.set_packing(packing));
                if outcome.is_ok() {
                    // What this instance's pictures plan with should it stop leading.
                    self.info.packing = packing;
                }
                vec![Event::Done { request, outcome }]
            }
            Command::ApplyNodePool { request, name, yaml } => {
                vec![Event::Done { request, outcome: self.apply(&name, &yaml).await }]
            }
            Command::ApplyNodeOverlay { request, name, yaml } => {
                vec![Event::Done { request, outcome: self.apply_overlay(&name, &yaml).await }]
            }
            Command::PreviewNodePool { request, name, yaml } => {
                let result = match (self.parse(&name, &yaml, "preview"), latest) {
                    (Err(e), _) => Err(e),
                    (Ok(_), None) => Err("the cluster has not been read yet".into()),
                    (Ok(edited), Some(read)) => {
                        let (m, catalog) = (read.manifests.clone(), self.catalog.clone());
                        // The overlays take part when this instance's controller runs them.
                        let overlays = self.acting.as_ref().is_some_and(|a| a.controller.overlays_on());
                        // New NodeClaims are sized as this instance's provisioning would size them.
                        let packing = self.acting.as_ref().map_or(self.info.packing, |a| a.controller.packing());
                        tokio::task::spawn_blocking(move || {
                            let overlays = if overlays { m.nodeoverlays.as_slice() } else { &[] };
                            Box::new(crate::shell::passes::preview_edit(
                                &m.snapshot(),
                                &catalog,
                                now_ms(),
                                &edited,
                                overlays,
                                packing,
                            ))
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
        validate_nodepool_text(yaml, name, &self.catalog.label_policy, self.info.version).map_err(|diags| {
            let first: Vec<String> = diags.iter().take(3).map(|d| d.to_string()).collect();
            format!("{what}: {}", first.join("; "))
        })
    }

    /// A NodeOverlay edit: validated as the editor does, then a server-side dry run, then server-side apply.
    async fn apply_overlay(&self, name: &str, yaml: &str) -> Result<String, String> {
        let overlay = crate::engine::api::strict::validate_nodeoverlay_text(yaml, name).map_err(|diags| {
            let first: Vec<String> = diags.iter().take(3).map(|d| d.to_string()).collect();
            format!("not applied: {}", first.join("; "))
        })?;
        self.writer.apply_nodeoverlay(&overlay, true).await.map_err(|e| format!("not applied: {e}"))?;
        self.writer.apply_nodeoverlay(&overlay, false).await.map_err(|e| format!("not applied: {e}"))?;
        tracing::info!(nodeoverlay = name, "NodeOverlay applied by server-side apply");
        Ok(format!("NodeOverlay {name} applied (server-side apply as karpenter-tui)"))
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

/// The last picture shown while the initial lists ran: how many kinds were listed, whether nodes were, and when.
struct Shown {
    kinds: usize,
    /// Whether the nodes' list was in.
    nodes: bool,
    at: Option<Instant>,
}

/// What the loop shows before the cache is first in sync.
enum Loading {
    /// A picture of what is listed so far, or the progress line alone.
    Listing(Event),
    /// In sync: every object, without the engine's decisions yet.
    Synced(Arc<crate::protocol::view::ClusterView>),
}

/// The progress line while the initial lists run: the kinds still listing, with what each has brought so far
/// (or why its last attempt failed).
fn progress_line(listing: &[Listing]) -> String {
    let total = crate::kube::kinds::Kind::ALL.len();
    let kinds: Vec<String> = listing
        .iter()
        .map(|l| match &l.failing {
            Some(why) => format!("{}: {why} (retrying)", l.kind.resource_name()),
            None => format!("{} {} so far", l.kind.resource_name(), thousands(l.count)),
        })
        .collect();
    format!("reading the cluster ({} of {total} kinds listed): {}", total - listing.len(), kinds.join(" · "))
}

/// `20000` as `20,000`.
fn thousands(n: usize) -> String {
    crate::protocol::view::group_thousands(&n.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kube::kinds::Kind;

    #[test]
    fn the_progress_line_counts_what_each_list_has_brought() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(20_000), "20,000");
        assert_eq!(thousands(1_234_567), "1,234,567");
        let line = progress_line(&[
            Listing { kind: Kind::Pod, count: 4_250, failing: None },
            Listing { kind: Kind::Node, count: 0, failing: Some("503 Service Unavailable".into()) },
        ]);
        let total = Kind::ALL.len();
        assert_eq!(
            line,
            format!(
                "reading the cluster ({} of {total} kinds listed): pods 4,250 so far · nodes: 503 Service \
                 Unavailable (retrying)",
                total - 2
            )
        );
    }
}
