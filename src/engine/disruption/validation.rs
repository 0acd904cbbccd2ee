//! Validation before a command starts (engine.md §5.9): after the validation delay in `auto` mode, and at
//! approval time in `approve` mode, the command must still hold against the cluster as it is now.

use std::collections::BTreeMap;

use thiserror::Error;

use super::candidates::{Candidate, survey};
use super::consolidation::Simulator;
use super::{Blocker, Command, Context, Method, budgets};
use crate::engine::packing::Packing;
use crate::engine::provisioning::ClusterState;
use crate::engine::static_capacity as sc;

/// Why a command no longer holds; the three upstream `ConsolidationRejected` reasons.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum Invalid {
    /// A candidate changed: deleted, got a do-not-disrupt pod or a blocking PDB, was nominated, filled up…
    #[error("node {node} changed: {why}")]
    Churn { node: String, why: String },
    #[error("{0}")]
    Budget(String),
    #[error("scheduling changed: {0}")]
    Scheduling(String),
}

impl Invalid {
    /// The upstream event reason.
    pub fn kind(&self) -> &'static str {
        match self {
            Invalid::Churn { .. } => "churn",
            Invalid::Budget(_) => "budget",
            Invalid::Scheduling(_) => "scheduling",
        }
    }
}

/// Re-checks `cmd` against the current state. `ctx.busy` must not contain the command's own nodes.
pub fn validate(ctx: &Context<'_>, cmd: &Command) -> Result<(), Invalid> {
    let s = survey(ctx);
    let mut fresh = Vec::new();
    for c in &cmd.candidates {
        let churn = |why: String| Invalid::Churn { node: c.node.clone(), why };
        let found = match cmd.method {
            Method::StaticDrift => s.static_candidates.iter().find(|x| x.node == c.node),
            // Repair takes nodes the other methods may not (nominated, uninitialized, do-not-disrupt), static or not.
            Method::Repair => {
                s.candidates.iter().chain(&s.repair_candidates).chain(&s.static_candidates).find(|x| x.node == c.node)
            }
            _ => s.candidates.iter().find(|x| x.node == c.node),
        };
        let Some(now) = found else {
            let why = s.blocked.get(&c.node).map_or_else(|| "it is gone".to_string(), Blocker::to_string);
            return Err(churn(why));
        };
        let check = match cmd.method {
            Method::Emptiness => {
                if now.is_empty() {
                    now.for_emptiness()
                } else {
                    Err(Blocker::PodsWouldNotFit {
                        pod: now.pods[0].key(),
                        reason: "the node is no longer empty".into(),
                    })
                }
            }
            Method::Drift => {
                if now.drifted.is_some() {
                    now.for_drift()
                } else {
                    return Err(churn("it is no longer drifted".into()));
                }
            }
            Method::Repair => {
                let Some(due) = ctx.repair.due.get(&c.node) else {
                    return Err(churn("its repair is no longer due".into()));
                };
                if let Some(why) = super::repair::veto(now, due) {
                    return Err(churn(why.message()));
                }
                Ok(())
            }
            // Eventual: pod blockers hold the drain, not the command.
            Method::StaticDrift => {
                if now.drifted.is_some() {
                    Ok(())
                } else {
                    return Err(churn("it is no longer drifted".into()));
                }
            }
            _ => now.for_consolidation(),
        };
        check.map_err(|b| churn(b.to_string()))?;
        fresh.push(now);
    }
    // Budgets, recomputed: all candidates of each pool must still fit in what the pool allows.
    let statuses = budgets::mapping(ctx.snap.nodepools, cmd.reason(), &s.counts, ctx.now);
    let mut need: BTreeMap<&str, i64> = BTreeMap::new();
    // An uninitialized node's repair is not paced by budgets.
    for c in fresh.iter().filter(|c| cmd.method != Method::Repair || c.initialized) {
        *need.entry(c.nodepool.as_str()).or_insert(0) += 1;
    }
    for (pool, n) in need {
        let st = statuses.get(pool);
        let allowed = st.map_or(0, |s| s.allowed);
        if allowed < n {
            let why = st.map_or_else(|| format!("NodePool {pool:?} is gone"), |s| s.why_zero(pool, cmd.reason()));
            return Err(Invalid::Budget(format!(
                "needs {n} disruption(s) of NodePool {pool:?}, {allowed} allowed: {why}"
            )));
        }
    }
    // Neither needs a simulation: emptiness moves no pods, and a static pool's replacement is its template.
    let is_static = |c: &&Candidate| ctx.snap.nodepools.iter().any(|p| p.name() == c.nodepool && sc::is_static(p));
    // A reboot keeps its node: nothing needs a place elsewhere.
    if matches!(cmd.method, Method::Emptiness | Method::StaticDrift)
        || cmd.is_reboot()
        || cmd.method == Method::Repair && fresh.iter().all(is_static)
    {
        return Ok(());
    }
    let state = ClusterState::new(&ctx.snap, ctx.catalogs, ctx.policy);
    if cmd.terminate_first {
        // Nothing is staged: what matters is that the pods it frees find a place once it is gone, now or through
        // the reservation slot it gives back.
        let sim = Simulator::new(ctx, &state, &s);
        let out = sim.run(&fresh, false);
        return match out.errors.first() {
            None => Ok(()),
            Some(_) if fresh.iter().all(|c| super::terminate_first::fits_after_delete(ctx, &sim, c)) => Ok(()),
            Some(e) => Err(Invalid::Scheduling(e.to_string())),
        };
    }
    let packing = if cmd.method == Method::Repack { Packing::Cost } else { Packing::Upstream };
    let sim = Simulator::with_packing(ctx, &state, &s, packing);
    let replaces = matches!(cmd.method, Method::Drift | Method::Repair);
    let out = sim.run(&fresh, !replaces);
    if let Some(e) = out.errors.first() {
        return Err(Invalid::Scheduling(e.to_string()));
    }
    match (cmd.replacements.len(), out.new_claims.as_slice()) {
        (0, []) => Ok(()),
        (0, claims) => {
            Err(Invalid::Scheduling(format!("removing the nodes would now need {} new NodeClaim(s)", claims.len())))
        }
        (_, []) => Ok(()),
        (n, claims) if cmd.method == Method::Repack => {
            let now: f64 = claims.iter().filter_map(|c| c.cheapest_price()).sum();
            let current: f64 = fresh.iter().map(|c| c.price).sum();
            if claims.len() > n {
                Err(Invalid::Scheduling(format!("repacking would now need {} NodeClaims, not {n}", claims.len())))
            } else if now >= current {
                Err(Invalid::Scheduling(format!("repacking would now cost ${now:.4}/h, not less than ${current:.4}/h")))
            } else {
                Ok(())
            }
        }
        (n, claims) if replaces => {
            if claims.len() <= n {
                Ok(())
            } else {
                Err(Invalid::Scheduling(format!("replacing would now need {} NodeClaims, not {n}", claims.len())))
            }
        }
        (_, [one]) => {
            // Price filtering shrank the command's list: the new options must still include all of it.
            let missing: Vec<&String> = cmd.replacements[0]
                .instance_types
                .iter()
                .filter(|t| !one.instance_types.iter().any(|x| &x.name == *t))
                .collect();
            if missing.is_empty() {
                Ok(())
            } else {
                Err(Invalid::Scheduling(format!(
                    "the replacement could no longer be {}",
                    missing.iter().take(3).map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
                )))
            }
        }
        (_, claims) => Err(Invalid::Scheduling(format!("replacing would now need {} NodeClaims", claims.len()))),
    }
}
