//! Properties of the scheduler as a whole: the scan indexes never change a decision, results are deterministic,
//! every decision respects the constraints it was given, and arbitrary NodePool / Pod YAML never panics the
//! engine (the bounded fuzz target CI runs). Plans of both packing strategies over a mix with selectors, ORed
//! node-affinity terms, host ports, a tainted and limited NodePool and a DaemonSet pass an independent check of
//! every node each claim may become (`common::plan_check`).

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use common::plan_check;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Toleration};
use k8s_openapi::api::storage::v1::StorageClass;
use karpenter_tui::engine::api::NodePool;
use karpenter_tui::engine::catalog::{InstanceType, fake};
use karpenter_tui::engine::labels;
use karpenter_tui::engine::packing::Packing;
use karpenter_tui::engine::requirements::{Requirement, Requirements};
use karpenter_tui::engine::scheduling::pod::{HostPort, PodData, SpreadConstraint};
use karpenter_tui::engine::scheduling::selector::Selector;
use karpenter_tui::engine::scheduling::volumes::VolumeIndex;
use karpenter_tui::engine::scheduling::workload::{diverse_pods_seeded, shared};
use karpenter_tui::engine::scheduling::{ExistingNode, Input, Results, SchedulerOptions, solve};
use proptest::prelude::*;

fn pool() -> Vec<NodePool> {
    vec![common::nodepool("default")]
}

fn run(pods: &[PodData], types: usize, scan_indexes: bool) -> Results {
    run_packed(pods, types, scan_indexes, Packing::Upstream)
}

fn run_packed(pods: &[PodData], types: usize, scan_indexes: bool, packing: Packing) -> Results {
    run_on(pods, &[], types, scan_indexes, packing)
}

/// A solve over existing `nodes` (their labels are the topology's too).
fn run_on(pods: &[PodData], nodes: &[ExistingNode], types: usize, scan_indexes: bool, packing: Packing) -> Results {
    let catalog = fake::fake_catalog_with(fake::fake_instance_types(types));
    let pools = pool();
    let catalogs: BTreeMap<String, Vec<Arc<InstanceType>>> =
        [("default".to_string(), catalog.instance_types.clone())].into();
    let usage = BTreeMap::new();
    let node_labels = nodes.iter().map(|n| (n.name.clone(), (n.labels.clone(), n.taints.clone()))).collect();
    let volumes = VolumeIndex::default();
    let input = Input {
        nodepools: &pools,
        instance_types: &catalogs,
        policy: &catalog.label_policy,
        nodes,
        nodepool_usage: &usage,
        bound_pods: &[],
        node_labels: &node_labels,
        daemonsets: &[],
        volumes: &volumes,
        options: SchedulerOptions { scan_indexes, packing, ..Default::default() },
    };
    solve(&input, &shared(pods))
}

/// A comparable digest of a solve: every claim's pods, options and requirements; every failure.
fn digest(r: &Results) -> Vec<String> {
    let mut out: Vec<String> = r
        .new_claims
        .iter()
        .map(|c| {
            let types: Vec<&str> = c.instance_types.iter().map(|t| t.name.as_str()).collect();
            format!("{} {:?} {:?} {}", c.nodepool, c.pods, types, c.full_requirements())
        })
        .collect();
    out.extend(r.failures.iter().map(|f| format!("failed {}", f.pod)));
    out
}

/// A second pass's input: the first solve's claims as in-flight nodes (each its cheapest type, in the first zone it
/// may take), the pods still pending.
fn as_nodes(r: &Results) -> Vec<ExistingNode> {
    r.new_claims
        .iter()
        .map(|c| {
            let t = &c.instance_types[0];
            let mut labels = c.requirements.single_valued_labels();
            labels.extend(t.requirements.single_valued_labels());
            if let Some(zone) = c.requirements.get(labels::ZONE).values.first() {
                labels.insert(labels::ZONE.to_string(), zone.clone());
            }
            labels.insert(labels::HOSTNAME.to_string(), c.hostname.clone());
            ExistingNode {
                name: c.hostname.clone(),
                labels: labels.into(),
                allocatable: t.allocatable(),
                capacity: t.capacity.clone(),
                managed: true,
                nodepool: Some(c.nodepool.clone()),
                ..Default::default()
            }
        })
        .collect()
}

