//! The schedule's host ([`Host`]) over one read of a watch cache: the live loop's, `plan`'s and the tests'. A watch
//! cache shows the controller's writes only once they come back through the watch, so within one run the host
//! keeps working copies of the NodeClaims and Nodes the steps changed (each step reads what the steps before it
//! wrote, as it would in the simulated store), and gathers the writes. At [`Host::flush`] the writes to one object
//! are folded into one (a merge patch replaces a claim's conditions whole, and two node updates guarded by the same
//! resourceVersion would make the second a conflict) and carried out in one batch by the host's [`Carry`], which
//! also lets the cloud batch its launches.

use std::collections::BTreeSet;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Node;

use super::cloud::{BoxFuture, CloudInstance, CloudProvider, Notice};
use super::execute::Report;
use super::out::node_update;
use super::tick::{BufferSources, Host, Ids, Note, Parts, Versions};
use super::{Controller, Effect};
use crate::engine::api::nodeoverlay::NodeOverlay;
use crate::engine::api::{EC2NodeClass, NodeClaim, NodePool};
use crate::engine::manifests::ClusterObjects;
use crate::engine::objects::Objects;
use crate::engine::provisioning::{Millis, is_provisionable};
use crate::engine::stored_pod::StoredPod;

/// Carries out a run's gathered writes (the live loop's writer with its backoff); without one they stay gathered
/// for the caller ([`CacheHost::into_effects`]).
pub trait Carry: Send {
    fn carry<'a>(
        &'a mut self,
        controller: &'a mut Controller,
        cloud: &'a mut dyn CloudProvider,
        effects: Vec<Effect>,
        now: Millis,
    ) -> BoxFuture<'a, Report>;
}

/// The cloud's last list of instances, kept between runs so that a long drain does not list every run.
#[derive(Debug, Clone, Default)]
pub struct Listed {
    pub at: Option<Millis>,
    pub instances: Vec<CloudInstance>,
}

/// How old a list of instances may be for finalization to read it (garbage collection always lists afresh): as
/// often as garbage collection lists anyway.
const LIST_MAX_AGE: Millis = super::timing::GC_EVERY;

pub struct CacheHost<'a> {
    controller: &'a mut Controller,
    cloud: &'a mut dyn CloudProvider,
    m: &'a ClusterObjects,
    pods: Vec<Arc<StoredPod>>,
    /// Working copies, made on the first write of the run.
    claims: Option<Vec<Arc<NodeClaim>>>,
    nodes: Option<Vec<Arc<Node>>>,
    gathered: Vec<Effect>,
    carry: Option<&'a mut dyn Carry>,
    comparison: Option<&'a mut Option<crate::controller::provisioning::Comparison>>,
    listed: &'a mut Listed,
    ids: &'a mut Ids,
    now: Millis,
    /// Numbers the runs: what isn't counted in the read's [`ClusterObjects::changes`] is looked at every run.
    run: u64,
    /// [`super::state_key`] of the read: the disruption quiet key and state key live.
    state_key: u64,
    /// Counts the runs whose writes did not all land (see [`CacheHost::unsettled`]).
    unsettled: u64,
    /// The earliest moment a step asked to be run again at.
    pub wake: Option<Millis>,
    /// How long each provisioning solve of the run took, in milliseconds (the live loop's metrics read it).
    pub solves: Vec<f64>,
    /// How many pods asked for capacity when the run looked (the provisioner's queue).
    pub queue_depth: Option<usize>,
    /// What went wrong outside a write (a list of the cloud's instances), for the run's report.
    errors: Vec<String>,
}

/// What a [`CacheHost`] borrows from its owner between runs.
pub struct Borrowed<'a> {
    pub controller: &'a mut Controller,
    pub cloud: &'a mut dyn CloudProvider,
    pub listed: &'a mut Listed,
    pub ids: &'a mut Ids,
    pub carry: Option<&'a mut dyn Carry>,
    /// Where a launching solve's packing comparison waits to be worked out off the loop (the newest replaces one
    /// waiting); `None` works it out at once.
    pub comparison: Option<&'a mut Option<crate::controller::provisioning::Comparison>>,
}

