//! The writes only the acting controller makes: NodeClaim metadata, whole-node syncs (labels, annotations, taints
//! and finalizers in one guarded patch) and, for the KWOK cloud, Node creation and deletion.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, Taint};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

use super::{FIELD_MANAGER, Result, WriteError, Writer};
use crate::engine::api::NodeClaim;

impl Writer {
    /// Merges labels and annotations into a NodeClaim and, when given, replaces its finalizers.
    pub async fn patch_nodeclaim_metadata(
        &self,
        name: &str,
        labels: &BTreeMap<String, String>,
        annotations: &BTreeMap<String, String>,
        finalizers: Option<&[String]>,
    ) -> Result<()> {
        let what = self.guard(|| format!("update NodeClaim {name}"))?;
        let mut meta = json!({"labels": labels, "annotations": annotations});
        if let Some(f) = finalizers {
            meta["finalizers"] = json!(f);
        }
        let api: Api<NodeClaim> = Api::all(self.client.clone());
        api.patch(name, &PatchParams::default(), &Patch::Merge(&json!({ "metadata": meta })))
            .await
            .map(drop)
            .map_err(|e| WriteError::from_kube(what, e))
    }

    /// A node as the engine needs it: labels and annotations merged, taints and finalizers replaced, guarded by
    /// the resourceVersion the decision was made on (409 when someone changed it since).
    pub async fn sync_node_full(
        &self,
        name: &str,
        resource_version: Option<&str>,
        labels: &BTreeMap<String, String>,
        annotations: &BTreeMap<String, String>,
        taints: &[Taint],
        finalizers: &[String],
    ) -> Result<()> {
        let what = self.guard(|| format!("update node {name}"))?;
        let patch = json!({
            "metadata": {
                "resourceVersion": resource_version,
                "labels": labels,
                "annotations": annotations,
                "finalizers": finalizers,
            },
            "spec": {"taints": taints},
        });
        let api: Api<Node> = Api::all(self.client.clone());
        api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map(drop)
            .map_err(|e| WriteError::from_kube(what, e))
    }

    /// Creates a Node object (the KWOK cloud's "instance"). An existing node of that name counts as created.
    pub async fn create_node(&self, node: &Node) -> Result<()> {
        let name = node.metadata.name.clone().unwrap_or_default();
        let what = self.guard(|| format!("create node {name}"))?;
        let api: Api<Node> = Api::all(self.client.clone());
        match api.create(&PostParams { field_manager: Some(FIELD_MANAGER.into()), ..Default::default() }, node).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
            Err(e) => Err(WriteError::from_kube(what, e)),
        }
    }
}
