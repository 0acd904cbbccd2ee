//! Candidate construction (engine.md §5.2): which nodes a disruption method may consider, with everything the
//! methods and the explanations need, and for every other node the reason it is not a candidate.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::policy::v1::PodDisruptionBudget;

use super::budgets::PoolCounts;
use super::{Blocker, Context};
use crate::engine::api::nodeclaim::{COND_DRIFTED, COND_INITIALIZED};
use crate::engine::api::nodepool::POLICY_WHEN_EMPTY;
use crate::engine::api::{NodeClaim, NodePool};
use crate::engine::labels;
use crate::engine::lifecycle::{duration_ms, parse_rfc3339, time_ms};
use crate::engine::objects::Objects;
use crate::engine::pdb;
use crate::engine::provisioning::{Millis, is_currently_reschedulable};
use crate::engine::state::{Nodes, StateNode};
use crate::engine::stored_pod::StoredPod;
use crate::engine::termination::do_not_disrupt_active;

/// A pod a disruption would evict, with the PDB that covers it and that PDB's headroom.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodRef {
    pub namespace: String,
    pub name: String,
    /// (PDB name, disruptions allowed now).
    pub pdb: Option<(String, i32)>,
}

impl PodRef {
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

/// A node some disruption method may consider.
#[derive(Debug, Clone)]
pub struct Candidate {
    pub node: String,
    pub nodeclaim: String,
    pub provider_id: String,
    pub nodepool: String,
    pub instance_type: String,
    pub zone: String,
    pub capacity_type: String,
    /// The capacity reservation it runs in (`karpenter.k8s.aws/capacity-reservation-id`), when reserved.
    pub reservation_id: Option<String>,
    /// The offering's price for this zone and capacity type, $/h (0 when unknown).
    pub price: f64,
    pub price_known: bool,
    pub created_at: Millis,
    /// Pods that would have to move (evicted and rescheduled).
    pub pods: Vec<PodRef>,
    /// 1 + Σ positive eviction costs of `pods` (upstream `RescheduleDisruptionCost`).
    pub reschedule_cost: f64,
    /// (since, message) when the NodeClaim is `Drifted=True`.
    pub drifted: Option<(Millis, String)>,
    /// do-not-disrupt pods and blocking PDBs: these stop graceful methods; drift ignores them when the NodeClaim
    /// has a terminationGracePeriod (eventual disruption).
    pub pod_blockers: Vec<Blocker>,
    pub has_termination_grace_period: bool,
    /// The NodeClaim's terminationGracePeriod, when it reads as a duration.
    pub termination_grace_period: Option<Millis>,
    /// Initialized: budgets pace its repair (an uninitialized node's repair is not paced).
    pub initialized: bool,
    /// `karpenter.sh/do-not-repair: "true"` on the Node or the NodeClaim.
    pub do_not_repair: bool,
    /// Why consolidation (emptiness included) can't use this node yet: consolidateAfter, Never.
    pub consolidation_wait: Option<Blocker>,
    pub policy: String,
    /// CapacityBuffer virtual pods the last solve put here.
    pub buffer_pods: usize,
}

impl Candidate {
    /// Upstream "empty": no reschedulable pod with a positive eviction cost.
    pub fn is_empty(&self) -> bool {
        self.reschedule_cost <= 1.0
    }

    /// Price ÷ disruption cost: consolidation tries the best ratios first.
    pub fn savings_ratio(&self) -> f64 {
        self.price / self.reschedule_cost
    }

    pub fn for_emptiness(&self) -> Result<(), Blocker> {
        self.graceful()?;
        if let Some(b) = &self.consolidation_wait {
            return Err(b.clone());
        }
        if self.buffer_pods > 0 {
            return Err(Blocker::BufferPods { count: self.buffer_pods });
        }
        Ok(())
    }

    pub fn for_drift(&self) -> Result<(), Blocker> {
        if !self.has_termination_grace_period {
            self.graceful()?;
        }
        Ok(())
    }

    pub fn for_consolidation(&self) -> Result<(), Blocker> {
        self.graceful()?;
        if let Some(b) = &self.consolidation_wait {
            return Err(b.clone());
        }
        if self.policy == POLICY_WHEN_EMPTY {
            return Err(Blocker::WhenEmptyPolicy);
        }
        if !self.price_known {
            return Err(Blocker::InstanceTypeUnknown { instance_type: self.instance_type.clone() });
        }
        if self.zone.is_empty() {
            return Err(Blocker::MissingLabel { key: labels::ZONE.into() });
        }
        if self.capacity_type.is_empty() {
            return Err(Blocker::MissingLabel { key: labels::CAPACITY_TYPE.into() });
        }
        Ok(())
    }

