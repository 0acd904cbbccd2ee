//! The cloud port, after upstream's `pkg/cloudprovider/types.go`: one interface every cloud implements, so the
//! executors of the controller's effects never ask which cloud they have. The simulated cloud
//! ([`crate::sim::cloud::SimCloud`], answering at once on the world's clock), KWOK ([`crate::kube::kwok::KwokCloud`],
//! instances are Node objects) and AWS ([`crate::aws::cloud::AwsCloud`], EC2 through CreateFleet) implement it.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use futures_util::FutureExt as _;

use crate::engine::api::NodeClaim;
use crate::engine::catalog::{Catalog, InstanceType};
use crate::engine::lifecycle::{LaunchError, LaunchResult};
use crate::engine::provisioning::Millis;

pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// One claim's launch.
#[derive(Debug, Clone)]
pub struct Launched {
    pub result: LaunchResult,
    /// Annotations the claim records with it (AWS: the NodeClass hash it launched with).
    pub annotations: BTreeMap<String, String>,
}

/// A call that did not get an answer from the cloud (a write it needed failed, the API was unreachable): nothing
/// is recorded, and the controller asks again from fresh state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Retry {
    pub message: String,
    /// Another writer got there first (HTTP 409): logged, not shown as an error.
    pub conflict: bool,
}

/// Why a launch did not happen.
#[derive(Debug, Clone)]
pub enum LaunchFailure {
    /// The cloud said no: recorded on the claim by the engine's rule (out of capacity deletes it).
    Cloud(LaunchError),
    Retry(Retry),
}

/// One of this cluster's instances as the cloud lists it (upstream's `List`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CloudInstance {
    pub provider_id: String,
    /// When it was launched, if the cloud says.
    pub launched_at: Option<Millis>,
    /// Already shutting down: terminating it again would do nothing.
    pub terminating: bool,
    /// The capacity type the cloud reports for it now (`reserved`, `on-demand`, `spot`), if it says: an instance
    /// whose reservation ended reports `on-demand`, and its claim and node are relabelled (see
    /// [`crate::controller::Controller::capacity_types`]).
    pub capacity_type: Option<String>,
}

/// The instance types and offerings launches can use, as a cloud offers them now.
#[derive(Debug, Clone)]
pub enum InstanceTypes {
    /// One catalog for every NodePool (a cloud without node classes).
    All(Arc<Catalog>),
    /// A catalog per node class, by name (AWS: per resolved EC2NodeClass); a NodePool whose class has none gets
    /// nothing to launch until it has.
    PerClass(BTreeMap<String, Arc<Catalog>>),
}

/// An interruption notice from the cloud (a spot interruption, a rebalance recommendation, a scheduled change, an
/// instance stopping or terminated), with where to say whether it was handled: a queue delivers an unhandled one
/// again.
pub struct Notice {
    pub message: crate::controller::interruption::Message,
    pub answer: Box<dyn FnOnce(Result<(), String>) + Send>,
}

impl std::fmt::Debug for Notice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Notice").field("message", &self.message).finish_non_exhaustive()
    }
}

/// Overlaid offering prices: NodePool → (instance type, zone, capacity type) → $/h.
pub type OverlayPrices = BTreeMap<String, BTreeMap<(String, String, String), f64>>;

/// What NodeOverlays changed, as a cloud's launches must see it (upstream wraps the cloud provider with the overlay
/// store, so `Create` sees the instance types the scheduler saw): offering prices, and the instance types whose
/// capacity an overlay set (an extended resource such as `nvidia.com/gpu` shared by time-slicing, hugepages), per
/// NodePool.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OverlayStore {
    pub prices: OverlayPrices,
    /// NodePool → instance type name → the type with its overlaid capacity and overhead.
    pub capacity: BTreeMap<String, BTreeMap<String, Arc<InstanceType>>>,
}

/// The instance type a launch of `claim` fits its requests into: `t` as the cloud offers it now (offerings,
/// availability, prices), with the capacity and overhead an overlay gave it in the claim's NodePool.
pub fn launch_type(store: &OverlayStore, claim: &NodeClaim, t: &Arc<InstanceType>) -> Arc<InstanceType> {
    match claim.nodepool().and_then(|p| store.capacity.get(p)).and_then(|types| types.get(&t.name)) {
        Some(overlaid) => Arc::new(InstanceType {
            capacity: overlaid.capacity.clone(),
            overhead: overlaid.overhead.clone(),
            ..(**t).clone()
        }),
        None => t.clone(),
    }
}

