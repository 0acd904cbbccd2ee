//! Node auto repair (feature gate `NodeRepair`) through the simulated world, as `simulate` runs it: upstream's
//! `controllers/node/health/suite_test.go` cases that need a whole cluster (budgets, do-not-disrupt, the forceful
//! drain), the provider's policies per catalog, the report's `repair` decisions and the shipped `repair.yaml`. The
//! controller-level cases (requeue at the closest deadline, the 20 % rule, non-matching statuses) are unit tests
//! in `src/controller/repair.rs`.

use crate::common;

use karpenter_tui::sim::report::{DecisionDetail, Report};
use karpenter_tui::sim::run::run;
use karpenter_tui::sim::scenario::parse_scenario;

const POOL: &str = r#"
objects:
  - apiVersion: karpenter.sh/v1
    kind: NodePool
    metadata: {name: default}
    spec:
      template:
        spec:
          nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      disruption:
        consolidateAfter: 1h
        budgets: [{nodes: "0"}]
  - apiVersion: policy/v1
    kind: PodDisruptionBudget
    metadata: {name: app}
    spec:
      maxUnavailable: 0
      selector: {matchLabels: {app: app}}
  - apiVersion: apps/v1
    kind: Deployment
    metadata: {name: app}
    spec:
      replicas: 3
      selector: {matchLabels: {app: app}}
      template:
        metadata: {labels: {app: app}}
        spec:
          terminationGracePeriodSeconds: 120
          containers: [{name: c, image: x, resources: {requests: {cpu: "1500m", memory: 1Gi}}}]
nodes:
  - {name: n1, instanceType: small, zone: z1, capacityType: on-demand, nodePool: default, age: 1h}
  - {name: n2, instanceType: small, zone: z1, capacityType: on-demand, nodePool: default, age: 1h}
  - {name: n3, instanceType: small, zone: z2, capacityType: on-demand, nodePool: default, age: 1h,
     annotations: {karpenter.sh/do-not-disrupt: "true"}}
"#;

use common::SMALL_ON_DEMAND_TYPES as INLINE;

fn simulate(catalog: &str, settings: &str, events: &str) -> Report {
    let text = format!("name: repair-test\nuntil: 40m\n{settings}{catalog}{POOL}events:\n{events}");
    let s = parse_scenario(&text, "test.yaml").unwrap_or_else(|e| panic!("{e}"));
    run(&s, None, None).unwrap_or_else(|e| panic!("{e}"))
}

const GATE_ON: &str =
    "settings:\n  karpenterVersion: \"1.14\"\n  disruption: approve\n  featureGates: {NodeRepair: true}\n";

/// (at, node, condition) of every repair decision.
fn repairs(r: &Report) -> Vec<(f64, String, String)> {
    r.decisions
        .iter()
        .filter_map(|d| match &d.detail {
            DecisionDetail::Repair { candidates, reason, condition } => {
                assert_eq!(reason, "Unhealthy");
                Some((d.at, candidates.join(","), condition.clone()))
            }
            _ => None,
        })
        .collect()
}

#[test]
fn an_unhealthy_node_is_repaired_despite_budgets_do_not_disrupt_pdbs_and_approve_mode() {
    // › "should ignore node disruption budgets", › "should ignore do-not-disrupt on a node" (n3 carries the
    // annotation, the pool's budget is nodes: "0", the PDB allows no eviction, and disruption waits for approval).
    let r = simulate(INLINE, GATE_ON, "  - at: 1m\n    condition: {node: n3, type: Ready, status: \"False\"}\n");
    // KWOK's policy for an inline catalog: Ready False for 10 minutes.
    assert_eq!(repairs(&r), vec![(660.0, "n3".to_string(), "Ready".to_string())]);
    let n3 = r.nodes.iter().find(|n| n.name == "n3").expect("n3");
    let gone = n3.deleted_at.expect("n3 removed");
    // Forceful: its pod is deleted at once (no eviction through the PDB, no 120 s grace to wait out).
    let pod = r.pods.iter().find(|p| p.node.as_deref() == Some("n3")).expect("a pod ran on n3");
    let pod_gone = pod.deleted_at.expect("the pod on n3 was deleted");
    assert!((660.0..=662.0).contains(&pod_gone), "pod deleted at {pod_gone}");
    assert!(gone < 700.0, "node gone at {gone}");
    // No replacement ahead of time: the new claim comes after the repair, for the displaced pod.
    let replacement = r.node_claims.iter().find(|c| c.created_at > 60.0).expect("a replacement claim");
    assert!(replacement.created_at > 660.0);
    assert!(r.pending.is_empty(), "the displaced pod is bound again");
}

