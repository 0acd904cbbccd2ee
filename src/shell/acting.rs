//! The controller with its hands: the planner, the cluster port and the cloud, ticked by whoever runs the loop
//! (the live dashboard's backend, or the headless `controller`). Operator requests go through here too, so an
//! approval is validated against the same cache the planner reads.

use std::sync::Arc;

use crate::engine::disruption::gate::Mode;
use crate::engine::manifests::ClusterObjects;
use crate::engine::provisioning::Millis;
use crate::kube::writer::Writer;
use crate::shell::comparer::Comparer;
use crate::shell::metrics::{Counted, Lookup, MeteredCloud, Metrics, Recorder, counted};

use crate::controller::cache_host::{Borrowed, CacheHost, Carry, Listed};
use crate::controller::cloud::{BoxFuture, CloudProvider};
use crate::controller::execute::{Report, execute};
use crate::controller::tick::{self, Ids, Tick};
use crate::controller::timing::GC_EVERY;
use crate::controller::{Controller, Effect};

pub struct Acting {
    pub controller: Controller,
    pub writer: Writer,
    /// Where instances come from.
    pub cloud: Box<dyn CloudProvider>,
    /// The AWS cloud's periodic work (NodeClass status and drift, templates, catalogs, interruptions); `None` for
    /// KWOK.
    pub upkeep: Option<crate::aws::upkeep::AwsUpkeep>,
    /// The controller's schedule: the same steps, in the same order, as `simulate` runs.
    schedule: Tick,
    /// What the schedule's hosts keep between runs.
    kept: Kept,
    /// When a step last asked to be run again (beyond what the controller's own wake says).
    wake: Option<Millis>,
    /// Works out packing comparisons off the loop.
    comparer: Comparer,
    /// The Prometheus metrics this loop records, when they are served.
    metrics: Option<Recorder>,
}

/// With nothing due sooner, the controller still runs this often: a backstop for anything time-driven it cannot
/// foresee (its own quiet periods already end within a minute).
pub const IDLE_TICK: Millis = 60_000;
/// Runs are at least this far apart, so a wake that is due at once cannot spin the loop.
pub const MIN_TICK_GAP: Millis = 50;

/// What the schedule's hosts keep between runs.
#[derive(Default)]
struct Kept {
    /// How many runs there were (each reads the cache afresh).
    runs: u64,
    /// The cloud's last list of instances.
    listed: Listed,
    /// Names disruption commands.
    ids: Ids,
    /// Runs whose writes did not all land (see [`CacheHost::unsettled`]).
    unsettled: u64,
    /// The latest launching solve's packing comparison, for the [`Comparer`] after the run.
    comparison: Option<crate::controller::provisioning::Comparison>,
}

/// The live loop's [`Carry`]: the writer, with the controller's per-object backoff, and the metrics with the read
/// the run is over (what labels a deleted NodeClaim).
struct Writing<'a> {
    writer: &'a mut Writer,
    metrics: Option<(&'a Recorder, &'a ClusterObjects)>,
}

impl Carry for Writing<'_> {
    fn carry<'a>(
        &'a mut self,
        controller: &'a mut Controller,
        cloud: &'a mut dyn CloudProvider,
        effects: Vec<Effect>,
        now: Millis,
    ) -> BoxFuture<'a, Report> {
        Box::pin(carry_out(controller, self.writer, cloud, effects, now, self.metrics))
    }
}

/// Carries out `effects`, except those whose object is backing off after a refusal; records what was refused
/// (logged and shown once per distinct error) and what went through.
async fn carry_out(
    controller: &mut Controller,
    writer: &mut Writer,
    cloud: &mut dyn CloudProvider,
    effects: Vec<Effect>,
    now: Millis,
    metrics: Option<(&Recorder, &ClusterObjects)>,
) -> Report {
    let (effects, held) = controller.hold_backed_off(effects, now);
    // What the effects that count would count for, labelled from the objects before they are written.
    let count: Vec<(usize, Counted)> = match metrics {
        Some((_, m)) => {
            let look = Lookup { controller, m: Some(m) };
            effects.iter().enumerate().filter_map(|(i, e)| counted(e, &look).map(|c| (i, c))).collect()
        }
        None => Vec::new(),
    };
    let mut report = execute(effects, writer, cloud, now).await;
    if let Some((recorder, _)) = metrics {
        let failed: Vec<usize> = report.failed.iter().map(|f| f.index).collect();
        recorder.carried(count, &failed);
    }
    report.outcomes.extend(held);
    for o in &report.outcomes {
        controller.outcome(o.clone(), now);
    }
    for key in &report.succeeded {
        controller.write_succeeded(key);
    }
    for f in &report.failed {
        if f.conflict {
            tracing::info!(effect = %f.effect, "{}; planned again from the fresh object", f.message);
        } else if let Some(line) = controller.write_refused(&f.key, &f.effect, &f.message, now) {
            report.errors.push(line);
        }
    }
    report
}

