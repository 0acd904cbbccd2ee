//! Provisioning features beyond the numbered acceptance cases: minValues policies, truncation, inverse
//! anti-affinity, preference relaxation, host ports, numeric operators, batching windows.

use crate::common;

use std::collections::BTreeMap;

use common::*;
use k8s_openapi::api::core::v1::{ContainerPort, Node, NodeSpec, NodeStatus, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use karpenter_tui::engine::api::common::NodeSelectorRequirementWithMinValues;
use karpenter_tui::engine::catalog::fake;
use karpenter_tui::engine::explain::PoolRejection;
use karpenter_tui::engine::labels;
use karpenter_tui::engine::provisioning::Batcher;
use karpenter_tui::engine::scheduling::{MinValuesPolicy, SchedulerOptions};

fn world(pods: Vec<Pod>) -> World {
    World {
        nodepools: vec![nodepool("default")],
        pods: pods.into_iter().map(|p| std::sync::Arc::new(p.into())).collect(),
        ..Default::default()
    }
}

fn requirement(key: &str, op: &str, values: &[&str], min: Option<i64>) -> NodeSelectorRequirementWithMinValues {
    NodeSelectorRequirementWithMinValues {
        key: key.into(),
        operator: op.into(),
        values: values.iter().map(|s| s.to_string()).collect(),
        min_values: min,
    }
}

#[test]
fn min_values_strict_fails_and_best_effort_relaxes() {
    // Only amd64 types are "small"; asking for two distinct sizes can't be met.
    let mut w = world(vec![with_node_selector(pod("p"), &[(labels::ARCH, "amd64")])]);
    w.nodepools[0].spec.template.spec.requirements = vec![requirement("size", "In", &["small", "large"], Some(2))];
    let r = w.provision(&fake::fake_catalog());
    assert!(r.results.new_claims.is_empty());
    let f = &r.results.failures[0];
    assert!(
        matches!(&f.reasons[0].1, PoolRejection::MinValues { key, needed: 2, available: 1 } if key == "size"),
        "{:?}",
        f.reasons
    );
    assert!(f.summary().contains("minValues 2 for size cannot be met"), "{}", f.summary());

    let r = w.provision_with(
        &fake::fake_catalog(),
        SchedulerOptions { min_values: MinValuesPolicy::BestEffort, ..Default::default() },
    );
    assert_eq!(r.results.new_claims.len(), 1);
    let c = &r.results.new_claims[0];
    assert!(c.min_values_relaxed);
    assert_eq!(c.annotations.get(labels::ANNOTATION_MIN_VALUES_RELAXED).map(String::as_str), Some("true"));
    assert_eq!(c.requirements.get("size").min_values, Some(1), "lowered to what the options offer");

    // Satisfiable minValues: both sizes among the options.
    let mut w = world(vec![pod("p")]);
    w.nodepools[0].spec.template.spec.requirements = vec![requirement("size", "In", &["small", "large"], Some(2))];
    let r = w.provision(&fake::fake_catalog());
    assert_eq!(r.results.new_claims.len(), 1);
}

#[test]
fn min_values_count_only_the_values_a_narrowed_requirement_still_allows() {
    // v1.14.3 and v1.15 (#3170): zone In [1, 2] with minValues 2, narrowed to zone 1 by the pod. The options still
    // offer both zones, but the NodeClaim may only use one: BestEffort relaxes (and says so) instead of writing a
    // NodeClaim whose zone requirement the CRD refuses; Strict fails in the simulation.
    let mut w = world(vec![with_node_selector(pod("p"), &[(labels::ZONE, "test-zone-1")])]);
    w.nodepools[0].spec.template.spec.requirements =
        vec![requirement(labels::ZONE, "In", &["test-zone-1", "test-zone-2"], Some(2))];
    let r = w.provision(&fake::fake_catalog());
    assert!(r.results.new_claims.is_empty(), "{:?}", r.results.new_claims.len());
    assert!(
        matches!(&r.results.failures[0].reasons[0].1,
            PoolRejection::MinValues { key, needed: 2, available: 1 } if key == labels::ZONE),
        "{:?}",
        r.results.failures[0].reasons
    );
    let r = w.provision_with(
        &fake::fake_catalog(),
        SchedulerOptions { min_values: MinValuesPolicy::BestEffort, ..Default::default() },
    );
    let c = &r.results.new_claims[0];
    assert!(c.min_values_relaxed);
    assert_eq!(c.annotations.get(labels::ANNOTATION_MIN_VALUES_RELAXED).map(String::as_str), Some("true"));
    assert_eq!(c.requirements.get(labels::ZONE).min_values, Some(1));
}

#[test]
fn options_are_truncated_cheapest_first() {
    let catalog = fake::fake_catalog_with(fake::fake_instance_types(400));
    let w = world(vec![with_requests(pod("p"), Some("100m"), None)]);
    let r = w.provision_with(&catalog, SchedulerOptions { max_instance_types: 60, ..Default::default() });
    let c = &r.results.new_claims[0];
    assert_eq!(c.instance_types.len(), 60);
    let prices: Vec<f64> =
        c.instance_types.iter().map(|t| t.cheapest_offering(&c.requirements).unwrap().price).collect();
    assert!(prices.windows(2).all(|w| w[0] <= w[1]), "cheapest first");
    assert_eq!(c.instance_types[0].name, "fake-it-0");
    // The written requirement lists exactly the options.
    let full = c.full_requirements();
    assert_eq!(full.get(labels::INSTANCE_TYPE).values.len(), 60);
}

fn roomy_node(name: &str) -> Node {
    let labels: BTreeMap<String, String> =
        [(labels::HOSTNAME.to_string(), name.to_string()), (labels::ZONE.to_string(), "test-zone-1".to_string())]
            .into();
    let res: BTreeMap<String, Quantity> = [
        ("cpu".to_string(), Quantity("16".into())),
        ("memory".to_string(), Quantity("64Gi".into())),
        ("pods".to_string(), Quantity("110".into())),
    ]
    .into();
    Node {
        metadata: ObjectMeta { name: Some(name.into()), labels: Some(labels), ..Default::default() },
        spec: Some(NodeSpec { provider_id: Some(format!("fake://{name}")), ..Default::default() }),
        status: Some(NodeStatus { capacity: Some(res.clone()), allocatable: Some(res), ..Default::default() }),
    }
}

fn bound(mut p: Pod, node: &str) -> Pod {
    p.spec.as_mut().unwrap().node_name = Some(node.into());
    p.status = None;
    p
}

#[test]
fn inverse_anti_affinity_of_bound_pods_is_honoured() {
    let web = [("app", "web")];
    // A bound pod that refuses to share a node with app=web.
    let guard = with_pod_anti_affinity(with_labels(pod("guard"), &[("app", "guard")]), &web, labels::HOSTNAME);
    let mut w = world(vec![bound(guard, "n1"), with_labels(pod("web-0"), &web)]);
    w.nodes.push(roomy_node("n1").into());
    let r = w.provision(&fake::fake_catalog());
    assert!(r.results.existing.is_empty(), "web-0 must not join n1");
    assert_eq!(r.results.new_claims.len(), 1);

    // Without the anti-affinity the existing node takes it.
    let mut w =
        world(vec![bound(with_labels(pod("guard"), &[("app", "guard")]), "n1"), with_labels(pod("web-0"), &web)]);
    w.nodes.push(roomy_node("n1").into());
    let r = w.provision(&fake::fake_catalog());
    assert_eq!(r.results.existing.len(), 1);
    assert!(r.results.new_claims.is_empty());
}

#[test]
fn prefer_no_schedule_taints_are_tolerated_last() {
    let mut w = world(vec![pod("p")]);
    w.nodepools[0].spec.template.spec.taints = vec![taint("soft", None, "PreferNoSchedule")];
    let r = w.provision(&fake::fake_catalog());
    assert_eq!(r.results.new_claims.len(), 1, "relaxation tolerates PreferNoSchedule when nothing else fits");
}

#[test]
fn required_terms_are_tried_in_order() {
    // First term impossible (no such zone), second term satisfiable.
    let p = with_required_affinity(pod("p"), labels::ZONE, "In", &["nowhere"]);
    let mut p = p;
    let terms = &mut p
        .spec
        .as_mut()
        .unwrap()
        .affinity
        .as_mut()
        .unwrap()
        .node_affinity
        .as_mut()
        .unwrap()
        .required_during_scheduling_ignored_during_execution
        .as_mut()
        .unwrap()
        .node_selector_terms;
    terms.push(k8s_openapi::api::core::v1::NodeSelectorTerm {
        match_expressions: Some(vec![k8s_openapi::api::core::v1::NodeSelectorRequirement {
            key: labels::ZONE.into(),
            operator: "In".into(),
            values: Some(vec!["test-zone-2".into()]),
        }]),
        match_fields: None,
    });
    let r = world(vec![p]).provision(&fake::fake_catalog());
    assert_eq!(r.results.new_claims.len(), 1);
    assert_eq!(r.results.new_claims[0].requirements.get(labels::ZONE).values, vec!["test-zone-2".to_string()]);
}

fn with_host_port(mut p: Pod, port: i32) -> Pod {
    p.spec.as_mut().unwrap().containers[0].ports =
        Some(vec![ContainerPort { container_port: port, host_port: Some(port), ..Default::default() }]);
    p
}

#[test]
fn host_ports_conflict() {
    let r = world(vec![with_host_port(pod("a"), 8080), with_host_port(pod("b"), 8080), with_host_port(pod("c"), 9090)])
        .provision(&fake::fake_catalog());
    assert_eq!(r.results.new_claims.len(), 2, "the two 8080 pods can't share a node; 9090 joins one of them");
    assert_eq!(r.results.scheduled_pods(), 3);
}

#[test]
fn numeric_operators_select_types() {
    // `integer` is the CPU count in the fake catalogue; Gt 4 leaves only the 16-CPU arm type.
    let r = world(vec![with_required_affinity(pod("p"), "integer", "Gt", &["4"])]).provision(&fake::fake_catalog());
    assert_eq!(launched(&r), vec!["arm-instance-type"]);
    let r = world(vec![with_required_affinity(pod("p"), "integer", "Lte", &["2"])]).provision(&fake::fake_catalog());
    assert_eq!(launched(&r), vec!["small-instance-type"]);
}

#[test]
fn contradictory_constraints_are_unschedulable_not_errors() {
    let p = with_required_affinity(
        with_node_selector(pod("p"), &[(labels::ARCH, "arm64")]),
        labels::ARCH,
        "In",
        &["amd64"],
    );
    let r = world(vec![p]).provision(&fake::fake_catalog());
    assert!(r.results.new_claims.is_empty());
    assert_eq!(r.results.failures.len(), 1);
    let why = r.results.failures[0].summary();
    assert!(why.contains("kubernetes.io/arch"), "{why}");
}

#[test]
fn bad_quantities_reject_the_pod_with_a_field() {
    let p = with_requests(pod("p"), Some("lots"), None);
    let r = world(vec![p]).provision(&fake::fake_catalog());
    assert!(r.results.new_claims.is_empty());
    let (name, why) = &r.rejected[0];
    assert_eq!(name, "default/p");
    let text = why.to_string();
    assert!(text.contains("spec.containers[0].resources.requests.cpu"), "{text}");
}

#[test]
fn batcher_windows() {
    let mut b = Batcher::new(1_000, 10_000);
    assert!(!b.ready(0));
    b.trigger("a", 0);
    assert!(!b.ready(999));
    assert!(b.ready(1_000), "idle window closes the batch");
    // New pods extend the idle window; re-triggering a known pod doesn't.
    let mut b = Batcher::new(1_000, 10_000);
    b.trigger("a", 0);
    b.trigger("b", 800);
    assert!(!b.ready(1_000));
    b.trigger("b", 1_500);
    assert!(b.ready(1_800));
    // The max window caps a steady trickle.
    let mut b = Batcher::new(1_000, 10_000);
    for t in (0..20_000).step_by(500) {
        b.trigger(&format!("p{t}"), t);
        if b.ready(t) {
            assert_eq!(t, 10_000);
            break;
        }
    }
    b.reset();
    assert!(!b.is_open());
}

/// The controller compares the packing strategies after its own pass (`compare_packing_after`, which reuses the
/// pass's plan and solves only the other strategy): the same figures as comparing from scratch, whichever strategy
/// the pass used.
#[test]
fn comparing_after_a_pass_gives_the_same_figures_as_comparing_from_scratch() {
    use karpenter_tui::controller::settings::FeatureGates;
    use karpenter_tui::engine::packing::Packing;
    use karpenter_tui::engine::provisioning::{compare_packing, compare_packing_after};
    use karpenter_tui::shell::passes::{plan_packed, pool_types};
    let text = std::fs::read_to_string("examples/inflate.yaml").expect("the example");
    let m = karpenter_tui::engine::manifests::ClusterObjects::parse(&text, "inflate.yaml").expect("parses");
    let catalog = karpenter_tui::engine::catalog::aws::aws_catalog("us-east-1", None, None, 0).expect("catalog");
    let catalogs = pool_types(&m, &catalog, FeatureGates::default());
    let snap = m.snapshot();
    let full = compare_packing(&snap.view(), &catalogs, &catalog.label_policy);
    assert!(full.upstream.nodes > 0 && full.cost.nodes > 0 && full.bound.is_some(), "{full:?}");
    for packing in [Packing::Upstream, Packing::Cost] {
        let pass = plan_packed(&m, &catalog, FeatureGates::default(), packing);
        let after = compare_packing_after(&snap.view(), &catalogs, &catalog.label_policy, packing, &pass);
        assert_eq!(after, full, "{packing}");
        assert_eq!(after.of(packing).nodes, pass.results.new_claims.len());
    }
}

#[test]
fn pod_level_requests_size_the_node() {
    // › "should schedule based on the pod level resources requests": the pod-level 9.9 CPU / 3.9Gi replaces the
    // containers' 12 CPU / 6Gi, so the 10 CPU / 4Gi type holds it and the 16 CPU one is not needed.
    use karpenter_tui::engine::catalog::fake::{FakeInstanceTypeOptions, fake_instance_type};
    use karpenter_tui::engine::resources::Resources;
    let gi = 1i64 << 30;
    let types = vec![
        fake_instance_type(FakeInstanceTypeOptions {
            name: "ten-cpu".into(),
            resources: Resources::new(10_000, 4 * gi, 10),
            ..Default::default()
        }),
        fake_instance_type(FakeInstanceTypeOptions {
            name: "sixteen-cpu".into(),
            resources: Resources::new(16_000, 16 * gi, 10),
            ..Default::default()
        }),
    ];
    let mut p: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "p", "namespace": "default", "uid": "p"},
        "spec": {
            "resources": {"requests": {"cpu": "9900m", "memory": "3.9Gi"}},
            "containers": [
                {"name": "a", "resources": {"requests": {"cpu": "8", "memory": "3Gi"}}},
                {"name": "b", "resources": {"requests": {"cpu": "4", "memory": "3Gi"}}}
            ]
        },
        "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}
    }))
    .unwrap();
    let r = world(vec![p.clone()]).provision(&fake::fake_catalog_with(types.clone()));
    assert_eq!(launched(&r), ["ten-cpu"]);
    // Without the pod-level requests the containers' sum needs the larger type.
    p.spec.as_mut().unwrap().resources = None;
    let r = world(vec![p]).provision(&fake::fake_catalog_with(types));
    assert_eq!(launched(&r), ["sixteen-cpu"]);
}

