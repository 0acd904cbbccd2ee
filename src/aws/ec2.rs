//! The EC2 calls of a launch and of instance upkeep (aws.md §3.2–3.7, §6): launch templates ensured by name and
//! deleted when unused, CreateFleet (instant) with one idempotency token per request, the answer read back into a
//! launch or into capacity errors, instances listed by this cluster's tags, and termination.
//!
//! The SDK retries throttling and 5xx answers with backoff; CreateFleet carries a client token derived from the
//! request, so a retry of a call that did reach EC2 returns the same fleet instead of launching again. A launch
//! repeated after the process lost track of it first looks for an instance tagged with the NodeClaim's name.

use std::collections::BTreeMap;

use aws_sdk_ec2::Client;
use aws_sdk_ec2::types::{
    DefaultTargetCapacityType, Filter, FleetLaunchTemplateConfigRequest, FleetLaunchTemplateOverridesRequest,
    FleetLaunchTemplateSpecificationRequest, FleetOnDemandAllocationStrategy, FleetType, Instance,
    InstanceLifecycleType, InstanceStateName, InstanceType, LaunchTemplateBlockDeviceMappingRequest,
    LaunchTemplateEbsBlockDeviceRequest, LaunchTemplateHttpTokensState,
    LaunchTemplateIamInstanceProfileSpecificationRequest, LaunchTemplateInstanceMetadataEndpointState,
    LaunchTemplateInstanceMetadataOptionsRequest, LaunchTemplateInstanceMetadataProtocolIpv6,
    LaunchTemplateInstanceMetadataTagsState, LaunchTemplateInstanceNetworkInterfaceSpecificationRequest,
    LaunchTemplatesMonitoringRequest, OnDemandOptionsRequest, RequestLaunchTemplateData, ResourceType,
    SpotAllocationStrategy, SpotOptionsRequest, Tag, TagSpecification, TargetCapacitySpecificationRequest, VolumeType,
};
use base64::Engine as _;

use crate::engine::resources::parse_quantity;

use super::config::AwsError;
use super::launch::{FleetPlan, TAG_CLUSTER_NAME, TAG_NODECLAIM, Template};
use super::unavailable::is_capacity_error;

/// Instance states that count as "exists" (a terminated instance is gone).
pub const LIVE_STATES: [&str; 5] = ["pending", "running", "stopping", "stopped", "shutting-down"];

/// One instance of this cluster, as listing and garbage collection need it.
#[derive(Debug, Clone, PartialEq)]
pub struct Ec2Instance {
    pub id: String,
    pub instance_type: String,
    pub zone: String,
    pub state: String,
    /// Seconds since the epoch.
    pub launched_at: Option<i64>,
    pub spot: bool,
    pub image_id: Option<String>,
    pub subnet_id: Option<String>,
    pub security_groups: Vec<String>,
    pub tags: BTreeMap<String, String>,
    /// The ARN of its IAM instance profile.
    pub instance_profile_arn: Option<String>,
    /// The capacity reservation it runs in, if any (EC2 clears it when the reservation ends or is cancelled).
    pub capacity_reservation_id: Option<String>,
    /// Launched with the preference `capacity-reservations-only`, as launches into a reservation are; an instance
    /// that merely landed in an *open* reservation is still on-demand to Karpenter.
    pub reservations_only: bool,
}

impl Ec2Instance {
    /// `aws:///<zone>/<id>`, the NodeClaim's and Node's providerID.
    pub fn provider_id(&self) -> String {
        format!("aws:///{}/{}", self.zone, self.id)
    }

    /// Its capacity type as upstream's provider reads it: `reserved` only while it runs in a reservation it was
    /// launched into (see [`Ec2Instance::reservations_only`]).
    pub fn capacity_type(&self) -> &'static str {
        if self.spot {
            "spot"
        } else if self.capacity_reservation_id.is_some() && self.reservations_only {
            "reserved"
        } else {
            "on-demand"
        }
    }
}

/// The instance id of an `aws:///<zone>/<id>` provider id.
pub fn instance_id(provider_id: &str) -> Option<&str> {
    let rest = provider_id.strip_prefix("aws:///")?;
    let id = rest.rsplit('/').next()?;
    id.starts_with("i-").then_some(id)
}

