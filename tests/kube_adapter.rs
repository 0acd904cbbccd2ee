//! The kube adapter at the HTTP level: every request `kube::writer`, `access`, `leader`, `upstream` and `watch` make,
//! sent by kube-rs to an in-process fake API server (tests/fake_apiserver) that records them and answers with API
//! server semantics (generated names, resourceVersion conflicts, finalizers, the eviction subresource, 410 Gone).

use crate::fake_apiserver;

use std::collections::BTreeMap;
use std::time::Duration;

use fake_apiserver::{FakeApi, Recorded, eventually, status};
use k8s_openapi::api::core::v1::{Node, Taint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use karpenter_tui::engine::api::ec2nodeclass::{EC2NodeClassStatus, SubnetStatus};
use karpenter_tui::engine::api::{Condition, NodeClaim, NodeClaimStatus, NodePool};
use karpenter_tui::engine::labels::TERMINATION_FINALIZER;
use karpenter_tui::kube::cache::WatchState;
use karpenter_tui::kube::kinds::Kind;
use karpenter_tui::kube::leader::{Elector, LEASE_NAME, Role};
use karpenter_tui::kube::writer::{Eviction, FIELD_MANAGER, WriteError, Writer, reference};
use karpenter_tui::kube::{access, upstream, watch};
use serde_json::{Value, json};

const NODECLAIMS: &str = "apis/karpenter.sh/v1/nodeclaims";
const NODEPOOLS: &str = "apis/karpenter.sh/v1/nodepools";
const NODECLASSES: &str = "apis/karpenter.k8s.aws/v1/ec2nodeclasses";
const NODES: &str = "api/v1/nodes";
const PODS: &str = "api/v1/pods";
const LEASES: &str = "apis/coordination.k8s.io/v1/leases";

fn claim_fixture() -> NodeClaim {
    serde_yaml::from_str(include_str!("fixtures/nodeclaim.yaml")).unwrap()
}

fn pool_fixture() -> NodePool {
    serde_yaml::from_str(include_str!("fixtures/nodepool-minimal.yaml")).unwrap()
}

fn typed<T: serde::de::DeserializeOwned>(v: Value) -> T {
    serde_json::from_value(v).unwrap()
}

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

fn taint(key: &str) -> Taint {
    Taint { key: key.into(), effect: "NoSchedule".into(), value: None, time_added: None }
}

/// The one request the call made (the writer makes exactly one per call).
fn only(fake: &FakeApi) -> Recorded {
    let reqs = fake.requests();
    assert_eq!(reqs.len(), 1, "expected one request, got {reqs:#?}");
    fake.clear_requests();
    reqs.into_iter().next().unwrap()
}

fn pod(ns: &str, name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns},
           "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "pause"}]}})
}

fn node(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"a": "1"}},
           "spec": {"taints": [{"key": "old", "effect": "NoSchedule"}]}})
}

async fn setup() -> (FakeApi, Writer) {
    let fake = FakeApi::start().await;
    let writer = Writer::new(fake.client(), false);
    (fake, writer)
}

#[tokio::test]
async fn create_nodeclaim_posts_a_generate_name_and_the_termination_finalizer() {
    let (fake, w) = setup().await;
    let mut claim = claim_fixture();
    claim.metadata.name = None;
    claim.metadata.generate_name = Some("default-".into());
    claim.metadata.finalizers = Some(vec![TERMINATION_FINALIZER.into()]);
    claim.metadata.owner_references = Some(vec![OwnerReference {
        api_version: "karpenter.sh/v1".into(),
        kind: "NodePool".into(),
        name: "default".into(),
        uid: "uid-pool".into(),
        block_owner_deletion: Some(true),
        ..Default::default()
    }]);
    claim.status = None;

    let created = w.create_nodeclaim(&claim).await.unwrap();
    let name = created.metadata.name.clone().unwrap();
    assert!(name.starts_with("default-") && name.len() > "default-".len(), "{name}");
    let r = only(&fake);
    assert_eq!((r.method.as_str(), r.path.as_str()), ("POST", "/apis/karpenter.sh/v1/nodeclaims"));
    assert_eq!(r.q("fieldManager"), Some(FIELD_MANAGER));
    assert_eq!(r.content_type.as_deref(), Some("application/json"));
    assert_eq!(r.body["apiVersion"], "karpenter.sh/v1");
    assert_eq!(r.body["kind"], "NodeClaim");
    assert_eq!(r.body["metadata"]["generateName"], "default-");
    assert!(r.body["metadata"].get("name").is_none(), "the server names it: {}", r.body["metadata"]);
    assert_eq!(r.body["metadata"]["finalizers"], json!([TERMINATION_FINALIZER]));
    let owner = &r.body["metadata"]["ownerReferences"][0];
    assert_eq!((owner["kind"].as_str(), owner["name"].as_str()), (Some("NodePool"), Some("default")));
    assert_eq!(r.body["spec"]["nodeClassRef"]["name"], "default");
    assert!(fake.get(NODECLAIMS, None, &name).is_some());

    // Two creations give two claims, never the same name.
    let second = w.create_nodeclaim(&claim).await.unwrap();
    assert_ne!(second.metadata.name.unwrap(), name);
}

