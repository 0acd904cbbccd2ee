//! CSI volume attach limits: a node's CSINode caps the volumes its pods attach (both versions, upstream's
//! `VolumeUsage`), and under Karpenter v1.15 an instance type's declared limits cap a NodeClaim before it has a
//! CSINode (engine-v115 §5, core #3202). Upstream names no test for §5; the first case is the pull request's
//! example (limit 10, 100 pods with a claim each: 10 NodeClaims in one pass), with v1.14's outcome beside it.

use std::collections::BTreeMap;

use karpenter_tui::sim::report::{DecisionDetail, Report};
use karpenter_tui::sim::run::{run, run_world};
use karpenter_tui::sim::scenario::parse_scenario;
use karpenter_tui::sim::world::World;

const DRIVER: &str = "ebs.csi.aws.com";

/// `big` (64 CPU, 250 pods) declaring `limit` EBS attachments, in one zone.
fn catalog(limit: u32) -> String {
    format!(
        r#"catalog:
  source: inline
  instanceTypes:
    - name: big
      cpu: "64"
      memory: 256Gi
      pods: 250
      volumeLimits: {{{DRIVER}: {limit}}}
      offerings:
        - {{zone: z1, capacityType: on-demand, price: 1.0}}
"#
    )
}

/// The objects besides the pods: the class, a NodePool and an EBS StorageClass binding at first consumer.
fn base() -> String {
    format!("{}{POOL_AND_CLASS}", crate::common::SCENARIO_NODECLASS)
}

const POOL_AND_CLASS: &str = r#"  - apiVersion: karpenter.sh/v1
    kind: NodePool
    metadata: {name: default}
    spec:
      disruption: {consolidationPolicy: WhenEmpty, consolidateAfter: 1h}
      template:
        spec:
          nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
  - apiVersion: storage.k8s.io/v1
    kind: StorageClass
    metadata: {name: gp3}
    provisioner: ebs.csi.aws.com
    volumeBindingMode: WaitForFirstConsumer
"#;

/// `n` pods `db-<i>`, each with its own claim `data-<i>` of the `gp3` class (as a StatefulSet would make them).
fn pods_with_claims(n: usize) -> String {
    claims_and_pods(0..n, "  ")
}

/// Pods `db-<i>` for `range` with their claims, as list items indented by `indent`.
fn claims_and_pods(range: std::ops::Range<usize>, indent: &str) -> String {
    let mut s = String::new();
    for i in range {
        let item = format!(
            r#"- apiVersion: v1
  kind: PersistentVolumeClaim
  metadata: {{name: data-{i}, namespace: default}}
  spec:
    accessModes: [ReadWriteOnce]
    storageClassName: gp3
    resources: {{requests: {{storage: 10Gi}}}}
- apiVersion: v1
  kind: Pod
  metadata: {{name: db-{i}, namespace: default, labels: {{app: db}}}}
  spec:
    containers: [{{name: db, image: postgres:16, resources: {{requests: {{cpu: 100m, memory: 256Mi}}}}}}]
    volumes: [{{name: data, persistentVolumeClaim: {{claimName: data-{i}}}}}]
"#
        );
        for line in item.lines() {
            s.push_str(indent);
            s.push_str(line);
            s.push('\n');
        }
    }
    s
}

fn scenario(version: &str, limit: u32, pods: usize) -> String {
    format!(
        "name: volume-limits\nuntil: 20m\nsettings:\n  karpenterVersion: \"{version}\"\n{}objects:\n{}{}",
        catalog(limit),
        base(),
        pods_with_claims(pods)
    )
}

fn report(text: &str) -> Report {
    let s = parse_scenario(text, "test.yaml").unwrap_or_else(|e| panic!("{e}"));
    run(&s, None, None).unwrap_or_else(|e| panic!("{e}"))
}

fn world(text: &str) -> World {
    let s = parse_scenario(text, "test.yaml").unwrap_or_else(|e| panic!("{e}"));
    run_world(&s, None).unwrap_or_else(|e| panic!("{e}"))
}

/// The provisioning decisions for pods, in order: (NodeClaims made, pods the pass placed).
fn provisions(r: &Report) -> Vec<(usize, u64)> {
    r.decisions
        .iter()
        .filter_map(|d| match &d.detail {
            DecisionDetail::Provision { node_claims, pods, is_static: false } => Some((node_claims.len(), *pods)),
            _ => None,
        })
        .collect()
}

/// Pods with a claim bound per node.
fn per_node(w: &World) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for p in w.cluster.pods.values() {
        if let Some(n) = p.bound_node() {
            *out.entry(n.to_string()).or_default() += 1;
        }
    }
    out
}

