//! EC2NodeClass resolution against moto's EC2 and SSM through the real SDK: subnets, security groups and AMIs found by
//! tags, ids, names, an SSM parameter and an alias (moto lacks the EKS parameters, so the alias prefix is injected),
//! turned into the status upstream writes; a selector that matches nothing is named in its condition.

use crate::moto;

use aws_sdk_ec2::types::{ResourceType, Tag, TagSpecification};
use karpenter_tui::aws::nodeclass::{AliasContext, resolve, status};
use karpenter_tui::engine::api::EC2NodeClass;

fn tags(pairs: &[(&str, &str)]) -> TagSpecification {
    let mut b = TagSpecification::builder();
    for (k, v) in pairs {
        b = b.tags(Tag::builder().key(*k).value(*v).build());
    }
    b.build()
}

fn class(yaml: &str) -> EC2NodeClass {
    serde_yaml::from_str(yaml).expect("an EC2NodeClass")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn selectors_resolve_to_status_and_empty_ones_are_named() {
    let moto = moto::Moto::start();
    let sdk = moto.sdk().await;
    let ec2 = aws_sdk_ec2::Client::new(&sdk);
    let ssm = aws_sdk_ssm::Client::new(&sdk);

    let vpc = ec2.create_vpc().cidr_block("10.0.0.0/16").send().await.unwrap().vpc.unwrap().vpc_id.unwrap();
    let subnet = |cidr: &'static str, zone: &'static str, tagged: bool| {
        let ec2 = ec2.clone();
        let vpc = vpc.clone();
        async move {
            let mut b = ec2.create_subnet().vpc_id(vpc).cidr_block(cidr).availability_zone(zone);
            if tagged {
                let mut spec = tags(&[("karpenter.sh/discovery", "demo")]);
                spec.resource_type = Some(ResourceType::Subnet);
                b = b.tag_specifications(spec);
            }
            b.send().await.unwrap().subnet.unwrap().subnet_id.unwrap()
        }
    };
    let small = subnet("10.0.1.0/24", "us-east-1a", true).await;
    let big = subnet("10.0.16.0/20", "us-east-1b", true).await;
    let _other = subnet("10.0.2.0/24", "us-east-1c", false).await;

    let mut sg_tags = tags(&[("karpenter.sh/discovery", "demo")]);
    sg_tags.resource_type = Some(ResourceType::SecurityGroup);
    let sg = ec2
        .create_security_group()
        .group_name("nodes")
        .description("karpenter nodes")
        .vpc_id(&vpc)
        .tag_specifications(sg_tags)
        .send()
        .await
        .unwrap()
        .group_id
        .unwrap();

    // Two of moto's built-in Amazon images: one behind a custom SSM parameter, one behind the injected alias path.
    let images = ec2.describe_images().owners("amazon").send().await.unwrap().images.unwrap();
    let x86: Vec<_> = images.iter().filter(|i| i.architecture.as_ref().map(|a| a.as_str()) == Some("x86_64")).collect();
    let (param_ami, alias_ami) = (x86[0].image_id.clone().unwrap(), x86[1].image_id.clone().unwrap());
    ssm.put_parameter()
        .name("/team/node-ami")
        .value(&param_ami)
        .r#type(aws_sdk_ssm::types::ParameterType::String)
        .send()
        .await
        .unwrap();
    ssm.put_parameter()
        .name("/fake/eks/optimized-ami/1.33/amazon-linux-2023/x86_64/standard/recommended/image_id")
        .value(&alias_ami)
        .r#type(aws_sdk_ssm::types::ParameterType::String)
        .send()
        .await
        .unwrap();
    let ctx = AliasContext { k8s_version: "1.33".into(), ssm_prefix: "/fake".into() };

    let good = class(
        r#"
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: KarpenterNodeRole
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
  securityGroupSelectorTerms: [{name: nodes}]
  amiSelectorTerms: [{ssmParameter: /team/node-ami}]
"#,
    );
    let r = resolve(&ec2, &ssm, &good, &ctx).await.expect("resolves");
    let st = status(&r, "2026-11-24T12:00:00Z");
    let ids: Vec<&str> = st.subnets.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(ids, vec![big.as_str(), small.as_str()], "tagged subnets only, most free addresses first");
    assert_eq!(st.subnets[0].zone, "us-east-1b");
    assert_eq!(st.security_groups.iter().map(|g| g.id.as_str()).collect::<Vec<_>>(), vec![sg.as_str()]);
    assert_eq!(st.amis.len(), 1);
    assert_eq!(st.amis[0].id, param_ami);
    assert!(
        st.amis[0].requirements.iter().any(|q| q.key == "kubernetes.io/arch" && q.values[..] == ["amd64".to_string()])
    );
    let ready = st.conditions.iter().find(|c| c.type_ == "Ready").unwrap();
    assert_eq!(ready.status, "True", "{:?}", st.conditions);

    // An alias resolves through the (injected) EKS parameter path; variants without a parameter are skipped.
    let aliased = class(
        r#"
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: aliased}
spec:
  role: KarpenterNodeRole
  subnetSelectorTerms: [{id: SUBNET}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
  amiSelectorTerms: [{alias: al2023@latest}]
"#
        .replace("SUBNET", &small)
        .as_str(),
    );
    let st = status(&resolve(&ec2, &ssm, &aliased, &ctx).await.unwrap(), "t");
    assert_eq!(st.subnets.iter().map(|s| s.id.as_str()).collect::<Vec<_>>(), vec![small.as_str()]);
    assert_eq!(st.amis.iter().map(|a| a.id.as_str()).collect::<Vec<_>>(), vec![alias_ami.as_str()]);
    assert!(
        st.amis[0].requirements.iter().any(|q| q.key.ends_with("instance-gpu-count") && q.operator == "DoesNotExist")
    );

    // Selectors that match nothing: each part's condition names its terms, Ready is False.
    let empty = class(
        r#"
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: empty}
spec:
  role: KarpenterNodeRole
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: nowhere}}]
  securityGroupSelectorTerms: [{name: nodes}]
  amiSelectorTerms: [{name: no-such-image-*}]
