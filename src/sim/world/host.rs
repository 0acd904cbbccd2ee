//! The world as the acting controller's host ([`Host`]): the controller's schedule ([`crate::controller::tick`])
//! reads the world's store and its simulated EC2 through it, writes through the one executor, and tells it what to
//! record for the report. Nothing here decides what the controller does or when.

use std::hash::{Hash, Hasher};
use std::sync::Arc;

use super::{Decision, SolveTiming, Timer, World};
use crate::controller::cloud::{BoxFuture, CloudInstance, CloudProvider, Notice, at_once};
use crate::controller::execute::Report;
use crate::controller::tick::{BufferSources, Host, Note, Parts, Versions};
use crate::controller::{Controller, Effect};
use crate::engine::api::nodeoverlay::NodeOverlay;
use crate::engine::api::{EC2NodeClass, NodePool};
use crate::engine::catalog::InstanceType;
use crate::engine::provisioning::{Millis, is_provisionable};

impl Host for World {
    fn now(&self) -> Millis {
        self.now
    }

    fn versions(&self) -> Versions {
        let c = &self.cluster;
        let mut stamps = c.stamps();
        // NodePool status writes are not changes a pass could answer differently to.
        stamps[0] = self.nodepool_spec_stamp();
        let mut h = std::collections::hash_map::DefaultHasher::new();
        stamps.hash(&mut h);
        Versions {
            nodepool_specs: stamps[0],
            nodeclaims: c.nodeclaims.stamp(),
            nodes: c.nodes.stamp(),
            pods: c.pods.stamp(),
            capacitybuffers: c.capacitybuffers.stamp(),
            pod_templates: c.pod_templates.stamp(),
            deployments: c.deployments.stamp(),
            cloud: self.cloud.generation(),
            quiet: h.finish(),
        }
    }

    fn controller_mut(&mut self) -> &mut Controller {
        &mut self.controller
    }

    fn read<R>(&mut self, f: impl FnOnce(Parts<'_, '_>) -> R) -> R {
        let snap = self.cluster.snapshot_into(&mut self.caches.snapshot);
        f(Parts { controller: &mut self.controller, cloud: &mut self.cloud, snap: &snap, ids: &mut self.ids })
    }

    fn with_cloud<R>(&mut self, f: impl FnOnce(&mut Controller, &mut dyn CloudProvider) -> R) -> R {
        f(&mut self.controller, &mut self.cloud)
    }