#[test]
fn nothing_is_repaired_with_the_gate_off() {
    let r = simulate(
        INLINE,
        "settings: {disruption: approve}\n",
        "  - at: 1m\n    condition: {node: n3, type: Ready, status: \"False\"}\n",
    );
    assert!(repairs(&r).is_empty());
    assert!(r.nodes.iter().find(|n| n.name == "n3").expect("n3").deleted_at.is_none());
}

#[test]
fn a_node_that_recovers_in_time_is_kept() {
    let events = "  - at: 1m\n    condition: {node: n1, type: Ready, status: Unknown}\n  - at: 9m\n    condition: {node: n1, type: Ready, status: \"True\"}\n";
    assert!(repairs(&simulate(INLINE, GATE_ON, events)).is_empty());
}

#[test]
fn the_aws_catalog_plays_the_aws_providers_policies() {
    // AWS: Ready False tolerated 30 minutes, AcceleratedHardwareReady False 10 minutes.
    let aws = "catalog:\n  source: aws\n  zones: [us-east-1a, us-east-1b]\n";
    let pool = POOL
        .replace("instanceType: small, zone: z1", "instanceType: m5.large, zone: us-east-1a")
        .replace("instanceType: small, zone: z2", "instanceType: m5.large, zone: us-east-1b");
    let run_with = |events: &str| {
        let text = format!("name: repair-aws\nuntil: 40m\n{GATE_ON}{aws}{pool}events:\n{events}");
        let s = parse_scenario(&text, "test.yaml").unwrap_or_else(|e| panic!("{e}"));
        run(&s, None, None).unwrap_or_else(|e| panic!("{e}"))
    };
    let ready = run_with("  - at: 1m\n    condition: {node: n1, type: Ready, status: \"False\"}\n");
    assert_eq!(repairs(&ready), vec![(1860.0, "n1".to_string(), "Ready".to_string())]);
    let gpu = run_with("  - at: 1m\n    condition: {node: n2, type: AcceleratedHardwareReady, status: \"False\"}\n");
    assert_eq!(repairs(&gpu), vec![(660.0, "n2".to_string(), "AcceleratedHardwareReady".to_string())]);
}

#[test]
fn repair_decisions_have_the_reports_shape() {
    let r = simulate(INLINE, GATE_ON, "  - at: 1m\n    condition: {node: n2, type: Ready, status: Unknown}\n");
    let json = serde_json::to_value(&r).expect("serializes");
    let d = json["decisions"].as_array().expect("decisions").iter().find(|d| d["kind"] == "repair").expect("a repair");
    assert_eq!(d["candidates"], serde_json::json!(["n2"]));
    assert_eq!(d["reason"], "Unhealthy");
    assert_eq!(d["condition"], "Ready");
    assert_eq!(d["at"], 660.0);
}

#[test]
fn a_condition_event_names_its_errors() {
    let bad = |event: &str| {
        let text = format!("name: x\nuntil: 5m\n{INLINE}{POOL}events:\n  - at: 1m\n    condition: {event}\n");
        parse_scenario(&text, "bad.yaml").expect_err("invalid").to_string()
    };
    let e = bad("{node: n1, type: Ready, status: Sick}");
    assert!(e.starts_with("bad.yaml:") && e.contains("events[0].condition.status") && e.contains("Sick"), "{e}");
    let e = bad("{node: n1, type: \"\", status: \"True\"}");
    assert!(e.contains("events[0].condition.type"), "{e}");
    let text = format!(
        "name: x\nuntil: 5m\n{INLINE}{POOL}events:\n  - at: 1m\n    condition: {{node: nope, type: Ready, status: \"False\"}}\n"
    );
    let s = parse_scenario(&text, "t.yaml").expect("parses");
    let e = run(&s, None, None).expect_err("no such node").to_string();
    assert!(e.contains("node nope does not exist"), "{e}");
}

#[test]
fn the_shipped_repair_scenario_repairs_once_waits_while_the_pool_is_unhealthy_then_repairs_again() {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/scenarios/repair.yaml")).expect("file");
    let s = parse_scenario(&text, "scenarios/repair.yaml").unwrap_or_else(|e| panic!("{e}"));
    let r = run(&s, None, None).unwrap_or_else(|e| panic!("{e}"));
    // node-a: Unknown at 2m, repaired at 12m. node-b..d: False at 20m; three of four unhealthy is over 20 %, so
    // none is repaired at 30m; node-b and node-c recover at 35m and node-d is repaired then.
    assert_eq!(
        repairs(&r),
        vec![(720.0, "node-a".to_string(), "Ready".to_string()), (2100.0, "node-d".to_string(), "Ready".to_string())]
    );
    assert!(r.pending.is_empty());
}
