//! The interruption queue end to end against moto's SQS: EventBridge messages of every kind sent to a real queue,
//! received by the SDK, parsed, handed to the live controller over an in-memory cluster, and deleted — or left for
//! another try when handling fails. A malformed message is deleted and reported; an unknown instance is ignored.

use crate::harness;
use crate::moto;

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
    let v = karpenter_tui::shell::live_picture::picture(
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

/// One `DescribeInstanceStatus` answer in EC2's query-protocol XML: (instance, instance check failed since,
/// system check failed since, a scheduled event), and a next-page token.
fn status_page(items: &[(&str, Option<&str>, Option<&str>, bool)], next: Option<&str>) -> String {
    let check = |failed: Option<&str>| match failed {
        Some(t) => format!(
            "<status>impaired</status><details><item><name>reachability</name><status>failed</status><impairedSince>{t}</impairedSince></item></details>"
        ),
        None => {
            "<status>ok</status><details><item><name>reachability</name><status>passed</status></item></details>".into()
        }
    };
    let mut xml = String::from(
        r#"<DescribeInstanceStatusResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><requestId>r</requestId><instanceStatusSet>"#,
    );
    for (id, instance, system, event) in items {
        xml.push_str(&format!(
            "<item><instanceId>{id}</instanceId><availabilityZone>us-east-1a</availabilityZone><instanceState><code>16</code><name>running</name></instanceState><instanceStatus>{}</instanceStatus><systemStatus>{}</systemStatus>",
            check(*instance),
            check(*system)
        ));
        if *event {
            xml.push_str("<eventsSet><item><code>instance-retirement</code><description>The instance is running on degraded hardware</description><notBefore>2026-12-01T00:00:00Z</notBefore></item></eventsSet>");
        }
        xml.push_str("</item>");
    }
    xml.push_str("</instanceStatusSet>");
    if let Some(t) = next {
        xml.push_str(&format!("<nextToken>{t}</nextToken>"));
    }
    xml.push_str("</DescribeInstanceStatusResponse>");
    xml
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instance_status_checks_terminate_forcefully_and_scheduled_events_drain() {
    use karpenter_tui::aws::instancestatus::{Episodes, list, messages};
    // moto answers DescribeInstanceStatus but knows no impairments and none of these filters: the fault wrapper
    // answers for EC2, by the filter each call sends. The instance check call has two pages.
    let moto = moto::Moto::start();
    let faults = moto::faults::Faults::default();
    faults.rule(
        "DescribeInstanceStatus",
        Box::new(|body| {
            let page = if body.contains("instance-status.status") && !body.contains("NextToken") {
                status_page(&[("i-aaa", Some("2026-11-24T10:00:00Z"), None, false)], Some("page2"))
            } else if body.contains("instance-status.status") {
                status_page(&[("i-ddd", Some("2099-01-01T00:00:00Z"), None, false)], None)
            } else if body.contains("system-status.status") {
                status_page(&[("i-bbb", None, Some("2026-11-24T11:00:00Z"), false)], None)
            } else {
                // The event call lists i-aaa again (already read) and i-ccc, with a retirement scheduled.
                status_page(&[("i-aaa", None, None, true), ("i-ccc", None, None, true)], None)
            };
            Some((200, page))
        }),
    );
    let sdk = moto.sdk_with(&faults).await;
    let ec2 = aws_sdk_ec2::Client::new(&sdk);
    let now = chrono::DateTime::parse_from_rfc3339("2026-11-24T12:00:00Z").unwrap().timestamp();
    let found = list(&ec2, now).await.expect("DescribeInstanceStatus");
    assert_eq!(faults.calls("DescribeInstanceStatus"), 4, "three filter sets, one of them two pages");
    let by_id: BTreeMap<&str, &[Kind]> = found.iter().map(|u| (u.instance_id.as_str(), u.kinds.as_slice())).collect();
    assert_eq!(by_id["i-aaa"], [Kind::InstanceStatus], "the first answer for an instance stands");
    assert_eq!(by_id["i-bbb"], [Kind::SystemStatus]);
    assert_eq!(by_id["i-ccc"], [Kind::EventStatus]);
    assert!(!by_id.contains_key("i-ddd"), "impaired for less than two minutes: not yet");
    let mut episodes = Episodes::default();
    assert_eq!(episodes.observe(&found).len(), 3);

    // The controller: status check failures terminate forcefully (the drain deadline is now), a scheduled event
    // drains normally, and a repeat of a notice for a claim already going records nothing new.
    let mut h = harness();
    for msg in messages(&found) {
        let m = manifests(&h.cluster);
        let effects = h.controller.interruption(&m.view(), &msg, h.now);
        h.apply(effects);
    }
    let claim = |name: &str| h.cluster.nodeclaims[name].clone();
    let deadline = |name: &str| {
        claim(name)
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("karpenter.sh/nodeclaim-termination-timestamp").cloned())
    };
    for name in ["default-aaaaa", "default-bbbbb", "default-ccccc"] {
        assert!(claim(name).metadata.deletion_timestamp.is_some(), "{name} is deleted");
    }
    let stamp = karpenter_tui::engine::lifecycle::rfc3339(h.now);
    assert_eq!(deadline("default-aaaaa"), Some(stamp.clone()), "instance status: forceful");
    assert_eq!(deadline("default-bbbbb"), Some(stamp), "system status: forceful");
    assert_eq!(deadline("default-ccccc"), None, "a scheduled event drains by the usual rules");
    assert!(h.events.iter().filter(|(_, r, _)| r == "InstanceUnhealthy").count() == 3, "{:?}", h.events);
    let recorded = h.controller.interruptions.len();
    let again = list(&ec2, now + 60).await.unwrap();
    assert!(episodes.observe(&again).is_empty(), "still listed: the same episode");
    for msg in messages(&again) {
        let m = manifests(&h.cluster);
        let effects = h.controller.interruption(&m.view(), &msg, h.now + 60_000);
        h.apply(effects);
    }
    assert_eq!(h.controller.interruptions.len(), recorded, "repeats for claims already going add nothing");

    // The pane tells the three apart.
    let v = karpenter_tui::shell::live_picture::picture(
        &manifests(&h.cluster),
        &kwok_catalog("us-east-1"),
        h.now,
        &Default::default(),
        &[],
        1,
        Some(&h.controller),
    );
    let kinds: std::collections::BTreeSet<&str> = v.interruptions.iter().map(|r| r.kind.as_str()).collect();
    assert_eq!(
        kinds,
        [
            "InstanceUnhealthy (instance status)",
            "InstanceUnhealthy (scheduled event)",
            "InstanceUnhealthy (system status)"
        ]
        .into()
    );

    // Without the IAM right, the error says which call and carries the code the poller stops on.
    faults.queue(
        "DescribeInstanceStatus",
        Box::new(|_| (403, "<Response><Errors><Error><Code>UnauthorizedOperation</Code><Message>You are not authorized to perform this operation.</Message></Error></Errors><RequestID>x</RequestID></Response>".into())),
    );
    let err = list(&ec2, now).await.unwrap_err();
    assert_eq!(err.code(), Some("UnauthorizedOperation"));
    assert!(err.to_string().contains("DescribeInstanceStatus"), "{err}");
}
