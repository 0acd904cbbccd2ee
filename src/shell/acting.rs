//! The controller with its hands: the planner, the cluster port and the cloud, ticked by whoever runs the loop
//! (the live dashboard's backend, or the headless `controller`). Operator requests go through here too, so an
//! approval is validated against the same cache the planner reads.

use crate::engine::disruption::gate::Mode;
use crate::engine::manifests::ClusterObjects;
use crate::engine::provisioning::Millis;
use crate::kube::writer::Writer;

use crate::controller::cloud::CloudProvider;
use crate::controller::execute::{Report, execute};
use crate::controller::timing::GC_EVERY;
use crate::controller::{Controller, Effect, generation};

pub struct Acting {
    pub controller: Controller,
    pub writer: Writer,
    /// Where instances come from.
    pub cloud: Box<dyn CloudProvider>,
    /// The AWS cloud's periodic work (NodeClass status and drift, templates, catalogs, interruptions); `None` for
    /// KWOK.
    pub upkeep: Option<crate::aws::upkeep::AwsUpkeep>,
    /// When garbage collection next lists the cloud's instances.
    next_gc: Millis,
}

/// With nothing due sooner, the controller still runs this often: a backstop for anything time-driven it cannot
/// foresee (its own quiet periods already end within a minute).
pub const IDLE_TICK: Millis = 60_000;
/// Runs are at least this far apart, so a wake that is due at once cannot spin the loop.
pub const MIN_TICK_GAP: Millis = 50;

impl Acting {
    pub fn new(
        controller: Controller,
        writer: Writer,
        cloud: Box<dyn CloudProvider>,
        upkeep: Option<crate::aws::upkeep::AwsUpkeep>,
    ) -> Acting {
        let mut controller = controller;
        controller.set_repair_policies(cloud.repair_policies());
        Acting { controller, writer, cloud, upkeep, next_gc: Millis::MIN }
    }

    /// When the next run is due if the cluster does not change (a change is always a reason to run): the
    /// controller's next wake, the cloud's periodic work, at most [`IDLE_TICK`] away.
    pub fn next_wake(&self, now: Millis) -> Millis {
        let upkeep = self.upkeep.as_ref().map(|u| u.next_due());
        let gc = Some(self.next_gc).filter(|_| self.cloud.lists());
        let next = self.controller.next_wake(now).into_iter().chain(upkeep).chain(gc).min().unwrap_or(Millis::MAX);
        next.clamp(now + MIN_TICK_GAP, now + IDLE_TICK)
    }

    /// How long to sleep from `now` until [`Acting::next_wake`].
    pub fn sleep_for(&self, now: Millis) -> std::time::Duration {
        std::time::Duration::from_millis((self.next_wake(now) - now).max(0) as u64)
    }

    /// What wakes the loop when something outside the cluster needs it (an interruption notice arrived); `None`
    /// for a cloud without such notices. Await it with [`woken`].
    pub fn wake_signal(&self) -> Option<std::sync::Arc<tokio::sync::Notify>> {
        self.upkeep.as_ref().map(|u| u.wake.clone())
    }

    /// Carries out `effects`, except those whose object is backing off after a refusal; records what was refused
    /// (logged and shown once per distinct error) and what went through.
    async fn run(&mut self, effects: Vec<Effect>, now: Millis) -> Report {
        let (effects, held) = self.controller.hold_backed_off(effects, now);
        let mut report = execute(effects, &mut self.writer, self.cloud.as_mut(), now).await;
        report.outcomes.extend(held);
        for o in &report.outcomes {
            self.controller.outcome(o.clone(), now);
        }
        for key in &report.succeeded {
            self.controller.write_succeeded(key);
        }
        for f in &report.failed {
            if f.conflict {
                tracing::info!(effect = %f.effect, "{}; planned again from the fresh object", f.message);
            } else if let Some(line) = self.controller.write_refused(&f.key, &f.effect, &f.message, now) {
                report.errors.push(line);
            }
        }
        report
    }

