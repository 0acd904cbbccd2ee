//! moto, the AWS mock server, started for one test binary on a free loopback port and stopped when dropped.
//! scripts/test.sh installs it into `.venv/`; `MOTO_SERVER` names another binary.
#![allow(dead_code)]

pub mod faults;

use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_credential_types::Credentials;
use aws_sdk_ec2::types::{ResourceType, Tag, TagSpecification};
use karpenter_tui::engine::api::EC2NodeClass;

pub struct Moto {
    child: Child,
    pub url: String,
}

fn binary() -> PathBuf {
    if let Some(p) = std::env::var_os("MOTO_SERVER") {
        return p.into();
    }
    let venv = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/moto_server");
    if venv.exists() { venv } else { "moto_server".into() }
}

impl Moto {
    pub fn start() -> Moto {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let bin = binary();
        let child = Command::new(&bin)
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot start {} ({e}): run the tests through `bash scripts/test.sh`, which installs moto into \
                     .venv, or set MOTO_SERVER",
                    bin.display()
                )
            });
        let moto = Moto { child, url: format!("http://127.0.0.1:{port}") };
        let start = Instant::now();
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(start.elapsed() < Duration::from_secs(60), "moto did not start on port {port}");
            std::thread::sleep(Duration::from_millis(100));
        }
        moto
    }

    /// An SDK configuration pointed at this server, with test credentials.
    pub async fn sdk(&self) -> SdkConfig {
        self.loader().load().await
    }

    /// The same, with every request going through `faults` first.
    pub async fn sdk_with(&self, faults: &faults::Faults) -> SdkConfig {
        self.loader().http_client(faults.client()).load().await
    }

    fn loader(&self) -> aws_config::ConfigLoader {
        aws_config::defaults(BehaviorVersion::latest())
            .endpoint_url(&self.url)
            .region(Region::new("us-east-1"))
            .credentials_provider(Credentials::new("testing", "testing", None, None, "moto"))
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn tagged(kind: ResourceType, cluster: &str) -> TagSpecification {
    TagSpecification::builder()
        .resource_type(kind)
        .tags(Tag::builder().key("karpenter.sh/discovery").value(cluster).build())
        .build()
}

/// A VPC with tagged subnets in us-east-1a and -1b, a tagged security group, and the EC2NodeClass selecting them
/// with one of moto's x86_64 Amazon images.
pub async fn network(ec2c: &aws_sdk_ec2::Client, iam: &aws_sdk_iam::Client, cluster: &str) -> EC2NodeClass {
    let trust = r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"ec2.amazonaws.com"},"Action":"sts:AssumeRole"}]}"#;
    for role in ["KarpenterNodeRole", "OtherNodeRole"] {
        iam.create_role().role_name(role).assume_role_policy_document(trust).send().await.unwrap();
    }
    let vpc = ec2c.create_vpc().cidr_block("10.0.0.0/16").send().await.unwrap().vpc.unwrap().vpc_id.unwrap();
    for (cidr, zone) in [("10.0.16.0/20", "us-east-1a"), ("10.0.32.0/20", "us-east-1b")] {
        ec2c.create_subnet()
            .vpc_id(&vpc)
            .cidr_block(cidr)
            .availability_zone(zone)
            .tag_specifications(tagged(ResourceType::Subnet, cluster))
            .send()
            .await
            .unwrap();
    }
    ec2c.create_security_group()
        .group_name("nodes")
        .description("nodes")
        .vpc_id(&vpc)
        .tag_specifications(tagged(ResourceType::SecurityGroup, cluster))
        .send()
        .await
        .unwrap();
    let images = ec2c.describe_images().owners("amazon").send().await.unwrap().images.unwrap();
    let ami = images
        .iter()
        .find(|i| i.architecture.as_ref().map(|a| a.as_str()) == Some("x86_64"))
        .and_then(|i| i.image_id.clone())
        .unwrap();
    let yaml = format!(
        r#"
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {{name: default, generation: 1, uid: 5f0c8f2e-0000-4000-8000-000000000001}}
spec:
  role: KarpenterNodeRole
  subnetSelectorTerms: [{{tags: {{karpenter.sh/discovery: {cluster}}}}}]
  securityGroupSelectorTerms: [{{tags: {{karpenter.sh/discovery: {cluster}}}}}]
  amiFamily: AL2023
  amiSelectorTerms: [{{id: {ami}}}]
  tags: {{team: web}}
"#
    );
    serde_yaml::from_str(&yaml).unwrap()
}
