//! The KWOK cloud: an "instance" is a Node object created directly in the API (annotated
//! `kwok.x-k8s.io/node: fake`, the convention KWOK's controller acts on to keep such nodes alive), so the whole
//! loop runs on any test cluster without a cloud account, as upstream's own end-to-end tests do. The node carries
//! the `karpenter.sh/unregistered` taint like a kubelet registering from a NodeClaim, and reports itself Ready.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, NodeCondition, NodeSpec, NodeStatus, Taint};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::controller::cloud::{
    BoxFuture, CloudProvider, LaunchFailure, Launched, OverlayStore, Retry, launch_price, launch_type,
};
use crate::engine::api::NodeClaim;
use crate::engine::catalog::{Catalog, InstanceType, Offering};
use crate::engine::labels;
use crate::engine::lifecycle::{LaunchError, LaunchResult};
use crate::engine::provisioning::Millis;
use crate::engine::requirements::{claim_requests, claim_requirements};
use crate::engine::resources::Resources;

pub const KWOK_ANNOTATION: &str = "kwok.x-k8s.io/node";
pub const PROVIDER_PREFIX: &str = crate::controller::KWOK_PROVIDER_PREFIX;

/// The cheapest offering a claim may launch as: reserved, then spot, then on-demand, as the simulated EC2 picks.
/// An overlay-priced claim is ranked by the overlaid prices (see [`crate::controller::cloud::launch_price`]).
pub fn pick(
    catalog: &Catalog,
    claim: &NodeClaim,
    store: &OverlayStore,
) -> Result<(Arc<InstanceType>, Offering), LaunchError> {
    let reqs = claim_requirements(claim);
    let requests = claim_requests(claim);
    let rank = |ct: &str| match ct {
        labels::CAPACITY_RESERVED => 0,
        labels::CAPACITY_SPOT => 1,
        _ => 2,
    };
    let types: Vec<Arc<InstanceType>> = catalog
        .instance_types
        .iter()
        .map(|t| launch_type(store, claim, t))
        .filter(|t| t.requirements.overlaps(&reqs) && requests.fits_in(&t.allocatable()))
        .collect();
    if types.is_empty() {
        return Err(LaunchError::NoCompatibleType(format!(
            "no KWOK instance type NodeClaim {} allows can hold its requests ({requests})",
            claim.name()
        )));
    }
    types
        .iter()
        .flat_map(|t| t.offerings.iter().filter(|o| o.available && o.compatible(&reqs)).map(move |o| (t, o)))
        .min_by(|(ta, a), (tb, b)| {
            rank(&a.capacity_type)
                .cmp(&rank(&b.capacity_type))
                .then(launch_price(store, claim, &ta.name, a).total_cmp(&launch_price(store, claim, &tb.name, b)))
                .then_with(|| ta.name.cmp(&tb.name))
                .then_with(|| a.zone.cmp(&b.zone))
        })
        .map(|(t, o)| (t.clone(), o.clone()))
        .ok_or_else(|| LaunchError::InsufficientCapacity(format!("no KWOK offering fits NodeClaim {}", claim.name())))
}

fn quantities(r: &Resources) -> BTreeMap<String, Quantity> {
    r.to_quantity_map().into_iter().map(|(k, v)| (k, Quantity(v))).collect()
}

