//! The interruption queue end to end against moto's SQS: EventBridge messages of every kind sent to a real queue,
//! received by the SDK, parsed, handed to the live controller over an in-memory cluster, and deleted — or left for
//! another try when handling fails. A malformed message is deleted and reported; an unknown instance is ignored.

mod harness;
mod moto;

use std::collections::BTreeMap;
use std::sync::Arc;

use aws_sdk_sqs::Client;
use harness::{Harness, manifests};
use karpenter_tui::aws::config::AwsError;
use karpenter_tui::aws::interruption::Kind;
use karpenter_tui::aws::sqs::Queue;
use karpenter_tui::controller::Controller;
use karpenter_tui::engine::catalog::kwok::kwok_catalog;
use karpenter_tui::engine::disruption::gate::Mode;

/// Three EC2-backed NodeClaims with their nodes and a pod each.
fn objects() -> String {
    let mut out = String::from(
        r#"
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements: [{key: karpenter.sh/capacity-type, operator: In, values: [spot, on-demand]}]
"#,
    );
    for (claim, id) in [("default-aaaaa", "i-aaa"), ("default-bbbbb", "i-bbb"), ("default-ccccc", "i-ccc")] {
        out.push_str(&format!(
            r#"---
apiVersion: karpenter.sh/v1
kind: NodeClaim
metadata:
  name: {claim}
  labels: {{karpenter.sh/nodepool: default, karpenter.sh/capacity-type: spot, topology.kubernetes.io/zone: us-east-1a}}
  finalizers: [karpenter.sh/termination]
spec:
  nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
  requirements: [{{key: karpenter.sh/capacity-type, operator: In, values: [spot]}}]
status:
  providerID: aws:///us-east-1a/{id}
---
apiVersion: v1
kind: Node
metadata:
  name: node-{id}
  labels: {{karpenter.sh/nodepool: default, karpenter.sh/capacity-type: spot, topology.kubernetes.io/zone: us-east-1a}}
  finalizers: [karpenter.sh/termination]
spec:
  providerID: aws:///us-east-1a/{id}
status:
  allocatable: {{cpu: "4", memory: 16Gi, pods: "110"}}
  conditions: [{{type: Ready, status: "True"}}]
---
apiVersion: v1
kind: Pod
metadata: {{name: app-{id}, namespace: default, uid: uid-{id}}}
spec:
  nodeName: node-{id}
  containers: [{{name: c, image: x, resources: {{requests: {{cpu: 100m}}}}}}]
status: {{phase: Running}}
"#
        ));
    }
    out
}

fn event(detail_type: &str, source: &str, detail: serde_json::Value) -> String {
    serde_json::json!({
        "version": "0", "id": format!("evt-{detail_type}"), "detail-type": detail_type, "source": source,
        "account": "123456789012", "time": "2026-11-24T12:00:00Z", "region": "us-east-1", "resources": [],
        "detail": detail,
    })
    .to_string()
}

async fn send(client: &Client, url: &str, body: &str) {
    client.send_message().queue_url(url).message_body(body).send().await.expect("SendMessage");
}

async fn queue_depth(client: &Client, url: &str) -> usize {
    // Visibility 0: looking doesn't hide anything from the next poll.
    let out = client
        .receive_message()
        .queue_url(url)
        .max_number_of_messages(10)
        .visibility_timeout(0)
        .wait_time_seconds(0)
        .send()
        .await
        .expect("ReceiveMessage");
    out.messages.unwrap_or_default().len()
}

