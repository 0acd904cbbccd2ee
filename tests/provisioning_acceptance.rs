//! Acceptance cases of shared/spec/engine.md §10 that concern provisioning and requirements, on the fake
//! catalogue of §9.1.

use crate::common;

use std::collections::BTreeMap;

use common::*;
use k8s_openapi::api::core::v1::{
    Node, NodeSpec, NodeStatus, PersistentVolume, PersistentVolumeClaim, PersistentVolumeClaimSpec,
    PersistentVolumeSpec, Toleration, TopologySelectorLabelRequirement, TopologySelectorTerm, VolumeNodeAffinity,
};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use karpenter_tui::engine::catalog::fake;
use karpenter_tui::engine::explain::PodIgnored;
use karpenter_tui::engine::labels;
use karpenter_tui::engine::requirements::Requirement;

fn world(pods: Vec<k8s_openapi::api::core::v1::Pod>) -> World {
    World {
        nodepools: vec![nodepool("default")],
        pods: pods.into_iter().map(|p| std::sync::Arc::new(p.into())).collect(),
        ..Default::default()
    }
}

#[test]
fn case01_small_pod_gets_cheapest_fitting_type() {
    let w = world(vec![with_requests(pod("p"), None, Some("100M"))]);
    let r = w.provision(&fake::fake_catalog());
    assert_eq!(r.results.new_claims.len(), 1);
    assert_eq!(launched(&r), vec!["small-instance-type"]);
}

#[test]
fn case02_five_small_pods_share_one_node() {
    let pods = (0..5).map(|i| with_requests(pod(&format!("p{i}")), None, Some("10M"))).collect();
    let r = world(pods).provision(&fake::fake_catalog());
    assert_eq!(r.results.new_claims.len(), 1);
    assert_eq!(r.results.new_claims[0].pods.len(), 5);
    assert_eq!(launched(&r), vec!["small-instance-type"]);
}

#[test]
fn case03_forty_pods_two_per_default_node() {
    let pods = (0..40)
        .map(|i| {
            with_node_selector(with_requests(pod(&format!("p{i:02}")), None, Some("1.8G")), &[(labels::ARCH, "amd64")])
        })
        .collect();
    let r = world(pods).provision(&fake::fake_catalog());
    assert_eq!(r.results.new_claims.len(), 20);
    assert!(r.results.new_claims.iter().all(|c| c.pods.len() == 2));
    assert!(launched(&r).iter().all(|t| t == "default-instance-type"), "{:?}", launched(&r));
}

#[test]
fn case04_huge_pod_fails_with_resource_reason() {
    let r = world(vec![with_requests(pod("big"), None, Some("2Ti"))]).provision(&fake::fake_catalog());
    assert!(r.results.new_claims.is_empty());
    let why = failure_text(&r, "big").expect("a failure");
    assert!(why.contains("no instance type has enough resources"), "{why}");
    assert!(why.contains("memory 2Ti"), "{why}");
    assert!(why.contains("largest compatible is arm-instance-type"), "{why}");
}

#[test]
fn case05_arm64_selector() {
    let r = world(vec![with_node_selector(pod("p"), &[(labels::ARCH, "arm64")])]).provision(&fake::fake_catalog());
    let c = &r.results.new_claims[0];
    assert_eq!(c.requirements.get(labels::ARCH), Requirement::in_values(["arm64"]));
    assert_eq!(launched(&r), vec!["arm-instance-type"]);
}

#[test]
fn case06_instance_type_selector() {
    let r = world(vec![with_node_selector(pod("p"), &[(labels::INSTANCE_TYPE, "default-instance-type")])])
        .provision(&fake::fake_catalog());
    assert_eq!(claim_types(&r), vec![vec!["default-instance-type".to_string()]]);
}

#[test]
fn case07_zone_selector_gets_on_demand_only_zone() {
    let r =
        world(vec![with_node_selector(pod("p"), &[(labels::ZONE, "test-zone-3")])]).provision(&fake::fake_catalog());
    let c = &r.results.new_claims[0];
    assert_eq!(c.requirements.get(labels::ZONE), Requirement::in_values(["test-zone-3"]));
    assert_eq!(c.requirements.get(labels::CAPACITY_TYPE), Requirement::in_values(["on-demand"]));
}

