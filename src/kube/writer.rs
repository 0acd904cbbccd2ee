//! Every write the engine makes to a live cluster, in one place so read-only mode is enforced here (not only in the
//! UI) and so tests can check each request at the HTTP level.
//!
//! Writes that replace a list (taints, finalizers) carry the object's resourceVersion, so a concurrent change by
//! someone else fails with a conflict instead of being overwritten; the engine retries on its next pass with the
//! fresh object.

use k8s_openapi::api::core::v1::{Event, Node, ObjectReference, Pod, Taint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, Time};
use kube::Resource;
use kube::api::{Api, DeleteParams, EvictParams, Patch, PatchParams, PostParams};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;

use crate::engine::api::ec2nodeclass::EC2NodeClassStatus;
use crate::engine::api::nodepool::NodePoolStatus;
use crate::engine::api::{EC2NodeClass, NodeClaim, NodeClaimStatus, NodePool};

mod buffer_writes;
mod controller_writes;
mod overlay_writes;
mod port;

pub use overlay_writes::OVERLAY_STATUS_ATTEMPTS;

/// The field manager and event source this tool writes as.
pub const FIELD_MANAGER: &str = "karpenter-tui";

pub use crate::controller::cluster_port::{Eviction, WriteError};

/// A kube-rs error as a [`WriteError`] about `what`.
fn from_kube(what: String, e: kube::Error) -> WriteError {
    match e {
        kube::Error::Api(s) => {
            WriteError::Api { what, code: s.code, reason: s.reason.clone(), message: s.message.clone() }
        }
        other => WriteError::Transport { what, source: Box::new(other) },
    }
}

#[derive(Clone)]
pub struct Writer {
    client: kube::Client,
    readonly: bool,
}

type Result<T> = std::result::Result<T, WriteError>;

impl Writer {
    pub fn new(client: kube::Client, readonly: bool) -> Writer {
        Writer { client, readonly }
    }

    pub fn readonly(&self) -> bool {
        self.readonly
    }

    fn guard(&self, what: impl FnOnce() -> String) -> Result<String> {
        let what = what();
        if self.readonly { Err(WriteError::ReadOnly(what)) } else { Ok(what) }
    }

    /// Creates a NodeClaim the engine built (generateName `<nodepool>-`, owner reference, finalizer included).
    pub async fn create_nodeclaim(&self, claim: &NodeClaim) -> Result<NodeClaim> {
        let pool = claim.metadata.generate_name.clone().unwrap_or_default();
        let what = self.guard(|| format!("create a NodeClaim for NodePool {}", pool.trim_end_matches('-')))?;
        let api: Api<NodeClaim> = Api::all(self.client.clone());
        api.create(&PostParams { field_manager: Some(FIELD_MANAGER.into()), ..Default::default() }, claim)
            .await
            .map_err(|e| from_kube(what, e))
    }

    /// Replaces a NodeClaim's status (conditions, providerID, capacity, allocatable) through the status subresource.
    pub async fn update_nodeclaim_status(&self, name: &str, status: &NodeClaimStatus) -> Result<()> {
        let what = self.guard(|| format!("update the status of NodeClaim {name}"))?;
        let api: Api<NodeClaim> = Api::all(self.client.clone());
        let patch = json!({"status": status});
        api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map(drop)
            .map_err(|e| from_kube(what, e))
    }

    /// A NodePool's status (`resources`, `nodes`, conditions) through the status subresource, as upstream's
    /// NodePool controllers write it; a merge patch replaces the conditions list whole.
    pub async fn update_nodepool_status(&self, name: &str, status: &NodePoolStatus) -> Result<()> {
        let what = self.guard(|| format!("update the status of NodePool {name}"))?;
        let api: Api<NodePool> = Api::all(self.client.clone());
        let patch = json!({"status": status});
        api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map(drop)
            .map_err(|e| from_kube(what, e))
    }

