//! Default pod topology spread (Karpenter v1.15, `--scheduler-config` / `settings.schedulerConfig`; engine-v115 §3),
//! through the simulated world as `simulate` runs it. Each test is named after upstream's `topology_test.go`
//! "DefaultConstraints" case or `options` suite case it follows, or says what it adds. v1.14 has no such setting: a
//! scenario asking for it under "1.14" is refused where it is written, and the same workload without it is asserted
//! beside where the decision differs.

use std::collections::BTreeMap;

use karpenter_tui::engine::api::strict::parse_scheduler_config_strict;
use karpenter_tui::engine::labels;
use karpenter_tui::sim::run::run_world;
use karpenter_tui::sim::scenario::parse_scenario;
use karpenter_tui::sim::world::World;

/// `small` (2 CPU, 10 pods) in three zones at one price.
const CATALOG: &str = r#"catalog:
  source: inline
  instanceTypes:
    - name: small
      cpu: "2"
      memory: 8Gi
      pods: 10
      offerings:
        - {zone: z1, capacityType: on-demand, price: 0.1}
        - {zone: z2, capacityType: on-demand, price: 0.1}
        - {zone: z3, capacityType: on-demand, price: 0.1}
"#;

/// A NodePool `default` over `zones`, consolidating when `policy` says.
fn pool(zones: &str, policy: &str) -> String {
    format!(
        r#"  - apiVersion: karpenter.sh/v1
    kind: NodePool
    metadata: {{name: default}}
    spec:
      disruption: {{consolidationPolicy: {policy}, consolidateAfter: 0s}}
      template:
        spec:
          requirements: [{{key: topology.kubernetes.io/zone, operator: In, values: [{zones}]}}]
          nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
"#
    )
}

/// A Deployment `web` of `replicas` pods requesting `cpu`, with `extra` lines in its pod spec.
fn deployment(replicas: u32, cpu: &str, extra: &str) -> String {
    format!(
        r#"  - apiVersion: apps/v1
    kind: Deployment
    metadata: {{name: web}}
    spec:
      replicas: {replicas}
      selector: {{matchLabels: {{app: web}}}}
      template:
        metadata: {{labels: {{app: web}}}}
        spec:
          containers: [{{name: c, image: x, resources: {{requests: {{cpu: "{cpu}", memory: 256Mi}}}}}}]
{extra}"#
    )
}

/// The default `{key, maxSkew, whenUnsatisfiable}` constraint, with `more` fields.
fn defaults(key: &str, skew: u32, when: &str, more: &str) -> String {
    format!(
        "  schedulerConfig:\n    podTopologySpread:\n      defaultConstraints:\n\
         \x20       - {{maxSkew: {skew}, topologyKey: {key}, whenUnsatisfiable: {when}{more}}}\n"
    )
}

fn text(version: &str, settings: &str, catalog: &str, objects: &str, nodes: &str) -> String {
    format!(
        "name: default-spread\nuntil: 10m\nsettings:\n  karpenterVersion: \"{version}\"\n{settings}{catalog}{nodes}objects:\n{objects}"
    )
}

fn simulate(text: &str) -> World {
    let s = parse_scenario(text, "test.yaml").unwrap_or_else(|e| panic!("{e}\n{text}"));
    run_world(&s, None).unwrap_or_else(|e| panic!("{e}"))
}

/// Bound pods per zone of their node, and how many pods are still pending.
fn spread(w: &World) -> (BTreeMap<String, usize>, usize) {
    let mut zones = BTreeMap::new();
    let mut pending = 0;
    for p in w.cluster.pods.values() {
        match p.bound_node().and_then(|n| w.cluster.nodes.get(n)) {
            Some(node) => {
                let zone = node.metadata.labels.as_ref().and_then(|l| l.get(labels::ZONE)).cloned().unwrap_or_default();
                *zones.entry(zone).or_default() += 1;
            }
            None => pending += 1,
        }
    }
    (zones, pending)
}

fn counts(zones: &BTreeMap<String, usize>) -> Vec<usize> {
    let mut c: Vec<usize> = zones.values().copied().collect();
    c.sort();
    c
}

fn nodes(w: &World) -> usize {
    w.cluster.nodes.len()
}

