//! Node repair as Karpenter v1.15 does it (gate `NodeRepair`): a voluntary disruption method, through the
//! simulated world as `simulate` runs it. Each test is named after upstream's
//! `pkg/controllers/disruption/repair_test.go` case it follows; where v1.14 decides the same situation differently
//! (forcefully, ignoring budgets and vetoes), that is asserted beside it. v1.14's own cases are in
//! tests/node_repair.rs.

use crate::common;

use karpenter_tui::controller::cloud::{RepairAction, RepairPolicy};
use karpenter_tui::sim::report::{DecisionDetail, DecisionState, DisruptionMethod, DisruptionReason, Report};
use karpenter_tui::sim::run::{Playback, run};
use karpenter_tui::sim::scenario::{Scenario, parse_scenario};
use karpenter_tui::sim::world::EventRecord;

const MINUTE: i64 = 60_000;

use common::SMALL_ON_DEMAND_TYPES as INLINE;

/// A pool of three nodes, one 1500m pod on each (`replicas` of them), `disruption` lines under the pool's
/// `spec.disruption`, `extra_objects` appended to `objects`, and `n1_extra` on n1's entry.
fn scenario(
    version: &str,
    replicas: u32,
    disruption: &str,
    extra_objects: &str,
    n1_extra: &str,
    events: &str,
) -> Scenario {
    scenario_of(3, version, replicas, disruption, extra_objects, n1_extra, events)
}

/// [`scenario`] with `count` nodes.
fn scenario_of(
    count: usize,
    version: &str,
    replicas: u32,
    disruption: &str,
    extra_objects: &str,
    n1_extra: &str,
    events: &str,
) -> Scenario {
    let text = text_of(count, version, replicas, disruption, extra_objects, n1_extra, events);
    parse_scenario(&text, "test.yaml").unwrap_or_else(|e| panic!("{e}\n{text}"))
}

fn text_of(
    count: usize,
    version: &str,
    replicas: u32,
    disruption: &str,
    extra_objects: &str,
    n1_extra: &str,
    events: &str,
) -> String {
    let others: String = (2..=count)
        .map(|i| {
            let zone = if i % 2 == 0 { "z1" } else { "z2" };
            format!("  - {{name: n{i}, instanceType: small, zone: {zone}, capacityType: on-demand, nodePool: default, age: 1h}}\n")
        })
        .collect();
    format!(
        r#"name: repair-v115
until: 40m
settings:
  karpenterVersion: "{version}"
  featureGates: {{NodeRepair: true}}
{INLINE}
objects:
  - apiVersion: karpenter.sh/v1
    kind: NodePool
    metadata: {{name: default}}
    spec:
      template:
        spec:
          nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
          terminationGracePeriod: 5m
      disruption:
        consolidateAfter: 1h
{disruption}
  - apiVersion: apps/v1
    kind: Deployment
    metadata: {{name: app}}
    spec:
      replicas: {replicas}
      selector: {{matchLabels: {{app: app}}}}
      template:
        metadata: {{labels: {{app: app}}}}
        spec:
          terminationGracePeriodSeconds: 30
          containers: [{{name: c, image: x, resources: {{requests: {{cpu: "1500m", memory: 1Gi}}}}}}]
{extra_objects}
nodes:
  - {{name: n1, instanceType: small, zone: z1, capacityType: on-demand, nodePool: default, age: 1h{n1_extra}}}
{others}events:
{events}"#
    )
}

/// n1's Ready turns False at 1m: KWOK's policy (which the simulated cloud plays for an inline catalog) tolerates
/// that for 10 minutes, so repair is due at 11m.
/// A PDB that allows no eviction of the app's pods.
const PDB: &str = "  - apiVersion: policy/v1\n    kind: PodDisruptionBudget\n    metadata: {name: app}\n    spec:\n      maxUnavailable: 0\n      selector: {matchLabels: {app: app}}\n";

const N1_NOT_READY: &str =
    "  - at: 1m\n    condition: {node: n1, type: Ready, status: \"False\", reason: KubeletNotReady}\n";

fn simulate(s: &Scenario) -> Report {
    run(s, None, None).unwrap_or_else(|e| panic!("{e}"))
}

/// The events the world recorded while playing `s` for `minutes`.
fn events(s: &Scenario, minutes: i64) -> Vec<EventRecord> {
    let mut p = Playback::new(s).unwrap_or_else(|e| panic!("{e}"));
    let end = p.start + minutes * MINUTE;
    p.advance(end).unwrap_or_else(|e| panic!("{e}"));
    p.world.record.events.iter().cloned().collect()
}

struct Repair {
    at: f64,
    candidates: Vec<String>,
    replacements: usize,
    state: DecisionState,
}

/// v1.15's repairs: disruption decisions of the `repair` method.
fn repairs(r: &Report) -> Vec<Repair> {
    r.decisions
        .iter()
        .filter_map(|d| match &d.detail {
            DecisionDetail::Disruption {
                method: DisruptionMethod::Repair,
                reason,
                candidates,
                replacements,
                state,
                ..
            } => {
                assert_eq!(*reason, DisruptionReason::Unhealthy);
                Some(Repair {
                    at: d.at,
                    candidates: candidates.clone(),
                    replacements: replacements.len(),
                    state: *state,
                })
            }
            _ => None,
        })
        .collect()
}

