//! End to end with `--cloud aws` semantics: the live controller's planner over an in-memory cluster (tests/harness),
//! its launches and terminations carried out by the AWS cloud provider against moto through the real SDK, and a
//! stand-in kubelet registering a Node for each instance as EC2 user data would. Pending pods → NodeClaims → EC2
//! instances → Nodes → pods bound; scale to zero → an emptiness proposal → approved → instances terminated and the
//! claims finalized, nothing left running.

use crate::harness;
use crate::moto;

use std::sync::Arc;

use aws_sdk_ec2::types::{ResourceType, Tag, TagSpecification};
use harness::{Harness, manifests};
use k8s_openapi::api::core::v1::{Node, NodeCondition, NodeSpec, NodeStatus, Taint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use karpenter_tui::aws::cloud::{AwsCloud, AwsProvider, PROVIDER_PREFIX};
use karpenter_tui::aws::launch::ClusterInfo;
use karpenter_tui::aws::nodeclass::AliasContext;
use karpenter_tui::controller::{CommandState, Controller, Outcome};
use karpenter_tui::engine::api::EC2NodeClass;
use karpenter_tui::engine::catalog::aws::aws_catalog;
use karpenter_tui::engine::disruption::gate::Mode;
use karpenter_tui::engine::labels;
use karpenter_tui::engine::lifecycle::ms_time;

const OBJECTS: &str = r#"
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  disruption: {consolidationPolicy: WhenEmptyOrUnderutilized, consolidateAfter: 30s}
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
        - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.xlarge]}
        - {key: kubernetes.io/arch, operator: In, values: [amd64]}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: inflate, namespace: default}
spec:
  replicas: 6
  selector: {matchLabels: {app: inflate}}
  template:
    metadata: {labels: {app: inflate}}
    spec:
      terminationGracePeriodSeconds: 0
      containers: [{name: c, image: pause, resources: {requests: {cpu: "1", memory: 1Gi}}}]
"#;

/// The Node a launched instance registers, as its kubelet would (user data): named after the instance, the claim's
/// labels and taints plus `karpenter.sh/unregistered`, its capacity as the claim's status records it, Ready.
fn kubelet_node(h: &Harness, claim: &str) -> Node {
    let c = &h.cluster.nodeclaims[claim];
    let status = c.status.clone().unwrap_or_default();
    let provider_id = status.provider_id.clone().unwrap_or_default();
    let id = provider_id.rsplit('/').next().unwrap();
    let name = format!("ip-{id}.ec2.internal");
    let mut l = c.metadata.labels.clone().unwrap_or_default();
    l.insert(labels::HOSTNAME.into(), name.clone());
    let mut taints: Vec<Taint> = c.spec.taints.clone();
    taints.push(Taint { key: labels::TAINT_UNREGISTERED.into(), effect: "NoExecute".into(), ..Default::default() });
    Node {
        metadata: ObjectMeta {
            name: Some(name),
            labels: Some(l),
            creation_timestamp: Some(ms_time(h.now)),
            ..Default::default()
        },
        spec: Some(NodeSpec { provider_id: Some(provider_id), taints: Some(taints), ..Default::default() }),
        status: Some(NodeStatus {
            capacity: Some(status.capacity.clone()),
            allocatable: Some(status.allocatable.clone()),
            conditions: Some(vec![NodeCondition {
                type_: "Ready".into(),
                status: "True".into(),
                ..Default::default()
            }]),
            ..Default::default()
        }),
    }
}

/// One second: the cluster's controllers, the cloud's view handed to the planner, the planner, and its effects
/// carried out by the shipped executor — launches and terminations through the AWS cloud port, the rest into the
/// in-memory cluster; each launched instance's kubelet registers its Node.
async fn tick(h: &mut Harness, cloud: &mut AwsProvider) {
    h.now += 1_000;
    h.cluster.reconcile_deployments();
    h.cluster.schedule_pending();
    h.controller.set_class_catalogs(cloud.catalogs(h.now));
    cloud.refresh_instances().await.unwrap();
    h.controller.set_live_instances(cloud.live_provider_ids().unwrap());
    let m = manifests(&h.cluster);
    let effects = h.controller.plan(&m, h.now);
    let report = h.apply_via(effects, cloud).await;
    assert!(report.failed.is_empty(), "{:?}", report.failed);
    for o in &report.outcomes {
        if let Outcome::Launched { claim } = o {
            let node = kubelet_node(h, claim);
            h.cluster.nodes.insert(node.metadata.name.clone().unwrap(), node);
        }
    }
}