/// Whether the claim says a NodeOverlay set the price of a type it keeps (`karpenter.sh/price-overlay-applied`).
pub fn is_price_overlaid(claim: &NodeClaim) -> bool {
    claim
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(crate::engine::overlay::ANNOTATION_PRICE_OVERLAY_APPLIED))
        .is_some_and(|v| v == "true")
}

/// The price a launch ranks an offering of `instance_type` by: the overlay's for a claim annotated
/// `karpenter.sh/price-overlay-applied` (upstream's AWS provider then launches a fleet prioritized by them), the
/// offering's own otherwise.
pub fn launch_price(
    store: &OverlayStore,
    claim: &NodeClaim,
    instance_type: &str,
    o: &crate::engine::catalog::Offering,
) -> f64 {
    claim
        .nodepool()
        .and_then(|p| store.prices.get(p))
        .filter(|_| is_price_overlaid(claim))
        .and_then(|p| p.get(&(instance_type.to_string(), o.zone.clone(), o.capacity_type.clone())))
        .copied()
        .unwrap_or(o.price)
}

/// A node condition the cloud says makes a node unhealthy once it has held this long (upstream's `RepairPolicy`):
/// node repair (gate `NodeRepair`) replaces such nodes. v1.14 reads the condition type, status and toleration;
/// v1.15 adds a reason pattern, an action, a drain bound and a priority (see [`super::repair_policy`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepairPolicy {
    pub condition_type: &'static str,
    pub condition_status: &'static str,
    pub toleration: Millis,
    /// A Go-style regular expression the condition's reason must match (unanchored unless it says `^` or `$`);
    /// `None`: the fallback of its condition type and status.
    pub reason_pattern: Option<String>,
    pub action: RepairAction,
    /// How long the drain may take: `None` inherits the NodeClaim's terminationGracePeriod, 0 is forceful.
    pub termination_grace_period: Option<Millis>,
    /// 0..=100: a more urgent policy's nodes are repaired first.
    pub priority: u8,
    /// The feature gate that must be on for the policy to apply (AWS's reboots: `RebootForRepair`).
    pub gate: Option<&'static str>,
}

/// What repair does to a node (v1.15): replace it, or reboot it in place.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RepairAction {
    /// Less disruptive than replacing: ordered first.
    Reboot,
    Replace,
}

impl RepairPolicy {
    /// A fallback policy (any reason) that replaces the node, with the NodeClaim's own drain bound, at priority 0:
    /// what every v1.14 policy is.
    pub fn fallback(condition_type: &'static str, condition_status: &'static str, toleration: Millis) -> RepairPolicy {
        RepairPolicy {
            condition_type,
            condition_status,
            toleration,
            reason_pattern: None,
            action: RepairAction::Replace,
            termination_grace_period: None,
            priority: 0,
            gate: None,
        }
    }
}

const MINUTE: Millis = 60_000;

/// The AWS provider's repair policies: the node's `Ready` and the EKS node monitoring agent's conditions.
pub fn aws_repair_policies() -> Vec<RepairPolicy> {
    let p = |condition_type, condition_status, minutes: Millis| {
        RepairPolicy::fallback(condition_type, condition_status, minutes * MINUTE)
    };
    vec![
        p("Ready", "False", 30),
        p("Ready", "Unknown", 30),
        p("AcceleratedHardwareReady", "False", 10),
        p("StorageReady", "False", 30),
        p("NetworkingReady", "False", 30),
        p("KernelReady", "False", 30),
        p("ContainerRuntimeReady", "False", 30),
        // Behind the AWS gate `RebootForRepair` (v1.15): the reasons AWS reboots for are not published. Assumed
        // from upstream's end-to-end test, the one place to change: an accelerator's Xid 46 error reboots.
        RepairPolicy {
            reason_pattern: Some("NvidiaXID46Error".into()),
            action: RepairAction::Reboot,
            gate: Some("RebootForRepair"),
            ..p("AcceleratedHardwareReady", "False", 10)
        },
    ]
}