fn instance(i: &Instance) -> Option<Ec2Instance> {
    Some(Ec2Instance {
        id: i.instance_id.clone()?,
        instance_type: i.instance_type.as_ref().map(|t| t.as_str().to_string()).unwrap_or_default(),
        zone: i.placement.as_ref().and_then(|p| p.availability_zone.clone()).unwrap_or_default(),
        state: i.state.as_ref().and_then(|s| s.name.as_ref()).map(|n| n.as_str().to_string()).unwrap_or_default(),
        launched_at: i.launch_time.map(|t| t.secs()),
        // moto leaves SpotInstanceRequestId empty on fleet instances; the lifecycle says spot (aws.md §8.3).
        spot: i.spot_instance_request_id.is_some() || i.instance_lifecycle == Some(InstanceLifecycleType::Spot),
        image_id: i.image_id.clone(),
        subnet_id: i.subnet_id.clone(),
        security_groups: i.security_groups().iter().filter_map(|g| g.group_id.clone()).collect(),
        tags: i.tags().iter().filter_map(|t| Some((t.key.clone()?, t.value.clone().unwrap_or_default()))).collect(),
        instance_profile_arn: i.iam_instance_profile.as_ref().and_then(|p| p.arn.clone()),
        capacity_reservation_id: i.capacity_reservation_id.clone(),
        reservations_only: i
            .capacity_reservation_specification
            .as_ref()
            .and_then(|s| s.capacity_reservation_preference.as_ref())
            .is_some_and(|p| *p == aws_sdk_ec2::types::CapacityReservationPreference::CapacityReservationsOnly),
    })
}

fn tag_spec(kind: ResourceType, tags: &BTreeMap<String, String>) -> TagSpecification {
    let mut b = TagSpecification::builder().resource_type(kind);
    for (k, v) in tags {
        b = b.tags(Tag::builder().key(k).value(v).build());
    }
    b.build()
}

fn filter(name: &str, values: &[&str]) -> Filter {
    Filter::builder().name(name).set_values(Some(values.iter().map(|v| v.to_string()).collect())).build()
}

fn gib(size: &str) -> Option<i32> {
    let bytes = parse_quantity(size).ok()?.value();
    i32::try_from((bytes + (1 << 30) - 1) >> 30).ok()
}

fn template_data(t: &Template) -> RequestLaunchTemplateData {
    let mut nic = LaunchTemplateInstanceNetworkInterfaceSpecificationRequest::builder()
        .device_index(0)
        .set_groups(Some(t.security_groups.clone()));
    if let Some(p) = t.associate_public_ip {
        nic = nic.associate_public_ip_address(p);
    }
    let mut b = RequestLaunchTemplateData::builder()
        .image_id(&t.image_id)
        .user_data(base64::engine::general_purpose::STANDARD.encode(&t.user_data))
        .monitoring(LaunchTemplatesMonitoringRequest::builder().enabled(t.detailed_monitoring).build())
        .metadata_options(
            LaunchTemplateInstanceMetadataOptionsRequest::builder()
                .http_endpoint(LaunchTemplateInstanceMetadataEndpointState::from(t.http_endpoint.as_str()))
                .http_protocol_ipv6(LaunchTemplateInstanceMetadataProtocolIpv6::from(t.http_protocol_ipv6.as_str()))
                .http_put_response_hop_limit(i32::try_from(t.http_put_response_hop_limit).unwrap_or(1))
                .http_tokens(LaunchTemplateHttpTokensState::from(t.http_tokens.as_str()))
                .instance_metadata_tags(LaunchTemplateInstanceMetadataTagsState::Disabled)
                .build(),
        )
        // The security groups travel inside the network interface, as upstream does.
        .network_interfaces(nic.build());
    if let Some(id) = &t.capacity_reservation_id {
        b = b.capacity_reservation_specification(
            aws_sdk_ec2::types::LaunchTemplateCapacityReservationSpecificationRequest::builder()
                .capacity_reservation_preference(
                    aws_sdk_ec2::types::CapacityReservationPreference::CapacityReservationsOnly,
                )
                .capacity_reservation_target(
                    aws_sdk_ec2::types::CapacityReservationTarget::builder().capacity_reservation_id(id).build(),
                )
                .build(),
        );
    }
    if let Some(m) = &t.market_type {
        b = b.instance_market_options(
            aws_sdk_ec2::types::LaunchTemplateInstanceMarketOptionsRequest::builder()
                .market_type(aws_sdk_ec2::types::MarketType::from(m.as_str()))
                .build(),
        );
    }
    if let Some(p) = &t.instance_profile {
        b = b.iam_instance_profile(LaunchTemplateIamInstanceProfileSpecificationRequest::builder().name(p).build());
    }
    for d in &t.block_devices {
        let mut m = LaunchTemplateBlockDeviceMappingRequest::builder().set_device_name(d.device_name.clone());
        if let Some(e) = &d.ebs {
            let mut ebs = LaunchTemplateEbsBlockDeviceRequest::builder()
                .set_encrypted(e.encrypted)
                .set_delete_on_termination(e.delete_on_termination)
                .set_kms_key_id(e.kms_key_id.clone())
                .set_snapshot_id(e.snapshot_id.clone())
                .set_iops(e.iops.and_then(|v| i32::try_from(v).ok()))
                .set_throughput(e.throughput.and_then(|v| i32::try_from(v).ok()))
                .set_volume_size(e.volume_size.as_deref().and_then(gib));
            if let Some(v) = &e.volume_type {
                ebs = ebs.volume_type(VolumeType::from(v.as_str()));
            }
            m = m.ebs(ebs.build());
        }
        b = b.block_device_mappings(m.build());
    }
    b.build()
}