#[test]
fn declared_limit_of_10_gives_100_pods_with_claims_10_nodeclaims_in_one_pass() {
    let r = report(&scenario("1.15", 10, 100));
    let p = provisions(&r);
    assert_eq!(p.first(), Some(&(10, 100)), "the first pass packs 10 claims per NodeClaim: {p:?}");
    assert_eq!(p.len(), 1, "no later round was needed: {p:?}");
    assert!(r.pending.is_empty(), "{:?}", r.pending);

    let w = world(&scenario("1.15", 10, 100));
    let counts = per_node(&w);
    assert_eq!(counts.len(), 10, "{counts:?}");
    assert!(counts.values().all(|&c| c == 10), "{counts:?}");
    // Each node's CSINode says what the type declares.
    assert_eq!(w.cluster.csinodes.len(), 10);
}

#[test]
fn under_1_14_the_limit_is_known_only_from_the_csinode_so_it_takes_rounds() {
    let r = report(&scenario("1.14", 10, 30));
    let p = provisions(&r);
    // v1.14 packs all 30 on one NodeClaim; its node's CSINode then lets kube-scheduler bind 10, and each later round
    // launches for what is left.
    assert_eq!(p.first(), Some(&(1, 30)), "{p:?}");
    assert!(p.len() >= 3, "one round per 10 pods: {p:?}");
    assert!(r.pending.is_empty(), "{:?}", r.pending);
    let w = world(&scenario("1.14", 10, 30));
    let counts = per_node(&w);
    assert!(counts.values().all(|&c| c <= 10), "no node attaches more than its CSINode allows: {counts:?}");
}

#[test]
fn a_nodeclaim_in_flight_counts_against_its_options_declared_limit() {
    // 25 pods: 3 NodeClaims (10, 10, 5). 10 more arrive while they launch: the in-flight claims, limited by what
    // their options declare, take 5 of them, and one more NodeClaim the other 5, in that pass. Were the limit unknown
    // until the CSINodes exist, the first claim would take all 35 and the overflow would wait for later rounds.
    let text =
        format!("{}events:\n  - at: 15s\n    apply:\n{}", scenario("1.15", 10, 25), claims_and_pods(25..35, "      "));
    let r = report(&text);
    let p = provisions(&r);
    // (A decision counts every pod its pass placed: the 30 on in-flight claims and the 5 on the new one.)
    assert_eq!(p, vec![(3, 25), (1, 35)], "{p:?}");
    assert_eq!(r.node_claims.len(), 4);
    let late = r.decisions.iter().filter(|d| matches!(d.detail, DecisionDetail::Provision { .. })).nth(1);
    assert!(late.is_some_and(|d| d.at < 35.0), "the second launch came before any node registered: {late:?}");
    assert!(r.pending.is_empty(), "{:?}", r.pending);
}

#[test]
fn pods_sharing_one_claim_attach_it_once() {
    // 20 pods mounting the same claim count as one volume: one NodeClaim holds them all.
    let mut objects = base();
    objects.push_str(
        r#"  - apiVersion: v1
    kind: PersistentVolumeClaim
    metadata: {name: shared, namespace: default}
    spec:
      accessModes: [ReadWriteMany]
      storageClassName: gp3
      resources: {requests: {storage: 10Gi}}
"#,
    );
    for i in 0..20 {
        objects.push_str(&format!(
            r#"  - apiVersion: v1
    kind: Pod
    metadata: {{name: reader-{i}, namespace: default}}
    spec:
      containers: [{{name: r, image: busybox, resources: {{requests: {{cpu: 100m, memory: 64Mi}}}}}}]
      volumes: [{{name: data, persistentVolumeClaim: {{claimName: shared}}}}]
"#
        ));
    }
    let text = format!(
        "name: shared-claim\nuntil: 5m\nsettings:\n  karpenterVersion: \"1.15\"\n{}objects:\n{objects}",
        catalog(2)
    );
    let p = provisions(&report(&text));
    assert_eq!(p, vec![(1, 20)], "{p:?}");
}

#[test]
fn a_bad_volume_limit_is_refused_at_its_line() {
    let text = scenario("1.15", 10, 1).replace(&format!("{{{DRIVER}: 10}}"), &format!("{{{DRIVER}: -3}}"));
    let err = parse_scenario(&text, "test.yaml").expect_err("a negative limit").to_string();
    assert!(err.contains("test.yaml:") && err.contains("volumeLimits"), "{err}");
}

// The live path: CSINodes read from an API server (shaped as the kubelet writes them) limit what lands on their node.