#[test]
fn case08_undefined_custom_label() {
    let r = world(vec![with_node_selector(pod("p"), &[("team", "a")])]).provision(&fake::fake_catalog());
    assert!(r.results.new_claims.is_empty());
    let why = failure_text(&r, "p").unwrap();
    assert!(why.contains("does not define label \"team\""), "{why}");

    for op in ["NotIn", "DoesNotExist"] {
        let values: &[&str] = if op == "NotIn" { &["a"] } else { &[] };
        let r = world(vec![with_required_affinity(pod("p"), "team", op, values)]).provision(&fake::fake_catalog());
        assert_eq!(r.results.new_claims.len(), 1, "{op}");
    }
    // Defined by the NodePool's template labels: schedulable.
    let mut w = world(vec![with_node_selector(pod("p"), &[("team", "a")])]);
    w.nodepools[0].spec.template.metadata.labels.insert("team".into(), "a".into());
    let r = w.provision(&fake::fake_catalog());
    assert_eq!(r.results.new_claims.len(), 1);
    assert_eq!(r.results.new_claims[0].labels.get("team").map(String::as_str), Some("a"));
}

#[test]
fn case09_restricted_labels_are_rejected() {
    for key in [labels::HOSTNAME, "karpenter.sh/foo"] {
        let r = world(vec![with_node_selector(pod("p"), &[(key, "x")])]).provision(&fake::fake_catalog());
        assert!(r.results.new_claims.is_empty());
        assert!(
            matches!(&r.rejected[..], [(name, PodIgnored::RestrictedLabel { key: k, .. })] if name == "default/p" && k == key),
            "{:?}",
            r.rejected
        );
    }
}

#[test]
fn case10_nodepool_does_not_exist_is_silently_ignored() {
    let r = world(vec![with_required_affinity(pod("p"), labels::NODEPOOL, "DoesNotExist", &[])])
        .provision(&fake::fake_catalog());
    assert!(r.results.new_claims.is_empty());
    assert!(r.rejected.is_empty());
    assert!(r.results.failures.is_empty());
    assert!(r.pods.is_empty());
}

#[test]
fn case11_weights_order_nodepools() {
    let mut a = nodepool("a");
    let mut b = nodepool("b");
    b.spec.weight = Some(20);
    let mut c = nodepool("c");
    c.spec.weight = Some(100);
    a.spec.weight = None;
    let pods = vec![pod("p1"), pod("p2"), with_node_selector(pod("p3"), &[(labels::NODEPOOL, "a")])];
    let w = World {
        nodepools: vec![a, b, c],
        pods: pods.into_iter().map(|p| std::sync::Arc::new(p.into())).collect(),
        ..Default::default()
    };
    let r = w.provision(&fake::fake_catalog());
    let mut by_pool: BTreeMap<String, usize> = BTreeMap::new();
    for cl in &r.results.new_claims {
        for &p in &cl.pods {
            assert_eq!(cl.nodepool, if r.pods[p].name == "p3" { "a" } else { "c" });
        }
        *by_pool.entry(cl.nodepool.clone()).or_default() += cl.pods.len();
    }
    assert_eq!(by_pool.get("c"), Some(&2));
    assert_eq!(by_pool.get("a"), Some(&1));
}

fn node(name: &str, pool: &str, cpu: &str, initialized: bool) -> Node {
    let mut labels: BTreeMap<String, String> = [
        (labels::NODEPOOL.to_string(), pool.to_string()),
        (labels::REGISTERED.to_string(), "true".to_string()),
        (labels::HOSTNAME.to_string(), name.to_string()),
        (labels::ZONE.to_string(), "test-zone-1".to_string()),
        (labels::ARCH.to_string(), "amd64".to_string()),
        (labels::OS.to_string(), "linux".to_string()),
        (labels::CAPACITY_TYPE.to_string(), "on-demand".to_string()),
        (labels::INSTANCE_TYPE.to_string(), "default-instance-type".to_string()),
    ]
    .into();
    if initialized {
        labels.insert(labels::INITIALIZED.to_string(), "true".to_string());
    }
    let res: BTreeMap<String, Quantity> = [
        ("cpu".to_string(), Quantity(cpu.into())),
        ("memory".to_string(), Quantity("400Gi".into())),
        ("pods".to_string(), Quantity("110".into())),
    ]
    .into();
    Node {
        metadata: ObjectMeta { name: Some(name.into()), labels: Some(labels), ..Default::default() },
        spec: Some(NodeSpec { provider_id: Some(format!("fake://{name}")), ..Default::default() }),
        status: Some(NodeStatus { capacity: Some(res.clone()), allocatable: Some(res), ..Default::default() }),
    }
}