/// Whether an SDK error is one of the "it isn't there" codes.
fn not_found<E: aws_sdk_ec2::error::ProvideErrorMetadata>(e: &E) -> bool {
    e.code().is_some_and(|c| c.contains("NotFound"))
}

/// Launch templates this process made or found, by name → id, with when each was last used.
#[derive(Debug, Default)]
pub struct Templates {
    known: BTreeMap<String, (String, i64)>,
}

/// Unused templates are deleted after this many seconds.
pub const TEMPLATE_TTL_SECS: i64 = 60;

impl Templates {
    /// The template's id, described or created.
    pub async fn ensure(&mut self, ec2: &Client, t: &Template, cluster: &str, now: i64) -> Result<String, AwsError> {
        let name = t.name();
        if let Some((id, used)) = self.known.get_mut(&name) {
            *used = now;
            return Ok(id.clone());
        }
        let described = ec2.describe_launch_templates().launch_template_names(&name).send().await;
        let id = match described {
            Ok(out) => out.launch_templates().first().and_then(|lt| lt.launch_template_id.clone()),
            Err(e) if e.as_service_error().is_some_and(not_found) => None,
            Err(e) => return Err(AwsError::call(format!("DescribeLaunchTemplates {name}"), e)),
        };
        let id = match id {
            Some(id) => id,
            None => {
                let mut tags = t.tags.clone();
                tags.insert(TAG_CLUSTER_NAME.into(), cluster.into());
                let out = ec2
                    .create_launch_template()
                    .launch_template_name(&name)
                    .launch_template_data(template_data(t))
                    .tag_specifications(tag_spec(ResourceType::LaunchTemplate, &tags))
                    .send()
                    .await
                    .map_err(|e| AwsError::call(format!("CreateLaunchTemplate {name}"), e))?;
                out.launch_template.and_then(|lt| lt.launch_template_id).unwrap_or_default()
            }
        };
        self.known.insert(name, (id.clone(), now));
        Ok(id)
    }

    /// Picks up this cluster's templates (after a restart), so unused ones are deleted in time.
    pub async fn hydrate(&mut self, ec2: &Client, cluster: &str, now: i64) -> Result<usize, AwsError> {
        let out = ec2
            .describe_launch_templates()
            .filters(filter(&format!("tag:{TAG_CLUSTER_NAME}"), &[cluster]))
            .filters(filter("tag-key", &[crate::engine::labels::NODECLASS_EC2]))
            .send()
            .await
            .map_err(|e| AwsError::call("DescribeLaunchTemplates", e))?;
        let mut n = 0;
        for lt in out.launch_templates() {
            if let (Some(name), Some(id)) = (&lt.launch_template_name, &lt.launch_template_id) {
                self.known.entry(name.clone()).or_insert_with(|| (id.clone(), now));
                n += 1;
            }
        }
        Ok(n)
    }

