//! What-if previews of NodePool edits: before an operator applies an edited NodePool, say what it would do — which
//! NodeClaims would drift and why, which pending pods would gain or lose a place, what that does to the hourly
//! bill, how many nodes the disruption budgets would let go now, and how the limits' headroom moves.
//!
//! Everything is computed by the engine's own code on one snapshot, so the preview and what the controller later
//! does cannot disagree about the rules:
//! - **drift**: [`drift::detect`] for every NodeClaim of the pool, against the live and against the edited pool;
//!   only claims whose verdict changes are reported (a claim that drifted already, for the same reason, is not an
//!   effect of the edit);
//! - **pending pods**: two provisioning solves over the same digested state ([`ClusterState`]), one with the live
//!   pools and one with the edited pool in place;
//! - **budgets**: [`budgets::status`] for Empty, Drifted and Underutilized with the node counts of the disruption
//!   survey, for the live and the edited budgets;
//! - **limits**: the pool's usage as the scheduler counts it, against the live and the edited limits.
//!
//! ## The cost estimate
//! Two parts, both in $/h, both from the catalog's prices (cheapest compatible *available* offering):
//! 1. *Pending pods*: Σ of the cheapest option of every NodeClaim the provisioner would launch now, with the live
//!    pools versus with the edited pool. Pods that fit existing nodes cost nothing in either.
//! 2. *Drift replacements*: the disruption engine's own simulation ([`Simulator`], as drift uses it) of the
//!    drifted nodes gone: the NodeClaims the edited pool would launch for their pods (nothing for pods that fit
//!    on other nodes), priced at their cheapest option, minus the nodes' current offering prices. The total
//!    ([`DriftCost`]) removes every priced drifted node at once — the steady state once drift has replaced them
//!    all, so one drifted node's pods are not counted as fitting on another that is about to go. Each
//!    [`DriftedClaim`] also carries its own estimate (that node alone, as one drift command sees it). Pending pods
//!    are left out of these simulations so their capacity is not counted twice. Drifted claims that are not
//!    disruption candidates (not initialized, do-not-disrupt, …), whose price is unknown or whose pods would fit
//!    nowhere are left out of the total and counted in [`DriftCost::unpriced`].
//!
//! Pure and deterministic: no I/O, the time comes in, output order is the snapshot's (sorted where it is not).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use crate::engine::api::NodePool;
use crate::engine::catalog::{Catalog, InstanceType};
use crate::engine::disruption::budgets::{self, BudgetStatus};
use crate::engine::disruption::candidates::{Survey, survey};
use crate::engine::disruption::consolidation::Simulator;
use crate::engine::disruption::{Blocker, Candidate, Context, DisruptionOptions, Reason};
use crate::engine::drift::{self, Drift, DriftInput};
use crate::engine::labels::{self, LabelPolicy};
use crate::engine::provisioning::{ClusterSnapshot, ClusterState, Millis, Snapshot};
use crate::engine::resources::{CPU, describe_resource, parse_quantity};
use crate::engine::scheduling::{self, Results, SchedulerOptions};
use crate::engine::state::Nodes;

/// The budget reasons a preview reports, in upstream's method order.
pub const BUDGET_REASONS: [Reason; 3] = [Reason::Empty, Reason::Drifted, Reason::Underutilized];

/// Prices closer than this are the same price (sums of f64 prices).
const PRICE_EPSILON: f64 = 1e-9;

/// Everything a preview reads besides the edited pool.
#[derive(Clone)]
pub struct WhatIfInput<'a> {
    pub snapshot: &'a Snapshot,
    /// The instance types every NodePool may use, with offerings known to be out of capacity already marked
    /// unavailable (as the runtime hands them to provisioning).
    pub instance_types: &'a [Arc<InstanceType>],
    pub policy: &'a LabelPolicy,
    pub now: Millis,
    pub options: SchedulerOptions,
    /// NodeOverlays to apply (gate `NodeOverlay` on; empty otherwise): each side of the preview sees its own
    /// pools' overlaid types, since a template label edit changes what the overlays match.
    pub overlays: &'a [crate::engine::api::nodeoverlay::NodeOverlay],
}