impl Acting {
    pub fn new(
        controller: Controller,
        writer: Writer,
        cloud: Box<dyn CloudProvider>,
        upkeep: Option<crate::aws::upkeep::AwsUpkeep>,
    ) -> Acting {
        let mut controller = controller;
        controller.set_repair_policies(cloud.repair_policies());
        // One signal wakes the loop for the cloud's notices and for finished comparisons alike.
        let signal = upkeep.as_ref().map_or_else(Default::default, |u| u.wake.clone());
        Acting {
            controller,
            writer,
            cloud,
            upkeep,
            schedule: Tick::new(Millis::MIN, GC_EVERY),
            kept: Kept::default(),
            wake: None,
            comparer: Comparer::new(signal),
            metrics: None,
        }
    }

    /// Records Prometheus metrics into `metrics` from now on: the effects carried out, the controller's state
    /// after each run, and every call to the cloud port.
    pub fn with_metrics(mut self, metrics: Arc<Metrics>) -> Acting {
        let inner = std::mem::replace(&mut self.cloud, Box::new(crate::controller::cloud::ReadOnlyCloud));
        self.cloud = Box::new(MeteredCloud::new(inner, metrics.clone()));
        self.metrics = Some(Recorder::new(metrics));
        self
    }

    /// The metrics' view of the controller after something changed it outside a run (an operator's request).
    fn record(&mut self) {
        if let Some(r) = self.metrics.as_mut() {
            r.after_run(&self.controller, &[], None);
        }
    }

    /// When the next run is due if the cluster does not change (a change is always a reason to run): the
    /// controller's next wake, the cloud's periodic work, at most [`IDLE_TICK`] away.
    pub fn next_wake(&self, now: Millis) -> Millis {
        let upkeep = self.upkeep.as_ref().map(|u| u.next_due());
        let gc = Some(self.schedule.next_gc()).filter(|_| self.cloud.lists());
        let wake = self.wake.filter(|t| *t > now);
        let next = self.controller.next_wake(now).into_iter().chain(upkeep).chain(gc).chain(wake).min();
        next.unwrap_or(Millis::MAX).clamp(now + MIN_TICK_GAP, now + IDLE_TICK)
    }

    /// How long to sleep from `now` until [`Acting::next_wake`].
    pub fn sleep_for(&self, now: Millis) -> std::time::Duration {
        std::time::Duration::from_millis((self.next_wake(now) - now).max(0) as u64)
    }

    /// What wakes the loop when something outside the cluster needs it (an interruption notice arrived, a packing
    /// comparison is worked out). Await it with [`woken`].
    pub fn wake_signal(&self) -> Option<std::sync::Arc<tokio::sync::Notify>> {
        Some(self.comparer.signal())
    }