impl<'a> CacheHost<'a> {
    /// A host over `m` as read at `now`; `run` numbers the runs of one schedule (see [`Versions`]).
    pub fn new(parts: Borrowed<'a>, m: &'a ClusterObjects, now: Millis, run: u64) -> CacheHost<'a> {
        CacheHost {
            controller: parts.controller,
            cloud: parts.cloud,
            m,
            pods: m.pending_view(),
            claims: None,
            nodes: None,
            gathered: Vec::new(),
            carry: parts.carry,
            comparison: parts.comparison,
            listed: parts.listed,
            ids: parts.ids,
            now,
            run,
            state_key: super::state_key(&m.view()),
            unsettled: 0,
            wake: None,
            solves: Vec::new(),
            queue_depth: None,
            errors: Vec::new(),
        }
    }

    /// `count` numbers the runs whose writes did not all land (refused, a conflict, or held back by a backoff):
    /// while it moves, every step looks again, as only the step that decided a write makes it again.
    pub fn unsettled(mut self, count: u64) -> CacheHost<'a> {
        self.unsettled = count;
        self
    }

    /// The writes gathered and not carried out (all of them, for a host without a [`Carry`]), one per object.
    pub fn into_effects(mut self) -> Vec<Effect> {
        self.fold()
    }

    fn claims(&self) -> &[Arc<NodeClaim>] {
        self.claims.as_deref().unwrap_or(&self.m.nodeclaims)
    }

    fn nodes(&self) -> &[Arc<Node>] {
        self.nodes.as_deref().unwrap_or(&self.m.nodes)
    }

    /// The run's working copy of claim `name`.
    fn claim_mut(&mut self, name: &str) -> Option<&mut NodeClaim> {
        let m = self.m;
        // Only the claim written is copied; the others stay the read's own.
        self.claims.get_or_insert_with(|| m.nodeclaims.clone()).iter_mut().find(|c| c.name() == name).map(Arc::make_mut)
    }

    fn node_mut(&mut self, name: &str) -> Option<&mut Node> {
        let m = self.m;
        let nodes = self.nodes.get_or_insert_with(|| m.nodes.clone());
        nodes.iter_mut().find(|n| n.metadata.name.as_deref() == Some(name)).map(Arc::make_mut)
    }

    /// What the steps after this write read: the write as the cache will show it once it lands.
    fn see(&mut self, e: &Effect) {
        match e {
            Effect::PatchClaimStatus { name, status } => {
                if let Some(c) = self.claim_mut(name) {
                    c.status = Some((**status).clone());
                }
            }
            Effect::Launch { claim } => {
                if let Some(c) = self.claim_mut(claim.name()) {
                    c.status.clone_from(&claim.status);
                }
            }
            Effect::SyncNode { name, labels, annotations, taints, finalizers, .. } => {
                if let Some(n) = self.node_mut(name) {
                    n.metadata.labels.get_or_insert_default().extend(labels.clone());
                    n.metadata.annotations.get_or_insert_default().extend(annotations.clone());
                    if let Some(t) = taints {
                        n.spec.get_or_insert_default().taints = Some(t.clone());
                    }
                    if let Some(f) = finalizers {
                        n.metadata.finalizers = Some(f.clone());
                    }
                }
            }
            _ => {}
        }
    }

    /// The gathered writes, one per object, each where the object was first written (what a later step did
    /// because of it comes after it): a node's update is the difference between the cache's node and the run's
    /// working copy; a claim's status is the working copy's, carried by its launch when there is one.
    fn fold(&mut self) -> Vec<Effect> {
        let gathered = std::mem::take(&mut self.gathered);
        let launched: BTreeSet<String> = gathered
            .iter()
            .filter_map(|e| match e {
                Effect::Launch { claim } => Some(claim.name().to_string()),
                _ => None,
            })
            .collect();
        let mut done = BTreeSet::new();
        let mut effects = Vec::with_capacity(gathered.len());
        for e in gathered {
            match e {
                Effect::SyncNode { name, .. } => {
                    if !done.insert(format!("Node/{name}")) {
                        continue;
                    }
                    let before = self.m.nodes.iter().find(|n| n.metadata.name.as_deref() == Some(name.as_str()));
                    let after = self.nodes().iter().find(|n| n.metadata.name.as_deref() == Some(name.as_str()));
                    if let (Some(before), Some(after)) = (before, after)
                        && let Some(update) = node_update(before, after)
                    {
                        effects.push(update);
                    }
                }
                Effect::PatchClaimStatus { name, .. } => {
                    if launched.contains(&name) || !done.insert(format!("NodeClaim/{name}")) {
                        continue;
                    }
                    let before = self.m.nodeclaims.iter().find(|c| c.name() == name).and_then(|c| c.status.as_ref());
                    let after = self.claims().iter().find(|c| c.name() == name).and_then(|c| c.status.clone());
                    if let Some(status) = after
                        && before != Some(&status)
                    {
                        effects.push(Effect::PatchClaimStatus { name, status: Box::new(status) });
                    }
                }
                Effect::Launch { mut claim } => {
                    if let Some(c) = self.claims().iter().find(|c| c.name() == claim.name()) {
                        claim.status.clone_from(&c.status);
                    }
                    effects.push(Effect::Launch { claim });
                }
                other => effects.push(other),
            }
        }
        effects
    }
}

