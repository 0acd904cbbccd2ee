//! The scheduling simulation: where would these pods go, on existing nodes, on NodeClaims already being launched,
//! or on new NodeClaims from which NodePool? Upstream Karpenter's algorithm (engine.md §2), restructured for speed:
//! everything that depends only on the snapshot (templates, instance-type indexes, daemon overhead groups,
//! topology domains) is prepared once, and instance types are filtered with bitsets.
//!
//! Determinism: pods are ordered by (CPU desc, memory desc, creation asc, uid asc); existing nodes by
//! (initialized first, name); NodePools by (weight desc, name desc); in-simulation NodeClaims by (pod count asc,
//! creation order) — upstream leaves ties of the last one to an unstable sort, we fix them.

pub mod bitset;
pub mod cost;
pub mod default_spread;
mod node_compat;
pub mod pod;
mod reservations;
#[cfg(test)]
mod run_tests;
pub mod selector;
pub mod taints;
pub mod template;
pub mod topology;
pub mod volumes;
pub mod workload;

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::rc::Rc;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Taint;

use self::bitset::Bitset;
use self::node_compat::NodeCompat;
use self::pod::{HostPort, PodData};
use self::template::{Template, TemplateProblem};
use self::topology::{BoundTally, Topology};
use self::volumes::{Attachment, VolumeIndex};
use crate::engine::api::NodePool;
use crate::engine::catalog::{InstanceType, VolumeLimits};
use crate::engine::explain::{InstanceTypeMiss, PodIgnored, PoolRejection};
use crate::engine::labels::{self, LabelPolicy};
use crate::engine::packing::Packing;
use crate::engine::requirements::{Requirement, Requirements, SharedLabels};
use crate::engine::resources::Resources;

/// What to do when the instance types left for a NodeClaim can't satisfy a requirement's `minValues`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MinValuesPolicy {
    /// The NodeClaim is not created; its pods fail.
    #[default]
    Strict,
    /// minValues is lowered to what is achievable and the NodeClaim is annotated.
    BestEffort,
}

#[derive(Debug, Clone)]
pub struct SchedulerOptions {
    pub min_values: MinValuesPolicy,
    /// `--preference-policy=Ignore`: preferences are dropped up front instead of relaxed one by one.
    pub ignore_preferences: bool,
    /// Instance-type options kept per NodeClaim, cheapest first (upstream `MaxInstanceTypes`).
    pub max_instance_types: usize,
    /// Scan only the NodeClaims a topology constraint can allow. Off = the plain scan, kept so tests can prove
    /// both give identical results.
    pub scan_indexes: bool,
    /// How new NodeClaims are sized: Karpenter's way, or for the cheapest fleet.
    pub packing: crate::engine::packing::Packing,
    /// Cost packing: pod uid → the in-flight NodeClaim an earlier solve made for it. Such pods go back to it first,
    /// so a claim packed tightly for its pods gets them again before any other pod.
    pub hints: Arc<BTreeMap<String, String>>,
    /// Capacity reservations in fallback mode (disruption's simulations): never refuse a pod over them. Off
    /// (provisioning), a pod whose compatible reservations are all held waits instead of falling back.
    pub reserved_fallback: bool,
}

impl Default for SchedulerOptions {
    fn default() -> Self {
        SchedulerOptions {
            min_values: MinValuesPolicy::Strict,
            ignore_preferences: false,
            max_instance_types: 600,
            scan_indexes: true,
            packing: crate::engine::packing::Packing::Upstream,
            hints: Arc::default(),
            reserved_fallback: false,
        }
    }
}

/// A node (or an in-flight NodeClaim not yet registered) pods may be placed on.
#[derive(Debug, Clone, Default)]
pub struct ExistingNode {
    pub name: String,
    /// Shared: the cluster state, topology counting and a digest kept between passes read one copy.
    pub labels: Arc<BTreeMap<String, String>>,
    pub taints: Vec<Taint>,
    /// Taints the NodeClaim declared as startup taints (ignored while the node is uninitialized).
    pub startup_taints: Vec<Taint>,
    pub allocatable: Resources,
    pub capacity: Resources,
    pub initialized: bool,
    /// Karpenter-managed (has a NodeClaim).
    pub managed: bool,
    pub nodepool: Option<String>,
    /// The labels as requirements, with the node's hostname, when the caller kept them from an earlier pass
    /// ([`crate::engine::provisioning::Digests`]); `None` works them out from `labels`.
    pub requirements: Option<Arc<Requirements>>,
    /// CSI attach limits: the node's CSINode's, or before it has one what its instance type declares (empty: none).
    pub volume_limits: Arc<VolumeLimits>,
}

impl ExistingNode {
    /// What a node offers a pod's node selectors and affinities: its labels, and its hostname even before the
    /// kubelet labels it.
    pub fn label_requirements(name: &str, labels: &BTreeMap<String, String>) -> Requirements {
        Self::label_requirements_sharing(name, labels, &mut SharedLabels::default())
    }

    /// [`ExistingNode::label_requirements`], sharing label entries with the other nodes' through `shared`.
    pub fn label_requirements_sharing(
        name: &str,
        labels: &BTreeMap<String, String>,
        shared: &mut SharedLabels,
    ) -> Requirements {
        let hostname =
            (!labels.contains_key(labels::HOSTNAME)).then(|| (labels::HOSTNAME.to_string(), name.to_string()));
        Requirements::from_labels_sharing(labels.iter().chain(hostname.as_ref().map(|(k, v)| (k, v))), shared)
    }
}

/// Everything a solve needs besides the pods.
pub struct Input<'a> {
    pub nodepools: &'a [NodePool],
    /// Instance types per NodePool name.
    pub instance_types: &'a BTreeMap<String, Vec<Arc<InstanceType>>>,
    pub policy: &'a LabelPolicy,
    /// Active nodes (not marked for deletion): placement destinations.
    pub nodes: &'a [ExistingNode],
    /// Usage per NodePool for limits (capacity of its nodes, `nodes` = count). Nodes being deleted count as zero.
    pub nodepool_usage: &'a BTreeMap<String, Resources>,
    /// Pods bound to nodes (the node's name), for requests on existing nodes and topology counting.
    pub bound_pods: &'a [(Arc<PodData>, String)],
    /// Labels and taints of every node bound pods may be on (including deleting ones), for topology counting.
    pub node_labels: &'a topology::NodeLabels,
    /// One representative pod per DaemonSet.
    pub daemonsets: &'a [PodData],
    pub volumes: &'a VolumeIndex,
    pub options: SchedulerOptions,
}

/// What a solve's NodeClaims share when they differ only in their pods and options: a cost solve makes thousands of
/// claims from one template whose requirements and template fields are the same, so they share one of these.
#[derive(Debug, Clone)]
pub struct ClaimShape {
    pub nodepool: String,
    /// Final requirements except the instance-type list (see [`NewNodeClaim::full_requirements`]): capacity-type
    /// narrowed to the options, no hostname.
    pub requirements: Requirements,
    pub instance_type_min_values: Option<u32>,
    pub min_values_relaxed: bool,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    pub taints: Vec<Taint>,
    pub startup_taints: Vec<Taint>,
    pub node_class_ref: crate::engine::api::NodeClassReference,
    pub expire_after: String,
    pub termination_grace_period: Option<String>,
}

/// A NodeClaim the solve decided to create: its own pods, options and hostname, and a shape it may share with
/// others (read through `Deref`, so `claim.labels` is the shape's).
#[derive(Debug, Clone)]
pub struct NewNodeClaim {
    pub shape: Arc<ClaimShape>,
    /// Options cheapest first, truncated to `max_instance_types`.
    pub instance_types: Vec<Arc<InstanceType>>,
    pub hostname: String,
    /// Indices into the solved pods.
    pub pods: Vec<usize>,
    /// Σ pod requests + the smallest daemon overhead among the remaining options.
    pub requests: Resources,
}

impl std::ops::Deref for NewNodeClaim {
    type Target = ClaimShape;

    fn deref(&self) -> &ClaimShape {
        &self.shape
    }
}

impl NewNodeClaim {
    /// This claim's own copy of its shape, to change (copied only when shared).
    pub fn shape_mut(&mut self) -> &mut ClaimShape {
        Arc::make_mut(&mut self.shape)
    }

    /// The requirements as written to the NodeClaim: including `node.kubernetes.io/instance-type In [options]`.
    pub fn full_requirements(&self) -> Requirements {
        let mut r = self.requirements.clone();
        r.set(labels::INSTANCE_TYPE, self.instance_type_requirement());
        r
    }

    /// `node.kubernetes.io/instance-type In [options]`, with the minValues the NodePool asked.
    pub fn instance_type_requirement(&self) -> Requirement {
        Requirement::in_values(self.instance_types.iter().map(|t| t.name.clone()))
            .with_min_values(self.instance_type_min_values)
    }

    /// Price of the cheapest compatible available offering among the options.
    pub fn cheapest_price(&self) -> Option<f64> {
        self.instance_types
            .iter()
            .filter_map(|t| t.cheapest_offering(&self.requirements).map(|o| o.price))
            .min_by(f64::total_cmp)
    }
}

/// Pods placed on an existing node or in-flight NodeClaim (they get nominated).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    pub node: String,
    pub pods: Vec<usize>,
}

/// A pod no NodePool could take, with the reason per NodePool.
#[derive(Debug, Clone, PartialEq)]
pub struct PodFailure {
    pub pod: usize,
    pub reasons: Vec<(String, PoolRejection)>,
}

impl PodFailure {
    /// One sentence for events and logs.
    pub fn summary(&self) -> String {
        if self.reasons.is_empty() {
            return "no NodePool can provision for this pod".to_string();
        }
        self.reasons
            .iter()
            .map(|(p, r)| if p.is_empty() { r.to_string() } else { format!("NodePool {p:?}: {r}") })
            .collect::<Vec<_>>()
            .join("; ")
    }
}