/// v1.14's forceful repairs.
fn forceful(r: &Report) -> Vec<(f64, String)> {
    r.decisions
        .iter()
        .filter_map(|d| match &d.detail {
            DecisionDetail::Repair { candidates, .. } => Some((d.at, candidates.join(","))),
            _ => None,
        })
        .collect()
}

fn deleted(r: &Report, node: &str) -> Option<f64> {
    r.nodes.iter().find(|n| n.name == node).and_then(|n| n.deleted_at)
}

fn blocked<'a>(events: &'a [EventRecord], object: &str) -> Vec<&'a EventRecord> {
    events.iter().filter(|e| e.object == object && e.reason == "DisruptionBlocked").collect()
}

#[test]
fn should_pre_spin_a_replacement_and_terminate_the_unhealthy_node_only_after_the_replacement_is_healthy() {
    let r = simulate(&scenario("1.15", 3, "", "", "", N1_NOT_READY));
    let rs = repairs(&r);
    assert_eq!(rs.len(), 1, "one repair");
    assert_eq!((rs[0].at, rs[0].candidates.as_slice()), (660.0, &["n1".to_string()][..]));
    assert_eq!((rs[0].replacements, rs[0].state), (1, DecisionState::Executed));
    // The replacement is launched at 11m and initialized before n1 goes.
    let replacement = r.nodes.iter().find(|n| n.created_at >= 660.0).expect("a replacement node");
    let ready = replacement.initialized_at.expect("the replacement initialized");
    let gone = deleted(&r, "n1").expect("n1 removed");
    assert!(ready < gone, "n1 deleted at {gone}, its replacement initialized at {ready}");
    // The pod moved by eviction, not deletion at the repair: it was still running when the replacement came up.
    let pod = r.pods.iter().find(|p| p.node.as_deref() == Some("n1")).expect("a pod ran on n1");
    assert!(pod.deleted_at.expect("evicted") >= ready);
    assert!(r.pending.is_empty());
    assert!(forceful(&r).is_empty(), "v1.15 has no forceful repair");

    // v1.14: the NodeClaim is deleted forcefully at 11m, with no replacement ahead of it.
    let old = simulate(&scenario("1.14", 3, "", "", "", N1_NOT_READY));
    assert_eq!(forceful(&old), vec![(660.0, "n1".to_string())]);
    assert!(repairs(&old).is_empty());
}

#[test]
fn should_delete_an_empty_unhealthy_node_without_pre_spinning_a_replacement() {
    // No pods at all: n1 is empty (and do-not-disrupt, which keeps emptiness off it but not repair).
    let dnd = ", annotations: {karpenter.sh/do-not-disrupt: \"true\"}";
    let r = simulate(&scenario("1.15", 0, "", "", dnd, N1_NOT_READY));
    let rs = repairs(&r);
    assert_eq!(rs.len(), 1, "one repair");
    assert_eq!((rs[0].at, rs[0].replacements), (660.0, 0));
    assert!(deleted(&r, "n1").is_some_and(|t| t < 700.0));
    assert_eq!(r.node_claims.iter().filter(|c| c.created_at > 0.0).count(), 0, "nothing launched");
}

#[test]
fn should_not_repair_before_the_toleration_duration_elapses() {
    let s = scenario("1.15", 3, "", "", "", N1_NOT_READY);
    let early = run(&s, Some(std::time::Duration::from_secs(10 * 60 + 59)), None).unwrap_or_else(|e| panic!("{e}"));
    assert!(repairs(&early).is_empty());
    assert!(deleted(&early, "n1").is_none());
    // A kubelet back in time keeps its node.
    let recovered = format!("{N1_NOT_READY}  - at: 9m\n    condition: {{node: n1, type: Ready, status: \"True\"}}\n");
    assert!(repairs(&simulate(&scenario("1.15", 3, "", "", "", &recovered))).is_empty());
}

#[test]
fn should_not_repair_a_node_carrying_the_do_not_repair_annotation() {
    let veto = ", annotations: {karpenter.sh/do-not-repair: \"true\"}";
    let s = scenario("1.15", 3, "", "", veto, N1_NOT_READY);
    let r = simulate(&s);
    assert!(repairs(&r).is_empty());
    assert!(deleted(&r, "n1").is_none());
    let ev = events(&s, 15);
    let message = "repair is blocked through the \"karpenter.sh/do-not-repair\" annotation";
    for object in ["node/n1", "nodeclaim/n1"] {
        let b = blocked(&ev, object);
        assert!(b.iter().any(|e| e.message == message && e.at >= 11 * MINUTE), "{object}: {b:?}");
        assert!(b.iter().all(|e| e.at >= 11 * MINUTE), "only once a policy is eligible: {b:?}");
    }
    // v1.14 does not read the annotation: a scenario for 1.14 that sets it is refused, with where and why.
    let text = text_of(3, "1.14", 3, "", "", veto, N1_NOT_READY);
    let e = parse_scenario(&text, "old.yaml").expect_err("refused under 1.14").to_string();
    assert!(e.contains("nodes[0].annotations[karpenter.sh/do-not-repair]") && e.contains("1.15"), "{e}");
}