impl Host for CacheHost<'_> {
    fn now(&self) -> Millis {
        self.now
    }

    fn versions(&self) -> Versions {
        let r = self.run;
        let Some(c) = self.m.changes else {
            // A read without change counts: every step looks.
            return Versions {
                nodepool_specs: r,
                nodeclaims: r,
                nodes: r,
                pods: r,
                capacitybuffers: r,
                pod_templates: r,
                deployments: r,
                cloud: r,
                quiet: self.state_key,
            };
        };
        // A write that failed or is held back is made again only by the step that decided it: every step looks.
        let u = self.unsettled;
        Versions {
            // What NodePool status and drift read besides the pools: their node classes (readiness, the cloud's
            // drift verdicts) and the overlays over their types. The pools' own status writes count too, where
            // the world leaves them out: a step run once more does nothing.
            nodepool_specs: c.nodepools + c.nodeclasses + c.nodeoverlays + u,
            nodeclaims: c.nodeclaims + u,
            nodes: c.nodes + u,
            pods: c.pods + u,
            capacitybuffers: c.capacitybuffers + u,
            pod_templates: c.pod_templates + u,
            deployments: c.workloads + u,
            // The cloud's instances are not watched: the lifecycle step looks at every run.
            cloud: r,
            quiet: self.state_key,
        }
    }

    fn controller_mut(&mut self) -> &mut Controller {
        self.controller
    }

    fn read<R>(&mut self, f: impl FnOnce(Parts<'_, '_>) -> R) -> R {
        let mut snap = self.m.view_with(&self.pods);
        if let Some(c) = &self.claims {
            snap.nodeclaims = Objects::Shared(c);
        }
        if let Some(n) = &self.nodes {
            snap.nodes = Objects::Shared(n);
        }
        f(Parts { controller: self.controller, cloud: self.cloud, snap: &snap, ids: self.ids })
    }

    fn with_cloud<R>(&mut self, f: impl FnOnce(&mut Controller, &mut dyn CloudProvider) -> R) -> R {
        f(self.controller, self.cloud)
    }

    fn apply(&mut self, effects: Vec<Effect>) -> BoxFuture<'_, Report> {
        for e in &effects {
            self.see(e);
        }
        self.gathered.extend(effects);
        Box::pin(std::future::ready(Report::default()))
    }

    fn flush(&mut self) -> BoxFuture<'_, Report> {
        Box::pin(async move {
            let mut report = Report { errors: std::mem::take(&mut self.errors), ..Report::default() };
            let effects = if self.carry.is_some() { self.fold() } else { Vec::new() };
            if let Some(carry) = self.carry.as_mut()
                && !effects.is_empty()
            {
                report.absorb(carry.carry(self.controller, self.cloud, effects, self.now).await);
            }
            report
        })
    }

    fn list_instances(&mut self, now: Millis) -> BoxFuture<'_, Option<Vec<CloudInstance>>> {
        Box::pin(async move {
            if !self.cloud.lists() {
                return None;
            }
            match self.cloud.list(now).await {
                Ok(Some(list)) => {
                    *self.listed = Listed { at: Some(now), instances: list.clone() };
                    Some(list)
                }
                Ok(None) => None,
                Err(e) => {
                    tracing::warn!(cloud = self.cloud.name(), "listing instances: {}", e.message);
                    self.errors.push(format!("listing this cluster's instances: {}", e.message));
                    None
                }
            }
        })
    }

    fn recent_instances(&mut self, now: Millis) -> BoxFuture<'_, Option<Vec<CloudInstance>>> {
        match self.listed.at {
            Some(at) if now - at < LIST_MAX_AGE => Box::pin(std::future::ready(Some(self.listed.instances.clone()))),
            _ => self.list_instances(now),
        }
    }

    fn wake_at(&mut self, t: Millis) {
        self.wake = Some(self.wake.map_or(t, |w| w.min(t)));
    }

    fn note(&mut self, note: Note<'_>) {
        if let Note::Solved { millis, .. } = note {
            self.solves.push(millis);
        }
    }

    fn compare_packing(&mut self, comparison: crate::controller::provisioning::Comparison, _launched: bool) {
        match self.comparison.as_mut() {
            Some(slot) => **slot = Some(comparison),
            None => self.controller.compared(comparison.run()),
        }
    }

    fn node_classes(&self) -> Vec<EC2NodeClass> {
        self.m.nodeclasses.clone()
    }

    fn node_overlays(&self) -> Vec<NodeOverlay> {
        self.m.nodeoverlays.clone()
    }

    fn nodepools(&self) -> Vec<NodePool> {
        self.m.nodepools.clone()
    }

    fn buffer_sources(&self) -> BufferSources {
        let m = self.m;
        // A manifest file's Deployments are its scalables; a live cluster's are read as workloads.
        let deployments = if m.workloads.deployments.is_empty() { &m.deployments } else { &m.workloads.deployments };
        BufferSources {
            buffers: m.capacitybuffers.to_vec(),
            pod_templates: m.pod_templates.clone(),
            deployments: deployments.clone(),
            statefulsets: m.workloads.statefulsets.clone(),
        }
    }

    fn provisionable(&mut self) -> Arc<Vec<String>> {
        let uids = self.m.pods.iter().filter(|p| is_provisionable(p));
        let uids: Vec<String> = uids.map(|p| p.metadata.uid.clone().unwrap_or_default()).collect();
        self.queue_depth = Some(uids.len());
        Arc::new(uids)
    }

    fn state_key(&mut self) -> u64 {
        self.state_key
    }

    fn capacity_returns(&self) -> Option<Millis> {
        // The cache's state leaves out the cloud's catalogs (offerings out of capacity come back): a quiet period
        // ends within a minute, as often as scheduled budgets can change.
        Some(self.now + super::timing::MINUTE)
    }

    fn has_reservations(&self) -> bool {
        true
    }

    fn notices(&mut self) -> Vec<Notice> {
        let claims = self.claims.as_deref().unwrap_or(&self.m.nodeclaims);
        self.cloud.interruptions(&mut claims.iter().map(|c| &**c), self.now)
    }

    fn explain_events(&self) -> bool {
        true
    }

    fn deleting(&self) -> (bool, bool) {
        (
            self.nodes().iter().any(|n| n.metadata.deletion_timestamp.is_some()),
            self.claims().iter().any(|c| c.metadata.deletion_timestamp.is_some()),
        )
    }
}