const ZONES: &str = "z1, z2, z3";
fn objects(parts: &[&str]) -> String {
    let mut s = crate::common::SCENARIO_NODECLASS.to_string();
    for p in parts {
        s.push_str(p);
    }
    s
}

#[test]
fn should_apply_default_zonal_spread_to_a_pod_that_declares_no_constraints_of_its_own() {
    // Four pods of one Deployment, one per node: the default zone spread of maxSkew 1 places them 2/1/1.
    let objs = objects(&[&pool(ZONES, "WhenEmpty"), &deployment(4, "1500m", "")]);
    let zone = defaults(labels::ZONE, 1, "DoNotSchedule", "");
    let (zones, pending) = spread(&simulate(&text("1.15", &zone, CATALOG, &objs, "")));
    assert_eq!((counts(&zones), pending), (vec![1, 1, 2], 0), "{zones:?}");

    // Without the defaults nothing spreads them: the equal-priced offerings all come from one zone.
    let (zones, pending) = spread(&simulate(&text("1.15", "", CATALOG, &objs, "")));
    assert_eq!((counts(&zones), pending), (vec![4], 0), "{zones:?}");
}

#[test]
fn should_not_apply_the_default_to_a_pod_that_declares_its_own_constraints() {
    // The pods' own hostname spread of maxSkew 3 replaces the default zone spread of 1 wholly: all three share a node.
    let own = "          topologySpreadConstraints:\n\
               \x20           - {maxSkew: 3, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {app: web}}}\n";
    let zone = defaults(labels::ZONE, 1, "DoNotSchedule", "");
    let w = simulate(&text(
        "1.15",
        &zone,
        CATALOG,
        &objects(&[&pool(ZONES, "WhenEmpty"), &deployment(3, "100m", own)]),
        "",
    ));
    assert_eq!((nodes(&w), spread(&w).1), (1, 0));

    // The same pods without constraints of their own take the default: one per zone.
    let w =
        simulate(&text("1.15", &zone, CATALOG, &objects(&[&pool(ZONES, "WhenEmpty"), &deployment(3, "100m", "")]), ""));
    assert_eq!(counts(&spread(&w).0), vec![1, 1, 1]);
}

/// Three bare pods labelled `app: solo`, and a Service selecting them when `service`.
fn bare_pods(service: bool) -> String {
    let mut s = String::new();
    for i in 0..3 {
        s.push_str(&format!(
            "  - apiVersion: v1\n    kind: Pod\n    metadata: {{name: solo-{i}, labels: {{app: solo}}}}\n    spec:\n      containers: [{{name: c, image: x, resources: {{requests: {{cpu: 100m, memory: 64Mi}}}}}}]\n"
        ));
    }
    if service {
        s.push_str("  - apiVersion: v1\n    kind: Service\n    metadata: {name: solo}\n    spec:\n      selector: {app: solo}\n      ports: [{port: 80}]\n");
    }
    s
}

#[test]
fn should_not_apply_the_default_to_a_pod_with_no_owner_and_no_matching_service() {
    let zone = defaults(labels::ZONE, 1, "DoNotSchedule", "");
    let w = simulate(&text("1.15", &zone, CATALOG, &objects(&[&pool(ZONES, "WhenEmpty"), &bare_pods(false)]), ""));
    assert_eq!((nodes(&w), spread(&w).1), (1, 0), "nothing selects them: they share one node");

    // A Service selecting them gives them a selector: they spread.
    let w = simulate(&text("1.15", &zone, CATALOG, &objects(&[&pool(ZONES, "WhenEmpty"), &bare_pods(true)]), ""));
    assert_eq!(counts(&spread(&w).0), vec![1, 1, 1]);
}

#[test]
fn should_not_schedule_past_a_synthesized_do_not_schedule_default_that_cant_be_satisfied() {
    // One zone where the default asks for three domains: the global minimum counts as 0, so one pod per domain.
    let zone = defaults(labels::ZONE, 1, "DoNotSchedule", ", minDomains: 3");
    let w =
        simulate(&text("1.15", &zone, CATALOG, &objects(&[&pool("z1", "WhenEmpty"), &deployment(3, "100m", "")]), ""));
    assert_eq!(spread(&w), (BTreeMap::from([("z1".to_string(), 1)]), 2));
}