#[test]
fn should_still_repair_a_node_carrying_only_the_do_not_disrupt_annotation() {
    let dnd = ", annotations: {karpenter.sh/do-not-disrupt: \"true\"}";
    let rs = repairs(&simulate(&scenario("1.15", 3, "", "", dnd, N1_NOT_READY)));
    assert_eq!(rs.iter().map(|r| r.candidates.join(",")).collect::<Vec<_>>(), ["n1"]);
}

#[test]
fn should_still_repair_a_node_whose_do_not_repair_annotation_is_not_true() {
    let not_true = ", annotations: {karpenter.sh/do-not-repair: \"false\"}";
    assert_eq!(repairs(&simulate(&scenario("1.15", 3, "", "", not_true, N1_NOT_READY))).len(), 1);
}

#[test]
fn should_not_repair_when_the_disruption_budget_is_zero() {
    let zero = "        budgets: [{nodes: \"0\"}]";
    let r = simulate(&scenario("1.15", 3, zero, "", "", N1_NOT_READY));
    assert!(repairs(&r).is_empty());
    assert!(deleted(&r, "n1").is_none());
    // An Unhealthy-only budget of 0 holds repair and nothing else; v1.14 does not pace repair by budgets at all.
    let unhealthy_zero = "        budgets: [{nodes: \"0\", reasons: [Unhealthy]}]";
    assert!(repairs(&simulate(&scenario("1.15", 3, unhealthy_zero, "", "", N1_NOT_READY))).is_empty());
    assert_eq!(forceful(&simulate(&scenario("1.14", 3, zero, "", "", N1_NOT_READY))).len(), 1);
}

#[test]
fn should_repair_with_the_full_policy_decision_once_a_blocking_budget_lifts() {
    let zero = "        budgets: [{nodes: \"0\"}]";
    let lift = format!(
        "{N1_NOT_READY}  - at: 20m\n    patch: {{kind: NodePool, name: default, spec: {{disruption: {{budgets: [{{nodes: \"100%\"}}]}}}}}}\n"
    );
    let rs = repairs(&simulate(&scenario("1.15", 3, zero, "", "", &lift)));
    assert_eq!(rs.len(), 1);
    assert!((1200.0..1260.0).contains(&rs[0].at), "repaired once the budget lifts at 20m: {}", rs[0].at);
    assert_eq!(rs[0].replacements, 1);
}

#[test]
fn should_stop_repairing_a_nodepool_when_more_than_20_percent_of_its_nodes_are_unhealthy() {
    // Three of three nodes watched (one due, two fresh): over ceil(20% × 3) = 1.
    let events_text = format!(
        "{N1_NOT_READY}  - at: 10m\n    condition: {{node: n2, type: Ready, status: \"False\"}}\n  - at: 10m\n    condition: {{node: n3, type: Ready, status: Unknown}}\n"
    );
    let s = scenario("1.15", 3, "", "", "", &events_text);
    let r = run(&s, Some(std::time::Duration::from_secs(15 * 60)), None).unwrap_or_else(|e| panic!("{e}"));
    assert!(repairs(&r).is_empty());
    let ev = events(&s, 15);
    let message = "more than 20% of nodes in nodepool \"default\" are unhealthy";
    for object in ["node/n1", "nodeclaim/n1", "nodepool/default"] {
        assert!(
            ev.iter().any(|e| e.object == object
                && e.reason == "NodeDisruptionBlocked"
                && e.message == message
                && e.warning),
            "{object}: {ev:?}"
        );
    }
}

#[test]
fn should_round_the_repair_circuit_breaker_threshold_up_for_small_nodepools() {
    // One unhealthy node of three is within ceil(20% × 3) = 1.
    assert_eq!(repairs(&simulate(&scenario("1.15", 3, "", "", "", N1_NOT_READY))).len(), 1);
}

#[test]
fn should_not_bypass_a_blocking_pod_without_a_bounded_drain() {
    // The pool's template gives its NodeClaims a grace period: that alone lets repair bound the drain.
    let with_tgp = scenario("1.15", 3, "", PDB, "", N1_NOT_READY);
    assert_eq!(repairs(&simulate(&with_tgp)).len(), 1);
    let mut without = with_tgp.clone();
    for p in &mut without.objects.nodepools {
        p.spec.template.spec.termination_grace_period = None;
    }
    let r = simulate(&without);
    assert!(repairs(&r).is_empty());
    let ev = events(&without, 15);
    let message = "repair requires a termination grace period to bypass blocking pods";
    assert!(blocked(&ev, "node/n1").iter().any(|e| e.message == message), "{ev:?}");
    assert!(blocked(&ev, "nodeclaim/n1").iter().any(|e| e.message == message), "{ev:?}");
}

/// KWOK's policies with every one given `grace` as its termination grace period.
fn bounded(grace: i64) -> Vec<RepairPolicy> {
    let mut p = karpenter_tui::controller::cloud::kwok_repair_policies();
    for x in &mut p {
        x.termination_grace_period = Some(grace);
    }
    p
}

