//! NodeOverlays on the live path, at the HTTP level against the fake API server: listed and watched into the cache
//! as an API server sends them (managedFields, resourceVersions, status conditions), a cluster without the CRD
//! still syncing, a malformed overlay skipped and reported, and the writer's status patch (merged into a fresh read,
//! guarded by its resourceVersion, retried after another writer's 409) and server-side applied edits.

use crate::fake_apiserver;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use fake_apiserver::{FakeApi, Recorded, eventually, status};
use karpenter_tui::engine::api::Condition;
use karpenter_tui::engine::api::nodeoverlay::{NodeOverlay, NodeOverlayStatus};
use karpenter_tui::kube::cache::WatchState;
use karpenter_tui::kube::kinds::Kind;
use karpenter_tui::kube::watch;
use karpenter_tui::kube::writer::{FIELD_MANAGER, OVERLAY_STATUS_ATTEMPTS, WriteError, Writer};
use serde_json::{Value, json};

const NODEOVERLAYS: &str = "apis/karpenter.sh/v1alpha1/nodeoverlays";
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

fn path(name: &str) -> String {
    format!("/{NODEOVERLAYS}/{name}")
}

fn condition(type_: &str, status: &str, reason: &str, at: &str) -> Value {
    json!({"type": type_, "status": status, "reason": reason, "message": "", "lastTransitionTime": at,
           "observedGeneration": 1})
}

/// An overlay as an API server returns it after `kubectl apply` and a controller's status write.
fn overlay(name: &str, weight: i64) -> Value {
    json!({
        "apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay",
        "metadata": {
            "name": name, "uid": format!("uid-{name}"), "generation": 1,
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "annotations": {LAST_APPLIED: format!("{{\"apiVersion\":\"karpenter.sh/v1alpha1\",\"kind\":\"NodeOverlay\",\"metadata\":{{\"name\":\"{name}\"}}}}")},
            "managedFields": [
                {"manager": "kubectl-client-side-apply", "operation": "Update", "apiVersion": "karpenter.sh/v1alpha1",
                 "time": "2026-01-01T00:00:00Z", "fieldsType": "FieldsV1",
                 "fieldsV1": {"f:spec": {"f:priceAdjustment": {}, "f:requirements": {}, "f:weight": {}}}},
                {"manager": "karpenter", "operation": "Update", "apiVersion": "karpenter.sh/v1alpha1",
                 "time": "2026-01-01T00:00:05Z", "fieldsType": "FieldsV1",
                 "fieldsV1": {"f:status": {"f:conditions": {}}}, "subresource": "status"}
            ]
        },
        "spec": {
            "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}],
            "priceAdjustment": "-10%",
            "capacity": {"smarter-devices/fuse": "1"},
            "weight": weight
        },
        "status": {"conditions": [
            condition("ValidationSucceeded", "True", "ValidationSucceeded", "2026-01-01T00:00:05Z"),
            condition("Ready", "True", "Ready", "2026-01-01T00:00:05Z")
        ]}
    })
}

fn lists_of(fake: &FakeApi) -> usize {
    fake.requests().iter().filter(|r| r.path == format!("/{NODEOVERLAYS}") && !r.is_watch()).count()
}