    fn graceful(&self) -> Result<(), Blocker> {
        match self.pod_blockers.first() {
            Some(b) => Err(b.clone()),
            None => Ok(()),
        }
    }
}

/// Every managed node, sorted into candidates and blocked nodes, plus the per-pool figures budgets and the
/// Balanced policy need.
#[derive(Debug, Clone, Default)]
pub struct Survey {
    pub candidates: Vec<Candidate>,
    /// Nodes of static NodePools that could be disrupted but for being static: only static drift takes these
    /// (they are also in `blocked`, as `StaticNodePool`, for every other method).
    pub static_candidates: Vec<Candidate>,
    /// Nodes due for repair that no other method may take but repair may (uninitialized, nominated, or with
    /// `karpenter.sh/do-not-disrupt`, none of which holds repair back).
    pub repair_candidates: Vec<Candidate>,
    /// Nodes due for repair that cannot be repaired whatever happens, with why.
    pub repair_blocked: Vec<super::repair::DisruptionBlocked>,
    /// Nodes that are no candidate for any method, with why.
    pub blocked: BTreeMap<String, Blocker>,
    pub counts: BTreeMap<String, PoolCounts>,
    /// Per pool: Σ price and Σ disruption cost (1 + positive eviction costs) over all its nodes.
    pub pool_totals: BTreeMap<String, (f64, f64)>,
    /// Nodes (candidates or not) whose pods changed less than their pool's consolidateAfter ago: consolidation must
    /// not move other nodes' pods onto them (upstream v1.14) — they are settling, and may be about to go themselves.
    pub settling: BTreeSet<String>,
    /// The earliest end of a timed `karpenter.sh/do-not-disrupt` now protecting a pod on a surveyed node: the
    /// outcome may change then with nothing else changing.
    pub do_not_disrupt_until: Option<Millis>,
}

/// `clamp(1 + deletionCost/2²⁷ + priority/2²⁵, −10, 10)`.
pub fn eviction_cost(p: &StoredPod) -> f64 {
    let deletion_cost = p
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get("controller.kubernetes.io/pod-deletion-cost"))
        .and_then(|v| v.trim().parse::<i32>().ok())
        .unwrap_or(0);
    let priority = p.spec().priority.unwrap_or(0);
    (1.0 + f64::from(deletion_cost) / 2f64.powi(27) + f64::from(priority) / 2f64.powi(25)).clamp(-10.0, 10.0)
}

fn pod_key(p: &StoredPod) -> String {
    format!("{}/{}", p.metadata.namespace.as_deref().unwrap_or("default"), p.metadata.name.as_deref().unwrap_or(""))
}

/// PDBs with their headroom, computed once per pass.
struct Pdbs<'a> {
    list: Vec<(&'a PodDisruptionBudget, i32)>,
}

impl<'a> Pdbs<'a> {
    fn new(pdbs: &'a [PodDisruptionBudget], pods: Objects<'a, StoredPod>) -> Self {
        let mut by_ns: BTreeMap<&str, Vec<&StoredPod>> = BTreeMap::new();
        for p in pods {
            by_ns.entry(p.metadata.namespace.as_deref().unwrap_or("")).or_default().push(p);
        }
        let list = pdbs
            .iter()
            .map(|b| {
                let ns = b.metadata.namespace.as_deref().unwrap_or("");
                (b, pdb::disruptions_allowed(b, by_ns.get(ns).map_or(&[][..], Vec::as_slice)))
            })
            .collect();
        Pdbs { list }
    }

    /// The PDBs selecting `p`, with headroom.
    fn for_pod(&self, p: &StoredPod) -> Vec<(String, i32, &'a PodDisruptionBudget)> {
        self.list
            .iter()
            .filter(|(b, _)| pdb::selects(b, p))
            .map(|(b, n)| (b.metadata.name.clone().unwrap_or_default(), *n, *b))
            .collect()
    }
}

/// When the node's pods last changed (or it initialized), for consolidateAfter.
fn last_pod_event(claim: &NodeClaim) -> Option<Millis> {
    let status = claim.status.as_ref()?;
    status.last_pod_event_time.as_deref().and_then(parse_rfc3339).or_else(|| {
        claim.condition(COND_INITIALIZED).and_then(|c| c.last_transition_time.as_deref()).and_then(parse_rfc3339)
    })
}

/// Why consolidation must wait for this node, if it must (upstream's `Consolidatable` condition).
fn consolidation_wait(pool: &NodePool, claim: &NodeClaim, now: Millis) -> Option<Blocker> {
    let after = pool.spec.disruption.consolidate_after.trim();
    if after == "Never" {
        return Some(Blocker::ConsolidateAfterNever);
    }
    // A malformed value fails closed like upstream's validation would have stopped it.
    let Some(after) = duration_ms(after) else { return Some(Blocker::ConsolidateAfterNever) };
    // Without either time, the claim's age stands in; without that, wait the whole period.
    let last = last_pod_event(claim).or_else(|| claim.metadata.creation_timestamp.as_ref().map(time_ms)).unwrap_or(now);
    let ready_at = last.saturating_add(after);
    (now < ready_at).then(|| Blocker::ConsolidateAfter { left: ready_at - now })
}

