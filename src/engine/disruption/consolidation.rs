//! The voluntary methods (engine.md §5.4–§5.8) and the scheduling simulation they share.

use std::cell::OnceCell;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::budgets::{self, BudgetStatus};
use super::candidates::{Candidate, Survey, survey};
use super::repair::Verdict;
use super::{
    BALANCED_K, Blocker, Command, Context, Method, PassResult, REPACK_MIN_SAVINGS, Reason, Replacement,
    SPOT_TO_SPOT_MIN_TYPES,
};
use crate::engine::api::nodepool::POLICY_BALANCED;
use crate::engine::catalog::InstanceType;
use crate::engine::labels;
use crate::engine::packing::Packing;
use crate::engine::provisioning::{ClusterState, to_nodeclaim};
use crate::engine::requirements::{Requirement, Requirements};
use crate::engine::scheduling::{Input, NewNodeClaim, Prepared, Scheduler, SchedulerOptions};

/// What removing some nodes would lead to.
pub(crate) struct Outcome {
    pub new_claims: Vec<NewNodeClaim>,
    /// Pods that were running and would not find a place, or would land on an uninitialized node.
    pub errors: Vec<Blocker>,
}

/// One digested snapshot and one prepared solve, shared by every simulation of a pass.
pub(crate) struct Simulator<'a> {
    state: &'a ClusterState,
    input: Input<'a>,
    prepared: OnceCell<Prepared>,
    /// Bound pods by (namespace, name): where a candidate's pods are in `state.bound`.
    bound_index: rustc_hash::FxHashMap<(&'a str, &'a str), usize>,
    uninitialized: BTreeSet<&'a str>,
    settling: &'a BTreeSet<String>,
}

impl<'a> Simulator<'a> {
    pub(crate) fn new(ctx: &Context<'a>, state: &'a ClusterState, survey: &'a Survey) -> Self {
        Self::with_packing(ctx, state, survey, Packing::Upstream)
    }

    /// A simulator whose new NodeClaims are sized by `packing` (repack's is `cost`).
    pub(crate) fn with_packing(
        ctx: &Context<'a>,
        state: &'a ClusterState,
        survey: &'a Survey,
        packing: Packing,
    ) -> Self {
        // Disruption simulates with reservations in fallback mode: they never refuse a pod.
        let options = SchedulerOptions { packing, reserved_fallback: true, ..Default::default() };
        let input = state.input(ctx.snap.nodepools, ctx.catalogs, ctx.policy, options);
        let bound_index =
            state.bound.iter().enumerate().map(|(i, (p, _))| ((p.namespace.as_str(), p.name.as_str()), i)).collect();
        let uninitialized = state.active.iter().filter(|n| !n.initialized).map(|n| n.name.as_str()).collect();
        Simulator { state, input, prepared: OnceCell::new(), bound_index, uninitialized, settling: &survey.settling }
    }