    /// Deletes the templates unused for [`TEMPLATE_TTL_SECS`]; returns their names.
    pub async fn delete_unused(&mut self, ec2: &Client, now: i64) -> Result<Vec<String>, AwsError> {
        let stale: Vec<(String, String)> = self
            .known
            .iter()
            .filter(|(_, (_, used))| now - used >= TEMPLATE_TTL_SECS)
            .map(|(n, (id, _))| (n.clone(), id.clone()))
            .collect();
        let mut deleted = Vec::new();
        for (name, id) in stale {
            match ec2.delete_launch_template().launch_template_id(&id).send().await {
                Ok(_) => {}
                Err(e) if e.as_service_error().is_some_and(not_found) => {}
                Err(e) => return Err(AwsError::call(format!("DeleteLaunchTemplate {name}"), e)),
            }
            self.known.remove(&name);
            deleted.push(name);
        }
        Ok(deleted)
    }

    /// Forgets a template EC2 says is gone (the next ensure creates it again).
    pub fn forget(&mut self, name: &str) {
        self.known.remove(name);
    }

    pub fn names(&self) -> Vec<String> {
        self.known.keys().cloned().collect()
    }
}

/// One instance CreateFleet launched.
#[derive(Debug, Clone, PartialEq)]
pub struct Launched {
    pub instance_id: String,
    pub instance_type: String,
    pub zone: String,
    pub image_id: Option<String>,
}

/// What one CreateFleet did: the instances, and each error as (code, message, instance type, zone).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FleetAnswer {
    pub launched: Vec<Launched>,
    pub errors: Vec<(String, String, Option<String>, Option<String>)>,
}

impl FleetAnswer {
    /// Every error said "no capacity".
    pub fn all_capacity_errors(&self) -> bool {
        !self.errors.is_empty() && self.errors.iter().all(|(c, ..)| is_capacity_error(c))
    }
}

/// A client token for the request: the same request (as a retry sends it) gets the same token. `claims` are the
/// UIDs of the claims it launches for.
pub fn client_token(claims: &[&str], plan: &FleetPlan) -> String {
    let mut parts: Vec<&[u8]> = claims.iter().map(|c| c.as_bytes()).collect();
    parts.push(plan.capacity_type.as_bytes());
    let names: Vec<String> = plan.configs.iter().map(|(t, _)| t.name()).collect();
    for ((_, overrides), name) in plan.configs.iter().zip(&names) {
        parts.push(name.as_bytes());
        for o in overrides {
            parts.push(o.instance_type.as_bytes());
            parts.push(o.subnet_id.as_bytes());
        }
    }
    format!("karpenter-tui-{:016x}", super::stable_hash(&parts))
}