/// When n1's blocked pod went: a PDB allows no eviction, so only the drain's deadline ends it.
fn blocked_pod_gone(s: &Scenario) -> (f64, f64) {
    let r = simulate(s);
    let rs = repairs(&r);
    assert_eq!(rs.len(), 1);
    let replacement = r.nodes.iter().find(|n| n.created_at >= 660.0).expect("a replacement");
    let ready = replacement.initialized_at.expect("initialized");
    let pod = r.pods.iter().find(|p| p.node.as_deref() == Some("n1")).expect("a pod on n1");
    (ready, pod.deleted_at.expect("the blocked pod is deleted at the deadline"))
}

/// How long n1's blocked pod was drained, in minutes, after the replacement was up, with every policy's grace
/// period `grace` (the NodeClaim's is 5 minutes).
fn drained_minutes(grace: i64) -> f64 {
    let mut s = scenario("1.15", 3, "", PDB, "", N1_NOT_READY);
    s.settings.repair_policies = bounded(grace);
    let (ready, gone) = blocked_pod_gone(&s);
    (gone - ready) / 60.0
}

#[test]
fn should_stamp_min_policy_tgp_nodeclaim_tgp_before_requesting_deletion() {
    // Policy 20m, NodeClaim 5m: the deadline is 5 minutes after the replacement is up.
    let bound = drained_minutes(20 * MINUTE);
    assert!((4.5..=5.5).contains(&bound), "drained for {bound} minutes");
}

#[test]
fn a_policy_grace_period_shorter_than_the_nodeclaims_bounds_the_drain() {
    // Policy 2m, NodeClaim 5m: 2 minutes (the upstream case above cannot tell the two apart).
    let bound = drained_minutes(2 * MINUTE);
    assert!((1.5..=2.5).contains(&bound), "drained for {bound} minutes");
}

#[test]
fn should_stamp_a_forceful_immediate_termination_deadline_before_requesting_deletion() {
    let mut s = scenario("1.15", 3, "", PDB, "", N1_NOT_READY);
    s.settings.repair_policies = bounded(0);
    let (ready, gone) = blocked_pod_gone(&s);
    assert!(gone - ready < 30.0, "deleted at once once the replacement is up: {ready} → {gone}");
}

#[test]
fn should_repair_the_higher_priority_condition_first() {
    // Both n1 and n2 are due at once; n2's condition has the higher priority, so it goes first (one a pass, and
    // the pool's budget, 10% of 10 nodes, lets one go at a time; two unhealthy of ten is within the 20%).
    let mut policies = karpenter_tui::controller::cloud::kwok_repair_policies();
    policies.push(RepairPolicy {
        condition_type: "DiskPressure",
        condition_status: "True",
        toleration: 10 * MINUTE,
        reason_pattern: None,
        action: RepairAction::Replace,
        termination_grace_period: None,
        priority: 50,
        gate: None,
    });
    let events_text = format!(
        "{N1_NOT_READY}  - at: 1m\n    condition: {{node: n2, type: DiskPressure, status: \"True\", reason: KubeletHasDiskPressure}}\n"
    );
    let mut s = scenario_of(10, "1.15", 10, "", "", "", &events_text);
    s.settings.repair_policies = policies;
    let rs = repairs(&simulate(&s));
    let order: Vec<String> = rs.iter().map(|r| r.candidates.join(",")).collect();
    assert_eq!(order.first().map(String::as_str), Some("n2"), "{order:?}");
    assert!(order.contains(&"n1".to_string()), "n1 follows: {order:?}");
}

#[test]
fn should_repair_without_disruption_budget() {
    // An uninitialized node is not paced by the budget: n1 registered an hour ago and never became Ready, so its
    // repair is due at once; n2, Ready but for the same time, is paced (budget 0) and would wait.
    let zero = "        budgets: [{nodes: \"0\"}]";
    let n2_not_ready = "  - at: 1m\n    condition: {node: n2, type: Ready, status: \"False\"}\n";
    let s = scenario_of(10, "1.15", 3, zero, "", ", initialized: false", n2_not_ready);
    let rs = repairs(&simulate(&s));
    assert_eq!(rs.iter().map(|r| r.candidates.join(",")).collect::<Vec<_>>(), ["n1"]);
    assert_eq!(rs[0].at, 0.0);
}

#[test]
fn should_not_repair_when_the_node_repair_feature_gate_is_disabled() {
    let mut s = scenario("1.15", 3, "", "", "", N1_NOT_READY);
    s.settings.controller.gates.node_repair = false;
    let r = simulate(&s);
    assert!(repairs(&r).is_empty() && forceful(&r).is_empty());
    assert!(deleted(&r, "n1").is_none());
}

#[test]
fn should_not_repair_when_legacy_node_repair_is_set() {
    let mut s = scenario("1.15", 3, "", "", "", N1_NOT_READY);
    s.settings.controller.legacy_node_repair = true;
    let r = simulate(&s);
    assert!(repairs(&r).is_empty(), "the voluntary method produces nothing");
    assert_eq!(forceful(&r), vec![(660.0, "n1".to_string())], "v1.14's controller runs instead");
}

