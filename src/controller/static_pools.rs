//! Static NodePools (gate `StaticCapacity`), as upstream's `static.provisioning` and `static.deprovisioning`: a
//! pool with `spec.replicas` keeps that many NodeClaims, within `limits.nodes`. Scale-up launches template claims
//! (the cloud picks the type); scale-down deletes the excess directly — forceful: budgets are not asked, and
//! do-not-disrupt only orders the candidates (the drain still honours PDBs and the grace period). Static drift is
//! the disruption pass's (see `engine::disruption::consolidation::pass`).

use super::out::Out;
use super::timing::SECOND;
use super::{Controller, Effect, Purpose};
use crate::engine::api::NodePool;
use crate::engine::lifecycle::DeleteReason;
use crate::engine::provisioning::{ClusterSnapshot, Millis};
use crate::engine::static_capacity::{self as sc, PoolCount};

/// A pool whose node limit allows no more claims is looked at again after this long (upstream 30 s).
pub const LIMIT_REQUEUE: Millis = 30 * SECOND;

fn ready(pool: &NodePool) -> bool {
    pool.status.as_ref().is_some_and(|s| s.conditions.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

impl Controller {
    /// Static provisioning and deprovisioning for every static pool of this cloud.
    pub(super) fn static_pools(&mut self, s: &ClusterSnapshot<'_>, now: Millis, out: &mut Out) {
        if !self.gates.static_capacity || !s.nodepools.iter().any(sc::is_static) {
            return;
        }
        self.static_requeue = None;
        // Claims created but not in the cache yet would be counted as missing and made again: scale-up waits for
        // them (scale-down does not, as upstream's does not wait for the cluster to sync).
        self.forget_settled(s, now);
        let settling = !self.created.is_empty() || self.creating > 0;
        let busy = self.busy();
        let nodes = crate::engine::state::Nodes::of(s).with_pods(s.pods);
        let pools: Vec<&NodePool> = s.nodepools.iter().filter(|p| sc::is_static(p) && self.manages(p)).collect();
        for pool in pools {
            if pool.metadata.deletion_timestamp.is_some() {
                continue;
            }
            let replicas = pool.spec.replicas.unwrap_or(0).max(0);
            let c: PoolCount = sc::count(pool.name(), s.nodeclaims.iter(), &nodes, &busy);
            // Scale-down counts only running claims: a drift's replacement and its candidate are both there for a
            // while, and that is not an excess.
            let excess = c.active.saturating_sub(replicas);
            if excess > 0 {
                let victims = sc::scale_down_order(pool, s.nodeclaims.iter(), &nodes, &busy, excess as usize, now);
                for name in victims {
                    out.push(Effect::DeleteNodeClaim { name, reason: DeleteReason::Overprovisioned });
                }
                continue;
            }
            if settling || !ready(pool) || c.active.saturating_add(c.pending) >= replicas {
                continue;
            }
            let granted = sc::grant(sc::node_limit(pool), &c, replicas.saturating_sub(c.active));
            if granted == 0 {
                tracing::debug!(nodepool = pool.name(), "nodepool node limit reached");
                let at = now + LIMIT_REQUEUE;
                self.static_requeue = Some(self.static_requeue.map_or(at, |t| t.min(at)));
                continue;
            }
            for _ in 0..granted {
                self.creating += 1;
                out.push(Effect::CreateNodeClaim {
                    claim: Box::new(sc::static_nodeclaim(pool)),
                    purpose: Purpose::Static { nodepool: pool.name().to_string() },
                });
            }
        }
    }

    /// When the static pools' step asked to look again (a node limit that allowed nothing), as of its last run.
    pub fn static_requeue_at(&self) -> Option<Millis> {
        self.static_requeue
    }

    /// The static pools' step on its own (see [`Controller::orchestrate_commands`]).
    pub fn static_capacity(&mut self, s: &ClusterSnapshot<'_>, now: Millis) -> Vec<Effect> {
        let mut out = Out::default();
        self.static_pools(s, now, &mut out);
        out.finish(s)
    }
}
