//! Node repair on a live API server: a Node a kubelet reports NotReady for longer than the KWOK cloud's policy
//! tolerates gets its NodeClaim annotated with a termination time of now and deleted, its pod deleted at once,
//! and nothing is written with the gate off.
//!
//! Registration on a live API server while other writers change the Node: the acting controller (real watch cache,
//! real writer, the KWOK cloud) against the fake API server, with objects shaped as an API server sends them
//! (managedFields, kubelet status with heartbeats, images, nodeInfo). A kubelet's status update lands between the
//! controller's read and its first write, and another writer updates the Node right after every write of ours.
//! Registration must still complete, nothing anyone else wrote may be lost, and `Registered` may only be written
//! once the Node shows what it stands for.
//!
//! Metrics of the acting controller on a live API server: scraped over HTTP from the listener `controller` serves
//! them on, in Prometheus' text format, with what the run did and what the cluster holds.

use crate::fake_apiserver;

use std::sync::Arc;
use std::time::Duration;

use fake_apiserver::{FakeApi, eventually};
use karpenter_tui::controller::Controller;
use karpenter_tui::engine::catalog::kwok::kwok_catalog;
use karpenter_tui::engine::disruption::gate::Mode;
use karpenter_tui::engine::version::KarpenterVersion;
use karpenter_tui::kube::watch;
use karpenter_tui::kube::writer::Writer;
use karpenter_tui::shell::acting::Acting;
use serde_json::{Value, json};

const NODES: &str = "api/v1/nodes";
const NODECLAIMS: &str = "apis/karpenter.sh/v1/nodeclaims";
const NODEPOOLS: &str = "apis/karpenter.sh/v1/nodepools";
const NAME: &str = "default-x7k2p";

fn nodepool() -> Value {
    json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
        "metadata": {"name": "default", "uid": "9d5e-pool", "generation": 1,
                     "creationTimestamp": "2026-01-01T00:00:00Z",
                     "managedFields": [{"manager": "kubectl", "operation": "Apply", "apiVersion": "karpenter.sh/v1",
                                        "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:template": {}}}}]},
        "spec": {
            "disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "0s",
                           "budgets": [{"nodes": "10%"}]},
            "template": {"spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "expireAfter": "720h",
                "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}]
            }}
        }
    })
}

/// The NodeClaim as the controller left it after the launch.
fn nodeclaim() -> Value {
    let cond = |t: &str, s: &str, r: &str| json!({"type": t, "status": s, "reason": r, "message": "", "lastTransitionTime": "2026-01-01T00:00:05Z"});
    json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {
            "name": NAME, "uid": "4f1c-claim", "generation": 1, "creationTimestamp": "2026-01-01T00:00:00Z",
            "finalizers": ["karpenter.sh/termination"],
            "labels": {"karpenter.sh/nodepool": "default", "karpenter.sh/capacity-type": "on-demand",
                       "node.kubernetes.io/instance-type": "c-4x-amd64-linux",
                       "topology.kubernetes.io/zone": "us-east-1a", "kubernetes.io/arch": "amd64"},
            "annotations": {"karpenter.sh/nodepool-hash": "6821555240594823858", "karpenter.sh/nodepool-hash-version": "v3"},
            "ownerReferences": [{"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "name": "default",
                                 "uid": "9d5e-pool", "blockOwnerDeletion": true}],
            "managedFields": [{"manager": "karpenter-tui", "operation": "Update", "apiVersion": "karpenter.sh/v1",
                               "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {"f:conditions": {}}},
                               "subresource": "status"}]
        },
        "spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "expireAfter": "720h",
            "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                             {"key": "karpenter.sh/nodepool", "operator": "In", "values": ["default"]}],
            "resources": {"requests": {"cpu": "1", "memory": "1Gi", "pods": "1"}}
        },
        "status": {
            "providerID": format!("kwok://{NAME}"),
            "capacity": {"cpu": "4", "memory": "16Gi", "pods": "110", "ephemeral-storage": "20Gi"},
            "allocatable": {"cpu": "3920m", "memory": "15Gi", "pods": "110", "ephemeral-storage": "18Gi"},
            "conditions": [cond("Launched", "True", "Launched"), cond("Registered", "Unknown", "NodeNotFound"),
                           cond("Initialized", "Unknown", "NotLaunched")]
        }
    })
}

