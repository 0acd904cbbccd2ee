//! The writes only the acting controller makes: NodeClaim metadata, whole-node syncs (labels, annotations, taints
//! and finalizers in one guarded patch), cost packing's pod nominations and, for the KWOK cloud, Node creation and
//! deletion.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, Pod, Taint};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

use super::{FIELD_MANAGER, Result, Writer};
use crate::engine::api::NodeClaim;

impl Writer {
    /// Merges labels and annotations into a NodeClaim, removes the annotations `remove_annotations` names (a merge
    /// patch's `null`) and, when given, replaces its finalizers.
    pub async fn patch_nodeclaim_metadata(
        &self,
        name: &str,
        labels: &BTreeMap<String, String>,
        annotations: &BTreeMap<String, String>,
        remove_annotations: &[String],
        finalizers: Option<&[String]>,
    ) -> Result<()> {
        let what = self.guard(|| format!("update NodeClaim {name}"))?;
        let mut notes: serde_json::Map<String, serde_json::Value> =
            annotations.iter().map(|(k, v)| (k.clone(), json!(v))).collect();
        for k in remove_annotations {
            notes.insert(k.clone(), serde_json::Value::Null);
        }
        let mut meta = json!({"labels": labels, "annotations": notes});
        if let Some(f) = finalizers {
            meta["finalizers"] = json!(f);
        }
        let api: Api<NodeClaim> = Api::all(self.client.clone());
        api.patch(name, &PatchParams::default(), &Patch::Merge(&json!({ "metadata": meta })))
            .await
            .map(drop)
            .map_err(|e| super::from_kube(what, e))
    }

    /// Labels set and removed (a merge patch: a removed key is `null`) on a NodeClaim or a Node.
    pub async fn relabel(
        &self,
        target: crate::controller::effect::LabelTarget,
        name: &str,
        set: &BTreeMap<String, String>,
        remove: &[String],
    ) -> Result<()> {
        use crate::controller::effect::LabelTarget;
        let kind = match target {
            LabelTarget::NodeClaim => "NodeClaim",
            LabelTarget::Node => "node",
        };
        let what = self.guard(|| format!("relabel {kind} {name}"))?;
        let mut labels = serde_json::Map::new();
        for k in remove {
            labels.insert(k.clone(), serde_json::Value::Null);
        }
        for (k, v) in set {
            labels.insert(k.clone(), json!(v));
        }
        let patch = json!({ "metadata": { "labels": labels } });
        let pp = PatchParams::default();
        let r = match target {
            LabelTarget::NodeClaim => {
                Api::<NodeClaim>::all(self.client.clone()).patch(name, &pp, &Patch::Merge(&patch)).await.map(drop)
            }
            LabelTarget::Node => {
                Api::<Node>::all(self.client.clone()).patch(name, &pp, &Patch::Merge(&patch)).await.map(drop)
            }
        };
        r.map_err(|e| super::from_kube(what, e))
    }

