//! Disruption: which nodes to take away, and why not the others (engine.md §5).
//!
//! A pass looks at the cluster through the same digested snapshot provisioning uses and tries the voluntary
//! methods in upstream's order — emptiness, drift, multi-node consolidation, single-node consolidation; the first
//! that produces a [`Command`] wins. Consolidation decisions come from scheduling simulations ("if these nodes were
//! gone, where would their pods go?") over one [`crate::engine::scheduling::Prepared`] solve shared by every
//! candidate. Nothing here acts: commands go to the approval gate and the orchestration queue, which the
//! runtime drives through the ports. Every node that is not disrupted gets a [`Blocker`] a person can act on.
//!
//! Forceful paths (expiration, interruption) live in `lifecycle` and the runtime: they bypass budgets.

pub mod budgets;
pub mod candidates;
pub mod consolidation;
pub mod gate;
pub mod queue;
pub mod repair;
pub mod static_drift;
pub mod terminate_first;
pub mod validation;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::Arc;

use crate::engine::api::NodeClaim;
use crate::engine::catalog::InstanceType;
use crate::engine::labels::LabelPolicy;
use crate::engine::provisioning::{ClusterSnapshot, Millis};

pub use self::budgets::BudgetStatus;
pub use self::candidates::{Candidate, PodRef};
pub use self::consolidation::{explain_nodes, pass};

/// How a command came about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Method {
    /// Karpenter v1.15's node repair (gate `NodeRepair`): an unhealthy node replaced, paced by budgets.
    Repair,
    Emptiness,
    Drift,
    /// A static NodePool's drifted claim replaced 1→1 by a template claim.
    StaticDrift,
    MultiNode,
    SingleNode,
    /// Cost packing only: several nodes replaced by more, cheaper ones (upstream allows at most one replacement).
    Repack,
    Expiration,
    Interruption,
}

impl Method {
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Repair => "repair",
            Method::Emptiness => "emptiness",
            Method::Drift => "drift",
            Method::StaticDrift => "static-drift",
            Method::MultiNode => "multi-node",
            Method::SingleNode => "single-node",
            Method::Repack => "repack",
            Method::Expiration => "expiration",
            Method::Interruption => "interruption",
        }
    }

    pub fn reason(self) -> Reason {
        match self {
            Method::Repair => Reason::Unhealthy,
            Method::Emptiness => Reason::Empty,
            Method::Drift | Method::StaticDrift => Reason::Drifted,
            Method::MultiNode | Method::SingleNode | Method::Repack => Reason::Underutilized,
            Method::Expiration => Reason::Expired,
            Method::Interruption => Reason::Interrupted,
        }
    }

    /// Voluntary methods go through budgets, validation and the approval gate.
    pub fn is_voluntary(self) -> bool {
        !matches!(self, Method::Expiration | Method::Interruption)
    }
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The reason recorded on a disruption (and the budget reason for voluntary ones).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Reason {
    Empty,
    Underutilized,
    Drifted,
    Expired,
    Interrupted,
    /// Node repair (v1.15's budget reason).
    Unhealthy,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Empty => "Empty",
            Reason::Underutilized => "Underutilized",
            Reason::Drifted => "Drifted",
            Reason::Expired => "Expired",
            Reason::Interrupted => "Interrupted",
            Reason::Unhealthy => "Unhealthy",
        }
    }
}

/// A NodeClaim a command launches before its candidates go.
#[derive(Debug, Clone)]
pub struct Replacement {
    pub nodepool: String,
    /// Instance-type options handed to the cloud, cheapest first.
    pub instance_types: Vec<String>,
    /// The cheapest compatible available offering of each option, $/h, in the same order.
    pub option_prices: Vec<f64>,
    /// The cheapest compatible available offering among them, $/h.
    pub price: f64,
    /// The object to create (no name yet).
    pub nodeclaim: NodeClaim,
}

/// A decision to disrupt some nodes, possibly replacing them.
#[derive(Debug, Clone)]
pub struct Command {
    pub method: Method,
    pub candidates: Vec<Candidate>,
    pub replacements: Vec<Replacement>,
    /// Σ candidate prices − Σ replacement prices, $/h (0 for drift, which is not about money).
    pub savings_per_hour: f64,
    pub computed_at: Millis,
    /// Set on repair commands: the condition, its urgency and the drain's bound.
    pub repair: Option<repair::RepairDetail>,
    /// v1.15's terminate-first: the replacement could not be staged first, so the candidate goes with none and
    /// provisioning refills its slot once the pods it freed are pending.
    pub terminate_first: bool,
}