"#,
    );
    let st = status(&resolve(&ec2, &ssm, &empty, &ctx).await.unwrap(), "t");
    let cond = |t: &str| st.conditions.iter().find(|c| c.type_ == t).unwrap().clone();
    assert_eq!(cond("SubnetsReady").status, "False");
    assert!(cond("SubnetsReady").message.unwrap().contains("nowhere"), "the message names the term");
    assert_eq!(cond("SecurityGroupsReady").status, "True");
    assert_eq!(cond("AMIsReady").status, "False");
    assert!(cond("AMIsReady").message.unwrap().contains("no-such-image-*"));
    assert_eq!(cond("Ready").status, "False");
}

/// The EKS parameters moto lacks, answered at the real `/aws/service` path by the fault-injecting wrapper: the
/// alias resolves without any test-only prefix, and variants EKS doesn't publish are skipped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eks_aliases_resolve_through_the_real_parameter_paths() {
    let moto = moto::Moto::start();
    let faults = moto::faults::Faults::default();
    let sdk = moto.sdk_with(&faults).await;
    let ec2 = aws_sdk_ec2::Client::new(&sdk);
    let ssm = aws_sdk_ssm::Client::new(&sdk);
    let images = ec2.describe_images().owners("amazon").send().await.unwrap().images.unwrap();
    let arch = |a: &str| {
        images
            .iter()
            .find(|i| i.architecture.as_ref().map(|x| x.as_str()) == Some(a))
            .unwrap()
            .image_id
            .clone()
            .unwrap()
    };
    let (x86, arm) = (arch("x86_64"), arch("arm64"));
    let published = [
        ("/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/x86_64/standard/recommended/image_id", x86.clone()),
        ("/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/arm64/standard/recommended/image_id", arm.clone()),
    ];
    faults.rule(
        "GetParameter",
        Box::new(move |body| {
            let name = serde_json::from_str::<serde_json::Value>(body).ok()?["Name"].as_str()?.to_string();
            let value = published.iter().find(|(n, _)| *n == name).map(|(_, v)| v.clone());
            Some(match value {
                Some(v) => (
                    200,
                    serde_json::json!({"Parameter": {"Name": name, "Type": "String", "Value": v, "Version": 1}})
                        .to_string(),
                ),
                None => (
                    400,
                    serde_json::json!({"__type": "ParameterNotFound", "message": format!("{name} not found")})
                        .to_string(),
                ),
            })
        }),
    );
    let nc = class(
        r#"
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: aliased}
spec:
  role: KarpenterNodeRole
  subnetSelectorTerms: [{id: subnet-x}]
  securityGroupSelectorTerms: [{id: sg-x}]
  amiSelectorTerms: [{alias: al2023@latest}]
