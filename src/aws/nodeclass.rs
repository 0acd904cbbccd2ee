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
    let (family, version) =
        alias.split_once('@').ok_or_else(|| format!("alias {alias} is not of the form family@version"))?;
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
                return Err(format!("alias {alias}: AL2 has no AMIs for Kubernetes {k8s} (1.33 and later)"));
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
        other => {
            return Err(format!("alias {alias}: family {other} is not supported (al2023, al2 and bottlerocket are)"));
        }
    })
}

const GPU_COUNT: &str = "karpenter.k8s.aws/instance-gpu-count";
const ACCEL_COUNT: &str = "karpenter.k8s.aws/instance-accelerator-count";

/// A requirement an AMI puts on the instance types it can boot.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
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
    let mut best: BTreeMap<Vec<Req>, Ami> = BTreeMap::new();
    for a in found {
        let key = a.requirements.clone();
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

pub const SUBNETS_READY: &str = "SubnetsReady";
pub const SECURITY_GROUPS_READY: &str = "SecurityGroupsReady";
pub const AMIS_READY: &str = "AMIsReady";
pub const INSTANCE_PROFILE_READY: &str = "InstanceProfileReady";
pub const VALIDATION_SUCCEEDED: &str = "ValidationSucceeded";
/// Written (and part of Ready) only with the `ReservedCapacity` gate on.
pub const CAPACITY_RESERVATIONS_READY: &str = "CapacityReservationsReady";
pub const READY: &str = "Ready";

/// The conditions validation waits for (upstream's `requiredConditions`), in the order they are written.
pub const DEPENDENCIES: [&str; 4] = [SUBNETS_READY, SECURITY_GROUPS_READY, AMIS_READY, INSTANCE_PROFILE_READY];

/// Upstream's ValidationSucceeded while a dependency is not True.
pub const DEPENDENCIES_NOT_READY: &str = "DependenciesNotReady";
const AWAITING_DEPENDENCIES: &str = "Awaiting AMI, Instance Profile, Security Group, and Subnet resolution";

/// Why one condition is not True: upstream's reason and a message for people. `unknown` when it could not be
/// decided (the check itself failed, to be tried again), which upstream leaves Unknown rather than False.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub condition: &'static str,
    pub reason: &'static str,
    pub message: String,
    pub unknown: bool,
}

impl Problem {
    pub fn new(condition: &'static str, reason: &'static str, message: impl Into<String>) -> Problem {
        Problem { condition, reason, message: message.into(), unknown: false }
    }

    pub fn unknown(condition: &'static str, reason: &'static str, message: impl Into<String>) -> Problem {
        Problem { condition, reason, message: message.into(), unknown: true }
    }
}

/// What resolving a NodeClass found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Resolved {
    pub subnets: Vec<Subnet>,
    pub security_groups: Vec<(String, Option<String>)>,
    pub amis: Vec<Ami>,
    /// The instance profile nodes launch with (`instanceProfile`, or the one made for `role`).
    pub instance_profile: Option<String>,
    /// The capacity reservations selected, when they were looked up (gate `ReservedCapacity`).
    pub capacity_reservations: Option<Vec<crate::engine::api::ec2nodeclass::CapacityReservationStatus>>,
    /// Why a part is empty or failed, at most one per condition.
    pub problems: Vec<Problem>,
}

impl Resolved {
    pub fn problem(&self, condition: &str) -> Option<&Problem> {
        self.problems.iter().find(|p| p.condition == condition)
    }

    /// Whether everything validation needs resolved (upstream validates only then).
    pub fn dependencies_ready(&self) -> bool {
        DEPENDENCIES.iter().all(|c| self.problem(c).is_none())
    }
}

