//! What to ask CreateFleet for one NodeClaim (aws.md §3.1–3.4), decided without calling AWS: the capacity type,
//! the instance types (compatible, fitting, available, exotic and overpriced spot left out, the 60 cheapest), a
//! subnet per zone (the one with the most free addresses), the AMI per type, and one launch template per distinct
//! configuration with its overrides. [`super::fleet`] sends it.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Serialize;

use crate::controller::cloud::{OverlayStore, is_price_overlaid, launch_price, launch_type};
use crate::engine::api::ec2nodeclass::{BlockDevice, BlockDeviceMapping, EC2NodeClass};
use crate::engine::api::{Condition, NodeClaim};
use crate::engine::catalog::aws::{AmiFamily, INSTANCE_ACCELERATOR_COUNT, INSTANCE_GPU_COUNT};
use crate::engine::catalog::{Catalog, InstanceType, OfferingFilter, RESERVATION_CAPACITY_BLOCK, Reservation};
use crate::engine::labels;
use crate::engine::lifecycle::LaunchError;
use crate::engine::requirements::{claim_requests, claim_requirements, selector_requirements};

use super::nodeclass::{DEPENDENCIES_NOT_READY, READY};
use super::userdata::{self, Bootstrap};

/// CreateFleet takes at most this many instance types per request.
pub const MAX_TYPES: usize = 60;
/// The tag that names the NodeClaim an instance was launched for; a repeated launch finds it and adopts it.
pub const TAG_NODECLAIM: &str = "karpenter.sh/nodeclaim";
pub const TAG_CLUSTER_NAME: &str = "eks:eks-cluster-name";

/// The cluster a node joins, for tags and user data.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ClusterInfo {
    pub name: String,
    /// API server URL and CA bundle (base64 PEM), from the kubeconfig unless given.
    pub endpoint: Option<String>,
    pub ca_bundle: Option<String>,
    /// The cluster's service CIDR (nodeadm needs it for AL2023).
    pub service_cidr: Option<String>,
}

/// Everything a launch template holds; its hash names it, so equal configurations share one template. Its Debug
/// leaves the user data out: it can carry secrets.
#[derive(Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Template {
    pub image_id: String,
    pub user_data: String,
    pub security_groups: Vec<String>,
    pub instance_profile: Option<String>,
    pub block_devices: Vec<BlockDeviceMapping>,
    pub http_endpoint: String,
    pub http_protocol_ipv6: String,
    pub http_put_response_hop_limit: i64,
    pub http_tokens: String,
    pub detailed_monitoring: bool,
    pub associate_public_ip: Option<bool>,
    pub tags: BTreeMap<String, String>,
    pub spot: bool,
    /// A launch into a capacity reservation targets it (preference `capacity-reservations-only`); left out of the
    /// name's hash when unset, so templates without one keep their names.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capacity_reservation_id: Option<String>,
    /// `capacity-block` for a launch into a capacity block.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub market_type: Option<String>,
}

impl std::fmt::Debug for Template {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Template")
            .field("image_id", &self.image_id)
            .field("user_data", &format_args!("<{} bytes>", self.user_data.len()))
            .field("security_groups", &self.security_groups)
            .field("instance_profile", &self.instance_profile)
            .field("spot", &self.spot)
            .field("capacity_reservation_id", &self.capacity_reservation_id)
            .finish_non_exhaustive()
    }
}