    /// The schedule's host for a new run over `m`, writing through `writing`.
    fn host<'a>(
        controller: &'a mut Controller,
        cloud: &'a mut dyn CloudProvider,
        kept: &'a mut Kept,
        writing: &'a mut Writing<'_>,
        m: &'a ClusterObjects,
        now: Millis,
    ) -> CacheHost<'a> {
        kept.runs += 1;
        let borrowed = Borrowed {
            controller,
            cloud,
            listed: &mut kept.listed,
            ids: &mut kept.ids,
            carry: Some(writing),
            comparison: Some(&mut kept.comparison),
        };
        CacheHost::new(borrowed, m, now, kept.runs).unsettled(kept.unsettled)
    }

    /// One run of the controller's schedule over the cache as it is, after the cloud's own periodic work.
    pub async fn tick(&mut self, m: &ClusterObjects, now: Millis) -> Report {
        let mut pre = Report::default();
        if let Some(pass) = self.comparer.finished() {
            let pods = pass.pods;
            pre.done.push(format!(
                "packing compared for the {pods} pod(s) of the last launch: {}",
                pass.comparison.summary()
            ));
            self.controller.compared(pass);
        }
        if let Some(upkeep) = self.upkeep.as_mut() {
            let r = upkeep.run(m, now).await;
            let metrics = self.metrics.as_ref().map(|r| (r, m));
            let ran =
                carry_out(&mut self.controller, &mut self.writer, self.cloud.as_mut(), r.effects, now, metrics).await;
            pre.done.extend(r.done.into_iter().chain(ran.done));
            pre.errors.extend(r.errors.into_iter().chain(ran.errors));
        }
        let mut writing = Writing { writer: &mut self.writer, metrics: self.metrics.as_ref().map(|r| (r, m)) };
        let mut host = Self::host(&mut self.controller, self.cloud.as_mut(), &mut self.kept, &mut writing, m, now);
        let report = self.schedule.run(&mut host).await;
        self.wake = host.wake;
        let (solves, queue_depth) = (std::mem::take(&mut host.solves), host.queue_depth);
        drop(host);
        if let Some(r) = self.metrics.as_mut() {
            r.after_run(&self.controller, &solves, queue_depth);
        }
        if let Some(c) = self.kept.comparison.take() {
            self.comparer.submit(c);
        }
        if !report.failed.is_empty() || self.controller.refused_writes().next().is_some() {
            self.kept.unsettled += 1;
        }
        pre.absorb(report);
        pre
    }

    pub async fn approve(&mut self, m: &ClusterObjects, id: &str, now: Millis) -> Result<String, String> {
        let mut writing = Writing { writer: &mut self.writer, metrics: self.metrics.as_ref().map(|r| (r, m)) };
        let mut host = Self::host(&mut self.controller, self.cloud.as_mut(), &mut self.kept, &mut writing, m, now);
        let approved = tick::approve(&mut host, id).await;
        drop(host);
        self.record();
        let (approval, report) = approved?;
        let message = approval.message(id)?;
        if report.errors.is_empty() {
            Ok(message)
        } else {
            Err(format!("{message}, but: {}", report.errors.join("; ")))
        }
    }

    /// An operator's "repair now" (see [`Controller::repair_now`]), carried out at once.
    pub async fn repair_now(&mut self, m: &ClusterObjects, node: &str, now: Millis) -> Result<String, String> {
        let mut writing = Writing { writer: &mut self.writer, metrics: self.metrics.as_ref().map(|r| (r, m)) };
        let mut host = Self::host(&mut self.controller, self.cloud.as_mut(), &mut self.kept, &mut writing, m, now);
        let (message, report) = tick::repair_now(&mut host, node).await?;
        if report.errors.is_empty() {
            Ok(message)
        } else {
            Err(format!("{message}, but: {}", report.errors.join("; ")))
        }
    }

    pub fn reject(&mut self, m: &ClusterObjects, id: &str, now: Millis) -> Result<String, String> {
        let rejected = self.controller.reject(id, crate::controller::state_key(&m.view()), now);
        self.record();
        rejected
    }

    pub fn set_mode(&mut self, mode: Mode, now: Millis) -> String {
        self.controller.set_mode(mode, now);
        format!("disruption mode is now {mode}")
    }

    /// Pauses (`Some`) or resumes (`None`) voluntary disruption in this instance's controller.
    pub fn set_hold(&mut self, hold: Option<crate::controller::Hold>, now: Millis) -> Result<String, String> {
        let pausing = hold.as_ref().map(|h| h.by.clone());
        let outcome = self.controller.set_hold(hold, now);
        match (&outcome, pausing) {
            (Ok(_), Some(by)) => tracing::info!(by, "voluntary disruption paused: every command is held"),
            (Ok(_), None) => tracing::info!("voluntary disruption resumed"),
            (Err(e), _) => tracing::warn!(error = %e, "pause or resume refused"),
        }
        outcome
    }

    /// Switches the controller's packing strategy (the dashboard's `:packing`).
    pub fn set_packing(&mut self, packing: crate::engine::packing::Packing) -> String {
        self.controller.set_packing(packing);
        tracing::info!(%packing, "packing strategy switched");
        format!("packing strategy is now {packing}")
    }
}

/// Resolves when `signal` (from [`Acting::wake_signal`]) is pinged; never without one.
pub async fn woken(signal: &Option<std::sync::Arc<tokio::sync::Notify>>) {
    match signal {
        Some(n) => n.notified().await,
        None => std::future::pending().await,
    }
}