/// [`digest`] with the pods placed on existing nodes.
fn digest_on(r: &Results) -> Vec<String> {
    let mut out = digest(r);
    out.extend(r.existing.iter().map(|p| format!("{} {:?}", p.node, p.pods)));
    out
}

/// The pass after a launch: thousands of pods solved again over the NodeClaims made for them. Skipping the nodes
/// that refused a pod's class for good (and the claim indexes) decides exactly as the plain scan of every node.
#[test]
fn node_scans_by_class_never_change_decisions() {
    for (n, seed) in [(1500, 5), (3000, 9)] {
        let pods = diverse_pods_seeded(n, seed);
        let nodes = as_nodes(&run(&pods, 40, true));
        assert!(nodes.len() > 100, "the first pass made {} claims", nodes.len());
        // The same pods again, and another workload of the same shape beside them.
        let mut more = pods.clone();
        more.extend(diverse_pods_seeded(n / 2, seed + 1).into_iter().map(|mut p| {
            p.uid = format!("{}-b", p.uid);
            p.name = format!("{}-b", p.name);
            p
        }));
        for packing in [Packing::Upstream, Packing::Cost] {
            let fast = run_on(&more, &nodes, 40, true, packing);
            let plain = run_on(&more, &nodes, 40, false, packing);
            assert!(!fast.existing.is_empty(), "n={n} seed={seed}: nothing went on the nodes");
            assert_eq!(digest_on(&fast), digest_on(&plain), "n={n} seed={seed} {packing:?}");
        }
    }
}

#[test]
fn scan_indexes_never_change_decisions() {
    for (n, seed) in [(500, 1), (2000, 42), (3000, 7)] {
        let pods = diverse_pods_seeded(n, seed);
        assert_eq!(digest(&run(&pods, 40, true)), digest(&run(&pods, 40, false)), "n={n} seed={seed}");
    }
}

/// Checks every claim against invariants the constraints imply whatever the placement order: no two pods that
/// anti-affine on hostname share a claim; at most maxSkew self-selecting pods of one hostname spread per claim;
/// zonal spread and zonal affinity pods sit on single-zone claims; each zonal self-affinity group uses one zone.
fn check_constraints(pods: &[PodData], r: &Results) {
    let mut affinity_zones: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for c in &r.new_claims {
        let zone = c.requirements.get(labels::ZONE);
        let on_node: Vec<&PodData> = c.pods.iter().map(|&i| &pods[i]).collect();
        for p in &on_node {
            for t in &p.anti_affinity {
                if t.key == labels::HOSTNAME {
                    let others = on_node.iter().filter(|q| q.uid != p.uid && t.selector.matches(&q.labels)).count();
                    assert_eq!(others, 0, "anti-affinity violated on a claim");
                }
            }
            for s in &p.spreads {
                if s.key == labels::ZONE {
                    assert_eq!(zone.len(), 1, "zonal spread pod on a claim without a single zone");
                }
                if s.key == labels::HOSTNAME && s.selector.matches(&p.labels) {
                    let same = on_node
                        .iter()
                        .filter(|q| s.selector.matches(&q.labels) && q.spreads.iter().any(|qs| qs == s))
                        .count() as i32;
                    assert!(same <= s.max_skew, "hostname spread skew exceeded: {same}");
                }
            }
            for t in &p.affinity {
                if t.key == labels::ZONE {
                    assert_eq!(zone.len(), 1);
                    affinity_zones.entry(format!("{:?}", t.selector)).or_default().insert(zone.values[0].clone());
                }
            }
        }
    }
    for (sel, zones) in &affinity_zones {
        assert_eq!(zones.len(), 1, "zone affinity group {sel} spread over {zones:?}");
    }
}