#[derive(Debug, Error)]
pub enum ResolveError {
    #[error(transparent)]
    Aws(#[from] AwsError),
}

/// A tag map as written in YAML's flow style: `{karpenter.sh/discovery: demo}`.
fn tags_flow(tags: &BTreeMap<String, String>) -> String {
    let inner: Vec<String> = tags.iter().map(|(k, v)| format!("{k}: {v}")).collect();
    format!("{{{}}}", inner.join(", "))
}

fn flow(fields: Vec<(&str, String)>) -> String {
    let inner: Vec<String> = fields.into_iter().map(|(k, v)| format!("{k}: {v}")).collect();
    format!("{{{}}}", inner.join(", "))
}

/// Subnet or security-group selector terms as the user wrote them: `[{tags: {a: b}}, {id: subnet-1}]`.
pub fn describe_selector_terms(terms: &[SelectorTerm]) -> String {
    let each: Vec<String> = terms
        .iter()
        .map(|t| {
            let mut f = Vec::new();
            if !t.tags.is_empty() {
                f.push(("tags", tags_flow(&t.tags)));
            }
            f.extend(t.id.clone().map(|v| ("id", v)));
            f.extend(t.name.clone().map(|v| ("name", v)));
            f.extend(t.owner_id.clone().map(|v| ("ownerID", v)));
            flow(f)
        })
        .collect();
    format!("[{}]", each.join(", "))
}

/// AMI selector terms as the user wrote them: `[{alias: bottlerocket@latest}]`.
pub fn describe_ami_terms(terms: &[AmiSelectorTerm]) -> String {
    let each: Vec<String> = terms
        .iter()
        .map(|t| {
            let mut f = Vec::new();
            f.extend(t.alias.clone().map(|v| ("alias", v)));
            f.extend(t.id.clone().map(|v| ("id", v)));
            f.extend(t.name.clone().map(|v| ("name", v)));
            f.extend(t.owner.clone().map(|v| ("owner", v)));
            if !t.tags.is_empty() {
                f.push(("tags", tags_flow(&t.tags)));
            }
            f.extend(t.ssm_parameter.clone().map(|v| ("ssmParameter", v)));
            flow(f)
        })
        .collect();
    format!("[{}]", each.join(", "))
}

/// What reading one SSM parameter of an alias or `ssmParameter` term came to, when it gave no image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParameterMiss {
    /// SSM has no such parameter.
    NotFound,
    /// SSM refused or failed (not transiently): the service's code and message.
    Failed(String),
    /// The parameter names an image DescribeImages does not return (or not an x86_64/arm64 one).
    NoImage(String),
}

/// One alias or `ssmParameter` term's parameters that gave no image: who read them, and what each came to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ParameterReport {
    /// `alias bottlerocket@latest (Kubernetes 1.31)` or `ssmParameter`.
    pub term: String,
    /// Why the term named no parameter at all (an alias this tool cannot resolve).
    pub invalid: Option<String>,
    pub misses: Vec<(String, ParameterMiss)>,
}

impl ParameterReport {
    /// For people: the parameters not found in one list, each other failure with its reason.
    pub fn describe(&self) -> Option<String> {
        if let Some(why) = &self.invalid {
            return Some(why.clone());
        }
        if self.misses.is_empty() {
            return None;
        }
        let mut parts = Vec::new();
        let missing: Vec<&str> =
            self.misses.iter().filter(|(_, m)| *m == ParameterMiss::NotFound).map(|(n, _)| n.as_str()).collect();
        match missing.len() {
            0 => {}
            1 => parts.push(format!("SSM parameter {} does not exist", missing[0])),
            _ => parts.push(format!("SSM parameters {} do not exist", missing.join(", "))),
        }
        for (name, miss) in &self.misses {
            match miss {
                ParameterMiss::NotFound => {}
                ParameterMiss::Failed(why) => parts.push(format!("SSM parameter {name} could not be read ({why})")),
                ParameterMiss::NoImage(id) => parts.push(format!(
                    "SSM parameter {name} names image {id}, which DescribeImages does not return as an x86_64 or \
                     arm64 image"
                )),
            }
        }
        Some(format!("{}: {}", self.term, parts.join("; ")))
    }
}