#[tokio::test]
async fn status_updates_are_merge_patches_of_the_status_subresource() {
    let (fake, w) = setup().await;
    let mut claim = serde_json::to_value(claim_fixture()).unwrap();
    claim["status"] = json!({"conditions": [{"type": "Launched", "status": "Unknown", "reason": "Pending",
                             "lastTransitionTime": "2024-08-20T12:00:00Z"}]});
    fake.put(NODECLAIMS, claim);
    fake.put(
        NODECLASSES,
        json!({"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "default"},
               "spec": {"role": "r", "amiSelectorTerms": [{"alias": "al2023@latest"}],
                        "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
                        "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}]}}),
    );

    let status = NodeClaimStatus {
        provider_id: Some("kwok://default-x7k2p".into()),
        conditions: vec![Condition {
            type_: "Launched".into(),
            status: "True".into(),
            reason: Some("Launched".into()),
            last_transition_time: Some("2024-08-20T12:00:10Z".into()),
            ..Default::default()
        }],
        ..Default::default()
    };
    w.update_nodeclaim_status("default-x7k2p", &status).await.unwrap();
    let r = only(&fake);
    assert_eq!(
        (r.method.as_str(), r.path.as_str()),
        ("PATCH", "/apis/karpenter.sh/v1/nodeclaims/default-x7k2p/status")
    );
    assert_eq!(r.content_type.as_deref(), Some("application/merge-patch+json"));
    assert_eq!(r.body, json!({"status": serde_json::to_value(&status).unwrap()}));
    let stored = fake.get(NODECLAIMS, None, "default-x7k2p").unwrap();
    assert_eq!(stored["status"]["providerID"], "kwok://default-x7k2p");
    assert_eq!(stored["status"]["conditions"][0]["status"], "True", "the conditions list is replaced whole");
    assert_eq!(stored["spec"]["nodeClassRef"]["name"], "default", "the spec is untouched");

    let class_status = EC2NodeClassStatus {
        subnets: vec![SubnetStatus { id: "subnet-1".into(), zone: "us-west-2a".into(), zone_id: None }],
        instance_profile: Some("profile".into()),
        ..Default::default()
    };
    w.update_ec2nodeclass_status("default", &class_status).await.unwrap();
    let r = only(&fake);
    assert_eq!(
        (r.method.as_str(), r.path.as_str()),
        ("PATCH", "/apis/karpenter.k8s.aws/v1/ec2nodeclasses/default/status")
    );
    assert_eq!(r.content_type.as_deref(), Some("application/merge-patch+json"));
    assert_eq!(r.body["status"]["subnets"], json!([{"id": "subnet-1", "zone": "us-west-2a"}]));
    assert_eq!(fake.get(NODECLASSES, None, "default").unwrap()["status"]["instanceProfile"], "profile");

    // A claim that is gone is reported as such.
    let err = w.update_nodeclaim_status("gone", &status).await.unwrap_err();
    assert!(err.is_not_found(), "{err}");
}

#[tokio::test]
async fn sync_node_replaces_taints_guarded_by_the_resource_version() {
    let (fake, w) = setup().await;
    let stored: Node = typed(fake.put(NODES, node("n1")));
    let rv = stored.metadata.resource_version.clone().unwrap();

    w.sync_node(&stored, &labels(&[("b", "2")]), &[taint("new")]).await.unwrap();
    let r = only(&fake);
    assert_eq!((r.method.as_str(), r.path.as_str()), ("PATCH", "/api/v1/nodes/n1"));
    assert_eq!(r.content_type.as_deref(), Some("application/merge-patch+json"));
    assert_eq!(
        r.body,
        json!({"metadata": {"resourceVersion": rv, "labels": {"b": "2"}},
               "spec": {"taints": [{"key": "new", "effect": "NoSchedule"}]}})
    );
    let now = fake.get(NODES, None, "n1").unwrap();
    assert_eq!(now["spec"]["taints"], json!([{"key": "new", "effect": "NoSchedule"}]));
    assert_eq!(now["metadata"]["labels"], json!({"a": "1", "b": "2"}), "labels are merged");

    // The same decision again, made on the old version: someone (we) changed the node since.
    let err = w.sync_node(&stored, &labels(&[]), &[]).await.unwrap_err();
    assert!(err.is_conflict(), "{err}");
    assert_eq!(fake.get(NODES, None, "n1").unwrap()["spec"]["taints"], now["spec"]["taints"], "nothing overwritten");
}

#[tokio::test]
async fn sync_node_full_guards_list_changes_and_merges_labels_unguarded() {
    let (fake, w) = setup().await;
    let rv = fake.put(NODES, node("n1"))["metadata"]["resourceVersion"].as_str().unwrap().to_string();
    let finalizers = vec![TERMINATION_FINALIZER.to_string()];
    let (l, a) = (labels(&[("karpenter.sh/registered", "true")]), labels(&[("note", "x")]));

    let taints = [taint("karpenter.sh/disrupted")];
    w.sync_node_full("n1", Some(&rv), &l, &a, Some(&taints), Some(&finalizers)).await.unwrap();
    let r = only(&fake);
    assert_eq!((r.method.as_str(), r.path.as_str()), ("PATCH", "/api/v1/nodes/n1"));
    assert_eq!(r.content_type.as_deref(), Some("application/merge-patch+json"));
    assert_eq!(
        r.body,
        json!({"metadata": {"resourceVersion": rv, "labels": {"karpenter.sh/registered": "true"},
                            "annotations": {"note": "x"}, "finalizers": [TERMINATION_FINALIZER]},
               "spec": {"taints": [{"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}]}})
    );
    let now = fake.get(NODES, None, "n1").unwrap();
    assert_eq!(now["metadata"]["finalizers"], json!([TERMINATION_FINALIZER]));

    let err = w.sync_node_full("n1", Some(&rv), &l, &a, Some(&[]), Some(&[])).await.unwrap_err();
    assert!(err.is_conflict(), "a stale resourceVersion is a conflict: {err}");
    assert!(matches!(err, WriteError::Api { code: 409, .. }));
    assert_eq!(fake.get(NODES, None, "n1").unwrap()["metadata"]["finalizers"], json!([TERMINATION_FINALIZER]));
    fake.clear_requests();

    // Labels and annotations alone are unguarded: a stale resourceVersion doesn't stop them.
    w.sync_node_full("n1", Some(&rv), &l, &a, None, None).await.unwrap();
    let r = only(&fake);
    assert_eq!(r.body["metadata"]["resourceVersion"], Value::Null);
    assert_eq!(r.body.get("spec"), None, "taints are left alone");
    assert_eq!(r.body["metadata"].get("finalizers"), None, "finalizers are left alone");
}

#[tokio::test]
async fn evict_uses_the_eviction_subresource_and_maps_429_and_404() {
    // Without kube-rs's automatic retry of 429s (see the ignored test below for why that matters).
    let fake = FakeApi::start().await;
    let w = Writer::new(fake.client(), false);
    fake.put(PODS, pod("team", "p1"));

    assert_eq!(w.evict("team", "p1").await.unwrap(), Eviction::Evicted);
    let r = only(&fake);
    assert_eq!((r.method.as_str(), r.path.as_str()), ("POST", "/api/v1/namespaces/team/pods/p1/eviction"));
    assert_eq!(r.content_type.as_deref(), Some("application/json"));
    assert_eq!(r.body["metadata"]["name"], "p1");
    assert!(fake.get(PODS, Some("team"), "p1").is_none(), "evicted");

    fake.put(PODS, pod("team", "p2"));
    let pdb = "Cannot evict pod as it would violate the pod's disruption budget.";
    fake.script(
        "POST",
        "/api/v1/namespaces/team/pods/p2/eviction",
        false,
        429,
        status(429, "TooManyRequests", pdb),
        None,
    );
    assert_eq!(w.evict("team", "p2").await.unwrap(), Eviction::Blocked(pdb.into()));
    assert!(fake.get(PODS, Some("team"), "p2").is_some(), "a PDB keeps it");

    assert_eq!(w.evict("team", "p1").await.unwrap(), Eviction::Gone, "404: already gone");

    fake.script(
        "POST",
        "/api/v1/namespaces/team/pods/p3/eviction",
        false,
        500,
        status(500, "InternalError", "x"),
        None,
    );
    let err = w.evict("team", "p3").await.unwrap_err();
    assert!(matches!(err, WriteError::Api { code: 500, .. }), "{err}");
    assert!(err.to_string().contains("evict pod team/p3"), "{err}");
}

/// Cost packing's nomination: a merge patch of the pod's status subresource carrying the node and, as a guard, the
/// pod's uid; only the status changes; a pod that is gone is no error; any other refusal is, naming the pod.
#[tokio::test]
async fn nominate_pod_patches_the_status_subresource_and_a_gone_pod_is_not_an_error() {
    let (fake, w) = setup().await;
    let mut p = pod("team", "web-0");
    p["spec"]["nodeName"] = Value::Null;
    p["metadata"]["uid"] = json!("u-web-0");
    p["status"] = json!({"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False",
                         "reason": "Unschedulable"}]});
    fake.put(PODS, p);

    w.nominate_pod("team", "web-0", Some("u-web-0"), "ip-10-0-1-7.ec2.internal").await.unwrap();
    let r = only(&fake);
    assert_eq!((r.method.as_str(), r.path.as_str()), ("PATCH", "/api/v1/namespaces/team/pods/web-0/status"));
    assert_eq!(r.content_type.as_deref(), Some("application/merge-patch+json"));
    assert_eq!(
        r.body,
        json!({"metadata": {"uid": "u-web-0"}, "status": {"nominatedNodeName": "ip-10-0-1-7.ec2.internal"}})
    );
    let stored = fake.get(PODS, Some("team"), "web-0").unwrap();
    assert_eq!(stored["status"]["nominatedNodeName"], "ip-10-0-1-7.ec2.internal");
    assert_eq!(stored["status"]["conditions"][0]["reason"], "Unschedulable", "the rest of the status is kept");
    assert!(stored["spec"].get("nodeName").is_none_or(Value::is_null), "the spec is untouched");

    // Without a uid the patch is the status alone.
    w.nominate_pod("team", "web-0", None, "n2").await.unwrap();
    assert_eq!(only(&fake).body, json!({"status": {"nominatedNodeName": "n2"}}));

    // Gone: nothing to nominate, and nothing to retry.
    w.nominate_pod("team", "web-9", Some("u-web-9"), "n2").await.unwrap();
    assert_eq!(only(&fake).path, "/api/v1/namespaces/team/pods/web-9/status");

    fake.script(
        "PATCH",
        "/api/v1/namespaces/team/pods/web-0/status",
        false,
        500,
        status(500, "InternalError", "x"),
        None,
    );
    let err = w.nominate_pod("team", "web-0", Some("u-web-0"), "n3").await.unwrap_err();
    assert!(matches!(err, WriteError::Api { code: 500, .. }), "{err}");
    assert!(err.to_string().contains("pod team/web-0"), "{err}");
}

/// The live backend's client (connect.rs) keeps kube-rs's default retry policy, which retries every 429 up to 15
/// times with exponential backoff (5 ms doubling, jittered: minutes in all). A PodDisruptionBudget refusing an
/// eviction is a 429, so `evict` neither returns `Eviction::Blocked` promptly nor asks only once: the drain holds
/// the acting loop for minutes per blocked pod and hammers the API server meanwhile.
#[tokio::test]
async fn a_pdb_blocked_eviction_is_answered_at_once() {
    let (fake, w) = setup().await;
    fake.put(PODS, pod("team", "p"));
    let pdb = "Cannot evict pod as it would violate the pod's disruption budget.";
    fake.script(
        "POST",
        "/api/v1/namespaces/team/pods/p/eviction",
        false,
        429,
        status(429, "TooManyRequests", pdb),
        None,
    );
    let answer = tokio::time::timeout(Duration::from_secs(2), w.evict("team", "p")).await;
    let evictions = fake.writes().len();
    assert_eq!(answer.ok().map(Result::unwrap), Some(Eviction::Blocked(pdb.into())), "{evictions} requests in 2 s");
    assert_eq!(evictions, 1, "one eviction request per attempt");
}

#[tokio::test]
async fn deletes_send_their_options_and_a_missing_object_counts_as_deleted() {
    let (fake, w) = setup().await;
    fake.put(PODS, pod("team", "p1"));
    fake.put(NODES, node("n1"));
    let mut claim = serde_json::to_value(claim_fixture()).unwrap();
    claim["metadata"]["finalizers"] = json!([TERMINATION_FINALIZER]);
    fake.put(NODECLAIMS, claim);

    w.delete_pod("team", "p1", 30).await.unwrap();
    let r = only(&fake);
    assert_eq!((r.method.as_str(), r.path.as_str()), ("DELETE", "/api/v1/namespaces/team/pods/p1"));
    assert_eq!(r.body["gracePeriodSeconds"], 30);
    assert!(fake.get(PODS, Some("team"), "p1").is_none());

    w.delete_node("n1").await.unwrap();
    let r = only(&fake);
    assert_eq!((r.method.as_str(), r.path.as_str()), ("DELETE", "/api/v1/nodes/n1"));
    assert!(fake.get(NODES, None, "n1").is_none());

    // The termination finalizer holds the claim: it is only marked for deletion.
    w.delete_nodeclaim("default-x7k2p").await.unwrap();
    let r = only(&fake);
    assert_eq!((r.method.as_str(), r.path.as_str()), ("DELETE", "/apis/karpenter.sh/v1/nodeclaims/default-x7k2p"));
    let held = fake.get(NODECLAIMS, None, "default-x7k2p").unwrap();
    assert!(held["metadata"]["deletionTimestamp"].is_string(), "{held}");

    // Already gone: fine, the intent is met.
    w.delete_pod("team", "p1", 0).await.unwrap();
    w.delete_node("n1").await.unwrap();
    w.delete_nodeclaim("nope").await.unwrap();
    assert_eq!(fake.requests().len(), 3);

    fake.script("DELETE", "/api/v1/nodes/n2", false, 403, status(403, "Forbidden", "no"), None);
    let err = w.delete_node("n2").await.unwrap_err();
    assert!(matches!(err, WriteError::Api { code: 403, .. }), "other errors are reported: {err}");
}

#[tokio::test]
async fn remove_nodeclaim_finalizer_is_a_merge_patch_guarded_by_the_resource_version() {
    let (fake, w) = setup().await;
    let mut claim = serde_json::to_value(claim_fixture()).unwrap();
    claim["metadata"]["finalizers"] = json!([TERMINATION_FINALIZER, "example.com/other"]);
    let stored: NodeClaim = typed(fake.put(NODECLAIMS, claim));
    let rv = stored.metadata.resource_version.clone().unwrap();

    w.remove_nodeclaim_finalizer(&stored, TERMINATION_FINALIZER).await.unwrap();
    let r = only(&fake);
    assert_eq!((r.method.as_str(), r.path.as_str()), ("PATCH", "/apis/karpenter.sh/v1/nodeclaims/default-x7k2p"));
    assert_eq!(r.content_type.as_deref(), Some("application/merge-patch+json"));
    assert_eq!(r.body, json!({"metadata": {"resourceVersion": rv, "finalizers": ["example.com/other"]}}));
    let now = fake.get(NODECLAIMS, None, "default-x7k2p").unwrap();
    assert_eq!(now["metadata"]["finalizers"], json!(["example.com/other"]));

    // Decided on an old version: a conflict, and nothing is removed.
    let err = w.remove_nodeclaim_finalizer(&stored, "example.com/other").await.unwrap_err();
    assert!(err.is_conflict(), "{err}");
    assert_eq!(
        fake.get(NODECLAIMS, None, "default-x7k2p").unwrap()["metadata"]["finalizers"],
        json!(["example.com/other"])
    );
}

/// A stale finalizer removal is a conflict (409), which the executor quietly retries next tick. (A JSON-patch `test`
/// would have failed with 422, k8s.io/apiserver handlers/patch.go, and been logged as an error.)
#[tokio::test]
async fn a_stale_finalizer_removal_is_a_conflict() {
    let (fake, w) = setup().await;
    let mut claim = serde_json::to_value(claim_fixture()).unwrap();
    claim["metadata"]["finalizers"] = json!([TERMINATION_FINALIZER]);
    let stale: NodeClaim = typed(fake.put(NODECLAIMS, claim.clone()));
    fake.put(NODECLAIMS, claim);
    let err = w.remove_nodeclaim_finalizer(&stale, TERMINATION_FINALIZER).await.unwrap_err();
    assert!(err.is_conflict(), "{err}");
}

#[tokio::test]
async fn apply_nodepool_server_side_applies_after_a_dry_run() {
    let (fake, w) = setup().await;
    let mut pool = pool_fixture();
    pool.metadata.resource_version = Some("41".into());
    pool.metadata.uid = Some("uid-1".into());
    pool.metadata.labels = Some(labels(&[("team", "a")]));
    pool.status = Some(Default::default());
    let path = "/apis/karpenter.sh/v1/nodepools/minimal";

    let validated = w.apply_nodepool(&pool, true).await.unwrap();
    assert_eq!(validated.metadata.name.as_deref(), Some("minimal"));
    let r = only(&fake);
    assert_eq!((r.method.as_str(), r.path.as_str()), ("PATCH", path));
    assert_eq!(r.content_type.as_deref(), Some("application/apply-patch+yaml"));
    assert_eq!((r.q("fieldManager"), r.q("force"), r.q("dryRun")), (Some(FIELD_MANAGER), Some("true"), Some("All")));
    assert_eq!((r.body["apiVersion"].as_str(), r.body["kind"].as_str()), (Some("karpenter.sh/v1"), Some("NodePool")));
    assert_eq!(r.body["metadata"], json!({"name": "minimal", "labels": {"team": "a"}}), "intent only");
    assert!(r.body.get("status").is_none(), "{}", r.body);
    assert_eq!(r.body["spec"]["template"]["spec"]["requirements"][0]["values"], json!(["on-demand"]));
    assert!(fake.get(NODEPOOLS, None, "minimal").is_none(), "a dry run stores nothing");

    w.apply_nodepool(&pool, false).await.unwrap();
    let r = only(&fake);
    assert_eq!((r.method.as_str(), r.path.as_str()), ("PATCH", path));
    assert_eq!(r.content_type.as_deref(), Some("application/apply-patch+yaml"));
    assert_eq!((r.q("fieldManager"), r.q("force"), r.q("dryRun")), (Some(FIELD_MANAGER), Some("true"), None));
    assert!(fake.get(NODEPOOLS, None, "minimal").is_some());

    // The API server's validation failure comes back with its message.
    let cel = "spec.disruption: Invalid value: budgets must be ...";
    fake.script("PATCH", path, false, 422, status(422, "Invalid", cel), Some(1));
    match w.apply_nodepool(&pool, true).await.unwrap_err() {
        WriteError::Api { code: 422, message, .. } => assert_eq!(message, cel),
        e => panic!("{e}"),
    }
}

#[tokio::test]
async fn events_are_created_in_the_namespace_of_what_they_regard() {
    let (fake, w) = setup().await;
    let meta = ObjectMeta {
        name: Some("p1".into()),
        namespace: Some("team".into()),
        uid: Some("u1".into()),
        ..Default::default()
    };
    w.event(reference("Pod", "v1", &meta), true, "FailedScheduling", "no NodePool fits").await.unwrap();
    let r = only(&fake);
    assert_eq!((r.method.as_str(), r.path.as_str()), ("POST", "/api/v1/namespaces/team/events"));
    assert_eq!(r.content_type.as_deref(), Some("application/json"));
    let b = &r.body;
    assert!(b["metadata"]["name"].as_str().unwrap().starts_with("p1."), "{b}");
    assert_eq!(
        b["involvedObject"],
        json!({"kind": "Pod", "apiVersion": "v1", "name": "p1", "namespace": "team", "uid": "u1"})
    );
    assert_eq!((b["type"].as_str(), b["reason"].as_str()), (Some("Warning"), Some("FailedScheduling")));
    assert_eq!(b["message"], "no NodePool fits");
    assert_eq!(
        (b["source"]["component"].as_str(), b["reportingComponent"].as_str()),
        (Some(FIELD_MANAGER), Some(FIELD_MANAGER))
    );
    assert_eq!(b["count"], 1);

    // A cluster-scoped object's events go to `default`.
    let meta = ObjectMeta { name: Some("n1".into()), ..Default::default() };
    w.event(reference("Node", "v1", &meta), false, "DisruptionTerminating", "x").await.unwrap();
    let r = only(&fake);
    assert_eq!(r.path, "/api/v1/namespaces/default/events");
    assert_eq!(r.body["type"], "Normal");
}

#[tokio::test]
async fn create_node_counts_an_existing_node_as_created() {
    let (fake, w) = setup().await;
    let n: Node = typed(node("kwok-1"));
    w.create_node(&n).await.unwrap();
    let r = only(&fake);
    assert_eq!((r.method.as_str(), r.path.as_str()), ("POST", "/api/v1/nodes"));
    assert_eq!(r.q("fieldManager"), Some(FIELD_MANAGER));
    assert_eq!(r.body["metadata"]["name"], "kwok-1");
    assert!(fake.get(NODES, None, "kwok-1").is_some());
    w.create_node(&n).await.unwrap();
    assert_eq!(fake.requests().len(), 1, "answered 409 and taken as done");
}

#[tokio::test]
async fn patch_nodeclaim_metadata_merges_labels_and_annotations_and_replaces_finalizers() {
    let (fake, w) = setup().await;
    fake.put(NODECLAIMS, serde_json::to_value(claim_fixture()).unwrap());
    let (l, a) =
        (labels(&[("karpenter.sh/registered", "true")]), labels(&[("karpenter.sh/termination-timestamp", "t")]));

    w.patch_nodeclaim_metadata("default-x7k2p", &l, &a, &[], Some(&[TERMINATION_FINALIZER.to_string()])).await.unwrap();
    let r = only(&fake);
    assert_eq!((r.method.as_str(), r.path.as_str()), ("PATCH", "/apis/karpenter.sh/v1/nodeclaims/default-x7k2p"));
    assert_eq!(r.content_type.as_deref(), Some("application/merge-patch+json"));
    assert_eq!(
        r.body,
        json!({"metadata": {"labels": {"karpenter.sh/registered": "true"},
                            "annotations": {"karpenter.sh/termination-timestamp": "t"},
                            "finalizers": [TERMINATION_FINALIZER]}})
    );
    let now = fake.get(NODECLAIMS, None, "default-x7k2p").unwrap();
    assert_eq!(now["metadata"]["labels"]["karpenter.sh/nodepool"], "default", "existing labels stay");

    w.patch_nodeclaim_metadata("default-x7k2p", &l, &a, &[], None).await.unwrap();
    let r = only(&fake);
    assert!(r.body["metadata"].get("finalizers").is_none(), "finalizers untouched: {}", r.body);
}

#[tokio::test]
async fn read_only_refuses_every_write_without_sending_anything() {
    let fake = FakeApi::start().await;
    let w = Writer::new(fake.client(), true);
    assert!(w.readonly());
    let claim = claim_fixture();
    let n: Node = typed(node("n1"));
    let m = BTreeMap::new();
    let results = vec![
        w.create_nodeclaim(&claim).await.map(drop),
        w.update_nodeclaim_status("c", &NodeClaimStatus::default()).await,
        w.update_ec2nodeclass_status("c", &EC2NodeClassStatus::default()).await,
        w.update_nodepool_status("default", &Default::default()).await,
        w.sync_node(&n, &m, &[]).await,
        w.sync_node_full("n1", Some("1"), &m, &m, Some(&[]), Some(&[])).await,
        w.evict("ns", "p").await.map(drop),
        w.delete_pod("ns", "p", 0).await,
        w.delete_node("n1").await,
        w.delete_nodeclaim("c").await,
        w.remove_nodeclaim_finalizer(&claim, TERMINATION_FINALIZER).await,
        w.apply_nodepool(&pool_fixture(), false).await.map(drop),
        w.event(reference("Node", "v1", &n.metadata), false, "R", "m").await,
        w.create_node(&n).await,
        w.patch_nodeclaim_metadata("c", &m, &m, &[], None).await,
        w.nominate_pod("ns", "p", None, "n1").await,
    ];
    for (i, r) in results.into_iter().enumerate() {
        assert!(matches!(r, Err(WriteError::ReadOnly(_))), "write #{i}: {r:?}");
    }
    assert!(fake.requests().is_empty(), "{:#?}", fake.requests());

    // Validating a NodePool on the server is not a write: it is still allowed, as a dry run.
    w.apply_nodepool(&pool_fixture(), true).await.unwrap();
    assert_eq!(only(&fake).q("dryRun"), Some("All"));
    assert!(fake.get(NODEPOOLS, None, "minimal").is_none());
}

#[tokio::test]
async fn access_check_asks_one_review_per_right_and_reports_denials() {
    let fake = FakeApi::start().await;
    let all = access::check(&fake.client(), false).await.unwrap();
    assert!(all.can_read() && all.can_write() && all.summary().is_none());
    let reqs = fake.requests();
    assert_eq!(reqs.len(), access::needs_for(false).len());
    for (r, n) in reqs.iter().zip(access::needs_for(false)) {
        assert_eq!(
            (r.method.as_str(), r.path.as_str()),
            ("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews")
        );
        let ra = &r.body["spec"]["resourceAttributes"];
        assert_eq!((ra["verb"].as_str(), ra["resource"].as_str()), (Some(n.verb), Some(n.resource.as_str())));
        assert_eq!(ra["group"].as_str(), Some(n.group.as_str()));
        assert_eq!(ra["subresource"].as_str(), n.subresource);
    }

    fake.deny("create", "pods", Some("eviction"));
    fake.deny("patch", "nodepools", None);
    let some = access::check(&fake.client(), false).await.unwrap();
    assert!(some.can_read());
    assert!(!some.can_write());
    let summary = some.summary().unwrap();
    assert_eq!(summary, "missing rights: patch nodepools.karpenter.sh, create pods/eviction");
    assert!(some.denied.iter().all(|(_, why)| why == "RBAC: not allowed by the test"));

    fake.deny("watch", "pods", None);
    let blind = access::check(&fake.client(), false).await.unwrap();
    assert!(!blind.can_read());
    assert!(blind.summary().unwrap().contains("watch pods"));

    // Services are asked about only with default topology spread, which alone reads them.
    assert!(!access::needs_for(false).iter().any(|n| n.resource == "services"));
    fake.deny("list", "services", None);
    let services = |a: access::Access| a.denied.iter().any(|(n, _)| n.resource == "services");
    assert!(!services(access::check(&fake.client(), false).await.unwrap()));
    assert!(services(access::check(&fake.client(), true).await.unwrap()));

    // The review API itself failing is an error, not a denial.
    fake.script(
        "POST",
        "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
        false,
        500,
        status(500, "InternalError", "x"),
        None,
    );
    assert!(access::check(&fake.client(), false).await.is_err());
}

#[tokio::test]
async fn the_elector_takes_a_free_lease_follows_a_fresh_one_and_hands_it_over() {
    let fake = FakeApi::start().await;
    let path = format!("/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/{LEASE_NAME}");
    let mut me = Elector::new(fake.client(), "kube-system", "me".into(), false);
    let mut them = Elector::new(fake.client(), "kube-system", "them".into(), false);

    assert_eq!(me.round().await.unwrap(), Role::Leader);
    let reqs = fake.requests();
    assert_eq!((reqs[0].method.as_str(), reqs[0].path.as_str()), ("GET", path.as_str()));
    assert_eq!(
        (reqs[1].method.as_str(), reqs[1].path.as_str()),
        ("POST", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases")
    );
    assert_eq!(reqs[1].body["metadata"]["name"], LEASE_NAME);
    assert_eq!(reqs[1].body["spec"]["holderIdentity"], "me");
    assert_eq!(reqs[1].body["spec"]["leaseDurationSeconds"], 15);
    fake.clear_requests();

    // Renewal: a replace carrying the version read.
    let rv = fake.get(LEASES, Some("kube-system"), LEASE_NAME).unwrap()["metadata"]["resourceVersion"].clone();
    assert_eq!(me.round().await.unwrap(), Role::Leader);
    let put = fake.writes().pop().unwrap();
    assert_eq!((put.method.as_str(), put.path.as_str()), ("PUT", path.as_str()));
    assert_eq!(put.body["metadata"]["resourceVersion"], rv);
    assert_eq!(put.body["spec"]["holderIdentity"], "me");
    fake.clear_requests();

    // A fresh lease of someone else: follow, write nothing.
    assert_eq!(them.round().await.unwrap(), Role::Follower { holder: "me".into() });
    assert!(fake.writes().is_empty(), "{:#?}", fake.writes());

    // Losing a race (the lease changed between read and replace) is following, not an error.
    me.release().await.unwrap();
    fake.script("PUT", &path, false, 409, status(409, "Conflict", "modified"), Some(1));
    assert_eq!(them.round().await.unwrap(), Role::Follower { holder: "another instance".into() });
    fake.clear_requests();

    // Released: expired at once, so the other candidate takes it now.
    let lease = fake.get(LEASES, Some("kube-system"), LEASE_NAME).unwrap();
    assert!(lease["spec"].get("holderIdentity").is_none(), "{lease}");
    assert_eq!(lease["spec"]["leaseDurationSeconds"], 1);
    assert_eq!(them.round().await.unwrap(), Role::Leader);
    let lease = fake.get(LEASES, Some("kube-system"), LEASE_NAME).unwrap();
    assert_eq!(
        (lease["spec"]["holderIdentity"].as_str(), lease["spec"]["leaseTransitions"].as_i64()),
        (Some("them"), Some(1))
    );
    fake.clear_requests();

    // Releasing a lease someone else holds touches nothing.
    me.release().await.unwrap();
    assert!(fake.writes().is_empty());
    assert_eq!(me.round().await.unwrap(), Role::Follower { holder: "them".into() });
}

fn lease(ns: &str, holder: &str, renewed_secs_ago: i64) -> Value {
    let t = chrono::Utc::now() - chrono::Duration::seconds(renewed_secs_ago);
    json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
           "metadata": {"name": upstream::UPSTREAM_LEASE, "namespace": ns},
           "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15,
                    "renewTime": t.to_rfc3339_opts(chrono::SecondsFormat::Micros, true)}})
}

#[tokio::test]
async fn upstream_karpenter_is_detected_by_its_lease_or_its_deployment() {
    let fake = FakeApi::start().await;
    assert_eq!(upstream::detect(&fake.client()).await, None);
    let paths: Vec<String> = fake.requests().iter().map(|r| format!("{} {}", r.method, r.path)).collect();
    assert_eq!(
        paths,
        [
            "GET /apis/coordination.k8s.io/v1/namespaces/kube-system/leases/karpenter-leader-election",
            "GET /apis/coordination.k8s.io/v1/namespaces/karpenter/leases/karpenter-leader-election",
            "GET /apis/apps/v1/deployments",
        ]
    );
    assert_eq!(fake.requests()[2].q("labelSelector"), Some("app.kubernetes.io/name=karpenter"));

    fake.put(LEASES, lease("karpenter", "karpenter-7d9f", 100));
    assert_eq!(upstream::detect(&fake.client()).await, None, "a stale lease is no evidence");
    fake.put(LEASES, lease("karpenter", "karpenter-7d9f", 1));
    let why = upstream::detect(&fake.client()).await.unwrap();
    assert!(why.contains("karpenter/karpenter-leader-election") && why.contains("karpenter-7d9f"), "{why}");
    fake.remove(LEASES, Some("karpenter"), upstream::UPSTREAM_LEASE);

    let deployment = |ready: i64| {
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
               "metadata": {"name": "karpenter", "namespace": "karpenter", "labels": {"app.kubernetes.io/name": "karpenter"}},
               "spec": {"selector": {}, "template": {}}, "status": {"readyReplicas": ready}})
    };
    fake.put("apis/apps/v1/deployments", deployment(0));
    assert_eq!(upstream::detect(&fake.client()).await, None, "scaled to zero");
    fake.put("apis/apps/v1/deployments", deployment(2));
    let why = upstream::detect(&fake.client()).await.unwrap();
    assert!(why.contains("Deployment karpenter/karpenter has 2 ready"), "{why}");

    // Lookups we may not make are no evidence either way.
    let forbidden = status(403, "Forbidden", "no");
    fake.script("GET", "/apis/apps/v1/deployments", false, 403, forbidden, None);
    assert_eq!(upstream::detect(&fake.client()).await, None);
}

/// Upstream Karpenter's Deployment as its Helm chart installs it and an API server returns it (managedFields,
/// defaults, status), running `image`.
fn chart_deployment(image: &str, chart_version: &str, ready: i64) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "karpenter", "namespace": "kube-system", "generation": 3,
            "uid": "0b6f8a51-3c2e-4d7a-9a0e-5f1c2d3e4f50", "creationTimestamp": "2026-10-24T08:12:40Z",
            "labels": {"helm.sh/chart": format!("karpenter-{chart_version}"), "app.kubernetes.io/name": "karpenter",
                "app.kubernetes.io/instance": "karpenter", "app.kubernetes.io/version": chart_version,
                "app.kubernetes.io/managed-by": "Helm"},
            "annotations": {"deployment.kubernetes.io/revision": "3", "meta.helm.sh/release-name": "karpenter",
                "meta.helm.sh/release-namespace": "kube-system"},
            "managedFields": [{"manager": "helm", "operation": "Update", "apiVersion": "apps/v1",
                "time": "2026-10-24T08:12:40Z", "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:replicas": {}}}}]},
        "spec": {"replicas": 2, "revisionHistoryLimit": 10, "progressDeadlineSeconds": 600,
            "selector": {"matchLabels": {"app.kubernetes.io/name": "karpenter", "app.kubernetes.io/instance": "karpenter"}},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": "25%"}},
            "template": {
                "metadata": {"labels": {"app.kubernetes.io/name": "karpenter", "app.kubernetes.io/instance": "karpenter"}},
                "spec": {"serviceAccountName": "karpenter", "priorityClassName": "system-cluster-critical",
                    "dnsPolicy": "ClusterFirst", "restartPolicy": "Always", "schedulerName": "default-scheduler",
                    "securityContext": {"fsGroup": 65532}, "terminationGracePeriodSeconds": 30,
                    "nodeSelector": {"kubernetes.io/os": "linux"},
                    "tolerations": [{"key": "CriticalAddonsOnly", "operator": "Exists"}],
                    "containers": [{"name": "controller", "image": image, "imagePullPolicy": "IfNotPresent",
                        "securityContext": {"runAsUser": 65532, "runAsGroup": 65532, "runAsNonRoot": true,
                            "allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true,
                            "capabilities": {"drop": ["ALL"]}},
                        "env": [{"name": "KUBERNETES_MIN_VERSION", "value": "1.19.0-0"},
                            {"name": "KARPENTER_SERVICE", "value": "karpenter"},
                            {"name": "FEATURE_GATES", "value": "ReservedCapacity=true,SpotToSpotConsolidation=false,NodeRepair=false"},
                            {"name": "BATCH_MAX_DURATION", "value": "10s"}, {"name": "BATCH_IDLE_DURATION", "value": "1s"},
                            {"name": "CLUSTER_NAME", "value": "prod"},
                            {"name": "SYSTEM_NAMESPACE", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}}],
                        "ports": [{"name": "http-metrics", "containerPort": 8080, "protocol": "TCP"},
                            {"name": "http", "containerPort": 8081, "protocol": "TCP"}],
                        "livenessProbe": {"httpGet": {"path": "/healthz", "port": "http", "scheme": "HTTP"},
                            "initialDelaySeconds": 30, "timeoutSeconds": 30, "periodSeconds": 10,
                            "successThreshold": 1, "failureThreshold": 3},
                        "resources": {}, "terminationMessagePath": "/dev/termination-log",
                        "terminationMessagePolicy": "File"}]}}},
        "status": {"observedGeneration": 3, "replicas": 2, "updatedReplicas": 2, "readyReplicas": ready,
            "availableReplicas": ready,
            "conditions": [{"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable",
                "message": "Deployment has minimum availability.", "lastUpdateTime": "2026-10-24T08:13:10Z",
                "lastTransitionTime": "2026-10-24T08:13:10Z"}]}})
}