#[test]
fn decisions_respect_constraints() {
    let pods = diverse_pods_seeded(1500, 3);
    let r = run(&pods, 60, true);
    assert!(r.failures.is_empty());
    check_constraints(&pods, &r);
    assert_eq!(plan_check::plan_violations(&pods, &[], &pool(), Default::default(), &r), Vec::<String>::new());
}

#[test]
fn cost_packing_decisions_respect_constraints() {
    for seed in [3, 11] {
        let pods = diverse_pods_seeded(1500, seed);
        let r = run_packed(&pods, 60, true, Packing::Cost);
        assert!(r.failures.is_empty(), "seed {seed}: {} pods failed", r.failures.len());
        assert_eq!(r.scheduled_pods(), pods.len());
        check_constraints(&pods, &r);
        assert_eq!(plan_check::plan_violations(&pods, &[], &pool(), Default::default(), &r), Vec::<String>::new());
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Every cost plan satisfies the constraints the upstream plan does, places the pods upstream places, and is
    /// deterministic.
    #[test]
    fn cost_plans_hold_the_same_constraints(n in 1usize..300, seed in any::<u64>(), types in 1usize..30) {
        let pods = diverse_pods_seeded(n, seed);
        let up = run(&pods, types, true);
        let cost = run_packed(&pods, types, true, Packing::Cost);
        prop_assert_eq!(digest(&cost), digest(&run_packed(&pods, types, true, Packing::Cost)));
        prop_assert!(cost.scheduled_pods() >= up.scheduled_pods(), "cost {} < upstream {}", cost.scheduled_pods(), up.scheduled_pods());
        if cost.failures.is_empty() {
            check_constraints(&pods, &cost);
        }
        let violations = plan_check::plan_violations(&pods, &[], &pool(), Default::default(), &cost);
        prop_assert!(violations.is_empty(), "{violations:?}");
    }

    #[test]
    fn indexes_and_determinism_hold_for_random_mixes(n in 1usize..300, seed in any::<u64>(), types in 1usize..30) {
        let pods = diverse_pods_seeded(n, seed);
        let a = run(&pods, types, true);
        prop_assert_eq!(digest(&a), digest(&run(&pods, types, false)));
        prop_assert_eq!(digest(&a), digest(&run(&pods, types, true)));
        if a.failures.is_empty() {
            check_constraints(&pods, &a);
        }
    }
}

// --- both strategies against an independent check, in a world with most of the constraints upstream honours ----

/// What a pod of [`ConstrainedWorld`] asks beyond the diverse mix.
#[derive(Debug, Clone, Default)]
struct Extra {
    /// A node selector on one of the three zones.
    zone: Option<usize>,
    /// A node selector on arm64 (true) or amd64.
    arm: Option<bool>,
    /// Required node affinity: arm64, or else test-zone-3 (two ORed terms).
    terms: bool,
    /// Host port 8080/TCP on every address.
    port: bool,
    /// Tolerates the `batch` NodePool's taint.
    tolerate: bool,
    /// A volume: the claim bound to a PersistentVolume in test-zone-2 (true), or the unbound WaitForFirstConsumer
    /// claim whose StorageClass allows test-zone-1 and test-zone-3.
    volume: Option<bool>,
}

fn extra() -> impl Strategy<Value = Extra> {
    (
        prop::option::weighted(0.2, 0usize..3),
        prop::option::weighted(0.15, any::<bool>()),
        prop::bool::weighted(0.1),
        prop::bool::weighted(0.1),
        prop::bool::weighted(0.4),
        prop::option::weighted(0.1, any::<bool>()),
    )
        .prop_map(|(zone, arm, terms, port, tolerate, volume)| Extra { zone, arm, terms, port, tolerate, volume })
}

fn one(key: &str, value: &str) -> Requirements {
    let mut r = Requirements::new();
    r.add(key, Requirement::in_values([value]));
    r
}

/// Two NodePools over linux types: `batch` (weight 10, tainted `dedicated=batch:NoSchedule`, at most 64 CPUs) and
/// `default` (at least 4 instance types per claim); the assorted fake catalog (zones, capacity types, arm64 and
/// amd64) plus `types` fake types; a DaemonSet that tolerates nothing, so it runs on `default`'s nodes only; a
/// zonal PersistentVolume and a WaitForFirstConsumer StorageClass; the diverse mix with `extras` applied, then `web`
/// pods of one workload spread over zones with maxSkew 1 (DoNotSchedule); and the solve of those pods.
struct ConstrainedWorld {
    pools: Vec<NodePool>,
    daemonsets: Vec<PodData>,
    pvcs: Vec<PersistentVolumeClaim>,
    pvs: Vec<PersistentVolume>,
    classes: Vec<StorageClass>,
    pods: Vec<PodData>,
    results: Results,
}

const VOLUMES: &str = "
- apiVersion: v1
  kind: PersistentVolumeClaim
  metadata: {name: data, namespace: default}
  spec: {accessModes: [ReadWriteMany], storageClassName: '', volumeName: data-pv, resources: {requests: {storage: 1Gi}}}
  status: {phase: Bound}
- apiVersion: v1
  kind: PersistentVolumeClaim
  metadata: {name: scratch, namespace: default}
  spec: {accessModes: [ReadWriteMany], storageClassName: wffc, resources: {requests: {storage: 1Gi}}}
  status: {phase: Pending}
";

const VOLUME: &str = "
apiVersion: v1
kind: PersistentVolume
metadata: {name: data-pv}
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteMany]
  claimRef: {name: data, namespace: default}
  csi: {driver: ebs.csi.aws.com, volumeHandle: vol-1}
  nodeAffinity:
    required:
      nodeSelectorTerms: [{matchExpressions: [{key: topology.kubernetes.io/zone, operator: In, values: [test-zone-2]}]}]
