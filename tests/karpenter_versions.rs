//! The Karpenter version in force decides what a NodePool as written may say: v1.15 defaults `consolidateAfter`
//! and knows the `Unhealthy` budget reason and `karpenter.sh/do-not-repair`; v1.14's CRD refuses the first two and
//! ignores the last. Each case is upstream's test (named after its `It(...)`) run under "1.15", with what "1.14"
//! does beside it, through every door a NodePool comes in by: the editor's strict parse, a scenario, and
//! `plan --file`'s manifests.

use crate::common;

use common::POOL_AND_APP;
use karpenter_tui::engine::api::strict::parse_nodepool_strict_with;
use karpenter_tui::engine::labels::LabelPolicy;
use karpenter_tui::engine::manifests::ClusterObjects;
use karpenter_tui::engine::version::KarpenterVersion::{self, V1_14, V1_15};
use karpenter_tui::sim::run::run_world;
use karpenter_tui::sim::scenario::parse_scenario;

/// A dynamic pool as people write it (the shape of upstream's getting-started NodePool), with `disruption`
/// naming only the policy.
const DYNAMIC: &str = "\
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: default
spec:
  template:
    spec:
      requirements:
        - key: kubernetes.io/arch
          operator: In
          values: [\"amd64\"]
        - key: karpenter.sh/capacity-type
          operator: In
          values: [\"on-demand\"]
      nodeClassRef:
        group: karpenter.k8s.aws
        kind: EC2NodeClass
        name: default
      expireAfter: 720h
  limits:
    cpu: 1000
  disruption:
    consolidationPolicy: WhenEmptyOrUnderutilized
";

/// A static pool whose `disruption` names only a budget.
const STATIC: &str = "\
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: fixed
spec:
  replicas: 3
  template:
    spec:
      requirements:
        - key: node.kubernetes.io/instance-type
          operator: In
          values: [\"m5.large\"]
      nodeClassRef:
        group: karpenter.k8s.aws
        kind: EC2NodeClass
        name: default
  disruption:
    budgets:
      - nodes: \"1\"
";

fn strict(yaml: &str, version: KarpenterVersion) -> Result<karpenter_tui::engine::api::NodePool, String> {
    parse_nodepool_strict_with(yaml, "pool.yaml", &LabelPolicy::default(), version)
        .map_err(|d| d.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"))
}

#[test]
fn should_default_consolidate_after_to_0s_when_omitted_on_a_dynamic_node_pool() {
    let pool = strict(DYNAMIC, V1_15).expect("1.15 defaults it");
    assert_eq!(pool.spec.disruption.consolidate_after, "0s");
    assert_eq!(pool.spec.disruption.consolidation_policy, "WhenEmptyOrUnderutilized");

    // 1.14's CRD requires it inside `disruption`: refused where the block is.
    let e = strict(DYNAMIC, V1_14).expect_err("1.14 requires it");
    assert!(e.starts_with("pool.yaml:22:"), "located at the disruption block: {e}");
    assert!(e.contains("spec.disruption.consolidateAfter") && e.contains("Required value"), "{e}");
    // Written out, both take it.
    let written = DYNAMIC.replace(
        "consolidationPolicy: WhenEmptyOrUnderutilized\n",
        "consolidationPolicy: WhenEmptyOrUnderutilized\n    consolidateAfter: 1m\n",
    );
    for v in [V1_14, V1_15] {
        assert_eq!(strict(&written, v).expect("valid").spec.disruption.consolidate_after, "1m");
    }
    // Without a `disruption` block at all, both default the whole block.
    let bare = &DYNAMIC[..DYNAMIC.find("  disruption:").expect("the block")];
    for v in [V1_14, V1_15] {
        assert_eq!(strict(bare, v).expect("defaulted").spec.disruption.consolidate_after, "0s");
    }
}

#[test]
fn should_succeed_when_consolidate_after_is_omitted_on_a_static_node_pool() {
    let pool = strict(STATIC, V1_15).expect("1.15 takes it");
    assert_eq!(pool.spec.replicas, Some(3));
    let e = strict(STATIC, V1_14).expect_err("1.14's CRD requires it whatever the pool");
    assert!(e.contains("spec.disruption.consolidateAfter"), "{e}");
}

#[test]
fn the_unhealthy_budget_reason_is_a_v1_15_one() {
    let yaml = DYNAMIC.replace(
        "consolidationPolicy: WhenEmptyOrUnderutilized\n",
        "consolidationPolicy: WhenEmptyOrUnderutilized\n    consolidateAfter: 0s\n    budgets:\n      - nodes: \"0\"\n        reasons: [Drifted, Unhealthy]\n",
    );
    let pool = strict(&yaml, V1_15).expect("1.15 paces repair with it");
    assert_eq!(pool.spec.disruption.budgets[0].reasons.as_deref(), Some(&["Drifted".into(), "Unhealthy".into()][..]));
    let e = strict(&yaml, V1_14).expect_err("not in 1.14's enum");
    assert!(e.contains("spec.disruption.budgets[0].reasons[1]"), "{e}");
    assert!(e.contains("must be one of Underutilized, Empty, Drifted"), "{e}");
    // A reason no version knows is refused by both, with the newest list.
    let e = strict(&yaml.replace("Unhealthy]", "Broken]"), V1_15).expect_err("unknown");
    assert!(e.contains("must be one of Underutilized, Empty, Drifted, Unhealthy"), "{e}");
}

#[test]
fn do_not_repair_on_a_template_is_refused_where_the_version_would_ignore_it() {
    let yaml = DYNAMIC.replace(
        "  template:\n    spec:\n",
        "  template:\n    metadata:\n      annotations:\n        karpenter.sh/do-not-repair: \"true\"\n    spec:\n",
    );
    let pool = strict(&yaml, V1_15).expect("1.15 reads it");
    assert_eq!(pool.spec.template.metadata.annotations["karpenter.sh/do-not-repair"], "true");
    let e = strict(
        &yaml.replace("WhenEmptyOrUnderutilized\n", "WhenEmptyOrUnderutilized\n    consolidateAfter: 0s\n"),
        V1_14,
    )
    .expect_err("1.14 would do nothing with it");
    assert!(e.contains("karpenter.sh/do-not-repair") && e.contains("1.14"), "{e}");
}

fn scenario(version: Option<&str>, pool: &str) -> String {
    let settings = version.map_or(String::new(), |v| format!("settings:\n  karpenterVersion: {v}\n"));
    let pool: String = pool
        .lines()
        .enumerate()
        .map(|(i, l)| if i == 0 { format!("  - {l}\n") } else { format!("    {l}\n") })
        .collect();
    format!("name: versions\nuntil: 1m\ncatalog:\n  source: kwok\n{settings}objects:\n{pool}")
}

#[test]
fn a_scenario_decides_as_its_karpenter_version_and_checks_its_objects_by_it() {
    let s = parse_scenario(&scenario(None, DYNAMIC), "s.yaml").expect("the default is the newest");
    assert_eq!(s.settings.controller.karpenter_version, V1_15);
    for (text, v) in [("\"1.14\"", V1_14), ("1.15", V1_15)] {
        let with_after =
            DYNAMIC.replace("WhenEmptyOrUnderutilized\n", "WhenEmptyOrUnderutilized\n    consolidateAfter: 30s\n");
        let s = parse_scenario(&scenario(Some(text), &with_after), "s.yaml").expect("valid");
        assert_eq!(s.settings.controller.karpenter_version, v);
    }
    let e = parse_scenario(&scenario(Some("\"1.14\""), DYNAMIC), "s.yaml").expect_err("1.14 requires it").to_string();
    assert!(e.contains("s.yaml:") && e.contains("objects[0].spec.disruption"), "{e}");
    assert!(e.contains("Required value"), "{e}");

    let e = parse_scenario(&scenario(Some("\"1.13\""), DYNAMIC), "s.yaml").expect_err("not modelled").to_string();
    assert!(e.starts_with("s.yaml:6:"), "located at the setting: {e}");
    assert!(e.contains("settings.karpenterVersion") && e.contains("1.14 or 1.15"), "{e}");
}

#[test]
fn a_scenario_under_1_14_refuses_do_not_repair_on_its_nodes() {
    let nodes = "nodes:\n  - instanceType: m5.large\n    zone: us-east-1a\n    annotations:\n      karpenter.sh/do-not-repair: \"true\"\n";
    let text = |v: &str| format!("name: n\nuntil: 1m\nsettings:\n  karpenterVersion: \"{v}\"\n{nodes}");
    parse_scenario(&text("1.15"), "n.yaml").expect("1.15 reads it");
    let e = parse_scenario(&text("1.14"), "n.yaml").expect_err("1.14 would ignore it").to_string();
    assert!(e.contains("nodes[0].annotations") && e.contains("do-not-repair"), "{e}");
}

#[test]
fn plan_file_manifests_are_checked_by_the_version_chosen() {
    let m = ClusterObjects::parse_for(DYNAMIC, "m.yaml", V1_15).expect("1.15");
    assert_eq!(m.nodepools[0].spec.disruption.consolidate_after, "0s");
    let two = format!("{STATIC}---\n{DYNAMIC}");
    let e = ClusterObjects::parse_for(&two, "m.yaml", V1_14).expect_err("1.14").to_string();
    assert!(e.starts_with("m.yaml:1:"), "the first document's line: {e}");
    assert!(e.contains("NodePool fixed") && e.contains("spec.disruption.consolidateAfter"), "{e}");
}

/// One instance type, whose every offering EC2 is out of ([`ICE`]) when the first claim launches.
const OUT_OF_CAPACITY: &str = r#"
catalog:
  source: inline
  instanceTypes:
    - name: small
      cpu: "2"
      memory: 4Gi
      pods: 10
      offerings:
        - {zone: z1, capacityType: on-demand, price: 0.05}
"#;

const ICE: &str = r#"
events:
  - at: 0s
    capacity: {instanceType: small, zone: z1, capacityType: on-demand, available: false}
"#;

#[test]
fn pr_3143_a_launch_without_capacity_is_told_to_the_pods_nominated_to_the_claim() {
    let world = |version: &str| {
        let text = format!(
            "name: ice\nuntil: 2m\nsettings:\n  karpenterVersion: \"{version}\"\n{OUT_OF_CAPACITY}{POOL_AND_APP}{ICE}"
        );
        let s = parse_scenario(&text, "ice.yaml").unwrap_or_else(|e| panic!("{e}"));
        karpenter_tui::sim::run::run_world(&s, Some(std::time::Duration::from_secs(60)))
            .unwrap_or_else(|e| panic!("{e}"))
    };
    let w = world("1.15");
    let told: Vec<_> = w.record.events.iter().filter(|e| e.reason == "InsufficientCapacityError").collect();
    assert_eq!(told.len(), 2, "both pods of the claim: {:?}", w.record.events);
    for e in &told {
        assert!(e.warning && e.object.starts_with("pod/default/app-"), "{e:?}");
        assert!(
            e.message.starts_with("NodeClaim default-")
                && e.message.contains(", nominated for this pod failed to launch: insufficient capacity"),
            "{e:?}"
        );
    }
    let claims: std::collections::BTreeSet<&str> =
        told.iter().map(|e| e.message.split(',').next().unwrap_or("")).collect();
    assert_eq!(claims.len(), 1, "one claim, one message: {claims:?}");

    // 1.14 tells the NodeClaim only.
    let w = world("1.14");
    assert!(!w.record.events.iter().any(|e| e.reason == "InsufficientCapacityError"), "{:?}", w.record.events);
}

#[test]
fn simulate_decides_as_the_version_asked_for_over_the_scenarios() {
    let sim = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_karpenter-tui"))
            .arg("simulate")
            .args(args)
            .output()
            .expect("runs")
    };
    let out = sim(&["scenarios/walkthrough.yaml", "-o", "json", "--karpenter-version", "1.14"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(report["karpenterVersion"], "1.14");
    let out = sim(&["scenarios/walkthrough.yaml", "-o", "json"]);
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(report["karpenterVersion"], "1.15", "the scenario's, else the newest");

    // The scenario's objects are checked by the version asked for.
    let dir = std::env::temp_dir().join(format!("karpenter-tui-versions-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let file = dir.join("s.yaml");
    std::fs::write(&file, scenario(None, DYNAMIC)).expect("written");
    let path = file.to_str().expect("utf-8");
    assert!(sim(&[path]).status.success());
    let out = sim(&[path, "--karpenter-version", "1.14"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("s.yaml:") && stderr.contains("spec.disruption") && stderr.contains("Required value"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(dir);
}

/// An m5.large-only pool on a class whose kubelet settings are v1.15 CEL expressions, and 30 small pods; `gates`
/// goes under `settings.featureGates`.
fn kubelet_cel_scenario(version: &str, gates: &str) -> String {
    format!(
        r#"name: kubelet-cel
until: 10m
settings:
  karpenterVersion: "{version}"
  featureGates: {{{gates}}}
catalog:
  source: aws
  zones: [us-east-1a]
objects:
  - apiVersion: karpenter.sh/v1
    kind: NodePool
    metadata: {{name: default}}
    spec:
      template:
        spec:
          requirements:
            - {{key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}}
            - {{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}}
          nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
  - apiVersion: karpenter.k8s.aws/v1
    kind: EC2NodeClass
    metadata: {{name: default}}
    spec:
      role: KarpenterNodeRole-demo
      amiSelectorTerms: [{{alias: al2023@latest}}]
      subnetSelectorTerms: [{{tags: {{karpenter.sh/discovery: demo}}}}]
      securityGroupSelectorTerms: [{{tags: {{karpenter.sh/discovery: demo}}}}]
      kubelet:
        maxPods: "min(12, max_pods)"
        kubeReserved: {{memory: "11 * max_pods + 255"}}
        systemReserved: {{cpu: "max(100, vcpus * 10)"}}
  - apiVersion: apps/v1
    kind: Deployment
    metadata: {{name: app}}
    spec:
      replicas: 30
      selector: {{matchLabels: {{app: app}}}}
      template:
        metadata: {{labels: {{app: app}}}}
        spec:
          containers: [{{name: c, image: x, resources: {{requests: {{cpu: 10m, memory: 16Mi}}}}}}]
events: []
"#
    )
}

/// Each node's pod capacity, and how many pods are still pending, at the end of the run.
fn pods_per_node(text: &str) -> (Vec<i64>, usize) {
    let s = parse_scenario(text, "kubelet-cel.yaml").unwrap_or_else(|e| panic!("{e}"));
    let w = run_world(&s, None).unwrap_or_else(|e| panic!("{e}"));
    let pods = w
        .cluster
        .nodes
        .cloned_values()
        .iter()
        .filter_map(|n| n.status.as_ref()?.capacity.as_ref()?.get("pods")?.0.parse().ok())
        .collect();
    let r = karpenter_tui::sim::run::run(&s, None, None).unwrap_or_else(|e| panic!("{e}"));
    (pods, r.pending.len())
}

#[test]
fn should_provision_nodes_when_max_pods_kube_reserved_and_system_reserved_are_all_cel_expressions() {
    // Under 1.15 with NodeClassCEL: maxPods resolves to min(12, 29) per m5.large, so 30 pods need three nodes.
    let (pods, pending) = pods_per_node(&kubelet_cel_scenario("1.15", "NodeClassCEL: true"));
    assert_eq!(pending, 0);
    assert_eq!(pods, [12, 12, 12]);
}

#[test]
fn a_class_with_kubelet_expressions_launches_nothing_while_the_gate_is_off() {
    // Upstream's validation sets ValidationSucceeded=False (KubeletExpressionsDisabled): no node launches. (v1.14 has
    // no such gate, and its CRD refuses a string maxPods: see the next test.)
    let (pods, pending) = pods_per_node(&kubelet_cel_scenario("1.15", ""));
    assert!(pods.is_empty(), "{pods:?}");
    assert_eq!(pending, 30);
}

#[test]
fn a_kubelet_expression_or_an_undeclared_kubelet_field_is_a_located_error_under_1_14_and_read_under_1_15() {
    let cases = [
        ("        maxPods: \"min(12, max_pods)\"\n", "spec.kubelet.maxPods", "must be an integer"),
        ("        imageMaximumGCAge: 168h\n", "spec.kubelet.imageMaximumGCAge", "unknown field"),
    ];
    for (kubelet, field, what) in cases {
        let text = kubelet_cel_scenario("1.14", "")
            .replace("        kubeReserved: {memory: \"11 * max_pods + 255\"}\n", "")
            .replace("        systemReserved: {cpu: \"max(100, vcpus * 10)\"}\n", "")
            .replace("        maxPods: \"min(12, max_pods)\"\n", kubelet);
        let e = parse_scenario(&text, "kubelet.yaml").expect_err("1.14 refuses it").to_string();
        assert!(e.starts_with("kubelet.yaml:") && e.contains(field) && e.contains(what), "{e}");
        let line = text.lines().position(|l| l.starts_with(kubelet.trim_end())).unwrap() + 1;
        assert!(e.starts_with(&format!("kubelet.yaml:{line}:")), "{e} (expected line {line})");
        let v115 = text.replace("karpenterVersion: \"1.14\"", "karpenterVersion: \"1.15\"");
        parse_scenario(&v115, "kubelet.yaml").unwrap_or_else(|e| panic!("1.15 takes it: {e}"));
    }
}

/// Balanced consolidation of an on-demand-only pool whose `big` node could move to `small`: 40% cheaper on demand,
/// 80% cheaper on spot, which the pool does not allow.
fn balanced_estimate_scenario(version: &str) -> String {
    format!(
        r#"name: estimated-savings
until: 10m
settings:
  karpenterVersion: "{version}"
catalog:
  source: inline
  instanceTypes:
    - name: big
      cpu: "8"
      memory: 32Gi
      offerings:
        - {{zone: z1, capacityType: on-demand, price: 1.0}}
        - {{zone: z1, capacityType: spot, price: 0.9}}
    - name: small
      cpu: "2"
      memory: 8Gi
      offerings:
        - {{zone: z1, capacityType: on-demand, price: 0.6}}
        - {{zone: z1, capacityType: spot, price: 0.2}}
nodes:
  - {{name: n1, instanceType: big, zone: z1, capacityType: on-demand, nodePool: default}}
objects:
{nodeclass}  - apiVersion: karpenter.sh/v1
    kind: NodePool
    metadata: {{name: default}}
    spec:
      disruption: {{consolidationPolicy: Balanced, consolidateAfter: 0s}}
      template:
        spec:
          requirements: [{{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}}]
          nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
  - apiVersion: apps/v1
    kind: Deployment
    metadata: {{name: app, namespace: default}}
    spec:
      replicas: 1
      selector: {{matchLabels: {{app: app}}}}
      template:
        metadata: {{labels: {{app: app}}}}
        spec:
          containers: [{{name: c, image: x, resources: {{requests: {{cpu: 500m, memory: 1Gi}}}}}}]
"#,
        nodeclass = crate::common::SCENARIO_NODECLASS
    )
}

#[test]
fn should_reject_a_move_when_estimated_savings_excludes_spot_offerings_for_an_on_demand_only_node_pool() {
    use karpenter_tui::sim::report::DecisionDetail;
    let replacements = |version: &str| -> Vec<Vec<String>> {
        let s = parse_scenario(&balanced_estimate_scenario(version), "s.yaml").unwrap_or_else(|e| panic!("{e}"));
        let r = karpenter_tui::sim::run::run(&s, None, None).unwrap_or_else(|e| panic!("{e}"));
        r.decisions
            .iter()
            .filter_map(|d| match &d.detail {
                DecisionDetail::Disruption { replacements, .. } => {
                    Some(replacements.iter().flat_map(|r| r.instance_types.clone()).collect())
                }
                _ => None,
            })
            .collect()
    };
    // 1.15 estimates the replacement at its on-demand price: (1.0 − 0.6) / 1.0 = 0.4 < 1/k = 0.5, so no move.
    assert!(replacements("1.15").is_empty(), "{:?}", replacements("1.15"));
    // 1.14 estimates it at the cheapest available offering, spot included: (1.0 − 0.2) / 1.0 = 0.8, so it replaces
    // `big` with an on-demand `small` whose real saving Balanced would have refused.
    assert_eq!(replacements("1.14"), vec![vec!["small".to_string()]]);
}