/// Log lines written while the guard lives (the tests run on one thread, so the watch tasks log here too).
#[derive(Clone, Default)]
struct Logs(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Logs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Logs {
    fn capture(&self) -> tracing::subscriber::DefaultGuard {
        let w = self.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_ansi(false)
            .with_max_level(tracing::Level::INFO)
            .with_writer(move || w.clone())
            .finish();
        tracing::subscriber::set_default(subscriber)
    }

    fn lines(&self, containing: &[&str]) -> Vec<String> {
        let text = String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned();
        text.lines().filter(|l| containing.iter().all(|c| l.contains(c))).map(String::from).collect()
    }
}

#[tokio::test]
async fn overlays_are_listed_and_watched_as_the_api_server_sends_them() {
    let fake = FakeApi::start().await;
    let stored = fake.put(NODEOVERLAYS, overlay("spot-discount", 10));
    let mut w = watch::spawn(fake.client(), &[]);
    w.wait_synced(Duration::from_secs(5)).await.unwrap();
    {
        let mut c = w.cache.lock().unwrap();
        assert_eq!(c.state(Kind::NodeOverlay), WatchState::Synced);
        assert_eq!(c.problems().count(), 0, "{:?}", c.problems().collect::<Vec<_>>());
        let o = &c.nodeoverlays.get("spot-discount").unwrap();
        assert_eq!(o.metadata.managed_fields, None, "not kept");
        assert!(o.metadata.annotations.as_ref().is_none_or(|a| !a.contains_key(LAST_APPLIED)), "not kept");
        assert_eq!(o.metadata.resource_version.as_deref(), stored["metadata"]["resourceVersion"].as_str());
        assert_eq!(o.metadata.uid.as_deref(), Some("uid-spot-discount"));
        assert_eq!((o.weight(), o.price_string()), (10, Some("-10%")));
        assert_eq!(o.spec.capacity.as_ref().unwrap()["smarter-devices/fuse"].0, "1");
        let ready = o.condition("Ready").unwrap();
        assert_eq!((ready.status.as_str(), ready.observed_generation), ("True", Some(1)));
        let m = c.manifests();
        assert_eq!(m.nodeoverlays.iter().map(NodeOverlay::name).collect::<Vec<_>>(), ["spot-discount"]);
    }
    eventually(5, "overlays watched", || fake.watching(NODEOVERLAYS) == 1).await;
    let watch = fake.requests().into_iter().find(|r| r.path == format!("/{NODEOVERLAYS}") && r.is_watch()).unwrap();
    assert!(watch.q("resourceVersion").is_some_and(|rv| !rv.is_empty()), "watches from the list's version");

    // Added, modified (an operator raises the weight), deleted: followed without a relist.
    let seen = *w.changed.borrow();
    fake.put(NODEOVERLAYS, overlay("gpu-premium", 5));
    let mut heavier = overlay("spot-discount", 20);
    heavier["metadata"]["generation"] = json!(2);
    fake.put(NODEOVERLAYS, heavier);
    let cache = w.cache.clone();
    eventually(5, "added and modified", || {
        let c = cache.lock().unwrap();
        c.nodeoverlays.contains_key("gpu-premium") && c.nodeoverlays.get("spot-discount").unwrap().weight() == 20
    })
    .await;
    fake.remove(NODEOVERLAYS, None, "gpu-premium");
    eventually(5, "deleted", || !cache.lock().unwrap().nodeoverlays.contains_key("gpu-premium")).await;
    assert!(*w.changed.borrow() > seen, "changes are announced");
    assert_eq!(lists_of(&fake), 1, "events need no relist");
    let m = cache.lock().unwrap().manifests();
    assert_eq!(m.nodeoverlays.len(), 1);
    assert_eq!(m.nodeoverlays[0].weight(), 20);
}

#[tokio::test]
async fn without_the_crd_the_cache_syncs_says_so_once_and_sees_it_once_installed() {
    let logs = Logs::default();
    let _guard = logs.capture();
    let fake = FakeApi::start().await;
    fake.missing(NODEOVERLAYS);
    let mut w = watch::spawn(fake.client(), &[]);
    w.wait_synced(Duration::from_secs(5)).await.unwrap();
    let cache = w.cache.clone();
    {
        let mut c = cache.lock().unwrap();
        assert_eq!(c.state(Kind::NodeOverlay), WatchState::Absent);
        assert!(c.synced() && c.failing().is_empty() && c.not_synced().is_empty(), "{:?}", c.not_synced());
        assert!(c.manifests().nodeoverlays.is_empty());
    }
    // The list is retried with backoff (0.5 s, 1 s, ...) in case the CRD shows up; the absence is said once.
    eventually(10, "listed again twice", || lists_of(&fake) >= 3).await;
    let said = logs.lines(&["nodeoverlays.karpenter.sh", "not served by the API server"]);
    assert_eq!(said.len(), 1, "{said:#?}");
    assert!(said[0].contains("INFO"), "{}", said[0]);
    assert!(logs.lines(&["nodeoverlays.karpenter.sh", "WARN"]).is_empty(), "no warnings: {:#?}", logs.lines(&[]));
    assert_eq!(cache.lock().unwrap().state(Kind::NodeOverlay), WatchState::Absent);

    // Upstream Karpenter upgraded to a version with the CRD: the next retry lists it.
    fake.install(NODEOVERLAYS);
    fake.put(NODEOVERLAYS, overlay("spot-discount", 10));
    eventually(10, "listed once served", || cache.lock().unwrap().nodeoverlays.contains_key("spot-discount")).await;
    let mut c = cache.lock().unwrap();
    assert_eq!(c.state(Kind::NodeOverlay), WatchState::Synced);
    assert_eq!(c.manifests().nodeoverlays.len(), 1);
}

#[tokio::test]
async fn a_malformed_overlay_is_skipped_and_reported() {
    let logs = Logs::default();
    let _guard = logs.capture();
    let fake = FakeApi::start().await;
    fake.put(NODEOVERLAYS, overlay("good", 10));
    let mut bad = overlay("bad", 10);
    bad["spec"]["weight"] = json!("heavy");
    // Stored under a looser CRD: today's refuses it, but a reader still meets such objects.
    fake.put_unchecked(NODEOVERLAYS, bad);
    let mut w = watch::spawn(fake.client(), &[]);
    w.wait_synced(Duration::from_secs(5)).await.expect("one bad overlay doesn't hold up the sync");
    let cache = w.cache.clone();
    {
        let mut c = cache.lock().unwrap();
        let problems: Vec<_> = c.problems().cloned().collect();
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!((problems[0].kind, problems[0].key.as_str()), (Kind::NodeOverlay, "bad"));
        assert!(problems[0].message.contains("spec.weight"), "{}", problems[0]);
        assert!(problems[0].to_string().starts_with("nodeoverlays.karpenter.sh bad skipped"), "{}", problems[0]);
        assert_eq!(c.manifests().nodeoverlays.iter().map(NodeOverlay::name).collect::<Vec<_>>(), ["good"]);
    }
    let said = logs.lines(&["WARN", "nodeoverlays.karpenter.sh", "object skipped"]);
    assert_eq!(said.len(), 1, "{said:#?}");
    assert!(said[0].contains("bad") && said[0].contains("spec.weight"), "{}", said[0]);

    // A bad update of a good overlay keeps its last good version; a fix is taken and clears the report.
    eventually(5, "overlays watched", || fake.watching(NODEOVERLAYS) == 1).await;
    let mut broken = overlay("good", 30);
    broken["spec"]["capacity"] = json!({"smarter-devices/fuse": {"not": "a quantity"}});
    fake.put_unchecked(NODEOVERLAYS, broken);
    eventually(5, "bad update reported", || cache.lock().unwrap().problems().any(|p| p.key == "good")).await;
    assert_eq!(cache.lock().unwrap().nodeoverlays.get("good").unwrap().weight(), 10);
    fake.put(NODEOVERLAYS, overlay("bad", 7));
    fake.put(NODEOVERLAYS, overlay("good", 30));
    eventually(5, "fixed", || {
        let mut c = cache.lock().unwrap();
        c.problems().count() == 0 && c.manifests().nodeoverlays.len() == 2
    })
    .await;
}

fn ours(type_: &str, status: &str, reason: &str, at: &str) -> Condition {
    Condition {
        type_: type_.into(),
        status: status.into(),
        reason: Some(reason.into()),
        message: Some(String::new()),
        last_transition_time: Some(at.into()),
        observed_generation: Some(1),
    }
}

fn conditions_of(obj: &Value) -> Vec<(String, String, String)> {
    obj["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let f = |k: &str| c[k].as_str().unwrap_or_default().to_string();
            (f("type"), f("status"), f("lastTransitionTime"))
        })
        .collect()
}

