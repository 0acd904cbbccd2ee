//! A static NodePool on a live API server (fake, with objects shaped as a real one sends them): the acting
//! controller with the `StaticCapacity` gate launches its replicas, follows `kubectl scale` through the scale
//! subresource (the dashboard's writer) and another client's edit, up and down.

use crate::fake_apiserver;

use std::sync::Arc;
use std::time::Duration;

use fake_apiserver::{FakeApi, eventually};
use karpenter_tui::controller::{Controller, Settings};
use karpenter_tui::engine::catalog::kwok::kwok_catalog;
use karpenter_tui::engine::disruption::gate::Mode;
use karpenter_tui::kube::watch;
use karpenter_tui::kube::writer::Writer;
use karpenter_tui::shell::acting::Acting;
use serde_json::json;

const NODEPOOLS: &str = "apis/karpenter.sh/v1/nodepools";
const NODECLAIMS: &str = "apis/karpenter.sh/v1/nodeclaims";

fn static_pool(replicas: i64) -> serde_json::Value {
    json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
        "metadata": {"name": "fixed", "uid": "p-fixed", "generation": 1, "creationTimestamp": "2026-01-01T00:00:00Z",
                     "managedFields": [{"manager": "kubectl", "operation": "Apply", "apiVersion": "karpenter.sh/v1",
                                        "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:replicas": {}}}}]},
        "spec": {"replicas": replicas, "limits": {"nodes": "5"},
                 "disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "0s",
                                "budgets": [{"nodes": "10%"}]},
                 "template": {"metadata": {"labels": {"team": "infra"}},
                              "spec": {"nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"},
                                       "requirements": [{"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
                                                        {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}],
                                       "expireAfter": "720h"}}},
        "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "Ready", "message": "",
                                   "lastTransitionTime": "2026-01-01T00:00:01Z", "observedGeneration": 1}]}
    })
}

/// Claims of the pool not being deleted.
fn live_claims(fake: &FakeApi) -> usize {
    fake.list(NODECLAIMS)
        .iter()
        .filter(|c| {
            c["metadata"]["labels"]["karpenter.sh/nodepool"] == "fixed" && c["metadata"]["deletionTimestamp"].is_null()
        })
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_static_pool_follows_kubectl_scale_through_the_scale_subresource() {
    let fake = FakeApi::start().await;
    fake.put(NODEPOOLS, static_pool(2));
    let mut w = watch::spawn(fake.client(), &[]);
    w.wait_synced(Duration::from_secs(10)).await.expect("synced");
    let catalog = Arc::new(kwok_catalog("us-east-1"));
    let mut settings = Settings { mode: Mode::Approve, ..Default::default() };
    settings.gates.static_capacity = true;
    let mut now = 1_767_225_600_000;
    let mut acting = Acting::new(
        Controller::with_settings(catalog.clone(), settings, now),
        Writer::new(fake.client(), false),
        Box::new(karpenter_tui::kube::kwok::KwokCloud::new(catalog, Writer::new(fake.client(), false))),
        None,
    );
    // Ticks until `want` claims stand, each reading the cache as the live loop does after a watch event.
    async fn settle(acting: &mut Acting, w: &watch::Watches, fake: &FakeApi, now: &mut i64, want: usize) {
        for _ in 0..40 {
            tokio::time::sleep(Duration::from_millis(30)).await;
            let m = w.cache.lock().unwrap().manifests();
            acting.tick(&m, *now).await;
            *now += 1_000;
            if live_claims(fake) == want {
                return;
            }
        }
        panic!("{} claims, wanted {want}", live_claims(fake));
    }
    settle(&mut acting, &w, &fake, &mut now, 2).await;
    for c in fake.list(NODECLAIMS) {
        assert_eq!(c["metadata"]["labels"]["team"], "infra", "{c:#}");
        let reqs = c["spec"]["requirements"].as_array().unwrap();
        assert!(!reqs.iter().any(|r| r["key"] == "node.kubernetes.io/instance-type"), "no type choice: {c:#}");
    }

    // `kubectl scale nodepool fixed --replicas 4`, here through the dashboard's writer: the scale subresource.
    Writer::new(fake.client(), false).scale_nodepool("fixed", 4).await.expect("scaled");
    assert_eq!(fake.get(NODEPOOLS, None, "fixed").unwrap()["spec"]["replicas"], 4);
    assert!(
        fake.requests().iter().any(|r| r.method == "PATCH" && r.path.ends_with("/nodepools/fixed/scale")),
        "through the subresource"
    );
    let c = w.cache.clone();
    eventually(5, "the cache sees 4 replicas", move || {
        c.lock().unwrap().manifests().nodepools.iter().any(|p| p.spec.replicas == Some(4))
    })
    .await;
    settle(&mut acting, &w, &fake, &mut now, 4).await;

    // Another client scales it down to 1: three claims are deleted at once (forceful, no budget asked).
    let mut pool = fake.get(NODEPOOLS, None, "fixed").unwrap();
    pool["spec"]["replicas"] = json!(1);
    fake.put(NODEPOOLS, pool);
    let c = w.cache.clone();
    eventually(5, "the cache sees 1 replica", move || {
        c.lock().unwrap().manifests().nodepools.iter().any(|p| p.spec.replicas == Some(1))
    })
    .await;
    settle(&mut acting, &w, &fake, &mut now, 1).await;
}