    /// Sets a pending pod's `status.nominatedNodeName` (cost packing: the Node of the claim sized for it), a merge
    /// patch of the status subresource. With `uid` the patch carries it, so a pod recreated under the same name is
    /// refused by the API server instead of nominated. A pod that is gone needs no nomination: not an error.
    pub async fn nominate_pod(&self, namespace: &str, name: &str, uid: Option<&str>, node: &str) -> Result<()> {
        let what = self.guard(|| format!("nominate node {node} for pod {namespace}/{name}"))?;
        let api: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        let patch = nomination_patch(uid, node);
        let r = api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch)).await.map(drop);
        super::ignore_not_found(r, what)
    }

    /// A node as the engine needs it: labels and annotations merged in, and taints and finalizers replaced when
    /// given. Only a write that replaces a list carries `resource_version` (a 409 when someone changed the node since
    /// it was read, so their change is never overwritten); labels and annotations are keys this tool owns and merge
    /// without a guard, so a kubelet's status update in between doesn't make them fail.
    pub async fn sync_node_full(
        &self,
        name: &str,
        resource_version: Option<&str>,
        labels: &BTreeMap<String, String>,
        annotations: &BTreeMap<String, String>,
        taints: Option<&[Taint]>,
        finalizers: Option<&[String]>,
    ) -> Result<()> {
        let what = self.guard(|| format!("update node {name}"))?;
        let patch = node_patch(resource_version, labels, annotations, taints, finalizers);
        let api: Api<Node> = Api::all(self.client.clone());
        api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map(drop)
            .map_err(|e| super::from_kube(what, e))
    }

    /// Sets a Node's `status.nodeInfo.bootID` (the KWOK cloud's reboot: the node is back at once with a new boot
    /// id), through the status subresource.
    pub async fn set_node_boot_id(&self, name: &str, boot_id: &str) -> Result<()> {
        let what = self.guard(|| format!("reboot node {name}"))?;
        let api: Api<Node> = Api::all(self.client.clone());
        let patch = json!({ "status": { "nodeInfo": { "bootID": boot_id } } });
        api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map(drop)
            .map_err(|e| super::from_kube(what, e))
    }

    /// Creates a Node object (the KWOK cloud's "instance"). An existing node of that name counts as created.
    pub async fn create_node(&self, node: &Node) -> Result<()> {
        let name = node.metadata.name.clone().unwrap_or_default();
        let what = self.guard(|| format!("create node {name}"))?;
        let api: Api<Node> = Api::all(self.client.clone());
        match api.create(&PostParams { field_manager: Some(FIELD_MANAGER.into()), ..Default::default() }, node).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
            Err(e) => Err(super::from_kube(what, e)),
        }
    }
}

/// The merge patch of [`Writer::nominate_pod`].
fn nomination_patch(uid: Option<&str>, node: &str) -> serde_json::Value {
    let mut patch = json!({ "status": { "nominatedNodeName": node } });
    if let Some(uid) = uid {
        patch["metadata"] = json!({ "uid": uid });
    }
    patch
}

/// The merge patch of [`Writer::sync_node_full`]: only the parts that change, and the guard only with a list.
fn node_patch(
    resource_version: Option<&str>,
    labels: &BTreeMap<String, String>,
    annotations: &BTreeMap<String, String>,
    taints: Option<&[Taint]>,
    finalizers: Option<&[String]>,
) -> serde_json::Value {
    let mut meta = serde_json::Map::new();
    if !labels.is_empty() {
        meta.insert("labels".into(), json!(labels));
    }
    if !annotations.is_empty() {
        meta.insert("annotations".into(), json!(annotations));
    }
    if let Some(f) = finalizers {
        meta.insert("finalizers".into(), json!(f));
    }
    if (taints.is_some() || finalizers.is_some())
        && let Some(rv) = resource_version
    {
        meta.insert("resourceVersion".into(), json!(rv));
    }
    let mut patch = json!({ "metadata": meta });
    if let Some(t) = taints {
        patch["spec"] = json!({ "taints": t });
    }
    patch
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_label_only_sync_carries_no_guard_and_a_list_sync_does() {
        let labels: BTreeMap<String, String> = [("karpenter.sh/registered".to_string(), "true".to_string())].into();
        let p = node_patch(Some("41"), &labels, &BTreeMap::new(), None, None);
        assert_eq!(p, json!({"metadata": {"labels": {"karpenter.sh/registered": "true"}}}));
        let f = vec!["karpenter.sh/termination".to_string()];
        let p = node_patch(Some("41"), &BTreeMap::new(), &BTreeMap::new(), Some(&[]), Some(&f));
        assert_eq!(
            p,
            json!({"metadata": {"finalizers": ["karpenter.sh/termination"], "resourceVersion": "41"},
                   "spec": {"taints": []}})
        );
    }
}
