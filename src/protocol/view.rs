//! What the dashboard shows: a plain-data picture of the cluster and the engine, built by a backend (the simulated
//! world in `demo`, the kube-rs adapter on a live cluster) and handed to the UI as an `Arc`. Panes read it and
//! nothing else, so the same panes serve every backend and render tests need no cluster.
//!
//! Times are absolute milliseconds on the backend's clock (virtual in `demo`); rows are pre-sorted so rendering
//! never sorts.

use crate::engine::disruption::gate::Mode;
use crate::engine::provisioning::Millis;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct ClusterView {
    pub source: Source,
    /// The backend's clock.
    pub now: Millis,
    pub mode: Mode,
    /// Voluntary disruption paused by an operator (the header shows PAUSED).
    pub paused: Option<PauseRow>,
    /// How the controller's provisioning sizes new NodeClaims (the header shows it next to the mode).
    pub packing: crate::engine::packing::Packing,
    /// Whose decisions the engine makes (the header shows it; the editor validates by it).
    pub karpenter_version: crate::engine::version::KarpenterVersion,
    /// Where the version came from: "detected 1.15.1 (kube-system/karpenter)", "--karpenter-version", "default".
    pub karpenter_version_source: String,
    /// Upstream's feature gates the controller runs with, by name (the help lists them).
    pub feature_gates: Vec<(&'static str, bool)>,
    pub leadership: Leadership,
    /// Where prices come from ("static us-east-1 table of 2026-08-15", "simulated", "live EC2 at ...").
    pub price_provenance: String,
    pub cost: CostSummary,
    /// What each packing strategy would launch for the pods of the latest provisioning pass that launched (or, for
    /// an observing instance, of the pods pending now), and the LP lower bound (the Pending pods pane's footer).
    pub packing_pass: Option<PackingRow>,
    pub pending: Vec<PendingPod>,
    /// CapacityBuffers: the room kept for virtual pods (shown under the pending pods, as capacity, not pods).
    pub buffers: Vec<BufferRow>,
    pub nodepools: Vec<NodePoolRow>,
    /// NodeOverlays, by evaluation order (weight, then name descending).
    pub overlays: Vec<OverlayRow>,
    /// Capacity reservations, by id.
    pub reservations: Vec<ReservationRow>,
    pub nodes: Vec<NodeRow>,
    pub disruptions: Vec<DisruptionRow>,
    pub budgets: Vec<BudgetRow>,
    pub interruptions: Vec<InterruptionRow>,
    /// Newest first.
    pub events: Vec<EventRow>,
    /// What the backend is still waiting for before the picture is whole ("listing pods: 4,250 so far", "the
    /// engine's first pass"), shown on the footer line; `None` once it is.
    pub progress: Option<String>,
    /// Bumped by the backend whenever anything above changed (the UI redraws on change).
    pub generation: u64,
}

pub use crate::controller::buffers::BufferRow;

/// A run of digits with thousands separated (`20000` → `20,000`), for the counts and figures both the backend's
/// progress lines and the panes show.
pub fn group_thousands(digits: &str) -> String {
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A pause of voluntary disruption: since when (when known), who asked, and how it holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PauseRow {
    pub since: Option<Millis>,
    pub by: String,
    /// "held by this engine", "budgets nodes: 0 on 3 of 3 NodePools".
    pub how: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Source {
    /// kube context, or "demo".
    pub context: String,
    pub cluster: String,
    /// "simulated ×10", "live", "simulated (paused)".
    pub clock: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Leadership {
    #[default]
    Acting,
    /// Someone else decides (another instance holds the lease, or upstream Karpenter runs): why.
    Observing(String),
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct CostSummary {
    /// $/h of every managed node now.
    pub per_hour: f64,
    /// $/h saved by executed disruptions so far.
    pub saved_per_hour: f64,
    /// $/h that open proposals would save.
    pub pending_savings_per_hour: f64,
    pub spot_nodes: usize,
    pub on_demand_nodes: usize,
    /// Nodes launched into capacity reservations.
    pub reserved_nodes: usize,
}

impl CostSummary {
    /// eks-node-viewer's convention: a month is a twelfth of 8,760 hours.
    pub fn per_month(&self) -> f64 {
        self.per_hour * 730.0
    }
}

/// Both packing strategies over one provisioning pass's pods (issue #19).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PackingRow {
    /// When the pass ran; `None` for the pods pending now, as an observing instance's own pass would place them.
    pub at: Option<Millis>,
    /// The strategy the pass used (or would use).
    pub packing: crate::engine::packing::Packing,
    /// Pods it launched (or would launch) NodeClaims for.
    pub pods: usize,
    pub comparison: crate::engine::provisioning::PackingComparison,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct PendingPod {
    pub namespace: String,
    pub name: String,
    pub cpu_millis: i64,
    pub memory_bytes: i64,
    pub created_at: Millis,
    /// (NodePool, why it can't take the pod); an empty pool name is a reason that applies to every pool.
    pub reasons: Vec<(String, String)>,
    /// The NodeClaim the pod is waiting for, when one is launching for it.
    pub nominated: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodePoolRow {
    pub name: String,
    pub weight: i32,
    pub nodes: usize,
    /// (resource, in use, limit); only limited resources, plus cpu and memory always.
    pub usage: Vec<ResourceUse>,
    pub cost_per_hour: f64,
    /// (reason, nodes allowed now, why zero when zero).
    pub budgets: Vec<(String, i64, Option<String>)>,
    pub drifted: usize,
    pub consolidation_policy: String,
    pub consolidate_after: String,
    /// A static pool's `spec.replicas` (None: a dynamic pool).
    pub replicas: Option<i64>,
    /// Its nodes that are initialized (a static pool shows ready/wanted).
    pub ready: usize,
    /// What NodeOverlays changed on its instance types, one line each (type, offering, old → new, which overlay).
    pub overlays: Vec<String>,
    /// The live object as YAML, what the editor opens.
    pub yaml: String,
}

/// A capacity reservation as the dashboard shows it (under the NodePools).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReservationRow {
    pub id: String,
    pub instance_type: String,
    pub zone: String,
    /// `default` or `capacity-block`, and `interruptible` when it is.
    pub kind: String,
    /// Nodes running in it now, and how many it holds.
    pub used: usize,
    pub total: i64,
    /// When it ends, if it does.
    pub ends: Option<Millis>,
}

/// A NodeOverlay as the dashboard shows it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OverlayRow {
    pub name: String,
    pub weight: i32,
    /// `Applied`, or why not (`Conflict: ...`, `RuntimeValidation: ...`), or `not evaluated` (gate off).
    pub state: String,
    /// How many offerings it repriced and instance types it gave capacity, across NodePools.
    pub prices: usize,
    pub capacity: usize,
    /// The live object as YAML, what the editor opens.
    pub yaml: String,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct ResourceUse {
    pub resource: String,
    /// In the resource's base unit (millicores for cpu, bytes for memory, counts otherwise).
    pub used: i64,
    pub limit: Option<i64>,
}

/// Where a node or NodeClaim is in its life (the NodeClaim conditions, and what the engine is doing to it).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
pub enum Lifecycle {
    #[default]
    Launching,
    Launched,
    Registered,
    Initialized,
    Drifted,
    /// A repair policy matches one of its conditions: node repair replaces it when the toleration runs out.
    Unhealthy,
    /// Repair is rebooting it in place (Karpenter v1.15): draining, or waiting for it to come back.
    Rebooting,
    Disrupting,
    Deleting,
}

impl Lifecycle {
    pub fn as_str(self) -> &'static str {
        match self {
            Lifecycle::Launching => "Launching",
            Lifecycle::Launched => "Launched",
            Lifecycle::Registered => "Registered",
            Lifecycle::Initialized => "Initialized",
            Lifecycle::Drifted => "Drifted",
            Lifecycle::Unhealthy => "Unhealthy",
            Lifecycle::Rebooting => "Rebooting",
            Lifecycle::Disrupting => "Disrupting",
            Lifecycle::Deleting => "Deleting",
        }
    }
}

/// A node, or a NodeClaim that has no node yet (a "ghost" row, as eks-node-viewer shows in-flight capacity).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeRow {
    /// Node name, or the NodeClaim's while it has no node.
    pub name: String,
    pub nodeclaim: Option<String>,
    pub nodepool: Option<String>,
    pub instance_type: String,
    pub zone: String,
    pub capacity_type: String,
    pub price: f64,
    pub created_at: Millis,
    pub state: Lifecycle,
    pub cpu_requested: i64,
    pub cpu_allocatable: i64,
    pub memory_requested: i64,
    pub memory_allocatable: i64,
    pub pods: usize,
    pub max_pods: i64,
    /// namespace/name of the pods bound here.
    pub pod_names: Vec<String>,
    /// Why the engine is (not) disrupting it, one line per reason.
    pub outlook: Vec<String>,
    /// The condition a repair policy matches, when node repair is on and one does.
    pub repair: Option<RepairInfo>,
    /// The NodeOverlay that set `price` (the offering's list price was different), when one did.
    pub price_overlay: Option<String>,
    /// The node's labels, or the NodeClaim's while it has no node (what `--selector` and `--extra-labels` read).
    pub labels: std::collections::BTreeMap<String, String>,
}

/// A pod on a node, as the drill-down shows it (asked for one node at a time: [`crate::protocol::Command::DescribeNode`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodePodRow {
    pub namespace: String,
    pub name: String,
    pub phase: String,
    pub cpu_millis: i64,
    pub memory_bytes: i64,
    /// The controlling owner, `Kind/name`, or `-`.
    pub owner: String,
    /// The PDBs that select it, each with the disruptions it allows now.
    pub pdbs: Vec<String>,
    /// `karpenter.sh/do-not-disrupt` holds it now.
    pub do_not_disrupt: bool,
}

/// What node repair sees on a node: the matching condition and when it repairs the node.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RepairInfo {
    pub condition: String,
    pub status: String,
    pub reason: Option<String>,
    /// The condition's lastTransitionTime.
    pub since: Millis,
    /// When the policy's toleration runs out (the repair happens then unless over 20 % of the pool is unhealthy).
    pub repair_at: Millis,
}

/// Where a disruption command is, as the dashboard shows it: the controller's [`crate::controller::disruption::Phase`].
pub use crate::controller::disruption::Phase as ProposalState;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct DisruptionRow {
    pub id: String,
    pub at: Millis,
    pub method: String,
    pub reason: String,
    pub candidates: Vec<String>,
    /// Instance-type options per replacement, cheapest first.
    pub replacements: Vec<Vec<String>>,
    pub savings_per_hour: f64,
    /// (namespace/name, PDB name and disruptions allowed now).
    pub evictions: Vec<(String, Option<(String, i32)>)>,
    /// (NodePool, nodes this uses of the budget, allowed now).
    pub budget_use: Vec<(String, usize, i64)>,
    pub state: ProposalState,
    /// The engine's sentence for it, and for closed ones what happened.
    pub summary: String,
    pub detail: Option<String>,
    /// For started commands: replacements initialized and pods left on each candidate.
    pub progress: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct BudgetRow {
    pub nodepool: String,
    pub reason: String,
    pub allowed_now: i64,
    /// The budgets in force for the reason, as written ("10%", "0 @ 0 9 * * mon-fri for 8h").
    pub rules: Vec<String>,
    /// Over the next 24 hours, in minutes from now: (start, end, nodes) of each scheduled window.
    pub windows: Vec<(u32, u32, String)>,
    pub error: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct InterruptionRow {
    pub at: Millis,
    pub kind: String,
    pub node: String,
    pub capacity_type: String,
    pub zone: String,
    /// Pods on the node when the notice came.
    pub pods: usize,
    /// What is happening: "replacement ip-... launching", "node deleted", "informational only".
    pub progress: String,
    /// Seconds from the notice until the displaced pods were all running on other nodes (or, with none, until the
    /// node was gone), once that happened.
    pub replaced_after: Option<f64>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EventRow {
    pub at: Millis,
    /// Normal / Warning.
    pub kind: String,
    /// Upstream-style reason: Nominated, Launched, DisruptionApproved, SpotInterrupted ...
    pub reason: String,
    pub object: String,
    pub message: String,
}