/// The Node as a kubelet registers it: the `karpenter.sh/unregistered` taint from its flags, Ready, heartbeats.
fn node() -> Value {
    let cond = |t: &str, s: &str, r: &str| {
        json!({"type": t, "status": s, "reason": r, "message": format!("kubelet says {r}"),
               "lastHeartbeatTime": "2026-01-01T00:00:30Z", "lastTransitionTime": "2026-01-01T00:00:20Z"})
    };
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {
            "name": NAME, "uid": "77aa-node", "creationTimestamp": "2026-01-01T00:00:20Z",
            "labels": {"kubernetes.io/hostname": NAME, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
                       "node.kubernetes.io/instance-type": "c-4x-amd64-linux",
                       "topology.kubernetes.io/zone": "us-east-1a"},
            "annotations": {"node.alpha.kubernetes.io/ttl": "0",
                            "volumes.kubernetes.io/controller-managed-attach-detach": "true",
                            "kwok.x-k8s.io/node": "fake"},
            "managedFields": [{"manager": "kubelet", "operation": "Update", "apiVersion": "v1",
                               "time": "2026-01-01T00:00:30Z", "fieldsType": "FieldsV1",
                               "fieldsV1": {"f:status": {"f:conditions": {}, "f:images": {}}},
                               "subresource": "status"}]
        },
        "spec": {"providerID": format!("kwok://{NAME}"),
                 "taints": [{"key": "karpenter.sh/unregistered", "effect": "NoExecute"}]},
        "status": {
            "capacity": {"cpu": "4", "memory": "16Gi", "pods": "110", "ephemeral-storage": "20Gi"},
            "allocatable": {"cpu": "3920m", "memory": "15Gi", "pods": "110", "ephemeral-storage": "18Gi"},
            "conditions": [cond("MemoryPressure", "False", "KubeletHasSufficientMemory"),
                           cond("DiskPressure", "False", "KubeletHasNoDiskPressure"),
                           cond("PIDPressure", "False", "KubeletHasSufficientPID"),
                           cond("Ready", "True", "KubeletReady")],
            "addresses": [{"type": "InternalIP", "address": "10.0.12.7"}, {"type": "Hostname", "address": NAME}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {"machineID": "ec2", "systemUUID": "ec2", "bootID": "b", "kernelVersion": "6.1.0",
                         "osImage": "Bottlerocket OS 1.20.0", "containerRuntimeVersion": "containerd://1.7.20",
                         "kubeletVersion": "v1.36.0", "kubeProxyVersion": "", "operatingSystem": "linux",
                         "architecture": "amd64"},
            "images": [{"names": ["public.ecr.aws/eks-distro/kubernetes/pause@sha256:0f2f", "public.ecr.aws/eks-distro/kubernetes/pause:3.9"],
                        "sizeBytes": 299_000}]
        }
    })
}

fn taint_keys(n: &Value) -> Vec<String> {
    n.pointer("/spec/taints")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|t| t["key"].as_str().map(String::from))
        .collect()
}

fn condition<'a>(obj: &'a Value, type_: &str) -> Option<&'a str> {
    obj.pointer("/status/conditions")?.as_array()?.iter().find(|c| c["type"] == type_)?["status"].as_str()
}

/// What registration leaves on the Node.
fn registered(n: &Value) -> bool {
    let l = &n["metadata"]["labels"];
    !taint_keys(n).iter().any(|k| k == "karpenter.sh/unregistered")
        && l["karpenter.sh/registered"] == "true"
        && l["karpenter.sh/nodepool"] == "default"
        && n.pointer("/metadata/finalizers")
            .and_then(Value::as_array)
            .is_some_and(|f| f.contains(&json!("karpenter.sh/termination")))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registration_completes_though_another_writer_updates_the_node_between_every_two_of_ours() {
    let fake = FakeApi::start().await;
    fake.put(NODEPOOLS, nodepool());
    fake.put(NODECLAIMS, nodeclaim());
    fake.put(NODES, node());
    let mut watches = watch::spawn(fake.client(), &[]);
    watches.wait_synced(Duration::from_secs(10)).await.expect("synced");
    let cache = watches.cache.clone();
    fake.interfere(NODES);

    let catalog = Arc::new(kwok_catalog("us-east-1"));
    let mut now = 1_767_225_660_000; // 2026-01-01T00:01:00Z
    let mut acting = Acting::new(
        Controller::new(catalog.clone(), Mode::Approve, now),
        Writer::new(fake.client(), false),
        Box::new(karpenter_tui::kube::kwok::KwokCloud::new(catalog, Writer::new(fake.client(), false))),
        None,
    );

    // The controller reads the cluster, then the kubelet posts its status and an administrator adds a taint
    // before the controller's first write lands: that write was planned on a stale Node.
    let stale = cache.lock().unwrap().manifests();
    let mut joined = fake.get(NODES, None, NAME).unwrap();
    joined["spec"]["taints"]
        .as_array_mut()
        .unwrap()
        .push(json!({"key": "example.com/dedicated", "value": "infra", "effect": "NoSchedule"}));
    fake.put(NODES, joined);
    acting.tick(&stale, now).await;
    assert!(fake.conflicts() >= 1, "the first guarded write was refused");
    let claim = fake.get(NODECLAIMS, None, NAME).unwrap();
    assert_eq!(condition(&claim, "Registered"), Some("Unknown"), "not registered while the Node isn't: {claim:#}");

    for _ in 0..20 {
        // Each tick reads the cache once it has caught up with the API server, as the live loop does after the
        // watch event that woke it.
        let latest = fake.get(NODES, None, NAME).unwrap()["metadata"]["resourceVersion"].as_str().unwrap().to_string();
        let c = cache.clone();
        eventually(5, "the cache caught up", move || {
            c.lock().unwrap().nodes.get(NAME).and_then(|n| n.metadata.resource_version.clone()) == Some(latest.clone())
        })
        .await;
        now += 1_000;
        let m = cache.lock().unwrap().manifests();
        acting.tick(&m, now).await;
        let claim = fake.get(NODECLAIMS, None, NAME).unwrap();
        if condition(&claim, "Initialized") == Some("True") {
            break;
        }
    }

    let node = fake.get(NODES, None, NAME).unwrap();
    let claim = fake.get(NODECLAIMS, None, NAME).unwrap();
    assert!(registered(&node), "the Node as registration leaves it: {node:#}");
    assert_eq!(node["metadata"]["labels"]["karpenter.sh/initialized"], "true");
    assert!(taint_keys(&node).contains(&"example.com/dedicated".to_string()), "another writer's taint is kept");
    assert_eq!(node["status"]["nodeInfo"]["kubeletVersion"], "v1.36.0", "the kubelet's status is untouched");
    for (t, s) in [("Launched", "True"), ("Registered", "True"), ("Initialized", "True"), ("Ready", "True")] {
        assert_eq!(condition(&claim, t), Some(s), "{t}: {claim:#}");
    }
    assert_eq!(claim["status"]["nodeName"], NAME);

    // Registered=True was written only after the Node showed registration done.
    let node_done = fake.history(NODES, NAME).into_iter().find(|(_, n)| registered(n)).map(|(rv, _)| rv).unwrap();
    let claim_registered = fake
        .history(NODECLAIMS, NAME)
        .into_iter()
        .find(|(_, c)| condition(c, "Registered") == Some("True"))
        .map(|(rv, _)| rv)
        .unwrap();
    assert!(node_done < claim_registered, "Registered=True (rv {claim_registered}) after the Node (rv {node_done})");
    // Every claim version on the way had a Ready condition following its dependents.
    for (_, c) in fake.history(NODECLAIMS, NAME).into_iter().skip(1) {
        let all = ["Launched", "Registered", "Initialized"].iter().all(|t| condition(&c, t) == Some("True"));
        assert_eq!(condition(&c, "Ready") == Some("True"), all, "{c:#}");
    }
}

const PODS: &str = "api/v1/pods";

/// A pod of `web` on the node, as the API server shows a running one.
fn pod_on_node() -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web-5d8f7-abcde", "namespace": "default", "uid": "pod-uid-1",
                     "creationTimestamp": "2026-01-01T00:00:40Z", "labels": {"app": "web"},
                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-5d8f7",
                                          "uid": "rs-uid", "controller": true, "blockOwnerDeletion": true}],
                     "managedFields": [{"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "v1",
                                        "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {}}}]},
        "spec": {"nodeName": NAME, "terminationGracePeriodSeconds": 600,
                 "containers": [{"name": "web", "image": "nginx",
                                 "resources": {"requests": {"cpu": "500m", "memory": "256Mi"}}}]},
        "status": {"phase": "Running", "startTime": "2026-01-01T00:00:45Z",
                   "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:50Z"}]}
    })
}