impl Command {
    pub fn reason(&self) -> Reason {
        self.method.reason()
    }

    /// A repair that reboots its node in place.
    pub fn is_reboot(&self) -> bool {
        self.repair.as_ref().is_some_and(|r| r.reboot)
    }

    pub fn node_names(&self) -> Vec<String> {
        self.candidates.iter().map(|c| c.node.clone()).collect()
    }

    /// Identity for "the same proposal": method, candidates and replacement options.
    pub fn key(&self) -> String {
        let mut nodes = self.node_names();
        nodes.sort();
        let repl: Vec<String> = self.replacements.iter().map(|r| r.instance_types.join(",")).collect();
        let method = if self.is_reboot() { "reboot" } else { self.method.as_str() };
        format!("{method}|{}|{}", nodes.join(","), repl.join(";"))
    }

    /// Savings over a month of 730 hours (the convention AWS pricing pages use).
    pub fn savings_per_month(&self) -> f64 {
        self.savings_per_hour * 730.0
    }

    /// Pods the command would evict, with their PDB and its headroom.
    pub fn evictions(&self) -> impl Iterator<Item = &PodRef> {
        self.candidates.iter().flat_map(|c| c.pods.iter())
    }

    /// Nodes per NodePool this command takes out of the pool's budget.
    pub fn budget_use(&self) -> BTreeMap<String, usize> {
        let mut m = BTreeMap::new();
        for c in &self.candidates {
            *m.entry(c.nodepool.clone()).or_insert(0) += 1;
        }
        m
    }

    /// One line: "single-node Underutilized: replace ip-a (m5.xlarge) with one of c5.large, … saving $0.05/h".
    pub fn summary(&self) -> String {
        self.summary_naming(usize::MAX)
    }

    /// The summary naming at most `max` candidates, then how many others (`a (m5.large), b (m5.large) and 98
    /// other(s)`), as upstream's messages shorten their lists: for Events, which the API server caps at 1 KiB.
    pub fn brief(&self) -> String {
        self.summary_naming(3)
    }

    fn summary_naming(&self, max: usize) -> String {
        let mut nodes: Vec<String> =
            self.candidates.iter().take(max).map(|c| format!("{} ({})", c.node, c.instance_type)).collect();
        if self.candidates.len() > max {
            let others = format!("{} other(s)", self.candidates.len() - max);
            if let Some(last) = nodes.last_mut() {
                *last = format!("{last} and {others}");
            }
        }
        let what = if self.is_reboot() {
            format!("reboot {}", nodes.join(", "))
        } else if self.terminate_first {
            format!("terminate first {}, its slot refilled once it is gone", nodes.join(", "))
        } else if self.replacements.is_empty() {
            format!("delete {}", nodes.join(", "))
        } else {
            let opts: Vec<String> = self
                .replacements
                .iter()
                .map(|r| {
                    let head: Vec<&str> = r.instance_types.iter().take(3).map(String::as_str).collect();
                    let more = r.instance_types.len().saturating_sub(3);
                    if more > 0 { format!("{} (+{more})", head.join(", ")) } else { head.join(", ") }
                })
                .collect();
            format!("replace {} with {}", nodes.join(", "), opts.join(" and "))
        };
        if let Some(r) = &self.repair {
            format!("{} {} ({}): {what}", self.method, self.reason().as_str(), r.condition)
        } else if self.savings_per_hour > 0.0 {
            format!("{} {}: {what}, saving ${:.4}/h", self.method, self.reason().as_str(), self.savings_per_hour)
        } else {
            format!("{} {}: {what}", self.method, self.reason().as_str())
        }
    }
}