#[tokio::test]
async fn the_karpenter_version_is_the_one_the_clusters_deployment_runs() {
    use karpenter_tui::cli::live_dashboard::resolve_version;
    use karpenter_tui::engine::version::KarpenterVersion;
    let fake = FakeApi::start().await;
    assert_eq!(upstream::detect_version(&fake.client()).await, None);
    assert_eq!(resolve_version(None, None).0, KarpenterVersion::V1_15, "no upstream Karpenter: the newest");

    let image = "public.ecr.aws/karpenter/controller:1.14.3@sha256:6a1b0c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b";
    fake.put("apis/apps/v1/deployments", chart_deployment(image, "1.14.3", 2));
    let found = upstream::detect_version(&fake.client()).await.expect("detected");
    assert_eq!((found.version, found.release.as_str()), (KarpenterVersion::V1_14, "1.14.3"));
    assert_eq!(found.deployment, "kube-system/karpenter");
    let (v, why) = resolve_version(None, Some(found.clone()));
    assert_eq!(v, KarpenterVersion::V1_14);
    assert!(why.contains("kube-system/karpenter runs Karpenter 1.14.3"), "{why}");
    // Chosen by flag or config, the choice holds, and says what the cluster runs.
    let (v, why) = resolve_version(Some(KarpenterVersion::V1_15), Some(found));
    assert_eq!(v, KarpenterVersion::V1_15);
    assert!(why.contains("as set") && why.contains("1.14.3"), "{why}");

    // Scaled to zero, the Deployment still says what the cluster was set up for.
    let image = "public.ecr.aws/karpenter/controller:1.15.1@sha256:6a1b0c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b";
    fake.put("apis/apps/v1/deployments", chart_deployment(image, "1.15.1", 0));
    let found = upstream::detect_version(&fake.client()).await.expect("detected");
    assert_eq!((found.version, found.release.as_str()), (KarpenterVersion::V1_15, "1.15.1"));

    let forbidden = status(403, "Forbidden", "no");
    fake.script("GET", "/apis/apps/v1/deployments", false, 403, forbidden, None);
    assert_eq!(upstream::detect_version(&fake.client()).await, None, "a list we may not make finds nothing");
}