/// The KWOK provider's repair policies.
pub fn kwok_repair_policies() -> Vec<RepairPolicy> {
    ["False", "Unknown"].into_iter().map(|status| RepairPolicy::fallback("Ready", status, 10 * MINUTE)).collect()
}

/// A cloud that is only read, never asked to act: what a plan over a read of the cluster runs with (its effects
/// are shown, not carried out). It offers nothing beyond the catalog the controller was built with.
#[derive(Debug, Default)]
pub struct ReadOnlyCloud;

impl CloudProvider for ReadOnlyCloud {
    fn name(&self) -> &'static str {
        "none"
    }

    fn lists(&self) -> bool {
        false
    }

    fn set_overlays(&mut self, _store: Arc<OverlayStore>) {}

    fn create<'a>(
        &'a mut self,
        claims: &'a [NodeClaim],
        _now: Millis,
    ) -> BoxFuture<'a, Vec<Result<Launched, LaunchFailure>>> {
        let refused = || LaunchFailure::Retry(Retry { message: "no cloud to launch in".into(), conflict: false });
        Box::pin(std::future::ready(claims.iter().map(|_| Err(refused())).collect()))
    }

    fn delete<'a>(&'a mut self, _provider_id: &'a str, _now: Millis) -> BoxFuture<'a, Result<Option<String>, Retry>> {
        Box::pin(std::future::ready(Err(Retry { message: "no cloud to terminate in".into(), conflict: false })))
    }
}

/// What a cloud does for the controller's effects.
pub trait CloudProvider: Send + Sync {
    /// `sim`, `kwok`, `aws`: for logs.
    fn name(&self) -> &'static str;

    /// Launches the claims, in one batch where the cloud can (AWS: claims with the same request share a
    /// CreateFleet); one result per claim, in order.
    fn create<'a>(
        &'a mut self,
        claims: &'a [NodeClaim],
        now: Millis,
    ) -> BoxFuture<'a, Vec<Result<Launched, LaunchFailure>>>;

    /// Terminates an instance: a line for the events pane when something was done or could not be.
    fn delete<'a>(&'a mut self, provider_id: &'a str, now: Millis) -> BoxFuture<'a, Result<Option<String>, Retry>>;

    /// Reboots an instance in place (repair's reboot, Karpenter v1.15). `op_id` names the request, so a cloud can
    /// tell a retry from a new one. A cloud that cannot reboot refuses, and the node is replaced instead.
    fn reboot<'a>(
        &'a mut self,
        _provider_id: &'a str,
        _op_id: &'a str,
        _now: Millis,
    ) -> BoxFuture<'a, Result<(), Retry>> {
        Box::pin(std::future::ready(Err(Retry {
            message: format!("{} cannot reboot instances", self.name()),
            conflict: false,
        })))
    }

    /// This cluster's instances, for garbage collection (see [`crate::controller::Controller::garbage_collect`]);
    /// `None` from a cloud whose instances are the Nodes themselves (KWOK), where there is nothing to collect.
    fn list<'a>(&'a mut self, _now: Millis) -> BoxFuture<'a, Result<Option<Vec<CloudInstance>>, Retry>> {
        Box::pin(std::future::ready(Ok(None)))
    }

    /// The instance types and offerings launches can use now, with the offerings the cloud learned are out of
    /// capacity marked unavailable (upstream's `GetInstanceTypes`); `None` when the catalog the controller was
    /// built with stands (KWOK).
    fn instance_types(&mut self, _now: Millis) -> Option<InstanceTypes> {
        None
    }

    /// Per NodeClaim, why it no longer matches its node class (upstream's `IsDrifted`, the cloud's part of drift);
    /// `None` for a cloud without node classes.
    fn drifted(
        &mut self,
        _claims: &mut dyn Iterator<Item = &NodeClaim>,
        _now: Millis,
    ) -> Option<BTreeMap<String, String>> {
        None
    }

    /// The interruption notices that arrived since the last call. The cloud does its own part first (a spot
    /// interruption keeps the offering out of launches for a while, as AWS's unavailable-offerings cache); the
    /// controller's part is [`crate::controller::Controller::interruption`]. `claims` are the cluster's NodeClaims.
    fn interruptions(&mut self, _claims: &mut dyn Iterator<Item = &NodeClaim>, _now: Millis) -> Vec<Notice> {
        Vec::new()
    }

    /// NodeClaims whose instances run in a capacity block that ends within 40 minutes (upstream's
    /// `capacityreservation.expiration`, which marks such blocks `expiring`): the controller deletes them at once,
    /// before EC2 reclaims the instances. A cloud without reservations has none.
    fn expiring_claims(&mut self, _claims: &mut dyn Iterator<Item = &NodeClaim>, _now: Millis) -> Vec<String> {
        Vec::new()
    }

    /// What the NodeOverlays changed, per NodePool (upstream wraps the cloud provider with the overlay store, so
    /// its launches see it): a claim annotated `karpenter.sh/price-overlay-applied` is launched by the overlaid
    /// prices (AWS: a prioritized fleet), and every claim fits its requests into the overlaid capacity
    /// ([`launch_type`]). Every cloud that picks an instance type itself must take it.
    fn set_overlays(&mut self, store: Arc<OverlayStore>);

    /// Prices for instance types the cloud has no price for, from instance-type-only NodeOverlays (upstream
    /// v1.14's AWS `GetOverlayPrice`; see [`crate::engine::overlay::instance_type_prices`]). A cloud whose types
    /// are always priced ignores them.
    fn set_type_price_overlays(&mut self, _prices: &BTreeMap<String, f64>) {}

    /// The cluster's EC2NodeClasses, for a cloud that resolves its launch templates and offerings from them as
    /// they are read (the simulated EC2); a cloud that watches them itself ignores this.
    fn set_node_classes(&mut self, _classes: &[crate::engine::api::EC2NodeClass]) {}

    /// Which node conditions make a node unhealthy, and after how long (upstream's `RepairPolicies`); node repair
    /// runs only for a cloud that names some.
    fn repair_policies(&self) -> Vec<RepairPolicy> {
        Vec::new()
    }

    /// Whether [`CloudProvider::list`] lists anything (a loop need not wake for it otherwise).
    fn lists(&self) -> bool {
        true
    }

    /// The instance types and prices the cloud offers now, when it has a live catalog (the dashboard prices
    /// nodes from it); `None` when the one the controller started with stands.
    fn live_catalog(&self, _now: Millis) -> Option<Catalog> {
        None
    }
}