/// Why a node is not being disrupted (or why a method could not use it). Each renders as one sentence.
#[derive(Debug, Clone, PartialEq)]
pub enum Blocker {
    NotManaged,
    NotInitialized,
    Deleting,
    /// Already in a disruption command or an open proposal.
    InCommand,
    /// A pending pod was recently simulated onto it.
    Nominated {
        until: Millis,
    },
    NodeDoNotDisrupt,
    NodePoolMissing {
        nodepool: String,
    },
    StaticNodePool,
    PodDoNotDisrupt {
        pod: String,
    },
    PdbBlocks {
        pod: String,
        pdb: String,
    },
    MultiplePdbs {
        pod: String,
        pdbs: Vec<String>,
    },
    ConsolidateAfterNever,
    ConsolidateAfter {
        left: Millis,
    },
    /// Not empty and the policy only removes empty nodes.
    WhenEmptyPolicy,
    /// The last provisioning solve put CapacityBuffer virtual pods here: emptiness leaves it (consolidation
    /// simulates them instead).
    BufferPods {
        count: usize,
    },
    Budget {
        message: String,
    },
    PodsWouldNotFit {
        pod: String,
        reason: String,
    },
    UninitializedDestination {
        pod: String,
        node: String,
    },
    WouldCreate {
        nodeclaims: usize,
    },
    NoCheaperReplacement {
        cheapest: f64,
        current: f64,
    },
    SpotToSpotDisabled,
    SpotToSpotTooFewOptions {
        options: usize,
    },
    MinValues {
        message: String,
    },
    BalancedScore {
        score: f64,
    },
    InstanceTypeUnknown {
        instance_type: String,
    },
    MissingLabel {
        key: String,
    },
    /// Due for repair (v1.15) but held back: upstream's message.
    Repair {
        message: String,
    },
}

impl fmt::Display for Blocker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Blocker::NotManaged => f.write_str("not managed by Karpenter (no NodeClaim)"),
            Blocker::NotInitialized => f.write_str("not initialized yet"),
            Blocker::Deleting => f.write_str("already being deleted"),
            Blocker::InCommand => f.write_str("already part of a disruption command or proposal"),
            Blocker::Nominated { until } => {
                write!(f, "nominated for pending pods for another {}", human_duration(*until))
            }
            Blocker::NodeDoNotDisrupt => f.write_str("node has karpenter.sh/do-not-disrupt=true"),
            Blocker::NodePoolMissing { nodepool } => write!(f, "its NodePool {nodepool:?} does not exist"),
            Blocker::StaticNodePool => f.write_str("its NodePool is static (replicas set)"),
            Blocker::PodDoNotDisrupt { pod } => write!(f, "pod {pod} has karpenter.sh/do-not-disrupt"),
            Blocker::PdbBlocks { pod, pdb } => write!(f, "PDB {pdb} allows 0 disruptions (pod {pod})"),
            Blocker::MultiplePdbs { pod, pdbs } => {
                write!(f, "pod {pod} is covered by more than one PDB ({}), which eviction refuses", pdbs.join(", "))
            }
            Blocker::ConsolidateAfterNever => f.write_str("consolidateAfter is Never"),
            Blocker::ConsolidateAfter { left } => write!(f, "consolidateAfter has {} left", human_duration(*left)),
            Blocker::WhenEmptyPolicy => f.write_str("not empty, and the consolidation policy is WhenEmpty"),
            Blocker::BufferPods { count } => write!(f, "holds {count} CapacityBuffer virtual pod(s)"),
            Blocker::Budget { message } => f.write_str(message),
            Blocker::PodsWouldNotFit { pod, reason } => write!(f, "pods would not fit elsewhere (pod {pod}: {reason})"),
            Blocker::UninitializedDestination { pod, node } => {
                write!(f, "pod {pod} would schedule against uninitialized node {node}")
            }
            Blocker::WouldCreate { nodeclaims } => {
                write!(f, "can't remove without creating {nodeclaims} NodeClaims")
            }
            Blocker::NoCheaperReplacement { cheapest, current } => {
                write!(f, "no cheaper replacement (cheapest option costs ${cheapest:.4}/h ≥ ${current:.4}/h now)")
            }
            Blocker::SpotToSpotDisabled => f.write_str(
                "spot-to-spot consolidation is disabled (feature gate SpotToSpotConsolidation); the node is spot",
            ),
            Blocker::SpotToSpotTooFewOptions { options } => {
                write!(f, "spot-to-spot consolidation requires 15 cheaper instance type options, {options} available")
            }
            Blocker::MinValues { message } => write!(f, "replacement would not satisfy minValues: {message}"),
            Blocker::BalancedScore { score } => {
                write!(f, "Balanced policy: the savings don't justify the disruption (score {score:.2} < 0.50)")
            }
            Blocker::InstanceTypeUnknown { instance_type } => {
                write!(f, "instance type {instance_type:?} is not in the catalog, its price is unknown")
            }
            Blocker::MissingLabel { key } => write!(f, "node has no {key} label"),
            Blocker::Repair { message } => f.write_str(message),
        }
    }
}

