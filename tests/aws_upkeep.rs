//! The AWS cloud's periodic work as the acting loop runs it (`aws::upkeep`), against moto: an
//! EC2NodeClass resolved into a status effect (and not again while it is unchanged), the planner handed the
//! class's catalog and the live instances, a leaked instance terminated with its Node, and an interruption from the
//! queue turned into the NodeClaim's deletion with its spot offering kept out.

use crate::moto;

use std::sync::Arc;

use karpenter_tui::controller::cloud::CloudProvider;

use karpenter_tui::aws::cloud::{AwsCloud, AwsProvider, PROVIDER_PREFIX};
use karpenter_tui::aws::interruption::{Kind, Message};
use karpenter_tui::aws::launch::ClusterInfo;
use karpenter_tui::aws::nodeclass::AliasContext;
use karpenter_tui::aws::upkeep::AwsUpkeep;
use karpenter_tui::controller::{Controller, Effect};
use karpenter_tui::engine::api::NodeClaim;
use karpenter_tui::engine::catalog::aws::aws_catalog;
use karpenter_tui::engine::disruption::gate::Mode;
use karpenter_tui::engine::labels;
use karpenter_tui::engine::lifecycle::apply_launch;
use karpenter_tui::engine::manifests::ClusterObjects;

fn claim(name: &str) -> NodeClaim {
    let c: NodeClaim = serde_yaml::from_str(&format!(
        "apiVersion: karpenter.sh/v1\nkind: NodeClaim\nmetadata: {{name: {name}, uid: uid-{name}, labels: {{karpenter.sh/nodepool: default}}}}\nspec:\n  nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}\n  requirements:\n    - {{key: kubernetes.io/arch, operator: In, values: [amd64]}}\n    - {{key: karpenter.sh/capacity-type, operator: In, values: [spot]}}\n    - {{key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}}\n  resources: {{requests: {{cpu: '1'}}}}\n"
    ))
    .unwrap();
    c
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upkeep_resolves_classes_collects_leaks_and_handles_interruptions() {
    let moto = moto::Moto::start();
    let sdk = moto.sdk().await;
    let cluster = ClusterInfo { name: "demo".into(), service_cidr: Some("10.100.0.0/16".into()), ..Default::default() };
    let cloud = Arc::new(AwsCloud::new(
        &sdk,
        cluster,
        AliasContext { k8s_version: "1.33".into(), ssm_prefix: "/aws/service".into() },
    ));
    cloud.refresh_types().await.unwrap();
    let nc = moto::network(&cloud.ec2, &cloud.iam, "demo").await;
    let now = chrono::Utc::now().timestamp_millis();
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let wake = Arc::new(tokio::sync::Notify::new());
    let mut upkeep = AwsUpkeep::new(cloud.clone(), now, wake.clone());
    // The controller's view of AWS: the cloud port, with the queue's notices.
    let mut port = AwsProvider::new(cloud.clone(), Some(rx));
    let fallback = Arc::new(aws_catalog("us-east-1", None, None, 0).unwrap());
    let mut controller = Controller::new(fallback, Mode::Approve, now).with_provider_prefix(PROVIDER_PREFIX);

    // The class is resolved and its status comes back as an effect for the cluster.
    let mut m = ClusterObjects { nodeclasses: vec![nc.clone()], ..Default::default() };
    let r = upkeep.run(&m, now).await;
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    let status = r
        .effects
        .iter()
        .find_map(|e| match e {
            Effect::UpdateNodeClassStatus { name, status } if name == "default" => Some(status.clone()),
            _ => None,
        })
        .expect("a status for the class");
    assert!(status.conditions.iter().any(|c| c.type_ == "Ready" && c.status == "True"), "{:?}", status.conditions);
    assert!(cloud.catalogs(now).contains_key("default"));
    // The controller takes it through the cloud port, as the acting loop does before every run.
    match CloudProvider::instance_types(&mut port, now) {
        Some(karpenter_tui::controller::cloud::InstanceTypes::PerClass(by_class)) => {
            assert!(by_class.get("default").is_some_and(|c| c.get("m5.large").is_some()), "the class's catalog")
        }
        other => panic!("AWS offers instance types per EC2NodeClass: {other:?}"),
    }
    controller.sync_instance_types(&mut port, &m.nodeclasses, now);
    // Once the cluster holds that status, the next round (a minute later) writes nothing.
    m.nodeclasses[0].status = Some(*status);
    let r = upkeep.run(&m, now + 61_000).await;
    assert!(!r.effects.iter().any(|e| matches!(e, Effect::UpdateNodeClassStatus { .. })), "{:?}", r.effects);

    // Two instances: one held by a NodeClaim in the cluster, one nobody holds (a crash between launch and create).
    let held = claim("default-held1");
    let launched = cloud.launch(&held).await.unwrap();
    let mut held_stored = held.clone();
    apply_launch(&mut held_stored, &launched, now);
    let leaked = cloud.launch(&claim("default-gone1")).await.unwrap();
    let node: k8s_openapi::api::core::v1::Node =
        serde_yaml::from_str(&format!("metadata: {{name: ip-leaked}}\nspec: {{providerID: '{}'}}", leaked.provider_id))
            .unwrap();
    m.nodeclaims = vec![held_stored.clone().into()];
    m.nodes = vec![node.into()];
    // Thirty seconds later garbage collection, through the cloud port's list, terminates the stray one and
    // deletes its Node; the held one stays.
    let later = now + 120_000;
    let list = CloudProvider::list(&mut port, later).await.unwrap().expect("AWS lists its instances");
    assert_eq!(list.len(), 2, "{list:?}");
    let effects = controller.garbage_collect(&m.view(), &list, later);
    assert!(effects.iter().any(|e| matches!(e, Effect::DeleteNode { name } if name == "ip-leaked")), "{effects:?}");
    let doomed: Vec<String> = effects
        .iter()
        .filter_map(|e| match e {
            Effect::DeleteInstance { provider_id } => Some(provider_id.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(doomed, vec![leaked.provider_id.clone()]);
    for pid in &doomed {
        let said = CloudProvider::delete(&mut port, pid, later).await.unwrap();
        assert!(said.is_some_and(|s| s.contains("terminating")));
    }
    let live: Vec<String> = cloud.refresh_instances().await.unwrap().iter().map(|i| i.provider_id()).collect();
    assert_eq!(live, vec![launched.provider_id.clone()]);
    let r = upkeep.run(&m, later).await;
    assert!(r.errors.is_empty(), "{:?}", r.errors);

    // Drift is the cloud's verdict through the port: a claim launched with another spec of its class has drifted.
    use karpenter_tui::aws::drift::{ANNOTATION_HASH, ANNOTATION_HASH_VERSION, HASH_VERSION};
    let mut drifted = held_stored.clone();
    drifted.metadata.name = Some("default-drift1".into());
    drifted.metadata.annotations = Some(
        [
            (ANNOTATION_HASH.to_string(), "an-older-spec".to_string()),
            (ANNOTATION_HASH_VERSION.into(), HASH_VERSION.into()),
        ]
        .into(),
    );
    let verdicts =
        CloudProvider::drifted(&mut port, &mut [&drifted].into_iter(), later).expect("AWS judges node-class drift");
    assert!(verdicts["default-drift1"].contains("spec changed since launch"), "{verdicts:?}");

    // A spot interruption for the held instance: its claim is deleted, the offering kept out, the notice answered.
    let id = launched.provider_id.rsplit('/').next().unwrap().to_string();
    let (answer, result) = tokio::sync::oneshot::channel();
    let msg = Message {
        kind: Kind::SpotInterruption,
        id: "evt-1".into(),
        time: "2026-11-24T00:00:00Z".into(),
        instance_ids: vec![id],
    };
    tx.send((msg, answer)).unwrap();
    let (effects, taken) = take_notices(&mut port, &mut controller, &m, later + 1_000);
    assert!(
        effects.iter().any(|e| matches!(e, Effect::DeleteNodeClaim { name, .. } if name == "default-held1")),
        "{effects:?}"
    );
    assert_eq!(taken, 1);
    assert_eq!(result.await.unwrap(), Ok(()));
    let labels_of = held_stored.metadata.labels.clone().unwrap();
    let zone = labels_of.get(labels::ZONE).unwrap();
    let catalog = cloud.catalog_for(None, chrono::Utc::now().timestamp_millis()).unwrap().unwrap();
    let m5 = catalog.get("m5.large").unwrap();
    assert!(
        m5.offerings.iter().any(|o| &o.zone == zone && o.capacity_type == "spot" && !o.available),
        "kept out for 3 minutes"
    );
    assert_eq!(controller.interruptions.len(), 1, "recorded for the Interruptions pane");

    // The same through the queue: a rebalance recommendation for the held instance is sent to SQS, the poller hands
    // it to the loop, the loop answers, and the message is deleted (it never comes back).
    let sqs = aws_sdk_sqs::Client::new(&sdk);
    let url = sqs.create_queue().queue_name("interruptions").send().await.unwrap().queue_url.unwrap();
    let queue = karpenter_tui::aws::sqs::Queue::resolve(&sdk, "interruptions").await.unwrap();
    let poller = tokio::spawn(karpenter_tui::aws::upkeep::poll_queue(queue, tx.clone(), wake.clone()));
    let body = serde_json::json!({
        "version": "0", "id": "evt-2", "detail-type": "EC2 Instance Rebalance Recommendation", "source": "aws.ec2",
        "account": "123456789012", "time": "2026-11-24T12:00:00Z", "region": "us-east-1", "resources": [],
        "detail": {"instance-id": launched.provider_id.rsplit('/').next().unwrap()},
    });
    sqs.send_message().queue_url(&url).message_body(body.to_string()).send().await.unwrap();
    // An acting loop asleep until its next reconcile is woken for the notice.
    tokio::time::timeout(std::time::Duration::from_secs(20), wake.notified())
        .await
        .expect("the poller wakes the acting loop when it hands over a notice");
    let mut answered = 0;
    for i in 0..100 {
        answered += take_notices(&mut port, &mut controller, &m, later + 2_000 + i * 100).1;
        if answered > 0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(answered, 1, "the poller handed the message to the loop");
    assert_eq!(controller.interruptions.len(), 2);
    let mut gone = false;
    for _ in 0..50 {
        let attrs = sqs
            .get_queue_attributes()
            .queue_url(&url)
            .attribute_names(aws_sdk_sqs::types::QueueAttributeName::All)
            .send()
            .await
            .unwrap()
            .attributes
            .unwrap_or_default();
        let count = |k: aws_sdk_sqs::types::QueueAttributeName| attrs.get(&k).map(|v| v.as_str()) == Some("0");
        if count(aws_sdk_sqs::types::QueueAttributeName::ApproximateNumberOfMessages)
            && count(aws_sdk_sqs::types::QueueAttributeName::ApproximateNumberOfMessagesNotVisible)
        {
            gone = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(gone, "the handled message was deleted");
    poller.abort();
}

/// What the acting loop does with the notices the cloud port hands over: the controller acts on each, and it is
/// answered. Returns the effects and how many notices there were.
fn take_notices(
    port: &mut AwsProvider,
    controller: &mut Controller,
    m: &ClusterObjects,
    now: i64,
) -> (Vec<Effect>, usize) {
    let notices = CloudProvider::interruptions(port, &mut m.nodeclaims.iter().map(|c| &**c), now);
    let taken = notices.len();
    let mut effects = Vec::new();
    for n in notices {
        effects.extend(controller.interruption(&m.view(), &n.message, now));
        (n.answer)(Ok(()));
    }
    (effects, taken)
}