#[test]
fn case12_limits() {
    let mut w = world(vec![with_requests(pod("p"), Some("1.75"), None)]);
    w.nodepools[0].spec.limits = Some([("cpu".to_string(), Quantity("2".into()))].into());
    let r = w.provision(&fake::fake_catalog());
    assert_eq!(launched(&r), vec!["small-instance-type"]);
    assert!(r.results.new_claims[0].instance_types.iter().all(|t| t.capacity.cpu <= 2000));

    let mut w = world(vec![with_requests(pod("p"), Some("1"), None)]);
    w.nodepools[0].spec.limits = Some([("cpu".to_string(), Quantity("20".into()))].into());
    // An existing 100-CPU node of the pool, with a startup taint so the pod can't simply land on it.
    let mut n = node("big", "default", "100", true);
    n.spec.as_mut().unwrap().taints = Some(vec![taint("dedicated", Some("x"), "NoSchedule")]);
    w.nodes.push(n.into());
    let r = w.provision(&fake::fake_catalog());
    assert!(r.results.new_claims.is_empty());
    let why = failure_text(&r, "p").unwrap();
    assert!(why.contains("cpu limit 20 is exhausted"), "{why}");

    // Two anti-affine 1.5-CPU pods under a 3-CPU limit: exactly one schedules.
    let app = [("app", "x")];
    let pods = (0..2)
        .map(|i| {
            with_pod_anti_affinity(
                with_labels(with_requests(pod(&format!("p{i}")), Some("1.5"), None), &app),
                &app,
                labels::HOSTNAME,
            )
        })
        .collect();
    let mut w = world(pods);
    w.nodepools[0].spec.limits = Some([("cpu".to_string(), Quantity("3".into()))].into());
    let r = w.provision(&fake::fake_catalog());
    assert_eq!(scheduled(&r), 1);
}

#[test]
fn case13_daemonset_overhead() {
    let mut w = world(vec![with_requests(pod("p"), Some("1"), None)]);
    w.daemonsets.push(daemonset("ds", "1", None));
    let r = w.provision(&fake::fake_catalog());
    let c = &r.results.new_claims[0];
    assert_eq!(c.requests.cpu, 2000, "pod 1 CPU + daemon 1 CPU once");
    // small (2 CPU − 100m reserved) can't hold 2 CPU of requests.
    assert_ne!(launched(&r)[0], "small-instance-type");

    // A daemon too big for every type: the pool can't host anything.
    let mut w = world(vec![with_requests(pod("p"), Some("1"), None)]);
    w.daemonsets.push(daemonset("huge", "1000", None));
    let r = w.provision(&fake::fake_catalog());
    assert!(r.results.new_claims.is_empty());

    // A daemon that doesn't tolerate the pool's taint is ignored.
    let mut w = world(vec![with_tolerations(
        with_requests(pod("p"), Some("1"), None),
        vec![Toleration { key: Some("dedicated".into()), operator: Some("Exists".into()), ..Default::default() }],
    )]);
    w.nodepools[0].spec.template.spec.taints = vec![taint("dedicated", Some("x"), "NoSchedule")];
    w.daemonsets.push(daemonset("huge", "1000", None));
    let r = w.provision(&fake::fake_catalog());
    assert_eq!(r.results.new_claims.len(), 1);
    assert_eq!(r.results.new_claims[0].requests.cpu, 1000);
}

#[test]
fn case13b_untolerated_template_taint_is_explained() {
    let mut w = world(vec![pod("p")]);
    w.nodepools[0].spec.template.spec.taints = vec![taint("dedicated", Some("gpu"), "NoSchedule")];
    let r = w.provision(&fake::fake_catalog());
    let why = failure_text(&r, "p").unwrap();
    assert!(why.contains("does not tolerate taint dedicated=gpu:NoSchedule"), "{why}");
}

#[test]
fn case14_hostname_anti_affinity_one_node_per_pod() {
    let app = [("app", "web")];
    let pods = (0..5)
        .map(|i| with_pod_anti_affinity(with_labels(pod(&format!("p{i}")), &app), &app, labels::HOSTNAME))
        .collect();
    let r = world(pods).provision(&fake::fake_catalog());
    assert_eq!(r.results.new_claims.len(), 5);
    assert!(r.results.new_claims.iter().all(|c| c.pods.len() == 1));
}