/// The Node registered and initialized, whose kubelet stopped reporting at 00:02:00 (the node lifecycle controller
/// set Ready to Unknown).
fn unreachable_node() -> Value {
    let mut n = node();
    n["spec"]["taints"] = json!([{"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule"}]);
    n["metadata"]["finalizers"] = json!(["karpenter.sh/termination"]);
    let labels = n["metadata"]["labels"].as_object_mut().unwrap();
    for (k, v) in [
        ("karpenter.sh/nodepool", "default"),
        ("karpenter.sh/registered", "true"),
        ("karpenter.sh/initialized", "true"),
        ("karpenter.sh/capacity-type", "on-demand"),
    ] {
        labels.insert(k.into(), json!(v));
    }
    for c in n["status"]["conditions"].as_array_mut().unwrap() {
        if c["type"] == "Ready" {
            c["status"] = json!("Unknown");
            c["reason"] = json!("NodeStatusUnknown");
            c["message"] = json!("Kubelet stopped posting node status.");
            c["lastTransitionTime"] = json!("2026-01-01T00:02:00Z");
        }
    }
    n
}

async fn repair_setup(gate: bool) -> (fake_apiserver::FakeApi, watch::Watches, Acting, i64) {
    repair_setup_as(gate, KarpenterVersion::V1_14).await
}

