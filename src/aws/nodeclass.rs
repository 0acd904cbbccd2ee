//! EC2NodeClass resolution (aws.md §4): its subnet, security-group and AMI selector terms turned into EC2 queries,
//! the results into the status upstream writes (`subnets`, `securityGroups`, `amis`, the per-part conditions and
//! `Ready`). A selector that matches nothing is named in its condition's message, so operators see which term to
//! fix. Query building and selection are pure; only [`resolve`] talks to EC2 and SSM.

use std::collections::BTreeMap;

use aws_sdk_ec2::types::{Filter, Image};
use thiserror::Error;

use crate::engine::api::common::{Condition, NodeSelectorRequirementWithMinValues};
use crate::engine::api::ec2nodeclass::{
    AmiSelectorTerm, AmiStatus, EC2NodeClass, EC2NodeClassStatus, SecurityGroupStatus, SelectorTerm, SubnetStatus,
};
use crate::engine::labels;

use super::config::AwsError;

/// One EC2 query a group of selector terms becomes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query {
    /// (filter name, values); every filter must match.
    pub filters: Vec<(String, Vec<String>)>,
    /// DescribeImages owners (AMIs only).
    pub owners: Vec<String>,
}

fn tag_filters(tags: &BTreeMap<String, String>) -> Vec<(String, Vec<String>)> {
    tags.iter()
        .map(
            |(k, v)| {
                if v == "*" { ("tag-key".to_string(), vec![k.clone()]) } else { (format!("tag:{k}"), vec![v.clone()]) }
            },
        )
        .collect()
}

/// Subnet or security-group terms as queries: ids gathered into one query, each tag/name term its own (terms are
/// ORed, fields within a term ANDed). `id_filter` is `subnet-id` or `group-id`.
pub fn selector_queries(terms: &[SelectorTerm], id_filter: &str) -> Vec<Query> {
    let mut out = Vec::new();
    let ids: Vec<String> = terms.iter().filter_map(|t| t.id.clone()).collect();
    if !ids.is_empty() {
        out.push(Query { filters: vec![(id_filter.to_string(), ids)], owners: Vec::new() });
    }
    for t in terms.iter().filter(|t| t.id.is_none()) {
        let mut filters = tag_filters(&t.tags);
        if let Some(n) = &t.name {
            filters.push(("group-name".to_string(), vec![n.clone()]));
        }
        if !filters.is_empty() {
            out.push(Query { filters, owners: Vec::new() });
        }
    }
    out
}

/// AMI terms other than aliases and SSM parameters as DescribeImages queries; a name without an owner searches
/// this account's and Amazon's images, as upstream.
pub fn ami_queries(terms: &[AmiSelectorTerm]) -> Vec<Query> {
    let mut out = Vec::new();
    for t in terms {
        let mut filters = vec![("state".to_string(), vec!["available".to_string()])];
        let mut owners = t.owner.iter().cloned().collect::<Vec<_>>();
        if let Some(id) = &t.id {
            filters.push(("image-id".to_string(), vec![id.clone()]));
        } else if let Some(name) = &t.name {
            filters.push(("name".to_string(), vec![name.clone()]));
            if owners.is_empty() {
                owners = vec!["self".into(), "amazon".into()];
            }
            filters.extend(tag_filters(&t.tags));
        } else if !t.tags.is_empty() {
            filters.extend(tag_filters(&t.tags));
        } else {
            continue;
        }
        out.push(Query { filters, owners });
    }
    out
}