fn harness() -> Harness {
    let mut h = Harness::with_objects(Mode::Auto, &objects());
    h.controller =
        Controller::new(Arc::new(kwok_catalog("us-east-1")), Mode::Auto, h.now).with_provider_prefix("aws:///");
    h
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kind_of_message_is_handled_and_deleted() {
    let moto = moto::Moto::start();
    let sdk = moto.sdk().await;
    let client = Client::new(&sdk);
    client.create_queue().queue_name("interruptions").send().await.expect("CreateQueue");
    assert!(matches!(Queue::resolve(&sdk, "nope").await, Err(AwsError::NoQueue { .. })), "a missing queue is named");
    let queue = Queue::resolve(&sdk, "interruptions").await.expect("the queue resolves");

    let bodies = [
        event(
            "EC2 Spot Instance Interruption Warning",
            "aws.ec2",
            serde_json::json!({"instance-id": "i-aaa", "instance-action": "terminate"}),
        ),
        event("EC2 Instance Rebalance Recommendation", "aws.ec2", serde_json::json!({"instance-id": "i-bbb"})),
        event(
            "AWS Health Event",
            "aws.health",
            serde_json::json!({"service": "EC2", "eventTypeCategory": "scheduledChange", "affectedEntities": [{"entityValue": "i-ccc"}]}),
        ),
        event(
            "EC2 Instance State-change Notification",
            "aws.ec2",
            serde_json::json!({"instance-id": "i-unknown", "state": "terminated"}),
        ),
        "{this is not json".to_string(),
    ];
    for b in &bodies {
        send(&client, &queue.url, b).await;
    }

    let mut h = harness();
    let mut handled = Vec::new();
    let mut malformed = Vec::new();
    for _ in 0..10 {
        let report = queue
            .poll_with(1, 30, |msg: &karpenter_tui::aws::interruption::Message| {
                let m = manifests(&h.cluster);
                let effects = h.controller.interruption(&m.view(), msg, h.now);
                h.apply(effects);
                Ok(())
            })
            .await
            .expect("poll");
        handled.extend(report.handled.into_iter().map(|m| m.kind));
        malformed.extend(report.malformed);
        if handled.len() + malformed.len() == bodies.len() {
            break;
        }
    }
    assert_eq!(handled.len(), 4, "{handled:?}");
    assert_eq!(malformed.len(), 1, "the bad body is reported: {malformed:?}");
    assert!(malformed[0].contains("not JSON"));
    assert_eq!(queue_depth(&client, &queue.url).await, 0, "everything handled or unparseable is deleted");

    let deleting: BTreeMap<&str, bool> =
        h.cluster.nodeclaims.iter().map(|(k, c)| (k.as_str(), c.metadata.deletion_timestamp.is_some())).collect();
    assert!(deleting["default-aaaaa"], "spot interruption deletes the claim");
    assert!(!deleting["default-bbbbb"], "a rebalance recommendation only informs");
    assert!(deleting["default-ccccc"], "a scheduled change deletes the claim");
    let kinds: Vec<Kind> = h.controller.interruptions.iter().map(|r| r.kind).collect();
    assert_eq!(kinds.len(), 3, "the unknown instance is ignored: {kinds:?}");
    let spot = h.controller.interruptions.iter().find(|r| r.kind == Kind::SpotInterruption).unwrap();
    assert_eq!((spot.node.as_deref(), spot.pods, spot.capacity_type.as_str()), (Some("node-i-aaa"), 1, "spot"));
    assert!(h.events.iter().any(|(o, r, _)| o == "node-i-aaa" && r == "SpotInterrupted"));
    assert!(h.events.iter().any(|(o, r, _)| o == "node-i-bbb" && r == "SpotRebalanceRecommendation"));

    // The dashboard's Interruptions pane shows them, with progress.
    let v = karpenter_tui::runtime::live_view::picture(
        &manifests(&h.cluster),
        &kwok_catalog("us-east-1"),
        h.now,
        &Default::default(),
        &[],
        1,
        Some(&h.controller),
    );
    assert_eq!(v.interruptions.len(), 3);
    assert!(
        v.interruptions
            .iter()
            .any(|r| r.kind == "SpotInterrupted" && r.node == "node-i-aaa" && r.progress.contains("draining")),
        "{:?}",
        v.interruptions
    );
    assert!(
        v.interruptions.iter().any(|r| r.kind == "SpotRebalanceRecommendation" && r.progress == "informational only")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_whose_handling_fails_comes_back_and_is_deleted_once_handled() {
    let moto = moto::Moto::start();
    let sdk = moto.sdk().await;
    let client = Client::new(&sdk);
    client.create_queue().queue_name("retry").send().await.expect("CreateQueue");
    let queue = Queue::resolve(&sdk, "retry").await.unwrap();
    send(
        &client,
        &queue.url,
        &event("EC2 Spot Instance Interruption Warning", "aws.ec2", serde_json::json!({"instance-id": "i-aaa"})),
    )
    .await;
    // The API server refuses: the message stays.
    let first = queue
        .poll_with(2, 1, |_: &karpenter_tui::aws::interruption::Message| Err("API server unavailable".to_string()))
        .await
        .unwrap();
    assert_eq!(first.retried.len(), 1);
    assert!(first.handled.is_empty());
    // After the visibility timeout it is delivered again; handled this time, it is gone.
    let mut seen = 0;
    for _ in 0..10 {
        let r = queue.poll_with(2, 1, |_: &karpenter_tui::aws::interruption::Message| Ok(())).await.unwrap();
        seen += r.handled.len();
        if seen > 0 {
            break;
        }
    }
    assert_eq!(seen, 1, "redelivered after the visibility timeout");
    assert_eq!(queue_depth(&client, &queue.url).await, 0);
}