#[test]
fn should_relax_a_synthesized_schedule_anyway_default_when_it_cant_be_satisfied() {
    let zone = defaults(labels::ZONE, 1, "ScheduleAnyway", ", minDomains: 3");
    let w =
        simulate(&text("1.15", &zone, CATALOG, &objects(&[&pool("z1", "WhenEmpty"), &deployment(3, "100m", "")]), ""));
    assert_eq!(spread(&w), (BTreeMap::from([("z1".to_string(), 3)]), 0));
}

#[test]
fn should_count_pre_existing_cluster_pods_through_the_deduced_selector() {
    // Two of the Deployment's pods already run on a full node in z1; the two it adds both go to z2.
    let catalog = CATALOG.replace("        - {zone: z3, capacityType: on-demand, price: 0.1}\n", "");
    let existing = "nodes:\n  - {name: old, instanceType: small, zone: z1, nodePool: default}\n";
    let mut objs = objects(&[&pool("z1, z2", "WhenEmpty"), &deployment(4, "900m", "")]);
    for i in 0..2 {
        objs.push_str(&format!(
            "  - apiVersion: v1\n    kind: Pod\n    metadata:\n      name: web-old-{i}\n      labels: {{app: web}}\n      ownerReferences: [{{apiVersion: apps/v1, kind: ReplicaSet, name: web, uid: rs-web, controller: true}}]\n    spec:\n      nodeName: old\n      containers: [{{name: c, image: x, resources: {{requests: {{cpu: 900m, memory: 256Mi}}}}}}]\n"
        ));
    }
    let zone = defaults(labels::ZONE, 1, "DoNotSchedule", "");
    let (zones, pending) = spread(&simulate(&text("1.15", &zone, &catalog, &objs, existing)));
    assert_eq!((zones, pending), (BTreeMap::from([("z1".to_string(), 2), ("z2".to_string(), 2)]), 0));
}

#[test]
fn consolidation_keeps_the_default_spread() {
    // Three small pods, one per zone by the default. Consolidation would pack them onto one node without it; with it,
    // a move that breaks the spread is no move, in the disruption simulation as in provisioning.
    let zone = defaults(labels::ZONE, 1, "DoNotSchedule", "");
    let objs = objects(&[&pool(ZONES, "WhenEmptyOrUnderutilized"), &deployment(3, "100m", "")]);
    let w = simulate(&text("1.15", &zone, CATALOG, &objs, ""));
    assert_eq!((nodes(&w), counts(&spread(&w).0)), (3, vec![1, 1, 1]));
}

#[test]
fn a_scheduler_config_under_1_14_is_refused_where_it_is_written() {
    let zone = defaults(labels::ZONE, 1, "DoNotSchedule", "");
    let objs = objects(&[&pool(ZONES, "WhenEmpty"), &deployment(3, "100m", "")]);
    let e = parse_scenario(&text("1.14", &zone, CATALOG, &objs, ""), "s.yaml").expect_err("1.14 has no such flag");
    assert_eq!((e.path.as_str(), e.line), ("settings.schedulerConfig", 5), "{e}");
    assert!(e.message.contains("new in Karpenter 1.15"), "{e}");
}

#[test]
fn should_reject_a_label_selector() {
    let doc = "podTopologySpread:\n  defaultConstraints:\n  - maxSkew: 1\n    topologyKey: topology.kubernetes.io/zone\n    whenUnsatisfiable: DoNotSchedule\n    labelSelector: {matchLabels: {app: x}}\n";
    let errs = parse_scheduler_config_strict(doc, "sched.yaml").expect_err("refused");
    assert_eq!(errs.len(), 1, "{errs:?}");
    let e = &errs[0];
    assert_eq!((e.line, e.path.as_str()), (6, "podTopologySpread.defaultConstraints[0].labelSelector"), "{e}");

    // In a scenario too, at the field.
    let zone = "  schedulerConfig:\n    podTopologySpread:\n      defaultConstraints:\n\
                \x20       - {maxSkew: 1, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: DoNotSchedule, labelSelector: {}}\n";
    let e = parse_scenario(&text("1.15", zone, CATALOG, &objects(&[]), ""), "s.yaml").expect_err("refused");
    assert_eq!(e.path, "settings.schedulerConfig.podTopologySpread.defaultConstraints[0].labelSelector", "{e}");
}