fn of_method<'a>(reqs: &'a [Recorded], method: &str) -> Vec<&'a Recorded> {
    reqs.iter().filter(|r| r.method == method).collect()
}

#[tokio::test]
async fn status_patch_merges_conditions_into_a_fresh_read_guarded_by_its_resource_version() {
    let fake = FakeApi::start().await;
    let w = Writer::new(fake.client(), false);
    let stored = fake.put(NODEOVERLAYS, overlay("spot-discount", 10));
    let rv = stored["metadata"]["resourceVersion"].clone();

    // Validation still succeeds (same status: its transition time stays); Ready turns False.
    let status = NodeOverlayStatus {
        conditions: vec![
            ours("ValidationSucceeded", "True", "ValidationSucceeded", "2026-01-01T01:00:00Z"),
            ours("Ready", "False", "Conflict", "2026-01-01T01:00:00Z"),
        ],
    };
    w.patch_nodeoverlay_status("spot-discount", &status).await.unwrap();
    let reqs = fake.requests();
    let shape: Vec<(&str, &str)> = reqs.iter().map(|r| (r.method.as_str(), r.path.as_str())).collect();
    let status_path = format!("{}/status", path("spot-discount"));
    assert_eq!(shape, [("GET", path("spot-discount").as_str()), ("PATCH", status_path.as_str())]);
    let patch = &reqs[1];
    assert_eq!(patch.content_type.as_deref(), Some("application/merge-patch+json"));
    assert_eq!(patch.body["metadata"], json!({"resourceVersion": rv}), "guarded by the version read");
    assert_eq!(patch.body.as_object().unwrap().len(), 2, "metadata and status only: {}", patch.body);
    let expected = [
        ("ValidationSucceeded".to_string(), "True".to_string(), "2026-01-01T00:00:05Z".to_string()),
        ("Ready".to_string(), "False".to_string(), "2026-01-01T01:00:00Z".to_string()),
    ];
    assert_eq!(conditions_of(&patch.body), expected);
    let now = fake.get(NODEOVERLAYS, None, "spot-discount").unwrap();
    assert_eq!(conditions_of(&now), expected);
    assert_eq!(now["status"]["conditions"][1]["reason"], "Conflict");
    assert_eq!(now["spec"], stored["spec"], "the spec is untouched");
    assert_eq!(now["metadata"]["managedFields"], stored["metadata"]["managedFields"]);

    // Already so: read, nothing written.
    fake.clear_requests();
    w.patch_nodeoverlay_status("spot-discount", &status).await.unwrap();
    assert_eq!(of_method(&fake.requests(), "PATCH").len(), 0, "{:#?}", fake.requests());
    assert_eq!(of_method(&fake.requests(), "GET").len(), 1);
}