    /// The same simulation over other catalogs, strict about capacity reservations as provisioning is: a pod that
    /// needs a reservation it cannot hold fails instead of falling back (terminate-first's second pass).
    pub(crate) fn strict_with<'b>(
        &'b self,
        ctx: &Context<'b>,
        catalogs: &'b BTreeMap<String, Vec<Arc<InstanceType>>>,
    ) -> Simulator<'b> {
        let options = SchedulerOptions { reserved_fallback: false, ..self.input.options.clone() };
        Simulator {
            state: self.state,
            input: self.state.input(ctx.snap.nodepools, catalogs, ctx.policy, options),
            prepared: OnceCell::new(),
            bound_index: self.bound_index.clone(),
            uninitialized: self.uninitialized.clone(),
            settling: self.settling,
        }
    }

    /// Where would the candidates' pods (and every pod already waiting) go if the candidates were gone? Drift
    /// replaces a node whatever its neighbours are doing; consolidation (`settled_destinations`) does not move
    /// pods onto nodes still inside their consolidateAfter window.
    pub(crate) fn run(&self, candidates: &[&Candidate], settled_destinations: bool) -> Outcome {
        let prepared = self.prepared.get_or_init(|| Prepared::new(&self.input));
        let excluded: BTreeSet<String> = candidates.iter().map(|c| c.node.clone()).collect();
        let mut pods = self.state.to_schedule.clone();
        let mut pending = self.state.provisionable.clone();
        let from_deleting = pods.len();
        for c in candidates {
            for p in &c.pods {
                if let Some(&i) = self.bound_index.get(&(p.namespace.as_str(), p.name.as_str())) {
                    pods.push(self.state.bound[i].0.clone());
                    pending.push(false);
                }
            }
        }
        let mut scheduler = Scheduler::with_prepared(&self.input, prepared, &pods, &excluded);
        if settled_destinations {
            scheduler = scheduler.keep_moved_pods_off(self.settling, from_deleting);
        }
        let results = scheduler.solve(&pods);
        let mut errors = Vec::new();
        for f in &results.failures {
            if !pending[f.pod] {
                errors.push(Blocker::PodsWouldNotFit { pod: pods[f.pod].key(), reason: f.summary() });
            }
        }
        for (i, why) in &results.ignored {
            if !pending[*i] {
                errors.push(Blocker::PodsWouldNotFit { pod: pods[*i].key(), reason: why.to_string() });
            }
        }
        for placement in &results.existing {
            if !self.uninitialized.contains(placement.node.as_str()) {
                continue;
            }
            // Pods of nodes already being deleted may go anywhere; everything else must not count on a node
            // that has not proven itself yet.
            if let Some(&i) = placement.pods.iter().find(|&&i| pending[i] || i >= from_deleting) {
                errors.push(Blocker::UninitializedDestination { pod: pods[i].key(), node: placement.node.clone() });
            }
        }
        Outcome { new_claims: results.new_claims, errors }
    }

    /// The LP lower bound on new capacity for the candidates' pods (see `scheduling::cost::pods_bound`).
    pub(crate) fn bound(&self, candidates: &[&Candidate]) -> Option<f64> {
        let prepared = self.prepared.get_or_init(|| Prepared::new(&self.input));
        let mut pods = Vec::new();
        for c in candidates {
            for p in &c.pods {
                if let Some(&i) = self.bound_index.get(&(p.namespace.as_str(), p.name.as_str())) {
                    pods.push(self.state.bound[i].0.clone());
                }
            }
        }
        crate::engine::scheduling::cost::pods_bound(prepared, &pods)
    }
}

/// The price of the cheapest compatible available offering of `t` under `reqs`.
fn cheapest(t: &InstanceType, reqs: &Requirements) -> Option<f64> {
    t.cheapest_offering(reqs).map(|o| o.price)
}

/// The most the launch could cost with this type: the dearest compatible available offering of the capacity type
/// the cloud would pick (reserved before spot before on-demand).
fn worst_case(t: &InstanceType, reqs: &Requirements) -> Option<f64> {
    let compatible: Vec<_> = t.offerings.iter().filter(|o| o.available && o.compatible(reqs)).collect();
    for ct in [labels::CAPACITY_RESERVED, labels::CAPACITY_SPOT, labels::CAPACITY_ON_DEMAND] {
        let prices = compatible.iter().filter(|o| o.capacity_type == ct).map(|o| o.price);
        if let Some(max) = prices.max_by(f64::total_cmp) {
            return Some(max);
        }
    }
    None
}

/// Whether the types left still satisfy every `minValues` of the requirements.
fn min_values_ok(types: &[Arc<InstanceType>], claim: &NewNodeClaim) -> Result<(), Blocker> {
    if let Some(m) = claim.instance_type_min_values
        && types.len() < m as usize
    {
        return Err(Blocker::MinValues {
            message: format!("{} needs {m} instance types, {} left", labels::INSTANCE_TYPE, types.len()),
        });
    }
    for (key, r) in claim.requirements.iter() {
        let Some(m) = r.min_values else { continue };
        let values: BTreeSet<&str> = types
            .iter()
            .filter_map(|t| t.requirements.get_ref(key))
            .flat_map(|r| r.values.iter().map(String::as_str))
            .collect();
        if values.len() < m as usize {
            return Err(Blocker::MinValues { message: format!("{key} needs {m} values, {} left", values.len()) });
        }
    }
    Ok(())
}

/// Pins the capacity type of a requirement set to spot.
fn pin_spot(reqs: &mut Requirements) {
    reqs.set(labels::CAPACITY_TYPE, Requirement::in_values([labels::CAPACITY_SPOT]));
}

pub(super) fn replacement(ctx: &Context<'_>, mut claim: NewNodeClaim) -> Replacement {
    let price = claim.cheapest_price().unwrap_or(0.0);
    let reqs = &claim.shape.requirements;
    claim.instance_types.sort_by(|a, b| {
        let pa = cheapest(a, reqs).unwrap_or(f64::MAX);
        let pb = cheapest(b, reqs).unwrap_or(f64::MAX);
        pa.total_cmp(&pb).then_with(|| a.name.cmp(&b.name))
    });
    let pool = ctx.snap.nodepools.iter().find(|p| p.name() == claim.nodepool);
    Replacement {
        nodepool: claim.nodepool.clone(),
        instance_types: claim.instance_types.iter().map(|t| t.name.clone()).collect(),
        option_prices: claim
            .instance_types
            .iter()
            .map(|t| cheapest(t, &claim.requirements).unwrap_or(f64::MAX))
            .collect(),
        price,
        nodeclaim: to_nodeclaim(&claim, pool),
    }
}