#[derive(Debug, Clone, Default)]
pub struct Results {
    pub new_claims: Vec<NewNodeClaim>,
    pub existing: Vec<Placement>,
    pub failures: Vec<PodFailure>,
    pub ignored: Vec<(usize, PodIgnored)>,
}

impl Results {
    pub fn scheduled_pods(&self) -> usize {
        self.new_claims.iter().map(|c| c.pods.len()).sum::<usize>()
            + self.existing.iter().map(|p| p.pods.len()).sum::<usize>()
    }
}

/// A node candidate the solve places pods on: an existing node. The immutable parts are shared so a prepared
/// solve can be copied cheaply per consolidation simulation.
#[derive(Clone)]
struct SimNode {
    /// Shared: every consolidation simulation copies the prepared nodes.
    name: Arc<str>,
    /// Position in the preparation's node list (the [`NodeCompat`] index), stable when some nodes are excluded.
    base: usize,
    hostname_id: Option<u32>,
    domain_ids: Vec<Option<u32>>,
    requirements: Arc<Requirements>,
    taints: Arc<[Taint]>,
    remaining: Resources,
    host_ports: Vec<HostPort>,
    /// Attach limits and the volumes attached so far (tracked only when there are limits).
    volume_limits: Arc<VolumeLimits>,
    volumes: Vec<Attachment>,
    pods: Vec<usize>,
}

/// A NodeClaim being built in this solve.
struct SimClaim {
    template: usize,
    hostname: String,
    hostname_id: u32,
    /// Topology domain ids of `requirements` (see `Topology::domain_ids`).
    domain_ids: Vec<Option<u32>>,
    /// Elementwise max allocatable over `types` (possibly stale, so an upper bound): a cheap first rejection.
    max_alloc: Resources,
    /// How many types `max_alloc` was computed over; recomputed when half of them are gone.
    max_alloc_types: usize,
    requirements: Requirements,
    /// Types still possible.
    types: Bitset,
    /// Requirement- and offering-compatible types for `requirements` (cached).
    req_bits: Bitset,
    requests: Resources,
    host_ports: Vec<HostPort>,
    /// Volumes its pods attach (tracked only when its template's types declare attach limits).
    volumes: Vec<Attachment>,
    pods: Vec<usize>,
    min_values_relaxed: bool,
    /// `requirements` are still the template's plus the hostname (no pod narrowed them): the template's price
    /// order is the claim's.
    as_template: bool,
}

impl SimClaim {
    /// The claim's options are now `types` (a subset of them): the cheap bound on what they can hold is redone
    /// once half of the types it was computed over are gone.
    fn narrow_to(&mut self, tpl: &Template, types: Bitset) {
        let remaining = types.count();
        if remaining * 2 < self.max_alloc_types {
            self.max_alloc = tpl.max_allocatable(&types);
            self.max_alloc_types = remaining;
        }
        self.types = types;
    }
}

#[derive(Default)]
struct KeyPartition {
    by_domain: rustc_hash::FxHashMap<u32, BTreeSet<(usize, usize)>>,
    open: BTreeSet<(usize, usize)>,
}

/// Iterates several sets of (pod count, claim) in their common order.
fn merged<'s>(sets: &[&'s BTreeSet<(usize, usize)>]) -> Box<dyn Iterator<Item = (usize, usize)> + 's> {
    if let [one] = sets {
        return Box::new(one.iter().copied());
    }
    let mut iters: Vec<std::iter::Peekable<std::collections::btree_set::Iter<'s, (usize, usize)>>> =
        sets.iter().map(|s| s.iter().peekable()).collect();
    Box::new(std::iter::from_fn(move || {
        let mut best: Option<(usize, (usize, usize))> = None;
        for (i, it) in iters.iter_mut().enumerate() {
            if let Some(&&v) = it.peek()
                && best.is_none_or(|(_, b)| v < b)
            {
                best = Some((i, v));
            }
        }
        let (i, v) = best?;
        iters[i].next();
        Some(v)
    }))
}

struct Candidate {
    requirements: Option<Requirements>,
    types: Bitset,
    req_bits: Option<Bitset>,
    relaxed_min_values: bool,
    /// The capacity reservations the claim would hold (when the catalog has any).
    reserve: Option<BTreeSet<String>>,
}

/// The parts of a solve that never change during it.
struct Fixed {
    /// Some node or template has a CSI attach limit: only then are pods' volumes looked up.
    counts_volumes: bool,
    templates: Vec<Template>,
    /// NodePools that can't be used at all, with the reason every failing pod will show for them.
    unusable: Vec<(String, PoolRejection)>,
    prefer_no_schedule_step: bool,
    /// Existing nodes (in preparation order) admitted per pod requirement set.
    node_compat: NodeCompat,
    /// Per topology key: the values templates × instance types allow (see `template_domains`).
    domains: std::sync::Mutex<BTreeMap<String, BTreeSet<String>>>,
    /// Positions in `Input::bound_pods` of the pods with required anti-affinity: the owners of inverse groups.
    bound_anti: Vec<usize>,
    /// The topology keys bound pods' terms use, each with the nodes those pods are on: a solve that removes
    /// some nodes still needs a key while one of its nodes stays.
    bound_keys: BTreeMap<String, BTreeSet<String>>,
    /// The bound pods' topology counts per group and node, shared by every solve over the preparation.
    bound_tally: BoundTally,
    /// What each capacity reservation can take at the start of a solve (empty without reserved offerings).
    reservations: BTreeMap<String, i64>,
}

impl Fixed {
    /// The values `key` may take on NodeClaims of any template (template requirements × instance types), computed
    /// once per key: every solve over a preparation asks again, and the catalog is large.
    fn template_domains(&self, key: &str) -> BTreeSet<String> {
        let mut cache = self.domains.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(set) = cache.get(key) {
            return set.clone();
        }
        let mut set = BTreeSet::new();
        for t in &self.templates {
            if let Some(r) = t.requirements.get_ref(key)
                && !r.complement
            {
                set.extend(r.values.iter().cloned());
            }
            for it in &t.types {
                if let Some(r) = it.requirements.get_ref(key) {
                    let merged = match t.requirements.get_ref(key) {
                        Some(tr) => tr.intersect(r),
                        None => r.clone(),
                    };
                    if !merged.complement {
                        set.extend(merged.values.iter().cloned());
                    }
                }
            }
        }
        cache.insert(key.to_string(), set.clone());
        set
    }
}

/// Owned for a one-off solve, borrowed from a [`Prepared`] when many solves share it.
enum Shared<'a, T> {
    Owned(Box<T>),
    Borrowed(&'a T),
}

impl<T> std::ops::Deref for Shared<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        match self {
            Shared::Owned(b) => b,
            Shared::Borrowed(r) => r,
        }
    }
}

/// What a solve derives from its input before knowing the pods: the NodePool templates with their instance types,
/// the limits left, and the existing nodes with what their bound pods already use. Built once per snapshot and
/// shared by every consolidation simulation over it (upstream rebuilds all of this per candidate).
pub struct Prepared {
    fixed: Fixed,
    remaining: BTreeMap<String, BTreeMap<String, i64>>,
    nodes: Vec<SimNode>,
    /// Per node, in `nodes` order: its NodePool and capacity as counted in that pool's usage.
    node_usage: Vec<(Option<String>, Resources)>,
    /// (name, position in `nodes`), sorted: where the nodes a simulation removes are.
    by_name: Vec<(Arc<str>, usize)>,
}

