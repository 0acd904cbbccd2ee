//! The example scenarios shipped in `scenarios/` each exist to show one piece of Karpenter behaviour. These tests run
//! them through the simulator (`sim::run::run`, what `karpenter-tui simulate FILE` prints) and check that the report
//! shows that behaviour — facts read from the report's node, pod, NodeClaim and decision records and checked against
//! the scenario's own NodePools, workloads and timeline, never a recorded copy of a previous output:
//!
//! - `walkthrough.yaml`: `inflate` scaled 1 → 5 → 20 → 10 → 5 → 0 on a spot-and-on-demand NodePool: capacity
//!   grows with each scale-out, every replica binds, consolidation shrinks the cluster after the scale-down, and it
//!   returns to zero nodes.
//! - `prod-dev.yaml`: two weighted, limited NodePools: workloads land on the pool they select, the limits are never
//!   exceeded (dev's growth stops at its limit and the pending pods say so), the heavier pool wins a workload that
//!   selects neither, prod (WhenEmpty, PDB) is never disrupted and dev shrinks after its scale-down.
//! - `spread.yaml`: zonal topology spread (maxSkew 1) with hostname anti-affinity: every placement keeps the zones
//!   within the skew, never two `web` pods on one node, one new node per pod, emptied nodes removed.
//! - `daemonsets.yaml`: every node runs one pod of each DaemonSet, no node is over-committed, and NodeClaims are sized
//!   for their pods plus the DaemonSet overhead.
//! - `gpu.yaml`: a tainted GPU NodePool next to a CPU one: trainers only on GPU instances, CPU pods never there, the
//!   GPU limit held, and the GPU node released only by emptiness after its consolidateAfter.
//!
//! Invariants every scenario must keep (nodes match their NodePool, nothing over-committed, nothing left pending) are
//! checked over all five. `bench-day.yaml` (a release-build benchmark) and `kwok-inline.yaml` are not run here. Each
//! scenario runs once per test binary; two tests replay a variant of one (a different weight or pod size) where the
//! shipped file alone cannot tell right from wrong.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::OnceLock;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use karpenter_tui::engine::api::duration::parse_go_duration;
use karpenter_tui::engine::api::nodepool::NodePool;
use karpenter_tui::engine::catalog::Catalog;
use karpenter_tui::engine::resources::Resources;
use karpenter_tui::engine::scheduling::pod::pod_requests;
use karpenter_tui::sim::report::{
    DecisionDetail, DecisionState, DisruptionMethod, DisruptionReason, NodeRecord, PodRecord, Report,
};
use karpenter_tui::sim::run::{build_catalog, run};
use karpenter_tui::sim::scenario::{Action, Scenario, parse_scenario};

const SCENARIOS: [&str; 5] = ["walkthrough.yaml", "prod-dev.yaml", "spread.yaml", "daemonsets.yaml", "gpu.yaml"];

/// `settings.validationDelay` default: a consolidation decision is re-checked this long before it starts.
const VALIDATION_SECONDS: f64 = 15.0;

/// A scenario, the catalog it builds and its report.
struct Run {
    s: Scenario,
    catalog: Catalog,
    report: Report,
}

fn load(file: &str) -> Scenario {
    let path = format!("{}/scenarios/{file}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    parse_scenario(&text, &path).unwrap_or_else(|e| panic!("{e}"))
}

fn simulate(s: Scenario, until: Option<Duration>) -> Run {
    let catalog = build_catalog(&s).unwrap_or_else(|e| panic!("{e}"));
    let report = run(&s, until, None).unwrap_or_else(|e| panic!("{e}"));
    Run { s, catalog, report }
}

/// The shipped scenario run to its end, once per test binary.
fn shipped(file: &str) -> &'static Run {
    static RUNS: [OnceLock<Run>; SCENARIOS.len()] = [const { OnceLock::new() }; SCENARIOS.len()];
    let i = SCENARIOS.iter().position(|f| *f == file).unwrap_or_else(|| panic!("{file} is not in SCENARIOS"));
    RUNS[i].get_or_init(|| simulate(load(file), None))
}

fn seconds(d: Duration) -> f64 {
    d.as_secs_f64()
}

/// A record that lives over `[from, until)`.
fn alive(from: f64, until: Option<f64>, t: f64) -> bool {
    from <= t && until.is_none_or(|u| t < u)
}

/// The pod is bound to its node at `t`.
fn bound(p: &PodRecord, t: f64) -> bool {
    p.bound_at.is_some_and(|b| alive(b, p.deleted_at, t))
}

impl Run {
    fn node(&self, name: &str) -> &NodeRecord {
        self.report.nodes.iter().find(|n| n.name == name).unwrap_or_else(|| panic!("no node {name} in the report"))
    }

    /// Pods of a Deployment or DaemonSet (`<name>-<suffix>` in its namespace).
    fn pods(&self, namespace: &str, workload: &str) -> Vec<&PodRecord> {
        let prefix = format!("{workload}-");
        self.report.pods.iter().filter(|p| p.namespace == namespace && p.name.starts_with(&prefix)).collect()
    }

    /// The pods of `workload` bound at `t`.
    fn bound_pods(&self, namespace: &str, workload: &str, t: f64) -> Vec<&PodRecord> {
        self.pods(namespace, workload).into_iter().filter(|p| bound(p, t)).collect()
    }

    fn pool(&self, name: &str) -> &NodePool {
        self.s
            .objects
            .nodepools
            .iter()
            .find(|p| p.metadata.name.as_deref() == Some(name))
            .unwrap_or_else(|| panic!("no NodePool {name} in {}", self.s.name))
    }

    fn consolidate_after(&self, pool: &str) -> f64 {
        let d = &self.pool(pool).spec.disruption.consolidate_after;
        seconds(parse_go_duration(d).unwrap_or_else(|e| panic!("consolidateAfter {d}: {e}")))
    }

    fn capacity(&self, instance_type: &str) -> &Resources {
        &self.catalog.get(instance_type).unwrap_or_else(|| panic!("{instance_type} not in the catalog")).capacity
    }

    fn allocatable(&self, instance_type: &str) -> Resources {
        self.catalog.get(instance_type).unwrap_or_else(|| panic!("{instance_type} not in the catalog")).allocatable()
    }