/// "4m12s", "45s", "2h3m".
pub fn human_duration(ms: Millis) -> String {
    let s = (ms.max(0) + 999) / 1000;
    let (h, m, sec) = (s / 3600, (s % 3600) / 60, s % 60);
    match (h, m, sec) {
        (0, 0, s) => format!("{s}s"),
        (0, m, 0) => format!("{m}m"),
        (0, m, s) => format!("{m}m{s}s"),
        (h, 0, _) => format!("{h}h"),
        (h, m, _) => format!("{h}h{m}m"),
    }
}

/// Engine switches that change disruption decisions.
#[derive(Debug, Clone, PartialEq)]
pub struct DisruptionOptions {
    /// Feature gate `SpotToSpotConsolidation` (upstream default off).
    pub spot_to_spot: bool,
    /// Skip the consolidation methods (emptiness, multi- and single-node): the cluster has not changed since they
    /// last found nothing (upstream's "consolidated" mark).
    pub consolidated: bool,
    /// Candidates evaluated by multi-node consolidation at most (upstream 100).
    pub multi_node_cap: usize,
    /// `cost` adds the repack method (several nodes to several cheaper ones) after upstream's methods.
    pub packing: crate::engine::packing::Packing,
    /// v1.15's `TerminateFirstDrift`: drift deletes first what it cannot replace first (off in v1.14).
    pub terminate_first_drift: bool,
    /// v1.15's `TerminateFirstRepair`: the same for repair.
    pub terminate_first_repair: bool,
    /// Balanced scoring's estimate prices replacements at offerings compatible with them (v1.15, #3217); off, at
    /// any available offering of their first option (v1.14).
    pub estimate_compatible_offerings: bool,
}

impl Default for DisruptionOptions {
    fn default() -> Self {
        DisruptionOptions {
            spot_to_spot: false,
            consolidated: false,
            multi_node_cap: 100,
            packing: crate::engine::packing::Packing::Upstream,
            terminate_first_drift: false,
            terminate_first_repair: false,
            estimate_compatible_offerings: true,
        }
    }
}

/// Minimum cheaper spot options for single-node spot-to-spot consolidation, and the launch list cut.
pub const SPOT_TO_SPOT_MIN_TYPES: usize = 15;
/// Repack moves many pods: it is proposed only when it saves at least this share of what the nodes cost.
pub const REPACK_MIN_SAVINGS: f64 = 0.05;
/// Balanced consolidation's k: a move is approved when its score is at least 1/k.
pub const BALANCED_K: f64 = 2.0;

/// Everything a disruption pass reads.
#[derive(Clone, Copy)]
pub struct Context<'a> {
    pub snap: ClusterSnapshot<'a>,
    /// Instance types per NodePool (offerings out of capacity marked unavailable).
    pub catalogs: &'a BTreeMap<String, Vec<Arc<InstanceType>>>,
    pub policy: &'a LabelPolicy,
    pub now: Millis,
    /// Nodes already in a command or an open proposal: not candidates again.
    pub busy: &'a BTreeSet<String>,
    /// Nodes nominated for pending pods, until when.
    pub nominated: &'a BTreeMap<String, Millis>,
    /// Nodes the last provisioning solve put CapacityBuffer virtual pods on, and how many.
    pub buffer_nodes: &'a BTreeMap<String, usize>,
    pub options: &'a DisruptionOptions,
    /// Nodes due for repair and pool health ([`repair::NO_REPAIRS`] when repair is off or v1.14's).
    pub repair: &'a repair::RepairInputs,
}

/// What a pass found.
#[derive(Debug, Clone, Default)]
pub struct PassResult {
    pub command: Option<Command>,
    /// How many nodes were candidates for some method.
    pub candidates: usize,
    /// The consolidation methods found nothing and no budget held them back: nothing will change until the
    /// cluster does.
    pub consolidated: bool,
    /// The earliest time a waiting node becomes usable (consolidateAfter, nomination, a pod's timed
    /// do-not-disrupt running out): look again then even if nothing else changes.
    pub recheck_at: Option<Millis>,
    /// Nodes a method held back with an Event's worth of why: repair's vetoes and breaker, and what static pools
    /// could neither replace first nor terminate first.
    pub blocked: Vec<repair::DisruptionBlocked>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_like_a_person_wrote_them() {
        assert_eq!(human_duration(45_000), "45s");
        assert_eq!(human_duration(252_000), "4m12s");
        assert_eq!(human_duration(120_000), "2m");
        assert_eq!(human_duration(7_380_000), "2h3m");
        assert_eq!(human_duration(-5), "0s");
    }
}