mod live {
    use std::time::Duration;

    use crate::fake_apiserver::FakeApi;
    use karpenter_tui::cli::plan::plan_packed;
    use karpenter_tui::controller::settings::FeatureGates;
    use karpenter_tui::engine::catalog::aws::aws_catalog;
    use karpenter_tui::engine::packing::Packing;
    use karpenter_tui::kube::watch;
    use serde_json::{Value, json};

    const NODE: &str = "ip-10-0-1-10.ec2.internal";

    fn managed(manager: &str, api: &str) -> Value {
        json!([{"manager": manager, "operation": "Update", "apiVersion": api, "time": "2026-12-01T10:00:00Z",
                "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {"f:labels": {}}}}])
    }

    fn node() -> Value {
        json!({"apiVersion": "v1", "kind": "Node",
               "metadata": {"name": NODE, "uid": "node-uid", "resourceVersion": "100",
                            "creationTimestamp": "2026-12-01T09:00:00Z",
                            "labels": {"kubernetes.io/hostname": NODE, "kubernetes.io/os": "linux",
                                       "kubernetes.io/arch": "amd64", "node.kubernetes.io/instance-type": "m5.xlarge",
                                       "topology.kubernetes.io/zone": "us-east-1a",
                                       "topology.kubernetes.io/region": "us-east-1"},
                            "managedFields": managed("kubelet", "v1")},
               "spec": {"providerID": "aws:///us-east-1a/i-0a1b2c3d4e5f60718"},
               "status": {"capacity": {"cpu": "4", "memory": "16009568Ki", "pods": "58"},
                          "allocatable": {"cpu": "3920m", "memory": "15318368Ki", "pods": "58"},
                          "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                          "message": "kubelet is posting ready status",
                                          "lastHeartbeatTime": "2026-12-01T10:00:00Z",
                                          "lastTransitionTime": "2026-12-01T09:01:00Z"}],
                          "nodeInfo": {"kubeletVersion": "v1.33.5-eks-113cf36", "osImage": "Amazon Linux 2023",
                                       "containerRuntimeVersion": "containerd://1.7.27", "architecture": "amd64",
                                       "operatingSystem": "linux", "bootID": "b1", "machineID": "m1",
                                       "systemUUID": "s1", "kernelVersion": "6.1.0", "kubeProxyVersion": ""}}})
    }

    fn csinode(count: i32) -> Value {
        json!({"apiVersion": "storage.k8s.io/v1", "kind": "CSINode",
               "metadata": {"name": NODE, "uid": "csinode-uid", "resourceVersion": "101",
                            "creationTimestamp": "2026-12-01T09:00:30Z",
                            "annotations": {"storage.alpha.kubernetes.io/migrated-plugins":
                                            "kubernetes.io/aws-ebs,kubernetes.io/azure-disk,kubernetes.io/cinder,kubernetes.io/gce-pd"},
                            "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": NODE, "uid": "node-uid"}],
                            "managedFields": managed("kubelet", "storage.k8s.io/v1")},
               "spec": {"drivers": [{"name": "ebs.csi.aws.com", "nodeID": "i-0a1b2c3d4e5f60718",
                                     "topologyKeys": ["kubernetes.io/os", "topology.ebs.csi.aws.com/zone",
                                                      "topology.kubernetes.io/zone"],
                                     "allocatable": {"count": count}}]}})
    }

    fn storage_class() -> Value {
        json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
               "metadata": {"name": "gp3", "uid": "sc-uid", "resourceVersion": "5",
                            "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
               "provisioner": "ebs.csi.aws.com", "parameters": {"type": "gp3"},
               "reclaimPolicy": "Delete", "volumeBindingMode": "WaitForFirstConsumer", "allowVolumeExpansion": true})
    }

    /// Claim `data-<i>`: bound to its EBS volume for the first two, pending for the third.
    fn claim(i: usize, bound: bool) -> Value {
        let mut c = json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
               "metadata": {"name": format!("data-{i}"), "namespace": "db", "uid": format!("pvc-{i}"),
                            "resourceVersion": format!("{}", 10 + i), "finalizers": ["kubernetes.io/pvc-protection"],
                            "managedFields": managed("kube-controller-manager", "v1")},
               "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "gp3", "volumeMode": "Filesystem",
                        "resources": {"requests": {"storage": "10Gi"}}},
               "status": {"phase": "Pending"}});
        if bound {
            c["metadata"]["annotations"] = json!({"pv.kubernetes.io/bind-completed": "yes",
                                                   "volume.kubernetes.io/selected-node": NODE});
            c["spec"]["volumeName"] = json!(format!("pvc-{i}"));
            c["status"] = json!({"phase": "Bound", "accessModes": ["ReadWriteOnce"], "capacity": {"storage": "10Gi"}});
        }
        c
    }

    fn volume(i: usize) -> Value {
        json!({"apiVersion": "v1", "kind": "PersistentVolume",
               "metadata": {"name": format!("pvc-{i}"), "uid": format!("pv-{i}"), "resourceVersion": format!("{}", 20 + i),
                            "annotations": {"pv.kubernetes.io/provisioned-by": "ebs.csi.aws.com"},
                            "finalizers": ["kubernetes.io/pv-protection", "external-attacher/ebs-csi-aws-com"]},
               "spec": {"accessModes": ["ReadWriteOnce"], "capacity": {"storage": "10Gi"},
                        "claimRef": {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "name": format!("data-{i}"),
                                     "namespace": "db", "uid": format!("pvc-{i}")},
                        "csi": {"driver": "ebs.csi.aws.com", "fsType": "ext4",
                                "volumeHandle": format!("vol-0{i}a1b2c3d4e5f6")},
                        "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                            {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-east-1a"]}]}]}},
                        "persistentVolumeReclaimPolicy": "Delete", "storageClassName": "gp3",
                        "volumeMode": "Filesystem"},
               "status": {"phase": "Bound"}})
    }

    /// StatefulSet pod `db-<i>` with claim `data-<i>`, on the node or pending.
    fn pod(i: usize, on_node: bool) -> Value {
        let mut p = json!({"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": format!("db-{i}"), "namespace": "db", "uid": format!("pod-{i}"),
                            "resourceVersion": format!("{}", 30 + i), "labels": {"app": "db"},
                            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "db",
                                                 "uid": "sts-uid", "controller": true, "blockOwnerDeletion": true}],
                            "managedFields": managed("kube-controller-manager", "v1")},
               "spec": {"containers": [{"name": "db", "image": "postgres:16",
                                        "resources": {"requests": {"cpu": "250m", "memory": "512Mi"}},
                                        "volumeMounts": [{"name": "data", "mountPath": "/var/lib/postgresql"}]}],
                        "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": format!("data-{i}")}}],
                        "restartPolicy": "Always", "schedulerName": "default-scheduler",
                        "terminationGracePeriodSeconds": 30},
               "status": {"phase": "Pending", "qosClass": "Burstable",
                          "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                          "message": "0/1 nodes are available: 1 node(s) exceed max volume count."}]}});
        if on_node {
            p["spec"]["nodeName"] = json!(NODE);
            p["status"] = json!({"phase": "Running", "qosClass": "Burstable",
                                 "conditions": [{"type": "Ready", "status": "True"},
                                                {"type": "PodScheduled", "status": "True"}]});
        }
        p
    }

    fn pool() -> Value {
        json!({"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default"},
               "spec": {"template": {"spec": {
                   "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                   "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}]}}}})
    }

    /// NodeClaims the plan over a live read would launch, with the node's CSINode allowing `count` EBS volumes.
    async fn launches_with(count: i32) -> usize {
        let fake = FakeApi::start().await;
        fake.put("apis/karpenter.sh/v1/nodepools", pool());
        fake.put("api/v1/nodes", node());
        fake.put("apis/storage.k8s.io/v1/csinodes", csinode(count));
        fake.put("apis/storage.k8s.io/v1/storageclasses", storage_class());
        for i in 0..3 {
            fake.put("api/v1/persistentvolumeclaims", claim(i, i < 2));
            fake.put("api/v1/pods", pod(i, i < 2));
        }
        for i in 0..2 {
            fake.put("api/v1/persistentvolumes", volume(i));
        }
        let mut w = watch::spawn(fake.client(), &[]);
        w.wait_synced(Duration::from_secs(10)).await.expect("synced");
        let m = w.cache.lock().unwrap().manifests();
        assert_eq!(m.csinodes.len(), 1, "the CSINode is read");
        let catalog = aws_catalog("us-east-1", None, None, 0).unwrap();
        let r = plan_packed(&m, &catalog, FeatureGates::default(), Packing::Upstream);
        assert!(r.results.failures.is_empty(), "every pod placed: {} failed", r.results.failures.len());
        r.results.new_claims.len()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_node_at_its_csinode_limit_takes_no_pod_with_another_volume() {
        // Two volumes attached, two allowed: the third StatefulSet pod needs a new node, though CPU is plenty.
        assert_eq!(launches_with(2).await, 1);
        // Room for a third volume: it goes on the node.
        assert_eq!(launches_with(3).await, 0);
    }
}
