//! Static NodePools (`spec.replicas`, feature gate `StaticCapacity`) and `limits.nodes`, through the simulated
//! world as `simulate` runs them: upstream's `static/provisioning`, `static/deprovisioning`,
//! `disruption/staticdrift` and `provisioning` suite cases at the scenario level (the counting and ordering
//! rules are unit tests in `src/engine/static_capacity.rs` and `src/controller/static_pools.rs`), the scenario's
//! `scale: {kind: NodePool}` event, the CRD's static rules, and the shipped `scenarios/static.yaml`.

use karpenter_tui::engine::version::KarpenterVersion;
use karpenter_tui::sim::report::{DecisionDetail, DisruptionMethod, DisruptionReason, Report};
use karpenter_tui::sim::run::run;
use karpenter_tui::sim::scenario::parse_scenario;

const TYPES: &str = r#"
catalog:
  source: inline
  instanceTypes:
    - name: small
      cpu: "2"
      memory: 4Gi
      pods: 10
      overhead: {cpu: 100m, memory: 100Mi}
      offerings:
        - {zone: z1, capacityType: on-demand, price: 0.05}
        - {zone: z2, capacityType: on-demand, price: 0.05}
    - name: large
      cpu: "8"
      memory: 16Gi
      pods: 40
      overhead: {cpu: 100m, memory: 100Mi}
      offerings:
        - {zone: z1, capacityType: on-demand, price: 0.2}
"#;

/// A static pool `fixed` with these spec lines (indented under `spec:`), and the template label `team: <team>`.
fn pool(spec: &str, team: &str) -> String {
    format!(
        r#"  - apiVersion: karpenter.sh/v1
    kind: NodePool
    metadata: {{name: fixed}}
    spec:
{spec}
      template:
        metadata: {{labels: {{team: {team}}}}}
        spec:
          nodeClassRef: {{group: karpenter.kwok.sh, kind: KWOKNodeClass, name: default}}
"#
    )
}

fn simulate(until: &str, gates: &str, objects: &str, events: &str) -> Report {
    let text = format!(
        "name: static-test\nuntil: {until}\nsettings:\n  featureGates: {{{gates}}}\n{TYPES}objects:\n{objects}events:\n{events}"
    );
    let s = parse_scenario(&text, "test.yaml").unwrap_or_else(|e| panic!("{e}"));
    run(&s, None, None).unwrap_or_else(|e| panic!("{e}"))
}

/// (at, claims) of every static provisioning decision.
fn static_provisions(r: &Report) -> Vec<(f64, usize)> {
    r.decisions
        .iter()
        .filter_map(|d| match &d.detail {
            DecisionDetail::Provision { node_claims, is_static: true, pods } => {
                assert_eq!(*pods, 0);
                Some((d.at, node_claims.len()))
            }
            _ => None,
        })
        .collect()
}

/// (at, candidate) of every static scale-down.
fn scale_downs(r: &Report) -> Vec<(f64, String)> {
    r.decisions
        .iter()
        .filter_map(|d| match &d.detail {
            DecisionDetail::Disruption { method: DisruptionMethod::StaticScaleDown, reason, candidates, .. } => {
                assert_eq!(*reason, DisruptionReason::Overprovisioned);
                Some((d.at, candidates.join(",")))
            }
            _ => None,
        })
        .collect()
}

fn nodes_at(r: &Report, t: f64) -> usize {
    r.nodes.iter().filter(|n| n.created_at <= t && n.deleted_at.is_none_or(|d| d > t)).count()
}

#[test]
fn a_static_pool_launches_its_replicas_with_no_pods_and_the_cloud_picks_the_type() {
    let r = simulate("5m", "StaticCapacity: true", &pool("      replicas: 3", "infra"), "  []\n");
    assert_eq!(static_provisions(&r), vec![(0.0, 3)]);
    assert_eq!(nodes_at(&r, 299.0), 3);
    for c in &r.node_claims {
        assert!(c.instance_types.is_empty(), "no instance-type choice on a static claim: {:?}", c.instance_types);
        assert!(!c.requirements.iter().any(|q| q.key == "node.kubernetes.io/instance-type"), "{:?}", c.requirements);
        let launched = c.launched.as_ref().expect("launched");
        assert_eq!(launched.instance_type, "small", "the cheapest type the template allows");
    }
    for n in &r.nodes {
        assert_eq!(n.labels.get("team").map(String::as_str), Some("infra"), "template labels on the node");
        assert_eq!(n.labels.get("karpenter.sh/nodepool").map(String::as_str), Some("fixed"));
    }
}

