//! Static drift (upstream `disruption/staticdrift.go`, gate `StaticCapacity`): a drifted NodeClaim of a static
//! NodePool is replaced 1→1 by a fresh template claim, without a scheduling simulation (the replacement is the
//! template itself) and as eventual disruption (its pods' PDBs and do-not-disrupt hold the drain, not the command).
//! Per pool: nothing while the pool is over-scaled (scale-down finishes first); at most the `Drifted` budget; and
//! each replacement needs a unit of `limits.nodes` — a full pool with `limits.nodes == replicas` cannot drift,
//! unless v1.15's `TerminateFirstDrift` deletes such nodes first and lets static provisioning refill them.

use std::collections::BTreeMap;

use super::candidates::{Candidate, Survey};
use super::repair::{BlockReason, DisruptionBlocked};
use super::terminate_first as tf;
use super::{Command, Context, Method, Replacement};
use crate::engine::static_capacity::{self as sc};

/// The first static drift command the cluster allows, if any: one candidate, one replacement; or, under v1.15's
/// `TerminateFirstDrift`, the candidates the pool cannot replace first deleted first. `left` is what each pool's
/// `Drifted` budgets allow now. Candidates held back with an Event's worth of why go to `blocked`.
pub fn static_drift(
    ctx: &Context<'_>,
    survey: &Survey,
    left: &BTreeMap<String, i64>,
    blocked: &mut Vec<DisruptionBlocked>,
) -> Option<Command> {
    let mut drifted: BTreeMap<&str, Vec<&Candidate>> = BTreeMap::new();
    for c in survey.static_candidates.iter().filter(|c| c.drifted.is_some()) {
        drifted.entry(c.nodepool.as_str()).or_default().push(c);
    }
    if drifted.is_empty() {
        return None;
    }
    let nodes = crate::engine::state::Nodes::of(&ctx.snap);
    for (pool_name, mut list) in drifted {
        let Some(pool) = ctx.snap.nodepools.iter().find(|p| p.name() == pool_name) else { continue };
        let replicas = pool.spec.replicas.unwrap_or(0);
        let budget = left.get(pool_name).copied().unwrap_or(0);
        let count = sc::count(pool_name, ctx.snap.nodeclaims.iter(), &nodes, ctx.busy);
        // Over-scaled pools finish their scale-down first; a spent budget allows nothing.
        if budget <= 0 || count.active + count.pending > replicas {
            continue;
        }
        // Longest drifted first, then by name: the same candidates every pass.
        list.sort_by(|a, b| {
            (a.drifted.as_ref().map(|d| d.0), &a.node).cmp(&(b.drifted.as_ref().map(|d| d.0), &b.node))
        });
        let max = usize::try_from(budget).unwrap_or(usize::MAX).min(list.len());
        if ctx.options.terminate_first_drift
            && let Some(offered) = tf::full_reservations(ctx, pool)
        {
            // Only a node in a still-offered reservation frees the slot its refill needs: those go first.
            list.sort_by_key(|c| !tf::holds_slot(c, &offered));
            let go = tf::refillable(pool);
            let (first, held): (Vec<&Candidate>, Vec<&Candidate>) =
                list.into_iter().take(max).partition(|c| go && tf::holds_slot(c, &offered));
            blocked.extend(held.into_iter().map(|c| DisruptionBlocked::of(c, BlockReason::StaticReservationsFull)));
            if first.is_empty() {
                continue;
            }
            return Some(tf::command(ctx, Method::StaticDrift, first.into_iter().cloned().collect()));
        }
        let granted = sc::drift_allowance(&count, replicas, budget, list.len() as i64, sc::node_limit(pool));
        if granted <= 0 {
            // At `limits.nodes`: nothing can be staged first.
            let chosen = list.into_iter().take(max);
            if ctx.options.terminate_first_drift && tf::refillable(pool) {
                return Some(tf::command(ctx, Method::StaticDrift, chosen.cloned().collect()));
            }
            blocked.extend(chosen.map(|c| DisruptionBlocked::of(c, BlockReason::StaticAtLimit)));
            continue;
        }
        // Upstream queues one 1→1 command per granted candidate in the same pass; here they are one command with a
        // template replacement per candidate, so the budget's width is used at once either way.
        let chosen: Vec<&Candidate> = list.into_iter().take(usize::try_from(granted).unwrap_or(0)).collect();
        let replacement = || Replacement {
            nodepool: pool_name.to_string(),
            instance_types: Vec::new(),
            option_prices: Vec::new(),
            price: 0.0,
            nodeclaim: sc::static_nodeclaim(pool),
        };
        return Some(Command {
            method: Method::StaticDrift,
            replacements: chosen.iter().map(|_| replacement()).collect(),
            candidates: chosen.into_iter().cloned().collect(),
            savings_per_hour: 0.0,
            computed_at: ctx.now,
            terminate_first: false,
            repair: None,
        });
    }
    None
}
