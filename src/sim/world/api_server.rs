//! The simulated cluster as the controller's cluster port ([`ClusterPort`]): the writes the one executor
//! ([`crate::controller::execute`]) makes land in the world's store with the API server's semantics where they
//! matter — generated names from the world's seeded generator, an object whose last finalizer goes is gone, an
//! eviction a PDB forbids is refused, a deleted pod leaves after its grace period — and in the report's record.
//!
//! A write guarded by a resourceVersion always applies here: the world has no other writer, so what the controller
//! read is what is stored.

use std::collections::BTreeMap;
use std::future::ready;

use k8s_openapi::api::core::v1::ObjectReference;

use super::{EVENTS_KEPT, EventRecord, NodeClaimRecord, Record, Rng, SECOND, Timer, Timers};
use crate::controller::cluster_port::{ClusterPort, Eviction, NodeWrite, WriteError, WriteResult};
use crate::controller::effect::LabelTarget;
use crate::engine::api::capacitybuffer::CapacityBufferStatus;
use crate::engine::api::ec2nodeclass::EC2NodeClassStatus;
use crate::engine::api::nodeoverlay::NodeOverlayStatus;
use crate::engine::api::nodepool::NodePoolStatus;
use crate::engine::api::{NodeClaim, NodeClaimStatus};
use crate::engine::labels;
use crate::engine::lifecycle;
use crate::engine::provisioning::Millis;
use crate::engine::stored_pod::StoredPod;
use crate::sim::cluster::{Cluster, Key};

/// Default pod termination grace period.
const DEFAULT_POD_GRACE: Millis = 30 * SECOND;

/// The world's store, clock and record, borrowed for one batch of writes.
pub(super) struct ApiServer<'w> {
    pub now: Millis,
    pub cluster: &'w mut Cluster,
    pub record: &'w mut Record,
    pub rng: &'w mut Rng,
    pub timers: &'w mut Timers,
    /// The NodePools' stamp as of their last spec write, and as of the last status write: a status write is not a
    /// change to what the controllers read from them.
    pub nodepool_spec_stamp: &'w mut u64,
    pub nodepool_status_stamp: &'w mut Option<u64>,
}

fn not_found(what: String) -> WriteError {
    WriteError::Api { what, code: 404, reason: "NotFound".into(), message: "not found".into() }
}

fn answer<'a, T: Send + 'a>(r: Result<T, WriteError>) -> WriteResult<'a, T> {
    Box::pin(ready(r))
}