async fn repair_setup_as(
    gate: bool,
    version: KarpenterVersion,
) -> (fake_apiserver::FakeApi, watch::Watches, Acting, i64) {
    let fake = FakeApi::start().await;
    fake.put(NODEPOOLS, nodepool());
    let mut claim = nodeclaim();
    for t in ["Registered", "Initialized"] {
        let conditions = claim["status"]["conditions"].as_array_mut().unwrap();
        // One condition per type: the API server refuses a duplicate (`x-kubernetes-list-type: map`).
        conditions.retain(|c| c["type"] != t);
        conditions.push(json!({"type": t, "status": "True", "reason": t, "message": "",
                               "lastTransitionTime": "2026-01-01T00:00:30Z"}));
    }
    claim["status"]["nodeName"] = json!(NAME);
    fake.put(NODECLAIMS, claim);
    fake.put(NODES, unreachable_node());
    fake.put(PODS, pod_on_node());
    let mut watches = watch::spawn(fake.client(), &[]);
    watches.wait_synced(Duration::from_secs(10)).await.expect("synced");
    let catalog = Arc::new(kwok_catalog("us-east-1"));
    let mut settings =
        karpenter_tui::controller::Settings { mode: Mode::Approve, karpenter_version: version, ..Default::default() };
    settings.gates.node_repair = gate;
    let now = 1_767_226_320_000; // 2026-01-01T00:12:00Z: Unknown for 10 minutes, KWOK's toleration.
    let acting = Acting::new(
        Controller::with_settings(catalog.clone(), settings, now),
        Writer::new(fake.client(), false),
        Box::new(karpenter_tui::kube::kwok::KwokCloud::new(catalog, Writer::new(fake.client(), false))),
        None,
    );
    (fake, watches, acting, now)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_node_is_repaired_forcefully_in_approve_mode() {
    let (fake, watches, mut acting, mut now) = repair_setup(true).await;
    let m = watches.cache.lock().unwrap().manifests();
    acting.tick(&m, now).await;
    let claim = fake.get(NODECLAIMS, None, NAME).expect("held by its finalizer");
    assert_eq!(
        claim["metadata"]["annotations"]["karpenter.sh/nodeclaim-termination-timestamp"], "2026-01-01T00:12:00Z",
        "the drain's deadline is now: {claim:#}"
    );
    assert!(claim["metadata"]["deletionTimestamp"].is_string(), "deleted without approval: {claim:#}");
    // The finalizer takes it from there: the Node is deleted and drained; the pod is deleted, not evicted, at
    // once (its 600 s grace is not waited out). Each tick acts on the cache as the watches have filled it so far:
    // give them a moment between ticks, as the live loop's own waits do (on a loaded machine a tight loop of
    // ticks can run ahead of the watch events).
    for _ in 0..40 {
        let c = watches.cache.clone();
        eventually(5, "the cache shows the claim deleting", move || {
            c.lock().unwrap().nodeclaims.get(NAME).is_none_or(|c| c.metadata.deletion_timestamp.is_some())
        })
        .await;
        now += 1_000;
        let m = watches.cache.lock().unwrap().manifests();
        acting.tick(&m, now).await;
        if fake
            .get(PODS, Some("default"), "web-5d8f7-abcde")
            .is_none_or(|p| p["metadata"]["deletionTimestamp"].is_string())
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let node = fake.get(NODES, None, NAME);
    assert!(node.is_none_or(|n| n["metadata"]["deletionTimestamp"].is_string()), "the Node is being deleted");
    let pod = fake.get(PODS, Some("default"), "web-5d8f7-abcde");
    assert!(pod.as_ref().is_none_or(|p| p["metadata"]["deletionTimestamp"].is_string()), "the pod is deleted: {pod:?}");
    let evictions = fake.requests().iter().filter(|r| r.path.ends_with("/eviction")).count();
    assert_eq!(evictions, 0, "a forceful drain deletes, it does not evict");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_1_15_an_unreachable_node_is_a_repair_proposal_that_replaces_it_first_once_approved() {
    let (fake, watches, mut acting, now) = repair_setup_as(true, KarpenterVersion::V1_15).await;
    let m = watches.cache.lock().unwrap().manifests();
    let report = acting.tick(&m, now).await;
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    let claim = fake.get(NODECLAIMS, None, NAME).expect("claim");
    assert!(claim["metadata"]["deletionTimestamp"].is_null(), "held for approval, not deleted: {claim:#}");
    assert!(claim["metadata"]["annotations"]["karpenter.sh/nodeclaim-termination-timestamp"].is_null());
    let claims_before = fake.list(NODECLAIMS).len();
    // The first disruption command this controller numbered.
    let approved = acting.approve(&m, "d-1", now + 1_000).await.unwrap_or_else(|e| panic!("{e}"));
    assert!(approved.contains("repair Unhealthy (Ready)"), "{approved}");
    // Started as drift starts: the node tainted, the claim's DisruptionReason written through /status as a real
    // API server takes it, and a replacement created; the candidate stays until the replacement is up.
    let node = fake.get(NODES, None, NAME).expect("node");
    let taints = node["spec"]["taints"].as_array().cloned().unwrap_or_default();
    assert!(taints.iter().any(|t| t["key"] == "karpenter.sh/disrupted"), "{node:#}");
    let claim = fake.get(NODECLAIMS, None, NAME).expect("claim");
    let reason = claim["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == "DisruptionReason").cloned())
        .unwrap_or_else(|| panic!("DisruptionReason set: {claim:#}"));
    assert_eq!(reason["reason"], "Unhealthy");
    assert!(claim["metadata"]["deletionTimestamp"].is_null());
    assert_eq!(fake.list(NODECLAIMS).len(), claims_before + 1, "a replacement NodeClaim");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_gate_off_an_unreachable_node_is_left_alone() {
    let (fake, watches, mut acting, now) = repair_setup(false).await;
    let m = watches.cache.lock().unwrap().manifests();
    acting.tick(&m, now).await;
    let claim = fake.get(NODECLAIMS, None, NAME).expect("claim");
    assert!(claim["metadata"]["deletionTimestamp"].is_null(), "{claim:#}");
    assert!(claim["metadata"]["annotations"]["karpenter.sh/nodeclaim-termination-timestamp"].is_null());
}

/// A pod kube-scheduler found no room for, as the API server shows it.
fn pending_pod() -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web-5d8f7-pending", "namespace": "default", "uid": "pod-uid-pending",
                     "creationTimestamp": "2026-01-01T00:00:40Z", "labels": {"app": "web"},
                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-5d8f7",
                                          "uid": "rs-uid", "controller": true, "blockOwnerDeletion": true}]},
        "spec": {"terminationGracePeriodSeconds": 30,
                 "containers": [{"name": "web", "image": "nginx",
                                 "resources": {"requests": {"cpu": "500m", "memory": "256Mi"}}}]},
        "status": {"phase": "Pending",
                   "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                   "message": "0/0 nodes are available", "lastTransitionTime": "2026-01-01T00:00:41Z"}]}
    })
}