#[tokio::test]
async fn a_status_patch_survives_a_conflict_with_another_writer() {
    let fake = FakeApi::start().await;
    let w = Writer::new(fake.client(), false);
    let stale = fake.put(NODEOVERLAYS, overlay("spot-discount", 10));
    // Another writer adds a condition of its own after our read: our read is answered with the older copy.
    let mut theirs = stale.clone();
    theirs["status"]["conditions"].as_array_mut().unwrap().push(condition(
        "PolicyChecked",
        "True",
        "Allowed",
        "2026-01-01T00:30:00Z",
    ));
    let theirs = fake.put(NODEOVERLAYS, theirs);
    fake.script("GET", &path("spot-discount"), false, 200, stale.clone(), Some(1));

    let status = NodeOverlayStatus { conditions: vec![ours("Ready", "False", "Conflict", "2026-01-01T01:00:00Z")] };
    w.patch_nodeoverlay_status("spot-discount", &status).await.unwrap();
    assert_eq!(fake.conflicts(), 1, "the first patch carried the stale version");
    let reqs = fake.requests();
    let methods: Vec<&str> = reqs.iter().map(|r| r.method.as_str()).collect();
    assert_eq!(methods, ["GET", "PATCH", "GET", "PATCH"], "read again before the retry");
    assert_eq!(reqs[1].body["metadata"]["resourceVersion"], stale["metadata"]["resourceVersion"]);
    assert_eq!(reqs[3].body["metadata"]["resourceVersion"], theirs["metadata"]["resourceVersion"]);
    let now = fake.get(NODEOVERLAYS, None, "spot-discount").unwrap();
    let types: Vec<(String, String)> = conditions_of(&now).into_iter().map(|(t, s, _)| (t, s)).collect();
    let pairs = |v: &[(&str, &str)]| v.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect::<Vec<_>>();
    assert_eq!(
        types,
        pairs(&[("ValidationSucceeded", "True"), ("Ready", "False"), ("PolicyChecked", "True")]),
        "the other writer's condition is kept"
    );
}