#[test]
fn in_approve_mode_a_repair_waits_for_an_operator_unless_told_otherwise() {
    let mut s = scenario("1.15", 3, "", "", "", N1_NOT_READY);
    s.settings.controller.mode = karpenter_tui::engine::disruption::gate::Mode::Approve;
    let held = repairs(&simulate(&s));
    assert_eq!(held.len(), 1);
    assert_eq!(held[0].state, DecisionState::AwaitingApproval);
    s.settings.controller.approve_repairs = false;
    let through = repairs(&simulate(&s));
    assert_eq!(through.len(), 1);
    assert_eq!(through[0].state, DecisionState::Executed);
}

#[test]
fn the_shipped_v115_scenario_repairs_one_node_at_a_time_after_approval_and_keeps_the_vetoed_one() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/scenarios/repair-v115.yaml");
    let text = std::fs::read_to_string(path).expect("file");
    let s = parse_scenario(&text, "scenarios/repair-v115.yaml").unwrap_or_else(|e| panic!("{e}"));
    let r = simulate(&s);
    let rs = repairs(&r);
    let seen: Vec<(f64, String, usize, DecisionState)> =
        rs.iter().map(|x| (x.at, x.candidates.join(","), x.replacements, x.state)).collect();
    // node-a and node-b are due at 12m; the budget lets one go; node-a is proposed, approved at 15m, and node-b
    // is proposed only once node-a is gone.
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert_eq!((seen[0].0, seen[0].1.as_str(), seen[0].2, seen[0].3), (720.0, "node-a", 1, DecisionState::Executed));
    assert_eq!((seen[1].1.as_str(), seen[1].3), ("node-b", DecisionState::Executed));
    let a_gone = deleted(&r, "node-a").expect("node-a replaced");
    assert!(a_gone > 900.0, "not before the approval at 15m: {a_gone}");
    assert!(seen[1].0 >= a_gone, "node-b proposed at {} while node-a still used the budget", seen[1].0);
    assert!(deleted(&r, "node-b").expect("node-b replaced") > 1500.0, "not before the approval at 25m");
    assert!(deleted(&r, "node-c").is_none(), "do-not-repair keeps node-c");
    assert!(r.pending.is_empty());
    let ev = events(&s, 40);
    assert!(blocked(&ev, "node/node-c").iter().any(|e| e.message.contains("karpenter.sh/do-not-repair")), "{ev:?}");
}

#[test]
fn the_dashboard_shows_a_repair_proposal_with_its_condition_urgency_drain_and_budget() {
    let mut s = scenario("1.15", 3, "", "", "", N1_NOT_READY);
    s.settings.controller.mode = karpenter_tui::engine::disruption::gate::Mode::Approve;
    let mut p = Playback::new(&s).unwrap_or_else(|e| panic!("{e}"));
    let end = p.start + 12 * MINUTE;
    p.advance(end).unwrap_or_else(|e| panic!("{e}"));
    let v = karpenter_tui::shell::sim_picture::view(&mut p.world, Default::default(), 1);
    let row = v.disruptions.iter().find(|d| d.method == "repair").expect("a repair proposal");
    assert_eq!((row.reason.as_str(), row.candidates.as_slice()), ("Unhealthy", &["n1".to_string()][..]));
    assert!(row.summary == "repair Unhealthy (Ready): replace n1 (small) with small", "{}", row.summary);
    let detail = row.detail.as_deref().expect("why");
    assert!(detail.starts_with("Ready past its repair policy's toleration since 2026-01-01T00:11:00Z"), "{detail}");
    assert!(detail.contains("urgency 0.0") && detail.ends_with("as the NodeClaim's terminationGracePeriod allows"));
    // The pool's default budget, 10% of 3 nodes rounded up: one repair allowed now.
    assert_eq!(row.budget_use, vec![("default".to_string(), 1, 1)]);
}

/// The Nodes pane's "why" lines for `node` at `minutes` into `s`.
fn outlook(s: &Scenario, minutes: i64, node: &str) -> Vec<String> {
    let mut p = Playback::new(s).unwrap_or_else(|e| panic!("{e}"));
    let end = p.start + minutes * MINUTE;
    p.advance(end).unwrap_or_else(|e| panic!("{e}"));
    let v = karpenter_tui::shell::sim_picture::view(&mut p.world, Default::default(), 1);
    v.nodes.iter().find(|n| n.name == node).map(|n| n.outlook.clone()).unwrap_or_default()
}

#[test]
fn a_node_due_for_repair_says_why_it_is_not_repaired() {
    let zero = "        budgets: [{nodes: \"0\"}]";
    let held = outlook(&scenario("1.15", 3, zero, "", "", N1_NOT_READY), 12, "n1");
    assert!(held.iter().any(|l| l.contains("budget for Unhealthy on NodePool \"default\" is 0")), "{held:?}");
    let veto = ", annotations: {karpenter.sh/do-not-repair: \"true\"}";
    let vetoed = outlook(&scenario("1.15", 3, "", "", veto, N1_NOT_READY), 12, "n1");
    assert!(
        vetoed.iter().any(|l| l.contains("repair is blocked through the \"karpenter.sh/do-not-repair\"")),
        "{vetoed:?}"
    );
    let two = format!("{N1_NOT_READY}  - at: 1m\n    condition: {{node: n2, type: Ready, status: \"False\"}}\n");
    let tripped = outlook(&scenario("1.15", 3, zero, "", "", &two), 12, "n1");
    assert!(
        tripped.iter().any(|l| l.contains("more than 20% of nodes in nodepool \"default\" are unhealthy")),
        "{tripped:?}"
    );
}