/// The collection path of each kind the watches read, cluster-wide.
fn collection(kind: Kind) -> String {
    let ar = kind.api_resource();
    let prefix = if ar.group.is_empty() { format!("api/{}", ar.version) } else { format!("apis/{}", ar.api_version) };
    format!("{prefix}/{}", ar.plural)
}

fn lists_of(fake: &FakeApi, coll: &str) -> usize {
    fake.requests().iter().filter(|r| r.path == format!("/{coll}") && !r.is_watch()).count()
}

#[tokio::test]
async fn watches_list_every_kind_then_follow_the_events() {
    let fake = FakeApi::start().await;
    fake.put(PODS, pod("team", "p1"));
    fake.put(NODES, node("n1"));
    fake.put(NODEPOOLS, serde_json::to_value(pool_fixture()).unwrap());
    fake.put(NODECLAIMS, serde_json::to_value(claim_fixture()).unwrap());

    let mut w = watch::spawn(fake.client(), &[]);
    w.wait_synced(Duration::from_secs(5)).await.unwrap();
    // Without default topology spread, the kinds only it reads are not watched, and count as absent.
    let watched = || Kind::ALL.into_iter().filter(|k| !k.for_default_spread());
    for kind in watched() {
        assert_eq!(lists_of(&fake, &collection(kind)), 1, "{kind:?} listed once");
    }
    assert_eq!(lists_of(&fake, "api/v1/services"), 0);
    {
        let mut c = w.cache.lock().unwrap();
        assert!(watched().all(|k| c.state(k) == WatchState::Synced), "{:?}", c.states);
        assert_eq!(c.state(Kind::Service), WatchState::Absent);
        assert_eq!(c.pods.settled().keys(), ["team/p1"]);
        assert!(c.nodes.contains_key("n1"));
        assert!(c.nodepools.contains_key("minimal"));
        assert!(c.nodeclaims.contains_key("default-x7k2p"));
        assert!(c.nodeclasses.is_empty());
    }
    for kind in watched() {
        let coll = collection(kind);
        eventually(5, &format!("a watch on {coll}"), || fake.watching(&coll) == 1).await;
    }
    let watch = fake.requests().into_iter().find(|r| r.path == "/api/v1/pods" && r.is_watch()).unwrap();
    assert!(watch.q("resourceVersion").is_some_and(|rv| !rv.is_empty()), "watches from the list's version");

    // Added, modified, deleted.
    let seen = *w.changed.borrow();
    fake.put(PODS, pod("team", "p2"));
    let mut claim = serde_json::to_value(claim_fixture()).unwrap();
    claim["metadata"]["labels"]["extra"] = json!("yes");
    fake.put(NODECLAIMS, claim);
    fake.remove(NODES, None, "n1");
    let cache = w.cache.clone();
    eventually(5, "events applied", || {
        let c = cache.lock().unwrap();
        c.pods.contains_key("team/p2")
            && c.nodeclaims.get("default-x7k2p").unwrap().metadata.labels.as_ref().unwrap().get("extra").is_some()
            && c.nodes.is_empty()
    })
    .await;
    assert!(*w.changed.borrow() > seen, "changes are announced");
    assert_eq!(lists_of(&fake, PODS), 1, "events need no relist");
}