/// What applying an edited NodePool would do. [`EditPreview::is_empty`] when nothing changes.
#[derive(Debug, Clone, PartialEq)]
pub struct EditPreview {
    pub nodepool: String,
    /// No NodePool of this name exists yet.
    pub is_new: bool,
    /// Claims whose drift verdict the edit changes to "drifted", with why and what replacing them would cost.
    pub drifted: Vec<DriftedClaim>,
    /// Claims that drift now and would not after the edit (an edit that reverts a change).
    pub undrifted: Vec<String>,
    pub pods: PodChanges,
    pub cost: CostChange,
    /// One entry per reason of [`BUDGET_REASONS`], always present.
    pub budgets: Vec<BudgetChange>,
    /// One entry per resource named by the live or the edited limits; empty when the limits did not change.
    pub limits: Vec<LimitChange>,
}

/// A NodeClaim the edit would (newly) drift.
#[derive(Debug, Clone, PartialEq)]
pub struct DriftedClaim {
    pub nodeclaim: String,
    pub node: Option<String>,
    pub instance_type: String,
    /// The drift under the edited pool: reason and the changes, one sentence each.
    pub drift: Drift,
    /// The drift it already has under the live pool, when that differs.
    pub before: Option<Drift>,
    /// The offering price of the running instance, $/h, when the catalog knows it.
    pub current_price: Option<f64>,
    pub replacement: ReplacementEstimate,
}

impl DriftedClaim {
    /// replacement − current, $/h, when both are known.
    pub fn price_delta(&self) -> Option<f64> {
        match (&self.replacement, self.current_price) {
            (ReplacementEstimate::Launch { price, .. }, Some(now)) => Some(price - now),
            (ReplacementEstimate::NoneNeeded, Some(now)) => Some(-now),
            _ => None,
        }
    }
}

/// What replacing a drifted node would launch, per the disruption engine's simulation.
#[derive(Debug, Clone, PartialEq)]
pub enum ReplacementEstimate {
    /// New NodeClaims for its pods: the cheapest option of each, and their summed price in $/h.
    Launch { instance_types: Vec<String>, price: f64 },
    /// Its pods fit on other nodes: the node goes without a replacement.
    NoneNeeded,
    /// Some pod would find no place; drift would not proceed.
    PodsWouldNotFit { reason: String },
    /// The node is not a disruption candidate now (or not registered), so nothing was simulated.
    NotEstimated { why: String },
}

/// Pending pods whose outcome the edit changes, keyed `namespace/name`, sorted.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PodChanges {
    /// Unschedulable now, placed after the edit: where.
    pub newly_schedulable: Vec<(String, Destination)>,
    /// Placed now, unschedulable after the edit: why (the edited pool's reason first).
    pub newly_unschedulable: Vec<(String, String)>,
    /// Placed both ways but somewhere else, when the edited pool is involved: (pod, before, after).
    pub moved: Vec<(String, Destination, Destination)>,
}

impl PodChanges {
    pub fn is_empty(&self) -> bool {
        self.newly_schedulable.is_empty() && self.newly_unschedulable.is_empty() && self.moved.is_empty()
    }
}

/// Where a solve put a pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Destination {
    /// A new NodeClaim of this NodePool.
    NewNodeClaim(String),
    /// An existing node or in-flight NodeClaim.
    Existing(String),
}

impl std::fmt::Display for Destination {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Destination::NewNodeClaim(pool) => write!(f, "a new NodeClaim of {pool}"),
            Destination::Existing(node) => write!(f, "node {node}"),
        }
    }
}

