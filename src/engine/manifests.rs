//! Loading Kubernetes and Karpenter manifests from multi-document YAML, with errors that name the file, line and
//! column. Used by `plan --file` now and by the scenario loader.

use std::sync::Arc;

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::{
    Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod, PodCondition, PodStatus,
};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::storage::v1::StorageClass;
use serde::Deserialize;
use thiserror::Error;

use crate::engine::api::nodeoverlay::NodeOverlay;
use crate::engine::api::{EC2NodeClass, NodeClaim, NodePool};
use crate::engine::provisioning::{ClusterSnapshot, Snapshot};
use crate::engine::stored_pod::StoredPod;

/// A manifest problem, located.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{file}:{line}:{column}: {message}")]
pub struct ManifestError {
    pub file: String,
    pub line: usize,
    pub column: usize,
    pub message: String,
}

/// Every object kind the engine reads. Pods, by far the most numerous, are shared (`Arc`): the live backend reads
/// its watch cache into one of these for every pass, and at tens of thousands of pods a copy would be the largest
/// thing in the process.
#[derive(Debug, Clone, Default)]
pub struct Manifests {
    pub nodepools: Vec<NodePool>,
    pub nodeclaims: Vec<NodeClaim>,
    pub nodeclasses: Vec<EC2NodeClass>,
    /// Price and capacity adjustments (`karpenter.sh/v1alpha1`); empty where the CRD isn't installed. Not part of
    /// the provisioning snapshots: the controller evaluates them itself ([`crate::engine::overlay`]).
    pub nodeoverlays: Vec<NodeOverlay>,
    /// CapacityBuffers (`autoscaling.x-k8s.io/v1beta1`) and the PodTemplates they may take their shape from;
    /// empty where the CRD isn't installed. Like overlays, not part of the provisioning snapshots: the controller
    /// resolves them itself ([`crate::engine::capacitybuffer`]).
    pub capacitybuffers: Vec<crate::engine::api::capacitybuffer::CapacityBuffer>,
    pub pod_templates: Vec<k8s_openapi::api::core::v1::PodTemplate>,
    /// Workloads as a live cluster has them, for buffers' `scalableRef`s only (a manifest file's Deployments are
    /// `deployments`, which are expanded into pods).
    pub workloads: Workloads,
    pub nodes: Vec<Node>,
    pub pods: Vec<Arc<StoredPod>>,
    pub deployments: Vec<Deployment>,
    pub daemonsets: Vec<DaemonSet>,
    pub pdbs: Vec<PodDisruptionBudget>,
    pub pvcs: Vec<PersistentVolumeClaim>,
    pub pvs: Vec<PersistentVolume>,
    pub storage_classes: Vec<StorageClass>,
    pub namespaces: Vec<Namespace>,
}