/// The acting controller with `packing` over a cluster with one pending pod and no node, ticked once a second (each
/// tick on the cache as the watches have filled it by then) until the claim it launches has registered and a few
/// ticks more; nobody binds the pod. Returns the fake API server and the registered claim's Node.
/// A fake API server holding a NodePool and one pending pod, watches synced over it, and an acting controller with
/// `packing` (approve mode, the KWOK cloud); the time to start ticking from.
async fn acting_over_a_pending_pod(
    packing: karpenter_tui::engine::packing::Packing,
) -> (FakeApi, watch::Watches, Acting, i64) {
    let fake = FakeApi::start().await;
    fake.put(NODEPOOLS, nodepool());
    fake.put(PODS, pending_pod());
    let mut watches = watch::spawn(fake.client(), &[]);
    watches.wait_synced(Duration::from_secs(10)).await.expect("synced");
    let catalog = Arc::new(kwok_catalog("us-east-1"));
    let settings = karpenter_tui::controller::Settings { mode: Mode::Approve, packing, ..Default::default() };
    let now = 1_767_225_660_000; // 2026-01-01T00:01:00Z
    let acting = Acting::new(
        Controller::with_settings(catalog.clone(), settings, now),
        Writer::new(fake.client(), false),
        Box::new(karpenter_tui::kube::kwok::KwokCloud::new(catalog, Writer::new(fake.client(), false))),
        None,
    );
    (fake, watches, acting, now)
}