impl Template {
    /// `karpenter.k8s.aws/<hash of the configuration>`: stable across processes and releases of this tool.
    pub fn name(&self) -> String {
        let json = serde_json::to_string(self).unwrap_or_default();
        format!("karpenter.k8s.aws/{}", super::stable_hash(&[json.as_bytes()]))
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Override {
    pub instance_type: String,
    pub subnet_id: String,
    pub zone: String,
    pub image_id: String,
    /// The offering's price (CreateFleet's priority; lower first).
    pub priority: f64,
    /// The reservation a reserved launch goes into (its template targets it).
    pub reservation: Option<Reservation>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct FleetPlan {
    pub capacity_type: String,
    /// CreateFleet's default target capacity type: `spot`, `on-demand` (also a default reservation's), or
    /// `capacity-block` / `reserved-capacity` (an interruptible reservation's).
    pub target: String,
    pub configs: Vec<(Template, Vec<Override>)>,
    /// Instance, volume and fleet tags.
    pub tags: BTreeMap<String, String>,
    /// The types considered, cheapest first (for the catalog lookup of the one EC2 picks).
    pub types: Vec<Arc<InstanceType>>,
    /// The claim's prices are a NodeOverlay's: the fleet is prioritized by them (`prioritized` on-demand,
    /// `capacity-optimized-prioritized` spot) instead of EC2's own price order, as upstream's provider does.
    pub prioritized: bool,
}

/// A usable offering: its zone, its price, and the reservation of a reserved one.
type Offer = (String, f64, Option<Reservation>);

/// What a launch template is made for: the AMI, max pods, and the reservation it targets.
/// (AMI, max pods, reservation id, the kubelet configuration as JSON when expressions resolved it per type).
type TemplateKey = (String, i64, Option<String>, Option<String>);

fn ready(nc: &EC2NodeClass) -> Result<(), LaunchError> {
    let name = nc.metadata.name.as_deref().unwrap_or("");
    let conds: &[Condition] = nc.status.as_ref().map_or(&[], |s| s.conditions.as_slice());
    match conds.iter().find(|c| c.type_ == READY) {
        Some(c) if c.status == "True" => Ok(()),
        Some(c) => {
            // Ready only names the parts that are not (upstream's `SubnetsReady=False`); their messages say why.
            // Validation waiting on them adds nothing.
            let why: Vec<String> = conds
                .iter()
                .filter(|d| d.type_ != READY && d.status != "True")
                .filter(|d| d.reason.as_deref() != Some(DEPENDENCIES_NOT_READY))
                .map(|d| format!("{}={}: {}", d.type_, d.status, d.message.as_deref().unwrap_or("")))
                .collect();
            let why = if why.is_empty() { c.message.clone().unwrap_or_default() } else { why.join("; ") };
            Err(LaunchError::NodeClassNotReady(format!("EC2NodeClass {name} is not ready: {why}")))
        }
        None => Err(LaunchError::NodeClassNotReady(format!("EC2NodeClass {name} has not been resolved yet"))),
    }
}

/// The NodeClass's tags under the static ones (which win).
pub fn tags(nc: &EC2NodeClass, claim: &NodeClaim, cluster: &str) -> BTreeMap<String, String> {
    let mut t: BTreeMap<String, String> =
        nc.spec.tags.iter().filter(|(k, _)| !restricted_tag(k)).map(|(k, v)| (k.clone(), v.clone())).collect();
    let pool = claim.metadata.labels.as_ref().and_then(|l| l.get(labels::NODEPOOL)).cloned().unwrap_or_default();
    t.insert(format!("kubernetes.io/cluster/{cluster}"), "owned".into());
    t.insert(labels::NODEPOOL.into(), pool);
    t.insert(TAG_CLUSTER_NAME.into(), cluster.into());
    t.insert(labels::NODECLASS_EC2.into(), nc.metadata.name.clone().unwrap_or_default());
    t.insert(TAG_NODECLAIM.into(), claim.name().into());
    t
}

/// Tags a NodeClass may not set: they identify what this tool owns.
pub fn restricted_tag(key: &str) -> bool {
    key.starts_with("kubernetes.io/cluster/")
        || [labels::NODEPOOL, TAG_CLUSTER_NAME, labels::NODECLASS_EC2, TAG_NODECLAIM].contains(&key)
}

fn is_exotic(t: &InstanceType) -> bool {
    let has = |k: &str| t.requirements.get_ref(k).is_some_and(|r| !r.complement && !r.values.is_empty());
    t.name.contains("metal") || has(INSTANCE_GPU_COUNT) || has(INSTANCE_ACCELERATOR_COUNT)
}

/// The AMI (from `status.amis`, newest first) whose requirements the type meets.
fn ami_for<'a>(nc: &'a EC2NodeClass, t: &InstanceType) -> Option<&'a str> {
    let amis = nc.status.as_ref().map(|s| s.amis.as_slice()).unwrap_or_default();
    amis.iter().find(|a| t.requirements.overlaps(&selector_requirements(&a.requirements))).map(|a| a.id.as_str())
}

fn default_block_devices(family: AmiFamily) -> Vec<BlockDeviceMapping> {
    let dev = |name: &str, size: &str| BlockDeviceMapping {
        device_name: Some(name.into()),
        ebs: Some(BlockDevice {
            encrypted: Some(true),
            volume_size: Some(size.into()),
            volume_type: Some("gp3".into()),
            delete_on_termination: Some(true),
            ..Default::default()
        }),
        root_volume: None,
    };
    match family {
        AmiFamily::AL2 | AmiFamily::AL2023 => vec![dev("/dev/xvda", "20Gi")],
        AmiFamily::Bottlerocket => vec![dev("/dev/xvda", "4Gi"), dev("/dev/xvdb", "20Gi")],
        AmiFamily::Windows2019 | AmiFamily::Windows2022 | AmiFamily::Windows2025 => vec![dev("/dev/sda1", "50Gi")],
        AmiFamily::Custom => Vec::new(),
    }
}

/// CreateFleet's limits on a reserved launch, as upstream's instance filters apply them: one kind of reservation
/// per request (the cheapest; ties go default, then capacity block, then interruptible), a single capacity-block
/// offering, and one reserved offering per type and zone (the one that can take the most).
fn reserved_offers(offers: &mut BTreeMap<String, Vec<Offer>>) {
    let partition = |r: &Reservation| {
        if r.kind == RESERVATION_CAPACITY_BLOCK {
            1
        } else if r.interruptible {
            2
        } else {
            0
        }
    };
    let chosen = offers
        .values()
        .flatten()
        .filter_map(|(_, p, r)| r.as_ref().map(|r| (*p, partition(r))))
        .min_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)))
        .map(|(_, k)| k);
    for list in offers.values_mut() {
        list.retain(|(_, _, r)| r.as_ref().is_some_and(|r| Some(partition(r)) == chosen));
    }
    if chosen == Some(1) {
        // A single capacity block: the cheapest (ties: the first type by name).
        let best = offers
            .iter()
            .flat_map(|(t, l)| l.iter().map(move |o| (t.clone(), o.clone())))
            .min_by(|a, b| a.1.1.total_cmp(&b.1.1));
        for list in offers.values_mut() {
            list.clear();
        }
        if let Some((t, o)) = best {
            offers.entry(t).or_default().push(o);
        }
        return;
    }
    for list in offers.values_mut() {
        let mut by_zone: BTreeMap<String, Offer> = BTreeMap::new();
        for o in list.drain(..) {
            let cap = |o: &Offer| o.2.as_ref().map_or(0, |r| r.capacity);
            match by_zone.get(&o.0) {
                Some(cur) if cap(cur) >= cap(&o) => {}
                _ => {
                    by_zone.insert(o.0.clone(), o);
                }
            }
        }
        list.extend(by_zone.into_values());
    }
}