/// Deployments and StatefulSets read from a live cluster (see [`Manifests::workloads`]).
#[derive(Debug, Clone, Default)]
pub struct Workloads {
    pub deployments: Vec<Deployment>,
    pub statefulsets: Vec<k8s_openapi::api::apps::v1::StatefulSet>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct TypeMeta {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
}

fn located(file: &str, e: &serde_yaml::Error, doc_line: usize) -> ManifestError {
    let (line, column) = e.location().map_or((doc_line, 1), |l| (l.line(), l.column()));
    ManifestError { file: file.to_string(), line, column, message: e.to_string() }
}

/// 1-based line on which each `---`-separated document starts.
fn document_lines(text: &str) -> Vec<usize> {
    let mut starts = vec![1];
    for (i, l) in text.lines().enumerate() {
        if l.starts_with("---") && i > 0 {
            starts.push(i + 2);
        }
    }
    starts
}

impl Manifests {
    /// Parses every document of `text` (named `file` in errors). The whole load fails on the first bad document, so
    /// nothing is half-applied.
    pub fn parse(text: &str, file: &str) -> Result<Manifests, ManifestError> {
        let mut out = Manifests::default();
        let lines = document_lines(text);
        let kinds: Vec<Option<TypeMeta>> = {
            let mut v = Vec::new();
            for (i, doc) in serde_yaml::Deserializer::from_str(text).enumerate() {
                let value = serde_yaml::Value::deserialize(doc)
                    .map_err(|e| located(file, &e, lines.get(i).copied().unwrap_or(1)))?;
                if value.is_null() {
                    v.push(None);
                    continue;
                }
                let tm: TypeMeta =
                    serde_yaml::from_value(value).map_err(|e| located(file, &e, lines.get(i).copied().unwrap_or(1)))?;
                v.push(Some(tm));
            }
            v
        };
        for (i, doc) in serde_yaml::Deserializer::from_str(text).enumerate() {
            let Some(Some(tm)) = kinds.get(i) else { continue };
            let line = lines.get(i).copied().unwrap_or(1);
            let err = |e: serde_yaml::Error| located(file, &e, line);
            match (tm.api_version.as_str(), tm.kind.as_str()) {
                ("karpenter.sh/v1", "NodePool") => out.nodepools.push(NodePool::deserialize(doc).map_err(err)?),
                ("karpenter.sh/v1", "NodeClaim") => out.nodeclaims.push(NodeClaim::deserialize(doc).map_err(err)?),
                ("karpenter.k8s.aws/v1", "EC2NodeClass") => {
                    out.nodeclasses.push(EC2NodeClass::deserialize(doc).map_err(err)?)
                }
                ("karpenter.sh/v1alpha1", "NodeOverlay") => {
                    out.nodeoverlays.push(NodeOverlay::deserialize(doc).map_err(err)?)
                }
                ("autoscaling.x-k8s.io/v1beta1", "CapacityBuffer") => out
                    .capacitybuffers
                    .push(crate::engine::api::capacitybuffer::CapacityBuffer::deserialize(doc).map_err(err)?),
                ("v1", "PodTemplate") => {
                    out.pod_templates.push(k8s_openapi::api::core::v1::PodTemplate::deserialize(doc).map_err(err)?)
                }
                ("v1", "Node") => out.nodes.push(Node::deserialize(doc).map_err(err)?),
                ("v1", "Pod") => out.pods.push(Arc::new(Pod::deserialize(doc).map_err(err)?.into())),
                ("apps/v1", "Deployment") => out.deployments.push(Deployment::deserialize(doc).map_err(err)?),
                ("apps/v1", "DaemonSet") => out.daemonsets.push(DaemonSet::deserialize(doc).map_err(err)?),
                ("policy/v1", "PodDisruptionBudget") => {
                    out.pdbs.push(PodDisruptionBudget::deserialize(doc).map_err(err)?)
                }
                ("v1", "PersistentVolumeClaim") => out.pvcs.push(PersistentVolumeClaim::deserialize(doc).map_err(err)?),
                ("v1", "PersistentVolume") => out.pvs.push(PersistentVolume::deserialize(doc).map_err(err)?),
                ("storage.k8s.io/v1", "StorageClass") => {
                    out.storage_classes.push(StorageClass::deserialize(doc).map_err(err)?)
                }
                ("v1", "Namespace") => out.namespaces.push(Namespace::deserialize(doc).map_err(err)?),
                (api, kind) => {
                    return Err(ManifestError {
                        file: file.to_string(),
                        line,
                        column: 1,
                        message: format!("unsupported object apiVersion {api:?} kind {kind:?}"),
                    });
                }
            }
        }
        Ok(out)
    }

    /// The objects as they are, borrowed (no Deployment expansion, unlike [`Manifests::snapshot`]): what a
    /// controller reads from a watch cache.
    pub fn view(&self) -> ClusterSnapshot<'_> {
        ClusterSnapshot {
            nodepools: &self.nodepools,
            nodeclaims: (&self.nodeclaims).into(),
            nodes: (&self.nodes).into(),
            pods: (&self.pods).into(),
            daemonsets: &self.daemonsets,
            pdbs: &self.pdbs,
            pvcs: &self.pvcs,
            pvs: &self.pvs,
            storage_classes: &self.storage_classes,
            namespaces: &self.namespaces,
            digests: None,
            virtual_pods: &[],
        }
    }