    /// A static NodePool's replicas through the scale subresource, as `kubectl scale nodepool` sets them (the
    /// CRD maps it to `spec.replicas`; the API server refuses it for a dynamic pool).
    pub async fn scale_nodepool(&self, name: &str, replicas: i64) -> Result<()> {
        let what = self.guard(|| format!("scale NodePool {name} to {replicas}"))?;
        let api: Api<NodePool> = Api::all(self.client.clone());
        let patch = json!({"spec": {"replicas": replicas}});
        api.patch_scale(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map(drop)
            .map_err(|e| from_kube(what, e))
    }

    /// The resolved subnets, security groups, AMIs and conditions of an EC2NodeClass (the status subresource; lists
    /// are replaced whole, as a merge patch does).
    pub async fn update_ec2nodeclass_status(&self, name: &str, status: &EC2NodeClassStatus) -> Result<()> {
        let what = self.guard(|| format!("update the status of EC2NodeClass {name}"))?;
        let api: Api<EC2NodeClass> = Api::all(self.client.clone());
        let patch = json!({"status": status});
        api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map(drop)
            .map_err(|e| from_kube(what, e))
    }

    /// Labels, annotations and taints a node must carry; the taints list is replaced as a whole, guarded by the
    /// node's resourceVersion.
    pub async fn sync_node(
        &self,
        node: &Node,
        labels: &std::collections::BTreeMap<String, String>,
        taints: &[Taint],
    ) -> Result<()> {
        let name = node.metadata.name.clone().unwrap_or_default();
        let what = self.guard(|| format!("update node {name}"))?;
        let patch = json!({
            "metadata": {"resourceVersion": node.metadata.resource_version, "labels": labels},
            "spec": {"taints": taints},
        });
        let api: Api<Node> = Api::all(self.client.clone());
        api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch)).await.map(drop).map_err(|e| from_kube(what, e))
    }

    /// Asks the Eviction API to evict a pod; PDBs are enforced by the API server (429).
    pub async fn evict(&self, namespace: &str, name: &str) -> Result<Eviction> {
        let what = self.guard(|| format!("evict pod {namespace}/{name}"))?;
        let api: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        match api.evict(name, &EvictParams::default()).await {
            Ok(_) => Ok(Eviction::Evicted),
            Err(kube::Error::Api(s)) if s.code == 429 => Ok(Eviction::Blocked(s.message.clone())),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(Eviction::Gone),
            Err(e) => Err(from_kube(what, e)),
        }
    }

    /// Deletes a pod, bypassing PDBs (the termination grace deadline has passed).
    pub async fn delete_pod(&self, namespace: &str, name: &str, grace_seconds: u32) -> Result<()> {
        let what = self.guard(|| format!("delete pod {namespace}/{name}"))?;
        let api: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        ignore_not_found(api.delete(name, &DeleteParams::default().grace_period(grace_seconds)).await.map(drop), what)
    }

    pub async fn delete_node(&self, name: &str) -> Result<()> {
        let what = self.guard(|| format!("delete node {name}"))?;
        let api: Api<Node> = Api::all(self.client.clone());
        ignore_not_found(api.delete(name, &DeleteParams::default()).await.map(drop), what)
    }

    pub async fn delete_nodeclaim(&self, name: &str) -> Result<()> {
        let what = self.guard(|| format!("delete NodeClaim {name}"))?;
        let api: Api<NodeClaim> = Api::all(self.client.clone());
        ignore_not_found(api.delete(name, &DeleteParams::default()).await.map(drop), what)
    }

    /// Removes one finalizer from a NodeClaim, guarded by its resourceVersion (a merge patch carrying it).
    pub async fn remove_nodeclaim_finalizer(&self, claim: &NodeClaim, finalizer: &str) -> Result<()> {
        let name = claim.metadata.name.clone().unwrap_or_default();
        let what = self.guard(|| format!("remove finalizer {finalizer} from NodeClaim {name}"))?;
        let rest: Vec<&String> = claim.metadata.finalizers.iter().flatten().filter(|f| *f != finalizer).collect();
        // The resourceVersion is a precondition: decided on an old copy, the API server answers 409 (a conflict,
        // retried next tick) and nothing is removed. (A JSON-patch `test` would fail with 422 instead.)
        let patch = json!({
            "metadata": {"resourceVersion": claim.metadata.resource_version, "finalizers": rest},
        });
        let api: Api<NodeClaim> = Api::all(self.client.clone());
        api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch)).await.map(drop).map_err(|e| from_kube(what, e))
    }

    /// A merge patch of a NodePool's spec or metadata (the operator's pause of voluntary disruption). A patch that
    /// carries `metadata.resourceVersion` is refused with 409 if another writer changed the NodePool since.
    pub async fn patch_nodepool(&self, name: &str, patch: &serde_json::Value, what: &str) -> Result<()> {
        let what = self.guard(|| what.to_string())?;
        let api: Api<NodePool> = Api::all(self.client.clone());
        let params = PatchParams { field_manager: Some(FIELD_MANAGER.into()), ..Default::default() };
        api.patch(name, &params, &Patch::Merge(patch)).await.map(drop).map_err(|e| from_kube(what, e))
    }

    /// Server-side applies an operator's NodePool edit as this tool's field manager. With `dry_run` the API server
    /// validates and defaults it (its CRD schema and CEL rules) without storing anything.
    pub async fn apply_nodepool(&self, pool: &NodePool, dry_run: bool) -> Result<NodePool> {
        self.apply_intent(pool, dry_run).await
    }

    /// Server-side applies `obj` (a cluster-scoped kind) as this tool's field manager, forcing ownership of the
    /// fields it sets; with `dry_run` only validated and defaulted by the API server, which is not a write and so
    /// allowed read-only too.
    async fn apply_intent<K>(&self, obj: &K, dry_run: bool) -> Result<K>
    where
        K: Resource<DynamicType = ()> + Clone + std::fmt::Debug + Serialize + DeserializeOwned,
    {
        let name = obj.meta().name.clone().unwrap_or_default();
        let kind = K::kind(&());
        let what = if dry_run {
            format!("validate {kind} {name} on the API server")
        } else {
            self.guard(|| format!("apply {kind} {name}"))?
        };
        let api: Api<K> = Api::all(self.client.clone());
        let mut params = PatchParams::apply(FIELD_MANAGER).force();
        params.dry_run = dry_run;
        let value = apply_body(obj).map_err(|e| WriteError::Api {
            what: what.clone(),
            code: 0,
            reason: "Encode".into(),
            message: e.to_string(),
        })?;
        api.patch(&name, &params, &Patch::Apply(&value)).await.map_err(|e| from_kube(what, e))
    }

    /// Records a Kubernetes Event on an object (what operators look for with `kubectl describe`).
    pub async fn event(&self, regarding: ObjectReference, warning: bool, reason: &str, message: &str) -> Result<()> {
        let what = self.guard(|| format!("record event {reason}"))?;
        let namespace = regarding.namespace.clone().unwrap_or_else(|| "default".into());
        let now = chrono::Utc::now();
        let name = format!(
            "{}.{:x}",
            regarding.name.as_deref().unwrap_or("object"),
            now.timestamp_nanos_opt().unwrap_or_default()
        );
        let event = Event {
            metadata: ObjectMeta { name: Some(name), namespace: Some(namespace.clone()), ..Default::default() },
            involved_object: regarding,
            reason: Some(reason.into()),
            message: Some(event_note(message)),
            type_: Some(if warning { "Warning" } else { "Normal" }.into()),
            source: Some(k8s_openapi::api::core::v1::EventSource { component: Some(FIELD_MANAGER.into()), host: None }),
            reporting_component: Some(FIELD_MANAGER.into()),
            reporting_instance: Some(FIELD_MANAGER.into()),
            first_timestamp: Some(Time(now_ts())),
            last_timestamp: Some(Time(now_ts())),
            event_time: Some(MicroTime(now_ts())),
            count: Some(1),
            action: Some(reason.into()),
            ..Default::default()
        };
        let api: Api<Event> = Api::namespaced(self.client.clone(), &namespace);
        api.create(&PostParams::default(), &event).await.map(drop).map_err(|e| from_kube(what, e))
    }
}