/// The change in $/h (see the module docs for what is estimated and how).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CostChange {
    /// Σ cheapest option of the NodeClaims provisioning would launch now with the live pools.
    pub pending_before: f64,
    /// The same with the edited pool.
    pub pending_after: f64,
    pub claims_before: usize,
    pub claims_after: usize,
    pub drift: DriftCost,
}

/// Replacing every priced drifted node together (see the module docs).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DriftCost {
    /// Σ current offering price of the nodes in the estimate, $/h.
    pub current: f64,
    /// Σ cheapest option of the NodeClaims their replacement would launch, $/h.
    pub replacement: f64,
    /// The cheapest option of each of those NodeClaims.
    pub launches: Vec<String>,
    /// Drifted claims left out of the estimate (not candidates, unknown price, pods that would fit nowhere).
    pub unpriced: usize,
}

impl DriftCost {
    pub fn delta(&self) -> f64 {
        self.replacement - self.current
    }
}

impl CostChange {
    pub fn pending_delta(&self) -> f64 {
        self.pending_after - self.pending_before
    }

    /// The whole estimated change in $/h.
    pub fn total_delta(&self) -> f64 {
        self.pending_delta() + self.drift.delta()
    }
}

/// One budget reason, live versus edited.
#[derive(Debug, Clone, PartialEq)]
pub struct BudgetChange {
    pub reason: Reason,
    /// `None` for a new NodePool.
    pub before: Option<BudgetStatus>,
    pub after: BudgetStatus,
}

impl BudgetChange {
    pub fn changed(&self) -> bool {
        self.before.as_ref().is_none_or(|b| b.allowed != self.after.allowed || b.limit != self.after.limit)
    }
}

/// One limited resource, live versus edited, in the resource's integer unit (millicores for CPU, bytes, counts).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitChange {
    pub resource: String,
    /// `None`: not limited (or the quantity does not parse).
    pub limit_before: Option<i64>,
    pub limit_after: Option<i64>,
    /// What the pool's nodes use now, as the scheduler counts it (capacity of its active nodes; `nodes` = count).
    pub usage: i64,
}

impl LimitChange {
    pub fn headroom_before(&self) -> Option<i64> {
        self.limit_before.map(|l| l.saturating_sub(self.usage))
    }
    pub fn headroom_after(&self) -> Option<i64> {
        self.limit_after.map(|l| l.saturating_sub(self.usage))
    }
}

impl EditPreview {
    /// Nothing would change: no drift either way, no pod outcome, no cost, same budgets and limits.
    pub fn is_empty(&self) -> bool {
        !self.is_new
            && self.drifted.is_empty()
            && self.undrifted.is_empty()
            && self.pods.is_empty()
            && self.cost.total_delta().abs() < PRICE_EPSILON
            && self.cost.claims_before == self.cost.claims_after
            && self.budgets.iter().all(|b| !b.changed())
            && self.limits.is_empty()
    }
}

/// Previews replacing the snapshot's NodePool named like `edited` (or adding it) with `edited`, using the whole
/// catalog for every pool and default scheduler options.
pub fn preview_nodepool_edit(snapshot: &Snapshot, catalog: &Catalog, now: Millis, edited: &NodePool) -> EditPreview {
    preview_nodepool_edit_with_overlays(snapshot, catalog, now, edited, &[])
}

/// [`preview_nodepool_edit`] with NodeOverlays applied to both sides.
pub fn preview_nodepool_edit_with_overlays(
    snapshot: &Snapshot,
    catalog: &Catalog,
    now: Millis,
    edited: &NodePool,
    overlays: &[crate::engine::api::nodeoverlay::NodeOverlay],
) -> EditPreview {
    let input = WhatIfInput {
        snapshot,
        instance_types: &catalog.instance_types,
        policy: &catalog.label_policy,
        now,
        options: SchedulerOptions::default(),
        overlays,
    };
    preview(&input, edited)
}