/// Upstream `computeConsolidation`: delete, or replace with one strictly cheaper NodeClaim, or why not.
fn compute(ctx: &Context<'_>, sim: &Simulator<'_>, cands: &[&Candidate], method: Method) -> Result<Command, Blocker> {
    let out = sim.run(cands, true);
    if let Some(e) = out.errors.into_iter().next() {
        return Err(e);
    }
    let current: f64 = cands.iter().map(|c| c.price).sum();
    let candidates: Vec<Candidate> = cands.iter().map(|c| (*c).clone()).collect();
    let mut claims = out.new_claims;
    match claims.len() {
        0 => {
            return Ok(Command {
                method,
                candidates,
                replacements: Vec::new(),
                savings_per_hour: current,
                computed_at: ctx.now,
                terminate_first: false,
                repair: None,
            });
        }
        1 => {}
        n => return Err(Blocker::WouldCreate { nodeclaims: n }),
    }
    let mut claim = claims.remove(0);
    let ct = claim.requirements.get(labels::CAPACITY_TYPE);
    let (allows_spot, allows_od) = (ct.has(labels::CAPACITY_SPOT), ct.has(labels::CAPACITY_ON_DEMAND));
    let all_spot = cands.iter().all(|c| c.capacity_type == labels::CAPACITY_SPOT);
    let by_price = |types: &mut Vec<(f64, Arc<InstanceType>)>| {
        types.sort_by(|a, b| a.0.total_cmp(&b.0).then_with(|| a.1.name.cmp(&b.1.name)));
    };
    if all_spot && allows_spot {
        if !ctx.options.spot_to_spot {
            return Err(Blocker::SpotToSpotDisabled);
        }
        pin_spot(&mut claim.shape_mut().requirements);
        let mut types: Vec<(f64, Arc<InstanceType>)> = claim
            .instance_types
            .iter()
            .filter_map(|t| cheapest(t, &claim.requirements).filter(|p| *p < current).map(|p| (p, t.clone())))
            .collect();
        by_price(&mut types);
        if method == Method::SingleNode {
            if types.len() < SPOT_TO_SPOT_MIN_TYPES {
                return Err(Blocker::SpotToSpotTooFewOptions { options: types.len() });
            }
            let keep = SPOT_TO_SPOT_MIN_TYPES.max(claim.instance_type_min_values.unwrap_or(0) as usize);
            types.truncate(keep);
        }
        claim.instance_types = types.into_iter().map(|(_, t)| t).collect();
    } else {
        let mut types: Vec<(f64, Arc<InstanceType>)> = claim
            .instance_types
            .iter()
            .filter_map(|t| worst_case(t, &claim.requirements).filter(|p| *p < current).map(|_| t.clone()))
            .map(|t| (cheapest(&t, &claim.requirements).unwrap_or(f64::MAX), t))
            .collect();
        if types.is_empty() {
            let cheapest_now = claim.cheapest_price().unwrap_or(f64::INFINITY);
            return Err(Blocker::NoCheaperReplacement { cheapest: cheapest_now, current });
        }
        by_price(&mut types);
        claim.instance_types = types.into_iter().map(|(_, t)| t).collect();
        // Prices were judged as if spot; don't risk an on-demand fallback that costs more.
        if allows_spot && allows_od {
            pin_spot(&mut claim.shape_mut().requirements);
        }
    }
    if claim.instance_types.is_empty() {
        let cheapest_now = claim.cheapest_price().unwrap_or(f64::INFINITY);
        return Err(Blocker::NoCheaperReplacement { cheapest: cheapest_now, current });
    }
    min_values_ok(&claim.instance_types, &claim)?;
    let r = replacement(ctx, claim);
    Ok(Command {
        method,
        candidates,
        savings_per_hour: current - r.price,
        replacements: vec![r],
        computed_at: ctx.now,
        terminate_first: false,
        repair: None,
    })
}