#[test]
fn without_the_gate_a_static_pool_does_nothing() {
    let r = simulate("5m", "StaticCapacity: false", &pool("      replicas: 3", "infra"), "  []\n");
    assert!(r.node_claims.is_empty() && r.nodes.is_empty());
}

#[test]
fn node_limits_stop_scale_up_and_scale_down_is_immediate_and_takes_empty_nodes_first() {
    // › "should not create additional nodeclaims when node limits are reached" (static/provisioning), ›
    // "should prioritize empty nodes (with only daemonset pods) for termination" (static/deprovisioning).
    let objects = format!(
        "{}  - apiVersion: apps/v1
    kind: Deployment
    metadata: {{name: agent}}
    spec:
      replicas: 1
      selector: {{matchLabels: {{app: agent}}}}
      template:
        metadata: {{labels: {{app: agent}}}}
        spec:
          nodeSelector: {{karpenter.sh/nodepool: fixed}}
          containers: [{{name: c, image: x, resources: {{requests: {{cpu: 500m}}}}}}]
",
        pool(
            "      replicas: 2\n      limits: {nodes: \"3\"}\n      disruption:\n        budgets: [{nodes: \"0\"}]",
            "infra"
        )
    );
    let events = "  - at: 2m\n    scale: {kind: NodePool, name: fixed, replicas: 5}\n  - at: 6m\n    scale: {kind: NodePool, name: fixed, replicas: 1}\n";
    let r = simulate("10m", "StaticCapacity: true", &objects, events);
    assert_eq!(static_provisions(&r), vec![(0.0, 2), (120.0, 1)], "the limit of 3 holds the 4th and 5th");
    assert_eq!(nodes_at(&r, 359.0), 3);
    assert!(r.node_claims.len() == 3, "never more claims than limits.nodes: {}", r.node_claims.len());
    // Scaled to 1 at 6m: two go at once, though the pool's budget is 0, and the node running the agent stays.
    let downs = scale_downs(&r);
    assert_eq!(downs.len(), 2, "{downs:?}");
    assert!(downs.iter().all(|(t, _)| *t == 360.0));
    let agent_node = r.pods.iter().find(|p| p.name.starts_with("agent")).and_then(|p| p.node.clone()).expect("bound");
    assert!(downs.iter().all(|(_, n)| *n != agent_node), "the empty nodes go first: {downs:?}, agent on {agent_node}");
    assert_eq!(nodes_at(&r, 599.0), 1);
    assert!(r.pending.is_empty());
}

#[test]
fn a_drifted_static_node_is_replaced_one_to_one_when_limits_allow() {
    // › "should drift nodes when we can acquire limits" (disruption/staticdrift)
    let before = pool(
        "      replicas: 2\n      limits: {nodes: \"3\"}\n      disruption:\n        budgets: [{nodes: \"1\"}]",
        "infra",
    );
    let after = before.replace("team: infra", "team: platform");
    let events = format!("  - at: 2m\n    apply:\n{}", after.lines().map(|l| format!("    {l}\n")).collect::<String>());
    let r = simulate("20m", "StaticCapacity: true", &before, &events);
    let drifts: Vec<&DecisionDetail> = r
        .decisions
        .iter()
        .map(|d| &d.detail)
        .filter(|d| matches!(d, DecisionDetail::Disruption { method: DisruptionMethod::Drift, .. }))
        .collect();
    assert_eq!(drifts.len(), 2, "each drifted node replaced: {:?}", r.decisions);
    for d in &drifts {
        let DecisionDetail::Disruption { replacements, candidates, .. } = d else { unreachable!() };
        assert_eq!((candidates.len(), replacements.len()), (1, 1), "1→1");
    }
    let alive: Vec<_> = r.nodes.iter().filter(|n| n.deleted_at.is_none()).collect();
    assert_eq!(alive.len(), 2);
    assert!(alive.iter().all(|n| n.labels.get("team").map(String::as_str) == Some("platform")), "{alive:?}");
    assert!(r.node_claims.len() <= 5 && r.nodes.iter().filter(|n| n.deleted_at.is_none()).count() <= 3);
}