/// Instance types per pool: the input's for every pool, with the overlays applied when there are any.
fn pool_types(input: &WhatIfInput<'_>, pools: &[NodePool]) -> BTreeMap<String, Vec<Arc<InstanceType>>> {
    let raw: BTreeMap<String, Vec<Arc<InstanceType>>> =
        pools.iter().map(|p| (p.name().to_string(), input.instance_types.to_vec())).collect();
    if input.overlays.is_empty() {
        return raw;
    }
    let (_, applied) = crate::engine::overlay::overlaid_catalogs(input.overlays, pools, &raw, input.policy);
    applied.into_iter().map(|(pool, a)| (pool, a.instance_types)).collect()
}

/// [`preview_nodepool_edit`] with explicit instance types (unavailable offerings marked) and options.
pub fn preview(input: &WhatIfInput<'_>, edited: &NodePool) -> EditPreview {
    let snap = input.snapshot;
    let name = edited.name().to_string();
    let live = snap.nodepools.iter().find(|p| p.name() == name);
    let edited = effective_edit(live, edited);

    // In place, so both solves see the pools in the same order (ties between equal weights stay the same).
    let mut pools_after: Vec<NodePool> = snap.nodepools.clone();
    match pools_after.iter_mut().find(|p| p.name() == name) {
        Some(p) => *p = edited.clone(),
        None => pools_after.push(edited.clone()),
    }
    let view_before = snap.view();
    let view_after = ClusterSnapshot { nodepools: &pools_after, ..view_before };

    let catalogs_before = pool_types(input, &snap.nodepools);
    let catalogs = pool_types(input, &pools_after);
    // The state reads each pool's types for claims not launched yet: the live pools', plus a new pool's.
    let mut state_catalogs = catalogs.clone();
    state_catalogs.extend(catalogs_before.iter().map(|(k, v)| (k.clone(), v.clone())));

    // One digested state: it does not depend on the pools' contents, only on their names (for catalogs).
    let state = ClusterState::new(&view_before, &state_catalogs, input.policy);
    let solve = |pools: &[NodePool], catalogs: &BTreeMap<String, Vec<Arc<InstanceType>>>| {
        let si = state.input(pools, catalogs, input.policy, input.options.clone());
        scheduling::solve(&si, &state.to_schedule)
    };
    let before = solve(&snap.nodepools, &catalogs_before);
    let after = solve(&pools_after, &catalogs);
    let pods = pod_changes(&state, &before, &after, &name);

    let busy = BTreeSet::new();
    let nominated = BTreeMap::new();
    let no_buffers = BTreeMap::new();
    let disruption_options = DisruptionOptions::default();
    let ctx = Context {
        snap: view_after,
        catalogs: &catalogs,
        policy: input.policy,
        now: input.now,
        busy: &busy,
        nominated: &nominated,
        buffer_nodes: &no_buffers,
        options: &disruption_options,
        repair: &crate::engine::disruption::repair::NO_REPAIRS,
    };
    let survey = survey(&ctx);
    let (drifted, undrifted, drift_cost) = drift_changes(input, &ctx, &survey, live, &edited);

    let cost = CostChange {
        pending_before: launch_price(&before),
        pending_after: launch_price(&after),
        claims_before: before.new_claims.len(),
        claims_after: after.new_claims.len(),
        drift: drift_cost,
    };

    let counts = survey.counts.get(&name).copied().unwrap_or_default();
    let budgets = BUDGET_REASONS
        .iter()
        .map(|&reason| BudgetChange {
            reason,
            before: live.map(|p| budgets::status(p, reason, counts, input.now)),
            after: budgets::status(&edited, reason, counts, input.now),
        })
        .collect();

    let limits = limit_changes(live, &edited, state.usage.get(&name));

    EditPreview { nodepool: name, is_new: live.is_none(), drifted, undrifted, pods, cost, budgets, limits }
}