#[test]
fn should_reject_a_duplicated_topology_key_and_when_unsatisfiable_pair() {
    let doc = r#"{"podTopologySpread": {"defaultConstraints": [
      {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule"},
      {"maxSkew": 2, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule"}]}}"#;
    let errs = parse_scheduler_config_strict(doc, "sched.json").expect_err("refused");
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert_eq!((errs[0].line, errs[0].path.as_str()), (3, "podTopologySpread.defaultConstraints[1]"));
    assert!(errs[0].message.contains("Duplicate value"), "{}", errs[0]);
}

#[test]
fn should_allow_the_same_topology_key_with_a_different_when_unsatisfiable() {
    let doc = "podTopologySpread:\n  defaultConstraints:\n  - {maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule}\n  - {maxSkew: 3, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: ScheduleAnyway}\n";
    let c = parse_scheduler_config_strict(doc, "sched.yaml").expect("accepted");
    assert_eq!(c.default_constraints().len(), 2);
}

#[test]
fn unknown_fields_and_bad_values_are_refused_at_their_line() {
    let doc = "podTopologySpread:\n  defaultConstraints:\n  - maxSkew: 0\n    topologyKey: topology.kubernetes.io/zone\n    whenUnsatisfiable: DoNotSchedule\n    weight: 3\n";
    let errs = parse_scheduler_config_strict(doc, "sched.yaml").expect_err("refused");
    let found: Vec<(usize, &str)> = errs.iter().map(|e| (e.line, e.path.as_str())).collect();
    assert!(found.contains(&(3, "podTopologySpread.defaultConstraints[0].maxSkew")), "{errs:?}");
    assert!(found.contains(&(6, "podTopologySpread.defaultConstraints[0].weight")), "{errs:?}");
    let top = parse_scheduler_config_strict("profiles: []\n", "sched.yaml").expect_err("not this document");
    assert_eq!(top[0].path, "profiles");
    assert!(parse_scheduler_config_strict("", "empty").expect("empty is none").is_empty());
}

// ---------------------------------------------------------------------------------------------------------------
// The live path: the watch cache reads Services and ReplicaSets (shaped as an API server sends them) only with
// defaults configured, and the plan over its read spreads what the defaults say.

mod live {
    use std::collections::BTreeSet;
    use std::time::Duration;

    use crate::fake_apiserver::FakeApi;
    use karpenter_tui::cli::plan::plan_packed;
    use karpenter_tui::controller::settings::FeatureGates;
    use karpenter_tui::engine::api::scheduler_config::SchedulerConfig;
    use karpenter_tui::engine::catalog::aws::aws_catalog;
    use karpenter_tui::engine::labels;
    use karpenter_tui::engine::packing::Packing;
    use karpenter_tui::kube::kinds::Kind;
    use karpenter_tui::kube::watch;
    use serde_json::{Value, json};

    const MANAGED: &str = "kube-controller-manager";

    fn managed_fields(manager: &str) -> Value {
        json!([{"manager": manager, "operation": "Update", "apiVersion": "v1", "time": "2026-12-01T10:00:00Z",
                "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {"f:labels": {}}}}])
    }

    fn service() -> Value {
        json!({"apiVersion": "v1", "kind": "Service",
               "metadata": {"name": "web", "namespace": "shop", "uid": "svc-uid", "resourceVersion": "10",
                            "creationTimestamp": "2026-12-01T10:00:00Z", "managedFields": managed_fields("kubectl")},
               "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 8080, "protocol": "TCP"}],
                        "clusterIP": "10.100.12.7", "clusterIPs": ["10.100.12.7"], "type": "ClusterIP",
                        "sessionAffinity": "None", "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack",
                        "internalTrafficPolicy": "Cluster"},
               "status": {"loadBalancer": {}}})
    }

    fn replicaset() -> Value {
        json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
               "metadata": {"name": "web-7d9f8", "namespace": "shop", "uid": "rs-uid", "resourceVersion": "11",
                            "labels": {"app": "web", "pod-template-hash": "7d9f8"},
                            "annotations": {"deployment.kubernetes.io/revision": "1"},
                            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web",
                                                 "uid": "dep-uid", "controller": true, "blockOwnerDeletion": true}],
                            "managedFields": managed_fields(MANAGED)},
               "spec": {"replicas": 3,
                        "selector": {"matchLabels": {"app": "web", "pod-template-hash": "7d9f8"}},
                        "template": {"metadata": {"labels": {"app": "web", "pod-template-hash": "7d9f8"}},
                                     "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]}}},
               "status": {"replicas": 3, "fullyLabeledReplicas": 3, "observedGeneration": 1}})
    }

    fn pending_pod(i: usize) -> Value {
        json!({"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": format!("web-7d9f8-{i}"), "namespace": "shop", "uid": format!("pod-{i}"),
                            "resourceVersion": format!("{}", 20 + i),
                            "labels": {"app": "web", "pod-template-hash": "7d9f8"},
                            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-7d9f8",
                                                 "uid": "rs-uid", "controller": true, "blockOwnerDeletion": true}],
                            "managedFields": managed_fields(MANAGED)},
               "spec": {"containers": [{"name": "web", "image": "nginx:1.27",
                                        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}}],
                        "restartPolicy": "Always", "schedulerName": "default-scheduler",
                        "terminationGracePeriodSeconds": 30},
               "status": {"phase": "Pending", "qosClass": "Burstable",
                          "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                          "message": "0/0 nodes are available"}]}})
    }

    fn pool() -> Value {
        json!({"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default"},
               "spec": {"template": {"spec": {
                   "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                   "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                                    {"key": "topology.kubernetes.io/zone", "operator": "In",
                                     "values": ["us-east-1a", "us-east-1b", "us-east-1c"]}]}}}})
    }

    /// The zones the plan's new NodeClaims are held to, one entry per claim.
    async fn planned_zones(fake: &FakeApi, config: &SchedulerConfig) -> Vec<BTreeSet<String>> {
        let mut w = watch::spawn(fake.client(), config.default_constraints());
        w.wait_synced(Duration::from_secs(10)).await.expect("synced");
        let m = w.cache.lock().unwrap().manifests();
        assert_eq!(m.default_spread.is_some(), !config.is_empty());
        let catalog = aws_catalog("us-east-1", None, None, 0).unwrap();
        let r = plan_packed(&m, &catalog, FeatureGates::default(), Packing::Upstream);
        assert_eq!(r.results.new_claims.iter().map(|c| c.pods.len()).sum::<usize>(), 3, "every pod placed");
        r.results.new_claims.iter().map(|c| c.requirements.get(labels::ZONE).values.iter().cloned().collect()).collect()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_live_read_deduces_selectors_from_services_and_replicasets() {
        let fake = FakeApi::start().await;
        fake.put("apis/karpenter.sh/v1/nodepools", pool());
        fake.put("api/v1/services", service());
        fake.put("apis/apps/v1/replicasets", replicaset());
        for i in 0..3 {
            fake.put("api/v1/pods", pending_pod(i));
        }
        let doc = "podTopologySpread:\n  defaultConstraints:\n  - {maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule}\n";
        let config = karpenter_tui::engine::api::strict::parse_scheduler_config_strict(doc, "t").unwrap();

        // With the defaults: one claim per zone.
        let zones = planned_zones(&fake, &config).await;
        assert_eq!(zones.len(), 3, "{zones:?}");
        assert!(zones.iter().all(|z| z.len() == 1), "{zones:?}");
        assert_eq!(zones.iter().flatten().collect::<BTreeSet<_>>().len(), 3, "{zones:?}");
        let lists = |path: &str| fake.requests().iter().filter(|r| r.path == path && !r.is_watch()).count();
        assert_eq!((lists("/api/v1/services"), lists("/apis/apps/v1/replicasets")), (1, 1));

        // Without: one claim holds all three, and neither kind is listed again.
        let zones = planned_zones(&fake, &SchedulerConfig::default()).await;
        assert_eq!(zones.len(), 1, "{zones:?}");
        assert_eq!((lists("/api/v1/services"), lists("/apis/apps/v1/replicasets")), (1, 1));
        assert!(Kind::Service.for_default_spread() && Kind::ReplicaSet.for_default_spread());
    }
}