";

const STORAGE_CLASS: &str = "
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: wffc}
provisioner: ebs.csi.aws.com
volumeBindingMode: WaitForFirstConsumer
allowedTopologies: [{matchLabelExpressions: [{key: topology.kubernetes.io/zone, values: [test-zone-1, test-zone-3]}]}]
";

impl ConstrainedWorld {
    fn solve(seed: u64, types: usize, extras: &[Extra], web: usize, packing: Packing) -> Self {
        let pools = vec![
            common::nodepool_yaml(
                "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: batch}\nspec:\n  weight: 10\n  limits: {cpu: \"64\"}\n  template:\n    spec:\n      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}\n      taints: [{key: dedicated, value: batch, effect: NoSchedule}]\n      requirements: [{key: kubernetes.io/os, operator: In, values: [linux]}]\n",
            ),
            common::nodepool_yaml(
                "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: default}\nspec:\n  template:\n    spec:\n      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}\n      requirements: [{key: kubernetes.io/os, operator: In, values: [linux]}, {key: node.kubernetes.io/instance-type, operator: Exists, minValues: 4}]\n",
            ),
        ];
        let mut all = fake::fake_instance_types_assorted();
        all.extend(fake::fake_instance_types(types));
        let catalog = fake::fake_catalog_with(all);
        let catalogs: BTreeMap<String, Vec<Arc<InstanceType>>> =
            pools.iter().map(|p| (p.name().to_string(), catalog.instance_types.clone())).collect();
        let mut pods = diverse_pods_seeded(extras.len(), seed);
        for (p, e) in pods.iter_mut().zip(extras) {
            if let Some(z) = e.zone {
                p.node_selector.add_all(&one(labels::ZONE, &format!("test-zone-{}", z + 1)));
            }
            if let Some(arm) = e.arm {
                p.node_selector.add_all(&one(labels::ARCH, if arm { "arm64" } else { "amd64" }));
            }
            if e.terms {
                p.required_terms = vec![one(labels::ARCH, "arm64"), one(labels::ZONE, "test-zone-3")];
            }
            if e.port {
                p.host_ports = vec![HostPort { ip: "0.0.0.0".into(), port: 8080, protocol: "TCP".into() }];
            }
            if e.tolerate {
                p.tolerations = std::sync::Arc::from([Toleration {
                    key: Some("dedicated".into()),
                    operator: Some("Equal".into()),
                    value: Some("batch".into()),
                    effect: Some("NoSchedule".into()),
                    ..Default::default()
                }]);
            }
            if let Some(bound) = e.volume {
                p.pvcs = vec![if bound { "data" } else { "scratch" }.to_string()];
            }
        }
        for i in 0..web {
            let mut p = diverse_pods_seeded(1, seed)[0].clone();
            p.name = format!("web-{i}");
            p.uid = p.name.clone();
            p.labels = Arc::new([("app".to_string(), "web".to_string())].into());
            p.spreads = vec![SpreadConstraint {
                key: labels::ZONE.into(),
                max_skew: 1,
                min_domains: None,
                required: true,
                selector: Selector::default().with_label("app", "web"),
                honor_node_affinity: true,
                honor_taints: false,
            }];
            pods.push(p);
        }
        let mut daemon = diverse_pods_seeded(1, seed)[0].clone();
        daemon.name = "logging-agent".into();
        daemon.requests = karpenter_tui::engine::resources::Resources::new(100, 128 << 20, 1);
        daemon.daemonset = Some("logging-agent".into());
        let daemonsets = vec![daemon];
        let pvcs: Vec<PersistentVolumeClaim> = serde_yaml::from_str(VOLUMES).expect("valid claims");
        let pvs: Vec<PersistentVolume> = vec![serde_yaml::from_str(VOLUME).expect("a valid volume")];
        let classes: Vec<StorageClass> = vec![serde_yaml::from_str(STORAGE_CLASS).expect("a valid class")];
        let usage = BTreeMap::new();
        let node_labels = BTreeMap::new();
        let volumes = VolumeIndex::new(&pvcs, &pvs, &classes);
        let input = Input {
            nodepools: &pools,
            instance_types: &catalogs,
            policy: &catalog.label_policy,
            nodes: &[],
            nodepool_usage: &usage,
            bound_pods: &[],
            node_labels: &node_labels,
            daemonsets: &daemonsets,
            volumes: &volumes,
            options: SchedulerOptions { packing, ..Default::default() },
        };
        let results = solve(&input, &shared(&pods));
        ConstrainedWorld { pools, daemonsets, pvcs, pvs, classes, pods, results }
    }