#[test]
fn a_full_static_pool_whose_limit_equals_its_replicas_cannot_drift() {
    // › "should not drift nodes when we cannot acquire limits" (disruption/staticdrift)
    let before = pool(
        "      replicas: 2\n      limits: {nodes: \"2\"}\n      disruption:\n        budgets: [{nodes: \"1\"}]",
        "infra",
    );
    let after = before.replace("team: infra", "team: platform");
    let events = format!("  - at: 2m\n    apply:\n{}", after.lines().map(|l| format!("    {l}\n")).collect::<String>());
    let r = simulate("20m", "StaticCapacity: true", &before, &events);
    assert!(!r.decisions.iter().any(|d| matches!(d.detail, DecisionDetail::Disruption { .. })), "{:?}", r.decisions);
    assert_eq!(r.nodes.len(), 2);
}

#[test]
fn dynamic_pools_honour_limits_nodes() {
    // › "should not schedule if limits would be exceeded (node)" (provisioning): one pod at a time, nodes: 2.
    let objects = r#"  - apiVersion: karpenter.sh/v1
    kind: NodePool
    metadata: {name: default}
    spec:
      limits: {nodes: "2"}
      template:
        spec:
          nodeClassRef: {group: karpenter.kwok.sh, kind: KWOKNodeClass, name: default}
          requirements: [{key: node.kubernetes.io/instance-type, operator: In, values: [small]}]
"#;
    let pod = |i: u32| {
        format!(
            "  - at: {}m\n    apply:\n      - {{apiVersion: v1, kind: Pod, metadata: {{name: p{i}}}, spec: {{containers: [{{name: c, image: x, resources: {{requests: {{cpu: 1500m}}}}}}]}}}}\n",
            i * 2
        )
    };
    let events: String = (0..3).map(pod).collect();
    let r = simulate("10m", "", objects, &events);
    assert_eq!(r.node_claims.len(), 2);
    assert_eq!(r.pending.len(), 1);
    let why = &r.pending[0].reasons[0].reason;
    assert!(why.contains("nodes"), "{why}");
}

#[test]
fn scaling_a_nodepool_names_its_errors() {
    let dynamic = r#"  - apiVersion: karpenter.sh/v1
    kind: NodePool
    metadata: {name: fixed}
    spec:
      template:
        spec:
          nodeClassRef: {group: karpenter.kwok.sh, kind: KWOKNodeClass, name: default}
"#;
    let text = format!(
        "name: x\nuntil: 5m\n{TYPES}objects:\n{dynamic}events:\n  - at: 1m\n    scale: {{kind: NodePool, name: fixed, replicas: 2}}\n"
    );
    let e = parse_scenario(&text, "bad.yaml").expect_err("a dynamic pool has no replicas").to_string();
    assert!(e.contains("events[0].scale.name") && e.contains("Cannot transition NodePool"), "{e}");
    let text = text.replace("name: fixed, replicas: 2", "name: nope, replicas: 2");
    let e = parse_scenario(&text, "bad.yaml").expect_err("no such pool").to_string();
    assert!(e.contains("no NodePool nope"), "{e}");
    let static_pool = pool("      replicas: 1", "infra");
    let text = format!(
        "name: x\nuntil: 5m\n{TYPES}objects:\n{static_pool}events:\n  - at: 1m\n    scale: {{kind: NodePool, name: fixed, replicas: -1}}\n"
    );
    let e = parse_scenario(&text, "bad.yaml").expect_err("negative").to_string();
    assert!(e.contains("events[0].scale.replicas"), "{e}");
}

