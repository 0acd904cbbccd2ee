//! The AWS cloud provider against moto through the real SDK: discovery computed by the embedded catalog's
//! formulas, prices with their fallbacks, EC2NodeClass resolution gating launches, launch templates created,
//! reused and deleted when unused, CreateFleet launches tagged for this cluster, adoption instead of a second
//! launch, listing, garbage-collection candidates and termination. What moto can't do (capacity errors,
//! throttling, the Pricing API) goes through a fault-injecting wrapper around the SDK's HTTP client.

use crate::moto;

use std::collections::BTreeSet;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use karpenter_tui::aws::cloud::AwsCloud;
use karpenter_tui::aws::ec2;
use karpenter_tui::aws::launch::{ClusterInfo, TAG_NODECLAIM};
use karpenter_tui::aws::nodeclass::AliasContext;
use karpenter_tui::engine::api::NodeClaim;
use karpenter_tui::engine::api::common::NodeSelectorRequirementWithMinValues as Req;
use karpenter_tui::engine::api::nodeclaim::NodeClaimSpec;
use karpenter_tui::engine::catalog::PriceSource;
use karpenter_tui::engine::catalog::aws::aws_catalog;
use karpenter_tui::engine::lifecycle::LaunchError;
use moto::faults::{self, Faults};

const CLUSTER: &str = "demo";

fn cluster() -> ClusterInfo {
    ClusterInfo {
        name: CLUSTER.into(),
        endpoint: Some("https://api.demo.example".into()),
        ca_bundle: Some("Q0E=".into()),
        service_cidr: Some("10.100.0.0/16".into()),
    }
}

fn alias() -> AliasContext {
    AliasContext { k8s_version: "1.33".into(), ssm_prefix: "/aws/service".into() }
}

fn req(key: &str, values: &[&str]) -> Req {
    Req {
        key: key.into(),
        operator: "In".into(),
        values: values.iter().map(|v| v.to_string()).collect(),
        min_values: None,
    }
}

fn claim(name: &str, reqs: Vec<Req>) -> NodeClaim {
    let mut c = NodeClaim::new(name, NodeClaimSpec::default());
    c.metadata.uid = Some(format!("uid-{name}"));
    c.metadata.labels = Some([("karpenter.sh/nodepool".to_string(), "default".to_string())].into());
    c.spec.node_class_ref.name = "default".into();
    c.spec.node_class_ref.kind = "EC2NodeClass".into();
    c.spec.node_class_ref.group = "karpenter.k8s.aws".into();
    let mut all = vec![req("kubernetes.io/arch", &["amd64"])];
    all.extend(reqs);
    c.spec.requirements = all;
    c.spec.resources.requests = [("cpu".to_string(), Quantity("1".into()))].into();
    c
}

