//! How the world carries out the controller's effects: through the one executor ([`crate::controller::execute`]),
//! over the simulated cluster ([`ApiServer`]) and the simulated cloud, as the live loop does over the API server and
//! a real cloud. What stays the world's own is what a real cloud does with time: a launch's answer arrives
//! `launchLatency` after the call, and the report's record of why claims were deleted.

use super::api_server::ApiServer;
use super::{Decision, Timer, World};
use crate::controller::Effect;
use crate::controller::cloud::{BoxFuture, CloudProvider, LaunchFailure, Launched, Retry, at_once};
use crate::controller::execute::{Report, execute};
use crate::engine::api::NodeClaim;
use crate::engine::lifecycle::{self, DeleteReason, LaunchError, LifecycleAction};
use crate::engine::provisioning::Millis;
use crate::sim::cloud::SimCloud;

/// The simulated cloud's answer to a launch, held for the launch's latency and then handed to the executor as the
/// cloud's reply.
struct Answer(Option<Result<Launched, LaunchFailure>>);

impl CloudProvider for Answer {
    fn name(&self) -> &'static str {
        "sim"
    }

    fn create<'a>(
        &'a mut self,
        claims: &'a [NodeClaim],
        _now: Millis,
    ) -> BoxFuture<'a, Vec<Result<Launched, LaunchFailure>>> {
        let mut out = Vec::with_capacity(claims.len());
        for _ in claims {
            out.push(self.0.take().unwrap_or_else(|| {
                Err(LaunchFailure::Retry(Retry { message: "the cloud did not answer".into(), conflict: false }))
            }));
        }
        Box::pin(std::future::ready(out))
    }

    fn delete<'a>(&'a mut self, _provider_id: &'a str, _now: Millis) -> BoxFuture<'a, Result<Option<String>, Retry>> {
        Box::pin(std::future::ready(Ok(None)))
    }

    fn set_overlays(&mut self, _store: std::sync::Arc<crate::controller::cloud::OverlayStore>) {}
}