#[tokio::test]
async fn a_410_gone_makes_the_watch_relist() {
    let fake = FakeApi::start().await;
    fake.put(PODS, pod("team", "p1"));
    fake.put(PODS, pod("team", "p2"));
    let mut w = watch::spawn(fake.client(), &[]);
    w.wait_synced(Duration::from_secs(5)).await.unwrap();
    eventually(5, "pods watched", || fake.watching(PODS) == 1).await;

    // Missed while the history was compacted: only a relist can see it.
    fake.remove_silently(PODS, Some("team"), "p1");
    fake.expire_watches();
    let cache = w.cache.clone();
    eventually(5, "relisted after 410", || {
        let mut c = cache.lock().unwrap();
        c.pods.settled().keys() == ["team/p2"]
    })
    .await;
    assert_eq!(lists_of(&fake, PODS), 2);
    eventually(5, "every kind relists after its own 410", || lists_of(&fake, NODES) == 2).await;
    {
        let c = w.cache.lock().unwrap();
        assert!(c.failing().is_empty(), "a 410 is routine: {:?}", c.failing());
        assert!(c.synced());
    }

    // And it watches again afterwards.
    eventually(5, "pods watched again", || fake.watching(PODS) == 1).await;
    fake.put(PODS, pod("team", "p3"));
    eventually(5, "event after the relist", || cache.lock().unwrap().pods.contains_key("team/p3")).await;
}