async fn run_until(h: &mut Harness, cloud: &mut AwsProvider, what: &str, limit: u32, cond: impl Fn(&Harness) -> bool) {
    for _ in 0..limit {
        if cond(h) {
            return;
        }
        tick(h, cloud).await;
    }
    panic!("{what}: not within {limit}s; claims {:?}", h.cluster.nodeclaims.keys().collect::<Vec<_>>());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pending_pods_to_ec2_instances_and_back_to_zero() {
    let moto = moto::Moto::start();
    let sdk = moto.sdk().await;
    let cluster = ClusterInfo {
        name: "demo".into(),
        endpoint: Some("https://api".into()),
        ca_bundle: None,
        service_cidr: Some("10.100.0.0/16".into()),
    };
    let cloud = Arc::new(AwsCloud::new(
        &sdk,
        cluster,
        AliasContext { k8s_version: "1.33".into(), ssm_prefix: "/aws/service".into() },
    ));
    let mut provider = AwsProvider::new(cloud.clone(), None);
    cloud.refresh_types().await.unwrap();
    cloud.refresh_prices().await;

    // The network and the EC2NodeClass, resolved as the upkeep does.
    let ec2 = &cloud.ec2;
    let vpc = ec2.create_vpc().cidr_block("10.0.0.0/16").send().await.unwrap().vpc.unwrap().vpc_id.unwrap();
    let tag = |k: ResourceType| {
        TagSpecification::builder()
            .resource_type(k)
            .tags(Tag::builder().key("karpenter.sh/discovery").value("demo").build())
            .build()
    };
    ec2.create_subnet()
        .vpc_id(&vpc)
        .cidr_block("10.0.16.0/20")
        .availability_zone("us-east-1a")
        .tag_specifications(tag(ResourceType::Subnet))
        .send()
        .await
        .unwrap();
    ec2.create_security_group()
        .group_name("nodes")
        .description("nodes")
        .vpc_id(&vpc)
        .tag_specifications(tag(ResourceType::SecurityGroup))
        .send()
        .await
        .unwrap();
    let image = ec2
        .describe_images()
        .owners("amazon")
        .send()
        .await
        .unwrap()
        .images
        .unwrap()
        .into_iter()
        .find(|i| i.architecture.as_ref().map(|a| a.as_str()) == Some("x86_64"))
        .unwrap()
        .image_id
        .unwrap();
    let nc: EC2NodeClass = serde_yaml::from_str(&format!(
        "apiVersion: karpenter.k8s.aws/v1\nkind: EC2NodeClass\nmetadata: {{name: default}}\nspec:\n  instanceProfile: NodeProfile\n  subnetSelectorTerms: [{{tags: {{karpenter.sh/discovery: demo}}}}]\n  securityGroupSelectorTerms: [{{tags: {{karpenter.sh/discovery: demo}}}}]\n  amiSelectorTerms: [{{id: {image}}}]\n"
    ))
    .unwrap();
    let status = cloud.resolve_nodeclass(&nc).await.unwrap();

    let mut h = Harness::with_objects(Mode::Approve, OBJECTS);
    // The class as the API server holds it once the upkeep wrote its status: its NodePool's NodeClassReady reads it.
    let mut nc = nc;
    nc.status = Some(status);
    h.cluster.nodeclasses.insert("default".into(), nc);
    let fallback = Arc::new(aws_catalog("us-east-1", None, None, 0).unwrap());
    h.controller = Controller::new(fallback, Mode::Approve, h.now).with_provider_prefix(PROVIDER_PREFIX);

    run_until(&mut h, &mut provider, "all pods bound", 180, Harness::all_bound).await;
    let listed = cloud.refresh_instances().await.unwrap();
    assert!(h.cluster.nodeclaims.len() >= 2, "6 × 1 CPU on 4-CPU m5.xlarge");
    assert_eq!(listed.len(), h.cluster.nodeclaims.len(), "one instance per claim, none doubled");
    for c in h.cluster.nodeclaims.values() {
        let pid = c.provider_id().unwrap();
        let i = listed.iter().find(|i| i.provider_id() == pid).expect("the claim's instance");
        assert_eq!(i.instance_type, "m5.xlarge");
        assert_eq!(i.tags.get("karpenter.sh/nodeclaim").map(String::as_str), Some(c.name()));
        assert_eq!(
            c.metadata.labels.as_ref().unwrap().get(labels::INSTANCE_TYPE).map(String::as_str),
            Some("m5.xlarge")
        );
    }

    h.scale(0);
    run_until(&mut h, &mut provider, "an emptiness proposal", 180, |h| {
        h.controller.records().iter().any(|r| r.state == CommandState::AwaitingApproval)
    })
    .await;
    // Approve each proposal as it comes (budgets may take the nodes a few at a time).
    for _ in 0..600 {
        if h.cluster.nodeclaims.is_empty() {
            break;
        }
        let waiting: Vec<String> = h
            .controller
            .records()
            .iter()
            .filter(|r| r.state == CommandState::AwaitingApproval)
            .map(|r| r.id.clone())
            .collect();
        for id in waiting {
            let m = manifests(&h.cluster);
            if let Ok((effects, _)) = h.controller.approve(&m, &id, h.now) {
                h.apply_via(effects, &mut provider).await;
            }
        }
        tick(&mut h, &mut provider).await;
    }
    assert!(h.cluster.nodeclaims.is_empty(), "claims left: {:?}", h.cluster.nodeclaims.keys().collect::<Vec<_>>());
    assert!(cloud.refresh_instances().await.unwrap().is_empty(), "every instance terminated");
    assert!(h.cluster.nodes.is_empty());
}