    /// Nodes alive at `t`, optionally of one NodePool.
    fn nodes_at(&self, t: f64, pool: Option<&str>) -> Vec<&NodeRecord> {
        self.report
            .nodes
            .iter()
            .filter(|n| alive(n.created_at, n.deleted_at, t) && pool.is_none_or(|p| n.node_pool.as_deref() == Some(p)))
            .collect()
    }

    /// Total CPU capacity (millicores) of the nodes alive at `t`.
    fn cpu_at(&self, t: f64) -> i64 {
        self.nodes_at(t, None).iter().map(|n| self.capacity(&n.instance_type).cpu).sum()
    }

    /// The most of `resource` a NodePool's launched NodeClaims held at once (the instance type's capacity, over each
    /// claim's lifetime), which is what its `limits` cap.
    fn peak_usage(&self, pool: &str, resource: &str) -> i64 {
        let claims: Vec<(f64, Option<f64>, i64)> = self
            .report
            .node_claims
            .iter()
            .filter(|c| c.node_pool == pool)
            .filter_map(|c| {
                let l = c.launched.as_ref()?;
                Some((c.created_at, c.deleted_at, self.capacity(&l.instance_type).get(resource)))
            })
            .collect();
        claims
            .iter()
            .map(|(t, _, _)| {
                claims.iter().filter(|(from, until, _)| alive(*from, *until, *t)).map(|c| c.2).sum::<i64>()
            })
            .max()
            .unwrap_or(0)
    }

    fn limit(&self, pool: &str, resource: &str) -> i64 {
        let limits = self.pool(pool).spec.limits.clone().unwrap_or_default();
        let r = Resources::from_quantities(limits.iter().map(|(k, q)| (k.as_str(), q.0.as_str())))
            .unwrap_or_else(|(k, e)| panic!("limit {k}: {e:?}"));
        r.get(resource)
    }

    /// Per-pod requests of every Deployment and DaemonSet, by namespace and pod-name prefix.
    fn workload_requests(&self) -> Vec<(String, String, Resources)> {
        let requests = |t: &PodTemplateSpec| {
            let pod = Pod { metadata: t.metadata.clone().unwrap_or_default(), spec: t.spec.clone(), status: None };
            pod_requests(&pod.into()).unwrap_or_else(|e| panic!("{e:?}"))
        };
        let objects = &self.s.objects;
        let deployments = objects.deployments.iter().map(|d| (&d.metadata, &d.spec.template));
        let daemonsets = objects.daemonsets.iter().map(|d| (&d.metadata, &d.spec.template));
        deployments
            .chain(daemonsets)
            .map(|(meta, template)| {
                let ns = meta.namespace.clone().unwrap_or_else(|| "default".to_string());
                (ns, format!("{}-", meta.name.clone().unwrap_or_default()), requests(template))
            })
            .collect()
    }

    /// Executed (or still executing) disruption decisions.
    fn disruptions(&self) -> Vec<Disruption<'_>> {
        self.report
            .decisions
            .iter()
            .filter_map(|d| match &d.detail {
                DecisionDetail::Disruption { method, reason, candidates, replacements, state, .. } => {
                    Some(Disruption {
                        at: d.at,
                        method: *method,
                        reason: *reason,
                        candidates,
                        replacements: replacements.len(),
                        state: *state,
                    })
                }
                DecisionDetail::Provision { .. } | DecisionDetail::Repair { .. } | DecisionDetail::Reboot { .. } => {
                    None
                }
            })
            .collect()
    }

    /// Provisioning decisions: when, the NodeClaims made and the pods they were made for.
    fn provisions(&self) -> Vec<(f64, &[String], u64)> {
        self.report
            .decisions
            .iter()
            .filter_map(|d| match &d.detail {
                DecisionDetail::Provision { node_claims, pods, .. } => Some((d.at, node_claims.as_slice(), *pods)),
                DecisionDetail::Disruption { .. } | DecisionDetail::Repair { .. } | DecisionDetail::Reboot { .. } => {
                    None
                }
            })
            .collect()
    }

    /// `(time, replicas)` of a Deployment: its initial replicas, then every `scale` event.
    fn scale_steps(&self, namespace: &str, name: &str) -> Vec<(f64, i32)> {
        let d = self
            .s
            .objects
            .deployments
            .iter()
            .find(|d| d.metadata.name.as_deref() == Some(name))
            .unwrap_or_else(|| panic!("no Deployment {name}"));
        let mut steps = vec![(0.0, d.spec.replicas.unwrap_or(1))];
        for e in &self.s.events {
            if let Action::Scale(sc) = &e.action
                && sc.namespace == namespace
                && sc.name == name
            {
                steps.push((seconds(e.at), sc.replicas));
            }
        }
        steps
    }
}

struct Disruption<'a> {
    at: f64,
    method: DisruptionMethod,
    reason: DisruptionReason,
    candidates: &'a [String],
    replacements: usize,
    state: DecisionState,
}

impl Disruption<'_> {
    fn started(&self) -> bool {
        matches!(self.state, DecisionState::Executed | DecisionState::InProgress)
    }

    fn names(&self, node: &str) -> bool {
        self.candidates.iter().any(|c| c == node)
    }
}