#[tokio::test]
async fn an_ended_watch_resumes_from_its_resource_version_without_a_relist() {
    let fake = FakeApi::start().await;
    let mut w = watch::spawn(fake.client(), &[]);
    w.wait_synced(Duration::from_secs(5)).await.unwrap();
    eventually(5, "pods watched", || fake.watching(PODS) == 1).await;
    fake.put(PODS, pod("team", "p1"));
    let cache = w.cache.clone();
    eventually(5, "p1 seen", || cache.lock().unwrap().pods.contains_key("team/p1")).await;
    let seen_rv = cache.lock().unwrap().pods.get("team/p1").unwrap().metadata.resource_version.clone();

    // The stream ends (a watch timeout); a pod created meanwhile is replayed by the next watch.
    fake.end_watches();
    fake.put(PODS, pod("team", "p2"));
    eventually(5, "p2 seen", || cache.lock().unwrap().pods.contains_key("team/p2")).await;
    let watches: Vec<Recorded> =
        fake.requests().into_iter().filter(|r| r.path == "/api/v1/pods" && r.is_watch()).collect();
    assert_eq!(watches.len(), 2, "{watches:#?}");
    assert_eq!(watches[1].q("resourceVersion"), seen_rv.as_deref(), "resumed from the last event seen");
    assert_eq!(lists_of(&fake, PODS), 1, "no relist");
    assert!(cache.lock().unwrap().failing().is_empty());
}

#[tokio::test]
async fn a_missing_crd_counts_as_synced_and_empty_unless_it_is_required() {
    let fake = FakeApi::start().await;
    fake.missing(NODECLASSES);
    let mut w = watch::spawn(fake.client(), &[]);
    w.wait_synced(Duration::from_secs(5)).await.unwrap();
    {
        let c = w.cache.lock().unwrap();
        assert_eq!(c.state(Kind::NodeClass), WatchState::Absent);
        assert!(c.nodeclasses.is_empty() && c.synced() && c.failing().is_empty());
    }

    let fake = FakeApi::start().await;
    fake.missing(NODEPOOLS);
    let mut w = watch::spawn(fake.client(), &[]);
    let missing = w.wait_synced(Duration::from_secs(5)).await.unwrap_err();
    assert_eq!(missing, ["nodepools.karpenter.sh: not served by the API server (CRD not installed?)"]);
}

#[tokio::test]
async fn a_failing_list_is_reported_and_retried() {
    let fake = FakeApi::start().await;
    fake.script("GET", "/api/v1/nodes", false, 403, status(403, "Forbidden", "nodes is forbidden"), Some(1));
    fake.put(NODES, node("n1"));
    let mut w = watch::spawn(fake.client(), &[]);
    let missing = w.wait_synced(Duration::from_secs(5)).await.unwrap_err();
    assert_eq!(missing.len(), 1, "{missing:?}");
    assert!(missing[0].starts_with("nodes: ") && missing[0].contains("forbidden"), "{missing:?}");
    // The watcher backs off and lists again.
    let cache = w.cache.clone();
    eventually(10, "nodes listed on the retry", || cache.lock().unwrap().synced()).await;
    assert!(cache.lock().unwrap().nodes.contains_key("n1"));
    assert_eq!(lists_of(&fake, NODES), 2);
}