#[test]
fn dra_pods_are_not_placed_and_dra_daemonsets_add_no_overhead() {
    // Upstream v1.14.1's default (--ignore-dra-requests=true): a pod referencing a ResourceClaim, pod-level or from
    // an init container, fails with the DRA error under no NodePool's name, and is not relaxed.
    let unschedulable = || pod("x").status;
    let pod_level: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "gpu", "namespace": "default", "uid": "gpu"},
        "status": unschedulable(),
        "spec": {
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}, "claims": [{"name": "gpu"}]}}]
        }
    }))
    .unwrap();
    let init: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "init", "namespace": "default", "uid": "init"},
        "status": unschedulable(),
        "spec": {
            "initContainers": [{"name": "i", "resources": {"claims": [{"name": "fpga"}]}}],
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]
        }
    }))
    .unwrap();
    let r = world(vec![pod_level, init, pod("plain")]).provision(&fake::fake_catalog());
    assert_eq!(scheduled(&r), 1, "only the plain pod is placed");
    for name in ["gpu", "init"] {
        let text = failure_text(&r, name).unwrap_or_else(|| panic!("{name} has no failure"));
        assert_eq!(
            text, "pod has Dynamic Resource Allocation requirements that are not yet supported by Karpenter",
            "{name}"
        );
    }

    // A DaemonSet whose pods claim devices is left out of the overhead: the 1 CPU pod gets the 2 CPU type, where
    // the DaemonSet's 3 CPU would not fit beside it.
    let mut ds = daemonset("gpu-agent", "3", None);
    let spec = ds.spec.template.spec.as_mut().unwrap();
    spec.resource_claims =
        Some(vec![serde_json::from_value(serde_json::json!({"name": "gpu", "resourceClaimName": "x"})).unwrap()]);
    let mut w = world(vec![with_requests(pod("p"), Some("1"), None)]);
    w.daemonsets = vec![ds.clone()];
    let r = w.provision(&fake::fake_catalog_with(fake::fake_default_instance_types()));
    assert_eq!(launched(&r), ["small-instance-type"]);
    // The same DaemonSet without the claim counts: 3 + 1 CPU needs a larger type.
    ds.spec.template.spec.as_mut().unwrap().resource_claims = None;
    w.daemonsets = vec![ds];
    let r = w.provision(&fake::fake_catalog_with(fake::fake_default_instance_types()));
    assert_eq!(launched(&r).len(), 1);
    assert_ne!(launched(&r), ["small-instance-type"]);
}