/// Multi-node: if a candidate's own type is among the options, only strictly cheaper options make sense
/// (otherwise deleting the other candidates is better).
fn filter_out_same_type(cmd: &mut Command) -> bool {
    let Some(r) = cmd.replacements.first_mut() else { return true };
    let same: Option<f64> = cmd
        .candidates
        .iter()
        .filter(|c| r.instance_types.contains(&c.instance_type))
        .map(|c| c.price)
        .min_by(f64::total_cmp);
    let Some(limit) = same else { return true };
    // Options are sorted by price: cut at the first one priced at or above the limit.
    let prices = &r.option_prices;
    let keep = prices.iter().take_while(|p| **p < limit).count();
    r.instance_types.truncate(keep);
    r.option_prices.truncate(keep);
    !r.instance_types.is_empty()
}

/// Balanced policy: every Balanced NodePool involved must find the savings worth the disruption.
fn balanced_ok(ctx: &Context<'_>, cmd: &Command, survey: &Survey) -> Result<(), Blocker> {
    let total_price: f64 = cmd.candidates.iter().map(|c| c.price).sum();
    let estimated = estimated_savings(ctx, cmd);
    let pools: BTreeSet<&str> = cmd.candidates.iter().map(|c| c.nodepool.as_str()).collect();
    for pool in pools {
        let Some(first) = cmd.candidates.iter().find(|c| c.nodepool == pool) else { continue };
        if first.policy != POLICY_BALANCED {
            continue;
        }
        let score = balanced_score(cmd, estimated, survey, pool, total_price);
        if score < 1.0 / BALANCED_K {
            return Err(Blocker::BalancedScore { score });
        }
    }
    Ok(())
}

/// Upstream's `EstimatedSavings`, which Balanced scoring weighs: the candidates' prices less each replacement's
/// price. v1.15 prices a replacement at its cheapest offering that is available and compatible with the claim (what
/// `savings_per_hour` holds); v1.14 at its first option's cheapest available offering, compatible or not, so an
/// on-demand-only claim can be estimated at a spot price.
fn estimated_savings(ctx: &Context<'_>, cmd: &Command) -> f64 {
    if ctx.options.estimate_compatible_offerings || cmd.replacements.is_empty() {
        return cmd.savings_per_hour;
    }
    let source: f64 = cmd.candidates.iter().map(|c| c.price).sum();
    let dest: f64 = cmd
        .replacements
        .iter()
        .filter_map(|r| {
            let first = r.instance_types.first()?;
            let t = ctx.catalogs.get(&r.nodepool)?.iter().find(|t| &t.name == first)?;
            t.offerings.iter().filter(|o| o.available).map(|o| o.price).min_by(f64::total_cmp)
        })
        .sum();
    source - dest
}

fn balanced_score(cmd: &Command, estimated: f64, survey: &Survey, pool: &str, total_price: f64) -> f64 {
    let (pool_cost, pool_disruption) = survey.pool_totals.get(pool).copied().unwrap_or((0.0, 0.0));
    let in_pool: Vec<&Candidate> = cmd.candidates.iter().filter(|c| c.nodepool == pool).collect();
    let share = if total_price > 0.0 { in_pool.iter().map(|c| c.price).sum::<f64>() / total_price } else { 0.0 };
    let savings = estimated * share;
    let moved: f64 = in_pool.iter().map(|c| c.reschedule_cost).sum();
    if pool_cost <= 0.0 || pool_disruption <= 0.0 || moved <= 0.0 {
        return 0.0;
    }
    (savings / pool_cost) / (moved / pool_disruption)
}

/// Budgets per reason for this pass, computed on first use.
struct Budgets<'a> {
    ctx: &'a Context<'a>,
    survey: &'a Survey,
    by_reason: BTreeMap<Reason, BTreeMap<String, BudgetStatus>>,
}

impl<'a> Budgets<'a> {
    fn new(ctx: &'a Context<'a>, survey: &'a Survey) -> Self {
        Budgets { ctx, survey, by_reason: BTreeMap::new() }
    }

    fn get(&mut self, reason: Reason) -> BTreeMap<String, i64> {
        self.statuses(reason).iter().map(|(k, v)| (k.clone(), v.allowed)).collect()
    }

    fn statuses(&mut self, reason: Reason) -> &BTreeMap<String, BudgetStatus> {
        self.by_reason
            .entry(reason)
            .or_insert_with(|| budgets::mapping(self.ctx.snap.nodepools, reason, &self.survey.counts, self.ctx.now))
    }
}

fn sort_for_consolidation(list: &mut [&Candidate]) {
    list.sort_by(|a, b| b.savings_ratio().total_cmp(&a.savings_ratio()).then_with(|| a.node.cmp(&b.node)));
}