/// After a watch fails without a 410 (here: the watch request answered 500 once), kube-runtime's watcher resumes
/// watching from the same resourceVersion without relisting, so no `InitDone` ever resets the kind's state: it
/// stays `Failing` while events flow again, and the controller (cli/controller.rs: `c.failing().is_empty()`) never
/// acts again until a 410 happens to force a relist.
#[tokio::test]
async fn a_watch_that_recovers_is_no_longer_failing() {
    let fake = FakeApi::start().await;
    fake.script("GET", "/api/v1/nodes", true, 500, status(500, "InternalError", "etcd timeout"), Some(1));
    let mut w = watch::spawn(fake.client(), &[]);
    w.wait_synced(Duration::from_secs(5)).await.unwrap();
    eventually(10, "nodes watched after the failure", || fake.watching(NODES) == 1).await;
    fake.put(NODES, node("n1"));
    let cache = w.cache.clone();
    eventually(5, "event applied", || cache.lock().unwrap().nodes.contains_key("n1")).await;
    eventually(5, "no kind failing", || cache.lock().unwrap().failing().is_empty()).await;
}

/// The live backend, observing read-only over the watches `w` of `fake`, running: the role's sender (kept open),
/// the command sender, the events and the task.
fn observing_backend(
    fake: &FakeApi,
    w: &watch::Watches,
) -> (
    tokio::sync::watch::Sender<Role>,
    tokio::sync::mpsc::UnboundedSender<karpenter_tui::protocol::Command>,
    tokio::sync::mpsc::UnboundedReceiver<karpenter_tui::protocol::Event>,
    tokio::task::JoinHandle<()>,
) {
    let (role_tx, driver) = fake.observing_driver(w, Default::default());
    let (commands, crx) = tokio::sync::mpsc::unbounded_channel();
    let (etx, events) = tokio::sync::mpsc::unbounded_channel();
    (role_tx, commands, events, tokio::spawn(driver.run(crx, etx)))
}

/// The next picture the live backend sends, skipping other events, within `secs`.
async fn next_view(
    events: &mut tokio::sync::mpsc::UnboundedReceiver<karpenter_tui::protocol::Event>,
    secs: u64,
) -> std::sync::Arc<karpenter_tui::protocol::view::ClusterView> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    loop {
        match tokio::time::timeout_at(deadline, events.recv()).await {
            Ok(Some(karpenter_tui::protocol::Event::View(v))) => return v,
            Ok(Some(_)) => continue,
            Ok(None) => panic!("the live backend stopped"),
            Err(_) => panic!("no picture within {secs} s"),
        }
    }
}

/// The first picture that satisfies `shows`: pictures come as the initial lists land, so an early one may hold
/// only part of the cluster.
async fn view_showing(
    events: &mut tokio::sync::mpsc::UnboundedReceiver<karpenter_tui::protocol::Event>,
    secs: u64,
    shows: impl Fn(&karpenter_tui::protocol::view::ClusterView) -> bool,
) -> std::sync::Arc<karpenter_tui::protocol::view::ClusterView> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now()).as_secs().max(1);
        let v = next_view(events, left).await;
        if shows(&v) {
            return v;
        }
        assert!(tokio::time::Instant::now() < deadline, "no picture showing what was expected within {secs} s");
    }
}

// Multi-threaded: the backend builds pictures in place on its worker (`block_in_place`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_live_backend_sends_a_picture_then_follows_the_cluster_and_stops_on_shutdown() {
    use karpenter_tui::protocol::{Command, Event};

    let fake = FakeApi::start().await;
    fake.put(NODES, node("n1"));
    fake.put(PODS, pod("team", "p1"));
    let mut w = watch::spawn(fake.client(), &[]);
    w.wait_synced(Duration::from_secs(5)).await.unwrap();
    let (_role_tx, commands, mut events, backend) = observing_backend(&fake, &w);

    let names =
        |v: &karpenter_tui::protocol::view::ClusterView| v.nodes.iter().map(|n| n.name.clone()).collect::<Vec<_>>();
    let first = next_view(&mut events, 5).await;
    assert_eq!(names(&first), ["n1"]);
    assert_eq!(first.source.context, "test");

    // A node joins: a later picture shows it (pictures follow the cache, at most about once a second).
    fake.put(NODES, node("n2"));
    let mut seen = Vec::new();
    for _ in 0..5 {
        let v = next_view(&mut events, 7).await;
        assert!(v.generation > first.generation);
        seen = names(&v);
        if seen.len() == 2 {
            break;
        }
    }
    assert_eq!(seen, ["n1", "n2"]);

    commands.send(Command::Shutdown).unwrap();
    tokio::time::timeout(Duration::from_secs(5), backend).await.expect("stops on Shutdown").unwrap();
    while let Ok(e) = events.try_recv() {
        assert!(!matches!(e, Event::Stopped(Some(_))), "no error on the way out");
    }
}

// The dashboard's start on a cluster whose pods take long to list: what is listed shows at once, with a progress
// line; the pods and the engine's decisions follow.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_live_backend_shows_what_is_listed_as_it_arrives_then_the_engines_decisions() {
    use karpenter_tui::protocol::view::ClusterView;
    use karpenter_tui::protocol::{Command, Event};

    let fake = FakeApi::start().await;
    fake.put(NODES, node("n1"));
    fake.put(NODEPOOLS, serde_json::to_value(pool_fixture()).unwrap());
    fake.put(
        PODS,
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "namespace": "team"},
               "spec": {"containers": [{"name": "c", "image": "nginx", "resources": {"requests": {"cpu": "1"}}}]},
               "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False",
                          "reason": "Unschedulable"}]}}),
    );
    // The pods' list fails twice before it is served, so everything else is listed first.
    let slow = fake_apiserver::status(503, "ServiceUnavailable", "the pods list timed out");
    fake.script("GET", "/api/v1/pods", false, 503, slow, Some(2));
    let mut w = watch::spawn(fake.client(), &[]);
    w.wait_first_list(Duration::from_secs(5)).await.unwrap();
    let (_role_tx, commands, mut events, backend) = observing_backend(&fake, &w);

    let mut views: Vec<std::sync::Arc<ClusterView>> = Vec::new();
    let mut progress = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while views.last().is_none_or(|v| v.progress.is_some()) {
        match tokio::time::timeout_at(deadline, events.recv()).await {
            Ok(Some(Event::View(v))) => views.push(v),
            Ok(Some(Event::Progress(p))) => progress.push(p),
            Ok(Some(_)) => {}
            Ok(None) => panic!("the live backend stopped"),
            Err(_) => panic!("no whole picture within 20 s: {views:#?}"),
        }
    }
    let whole = views.pop().unwrap();
    // While the pods were failing to list: the node and the NodePool on screen, and what is being waited for.
    let early = views.iter().find(|v| !v.nodes.is_empty() && !v.nodepools.is_empty()).expect("nodes and pools first");
    let line = early.progress.as_deref().unwrap();
    assert!(line.starts_with("reading the cluster"), "{line}");
    assert!(
        progress.iter().map(String::as_str).chain([line]).any(|p| p.contains("pods: ") && p.contains("(retrying)")),
        "the progress line says the pods list is being retried: {line} / {progress:?}"
    );
    assert!(early.pending.is_empty(), "no pods before their list is in");
    assert_eq!(early.source.clock, "live (listing)");
    // Then every object, without decisions, while the engine's first pass runs...
    let read = views.last().unwrap();
    assert!(read.progress.as_deref().unwrap().contains("first pass is running"), "{:?}", read.progress);
    assert_eq!(read.pending.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(), ["web"]);
    assert!(read.pending[0].reasons.is_empty(), "no reason before the engine has looked");
    // ...and then the engine's reasons.
    assert_eq!(whole.pending.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(), ["web"]);
    assert!(!whole.pending[0].reasons.is_empty(), "the engine says why the pod waits");
    assert!(whole.generation > read.generation && read.generation > early.generation);
    assert_eq!(whole.source.clock, "live");

    commands.send(Command::Shutdown).unwrap();
    tokio::time::timeout(Duration::from_secs(5), backend).await.expect("stops on Shutdown").unwrap();
}