    fn apply(&mut self, effects: Vec<Effect>) -> BoxFuture<'_, Report> {
        let mut report = Report::default();
        for e in effects {
            report.absorb(self.apply_effect(e));
        }
        Box::pin(std::future::ready(report))
    }

    fn flush(&mut self) -> BoxFuture<'_, Report> {
        Box::pin(std::future::ready(Report::default()))
    }

    fn list_instances(&mut self, now: Millis) -> BoxFuture<'_, Option<Vec<CloudInstance>>> {
        let list = at_once(CloudProvider::list(&mut self.cloud, now)).and_then(Result::ok).flatten();
        Box::pin(std::future::ready(list))
    }

    fn wake_at(&mut self, t: Millis) {
        self.at(t, Timer::Wake);
    }

    fn note(&mut self, note: Note<'_>) {
        let now = self.now;
        match note {
            Note::Solved { result, created, millis } => {
                // The claims come in the solve's order: each is recorded with its options cheapest first, the
                // claims with the same options sharing one list.
                let mut lists: rustc_hash::FxHashMap<Vec<*const InstanceType>, Arc<[String]>> = Default::default();
                for (name, decided) in created.iter().zip(&result.results.new_claims) {
                    let Some(name) = name else { continue };
                    let key = decided.instance_types.iter().map(Arc::as_ptr).collect();
                    let types = lists
                        .entry(key)
                        .or_insert_with(|| decided.instance_types.iter().map(|t| t.name.clone()).collect())
                        .clone();
                    self.set_claim_types(name, types);
                }
                let names: Vec<String> = created.into_iter().flatten().collect();
                self.pending_reasons = result.pending_reasons();
                self.record.solves.push(SolveTiming { at: now, pods: result.pods.len(), nodes: names.len(), millis });
                if !names.is_empty() {
                    let id = self.ids.next("p");
                    let pods = result.placed_pods();
                    self.record.decisions.push(Decision::Provision {
                        id,
                        at: now,
                        nodeclaims: names,
                        pods,
                        is_static: false,
                    });
                }
            }
            Note::StaticCreated(names) => {
                for name in &names {
                    self.set_claim_types(name, Arc::default());
                }
                let id = self.ids.next("p");
                self.record.decisions.push(Decision::Provision {
                    id,
                    at: now,
                    nodeclaims: names,
                    pods: 0,
                    is_static: true,
                });
            }
            Note::Interruption(message) => self.record_interruption(message),
            // EC2 takes back the instances of a capacity block that has ended (the garbage collector then removes
            // what is left of them).
            Note::ReservationsChecked => {
                self.cloud.end_reservations(now);
            }
            Note::Commands(ids) => self.record.decisions.extend(ids.into_iter().map(Decision::Disruption)),
        }
    }

    /// At once: the virtual clock does not move while it runs. The report sums the comparisons of solves that
    /// launched something.
    fn compare_packing(&mut self, comparison: crate::controller::provisioning::Comparison, launched: bool) {
        let started = std::time::Instant::now();
        let pass = comparison.run();
        let millis = started.elapsed().as_secs_f64() * 1000.0;
        if launched {
            self.record.comparisons.push(crate::sim::world::ComparisonTiming { at: pass.at, pods: pass.pods, millis });
            self.record.packing.push(pass);
        }
        self.controller.compared(pass);
    }

    fn node_classes(&self) -> Vec<EC2NodeClass> {
        self.cluster.nodeclasses.values().map(|o| (**o).clone()).collect()
    }

    fn node_overlays(&self) -> Vec<NodeOverlay> {
        self.cluster.nodeoverlays.values().map(|o| (**o).clone()).collect()
    }

    fn nodepools(&self) -> Vec<NodePool> {
        self.cluster.nodepools.values().map(|p| (**p).clone()).collect()
    }

    fn buffer_sources(&self) -> BufferSources {
        let c = &self.cluster;
        BufferSources {
            buffers: c.capacitybuffers.values().map(|b| (**b).clone()).collect(),
            pod_templates: c.pod_templates.values().map(|t| (**t).clone()).collect(),
            deployments: c.deployments.values().map(|d| (**d).clone()).collect(),
            statefulsets: Vec::new(),
        }
    }

    fn provisionable(&mut self) -> Arc<Vec<String>> {
        let stamp = self.cluster.pods.stamp();
        if let Some((at, uids)) = &self.caches.provisionable
            && *at == stamp
        {
            return Arc::clone(uids);
        }
        let uids: Vec<String> = self
            .cluster
            .pods
            .values()
            .filter(|p| is_provisionable(p))
            .map(|p| p.metadata.uid.clone().unwrap_or_default())
            .collect();
        let uids = Arc::new(uids);
        self.caches.provisionable = Some((stamp, Arc::clone(&uids)));
        uids
    }

    fn state_key(&mut self) -> u64 {
        World::state_key(self)
    }

    fn capacity_returns(&self) -> Option<Millis> {
        self.cloud.soonest_return()
    }

    fn has_reservations(&self) -> bool {
        !self.cloud.reservations().is_empty()
    }

    fn notices(&mut self) -> Vec<Notice> {
        let now = self.now;
        let mut claims = self.cluster.nodeclaims.values().map(|c| &**c);
        CloudProvider::interruptions(&mut self.cloud, &mut claims, now)
    }

    fn explain_events(&self) -> bool {
        self.explain_events
    }

    fn deleting(&self) -> (bool, bool) {
        let c = &self.cluster;
        (
            c.nodes.values().any(|n| n.metadata.deletion_timestamp.is_some()),
            c.nodeclaims.values().any(|c| c.metadata.deletion_timestamp.is_some()),
        )
    }
}

impl World {
    /// A claim's record lists `types` as its instance types (the solve's options, cheapest first).
    fn set_claim_types(&mut self, name: &str, types: Arc<[String]>) {
        if let Some(r) = self.record.nodeclaims.iter_mut().rev().find(|r| r.name == name) {
            r.instance_types = types;
        }
    }

    /// The report records an interruption notice against the node it hit, with the pods it displaced.
    fn record_interruption(&mut self, message: &crate::controller::interruption::Message) {
        let id = message.instance_ids.first().cloned().unwrap_or_default();
        let suffix = format!("/{id}");
        let node = self
            .cluster
            .nodes
            .values()
            .find(|n| n.spec.as_ref().and_then(|s| s.provider_id.as_deref()).is_some_and(|p| p.ends_with(&suffix)))
            .and_then(|n| n.metadata.name.clone());
        let Some(node) = node else { return };
        let displaced = self
            .cluster
            .pods
            .iter()
            .filter(|(_, p)| p.node_name() == Some(node.as_str()))
            .filter(|(_, p)| {
                !p.metadata
                    .owner_references
                    .iter()
                    .flatten()
                    .any(|o| o.kind == "DaemonSet" && o.controller == Some(true))
            })
            .map(|(k, _)| k.clone())
            .collect();
        let id = self.ids.next("d");
        self.record.decisions.push(Decision::Interruption { id, at: self.now, node, kind: message.kind, displaced });
    }
}