impl World {
    /// The world's store, clock and record as the controller's cluster port.
    pub(super) fn api(&mut self) -> ApiServer<'_> {
        self.ports().0
    }

    /// The cluster port and the simulated cloud, borrowed together for the executor.
    fn ports(&mut self) -> (ApiServer<'_>, &mut SimCloud) {
        let api = ApiServer {
            now: self.now,
            cluster: &mut self.cluster,
            record: &mut self.record,
            rng: &mut self.rng,
            timers: &mut self.timers,
            nodepool_spec_stamp: &mut self.nodepool_spec_stamp,
            nodepool_status_stamp: &mut self.nodepool_status_stamp,
        };
        (api, &mut self.cloud)
    }

    /// Carries out one effect and tells the controller what came of it.
    pub(super) fn apply_effect(&mut self, e: Effect) -> Report {
        match e {
            Effect::Launch { claim } => {
                self.request_launch(*claim);
                Report::default()
            }
            Effect::DeleteNodeClaim { name, reason } => {
                let live = self.is_live_claim(&name);
                let report = self.execute(vec![Effect::DeleteNodeClaim { name: name.clone(), reason }], None);
                if live {
                    self.record_delete(&name, reason);
                }
                report
            }
            other => self.execute(vec![other], None),
        }
    }

    /// Runs the executor over the simulated cluster and `cloud` (the simulated cloud when `None`), and hands the
    /// outcomes to the controller. A refused write is logged; the controller decides again from the store.
    fn execute(&mut self, effects: Vec<Effect>, cloud: Option<&mut Answer>) -> Report {
        let now = self.now;
        let (mut api, sim_cloud) = self.ports();
        let cloud: &mut dyn CloudProvider = match cloud {
            Some(answer) => answer,
            None => sim_cloud,
        };
        // The simulated cluster and cloud answer every call at once.
        let report = at_once(Box::pin(execute(effects, &mut api, cloud, now))).unwrap_or_else(|| {
            tracing::error!("the simulated cluster left a write unanswered");
            Report::default()
        });
        for o in &report.outcomes {
            self.controller.outcome(o.clone(), now);
        }
        for f in &report.failed {
            tracing::debug!(effect = %f.effect, "{}", f.message);
        }
        for provider_id in self.cloud.take_reboots() {
            self.reboot_node(&provider_id);
        }
        report
    }

    fn is_live_claim(&self, name: &str) -> bool {
        self.cluster.nodeclaims.get(name).is_some_and(|c| c.metadata.deletion_timestamp.is_none())
    }

    /// A deletion the controller decided, in the report (an interruption is recorded as the notice instead).
    fn record_delete(&mut self, name: &str, reason: DeleteReason) {
        if reason == DeleteReason::Interrupted {
            return;
        }
        let id = self.ids.next("d");
        self.record.decisions.push(Decision::Delete { id, at: self.now, nodeclaim: name.to_string(), reason });
    }

    /// Deletes a NodeClaim (finalization drains and terminates it) and records why, unless an interruption did it
    /// (the interruption is the decision on record).
    pub fn delete_nodeclaim(&mut self, name: &str, reason: DeleteReason) {
        if self.api().delete_claim(name) {
            self.record_delete(name, reason);
        }
    }

    /// A launch: the cloud is called now and its answer held for `launchLatency`, after which the executor records
    /// it on the claim ([`World::launch_done`]). A claim already launching, or gone, is not launched again.
    fn request_launch(&mut self, claim: NodeClaim) {
        let name = claim.name().to_string();
        // The launch carries the tick's status (the claim's conditions as they stand before the call).
        if let Some(c) = self.cluster.nodeclaims.get(&name)
            && c.status != claim.status
            && let Some(c) = self.cluster.nodeclaims.get_mut(&name)
        {
            c.status = claim.status.clone();
        }
        if self.in_flight.contains_key(&name) || !self.cluster.nodeclaims.contains_key(&name) {
            return;
        }
        let now = self.now;
        let answer = at_once(CloudProvider::create(&mut self.cloud, std::slice::from_ref(&claim), now));
        let result = answer.and_then(|mut r| r.pop()).unwrap_or_else(|| {
            Err(LaunchFailure::Retry(Retry { message: "the cloud did not answer".into(), conflict: false }))
        });
        self.in_flight.insert(name.clone(), result);
        let t = now + self.settings.launch_latency;
        self.at(t, Timer::LaunchDone { claim: name });
    }

    /// The cloud's answer to a launch arrives: the executor records it on the claim as it does live (a launched
    /// instance's provider id and labels; out of capacity deletes the claim; another refusal is recorded on it).
    pub(super) fn launch_done(&mut self, name: &str) {
        let Some(result) = self.in_flight.remove(name) else { return };
        let now = self.now;
        let Some(claim) = self.cluster.nodeclaims.get(name).map(|c| (**c).clone()) else {
            // Deleted meanwhile: the instance would leak; terminate it now.
            if let Ok(l) = &result {
                let _ = self.cloud.terminate(&l.result.provider_id, now);
            }
            return;
        };
        let launched = result.as_ref().ok().map(|l| l.result.clone());
        let mut deleted_for = None;
        if let Err(LaunchFailure::Cloud(err)) = &result {
            if matches!(err, LaunchError::InsufficientCapacity(_)) {
                // Learn which offerings were out so the next solve avoids them.
                for key in self.cloud.exhausted_offerings_for(&claim) {
                    self.cloud.learn_unavailable(key, now + super::ICE_TTL);
                }
            }
            deleted_for = lifecycle::launch_failed(err, now).into_iter().find_map(|a| match a {
                LifecycleAction::Delete { reason } => Some(reason),
                _ => None,
            });
        }
        let live = claim.metadata.deletion_timestamp.is_none();
        let report = self.execute(vec![Effect::Launch { claim: Box::new(claim) }], Some(&mut Answer(Some(result))));
        if let Some(lr) = launched
            && report.failed.is_empty()
        {
            if let Some(r) = self.record.nodeclaims.iter_mut().rev().find(|r| r.name == name) {
                r.launched = Some((lr.instance_type.clone(), lr.zone.clone(), lr.capacity_type.clone()));
            }
            self.cloud.mark_running(&lr.provider_id);
            let t = now + self.settings.registration_latency;
            self.at(t, Timer::Register { provider_id: lr.provider_id });
        }
        if let Some(reason) = deleted_for
            && live
            && !self.is_live_claim(name)
        {
            self.record_delete(name, reason);
        }
    }

    /// A Node whose last finalizer went, or that had none: the API server removes it, and the pod garbage
    /// collector the pods still bound to it.
    pub(crate) fn remove_node(&mut self, name: &str) {
        self.api().remove_node(name);
    }
}