#[tokio::test]
async fn a_status_patch_gives_up_as_a_conflict_and_a_deleted_overlay_is_not_found() {
    let fake = FakeApi::start().await;
    let w = Writer::new(fake.client(), false);
    fake.put(NODEOVERLAYS, overlay("spot-discount", 10));
    let status_path = format!("{}/status", path("spot-discount"));
    fake.script("PATCH", &status_path, false, 409, status(409, "Conflict", "the object has been modified"), None);
    let wanted = NodeOverlayStatus { conditions: vec![ours("Ready", "False", "Conflict", "2026-01-01T01:00:00Z")] };
    let err = w.patch_nodeoverlay_status("spot-discount", &wanted).await.unwrap_err();
    assert!(err.is_conflict(), "{err}");
    assert!(err.to_string().contains("update the status of NodeOverlay spot-discount"), "{err}");
    let reqs = fake.requests();
    assert_eq!(of_method(&reqs, "PATCH").len(), OVERLAY_STATUS_ATTEMPTS);
    assert_eq!(of_method(&reqs, "GET").len(), OVERLAY_STATUS_ATTEMPTS, "each attempt from a fresh read");

    fake.clear_requests();
    let err = w.patch_nodeoverlay_status("gone", &wanted).await.unwrap_err();
    assert!(err.is_not_found(), "{err}");
    assert_eq!(of_method(&fake.requests(), "PATCH").len(), 0);
}

#[tokio::test]
async fn apply_nodeoverlay_server_side_applies_the_intent_only() {
    let fake = FakeApi::start().await;
    let w = Writer::new(fake.client(), false);
    let mut edit: NodeOverlay = serde_json::from_value(overlay("spot-discount", 10)).unwrap();
    edit.metadata.resource_version = Some("41".into());
    edit.metadata.labels = Some([("team".to_string(), "a".to_string())].into());
    edit.metadata.annotations = None;
    edit.spec.weight = Some(50);
    let p = path("spot-discount");

    let validated = w.apply_nodeoverlay(&edit, true).await.unwrap();
    assert_eq!(validated.name(), "spot-discount");
    let reqs = fake.requests();
    assert_eq!(reqs.len(), 1, "{reqs:#?}");
    let r = &reqs[0];
    assert_eq!((r.method.as_str(), r.path.as_str()), ("PATCH", p.as_str()));
    assert_eq!(r.content_type.as_deref(), Some("application/apply-patch+yaml"));
    assert_eq!((r.q("fieldManager"), r.q("force"), r.q("dryRun")), (Some(FIELD_MANAGER), Some("true"), Some("All")));
    assert_eq!(
        (r.body["apiVersion"].as_str(), r.body["kind"].as_str()),
        (Some("karpenter.sh/v1alpha1"), Some("NodeOverlay"))
    );
    assert_eq!(r.body["metadata"], json!({"name": "spot-discount", "labels": {"team": "a"}}), "intent only");
    assert!(r.body.get("status").is_none(), "{}", r.body);
    assert_eq!(r.body["spec"]["weight"], 50);
    assert_eq!(r.body["spec"]["priceAdjustment"], "-10%");
    assert!(fake.get(NODEOVERLAYS, None, "spot-discount").is_none(), "a dry run stores nothing");

    fake.clear_requests();
    w.apply_nodeoverlay(&edit, false).await.unwrap();
    assert_eq!(fake.requests()[0].q("dryRun"), None);
    assert_eq!(fake.get(NODEOVERLAYS, None, "spot-discount").unwrap()["spec"]["weight"], 50);

    // The API server's CEL verdict comes back with its message.
    let cel = "spec: Invalid value: \"object\": cannot set both 'price' and 'priceAdjustment'";
    fake.script("PATCH", &p, false, 422, status(422, "Invalid", cel), Some(1));
    match w.apply_nodeoverlay(&edit, true).await.unwrap_err() {
        WriteError::Api { code: 422, message, .. } => assert_eq!(message, cel),
        e => panic!("{e}"),
    }
}

#[tokio::test]
async fn read_only_refuses_overlay_writes_without_sending_anything() {
    let fake = FakeApi::start().await;
    let w = Writer::new(fake.client(), true);
    let edit: NodeOverlay = serde_json::from_value(overlay("spot-discount", 10)).unwrap();
    let status = NodeOverlayStatus { conditions: vec![ours("Ready", "True", "Ready", "2026-01-01T01:00:00Z")] };
    let err = w.patch_nodeoverlay_status("spot-discount", &status).await.unwrap_err();
    assert!(matches!(err, WriteError::ReadOnly(_)), "{err}");
    let err = w.apply_nodeoverlay(&edit, false).await.unwrap_err();
    assert!(matches!(err, WriteError::ReadOnly(_)), "{err}");
    assert!(fake.requests().is_empty(), "{:#?}", fake.requests());
    // Validating on the server is not a write.
    w.apply_nodeoverlay(&edit, true).await.unwrap();
    assert_eq!(fake.requests()[0].q("dryRun"), Some("All"));
}