/// Gathers what one run of a fresh schedule over `m` would write, without a cloud's instances or a writer: `plan`,
/// and the tests that look at a run's writes.
pub fn run_once(
    controller: &mut Controller,
    cloud: &mut dyn CloudProvider,
    m: &ClusterObjects,
    now: Millis,
) -> Vec<Effect> {
    use futures_util::FutureExt;
    let mut listed = Listed::default();
    let mut ids = std::mem::take(&mut controller.ids);
    let mut tick = super::tick::Tick::new(Millis::MAX, Millis::MAX);
    let mut host = CacheHost::new(
        Borrowed { controller, cloud, listed: &mut listed, ids: &mut ids, carry: None, comparison: None },
        m,
        now,
        1,
    );
    // Nothing in a run without a carrier waits on anything but the cloud, which a plan's cloud answers at once.
    let ran = tick.run(&mut host).now_or_never();
    let effects = if ran.is_some() { host.into_effects() } else { Vec::new() };
    controller.ids = ids;
    effects
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::api::Condition;
    use crate::engine::catalog::kwok::kwok_catalog;
    use k8s_openapi::api::core::v1::Taint;

    const OBJECTS: &str = "apiVersion: karpenter.sh/v1\nkind: NodeClaim\nmetadata: {name: c1, resourceVersion: \"7\"}\nspec:\n  nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}\n  requirements: []\nstatus: {providerID: \"kwok://n1\", nodeName: n1}\n---\napiVersion: v1\nkind: Node\nmetadata: {name: n1, resourceVersion: \"9\", labels: {a: \"1\"}}\nspec: {providerID: \"kwok://n1\"}\n";

    fn condition(type_: &str) -> Condition {
        Condition {
            type_: type_.into(),
            status: "True".into(),
            reason: Some(type_.into()),
            message: Some(String::new()),
            last_transition_time: None,
            observed_generation: None,
        }
    }

    fn controller() -> Controller {
        Controller::new(Arc::new(kwok_catalog("us-east-1")), crate::engine::disruption::gate::Mode::Approve, 0)
    }

    fn taint(key: &str) -> Taint {
        Taint { key: key.into(), effect: "NoSchedule".into(), ..Taint::default() }
    }

    /// Two steps' writes to the same claim and node, each made on what the previous step wrote: the later step
    /// reads the earlier one's, and they leave as one write per object where each was first written.
    #[test]
    fn writes_to_one_object_are_read_back_and_folded_into_one() {
        let m = ClusterObjects::parse(OBJECTS, "o.yaml").unwrap();
        let mut controller = controller();
        let mut cloud = super::super::cloud::ReadOnlyCloud;
        let (mut listed, mut ids) = (Listed::default(), Ids::default());
        let parts = Borrowed {
            controller: &mut controller,
            cloud: &mut cloud,
            listed: &mut listed,
            ids: &mut ids,
            carry: None,
            comparison: None,
        };
        let mut host = CacheHost::new(parts, &m, 0, 1);
        let write = |host: &mut CacheHost<'_>, effects: Vec<Effect>| {
            futures_util::FutureExt::now_or_never(host.apply(effects)).unwrap();
        };
        // Step one: a condition on the claim, a taint on the node.
        let mut status = m.nodeclaims[0].status.clone().unwrap();
        status.conditions.push(condition("Drifted"));
        write(&mut host, vec![Effect::PatchClaimStatus { name: "c1".into(), status: Box::new(status) }]);
        let node_write = |labels: &[(&str, &str)], taints: Option<Vec<Taint>>| Effect::SyncNode {
            name: "n1".into(),
            resource_version: Some("9".into()),
            labels: labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            annotations: Default::default(),
            taints,
            finalizers: None,
        };
        write(&mut host, vec![node_write(&[], Some(vec![taint("t1")]))]);
        write(&mut host, vec![Effect::DeleteNode { name: "other".into() }]);
        // Step two reads step one's writes and builds on them.
        let (claim_status, node) =
            host.read(|p| (p.snap.nodeclaims[0].status.clone().unwrap(), p.snap.nodes[0].clone()));
        assert_eq!(claim_status.conditions.len(), 1, "the condition step one wrote is read back");
        assert_eq!(node.spec.as_ref().and_then(|s| s.taints.clone()).map(|t| t.len()), Some(1));
        let mut status = claim_status;
        status.conditions.push(condition("Consolidatable"));
        write(&mut host, vec![Effect::PatchClaimStatus { name: "c1".into(), status: Box::new(status) }]);
        write(&mut host, vec![node_write(&[("b", "2")], None)]);

        let effects = host.into_effects();
        assert_eq!(effects.len(), 3, "one write per object: {effects:?}");
        let Effect::PatchClaimStatus { status, .. } = &effects[0] else { panic!("claim first: {effects:?}") };
        let types: Vec<&str> = status.conditions.iter().map(|c| c.type_.as_str()).collect();
        assert_eq!(types, ["Drifted", "Consolidatable"], "neither step's condition is lost");
        let Effect::SyncNode { resource_version, labels, taints, .. } = &effects[1] else { panic!("{effects:?}") };
        assert_eq!(resource_version.as_deref(), Some("9"), "guarded by the cached node's version");
        assert_eq!(labels.get("b").map(String::as_str), Some("2"));
        assert!(!labels.contains_key("a"), "only what changed");
        assert_eq!(taints.as_ref().map(Vec::len), Some(1));
        assert!(matches!(effects[2], Effect::DeleteNode { .. }));
    }

    /// A write that a later step takes back leaves nothing to write.
    #[test]
    fn a_status_put_back_as_it_was_is_not_written() {
        let m = ClusterObjects::parse(OBJECTS, "o.yaml").unwrap();
        let mut controller = controller();
        let mut cloud = super::super::cloud::ReadOnlyCloud;
        let (mut listed, mut ids) = (Listed::default(), Ids::default());
        let parts = Borrowed {
            controller: &mut controller,
            cloud: &mut cloud,
            listed: &mut listed,
            ids: &mut ids,
            carry: None,
            comparison: None,
        };
        let mut host = CacheHost::new(parts, &m, 0, 1);
        let before = m.nodeclaims[0].status.clone().unwrap();
        let mut changed = before.clone();
        changed.conditions.push(condition("Drifted"));
        for status in [changed, before] {
            futures_util::FutureExt::now_or_never(
                host.apply(vec![Effect::PatchClaimStatus { name: "c1".into(), status: Box::new(status) }]),
            )
            .unwrap();
        }
        assert!(host.into_effects().is_empty());
    }

    /// Over a watch cache's reads, a step whose inputs did not change is skipped (its write of the last run is
    /// still on its way back through the watch), and a change to what it reads besides its own kind (a NodePool's
    /// node class) runs it again.
    #[test]
    fn a_step_looks_again_only_when_what_it_reads_changed() {
        let pool = "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: default, resourceVersion: \"3\"}\nspec:\n  template:\n    spec:\n      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}\n      requirements: []\n";
        let mut m = ClusterObjects::parse(pool, "p.yaml").unwrap();
        m.changes = Some(crate::engine::manifests::Changes { nodepools: 1, ..Default::default() });
        let mut controller = controller();
        let mut tick = super::super::tick::Tick::new(Millis::MAX, Millis::MAX);
        let (mut listed, mut ids) = (Listed::default(), Ids::default());
        let mut run = |m: &ClusterObjects, n: u64| {
            let mut cloud = super::super::cloud::ReadOnlyCloud;
            let parts = Borrowed {
                controller: &mut controller,
                cloud: &mut cloud,
                listed: &mut listed,
                ids: &mut ids,
                carry: None,
                comparison: None,
            };
            let mut host = CacheHost::new(parts, m, n as Millis * 1_000, n);
            futures_util::FutureExt::now_or_never(tick.run(&mut host)).unwrap();
            host.into_effects().into_iter().filter(|e| matches!(e, Effect::PatchNodePoolStatus { .. })).count()
        };
        assert_eq!(run(&m, 1), 1, "the pool has no status yet");
        assert_eq!(run(&m, 2), 0, "nothing changed since");
        m.changes.as_mut().unwrap().nodeclasses += 1;
        assert_eq!(run(&m, 3), 1, "its node class changed: looked at again");
    }
}