/// KWOK's policies plus one that reboots: `Ready=False` with a reason matching `RebootMe`, tolerated 10 minutes,
/// its drain bounded to 5 minutes.
fn with_reboot_policy() -> Vec<RepairPolicy> {
    let mut p = karpenter_tui::controller::cloud::kwok_repair_policies();
    p.push(RepairPolicy {
        condition_type: "Ready",
        condition_status: "False",
        toleration: 10 * MINUTE,
        reason_pattern: Some("RebootMe".into()),
        action: RepairAction::Reboot,
        termination_grace_period: Some(5 * MINUTE),
        priority: 0,
        gate: None,
    });
    p
}

/// `Ready=False` with the reason the reboot policy matches, on n1 at `minute`.
fn reboot_fault(minute: u32) -> String {
    format!("  - at: {minute}m\n    condition: {{node: n1, type: Ready, status: \"False\", reason: RebootMe}}\n")
}

/// (at, node, state) of every reboot decision.
fn reboots(r: &Report) -> Vec<(f64, String, DecisionState)> {
    r.decisions
        .iter()
        .filter_map(|d| match &d.detail {
            DecisionDetail::Reboot { candidates, reason, condition, state } => {
                assert_eq!((reason.as_str(), condition.as_str()), ("Unhealthy", "Ready"));
                Some((d.at, candidates.join(","), *state))
            }
            _ => None,
        })
        .collect()
}

#[test]
fn should_commit_an_in_place_reboot_no_replacement_no_termination_for_a_rebootnode_policy() {
    let mut s = scenario("1.15", 3, "", "", "", &reboot_fault(1));
    s.settings.repair_policies = with_reboot_policy();
    // Just after the commit: the drain bound recorded as Go writes it, Rebooting requested, the reason set.
    let mut p = Playback::new(&s).unwrap_or_else(|e| panic!("{e}"));
    let commit = p.start + 11 * MINUTE + 1_000;
    p.advance(commit).unwrap_or_else(|e| panic!("{e}"));
    let snap = p.world.cluster.snapshot();
    let claim = snap.nodeclaims.iter().find(|c| c.metadata.name.as_deref() == Some("n1")).expect("n1's claim");
    let notes = claim.metadata.annotations.clone().unwrap_or_default();
    assert_eq!(notes.get("karpenter.sh/reboot-termination-grace-period").map(String::as_str), Some("5m0s"));
    let rebooting = claim.condition("Rebooting").expect("Rebooting");
    assert_eq!((rebooting.status.as_str(), rebooting.reason.as_deref()), ("True", Some("RebootRequested")));
    assert_eq!(claim.condition("DisruptionReason").and_then(|c| c.reason.as_deref()), Some("Unhealthy"));

    let r = simulate(&s);
    assert_eq!(reboots(&r), vec![(660.0, "n1".to_string(), DecisionState::Executed)]);
    assert!(repairs(&r).is_empty() && forceful(&r).is_empty(), "nothing replaced or deleted");
    assert!(deleted(&r, "n1").is_none(), "the node stays");
    // The reboot ran its course: drained (the pod evicted and placed elsewhere), rebooted, Ready again.
    let w = karpenter_tui::sim::run::run_world(&s, None).unwrap_or_else(|e| panic!("{e}"));
    let snap = w.cluster.snapshot();
    let claim = snap.nodeclaims.iter().find(|c| c.metadata.name.as_deref() == Some("n1")).expect("n1's claim");
    let rebooting = claim.condition("Rebooting").expect("Rebooting");
    assert_eq!((rebooting.status.as_str(), rebooting.reason.as_deref()), ("False", Some("RebootSucceeded")));
    let node = snap.nodes.iter().find(|n| n.metadata.name.as_deref() == Some("n1")).expect("n1");
    assert_eq!(node.status.as_ref().and_then(|s| s.node_info.as_ref()).map(|i| i.boot_id.as_str()), Some("boot-2"));
    assert!(karpenter_tui::engine::lifecycle::node_ready(node));
    let taints = node.spec.as_ref().and_then(|s| s.taints.clone()).unwrap_or_default();
    assert!(!taints.iter().any(|t| t.key == "karpenter.sh/rebooting"), "{taints:?}");
    assert!(r.pending.is_empty());

    // v1.14 has no reboot: the same fault is a forceful repair.
    let mut old = scenario("1.14", 3, "", "", "", &reboot_fault(1));
    old.settings.repair_policies = with_reboot_policy();
    assert_eq!(forceful(&simulate(&old)), vec![(660.0, "n1".to_string())]);
}