async fn ready_cloud(sdk: &aws_config::SdkConfig) -> AwsCloud {
    let cloud = AwsCloud::new(sdk, cluster(), alias());
    cloud.refresh_types().await.expect("instance types");
    let nc = moto::network(&cloud.ec2, &cloud.iam, CLUSTER).await;
    let st = cloud.resolve_nodeclass(&nc).await.expect("resolves");
    assert!(st.conditions.iter().any(|c| c.type_ == "Ready" && c.status == "True"), "{:?}", st.conditions);
    cloud
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discovery_uses_the_embedded_formulas_and_prices_fall_back() {
    let moto = moto::Moto::start();
    let faults = Faults::default();
    let sdk = moto.sdk_with(&faults).await;
    let cloud = AwsCloud::new(&sdk, cluster(), alias());
    assert!(cloud.catalog_for(None, 0).is_none(), "nothing before the first discovery");
    let n = cloud.refresh_types().await.unwrap();
    assert!(n > 1300, "moto lists its whole catalogue ({n})");

    let live = cloud.catalog_for(None, 0).unwrap().unwrap();
    let zones: Vec<String> = (b'a'..=b'f').map(|z| format!("us-east-1{}", z as char)).collect();
    let embedded = aws_catalog("us-east-1", Some(&zones), None, 0).unwrap();
    let m5 = live.get("m5.large").expect("m5.large");
    assert_eq!(m5.capacity.pods, 29);
    assert_eq!(m5.allocatable().get("cpu"), 1930);
    assert_eq!(m5.allocatable().get("memory"), 6903 * 1024 * 1024);
    let mut same = 0;
    for t in &live.instance_types {
        if let Some(e) = embedded.get(&t.name) {
            assert_eq!((&t.capacity, &t.overhead), (&e.capacity, &e.overhead), "{}", t.name);
            for (k, r) in t.requirements.iter() {
                assert_eq!(Some(r), e.requirements.get_ref(k), "{} {k}", t.name);
            }
            same += 1;
        }
    }
    assert!(same > 1300, "the same types by the same formulas ({same})");

    // moto has no Pricing API: spot prices are live, on-demand come from the embedded table, and the catalog says so.
    let errors = cloud.refresh_prices().await;
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(errors[0].to_string().contains("GetProducts"), "{}", errors[0]);
    let live = cloud.catalog_for(None, 0).unwrap().unwrap();
    assert!(matches!(live.price_source, PriceSource::LiveSpot { .. }), "{:?}", live.price_source);
    let m5 = live.get("m5.large").unwrap();
    let od = m5.offerings.iter().find(|o| o.capacity_type == "on-demand").unwrap().price;
    let spot = m5.offerings.iter().find(|o| o.capacity_type == "spot").unwrap().price;
    assert_eq!(od, 0.096);
    assert_eq!(spot, 0.00001, "moto's spot price");

    // With a Pricing answer, on-demand prices are live too.
    let entry = serde_json::json!({
        "product": {"attributes": {"instanceType": "m5.large"}},
        "terms": {"OnDemand": {"a": {"priceDimensions": {"b": {"pricePerUnit": {"USD": "0.1010000000"}}}}}}
    })
    .to_string();
    let answer = serde_json::json!({"FormatVersion": "aws_v1", "PriceList": [entry]}).to_string();
    for _ in 0..2 {
        let a = answer.clone();
        faults.queue("GetProducts", Box::new(move |_| (200, a.clone())));
    }
    assert!(cloud.refresh_prices().await.is_empty());
    let live = cloud.catalog_for(None, 0).unwrap().unwrap();
    assert!(matches!(live.price_source, PriceSource::Live { .. }));
    let od = live.get("m5.large").unwrap().offerings.iter().find(|o| o.capacity_type == "on-demand").unwrap().price;
    assert_eq!(od, 0.101);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn launch_adopt_list_terminate_and_templates() {
    let moto = moto::Moto::start();
    let sdk = moto.sdk().await;
    let cloud = AwsCloud::new(&sdk, cluster(), alias());

    // A claim before its NodeClass is resolved is refused as not ready (the engine deletes it and retries).
    let c = claim("default-aaaaa", vec![req("karpenter.sh/capacity-type", &["on-demand"])]);
    assert!(matches!(cloud.launch(&c).await, Err(LaunchError::NodeClassNotReady(_))));

    cloud.refresh_types().await.unwrap();
    let mut nc = moto::network(&cloud.ec2, &cloud.iam, CLUSTER).await;
    let st = cloud.resolve_nodeclass(&nc).await.unwrap();

    // `role` gets an instance profile holding exactly that role; a changed role is swapped in.
    let profile = st.instance_profile.clone().expect("an instance profile");
    assert!(profile.starts_with("demo_"), "{profile}");
    let roles = |p: aws_sdk_iam::operation::get_instance_profile::GetInstanceProfileOutput| {
        p.instance_profile.unwrap().roles.into_iter().map(|r| r.role_name).collect::<Vec<_>>()
    };
    let got = cloud.iam.get_instance_profile().instance_profile_name(&profile).send().await.unwrap();
    assert_eq!(roles(got), vec!["KarpenterNodeRole".to_string()]);
    nc.spec.role = Some("OtherNodeRole".into());
    assert_eq!(cloud.resolve_nodeclass(&nc).await.unwrap().instance_profile.as_deref(), Some(profile.as_str()));
    let got = cloud.iam.get_instance_profile().instance_profile_name(&profile).send().await.unwrap();
    assert_eq!(roles(got), vec!["OtherNodeRole".to_string()]);
    nc.spec.role = Some("NoSuchRole".into());
    let st = cloud.resolve_nodeclass(&nc).await.unwrap();
    let ready = st.conditions.iter().find(|c| c.type_ == "Ready").unwrap();
    assert_eq!(ready.status, "False", "a role that can't be added keeps the class from launching");
    let ip = st.conditions.iter().find(|c| c.type_ == "InstanceProfileReady").unwrap();
    assert!(ip.message.as_deref().unwrap_or("").contains("NoSuchRole"), "{ip:?}");
    let got = cloud.iam.get_instance_profile().instance_profile_name(&profile).send().await.unwrap();
    assert_eq!(roles(got), vec!["OtherNodeRole".to_string()], "the role it held is put back");
    nc.spec.role = Some("KarpenterNodeRole".into());
    cloud.resolve_nodeclass(&nc).await.unwrap();
    let r = cloud.launch(&c).await.expect("launched");
    let id = ec2::instance_id(&r.provider_id).expect("aws:///zone/i-...").to_string();
    assert!(r.provider_id.starts_with("aws:///us-east-1"), "{}", r.provider_id);
    assert_eq!(r.capacity_type, "on-demand");
    assert!(r.allocatable.get("cpu") >= 1000, "fits the claim's request");
    assert_eq!(r.labels.get("karpenter.k8s.aws/instance-family").map(|s| s.is_empty()), Some(false));

    let listed = cloud.refresh_instances().await.unwrap();
    assert_eq!(listed.len(), 1);
    let i = &listed[0];
    assert_eq!(i.id, id);
    for (k, v) in [
        ("karpenter.sh/nodepool", "default"),
        (TAG_NODECLAIM, "default-aaaaa"),
        ("karpenter.k8s.aws/ec2nodeclass", "default"),
        ("eks:eks-cluster-name", CLUSTER),
        ("kubernetes.io/cluster/demo", "owned"),
        ("team", "web"),
    ] {
        assert_eq!(i.tags.get(k).map(String::as_str), Some(v), "tag {k}");
    }
    assert!(cloud.live_provider_ids().unwrap().contains(&r.provider_id));

    // Launching the same claim again (a restart lost track of it) adopts the instance.
    let again = cloud.launch(&c).await.unwrap();
    assert_eq!(again.provider_id, r.provider_id);
    assert_eq!(cloud.refresh_instances().await.unwrap().len(), 1, "no second instance");

    // One template per configuration (AMI and max pods), reused by the next claim of the pool.
    let names = cloud.template_names().await;
    assert!(!names.is_empty());
    for n in &names {
        let lts = cloud.ec2.describe_launch_templates().launch_template_names(n).send().await.unwrap();
        assert_eq!(lts.launch_templates().len(), 1, "{n} exists");
    }
    let c2 = claim("default-bbbbb", vec![req("karpenter.sh/capacity-type", &["on-demand"])]);
    let r2 = cloud.launch(&c2).await.unwrap();
    assert_ne!(r2.provider_id, r.provider_id);
    assert_eq!(cloud.template_names().await, names, "the template is reused");

    // Garbage collection: an instance no claim holds, older than 30 s, is leaked.
    let listed = cloud.refresh_instances().await.unwrap();
    let held: BTreeSet<String> = [r.provider_id.clone()].into();
    let later = chrono::Utc::now().timestamp() + 60;
    let leaked: Vec<&str> = ec2::leaked(&listed, &held, later).iter().map(|i| i.id.as_str()).collect();
    assert_eq!(leaked, vec![ec2::instance_id(&r2.provider_id).unwrap()]);
    assert!(ec2::leaked(&listed, &held, chrono::Utc::now().timestamp()).is_empty(), "too young to collect");

    // Repair's reboot: RebootInstances on a running instance; one that is gone is refused (the node is replaced).
    ec2::reboot(&cloud.ec2, ec2::instance_id(&r2.provider_id).unwrap()).await.expect("rebooted");

    // Termination: gone from the list; terminating again says it is gone.
    assert!(cloud.terminate(&r2.provider_id).await.unwrap());
    assert!(!cloud.terminate(&r2.provider_id).await.unwrap(), "already gone");
    let listed = cloud.refresh_instances().await.unwrap();
    assert_eq!(listed.iter().map(|i| i.id.as_str()).collect::<Vec<_>>(), vec![id.as_str()]);

    // Unused templates are deleted (after a minute without use).
    let mut templates = ec2::Templates::default();
    assert_eq!(templates.hydrate(&cloud.ec2, CLUSTER, 0).await.unwrap(), names.len());
    assert!(templates.delete_unused(&cloud.ec2, 30).await.unwrap().is_empty(), "used recently");
    assert_eq!(templates.delete_unused(&cloud.ec2, 61).await.unwrap(), names);
    for n in &names {
        let gone = cloud.ec2.describe_launch_templates().launch_template_names(n).send().await;
        assert!(gone.is_err(), "{n} deleted");
    }
    // The provider recreates a template deleted behind its back (retrying CreateFleet once).
    let c3 = claim("default-ccccc", vec![req("karpenter.sh/capacity-type", &["on-demand"])]);
    cloud.launch(&c3).await.expect("template recreated");

    // Instance profiles of deleted classes are collected: not while the class exists, not within the first hour,
    // not while an instance uses it.
    use karpenter_tui::aws::instanceprofile::collect;
    let uid = nc.metadata.uid.clone().unwrap();
    let now = chrono::Utc::now().timestamp();
    let arn = cloud
        .iam
        .get_instance_profile()
        .instance_profile_name(&profile)
        .send()
        .await
        .unwrap()
        .instance_profile
        .unwrap()
        .arn;
    let none = BTreeSet::new();
    assert!(collect(&cloud.iam, CLUSTER, "us-east-1", &[uid].into(), &none, now + 7200).await.unwrap().is_empty());
    assert!(collect(&cloud.iam, CLUSTER, "us-east-1", &none, &none, now).await.unwrap().is_empty(), "protected");
    assert!(
        collect(&cloud.iam, CLUSTER, "us-east-1", &none, &[arn].into(), now + 7200).await.unwrap().is_empty(),
        "in use"
    );
    assert_eq!(
        collect(&cloud.iam, CLUSTER, "us-east-1", &none, &none, now + 7200).await.unwrap(),
        vec![profile.clone()]
    );
    assert!(cloud.iam.get_instance_profile().instance_profile_name(&profile).send().await.is_err(), "deleted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capacity_errors_fall_back_and_throttling_never_doubles_a_launch() {
    let moto = moto::Moto::start();
    let faults = Faults::default();
    let sdk = moto.sdk_with(&faults).await;
    let cloud = ready_cloud(&sdk).await;
    let two = || {
        vec![
            req("karpenter.sh/capacity-type", &["on-demand"]),
            req("node.kubernetes.io/instance-type", &["m5.large", "m5.xlarge"]),
        ]
    };

    // EC2 has no m5.large anywhere: nothing launches, the offerings are kept out, the engine is told it's capacity.
    faults.queue("CreateFleet", faults::fleet_errors("InsufficientInstanceCapacity", |t| t == "m5.large"));
    let c = claim("default-ice01", two());
    let err = cloud.launch(&c).await.unwrap_err();
    assert!(matches!(err, LaunchError::InsufficientCapacity(ref m) if m.contains("m5.large")), "{err}");
    let now = chrono::Utc::now().timestamp_millis();
    let catalog = cloud.catalog_for(None, now).unwrap().unwrap();
    let m5 = catalog.get("m5.large").unwrap();
    for z in ["us-east-1a", "us-east-1b"] {
        assert!(m5.offerings.iter().any(|o| o.zone == z && o.capacity_type == "on-demand" && !o.available), "{z}");
    }
    // A claim that only m5.large fits has nothing left to try for three minutes.
    let only = claim(
        "default-ice02",
        vec![req("karpenter.sh/capacity-type", &["on-demand"]), req("node.kubernetes.io/instance-type", &["m5.large"])],
    );
    let calls = faults.calls("CreateFleet");
    assert!(matches!(cloud.launch(&only).await, Err(LaunchError::InsufficientCapacity(_))), "no offering left");
    assert_eq!(faults.calls("CreateFleet"), calls, "not even asked");
    // The next attempt with both types goes to the one with capacity.
    let c = claim("default-ice03", two());
    let r = cloud.launch(&c).await.expect("falls back");
    assert_eq!(r.instance_type, "m5.xlarge");

    // Throttled twice, CreateFleet is retried by the SDK with the same client token: one instance.
    faults.queue("CreateFleet", faults::throttled());
    faults.queue("CreateFleet", faults::throttled());
    let before = faults.calls("CreateFleet");
    let c = claim("default-thr01", two());
    let r = cloud.launch(&c).await.expect("launched after throttling");
    assert_eq!(faults.calls("CreateFleet") - before, 3, "two throttled attempts and one that went through");
    let ours: Vec<_> = cloud
        .refresh_instances()
        .await
        .unwrap()
        .into_iter()
        .filter(|i| i.tags.get(TAG_NODECLAIM).map(String::as_str) == Some("default-thr01"))
        .collect();
    assert_eq!(ours.len(), 1);
    assert_eq!(ours[0].provider_id(), r.provider_id);

    // Three claims with the same request share one CreateFleet for three instances, each tagged with its claim.
    let batch: Vec<NodeClaim> =
        ["default-bat01", "default-bat02", "default-bat03"].iter().map(|n| claim(n, two())).collect();
    let before = faults.calls("CreateFleet");
    let results = cloud.launch_batch(&batch).await;
    assert_eq!(faults.calls("CreateFleet") - before, 1, "one call for the batch");
    let ids: BTreeSet<String> = results.iter().map(|r| r.as_ref().expect("launched").provider_id.clone()).collect();
    assert_eq!(ids.len(), 3, "three distinct instances");
    let listed = cloud.refresh_instances().await.unwrap();
    for (c, r) in batch.iter().zip(&results) {
        let i = listed.iter().find(|i| i.provider_id() == r.as_ref().unwrap().provider_id).unwrap();
        assert_eq!(i.tags.get(TAG_NODECLAIM).map(String::as_str), Some(c.name()));
    }
    // The same batch again (the process lost track of it) adopts all three and launches nothing.
    let again = cloud.launch_batch(&batch).await;
    assert_eq!(faults.calls("CreateFleet") - before, 1);
    let again_ids: BTreeSet<String> = again.iter().map(|r| r.as_ref().unwrap().provider_id.clone()).collect();
    assert_eq!(again_ids, ids);

    // A 5xx is retried by the SDK; a refused call is reported with the call and the service's code.
    faults.queue("DescribeInstances", Box::new(|_| (500, "<Response><Errors><Error><Code>InternalError</Code><Message>injected</Message></Error></Errors><RequestID>x</RequestID></Response>".into())));
    assert!(!cloud.refresh_instances().await.unwrap().is_empty(), "retried after a 500");
    faults.queue("DescribeInstanceTypes", Box::new(|_| (403, "<Response><Errors><Error><Code>UnauthorizedOperation</Code><Message>You are not authorized to perform this operation.</Message></Error></Errors><RequestID>x</RequestID></Response>".into())));
    let err = cloud.refresh_types().await.unwrap_err().to_string();
    assert!(err.contains("DescribeInstanceTypes") && err.contains("not authorized"), "{err}");

    // NodeClass validation: CreateFleet refused in its dry run keeps the class from being Ready, saying why.
    let mut nc = cloud.nodeclass("default").unwrap();
    nc.metadata.generation = Some(2);
    faults.queue(
        "CreateFleet",
        Box::new(|_| {
            (
                403,
                "<Response><Errors><Error><Code>UnauthorizedOperation</Code><Message>You are not authorized to \
                 perform: ec2:CreateFleet</Message></Error></Errors><RequestID>x</RequestID></Response>"
                    .into(),
            )
        }),
    );
    let st = cloud.resolve_nodeclass(&nc).await.unwrap();
    let cond = |t: &str| st.conditions.iter().find(|c| c.type_ == t).unwrap().clone();
    let v = cond("ValidationSucceeded");
    assert_eq!((v.status.as_str(), v.reason.as_deref()), ("False", Some("CreateFleetAuthCheckFailed")));
    assert_eq!(v.message.as_deref(), Some("Controller isn't authorized to call ec2:CreateFleet"));
    assert_eq!(cond("Ready").message.as_deref(), Some("ValidationSucceeded=False"), "{:?}", st.conditions);
    assert!(matches!(cloud.launch(&claim("default-val01", two())).await, Err(LaunchError::NodeClassNotReady(_))));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn launches_spread_over_a_zones_subnets_as_their_addresses_are_taken() {
    let moto = moto::Moto::start();
    let sdk = moto.sdk().await;
    let cloud = AwsCloud::new(&sdk, cluster(), alias());
    cloud.refresh_types().await.unwrap();
    let mut nc = moto::network(&cloud.ec2, &cloud.iam, CLUSTER).await;
    // Only two small subnets, both in us-east-1a: a /26 (59 free addresses) and a /27 (27).
    let vpc = cloud.ec2.create_vpc().cidr_block("10.1.0.0/16").send().await.unwrap().vpc.unwrap().vpc_id.unwrap();
    let mut ids = Vec::new();
    for cidr in ["10.1.0.0/26", "10.1.1.0/27"] {
        let s = cloud.ec2.create_subnet().vpc_id(&vpc).cidr_block(cidr).availability_zone("us-east-1a").send().await;
        ids.push(s.unwrap().subnet.unwrap().subnet_id.unwrap());
    }
    nc.spec.subnet_selector_terms =
        ids.iter().map(|id| serde_yaml::from_str(&format!("{{id: {id}}}")).unwrap()).collect();
    cloud.resolve_nodeclass(&nc).await.unwrap();
    // m5.large takes 29 pods' addresses: two fit the /26's 59 before it has fewer left than the /27.
    let mut used = Vec::new();
    for n in 0..3 {
        let c = claim(
            &format!("default-ip{n:03}"),
            vec![
                req("karpenter.sh/capacity-type", &["on-demand"]),
                req("node.kubernetes.io/instance-type", &["m5.large"]),
            ],
        );
        let r = cloud.launch(&c).await.unwrap();
        let listed = cloud.refresh_instances().await.unwrap();
        used.push(listed.into_iter().find(|i| i.provider_id() == r.provider_id).unwrap().subnet_id.unwrap());
    }
    assert_eq!(used, vec![ids[0].clone(), ids[0].clone(), ids[1].clone()]);
    // A fresh DescribeSubnets (the next resolution) starts counting from what EC2 says again.
    cloud.resolve_nodeclass(&nc).await.unwrap();
    let c = claim("default-ip100", vec![req("node.kubernetes.io/instance-type", &["m5.large"])]);
    let r = cloud.launch(&c).await.unwrap();
    let listed = cloud.refresh_instances().await.unwrap();
    assert_eq!(listed.into_iter().find(|i| i.provider_id() == r.provider_id).unwrap().subnet_id, Some(ids[0].clone()));
}

/// moto has no capacity reservations: the wrapper answers `DescribeCapacityReservations` with one default
/// reservation of m5.large in us-east-1a that can take `available` more instances.
fn one_reservation(available: u32) -> String {
    format!(
        r#"<DescribeCapacityReservationsResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><requestId>r</requestId><capacityReservationSet><item><capacityReservationId>cr-0aaaa</capacityReservationId><ownerId>123456789012</ownerId><instanceType>m5.large</instanceType><availabilityZone>us-east-1a</availabilityZone><availableInstanceCount>{available}</availableInstanceCount><totalInstanceCount>4</totalInstanceCount><state>active</state><instanceMatchCriteria>targeted</instanceMatchCriteria><reservationType>default</reservationType></item></capacityReservationSet></DescribeCapacityReservationsResponse>"#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn launches_go_into_capacity_reservations_and_count_against_them() {
    use std::sync::{Arc, Mutex};
    let moto = moto::Moto::start();
    let faults = Faults::default();
    faults.rule("DescribeCapacityReservations", Box::new(|_| Some((200, one_reservation(2)))));
    // The requests as sent (moto takes them; only their text is kept here).
    let sent: Arc<Mutex<Vec<String>>> = Arc::default();
    for action in ["CreateLaunchTemplate", "CreateFleet"] {
        let sent = sent.clone();
        faults.rule(
            action,
            Box::new(move |body| {
                sent.lock().unwrap().push(body.to_string());
                None
            }),
        );
    }
    let sdk = moto.sdk_with(&faults).await;
    let cloud = AwsCloud::new(&sdk, cluster(), alias());
    cloud.refresh_types().await.expect("instance types");
    let mut nc = moto::network(&cloud.ec2, &cloud.iam, CLUSTER).await;
    nc.spec.capacity_reservation_selector_terms = serde_yaml::from_str("[{id: cr-0aaaa}]").unwrap();
    let st = cloud.resolve_nodeclass(&nc).await.expect("resolves");
    assert!(st.conditions.iter().any(|c| c.type_ == "Ready" && c.status == "True"), "{:?}", st.conditions);
    let nc = cloud.nodeclass("default").unwrap();

    // The class's catalog offers the reservation: priced on-demand ÷ 10⁷, with what it can take.
    let reserved_offering = |cloud: &AwsCloud| {
        let now = chrono::Utc::now().timestamp_millis();
        let catalog = cloud.catalog_for(Some(&nc), now).unwrap().unwrap();
        let m5 = catalog.get("m5.large").unwrap().clone();
        let od = m5.offerings.iter().find(|o| o.zone == "us-east-1a" && o.capacity_type == "on-demand").unwrap().price;
        let r = m5.offerings.iter().find(|o| o.capacity_type == "reserved").cloned().expect("a reserved offering");
        (r, od)
    };
    let (r, od) = reserved_offering(&cloud);
    assert_eq!(r.zone, "us-east-1a");
    assert!((r.price - od / 1e7).abs() < 1e-15, "{} vs {od}", r.price);
    assert_eq!((r.reservation.as_ref().unwrap().capacity, r.available), (2, true));
    // The dashboard's catalog lists it too, once.
    let live = cloud.live_catalog(0).expect("a live catalog");
    let rows = karpenter_tui::shell::picture::reservation_rows(&live, &[]);
    assert_eq!(rows.iter().map(|r| (r.id.as_str(), r.total)).collect::<Vec<_>>(), [("cr-0aaaa", 2)]);

    // A claim allowing reserved launches into it: the template targets the reservation, the fleet is on-demand,
    // and the claim carries the reservation's labels.
    let reqs = || {
        vec![
            req("karpenter.sh/capacity-type", &["reserved", "on-demand"]),
            req("node.kubernetes.io/instance-type", &["m5.large", "m5.xlarge"]),
        ]
    };
    let launched = cloud.launch(&claim("default-res01", reqs())).await.expect("launched");
    assert_eq!((launched.instance_type.as_str(), launched.zone.as_str()), ("m5.large", "us-east-1a"));
    assert_eq!(launched.capacity_type, "reserved");
    let label = |k: &str| launched.labels.get(k).map(String::as_str);
    assert_eq!(label("karpenter.sh/capacity-type"), Some("reserved"));
    assert_eq!(label("karpenter.k8s.aws/capacity-reservation-id"), Some("cr-0aaaa"));
    assert_eq!(label("karpenter.k8s.aws/capacity-reservation-type"), Some("default"));
    assert_eq!(label("karpenter.k8s.aws/capacity-reservation-interruptible"), Some("false"));
    {
        let sent = sent.lock().unwrap();
        let templates: Vec<&String> = sent.iter().filter(|b| b.contains("Action=CreateLaunchTemplate")).collect();
        let template = templates
            .iter()
            .find(|b| b.contains("CapacityReservationTarget.CapacityReservationId=cr-0aaaa"))
            .expect("a template targeting the reservation");
        assert!(template.contains("CapacityReservationPreference=capacity-reservations-only"), "{template}");
        // The class validation's dry run does not target the reservation.
        let validation = templates.iter().find(|b| b.contains("karpenter-tui-validation")).expect("the validation's");
        assert!(!validation.contains("CapacityReservation"), "{validation}");
        let fleet = sent.iter().rev().find(|b| b.contains("Action=CreateFleet")).unwrap();
        assert!(fleet.contains("DefaultTargetCapacityType=on-demand"), "{fleet}");
        assert!(!fleet.contains("us-east-1b") && !fleet.contains("m5.xlarge"), "only the reservation's pool: {fleet}");
    }
    let (r, _) = reserved_offering(&cloud);
    assert_eq!(r.reservation.as_ref().unwrap().capacity, 1, "one launch counted against it");

    // EC2 says the reservation is full: it takes nothing more (the on-demand pool is untouched).
    faults.queue("CreateFleet", faults::fleet_errors("ReservationCapacityExceeded", |_| true));
    let err = cloud.launch(&claim("default-res02", reqs())).await.unwrap_err();
    assert!(matches!(err, LaunchError::InsufficientCapacity(_)), "{err}");
    let (r, _) = reserved_offering(&cloud);
    assert_eq!((r.reservation.as_ref().unwrap().capacity, r.available), (0, false));
    let now = chrono::Utc::now().timestamp_millis();
    let catalog = cloud.catalog_for(Some(&nc), now).unwrap().unwrap();
    assert!(catalog.get("m5.large").unwrap().offerings.iter().any(|o| o.capacity_type == "on-demand" && o.available));
    // The next launch of the same claim goes on-demand.
    let next = cloud.launch(&claim("default-res03", reqs())).await.expect("launched on-demand");
    assert_eq!(next.capacity_type, "on-demand");
    assert!(!next.labels.contains_key("karpenter.k8s.aws/capacity-reservation-id"));

    // EC2's count comes back with the next lookup.
    cloud.resolve_nodeclass(&nc).await.expect("resolves");
    assert_eq!(reserved_offering(&cloud).0.reservation.unwrap().capacity, 2);
    // A reservation interruption (its owner takes it back) leaves it nothing to give until the next lookup.
    cloud.reservation_unavailable("cr-0aaaa");
    assert!(!reserved_offering(&cloud).0.available);
    cloud.resolve_nodeclass(&nc).await.expect("resolves");

    // Capacity-reservation drift (the spec's acceptance 4): EC2 lists one instance still in cr-0aaaa and one that
    // moved to cr-0bbbb, which the class does not select. moto places nothing in reservations, so the wrapper
    // answers this one listing as EC2 would.
    let instance = |id: &str, cr: &str| {
        format!(
            "<item><instanceId>{id}</instanceId><instanceType>m5.large</instanceType><placement><availabilityZone>us-east-1a</availabilityZone></placement><instanceState><code>16</code><name>running</name></instanceState><capacityReservationId>{cr}</capacityReservationId><capacityReservationSpecification><capacityReservationPreference>capacity-reservations-only</capacityReservationPreference></capacityReservationSpecification><tagSet><item><key>eks:eks-cluster-name</key><value>demo</value></item><item><key>karpenter.sh/nodepool</key><value>default</value></item><item><key>karpenter.k8s.aws/ec2nodeclass</key><value>default</value></item></tagSet></item>"
        )
    };
    let body = format!(
        r#"<DescribeInstancesResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><requestId>r</requestId><reservationSet><item><reservationId>r-1</reservationId><ownerId>123456789012</ownerId><instancesSet>{}{}</instancesSet></item></reservationSet></DescribeInstancesResponse>"#,
        instance("i-0stay", "cr-0aaaa"),
        instance("i-0moved", "cr-0bbbb")
    );
    faults.queue("DescribeInstances", Box::new(move |_| (200, body.clone())));
    let listed = cloud.refresh_instances().await.expect("listed");
    assert!(listed.iter().all(|i| i.capacity_type() == "reserved"), "{listed:?}");
    let in_reservation = |name: &str, id: &str| {
        let mut c = claim(name, reqs());
        c.status = Some(karpenter_tui::engine::api::nodeclaim::NodeClaimStatus {
            provider_id: Some(format!("aws:///us-east-1a/{id}")),
            ..Default::default()
        });
        c
    };
    let claims = [in_reservation("default-stay1", "i-0stay"), in_reservation("default-moved", "i-0moved")];
    let drift = cloud.class_drift(claims.iter(), now);
    assert_eq!(
        drift.into_iter().collect::<Vec<_>>(),
        [(
            "default-moved".to_string(),
            "capacity reservation cr-0bbbb is no longer selected by EC2NodeClass default".to_string()
        )]
    );

    // A failed lookup keeps the last list, and drift waits for a lookup that succeeds.
    for _ in 0..3 {
        faults.queue("DescribeCapacityReservations", Box::new(|_| (500, "<Response><Errors><Error><Code>InternalError</Code><Message>injected</Message></Error></Errors><RequestID>x</RequestID></Response>".into())));
    }
    let st = cloud.resolve_nodeclass(&cloud.nodeclass("default").unwrap()).await.expect("resolves");
    assert_eq!(st.capacity_reservations.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(), ["cr-0aaaa"]);
    assert!(cloud.class_drift(claims.iter(), now).is_empty());

    // With the gate off the catalog has no reserved offerings.
    let off = AwsCloud::new(&sdk, cluster(), alias()).with_reserved_capacity(false);
    off.refresh_types().await.unwrap();
    off.resolve_nodeclass(&nc).await.unwrap();
    let catalog = off.catalog_for(Some(&nc), now).unwrap().unwrap();
    assert!(catalog.instance_types.iter().all(|t| t.offerings.iter().all(|o| o.capacity_type != "reserved")));
}