/// Emptiness: every empty candidate within budget, in one delete command.
fn emptiness(ctx: &Context<'_>, survey: &Survey, budgets: &mut Budgets<'_>) -> (Option<Command>, bool) {
    let mut list: Vec<&Candidate> =
        survey.candidates.iter().filter(|c| c.is_empty() && c.for_emptiness().is_ok()).collect();
    sort_for_consolidation(&mut list);
    let mut left = budgets.get(Reason::Empty);
    let mut chosen = Vec::new();
    let mut constrained = false;
    for c in list {
        let b = left.entry(c.nodepool.clone()).or_insert(0);
        if *b > 0 {
            *b -= 1;
            chosen.push(c.clone());
        } else {
            constrained = true;
        }
    }
    if chosen.is_empty() {
        return (None, constrained);
    }
    let savings = chosen.iter().map(|c| c.price).sum();
    let cmd = Command {
        method: Method::Emptiness,
        candidates: chosen,
        replacements: Vec::new(),
        savings_per_hour: savings,
        computed_at: ctx.now,
        terminate_first: false,
        repair: None,
    };
    (Some(cmd), constrained)
}

/// Drift: the oldest drifted candidate (empty ones first) whose pods all fit, replaced by whatever they need.
fn drift<'s>(
    ctx: &Context<'_>,
    survey: &Survey,
    sim: impl Fn() -> &'s Simulator<'s>,
    budgets: &mut Budgets<'_>,
) -> Option<Command> {
    let mut list: Vec<&Candidate> =
        survey.candidates.iter().filter(|c| c.drifted.is_some() && c.for_drift().is_ok()).collect();
    list.sort_by(|a, b| {
        (!a.is_empty(), a.drifted.as_ref().map(|d| d.0), &a.node).cmp(&(
            !b.is_empty(),
            b.drifted.as_ref().map(|d| d.0),
            &b.node,
        ))
    });
    let left = budgets.get(Reason::Drifted);
    for c in list {
        if left.get(&c.nodepool).copied().unwrap_or(0) <= 0 {
            continue;
        }
        let out = sim().run(&[c], false);
        if !out.errors.is_empty() {
            // Nowhere to stage a replacement; v1.15 deletes first when that frees the reservation slot it needs.
            if ctx.options.terminate_first_drift && super::terminate_first::fits_after_delete(ctx, sim(), c) {
                return Some(super::terminate_first::command(ctx, Method::Drift, vec![c.clone()]));
            }
            continue;
        }
        let replacements: Vec<Replacement> = out.new_claims.into_iter().map(|n| replacement(ctx, n)).collect();
        return Some(Command {
            method: Method::Drift,
            candidates: vec![c.clone()],
            replacements,
            savings_per_hour: 0.0,
            computed_at: ctx.now,
            terminate_first: false,
            repair: None,
        });
    }
    None
}

/// Every candidate consolidation may consider, in consolidation order.
fn consolidation_candidates(survey: &Survey) -> Vec<&Candidate> {
    let mut list: Vec<&Candidate> =
        survey.candidates.iter().filter(|c| !c.is_empty() && c.for_consolidation().is_ok()).collect();
    sort_for_consolidation(&mut list);
    list
}

/// The consolidation candidates in order, cut to the budgets (multi-node), and whether any was held back.
fn consolidation_list<'s>(survey: &'s Survey, budgets: &mut Budgets<'_>) -> (Vec<&'s Candidate>, bool) {
    let list = consolidation_candidates(survey);
    let mut left = budgets.get(Reason::Underutilized);
    let mut out = Vec::new();
    let mut constrained = false;
    for c in list {
        let b = left.entry(c.nodepool.clone()).or_insert(0);
        if *b > 0 {
            *b -= 1;
            out.push(c);
        } else {
            constrained = true;
        }
    }
    (out, constrained)
}

/// Multi-node: the longest prefix of the candidate list that can go at once (binary search).
fn multi_node<'s>(
    ctx: &Context<'_>,
    survey: &Survey,
    sim: impl Fn() -> &'s Simulator<'s>,
    list: &[&Candidate],
) -> Option<Command> {
    let list = &list[..list.len().min(ctx.options.multi_node_cap + 1)];
    if list.len() < 2 {
        return None;
    }
    longest_prefix(1, (list.len() - 1).min(ctx.options.multi_node_cap), |mid| {
        compute(ctx, sim(), &list[..=mid], Method::MultiNode)
            .ok()
            .filter(|cmd| balanced_ok(ctx, cmd, survey).is_ok())
            .and_then(|mut cmd| filter_out_same_type(&mut cmd).then_some(cmd))
    })
}