impl Prepared {
    pub fn new(input: &Input<'_>) -> Prepared {
        // NodePools in weight order (desc), ties by name desc.
        let mut pools: Vec<&NodePool> = input
            .nodepools
            .iter()
            .filter(|p| p.spec.replicas.is_none() && !p.is_deleting() && !p.is_not_ready())
            .collect();
        pools.sort_by(|a, b| b.weight().cmp(&a.weight()).then_with(|| b.name().cmp(a.name())));
        let mut templates = Vec::new();
        let mut unusable = Vec::new();
        for pool in pools {
            let types = input.instance_types.get(pool.name()).map(Vec::as_slice).unwrap_or(&[]);
            match Template::new(pool, types, input.daemonsets, input.policy) {
                Ok(t) => templates.push(t),
                Err(TemplateProblem::NoInstanceTypes) => {
                    unusable.push((pool.name().to_string(), PoolRejection::NoInstanceTypes));
                }
                Err(TemplateProblem::Invalid(s)) => {
                    unusable.push((pool.name().to_string(), PoolRejection::Other(format!("invalid NodePool: {s}"))));
                }
            }
        }
        let prefer_no_schedule_step = templates.iter().any(|t| t.has_prefer_no_schedule);

        // Limits: remaining = limits − usage.
        let mut remaining = BTreeMap::new();
        for t in &templates {
            if let Some(limits) = &t.limits {
                let usage = input.nodepool_usage.get(&t.nodepool).cloned().unwrap_or_default();
                let rem: BTreeMap<String, i64> = limits
                    .iter()
                    .map(|(k, v)| {
                        let used = if k == "nodes" { usage.get("nodes") } else { usage.get(k) };
                        (k.clone(), v - used)
                    })
                    .collect();
                remaining.insert(t.nodepool.clone(), rem);
            }
        }

        // Requests already on existing nodes.
        let mut used: rustc_hash::FxHashMap<&str, (Resources, Vec<HostPort>, BTreeSet<&str>)> = Default::default();
        // Volumes count only on nodes with attach limits; most clusters' bound pods are never looked up.
        let limited: BTreeSet<&str> =
            input.nodes.iter().filter(|n| !n.volume_limits.is_empty()).map(|n| n.name.as_str()).collect();
        let mut attached: BTreeMap<&str, Vec<Attachment>> = BTreeMap::new();
        for (p, node) in input.bound_pods {
            let e = used.entry(node.as_str()).or_default();
            e.0.add(&p.requests);
            e.1.extend(p.host_ports.iter().cloned());
            if let Some(ds) = &p.daemonset {
                e.2.insert(ds.as_str());
            }
            if !p.pvcs.is_empty() && limited.contains(node.as_str()) {
                let a = input.volumes.attachments(p);
                volumes::attach(attached.entry(node.as_str()).or_default(), &a);
            }
        }
        let mut existing: Vec<&ExistingNode> = input.nodes.iter().collect();
        existing.sort_by(|a, b| b.initialized.cmp(&a.initialized).then_with(|| a.name.cmp(&b.name)));
        let mut nodes = Vec::new();
        let mut node_usage = Vec::new();
        for n in existing {
            let requirements = n
                .requirements
                .clone()
                .unwrap_or_else(|| Arc::new(ExistingNode::label_requirements(&n.name, &n.labels)));
            let taints: Vec<Taint> = if n.managed && !n.initialized {
                n.taints
                    .iter()
                    .filter(|t| {
                        !taints::is_known_ephemeral(t)
                            && !n.startup_taints.iter().any(|s| s.key == t.key && s.effect == t.effect)
                    })
                    .cloned()
                    .collect()
            } else {
                n.taints.clone()
            };
            let (pod_requests, ports, running_ds) = used.get(n.name.as_str()).cloned().unwrap_or_default();
            let mut remaining_res = n.allocatable.minus(&pod_requests);
            // Daemons that will run here but haven't started yet still need room.
            for ds in input.daemonsets {
                let name = ds.daemonset.as_deref().unwrap_or("");
                if running_ds.contains(name) {
                    continue;
                }
                if taints::first_untolerated(&n.taints, &ds.tolerations, true).is_none()
                    && requirements.admits(&ds.strict_requirements(), None)
                {
                    remaining_res = remaining_res.minus(&ds.requests);
                }
            }
            nodes.push(SimNode {
                name: Arc::from(n.name.as_str()),
                base: nodes.len(),
                hostname_id: None,
                domain_ids: Vec::new(),
                requirements,
                taints: taints.into(),
                remaining: remaining_res,
                host_ports: ports,
                volume_limits: n.volume_limits.clone(),
                volumes: attached.remove(n.name.as_str()).unwrap_or_default(),
                pods: Vec::new(),
            });
            node_usage.push((n.nodepool.clone(), n.capacity.clone()));
        }
        let node_compat = NodeCompat::new(nodes.iter().map(|n| n.requirements.clone()).collect());
        // What topology set-up needs of the bound pods, found once per preparation instead of a scan of every
        // bound pod in every consolidation simulation: the keys their terms use (and the nodes they are on), and
        // the owners of required anti-affinity.
        let mut bound_anti = Vec::new();
        let mut bound_keys: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (i, (p, node)) in input.bound_pods.iter().enumerate() {
            if !p.anti_affinity.is_empty() {
                bound_anti.push(i);
            }
            for key in p.topology_keys() {
                if let Some(nodes) = bound_keys.get_mut(key) {
                    if !nodes.contains(node) {
                        nodes.insert(node.clone());
                    }
                } else {
                    bound_keys.insert(key.clone(), BTreeSet::from([node.clone()]));
                }
            }
        }
        let reservations = reservations::starting_capacity(&templates);
        let counts_volumes =
            templates.iter().any(|t| t.has_volume_limits) || nodes.iter().any(|n| !n.volume_limits.is_empty());
        let fixed = Fixed {
            counts_volumes,
            templates,
            unusable,
            prefer_no_schedule_step,
            node_compat,
            domains: Default::default(),
            bound_anti,
            bound_keys,
            bound_tally: BoundTally::default(),
            reservations,
        };
        let mut by_name: Vec<(Arc<str>, usize)> = nodes.iter().enumerate().map(|(i, n)| (n.name.clone(), i)).collect();
        by_name.sort();
        Prepared { fixed, remaining, nodes, node_usage, by_name }
    }
}

/// Nodes per block of [`Scheduler::room`].
const ROOM_BLOCK: usize = 32;

/// The elementwise maximum `remaining` over the nodes of block `b` that are not gone (an upper bound of each).
fn block_room(nodes: &[SimNode], gone: &[bool], b: usize) -> Resources {
    let mut room = Resources::default();
    let start = b * ROOM_BLOCK;
    for (n, node) in nodes.iter().enumerate().skip(start).take(ROOM_BLOCK) {
        if !gone.get(n).copied().unwrap_or(false) {
            room.max_with(&node.remaining);
        }
    }
    room
}

/// The scheduler for one solve.
pub struct Scheduler<'a> {
    input: &'a Input<'a>,
    fixed: Shared<'a, Fixed>,
    /// Existing nodes in preparation order. Borrowed from a shared preparation until a pod is placed on one:
    /// most consolidation simulations place none, and copying every node for each of them was a large part of
    /// a pass.
    nodes: Cow<'a, [SimNode]>,
    /// `gone[n]`: node `n` is removed in this simulation and takes no pods (empty: none is).
    gone: Vec<bool>,
    /// Per block of [`ROOM_BLOCK`] nodes: elementwise at least the `remaining` of every node of the block that is
    /// not gone. A pod that does not fit in it fits on none of those nodes, so the scan skips the block: in a
    /// packed cluster most pods of a consolidation simulation would otherwise try every node.
    room: Vec<Resources>,
    claims: Vec<SimClaim>,
    /// (pod count, creation index) of each claim, the order they are tried in.
    claim_order: BTreeSet<(usize, usize)>,
    /// For each hostname anti-affinity group: the claims (in `claim_order` order) where it counts no pod yet.
    /// A pod bound by such a group scans only these; every other claim would reject it.
    zero_sets: BTreeMap<usize, BTreeSet<(usize, usize)>>,
    /// For each non-hostname topology key some group uses: the claims by their single domain on that key, and
    /// those not yet narrowed to one. A pod whose constraint allows only some domains scans only those claims.
    partitions: BTreeMap<usize, KeyPartition>,
    topology: Topology,
    remaining: BTreeMap<String, BTreeMap<String, i64>>,
    next_hostname: usize,
    volume_alternatives: Vec<Vec<Requirements>>,
    /// Per pod, the volumes it attaches through CSI drivers (see [`VolumeIndex::attachments`]).
    volume_usage: Vec<Vec<Attachment>>,
    /// Consolidation simulations: pods from this index on are being moved off candidates, and may not land on the
    /// nodes marked here (by position in `nodes`).
    settling: Option<(usize, Vec<bool>)>,
    /// The capacity reservations claims hold in this solve.
    reservations: reservations::Reservations,
    /// The nodes still worth trying per class of interchangeable pods (see [`ClassScans`]), and the class of the
    /// pod being tried (set per pod by `run_queue`; `None`: try every node).
    class_scans: ClassScans,
    scan_class: Option<usize>,
}

const WELL_KNOWN_HELPER_KEYS: [&str; 3] = [labels::HOSTNAME, labels::REGISTERED, labels::INITIALIZED];

/// What an existing node says to a pod (see [`Scheduler::node_verdict`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NodeVerdict {
    Takes,
    /// Not in this solve: it only gets fuller.
    Never,
    /// Not now, for a topology constraint that may allow it later.
    NotNow,
}

/// Whether every check of the pod against an existing node can only turn from pass to fail as the solve places
/// pods: besides room, host ports, taints and volumes, its hostname anti-affinity counts only grow. Spread and
/// affinity terms are not like that (a node refused for skew may be allowed later).
fn node_checks_only_tighten(p: &PodData) -> bool {
    p.spreads.is_empty() && p.affinity.is_empty() && p.anti_affinity.iter().all(|t| t.key == labels::HOSTNAME)
}

/// Per class of interchangeable pods ([`cost::same_class`]) without preferences, the existing nodes still worth
/// trying: a node that refused one of them for good ([`NodeVerdict::Never`], or any refusal when the class's
/// checks only tighten) refuses the rest of them, so they skip it and the first fit is unchanged. In a pass over
/// thousands of in-flight NodeClaims, each pod of a Deployment otherwise re-tries every claim the ones before it
/// filled.
#[derive(Default)]
struct ClassScans {
    /// (class hash, moved by consolidation) → indexes into `scans`.
    by_class: rustc_hash::FxHashMap<(u64, bool), Vec<usize>>,
    scans: Vec<ClassScan>,
}

struct ClassScan {
    /// A pod of the class, to compare others with.
    pod: usize,
    tighten_only: bool,
    /// Bit `n`: node `n` may take a pod of the class. Made when the class first scans.
    live: Option<Bitset>,
}

impl ClassScans {
    fn class_of(&mut self, pods: &[Arc<PodData>], i: usize, moved: bool) -> usize {
        let p = &pods[i];
        let ids = self.by_class.entry((cost::class_hash(p), moved)).or_default();
        if let Some(&k) = ids.iter().find(|&&k| cost::same_class(&pods[self.scans[k].pod], p)) {
            return k;
        }
        self.scans.push(ClassScan { pod: i, tighten_only: node_checks_only_tighten(p), live: None });
        ids.push(self.scans.len() - 1);
        self.scans.len() - 1
    }
}