    /// The objects as a provisioning snapshot, with pods as [`Manifests::pending_view`] presents them.
    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            nodepools: self.nodepools.clone(),
            nodeclaims: self.nodeclaims.clone(),
            nodes: self.nodes.clone(),
            pods: self.pending_view(),
            daemonsets: self.daemonsets.clone(),
            pdbs: self.pdbs.clone(),
            pvcs: self.pvcs.clone(),
            pvs: self.pvs.clone(),
            storage_classes: self.storage_classes.clone(),
            namespaces: self.namespaces.clone(),
        }
    }

    /// Pods as a scheduler would see them before Karpenter acts: Deployment replicas expanded (`<name>-<i>`), and
    /// every unbound pod marked `PodScheduled=False/Unschedulable`, as kube-scheduler does when no node fits. Pods
    /// left as they are stay shared with `self`.
    pub fn pending_view(&self) -> Vec<Arc<StoredPod>> {
        let mut pods = self.pods.clone();
        for d in &self.deployments {
            let name = d.metadata.name.clone().unwrap_or_default();
            let ns = d.metadata.namespace.clone().unwrap_or_else(|| "default".into());
            let spec = d.spec.clone();
            let replicas = spec.replicas.unwrap_or(1).max(0);
            for i in 0..replicas {
                let mut meta = spec.template.metadata.clone().unwrap_or_default();
                meta.name = Some(format!("{name}-{i}"));
                meta.namespace = Some(ns.clone());
                meta.uid = Some(format!("{ns}/{name}-{i}"));
                meta.owner_references = Some(vec![k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
                    api_version: "apps/v1".into(),
                    kind: "ReplicaSet".into(),
                    name: name.clone(),
                    uid: String::new(),
                    controller: Some(true),
                    block_owner_deletion: None,
                }]);
                pods.push(Arc::new(StoredPod::from(Pod {
                    metadata: meta,
                    spec: spec.template.spec.clone(),
                    status: None,
                })));
            }
        }
        for p in &mut pods {
            if p.metadata.namespace.is_none() {
                Arc::make_mut(p).metadata.namespace = Some("default".into());
            }
            let bound = p.bound_node().is_some();
            let marked = p
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|cs| cs.iter().any(|c| c.type_ == "PodScheduled"));
            if !bound && !marked {
                let status = Arc::make_mut(p).status.get_or_insert_with(PodStatus::default);
                let conds = status.conditions.get_or_insert_with(Vec::new);
                if !conds.iter().any(|c| c.type_ == "PodScheduled") {
                    conds.push(PodCondition {
                        type_: "PodScheduled".into(),
                        status: "False".into(),
                        reason: Some("Unschedulable".into()),
                        ..Default::default()
                    });
                }
            }
        }
        pods
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loads_and_locates_errors() {
        let text = "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: a}\nspec:\n  template:\n    spec:\n      nodeClassRef: {group: g, kind: k, name: n}\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  replicas: 3\n  selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: web}}\n    spec:\n      containers: [{name: c, image: x}]\n";
        let m = Manifests::parse(text, "m.yaml").unwrap();
        assert_eq!(m.nodepools.len(), 1);
        assert_eq!(m.pending_view().len(), 3);

        let bad = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers: 5\n";
        let e = Manifests::parse(bad, "bad.yaml").unwrap_err();
        assert_eq!((e.file.as_str(), e.line), ("bad.yaml", 5), "{e}");

        let unknown = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n---\napiVersion: v9\nkind: Thing\n";
        let e = Manifests::parse(unknown, "u.yaml").unwrap_err();
        assert_eq!(e.line, 5, "{e}");
        assert!(e.message.contains("Thing"));

        let syntax = "apiVersion: v1\nkind: [Pod\n";
        assert!(Manifests::parse(syntax, "s.yaml").is_err());
    }

    #[test]
    fn loads_node_overlays_and_locates_their_errors() {
        let text = "apiVersion: karpenter.sh/v1alpha1\nkind: NodeOverlay\nmetadata: {name: spot-discount}\nspec:\n  \
                    requirements: [{key: karpenter.sh/capacity-type, operator: In, values: [spot]}]\n  \
                    priceAdjustment: \"-10%\"\n  weight: 10\n";
        let m = Manifests::parse(text, "o.yaml").unwrap();
        assert_eq!(m.nodeoverlays.len(), 1);
        let o = &m.nodeoverlays[0];
        assert_eq!((o.name(), o.weight(), o.price_string()), ("spot-discount", 10, Some("-10%")));

        let bad = "apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n---\napiVersion: karpenter.sh/v1alpha1\n\
                   kind: NodeOverlay\nmetadata: {name: o}\nspec:\n  weight: heavy\n";
        let e = Manifests::parse(bad, "bad.yaml").unwrap_err();
        assert_eq!((e.file.as_str(), e.line), ("bad.yaml", 9), "{e}");

        // Only the alpha version exists upstream.
        let v1 = "apiVersion: karpenter.sh/v1\nkind: NodeOverlay\nmetadata: {name: o}\n";
        assert!(Manifests::parse(v1, "v1.yaml").unwrap_err().message.contains("NodeOverlay"));
    }
}