"#,
    );
    let ctx = AliasContext { k8s_version: "1.33".into(), ssm_prefix: "/aws/service".into() };
    let st = status(&resolve(&ec2, &ssm, &nc, &ctx).await.unwrap(), "t");
    let mut ids: Vec<&str> = st.amis.iter().map(|a| a.id.as_str()).collect();
    ids.sort();
    let mut want = vec![x86.as_str(), arm.as_str()];
    want.sort();
    assert_eq!(ids, want, "standard x86_64 and arm64; the nvidia and neuron variants are not published here");
    assert!(faults.calls("GetParameter") >= 5, "every variant was asked for");
    let cond = st.conditions.iter().find(|c| c.type_ == "AMIsReady").unwrap();
    assert_eq!(cond.status, "True");
}

/// One `DescribeCapacityReservations` answer: (id, type, reservation type, end).
fn reservations_page(items: &[(&str, &str, &str, Option<&str>)]) -> String {
    let mut xml = String::from(
        r#"<DescribeCapacityReservationsResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><requestId>r</requestId><capacityReservationSet>"#,
    );
    for (id, it, kind, end) in items {
        xml.push_str(&format!(
            "<item><capacityReservationId>{id}</capacityReservationId><ownerId>123456789012</ownerId><instanceType>{it}</instanceType><availabilityZone>us-east-1a</availabilityZone><availableInstanceCount>2</availableInstanceCount><totalInstanceCount>4</totalInstanceCount><state>active</state><instanceMatchCriteria>targeted</instanceMatchCriteria><reservationType>{kind}</reservationType>{}</item>",
            end.map_or(String::new(), |e| format!("<endDate>{e}</endDate>"))
        ));
    }
    xml.push_str("</capacityReservationSet></DescribeCapacityReservationsResponse>");
    xml
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capacity_reservations_are_selected_into_the_status() {
    use karpenter_tui::aws::cloud::AwsCloud;
    use karpenter_tui::aws::launch::ClusterInfo;
    // moto has no capacity reservations: the wrapper answers DescribeCapacityReservations by what was asked.
    let moto = moto::Moto::start();
    let faults = moto::faults::Faults::default();
    let soon = (chrono::Utc::now() + chrono::Duration::minutes(30)).to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let end = soon.clone();
    faults.rule(
        "DescribeCapacityReservations",
        Box::new(move |body| {
            if body.contains("CapacityReservationId.1=cr-0aaaa") {
                Some((200, reservations_page(&[("cr-0aaaa", "m5.large", "default", None)])))
            } else if body.contains("CapacityReservationId.1=cr-0gone") {
                Some((400, "<Response><Errors><Error><Code>InvalidCapacityReservationId.NotFound</Code><Message>The capacity reservation 'cr-0gone' does not exist</Message></Error></Errors><RequestID>x</RequestID></Response>".into()))
            } else if body.contains("tag%3Ateam") && body.contains("state") {
                Some((200, reservations_page(&[("cr-0bbbb", "p5.48xlarge", "capacity-block", Some(&end))])))
            } else {
                None
            }
        }),
    );
    let sdk = moto.sdk_with(&faults).await;
    let cluster = ClusterInfo { name: "demo".into(), service_cidr: Some("10.100.0.0/16".into()), ..Default::default() };
    let cloud =
        AwsCloud::new(&sdk, cluster, AliasContext { k8s_version: "1.33".into(), ssm_prefix: "/aws/service".into() });
    let mut nc = moto::network(&cloud.ec2, &cloud.iam, "demo").await;
    nc.spec.capacity_reservation_selector_terms =
        serde_yaml::from_str("[{id: cr-0aaaa}, {id: cr-0gone}, {tags: {team: ml}, instanceMatchCriteria: targeted}]")
            .unwrap();
    let st = cloud.resolve_nodeclass(&nc).await.expect("resolves");
    let got: Vec<(&str, &str, &str)> = st
        .capacity_reservations
        .iter()
        .map(|r| (r.id.as_str(), r.reservation_type.as_str(), r.state.as_str()))
        .collect();
    assert_eq!(
        got,
        [("cr-0aaaa", "default", "active"), ("cr-0bbbb", "capacity-block", "expiring")],
        "the unknown id is skipped"
    );
    assert_eq!(st.capacity_reservations[0].instance_type, "m5.large");
    assert_eq!(st.capacity_reservations[0].owner_id, "123456789012");
    assert_eq!(st.capacity_reservations[1].end_time.as_deref(), Some(soon.as_str()));
    let cond = |t: &str| st.conditions.iter().find(|c| c.type_ == t).map(|c| c.status.clone());
    assert_eq!(cond("CapacityReservationsReady").as_deref(), Some("True"));
    // The status reads back as the upstream CRD writes it.
    let yaml = serde_yaml::to_string(&st).unwrap();
    for field in [
        "availabilityZone:",
        "instanceMatchCriteria: targeted",
        "ownerID:",
        "reservationType: capacity-block",
        "state: expiring",
        "endTime:",
    ] {
        assert!(yaml.contains(field), "{field} in\n{yaml}");
    }

    // A failing lookup leaves the condition Unknown and Ready not True; with the gate off nothing is looked up.
    faults.queue("DescribeCapacityReservations", Box::new(|_| (500, "<Response><Errors><Error><Code>InternalError</Code><Message>injected</Message></Error></Errors><RequestID>x</RequestID></Response>".into())));
    faults.queue("DescribeCapacityReservations", Box::new(|_| (500, "<Response><Errors><Error><Code>InternalError</Code><Message>injected</Message></Error></Errors><RequestID>x</RequestID></Response>".into())));
    faults.queue("DescribeCapacityReservations", Box::new(|_| (500, "<Response><Errors><Error><Code>InternalError</Code><Message>injected</Message></Error></Errors><RequestID>x</RequestID></Response>".into())));
    let st = cloud.resolve_nodeclass(&nc).await.expect("resolves");
    let cond = |t: &str| st.conditions.iter().find(|c| c.type_ == t).map(|c| c.status.clone());
    assert_eq!(cond("CapacityReservationsReady").as_deref(), Some("Unknown"));
    assert_ne!(cond("Ready").as_deref(), Some("True"));
    let before = faults.calls("DescribeCapacityReservations");
    let off = AwsCloud::new(
        &sdk,
        ClusterInfo { name: "demo".into(), service_cidr: Some("10.100.0.0/16".into()), ..Default::default() },
        AliasContext { k8s_version: "1.33".into(), ssm_prefix: "/aws/service".into() },
    )
    .with_reserved_capacity(false);
    let st = off.resolve_nodeclass(&nc).await.expect("resolves");
    assert!(
        st.capacity_reservations.is_empty() && !st.conditions.iter().any(|c| c.type_ == "CapacityReservationsReady")
    );
    assert_eq!(faults.calls("DescribeCapacityReservations"), before);
}