/// Binary search for the largest `mid` in `lo..=hi` whose prefix `try_prefix(mid)` gives a command (upstream's
/// multi-node search, which assumes a prefix that works means the shorter ones do too).
fn longest_prefix(mut lo: usize, mut hi: usize, try_prefix: impl Fn(usize) -> Option<Command>) -> Option<Command> {
    let mut best = None;
    while lo <= hi {
        let mid = (lo + hi) / 2;
        match try_prefix(mid) {
            Some(cmd) => {
                best = Some(cmd);
                lo = mid + 1;
            }
            None => {
                if mid == 0 {
                    break;
                }
                hi = mid - 1;
            }
        }
    }
    best
}

/// Repack (cost packing): the pods of the candidates re-solved with cost packing onto as many new NodeClaims as
/// that wants. Valid when every pod finds a place and the new NodeClaims cost at least [`REPACK_MIN_SAVINGS`]
/// less than the candidates.
fn compute_repack(ctx: &Context<'_>, sim: &Simulator<'_>, cands: &[&Candidate]) -> Result<Command, Blocker> {
    let current: f64 = cands.iter().map(|c| c.price).sum();
    // No packing of these pods onto new capacity costs less than the LP bound: when even that would not save
    // enough, don't re-solve. (Pods that could move onto room elsewhere are counted as needing new capacity, so
    // this may pass over a repack that also uses such room; it never proposes a worse one.)
    if let Some(bound) = sim.bound(cands)
        && current - bound < REPACK_MIN_SAVINGS * current
    {
        return Err(Blocker::NoCheaperReplacement { cheapest: bound, current });
    }
    let out = sim.run(cands, true);
    if let Some(e) = out.errors.into_iter().next() {
        return Err(e);
    }
    let replacements: Vec<Replacement> = out.new_claims.into_iter().map(|n| replacement(ctx, n)).collect();
    let new_price: f64 = replacements.iter().map(|r| r.price).sum();
    if current - new_price < REPACK_MIN_SAVINGS * current || replacements.iter().any(|r| r.instance_types.is_empty()) {
        return Err(Blocker::NoCheaperReplacement { cheapest: new_price, current });
    }
    Ok(Command {
        method: Method::Repack,
        candidates: cands.iter().map(|c| (*c).clone()).collect(),
        savings_per_hour: current - new_price,
        replacements,
        computed_at: ctx.now,
        terminate_first: false,
        repair: None,
    })
}

/// Repack over the consolidation list: the longest prefix (from one node up) that repacks cheaper, found like
/// multi-node's.
fn repack<'s>(
    ctx: &Context<'_>,
    survey: &Survey,
    sim: impl Fn() -> &'s Simulator<'s>,
    list: &[&Candidate],
) -> Option<Command> {
    let list = &list[..list.len().min(ctx.options.multi_node_cap)];
    if list.is_empty() {
        return None;
    }
    longest_prefix(0, list.len() - 1, |mid| {
        compute_repack(ctx, sim(), &list[..=mid]).ok().filter(|cmd| balanced_ok(ctx, cmd, survey).is_ok())
    })
}

/// Round-robin over NodePools, each pool's candidates in order.
fn interleave<'s>(list: &[&'s Candidate]) -> Vec<&'s Candidate> {
    let mut pools: Vec<(&str, Vec<&'s Candidate>)> = Vec::new();
    for c in list {
        match pools.iter_mut().find(|(p, _)| *p == c.nodepool) {
            Some((_, v)) => v.push(c),
            None => pools.push((&c.nodepool, vec![c])),
        }
    }
    let mut out = Vec::with_capacity(list.len());
    let mut i = 0;
    while out.len() < list.len() {
        for (_, v) in &pools {
            if let Some(c) = v.get(i) {
                out.push(*c);
            }
        }
        i += 1;
    }
    out
}

/// Whether even deleting the candidate outright would pass the Balanced policy (cheap pre-check).
fn balanced_could_pass(ctx: &Context<'_>, c: &Candidate, survey: &Survey) -> Result<(), Blocker> {
    if c.policy != POLICY_BALANCED {
        return Ok(());
    }
    let best = Command {
        method: Method::SingleNode,
        candidates: vec![c.clone()],
        replacements: Vec::new(),
        savings_per_hour: c.price,
        computed_at: 0,
        terminate_first: false,
        repair: None,
    };
    balanced_ok(ctx, &best, survey)
}