/// The edited pool as the cluster would hold it: status is not the operator's to edit (it keeps the live one when
/// the edit has none), and a template change invalidates an upstream `nodepool-hash` the edit still carries —
/// Karpenter would recompute it, and a stale hash equal to the claims' would hide every static drift.
fn effective_edit(live: Option<&NodePool>, edited: &NodePool) -> NodePool {
    let mut e = edited.clone();
    let Some(live) = live else { return e };
    if e.status.is_none() {
        e.status = live.status.clone();
    }
    let hash =
        |p: &NodePool| p.metadata.annotations.as_ref().and_then(|a| a.get(labels::ANNOTATION_NODEPOOL_HASH)).cloned();
    if e.spec.template != live.spec.template
        && hash(&e).is_some()
        && hash(&e) == hash(live)
        && let Some(a) = e.metadata.annotations.as_mut()
    {
        a.remove(labels::ANNOTATION_NODEPOOL_HASH);
        a.remove(labels::ANNOTATION_NODEPOOL_HASH_VERSION);
    }
    e
}

/// Σ of the cheapest option of every NodeClaim a solve would launch ($/h).
fn launch_price(r: &Results) -> f64 {
    r.new_claims.iter().filter_map(|c| c.cheapest_price()).sum()
}

/// Where each solved pod went: `Ok(destination)` or `Err(why not)`.
fn outcomes(r: &Results, n: usize, pool: &str) -> Vec<Result<Destination, String>> {
    let mut out: Vec<Result<Destination, String>> = vec![Err("not considered".to_string()); n];
    let mut set = |i: usize, v: Result<Destination, String>| {
        if let Some(slot) = out.get_mut(i) {
            *slot = v;
        }
    };
    for c in &r.new_claims {
        for &i in &c.pods {
            set(i, Ok(Destination::NewNodeClaim(c.nodepool.clone())));
        }
    }
    for p in &r.existing {
        for &i in &p.pods {
            set(i, Ok(Destination::Existing(p.node.clone())));
        }
    }
    for f in &r.failures {
        // The edited pool's own reason says what the edit did; the summary covers every pool.
        let why = match f.reasons.iter().find(|(p, _)| p == pool) {
            Some((p, reason)) => format!("NodePool {p:?}: {reason}"),
            None => f.summary(),
        };
        set(f.pod, Err(why));
    }
    for (i, why) in &r.ignored {
        set(*i, Err(why.to_string()));
    }
    out
}

fn pod_changes(state: &ClusterState, before: &Results, after: &Results, pool: &str) -> PodChanges {
    let n = state.to_schedule.len();
    let (b, a) = (outcomes(before, n, pool), outcomes(after, n, pool));
    let mut out = PodChanges::default();
    let involves_pool = |d: &Destination| match d {
        Destination::NewNodeClaim(p) => p == pool,
        Destination::Existing(node) => {
            state.active.iter().any(|e| &e.name == node && e.nodepool.as_deref() == Some(pool))
        }
    };
    for (i, pod) in state.to_schedule.iter().enumerate() {
        // Only pending pods: pods of deleting nodes are the disruption engine's business.
        if !state.provisionable.get(i).copied().unwrap_or(false) {
            continue;
        }
        let key = pod.key();
        match (&b[i], &a[i]) {
            (Err(_), Ok(d)) => out.newly_schedulable.push((key, d.clone())),
            (Ok(_), Err(why)) => out.newly_unschedulable.push((key, why.clone())),
            (Ok(x), Ok(y)) if x != y && (involves_pool(x) || involves_pool(y)) => {
                // Two solves name in-simulation claims alike; only a change of pool or node is a move.
                out.moved.push((key, x.clone(), y.clone()))
            }
            _ => {}
        }
    }
    out.newly_schedulable.sort_by(|x, y| x.0.cmp(&y.0));
    out.newly_unschedulable.sort_by(|x, y| x.0.cmp(&y.0));
    out.moved.sort_by(|x, y| x.0.cmp(&y.0));
    out
}