/// The API server refuses an Event with an `eventTime` whose message is over 1,024 bytes (`NoteLengthLimit`):
/// longer messages are cut at a character boundary, ending in an ellipsis.
pub const EVENT_NOTE_LIMIT: usize = 1024;

pub fn event_note(message: &str) -> String {
    if message.len() <= EVENT_NOTE_LIMIT {
        return message.to_string();
    }
    let ellipsis = "…";
    let mut end = EVENT_NOTE_LIMIT - ellipsis.len();
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}{ellipsis}", &message[..end])
}

/// An apply configuration carries intent only: the name, labels, annotations and spec, none of the fields the
/// server owns (resourceVersion, uid, managedFields, status), which would otherwise be claimed or conflict.
fn apply_body<K: Resource<DynamicType = ()> + Serialize>(obj: &K) -> serde_json::Result<serde_json::Value> {
    let meta = obj.meta();
    let intent = ObjectMeta {
        name: meta.name.clone(),
        labels: meta.labels.clone(),
        annotations: meta.annotations.clone(),
        ..Default::default()
    };
    let mut value = serde_json::to_value(obj)?;
    if let Some(m) = value.as_object_mut() {
        m.remove("status");
        m.insert("metadata".into(), serde_json::to_value(intent)?);
        m.insert("apiVersion".into(), K::api_version(&()).into());
        m.insert("kind".into(), K::kind(&()).into());
    }
    Ok(value)
}

fn now_ts() -> k8s_openapi::jiff::Timestamp {
    k8s_openapi::jiff::Timestamp::now()
}

fn ignore_not_found(r: std::result::Result<(), kube::Error>, what: String) -> Result<()> {
    match r {
        Ok(()) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(from_kube(what, e)),
    }
}

/// A reference to an object for an Event.
pub fn reference(kind: &str, api_version: &str, meta: &ObjectMeta) -> ObjectReference {
    ObjectReference {
        kind: Some(kind.into()),
        api_version: Some(api_version.into()),
        name: meta.name.clone(),
        namespace: meta.namespace.clone(),
        uid: meta.uid.clone(),
        resource_version: meta.resource_version.clone(),
        field_path: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_note_over_the_api_servers_limit_is_cut_at_a_character_boundary() {
        assert_eq!(event_note("short"), "short");
        let exact = "a".repeat(EVENT_NOTE_LIMIT);
        assert_eq!(event_note(&exact), exact);
        let long = "é".repeat(EVENT_NOTE_LIMIT);
        let cut = event_note(&long);
        assert!(cut.len() <= EVENT_NOTE_LIMIT, "{} bytes", cut.len());
        assert!(cut.ends_with('…') && cut.starts_with("éé"));
    }
}
