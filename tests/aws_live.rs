//! `karpenter-tui --cloud aws` wired end to end, short of a terminal: the live backend's preparation against a fake
//! API server (kubeconfig, rights, upstream detection, watches) and moto (AWS configuration from the environment
//! as a user's shell gives it, instance types, prices), then one acting tick that resolves the cluster's
//! EC2NodeClass in EC2 and writes its status back through the API server.

mod fake_apiserver;
mod moto;

use std::time::Duration;

use fake_apiserver::{FakeApi, eventually};
use karpenter_tui::aws::config::AwsOptions;
use karpenter_tui::cli::live_dashboard::{AwsChoice, CloudChoice, LiveOptions, prepare};
use karpenter_tui::engine::catalog::aws::aws_catalog;
use karpenter_tui::engine::disruption::gate::Mode;
use karpenter_tui::kube::connect::ConnectOptions;

const NODECLASSES: &str = "apis/karpenter.k8s.aws/v1/ec2nodeclasses";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cloud_aws_prepares_acts_and_writes_the_nodeclass_status() {
    let moto = moto::Moto::start();
    // The AWS configuration comes from the environment, as in a user's shell (this binary has this one test).
    // SAFETY: set before anything here reads the environment, and no other test shares this process.
    unsafe {
        std::env::set_var("AWS_ENDPOINT_URL", &moto.url);
        std::env::set_var("AWS_ACCESS_KEY_ID", "testing");
        std::env::set_var("AWS_SECRET_ACCESS_KEY", "testing");
        std::env::set_var("AWS_EC2_METADATA_DISABLED", "true");
        std::env::remove_var("AWS_PROFILE");
    }
    let sdk = moto.sdk().await;
    let nc = moto::network(&aws_sdk_ec2::Client::new(&sdk), &aws_sdk_iam::Client::new(&sdk), "demo").await;

    let fake = FakeApi::start().await;
    fake.put(NODECLASSES, serde_json::to_value(&nc).unwrap());
    let dir = std::env::temp_dir().join(format!("karpenter-tui-aws-live-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = dir.join("config");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters: [{{name: fake, cluster: {{server: 'http://{}'}}}}]\n\
             users: [{{name: me, user: {{}}}}]\ncontexts: [{{name: fake, context: {{cluster: fake, user: me}}}}]\n\
             current-context: fake\n",
            fake.addr
        ),
    )
    .unwrap();

    let opts = LiveOptions {
        connect: ConnectOptions {
            kubeconfig: Some(kubeconfig),
            context: None,
            cluster_name: Some("demo".into()),
            in_cluster: false,
        },
        readonly: false,
        theme: None,
        catalog: aws_catalog("us-east-1", None, None, 0).unwrap(),
        sync_timeout: Duration::from_secs(20),
        cloud: Some(CloudChoice::Aws(AwsChoice {
            aws: AwsOptions { profile: None, region: Some("us-east-1".into()) },
            service_cidr: Some("10.100.0.0/16".into()),
            ..Default::default()
        })),
        mode: Mode::Approve,
        settings: Default::default(),
        feature_gates: None,
        packing: None,
        karpenter_version: None,
        scheduler_config: None,
        legacy_node_repair: false,
        repairs_without_approval: false,
        takeover: true,
        lease_namespace: "kube-system".into(),
    };
    let mut p = prepare(&opts, |_| false).await.expect("prepared");
    // The dashboard's `prepare` returns at the first list; the engine is fed only once every kind is listed.
    p.watches.wait_synced(Duration::from_secs(30)).await.expect("every kind listed");
    assert_eq!(p.observe_reason, None, "acts: a cloud, every right, no upstream Karpenter");
    let mut acting = p.acting.take().expect("acting");
    assert_eq!(acting.cloud.name(), "aws");
    let cloud = acting.upkeep.as_ref().expect("the AWS cloud's upkeep").cloud.clone();
    assert!(cloud.catalog_for(None, 0).is_some(), "instance types discovered at start");
    assert_eq!(
        cloud.cluster.endpoint.as_deref(),
        Some(format!("http://{}", fake.addr).as_str()),
        "from the kubeconfig"
    );

    fake.clear_requests();
    let m = p.watches.cache.lock().unwrap().manifests();
    assert_eq!(m.nodeclasses.len(), 1, "the class came through the watch");
    let report = acting.tick(&m, chrono::Utc::now().timestamp_millis()).await;
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    let status_write = fake
        .writes()
        .into_iter()
        .find(|r| r.method == "PATCH" && r.path == "/apis/karpenter.k8s.aws/v1/ec2nodeclasses/default/status")
        .expect("the status written through the API server");
    let conditions = status_write.body["status"]["conditions"].as_array().unwrap().clone();
    assert!(conditions.iter().any(|c| c["type"] == "Ready" && c["status"] == "True"), "{conditions:?}");
    assert!(status_write.body["status"]["subnets"].as_array().is_some_and(|s| s.len() == 2));
    let cache = p.watches.cache.clone();
    eventually(5, "the written status seen by the watch", || {
        cache.lock().unwrap().manifests().nodeclasses[0].status.is_some()
    })
    .await;

    // An instance launched into a capacity reservation that has since ended: EC2 lists it without a reservation
    // (moto never reports one), so the next tick's instance list relabels its claim and node on-demand through the
    // API server, dropping the reservation's id and type and keeping `-interruptible`.
    let mut launch_claim = karpenter_tui::engine::api::NodeClaim::new(
        "default-rsv01",
        karpenter_tui::engine::api::nodeclaim::NodeClaimSpec::default(),
    );
    launch_claim.metadata.labels = Some([("karpenter.sh/nodepool".to_string(), "default".to_string())].into());
    launch_claim.spec.node_class_ref.name = "default".into();
    launch_claim.spec.node_class_ref.kind = "EC2NodeClass".into();
    launch_claim.spec.node_class_ref.group = "karpenter.k8s.aws".into();
    launch_claim.spec.requirements = serde_json::from_value(serde_json::json!([
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
        {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large"]},
        {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}
    ]))
    .unwrap();
    let launched = cloud.launch(&launch_claim).await.expect("an instance");
    let pid = launched.provider_id.clone();
    let reserved_labels = serde_json::json!({
        "karpenter.sh/nodepool": "default", "karpenter.sh/capacity-type": "reserved",
        "karpenter.k8s.aws/capacity-reservation-id": "cr-0aaaa",
        "karpenter.k8s.aws/capacity-reservation-type": "default",
        "karpenter.k8s.aws/capacity-reservation-interruptible": "false",
        "node.kubernetes.io/instance-type": "m5.large", "topology.kubernetes.io/zone": launched.zone,
        "kubernetes.io/arch": "amd64", "karpenter.sh/registered": "true", "karpenter.sh/initialized": "true"
    });
    let cond = |t: &str| serde_json::json!({"type": t, "status": "True", "reason": t, "message": "", "lastTransitionTime": "2026-01-01T00:00:05Z"});
    fake.put("apis/karpenter.sh/v1/nodepools", serde_json::json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
        "metadata": {"name": "default", "uid": "9d5e-pool", "generation": 1, "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"disruption": {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "Never"},
                 "template": {"spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                                       "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["reserved", "on-demand"]}]}}}
    }));
    fake.put("apis/karpenter.sh/v1/nodeclaims", serde_json::json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": "default-rsv01", "uid": "4f1c-claim", "generation": 1, "creationTimestamp": "2026-01-01T00:00:00Z",
                     "finalizers": ["karpenter.sh/termination"], "labels": reserved_labels},
        "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                 "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["reserved"]},
                                  {"key": "karpenter.k8s.aws/capacity-reservation-id", "operator": "In", "values": ["cr-0aaaa"]}],
                 "resources": {"requests": {"cpu": "1", "pods": "1"}}},
        "status": {"providerID": pid, "nodeName": "ip-10-0-16-9.ec2.internal",
                   "capacity": {"cpu": "2", "memory": "8Gi", "pods": "29"}, "allocatable": {"cpu": "1930m", "memory": "7Gi", "pods": "29"},
                   "conditions": [cond("Launched"), cond("Registered"), cond("Initialized")]}
    }));
    fake.put("api/v1/nodes", serde_json::json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "ip-10-0-16-9.ec2.internal", "uid": "77aa-node", "creationTimestamp": "2026-01-01T00:00:20Z",
                     "labels": reserved_labels, "finalizers": ["karpenter.sh/termination"]},
        "spec": {"providerID": pid},
        "status": {"capacity": {"cpu": "2", "memory": "8Gi", "pods": "29"}, "allocatable": {"cpu": "1930m", "memory": "7Gi", "pods": "29"},
                   "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "lastHeartbeatTime": "2026-01-01T00:00:30Z", "lastTransitionTime": "2026-01-01T00:00:20Z"}]}
    }));
    eventually(5, "the claim and node seen by the watches", || {
        let m = cache.lock().unwrap().manifests();
        m.nodeclaims.len() == 1 && m.nodes.len() == 1
    })
    .await;
    fake.clear_requests();
    let m = cache.lock().unwrap().manifests();
    // Past the garbage collector's period, so the instances are listed.
    let report = acting.tick(&m, chrono::Utc::now().timestamp_millis() + 60_000).await;
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    for (collection, name) in
        [("apis/karpenter.sh/v1/nodeclaims", "default-rsv01"), ("api/v1/nodes", "ip-10-0-16-9.ec2.internal")]
    {
        let obj = fake.get(collection, None, name).expect("still there");
        let l = &obj["metadata"]["labels"];
        assert_eq!(l["karpenter.sh/capacity-type"], "on-demand", "{name}: {l}");
        assert!(l.get("karpenter.k8s.aws/capacity-reservation-id").is_none(), "{name}: {l}");
        assert!(l.get("karpenter.k8s.aws/capacity-reservation-type").is_none(), "{name}: {l}");
        assert_eq!(l["karpenter.k8s.aws/capacity-reservation-interruptible"], "false", "{name}: {l}");
        assert_eq!(l["karpenter.sh/nodepool"], "default", "other labels kept: {l}");
    }
    p.release().await;
    let _ = std::fs::remove_dir_all(&dir);
}
