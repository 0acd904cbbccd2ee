//! The simulated backend behind `demo`: a scenario played on the world's clock running at a multiple of real time,
//! on its own thread (the engine is synchronous and CPU-bound; the UI must never wait for a solve). It takes
//! [`Command`]s and sends [`Event`]s: a fresh picture when something changed (at most a few per second), and the
//! outcome of every request.

use std::sync::Arc;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use tokio::sync::mpsc::UnboundedSender;

use crate::controller::tick::{self, Host};
use crate::engine::api::NodePool;
use crate::engine::api::strict::validate_nodepool_text;
use crate::engine::provisioning::Millis;
use crate::protocol::view::Source;
use crate::protocol::{Command, Event};
use crate::shell::sim_picture as dashboard;
use crate::sim::run::Playback;

/// How often the clock steps (real time).
const STEP: Duration = Duration::from_millis(50);
/// Pictures are sent at most this often while things change, and at least this often while they don't (so ages and
/// the clock in the header move).
const MIN_VIEW_GAP: Duration = Duration::from_millis(200);
const MAX_VIEW_GAP: Duration = Duration::from_secs(1);
/// How often the simulation thread hands freed heap memory back to the system (cheap: a walk of free lists).
const TRIM_PERIOD: Duration = Duration::from_secs(10);

pub struct SimDriver {
    playback: Playback,
    name: String,
    speed: f64,
    paused: bool,
    readonly: bool,
    /// Real instant and virtual time the clock was last re-based at (speed changes and pauses re-base it).
    base: (Instant, Millis),
    generation: u64,
    last_sent: Option<(Instant, Fingerprint)>,
    /// How long the last picture took to build: a large world is pictured less often, so that building pictures
    /// never takes more than about a quarter of the driver's time.
    last_build: Duration,
}

/// What the picture depends on besides the clock.
type Fingerprint = ([u64; 14], usize, usize);

impl SimDriver {
    pub fn new(playback: Playback, name: String, speed: f64, readonly: bool) -> SimDriver {
        let now = playback.world.now;
        SimDriver {
            playback,
            name,
            speed: speed.clamp(0.1, 1000.0),
            paused: false,
            readonly,
            base: (Instant::now(), now),
            generation: 0,
            last_sent: None,
            last_build: Duration::ZERO,
        }
    }