/// The SSM parameters an alias reads (`al2023@latest`), for this Kubernetes version, with their variant's
/// requirements. `prefix` is `/aws/service` (injectable: moto doesn't carry the EKS parameters).
pub fn alias_parameters(alias: &str, k8s: &str, prefix: &str) -> Result<Vec<(String, Vec<Req>)>, String> {
    let (family, version) = alias.split_once('@').ok_or_else(|| format!("alias {alias:?}: expected family@version"))?;
    let standard = vec![Req::absent(GPU_COUNT), Req::absent(ACCEL_COUNT)];
    let nvidia = vec![Req::exists(GPU_COUNT)];
    let neuron = vec![Req::exists(ACCEL_COUNT)];
    let latest = version == "latest";
    Ok(match family {
        "al2023" => [
            ("x86_64", "standard", &standard),
            ("x86_64", "nvidia", &nvidia),
            ("x86_64", "neuron", &neuron),
            ("arm64", "standard", &standard),
            ("arm64", "nvidia", &nvidia),
        ]
        .iter()
        .map(|(arch, variant, reqs)| {
            let leaf = if latest {
                "recommended".to_string()
            } else {
                format!("amazon-eks-node-al2023-{arch}-{variant}-{k8s}-{version}")
            };
            let mut r = (*reqs).clone();
            r.push(Req::arch(arch));
            (format!("{prefix}/eks/optimized-ami/{k8s}/amazon-linux-2023/{arch}/{variant}/{leaf}/image_id"), r)
        })
        .collect(),
        "bottlerocket" => {
            let v = if latest { "latest".to_string() } else { version.trim_start_matches('v').to_string() };
            [
                ("x86_64", "", &standard),
                ("arm64", "", &standard),
                ("x86_64", "-nvidia", &nvidia),
                ("arm64", "-nvidia", &nvidia),
            ]
            .iter()
            .map(|(arch, suffix, reqs)| {
                let mut r = (*reqs).clone();
                r.push(Req::arch(arch));
                (format!("{prefix}/bottlerocket/aws-k8s-{k8s}{suffix}/{arch}/{v}/image_id"), r)
            })
            .collect()
        }
        "al2" => {
            let minor: u32 = k8s.split('.').nth(1).and_then(|m| m.parse().ok()).unwrap_or(0);
            if minor >= 33 {
                return Err(format!("alias {alias:?}: AL2 has no AMIs for Kubernetes {k8s} (1.33 and later)"));
            }
            [
                ("amazon-linux-2", "amazon-eks-node", "x86_64", &standard),
                ("amazon-linux-2-arm64", "amazon-eks-arm64-node", "arm64", &standard),
                ("amazon-linux-2-gpu", "amazon-eks-gpu-node", "x86_64", &nvidia),
            ]
            .iter()
            .map(|(path, node, arch, reqs)| {
                let leaf = if latest { "recommended".to_string() } else { format!("{node}-{k8s}-{version}") };
                let mut r = (*reqs).clone();
                r.push(Req::arch(arch));
                (format!("{prefix}/eks/optimized-ami/{k8s}/{path}/{leaf}/image_id"), r)
            })
            .collect()
        }
        other => return Err(format!("alias {alias:?}: family {other:?} is not supported (al2023, al2, bottlerocket)")),
    })
}

const GPU_COUNT: &str = "karpenter.k8s.aws/instance-gpu-count";
const ACCEL_COUNT: &str = "karpenter.k8s.aws/instance-accelerator-count";

/// A requirement an AMI puts on the instance types it can boot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Req {
    pub key: String,
    pub operator: &'static str,
    pub values: Vec<String>,
}

impl Req {
    fn absent(key: &str) -> Req {
        Req { key: key.into(), operator: "DoesNotExist", values: Vec::new() }
    }
    fn exists(key: &str) -> Req {
        Req { key: key.into(), operator: "Exists", values: Vec::new() }
    }
    fn arch(ec2_arch: &str) -> Req {
        let k = if ec2_arch == "arm64" { "arm64" } else { "amd64" };
        Req { key: labels::ARCH.into(), operator: "In", values: vec![k.into()] }
    }
}

/// An image found, with what it requires.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ami {
    pub id: String,
    pub name: String,
    pub creation_date: String,
    pub deprecated: bool,
    pub requirements: Vec<Req>,
}

/// From DescribeImages: only x86_64 and arm64 images count.
pub fn ami_of(image: &Image, extra: &[Req]) -> Option<Ami> {
    let arch = image.architecture.as_ref()?.as_str().to_string();
    if arch != "x86_64" && arch != "arm64" {
        return None;
    }
    let mut requirements = vec![Req::arch(&arch)];
    requirements.extend(extra.iter().filter(|r| r.key != labels::ARCH).cloned());
    let deprecated = image.deprecation_time.as_deref().is_some_and(|t| !t.is_empty() && t < chrono_now().as_str());
    Some(Ami {
        id: image.image_id.clone()?,
        name: image.name.clone().unwrap_or_default(),
        creation_date: image.creation_date.clone().unwrap_or_default(),
        deprecated,
        requirements,
    })
}