#[test]
fn should_escalate_to_replacement_when_the_fault_recurs_after_two_successful_reboots() {
    let faults = format!("{}{}{}", reboot_fault(1), reboot_fault(20), reboot_fault(40));
    let mut s = scenario("1.15", 3, "", "", "", &faults);
    s.until = std::time::Duration::from_secs(60 * 60);
    s.settings.repair_policies = with_reboot_policy();
    let r = simulate(&s);
    let seen = reboots(&r);
    assert_eq!(seen.len(), 2, "two reboots: {seen:?}");
    let rs = repairs(&r);
    assert_eq!(rs.len(), 1, "the third fault replaces the node");
    // Due at 50m; its pod left at the first reboot's drain, so there is nothing to replace it for.
    assert_eq!((rs[0].at, rs[0].replacements), (3000.0, 0));
    assert!(deleted(&r, "n1").is_some());
}

#[test]
fn should_reboot_again_once_earlier_reboots_age_out_of_the_window() {
    // Two reboots in the first half hour; the third fault comes 25 hours on, when neither counts any more.
    let faults = format!("{}{}{}", reboot_fault(1), reboot_fault(20), reboot_fault(25 * 60));
    // do-not-disrupt keeps the emptied node from consolidation meanwhile (repair does not read it).
    let dnd = ", annotations: {karpenter.sh/do-not-disrupt: \"true\"}";
    let text = text_of(3, "1.15", 3, "", "", dnd, &faults).replace("until: 40m", "until: 25h30m");
    let mut s = parse_scenario(&text, "test.yaml").unwrap_or_else(|e| panic!("{e}"));
    s.settings.repair_policies = with_reboot_policy();
    let r = simulate(&s);
    let seen = reboots(&r);
    assert_eq!(seen.len(), 3, "{seen:?}");
    assert_eq!(seen[2].0, ((25 * 60 + 10) * 60) as f64);
    assert!(repairs(&r).is_empty() && deleted(&r, "n1").is_none());
}

#[test]
fn the_dashboard_shows_a_reboot_in_progress() {
    let mut s = scenario("1.15", 3, "", "", "", &reboot_fault(1));
    s.settings.repair_policies = with_reboot_policy();
    let mut p = Playback::new(&s).unwrap_or_else(|e| panic!("{e}"));
    let state_at = |p: &mut Playback, ms: i64| {
        let end = p.start + ms;
        p.advance(end).unwrap_or_else(|e| panic!("{e}"));
        let v = karpenter_tui::shell::sim_picture::view(&mut p.world, Default::default(), 1);
        v.nodes.iter().find(|n| n.name == "n1").map(|n| n.state).expect("n1")
    };
    use karpenter_tui::protocol::view::Lifecycle;
    assert_eq!(state_at(&mut p, 5 * MINUTE), Lifecycle::Unhealthy, "matched, not yet due");
    assert_eq!(state_at(&mut p, 11 * MINUTE + 1_000), Lifecycle::Rebooting);
    assert_eq!(state_at(&mut p, 20 * MINUTE), Lifecycle::Initialized, "back");
}

/// The scenario on the AWS catalog (the simulated cloud plays AWS's repair policies), with `gates` as
/// `settings.featureGates`.
fn on_aws(gates: &str, events: &str) -> Scenario {
    let text = text_of(3, "1.15", 3, "", "", "", events)
        .replace(INLINE, "\ncatalog:\n  source: aws\n  zones: [us-east-1a, us-east-1b]\n")
        .replace("instanceType: small, zone: z1", "instanceType: m5.large, zone: us-east-1a")
        .replace("instanceType: small, zone: z2", "instanceType: m5.large, zone: us-east-1b")
        .replace("featureGates: {NodeRepair: true}", &format!("featureGates: {{{gates}}}"));
    parse_scenario(&text, "aws.yaml").unwrap_or_else(|e| panic!("{e}\n{text}"))
}

#[test]
fn aws_reboots_for_repair_only_behind_its_gate() {
    let xid = "  - at: 1m\n    condition: {node: n1, type: AcceleratedHardwareReady, status: \"False\", reason: NvidiaXID46Error}\n";
    let gated = simulate(&on_aws("NodeRepair: true, RebootForRepair: true", xid));
    let rebooted: Vec<(f64, String)> = r_reboots(&gated);
    // AWS tolerates AcceleratedHardwareReady 10 minutes. The scenario's fault outlives the reboot (a simulated
    // reboot brings back only Ready), so it is rebooted again 10 minutes after the first came back.
    assert_eq!(rebooted.first(), Some(&(660.0, "n1".to_string())), "{rebooted:?}");
    assert!(repairs(&gated).iter().all(|r| r.at > rebooted[0].0), "not replaced first");
    let off = simulate(&on_aws("NodeRepair: true", xid));
    assert!(r_reboots(&off).is_empty());
    assert_eq!(
        repairs(&off).iter().map(|r| (r.at, r.candidates.join(","))).collect::<Vec<_>>(),
        [(660.0, "n1".into())]
    );
}

/// (at, node) of every reboot decision, whatever its condition.
fn r_reboots(r: &Report) -> Vec<(f64, String)> {
    r.decisions
        .iter()
        .filter_map(|d| match &d.detail {
            DecisionDetail::Reboot { candidates, .. } => Some((d.at, candidates.join(","))),
            _ => None,
        })
        .collect()
}