/// Surveys every node of the snapshot.
pub fn survey(ctx: &Context<'_>) -> Survey {
    let snap = &ctx.snap;
    let mut out = Survey::default();
    let pools: BTreeMap<&str, &NodePool> = snap.nodepools.iter().map(|p| (p.name(), p)).collect();
    let pdbs = Pdbs::new(snap.pdbs, snap.pods);
    let no_labels = BTreeMap::new();
    let state = Nodes::of(snap).with_pods(snap.pods);
    for s in &state {
        let name = s.name();
        let (Some(node), Some(claim)) = (s.node, s.nodeclaim) else {
            if s.node.is_some() {
                out.blocked.insert(name, Blocker::NotManaged);
            }
            continue;
        };
        let node_labels = node.metadata.labels.as_ref().unwrap_or(&no_labels);
        let pool_name = node_labels.get(labels::NODEPOOL).cloned().or_else(|| claim.nodepool().map(str::to_string));
        let wait = pool_name.as_deref().and_then(|p| pools.get(p)).and_then(|p| consolidation_wait(p, claim, ctx.now));
        if matches!(wait, Some(Blocker::ConsolidateAfter { .. })) {
            out.settling.insert(name.clone());
        }
        let pods: &[&StoredPod] = state.pods_on(&name);
        let active: Vec<&StoredPod> =
            pods.iter().copied().filter(|p| !p.is_terminal() && p.metadata.deletion_timestamp.is_none()).collect();
        let pool_cost: f64 = 1.0 + active.iter().map(|p| eviction_cost(p).max(0.0)).sum::<f64>();

        let instance_type = node_labels.get(labels::INSTANCE_TYPE).cloned().unwrap_or_default();
        let zone = node_labels.get(labels::ZONE).cloned().unwrap_or_default();
        let capacity_type = node_labels.get(labels::CAPACITY_TYPE).cloned().unwrap_or_default();
        let reservation_id = node_labels.get(crate::engine::catalog::aws::CAPACITY_RESERVATION_ID).cloned();
        let offering_price = pool_name
            .as_deref()
            .and_then(|p| ctx.catalogs.get(p))
            .and_then(|types| types.iter().find(|t| t.name == instance_type))
            .and_then(|t| t.offerings.iter().find(|o| o.zone == zone && o.capacity_type == capacity_type))
            .map(|o| o.price);

        let initialized = s.initialized();
        let deleting = s.is_deleting() || s.is_marked_for_deletion();
        if let Some(p) = &pool_name {
            let c = out.counts.entry(p.clone()).or_default();
            if initialized && !claim.is_true(crate::engine::api::nodeclaim::COND_INSTANCE_TERMINATING) {
                c.nodes += 1;
            }
            if deleting || !crate::engine::lifecycle::node_ready(node) {
                c.disrupting += 1;
            }
            if !deleting && !crate::engine::lifecycle::node_ready(node) {
                c.not_ready += 1;
            }
            if !deleting {
                let t = out.pool_totals.entry(p.clone()).or_default();
                t.0 += offering_price.unwrap_or(0.0);
                t.1 += pool_cost;
            }
        }

        let blocker = common_blocker(ctx, s, &name, pool_name.as_deref(), &pools, initialized, deleting);
        let is_static = matches!(blocker, Some(Blocker::StaticNodePool));
        let due = ctx.repair.due.contains_key(&name);
        // Repair asks less of a node than the other methods: it must only be there and be ours to replace.
        let repair_only = due
            && matches!(blocker, Some(Blocker::NotInitialized | Blocker::Nominated { .. } | Blocker::NodeDoNotDisrupt));
        if due && matches!(blocker, Some(Blocker::MissingLabel { .. } | Blocker::NodePoolMissing { .. })) {
            out.repair_blocked.push(super::repair::DisruptionBlocked {
                node: name.clone(),
                nodeclaim: claim.name().to_string(),
                nodepool: None,
                why: super::repair::BlockReason::NoNodePool,
            });
        }
        if let Some(b) = blocker {
            out.blocked.insert(name.clone(), b);
            if !is_static && !repair_only {
                continue;
            }
        }
        let pool_name = pool_name.unwrap_or_default();
        let pool = pools[pool_name.as_str()];

        let mut pod_blockers = Vec::new();
        let mut moving = Vec::new();
        let mut reschedule_cost = 1.0;
        for p in pods.iter().copied().filter(|p| !p.is_terminal()) {
            if do_not_disrupt_active(p, ctx.now) {
                pod_blockers.push(Blocker::PodDoNotDisrupt { pod: pod_key(p) });
                if let Some(end) = crate::engine::termination::do_not_disrupt_expiry(p).filter(|e| *e > ctx.now) {
                    out.do_not_disrupt_until = Some(out.do_not_disrupt_until.map_or(end, |u| u.min(end)));
                }
            }
            let evictable = p.metadata.deletion_timestamp.is_none() && !p.owned_by("Node");
            let covering = if evictable { pdbs.for_pod(p) } else { Vec::new() };
            if covering.len() > 1 {
                pod_blockers.push(Blocker::MultiplePdbs {
                    pod: pod_key(p),
                    pdbs: covering.iter().map(|(n, _, _)| n.clone()).collect(),
                });
            } else if let Some((pdb_name, allowed, b)) = covering.first() {
                let always =
                    b.spec.as_ref().and_then(|s| s.unhealthy_pod_eviction_policy.as_deref()) == Some("AlwaysAllow");
                if *allowed <= 0 && (!always || pdb::is_healthy(p)) {
                    pod_blockers.push(Blocker::PdbBlocks { pod: pod_key(p), pdb: pdb_name.clone() });
                }
            }
            if is_currently_reschedulable(p, &[]) {
                reschedule_cost += eviction_cost(p).max(0.0);
                moving.push(PodRef {
                    namespace: p.metadata.namespace.clone().unwrap_or_else(|| "default".into()),
                    name: p.metadata.name.clone().unwrap_or_default(),
                    pdb: covering.first().map(|(n, a, _)| (n.clone(), *a)),
                });
            }
        }
        let drifted = claim.condition(COND_DRIFTED).filter(|c| c.status == "True").map(|c| {
            let since = c.last_transition_time.as_deref().and_then(parse_rfc3339).unwrap_or(0);
            (since, c.message.clone().or_else(|| c.reason.clone()).unwrap_or_default())
        });
        let list = if is_static {
            &mut out.static_candidates
        } else if repair_only {
            &mut out.repair_candidates
        } else {
            &mut out.candidates
        };
        let buffer_pods = ctx.buffer_nodes.get(&name).copied().unwrap_or(0);
        list.push(Candidate {
            node: name,
            nodeclaim: claim.name().to_string(),
            provider_id: claim.provider_id().unwrap_or_default().to_string(),
            nodepool: pool_name,
            instance_type,
            zone,
            capacity_type,
            reservation_id,
            price: offering_price.unwrap_or(0.0),
            price_known: offering_price.is_some(),
            created_at: claim.metadata.creation_timestamp.as_ref().map_or(0, time_ms),
            pods: moving,
            reschedule_cost,
            drifted,
            pod_blockers,
            has_termination_grace_period: claim.spec.termination_grace_period.is_some(),
            termination_grace_period: claim.spec.termination_grace_period.as_deref().and_then(duration_ms),
            initialized,
            do_not_repair: super::repair::says_do_not_repair(node.metadata.annotations.as_ref())
                || super::repair::says_do_not_repair(claim.metadata.annotations.as_ref()),
            policy: pool.spec.disruption.consolidation_policy.clone(),
            buffer_pods,
            consolidation_wait: wait,
        });
    }
    out
}