/// CreateFleet (instant) for `count` instances over the plan's ensured templates, tagged with `tags`.
pub async fn create_fleet(
    ec2: &Client,
    plan: &FleetPlan,
    tags: &BTreeMap<String, String>,
    count: usize,
    token: &str,
) -> Result<FleetAnswer, AwsError> {
    let spot = plan.capacity_type == "spot";
    let mut req = ec2
        .create_fleet()
        .r#type(FleetType::Instant)
        .client_token(token)
        .target_capacity_specification(
            TargetCapacitySpecificationRequest::builder()
                .total_target_capacity(i32::try_from(count).unwrap_or(i32::MAX))
                .default_target_capacity_type(DefaultTargetCapacityType::from(plan.target.as_str()))
                .build(),
        )
        .tag_specifications(tag_spec(ResourceType::Instance, tags))
        .tag_specifications(tag_spec(ResourceType::Volume, tags))
        .tag_specifications(tag_spec(ResourceType::Fleet, tags));
    // Overlay-priced claims: EC2 follows the priorities (the overlaid prices, lower first), as upstream does.
    // A capacity block takes no allocation options; an interruptible reservation's fleet names its kind.
    req = match (plan.target.as_str(), spot, plan.prioritized) {
        ("capacity-block", ..) => req,
        ("reserved-capacity", ..) => req.reserved_capacity_options(
            aws_sdk_ec2::types::ReservedCapacityOptionsRequest::builder()
                .reservation_types(aws_sdk_ec2::types::FleetReservationType::InterruptibleCapacityReservation)
                .build(),
        ),
        (_, true, false) => req.spot_options(
            SpotOptionsRequest::builder().allocation_strategy(SpotAllocationStrategy::PriceCapacityOptimized).build(),
        ),
        (_, true, true) => req.spot_options(
            SpotOptionsRequest::builder()
                .allocation_strategy(SpotAllocationStrategy::CapacityOptimizedPrioritized)
                .build(),
        ),
        (_, false, false) => req.on_demand_options(
            OnDemandOptionsRequest::builder().allocation_strategy(FleetOnDemandAllocationStrategy::LowestPrice).build(),
        ),
        (_, false, true) => req.on_demand_options(
            OnDemandOptionsRequest::builder().allocation_strategy(FleetOnDemandAllocationStrategy::Prioritized).build(),
        ),
    };
    for (t, overrides) in &plan.configs {
        let mut c = FleetLaunchTemplateConfigRequest::builder().launch_template_specification(
            FleetLaunchTemplateSpecificationRequest::builder()
                .launch_template_name(t.name())
                .version("$Latest")
                .build(),
        );
        for o in overrides {
            c = c.overrides(
                FleetLaunchTemplateOverridesRequest::builder()
                    .instance_type(InstanceType::from(o.instance_type.as_str()))
                    .subnet_id(&o.subnet_id)
                    .availability_zone(&o.zone)
                    .image_id(&o.image_id)
                    .priority(o.priority)
                    .build(),
            );
        }
        req = req.launch_template_configs(c.build());
    }
    let out = req.send().await.map_err(|e| AwsError::call("CreateFleet", e))?;
    let mut answer = FleetAnswer::default();
    for i in out.instances() {
        let ov = i.launch_template_and_overrides().and_then(|l| l.overrides());
        let instance_type = i
            .instance_type()
            .map(|t| t.as_str().to_string())
            .or_else(|| ov.and_then(|o| o.instance_type.as_ref()).map(|t| t.as_str().to_string()))
            .unwrap_or_default();
        let zone = ov.and_then(|o| o.availability_zone.clone()).or_else(|| i.availability_zone().map(str::to_string));
        for id in i.instance_ids() {
            answer.launched.push(Launched {
                instance_id: id.clone(),
                instance_type: instance_type.clone(),
                zone: zone.clone().unwrap_or_default(),
                image_id: ov.and_then(|o| o.image_id.clone()),
            });
        }
    }
    answer.errors = out
        .errors()
        .iter()
        .map(|e| {
            let ov = e.launch_template_and_overrides().and_then(|l| l.overrides());
            (
                e.error_code().unwrap_or("Unknown").to_string(),
                e.error_message().unwrap_or("").to_string(),
                ov.and_then(|o| o.instance_type.as_ref()).map(|t| t.as_str().to_string()),
                ov.and_then(|o| o.availability_zone.clone()),
            )
        })
        .collect();
    Ok(answer)
}

/// A validation call that did not pass: which call, whether EC2 refused it for lack of rights
/// (`UnauthorizedOperation`, upstream's `...AuthCheckFailed`), and what it said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DryRunFailure {
    /// `CreateLaunchTemplate`, `CreateFleet` or `RunInstances`.
    pub call: &'static str,
    pub refused: bool,
    pub message: String,
}

impl DryRunFailure {
    /// Upstream's ValidationSucceeded reason for a refusal of this call.
    pub fn reason(&self) -> &'static str {
        match (self.refused, self.call) {
            (true, "CreateFleet") => "CreateFleetAuthCheckFailed",
            (true, "CreateLaunchTemplate") => "CreateLaunchTemplateAuthCheckFailed",
            (true, _) => "RunInstancesAuthCheckFailed",
            (false, _) => "ValidationCheckFailed",
        }
    }
}