    /// Garbage collection when it is due: the cloud's list (taken after the cache was read, as upstream lists)
    /// against the claims and nodes.
    async fn collect(&mut self, m: &ClusterObjects, now: Millis, report: &mut Report) {
        if now < self.next_gc || !self.cloud.lists() {
            return;
        }
        self.next_gc = now + GC_EVERY;
        match self.cloud.list(now).await {
            Ok(Some(list)) => {
                let mut effects = self.controller.garbage_collect(&m.view(), &list, now);
                // Instances whose reservation ended: their claims and nodes become on-demand.
                effects.extend(self.controller.capacity_types(&m.view(), &list));
                self.controller.set_live_instances(list.into_iter().map(|i| i.provider_id).collect());
                let ran = self.run(effects, now).await;
                report.done.extend(ran.done);
                report.errors.extend(ran.errors);
            }
            Ok(None) => {}
            Err(e) => {
                tracing::warn!(cloud = self.cloud.name(), "listing instances: {}", e.message);
                report.errors.push(format!("listing this cluster's instances: {}", e.message));
            }
        }
    }

    /// One reconcile over the cache as it is.
    pub async fn tick(&mut self, m: &ClusterObjects, now: Millis) -> Report {
        let mut pre = Report::default();
        self.collect(m, now, &mut pre).await;
        if let Some(upkeep) = self.upkeep.as_mut() {
            let r = upkeep.run(m, now).await;
            let ran = self.run(r.effects, now).await;
            pre.done.extend(r.done.into_iter().chain(ran.done));
            pre.errors.extend(r.errors.into_iter().chain(ran.errors));
        }
        // Interruption notices, each answered once what it asks for was done (an unanswered one comes back).
        let notices = self.cloud.interruptions(&mut m.nodeclaims.iter(), now);
        for n in notices {
            let effects = self.controller.interruption(&m.view(), &n.message, now);
            let ran = self.run(effects, now).await;
            (n.answer)(if ran.errors.is_empty() { Ok(()) } else { Err(ran.errors.join("; ")) });
            pre.done.extend(ran.done);
            pre.errors.extend(ran.errors);
        }
        // Capacity blocks about to end take their claims with them.
        let effects = self.controller.reservation_expiration(self.cloud.as_mut(), &m.view(), now);
        let ran = self.run(effects, now).await;
        pre.done.extend(ran.done);
        pre.errors.extend(ran.errors);
        // What the cloud offers now and which claims drifted from their node class, as the cloud judges it.
        self.controller.sync_instance_types(self.cloud.as_mut(), &m.nodeclasses, now);
        self.controller.sync_drift(self.cloud.as_mut(), &m.view(), now);
        let effects = self.controller.plan(m, now, generation(m));
        if self.controller.overlays_on() {
            self.cloud.set_overlays(std::sync::Arc::new(self.controller.overlay_store()));
            self.cloud.set_type_price_overlays(&crate::engine::overlay::instance_type_prices(&m.nodeoverlays));
        }
        let mut report = self.run(effects, now).await;
        report.done.splice(0..0, pre.done);
        report.errors.splice(0..0, pre.errors);
        report
    }

    pub async fn approve(&mut self, m: &ClusterObjects, id: &str, now: Millis) -> Result<String, String> {
        let (effects, message) = self.controller.approve(m, id, now)?;
        let report = self.run(effects, now).await;
        if report.errors.is_empty() {
            Ok(message)
        } else {
            Err(format!("{message}, but: {}", report.errors.join("; ")))
        }
    }

    /// An operator's "repair now" (see [`Controller::repair_now`]), carried out at once.
    pub async fn repair_now(&mut self, m: &ClusterObjects, node: &str, now: Millis) -> Result<String, String> {
        let pods = m.pending_view();
        let view = crate::controller::snapshot_of(m, &pods);
        let (effects, message) = self.controller.repair_now(&view, node, now)?;
        let report = self.run(effects, now).await;
        if report.errors.is_empty() {
            Ok(message)
        } else {
            Err(format!("{message}, but: {}", report.errors.join("; ")))
        }
    }

    pub fn reject(&mut self, m: &ClusterObjects, id: &str, now: Millis) -> Result<String, String> {
        self.controller.reject(id, generation(m), now)
    }

    pub fn set_mode(&mut self, mode: Mode, now: Millis) -> String {
        self.controller.set_mode(mode, now);
        format!("disruption mode is now {mode}")
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