impl<'a> Scheduler<'a> {
    /// Prepares the templates, nodes and topology for solving `pods`.
    pub fn new(input: &'a Input<'a>, pods: &[Arc<PodData>]) -> Scheduler<'a> {
        let Prepared { fixed, remaining, nodes, .. } = Prepared::new(input);
        let fixed = Shared::Owned(Box::new(fixed));
        Scheduler::assemble(input, fixed, remaining, Cow::Owned(nodes), Vec::new(), pods, &BTreeSet::new())
    }

    /// A solve over a shared preparation, as if the nodes in `excluded` (and the pods bound to them) were gone:
    /// the consolidation simulation "what if these nodes were removed". Their capacity no longer counts against
    /// their NodePool's limits.
    pub fn with_prepared(
        input: &'a Input<'a>,
        prepared: &'a Prepared,
        pods: &[Arc<PodData>],
        excluded: &BTreeSet<String>,
    ) -> Scheduler<'a> {
        let mut remaining = prepared.remaining.clone();
        let mut gone = vec![false; prepared.nodes.len()];
        for name in excluded {
            let from = prepared.by_name.partition_point(|(n, _)| **n < **name);
            for (_, i) in prepared.by_name[from..].iter().take_while(|(n, _)| **n == **name) {
                gone[*i] = true;
                let (pool, capacity) = &prepared.node_usage[*i];
                if let Some(rem) = pool.as_ref().and_then(|p| remaining.get_mut(p)) {
                    for (k, v) in rem.iter_mut() {
                        *v += if k == "nodes" { 1 } else { capacity.get(k) };
                    }
                }
            }
        }
        let nodes = Cow::Borrowed(prepared.nodes.as_slice());
        Scheduler::assemble(input, Shared::Borrowed(&prepared.fixed), remaining, nodes, gone, pods, excluded)
    }

    /// Consolidation simulation mode: pods at index `first_moved` and after are being moved off the candidates and
    /// may not land on `settling` nodes (still inside their consolidateAfter window); pods before it (pending, or
    /// from nodes already deleting) may.
    pub fn keep_moved_pods_off(mut self, settling: &BTreeSet<String>, first_moved: usize) -> Self {
        if !settling.is_empty() {
            self.settling = Some((first_moved, self.nodes.iter().map(|n| settling.contains(&*n.name)).collect()));
        }
        self
    }

    fn assemble(
        input: &'a Input<'a>,
        fixed: Shared<'a, Fixed>,
        remaining: BTreeMap<String, BTreeMap<String, i64>>,
        mut nodes: Cow<'a, [SimNode]>,
        gone: Vec<bool>,
        pods: &[Arc<PodData>],
        excluded: &BTreeSet<String>,
    ) -> Scheduler<'a> {
        let is_gone = |n: usize| gone.get(n).copied().unwrap_or(false);
        let counted = |node: &str| excluded.is_empty() || !excluded.contains(node);
        // Topology: the domains each key may take, from templates × types and existing nodes.
        let mut keys: BTreeSet<String> = BTreeSet::new();
        for key in pods.iter().flat_map(|p| p.topology_keys()) {
            // Most pods name keys already seen: copy a key only the first time.
            if !keys.contains(key) {
                keys.insert(key.clone());
            }
        }
        for (key, on) in &fixed.bound_keys {
            if !keys.contains(key) && on.iter().any(|n| counted(n)) {
                keys.insert(key.clone());
            }
        }
        let mut universe: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for key in &keys {
            let mut set = fixed.template_domains(key);
            for n in nodes.iter().enumerate().filter(|(i, _)| !is_gone(*i)).map(|(_, n)| n) {
                if let Some(r) = n.requirements.get_ref(key) {
                    set.extend(r.values.iter().cloned());
                }
            }
            universe.insert(key.clone(), set);
        }
        let mut topology = Topology::new(universe, input.policy.clone());
        topology.add_pods(pods);
        // Only pods with terms can have anti-affinity.
        let needs_bound = topology.has_groups() || fixed.bound_anti.iter().any(|&i| counted(&input.bound_pods[i].1));
        if needs_bound {
            topology.count_bound(&fixed.bound_tally, input.bound_pods, input.node_labels, &fixed.bound_anti, excluded);
        }
        if topology.has_groups() {
            for n in nodes.to_mut().iter_mut().enumerate().filter(|(i, _)| !is_gone(*i)).map(|(_, n)| n) {
                if let Some(h) = n.requirements.get_ref(labels::HOSTNAME).and_then(|r| r.any()).map(str::to_string) {
                    n.hostname_id = Some(topology.register(labels::HOSTNAME, &h));
                }
                n.domain_ids = topology.domain_ids(&n.requirements);
            }
        }

        let room = (0..nodes.len().div_ceil(ROOM_BLOCK)).map(|b| block_room(&nodes, &gone, b)).collect();
        let volume_alternatives = pods.iter().map(|p| input.volumes.alternatives(p).unwrap_or_default()).collect();
        let volume_usage = pods
            .iter()
            .map(|p| if !fixed.counts_volumes || p.pvcs.is_empty() { Vec::new() } else { input.volumes.attachments(p) })
            .collect();
        let reservations = reservations::Reservations::new(&fixed.reservations, !input.options.reserved_fallback);
        Scheduler {
            input,
            fixed,
            nodes,
            gone,
            room,
            claims: Vec::new(),
            claim_order: BTreeSet::new(),
            zero_sets: BTreeMap::new(),
            partitions: BTreeMap::new(),
            topology,
            remaining,
            next_hostname: 0,
            volume_alternatives,
            volume_usage,
            settling: None,
            reservations,
            class_scans: ClassScans::default(),
            scan_class: None,
        }
    }

    /// Solves: every pod placed somewhere, or failed with reasons. `pods` must be the slice given to `new`.
    pub fn solve(mut self, pods: &[Arc<PodData>]) -> Results {
        if self.input.options.packing == Packing::Cost {
            return self.solve_cost(pods);
        }
        let mut results = Results::default();
        let queue = self.queue(pods, &mut results);
        self.run_queue(pods, queue, &mut results);
        self.finalize(&mut results);
        results
    }

    /// The pods to place in queue order (CPU desc, memory desc, creation, uid); pods whose volumes can't be
    /// resolved are set aside as ignored.
    fn queue(&self, pods: &[Arc<PodData>], results: &mut Results) -> Vec<usize> {
        let mut queue: Vec<usize> = Vec::with_capacity(pods.len());
        for (i, p) in pods.iter().enumerate() {
            // Upstream's `add` refuses these before trying any node, and never relaxes the error.
            if p.dra {
                results.failures.push(PodFailure { pod: i, reasons: vec![(String::new(), PoolRejection::Dra)] });
                continue;
            }
            match self.input.volumes.alternatives(p) {
                Ok(_) => queue.push(i),
                Err(detail) => results.ignored.push((i, PodIgnored::Volume { detail })),
            }
        }
        queue.sort_by(|&a, &b| {
            let (pa, pb) = (&pods[a], &pods[b]);
            pb.requests
                .cpu
                .cmp(&pa.requests.cpu)
                .then_with(|| pb.requests.memory.cmp(&pa.requests.memory))
                .then_with(|| pa.created.cmp(&pb.created))
                .then_with(|| pa.uid.cmp(&pb.uid))
        });
        queue
    }

    /// Upstream's loop: each pod in turn, a failed one retried after the others until a full cycle places none.
    fn run_queue(&mut self, pods: &[Arc<PodData>], queue: Vec<usize>, results: &mut Results) {
        let mut queue: VecDeque<usize> = queue.into();
        let mut last_len: Vec<usize> = vec![usize::MAX; pods.len()];
        let mut errors: BTreeMap<usize, Vec<(String, PoolRejection)>> = BTreeMap::new();
        while let Some(&i) = queue.front() {
            // A full cycle without progress: stop.
            if last_len[i] == queue.len() {
                break;
            }
            queue.pop_front();
            // A pod with preferences is tried as relaxed copies, other pods than its class.
            let classed = self.input.options.scan_indexes
                && !self.nodes.is_empty()
                && !self.fixed.prefer_no_schedule_step
                && !pods[i].has_preferences();
            // Consolidation's moved pods may not use some nodes that earlier pods could: a class is kept per side.
            let moved = self.settling.as_ref().is_some_and(|(first, _)| i >= *first);
            self.scan_class = classed.then(|| self.class_scans.class_of(pods, i, moved));
            let outcome = self.try_schedule(i, &pods[i]);
            self.scan_class = None;
            match outcome {
                Ok(()) => {
                    errors.remove(&i);
                }
                Err(reasons) => {
                    errors.insert(i, reasons);
                    queue.push_back(i);
                    last_len[i] = queue.len();
                }
            }
        }
        for (i, reasons) in errors {
            results.failures.push(PodFailure { pod: i, reasons });
        }
    }

    fn try_schedule(&mut self, i: usize, original: &PodData) -> Result<(), Vec<(String, PoolRejection)>> {
        let ignore = self.input.options.ignore_preferences;
        // Most pods have nothing to relax: try them as they are, without a copy.
        if !original.has_preferences() && !self.fixed.prefer_no_schedule_step {
            return self.add(i, original);
        }
        if ignore && !original.has_preferences() {
            return self.add(i, original);
        }
        let mut pod = original.clone();
        if ignore {
            pod.preferred_affinity.clear();
            pod.preferred_anti_affinity.clear();
            pod.preferred_terms.clear();
            pod.spreads.retain(|s| s.required);
        }
        loop {
            match self.add(i, &pod) {
                Ok(()) => return Ok(()),
                Err(e) => {
                    // A reservation error is never relaxed: the pod waits for the next pass.
                    let reserved = e.iter().any(|(_, r)| matches!(r, PoolRejection::ReservedOffering { .. }));
                    if reserved
                        || self.input.options.ignore_preferences
                        || pod.relax(self.fixed.prefer_no_schedule_step).is_none()
                    {
                        return Err(e);
                    }
                }
            }
        }
    }

    fn add(&mut self, i: usize, pod: &PodData) -> Result<(), Vec<(String, PoolRejection)>> {
        let strict = pod.strict_requirements();
        let reqs = pod.requirements();
        let group_ids = self.topology.constraints_for(pod);
        let groups = self.topology.prepare(pod, &group_ids, &strict);

        // 1. Existing nodes, in order.
        if self.place_on_nodes(i, pod, &reqs, &groups) {
            return Ok(());
        }

        // 2. NodeClaims created earlier in this solve, fewest pods first.
        let mut found: Option<((usize, usize), Candidate)> = None;
        // Same order, same first fit, fewer candidates: when a topology constraint rules most claims out, scan
        // only the claims it can allow.
        let mut sets: Vec<&BTreeSet<(usize, usize)>> = vec![&self.claim_order];
        let mut size = self.claim_order.len();
        let indexes = self.input.options.scan_indexes;
        if indexes
            && let Some(g) = self.topology.zero_filter_group(&groups)
            && let Some(z) = self.zero_sets.get(&g)
            && z.len() < size
        {
            sets = vec![z];
            size = z.len();
        }
        for cx in groups.iter().filter(|_| indexes) {
            let (Some(part), Some(domains)) =
                (self.partitions.get(&self.topology.key_of(cx)), self.topology.allowed_domains(cx))
            else {
                continue;
            };
            let mut s: Vec<&BTreeSet<(usize, usize)>> = vec![&part.open];
            s.extend(domains.iter().filter_map(|d| part.by_domain.get(d)));
            let n: usize = s.iter().map(|x| x.len()).sum();
            if n < size {
                sets = s;
                size = n;
            }
        }
        for (count, c) in merged(&sets) {
            if let Ok(cand) = self.can_add_to_claim(c, i, pod, &reqs, &groups, false) {
                found = Some(((count, c), cand));
                break;
            }
        }
        if let Some(((_, c), cand)) = found {
            self.grow_claim(c, i, pod, cand);
            return Ok(());
        }

        // 3. A new NodeClaim from each template, in weight order.
        let mut reasons: Vec<(String, PoolRejection)> = Vec::new();
        for t in 0..self.fixed.templates.len() {
            match self.open_claim(t, i, pod, &reqs, &groups, None, true) {
                Ok(_) => return Ok(()),
                Err(r) => {
                    // Waiting for a held reservation also bars lower-weight NodePools (upstream's strict mode).
                    let reserved = matches!(r, PoolRejection::ReservedOffering { .. });
                    reasons.push((self.fixed.templates[t].nodepool.clone(), r));
                    if reserved {
                        return Err(reasons);
                    }
                }
            }
        }
        reasons.extend(self.fixed.unusable.iter().cloned());
        Err(reasons)
    }

    /// Opens a NodeClaim from template `t` for pod `i`, its options cut to `cap` when given (cost packing's size
    /// limit), and places the pod on it. Returns the claim's index, or why the template can't take the pod. With
    /// `commit` false it only answers: nothing is kept.
    #[allow(clippy::too_many_arguments)]
    fn open_claim(
        &mut self,
        t: usize,
        i: usize,
        pod: &PodData,
        reqs: &Requirements,
        groups: &[topology::GroupCtx],
        cap: Option<&Bitset>,
        commit: bool,
    ) -> Result<usize, PoolRejection> {
        let tpl = &self.fixed.templates[t];
        let mut types = match cap {
            Some(c) => c.clone(),
            None => Bitset::full(tpl.types.len()),
        };
        let mut limited_by: Option<(String, i64)> = None;
        if let Some(rem) = self.remaining.get(&tpl.nodepool) {
            if let Some(&n) = rem.get("nodes")
                && n <= 0
            {
                return Err(PoolRejection::LimitsExhausted {
                    resource: "nodes".into(),
                    limit: tpl.limits.as_ref().and_then(|l| l.get("nodes").copied()).unwrap_or(0),
                    remaining: n,
                });
            }
            let mut exhausted: Option<(String, i64)> = None;
            for (ti, it) in tpl.types.iter().enumerate() {
                if let Some((k, v)) = rem.iter().find(|(k, v)| k.as_str() != "nodes" && it.capacity.get(k) > **v) {
                    types.clear(ti);
                    exhausted.get_or_insert((k.clone(), *v));
                }
            }
            limited_by = exhausted.clone();
            if types.is_empty() {
                let (resource, left) = exhausted.unwrap_or_default();
                let limit = tpl.limits.as_ref().and_then(|l| l.get(&resource).copied()).unwrap_or(0);
                return Err(PoolRejection::LimitsExhausted { resource, limit, remaining: left });
            }
        }
        let hostname = format!("hostname-placeholder-{:04}", self.next_hostname);
        let requirements = tpl.new_claim_requirements(&hostname);
        let req_bits = tpl.claim_types(&requirements);
        let max_alloc = tpl.open_allocatable(&types);
        let hostname_id = self.topology.register(labels::HOSTNAME, &hostname);
        let domain_ids = self.topology.domain_ids(&requirements);
        self.claims.push(SimClaim {
            template: t,
            hostname: hostname.clone(),
            hostname_id,
            domain_ids,
            max_alloc_types: types.count(),
            max_alloc,
            requirements,
            types,
            req_bits,
            requests: Resources::default(),
            host_ports: Vec::new(),
            volumes: Vec::new(),
            pods: Vec::new(),
            min_values_relaxed: false,
            as_template: true,
        });
        let c = self.claims.len() - 1;
        match self.can_add_to_claim(c, i, pod, reqs, groups, true) {
            Ok(_) if !commit => {
                self.claims.pop();
                self.topology.unregister(labels::HOSTNAME, &hostname);
                Ok(c)
            }
            Ok(cand) => {
                self.next_hostname += 1;
                self.commit_claim(c, i, pod, cand);
                self.update_indexes(c, None, 1);
                // Pessimistic: the claim may launch its largest option.
                if let Some(rem) = self.remaining.get_mut(&self.fixed.templates[t].nodepool) {
                    let tpl = &self.fixed.templates[t];
                    let mut max = Resources::default();
                    for ti in self.claims[c].types.iter() {
                        max.max_with(&tpl.types[ti].capacity);
                    }
                    for (k, v) in rem.iter_mut() {
                        *v -= if k == "nodes" { 1 } else { max.get(k) };
                    }
                }
                Ok(c)
            }
            Err(mut r) => {
                self.claims.pop();
                self.topology.unregister(labels::HOSTNAME, &hostname);
                if let PoolRejection::InstanceTypes(miss) = &mut r {
                    miss.limited_by = limited_by;
                }
                Err(r)
            }
        }
    }

    /// Places the pod on the first existing node that takes it (step 1 of `add`).
    fn place_on_nodes(&mut self, i: usize, pod: &PodData, reqs: &Requirements, groups: &[topology::GroupCtx]) -> bool {
        if self.nodes.is_empty() {
            return false;
        }
        if let Some(k) = self.scan_class {
            return self.place_on_live_nodes(k, i, pod, reqs, groups);
        }
        let admitted = self.fixed.node_compat.admitted(reqs);
        for b in 0..self.room.len() {
            // No node of the block has room for the pod.
            if !pod.requests.fits_in(&self.room[b]) {
                continue;
            }
            for n in b * ROOM_BLOCK..((b + 1) * ROOM_BLOCK).min(self.nodes.len()) {
                if !self.open_to(n, i) {
                    continue;
                }
                if self.can_add_to_node(n, i, pod, &admitted, groups) {
                    self.place_on_node(n, i, pod);
                    return true;
                }
            }
        }
        false
    }

    /// [`Scheduler::place_on_nodes`] over the nodes class `k` may still take (the same first fit: the nodes left
    /// out refuse the pod).
    fn place_on_live_nodes(
        &mut self,
        k: usize,
        i: usize,
        pod: &PodData,
        reqs: &Requirements,
        groups: &[topology::GroupCtx],
    ) -> bool {
        let tighten_only = self.class_scans.scans[k].tighten_only;
        // The class's requirements are its first pod's: which nodes admit them is asked once, when it first scans.
        let mut live = match self.class_scans.scans[k].live.take() {
            Some(live) => live,
            None => {
                let admitted = self.fixed.node_compat.admitted(reqs);
                let mut live = Bitset::empty(self.nodes.len());
                for (n, node) in self.nodes.iter().enumerate() {
                    if admitted.get(node.base) && self.open_to(n, i) {
                        live.set(n);
                    }
                }
                live
            }
        };
        let mut placed = false;
        'words: for w in 0..live.words().len() {
            let mut bits = live.words()[w];
            while bits != 0 {
                let n = w * 64 + bits.trailing_zeros() as usize;
                bits &= bits - 1;
                match self.node_verdict(n, i, pod, groups) {
                    NodeVerdict::Takes => {
                        self.place_on_node(n, i, pod);
                        placed = true;
                        break 'words;
                    }
                    NodeVerdict::Never => live.clear(n),
                    NodeVerdict::NotNow if tighten_only => live.clear(n),
                    NodeVerdict::NotNow => {}
                }
            }
        }
        self.class_scans.scans[k].live = Some(live);
        placed
    }

    /// Node `n` is in this simulation and not off limits to pod `i` (a pod consolidation moves).
    fn open_to(&self, n: usize, i: usize) -> bool {
        let off_limits = self.settling.as_ref().is_some_and(|(first, s)| i >= *first && s[n]);
        !off_limits && !self.gone.get(n).copied().unwrap_or(false)
    }

    /// Places pod `i` on existing node `n` (already checked).
    fn place_on_node(&mut self, n: usize, i: usize, pod: &PodData) {
        let node = &mut self.nodes.to_mut()[n];
        node.remaining = node.remaining.minus(&pod.requests);
        node.host_ports.extend(pod.host_ports.iter().cloned());
        if !node.volume_limits.is_empty() {
            volumes::attach(&mut node.volumes, &self.volume_usage[i]);
        }
        node.pods.push(i);
        // Shared handles, not copies: the topology only reads them.
        let (node_reqs, taints) = (node.requirements.clone(), node.taints.clone());
        self.topology.record(pod, &node_reqs, &taints);
        let b = n / ROOM_BLOCK;
        self.room[b] = block_room(&self.nodes, &self.gone, b);
    }

    /// Places pod `i` on claim `c` (already checked: `cand`), keeping the scan order and indexes in step.
    fn grow_claim(&mut self, c: usize, i: usize, pod: &PodData, cand: Candidate) {
        let count = self.claims[c].pods.len();
        let old_ids = self.claims[c].domain_ids.clone();
        self.commit_claim(c, i, pod, cand);
        self.update_indexes(c, Some((count, &old_ids)), count + 1);
    }

    /// Adds as many of `run` (interchangeable pods: same requests and constraints, in placement order) to claim `c`
    /// as take it one after the other, in one step: how many went, `None` when the pods' checks are not the same
    /// whatever the claim holds (then the caller adds them one by one through [`Scheduler::can_add_to_claim`]).
    ///
    /// For pods without topology terms, host ports, volume topology or reserved offerings, and whose requirements
    /// the claim's already imply, each pod's check only narrows the claim's types to those still holding the sum
    /// of requests, and the minValues over them; both are monotone in the sum, so the first pod one-by-one would
    /// reject is the first the largest run that passes leaves out, and the claim ends in the same state.
    fn grow_claim_run(&mut self, c: usize, run: &[usize], pods: &[Arc<PodData>], reqs: &Requirements) -> Option<usize> {
        let &first = run.first()?;
        let pod = &pods[first];
        let claim = &self.claims[c];
        let tpl = &self.fixed.templates[claim.template];
        if self.reservations.any()
            || !pod.host_ports.is_empty()
            || self.tolerates_template(pod, claim.template).is_err()
            || run.iter().any(|&i| self.volumes_narrow(i))
            || tpl.has_volume_limits && run.iter().any(|&i| !self.volume_usage[i].is_empty())
        {
            return None;
        }
        if !reqs.is_empty() {
            claim.requirements.compatible(reqs, Some(self.input.policy)).ok()?;
            if claim.requirements.intersected(reqs) != claim.requirements {
                return None;
            }
        }
        // The claim's types and minValues outcome with `n` more pods, if they hold them.
        let with = |n: usize| -> Option<(Bitset, bool)> {
            let mut total = claim.requests.clone();
            for _ in 0..n {
                total.add(&pod.requests);
            }
            let survivors = tpl.surviving_types(&claim.types, &claim.req_bits, &total, &[])?;
            let relaxed = self.min_values_relaxed(tpl, &claim.requirements, || survivors.iter(), &[]).ok()?;
            Some((survivors, relaxed))
        };
        // The largest n that passes: all of them, usually.
        let (mut lo, mut hi, mut best) = (0usize, run.len(), None);
        match with(hi) {
            Some(r) => {
                lo = hi;
                best = Some(r);
            }
            None => hi -= 1,
        }
        while lo < hi {
            let mid = (lo + hi).div_ceil(2);
            match with(mid) {
                Some(r) => {
                    lo = mid;
                    best = Some(r);
                }
                None => hi = mid - 1,
            }
        }
        let Some((survivors, relaxed)) = best else { return Some(0) };
        let taken = &run[..lo];
        let count = claim.pods.len();
        let old_ids = claim.domain_ids.clone();
        let claim = &mut self.claims[c];
        claim.narrow_to(&self.fixed.templates[claim.template], survivors);
        claim.min_values_relaxed |= relaxed;
        for &i in taken {
            claim.requests.add(&pods[i].requests);
            claim.pods.push(i);
        }
        let claim = &self.claims[c];
        for &i in taken {
            self.topology.record(&pods[i], &claim.requirements, &self.fixed.templates[claim.template].taints);
        }
        self.update_indexes(c, Some((count, &old_ids)), count + taken.len());
        Some(taken.len())
    }

    fn can_add_to_node(
        &self,
        n: usize,
        i: usize,
        pod: &PodData,
        admitted: &Bitset,
        groups: &[topology::GroupCtx],
    ) -> bool {
        admitted.get(self.nodes[n].base) && self.node_verdict(n, i, pod, groups) == NodeVerdict::Takes
    }

    /// Whether existing node `n` takes pod `i` now, its requirements aside (`admitted`); if not, whether it may
    /// later in this solve.
    fn node_verdict(&self, n: usize, i: usize, pod: &PodData, groups: &[topology::GroupCtx]) -> NodeVerdict {
        let node = &self.nodes[n];
        // Every check must pass; the cheap ones go first. Room only shrinks and host ports only add up, while
        // taints and volumes are the node's own: a node refusing for those never takes the pod.
        if !pod.requests.fits_in(&node.remaining) {
            return NodeVerdict::Never;
        }
        if taints::first_untolerated(&node.taints, &pod.tolerations, pod.tolerate_prefer_no_schedule).is_some() {
            return NodeVerdict::Never;
        }
        if pod.host_ports.iter().any(|p| node.host_ports.iter().any(|q| p.conflicts(q))) {
            return NodeVerdict::Never;
        }
        let alts = &self.volume_alternatives[i];
        if !alts.is_empty() && !alts.iter().any(|a| node.requirements.admits(a, None)) {
            return NodeVerdict::Never;
        }
        // Attached volumes only add up within a solve.
        if !node.volume_limits.is_empty()
            && volumes::exceeded(&node.volumes, &self.volume_usage[i], |d| node.volume_limits.get(d).copied()).is_some()
        {
            return NodeVerdict::Never;
        }
        if let Some(h) = node.hostname_id
            && !self.topology.allows_on_hostname(groups, h)
        {
            return NodeVerdict::NotNow;
        }
        let ids = (!node.domain_ids.is_empty()).then_some(node.domain_ids.as_slice());
        match self.topology.add_requirements(groups, &node.requirements, ids) {
            Ok(Some(r)) if !node.requirements.admits(&r, None) => NodeVerdict::NotNow,
            Ok(_) => NodeVerdict::Takes,
            Err(_) => NodeVerdict::NotNow,
        }
    }

    /// Pod `i`'s volumes narrow where its NodeClaim may go (some volume is bound to a topology).
    fn volumes_narrow(&self, i: usize) -> bool {
        let alts = &self.volume_alternatives[i];
        !(alts.is_empty() || alts.len() == 1 && alts[0].is_empty())
    }

    fn tolerates_template(&self, pod: &PodData, t: usize) -> Result<(), String> {
        let tpl = &self.fixed.templates[t];
        match taints::first_untolerated(&tpl.taints, &pod.tolerations, pod.tolerate_prefer_no_schedule) {
            None => Ok(()),
            Some(taint) => Err(taints::taint_string(taint)),
        }
    }

    /// Whether the pod fits the claim. `explain` builds a detailed rejection; scans of existing claims skip it.
    #[allow(clippy::too_many_arguments)]
    fn can_add_to_claim(
        &self,
        c: usize,
        i: usize,
        pod: &PodData,
        reqs: &Requirements,
        groups: &[topology::GroupCtx],
        explain: bool,
    ) -> Result<Candidate, PoolRejection> {
        let claim = &self.claims[c];
        let tpl = &self.fixed.templates[claim.template];
        // Cheapest test first: even the largest remaining type can't take this pod.
        if !explain && !claim.requests.sum_fits_in(&pod.requests, &claim.max_alloc) {
            return Err(PoolRejection::Other(String::new()));
        }
        if !self.topology.allows_on_hostname(groups, claim.hostname_id) {
            if !explain {
                return Err(PoolRejection::Other(String::new()));
            }
            return Err(PoolRejection::Topology {
                detail: "pod anti-affinity or spread on kubernetes.io/hostname excludes this node".into(),
            });
        }
        if let Err(taint) = self.tolerates_template(pod, claim.template) {
            return Err(PoolRejection::TaintNotTolerated { taint });
        }
        if pod.host_ports.iter().any(|p| claim.host_ports.iter().any(|q| p.conflicts(q))) {
            return Err(PoolRejection::Other("host port conflict".into()));
        }
        // Requirements.
        let mut merged: Option<Requirements> = None;
        if !reqs.is_empty() {
            claim.requirements.compatible(reqs, Some(self.input.policy)).map_err(PoolRejection::Requirements)?;
            merged = Some(claim.requirements.intersected(reqs));
        }
        // Volume topology narrows the node only.
        if self.volumes_narrow(i) {
            let alts = &self.volume_alternatives[i];
            let base = merged.as_ref().unwrap_or(&claim.requirements);
            let chosen = alts.iter().find(|a| base.admits(a, Some(self.input.policy))).ok_or_else(|| {
                PoolRejection::VolumeTopology {
                    detail: "no topology of the pod's volumes is compatible with the NodePool".to_string(),
                }
            })?;
            merged = Some(base.intersected(chosen));
        }
        // Topology last: it may collapse a domain to one value.
        if !groups.is_empty() {
            let base = merged.as_ref().unwrap_or(&claim.requirements);
            // The cached ids describe the claim's own requirements only.
            let ids = merged.is_none().then_some(claim.domain_ids.as_slice());
            match self.topology.add_requirements(groups, base, ids) {
                Ok(Some(r)) => merged = Some(r),
                Ok(None) => {}
                Err(_) if !explain => return Err(PoolRejection::Other(String::new())),
                Err(e) => return Err(PoolRejection::Topology { detail: e.to_string() }),
            }
        }
        let changed = merged.as_ref().is_some_and(|m| *m != claim.requirements);
        let final_reqs = if changed { merged.as_ref() } else { None };
        let req_bits_owned;
        let req_bits = match final_reqs {
            Some(r) => {
                req_bits_owned = tpl.compatible_types(r).and(&tpl.offered_types(r));
                &req_bits_owned
            }
            None => &claim.req_bits,
        };
        let total = claim.requests.plus(&pod.requests);
        let Some(survivors) = tpl.surviving_types(&claim.types, req_bits, &total, &pod.host_ports) else {
            if !explain {
                return Err(PoolRejection::Other(String::new()));
            }
            return Err(PoolRejection::InstanceTypes(Box::new(self.miss(
                claim,
                final_reqs.unwrap_or(&claim.requirements),
                &total,
                &pod.host_ports,
            ))));
        };
        if tpl.has_volume_limits
            && !self.volume_usage[i].is_empty()
            && let Some(why) = volumes::exceeded(&claim.volumes, &self.volume_usage[i], |d| {
                volumes::options_limit(survivors.iter().map(|t| &*tpl.types[t]), d)
            })
        {
            return Err(PoolRejection::Other(why));
        }
        // minValues.
        let reqs_now = final_reqs.unwrap_or(&claim.requirements);
        let relaxed = self.min_values_relaxed(tpl, reqs_now, || survivors.iter(), &[])?;
        let reserve =
            if self.reservations.any() { Some(self.reservations.check(c, tpl, &survivors, reqs_now)?) } else { None };
        Ok(Candidate {
            requirements: if changed { merged } else { None },
            types: survivors,
            req_bits: if changed { Some(req_bits.clone()) } else { None },
            relaxed_min_values: relaxed,
            reserve,
        })
    }

    fn miss(&self, claim: &SimClaim, reqs: &Requirements, total: &Resources, ports: &[HostPort]) -> InstanceTypeMiss {
        let tpl = &self.fixed.templates[claim.template];
        let base = &claim.types;
        let r = tpl.compatible_types(reqs).and(base);
        let f = tpl.fitting_types(total, ports).and(base);
        let o = tpl.offered_types(reqs).and(base);
        // The compatible type with the most of the scarcest resource needed.
        let mut largest: Option<(String, Resources)> = None;
        // The scarcest resource: the one the best-provisioned compatible type covers the smallest share of.
        let scarce = {
            let mut best: Option<(&str, f64)> = None;
            for (k, need) in total.entries() {
                if need <= 0 {
                    continue;
                }
                let most = r.iter().map(|ti| tpl.allocatable[ti].get(k)).max().unwrap_or(0);
                let share = most as f64 / need as f64;
                if share < 1.0 && best.is_none_or(|(_, b)| share < b) {
                    best = Some((k, share));
                }
            }
            best.map(|(k, _)| k.to_string())
        };
        if let Some(k) = scarce {
            let mut best: Option<usize> = None;
            for ti in r.iter() {
                if best.is_none_or(|b| tpl.allocatable[ti].get(&k) > tpl.allocatable[b].get(&k)) {
                    best = Some(ti);
                }
            }
            if let Some(b) = best {
                largest = Some((tpl.types[b].name.clone(), tpl.allocatable[b].clone()));
            }
        }
        // A single requirement no remaining type satisfies makes the clearest sentence.
        let blocking_requirement = reqs
            .iter()
            .find(|(k, q)| tpl.key_bits(k, q).and(base).is_empty())
            .map(|(k, q)| (k.to_string(), q.to_string()));
        InstanceTypeMiss {
            blocking_requirement,
            requirements_ok: r.count(),
            resources_ok: f.count(),
            offering_ok: o.count(),
            requirements_and_resources: r.and(&f).count(),
            requirements_and_offering: r.and(&o).count(),
            resources_and_offering: f.and(&o).count(),
            needed: total.clone(),
            largest,
            limited_by: None,
            missing_resource: total
                .extended
                .iter()
                .find(|(k, v)| *v > 0 && r.iter().all(|ti| tpl.allocatable[ti].get(k) == 0))
                .map(|(k, _)| k.clone()),
            considered: base.count(),
        }
    }

    fn commit_claim(&mut self, c: usize, i: usize, pod: &PodData, cand: Candidate) {
        if let Some(ids) = cand.reserve {
            self.reservations.hold(c, ids);
        }
        let claim = &mut self.claims[c];
        if let Some(r) = cand.requirements {
            claim.requirements = r;
            claim.as_template = false;
            claim.domain_ids = self.topology.domain_ids(&claim.requirements);
        }
        if let Some(b) = cand.req_bits {
            claim.req_bits = b;
        }
        claim.narrow_to(&self.fixed.templates[claim.template], cand.types);
        claim.requests.add(&pod.requests);
        claim.host_ports.extend(pod.host_ports.iter().cloned());
        if self.fixed.templates[claim.template].has_volume_limits {
            volumes::attach(&mut claim.volumes, &self.volume_usage[i]);
        }
        claim.pods.push(i);
        claim.min_values_relaxed |= cand.relaxed_min_values;
        // Disjoint fields: no copy of the claim's requirements or the template's taints per pod.
        let claim = &self.claims[c];
        self.topology.record(pod, &claim.requirements, &self.fixed.templates[claim.template].taints);
    }

    /// Keeps the scan order and indexes in step with claim `c`, whose pod count went from `old` (with its domain
    /// ids then; `None` for a new claim) to `new`.
    fn update_indexes(&mut self, c: usize, old: Option<(usize, &[Option<u32>])>, new: usize) {
        if let Some((o, _)) = old {
            self.claim_order.remove(&(o, c));
        }
        self.claim_order.insert((new, c));
        let hid = self.claims[c].hostname_id;
        for g in self.topology.zero_filter_groups() {
            let zero = self.topology.count_of(g, hid) == 0;
            let set = self.zero_sets.entry(g).or_default();
            if let Some((o, _)) = old {
                set.remove(&(o, c));
            }
            if zero {
                set.insert((new, c));
            }
        }
        for k in self.topology.partition_keys() {
            let part = self.partitions.entry(k).or_default();
            if let Some((o, ids)) = old {
                match ids.get(k).copied().flatten() {
                    Some(d) => {
                        if let Some(s) = part.by_domain.get_mut(&d) {
                            s.remove(&(o, c));
                        }
                    }
                    None => {
                        part.open.remove(&(o, c));
                    }
                }
            }
            match self.claims[c].domain_ids.get(k).copied().flatten() {
                Some(d) => {
                    part.by_domain.entry(d).or_default().insert((new, c));
                }
                None => {
                    part.open.insert((new, c));
                }
            }
        }
    }

    fn finalize(&mut self, results: &mut Results) {
        for n in self.nodes.iter() {
            if !n.pods.is_empty() {
                results.existing.push(Placement { node: n.name.to_string(), pods: n.pods.clone() });
            }
        }
        let mut orders = PriceOrders::new(self.fixed.templates.len());
        // Claims no pod narrowed come out alike but for their pods and options (cost packing makes thousands):
        // per template, minValues outcome and capacity types, their shape is built once.
        let mut alike: Vec<Alike> = Vec::new();
        // Per template and minValues outcome (`2 * template + relaxed`). Thousands of option sets when claims were
        // capped at different sizes: a fast hash, sized up front (growing it rehashed every set again and again).
        let mut made_for: Vec<Option<rustc_hash::FxHashMap<Bitset, Result<Made, PoolRejection>>>> =
            vec![None; 2 * self.fixed.templates.len()];
        let claims = self.claims.len();
        results.new_claims.reserve(self.claims.len());
        // The claims' requirements and pods move into the results: nothing is copied or dropped per claim.
        for (c, mut claim) in std::mem::take(&mut self.claims).into_iter().enumerate() {
            let tpl = &self.fixed.templates[claim.template];
            if let Some(ids) = self.reservations.held_by(c) {
                // Pinned to what it holds, so the launch can't take more than was counted. Before the options are
                // cut to the cheapest, so the reserved ones are among them.
                claim.as_template = false;
                claim.requirements.set(labels::CAPACITY_TYPE, Requirement::in_values([labels::CAPACITY_RESERVED]));
                claim.requirements.set(
                    crate::engine::catalog::aws::CAPACITY_RESERVATION_ID,
                    Requirement::in_values(ids.iter().cloned()),
                );
                let offered = tpl.offered_types(&claim.requirements);
                claim.types = claim.types.and(&offered);
                if claim.types.is_empty() {
                    let why = PoolRejection::ReservedOffering {
                        detail: "no option of the NodeClaim launches into the capacity reservations it holds".into(),
                    };
                    for &p in &claim.pods {
                        results
                            .failures
                            .push(PodFailure { pod: p, reasons: vec![(tpl.nodepool.clone(), why.clone())] });
                    }
                    continue;
                }
            }
            // A claim no pod narrowed comes out as every other of its template with the same options and minValues
            // outcome: made once per option set.
            let made = if claim.as_template {
                let seen = made_for[2 * claim.template + usize::from(claim.min_values_relaxed)]
                    .get_or_insert_with(|| rustc_hash::FxHashMap::with_capacity_and_hasher(claims, Default::default()));
                match seen.get(&claim.types) {
                    Some(m) => m.clone(),
                    None => {
                        let m = self.make_claim(&mut orders, &mut alike, &claim);
                        seen.insert(std::mem::take(&mut claim.types), m.clone());
                        m
                    }
                }
            } else {
                self.make_claim(&mut orders, &mut alike, &claim)
            };
            match made {
                Ok(Made { shape, kept, overhead }) => {
                    // What its pods ask (`commit_claim` summed it as they were placed) and the daemons.
                    let mut requests = claim.requests;
                    requests.add(&overhead);
                    results.new_claims.push(NewNodeClaim {
                        shape,
                        instance_types: kept.iter().map(|&ti| tpl.types[ti].clone()).collect(),
                        hostname: claim.hostname,
                        pods: claim.pods,
                        requests,
                    });
                }
                Err(why) => {
                    for &p in &claim.pods {
                        results
                            .failures
                            .push(PodFailure { pod: p, reasons: vec![(tpl.nodepool.clone(), why.clone())] });
                    }
                }
            }
        }
        results.failures.sort_by_key(|f| f.pod);
    }

    /// Whether `reqs`' minValues (keys in `skip` aside) hold over `types`: `Ok(false)` if they do, `Ok(true)` if
    /// some doesn't and the policy is BestEffort, the first that doesn't under Strict.
    fn min_values_relaxed<I: Iterator<Item = usize>>(
        &self,
        tpl: &Template,
        reqs: &Requirements,
        types: impl Fn() -> I,
        skip: &[&str],
    ) -> Result<bool, PoolRejection> {
        let mut relaxed = false;
        for (key, r) in reqs.iter() {
            let Some(min) = r.min_values else { continue };
            if skip.contains(&key) {
                continue;
            }
            let available = offered_values(tpl, types(), key, r).len();
            if available < min as usize {
                match self.input.options.min_values {
                    MinValuesPolicy::Strict => {
                        return Err(PoolRejection::MinValues { key: key.to_string(), needed: min, available });
                    }
                    MinValuesPolicy::BestEffort => relaxed = true,
                }
            }
        }
        Ok(relaxed)
    }

    /// What `claim` becomes apart from its pods and hostname.
    fn make_claim(
        &self,
        orders: &mut PriceOrders,
        alike: &mut Vec<Alike>,
        claim: &SimClaim,
    ) -> Result<Made, PoolRejection> {
        let (shape, kept) = self.claim_shape(orders, alike, claim)?;
        let tpl = &self.fixed.templates[claim.template];
        let mut kept_bits = Bitset::empty(tpl.types.len());
        for &ti in &kept {
            kept_bits.set(ti);
        }
        Ok(Made { shape, overhead: tpl.min_overhead(&kept_bits), kept: Rc::new(kept) })
    }

    /// What `claim` becomes: its cheapest options (type indices), and its final requirements and template fields,
    /// shared with the claims alike; or why minValues can't hold.
    fn claim_shape(
        &self,
        orders: &mut PriceOrders,
        alike: &mut Vec<Alike>,
        claim: &SimClaim,
    ) -> Result<(Arc<ClaimShape>, Vec<usize>), PoolRejection> {
        let t = claim.template;
        let tpl = &self.fixed.templates[t];
        let max = self.input.options.max_instance_types.max(1);
        let reqs = &claim.requirements;
        let kept = orders.cheapest(tpl, t, reqs, &claim.types, claim.as_template, max);
        // minValues must still hold after truncation.
        let relaxed = claim.min_values_relaxed
            | self.min_values_relaxed(tpl, reqs, || kept.iter().copied(), &WELL_KNOWN_HELPER_KEYS)?;
        // The capacity types the options offer under the claim's zones and capacity types.
        let zone_req = reqs.get_ref(labels::ZONE);
        let ct_req = reqs.get_ref(labels::CAPACITY_TYPE);
        let mut capacity_types: BTreeSet<&str> = BTreeSet::new();
        // Once every capacity type the requirement allows is found, no offering can add one.
        let allowed =
            ct_req.filter(|r| !r.complement).map_or(usize::MAX, |r| r.values.len()).min(tpl.capacity_type_count());
        for &ti in &kept {
            if capacity_types.len() >= allowed {
                break;
            }
            for o in &tpl.types[ti].offerings {
                if o.available
                    && !capacity_types.contains(o.capacity_type.as_str())
                    && zone_req.is_none_or(|r| r.has(&o.zone))
                    && ct_req.is_none_or(|r| r.has(&o.capacity_type))
                {
                    capacity_types.insert(o.capacity_type.as_str());
                }
            }
        }
        // minValues lowered to what the options offer (BestEffort) differs per option set: not shared then.
        let shareable = claim.as_template && !relaxed;
        if shareable
            && let Some(a) = alike.iter().find(|a| {
                a.template == t && a.capacity_types.iter().map(String::as_str).eq(capacity_types.iter().copied())
            })
        {
            return Ok((a.shape.clone(), kept));
        }
        let mut requirements = reqs.clone();
        for k in WELL_KNOWN_HELPER_KEYS {
            requirements.remove(k);
        }
        let instance_type_min_values = requirements.get_ref(labels::INSTANCE_TYPE).and_then(|r| r.min_values);
        // The instance-type requirement is materialised from `instance_types` when the object is built
        // (`NewNodeClaim::full_requirements`): a large solve would otherwise copy every name into every claim.
        requirements.remove(labels::INSTANCE_TYPE);
        let ct_min = requirements.get_ref(labels::CAPACITY_TYPE).and_then(|r| r.min_values);
        let ct_names: Vec<String> = capacity_types.iter().map(|c| c.to_string()).collect();
        requirements.set(labels::CAPACITY_TYPE, Requirement::in_values(ct_names.clone()).with_min_values(ct_min));
        if relaxed {
            // BestEffort: lower each minValues to what the options offer.
            let keys: Vec<String> =
                requirements.iter().filter(|(_, r)| r.min_values.is_some()).map(|(k, _)| k.to_string()).collect();
            for key in keys {
                let r = requirements.get(&key);
                let n = offered_values(tpl, kept.iter().copied(), &key, &r).len() as u32;
                let lowered = r.min_values.map(|m| m.min(n));
                requirements.set(&key, r.with_min_values(lowered));
            }
        }
        let mut labels_out = tpl.labels.clone();
        for (k, v) in requirements.single_valued() {
            if !self.input.policy.is_well_known(k) && !WELL_KNOWN_HELPER_KEYS.contains(&k) {
                labels_out.entry(k.to_string()).or_insert_with(|| v.to_string());
            }
        }
        let mut annotations = tpl.annotations.clone();
        if relaxed {
            annotations.insert(labels::ANNOTATION_MIN_VALUES_RELAXED.to_string(), "true".to_string());
        }
        let shape = Arc::new(ClaimShape {
            nodepool: tpl.nodepool.clone(),
            requirements,
            instance_type_min_values,
            min_values_relaxed: relaxed,
            labels: labels_out,
            annotations,
            taints: tpl.taints.clone(),
            startup_taints: tpl.startup_taints.clone(),
            node_class_ref: tpl.node_class_ref.clone(),
            expire_after: tpl.expire_after.clone(),
            termination_grace_period: tpl.termination_grace_period.clone(),
        });
        if shareable {
            alike.push(Alike { template: t, capacity_types: ct_names, shape: shape.clone() });
        }
        Ok((shape, kept))
    }
}