    /// What the independent check finds wrong with `r` (this world's results, or a broken copy of them).
    fn violations(&self, r: &Results) -> Vec<String> {
        let volumes = plan_check::Volumes { pvcs: &self.pvcs, pvs: &self.pvs, classes: &self.classes };
        plan_check::plan_violations(&self.pods, &self.daemonsets, &self.pools, volumes, r)
    }
}

/// The check finds what it is for: a claim cut below minValues, a pod moved onto a claim it does not fit, a pod
/// whose volume cannot attach where its claim goes, and a pod that vanished.
#[test]
fn the_plan_check_catches_broken_plans() {
    let mut w = ConstrainedWorld::solve(1, 10, &vec![Extra::default(); 40], 0, Packing::Cost);
    assert_eq!(w.violations(&w.results), Vec::<String>::new());
    assert!(w.results.new_claims.len() >= 2, "{} claims", w.results.new_claims.len());
    let mut cut = w.results.clone();
    cut.new_claims[0].instance_types.truncate(1);
    let broken = w.violations(&cut);
    assert!(broken.iter().any(|v| v.contains("minValues 4")), "{broken:?}");
    let mut moved = w.results.clone();
    let pods: Vec<usize> = moved.new_claims[1].pods.drain(..).collect();
    moved.new_claims[0].pods.extend(pods);
    let broken = w.violations(&moved);
    assert!(broken.iter().any(|v| v.contains("cannot hold")), "{broken:?}");
    let gone = moved.new_claims[0].pods.pop().expect("a pod");
    let broken = w.violations(&moved);
    assert!(broken.iter().any(|v| v.contains(&w.pods[gone].name) && v.contains("neither")), "{broken:?}");
    // The zone-2 volume on a pod whose claim may launch elsewhere (the world's own results, its pod changed).
    let zones = |c: &karpenter_tui::engine::scheduling::NewNodeClaim| c.requirements.get(labels::ZONE);
    let c = w.results.new_claims.iter().find(|c| !zones(c).has("test-zone-2") || zones(c).len() > 1);
    let i = c.expect("a claim that may launch outside test-zone-2").pods[0];
    w.pods[i].pvcs = vec!["data".into()];
    let broken = w.violations(&w.results);
    assert!(broken.iter().any(|v| v.contains(&w.pods[i].name) && v.contains("volumes")), "{broken:?}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]

    /// Both strategies' plans pass the independent check and spread the web pods evenly; cost plans are
    /// deterministic. Unlike `cost_plans_hold_the_same_constraints`, this does not ask cost packing to place at
    /// least the pods upstream places: here that depends on order. A zone-affinity group or a zone spread may end
    /// up ahead in the one zone a pod's volume allows (volume topology constrains the node, never the domains the
    /// pod counts, as upstream), and then that pod cannot follow. Over 300 cases on 2026-11-27, cost packing left
    /// more such pods pending in 44 and fewer in 40.
    #[test]
    fn plans_hold_selectors_terms_ports_taints_volumes_daemonsets_and_limits(
        extras in prop::collection::vec(extra(), 1..160),
        web in 0usize..24,
        seed in any::<u64>(),
        types in 1usize..20,
    ) {
        for packing in [Packing::Upstream, Packing::Cost] {
            let w = ConstrainedWorld::solve(seed, types, &extras, web, packing);
            let violations = w.violations(&w.results);
            prop_assert!(violations.is_empty(), "{packing}: {violations:?}");
            // The web pods are all placed, no zone more than one ahead of another.
            let mut per_zone: BTreeMap<String, usize> =
                (1..=3).map(|z| (format!("test-zone-{z}"), 0)).collect();
            for c in &w.results.new_claims {
                let on = c.pods.iter().filter(|&&i| w.pods[i].name.starts_with("web-")).count();
                if on > 0 {
                    let zone = c.requirements.get(labels::ZONE);
                    prop_assert_eq!(zone.values.len(), 1, "{}: a web pod on a claim of zones {:?}", packing, zone);
                    *per_zone.entry(zone.values[0].clone()).or_default() += on;
                }
            }
            prop_assert_eq!(per_zone.values().sum::<usize>(), web, "{}: every web pod placed", packing);
            let (lo, hi) = (per_zone.values().min().copied(), per_zone.values().max().copied());
            prop_assert!(hi.unwrap_or(0) - lo.unwrap_or(0) <= 1, "{packing}: zone skew {per_zone:?}");
            if packing == Packing::Cost {
                let again = ConstrainedWorld::solve(seed, types, &extras, web, packing);
                prop_assert_eq!(digest(&w.results), digest(&again.results));
            }
        }
    }
}

// --- bounded fuzz: arbitrary-ish NodePool and Pod YAML into the provisioning pass never panics -----------------

fn yaml_fragment() -> impl Strategy<Value = String> {
    let key = prop_oneof![
        Just(labels::ZONE.to_string()),
        Just(labels::ARCH.to_string()),
        Just(labels::CAPACITY_TYPE.to_string()),
        Just(labels::INSTANCE_TYPE.to_string()),
        Just(labels::NODEPOOL.to_string()),
        Just(labels::HOSTNAME.to_string()),
        Just("integer".to_string()),
        Just("team".to_string()),
        "[a-z./-]{0,12}",
    ];
    let op = prop_oneof![
        Just("In"),
        Just("NotIn"),
        Just("Exists"),
        Just("DoesNotExist"),
        Just("Gt"),
        Just("Lt"),
        Just("Gte"),
        Just("Lte"),
        Just("Bogus")
    ];
    let value =
        prop_oneof![Just("test-zone-1".to_string()), Just("amd64".to_string()), Just("3".to_string()), "[ -~]{0,6}"];
    (key, op, proptest::collection::vec(value, 0..3)).prop_map(|(k, op, vs)| {
        let vals: Vec<String> = vs.iter().map(|v| format!("{v:?}")).collect();
        format!("{{key: {k:?}, operator: {op}, values: [{}]}}", vals.join(", "))
    })
}

fn quantity() -> impl Strategy<Value = String> {
    prop_oneof![Just("100m".to_string()), Just("2Gi".to_string()), Just("1e3".to_string()), "[0-9a-zA-Z.+-]{0,6}"]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_manifests_never_panic(
        pool_reqs in proptest::collection::vec(yaml_fragment(), 0..3),
        pod_reqs in proptest::collection::vec(yaml_fragment(), 0..3),
        cpu in quantity(),
        mem in quantity(),
        limit in quantity(),
        weight in -5i32..200,
        skew in -1i32..3,
        budget in "[0-9%a-z]{0,4}",
    ) {
        let text = format!(
            "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {{name: fuzz}}\nspec:\n  weight: {weight}\n  limits: {{cpu: {limit:?}}}\n  disruption: {{budgets: [{{nodes: {budget:?}}}]}}\n  template:\n    spec:\n      nodeClassRef: {{group: g, kind: k, name: n}}\n      requirements: [{}]\n---\napiVersion: v1\nkind: Pod\nmetadata: {{name: p, labels: {{app: x}}}}\nspec:\n  containers: [{{name: c, resources: {{requests: {{cpu: {cpu:?}, memory: {mem:?}}}}}}}]\n  affinity:\n    nodeAffinity:\n      requiredDuringSchedulingIgnoredDuringExecution:\n        nodeSelectorTerms: [{{matchExpressions: [{}]}}]\n  topologySpreadConstraints: [{{maxSkew: {skew}, topologyKey: {:?}, whenUnsatisfiable: DoNotSchedule, labelSelector: {{matchLabels: {{app: x}}}}}}]\n",
            pool_reqs.join(", "),
            pod_reqs.join(", "),
            labels::ZONE,
        );
        // Either the manifests are rejected with a located error, or the engine runs under both packing strategies;
        // it never panics.
        if let Ok(m) = karpenter_tui::engine::manifests::ClusterObjects::parse(&text, "fuzz.yaml") {
            let r = karpenter_tui::cli::plan::plan(&m, &fake::fake_catalog());
            let _ = karpenter_tui::cli::plan::to_table(&r);
            let _ = karpenter_tui::cli::plan::to_json(&m, &r);
            // Both strategies and the LP bound, as `plan` and the dashboard compare them.
            let cmp = karpenter_tui::cli::plan::packing_comparison(&m, &fake::fake_catalog(), Default::default());
            let _ = cmp.summary();
        }
        let first = text.split("---").next().unwrap_or("");
        if let Ok(np) = karpenter_tui::engine::api::strict::parse_nodepool_strict(first, "fuzz.yaml") {
            let _ = karpenter_tui::engine::api::validation::validate_nodepool(&np, &fake::fake_catalog().label_policy);
        }
    }
}