/// The acting controller on the live path with the `NodeOverlay` gate: the overlay is read from the watch cache,
/// its status written, the claim it makes cheapest chosen and annotated, and the launch priced by it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_acting_controller_applies_watched_overlays_and_writes_their_status() {
    use karpenter_tui::controller::{Controller, Settings};
    use karpenter_tui::engine::catalog::kwok::kwok_catalog;
    use karpenter_tui::engine::disruption::gate::Mode;
    use karpenter_tui::shell::acting::Acting;

    let fake = FakeApi::start().await;
    fake.put(
        "apis/karpenter.sh/v1/nodepools",
        json!({"apiVersion": "karpenter.sh/v1", "kind": "NodePool",
               "metadata": {"name": "default", "uid": "p-1", "generation": 1, "creationTimestamp": "2026-01-01T00:00:00Z"},
               "spec": {"disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "30s",
                                       "budgets": [{"nodes": "10%"}]},
                        "template": {"spec": {
                            "nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"},
                            "requirements": [{"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
                                             {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
                                             {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}]}}}}),
    );
    // A big type made nearly free: without the overlay a 1-CPU pod would get one of the smallest types.
    let mut cheap = overlay("big-is-cheap", 10);
    cheap["spec"] = json!({"requirements": [{"key": "node.kubernetes.io/instance-type", "operator": "In",
                                             "values": ["c-16x-amd64-linux"]}],
                           "price": "0.001"});
    cheap.as_object_mut().unwrap().remove("status");
    fake.put(NODEOVERLAYS, cheap);
    let mut rival = overlay("a-rival", 10);
    rival["spec"] = json!({"requirements": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}],
                           "price": "0.002"});
    rival.as_object_mut().unwrap().remove("status");
    fake.put(NODEOVERLAYS, rival);
    fake.put(
        "api/v1/pods",
        json!({"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": "web-1", "namespace": "default", "uid": "pod-1", "creationTimestamp": "2026-01-01T00:00:00Z"},
               "spec": {"containers": [{"name": "c", "image": "nginx", "resources": {"requests": {"cpu": "1"}}}]},
               "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}}),
    );
    let mut w = watch::spawn(fake.client(), &[]);
    w.wait_synced(Duration::from_secs(10)).await.expect("synced");
    let catalog = Arc::new(kwok_catalog("us-east-1"));
    let mut settings = Settings { mode: Mode::Approve, ..Default::default() };
    settings.gates.node_overlay = true;
    let mut now = 1_767_225_600_000;
    let mut acting = Acting::new(
        Controller::with_settings(catalog.clone(), settings, now),
        Writer::new(fake.client(), false),
        Box::new(karpenter_tui::kube::kwok::KwokCloud::new(catalog, Writer::new(fake.client(), false))),
        None,
    );
    let claims = "apis/karpenter.sh/v1/nodeclaims";
    for _ in 0..30 {
        let m = w.cache.lock().unwrap().manifests();
        acting.tick(&m, now).await;
        now += 1_000;
        if fake.list(claims).iter().any(|c| c["status"]["providerID"].is_string()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let claim = fake.list(claims).into_iter().next().expect("a NodeClaim for the pending pod");
    assert_eq!(claim["metadata"]["annotations"]["karpenter.sh/price-overlay-applied"], "true", "{claim:#}");
    assert_eq!(claim["metadata"]["labels"]["node.kubernetes.io/instance-type"], "c-16x-amd64-linux", "{claim:#}");
    // Both overlays weigh 10 and both match c-16x's offerings: `big-is-cheap` sorts later, goes first and
    // applies; `a-rival` conflicts and is applied nowhere.
    let status = |name: &str| {
        let o = fake.get(NODEOVERLAYS, None, name).expect("overlay");
        let c = o["status"]["conditions"].as_array()?.iter().find(|c| c["type"] == "ValidationSucceeded")?.clone();
        Some((c["status"].as_str()?.to_string(), c["reason"].as_str()?.to_string()))
    };
    assert_eq!(status("big-is-cheap"), Some(("True".into(), "ValidationSucceeded".into())));
    assert_eq!(status("a-rival"), Some(("False".into(), "Conflict".into())));
}