fn common_blocker(
    ctx: &Context<'_>,
    s: &StateNode<'_>,
    name: &str,
    pool_name: Option<&str>,
    pools: &BTreeMap<&str, &NodePool>,
    initialized: bool,
    deleting: bool,
) -> Option<Blocker> {
    if ctx.busy.contains(name) {
        return Some(Blocker::InCommand);
    }
    if deleting {
        return Some(Blocker::Deleting);
    }
    if !initialized {
        return Some(Blocker::NotInitialized);
    }
    if let Some(until) = ctx.nominated.get(name).filter(|u| **u > ctx.now) {
        return Some(Blocker::Nominated { until: until - ctx.now });
    }
    let node_dnd =
        s.node.and_then(|n| n.metadata.annotations.as_ref()).and_then(|a| a.get(labels::ANNOTATION_DO_NOT_DISRUPT));
    if node_dnd.is_some_and(|v| v == "true") {
        return Some(Blocker::NodeDoNotDisrupt);
    }
    let Some(pool_name) = pool_name else { return Some(Blocker::MissingLabel { key: labels::NODEPOOL.into() }) };
    let Some(pool) = pools.get(pool_name) else {
        return Some(Blocker::NodePoolMissing { nodepool: pool_name.to_string() });
    };
    if pool.spec.replicas.is_some() {
        return Some(Blocker::StaticNodePool);
    }
    None
}