/// Whether node labels satisfy one NodePool requirement.
fn satisfies(labels: &BTreeMap<String, String>, key: &str, op: &str, values: &[String]) -> bool {
    let v = labels.get(key);
    let int = |s: &str| s.parse::<i64>().ok();
    let bound = || values.first().and_then(|b| int(b));
    let cmp = |f: fn(i64, i64) -> bool| v.and_then(|v| int(v)).zip(bound()).is_some_and(|(v, b)| f(v, b));
    match op {
        "In" => v.is_some_and(|v| values.contains(v)),
        "NotIn" => v.is_none_or(|v| !values.contains(v)),
        "Exists" => v.is_some(),
        "DoesNotExist" => v.is_none(),
        "Gt" => cmp(|v, b| v > b),
        "Lt" => cmp(|v, b| v < b),
        "Gte" => cmp(|v, b| v >= b),
        "Lte" => cmp(|v, b| v <= b),
        other => panic!("unknown operator {other}"),
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Invariants over every shipped scenario
// ---------------------------------------------------------------------------------------------------------------

#[test]
fn every_node_satisfies_its_nodepool() {
    for file in SCENARIOS {
        let r = shipped(file);
        assert!(!r.report.nodes.is_empty(), "{file}: no nodes at all");
        for n in &r.report.nodes {
            let pool_name = n.node_pool.as_deref().unwrap_or_else(|| panic!("{file}: {} is unmanaged", n.name));
            let pool = r.pool(pool_name);
            assert_eq!(
                n.labels.get("karpenter.sh/nodepool").map(String::as_str),
                Some(pool_name),
                "{file}: {}",
                n.name
            );
            for req in &pool.spec.template.spec.requirements {
                assert!(
                    satisfies(&n.labels, &req.key, &req.operator, &req.values),
                    "{file}: {} ({}) breaks {pool_name}'s requirement {} {} {:?}: {:?}",
                    n.name,
                    n.instance_type,
                    req.key,
                    req.operator,
                    req.values,
                    n.labels.get(&req.key)
                );
            }
            for (k, v) in &pool.spec.template.metadata.labels {
                assert_eq!(n.labels.get(k), Some(v), "{file}: {} lacks {pool_name}'s template label {k}", n.name);
            }
            assert_eq!(n.labels.get("node.kubernetes.io/instance-type"), Some(&n.instance_type), "{file}");
            assert_eq!(n.labels.get("topology.kubernetes.io/zone"), Some(&n.zone), "{file}");
            assert_eq!(n.labels.get("karpenter.sh/capacity-type"), Some(&n.capacity_type), "{file}");
        }
    }
}

#[test]
fn no_node_is_ever_overcommitted() {
    for file in SCENARIOS {
        let r = shipped(file);
        let workloads = r.workload_requests();
        let requests = |p: &PodRecord| {
            workloads
                .iter()
                .find(|(ns, prefix, _)| *ns == p.namespace && p.name.starts_with(prefix.as_str()))
                .map(|w| &w.2)
                .unwrap_or_else(|| panic!("{file}: no workload for pod {}/{}", p.namespace, p.name))
        };
        for n in &r.report.nodes {
            let allocatable = r.allocatable(&n.instance_type);
            let on: Vec<&PodRecord> = r.report.pods.iter().filter(|p| p.node.as_deref() == Some(&n.name)).collect();
            for t in on.iter().filter_map(|p| p.bound_at) {
                let mut sum = Resources::default();
                for p in on.iter().filter(|p| bound(p, t)) {
                    sum.add(requests(p));
                }
                assert!(
                    sum.fits_in(&allocatable),
                    "{file}: at {t}s the pods on {} ({}) request {sum:?}, more than its allocatable {allocatable:?}",
                    n.name,
                    n.instance_type
                );
            }
        }
    }
}

#[test]
fn nothing_is_left_pending_and_every_live_pod_is_bound() {
    for file in SCENARIOS {
        let r = shipped(file);
        assert!(r.report.pending.is_empty(), "{file}: pending at the end: {:?}", r.report.pending);
        for p in r.report.pods.iter().filter(|p| p.deleted_at.is_none()) {
            let node = p.node.as_deref().unwrap_or_else(|| panic!("{file}: {}/{} never bound", p.namespace, p.name));
            assert!(r.node(node).deleted_at.is_none(), "{file}: {}/{} is bound to a deleted node", p.namespace, p.name);
        }
    }
}

/// Upstream's `StartCommand` launches replacements and, once they are initialized (none here), deletes the
/// candidates' NodeClaims at once; termination drains the node (pods get their grace period, 30 s by default, and
/// `MinDrainTime` is 5 s) and removes it. So a node a delete command names is gone within a minute of the decision.
#[test]
fn disrupted_nodes_are_removed_promptly() {
    const BOUND: f64 = VALIDATION_SECONDS + 30.0 + 15.0;
    let mut late = Vec::new();
    for file in SCENARIOS {
        let r = shipped(file);
        for d in r.disruptions().iter().filter(|d| d.started() && d.replacements == 0) {
            if d.at + BOUND > r.report.simulated_seconds {
                continue;
            }
            for c in d.candidates {
                let gone = r.node(c).deleted_at;
                if gone.is_none_or(|g| g > d.at + BOUND) {
                    late.push(format!("{file}: {:?}/{:?} at {}s: {c} deleted at {gone:?}", d.method, d.reason, d.at));
                }
            }
        }
    }
    assert!(late.is_empty(), "candidates outlive their decision by more than {BOUND}s:\n{}", late.join("\n"));
}

/// Since upstream v1.14 (kubernetes-sigs/karpenter#3006, engine.md §2.6 and §5.6) the consolidation simulation does
/// not move pods onto a node still inside its own `consolidateAfter` window (a pod bound to or removed from it, or
/// its initialization, less than `consolidateAfter` ago). The destinations are read off the report: the pods the
/// Deployment created to replace the ones evicted from the candidates, and the nodes they were bound to.
#[test]
fn consolidation_never_moves_pods_onto_nodes_inside_their_consolidate_after_window() {
    let mut wrong = Vec::new();
    for file in SCENARIOS {
        let r = shipped(file);
        let consolidations = r.disruptions();
        let deletes = consolidations.iter().filter(|d| {
            d.started()
                && d.replacements == 0
                && matches!(d.method, DisruptionMethod::SingleNode | DisruptionMethod::MultiNode)
        });
        for d in deletes {
            let gone = d.candidates.iter().filter_map(|c| r.node(c).deleted_at).fold(d.at, f64::max);
            let moved = r.report.pods.iter().filter(|p| p.created_at >= d.at && p.created_at <= gone);
            for p in moved {
                let Some(dest) = p.node.as_deref().filter(|n| !d.names(n)) else { continue };
                let node = r.node(dest);
                if node.created_at > d.at {
                    continue;
                }
                let on = r.report.pods.iter().filter(|q| q.node.as_deref() == Some(dest));
                let last_event = on
                    .flat_map(|q| [q.bound_at, q.deleted_at])
                    .flatten()
                    .chain(node.initialized_at)
                    .filter(|t| *t <= d.at)
                    .fold(f64::MIN, f64::max);
                let window = r.consolidate_after(node.node_pool.as_deref().unwrap_or_default());
                if d.at - last_event < window {
                    wrong.push(format!(
                        "{file}: {:?} at {}s moved {} onto {dest}, whose last pod event was at {last_event}s \
                         (consolidateAfter {window}s)",
                        d.method, d.at, p.name
                    ));
                }
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

// ---------------------------------------------------------------------------------------------------------------
// walkthrough.yaml
// ---------------------------------------------------------------------------------------------------------------

#[test]
fn walkthrough_capacity_follows_each_scale_step_and_every_replica_binds() {
    let r = shipped("walkthrough.yaml");
    let steps = r.scale_steps("default", "inflate");
    assert_eq!(steps.iter().map(|s| s.1).collect::<Vec<_>>(), [1, 5, 20, 10, 5, 0], "the walkthrough's timeline");
    let end = r.report.simulated_seconds;
    // Just before the next step (or the end), the cluster has settled on this step.
    let settled: Vec<f64> = steps.iter().skip(1).map(|s| s.0 - 1.0).chain([end]).collect();
    let mut previous_cpu = 0;
    for (i, ((at, replicas), settle)) in steps.iter().zip(&settled).enumerate() {
        let live: Vec<&PodRecord> =
            r.pods("default", "inflate").into_iter().filter(|p| alive(p.created_at, p.deleted_at, *settle)).collect();
        let bound_now = live.iter().filter(|p| bound(p, *settle)).count();
        assert_eq!(live.len(), *replicas as usize, "live replicas at {settle}s");
        assert_eq!(bound_now, live.len(), "every replica bound at {settle}s");
        let cpu = r.cpu_at(*settle);
        let requested = i64::from(*replicas) * 500;
        assert!(cpu >= requested, "at {settle}s {cpu}m of node CPU for {requested}m of requests");
        if i == 0 || *replicas > steps[i - 1].1 {
            // Scale-out: the pending replicas trigger a provisioning decision within one batch window ...
            let p = r.provisions().into_iter().find(|p| p.0 > *at && p.0 <= at + 11.0);
            let (_, claims, pods) =
                p.unwrap_or_else(|| panic!("no provisioning within 11 s of the scale to {replicas}"));
            assert!(!claims.is_empty() && pods >= 1 && pods <= *replicas as u64, "{claims:?} for {pods} pods");
            // ... and the cluster ends up bigger than before.
            assert!(cpu > previous_cpu, "scale to {replicas}: {cpu}m of node CPU, {previous_cpu}m before");
        } else {
            assert!(cpu <= previous_cpu, "scale down to {replicas}: node CPU grew from {previous_cpu}m to {cpu}m");
        }
        previous_cpu = cpu;
    }
}

#[test]
fn walkthrough_consolidates_after_the_scale_down_and_returns_to_zero() {
    let r = shipped("walkthrough.yaml");
    let steps = r.scale_steps("default", "inflate");
    assert_eq!(steps.iter().map(|s| s.1).collect::<Vec<_>>(), [1, 5, 20, 10, 5, 0], "the walkthrough's timeline");
    let (down_to_10, down_to_5, to_zero) = (steps[3].0, steps[4].0, steps[5].0);
    let disruptions = r.disruptions();
    for d in &disruptions {
        assert_eq!(d.state, DecisionState::Executed, "{:?} at {}s", d.method, d.at);
    }

    // 20 → 10 leaves the pods fitting on fewer nodes: consolidation removes a node, deleting without replacement.
    let consolidation = disruptions
        .iter()
        .find(|d| d.at >= down_to_10 && d.at < down_to_5)
        .unwrap_or_else(|| panic!("no disruption between the scale to 10 and the scale to 5"));
    assert!(matches!(consolidation.method, DisruptionMethod::SingleNode | DisruptionMethod::MultiNode));
    assert_eq!(consolidation.reason, DisruptionReason::Underutilized);
    assert_eq!(consolidation.replacements, 0, "the pods fit on the remaining node");
    assert!(r.nodes_at(down_to_5 - 1.0, None).len() < r.nodes_at(down_to_10 - 1.0, None).len());

    // 10 → 5 leaves one spot node: replacing spot with cheaper spot needs the SpotToSpotConsolidation gate (off).
    let survivors = r.nodes_at(to_zero - 1.0, None);
    assert_eq!(survivors.len(), 1, "one node carries the last 5 replicas");
    assert_eq!(survivors[0].capacity_type, "spot");
    assert!(!disruptions.iter().any(|d| d.at >= down_to_5 && d.at < to_zero), "spot-to-spot is off by default");

    // 5 → 0: the node is empty; emptiness removes it once consolidateAfter has passed, not before.
    let after = r.consolidate_after("default");
    let empty = disruptions.iter().find(|d| d.at >= to_zero).expect("an emptiness decision after the scale to 0");
    assert_eq!((empty.method, empty.reason), (DisruptionMethod::Emptiness, DisruptionReason::Empty));
    assert!(empty.names(&survivors[0].name));
    assert!(empty.at >= to_zero + after, "emptiness at {}s, before consolidateAfter ({after}s) ran out", empty.at);
    assert!(empty.at <= to_zero + after + 20.0, "emptiness at {}s, long after the node emptied", empty.at);

    // Back to zero: no node, no NodeClaim, no pod, no cost.
    assert!(
        r.report.nodes.iter().all(|n| n.deleted_at.is_some()),
        "nodes left: {:?}",
        r.nodes_at(r.report.simulated_seconds, None)
    );
    assert!(r.report.node_claims.iter().all(|c| c.deleted_at.is_some()));
    assert!(r.report.pods.iter().all(|p| p.deleted_at.is_some()));
    assert_eq!(r.report.cost.final_per_hour, 0.0);
    assert!(r.report.cost.total > 0.0);
}

// ---------------------------------------------------------------------------------------------------------------
// prod-dev.yaml
// ---------------------------------------------------------------------------------------------------------------

#[test]
fn prod_dev_workloads_land_on_the_pool_they_select() {
    let r = shipped("prod-dev.yaml");
    for (ns, workload, pool, capacity_type) in
        [("shop", "checkout", "prod", "on-demand"), ("default", "preview", "dev", "spot")]
    {
        let pods = r.pods(ns, workload);
        assert!(!pods.is_empty());
        for p in pods.iter().filter(|p| p.bound_at.is_some()) {
            let node = r.node(p.node.as_deref().unwrap_or_default());
            assert_eq!(node.node_pool.as_deref(), Some(pool), "{ns}/{} on {}", p.name, node.name);
            assert_eq!(node.labels.get("environment").map(String::as_str), Some(pool));
            assert_eq!(node.capacity_type, capacity_type);
        }
    }
    // Each pool only ever ran its own environment's pods.
    for n in &r.report.nodes {
        let pool = n.node_pool.as_deref().unwrap_or_default();
        let expected = if pool == "prod" { "checkout-" } else { "preview-" };
        for p in r.report.pods.iter().filter(|p| p.node.as_deref() == Some(&n.name)) {
            assert!(p.name.starts_with(expected), "{} on {pool} node {}", p.name, n.name);
        }
    }
}

#[test]
fn prod_dev_limits_are_never_exceeded() {
    let r = shipped("prod-dev.yaml");
    for (pool, resource) in [("prod", "cpu"), ("dev", "cpu"), ("dev", "memory")] {
        let (peak, limit) = (r.peak_usage(pool, resource), r.limit(pool, resource));
        assert!(limit > 0, "{pool} has a {resource} limit");
        assert!(peak <= limit, "{pool}: {resource} peaked at {peak}, over its limit {limit}");
    }
    // dev's scale to 30 at 20m asks for more than its limit: growth stops there, and the replicas that don't fit
    // stay pending until the scale-down at 40m deletes them ...
    let steps = r.scale_steps("default", "preview");
    let (grow, shrink) = (steps[1], steps[2]);
    assert_eq!((grow.1, shrink.1), (30, 4));
    let requested = i64::from(grow.1) * 1500;
    assert!(requested > r.limit("dev", "cpu"), "the scenario asks dev for more than its limit");
    let never_bound: Vec<&PodRecord> =
        r.pods("default", "preview").into_iter().filter(|p| p.bound_at.is_none()).collect();
    assert!(!never_bound.is_empty(), "every preview replica found room: dev grew past its limit");
    for p in &never_bound {
        assert_eq!((p.created_at, p.deleted_at), (grow.0, Some(shrink.0)), "{} pending", p.name);
    }
    // ... and while they wait, the report blames dev's limit (checked a minute after the scale, once the node
    // launched for it has taken its share).
    let mid = simulate(load("prod-dev.yaml"), Some(Duration::from_secs_f64(grow.0 + 60.0)));
    let pending = &mid.report.pending;
    assert_eq!(pending.len(), never_bound.len(), "{pending:?}");
    for p in pending {
        assert!(p.name.starts_with("preview-"), "only preview pods wait: {pending:?}");
        let dev = p.reasons.iter().find(|x| x.node_pool == "dev").unwrap_or_else(|| panic!("{p:?}"));
        assert!(dev.reason.contains("limit"), "dev's reason for {}: {}", p.name, dev.reason);
    }
    // Growth stopped at the limit, not short of it: one more node of a kind dev launched would not have fitted.
    let dev_cpu = r.peak_usage("dev", "cpu");
    let smallest = r.report.nodes.iter().filter(|n| n.node_pool.as_deref() == Some("dev"));
    let smallest = smallest.map(|n| r.capacity(&n.instance_type).cpu).min().unwrap_or_default();
    assert!(dev_cpu + smallest > r.limit("dev", "cpu"), "dev stopped at {dev_cpu}m, below its limit");
}

/// Selects neither environment, so either pool could take it.
const UNSELECTIVE: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: batch, namespace: default}
spec:
  replicas: 1
  selector: {matchLabels: {app: batch}}
  template:
    metadata: {labels: {app: batch}}
    spec:
      containers:
        - name: batch
          image: registry.example.com/batch:1.0
          resources:
            requests: {cpu: "6", memory: 4Gi}
"#;

/// The shipped workloads select their environment, so they never meet the weights. A workload that selects neither
/// can go to either pool: Karpenter makes room for it in the heavier one. Run twice — as shipped (prod 50 > dev 10)
/// and with dev made the heavier (60) — so neither a weight-blind order (the name tie-break also favours prod) nor an
/// inverted one passes both. The check is on Karpenter's decision, not on where the simulated kube-scheduler later
/// binds the pod: the first provisioning decision's NodeClaim for the heavier pool offers only instance types that
/// fit that pool's own replicas plus the 6-CPU pod, while the other pool's NodeClaim is too small for both.
#[test]
fn prod_dev_a_workload_selecting_neither_pool_goes_to_the_heavier_one() {
    for (dev_weight, heavier, lighter) in [(None, "prod", "dev"), (Some(60), "dev", "prod")] {
        let mut s = load("prod-dev.yaml");
        if let Some(w) = dev_weight {
            let dev = s.objects.nodepools.iter_mut().find(|p| p.metadata.name.as_deref() == Some("dev")).expect("dev");
            dev.spec.weight = Some(w);
        }
        let batch: Deployment = serde_yaml::from_str(UNSELECTIVE).expect("deployment");
        s.objects.deployments.push(batch);
        let r = simulate(s, Some(Duration::from_secs(60)));
        let workloads = r.workload_requests();
        let cpu_of = |prefix: &str| workloads.iter().find(|w| w.1 == prefix).map(|w| w.2.cpu).expect("workload");
        // CPU of the replicas that select `pool` (nodeSelector environment=<pool>).
        let own = |pool: &str| -> i64 {
            r.s.objects
                .deployments
                .iter()
                .filter(|d| {
                    let spec = d.spec.template.spec.as_ref();
                    spec.and_then(|p| p.node_selector.as_ref()).and_then(|n| n.get("environment")).map(String::as_str)
                        == Some(pool)
                })
                .map(|d| {
                    i64::from(d.spec.replicas.unwrap_or(1))
                        * cpu_of(&format!("{}-", d.metadata.name.clone().unwrap_or_default()))
                })
                .sum()
        };
        let batch = cpu_of("batch-");
        let (_, claims, _) = r.provisions().first().copied().expect("a provisioning decision");
        // The CPU a pool's claims of that decision can hold for sure: the smallest allocatable among their options.
        let room = |pool: &str| -> i64 {
            claims
                .iter()
                .filter_map(|c| r.report.node_claims.iter().find(|x| x.name == *c && x.node_pool == pool))
                .map(|c| c.instance_types.iter().map(|it| r.allocatable(it).cpu).min().unwrap_or_default())
                .sum()
        };
        let ctx = format!(
            "dev weight {dev_weight:?}: {heavier} has room for {}m, {lighter} for {}m",
            room(heavier),
            room(lighter)
        );
        assert!(
            room(heavier) >= own(heavier) + batch,
            "{ctx}; {heavier} needs {}m with the batch pod",
            own(heavier) + batch
        );
        assert!(room(lighter) < own(lighter) + batch, "{ctx}; {lighter} was sized for the batch pod too");
    }
}

#[test]
fn prod_dev_prod_is_never_disrupted_and_dev_shrinks_after_its_scale_down() {
    let r = shipped("prod-dev.yaml");
    let disruptions = r.disruptions();
    // prod is WhenEmpty and its node always carries checkout (with a PDB): nothing touches it.
    for d in &disruptions {
        for c in d.candidates {
            assert_ne!(r.node(c).node_pool.as_deref(), Some("prod"), "{:?} at {}s names {c}", d.method, d.at);
        }
    }
    let checkout = r.pods("shop", "checkout");
    assert_eq!(checkout.len(), 6, "no checkout pod was ever evicted and replaced");
    assert!(checkout.iter().all(|p| p.deleted_at.is_none()));

    // The scale to 4 at 40m empties a dev node: emptiness removes it after dev's consolidateAfter.
    let shrink = r.scale_steps("default", "preview")[2];
    let after = r.consolidate_after("dev");
    let empty = disruptions.iter().find(|d| d.at >= shrink.0).expect("a disruption after the scale-down");
    assert_eq!((empty.method, empty.reason), (DisruptionMethod::Emptiness, DisruptionReason::Empty));
    assert!(empty.started());
    // Not before consolidateAfter; not much after it either (the pods' 30 s grace and a 10 s poll at most).
    assert!(empty.at >= shrink.0 + after && empty.at <= shrink.0 + after + 45.0, "emptiness at {}s", empty.at);
    for c in empty.candidates {
        assert_eq!(r.node(c).node_pool.as_deref(), Some("dev"));
    }
    let end = r.report.simulated_seconds;
    let dev_nodes = r.nodes_at(end, Some("dev"));
    assert_eq!(dev_nodes.len(), 1, "4 preview pods need one dev node");
    assert_eq!(r.bound_pods("default", "preview", end).len(), 4);
}

// ---------------------------------------------------------------------------------------------------------------
// spread.yaml
// ---------------------------------------------------------------------------------------------------------------

#[test]
fn spread_every_placement_respects_max_skew_and_anti_affinity() {
    let r = shipped("spread.yaml");
    let zones: Vec<String> = r.s.catalog.zones.clone().expect("the scenario names its zones");
    assert_eq!(zones.len(), 3);
    let web = r.pods("default", "web");
    let zone_of = |p: &PodRecord| r.node(p.node.as_deref().unwrap_or_default()).zone.clone();
    let mut placements = 0;
    let times: BTreeSet<u64> = web.iter().filter_map(|p| p.bound_at.map(f64::to_bits)).collect();
    for t in times.into_iter().map(f64::from_bits) {
        let mut counts: BTreeMap<&str, usize> = zones.iter().map(|z| (z.as_str(), 0)).collect();
        for p in web.iter().filter(|p| bound(p, t)) {
            *counts.get_mut(zone_of(p).as_str()).expect("a scenario zone") += 1;
        }
        let min = counts.values().copied().min().unwrap_or_default();
        for p in web.iter().filter(|p| p.bound_at == Some(t)) {
            placements += 1;
            let z = zone_of(p);
            assert!(counts[z.as_str()] - min <= 1, "placing {} in {z} at {t}s makes the zones {counts:?}", p.name);
        }
    }
    assert!(placements >= 9);

    // Hostname anti-affinity: no two web pods ever share a node.
    for (i, a) in web.iter().enumerate() {
        for b in &web[i + 1..] {
            if a.node.is_none() || a.node != b.node {
                continue;
            }
            let (Some(ab), Some(bb)) = (a.bound_at, b.bound_at) else { continue };
            let overlap = ab < b.deleted_at.unwrap_or(f64::MAX) && bb < a.deleted_at.unwrap_or(f64::MAX);
            assert!(!overlap, "{} and {} together on {:?}", a.name, b.name, a.node);
        }
    }

    // Settled after each scale-up the replicas are spread evenly (6 → 2/2/2, 9 → 3/3/3). A scale-down is left out:
    // the ReplicaSet picks the pods it deletes without regard to the spread.
    let steps = r.scale_steps("default", "web");
    for (i, (at, replicas)) in steps.iter().enumerate() {
        if i > 0 && *replicas < steps[i - 1].1 {
            continue;
        }
        let t = steps.get(i + 1).map_or(r.report.simulated_seconds, |s| s.0 - 1.0);
        assert!(t > *at);
        let live = r.bound_pods("default", "web", t);
        assert_eq!(live.len(), *replicas as usize, "bound web pods at {t}s");
        for z in &zones {
            let n = live.iter().filter(|p| zone_of(p) == *z).count();
            assert_eq!(n, *replicas as usize / zones.len(), "{z} at {t}s");
        }
    }
}

#[test]
fn spread_provisions_one_node_per_pod_balanced_over_the_zones() {
    let r = shipped("spread.yaml");
    let provisions = r.provisions();
    assert_eq!(provisions.len(), 2, "the initial 6 and the scale to 9");
    for (at, claims, pods) in provisions {
        assert_eq!(claims.len() as u64, pods, "anti-affinity: one NodeClaim per pod at {at}s");
        let mut per_zone: BTreeMap<&str, usize> = BTreeMap::new();
        for c in claims {
            let record = r.report.node_claims.iter().find(|x| x.name == *c).expect("claim record");
            let launched = record.launched.as_ref().unwrap_or_else(|| panic!("{c} never launched"));
            *per_zone.entry(launched.zone.as_str()).or_default() += 1;
        }
        assert_eq!(per_zone.len(), 3, "claims at {at}s cover every zone: {per_zone:?}");
        let (min, max) = (per_zone.values().min(), per_zone.values().max());
        assert!(max.zip(min).is_some_and(|(a, b)| a - b <= 1), "claims at {at}s: {per_zone:?}");
    }
}

#[test]
fn spread_scale_in_removes_the_emptied_nodes() {
    let r = shipped("spread.yaml");
    let end = r.report.simulated_seconds;
    let web = r.bound_pods("default", "web", end);
    let hosts: BTreeSet<&str> = web.iter().filter_map(|p| p.node.as_deref()).collect();
    let disruptions = r.disruptions();
    // Every node still alive without a web pod is on its way out through a started disruption decision.
    for n in r.nodes_at(end, None) {
        if hosts.contains(n.name.as_str()) {
            continue;
        }
        assert!(disruptions.iter().any(|d| d.started() && d.names(&n.name)), "{} is idle and kept", n.name);
    }
    let removed = r.report.nodes.iter().filter(|n| n.deleted_at.is_some()).count();
    assert!(removed >= 5, "only {removed} of the 6 emptied nodes removed");
    // The default budget (10% of the nodes, rounded up) lets emptiness take one node at a time.
    for d in disruptions.iter().filter(|d| d.method == DisruptionMethod::Emptiness) {
        assert_eq!(d.candidates.len(), 1, "budget of one node, decision at {}s names {:?}", d.at, d.candidates);
    }
}

/// Six nodes are emptied by the scale to 3 at 20m; with one node per emptiness decision (15 s validation, a few
/// seconds of drain) upstream is down to one node per replica well before the end at 30m.
#[test]
fn spread_ends_with_one_node_per_replica() {
    let r = shipped("spread.yaml");
    let end = r.report.simulated_seconds;
    assert_eq!(r.nodes_at(end, None).len(), r.bound_pods("default", "web", end).len());
}

// ---------------------------------------------------------------------------------------------------------------
// daemonsets.yaml
// ---------------------------------------------------------------------------------------------------------------

#[test]
fn daemonsets_run_one_pod_on_every_node() {
    let r = shipped("daemonsets.yaml");
    let daemonsets: Vec<(String, String)> =
        r.s.objects
            .daemonsets
            .iter()
            .map(|d| (d.metadata.namespace.clone().unwrap_or_default(), d.metadata.name.clone().unwrap_or_default()))
            .collect();
    assert_eq!(daemonsets.len(), 4);
    assert!(r.report.nodes.len() >= 2);
    for n in &r.report.nodes {
        for (ns, ds) in &daemonsets {
            let pods: Vec<_> = r.pods(ns, ds).into_iter().filter(|p| p.node.as_deref() == Some(&n.name)).collect();
            assert_eq!(pods.len(), 1, "{ns}/{ds} on {}: {pods:?}", n.name);
            assert!(pods[0].deleted_at.is_none() || pods[0].deleted_at == n.deleted_at);
            assert!(pods[0].bound_at.is_some_and(|b| b <= n.initialized_at.unwrap_or(f64::MAX)), "{ds} on {}", n.name);
        }
    }
    // Karpenter provisions for the application only; DaemonSet pods are never in a provisioning decision.
    let app = r.pods("default", "app");
    let provisioned: u64 = r.provisions().iter().map(|p| p.2).sum();
    assert!(provisioned <= app.len() as u64, "{provisioned} pods provisioned for {} app pods", app.len());
    assert_eq!(r.bound_pods("default", "app", r.report.simulated_seconds).len(), 25);
}

/// At the shipped size (1-CPU pods) the DaemonSets' 425m never tips an AWS instance choice, so the scenario is
/// replayed with a single 3600m replica: 4-vCPU types (3920m allocatable) fit the pod alone but not with the
/// DaemonSets next to it, so none of them may be offered for its NodeClaim.
#[test]
fn daemonset_overhead_is_reserved_when_sizing_nodes() {
    let mut s = load("daemonsets.yaml");
    let app = s.objects.deployments.iter_mut().find(|d| d.metadata.name.as_deref() == Some("app")).expect("app");
    let spec = &mut app.spec;
    spec.replicas = Some(1);
    let requests = spec
        .template
        .spec
        .as_mut()
        .and_then(|p| p.containers[0].resources.as_mut())
        .and_then(|r| r.requests.as_mut())
        .expect("requests");
    requests.insert("cpu".into(), Quantity("3600m".into()));
    s.events.clear();
    let r = simulate(s, Some(Duration::from_secs(300)));

    let mut overhead = Resources::default();
    let workloads = r.workload_requests();
    for (_, prefix, req) in workloads.iter().filter(|w| w.1 != "app-") {
        assert!(!prefix.is_empty());
        overhead.add(req);
    }
    let pod = &workloads.iter().find(|w| w.1 == "app-").expect("app").2;
    let need = pod.plus(&overhead);
    let tipped =
        r.catalog.instance_types.iter().filter(|t| pod.fits_in(&t.allocatable()) && !need.fits_in(&t.allocatable()));
    assert!(tipped.count() > 0, "no instance type where the DaemonSet overhead decides: {need:?}");

    assert_eq!(r.report.node_claims.len(), 1);
    let claim = &r.report.node_claims[0];
    for it in &claim.instance_types {
        assert!(need.fits_in(&r.allocatable(it)), "{it} is offered but can't hold the pod and the DaemonSets {need:?}");
    }
    let node = &r.report.nodes[0];
    assert!(need.fits_in(&r.allocatable(&node.instance_type)));
    let end = r.report.simulated_seconds;
    assert_eq!(r.bound_pods("default", "app", end).len(), 1);
    let on_node = r.report.pods.iter().filter(|p| p.node.as_deref() == Some(&node.name) && bound(p, end)).count();
    assert_eq!(on_node, 5, "the app pod and the four DaemonSet pods share the node");
}

// ---------------------------------------------------------------------------------------------------------------
// gpu.yaml
// ---------------------------------------------------------------------------------------------------------------

const GPU: &str = "nvidia.com/gpu";

#[test]
fn gpu_pods_run_only_on_gpu_instances_and_cpu_pods_never_do() {
    let r = shipped("gpu.yaml");
    let families = ["g5", "g6"];
    let trainers = r.pods("default", "trainer");
    assert!(trainers.iter().filter(|p| p.bound_at.is_some()).count() >= 4);
    for p in trainers.iter().filter(|p| p.bound_at.is_some()) {
        let n = r.node(p.node.as_deref().unwrap_or_default());
        assert_eq!(n.node_pool.as_deref(), Some("gpu"), "{} on {}", p.name, n.name);
        assert!(r.capacity(&n.instance_type).get(GPU) >= 1, "{} on {} ({})", p.name, n.name, n.instance_type);
        let family = n.labels.get("karpenter.k8s.aws/instance-family").map(String::as_str).unwrap_or_default();
        assert!(families.contains(&family), "{} is {family}", n.instance_type);
        assert_eq!(n.capacity_type, "on-demand");
        assert_eq!(n.labels.get("accelerator").map(String::as_str), Some("nvidia"));
    }
    let api = r.pods("default", "api");
    assert_eq!(api.len(), 4);
    for p in &api {
        let n = r.node(p.node.as_deref().unwrap_or_default());
        assert_eq!(n.node_pool.as_deref(), Some("cpu"), "{} on {}", p.name, n.name);
        assert_eq!(r.capacity(&n.instance_type).get(GPU), 0, "{} on a GPU instance {}", p.name, n.instance_type);
    }
    // Every GPU instance belongs to the GPU pool; every GPU-pool node is a GPU instance.
    for n in &r.report.nodes {
        let gpus = r.capacity(&n.instance_type).get(GPU);
        assert_eq!(gpus > 0, n.node_pool.as_deref() == Some("gpu"), "{} ({}, {gpus} GPUs)", n.name, n.instance_type);
    }
}

#[test]
fn gpu_limit_holds_and_every_trainer_runs() {
    let r = shipped("gpu.yaml");
    let (peak, limit) = (r.peak_usage("gpu", GPU), r.limit("gpu", GPU));
    assert_eq!(limit, 8);
    assert!(peak >= 1 && peak <= limit, "gpu pool peaked at {peak} GPUs, limit {limit}");
    let steps = r.scale_steps("default", "trainer");
    assert_eq!(steps.iter().map(|s| s.1).collect::<Vec<_>>(), [2, 4, 0]);
    // Settled on 4 trainers (one GPU each) before the scale to 0.
    let t = steps[2].0 - 1.0;
    let running = r.bound_pods("default", "trainer", t);
    assert_eq!(running.len(), 4);
    let gpus_in_use: i64 = r.nodes_at(t, Some("gpu")).iter().map(|n| r.capacity(&n.instance_type).get(GPU)).sum();
    assert!(gpus_in_use >= 4 && gpus_in_use <= limit, "{gpus_in_use} GPUs for 4 trainers");
}

#[test]
fn gpu_node_is_released_only_by_emptiness_after_its_consolidate_after() {
    let r = shipped("gpu.yaml");
    let to_zero = r.scale_steps("default", "trainer")[2].0;
    let after = r.consolidate_after("gpu");
    let gpu_nodes: Vec<&NodeRecord> = r.report.nodes.iter().filter(|n| n.node_pool.as_deref() == Some("gpu")).collect();
    assert!(!gpu_nodes.is_empty());
    for d in r.disruptions() {
        for c in d.candidates {
            let node = r.node(c);
            // The CPU node (spot, its pods need it) is never disrupted; the GPU pool is WhenEmpty.
            assert_eq!(node.node_pool.as_deref(), Some("gpu"), "{:?} at {}s names {c}", d.method, d.at);
            assert_eq!((d.method, d.reason), (DisruptionMethod::Emptiness, DisruptionReason::Empty));
            assert!(d.at >= to_zero + after, "emptiness at {}s, before consolidateAfter ({after}s) ran out", d.at);
        }
    }
    let emptied: BTreeSet<&str> =
        r.disruptions().iter().filter(|d| d.started()).flat_map(|d| d.candidates.iter().map(String::as_str)).collect();
    for n in gpu_nodes {
        assert!(emptied.contains(n.name.as_str()), "{} idle since {to_zero}s and never disrupted", n.name);
    }
}

/// Upstream writes `lastPodEventTime` when the trainers go (45m), so the empty GPU node is consolidatable at 55m (or
/// 30 s later, if the trainers' grace period counts) and gone a few seconds after the 15 s validation: the report
/// should end with the GPU pool at zero nodes and zero cost.
#[test]
fn gpu_node_is_gone_soon_after_consolidate_after() {
    let r = shipped("gpu.yaml");
    let to_zero = r.scale_steps("default", "trainer")[2].0;
    // The pods' 30 s grace, a 10 s disruption poll, validation, then a few seconds of drain.
    let by = to_zero + r.consolidate_after("gpu") + 30.0 + 10.0 + VALIDATION_SECONDS + 20.0;
    for n in r.report.nodes.iter().filter(|n| n.node_pool.as_deref() == Some("gpu")) {
        assert!(n.deleted_at.is_some_and(|d| d <= by), "{} deleted at {:?}, expected by {by}s", n.name, n.deleted_at);
    }
    assert_eq!(r.report.cost.by_node_pool.get("gpu").map(|c| c.final_per_hour), Some(0.0));
}

/// A node gets its NodePool's taints (kubelet registers with them; Karpenter syncs them at registration), and the
/// report's `taints` should show them — that is how a reader tells the GPU node is reserved for tolerating pods.
#[test]
fn gpu_node_report_shows_the_nodepool_taint() {
    let r = shipped("gpu.yaml");
    for n in r.report.nodes.iter().filter(|n| n.node_pool.as_deref() == Some("gpu")) {
        assert!(
            n.taints.iter().any(|t| t.key == GPU && t.effect == "NoSchedule" && t.value.as_deref() == Some("true")),
            "{}: {:?}",
            n.name,
            n.taints
        );
    }
}
