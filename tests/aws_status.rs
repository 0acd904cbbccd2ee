//! What an EC2NodeClass's status and the AWS cloud's warnings tell an operator, against moto through the real SDK:
//! upstream's condition reasons and plain messages (never a Rust Debug dump), the SSM parameters an alias read,
//! validation waiting on the other conditions, a missing IAM role named and nothing left behind in IAM, a Pricing
//! API failure said with what stands in, and another provider's claims left alone.

use crate::moto;

use std::sync::Arc;

use karpenter_tui::aws::cloud::{AwsCloud, PROVIDER_PREFIX};
use karpenter_tui::aws::interruption::{Kind, Message};
use karpenter_tui::aws::launch::ClusterInfo;
use karpenter_tui::aws::nodeclass::{AliasContext, resolve, status};
use karpenter_tui::controller::{Controller, Effect};
use karpenter_tui::engine::api::common::Condition;
use karpenter_tui::engine::api::{EC2NodeClass, NodeClaim};
use karpenter_tui::engine::catalog::aws::aws_catalog;
use karpenter_tui::engine::disruption::gate::Mode;
use karpenter_tui::engine::lifecycle::LaunchError;
use karpenter_tui::engine::manifests::ClusterObjects;
use moto::faults::Faults;

const CLUSTER: &str = "demo";

fn cluster() -> ClusterInfo {
    ClusterInfo {
        name: CLUSTER.into(),
        endpoint: Some("https://api.demo.example".into()),
        ca_bundle: Some("Q0E=".into()),
        service_cidr: Some("10.100.0.0/16".into()),
    }
}

fn alias(k8s: &str) -> AliasContext {
    AliasContext { k8s_version: k8s.into(), ssm_prefix: "/aws/service".into() }
}

fn cond(conditions: &[Condition], t: &str) -> Condition {
    conditions.iter().find(|c| c.type_ == t).unwrap_or_else(|| panic!("no {t} in {conditions:?}")).clone()
}