/// The launch: what to record on the claim, and the Node to create (named after the claim).
pub fn launch(catalog: &Catalog, claim: &NodeClaim, store: &OverlayStore) -> Result<(LaunchResult, Node), LaunchError> {
    let (t, o) = pick(catalog, claim, store)?;
    let name = claim.name().to_string();
    let provider_id = format!("{PROVIDER_PREFIX}{name}");
    let mut provider_labels = t.requirements.single_valued_labels();
    provider_labels.insert(labels::ZONE.to_string(), o.zone.clone());
    provider_labels.insert(labels::CAPACITY_TYPE.to_string(), o.capacity_type.clone());
    provider_labels.insert(labels::INSTANCE_TYPE.to_string(), t.name.clone());
    let result = LaunchResult {
        provider_id: provider_id.clone(),
        instance_type: t.name.clone(),
        zone: o.zone.clone(),
        capacity_type: o.capacity_type.clone(),
        labels: provider_labels.clone(),
        capacity: t.capacity.clone(),
        allocatable: t.allocatable(),
        image_id: None,
    };
    let mut node_labels = provider_labels;
    node_labels.extend(claim.metadata.labels.clone().unwrap_or_default());
    node_labels.insert(labels::HOSTNAME.to_string(), name.clone());
    let mut taints: Vec<Taint> = claim.spec.taints.clone();
    taints.extend(claim.spec.startup_taints.iter().cloned());
    taints.push(Taint { key: labels::TAINT_UNREGISTERED.into(), effect: "NoExecute".into(), ..Default::default() });
    let node = Node {
        metadata: ObjectMeta {
            name: Some(name),
            labels: Some(node_labels),
            annotations: Some([(KWOK_ANNOTATION.to_string(), "fake".to_string())].into()),
            ..Default::default()
        },
        spec: Some(NodeSpec { provider_id: Some(provider_id), taints: Some(taints), ..Default::default() }),
        status: Some(NodeStatus {
            capacity: Some(quantities(&t.capacity)),
            allocatable: Some(quantities(&t.allocatable())),
            conditions: Some(vec![NodeCondition {
                type_: "Ready".into(),
                status: "True".into(),
                reason: Some("KubeletReady".into()),
                ..Default::default()
            }]),
            ..Default::default()
        }),
    };
    Ok((result, node))
}

/// The KWOK cloud: an instance is a Node object named after its claim, written through the API server (KWOK's
/// controller then plays its kubelet).
pub struct KwokCloud {
    pub catalog: Arc<Catalog>,
    pub writer: crate::kube::writer::Writer,
    /// What NodeOverlays changed, which launches see (see [`CloudProvider::set_overlays`]).
    pub overlays: Arc<OverlayStore>,
}

impl KwokCloud {
    pub fn new(catalog: Arc<Catalog>, writer: crate::kube::writer::Writer) -> KwokCloud {
        KwokCloud { catalog, writer, overlays: Arc::default() }
    }
}

fn retry(e: crate::kube::writer::WriteError) -> Retry {
    Retry { message: e.to_string(), conflict: e.is_conflict() }
}

