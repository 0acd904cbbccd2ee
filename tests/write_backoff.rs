//! A write the API server refuses for a reason retrying cannot fix is not retried hot: the object backs off
//! (5 ms doubling, as controller-runtime's queue), the refusal is shown once per distinct error, and the write goes
//! through once the server takes it. Conflicts are not refusals: they are planned again at once.

use crate::fake_apiserver;

use std::sync::Arc;
use std::time::Duration;

use fake_apiserver::{FakeApi, status};
use karpenter_tui::controller::{Controller, Settings};
use karpenter_tui::engine::catalog::kwok::kwok_catalog;
use karpenter_tui::engine::disruption::gate::Mode;
use karpenter_tui::kube::watch;
use karpenter_tui::kube::writer::Writer;
use karpenter_tui::shell::acting::Acting;
use serde_json::json;

const NODEPOOLS: &str = "apis/karpenter.sh/v1/nodepools";
const STATUS_PATH: &str = "/apis/karpenter.sh/v1/nodepools/default/status";

fn pool() -> serde_json::Value {
    json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
        "metadata": {"name": "default", "uid": "p-default", "generation": 1, "resourceVersion": "1",
                     "creationTimestamp": "2026-01-01T00:00:00Z",
                     "managedFields": [{"manager": "kubectl-client-side-apply", "operation": "Update",
                                        "apiVersion": "karpenter.sh/v1", "time": "2026-01-01T00:00:00Z",
                                        "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {".": {}, "f:template": {}}}}]},
        "spec": {"disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "0s",
                                "budgets": [{"nodes": "10%"}]},
                 "template": {"spec": {"nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass",
                                                        "name": "default"},
                                       "requirements": [{"key": "kubernetes.io/os", "operator": "In",
                                                         "values": ["linux"]}],
                                       "expireAfter": "720h"}}}
    })
}

fn invalid() -> serde_json::Value {
    let mut s = status(
        422,
        "Invalid",
        "NodePool.karpenter.sh \"default\" is invalid: status.conditions[0].message: Required value",
    );
    s["details"] = json!({"name": "default", "group": "karpenter.sh", "kind": "NodePool",
                          "causes": [{"reason": "FieldValueRequired", "message": "Required value",
                                      "field": "status.conditions[0].message"}]});
    s
}

