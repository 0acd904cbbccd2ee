//! The simulation report (scenario.md "The report"): what `simulate --output json` prints, and the table view.
//!
//! Field order is the spec's (serde writes struct fields in declaration order), maps are `BTreeMap`s, and floats are
//! rounded when written (prices to 6 decimals, simulated times to milliseconds), so the same run gives the same bytes
//! once `timings` is dropped.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use k8s_openapi::api::core::v1::Taint;
use serde::{Deserialize, Serialize, Serializer};

/// The `schema` of every v1 report.
pub const REPORT_SCHEMA: &str = "karpenter-tui/simulation-report/v1";

/// The whole report. Times are simulated seconds from t=0 (negative for nodes that existed before t=0).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// Always [`REPORT_SCHEMA`].
    pub schema: String,
    pub scenario: String,
    pub seed: u64,
    /// The Karpenter version whose decisions the run made (`settings.karpenterVersion`; an addition of this
    /// project, docs/scenarios.md).
    #[serde(default)]
    pub karpenter_version: crate::engine::version::KarpenterVersion,
    #[serde(serialize_with = "whole_seconds")]
    pub simulated_seconds: f64,
    /// Every node that existed at any time, in creation order.
    pub nodes: Vec<NodeRecord>,
    /// Every pod, final state.
    pub pods: Vec<PodRecord>,
    /// Pods still unbound at the end.
    pub pending: Vec<PendingPod>,
    pub node_claims: Vec<NodeClaimRecord>,
    /// In time order.
    pub decisions: Vec<Decision>,
    pub cost: Cost,
    /// What each packing strategy would have launched for the pods the run provisioned for (an addition of this
    /// project, docs/scenarios.md).
    #[serde(default)]
    pub packing: PackingSummary,
    /// Wall-clock measurements: the only part allowed to differ between two runs.
    pub timings: Timings,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeRecord {
    pub name: String,
    /// `None` (null) for unmanaged nodes.
    pub node_pool: Option<String>,
    /// `None` (null) for unmanaged nodes.
    pub node_claim: Option<String>,
    pub instance_type: String,
    pub zone: String,
    pub capacity_type: String,
    #[serde(serialize_with = "price")]
    pub price_per_hour: f64,
    #[serde(serialize_with = "seconds")]
    pub created_at: f64,
    #[serde(serialize_with = "opt_seconds")]
    pub initialized_at: Option<f64>,
    #[serde(serialize_with = "opt_seconds")]
    pub deleted_at: Option<f64>,
    pub labels: BTreeMap<String, String>,
    pub taints: Vec<Taint>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodRecord {
    pub namespace: String,
    pub name: String,
    /// The node it is (or was last) bound to; null if never bound.
    pub node: Option<String>,
    #[serde(serialize_with = "seconds")]
    pub created_at: f64,
    #[serde(serialize_with = "opt_seconds")]
    pub bound_at: Option<f64>,
    #[serde(serialize_with = "opt_seconds")]
    pub deleted_at: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PendingPod {
    pub namespace: String,
    pub name: String,
    pub reasons: Vec<PendingReason>,
}

/// Why one NodePool couldn't take a pending pod, in the engine's words.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PendingReason {
    pub node_pool: String,
    pub reason: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeClaimRecord {
    pub name: String,
    pub node_pool: String,
    #[serde(serialize_with = "seconds")]
    pub created_at: f64,
    #[serde(serialize_with = "opt_seconds")]
    pub deleted_at: Option<f64>,
    /// The options handed to the cloud, cheapest first.
    pub instance_types: Vec<String>,
    pub requirements: Vec<RequirementRecord>,
    /// `None` (null) if never launched.
    pub launched: Option<Launched>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RequirementRecord {
    pub key: String,
    /// In, NotIn, Exists, DoesNotExist, Gt, Lt.
    pub operator: String,
    pub values: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Launched {
    pub instance_type: String,
    pub zone: String,
    pub capacity_type: String,
}

/// One engine decision: `id` and `at` first, then `kind` and the kind's fields.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    /// `p-<n>` for provisioning, `d-<n>` for disruption; what `approve`/`reject` events name.
    pub id: String,
    #[serde(serialize_with = "seconds")]
    pub at: f64,
    #[serde(flatten)]
    pub detail: DecisionDetail,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum DecisionDetail {
    #[serde(rename_all = "camelCase")]
    Provision {
        node_claims: Vec<String>,
        /// Pods the new claims were made for.
        pods: u64,
        /// A static NodePool's replicas (`"static": true`; absent for provisioning for pods).
        #[serde(rename = "static", default, skip_serializing_if = "std::ops::Not::not")]
        is_static: bool,
    },
    #[serde(rename_all = "camelCase")]
    Disruption {
        method: DisruptionMethod,
        reason: DisruptionReason,
        /// Node names.
        candidates: Vec<String>,
        replacements: Vec<Replacement>,
        #[serde(serialize_with = "price")]
        savings_per_hour: f64,
        state: DecisionState,
        /// Why it was invalidated or failed (added in v1; absent otherwise).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        why: Option<String>,
        /// A drift or repair that deleted its node before any replacement (Karpenter v1.15's terminate-first;
        /// absent otherwise).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        terminate_first: bool,
    },
    /// Node auto repair (gate `NodeRepair`): the node's NodeClaim was deleted forcefully.
    #[serde(rename_all = "camelCase")]
    Repair {
        /// The repaired node.
        candidates: Vec<String>,
        /// Always `Unhealthy` (upstream's disruption reason for repairs).
        reason: String,
        /// The node condition whose repair policy ran out (`Ready`, `AcceleratedHardwareReady`, ...).
        condition: String,
    },
    /// Repair's reboot (Karpenter v1.15, a policy whose action is RebootNode): the node rebooted in place.
    #[serde(rename_all = "camelCase")]
    Reboot {
        candidates: Vec<String>,
        /// Always `Unhealthy`.
        reason: String,
        condition: String,
        state: DecisionState,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DisruptionMethod {
    /// Karpenter v1.15's node repair: an unhealthy node replaced, paced by the `Unhealthy` budget.
    Repair,
    Emptiness,
    Drift,
    MultiNode,
    SingleNode,
    /// Cost packing's N-to-M replacement.
    Repack,
    Expiration,
    Interruption,
    /// A static NodePool with more NodeClaims than its replicas deleting the excess.
    StaticScaleDown,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum DisruptionReason {
    Empty,
    Underutilized,
    Drifted,
    Expired,
    Interrupted,
    /// Static scale-down (upstream's termination reason `overprovisioned`).
    Overprovisioned,
    /// Node repair.
    Unhealthy,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DecisionState {
    Executed,
    AwaitingApproval,
    Rejected,
    Invalidated,
    Failed,
    /// Added in v1: started and not finished when the simulation ended (validating, launching replacements or
    /// draining).
    InProgress,
    /// Added in v1: computed in dry-run mode, never started.
    DryRun,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Replacement {
    pub instance_types: Vec<String>,
}

/// Dollars. `total` integrates node prices over simulated time; `byNodePool` leaves unmanaged nodes out.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Cost {
    #[serde(serialize_with = "price")]
    pub final_per_hour: f64,
    #[serde(serialize_with = "price")]
    pub total: f64,
    pub by_node_pool: BTreeMap<String, PoolCost>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PoolCost {
    #[serde(serialize_with = "price")]
    pub final_per_hour: f64,
    #[serde(serialize_with = "price")]
    pub total: f64,
}

/// Both packing strategies over the same pods, summed over the provisioning solves that created NodeClaims: for
/// each solve, what upstream's and cost's plans would have launched for its pods (cheapest options, $/h) and the LP
/// lower bound no packing of them can beat. All zero when no solve launched anything.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PackingSummary {
    /// The strategy the run provisioned with: `upstream` or `cost`.
    pub strategy: String,
    #[serde(serialize_with = "price")]
    pub upstream_per_hour: f64,
    #[serde(serialize_with = "price")]
    pub cost_per_hour: f64,
    pub upstream_nodes: u64,
    pub cost_nodes: u64,
    /// `None` (null) when some solve's LP had no bound.
    #[serde(serialize_with = "opt_price")]
    pub lower_bound_per_hour: Option<f64>,
}

impl Default for PackingSummary {
    fn default() -> Self {
        PackingSummary::of(crate::engine::packing::Packing::default(), std::iter::empty())
    }
}

impl PackingSummary {
    /// The sums over `passes` (one comparison per solve that created NodeClaims), run with `strategy`.
    pub fn of<'a>(
        strategy: crate::engine::packing::Packing,
        passes: impl IntoIterator<Item = &'a crate::engine::provisioning::PackingComparison>,
    ) -> PackingSummary {
        let mut s = PackingSummary {
            strategy: strategy.as_str().to_string(),
            upstream_per_hour: 0.0,
            cost_per_hour: 0.0,
            upstream_nodes: 0,
            cost_nodes: 0,
            lower_bound_per_hour: Some(0.0),
        };
        for c in passes {
            s.upstream_per_hour += c.upstream.per_hour;
            s.cost_per_hour += c.cost.per_hour;
            s.upstream_nodes += c.upstream.nodes as u64;
            s.cost_nodes += c.cost.nodes as u64;
            s.lower_bound_per_hour = s.lower_bound_per_hour.zip(c.bound).map(|(a, b)| a + b);
        }
        s
    }

    /// The table's line, in `plan`'s words.
    fn line(&self) -> String {
        if self.upstream_nodes == 0 && self.cost_nodes == 0 {
            return "(no provisioning pass launched anything)".to_string();
        }
        let plan = |name: &str, per_hour: f64, nodes: u64| {
            let s = if nodes == 1 { "" } else { "s" };
            format!("{name} packing: ${:.4}/h for {nodes} node{s}", round_to(per_hour, 6))
        };
        let mut line = format!(
            "{}; {}",
            plan("upstream", self.upstream_per_hour, self.upstream_nodes),
            plan("cost", self.cost_per_hour, self.cost_nodes)
        );
        match self.lower_bound_per_hour {
            Some(b) => line.push_str(&format!("; LP lower bound ${:.4}/h", round_to(b, 6))),
            None => line.push_str("; LP lower bound not known (a pass had none)"),
        }
        line
    }
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Timings {
    pub wall_millis: u64,
    pub provisioning_solves: Vec<SolveTiming>,
    pub disruption_passes: Vec<PassTiming>,
    /// The packing comparisons of launching solves, worked out after each solve's NodeClaims are out.
    #[serde(default)]
    pub packing_comparisons: Vec<ComparisonTiming>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ComparisonTiming {
    #[serde(serialize_with = "seconds")]
    pub at: f64,
    pub pods: u64,
    #[serde(serialize_with = "millis")]
    pub millis: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SolveTiming {
    #[serde(serialize_with = "seconds")]
    pub at: f64,
    pub pods: u64,
    pub nodes: u64,
    #[serde(serialize_with = "millis")]
    pub millis: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PassTiming {
    #[serde(serialize_with = "seconds")]
    pub at: f64,
    pub candidates: u64,
    #[serde(serialize_with = "millis")]
    pub millis: f64,
}

/// Rounds half away from zero to `decimals`; non-finite values become 0 so the JSON stays valid and stable.
fn round_to(x: f64, decimals: i32) -> f64 {
    if !x.is_finite() {
        return 0.0;
    }
    let scale = 10f64.powi(decimals);
    let r = (x * scale).round() / scale;
    // -0.0 would print as "-0.0".
    if r == 0.0 { 0.0 } else { r }
}

/// Prices and costs: 6 decimals (a hundredth of a cent per hour is below any catalog's precision).
fn price<S: Serializer>(x: &f64, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(round_to(*x, 6))
}

/// Simulated times: millisecond precision, which is the finest the world schedules.
fn seconds<S: Serializer>(x: &f64, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(round_to(*x, 3))
}

/// `simulatedSeconds` is an integer in the spec (`7200`); only a fractional `until` makes it a float.
fn whole_seconds<S: Serializer>(x: &f64, s: S) -> Result<S::Ok, S::Error> {
    let r = round_to(*x, 3);
    if r.fract() == 0.0 && r.abs() < 9.0e15 { s.serialize_i64(r as i64) } else { s.serialize_f64(r) }
}

fn opt_seconds<S: Serializer>(x: &Option<f64>, s: S) -> Result<S::Ok, S::Error> {
    match x {
        Some(x) => seconds(x, s),
        None => s.serialize_none(),
    }
}

fn opt_price<S: Serializer>(x: &Option<f64>, s: S) -> Result<S::Ok, S::Error> {
    match x {
        Some(x) => price(x, s),
        None => s.serialize_none(),
    }
}

fn millis<S: Serializer>(x: &f64, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(round_to(*x, 3))
}

/// The report minus `timings`, borrowed, in the same field order.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Untimed<'a> {
    schema: &'a str,
    scenario: &'a str,
    seed: u64,
    karpenter_version: crate::engine::version::KarpenterVersion,
    #[serde(serialize_with = "whole_seconds")]
    simulated_seconds: f64,
    nodes: &'a [NodeRecord],
    pods: &'a [PodRecord],
    pending: &'a [PendingPod],
    node_claims: &'a [NodeClaimRecord],
    decisions: &'a [Decision],
    cost: &'a Cost,
    packing: &'a PackingSummary,
}

impl Report {
    /// An empty report for `scenario` run with `seed`, to be filled in by the runner.
    pub fn new(scenario: &str, seed: u64) -> Report {
        Report {
            schema: REPORT_SCHEMA.to_string(),
            scenario: scenario.to_string(),
            seed,
            karpenter_version: crate::engine::version::KarpenterVersion::default(),
            simulated_seconds: 0.0,
            nodes: Vec::new(),
            pods: Vec::new(),
            pending: Vec::new(),
            node_claims: Vec::new(),
            decisions: Vec::new(),
            cost: Cost::default(),
            packing: PackingSummary::default(),
            timings: Timings::default(),
        }
    }

    /// The `--output json` text (pretty-printed, trailing newline not included).
    pub fn to_json(&self) -> String {
        // Serialising plain data to a String can't fail; fall back to an empty object rather than panic.
        serde_json::to_string_pretty(self).unwrap_or_else(|_| String::from("{}"))
    }

    /// The JSON without `timings`: byte-identical for two runs of the same scenario and seed.
    pub fn to_json_without_timings(&self) -> String {
        let u = Untimed {
            schema: &self.schema,
            scenario: &self.scenario,
            seed: self.seed,
            karpenter_version: self.karpenter_version,
            simulated_seconds: self.simulated_seconds,
            nodes: &self.nodes,
            pods: &self.pods,
            pending: &self.pending,
            node_claims: &self.node_claims,
            decisions: &self.decisions,
            cost: &self.cost,
            packing: &self.packing,
        };
        serde_json::to_string_pretty(&u).unwrap_or_else(|_| String::from("{}"))
    }
}

fn fmt_time(t: f64) -> String {
    format!("{:.1}s", round_to(t, 3))
}

/// The `--output table` view: totals, nodes by pool and type, decisions, pending pods with reasons, cost.
pub fn render_table(r: &Report) -> String {
    let mut out = String::new();
    let live_nodes = r.nodes.iter().filter(|n| n.deleted_at.is_none()).count();
    let live_pods: Vec<&PodRecord> = r.pods.iter().filter(|p| p.deleted_at.is_none()).collect();
    let bound = live_pods.iter().filter(|p| p.node.is_some()).count();
    // Writing to a String can't fail, so the fmt::Results below are ignored.
    let _ = writeln!(
        out,
        "Scenario {} (seed {}), {} simulated, Karpenter {} decisions",
        r.scenario,
        r.seed,
        fmt_time(r.simulated_seconds),
        r.karpenter_version
    );
    let _ = writeln!(
        out,
        "Nodes: {live_nodes} at the end, {} over the run; pods: {} at the end ({bound} bound, {} pending); \
         node claims: {}; decisions: {}",
        r.nodes.len(),
        live_pods.len(),
        r.pending.len(),
        r.node_claims.len(),
        r.decisions.len()
    );

    let _ = writeln!(out, "\nNodes at the end by NodePool and instance type");
    let mut groups: BTreeMap<(String, String, String), (usize, f64)> = BTreeMap::new();
    for n in r.nodes.iter().filter(|n| n.deleted_at.is_none()) {
        let pool = n.node_pool.clone().unwrap_or_else(|| "(unmanaged)".into());
        let e = groups.entry((pool, n.instance_type.clone(), n.capacity_type.clone())).or_default();
        e.0 += 1;
        e.1 += n.price_per_hour;
    }
    if groups.is_empty() {
        let _ = writeln!(out, "  (none)");
    } else {
        let _ = writeln!(
            out,
            "  {:<20} {:<24} {:<10} {:>5} {:>12}",
            "NODEPOOL", "INSTANCE TYPE", "CAPACITY", "COUNT", "$/HOUR"
        );
        for ((pool, it, ct), (count, price)) in &groups {
            let _ = writeln!(out, "  {pool:<20} {it:<24} {ct:<10} {count:>5} {:>12.4}", round_to(*price, 6));
        }
    }

    let _ = writeln!(out, "\nDecisions");
    if r.decisions.is_empty() {
        let _ = writeln!(out, "  (none)");
    }
    for d in &r.decisions {
        match &d.detail {
            DecisionDetail::Provision { node_claims, pods, is_static } => {
                let what = if *is_static { "a static NodePool".to_string() } else { format!("{pods} pod(s)") };
                let _ = writeln!(
                    out,
                    "  {:<6} {:>10} provision   {} node claim(s) for {what}: {}",
                    d.id,
                    fmt_time(d.at),
                    node_claims.len(),
                    node_claims.join(", ")
                );
            }
            DecisionDetail::Disruption {
                method,
                reason,
                candidates,
                replacements,
                savings_per_hour,
                state,
                why,
                terminate_first,
            } => {
                let _ = writeln!(
                    out,
                    "  {:<6} {:>10} disruption  {method:?}/{reason:?} {state:?}: {}{} -> {} replacement(s), saves ${:.4}/h{}",
                    d.id,
                    fmt_time(d.at),
                    candidates.join(", "),
                    if *terminate_first { " (terminate first)" } else { "" },
                    replacements.len(),
                    round_to(*savings_per_hour, 6),
                    why.as_deref().map(|w| format!(" ({w})")).unwrap_or_default()
                );
            }
            DecisionDetail::Repair { candidates, reason, condition } => {
                let _ = writeln!(
                    out,
                    "  {:<6} {:>10} repair      {reason} ({condition}): {}",
                    d.id,
                    fmt_time(d.at),
                    candidates.join(", ")
                );
            }
            DecisionDetail::Reboot { candidates, reason, condition, state } => {
                let _ = writeln!(
                    out,
                    "  {:<6} {:>10} reboot      {reason} ({condition}) {state:?}: {}",
                    d.id,
                    fmt_time(d.at),
                    candidates.join(", ")
                );
            }
        }
    }

    let _ = writeln!(out, "\nPending pods");
    if r.pending.is_empty() {
        let _ = writeln!(out, "  (none)");
    }
    for p in &r.pending {
        let _ = writeln!(out, "  {}/{}", p.namespace, p.name);
        for reason in &p.reasons {
            let _ = writeln!(out, "    {}: {}", reason.node_pool, reason.reason);
        }
    }

    let _ = writeln!(out, "\nCost");
    let _ = writeln!(
        out,
        "  final ${:.4}/h, total ${:.4} over the run",
        round_to(r.cost.final_per_hour, 6),
        round_to(r.cost.total, 6)
    );
    for (pool, c) in &r.cost.by_node_pool {
        let _ =
            writeln!(out, "  {pool:<20} ${:.4}/h, ${:.4} total", round_to(c.final_per_hour, 6), round_to(c.total, 6));
    }

    let _ = writeln!(
        out,
        "\nPacking ({} in use), for the pods of every provisioning pass that launched",
        r.packing.strategy
    );
    let _ = writeln!(out, "  {}", r.packing.line());
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::packing::Packing;
    use crate::engine::provisioning::{PackingComparison, PlanPrice};

    fn sample() -> Report {
        let mut r = Report::new("inflate-walkthrough", 42);
        r.simulated_seconds = 7200.0;
        r.nodes.push(NodeRecord {
            name: "default-abc12".into(),
            node_pool: Some("default".into()),
            node_claim: Some("default-abc12".into()),
            instance_type: "c5.xlarge".into(),
            zone: "us-east-1a".into(),
            capacity_type: "spot".into(),
            price_per_hour: 0.071_200_000_000_1,
            created_at: 12.0,
            initialized_at: Some(52.0),
            deleted_at: None,
            labels: BTreeMap::from([("karpenter.sh/nodepool".to_string(), "default".to_string())]),
            taints: vec![],
        });
        r.nodes.push(NodeRecord {
            name: "old".into(),
            node_pool: None,
            node_claim: None,
            instance_type: "m5.large".into(),
            zone: "us-east-1b".into(),
            capacity_type: "on-demand".into(),
            price_per_hour: 0.096,
            created_at: -3600.0,
            initialized_at: Some(-3600.0),
            deleted_at: Some(100.5),
            labels: BTreeMap::new(),
            taints: vec![],
        });
        r.pods.push(PodRecord {
            namespace: "default".into(),
            name: "inflate-0".into(),
            node: Some("default-abc12".into()),
            created_at: 0.0,
            bound_at: Some(53.0),
            deleted_at: None,
        });
        r.pending.push(PendingPod {
            namespace: "default".into(),
            name: "big-0".into(),
            reasons: vec![PendingReason { node_pool: "default".into(), reason: "no instance type fits".into() }],
        });
        r.node_claims.push(NodeClaimRecord {
            name: "default-abc12".into(),
            node_pool: "default".into(),
            created_at: 11.0,
            deleted_at: None,
            instance_types: vec!["c5.xlarge".into()],
            requirements: vec![RequirementRecord {
                key: "karpenter.sh/capacity-type".into(),
                operator: "In".into(),
                values: vec!["spot".into()],
            }],
            launched: None,
        });
        r.decisions.push(Decision {
            id: "p-1".into(),
            at: 11.0,
            detail: DecisionDetail::Provision { node_claims: vec!["default-abc12".into()], pods: 4, is_static: false },
        });
        r.decisions.push(Decision {
            id: "d-1".into(),
            at: 1830.0,
            detail: DecisionDetail::Disruption {
                method: DisruptionMethod::SingleNode,
                reason: DisruptionReason::Underutilized,
                candidates: vec!["old".into()],
                replacements: vec![Replacement { instance_types: vec!["c5.large".into()] }],
                savings_per_hour: 0.052_099_999_9,
                state: DecisionState::AwaitingApproval,
                why: None,
                terminate_first: false,
            },
        });
        r.cost = Cost {
            final_per_hour: 0.0712,
            total: 0.287_1,
            by_node_pool: BTreeMap::from([("default".into(), PoolCost { final_per_hour: 0.0712, total: 0.2871 })]),
        };
        r.timings = Timings {
            wall_millis: 130,
            provisioning_solves: vec![SolveTiming { at: 11.0, pods: 4, nodes: 1, millis: 0.4 }],
            disruption_passes: vec![PassTiming { at: 1830.0, candidates: 3, millis: 1.2 }],
            packing_comparisons: vec![ComparisonTiming { at: 11.0, pods: 4, millis: 2.5 }],
        };
        r
    }

    /// Keys in the order they first appear in `json`.
    fn key_order(json: &str, keys: &[&str]) -> Vec<usize> {
        keys.iter().map(|k| json.find(&format!("\"{k}\"")).unwrap_or(usize::MAX)).collect()
    }

    #[test]
    fn top_level_fields_in_spec_order() {
        let json = sample().to_json();
        let keys = [
            "schema",
            "scenario",
            "seed",
            "karpenterVersion",
            "simulatedSeconds",
            "nodes",
            "pods",
            "pending",
            "nodeClaims",
            "decisions",
            "cost",
            "packing",
            "timings",
        ];
        let pos = key_order(&json, &keys);
        assert!(pos.windows(2).all(|w| w[0] < w[1]), "{pos:?}\n{json}");
        assert!(json.contains("\"schema\": \"karpenter-tui/simulation-report/v1\""));
        assert!(json.contains("\"simulatedSeconds\": 7200,"), "{json}");
        assert!(json.contains("\"createdAt\": 12.0,"), "{json}");
    }

    #[test]
    fn nulls_rounding_and_decision_shapes() {
        let v: serde_json::Value = serde_json::from_str(&sample().to_json()).unwrap();
        assert_eq!(v["nodes"][0]["deletedAt"], serde_json::Value::Null);
        assert_eq!(v["nodes"][1]["nodePool"], serde_json::Value::Null);
        assert_eq!(v["nodes"][1]["nodeClaim"], serde_json::Value::Null);
        assert_eq!(v["nodeClaims"][0]["launched"], serde_json::Value::Null);
        assert_eq!(v["nodes"][0]["pricePerHour"], serde_json::json!(0.0712));
        assert_eq!(v["decisions"][1]["savingsPerHour"], serde_json::json!(0.0521));
        assert_eq!(v["decisions"][0]["kind"], "provision");
        assert_eq!(v["decisions"][1]["method"], "single-node");
        assert_eq!(v["decisions"][1]["reason"], "Underutilized");
        assert_eq!(v["decisions"][1]["state"], "awaiting-approval");
        assert_eq!(v["cost"]["byNodePool"]["default"]["total"], serde_json::json!(0.2871));
        assert_eq!(v["timings"]["provisioningSolves"][0]["millis"], serde_json::json!(0.4));
        assert_eq!(v["timings"]["packingComparisons"][0]["millis"], serde_json::json!(2.5));
    }

    #[test]
    fn decision_fields_in_spec_order() {
        let json = sample().to_json();
        let d = &json[json.find("\"d-1\"").unwrap_or(0)..];
        let keys = ["at", "kind", "method", "reason", "candidates", "replacements", "savingsPerHour", "state"];
        let pos = key_order(d, &keys);
        assert!(pos.windows(2).all(|w| w[0] < w[1]), "{pos:?}\n{d}");
    }

    #[test]
    fn without_timings_drops_only_timings_and_round_trips() {
        let r = sample();
        let untimed = r.to_json_without_timings();
        assert!(!untimed.contains("timings"));
        assert!(!untimed.contains("wallMillis"));
        let full = r.to_json();
        assert!(full.starts_with(&untimed[..untimed.len() - 2]), "untimed must be a prefix of the full report");
        let mut other = r.clone();
        other.timings.wall_millis = 999;
        assert_eq!(other.to_json_without_timings(), untimed);
        let back: Report = serde_json::from_str(&full).unwrap();
        // Values come back rounded, so the JSON (not the struct) round-trips.
        assert_eq!(back.to_json(), full);
        assert_eq!(back.nodes[1].created_at, -3600.0);
    }

    #[test]
    fn table_mentions_everything() {
        let t = render_table(&sample());
        for needle in ["inflate-walkthrough", "c5.xlarge", "p-1", "d-1", "big-0", "no instance type fits", "0.0712"] {
            assert!(t.contains(needle), "missing {needle}:\n{t}");
        }
        assert!(render_table(&Report::new("empty", 0)).contains("(none)"));
    }

    fn comparison(upstream: (f64, usize), cost: (f64, usize), bound: Option<f64>) -> PackingComparison {
        PackingComparison {
            upstream: PlanPrice { per_hour: upstream.0, nodes: upstream.1 },
            cost: PlanPrice { per_hour: cost.0, nodes: cost.1 },
            bound,
        }
    }

    #[test]
    fn packing_sums_the_passes_and_a_missing_bound_makes_it_null() {
        let a = comparison((1.5, 1), (0.75, 3), Some(0.5));
        let b = comparison((0.1, 1), (0.1, 1), Some(0.05));
        let s = PackingSummary::of(Packing::Cost, [&a, &b]);
        assert_eq!(s.strategy, "cost");
        assert_eq!((s.upstream_nodes, s.cost_nodes), (2, 4));
        assert!((s.upstream_per_hour - 1.6).abs() < 1e-9 && (s.cost_per_hour - 0.85).abs() < 1e-9, "{s:?}");
        assert!(s.lower_bound_per_hour.is_some_and(|b| (b - 0.55).abs() < 1e-9), "{s:?}");
        let none = comparison((0.2, 1), (0.2, 1), None);
        assert_eq!(PackingSummary::of(Packing::Upstream, [&a, &none, &b]).lower_bound_per_hour, None);
        // No pass launched: zeros (the bound of launching nothing is nothing), and the table says so.
        let empty = PackingSummary::default();
        assert_eq!(
            (empty.strategy.as_str(), empty.upstream_nodes, empty.lower_bound_per_hour),
            ("upstream", 0, Some(0.0))
        );
        assert!(render_table(&Report::new("empty", 0)).contains("no provisioning pass launched anything"));
    }

    #[test]
    fn packing_object_shape_rounding_and_table_line() {
        let mut r = sample();
        r.packing = PackingSummary::of(Packing::Upstream, [&comparison((145.9, 2), (37.150_000_4, 367), Some(34.36))]);
        let v: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap();
        assert_eq!(
            v["packing"],
            serde_json::json!({"strategy": "upstream", "upstreamPerHour": 145.9, "costPerHour": 37.15,
                "upstreamNodes": 2, "costNodes": 367, "lowerBoundPerHour": 34.36})
        );
        let t = render_table(&r);
        assert!(t.contains("Packing (upstream in use)"), "{t}");
        assert!(
            t.contains(
                "upstream packing: $145.9000/h for 2 nodes; cost packing: $37.1500/h for 367 nodes; LP lower bound $34.3600/h"
            ),
            "{t}"
        );
        r.packing.lower_bound_per_hour = None;
        assert!(r.to_json().contains("\"lowerBoundPerHour\": null"));
        assert!(render_table(&r).contains("LP lower bound not known"));
        // A report without the object (older runs) still reads, as upstream packing with nothing launched.
        let mut old: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap();
        old.as_object_mut().map(|o| o.remove("packing"));
        let back: Report = serde_json::from_value(old).unwrap();
        assert_eq!(back.packing, PackingSummary::default());
    }

    #[test]
    fn rounding_is_stable() {
        assert_eq!(round_to(0.1 + 0.2, 6), 0.3);
        assert_eq!(round_to(-0.000_000_1, 6).to_string(), "0");
        assert_eq!(round_to(f64::NAN, 6), 0.0);
    }
}