impl ApiServer<'_> {
    /// A NodeClaim stored under a fresh `<nodepool>-xxxxx` name, and its record (its instance types as its
    /// requirement lists them; the provisioning step records the solve's order instead).
    pub fn create_claim(&mut self, mut nc: NodeClaim) -> NodeClaim {
        let nodepool = nc.nodepool().unwrap_or_default().to_string();
        let name = loop {
            let n = format!("{nodepool}-{}", self.rng.suffix(5));
            if !self.cluster.nodeclaims.contains_key(&n) {
                break n;
            }
        };
        let instance_types = nc
            .spec
            .requirements
            .iter()
            .find(|r| r.key == labels::INSTANCE_TYPE && r.operator == "In")
            .map(|r| r.values.clone())
            .unwrap_or_default();
        nc.metadata.name = Some(name.clone());
        nc.metadata.uid = Some(self.cluster.uid());
        nc.metadata.creation_timestamp = Some(lifecycle::ms_time(self.now));
        self.record.nodeclaims.push(NodeClaimRecord {
            name: name.clone(),
            nodepool,
            created_at: self.now,
            deleted_at: None,
            instance_types,
            requirements: nc
                .spec
                .requirements
                .iter()
                .map(|r| (r.key.clone(), r.operator.clone(), r.values.clone()))
                .collect(),
            launched: None,
        });
        self.cluster.nodeclaims.insert(name, nc.clone());
        nc
    }

    /// Sets a NodeClaim's deletion timestamp. Whether it was deleted by this call (it existed and was not already
    /// being deleted).
    pub fn delete_claim(&mut self, name: &str) -> bool {
        if self.cluster.nodeclaims.get(name).is_some_and(|c| c.metadata.deletion_timestamp.is_none())
            && let Some(c) = self.cluster.nodeclaims.get_mut(name)
        {
            c.metadata.deletion_timestamp = Some(lifecycle::ms_time(self.now));
            return true;
        }
        false
    }

    /// A Node whose last finalizer went, or that had none: the API server removes it, and the pod garbage
    /// collector the pods still bound to it.
    pub fn remove_node(&mut self, name: &str) {
        let now = self.now;
        self.refresh_node_record(name);
        self.cluster.nodes.remove(name);
        // The CSINode is owned by its Node: the garbage collector takes it too.
        self.cluster.csinodes.remove(name);
        let orphans: Vec<Key> =
            self.cluster.pods.iter().filter(|(_, p)| p.node_name() == Some(name)).map(|(k, _)| k.clone()).collect();
        for k in orphans {
            self.cluster.pods.remove(&k);
            if let Some(r) = self.record.pods.get_mut(&k) {
                r.deleted_at = Some(now);
            }
        }
        if let Some(r) = self.record.nodes.iter_mut().rev().find(|r| r.name == name) {
            r.deleted_at = Some(now);
        }
    }

    /// Copies a live node's current labels and taints into its record (the report shows a node as last seen).
    pub fn refresh_node_record(&mut self, name: &str) {
        let Some(n) = self.cluster.nodes.get(name) else { return };
        if let Some(r) = self.record.nodes.iter_mut().rev().find(|r| r.name == name) {
            r.labels = n.metadata.labels.clone().unwrap_or_default();
            r.taints = n.spec.as_ref().and_then(|s| s.taints.clone()).unwrap_or_default();
        }
    }

    /// Marks a pod deleted; it is gone after `grace` (its own termination grace period when `None`).
    pub fn delete_pod(&mut self, key: &Key, grace: Option<Millis>) {
        let now = self.now;
        if self.cluster.pods.get(key).is_none_or(|p| p.metadata.deletion_timestamp.is_some()) {
            return;
        }
        let Some(p) = self.cluster.pods.get_mut(key) else { return };
        p.metadata.deletion_timestamp = Some(lifecycle::ms_time(now));
        let g = grace.unwrap_or_else(|| {
            p.spec().termination_grace_period_seconds.map_or(DEFAULT_POD_GRACE, |s| s.max(0) * SECOND)
        });
        self.timers.at(now, now + g, Timer::PodGone { key: key.clone() });
    }

    fn sync_node_now(&mut self, w: NodeWrite<'_>) -> Result<(), WriteError> {
        let name = w.name;
        let initialized = w.labels.get(labels::INITIALIZED).is_some_and(|v| v == "true");
        let Some(n) = self.cluster.nodes.get_mut(name) else { return Err(not_found(format!("update node {name}"))) };
        n.metadata.labels.get_or_insert_with(BTreeMap::new).extend(w.labels.clone());
        if !w.annotations.is_empty() {
            n.metadata.annotations.get_or_insert_with(BTreeMap::new).extend(w.annotations.clone());
        }
        if let Some(t) = w.taints {
            n.spec.get_or_insert_with(Default::default).taints = Some(t.to_vec());
        }
        if let Some(f) = w.finalizers {
            n.metadata.finalizers = Some(f.to_vec());
        }
        let gone = n.metadata.deletion_timestamp.is_some() && n.metadata.finalizers.iter().flatten().count() == 0;
        if initialized && let Some(r) = self.record.nodes.iter_mut().rev().find(|r| r.name == name) {
            r.initialized_at.get_or_insert(self.now);
        }
        if gone {
            self.remove_node(name);
        }
        Ok(())
    }

    fn evict_now(&mut self, namespace: &str, name: &str) -> Result<Eviction, WriteError> {
        let key = (namespace.to_string(), name.to_string());
        // Refused while a PDB would be violated (each eviction sees the ones before it, since PDBs count pods
        // being deleted).
        let verdict = {
            let Some(p) = self.cluster.pods.get(&key) else { return Ok(Eviction::Gone) };
            // Only a budget that selects the pod reads the other pods: most evictions have none, and listing
            // 100,000 pods for each of a node's hundreds was most of a drain.
            let pdbs: Vec<_> = self
                .cluster
                .pdbs
                .values()
                .filter(|b| crate::engine::pdb::selects(b, p))
                .map(|b| (**b).clone())
                .collect();
            let all: Vec<&StoredPod> = match pdbs.is_empty() {
                true => Vec::new(),
                false => self.cluster.pods.values().map(|o| &**o).collect(),
            };
            crate::engine::pdb::check_eviction(p, &pdbs, &all)
        };
        match verdict {
            Ok(()) => {
                self.delete_pod(&key, None);
                Ok(Eviction::Evicted)
            }
            Err(why) if why.status_code() == 429 => Ok(Eviction::Blocked(why.to_string())),
            Err(why) => Err(WriteError::Api {
                what: format!("evict pod {namespace}/{name}"),
                code: why.status_code(),
                reason: "InternalError".into(),
                message: why.to_string(),
            }),
        }
    }
}