impl CloudProvider for KwokCloud {
    fn name(&self) -> &'static str {
        "kwok"
    }

    fn lists(&self) -> bool {
        false
    }

    fn repair_policies(&self) -> Vec<crate::controller::cloud::RepairPolicy> {
        crate::controller::cloud::kwok_repair_policies()
    }

    fn set_overlays(&mut self, store: Arc<OverlayStore>) {
        self.overlays = store;
    }

    fn create<'a>(
        &'a mut self,
        claims: &'a [NodeClaim],
        _now: Millis,
    ) -> BoxFuture<'a, Vec<Result<Launched, LaunchFailure>>> {
        Box::pin(async move {
            let mut out = Vec::with_capacity(claims.len());
            for claim in claims {
                out.push(match launch(&self.catalog, claim, &self.overlays) {
                    Ok((result, node)) => match self.writer.create_node(&node).await {
                        Ok(()) => Ok(Launched { result, annotations: BTreeMap::new() }),
                        Err(e) => Err(LaunchFailure::Retry(retry(e))),
                    },
                    Err(e) => Err(LaunchFailure::Cloud(e)),
                });
            }
            out
        })
    }

    /// A KWOK node has no machine to restart: it is back at once, with a new boot id.
    fn reboot<'a>(
        &'a mut self,
        provider_id: &'a str,
        op_id: &'a str,
        _now: Millis,
    ) -> BoxFuture<'a, Result<(), Retry>> {
        Box::pin(async move {
            match provider_id.strip_prefix(PROVIDER_PREFIX) {
                Some(node) => self.writer.set_node_boot_id(node, &format!("kwok-{op_id}")).await.map_err(retry),
                None => Err(Retry { message: format!("instance {provider_id} is not a KWOK node"), conflict: false }),
            }
        })
    }

    fn delete<'a>(&'a mut self, provider_id: &'a str, _now: Millis) -> BoxFuture<'a, Result<Option<String>, Retry>> {
        Box::pin(async move {
            match provider_id.strip_prefix(PROVIDER_PREFIX) {
                Some(node) => self.writer.delete_node(node).await.map(|()| None).map_err(retry),
                // Not a KWOK instance: another cloud's, which this one can't terminate.
                None => Ok(Some(format!("instance {provider_id} is not a KWOK node; left alone"))),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::api::common::NodeSelectorRequirementWithMinValues as Req;
    use crate::engine::api::nodeclaim::NodeClaimSpec;

    #[test]
    fn an_extended_resource_an_overlay_adds_is_launched_on_that_type_with_that_capacity() {
        let catalog = crate::engine::catalog::kwok::kwok_catalog("us-east-1");
        let mut claim = NodeClaim::new("default-abcde", NodeClaimSpec::default());
        claim.metadata.labels = Some([(labels::NODEPOOL.to_string(), "default".to_string())].into());
        claim.spec.resources.requests = [("example.com/widget".to_string(), Quantity("1".into()))].into();
        let none = launch(&catalog, &claim, &OverlayStore::default());
        assert!(matches!(none, Err(LaunchError::NoCompatibleType(_))), "no type has widgets: {none:?}");
        let raw = catalog.instance_types[3].clone();
        let mut widened = (*raw).clone();
        widened.capacity.set_value("example.com/widget", 4);
        let mut store = OverlayStore::default();
        store.capacity.entry("default".into()).or_default().insert(raw.name.clone(), Arc::new(widened));
        let (r, node) = launch(&catalog, &claim, &store).expect("the overlaid type holds it");
        assert_eq!(r.instance_type, raw.name);
        assert_eq!(r.allocatable.get("example.com/widget"), 4);
        let allocatable = node.status.and_then(|s| s.allocatable).unwrap_or_default();
        assert_eq!(allocatable.get("example.com/widget").map(|q| q.0.as_str()), Some("4"));
        // Another pool's claim does not see this pool's overlay.
        claim.metadata.labels = Some([(labels::NODEPOOL.to_string(), "other".to_string())].into());
        assert!(matches!(launch(&catalog, &claim, &store), Err(LaunchError::NoCompatibleType(_))));
    }

    #[test]
    fn launches_the_cheapest_fitting_offering_as_a_fake_node() {
        let catalog = crate::engine::catalog::kwok::kwok_catalog("us-east-1");
        let mut claim = NodeClaim::new("default-abcde", NodeClaimSpec::default());
        claim.metadata.labels = Some([(labels::NODEPOOL.to_string(), "default".to_string())].into());
        claim.spec.requirements = vec![Req {
            key: labels::CAPACITY_TYPE.into(),
            operator: "In".into(),
            values: ["on-demand".to_string()].into(),
            min_values: None,
        }];
        claim.spec.resources.requests = [("cpu".to_string(), Quantity("3".into()))].into();
        let (r, node) = launch(&catalog, &claim, &OverlayStore::default()).unwrap();
        assert_eq!(r.capacity_type, "on-demand");
        assert!(r.allocatable.get("cpu") >= 3000, "fits the requests");
        assert_eq!(r.provider_id, "kwok://default-abcde");
        let l = node.metadata.labels.as_ref().unwrap();
        assert_eq!(l.get(labels::NODEPOOL).map(String::as_str), Some("default"));
        assert_eq!(l.get(labels::INSTANCE_TYPE), Some(&r.instance_type));
        assert_eq!(node.metadata.annotations.unwrap().get(KWOK_ANNOTATION).map(String::as_str), Some("fake"));
        let taints = node.spec.unwrap().taints.unwrap();
        assert!(taints.iter().any(|t| t.key == labels::TAINT_UNREGISTERED));
        // Cheapest: no cheaper on-demand type in the catalogue fits.
        let cheaper = catalog.instance_types.iter().any(|t| {
            t.allocatable().get("cpu") >= 3000
                && t.offerings.iter().any(|o| o.capacity_type == "on-demand" && o.price < r_price(&catalog, &r))
        });
        assert!(!cheaper);
        claim.spec.resources.requests = [("cpu".to_string(), Quantity("100000".into()))].into();
        assert!(matches!(launch(&catalog, &claim, &OverlayStore::default()), Err(LaunchError::NoCompatibleType(_))));
    }

    fn r_price(c: &Catalog, r: &LaunchResult) -> f64 {
        c.get(&r.instance_type)
            .and_then(|t| t.offerings.iter().find(|o| o.zone == r.zone && o.capacity_type == r.capacity_type))
            .map_or(0.0, |o| o.price)
    }
}
