//! An observing dashboard on a cluster where nothing changes, or only heartbeats, must sleep: the live backend over the fake API
//! server, with no leader election at all (its role channel closed, as when observing read-only or beside upstream
//! Karpenter), counted by its wake-ups rather than timed.

use crate::fake_apiserver;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use fake_apiserver::FakeApi;
use karpenter_tui::kube::leader::Role;
use karpenter_tui::kube::watch;
use karpenter_tui::kube::writer::Writer;
use karpenter_tui::protocol::view::Leadership;
use karpenter_tui::protocol::{Command, Event};
use karpenter_tui::shell::live_driver::LiveDriver;
use karpenter_tui::shell::live_picture::LiveInfo;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_observing_dashboard_on_an_unchanging_cluster_wakes_a_handful_of_times() {
    let fake = FakeApi::start().await;
    for i in 0..3 {
        fake.put(
            "api/v1/nodes",
            json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": format!("n{i}")},
                   "status": {"allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"},
                              "conditions": [{"type": "Ready", "status": "True"}]}}),
        );
    }
    let mut w = watch::spawn(fake.client(), &[]);
    w.wait_synced(Duration::from_secs(5)).await.unwrap();
    // No elector: the role's sender is gone before the backend starts.
    let wakes = Arc::new(AtomicU64::new(0));
    let (role_tx, driver) = fake.observing_driver(&w, wakes.clone());
    drop(role_tx);
    let (commands, crx) = tokio::sync::mpsc::unbounded_channel();
    let (etx, mut events) = tokio::sync::mpsc::unbounded_channel();
    let backend = tokio::spawn(driver.run(crx, etx));

    tokio::time::sleep(Duration::from_millis(2_500)).await;
    let woke = wakes.load(Ordering::Relaxed);
    let mut views = 0;
    while let Ok(e) = events.try_recv() {
        // The picture of the objects read comes first, then the one with the engine's decisions.
        views += usize::from(matches!(&e, Event::View(v) if v.progress.is_none()));
    }
    assert!((1..=2).contains(&views), "a picture, perhaps one more for a late watch event: {views}");
    // The first picture or two, perhaps a clock line: a spinning loop would have woken millions of times.
    assert!(woke <= 8, "woke {woke} times in 2.5 s on an unchanging cluster");

    // Every node posts heartbeats: nothing the engine reads changed, so no picture is rebuilt.
    for beat in 0..5 {
        for i in 0..3 {
            let mut n = fake.get("api/v1/nodes", None, &format!("n{i}")).unwrap();
            n["status"]["conditions"][0]["lastHeartbeatTime"] = json!(format!("2026-01-01T00:00:0{beat}Z"));
            fake.put("api/v1/nodes", n);
        }
    }
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let mut rebuilt = 0;
    while let Ok(e) = events.try_recv() {
        rebuilt += usize::from(matches!(e, Event::View(_)));
    }
    assert_eq!(rebuilt, 0, "heartbeats alone rebuild nothing");
    // A change the engine reads does.
    let mut n = fake.get("api/v1/nodes", None, "n1").unwrap();
    n["metadata"]["labels"] = json!({"team": "a"});
    fake.put("api/v1/nodes", n);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        match tokio::time::timeout_at(deadline, events.recv()).await {
            Ok(Some(Event::View(_))) => break,
            Ok(Some(_)) => continue,
            other => panic!("no picture after a label change: {other:?}"),
        }
    }

    commands.send(Command::Shutdown).unwrap();
    tokio::time::timeout(Duration::from_secs(5), backend).await.expect("stops on Shutdown").unwrap();
}

/// An acting dashboard (leading, with the KWOK cloud) on a cluster with nothing to do sleeps until its controller's
/// next wake instead of reconciling every second, and still acts on a change at once: a pending pod gets a
/// NodeClaim within the batch window.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acting_dashboard_sleeps_until_its_controller_needs_it_and_acts_on_a_change_at_once() {
    use karpenter_tui::controller::Controller;
    use karpenter_tui::engine::catalog::kwok::kwok_catalog;
    use karpenter_tui::engine::disruption::gate::Mode;
    use karpenter_tui::shell::acting::Acting;

    let fake = FakeApi::start().await;
    fake.put(
        "apis/karpenter.sh/v1/nodepools",
        json!({"apiVersion": "karpenter.sh/v1", "kind": "NodePool",
               "metadata": {"name": "default", "uid": "p-1", "generation": 1,
                            "creationTimestamp": "2026-01-01T00:00:00Z"},
               "spec": {"disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "30s",
                                       "budgets": [{"nodes": "10%"}]},
                        "template": {"spec": {
                            "nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"},
                            "requirements": [{"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]}]}}}}),
    );
    let mut w = watch::spawn(fake.client(), &[]);
    w.wait_synced(Duration::from_secs(5)).await.unwrap();
    let (_role_tx, role) = tokio::sync::watch::channel(Role::Leader);
    let catalog = Arc::new(kwok_catalog("us-east-1"));
    let now = chrono::Utc::now().timestamp_millis();
    let wakes = Arc::new(AtomicU64::new(0));
    let driver = LiveDriver {
        cache: w.cache.clone(),
        changed: w.changed.clone(),
        writer: Writer::new(fake.client(), false),
        catalog: catalog.clone(),
        info: LiveInfo {
            context: "test".into(),
            cluster: "test".into(),
            leadership: Leadership::Acting,
            clock: "live".into(),
            gates: Default::default(),
            packing: Default::default(),
            version: Default::default(),
            version_source: String::new(),
        },
        acting: Some(Acting::new(
            Controller::new(catalog.clone(), Mode::Approve, now),
            Writer::new(fake.client(), false),
            Box::new(karpenter_tui::kube::kwok::KwokCloud::new(catalog, Writer::new(fake.client(), false))),
            None,
        )),
        role,
        wakes: wakes.clone(),
    };
    let (commands, crx) = tokio::sync::mpsc::unbounded_channel();
    let (etx, _events) = tokio::sync::mpsc::unbounded_channel();
    let backend = tokio::spawn(driver.run(crx, etx));

    // The first run writes the NodePool's status (a change, so one more run), a picture or two, a clock line.
    tokio::time::sleep(Duration::from_millis(7_000)).await;
    let woke = wakes.load(Ordering::Relaxed);
    assert!(woke <= 6, "woke {woke} times in 7 s with nothing to do: a loop ticking every second wakes 7+");

    fake.put(
        "api/v1/pods",
        json!({"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": "web-1", "namespace": "default", "uid": "u-web-1",
                            "creationTimestamp": "2026-01-01T00:00:00Z"},
               "spec": {"containers": [{"name": "c", "image": "pause",
                                        "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]},
               "status": {"phase": "Pending",
                          "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}}),
    );
    let f = &fake;
    fake_apiserver::eventually(5, "a NodeClaim for the pending pod", || {
        f.writes().iter().any(|r| r.method == "POST" && r.path.ends_with("/nodeclaims"))
    })
    .await;

    commands.send(Command::Shutdown).unwrap();
    tokio::time::timeout(Duration::from_secs(5), backend).await.expect("stops on Shutdown").unwrap();
}