#[test]
fn the_crds_static_rules_and_the_mode_transition_are_enforced() {
    use karpenter_tui::engine::api::strict::validate_nodepool_text;
    use karpenter_tui::engine::catalog::kwok::kwok_catalog;
    let policy = kwok_catalog("r").label_policy;
    let base = "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: fixed}\nspec:\n  replicas: 2\n  template:\n    spec:\n      nodeClassRef: {group: karpenter.kwok.sh, kind: KWOKNodeClass, name: default}\n";
    assert!(validate_nodepool_text(base, "fixed", &policy, KarpenterVersion::NEWEST).is_ok());
    let with = |extra: &str| base.replace("  replicas: 2\n", &format!("  replicas: 2\n{extra}"));
    let e = validate_nodepool_text(
        &with("  limits: {cpu: \"10\", nodes: \"3\"}\n"),
        "fixed",
        &policy,
        KarpenterVersion::NEWEST,
    )
    .expect_err("cpu");
    assert!(format!("{e:?}").contains("only 'limits.nodes' is supported on static NodePools"), "{e:?}");
    let e = validate_nodepool_text(&with("  weight: 10\n"), "fixed", &policy, KarpenterVersion::NEWEST)
        .expect_err("weight");
    assert!(format!("{e:?}").contains("'weight' is not supported on static NodePools"), "{e:?}");
    assert!(
        validate_nodepool_text(&with("  limits: {nodes: \"3\"}\n"), "fixed", &policy, KarpenterVersion::NEWEST).is_ok()
    );

    // A scenario apply that turns the pool dynamic fails the run and changes nothing.
    let objects = pool("      replicas: 1", "infra");
    let dynamic = objects.replace("      replicas: 1\n", "");
    let events =
        format!("  - at: 1m\n    apply:\n{}", dynamic.lines().map(|l| format!("    {l}\n")).collect::<String>());
    let text = format!(
        "name: x\nuntil: 5m\nsettings: {{featureGates: {{StaticCapacity: true}}}}\n{TYPES}objects:\n{objects}events:\n{events}"
    );
    let s = parse_scenario(&text, "t.yaml").expect("parses");
    let e = run(&s, None, None).expect_err("refused").to_string();
    assert!(e.contains("Cannot transition NodePool between static"), "{e}");
}

#[test]
fn the_shipped_static_scenario() {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/scenarios/static.yaml")).expect("file");
    let s = parse_scenario(&text, "scenarios/static.yaml").unwrap_or_else(|e| panic!("{e}"));
    let r = run(&s, None, None).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(static_provisions(&r)[..2], [(0.0, 3), (600.0, 1)], "3 replicas, then the limit of 4 allows one more");
    assert_eq!(nodes_at(&r, 1199.0), 4);
    assert_eq!(scale_downs(&r).len(), 3);
    assert_eq!(nodes_at(&r, 1799.0), 1);
    let last: Vec<_> = r.nodes.iter().filter(|n| n.deleted_at.is_none()).collect();
    assert_eq!(last.len(), 1);
    assert_eq!(last[0].labels.get("team").map(String::as_str), Some("platform"), "replaced by drift");
    assert!(r.pending.is_empty());
}

#[test]
fn static_drift_uses_the_whole_drifted_budget_at_once() {
    // Upstream queues one 1→1 command per unit the budget and limits.nodes allow, in the same pass.
    let before = pool(
        "      replicas: 3\n      limits: {nodes: \"6\"}\n      disruption:\n        budgets: [{nodes: \"2\"}]",
        "infra",
    );
    let after = before.replace("team: infra", "team: platform");
    let events = format!("  - at: 2m\n    apply:\n{}", after.lines().map(|l| format!("    {l}\n")).collect::<String>());
    let r = simulate("30m", "StaticCapacity: true", &before, &events);
    let drifts: Vec<(f64, usize, usize)> = r
        .decisions
        .iter()
        .filter_map(|d| match &d.detail {
            DecisionDetail::Disruption { method: DisruptionMethod::Drift, candidates, replacements, .. } => {
                Some((d.at, candidates.len(), replacements.len()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(drifts.iter().map(|(_, c, r)| (*c, *r)).collect::<Vec<_>>(), vec![(2, 2), (1, 1)], "{drifts:?}");
    let alive: Vec<_> = r.nodes.iter().filter(|n| n.deleted_at.is_none()).collect();
    assert_eq!(alive.len(), 3);
    assert!(alive.iter().all(|n| n.labels.get("team").map(String::as_str) == Some("platform")));
}