/// Single-node consolidation of one candidate: the command, or why not.
fn single(ctx: &Context<'_>, survey: &Survey, sim: &Simulator<'_>, c: &Candidate) -> Result<Command, Blocker> {
    balanced_could_pass(ctx, c, survey)?;
    let cmd = compute(ctx, sim, &[c], Method::SingleNode)?;
    balanced_ok(ctx, &cmd, survey)?;
    Ok(cmd)
}

/// One disruption pass: the first method that produces a command wins.
pub fn pass(ctx: &Context<'_>) -> PassResult {
    let survey = survey(ctx);
    // The cluster state and its simulator are built when a method first simulates: a pass that ends at emptiness,
    // or has no drifted or consolidatable candidate, never pays for them.
    let (state, upstream) = (OnceCell::new(), OnceCell::new());
    let state = || state.get_or_init(|| ClusterState::new(&ctx.snap, ctx.catalogs, ctx.policy));
    let sim = || upstream.get_or_init(|| Simulator::new(ctx, state(), &survey));
    let mut budgets = Budgets::new(ctx, &survey);
    let waits = survey.candidates.iter().filter_map(|c| match &c.consolidation_wait {
        Some(Blocker::ConsolidateAfter { left }) => Some(ctx.now + left),
        _ => None,
    });
    let nominations = survey.blocked.values().filter_map(|b| match b {
        Blocker::Nominated { until } => Some(ctx.now + until),
        _ => None,
    });
    let recheck_at = waits.chain(nominations).chain(survey.do_not_disrupt_until).chain(ctx.repair.next_due).min();
    let mut result = PassResult { candidates: survey.candidates.len(), recheck_at, ..Default::default() };
    let mut constrained = false;
    // Repair goes first (v1.15): a broken node matters more than a cheaper one.
    let (cmd, blocked) = super::repair::repair(ctx, &survey, sim, &budgets.get(Reason::Unhealthy));
    result.blocked = blocked;
    if cmd.is_some() {
        result.command = cmd;
        return result;
    }
    if !ctx.options.consolidated {
        let (cmd, c) = emptiness(ctx, &survey, &mut budgets);
        constrained |= c;
        if cmd.is_some() {
            result.command = cmd;
            return result;
        }
    }
    // Upstream runs static drift right after emptiness.
    if let Some(cmd) =
        super::static_drift::static_drift(ctx, &survey, &budgets.get(Reason::Drifted), &mut result.blocked)
    {
        result.command = Some(cmd);
        return result;
    }
    if let Some(cmd) = drift(ctx, &survey, sim, &mut budgets) {
        result.command = Some(cmd);
        return result;
    }
    if ctx.options.consolidated {
        result.consolidated = true;
        return result;
    }
    let (list, c) = consolidation_list(&survey, &mut budgets);
    constrained |= c;
    if let Some(cmd) = multi_node(ctx, &survey, sim, &list) {
        result.command = Some(cmd);
        return result;
    }
    // Single-node tries every candidate whose pool has any budget left: only one node goes at a time.
    let left = budgets.get(Reason::Underutilized);
    for c in interleave(&consolidation_candidates(&survey)) {
        if left.get(&c.nodepool).copied().unwrap_or(0) <= 0 {
            constrained = true;
            continue;
        }
        if let Ok(cmd) = single(ctx, &survey, sim(), c) {
            result.command = Some(cmd);
            return result;
        }
    }
    // Cost packing: what upstream's methods can't do, several nodes to several cheaper ones.
    if ctx.options.packing == Packing::Cost {
        let cost = OnceCell::new();
        let cost_sim = || cost.get_or_init(|| Simulator::with_packing(ctx, state(), &survey, Packing::Cost));
        if let Some(cmd) = repack(ctx, &survey, cost_sim, &list) {
            result.command = Some(cmd);
            return result;
        }
    }
    result.consolidated = !constrained;
    result
}

/// Multi-node consolidation alone over the current state: the largest prefix of the candidates that can go at
/// once, within budgets. (The benchmark's multi-node pass, and the dashboard's "what would consolidate now".)
pub fn multi_node_consolidation(ctx: &Context<'_>) -> Option<Command> {
    let survey = survey(ctx);
    let state = ClusterState::new(&ctx.snap, ctx.catalogs, ctx.policy);
    let sim = Simulator::new(ctx, &state, &survey);
    let mut budgets = Budgets::new(ctx, &survey);
    let (list, _) = consolidation_list(&survey, &mut budgets);
    multi_node(ctx, &survey, || &sim, &list)
}