/// Drift of every NodeClaim of the pool under the live and the edited pool; claims whose verdict changes.
fn drift_changes(
    input: &WhatIfInput<'_>,
    ctx: &Context<'_>,
    survey: &Survey,
    live: Option<&NodePool>,
    edited: &NodePool,
) -> (Vec<DriftedClaim>, Vec<String>, DriftCost) {
    let name = edited.name();
    let (mut drifted, mut undrifted) = (Vec::new(), Vec::new());
    for s in &Nodes::of(&ctx.snap) {
        let Some(claim) = s.nodeclaim else { continue };
        if claim.nodepool() != Some(name) || s.is_deleting() {
            continue;
        }
        let node_labels = s.node.and_then(|n| n.metadata.labels.as_ref());
        let detect = |pool: &NodePool| {
            drift::detect(&DriftInput { node_labels, ..DriftInput::new(claim, pool, input.instance_types, input.now) })
        };
        let before = live.and_then(detect);
        let after = detect(edited);
        match after {
            Some(d) if before.as_ref() != Some(&d) => {
                let view = drift::node_view(claim, node_labels);
                drifted.push(DriftedClaim {
                    nodeclaim: claim.name().to_string(),
                    node: s.node.and_then(|n| n.metadata.name.clone()),
                    instance_type: view.get(labels::INSTANCE_TYPE).cloned().unwrap_or_default(),
                    drift: d,
                    before,
                    current_price: None,
                    replacement: ReplacementEstimate::NotEstimated { why: "not registered as a node yet".into() },
                });
            }
            None if before.is_some() => undrifted.push(claim.name().to_string()),
            _ => {}
        }
    }
    let cost = if drifted.is_empty() { DriftCost::default() } else { estimate_replacements(ctx, survey, &mut drifted) };
    drifted.sort_by(|a, b| a.nodeclaim.cmp(&b.nodeclaim));
    undrifted.sort();
    (drifted, undrifted, cost)
}

/// Prices each drifted claim's replacement on its own, then all priced ones together, with the disruption
/// engine's simulation over the edited snapshot.
fn estimate_replacements(ctx: &Context<'_>, survey: &Survey, drifted: &mut [DriftedClaim]) -> DriftCost {
    let mut state = ClusterState::new(&ctx.snap, ctx.catalogs, ctx.policy);
    // Leave pending pods out: their capacity is the other half of the estimate.
    let pods = std::mem::take(&mut state.to_schedule);
    let flags = std::mem::take(&mut state.provisionable);
    (state.to_schedule, state.provisionable) = pods.into_iter().zip(flags).filter(|(_, pending)| !pending).unzip();
    let sim = Simulator::new(ctx, &state, survey);
    let mut group = Vec::new();
    for d in drifted.iter_mut() {
        let Some(node) = d.node.clone() else { continue };
        let Some(cand) = survey.candidates.iter().find(|c| c.node == node) else {
            let why =
                survey.blocked.get(&node).map_or_else(|| "not a disruption candidate".to_string(), Blocker::to_string);
            d.replacement = ReplacementEstimate::NotEstimated { why };
            continue;
        };
        d.current_price = cand.price_known.then_some(cand.price);
        d.replacement = match simulate(&sim, &[cand]) {
            Err(reason) => ReplacementEstimate::PodsWouldNotFit { reason },
            Ok((types, _)) if types.is_empty() => ReplacementEstimate::NoneNeeded,
            Ok((instance_types, price)) => ReplacementEstimate::Launch { instance_types, price },
        };
        if d.price_delta().is_some() {
            group.push(cand);
        }
    }
    let mut cost = DriftCost { unpriced: drifted.len() - group.len(), ..DriftCost::default() };
    match simulate(&sim, &group) {
        Ok((launches, price)) => {
            cost.current = group.iter().map(|c| c.price).sum();
            cost.replacement = price;
            cost.launches = launches;
        }
        // Each fits alone but not all together: nothing to add up honestly.
        Err(_) => cost.unpriced = drifted.len(),
    }
    cost
}