/// The operator's pause where upstream Karpenter acts: a `nodes: "0"` budget on every NodePool, accepted by the API
/// server's own CRD rules; the budgets it replaced come back exactly on resume, a pool another writer changed
/// meanwhile is refused (409) and left for a second run, and a read-only writer changes nothing.
#[tokio::test]
async fn pausing_through_budgets_keeps_the_originals_and_resuming_restores_them() {
    use karpenter_tui::shell::disruption_pause::{ANNOTATION, apply, status};
    let (fake, w) = setup().await;
    let full: NodePool = serde_yaml::from_str(include_str!("fixtures/nodepool-full.yaml")).unwrap();
    fake.put(NODEPOOLS, serde_json::to_value(&full).unwrap());
    fake.put(NODEPOOLS, serde_json::to_value(pool_fixture()).unwrap());
    let read = || fake.list(NODEPOOLS).into_iter().map(typed::<NodePool>).collect::<Vec<_>>();
    let before = read();
    assert!(before.iter().any(|p| p.spec.disruption.budgets.len() == 3), "the full fixture's budgets are stored");

    let readonly = Writer::new(fake.client(), true);
    let refused = apply(&readonly, &before, true, "2026-11-29T06:00:00Z", "alice").await;
    assert!(refused.is_err() && fake.writes().is_empty(), "{refused:?}");

    let paused = apply(&w, &before, true, "2026-11-29T06:00:00Z", "alice").await.expect("paused");
    assert!(paused.contains("on 2 NodePool(s)"), "{paused}");
    let now = read();
    for p in &now {
        assert_eq!(serde_json::to_value(&p.spec.disruption.budgets).unwrap(), json!([{"nodes": "0"}]), "{}", p.name());
        assert!(p.metadata.annotations.as_ref().is_some_and(|a| a.contains_key(ANNOTATION)), "{}", p.name());
    }
    let shown = status(&now.iter().collect::<Vec<_>>()).expect("the picture sees the pause");
    assert_eq!((shown.by.as_str(), shown.how.as_str()), ("alice", "budgets nodes: 0 on 2 of 2 NodePools"));
    let again = apply(&w, &now, true, "2026-11-29T07:00:00Z", "bob").await.expect("nothing to do");
    assert!(again.contains("2 already paused"), "pausing twice keeps the first save: {again}");

    // Another writer labels one pool after this read: its resume is refused, the other's goes through.
    let stale = read();
    let mut changed = serde_json::to_value(&stale[0]).unwrap();
    changed["metadata"]["labels"] = json!({"team": "b"});
    fake.put(NODEPOOLS, changed);
    let partial = apply(&w, &stale, false, "", "alice").await.expect_err("one pool changed meanwhile");
    assert!(partial.contains("resumed on 1 NodePool(s)") && partial.contains("run it again"), "{partial}");
    let done = apply(&w, &read(), false, "", "alice").await.expect("the second run finishes");
    assert!(done.contains("on 1 NodePool(s)") && done.contains("1 already resumed"), "{done}");
    for (after, was) in read().iter().zip(&before) {
        assert_eq!(after.spec.disruption.budgets, was.spec.disruption.budgets, "{} restored exactly", after.name());
        assert!(after.metadata.annotations.as_ref().is_none_or(|a| !a.contains_key(ANNOTATION)));
    }
    assert!(status(&read().iter().collect::<Vec<_>>()).is_none());
}

/// `:ctx NAME` in the live dashboard: the backend prepares the other context (connection, rights, first lists)
/// and only then drops the first, so the pictures after it are of the other cluster; a context that cannot be
/// reached is refused and the dashboard stays where it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_live_backend_switches_kubeconfig_contexts_in_place() {
    use karpenter_tui::cli::live_dashboard::{LiveOptions, Wait, prepare_with, supervise_backend};
    use karpenter_tui::kube::connect::ConnectOptions;
    use karpenter_tui::protocol::Command;
    let (a, b) = (FakeApi::start().await, FakeApi::start().await);
    a.put("api/v1/nodes", node("node-in-a"));
    b.put("api/v1/nodes", node("node-in-b"));
    // b runs upstream Karpenter v1.14.3: its decisions and API are the ones shown there.
    let image = "public.ecr.aws/karpenter/controller:1.14.3@sha256:6a1b0c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b";
    b.put("apis/apps/v1/deployments", chart_deployment(image, "1.14.3", 2));
    let dir = std::env::temp_dir().join(format!("karpenter-tui-ctx-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = dir.join("config");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- {{name: a, cluster: {{server: 'http://{}'}}}}\n\
             - {{name: b, cluster: {{server: 'http://{}'}}}}\n- {{name: dead, cluster: {{server: 'http://127.0.0.1:9'}}}}\n\
             users: [{{name: me, user: {{}}}}]\ncontexts:\n- {{name: a, context: {{cluster: a, user: me}}}}\n\
             - {{name: b, context: {{cluster: b, user: me}}}}\n- {{name: dead, context: {{cluster: dead, user: me}}}}\n\
             current-context: a\n",
            a.addr, b.addr
        ),
    )
    .unwrap();
    let opts = LiveOptions {
        connect: ConnectOptions { kubeconfig: Some(kubeconfig), context: None, cluster_name: None, in_cluster: false },
        readonly: false,
        theme: None,
        catalog: karpenter_tui::engine::catalog::fake::fake_catalog(),
        sync_timeout: Duration::from_secs(10),
        cloud: None,
        mode: karpenter_tui::engine::disruption::gate::Mode::Approve,
        settings: Default::default(),
        feature_gates: None,
        packing: None,
        karpenter_version: None,
        scheduler_config: None,
        legacy_node_repair: false,
        repairs_without_approval: false,
        takeover: false,
        lease_namespace: "kube-system".into(),
    };
    let p = prepare_with(&opts, |_| false, |_| {}, Wait::FirstList).await.expect("context a prepares");
    let (commands, crx) = tokio::sync::mpsc::unbounded_channel();
    let (etx, mut events) = tokio::sync::mpsc::unbounded_channel();
    let backend = tokio::spawn(supervise_backend(opts, |_| false, p, None, crx, etx));
    let first = view_showing(&mut events, 10, |v| !v.nodes.is_empty()).await;
    assert_eq!(first.source.context, "a");
    assert!(first.nodes.iter().any(|n| n.name == "node-in-a"), "{:?}", first.nodes);
    assert_eq!(first.karpenter_version, karpenter_tui::engine::version::KarpenterVersion::V1_15, "none found: newest");

    // Unreachable: refused with the reason, and the dashboard stays on a.
    commands.send(Command::SwitchContext { request: 1, context: "dead".into() }).unwrap();
    let refused = done(&mut events, 1, 30).await;
    assert!(refused.as_ref().is_err_and(|e| e.contains("context dead") && e.contains("still on a")), "{refused:?}");

    commands.send(Command::SwitchContext { request: 2, context: "b".into() }).unwrap();
    let switched = done(&mut events, 2, 30).await;
    assert!(switched.as_ref().is_ok_and(|m| m.contains("context b") && m.contains("observing")), "{switched:?}");
    let after = view_showing(&mut events, 10, |v| !v.nodes.is_empty()).await;
    assert_eq!(after.source.context, "b");
    assert!(after.nodes.iter().any(|n| n.name == "node-in-b"), "{:?}", after.nodes);
    assert!(!after.nodes.iter().any(|n| n.name == "node-in-a"));
    assert_eq!(after.karpenter_version, karpenter_tui::engine::version::KarpenterVersion::V1_14);
    assert!(
        after.karpenter_version_source.contains("kube-system/karpenter runs Karpenter 1.14.3"),
        "{}",
        after.karpenter_version_source
    );
    // The first context's watches are gone: a change there reaches no picture.
    eventually(5, "a's watches end", || a.watching("api/v1/nodes") == 0).await;

    commands.send(Command::Shutdown).unwrap();
    tokio::time::timeout(Duration::from_secs(10), backend).await.expect("the backend stops").unwrap();
    let _ = std::fs::remove_dir_all(dir);
}

/// The outcome of request `request`, skipping pictures and other events, within `secs`.
async fn done(
    events: &mut tokio::sync::mpsc::UnboundedReceiver<karpenter_tui::protocol::Event>,
    request: u64,
    secs: u64,
) -> Result<String, String> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    loop {
        match tokio::time::timeout_at(deadline, events.recv()).await {
            Ok(Some(karpenter_tui::protocol::Event::Done { request: r, outcome })) if r == request => return outcome,
            Ok(Some(_)) => continue,
            Ok(None) => panic!("the live backend stopped"),
            Err(_) => panic!("no answer to request {request} within {secs} s"),
        }
    }
}