impl ClusterPort for ApiServer<'_> {
    fn create_nodeclaim<'a>(&'a mut self, claim: &'a NodeClaim) -> WriteResult<'a, NodeClaim> {
        answer(Ok(self.create_claim(claim.clone())))
    }

    fn update_nodeclaim_status<'a>(&'a mut self, name: &'a str, status: &'a NodeClaimStatus) -> WriteResult<'a, ()> {
        let r = match self.cluster.nodeclaims.get_mut(name) {
            Some(c) => {
                c.status = Some(status.clone());
                Ok(())
            }
            None => Err(not_found(format!("update the status of NodeClaim {name}"))),
        };
        answer(r)
    }

    fn patch_nodeclaim_metadata<'a>(
        &'a mut self,
        name: &'a str,
        l: &'a BTreeMap<String, String>,
        annotations: &'a BTreeMap<String, String>,
        remove_annotations: &'a [String],
        finalizers: Option<&'a [String]>,
    ) -> WriteResult<'a, ()> {
        let r = match self.cluster.nodeclaims.get_mut(name) {
            Some(c) => {
                if !l.is_empty() {
                    c.metadata.labels.get_or_insert_with(BTreeMap::new).extend(l.clone());
                }
                if !annotations.is_empty() {
                    c.metadata.annotations.get_or_insert_with(BTreeMap::new).extend(annotations.clone());
                }
                if let Some(a) = c.metadata.annotations.as_mut() {
                    for k in remove_annotations {
                        a.remove(k);
                    }
                }
                if let Some(f) = finalizers {
                    c.metadata.finalizers = Some(f.to_vec());
                }
                Ok(())
            }
            None => Err(not_found(format!("update NodeClaim {name}"))),
        };
        answer(r)
    }

    fn sync_node<'a>(&'a mut self, w: NodeWrite<'a>) -> WriteResult<'a, ()> {
        answer(self.sync_node_now(w))
    }

    fn relabel<'a>(
        &'a mut self,
        target: LabelTarget,
        name: &'a str,
        set: &'a BTreeMap<String, String>,
        remove: &'a [String],
    ) -> WriteResult<'a, ()> {
        let meta = match target {
            LabelTarget::NodeClaim => self.cluster.nodeclaims.get_mut(name).map(|c| &mut c.metadata),
            LabelTarget::Node => self.cluster.nodes.get_mut(name).map(|n| &mut n.metadata),
        };
        let r = match meta {
            Some(meta) => {
                let l = meta.labels.get_or_insert_with(BTreeMap::new);
                for k in remove {
                    l.remove(k);
                }
                l.extend(set.clone());
                Ok(())
            }
            None => Err(not_found(format!("relabel {target:?} {name}"))),
        };
        answer(r)
    }

    fn nominate_pod<'a>(
        &'a mut self,
        namespace: &'a str,
        name: &'a str,
        uid: Option<&'a str>,
        node: &'a str,
    ) -> WriteResult<'a, ()> {
        // A pod that is gone, or another pod under its name, is not written (a precondition on the uid).
        let key = (namespace.to_string(), name.to_string());
        let same = self.cluster.pods.get(&key).is_some_and(|p| uid.is_none() || p.metadata.uid.as_deref() == uid);
        if same && let Some(p) = self.cluster.pods.get_mut(&key) {
            p.status.get_or_insert_with(Default::default).nominated_node_name = Some(node.to_string());
        }
        answer(Ok(()))
    }

    fn update_nodepool_status<'a>(&'a mut self, name: &'a str, status: &'a NodePoolStatus) -> WriteResult<'a, ()> {
        let stamp = self.cluster.nodepools.stamp();
        let spec = if Some(stamp) == *self.nodepool_status_stamp { *self.nodepool_spec_stamp } else { stamp };
        let r = match self.cluster.nodepools.get_mut(name) {
            Some(p) => {
                p.status = Some(status.clone());
                // The status subresource: what readers of the spec see has not changed.
                *self.nodepool_spec_stamp = spec;
                *self.nodepool_status_stamp = Some(self.cluster.nodepools.stamp());
                Ok(())
            }
            None => Err(not_found(format!("update the status of NodePool {name}"))),
        };
        answer(r)
    }

    fn patch_nodeoverlay_status<'a>(&'a mut self, name: &'a str, status: &'a NodeOverlayStatus) -> WriteResult<'a, ()> {
        let r = match self.cluster.nodeoverlays.get_mut(name) {
            Some(o) => {
                o.status = Some(status.clone());
                Ok(())
            }
            None => Err(not_found(format!("update the status of NodeOverlay {name}"))),
        };
        answer(r)
    }

    fn patch_capacitybuffer_status<'a>(
        &'a mut self,
        namespace: &'a str,
        name: &'a str,
        status: &'a CapacityBufferStatus,
    ) -> WriteResult<'a, ()> {
        let key = (namespace.to_string(), name.to_string());
        let r = match self.cluster.capacitybuffers.get_mut(&key) {
            Some(b) => {
                b.status = Some(status.clone());
                Ok(())
            }
            None => Err(not_found(format!("update the status of CapacityBuffer {namespace}/{name}"))),
        };
        answer(r)
    }

    fn update_ec2nodeclass_status<'a>(
        &'a mut self,
        name: &'a str,
        status: &'a EC2NodeClassStatus,
    ) -> WriteResult<'a, ()> {
        let r = match self.cluster.nodeclasses.get_mut(name) {
            Some(c) => {
                c.status = Some(status.clone());
                Ok(())
            }
            None => Err(not_found(format!("update the status of EC2NodeClass {name}"))),
        };
        answer(r)
    }

    fn delete_nodeclaim<'a>(&'a mut self, name: &'a str) -> WriteResult<'a, ()> {
        self.delete_claim(name);
        answer(Ok(()))
    }

    fn remove_nodeclaim_finalizer<'a>(&'a mut self, claim: &'a NodeClaim, _finalizer: &'a str) -> WriteResult<'a, ()> {
        // Ours is the only finalizer a simulated claim carries: without it the claim is gone.
        let name = claim.name();
        if self.cluster.nodeclaims.remove(name).is_some()
            && let Some(r) = self.record.nodeclaims.iter_mut().rev().find(|r| r.name == name)
        {
            r.deleted_at = Some(self.now);
        }
        answer(Ok(()))
    }

    fn delete_node<'a>(&'a mut self, name: &'a str) -> WriteResult<'a, ()> {
        match self.cluster.nodes.get(name) {
            Some(n) if n.metadata.deletion_timestamp.is_some() => {}
            Some(n) if n.metadata.finalizers.iter().flatten().count() == 0 => self.remove_node(name),
            Some(_) => {
                if let Some(n) = self.cluster.nodes.get_mut(name) {
                    n.metadata.deletion_timestamp = Some(lifecycle::ms_time(self.now));
                }
            }
            None => {}
        }
        answer(Ok(()))
    }

    fn evict<'a>(&'a mut self, namespace: &'a str, name: &'a str) -> WriteResult<'a, Eviction> {
        answer(self.evict_now(namespace, name))
    }

    fn delete_pod<'a>(&'a mut self, namespace: &'a str, name: &'a str, grace_seconds: u32) -> WriteResult<'a, ()> {
        let key = (namespace.to_string(), name.to_string());
        ApiServer::delete_pod(self, &key, Some(Millis::from(grace_seconds) * SECOND));
        answer(Ok(()))
    }

    fn event<'a>(
        &'a mut self,
        regarding: ObjectReference,
        warning: bool,
        reason: &'a str,
        message: &'a str,
    ) -> WriteResult<'a, ()> {
        // Kept for the dashboard, as `kubectl get events` would show them.
        let kind = regarding.kind.as_deref().unwrap_or_default().to_lowercase();
        let name = regarding.name.as_deref().unwrap_or_default();
        let object = match regarding.namespace.as_deref() {
            Some(ns) => format!("{kind}/{ns}/{name}"),
            None => format!("{kind}/{name}"),
        };
        let events = &mut self.record.events;
        if events.len() == EVENTS_KEPT {
            events.pop_front();
        }
        events.push_back(EventRecord {
            at: self.now,
            warning,
            reason: reason.to_string(),
            object,
            message: message.to_string(),
        });
        answer(Ok(()))
    }
}
