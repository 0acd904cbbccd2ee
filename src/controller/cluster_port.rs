//! The cluster port, beside the cloud port ([`crate::controller::cloud::CloudProvider`]): every write the controller's
//! effects make to a cluster, as the API server takes them. The executor ([`crate::controller::execute`]) only ever
//! writes through it, so one executor serves every backend: the kube-rs writer ([`crate::kube::writer::Writer`]) for
//! a real cluster, and the simulated cluster ([`crate::sim::world`]) with the API server's semantics (generated
//! names, finalizers, PDB-checked eviction, grace periods) on the virtual clock.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ObjectReference, Taint};
use thiserror::Error;

use crate::controller::cloud::BoxFuture;
use crate::controller::effect::LabelTarget;
use crate::engine::api::capacitybuffer::CapacityBufferStatus;
use crate::engine::api::ec2nodeclass::EC2NodeClassStatus;
use crate::engine::api::nodeoverlay::NodeOverlayStatus;
use crate::engine::api::nodepool::NodePoolStatus;
use crate::engine::api::{NodeClaim, NodeClaimStatus};

/// Why a write did not happen.
#[derive(Debug, Error)]
pub enum WriteError {
    #[error("read-only mode: refusing to {0}")]
    ReadOnly(String),
    /// The API server answered with an error status.
    #[error("{what}: {message} (HTTP {code})")]
    Api { what: String, code: u16, reason: String, message: String },
    /// No answer (the connection, TLS, a timeout).
    #[error("{what}: {source}")]
    Transport {
        what: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl WriteError {
    /// Someone else changed the object first (409): re-read and decide again.
    pub fn is_conflict(&self) -> bool {
        matches!(self, WriteError::Api { code: 409, .. })
    }

    pub fn is_not_found(&self) -> bool {
        matches!(self, WriteError::Api { code: 404, .. })
    }

    /// A 409 for `what`, as the API server answers a write guarded by a resourceVersion that is no longer current.
    pub fn conflict(what: String, message: impl Into<String>) -> WriteError {
        WriteError::Api { what, code: 409, reason: "Conflict".into(), message: message.into() }
    }
}

/// The answer of the Eviction API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Eviction {
    Evicted,
    /// 429: a PodDisruptionBudget allows no disruption now; try again later.
    Blocked(String),
    /// The pod is already gone.
    Gone,
}

pub type WriteResult<'a, T> = BoxFuture<'a, Result<T, WriteError>>;

/// The writes the controller makes to a cluster. A delete of an object already gone succeeds; a write guarded by a
/// resourceVersion that is no longer current is a conflict ([`WriteError::is_conflict`]).
pub trait ClusterPort: Send {
    /// Creates a NodeClaim the controller built (generateName `<nodepool>-`, finalizer included); the stored object,
    /// with the name the server gave it, comes back.
    fn create_nodeclaim<'a>(&'a mut self, claim: &'a NodeClaim) -> WriteResult<'a, NodeClaim>;

    /// Replaces a NodeClaim's status through the status subresource.
    fn update_nodeclaim_status<'a>(&'a mut self, name: &'a str, status: &'a NodeClaimStatus) -> WriteResult<'a, ()>;

    /// Merges labels and annotations into a NodeClaim and removes the annotations `remove_annotations` names;
    /// replaces its finalizers when given.
    fn patch_nodeclaim_metadata<'a>(
        &'a mut self,
        name: &'a str,
        labels: &'a BTreeMap<String, String>,
        annotations: &'a BTreeMap<String, String>,
        remove_annotations: &'a [String],
        finalizers: Option<&'a [String]>,
    ) -> WriteResult<'a, ()>;

    /// Merges labels and annotations into a Node; replaces its taints and finalizers when given, guarded by
    /// `resource_version` when that is given.
    fn sync_node<'a>(&'a mut self, write: NodeWrite<'a>) -> WriteResult<'a, ()>;

    /// Sets and removes labels of a NodeClaim or a Node.
    fn relabel<'a>(
        &'a mut self,
        target: LabelTarget,
        name: &'a str,
        set: &'a BTreeMap<String, String>,
        remove: &'a [String],
    ) -> WriteResult<'a, ()>;

    /// Sets a pod's `status.nominatedNodeName`, only on the pod with `uid` when given.
    fn nominate_pod<'a>(
        &'a mut self,
        namespace: &'a str,
        name: &'a str,
        uid: Option<&'a str>,
        node: &'a str,
    ) -> WriteResult<'a, ()>;

    fn update_nodepool_status<'a>(&'a mut self, name: &'a str, status: &'a NodePoolStatus) -> WriteResult<'a, ()>;

    fn patch_nodeoverlay_status<'a>(&'a mut self, name: &'a str, status: &'a NodeOverlayStatus) -> WriteResult<'a, ()>;

    fn patch_capacitybuffer_status<'a>(
        &'a mut self,
        namespace: &'a str,
        name: &'a str,
        status: &'a CapacityBufferStatus,
    ) -> WriteResult<'a, ()>;

    fn update_ec2nodeclass_status<'a>(
        &'a mut self,
        name: &'a str,
        status: &'a EC2NodeClassStatus,
    ) -> WriteResult<'a, ()>;

    /// Deletes a NodeClaim (a deletion timestamp while finalizers remain).
    fn delete_nodeclaim<'a>(&'a mut self, name: &'a str) -> WriteResult<'a, ()>;

    /// Removes one finalizer from a NodeClaim, guarded by the resourceVersion of `claim`.
    fn remove_nodeclaim_finalizer<'a>(&'a mut self, claim: &'a NodeClaim, finalizer: &'a str) -> WriteResult<'a, ()>;

    /// Deletes a Node (a deletion timestamp while finalizers remain).
    fn delete_node<'a>(&'a mut self, name: &'a str) -> WriteResult<'a, ()>;

    /// The Eviction API: refused while a PodDisruptionBudget forbids it.
    fn evict<'a>(&'a mut self, namespace: &'a str, name: &'a str) -> WriteResult<'a, Eviction>;

    /// Deletes a pod with a grace period, bypassing PDBs.
    fn delete_pod<'a>(&'a mut self, namespace: &'a str, name: &'a str, grace_seconds: u32) -> WriteResult<'a, ()>;

    /// Records a Kubernetes Event about an object.
    fn event<'a>(
        &'a mut self,
        regarding: ObjectReference,
        warning: bool,
        reason: &'a str,
        message: &'a str,
    ) -> WriteResult<'a, ()>;
}

/// One write to a Node (see [`ClusterPort::sync_node`]).
#[derive(Debug, Clone, Copy)]
pub struct NodeWrite<'a> {
    pub name: &'a str,
    /// Guards the write when set: a 409 if the node changed since.
    pub resource_version: Option<&'a str>,
    pub labels: &'a BTreeMap<String, String>,
    pub annotations: &'a BTreeMap<String, String>,
    pub taints: Option<&'a [Taint]>,
    pub finalizers: Option<&'a [String]>,
}