/// No message reads like a Rust value: no struct dumps, no `Some(..)`, no escaped quotes.
fn assert_plain(conditions: &[Condition]) {
    for c in conditions {
        let m = c.message.as_deref().unwrap_or("");
        for debris in ["Some(", "None", "{ ", "Term {", "\\\"", "Error {"] {
            assert!(!m.contains(debris), "{} message has {debris:?}: {m}", c.type_);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_alias_that_resolves_nothing_names_the_ssm_parameters_it_read() {
    let moto = moto::Moto::start();
    let sdk = moto.sdk().await;
    let ec2 = aws_sdk_ec2::Client::new(&sdk);
    let ssm = aws_sdk_ssm::Client::new(&sdk);
    let mut nc = moto::network(&ec2, &aws_sdk_iam::Client::new(&sdk), CLUSTER).await;
    nc.spec.ami_selector_terms = vec![serde_yaml::from_str("{alias: bottlerocket@latest}").unwrap()];
    // moto publishes no EKS parameters: every Bottlerocket variant is missing.
    let st = status(&resolve(&ec2, &ssm, &nc, &alias("1.31")).await.unwrap(), "t");
    let amis = cond(&st.conditions, "AMIsReady");
    assert_eq!((amis.status.as_str(), amis.reason.as_deref()), ("False", Some("AMINotFound")));
    let m = amis.message.unwrap();
    assert!(
        m.starts_with(
            "AMISelector did not match any AMIs (amiSelectorTerms: [{alias: bottlerocket@latest}]); alias \
             bottlerocket@latest (Kubernetes 1.31): SSM parameters "
        ),
        "{m}"
    );
    for p in [
        "/aws/service/bottlerocket/aws-k8s-1.31/x86_64/latest/image_id",
        "/aws/service/bottlerocket/aws-k8s-1.31/arm64/latest/image_id",
        "/aws/service/bottlerocket/aws-k8s-1.31-nvidia/x86_64/latest/image_id",
    ] {
        assert!(m.contains(p), "{p} named: {m}");
    }
    assert!(m.ends_with("do not exist"), "{m}");
    assert_plain(&st.conditions);

    // A parameter that exists but names an image EC2 does not have says so, with the image.
    ssm.put_parameter()
        .name("/team/node-ami")
        .value("ami-0000000000000dead")
        .r#type(aws_sdk_ssm::types::ParameterType::String)
        .send()
        .await
        .unwrap();
    nc.spec.ami_selector_terms = vec![serde_yaml::from_str("{ssmParameter: /team/node-ami}").unwrap()];
    let st = status(&resolve(&ec2, &ssm, &nc, &alias("1.31")).await.unwrap(), "t");
    let m = cond(&st.conditions, "AMIsReady").message.unwrap();
    assert!(
        m.ends_with(
            "ssmParameter: SSM parameter /team/node-ami names image ami-0000000000000dead, which DescribeImages \
             does not return as an x86_64 or arm64 image"
        ),
        "{m}"
    );
    assert_plain(&st.conditions);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validation_waits_on_the_other_conditions_and_ready_names_the_unhealthy_ones() {
    let moto = moto::Moto::start();
    let faults = Faults::default();
    let sdk = moto.sdk_with(&faults).await;
    let cloud = AwsCloud::new(&sdk, cluster(), alias("1.33"));
    cloud.refresh_types().await.unwrap();
    let mut nc = moto::network(&cloud.ec2, &cloud.iam, CLUSTER).await;
    nc.spec.subnet_selector_terms = vec![serde_yaml::from_str("{tags: {karpenter.sh/discovery: nowhere}}").unwrap()];
    let st = cloud.resolve_nodeclass(&nc).await.unwrap();
    let c = |t: &str| cond(&st.conditions, t);
    assert_eq!(
        (c("SubnetsReady").status.as_str(), c("SubnetsReady").reason.as_deref()),
        ("False", Some("SubnetsNotFound"))
    );
    assert_eq!(
        c("SubnetsReady").message.as_deref(),
        Some(
            "SubnetSelector did not match any Subnets (subnetSelectorTerms: [{tags: {karpenter.sh/discovery: \
             nowhere}}])"
        )
    );
    for ok in ["SecurityGroupsReady", "AMIsReady", "InstanceProfileReady"] {
        assert_eq!((c(ok).status.as_str(), c(ok).reason.as_deref()), ("True", Some(ok)));
    }
    let v = c("ValidationSucceeded");
    assert_eq!((v.status.as_str(), v.reason.as_deref()), ("False", Some("DependenciesNotReady")));
    assert_eq!(v.message.as_deref(), Some("Awaiting AMI, Instance Profile, Security Group, and Subnet resolution"));
    let ready = c("Ready");
    assert_eq!((ready.status.as_str(), ready.reason.as_deref()), ("False", Some("UnhealthyDependents")));
    assert_eq!(ready.message.as_deref(), Some("SubnetsReady=False, ValidationSucceeded=False"));
    assert_eq!(faults.calls("CreateFleet") + faults.calls("CreateLaunchTemplate"), 0, "no dry runs while waiting");
    assert_plain(&st.conditions);

    // Claims of the class are refused with the parts that are not ready and why.
    let mut claim = NodeClaim::new("default-w0001", Default::default());
    claim.metadata.labels = Some([("karpenter.sh/nodepool".to_string(), "default".to_string())].into());
    claim.spec.node_class_ref.name = "default".into();
    match cloud.launch(&claim).await {
        Err(LaunchError::NodeClassNotReady(m)) => assert_eq!(
            m,
            "EC2NodeClass default is not ready: SubnetsReady=False: SubnetSelector did not match any Subnets \
             (subnetSelectorTerms: [{tags: {karpenter.sh/discovery: nowhere}}])"
        ),
        other => panic!("{other:?}"),
    }

    // Fixed, everything is True, the dry runs ran, and Ready says so in upstream's words.
    nc.spec.subnet_selector_terms = vec![serde_yaml::from_str("{tags: {karpenter.sh/discovery: demo}}").unwrap()];
    nc.metadata.generation = Some(2);
    let st = cloud.resolve_nodeclass(&nc).await.unwrap();
    for c in &st.conditions {
        assert_eq!((c.status.as_str(), c.reason.as_deref()), ("True", Some(c.type_.as_str())), "{c:?}");
    }
    assert!(faults.calls("CreateFleet") >= 1, "validated once the rest resolved");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_role_missing_from_iam_is_named_and_leaves_no_instance_profile() {
    let moto = moto::Moto::start();
    let sdk = moto.sdk().await;
    let cloud = AwsCloud::new(&sdk, cluster(), alias("1.33"));
    cloud.refresh_types().await.unwrap();
    let mut nc: EC2NodeClass = moto::network(&cloud.ec2, &cloud.iam, CLUSTER).await;
    nc.spec.role = Some("NoSuchNodeRole".into());
    let profiles = || async {
        let out = cloud.iam.list_instance_profiles().path_prefix("/karpenter/").send().await.unwrap();
        out.instance_profiles.iter().map(|p| (p.instance_profile_name.clone(), p.roles.len())).collect::<Vec<_>>()
    };

    let st = cloud.resolve_nodeclass(&nc).await.unwrap();
    let ip = cond(&st.conditions, "InstanceProfileReady");
    assert_eq!((ip.status.as_str(), ip.reason.as_deref()), ("False", Some("RoleNotFound")));
    assert_eq!(
        ip.message.as_deref(),
        Some(
            "IAM role NoSuchNodeRole (spec.role) was not found; nodes need an instance profile holding an existing \
             role"
        )
    );
    assert_eq!(st.instance_profile, None);
    assert_eq!(
        cond(&st.conditions, "Ready").message.as_deref(),
        Some("InstanceProfileReady=False, ValidationSucceeded=False")
    );
    assert!(profiles().await.is_empty(), "the profile made for the missing role was deleted again");
    assert_plain(&st.conditions);

    // With the right role the profile is made; switching to a missing role keeps the working one in it.
    nc.spec.role = Some("KarpenterNodeRole".into());
    let st = cloud.resolve_nodeclass(&nc).await.unwrap();
    let name = st.instance_profile.clone().expect("a profile");
    assert_eq!(profiles().await, vec![(name.clone(), 1)]);
    nc.spec.role = Some("NoSuchNodeRole".into());
    let st = cloud.resolve_nodeclass(&nc).await.unwrap();
    assert_eq!(cond(&st.conditions, "InstanceProfileReady").reason.as_deref(), Some("RoleNotFound"));
    let held = cloud.iam.get_instance_profile().instance_profile_name(&name).send().await.unwrap();
    let roles: Vec<String> = held.instance_profile.unwrap().roles.iter().map(|r| r.role_name.clone()).collect();
    assert_eq!(roles, vec!["KarpenterNodeRole".to_string()], "running nodes keep their role");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pricing_api_answering_html_is_said_plainly_with_the_table_that_stands_in() {
    let moto = moto::Moto::start();
    let faults = Faults::default();
    let sdk = moto.sdk_with(&faults).await;
    // moto itself has no Pricing API: whatever it answers is said as such, not as a parser's complaint.
    let cloud = AwsCloud::new(&sdk, cluster(), alias("1.33"));
    let errors: Vec<String> = cloud.refresh_prices().await.iter().map(ToString::to_string).collect();
    let date = karpenter_tui::engine::catalog::aws::static_price_date().expect("the table has a date");
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(errors[0].starts_with("the Pricing API could not be read (GetProducts: HTTP "), "{}", errors[0]);
    assert!(errors[0].contains("with an HTML page") && !errors[0].contains("token"), "{}", errors[0]);
    assert!(errors[0].ends_with(&format!("on-demand prices come from the embedded table dated {date}")));

    // A proxy's 404 page, say.
    faults.rule(
        "GetProducts",
        Box::new(|_| {
            Some((
                404,
                "<!DOCTYPE html>\n<html><head><title>404 Not Found</title></head><body><h1>Not Found</h1></body>\
                 </html>"
                    .to_string(),
            ))
        }),
    );
    let errors: Vec<String> = cloud.refresh_prices().await.iter().map(ToString::to_string).collect();
    assert_eq!(
        errors,
        vec![format!(
            "the Pricing API could not be read (GetProducts: HTTP 404 with an HTML page (\"404 Not Found\") instead \
             of an AWS answer); on-demand prices come from the embedded table dated {date}"
        )]
    );
}

fn kwok_claim(name: &str) -> NodeClaim {
    serde_yaml::from_str(&format!(
        "apiVersion: karpenter.sh/v1\nkind: NodeClaim\nmetadata: {{name: {name}, uid: uid-{name}, labels: \
         {{karpenter.sh/nodepool: kwok, karpenter.sh/capacity-type: spot, node.kubernetes.io/instance-type: m5.large, \
         topology.kubernetes.io/zone: us-east-1a}}}}\nspec:\n  nodeClassRef: {{group: karpenter.kwok.sh, kind: \
         KWOKNodeClass, name: default}}\n  requirements: []\n  resources: {{requests: {{cpu: '1'}}}}\n"
    ))
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_providers_claims_are_neither_launched_nor_touched() {
    let moto = moto::Moto::start();
    let faults = Faults::default();
    let sdk = moto.sdk_with(&faults).await;
    let cloud = Arc::new(AwsCloud::new(&sdk, cluster(), alias("1.33")));
    cloud.refresh_types().await.unwrap();
    let nc = moto::network(&cloud.ec2, &cloud.iam, CLUSTER).await;
    cloud.resolve_nodeclass(&nc).await.unwrap();

    // A KWOK claim whose class has the EC2NodeClass's name: not launched on EC2.
    let pending = kwok_claim("kwok-pending");
    let fleets = faults.calls("CreateFleet");
    match cloud.launch(&pending).await {
        Err(LaunchError::Other(m)) => assert_eq!(
            m,
            "NodeClaim kwok-pending references KWOKNodeClass default (karpenter.kwok.sh), not an EC2NodeClass: this \
             cloud launches only EC2NodeClass claims"
        ),
        other => panic!("{other:?}"),
    }
    assert_eq!(faults.calls("CreateFleet"), fleets, "nothing sent to EC2");

    // A launched KWOK claim, its Node, and an interruption naming an instance id its provider id happens to end
    // with: upkeep writes nothing to either, and keeps no spot offering out for it.
    let mut running = kwok_claim("kwok-running");
    running.status = Some(serde_yaml::from_str("{providerID: 'kwok://i-0123456789abcdef0'}").unwrap());
    let node: k8s_openapi::api::core::v1::Node =
        serde_yaml::from_str("metadata: {name: i-0123456789abcdef0}\nspec: {providerID: 'kwok://i-0123456789abcdef0'}")
            .unwrap();
    let now = chrono::Utc::now().timestamp_millis();
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let mut port = karpenter_tui::aws::cloud::AwsProvider::new(cloud.clone(), Some(rx));
    let fallback = Arc::new(aws_catalog("us-east-1", None, None, 0).unwrap());
    let mut controller = Controller::new(fallback, Mode::Approve, now).with_provider_prefix(PROVIDER_PREFIX);
    let m = ClusterObjects {
        nodeclasses: vec![nc.clone()],
        nodeclaims: vec![running.clone().into()],
        nodes: vec![node.into()],
        ..Default::default()
    };
    let spot_1a = || {
        let catalog = cloud.catalog_for(None, chrono::Utc::now().timestamp_millis()).unwrap().unwrap();
        let m5 = catalog.get("m5.large").unwrap().clone();
        m5.offerings.iter().find(|o| o.capacity_type == "spot" && o.zone == "us-east-1a").map(|o| o.available)
    };
    assert_eq!(spot_1a(), Some(true));
    let (answer, _result) = tokio::sync::oneshot::channel();
    let msg = Message {
        kind: Kind::SpotInterruption,
        id: "evt-kwok".into(),
        time: "2026-11-24T00:00:00Z".into(),
        instance_ids: vec!["i-0123456789abcdef0".into()],
    };
    tx.send((msg, answer)).unwrap();
    let notices = karpenter_tui::controller::cloud::CloudProvider::interruptions(
        &mut port,
        &mut m.nodeclaims.iter().map(|c| &**c),
        now,
    );
    let taken = notices.len();
    let mut effects = Vec::new();
    for n in notices {
        effects.extend(controller.interruption(&m.view(), &n.message, now + 120_000));
        (n.answer)(Ok(()));
    }
    let touches = |e: &Effect| match e {
        Effect::DeleteNodeClaim { name, .. } => name == "kwok-running",
        Effect::DeleteNode { name } => name == "i-0123456789abcdef0",
        Effect::DeleteInstance { provider_id } => provider_id.starts_with("kwok://"),
        Effect::PatchClaimStatus { name, .. } | Effect::PatchClaimMetadata { name, .. } => name == "kwok-running",
        _ => false,
    };
    assert!(!effects.iter().any(touches), "{effects:?}");
    assert_eq!(taken, 1, "the notice is taken (and dropped as not ours)");
    assert!(controller.interruptions.is_empty(), "{:?}", controller.interruptions);
    assert_eq!(spot_1a(), Some(true), "the KWOK claim's spot offering is not kept out");
    assert!(cloud.class_drift(m.nodeclaims.iter().map(|c| &**c), now).is_empty());
}