fn status_writes(fake: &FakeApi) -> usize {
    fake.requests().iter().filter(|r| r.method == "PATCH" && r.path == STATUS_PATH).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_status_write_backs_off_is_shown_once_and_lands_when_the_server_takes_it() {
    let fake = FakeApi::start().await;
    fake.put(NODEPOOLS, pool());
    // The server refuses the pool's status 12 times, then takes it.
    fake.script("PATCH", STATUS_PATH, false, 422, invalid(), Some(12));
    let mut w = watch::spawn(fake.client(), &[]);
    w.wait_synced(Duration::from_secs(10)).await.expect("synced");
    let catalog = Arc::new(kwok_catalog("us-east-1"));
    let settings = Settings { mode: Mode::Approve, ..Default::default() };
    let mut now = 1_767_225_600_000;
    let mut acting = Acting::new(
        Controller::with_settings(catalog.clone(), settings, now),
        Writer::new(fake.client(), false),
        Box::new(karpenter_tui::kube::kwok::KwokCloud::new(catalog, Writer::new(fake.client(), false))),
        None,
    );
    let m = w.cache.lock().unwrap().manifests();
    // Two seconds of ticks 10 ms apart, as a loop woken by a busy cluster runs: 200 ticks.
    let mut shown = Vec::new();
    for _ in 0..200 {
        let r = acting.tick(&m, now).await;
        shown.extend(r.errors.into_iter().filter(|e| e.contains("NodePool default")));
        now += 10;
    }
    let tries = status_writes(&fake);
    // 5 ms doubling: tries at 0, 5, 15, 35, 75, 155, 315, 635, 1275 ms (each rounded up to the next tick).
    assert!((8..=10).contains(&tries), "{tries} status writes in two seconds of refusals");
    assert_eq!(shown.len(), 1, "the same refusal is shown once: {shown:?}");
    assert!(shown[0].contains("422") || shown[0].contains("Required value"), "{}", shown[0]);
    // The dashboard's Events pane reads the refusal from the controller.
    let refused: Vec<_> = acting.controller.refused_writes().map(|(k, r)| (k.to_string(), r.failures)).collect();
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert_eq!(refused[0].0, "NodePool/default/status");
    assert_eq!(refused[0].1 as usize, tries);
    // The server takes the write once its script is used up; the wait is the backoff's, at most 1,000 s.
    for _ in 0..40 {
        if acting.controller.refused_writes().next().is_none() {
            break;
        }
        now += 1_000;
        acting.tick(&m, now).await;
    }
    assert!(acting.controller.refused_writes().next().is_none(), "the backoff ended once the write went through");
    let stored = fake.get(NODEPOOLS, None, "default").expect("pool");
    let conditions = stored["status"]["conditions"].as_array().expect("conditions written");
    for c in conditions {
        assert!(c["message"].is_string(), "every condition carries a message, empty or not: {c}");
        assert!(c["reason"].as_str().is_some_and(|r| !r.is_empty()), "and a reason: {c}");
    }
    assert_eq!(stored["status"]["nodes"], 0);
    drop(w);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conflict_is_planned_again_at_once_not_backed_off() {
    let fake = FakeApi::start().await;
    fake.put(NODEPOOLS, pool());
    let conflict = status(409, "Conflict", "Operation cannot be fulfilled on nodepools.karpenter.sh \"default\"");
    fake.script("PATCH", STATUS_PATH, false, 409, conflict, Some(3));
    let mut w = watch::spawn(fake.client(), &[]);
    w.wait_synced(Duration::from_secs(10)).await.expect("synced");
    let catalog = Arc::new(kwok_catalog("us-east-1"));
    let now = 1_767_225_600_000;
    let mut acting = Acting::new(
        Controller::with_settings(catalog.clone(), Settings::default(), now),
        Writer::new(fake.client(), false),
        Box::new(karpenter_tui::kube::kwok::KwokCloud::new(catalog, Writer::new(fake.client(), false))),
        None,
    );
    let m = w.cache.lock().unwrap().manifests();
    for i in 0..4 {
        let r = acting.tick(&m, now + i).await;
        assert!(r.errors.is_empty(), "a conflict is not an error: {:?}", r.errors);
    }
    assert_eq!(status_writes(&fake), 4, "one try per tick, none held back");
    assert!(acting.controller.refused_writes().next().is_none());
    drop(w);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stand_in_api_server_refuses_a_nodepool_condition_without_a_message_as_a_real_one_does() {
    use karpenter_tui::engine::api::Condition;
    use karpenter_tui::engine::api::nodepool::NodePoolStatus;
    let fake = FakeApi::start().await;
    fake.put(NODEPOOLS, pool());
    let writer = Writer::new(fake.client(), false);
    let condition = |message: Option<&str>| Condition {
        type_: "Ready".into(),
        status: "True".into(),
        reason: Some("Ready".into()),
        message: message.map(str::to_string),
        last_transition_time: Some("2026-01-01T00:00:00Z".into()),
        observed_generation: None,
    };
    let without = NodePoolStatus { conditions: vec![condition(None)], ..Default::default() };
    let err = writer.update_nodepool_status("default", &without).await.expect_err("refused");
    let text = err.to_string();
    assert!(text.contains("422") || text.contains("Invalid"), "{text}");
    assert!(text.contains("status.conditions[0].message: Required value"), "{text}");
    assert!(fake.get(NODEPOOLS, None, "default").expect("pool")["status"].is_null(), "nothing half-applied");
    let with = NodePoolStatus { conditions: vec![condition(Some(""))], ..Default::default() };
    writer.update_nodepool_status("default", &with).await.expect("an empty message is a message");
    assert_eq!(fake.get(NODEPOOLS, None, "default").expect("pool")["status"]["conditions"][0]["message"], "");
}