#[test]
fn case15_zonal_self_affinity_and_missing_target() {
    let app = [("app", "db")];
    let pods = (0..6)
        .map(|i| {
            with_pod_affinity(
                with_labels(with_requests(pod(&format!("p{i}")), Some("1"), None), &app),
                &app,
                labels::ZONE,
            )
        })
        .collect();
    let r = world(pods).provision(&fake::fake_catalog());
    assert_eq!(scheduled(&r), 6);
    let zones: std::collections::BTreeSet<Vec<String>> =
        r.results.new_claims.iter().map(|c| c.requirements.get(labels::ZONE).values).collect();
    assert_eq!(zones.len(), 1, "{zones:?}");
    assert_eq!(zones.iter().next().unwrap().len(), 1);

    let p = with_pod_affinity(pod("lonely"), &[("app", "nobody")], labels::ZONE);
    let r = world(vec![p]).provision(&fake::fake_catalog());
    assert_eq!(scheduled(&r), 0);
    let why = failure_text(&r, "lonely").unwrap();
    assert!(why.contains("pod affinity"), "{why}");
}

#[test]
fn case16_initialized_node_keeps_its_startup_taint() {
    let mut w = world(vec![pod("p")]);
    let mut n = node("n1", "default", "4", true);
    n.spec.as_mut().unwrap().taints = Some(vec![taint("example.com/startup", None, "NoSchedule")]);
    w.nodes.push(n.into());
    let r = w.provision(&fake::fake_catalog());
    assert_eq!(r.results.new_claims.len(), 1, "the initialized node's taint is not ignored");

    // Without the taint the pod goes to the existing node.
    let mut w = world(vec![pod("p")]);
    w.nodes.push(node("n1", "default", "4", true).into());
    let r = w.provision(&fake::fake_catalog());
    assert!(r.results.new_claims.is_empty());
    assert_eq!(r.results.existing.len(), 1);
    assert_eq!(r.results.existing[0].node, "n1");
}

fn pvc(name: &str, class: Option<&str>, volume: Option<&str>) -> PersistentVolumeClaim {
    PersistentVolumeClaim {
        metadata: ObjectMeta { name: Some(name.into()), namespace: Some("default".into()), ..Default::default() },
        spec: Some(PersistentVolumeClaimSpec {
            storage_class_name: class.map(Into::into),
            volume_name: volume.map(Into::into),
            ..Default::default()
        }),
        status: None,
    }
}

fn storage_class(name: &str, mode: &str, zone: &str) -> StorageClass {
    StorageClass {
        metadata: ObjectMeta { name: Some(name.into()), ..Default::default() },
        provisioner: "ebs.csi.aws.com".into(),
        volume_binding_mode: Some(mode.into()),
        allowed_topologies: Some(vec![TopologySelectorTerm {
            match_label_expressions: Some(vec![TopologySelectorLabelRequirement {
                key: labels::ZONE.into(),
                values: [zone.to_string()].into(),
            }]),
        }]),
        ..Default::default()
    }
}

#[test]
fn case17_volume_topology() {
    let mut w = world(vec![with_pvc(pod("p"), "data")]);
    w.pvcs.push(pvc("data", Some("zonal"), None));
    w.storage_classes.push(storage_class("zonal", "WaitForFirstConsumer", "test-zone-2"));
    let r = w.provision(&fake::fake_catalog());
    assert_eq!(r.results.new_claims[0].requirements.get(labels::ZONE), Requirement::in_values(["test-zone-2"]));

    let mut w = world(vec![with_pvc(pod("p"), "data")]);
    w.pvcs.push(pvc("data", None, Some("pv-1")));
    let term = k8s_openapi::api::core::v1::NodeSelectorTerm {
        match_expressions: Some(vec![k8s_openapi::api::core::v1::NodeSelectorRequirement {
            key: labels::ZONE.into(),
            operator: "In".into(),
            values: Some(vec!["test-zone-3".into()]),
        }]),
        match_fields: None,
    };
    w.pvs.push(PersistentVolume {
        metadata: ObjectMeta { name: Some("pv-1".into()), ..Default::default() },
        spec: Some(PersistentVolumeSpec {
            node_affinity: Some(VolumeNodeAffinity {
                required: Some(k8s_openapi::api::core::v1::NodeSelector { node_selector_terms: vec![term] }),
            }),
            ..Default::default()
        }),
        status: None,
    });
    let r = w.provision(&fake::fake_catalog());
    assert_eq!(r.results.new_claims[0].requirements.get(labels::ZONE), Requirement::in_values(["test-zone-3"]));

    let mut w = world(vec![with_pvc(pod("p"), "data")]);
    w.pvcs.push(pvc("data", Some("immediate"), None));
    w.storage_classes.push(storage_class("immediate", "Immediate", "test-zone-2"));
    let r = w.provision(&fake::fake_catalog());
    assert!(r.results.new_claims.is_empty());
    assert!(matches!(&r.results.ignored[..], [(_, PodIgnored::Volume { .. })]), "{:?}", r.results.ignored);
}