/// The fleet request for `claim`. `catalog` is the NodeClass's live catalog with unavailable offerings already
/// marked.
pub fn plan(
    claim: &NodeClaim,
    nc: &EC2NodeClass,
    catalog: &Catalog,
    cluster: &ClusterInfo,
    overlays: &OverlayStore,
) -> Result<FleetPlan, LaunchError> {
    plan_with(claim, nc, catalog, cluster, overlays, false)
}

/// [`plan`], resolving the class's kubelet expressions per instance type into each launch template's kubelet
/// configuration when `cel` (the AWS gate `NodeClassCEL`, Karpenter v1.15) is on; without it they are left out.
pub fn plan_with(
    claim: &NodeClaim,
    nc: &EC2NodeClass,
    catalog: &Catalog,
    cluster: &ClusterInfo,
    overlays: &OverlayStore,
    cel: bool,
) -> Result<FleetPlan, LaunchError> {
    ready(nc)?;
    let prioritized = is_price_overlaid(claim);
    // The price each offering is ranked, cut and prioritized by: the overlay's for an overlay-priced claim.
    let price_of = |t: &InstanceType, o: &crate::engine::catalog::Offering| launch_price(overlays, claim, &t.name, o);
    let status = nc.status.clone().unwrap_or_default();
    let reqs = claim_requirements(claim);
    let want = claim_requests(claim);
    let has_min_values = claim.spec.requirements.iter().any(|r| r.min_values.is_some());
    let compatible = OfferingFilter::new(&reqs);

    // Compatible, fitting (into the capacity the claim's NodePool sees, with its NodeOverlays applied, as upstream's
    // Create sees it), with an available compatible offering.
    let fitting: Vec<Arc<InstanceType>> = catalog
        .instance_types
        .iter()
        .map(|t| launch_type(overlays, claim, t))
        .filter(|t| t.requirements.overlaps(&reqs) && want.fits_in(&t.allocatable()))
        .collect();
    if fitting.is_empty() {
        return Err(LaunchError::NoCompatibleType(format!(
            "no instance type offered by EC2NodeClass {} that NodeClaim {} allows can hold its requests ({want})",
            nc.metadata.name.as_deref().unwrap_or(""),
            claim.name()
        )));
    }
    let mut types: Vec<Arc<InstanceType>> =
        fitting.into_iter().filter(|t| t.offerings.iter().any(|o| o.available && compatible.admits(o))).collect();
    if types.is_empty() {
        return Err(LaunchError::InsufficientCapacity(format!(
            "no instance type offered by EC2NodeClass {} fits NodeClaim {} and has capacity now",
            nc.metadata.name.as_deref().unwrap_or(""),
            claim.name()
        )));
    }
    // Types no selected AMI can boot go first: a cheap family of another architecture must neither set the spot
    // price ceiling nor crowd the types that can launch out of the 60.
    types.retain(|t| ami_for(nc, t).is_some());
    if types.is_empty() {
        return Err(LaunchError::InsufficientCapacity(format!(
            "no AMI of EC2NodeClass {} matches an instance type that fits NodeClaim {} (check amiSelectorTerms and \
             status.amis)",
            nc.metadata.name.as_deref().unwrap_or(""),
            claim.name()
        )));
    }
    if !has_min_values && types.iter().any(|t| !is_exotic(t)) {
        types.retain(|t| !is_exotic(t));
    }

    // Capacity type: reserved, then spot, then on-demand, each when allowed and offered.
    let allows = |ct: &str| reqs.get_ref(labels::CAPACITY_TYPE).is_none_or(|r| r.has(ct));
    let offered = |ct: &str| {
        types.iter().any(|t| t.offerings.iter().any(|o| o.available && o.capacity_type == ct && compatible.admits(o)))
    };
    let capacity_type = if allows(labels::CAPACITY_RESERVED) && offered(labels::CAPACITY_RESERVED) {
        labels::CAPACITY_RESERVED
    } else if allows(labels::CAPACITY_SPOT) && offered(labels::CAPACITY_SPOT) {
        labels::CAPACITY_SPOT
    } else {
        labels::CAPACITY_ON_DEMAND
    };
    // With both allowed, spot dearer than the cheapest on-demand offering is pointless.
    let od_ceiling = (capacity_type == labels::CAPACITY_SPOT && allows(labels::CAPACITY_ON_DEMAND))
        .then(|| {
            types
                .iter()
                .flat_map(|t| {
                    t.offerings
                        .iter()
                        .filter(|o| {
                            o.available && o.capacity_type == labels::CAPACITY_ON_DEMAND && compatible.admits(o)
                        })
                        .map(|o| price_of(t, o))
                })
                .min_by(f64::total_cmp)
        })
        .flatten();

    // One subnet per zone: status lists them by free addresses, most first.
    let mut zone_subnet: BTreeMap<&str, &str> = BTreeMap::new();
    for s in &status.subnets {
        zone_subnet.entry(s.zone.as_str()).or_insert(s.id.as_str());
    }
    let mut offers: BTreeMap<String, Vec<Offer>> = types
        .iter()
        .map(|t| {
            let usable: Vec<Offer> = t
                .offerings
                .iter()
                .filter(|o| o.available && o.capacity_type == capacity_type && compatible.admits(o))
                .filter(|o| od_ceiling.is_none_or(|c| price_of(t, o) <= c))
                .filter(|o| zone_subnet.contains_key(o.zone.as_str()))
                .map(|o| (o.zone.clone(), price_of(t, o), o.reservation.clone()))
                .collect();
            (t.name.clone(), usable)
        })
        .collect();
    if capacity_type == labels::CAPACITY_RESERVED {
        reserved_offers(&mut offers);
    }
    let cheapest =
        |t: &InstanceType| offers.get(&t.name).and_then(|o| o.iter().map(|(_, p, _)| *p).min_by(f64::total_cmp));
    types.retain(|t| cheapest(t).is_some());
    types.sort_by(|a, b| {
        cheapest(a).unwrap_or(f64::MAX).total_cmp(&cheapest(b).unwrap_or(f64::MAX)).then_with(|| a.name.cmp(&b.name))
    });
    types.truncate(MAX_TYPES);
    if types.is_empty() {
        return Err(LaunchError::InsufficientCapacity(format!(
            "no {capacity_type} offering of a fitting type is in a zone of EC2NodeClass {}'s subnets",
            nc.metadata.name.as_deref().unwrap_or("")
        )));
    }
    let reservation_of = |o: &Offer| o.2.clone();
    let first_reservation = types.iter().flat_map(|t| &offers[&t.name]).find_map(reservation_of);
    let target = match &first_reservation {
        _ if capacity_type == labels::CAPACITY_SPOT => "spot",
        Some(r) if r.kind == RESERVATION_CAPACITY_BLOCK => "capacity-block",
        Some(r) if r.interruptible => "reserved-capacity",
        _ => "on-demand",
    };

    let family = AmiFamily::of(Some(nc)).map_err(|e| LaunchError::NodeClassNotReady(e.to_string()))?;
    let tags = tags(nc, claim, &cluster.name);
    let metadata = nc.spec.metadata_options.clone().unwrap_or_default();
    let block_devices = if nc.spec.block_device_mappings.is_empty() {
        default_block_devices(family)
    } else {
        nc.spec.block_device_mappings.clone()
    };
    // Group the offerings by what their template needs: the AMI, max pods, and the reservation a reserved launch
    // targets (one template per reservation).
    let mut groups: BTreeMap<TemplateKey, Vec<(Arc<InstanceType>, Offer)>> = BTreeMap::new();
    for t in &types {
        let Some(ami) = ami_for(nc, t) else { continue };
        // v1.15's kubelet expressions resolve per type, so types whose values differ need their own template
        // (maxPods is the type's resolved pod count).
        let kubelet = crate::engine::catalog::aws::resolved_kubelet(nc, &t.name, cel)
            .map(|k| serde_json::to_string(&k).unwrap_or_default());
        for o in &offers[&t.name] {
            let key = (ami.to_string(), t.capacity.pods, o.2.as_ref().map(|r| r.id.clone()), kubelet.clone());
            groups.entry(key).or_default().push((t.clone(), o.clone()));
        }
    }
    if groups.is_empty() {
        return Err(LaunchError::InsufficientCapacity(format!(
            "no AMI of EC2NodeClass {} matches the fitting instance types (check amiSelectorTerms and status.amis)",
            nc.metadata.name.as_deref().unwrap_or("")
        )));
    }
    let mut configs = Vec::new();
    for ((image_id, max_pods, reservation_id, kubelet), members) in groups {
        let kubelet: Option<crate::engine::api::ec2nodeclass::KubeletConfiguration> =
            kubelet.and_then(|k| serde_json::from_str(&k).ok()).or_else(|| nc.spec.kubelet.clone());
        let boot = Bootstrap {
            family,
            cluster,
            claim,
            max_pods,
            kubelet: kubelet.as_ref(),
            user: nc.spec.user_data.as_deref(),
        };
        let block = members.iter().any(|(_, o)| o.2.as_ref().is_some_and(|r| r.kind == RESERVATION_CAPACITY_BLOCK));
        let template = Template {
            image_id: image_id.clone(),
            user_data: userdata::render(&boot),
            security_groups: status.security_groups.iter().map(|g| g.id.clone()).collect(),
            instance_profile: status.instance_profile.clone().or_else(|| nc.spec.instance_profile.clone()),
            block_devices: block_devices.clone(),
            http_endpoint: metadata.http_endpoint.clone().unwrap_or_else(|| "enabled".into()),
            http_protocol_ipv6: metadata.http_protocol_ipv6.clone().unwrap_or_else(|| "disabled".into()),
            http_put_response_hop_limit: metadata.http_put_response_hop_limit.unwrap_or(1),
            http_tokens: metadata.http_tokens.clone().unwrap_or_else(|| "required".into()),
            detailed_monitoring: nc.spec.detailed_monitoring.unwrap_or(false),
            associate_public_ip: nc.spec.associate_public_ip_address,
            // Not the NodeClaim's own tag: claims of one pool share their templates.
            tags: tags.iter().filter(|(k, _)| *k != TAG_NODECLAIM).map(|(k, v)| (k.clone(), v.clone())).collect(),
            spot: capacity_type == labels::CAPACITY_SPOT,
            capacity_reservation_id: reservation_id,
            market_type: block.then(|| RESERVATION_CAPACITY_BLOCK.to_string()),
        };
        let mut overrides = Vec::new();
        for (t, (zone, price, reservation)) in members {
            if let Some(subnet) = zone_subnet.get(zone.as_str()) {
                overrides.push(Override {
                    instance_type: t.name.clone(),
                    subnet_id: subnet.to_string(),
                    zone,
                    image_id: image_id.clone(),
                    priority: price,
                    reservation,
                });
            }
        }
        configs.push((template, overrides));
    }
    Ok(FleetPlan { capacity_type: capacity_type.to_string(), target: target.into(), configs, tags, types, prioritized })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::api::common::NodeSelectorRequirementWithMinValues as Req;
    use crate::engine::api::ec2nodeclass::{
        AmiStatus, EC2NodeClassSpec, EC2NodeClassStatus, SecurityGroupStatus, SubnetStatus,
    };
    use crate::engine::api::nodeclaim::NodeClaimSpec;
    use crate::engine::catalog::aws::aws_catalog;
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

    fn req(key: &str, values: &[&str]) -> Req {
        Req {
            key: key.into(),
            operator: "In".into(),
            values: values.iter().map(|v| v.to_string()).collect(),
            min_values: None,
        }
    }

    fn nodeclass(ready: bool) -> EC2NodeClass {
        let mut nc =
            EC2NodeClass::new("default", EC2NodeClassSpec { role: Some("NodeRole".into()), ..Default::default() });
        nc.spec.tags =
            [("team".to_string(), "web".to_string()), (labels::NODEPOOL.to_string(), "spoof".to_string())].into();
        let arch = |a: &str| Req {
            key: labels::ARCH.into(),
            operator: "In".into(),
            values: [a.to_string()].into(),
            min_values: None,
        };
        nc.status = Some(EC2NodeClassStatus {
            subnets: vec![
                SubnetStatus { id: "subnet-big-a".into(), zone: "us-east-1a".into(), zone_id: None },
                SubnetStatus { id: "subnet-b".into(), zone: "us-east-1b".into(), zone_id: None },
                SubnetStatus { id: "subnet-small-a".into(), zone: "us-east-1a".into(), zone_id: None },
            ],
            security_groups: vec![SecurityGroupStatus { id: "sg-1".into(), name: None }],
            amis: vec![
                AmiStatus { id: "ami-x86".into(), name: None, requirements: vec![arch("amd64")], deprecated: None },
                AmiStatus { id: "ami-arm".into(), name: None, requirements: vec![arch("arm64")], deprecated: None },
            ],
            instance_profile: None,
            capacity_reservations: Vec::new(),
            conditions: vec![
                Condition {
                    type_: "SubnetsReady".into(),
                    status: if ready { "True" } else { "False" }.into(),
                    reason: Some(if ready { "SubnetsReady" } else { "SubnetsNotFound" }.into()),
                    message: Some(if ready { "" } else { "SubnetSelector did not match any Subnets" }.into()),
                    ..Default::default()
                },
                Condition {
                    type_: "ValidationSucceeded".into(),
                    status: if ready { "True" } else { "False" }.into(),
                    reason: Some(if ready { "ValidationSucceeded" } else { "DependenciesNotReady" }.into()),
                    ..Default::default()
                },
                Condition {
                    type_: "Ready".into(),
                    status: if ready { "True" } else { "False" }.into(),
                    message: Some(if ready { "" } else { "SubnetsReady=False, ValidationSucceeded=False" }.into()),
                    ..Default::default()
                },
            ],
        });
        nc
    }

    fn claim(reqs: Vec<Req>, cpu: &str) -> NodeClaim {
        let mut c = NodeClaim::new("default-abcde", NodeClaimSpec::default());
        c.metadata.labels = Some([(labels::NODEPOOL.to_string(), "default".to_string())].into());
        c.spec.requirements = reqs;
        c.spec.resources.requests = [("cpu".to_string(), Quantity(cpu.into()))].into();
        c
    }

    fn cluster() -> ClusterInfo {
        ClusterInfo {
            name: "demo".into(),
            endpoint: Some("https://api".into()),
            ca_bundle: Some("Q0E=".into()),
            service_cidr: Some("10.100.0.0/16".into()),
        }
    }

    #[test]
    fn an_overlay_priced_claim_is_a_fleet_prioritized_by_the_overlaid_prices() {
        let catalog = aws_catalog("us-east-1", None, Some(&nodeclass(true)), 7).unwrap();
        let mut c = claim(
            vec![req(labels::CAPACITY_TYPE, &["on-demand"]), req(labels::INSTANCE_TYPE, &["m5.large", "m5.4xlarge"])],
            "1",
        );
        let mut prices = OverlayStore::default();
        let big = prices.prices.entry("default".into()).or_default();
        for z in ["us-east-1a", "us-east-1b"] {
            big.insert(("m5.4xlarge".into(), z.into(), "on-demand".into()), 0.01);
        }
        // Without the annotation the overlay prices are not the claim's: EC2's own lowest price.
        let plain = plan(&c, &nodeclass(true), &catalog, &cluster(), &prices).unwrap();
        assert!(!plain.prioritized);
        assert_eq!(plain.types[0].name, "m5.large");
        c.metadata.annotations =
            Some([(crate::engine::overlay::ANNOTATION_PRICE_OVERLAY_APPLIED.to_string(), "true".to_string())].into());
        let p = plan(&c, &nodeclass(true), &catalog, &cluster(), &prices).unwrap();
        assert!(p.prioritized);
        assert_eq!(p.types[0].name, "m5.4xlarge", "ranked by the overlaid price");
        let overrides: Vec<&Override> = p.configs.iter().flat_map(|(_, o)| o).collect();
        for o in overrides {
            if o.instance_type == "m5.4xlarge" {
                assert_eq!(o.priority, 0.01);
            } else {
                assert!(o.priority > 0.05, "{} keeps its list price {}", o.instance_type, o.priority);
            }
        }
    }

    #[test]
    fn spot_first_cheapest_sixty_with_one_subnet_per_zone_and_an_ami_per_arch() {
        let catalog = aws_catalog("us-east-1", None, Some(&nodeclass(true)), 7).unwrap();
        let c = claim(vec![req(labels::CAPACITY_TYPE, &["spot", "on-demand"])], "2");
        let p = plan(&c, &nodeclass(true), &catalog, &cluster(), &OverlayStore::default()).unwrap();
        assert_eq!(p.capacity_type, "spot");
        assert!(p.types.len() <= MAX_TYPES);
        let overrides: Vec<&Override> = p.configs.iter().flat_map(|(_, o)| o).collect();
        assert!(overrides.iter().all(|o| o.zone != "us-east-1c"), "no subnet there");
        assert!(overrides.iter().all(|o| o.subnet_id != "subnet-small-a"), "the emptiest subnet per zone");
        assert!(overrides.iter().all(|o| !o.instance_type.contains("metal")), "exotic types left out");
        let od_min = catalog
            .instance_types
            .iter()
            .filter(|t| c.spec.resources.requests.len() == 1 && t.allocatable().get("cpu") >= 2000)
            .flat_map(|t| &t.offerings)
            .filter(|o| o.capacity_type == "on-demand" && o.available && o.zone != "us-east-1c")
            .map(|o| o.price)
            .fold(f64::MAX, f64::min);
        assert!(overrides.iter().all(|o| o.priority <= od_min), "no spot dearer than on-demand");
        for (t, o) in &p.configs {
            let arm = o.iter().any(|x| {
                catalog.get(&x.instance_type).unwrap().requirements.get_ref(labels::ARCH).unwrap().has("arm64")
            });
            assert_eq!(t.image_id, if arm { "ami-arm" } else { "ami-x86" });
            assert!(t.name().starts_with("karpenter.k8s.aws/"));
        }
        assert_eq!(p.tags.get(labels::NODEPOOL).map(String::as_str), Some("default"), "static tags win");
        assert_eq!(p.tags.get("team").map(String::as_str), Some("web"));
        assert_eq!(p.tags.get(TAG_NODECLAIM).map(String::as_str), Some("default-abcde"));
        assert_eq!(p.tags.get("kubernetes.io/cluster/demo").map(String::as_str), Some("owned"));
    }

    #[test]
    fn a_claim_fits_the_capacity_its_nodepools_overlays_give_a_type() {
        let catalog = aws_catalog("us-east-1", None, Some(&nodeclass(true)), 7).unwrap();
        let mut c = claim(vec![req(labels::CAPACITY_TYPE, &["on-demand"])], "1");
        c.spec.resources.requests.insert("nvidia.com/gpu".into(), Quantity("1".into()));
        let plain = plan(&c, &nodeclass(true), &catalog, &cluster(), &OverlayStore::default());
        let only_gpu_types = plain.as_ref().map(|p| p.types.iter().all(|t| t.capacity.get("nvidia.com/gpu") > 0));
        assert!(matches!(only_gpu_types, Ok(true)), "without the overlay only GPU types hold it");
        // A time-slicing overlay: m5.large advertises 4 shared GPUs in this pool.
        let m5 = catalog.instance_types.iter().find(|t| t.name == "m5.large").unwrap();
        let mut shared = (**m5).clone();
        shared.capacity.set_value("nvidia.com/gpu", 4);
        let mut store = OverlayStore::default();
        store.capacity.entry("default".into()).or_default().insert("m5.large".into(), Arc::new(shared));
        c.spec.requirements.push(req(labels::INSTANCE_TYPE, &["m5.large"]));
        let impossible = plan(&c, &nodeclass(true), &catalog, &cluster(), &OverlayStore::default());
        assert!(matches!(impossible, Err(LaunchError::NoCompatibleType(_))), "{:?}", impossible.err());
        let p = plan(&c, &nodeclass(true), &catalog, &cluster(), &store).expect("launchable with the overlay");
        assert_eq!(p.types.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(), ["m5.large"]);
    }

    #[test]
    fn on_demand_only_unready_and_impossible_claims() {
        let catalog = aws_catalog("us-east-1", None, Some(&nodeclass(true)), 7).unwrap();
        let c = claim(vec![req(labels::CAPACITY_TYPE, &["on-demand"]), req(labels::ARCH, &["arm64"])], "1");
        let p = plan(&c, &nodeclass(true), &catalog, &cluster(), &OverlayStore::default()).unwrap();
        assert_eq!(p.capacity_type, "on-demand");
        assert!(p.configs.iter().all(|(t, _)| t.image_id == "ami-arm" && !t.spot));
        assert!(
            matches!(plan(&c, &nodeclass(false), &catalog, &cluster(), &OverlayStore::default()), Err(LaunchError::NodeClassNotReady(m))
                if m == "EC2NodeClass default is not ready: SubnetsReady=False: SubnetSelector did not match any Subnets")
        );
        let huge = claim(vec![], "100000");
        assert!(matches!(
            plan(&huge, &nodeclass(true), &catalog, &cluster(), &OverlayStore::default()),
            Err(LaunchError::NoCompatibleType(_))
        ));
    }

    fn reserved(id: &str, capacity: i64, kind: &str, interruptible: bool) -> Reservation {
        Reservation { id: id.into(), capacity, kind: kind.into(), interruptible, end: None, usable: true }
    }

    #[test]
    fn a_reserved_launch_targets_one_kind_of_reservation_with_one_offering_per_type_and_zone() {
        let mut catalog = aws_catalog("us-east-1", None, Some(&nodeclass(true)), 7).unwrap();
        for (t, z, r) in [
            ("m5.large", "us-east-1a", reserved("cr-small-a", 1, "default", false)),
            ("m5.large", "us-east-1a", reserved("cr-big-a", 5, "default", false)),
            ("m5.large", "us-east-1b", reserved("cr-b", 2, "default", false)),
            ("m5.xlarge", "us-east-1a", reserved("cr-xl", 1, "default", false)),
            ("m5.2xlarge", "us-east-1a", reserved("cr-int", 3, "default", true)),
        ] {
            catalog.add_reservation(t, z, r).unwrap();
        }
        // The class has no subnet in 1c, so its catalog has no offerings there to reserve.
        assert!(catalog.add_reservation("m5.large", "us-east-1c", reserved("cr-c", 9, "default", false)).is_err());
        let c = claim(vec![req(labels::CAPACITY_TYPE, &["reserved", "on-demand"]), req(labels::ARCH, &["amd64"])], "1");
        let p = plan(&c, &nodeclass(true), &catalog, &cluster(), &OverlayStore::default()).unwrap();
        assert_eq!((p.capacity_type.as_str(), p.target.as_str()), ("reserved", "on-demand"));
        let mut got: Vec<(String, String, String)> = p
            .configs
            .iter()
            .flat_map(|(t, o)| {
                o.iter().map(|o| {
                    assert_eq!(t.capacity_reservation_id.as_deref(), o.reservation.as_ref().map(|r| r.id.as_str()));
                    (o.instance_type.clone(), o.zone.clone(), o.reservation.as_ref().unwrap().id.clone())
                })
            })
            .collect();
        got.sort();
        let want = [
            ("m5.large", "us-east-1a", "cr-big-a"),
            ("m5.large", "us-east-1b", "cr-b"),
            ("m5.xlarge", "us-east-1a", "cr-xl"),
        ];
        assert_eq!(
            got,
            want.map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string())),
            "the default partition, the largest reservation per zone"
        );
        assert!(p.configs.iter().all(|(t, _)| t.market_type.is_none() && !t.spot));

        // Only the interruptible reservation fits: the fleet targets reserved capacity.
        let big = claim(
            vec![req(labels::CAPACITY_TYPE, &["reserved", "on-demand"]), req(labels::INSTANCE_TYPE, &["m5.2xlarge"])],
            "6",
        );
        let p = plan(&big, &nodeclass(true), &catalog, &cluster(), &OverlayStore::default()).unwrap();
        assert_eq!((p.capacity_type.as_str(), p.target.as_str()), ("reserved", "reserved-capacity"));

        // Capacity blocks: one offering, the cheapest, with the capacity-block market type.
        let mut blocks = aws_catalog("us-east-1", None, Some(&nodeclass(true)), 7).unwrap();
        blocks.add_reservation("m5.xlarge", "us-east-1a", reserved("cr-blk-xl", 1, "capacity-block", false)).unwrap();
        blocks.add_reservation("m5.large", "us-east-1b", reserved("cr-blk-l", 1, "capacity-block", false)).unwrap();
        let p = plan(&c, &nodeclass(true), &blocks, &cluster(), &OverlayStore::default()).unwrap();
        assert_eq!(p.target, "capacity-block");
        let overrides: Vec<&Override> = p.configs.iter().flat_map(|(_, o)| o).collect();
        assert_eq!(overrides.len(), 1);
        assert_eq!((overrides[0].instance_type.as_str(), overrides[0].zone.as_str()), ("m5.large", "us-east-1b"));
        assert_eq!(p.configs[0].0.market_type.as_deref(), Some("capacity-block"));
        assert_eq!(p.configs[0].0.capacity_reservation_id.as_deref(), Some("cr-blk-l"));

        // Without reserved in the claim's requirements the reservations are not used, and the templates are the
        // same as without any reservation.
        let od = claim(vec![req(labels::CAPACITY_TYPE, &["on-demand"]), req(labels::ARCH, &["amd64"])], "1");
        let with = plan(&od, &nodeclass(true), &catalog, &cluster(), &OverlayStore::default()).unwrap();
        let plain_catalog = aws_catalog("us-east-1", None, Some(&nodeclass(true)), 7).unwrap();
        let without = plan(&od, &nodeclass(true), &plain_catalog, &cluster(), &OverlayStore::default()).unwrap();
        assert_eq!(with.target, "on-demand");
        assert_eq!(with.configs[0].0.name(), without.configs[0].0.name());
        assert!(with.configs.iter().flat_map(|(_, o)| o).all(|o| o.reservation.is_none()));
    }

    #[test]
    fn template_names_follow_the_configuration() {
        let catalog = aws_catalog("us-east-1", None, Some(&nodeclass(true)), 7).unwrap();
        let c = claim(vec![req(labels::CAPACITY_TYPE, &["on-demand"]), req(labels::ARCH, &["amd64"])], "1");
        let a = plan(&c, &nodeclass(true), &catalog, &cluster(), &OverlayStore::default()).unwrap();
        let b = plan(&c, &nodeclass(true), &catalog, &cluster(), &OverlayStore::default()).unwrap();
        assert_eq!(a.configs[0].0.name(), b.configs[0].0.name(), "same configuration, same template");
        let mut other = nodeclass(true);
        other.spec.detailed_monitoring = Some(true);
        let d = plan(&c, &other, &catalog, &cluster(), &OverlayStore::default()).unwrap();
        assert_ne!(a.configs[0].0.name(), d.configs[0].0.name());
    }
}