async fn provision_for_a_pending_pod(packing: karpenter_tui::engine::packing::Packing) -> (FakeApi, String) {
    let (fake, watches, mut acting, mut now) = acting_over_a_pending_pod(packing).await;
    let registered = |fake: &FakeApi| {
        fake.list(NODECLAIMS).into_iter().find_map(|c| {
            c["status"]["nodeName"].as_str().filter(|n| fake.get(NODES, None, n).is_some()).map(String::from)
        })
    };
    let mut after = 0;
    for _ in 0..60 {
        now += 1_000;
        let m = watches.cache.lock().unwrap().manifests();
        acting.tick(&m, now).await;
        if registered(&fake).is_some() {
            after += 1;
            if after == 5 {
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let node = registered(&fake).expect("the claim registered");
    (fake, node)
}

/// Patches of pod statuses: (pod path, body).
fn pod_status_patches(fake: &FakeApi) -> Vec<(String, Value)> {
    fake.requests()
        .into_iter()
        .filter(|r| r.method == "PATCH" && r.path.starts_with("/api/v1/namespaces/") && r.path.ends_with("/status"))
        .map(|r| (r.path, r.body))
        .collect()
}

/// Cost packing on a live API server: once the claim made for a pending pod has registered, the pod's
/// `status.nominatedNodeName` names the claim's Node (so kube-scheduler binds it where it was planned), written once
/// and only after the Node existed; upstream packing writes no pod status at all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cost_packing_nominates_the_pending_pod_to_its_claims_node_once_it_registered() {
    use karpenter_tui::engine::packing::Packing;
    let (fake, node) = provision_for_a_pending_pod(Packing::Cost).await;
    let patches = pod_status_patches(&fake);
    assert_eq!(
        patches,
        vec![(
            "/api/v1/namespaces/default/pods/web-5d8f7-pending/status".to_string(),
            json!({"metadata": {"uid": "pod-uid-pending"}, "status": {"nominatedNodeName": node}})
        )],
        "one nomination, to the claim's Node"
    );
    let pod = fake.get(PODS, Some("default"), "web-5d8f7-pending").unwrap();
    assert_eq!(pod["status"]["nominatedNodeName"], json!(node));
    assert_eq!(pod["status"]["conditions"][0]["reason"], "Unschedulable", "the rest of the status is the scheduler's");
    // The Node existed before the nomination was written.
    let node_created = fake.history(NODES, &node).first().map(|(rv, _)| *rv).unwrap();
    let nominated = fake
        .history(PODS, "web-5d8f7-pending")
        .into_iter()
        .find(|(_, p)| p["status"]["nominatedNodeName"].is_string())
        .map(|(rv, _)| rv)
        .unwrap();
    assert!(node_created < nominated, "nominated (rv {nominated}) after the Node existed (rv {node_created})");
    let claim = fake.list(NODECLAIMS).into_iter().next().unwrap();
    let claim_name = claim["metadata"]["name"].as_str().unwrap().to_string();
    let named = fake
        .history(NODECLAIMS, &claim_name)
        .into_iter()
        .find(|(_, c)| c["status"]["nodeName"].is_string())
        .map(|(rv, _)| rv)
        .unwrap();
    assert!(named < nominated, "nominated (rv {nominated}) after the claim named its Node (rv {named})");

    let (fake, _) = provision_for_a_pending_pod(Packing::Upstream).await;
    assert_eq!(pod_status_patches(&fake), vec![], "upstream packing writes no nomination");
}

/// Acting on a live API server, pods never wait for the packing comparison: the tick that creates the claim for a
/// pending pod ends with no comparison worked out; it is worked out on a thread of its own, which pings the loop's
/// wake signal, and the next tick takes it up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_packing_comparison_is_worked_out_after_the_claim_is_created() {
    let (fake, watches, mut acting, mut now) = acting_over_a_pending_pod(Default::default()).await;
    let signal = acting.wake_signal();
    let mut created = false;
    for _ in 0..60 {
        now += 1_000;
        let m = watches.cache.lock().unwrap().manifests();
        acting.tick(&m, now).await;
        if !fake.list(NODECLAIMS).is_empty() {
            created = true;
            break;
        }
    }
    assert!(created, "the controller launched for the pending pod");
    assert!(acting.controller.last_packing().is_none(), "the claim went out before any comparison");
    tokio::time::timeout(Duration::from_secs(30), karpenter_tui::shell::acting::woken(&signal))
        .await
        .expect("the comparison finished and woke the loop");
    let m = watches.cache.lock().unwrap().manifests();
    let report = acting.tick(&m, now + 1_000).await;
    assert!(report.done.iter().any(|d| d.starts_with("packing compared for the 1 pod(s)")), "{:?}", report.done);
    let pass = acting.controller.last_packing().expect("taken up by the tick after the signal");
    assert_eq!(pass.pods, 1);
    assert!(pass.comparison.upstream.nodes == 1 && pass.comparison.bound.is_some(), "{pass:?}");
}

/// One HTTP GET to `addr`, as a scraper sends it: the status line, the headers and the body.
async fn http_get(addr: std::net::SocketAddr, path: &str) -> (String, String, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nAccept: text/plain\r\n\r\n");
    stream.write_all(request.as_bytes()).await.expect("send");
    let mut raw = String::new();
    stream.read_to_string(&mut raw).await.expect("read");
    let (head, body) = raw.split_once("\r\n\r\n").expect("a head and a body");
    let (status, headers) = head.split_once("\r\n").unwrap_or((head, ""));
    (status.to_string(), headers.to_ascii_lowercase(), body.to_string())
}

/// Parses Prometheus' text exposition format strictly: every line a `# HELP`, a `# TYPE` or a sample, every sample
/// of a family whose HELP and TYPE came first, label values quoted and escaped, values numbers. Returns the samples
/// by their series (`name{labels}` as written).
fn parse_exposition(text: &str) -> std::collections::BTreeMap<String, f64> {
    use std::collections::{BTreeMap, BTreeSet};
    let valid_name = |n: &str| {
        !n.is_empty()
            && n.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
            && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
    };
    let mut help = BTreeSet::new();
    let mut types: BTreeMap<String, String> = BTreeMap::new();
    let mut samples = BTreeMap::new();
    assert!(text.ends_with('\n'), "the exposition ends with a newline");
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, doc) = rest.split_once(' ').unwrap_or((rest, ""));
            assert!(valid_name(name) && !doc.is_empty(), "bad HELP line: {line}");
            assert!(help.insert(name.to_string()), "HELP twice for {name}");
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, t) = rest.split_once(' ').expect("TYPE has a type");
            assert!(valid_name(name), "bad TYPE line: {line}");
            assert!(["counter", "gauge", "histogram", "summary", "untyped"].contains(&t), "bad type: {line}");
            assert!(help.contains(name), "TYPE before HELP for {name}");
            assert!(types.insert(name.to_string(), t.to_string()).is_none(), "TYPE twice for {name}");
            continue;
        }
        assert!(!line.starts_with('#') && !line.trim().is_empty(), "not a sample: {line:?}");
        let name_end = line.find(['{', ' ']).expect("a sample has a value");
        let name = &line[..name_end];
        assert!(valid_name(name), "bad metric name in {line}");
        let mut rest = &line[name_end..];
        if let Some(labels) = rest.strip_prefix('{') {
            // name="value" pairs, comma separated, values with \\, \" and \n escaped.
            let mut chars = labels.char_indices().peekable();
            let end = loop {
                let (i, c) = chars.next().expect("labels are closed");
                if c == '}' {
                    break i;
                }
                let key_start = i;
                let mut key_end = i;
                while let Some(&(j, c)) = chars.peek() {
                    if c == '=' {
                        key_end = j;
                        break;
                    }
                    chars.next();
                }
                let key = &labels[key_start..key_end];
                assert!(valid_name(key) && !key.contains(':'), "bad label name {key:?} in {line}");
                assert_eq!(chars.next().map(|(_, c)| c), Some('='), "{line}");
                assert_eq!(chars.next().map(|(_, c)| c), Some('"'), "label value quoted in {line}");
                loop {
                    match chars.next().expect("label value closed").1 {
                        '\\' => assert!(
                            matches!(chars.next().map(|(_, c)| c), Some('\\' | '"' | 'n')),
                            "bad escape in {line}"
                        ),
                        '"' => break,
                        '\n' => panic!("raw newline in {line}"),
                        _ => {}
                    }
                }
                match chars.peek().map(|&(_, c)| c) {
                    Some(',') => {
                        chars.next();
                    }
                    Some('}') => {}
                    other => panic!("{other:?} after a label value in {line}"),
                }
            };
            rest = &labels[end + 1..];
        }
        let series = &line[..line.len() - rest.len()];
        let value = rest.strip_prefix(' ').expect("a space before the value").split(' ').next().unwrap();
        let v: f64 = match value {
            "+Inf" => f64::INFINITY,
            "-Inf" => f64::NEG_INFINITY,
            "NaN" => f64::NAN,
            v => v.parse().unwrap_or_else(|_| panic!("bad value {v:?} in {line}")),
        };
        let family = if types.contains_key(name) {
            name
        } else {
            ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|s| name.strip_suffix(s).filter(|f| types.get(*f).is_some_and(|t| t == "histogram")))
                .unwrap_or_else(|| panic!("a sample of {name} without its HELP and TYPE first"))
        };
        if types[family] == "histogram" && name.ends_with("_bucket") {
            assert!(series.contains("le=\""), "a bucket has its bound: {line}");
        }
        assert!(samples.insert(series.to_string(), v).is_none(), "{series} twice");
    }
    samples
}