/// What would happen to one node, for the "why is this node not being consolidated" view.
#[derive(Debug, Clone)]
pub enum Outlook {
    /// Not disrupted, and why (most specific first).
    Blocked(Vec<Blocker>),
    /// A voluntary method would disrupt it now (subject to budgets shared with other nodes and validation).
    Disruptable(Command),
}

/// Evaluates every node: blocked nodes say why; every candidate gets its own single-node consolidation (or
/// emptiness/drift) verdict. This is the full single-node pass of the consolidation benchmark.
pub fn explain_nodes(ctx: &Context<'_>) -> BTreeMap<String, Outlook> {
    let survey = survey(ctx);
    let state = ClusterState::new(&ctx.snap, ctx.catalogs, ctx.policy);
    let sim = Simulator::new(ctx, &state, &survey);
    let mut budgets = Budgets::new(ctx, &survey);
    let mut out: BTreeMap<String, Outlook> =
        survey.blocked.iter().map(|(n, b)| (n.clone(), Outlook::Blocked(vec![b.clone()]))).collect();
    for c in &survey.candidates {
        let mut why = Vec::new();
        let (method, check) = if c.drifted.is_some() {
            (Method::Drift, c.for_drift())
        } else if c.is_empty() {
            (Method::Emptiness, c.for_emptiness())
        } else {
            (Method::SingleNode, c.for_consolidation())
        };
        if let Err(b) = check {
            why.push(b);
            out.insert(c.node.clone(), Outlook::Blocked(why));
            continue;
        }
        let reason = method.reason();
        let status = budgets.statuses(reason).get(&c.nodepool).cloned();
        if let Some(s) = status.filter(|s| s.allowed <= 0) {
            why.push(Blocker::Budget { message: s.why_zero(&c.nodepool, reason) });
        }
        let verdict = match method {
            Method::Emptiness => Ok(Command {
                method,
                candidates: vec![c.clone()],
                replacements: Vec::new(),
                savings_per_hour: c.price,
                computed_at: ctx.now,
                terminate_first: false,
                repair: None,
            }),
            Method::Drift => {
                let o = sim.run(&[c], false);
                match o.errors.into_iter().next() {
                    Some(_)
                        if ctx.options.terminate_first_drift
                            && super::terminate_first::fits_after_delete(ctx, &sim, c) =>
                    {
                        Ok(super::terminate_first::command(ctx, method, vec![c.clone()]))
                    }
                    Some(e) => Err(e),
                    None => Ok(Command {
                        method,
                        candidates: vec![c.clone()],
                        replacements: o.new_claims.into_iter().map(|n| replacement(ctx, n)).collect(),
                        savings_per_hour: 0.0,
                        computed_at: ctx.now,
                        terminate_first: false,
                        repair: None,
                    }),
                }
            }
            _ => single(ctx, &survey, &sim, c),
        };
        match verdict {
            Ok(cmd) if why.is_empty() => {
                out.insert(c.node.clone(), Outlook::Disruptable(cmd));
            }
            Ok(_) => {
                out.insert(c.node.clone(), Outlook::Blocked(why));
            }
            Err(b) => {
                why.push(b);
                out.insert(c.node.clone(), Outlook::Blocked(why));
            }
        }
    }
    // A node due for repair (v1.15) is repair's before any other method's.
    for b in &survey.repair_blocked {
        out.insert(b.node.clone(), Outlook::Blocked(vec![Blocker::Repair { message: b.why.message() }]));
    }
    if !ctx.repair.due.is_empty() {
        let left = budgets.get(Reason::Unhealthy);
        for (c, due) in super::repair::due_candidates(ctx, &survey) {
            let outlook = match super::repair::evaluate(ctx, c, due, &|| &sim, &left) {
                Verdict::Repair(cmd) => Outlook::Disruptable(*cmd),
                Verdict::Blocked(why) => Outlook::Blocked(vec![Blocker::Repair { message: why.message() }]),
                Verdict::Budget => {
                    let status = budgets.statuses(Reason::Unhealthy).get(&c.nodepool).cloned();
                    let message = status.map_or_else(String::new, |s| s.why_zero(&c.nodepool, Reason::Unhealthy));
                    Outlook::Blocked(vec![Blocker::Budget { message }])
                }
                Verdict::OverScaled => Outlook::Blocked(vec![Blocker::Repair {
                    message: "its static NodePool is over its replicas: scale-down goes first".into(),
                }]),
            };
            out.insert(c.node.clone(), outlook);
        }
    }
    out
}