/// The values of `key` that `r` allows and some of `types` (indices into the template's) defines.
fn offered_values<'t>(
    tpl: &'t Template,
    types: impl Iterator<Item = usize>,
    key: &str,
    r: &Requirement,
) -> BTreeSet<&'t str> {
    types
        .filter_map(|ti| tpl.types[ti].requirements.get_ref(key))
        .filter(|tr| !tr.complement)
        .flat_map(|tr| tr.values.iter().filter(|v| r.has(v)).map(String::as_str))
        .collect()
}

/// A claim's shape, cheapest options (type indices) and the DaemonSet overhead among them.
#[derive(Clone)]
struct Made {
    shape: Arc<ClaimShape>,
    kept: Rc<Vec<usize>>,
    overhead: Resources,
}

/// A shape claims of one template share: those no pod narrowed, minValues held, whose options offer these
/// capacity types.
struct Alike {
    template: usize,
    capacity_types: Vec<String>,
    shape: Arc<ClaimShape>,
}

/// Finalize's price orders: per template the order of a claim no pod narrowed, and per order each type's rank.
struct PriceOrders {
    template_orders: Vec<Option<std::rc::Rc<Vec<usize>>>>,
    ranks: Vec<(std::rc::Rc<Vec<usize>>, Vec<usize>)>,
}