/// Upstream's AMIsReady message when nothing matched, with the terms and, for aliases and SSM parameters, which
/// parameters were read and what each came to.
pub fn ami_not_found_message(terms: &[AmiSelectorTerm], reports: &[ParameterReport]) -> String {
    let mut m = format!("AMISelector did not match any AMIs (amiSelectorTerms: {})", describe_ami_terms(terms));
    for r in reports.iter().filter_map(ParameterReport::describe) {
        m.push_str("; ");
        m.push_str(&r);
    }
    m
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

/// Resolves every selector of `class` against EC2 (and SSM for aliases and parameters). Failures worth retrying
/// (no answer, throttling) are errors, so the status last written stands; the rest become conditions.
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
        r.problems.push(Problem::new(
            SUBNETS_READY,
            "SubnetsNotFound",
            format!(
                "SubnetSelector did not match any Subnets (subnetSelectorTerms: {})",
                describe_selector_terms(&spec.subnet_selector_terms)
            ),
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
    if r.security_groups.is_empty() && !spec.security_group_selector_terms.is_empty() {
        r.problems.push(Problem::new(
            SECURITY_GROUPS_READY,
            "SecurityGroupsNotFound",
            format!(
                "SecurityGroupSelector did not match any SecurityGroups (securityGroupSelectorTerms: {})",
                describe_selector_terms(&spec.security_group_selector_terms)
            ),
        ));
    }

    // AMIs: aliases and SSM parameters give image ids (with the variant's requirements), the rest are queries.
    let mut reports: Vec<ParameterReport> = Vec::new();
    let mut found = Vec::new();
    for t in &spec.ami_selector_terms {
        let (term, params) = match (&t.alias, &t.ssm_parameter) {
            (Some(a), _) => {
                let term = format!("alias {a} (Kubernetes {})", alias.k8s_version);
                match alias_parameters(a, &alias.k8s_version, &alias.ssm_prefix) {
                    Ok(p) => (term, p),
                    Err(e) => {
                        reports.push(ParameterReport { term, invalid: Some(e), misses: Vec::new() });
                        continue;
                    }
                }
            }
            (None, Some(p)) => ("ssmParameter".to_string(), vec![(p.clone(), Vec::new())]),
            (None, None) => continue,
        };
        let mut report = ParameterReport { term, ..Default::default() };
        let before = found.len();
        for (name, reqs) in params {
            let id = match ssm.get_parameter().name(&name).send().await {
                Ok(out) => match out.parameter.and_then(|p| p.value) {
                    Some(v) => v,
                    None => {
                        report.misses.push((name, ParameterMiss::NotFound));
                        continue;
                    }
                },
                // A variant this version doesn't publish (no neuron AMI, say) is simply absent.
                Err(e) if e.as_service_error().is_some_and(|s| s.is_parameter_not_found()) => {
                    report.misses.push((name, ParameterMiss::NotFound));
                    continue;
                }
                Err(e) => {
                    let e = AwsError::call(format!("GetParameter {name}"), e);
                    if e.is_transient() {
                        return Err(e.into());
                    }
                    let why = match &e {
                        AwsError::Call { message, .. } => message.clone(),
                        other => other.to_string(),
                    };
                    report.misses.push((name, ParameterMiss::Failed(why)));
                    continue;
                }
            };
            let images = match ec2.describe_images().image_ids(&id).include_deprecated(true).send().await {
                Ok(out) => out.images.unwrap_or_default(),
                Err(e) => {
                    let e = AwsError::call(format!("DescribeImages {id}"), e);
                    // A parameter naming an image that is gone (or was never an image id) gives nothing.
                    if !e.code().is_some_and(|c| c.starts_with("InvalidAMIID")) {
                        return Err(e.into());
                    }
                    Vec::new()
                }
            };
            let amis: Vec<Ami> = images.iter().filter_map(|i| ami_of(i, &reqs)).collect();
            if amis.is_empty() {
                report.misses.push((name, ParameterMiss::NoImage(id)));
            }
            found.extend(amis);
        }
        // Only a term that gave nothing is reported: variants an alias does not publish are expected.
        if found.len() == before {
            reports.push(report);
        }
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
    if r.amis.is_empty() {
        r.problems.push(Problem::new(
            AMIS_READY,
            "AMINotFound",
            ami_not_found_message(&spec.ami_selector_terms, &reports),
        ));
    }
    Ok(r)
}

fn condition(type_: &str, status: &str, reason: &str, message: &str, now: &str) -> Condition {
    Condition {
        type_: type_.to_string(),
        status: status.to_string(),
        reason: Some(reason.to_string()),
        message: Some(message.to_string()),
        last_transition_time: Some(now.to_string()),
        observed_generation: None,
    }
}

fn problem_condition(p: &Problem, now: &str) -> Condition {
    condition(p.condition, if p.unknown { "Unknown" } else { "False" }, p.reason, &p.message, now)
}

/// The conditions upstream writes for what was found, in upstream's terms: one per part (True with the type as
/// reason, else the part's reason and message); `ValidationSucceeded` waiting (`DependenciesNotReady`) while a
/// part is not True; and `Ready` True only when all of them are, else `UnhealthyDependents` (or, with nothing
/// False, `ReconcilingDependents`) naming them: `SubnetsReady=False, ValidationSucceeded=False`.
pub fn conditions(r: &Resolved, now: &str) -> Vec<Condition> {
    let mut out: Vec<Condition> = DEPENDENCIES
        .iter()
        .map(|c| match r.problem(c) {
            Some(p) => problem_condition(p, now),
            None => condition(c, "True", c, "", now),
        })
        .collect();
    let waiting: Vec<&Condition> = out.iter().filter(|c| c.status != "True").collect();
    out.push(if !waiting.is_empty() {
        // Upstream: any dependency False makes validation False, else (some Unknown) Unknown.
        let status = if waiting.iter().any(|c| c.status == "False") { "False" } else { "Unknown" };
        condition(VALIDATION_SUCCEEDED, status, DEPENDENCIES_NOT_READY, AWAITING_DEPENDENCIES, now)
    } else {
        match r.problem(VALIDATION_SUCCEEDED) {
            Some(p) => problem_condition(p, now),
            None => condition(VALIDATION_SUCCEEDED, "True", VALIDATION_SUCCEEDED, "", now),
        }
    });
    // Reservations count for Ready, not for validation (gate on only: otherwise they were not looked up).
    if r.capacity_reservations.is_some() || r.problem(CAPACITY_RESERVATIONS_READY).is_some() {
        out.push(match r.problem(CAPACITY_RESERVATIONS_READY) {
            Some(p) => problem_condition(p, now),
            None => condition(CAPACITY_RESERVATIONS_READY, "True", CAPACITY_RESERVATIONS_READY, "", now),
        });
    }
    let unhealthy: Vec<&Condition> = out.iter().filter(|c| c.status != "True").collect();
    let ready = if unhealthy.is_empty() {
        condition(READY, "True", READY, "", now)
    } else {
        let any_false = unhealthy.iter().any(|c| c.status == "False");
        let message: Vec<String> = unhealthy.iter().map(|c| format!("{}={}", c.type_, c.status)).collect();
        condition(
            READY,
            if any_false { "False" } else { "Unknown" },
            if any_false { "UnhealthyDependents" } else { "ReconcilingDependents" },
            &message.join(", "),
            now,
        )
    };
    out.push(ready);
    out
}

/// The status upstream writes for what was found: subnets, security groups, AMIs, the instance profile and the
/// conditions (see [`conditions`]).
pub fn status(r: &Resolved, now: &str) -> EC2NodeClassStatus {
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
                        values: q.values.clone().into(),
                        min_values: None,
                    })
                    .collect(),
                deprecated: a.deprecated.then_some(true),
            })
            .collect(),
        instance_profile: r.instance_profile.clone(),
        capacity_reservations: r.capacity_reservations.clone().unwrap_or_default(),
        conditions: conditions(r, now),
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

    fn conds(r: &Resolved) -> Vec<(String, String, String, String)> {
        conditions(r, "t")
            .into_iter()
            .map(|c| (c.type_, c.status, c.reason.unwrap_or_default(), c.message.unwrap_or_default()))
            .collect()
    }

    #[test]
    fn validation_waits_on_its_dependencies_and_ready_names_what_is_not_true() {
        let all_true = conds(&Resolved::default());
        assert!(all_true.iter().all(|(t, s, reason, m)| s == "True" && reason == t && m.is_empty()), "{all_true:?}");

        let r = Resolved {
            problems: vec![Problem::new(SUBNETS_READY, "SubnetsNotFound", "SubnetSelector did not match any Subnets")],
            ..Default::default()
        };
        let c = conds(&r);
        assert_eq!(c[4].1, "False");
        assert_eq!(c[4].2, DEPENDENCIES_NOT_READY);
        assert_eq!(
            c[5],
            (
                "Ready".into(),
                "False".into(),
                "UnhealthyDependents".into(),
                "SubnetsReady=False, ValidationSucceeded=False".into()
            )
        );

        // Only an undecided dependency: validation and Ready are Unknown, as upstream's are.
        let r = Resolved {
            problems: vec![Problem::unknown(INSTANCE_PROFILE_READY, "InstanceProfileNotReady", "throttled")],
            ..Default::default()
        };
        let c = conds(&r);
        assert_eq!((c[3].1.as_str(), c[4].1.as_str()), ("Unknown", "Unknown"));
        assert_eq!(
            (c[5].1.as_str(), c[5].2.as_str(), c[5].3.as_str()),
            ("Unknown", "ReconcilingDependents", "InstanceProfileReady=Unknown, ValidationSucceeded=Unknown")
        );

        // Dependencies fine, validation refused: its own reason, and Ready names it alone.
        let r = Resolved {
            problems: vec![Problem::new(
                VALIDATION_SUCCEEDED,
                "CreateFleetAuthCheckFailed",
                "Controller isn't authorized to call ec2:CreateFleet",
            )],
            ..Default::default()
        };
        let c = conds(&r);
        assert_eq!(c[4].2, "CreateFleetAuthCheckFailed");
        assert_eq!(c[5].3, "ValidationSucceeded=False");
    }

    #[test]
    fn terms_and_parameter_misses_read_as_written() {
        let subnet_terms = vec![
            term(&[("karpenter.sh/discovery", "demo"), ("tier", "*")], None, None),
            term(&[], Some("subnet-1"), None),
        ];
        assert_eq!(
            describe_selector_terms(&subnet_terms),
            "[{tags: {karpenter.sh/discovery: demo, tier: *}}, {id: subnet-1}]"
        );
        let ami_terms =
            vec![AmiSelectorTerm { name: Some("my-ami-*".into()), owner: Some("self".into()), ..Default::default() }];
        let report = ParameterReport {
            term: "alias al2023@latest (Kubernetes 1.33)".into(),
            invalid: None,
            misses: vec![
                ("/p/a".into(), ParameterMiss::NotFound),
                ("/p/b".into(), ParameterMiss::Failed("AccessDeniedException: no".into())),
                ("/p/c".into(), ParameterMiss::NotFound),
            ],
        };
        assert_eq!(
            ami_not_found_message(&ami_terms, &[report]),
            "AMISelector did not match any AMIs (amiSelectorTerms: [{name: my-ami-*, owner: self}]); alias \
             al2023@latest (Kubernetes 1.33): SSM parameters /p/a, /p/c do not exist; SSM parameter /p/b could not \
             be read (AccessDeniedException: no)"
        );
        let invalid = ParameterReport {
            invalid: Some("alias ubuntu@latest: family ubuntu is not supported".into()),
            ..Default::default()
        };
        assert_eq!(invalid.describe().as_deref(), Some("alias ubuntu@latest: family ubuntu is not supported"));
        assert_eq!(ParameterReport::default().describe(), None);
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