/// Waits until the watch cache holds the nodes, NodePools and pods the API server holds, at their versions.
async fn caught_up(fake: &FakeApi, watches: &watch::Watches) {
    let versions = |kind: &str| {
        let mut v: Vec<String> = fake
            .list(kind)
            .iter()
            .filter_map(|o| o["metadata"]["resourceVersion"].as_str().map(String::from))
            .collect();
        v.sort();
        v
    };
    let want = (versions(NODES), versions(NODEPOOLS), versions(PODS));
    let c = watches.cache.clone();
    eventually(5, "the cache caught up", move || {
        let mut c = c.lock().unwrap();
        let sorted = |mut v: Vec<String>| {
            v.sort();
            v
        };
        let nodes =
            sorted(c.nodes.settled().values().iter().filter_map(|o| o.metadata.resource_version.clone()).collect());
        let pools =
            sorted(c.nodepools.settled().values().iter().filter_map(|o| o.metadata.resource_version.clone()).collect());
        let pods =
            sorted(c.pods.settled().values().iter().filter_map(|o| o.metadata.resource_version.clone()).collect());
        (nodes, pools, pods) == want
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_say_what_the_acting_controller_did_and_what_the_cluster_holds() {
    use karpenter_tui::shell::metrics::Metrics;
    let fake = FakeApi::start().await;
    let mut pool = nodepool();
    pool["spec"]["limits"] = json!({"cpu": "100", "memory": "400Gi"});
    fake.put(NODEPOOLS, pool);
    let mut watches = watch::spawn(fake.client(), &[]);
    watches.wait_synced(Duration::from_secs(10)).await.expect("synced");
    // The pod arrives once the controller watches, as a Deployment's would.
    fake.put(PODS, pending_pod());
    let catalog = Arc::new(kwok_catalog("us-east-1"));
    let mut now = 1_767_225_660_000; // 2026-01-01T00:01:00Z
    let metrics = Arc::new(Metrics::new("tester"));
    let mut acting = Acting::new(
        Controller::new(catalog.clone(), Mode::Approve, now),
        Writer::new(fake.client(), false),
        Box::new(karpenter_tui::kube::kwok::KwokCloud::new(catalog, Writer::new(fake.client(), false))),
        None,
    )
    .with_metrics(metrics.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(karpenter_tui::cli::controller::serve_http(listener, watches.cache.clone(), Some(metrics)));

    // Before anything is done: every metric is described, and nothing is counted yet.
    let (status, headers, body) = http_get(addr, "/metrics").await;
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert!(headers.contains("content-type: text/plain; version=0.0.4"), "{headers}");
    let before = parse_exposition(&body);
    assert!(!before.keys().any(|k| k.starts_with("karpenter_nodeclaims_created_total")), "{body}");
    assert_eq!(before.get("karpenter_cluster_state_synced"), Some(&1.0), "{body}");

    // Until the claim for the pending pod has registered.
    let registered = |fake: &FakeApi| {
        fake.list(NODECLAIMS)
            .iter()
            .any(|c| c["status"]["nodeName"].as_str().is_some_and(|n| fake.get(NODES, None, n).is_some()))
    };
    for _ in 0..60 {
        now += 1_000;
        let m = watches.cache.lock().unwrap().manifests();
        acting.tick(&m, now).await;
        if registered(&fake) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(registered(&fake), "the controller launched and registered a claim");
    // The pod starts on the new node: Ready 42 s after it was created.
    let node = fake.list(NODES)[0]["metadata"]["name"].as_str().unwrap().to_string();
    let mut running = pending_pod();
    running["spec"]["nodeName"] = json!(node);
    running["status"] = json!({"phase": "Running", "startTime": "2026-01-01T00:01:10Z",
        "conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-01-01T00:01:05Z"},
                       {"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:01:22Z"}]});
    fake.put(PODS, running);
    // A few more runs (NodePool status, the pod bound), the last on a cache that has caught up with the API
    // server, which the scrape then reads too.
    for _ in 0..5 {
        now += 1_000;
        tokio::time::sleep(Duration::from_millis(50)).await;
        let m = watches.cache.lock().unwrap().manifests();
        acting.tick(&m, now).await;
    }
    caught_up(&fake, &watches).await;
    now += 1_000;
    let m = watches.cache.lock().unwrap().manifests();
    acting.tick(&m, now).await;
    caught_up(&fake, &watches).await;

    let (status, _, body) = http_get(addr, "/metrics").await;
    assert_eq!(status, "HTTP/1.1 200 OK");
    let s = parse_exposition(&body);
    let get = |series: &str| *s.get(series).unwrap_or_else(|| panic!("no {series} in\n{body}"));
    let claims = fake.list(NODECLAIMS).len() as f64;
    assert!(claims >= 1.0);
    assert_eq!(
        get(
            r#"karpenter_nodeclaims_created_total{reason="provisioned",nodepool="default",min_values_relaxed="false"}"#
        ),
        claims,
        "one count per claim the controller created"
    );
    assert_eq!(get("karpenter_cluster_state_node_count"), fake.list(NODES).len() as f64);
    assert_eq!(get("karpenter_cluster_state_synced"), 1.0);
    assert_eq!(get(r#"karpenter_nodepools_limit{nodepool="default",resource_type="cpu"}"#), 100.0);
    assert_eq!(get(r#"karpenter_nodepools_limit{nodepool="default",resource_type="memory"}"#), 400.0 * 1024f64.powi(3));
    // Usage is what the controller wrote into the NodePool's status: the launched node's capacity.
    let usage = fake.get(NODEPOOLS, None, "default").unwrap()["status"]["resources"]["cpu"].clone();
    let usage = karpenter_tui::engine::resources::parse_quantity(usage.as_str().expect("the status has cpu")).unwrap();
    assert!(usage.milli() > 0);
    assert_eq!(
        get(r#"karpenter_nodepools_usage{nodepool="default",resource_type="cpu"}"#),
        usage.milli() as f64 / 1000.0
    );
    let creates = r#"karpenter_cloudprovider_duration_seconds_count{controller="nodeclaim.lifecycle",method="Create",provider="kwok"}"#;
    assert_eq!(get(creates), claims, "one Create call per launch");
    assert!(!s.keys().any(|k| k.starts_with("karpenter_cloudprovider_errors_total")), "no cloud errors");
    assert!(get(r#"karpenter_provisioner_scheduling_duration_seconds_count{controller="provisioner"}"#) >= 1.0);
    assert_eq!(
        get(r#"karpenter_provisioner_scheduling_queue_depth{controller="provisioner"}"#),
        0.0,
        "the pod is bound"
    );
    assert_eq!(get("karpenter_pods_startup_duration_seconds_count"), 1.0);
    assert_eq!(get("karpenter_pods_startup_duration_seconds_sum"), 42.0, "00:00:40 created, 00:01:22 Ready");
    assert_eq!(get(r#"karpenter_pods_startup_duration_seconds_bucket{le="30"}"#), 0.0);
    assert_eq!(get(r#"karpenter_pods_startup_duration_seconds_bucket{le="45"}"#), 1.0);
    assert_eq!(get("karpenter_tui_proposals_awaiting_approval"), 0.0);
    // The packing comparison is worked out off the loop: once taken up, its gauges show the same plan prices.
    if let Some(pass) = acting.controller.last_packing() {
        assert_eq!(get(r#"karpenter_tui_packing_cost_per_hour{plan="upstream"}"#), pass.comparison.upstream.per_hour);
    }

    // The pod goes: the empty node is proposed for disruption, waits for an operator, is approved, and goes.
    let claim = fake.list(NODECLAIMS).remove(0);
    let zone = claim["metadata"]["labels"]["topology.kubernetes.io/zone"].as_str().unwrap().to_string();
    fake.remove(PODS, Some("default"), "web-5d8f7-pending");
    let proposed =
        |a: &Acting| a.controller.gate().awaiting().next().map(|p| (p.id.clone(), p.command.savings_per_hour));
    for _ in 0..120 {
        if proposed(&acting).is_some() {
            break;
        }
        now += 1_000;
        tokio::time::sleep(Duration::from_millis(20)).await;
        let m = watches.cache.lock().unwrap().manifests();
        acting.tick(&m, now).await;
    }
    let (id, savings) = proposed(&acting).expect("an emptiness proposal");
    let s = parse_exposition(&http_get(addr, "/metrics").await.2);
    assert_eq!(s.get("karpenter_tui_proposals_awaiting_approval"), Some(&1.0));
    assert_eq!(s.get("karpenter_tui_proposals_savings_per_hour"), Some(&savings));
    assert!(savings > 0.0);
    assert!(
        !s.keys().any(|k| k.starts_with("karpenter_voluntary_disruption_decisions_total")),
        "proposed, not decided"
    );
    let m = watches.cache.lock().unwrap().manifests();
    acting.approve(&m, &id, now).await.expect("approved");
    let gone = |fake: &FakeApi| fake.list(NODECLAIMS).is_empty();
    for _ in 0..120 {
        if gone(&fake) {
            break;
        }
        now += 1_000;
        tokio::time::sleep(Duration::from_millis(20)).await;
        let m = watches.cache.lock().unwrap().manifests();
        acting.tick(&m, now).await;
    }
    assert!(gone(&fake), "the approved command removed the claim: {:#?}", fake.list(NODECLAIMS));
    let body = http_get(addr, "/metrics").await.2;
    let s = parse_exposition(&body);
    let get = |series: &str| *s.get(series).unwrap_or_else(|| panic!("no {series} in\n{body}"));
    assert_eq!(get("karpenter_tui_proposals_awaiting_approval"), 0.0);
    assert_eq!(get(r#"karpenter_tui_approvals_total{operator="tester"}"#), 1.0);
    assert_eq!(
        get(
            r#"karpenter_voluntary_disruption_decisions_total{decision="delete",reason="empty",consolidation_type="empty"}"#
        ),
        1.0
    );
    // Under 1.15 (the controller's default) with v1.15's two more labels: the pool's policy for a consolidation, and
    // the termination mode of a claim without a grace period; and the pods it had to move, none on an empty node.
    let disrupted = r#"reason="empty",nodepool="default",capacity_type="on-demand",consolidation_policy="when_empty_or_underutilized",termination_mode="graceful""#;
    assert_eq!(get(&format!("karpenter_nodeclaims_disrupted_total{{{disrupted}}}")), 1.0);
    assert_eq!(get(&format!("karpenter_pods_disruption_initiated_total{{{disrupted}}}")), 0.0);
    assert_eq!(
        get(&format!(
            r#"karpenter_nodeclaims_terminated_total{{nodepool="default",capacity_type="on-demand",zone="{zone}"}}"#
        )),
        1.0,
    );

    // The probes still answer beside the metrics.
    assert_eq!(http_get(addr, "/healthz").await.0, "HTTP/1.1 200 OK");
    assert_eq!(http_get(addr, "/readyz").await.0, "HTTP/1.1 200 OK");
    assert_eq!(http_get(addr, "/nothing").await.0, "HTTP/1.1 404 Not Found");
}