/// What a dry run said: `DryRunOperation` is a pass, `UnauthorizedOperation` a refusal, anything else a check that
/// could not be made.
fn dry_run_outcome<T, E>(call: &'static str, r: Result<T, aws_sdk_ec2::error::SdkError<E>>) -> Result<(), DryRunFailure>
where
    E: aws_sdk_ec2::error::ProvideErrorMetadata + std::error::Error + 'static,
{
    match r {
        // Some emulators ignore DryRun; a success is still a yes.
        Ok(_) => Ok(()),
        Err(e) => {
            let e = AwsError::call(format!("{call} dry run"), e);
            match e.code() {
                Some("DryRunOperation") => Ok(()),
                code => {
                    Err(DryRunFailure { call, refused: code == Some("UnauthorizedOperation"), message: e.to_string() })
                }
            }
        }
    }
}

/// Whether this account may launch what the plan asks for (upstream's NodeClass validation): CreateFleet and
/// RunInstances as dry runs with the plan's first template and override.
pub async fn dry_run(ec2: &Client, plan: &FleetPlan) -> Result<(), DryRunFailure> {
    let Some((t, o)) = plan.configs.iter().find_map(|(t, o)| o.first().map(|o| (t, o))) else { return Ok(()) };
    let fleet = ec2
        .create_fleet()
        .dry_run(true)
        .r#type(FleetType::Instant)
        .target_capacity_specification(
            TargetCapacitySpecificationRequest::builder()
                .total_target_capacity(1)
                .default_target_capacity_type(DefaultTargetCapacityType::OnDemand)
                .build(),
        )
        .launch_template_configs(
            FleetLaunchTemplateConfigRequest::builder()
                .launch_template_specification(
                    FleetLaunchTemplateSpecificationRequest::builder()
                        .launch_template_name(t.name())
                        .version("$Latest")
                        .build(),
                )
                .overrides(
                    FleetLaunchTemplateOverridesRequest::builder()
                        .instance_type(InstanceType::from(o.instance_type.as_str()))
                        .subnet_id(&o.subnet_id)
                        .image_id(&o.image_id)
                        .build(),
                )
                .build(),
        )
        .send()
        .await;
    dry_run_outcome("CreateFleet", fleet)?;
    let run = ec2
        .run_instances()
        .dry_run(true)
        .launch_template(
            aws_sdk_ec2::types::LaunchTemplateSpecification::builder()
                .launch_template_name(t.name())
                .version("$Latest")
                .build(),
        )
        .instance_type(InstanceType::from(o.instance_type.as_str()))
        .subnet_id(&o.subnet_id)
        .min_count(1)
        .max_count(1)
        .send()
        .await;
    dry_run_outcome("RunInstances", run)
}

/// Tags one instance (the NodeClaim name of a batched launch).
pub async fn tag(ec2: &Client, id: &str, key: &str, value: &str) -> Result<(), AwsError> {
    ec2.create_tags()
        .resources(id)
        .tags(Tag::builder().key(key).value(value).build())
        .send()
        .await
        .map(drop)
        .map_err(|e| AwsError::call(format!("CreateTags {id}"), e))
}

async fn describe(ec2: &Client, filters: Vec<Filter>) -> Result<Vec<Ec2Instance>, AwsError> {
    let mut out = Vec::new();
    let mut pages = ec2.describe_instances().set_filters(Some(filters)).max_results(1000).into_paginator().send();
    while let Some(page) = pages.next().await {
        let page = page.map_err(|e| AwsError::call("DescribeInstances", e))?;
        for r in page.reservations() {
            out.extend(r.instances().iter().filter_map(instance));
        }
    }
    out.sort_by(|a, b| a.id.cmp(&b.id));
    Ok(out)
}

/// This cluster's instances launched for NodeClaims that are not terminated (aws.md §6).
pub async fn list(ec2: &Client, cluster: &str) -> Result<Vec<Ec2Instance>, AwsError> {
    describe(
        ec2,
        vec![
            filter("tag-key", &[crate::engine::labels::NODEPOOL]),
            filter("tag-key", &[crate::engine::labels::NODECLASS_EC2]),
            filter(&format!("tag:{TAG_CLUSTER_NAME}"), &[cluster]),
            filter("instance-state-name", &LIVE_STATES),
        ],
    )
    .await
}

/// Live instances launched for these NodeClaims (by their tag), if earlier launches got that far: claim → instance.
pub async fn find_for_claims(
    ec2: &Client,
    cluster: &str,
    claims: &[&str],
) -> Result<BTreeMap<String, Ec2Instance>, AwsError> {
    let found = describe(
        ec2,
        vec![
            filter(&format!("tag:{TAG_NODECLAIM}"), claims),
            filter(&format!("tag:{TAG_CLUSTER_NAME}"), &[cluster]),
            filter("instance-state-name", &LIVE_STATES),
        ],
    )
    .await?;
    Ok(found.into_iter().filter_map(|i| Some((i.tags.get(TAG_NODECLAIM)?.clone(), i))).collect())
}

/// One instance by id; `None` when it is gone (not found, or terminated).
pub async fn get(ec2: &Client, id: &str) -> Result<Option<Ec2Instance>, AwsError> {
    match ec2.describe_instances().instance_ids(id).send().await {
        Ok(out) => Ok(out
            .reservations()
            .iter()
            .flat_map(|r| r.instances())
            .filter_map(instance)
            .find(|i| i.id == id && LIVE_STATES.contains(&i.state.as_str()))),
        Err(e) if e.as_service_error().is_some_and(not_found) => Ok(None),
        Err(e) => Err(AwsError::call(format!("DescribeInstances {id}"), e)),
    }
}

/// Terminates the instance unless it is already going; `false` when it is gone.
pub async fn terminate(ec2: &Client, id: &str) -> Result<bool, AwsError> {
    let Some(i) = get(ec2, id).await? else { return Ok(false) };
    if i.state == InstanceStateName::ShuttingDown.as_str() {
        return Ok(true);
    }
    match ec2.terminate_instances().instance_ids(id).send().await {
        Ok(_) => Ok(true),
        Err(e) if e.as_service_error().is_some_and(not_found) => Ok(false),
        Err(e) => Err(AwsError::call(format!("TerminateInstances {id}"), e)),
    }
}

/// Reboots a running instance (RebootInstances: EC2 reboots it in place, keeping its id, volumes and address).
pub async fn reboot(ec2: &Client, id: &str) -> Result<(), AwsError> {
    ec2.reboot_instances()
        .instance_ids(id)
        .send()
        .await
        .map(drop)
        .map_err(|e| AwsError::call(format!("RebootInstances {id}"), e))
}

/// Instances to garbage-collect: live, older than 30 s, and held by no NodeClaim.
pub fn leaked<'a>(
    instances: &'a [Ec2Instance],
    claimed_provider_ids: &std::collections::BTreeSet<String>,
    now_secs: i64,
) -> Vec<&'a Ec2Instance> {
    instances
        .iter()
        .filter(|i| i.state != "shutting-down")
        .filter(|i| i.launched_at.is_some_and(|t| now_secs - t > 30))
        .filter(|i| !claimed_provider_ids.iter().any(|p| instance_id(p) == Some(i.id.as_str())))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inst(id: &str, launched: i64, state: &str) -> Ec2Instance {
        Ec2Instance {
            id: id.into(),
            instance_type: "m5.large".into(),
            zone: "us-east-1a".into(),
            state: state.into(),
            launched_at: Some(launched),
            spot: false,
            image_id: None,
            subnet_id: None,
            security_groups: vec![],
            tags: BTreeMap::new(),
            instance_profile_arn: None,
            capacity_reservation_id: None,
            reservations_only: false,
        }
    }

    #[test]
    fn provider_ids_round_trip_and_leaks_are_old_unclaimed_live_instances() {
        let i = inst("i-0abc", 0, "running");
        assert_eq!(i.provider_id(), "aws:///us-east-1a/i-0abc");
        assert_eq!(instance_id(&i.provider_id()), Some("i-0abc"));
        assert_eq!(instance_id("kwok://node-1"), None);
        let all = vec![
            inst("i-1", 0, "running"),
            inst("i-2", 0, "running"),
            inst("i-3", 95, "running"),
            inst("i-4", 0, "shutting-down"),
        ];
        let claimed = ["aws:///us-east-1a/i-2".to_string()].into();
        let ids: Vec<&str> = leaked(&all, &claimed, 100).iter().map(|i| i.id.as_str()).collect();
        assert_eq!(ids, vec!["i-1"], "i-2 is claimed, i-3 too young, i-4 already going");
    }

    #[test]
    fn volume_sizes_round_up_to_whole_gib() {
        assert_eq!(gib("20Gi"), Some(20));
        assert_eq!(gib("100G"), Some(94));
        assert_eq!(gib("1Mi"), Some(1));
    }
}