#[test]
fn the_legacy_controller_under_1_15_honours_do_not_repair() {
    // v1.15's `--legacy-node-repair` runs v1.14's controller, which in v1.15 reads the veto.
    let veto = ", annotations: {karpenter.sh/do-not-repair: \"true\"}";
    let mut s = scenario("1.15", 3, "", "", veto, N1_NOT_READY);
    s.settings.controller.legacy_node_repair = true;
    let r = simulate(&s);
    assert!(forceful(&r).is_empty() && repairs(&r).is_empty());
    assert!(deleted(&r, "n1").is_none());
}

#[test]
fn an_approved_reboot_holds_though_its_pods_would_need_new_capacity() {
    // Approve mode: the reboot waits for the operator; at approval it is checked again, and a reboot does not
    // remove its node, so its pods needing a new node elsewhere does not invalidate it.
    let mut s = scenario("1.15", 3, "", "", "", &format!("{}  - at: 15m\n    approve: all\n", reboot_fault(1)));
    s.settings.repair_policies = with_reboot_policy();
    s.settings.controller.mode = karpenter_tui::engine::disruption::gate::Mode::Approve;
    let seen = reboots(&simulate(&s));
    assert_eq!(seen, vec![(660.0, "n1".to_string(), DecisionState::Executed)]);
}

/// A NodePool, its NodeClaim and Node as an API server returns them, the Node NotReady since long ago.
const NOT_READY_NODE: &str = r#"
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.kwok.sh, kind: KWOKNodeClass, name: default}
  disruption: {consolidationPolicy: WhenEmptyOrUnderutilized, consolidateAfter: 1h}
---
apiVersion: karpenter.sh/v1
kind: NodeClaim
metadata:
  name: default-abcde
  labels: {karpenter.sh/nodepool: default}
  creationTimestamp: "2026-01-01T00:00:00Z"
spec:
  nodeClassRef: {group: karpenter.kwok.sh, kind: KWOKNodeClass, name: default}
  requirements: [{key: karpenter.sh/nodepool, operator: In, values: [default]}]
status:
  nodeName: node-a
  providerID: kwok://default-abcde
  conditions:
    - {type: Launched, status: "True", lastTransitionTime: "2026-01-01T00:00:10Z", reason: Launched, message: ""}
    - {type: Registered, status: "True", lastTransitionTime: "2026-01-01T00:00:20Z", reason: Registered, message: ""}
    - {type: Initialized, status: "True", lastTransitionTime: "2026-01-01T00:00:30Z", reason: Initialized, message: ""}
---
apiVersion: v1
kind: Node
metadata:
  name: node-a
  creationTimestamp: "2026-01-01T00:00:20Z"
  labels:
    karpenter.sh/nodepool: default
    karpenter.sh/registered: "true"
    karpenter.sh/initialized: "true"
    karpenter.sh/capacity-type: on-demand
    node.kubernetes.io/instance-type: c-4x-amd64-linux
    topology.kubernetes.io/zone: test-zone-a
    kubernetes.io/hostname: node-a
spec:
  providerID: kwok://default-abcde
status:
  capacity: {cpu: "4", memory: 16Gi, pods: "110"}
  allocatable: {cpu: "4", memory: 16Gi, pods: "110"}
  conditions:
    - {type: Ready, status: "False", lastTransitionTime: "2026-01-01T01:00:00Z", reason: KubeletNotReady, message: ""}
"#;

#[test]
fn plan_shows_v115s_repair_of_a_node_past_its_toleration() {
    use karpenter_tui::controller::settings::FeatureGates;
    use karpenter_tui::engine::version::KarpenterVersion::{V1_14, V1_15};
    let m = karpenter_tui::engine::manifests::ClusterObjects::parse_for(NOT_READY_NODE, "m.yaml", V1_15)
        .unwrap_or_else(|e| panic!("{e}"));
    let catalog = karpenter_tui::engine::catalog::kwok::kwok_catalog("us-east-1");
    let now = karpenter_tui::engine::lifecycle::parse_rfc3339("2026-01-02T00:00:00Z").unwrap();
    let gates = FeatureGates { node_repair: true, ..Default::default() };
    let provisioning = karpenter_tui::cli::plan::plan(&m, &catalog);
    let (pass, outlook) = karpenter_tui::cli::plan::disruption_with(&m, &catalog, &provisioning, now, gates, V1_15);
    let cmd = pass.command.expect("repair");
    assert_eq!(cmd.method.as_str(), "repair");
    assert_eq!(cmd.node_names(), ["node-a"]);
    assert!(cmd.summary().contains("Ready"), "{}", cmd.summary());
    assert!(matches!(
        outlook.get("node-a"),
        Some(karpenter_tui::engine::disruption::consolidation::Outlook::Disruptable(_))
    ));
    // Under 1.14, or with the gate off, repair is not a disruption method: nothing of the kind is proposed.
    for (gates, version) in [(gates, V1_14), (FeatureGates::default(), V1_15)] {
        let (pass, _) = karpenter_tui::cli::plan::disruption_with(&m, &catalog, &provisioning, now, gates, version);
        assert!(pass.command.is_none_or(|c| c.method.as_str() != "repair"), "{version:?}");
    }
}