/// The NodeClaims removing `candidates` would launch: the cheapest option of each and their summed price, or the
/// first pod that would find no place.
fn simulate(sim: &Simulator<'_>, candidates: &[&Candidate]) -> Result<(Vec<String>, f64), String> {
    let outcome = sim.run(candidates, false);
    if let Some(e) = outcome.errors.first() {
        return Err(e.to_string());
    }
    let mut types = Vec::new();
    let mut price = 0.0;
    for c in &outcome.new_claims {
        let cheapest = c
            .instance_types
            .iter()
            .filter_map(|t| t.cheapest_offering(&c.requirements).map(|o| (o.price, t.name.clone())))
            .min_by(|a, b| a.0.total_cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
        if let Some((p, t)) = cheapest {
            price += p;
            types.push(t);
        }
    }
    Ok((types, price))
}

/// Parses a limits map into integer units the way the scheduler does (CPU in millicores, the rest in units).
fn parsed_limits(pool: Option<&NodePool>) -> BTreeMap<String, Option<i64>> {
    pool.and_then(|p| p.spec.limits.as_ref())
        .into_iter()
        .flatten()
        .map(|(k, q)| {
            let v = parse_quantity(&q.0).ok().map(|v| if k == CPU { v.milli() } else { v.value() });
            (k.clone(), v)
        })
        .collect()
}

fn limit_changes(
    live: Option<&NodePool>,
    edited: &NodePool,
    usage: Option<&crate::engine::resources::Resources>,
) -> Vec<LimitChange> {
    if live.map(|p| &p.spec.limits) == Some(&edited.spec.limits) {
        return Vec::new();
    }
    let (before, after) = (parsed_limits(live), parsed_limits(Some(edited)));
    let keys: BTreeSet<&String> = before.keys().chain(after.keys()).collect();
    keys.into_iter()
        .map(|k| LimitChange {
            resource: k.clone(),
            limit_before: before.get(k).copied().flatten(),
            limit_after: after.get(k).copied().flatten(),
            usage: usage.map_or(0, |u| u.get(k)),
        })
        .collect()
}

/// `$0.0420/h`, with a sign when asked.
fn dollars(v: f64, signed: bool) -> String {
    let v = if v.abs() < PRICE_EPSILON { 0.0 } else { v };
    if signed { format!("{}${:.4}/h", if v < 0.0 { "−" } else { "+" }, v.abs()) } else { format!("${v:.4}/h") }
}

fn budget_text(s: &BudgetStatus) -> String {
    if s.error.is_some() {
        "0 (malformed budget)".to_string()
    } else if s.limit == i64::MAX {
        "unlimited".to_string()
    } else {
        s.allowed.to_string()
    }
}

fn limit_text(resource: &str, v: Option<i64>) -> String {
    v.map_or_else(|| "none".to_string(), |v| describe_resource(resource, v))
}

fn headroom_text(resource: &str, v: Option<i64>) -> String {
    match v {
        None => "unlimited".to_string(),
        Some(v) if v < 0 => format!("over by {}", describe_resource(resource, -v)),
        Some(v) => describe_resource(resource, v),
    }
}

/// The preview as plain lines (tests, `$EDITOR` mode, logs). The dashboard styles the same lines.
pub fn summary_lines(p: &EditPreview) -> Vec<String> {
    let mut out = Vec::new();
    if p.is_empty() {
        out.push(format!(
            "No effect: no NodeClaim of {} would drift, no pending pod changes, cost, budgets and limits unchanged.",
            p.nodepool
        ));
        return out;
    }
    if p.is_new {
        out.push(format!("NodePool {} is new.", p.nodepool));
    }
    if p.drifted.is_empty() {
        out.push("Drift: no NodeClaim would drift.".to_string());
    } else {
        out.push(format!("Drift: {} NodeClaim(s) would drift and be replaced:", p.drifted.len()));
        for d in &p.drifted {
            let node = d.node.as_deref().map(|n| format!(", node {n}")).unwrap_or_default();
            out.push(format!("  {} ({}{node}): {}", d.nodeclaim, d.instance_type, d.drift));
            let now = d.current_price.map(|v| dollars(v, false)).unwrap_or_else(|| "unknown price".to_string());
            let cost = match &d.replacement {
                ReplacementEstimate::Launch { instance_types, price } => format!(
                    "replacement {} {} (now {now}{})",
                    instance_types.join(" + "),
                    dollars(*price, false),
                    d.price_delta().map(|x| format!(", {}", dollars(x, true))).unwrap_or_default()
                ),
                ReplacementEstimate::NoneNeeded => format!("no replacement needed, pods fit elsewhere (now {now})"),
                ReplacementEstimate::PodsWouldNotFit { reason } => format!("would stay: {reason}"),
                ReplacementEstimate::NotEstimated { why } => format!("replacement not estimated: {why}"),
            };
            out.push(format!("    {cost}"));
        }
    }
    if !p.undrifted.is_empty() {
        out.push(format!("No longer drifted: {}", p.undrifted.join(", ")));
    }
    let pc = &p.pods;
    if pc.is_empty() {
        out.push("Pending pods: no change.".to_string());
    } else {
        out.push(format!(
            "Pending pods: {} would become schedulable, {} unschedulable, {} would move.",
            pc.newly_schedulable.len(),
            pc.newly_unschedulable.len(),
            pc.moved.len()
        ));
        for (pod, d) in &pc.newly_schedulable {
            out.push(format!("  + {pod} → {d}"));
        }
        for (pod, why) in &pc.newly_unschedulable {
            out.push(format!("  − {pod}: {why}"));
        }
        for (pod, from, to) in &pc.moved {
            out.push(format!("  ~ {pod}: {from} → {to}"));
        }
    }
    let c = &p.cost;
    out.push("Cost (estimated):".to_string());
    out.push(format!(
        "  launches for pending pods: {} ({} NodeClaims) → {} ({}), {}",
        dollars(c.pending_before, false),
        c.claims_before,
        dollars(c.pending_after, false),
        c.claims_after,
        dollars(c.pending_delta(), true)
    ));
    if !p.drifted.is_empty() {
        let d = &c.drift;
        let launches = if d.launches.is_empty() { "nothing".to_string() } else { d.launches.join(" + ") };
        let unpriced = if d.unpriced > 0 { format!(" ({} not estimated)", d.unpriced) } else { String::new() };
        out.push(format!(
            "  replacing the drifted nodes: {} now → {launches} {}, {}{unpriced}",
            dollars(d.current, false),
            dollars(d.replacement, false),
            dollars(d.delta(), true)
        ));
    }
    out.push(format!("  total: {}", dollars(c.total_delta(), true)));
    out.push("Disruption budgets (nodes allowed now, live → edited):".to_string());
    for b in &p.budgets {
        let before = b.before.as_ref().map_or_else(|| "—".to_string(), budget_text);
        let mark = if b.changed() { "  (changed)" } else { "" };
        let mut line = format!("  {}: {before} → {}{mark}", b.reason.as_str(), budget_text(&b.after));
        if b.after.allowed == 0 {
            line.push_str(&format!(" — {}", b.after.why_zero(&p.nodepool, b.reason)));
        }
        out.push(line);
    }
    if !p.limits.is_empty() {
        out.push("Limits (limit, in use, headroom):".to_string());
        for l in &p.limits {
            out.push(format!(
                "  {}: {} → {}, in use {}, headroom {} → {}",
                l.resource,
                limit_text(&l.resource, l.limit_before),
                limit_text(&l.resource, l.limit_after),
                describe_resource(&l.resource, l.usage),
                headroom_text(&l.resource, l.headroom_before()),
                headroom_text(&l.resource, l.headroom_after()),
            ));
        }
    }
    out
}
