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
        takeover: true,
        lease_namespace: "kube-system".into(),
    };
    let mut p = prepare(&opts, |_| false).await.expect("prepared");
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
    p.release().await;
    let _ = std::fs::remove_dir_all(&dir);
}