#[test]
fn zonal_spread_balances_across_zones() {
    let app = [("app", "spread")];
    let pods = (0..9)
        .map(|i| {
            with_spread(
                with_labels(with_requests(pod(&format!("p{i}")), Some("1"), None), &app),
                &app,
                labels::ZONE,
                1,
                true,
            )
        })
        .collect();
    let r = world(pods).provision(&fake::fake_catalog());
    assert_eq!(scheduled(&r), 9);
    let mut per_zone: BTreeMap<String, usize> = BTreeMap::new();
    for c in &r.results.new_claims {
        let z = c.requirements.get(labels::ZONE);
        assert_eq!(z.len(), 1, "zone collapsed to one value");
        *per_zone.entry(z.values[0].clone()).or_default() += c.pods.len();
    }
    assert_eq!(per_zone.values().copied().collect::<Vec<_>>(), vec![3, 3, 3], "{per_zone:?}");
}

#[test]
fn preferences_are_relaxed() {
    // A preferred (ScheduleAnyway) spread plus an impossible preferred node affinity still schedules.
    let mut p = with_spread(pod("p"), &[("app", "x")], labels::ZONE, 1, false);
    let spec = p.spec.as_mut().unwrap();
    spec.affinity = Some(k8s_openapi::api::core::v1::Affinity {
        node_affinity: Some(k8s_openapi::api::core::v1::NodeAffinity {
            preferred_during_scheduling_ignored_during_execution: Some(vec![
                k8s_openapi::api::core::v1::PreferredSchedulingTerm {
                    weight: 50,
                    preference: k8s_openapi::api::core::v1::NodeSelectorTerm {
                        match_expressions: Some(vec![k8s_openapi::api::core::v1::NodeSelectorRequirement {
                            key: labels::ZONE.into(),
                            operator: "In".into(),
                            values: Some(vec!["nowhere".into()]),
                        }]),
                        match_fields: None,
                    },
                },
            ]),
            required_during_scheduling_ignored_during_execution: None,
        }),
        ..Default::default()
    });
    let r = world(vec![p]).provision(&fake::fake_catalog());
    assert_eq!(scheduled(&r), 1);
}

#[test]
fn results_are_deterministic() {
    let app = [("app", "spread")];
    let mk = || {
        let pods = (0..30)
            .map(|i| {
                with_spread(
                    with_labels(with_requests(pod(&format!("p{i}")), Some(["100m", "1", "2"][i % 3]), None), &app),
                    &app,
                    labels::ZONE,
                    1,
                    true,
                )
            })
            .collect();
        let r = world(pods).provision(&fake::fake_catalog());
        r.nodeclaims(&[nodepool("default")]).iter().map(|c| serde_json::to_string(c).unwrap()).collect::<Vec<_>>()
    };
    assert_eq!(mk(), mk());
}

#[test]
fn nodeclaim_objects_are_upstream_shaped() {
    let r = world(vec![with_requests(pod("p"), Some("1"), Some("1Gi"))]).provision(&fake::fake_catalog());
    let ncs = r.nodeclaims(&[nodepool("default")]);
    let nc = &ncs[0];
    assert_eq!(nc.metadata.generate_name.as_deref(), Some("default-"));
    assert_eq!(nc.metadata.labels.as_ref().unwrap().get(labels::NODEPOOL).map(String::as_str), Some("default"));
    assert_eq!(nc.metadata.owner_references.as_ref().unwrap()[0].kind, "NodePool");
    assert_eq!(nc.metadata.finalizers.as_deref(), Some(&["karpenter.sh/termination".to_string()][..]));
    let keys: Vec<&str> = nc.spec.requirements.iter().map(|r| r.key.as_str()).collect();
    assert!(keys.contains(&labels::INSTANCE_TYPE) && keys.contains(&labels::CAPACITY_TYPE));
    assert!(!keys.contains(&labels::HOSTNAME));
    assert_eq!(nc.spec.resources.requests.get("cpu").map(|q| q.0.as_str()), Some("1"));
    // Round-trips through YAML as a karpenter.sh/v1 object.
    let yaml = serde_yaml::to_string(nc).unwrap();
    assert!(yaml.contains("apiVersion: karpenter.sh/v1"));
    let back: karpenter_tui::engine::api::NodeClaim = serde_yaml::from_str(&yaml).unwrap();
    assert_eq!(serde_json::to_value(&back).unwrap(), serde_json::to_value(nc).unwrap());
}