impl PriceOrders {
    fn new(templates: usize) -> Self {
        PriceOrders { template_orders: vec![None; templates], ranks: Vec::new() }
    }

    /// Up to `max` of `types`, cheapest first (ties by name): the template's price order filtered by the types. A
    /// claim no pod narrowed has the template's offering requirements (the hostname takes no part), so it skips
    /// the per-claim lookup.
    fn cheapest(
        &mut self,
        tpl: &Template,
        t: usize,
        requirements: &Requirements,
        types: &Bitset,
        as_template: bool,
        max: usize,
    ) -> Vec<usize> {
        let order = if as_template {
            self.template_orders[t].get_or_insert_with(|| tpl.price_order(requirements)).clone()
        } else {
            tpl.price_order(requirements)
        };
        if types.count() * 8 >= order.len() {
            return order.iter().copied().filter(|&ti| types.get(ti)).take(max).collect();
        }
        // Few types (as cost packing's claims have): sort them by rank instead of scanning the whole order.
        let at = match self.ranks.iter().position(|(o, _)| std::rc::Rc::ptr_eq(o, &order)) {
            Some(at) => at,
            None => {
                let mut rank = vec![0; order.len()];
                for (r, &ti) in order.iter().enumerate() {
                    rank[ti] = r;
                }
                self.ranks.push((order.clone(), rank));
                self.ranks.len() - 1
            }
        };
        let rank = &self.ranks[at].1;
        let mut own: Vec<usize> = types.iter().collect();
        own.sort_by_key(|&ti| rank[ti]);
        own.truncate(max);
        own
    }
}

/// Convenience: prepare and solve in one call.
pub fn solve(input: &Input<'_>, pods: &[Arc<PodData>]) -> Results {
    Scheduler::new(input, pods).solve(pods)
}