/// The answer of a cloud that answers at once (the simulated one: its latencies are the world's timers, not the
/// call's); `None` from a cloud that would have to wait, which such a caller treats as no answer.
pub fn at_once<T>(call: BoxFuture<'_, T>) -> Option<T> {
    call.now_or_never()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repair_policies_are_upstreams() {
        let aws = aws_repair_policies();
        let find = |t: &str, s: &str| aws.iter().find(|p| p.condition_type == t && p.condition_status == s);
        assert_eq!(find("Ready", "False").map(|p| p.toleration), Some(30 * MINUTE));
        assert_eq!(find("Ready", "Unknown").map(|p| p.toleration), Some(30 * MINUTE));
        assert_eq!(find("AcceleratedHardwareReady", "False").map(|p| p.toleration), Some(10 * MINUTE));
        for t in ["StorageReady", "NetworkingReady", "KernelReady", "ContainerRuntimeReady"] {
            assert_eq!(find(t, "False").map(|p| p.toleration), Some(30 * MINUTE), "{t}");
        }
        assert_eq!(aws.iter().filter(|p| p.gate.is_none()).count(), 7, "v1.14's, all fallbacks that replace");
        assert!(
            aws.iter()
                .filter(|p| p.gate.is_none())
                .all(|p| p.reason_pattern.is_none() && p.action == RepairAction::Replace)
        );
        // v1.15's reboot is AWS's only behind its gate.
        let reboots: Vec<&RepairPolicy> = aws.iter().filter(|p| p.action == RepairAction::Reboot).collect();
        assert!(!reboots.is_empty() && reboots.iter().all(|p| p.gate == Some("RebootForRepair")));
        let kwok = kwok_repair_policies();
        assert_eq!(kwok.len(), 2);
        assert!(kwok.iter().all(|p| p.condition_type == "Ready" && p.toleration == 10 * MINUTE));
    }
}
