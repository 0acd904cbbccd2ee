//! The kube-rs writer as the controller's cluster port.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ObjectReference;

use super::Writer;
use crate::controller::cluster_port::{ClusterPort, Eviction, NodeWrite, WriteResult};
use crate::controller::effect::LabelTarget;
use crate::engine::api::capacitybuffer::CapacityBufferStatus;
use crate::engine::api::ec2nodeclass::EC2NodeClassStatus;
use crate::engine::api::nodeoverlay::NodeOverlayStatus;
use crate::engine::api::nodepool::NodePoolStatus;
use crate::engine::api::{NodeClaim, NodeClaimStatus};

impl ClusterPort for Writer {
    fn create_nodeclaim<'a>(&'a mut self, claim: &'a NodeClaim) -> WriteResult<'a, NodeClaim> {
        Box::pin(Writer::create_nodeclaim(self, claim))
    }

    fn update_nodeclaim_status<'a>(&'a mut self, name: &'a str, status: &'a NodeClaimStatus) -> WriteResult<'a, ()> {
        Box::pin(Writer::update_nodeclaim_status(self, name, status))
    }

    fn patch_nodeclaim_metadata<'a>(
        &'a mut self,
        name: &'a str,
        labels: &'a BTreeMap<String, String>,
        annotations: &'a BTreeMap<String, String>,
        remove_annotations: &'a [String],
        finalizers: Option<&'a [String]>,
    ) -> WriteResult<'a, ()> {
        Box::pin(Writer::patch_nodeclaim_metadata(self, name, labels, annotations, remove_annotations, finalizers))
    }

    fn sync_node<'a>(&'a mut self, w: NodeWrite<'a>) -> WriteResult<'a, ()> {
        Box::pin(self.sync_node_full(w.name, w.resource_version, w.labels, w.annotations, w.taints, w.finalizers))
    }

    fn relabel<'a>(
        &'a mut self,
        target: LabelTarget,
        name: &'a str,
        set: &'a BTreeMap<String, String>,
        remove: &'a [String],
    ) -> WriteResult<'a, ()> {
        Box::pin(Writer::relabel(self, target, name, set, remove))
    }

    fn nominate_pod<'a>(
        &'a mut self,
        namespace: &'a str,
        name: &'a str,
        uid: Option<&'a str>,
        node: &'a str,
    ) -> WriteResult<'a, ()> {
        Box::pin(Writer::nominate_pod(self, namespace, name, uid, node))
    }

    fn update_nodepool_status<'a>(&'a mut self, name: &'a str, status: &'a NodePoolStatus) -> WriteResult<'a, ()> {
        Box::pin(Writer::update_nodepool_status(self, name, status))
    }

    fn patch_nodeoverlay_status<'a>(&'a mut self, name: &'a str, status: &'a NodeOverlayStatus) -> WriteResult<'a, ()> {
        Box::pin(Writer::patch_nodeoverlay_status(self, name, status))
    }

    fn patch_capacitybuffer_status<'a>(
        &'a mut self,
        namespace: &'a str,
        name: &'a str,
        status: &'a CapacityBufferStatus,
    ) -> WriteResult<'a, ()> {
        Box::pin(Writer::patch_capacitybuffer_status(self, namespace, name, status))
    }

    fn update_ec2nodeclass_status<'a>(
        &'a mut self,
        name: &'a str,
        status: &'a EC2NodeClassStatus,
    ) -> WriteResult<'a, ()> {
        Box::pin(Writer::update_ec2nodeclass_status(self, name, status))
    }

    fn delete_nodeclaim<'a>(&'a mut self, name: &'a str) -> WriteResult<'a, ()> {
        Box::pin(Writer::delete_nodeclaim(self, name))
    }

    fn remove_nodeclaim_finalizer<'a>(&'a mut self, claim: &'a NodeClaim, finalizer: &'a str) -> WriteResult<'a, ()> {
        Box::pin(Writer::remove_nodeclaim_finalizer(self, claim, finalizer))
    }

    fn delete_node<'a>(&'a mut self, name: &'a str) -> WriteResult<'a, ()> {
        Box::pin(Writer::delete_node(self, name))
    }

    fn evict<'a>(&'a mut self, namespace: &'a str, name: &'a str) -> WriteResult<'a, Eviction> {
        Box::pin(Writer::evict(self, namespace, name))
    }

    fn delete_pod<'a>(&'a mut self, namespace: &'a str, name: &'a str, grace_seconds: u32) -> WriteResult<'a, ()> {
        Box::pin(Writer::delete_pod(self, namespace, name, grace_seconds))
    }

    fn event<'a>(
        &'a mut self,
        regarding: ObjectReference,
        warning: bool,
        reason: &'a str,
        message: &'a str,
    ) -> WriteResult<'a, ()> {
        Box::pin(Writer::event(self, regarding, warning, reason, message))
    }
}