    /// Runs until `Shutdown` or until the UI goes away.
    pub fn run(mut self, commands: Receiver<Command>, events: UnboundedSender<Event>) {
        // What building the world freed goes back to the system now, and what passes free, every few seconds.
        crate::memory::release_free_memory();
        let mut trimmer = crate::memory::Trimmer::new(TRIM_PERIOD);
        self.send_view(&events, true);
        loop {
            trimmer.tick();
            match commands.recv_timeout(STEP) {
                Ok(Command::Shutdown) => break,
                Ok(cmd) => {
                    for e in self.handle(cmd) {
                        if events.send(e).is_err() {
                            return;
                        }
                    }
                    self.send_view(&events, true);
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
            // A timeline event that cannot apply (it names a node an operator already removed) is reported and
            // skipped: the demo goes on.
            if let Err(e) = self.step()
                && events.send(Event::Notice(e)).is_err()
            {
                return;
            }
            if !self.send_view(&events, false) {
                return;
            }
        }
        let _ = events.send(Event::Stopped(None));
    }

    /// The virtual time the clock has reached.
    fn target(&self) -> Millis {
        if self.paused {
            return self.base.1;
        }
        let real = self.base.0.elapsed().as_secs_f64() * 1000.0;
        self.base.1 + (real * self.speed) as Millis
    }

    fn rebase(&mut self) {
        self.base = (Instant::now(), self.playback.world.now);
    }

    /// Advances the world to where the clock is. A slow solve only makes the world lag; it catches up next step.
    pub fn step(&mut self) -> Result<(), String> {
        let target = self.target();
        if target > self.playback.world.now {
            self.playback.advance(target).map_err(|e| e.to_string())?;
        }
        Ok(())
    }

    fn fingerprint(&self) -> Fingerprint {
        let w = &self.playback.world;
        let decisions = w.record.decisions.len();
        // Proposal states change in place; count the open ones too.
        (w.cluster.stamps(), decisions, w.controller().orchestrator().awaiting_approval().len())
    }

    /// Sends a picture if something changed (or `force`). False when the UI is gone.
    fn send_view(&mut self, events: &UnboundedSender<Event>, force: bool) -> bool {
        let fp = self.fingerprint();
        if !force && let Some((at, last)) = &self.last_sent {
            let gap = at.elapsed();
            let min_gap = MIN_VIEW_GAP.max(self.last_build * 4);
            if gap < min_gap || (*last == fp && gap < MAX_VIEW_GAP.max(min_gap)) {
                return true;
            }
        }
        let started = Instant::now();
        let view = self.view();
        self.last_build = started.elapsed();
        self.last_sent = Some((Instant::now(), fp));
        events.send(Event::View(Arc::new(view))).is_ok()
    }

    pub fn view(&mut self) -> crate::protocol::view::ClusterView {
        self.generation += 1;
        let clock = if self.paused { "simulated (paused)".to_string() } else { format!("simulated ×{}", self.speed) };
        let source = Source { context: "demo".into(), cluster: self.name.clone(), clock };
        dashboard::view(&mut self.playback.world, source, self.generation)
    }

    /// Carries out one request. Mutations are refused in read-only mode here, not only in the UI.
    pub fn handle(&mut self, cmd: Command) -> Vec<Event> {
        if self.readonly && cmd.is_mutating() {
            let request = cmd.request().unwrap_or(0);
            return vec![Event::Done { request, outcome: Err("read-only: the backend refuses changes".into()) }];
        }
        let w = &mut self.playback.world;
        match cmd {
            Command::Approve { request, id } => {
                let outcome = match tick::immediate(tick::approve(w, &id)) {
                    Some(Ok((approval, _))) => approval.message(&id),
                    Some(Err(e)) => Err(format!("{id}: {e}")),
                    None => Err(format!("{id}: the simulated world did not answer at once")),
                };
                w.reconcile();
                vec![Event::Done { request, outcome }]
            }
            Command::Reject { request, id } => {
                let outcome = tick::reject(w, &id).map(|_| format!("{id} rejected")).map_err(|e| format!("{id}: {e}"));
                vec![Event::Done { request, outcome }]
            }
            Command::ScaleNodePool { request, name, replicas } => {
                let outcome = w.scale_nodepool(&name, replicas);
                w.reconcile();
                vec![Event::Done { request, outcome }]
            }
            Command::RepairNode { request, node } => {
                let outcome = match tick::immediate(tick::repair_now(w, &node)) {
                    Some(r) => r.map(|(message, _)| message),
                    None => Err(format!("{node}: the simulated world did not answer at once")),
                };
                w.reconcile();
                vec![Event::Done { request, outcome }]
            }
            Command::SetMode { request, mode } => {
                let now = w.now;
                w.controller_mut().set_mode(mode, now);
                w.reconcile();
                vec![Event::Done { request, outcome: Ok(format!("disruption mode is now {mode}")) }]
            }
            Command::SwitchContext { request, .. } => {
                vec![Event::Done {
                    request,
                    outcome: Err("demo: the simulated cluster has no kubeconfig contexts".into()),
                }]
            }
            Command::DescribeNode { request, node } => {
                let c = &w.cluster;
                let result = if c.nodes.contains_key(&node) {
                    let (pods, pdbs) = (c.pods.values().map(|p| &**p), c.pdbs.values().map(|b| &**b));
                    Ok(crate::shell::node_pods::on_node(pods, pdbs, &node, w.now))
                } else {
                    Err(format!("no node {node} (it may have been deleted)"))
                };
                vec![Event::NodePods { request, node, result }]
            }
            Command::PauseDisruption { budgets: true, request, .. } => vec![Event::Done {
                request,
                outcome: Err("demo: the simulated engine holds voluntary disruption itself (:pause)".into()),
            }],
            Command::PauseDisruption { request, pause, budgets: false } => {
                let now = w.now;
                let hold = pause.then(|| crate::controller::Hold { since: now, by: crate::shell::operator() });
                let outcome = w.controller_mut().set_hold(hold, now);
                w.reconcile();
                vec![Event::Done { request, outcome }]
            }
            Command::SetPacking { request, packing } => {
                w.controller_mut().set_packing(packing);
                w.reconcile();
                vec![Event::Done { request, outcome: Ok(format!("packing strategy is now {packing}")) }]
            }
            Command::ApplyNodePool { request, name, yaml } => {
                let outcome = apply_nodepool(w, &name, &yaml);
                vec![Event::Done { request, outcome }]
            }
            Command::ApplyNodeOverlay { request, name, yaml } => {
                let outcome = apply_nodeoverlay(w, &name, &yaml);
                vec![Event::Done { request, outcome }]
            }
            Command::PreviewNodePool { request, name, yaml } => {
                let result = preview_nodepool(w, &name, &yaml);
                vec![Event::Preview { request, result }]
            }
            Command::SetSpeed { speed } => {
                self.rebase();
                self.speed = speed.clamp(0.1, 1000.0);
                Vec::new()
            }
            Command::SetPaused { paused } => {
                self.rebase();
                self.paused = paused;
                Vec::new()
            }
            Command::Shutdown => Vec::new(),
        }
    }
}

/// The edited NodePool, validated exactly as the editor validates it (strict parse, no renaming).
fn parse_edit(w: &crate::sim::world::World, name: &str, yaml: &str, what: &str) -> Result<NodePool, String> {
    validate_nodepool_text(yaml, name, &w.catalog().label_policy, w.settings().controller.karpenter_version).map_err(
        |diags| {
            let first: Vec<String> = diags.iter().take(3).map(|d| d.to_string()).collect();
            format!("{what}: {}", first.join("; "))
        },
    )
}

/// Replaces a NodePool after strict validation; nothing changes when it is invalid.
fn apply_nodepool(w: &mut crate::sim::world::World, name: &str, yaml: &str) -> Result<String, String> {
    let mut pool = parse_edit(w, name, yaml, "not applied")?;
    let Some(current) = w.cluster.nodepools.get(name) else {
        return Err(format!("not applied: NodePool {name:?} no longer exists"));
    };
    if let Some(e) = crate::engine::api::validation::validate_nodepool_transition(current, &pool) {
        return Err(format!("not applied: {e}"));
    }
    // An edit replaces the spec; the status is the controller's (a subresource an apply does not touch).
    pool.status = current.status.clone();
    w.cluster.nodepools.insert(name.to_string(), pool);
    w.reconcile();
    Ok(format!("NodePool {name} applied"))
}

/// Replaces a NodeOverlay after the CRD's validation; nothing changes when it is invalid. The controller
/// evaluates it again on its next pass.
fn apply_nodeoverlay(w: &mut crate::sim::world::World, name: &str, yaml: &str) -> Result<String, String> {
    let overlay = crate::engine::api::strict::validate_nodeoverlay_text(yaml, name).map_err(|diags| {
        let first: Vec<String> = diags.iter().take(3).map(|d| d.to_string()).collect();
        format!("not applied: {}", first.join("; "))
    })?;
    if w.cluster.nodeoverlays.get(name).is_none() {
        return Err(format!("not applied: NodeOverlay {name:?} no longer exists"));
    }
    let m = crate::engine::manifests::ClusterObjects { nodeoverlays: vec![overlay], ..Default::default() };
    w.cluster.apply(&m);
    w.reconcile();
    Ok(format!("NodeOverlay {name} applied"))
}

/// What an edited NodePool would do to the world as it is now; nothing is changed.
fn preview_nodepool(
    w: &mut crate::sim::world::World,
    name: &str,
    yaml: &str,
) -> Result<Box<crate::engine::whatif::EditPreview>, String> {
    let pool = parse_edit(w, name, yaml, "no preview")?;
    let snapshot = w.cluster.snapshot();
    let overlays: Vec<_> = if w.settings().controller.gates.node_overlay {
        w.cluster.nodeoverlays.values().map(|o| (**o).clone()).collect()
    } else {
        Vec::new()
    };
    Ok(Box::new(crate::shell::passes::preview_edit(
        &snapshot,
        w.catalog(),
        w.now,
        &pool,
        &overlays,
        w.controller().packing(),
    )))
}

/// Starts the driver on its own thread.
pub fn spawn(
    driver: SimDriver,
    events: UnboundedSender<Event>,
) -> std::io::Result<(std::sync::mpsc::Sender<Command>, std::thread::JoinHandle<()>)> {
    let (tx, rx) = std::sync::mpsc::channel();
    let handle = std::thread::Builder::new().name("sim-driver".into()).spawn(move || driver.run(rx, events))?;
    Ok((tx, handle))
}