fn chrono_now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// Per distinct requirement set, the newest non-deprecated image (deprecated only when nothing else), ties by name.
pub fn select_amis(found: Vec<Ami>) -> Vec<Ami> {
    let mut best: BTreeMap<String, Ami> = BTreeMap::new();
    for a in found {
        let key = format!("{:?}", a.requirements);
        let better = |b: &Ami| {
            (!a.deprecated, a.creation_date.as_str(), std::cmp::Reverse(a.name.as_str()))
                > (!b.deprecated, b.creation_date.as_str(), std::cmp::Reverse(b.name.as_str()))
        };
        match best.get(&key) {
            Some(b) if !better(b) => {}
            _ => {
                best.insert(key, a);
            }
        }
    }
    let mut out: Vec<Ami> = best.into_values().collect();
    out.sort_by(|a, b| b.creation_date.cmp(&a.creation_date).then_with(|| a.id.cmp(&b.id)));
    out
}

/// A subnet found, with its free addresses (launches prefer the emptiest).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subnet {
    pub id: String,
    pub zone: String,
    pub zone_id: Option<String>,
    pub available_ips: i32,
}

/// What resolving a NodeClass found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Resolved {
    pub subnets: Vec<Subnet>,
    pub security_groups: Vec<(String, Option<String>)>,
    pub amis: Vec<Ami>,
    /// The instance profile nodes launch with (`instanceProfile`, or the one made for `role`).
    pub instance_profile: Option<String>,
    /// Why a part is empty or failed: (condition, message).
    pub problems: Vec<(&'static str, String)>,
}

#[derive(Debug, Error)]
pub enum ResolveError {
    #[error(transparent)]
    Aws(#[from] AwsError),
}

fn describe_terms<T: std::fmt::Debug>(terms: &[T]) -> String {
    terms.iter().map(|t| format!("{t:?}")).collect::<Vec<_>>().join(", ")
}

fn filters(q: &Query) -> Vec<Filter> {
    q.filters.iter().map(|(n, v)| Filter::builder().name(n).set_values(Some(v.clone())).build()).collect()
}

/// Where the EKS AMI parameters live, and which Kubernetes version to resolve aliases for.
#[derive(Debug, Clone)]
pub struct AliasContext {
    pub k8s_version: String,
    pub ssm_prefix: String,
}

/// Resolves every selector of `class` against EC2 (and SSM for aliases and parameters).
pub async fn resolve(
    ec2: &aws_sdk_ec2::Client,
    ssm: &aws_sdk_ssm::Client,
    class: &EC2NodeClass,
    alias: &AliasContext,
) -> Result<Resolved, ResolveError> {
    let spec = &class.spec;
    let mut r = Resolved::default();

    let mut subnets: BTreeMap<String, Subnet> = BTreeMap::new();
    for q in selector_queries(&spec.subnet_selector_terms, "subnet-id") {
        let out = ec2
            .describe_subnets()
            .set_filters(Some(filters(&q)))
            .send()
            .await
            .map_err(|e| AwsError::call("DescribeSubnets", e))?;
        for s in out.subnets.unwrap_or_default() {
            let Some(id) = s.subnet_id.clone() else { continue };
            subnets.insert(
                id.clone(),
                Subnet {
                    id,
                    zone: s.availability_zone.unwrap_or_default(),
                    zone_id: s.availability_zone_id,
                    available_ips: s.available_ip_address_count.unwrap_or(0),
                },
            );
        }
    }
    r.subnets = subnets.into_values().collect();
    r.subnets.sort_by(|a, b| b.available_ips.cmp(&a.available_ips).then_with(|| a.id.cmp(&b.id)));
    if r.subnets.is_empty() {
        r.problems.push((
            "SubnetsReady",
            format!("no subnet matches subnetSelectorTerms [{}]", describe_terms(&spec.subnet_selector_terms)),
        ));
    }

    let mut groups: BTreeMap<String, Option<String>> = BTreeMap::new();
    for q in selector_queries(&spec.security_group_selector_terms, "group-id") {
        let out = ec2
            .describe_security_groups()
            .set_filters(Some(filters(&q)))
            .send()
            .await
            .map_err(|e| AwsError::call("DescribeSecurityGroups", e))?;
        for g in out.security_groups.unwrap_or_default() {
            if let Some(id) = g.group_id {
                groups.insert(id, g.group_name);
            }
        }
    }
    r.security_groups = groups.into_iter().collect();
    if r.security_groups.is_empty() {
        r.problems.push((
            "SecurityGroupsReady",
            format!(
                "no security group matches securityGroupSelectorTerms [{}]",
                describe_terms(&spec.security_group_selector_terms)
            ),
        ));
    }

    // AMIs: aliases and SSM parameters give image ids (with the variant's requirements), the rest are queries.
    let mut by_id: Vec<(String, Vec<Req>)> = Vec::new();
    for t in &spec.ami_selector_terms {
        let params = match (&t.alias, &t.ssm_parameter) {
            (Some(a), _) => match alias_parameters(a, &alias.k8s_version, &alias.ssm_prefix) {
                Ok(p) => p,
                Err(e) => {
                    r.problems.push(("AMIsReady", e));
                    continue;
                }
            },
            (None, Some(p)) => vec![(p.clone(), Vec::new())],
            (None, None) => continue,
        };
        for (name, reqs) in params {
            match ssm.get_parameter().name(&name).send().await {
                Ok(out) => {
                    if let Some(v) = out.parameter.and_then(|p| p.value) {
                        by_id.push((v, reqs));
                    }
                }
                // A variant this version doesn't publish (no neuron AMI, say) is simply absent.
                Err(e) if e.as_service_error().is_some_and(|s| s.is_parameter_not_found()) => {}
                Err(e) => return Err(AwsError::call(format!("GetParameter {name}"), e).into()),
            }
        }
    }
    let mut found = Vec::new();
    for (id, reqs) in &by_id {
        let out = ec2
            .describe_images()
            .image_ids(id)
            .include_deprecated(true)
            .send()
            .await
            .map_err(|e| AwsError::call(format!("DescribeImages {id}"), e))?;
        found.extend(out.images.unwrap_or_default().iter().filter_map(|i| ami_of(i, reqs)));
    }
    for q in ami_queries(&spec.ami_selector_terms) {
        let out = ec2
            .describe_images()
            .set_filters(Some(filters(&q)))
            .set_owners((!q.owners.is_empty()).then(|| q.owners.clone()))
            .include_deprecated(true)
            .send()
            .await
            .map_err(|e| AwsError::call("DescribeImages", e))?;
        found.extend(out.images.unwrap_or_default().iter().filter_map(|i| ami_of(i, &[])));
    }
    r.amis = select_amis(found);
    if r.amis.is_empty() && !r.problems.iter().any(|(c, _)| *c == "AMIsReady") {
        r.problems.push((
            "AMIsReady",
            format!("no AMI matches amiSelectorTerms [{}]", describe_terms(&spec.ami_selector_terms)),
        ));
    }
    Ok(r)
}

fn condition(type_: &str, ok: bool, reason: &str, message: &str, now: &str) -> Condition {
    Condition {
        type_: type_.to_string(),
        status: if ok { "True" } else { "False" }.to_string(),
        reason: Some(reason.to_string()),
        message: Some(message.to_string()),
        last_transition_time: Some(now.to_string()),
        observed_generation: None,
    }
}

/// The status upstream writes for what was found: one condition per part and `Ready` over them.
pub fn status(r: &Resolved, now: &str) -> EC2NodeClassStatus {
    let mut conditions = Vec::new();
    for (type_, reason) in [
        ("SubnetsReady", "SubnetsNotFound"),
        ("SecurityGroupsReady", "SecurityGroupsNotFound"),
        ("AMIsReady", "AMINotFound"),
        ("InstanceProfileReady", "InstanceProfileNotReady"),
        ("ValidationSucceeded", "ValidationFailed"),
    ] {
        match r.problems.iter().find(|(c, _)| *c == type_) {
            Some((_, m)) => conditions.push(condition(type_, false, reason, m, now)),
            None => conditions.push(condition(type_, true, type_, "", now)),
        }
    }
    let ready = r.problems.is_empty();
    let why: Vec<String> = r.problems.iter().map(|(_, m)| m.clone()).collect();
    conditions.push(condition("Ready", ready, if ready { "Ready" } else { "NotReady" }, &why.join("; "), now));
    EC2NodeClassStatus {
        subnets: r
            .subnets
            .iter()
            .map(|s| SubnetStatus { id: s.id.clone(), zone: s.zone.clone(), zone_id: s.zone_id.clone() })
            .collect(),
        security_groups: r
            .security_groups
            .iter()
            .map(|(id, name)| SecurityGroupStatus { id: id.clone(), name: name.clone() })
            .collect(),
        amis: r
            .amis
            .iter()
            .map(|a| AmiStatus {
                id: a.id.clone(),
                name: Some(a.name.clone()),
                requirements: a
                    .requirements
                    .iter()
                    .map(|q| NodeSelectorRequirementWithMinValues {
                        key: q.key.clone(),
                        operator: q.operator.to_string(),
                        values: q.values.clone(),
                        min_values: None,
                    })
                    .collect(),
                deprecated: a.deprecated.then_some(true),
            })
            .collect(),
        instance_profile: r.instance_profile.clone(),
        conditions,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn term(tags: &[(&str, &str)], id: Option<&str>, name: Option<&str>) -> SelectorTerm {
        SelectorTerm {
            tags: tags.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            id: id.map(Into::into),
            name: name.map(Into::into),
            owner_id: None,
        }
    }

    #[test]
    fn terms_become_ored_queries_with_anded_filters() {
        let terms = vec![
            term(&[("karpenter.sh/discovery", "demo"), ("tier", "*")], None, None),
            term(&[], Some("subnet-1"), None),
            term(&[], Some("subnet-2"), None),
        ];
        let q = selector_queries(&terms, "subnet-id");
        assert_eq!(q[0].filters, vec![("subnet-id".to_string(), vec!["subnet-1".to_string(), "subnet-2".to_string()])]);
        assert_eq!(
            q[1].filters,
            vec![
                ("tag:karpenter.sh/discovery".to_string(), vec!["demo".to_string()]),
                ("tag-key".to_string(), vec!["tier".to_string()])
            ]
        );
        let sg = selector_queries(&[term(&[], None, Some("nodes"))], "group-id");
        assert_eq!(sg[0].filters, vec![("group-name".to_string(), vec!["nodes".to_string()])]);
    }

    #[test]
    fn ami_names_default_to_self_and_amazon_owners() {
        let t = AmiSelectorTerm { name: Some("my-ami-*".into()), ..Default::default() };
        let q = ami_queries(&[t]);
        assert_eq!(q[0].owners, vec!["self".to_string(), "amazon".to_string()]);
        assert!(q[0].filters.contains(&("state".to_string(), vec!["available".to_string()])));
        let alias_only = AmiSelectorTerm { alias: Some("al2023@latest".into()), ..Default::default() };
        assert!(ami_queries(&[alias_only]).is_empty(), "aliases go through SSM");
    }

    #[test]
    fn aliases_name_the_eks_parameters() {
        let p = alias_parameters("al2023@latest", "1.33", "/aws/service").unwrap();
        assert!(
            p.iter().any(|(n, _)| n
                == "/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/x86_64/standard/recommended/image_id")
        );
        assert_eq!(p.len(), 5);
        let nvidia = p.iter().find(|(n, _)| n.contains("/arm64/nvidia/")).unwrap();
        assert!(nvidia.1.contains(&Req::exists(GPU_COUNT)));
        let pinned = alias_parameters("al2023@v20250101", "1.33", "/aws/service").unwrap();
        assert!(
            pinned[0].0.ends_with("/amazon-eks-node-al2023-x86_64-standard-1.33-v20250101/image_id"),
            "{}",
            pinned[0].0
        );
        let br = alias_parameters("bottlerocket@v1.30.0", "1.33", "/p").unwrap();
        assert_eq!(br[0].0, "/p/bottlerocket/aws-k8s-1.33/x86_64/1.30.0/image_id");
        assert!(alias_parameters("al2@latest", "1.33", "/p").unwrap_err().contains("1.33"));
        assert!(alias_parameters("al2@latest", "1.32", "/p").is_ok());
        assert!(alias_parameters("ubuntu@latest", "1.33", "/p").is_err());
        assert!(alias_parameters("al2023", "1.33", "/p").is_err());
    }

    #[test]
    fn the_newest_usable_image_wins_per_requirement_set() {
        let ami = |id: &str, date: &str, arch: &str, deprecated: bool| Ami {
            id: id.into(),
            name: id.into(),
            creation_date: date.into(),
            deprecated,
            requirements: vec![Req::arch(arch)],
        };
        let picked = select_amis(vec![
            ami("old", "2024-01-01", "x86_64", false),
            ami("new", "2025-01-01", "x86_64", false),
            ami("newest-deprecated", "2026-01-01", "x86_64", true),
            ami("arm", "2023-01-01", "arm64", false),
        ]);
        let ids: Vec<&str> = picked.iter().map(|a| a.id.as_str()).collect();
        assert_eq!(ids, vec!["new", "arm"]);
    }
}
