//! `karpenter.k8s.aws/v1` EC2NodeClass: the AWS side of a NodePool's nodes (AMIs, subnets, kubelet settings).

use std::collections::BTreeMap;

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{Condition, NodeSelectorRequirementWithMinValues};

#[derive(CustomResource, Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "karpenter.k8s.aws",
    version = "v1",
    kind = "EC2NodeClass",
    plural = "ec2nodeclasses",
    status = "EC2NodeClassStatus",
    category = "karpenter",
    shortname = "ec2nc",
    shortname = "ec2ncs"
)]
// `kubectl get ec2nodeclasses`, as with upstream's CRD (`-o wide` adds the priority-1 column).
// One column per attribute: clippy takes their common keys (`type_ = "string"`) for duplicates.
#[allow(clippy::duplicated_attributes)]
#[kube(printcolumn(name = "Ready", type_ = "string", json_path = r#".status.conditions[?(@.type=="Ready")].status"#))]
#[kube(printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp"))]
#[kube(printcolumn(name = "Role", type_ = "string", json_path = ".spec.role", priority = 1))]
#[serde(rename_all = "camelCase")]
pub struct EC2NodeClassSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubelet: Option<KubeletConfiguration>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subnet_selector_terms: Vec<SelectorTerm>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub security_group_selector_terms: Vec<SelectorTerm>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub capacity_reservation_selector_terms: Vec<CapacityReservationSelectorTerm>,
    #[serde(default, rename = "associatePublicIPAddress", skip_serializing_if = "Option::is_none")]
    pub associate_public_ip_address: Option<bool>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ami_selector_terms: Vec<AmiSelectorTerm>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ami_family: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_data: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_profile: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub block_device_mappings: Vec<BlockDeviceMapping>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_store_policy: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detailed_monitoring: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata_options: Option<MetadataOptions>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KubeletConfiguration {
    #[serde(default, rename = "clusterDNS", skip_serializing_if = "Vec::is_empty")]
    pub cluster_dns: Vec<String>,
    // A count; v1.15's CRD also takes a CEL expression here (the AWS gate `NodeClassCEL`), which this tool reads
    // but does not evaluate. The schema stays v1.14.1's integer (a plain comment: it would be the CRD's description).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<i64>")]
    pub max_pods: Option<MaxPods>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pods_per_core: Option<i64>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub system_reserved: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub kube_reserved: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub eviction_hard: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub eviction_soft: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub eviction_soft_grace_period: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eviction_max_pod_grace_period: Option<i64>,
    #[serde(default, rename = "imageGCHighThresholdPercent", skip_serializing_if = "Option::is_none")]
    pub image_gc_high_threshold_percent: Option<i64>,
    #[serde(default, rename = "imageGCLowThresholdPercent", skip_serializing_if = "Option::is_none")]
    pub image_gc_low_threshold_percent: Option<i64>,
    #[serde(default, rename = "cpuCFSQuota", skip_serializing_if = "Option::is_none")]
    pub cpu_cfs_quota: Option<bool>,
    // v1.15's open kubelet configuration: any other KubeletConfiguration field, passed through to the kubelet's
    // configuration where the AMI family renders it (AL2023). Not in v1.14.1's schema, whose API server prunes it.
    #[serde(flatten, default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(skip)]
    pub other: BTreeMap<String, serde_json::Value>,
}

/// `spec.kubelet.maxPods`: a count, or under Karpenter v1.15 a CEL expression such as `min(110, max_pods)`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum MaxPods {
    Count(i64),
    Expression(String),
}

impl MaxPods {
    /// The count, when it is one.
    pub fn count(&self) -> Option<i64> {
        match self {
            MaxPods::Count(n) => Some(*n),
            MaxPods::Expression(_) => None,
        }
    }
}

impl From<i64> for MaxPods {
    fn from(n: i64) -> Self {
        MaxPods::Count(n)
    }
}

/// Subnet, security-group and capacity-reservation selector term.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SelectorTerm {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, rename = "ownerID", skip_serializing_if = "Option::is_none")]
    pub owner_id: Option<String>,
}

/// A capacity reservation selector term (upstream v1.x): ORed with the others; `id` alone, or tags, owner and
/// match criteria together.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CapacityReservationSelectorTerm {
    /// `*` as a value means "the key exists".
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(default, rename = "ownerID", skip_serializing_if = "Option::is_none")]
    pub owner_id: Option<String>,
    /// `open` or `targeted`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_match_criteria: Option<String>,
}

/// A capacity reservation the class selected, as upstream v1.14.1's CRD writes it in
/// `status.capacityReservations` (sorted by id).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CapacityReservationStatus {
    pub availability_zone: String,
    /// RFC 3339; absent for a reservation without an end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_time: Option<String>,
    pub id: String,
    /// `open` or `targeted`.
    pub instance_match_criteria: String,
    pub instance_type: String,
    #[serde(rename = "ownerID")]
    pub owner_id: String,
    /// `default` or `capacity-block`.
    #[serde(default = "default_reservation_type")]
    pub reservation_type: String,
    /// `active`, or `expiring` (a capacity block within 40 minutes of its end).
    #[serde(default = "active")]
    pub state: String,
    #[serde(default)]
    pub interruptible: bool,
}

fn default_reservation_type() -> String {
    "default".into()
}

fn active() -> String {
    "active".into()
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AmiSelectorTerm {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alias: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ssm_parameter: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BlockDeviceMapping {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ebs: Option<BlockDevice>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root_volume: Option<bool>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BlockDevice {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delete_on_termination: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encrypted: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iops: Option<i64>,
    #[serde(default, rename = "kmsKeyID", skip_serializing_if = "Option::is_none")]
    pub kms_key_id: Option<String>,
    #[serde(default, rename = "snapshotID", skip_serializing_if = "Option::is_none")]
    pub snapshot_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throughput: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_size: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_type: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MetadataOptions {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_endpoint: Option<String>,
    #[serde(default, rename = "httpProtocolIPv6", skip_serializing_if = "Option::is_none")]
    pub http_protocol_ipv6: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_put_response_hop_limit: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_tokens: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EC2NodeClassStatus {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subnets: Vec<SubnetStatus>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub security_groups: Vec<SecurityGroupStatus>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub amis: Vec<AmiStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_profile: Option<String>,
    /// The capacity reservations the class selected (gate `ReservedCapacity`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub capacity_reservations: Vec<CapacityReservationStatus>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SubnetStatus {
    pub id: String,
    pub zone: String,
    #[serde(default, rename = "zoneID", skip_serializing_if = "Option::is_none")]
    pub zone_id: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecurityGroupStatus {
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AmiStatus {
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requirements: Vec<NodeSelectorRequirementWithMinValues>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deprecated: Option<bool>,
}

/// The EC2NodeClass CRD as `deploy/` installs it: upstream's schema, defaults and CEL rules on the derived schema (see
/// [`super::crd`]). Upstream's fields the engine does not read (network interfaces, connection tracking, CPU options,
/// IP prefixes, placement groups, EBS volume initialisation) are declared so the API server accepts and checks them
/// as upstream's CRD does.
pub fn ec2nodeclass_crd() -> k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition
{
    use super::crd::{self, Node};
    use kube::CustomResourceExt;
    use serde_json::json;

    /// Selector tags: at most 20, neither keys nor values empty.
    fn selector_tags(node: &mut Node) {
        node.max_properties(20)
            .rule("self.all(k, k != '' && self[k] != '')", "empty tag keys or values aren't supported");
    }
    /// The keys the kubelet's eviction signals take.
    fn eviction_keys(node: &mut Node, field: &str) {
        let signals = "'memory.available','nodefs.available','nodefs.inodesFree','imagefs.available','imagefs.inodesFree',\
                       'pid.available'";
        node.rule(&format!("self.all(x, x in [{signals}])"), &format!("valid keys for {field} are [{signals}]"));
    }
    /// `kubeReserved` and `systemReserved`: cpu, memory, ephemeral-storage and pid, as non-negative quantities.
    fn reserved(node: &mut Node, field: &str) {
        node.at("{}").pattern(crd::QUANTITY_PATTERN);
        node.rule(
            "self.all(x, x=='cpu' || x=='memory' || x=='ephemeral-storage' || x=='pid')",
            &format!("valid keys for {field} are ['cpu','memory','ephemeral-storage','pid']"),
        )
        .rule(
            "self.all(x, !self[x].startsWith('-'))",
            &format!("{field} value cannot be a negative resource quantity"),
        );
    }
    let int32 = |min: Option<i64>, max: Option<i64>| {
        let mut schema = json!({"type": "integer", "format": "int32"});
        if let Some(min) = min {
            schema["minimum"] = min.into();
        }
        if let Some(max) = max {
            schema["maximum"] = max.into();
        }
        schema
    };
    const AMI_FAMILIES: [&str; 7] =
        ["AL2", "AL2023", "Bottlerocket", "Custom", "Windows2019", "Windows2022", "Windows2025"];

    crd::finish(EC2NodeClass::crd(), |root| {
        // Upstream's EC2NodeClass does not require `spec` at the top.
        root.unset("required");
        let mut spec = root.at("spec");
        spec.required(&["amiSelectorTerms", "securityGroupSelectorTerms", "subnetSelectorTerms"]).rule(
            "(has(self.role) && !has(self.instanceProfile)) || (!has(self.role) && has(self.instanceProfile))",
            "must specify exactly one of ['role', 'instanceProfile']",
        );
        for family in AMI_FAMILIES.iter().filter(|f| **f != "Custom") {
            let alias = family.to_lowercase();
            let article = if family.starts_with('A') { "an" } else { "a" };
            spec.rule(
                &format!(
                    "!has(self.amiFamily) || (self.amiSelectorTerms.exists(x, has(x.alias) && x.alias.find('^[^@]+') == \
                     '{alias}') ? (self.amiFamily == 'Custom' || self.amiFamily == '{family}') : true)"
                ),
                &format!("if set, amiFamily must be '{family}' or 'Custom' when using {article} {family} alias"),
            );
        }
        spec.rule(
            "self.amiSelectorTerms.exists(x, has(x.alias)) ? true : has(self.amiFamily)",
            "must specify amiFamily if amiSelectorTerms does not contain an alias",
        );

        spec.at("amiFamily").one_of(&AMI_FAMILIES);
        let mut ami_terms = spec.at("amiSelectorTerms");
        ami_terms
            .max_items(30)
            .min_items(1)
            .rule(
                "self.all(x, has(x.tags) || has(x.id) || has(x.name) || has(x.alias) || has(x.ssmParameter))",
                "expected at least one, got none, ['tags', 'id', 'name', 'alias', 'ssmParameter']",
            )
            .rule(
                "!self.exists(x, has(x.id) && (has(x.alias) || has(x.tags) || has(x.name) || has(x.owner)))",
                "'id' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms",
            )
            .rule(
                "!self.exists(x, has(x.alias) && (has(x.id) || has(x.tags) || has(x.name) || has(x.owner)))",
                "'alias' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms",
            )
            .rule(
                "!(self.exists(x, has(x.alias)) && self.size() != 1)",
                "'alias' is mutually exclusive, cannot be set with a combination of other amiSelectorTerms",
            );
        ami_terms.at("[].id").pattern("ami-[0-9a-z]+");
        selector_tags(&mut ami_terms.at("[].tags"));
        let alias_families = ["al2", "al2023", "bottlerocket", "windows2019", "windows2022", "windows2025"];
        let quoted = |names: &[&str]| names.iter().map(|n| format!("'{n}'")).collect::<Vec<_>>();
        ami_terms
            .at("[].alias")
            .max_length(30)
            .rule(
                "self.matches('^[a-zA-Z0-9]+@.+$')",
                "'alias' is improperly formatted, must match the format 'family@version'",
            )
            .rule(
                &format!("self.split('@')[0] in [{}]", quoted(&alias_families).join(",")),
                &format!(
                    "family is not supported, must be one of the following: {}",
                    quoted(&alias_families).join(", ")
                ),
            )
            .rule(
                &format!(
                    "self.split('@')[0] in [{}] ? self.split('@')[1] == 'latest' : true",
                    quoted(&alias_families[3..]).join(",")
                ),
                "windows families may only specify version 'latest'",
            );

        let mut subnets = spec.at("subnetSelectorTerms");
        subnets
            .max_items(30)
            .rule("self.size() != 0", "subnetSelectorTerms cannot be empty")
            .rule("self.all(x, has(x.tags) || has(x.id))", "expected at least one, got none, ['tags', 'id']")
            .rule(
                "!self.all(x, has(x.id) && has(x.tags))",
                "'id' is mutually exclusive, cannot be set with a combination of other fields in a subnet selector term",
            );
        subnets.at("[]").remove_property("name").remove_property("ownerID");
        subnets.at("[].id").pattern("subnet-[0-9a-z]+");
        selector_tags(&mut subnets.at("[].tags"));

        let mut groups = spec.at("securityGroupSelectorTerms");
        groups
            .max_items(30)
            .rule("self.size() != 0", "securityGroupSelectorTerms cannot be empty")
            .rule(
                "self.all(x, has(x.tags) || has(x.id) || has(x.name))",
                "expected at least one, got none, ['tags', 'id', 'name']",
            )
            .rule(
                "!self.all(x, has(x.id) && (has(x.tags) || has(x.name)))",
                "'id' is mutually exclusive, cannot be set with a combination of other fields in a security group \
                 selector term",
            )
            .rule(
                "!self.all(x, has(x.name) && (has(x.tags) || has(x.id)))",
                "'name' is mutually exclusive, cannot be set with a combination of other fields in a security group \
                 selector term",
            );
        groups.at("[]").remove_property("ownerID");
        groups.at("[].id").pattern("sg-[0-9a-z]+");
        selector_tags(&mut groups.at("[].tags"));

        let mut reservations = spec.at("capacityReservationSelectorTerms");
        reservations
            .max_items(30)
            .rule(
                "self.all(x, has(x.tags) || has(x.id) || has(x.instanceMatchCriteria))",
                "expected at least one, got none, ['tags', 'id', 'instanceMatchCriteria']",
            )
            .rule(
                "!self.all(x, has(x.id) && (has(x.tags) || has(x.ownerID) || has(x.instanceMatchCriteria)))",
                "'id' is mutually exclusive, cannot be set along with other fields in a capacity reservation selector \
                 term",
            );
        reservations.at("[].id").pattern(CAPACITY_RESERVATION_ID_PATTERN);
        reservations.at("[].ownerID").pattern(ACCOUNT_ID_PATTERN);
        reservations.at("[].instanceMatchCriteria").one_of(&INSTANCE_MATCH_CRITERIA);
        selector_tags(&mut reservations.at("[].tags"));

        let mut devices = spec.at("blockDeviceMappings");
        devices.max_items(50).rule(
            "self.filter(x, has(x.rootVolume)?x.rootVolume==true:false).size() <= 1",
            "must have only one blockDeviceMappings with rootVolume",
        );
        let mut ebs = devices.at("[].ebs");
        ebs.rule("has(self.snapshotID) || has(self.volumeSize)", "snapshotID or volumeSize must be defined").rule(
            "!has(self.volumeInitializationRate) || (has(self.snapshotID) && self.snapshotID != '')",
            "snapshotID must be set when volumeInitializationRate is set",
        );
        ebs.add_property("volumeInitializationRate", int32(Some(100), Some(300)));
        // Up to 64000 GiB (G), 59000 Gi, 58 Ti or 64 T.
        ebs.at("volumeSize").pattern(
            "^((?:[1-9][0-9]{0,3}|[1-4][0-9]{4}|[5][0-8][0-9]{3}|59000)Gi|(?:[1-9][0-9]{0,3}|[1-5][0-9]{4}|[6][0-3][0-9]{3}|64000)G|([1-9]||[1-5][0-7]|58)Ti|([1-9]||[1-5][0-9]|6[0-3]|64)T)$",
        );
        ebs.at("volumeType").one_of(&["standard", "io1", "io2", "gp2", "sc1", "st1", "gp3"]);

        let mut kubelet = spec.at("kubelet");
        kubelet
            .rule(
                "has(self.imageGCHighThresholdPercent) && has(self.imageGCLowThresholdPercent) ?  \
                 self.imageGCHighThresholdPercent > self.imageGCLowThresholdPercent  : true",
                "imageGCHighThresholdPercent must be greater than imageGCLowThresholdPercent",
            )
            .rule(
                "has(self.evictionSoft) ? self.evictionSoft.all(e, (e in self.evictionSoftGracePeriod)):true",
                "evictionSoft OwnerKey does not have a matching evictionSoftGracePeriod",
            )
            .rule(
                "has(self.evictionSoftGracePeriod) ? self.evictionSoftGracePeriod.all(e, (e in self.evictionSoft)):true",
                "evictionSoftGracePeriod OwnerKey does not have a matching evictionSoft",
            );
        // A percentage (up to two decimals), empty, or a quantity.
        let threshold = format!(
            r"^((\d{{1,2}}(\.\d{{1,2}})?|100(\.0{{1,2}})?)%||{})$",
            &crd::QUANTITY_PATTERN[1..crd::QUANTITY_PATTERN.len() - 1]
        );
        for field in ["evictionHard", "evictionSoft"] {
            let mut signals = kubelet.at(field);
            signals.at("{}").pattern(&threshold);
            eviction_keys(&mut signals, field);
        }
        eviction_keys(&mut kubelet.at("evictionSoftGracePeriod"), "evictionSoftGracePeriod");
        reserved(&mut kubelet.at("kubeReserved"), "kubeReserved");
        reserved(&mut kubelet.at("systemReserved"), "systemReserved");
        kubelet.at("evictionMaxPodGracePeriod").format("int32");
        kubelet.at("maxPods").format("int32").min(0);
        kubelet.at("podsPerCore").format("int32").min(0);
        kubelet.at("imageGCHighThresholdPercent").format("int32").min(0).max(100);
        kubelet.at("imageGCLowThresholdPercent").format("int32").min(0).max(100);

        let mut metadata = spec.at("metadataOptions");
        let enabled_disabled = ["enabled", "disabled"];
        metadata.default(json!({
            "httpEndpoint": "enabled",
            "httpProtocolIPv6": "disabled",
            "httpPutResponseHopLimit": 1,
            "httpTokens": "required",
        }));
        metadata.at("httpEndpoint").default(json!("enabled")).one_of(&enabled_disabled);
        metadata.at("httpProtocolIPv6").default(json!("disabled")).one_of(&enabled_disabled);
        metadata.at("httpPutResponseHopLimit").default(json!(1)).min(1).max(64);
        metadata.at("httpTokens").default(json!("required")).one_of(&["required", "optional"]);

        spec.at("instanceStorePolicy").one_of(&["RAID0"]);
        spec.at("role").rule("self != ''", "role cannot be empty");
        spec.at("instanceProfile").rule("self != ''", "instanceProfile cannot be empty");
        spec.at("tags")
            .rule("self.all(k, k != '')", "empty tag keys aren't supported")
            .rule(
                "self.all(k, k !='eks:eks-cluster-name')",
                "tag contains a restricted tag matching eks:eks-cluster-name",
            )
            .rule(
                "self.all(k, !k.startsWith('kubernetes.io/cluster') )",
                "tag contains a restricted tag matching kubernetes.io/cluster/",
            )
            .rule(
                "self.all(k, k != 'karpenter.sh/nodepool')",
                "tag contains a restricted tag matching karpenter.sh/nodepool",
            )
            .rule(
                "self.all(k, k !='karpenter.sh/nodeclaim')",
                "tag contains a restricted tag matching karpenter.sh/nodeclaim",
            )
            .rule(
                "self.all(k, k !='karpenter.k8s.aws/ec2nodeclass')",
                "tag contains a restricted tag matching karpenter.k8s.aws/ec2nodeclass",
            );

        // Fields the engine does not read.
        spec.add_property("ipPrefixCount", int32(Some(0), None));
        spec.add_property(
            "cpuOptions",
            json!({"type": "object", "properties": {"nestedVirtualization": {"type": "string", "enum": enabled_disabled}}}),
        );
        spec.add_property(
            "connectionTracking",
            json!({
                "type": "object",
                "properties": {
                    "tcpEstablishedTimeout": int32(Some(60), Some(432_000)),
                    "udpStreamTimeout": int32(Some(60), Some(180)),
                    "udpTimeout": int32(Some(30), Some(60)),
                },
                "x-kubernetes-validations": [{
                    "rule": "has(self.tcpEstablishedTimeout) || has(self.udpStreamTimeout) || has(self.udpTimeout)",
                    "message": "at least one of tcpEstablishedTimeout, udpStreamTimeout, or udpTimeout must be set",
                }],
            }),
        );
        spec.add_property(
            "placementGroupSelector",
            json!({
                "type": "object",
                "properties": {
                    "id": {"type": "string", "pattern": "^pg-[0-9a-z]+$"},
                    "name": {"type": "string", "minLength": 1},
                },
                "x-kubernetes-validations": [
                    {"rule": "has(self.name) || has(self.id)", "message": "expected at least one, got none, ['name', 'id']"},
                    {"rule": "!(has(self.name) && has(self.id))", "message": "'name' and 'id' are mutually exclusive"},
                ],
            }),
        );
        spec.add_property(
            "networkInterfaces",
            json!({
                "type": "array",
                "maxItems": 150,
                "items": {
                    "type": "object",
                    "properties": {
                        "deviceIndex": int32(Some(0), None),
                        "interfaceType": {"type": "string", "enum": ["interface", "efa-only"]},
                        "networkCardIndex": int32(Some(0), None),
                    },
                    "required": ["deviceIndex", "interfaceType", "networkCardIndex"],
                },
                "x-kubernetes-validations": [
                    {
                        "rule": "self.size() == 0 || self.exists(x, x.deviceIndex == 0 && x.networkCardIndex == 0 && \
                                 x.interfaceType == 'interface')",
                        "message": "networkInterfaces must include a primary interface with interfaceType='interface'",
                    },
                    {
                        "rule": "self.all(x, self.filter(y, x.networkCardIndex == y.networkCardIndex && x.deviceIndex == \
                                 y.deviceIndex).size() == 1 && (x.interfaceType != 'efa-only' || self.filter(y, \
                                 x.networkCardIndex == y.networkCardIndex && y.interfaceType == 'efa-only').size() == 1))",
                        "message": "networkInterfaces must not have duplicate networkCardIndex and deviceIndex pairs, and \
                                    can have at most one efa device per network card",
                    },
                ],
            }),
        );

        let mut status = root.at("status");
        crd::conditions(&mut status.at("conditions"), true, false);
        let mut amis = status.at("amis[]");
        amis.required(&["id", "requirements"]);
        amis.at("requirements[]").remove_property("minValues");
        amis.at("requirements[].values").list_type("atomic");
        let mut held = status.at("capacityReservations[]");
        held.at("endTime").format("date-time");
        held.at("id").pattern(CAPACITY_RESERVATION_ID_PATTERN);
        held.at("ownerID").pattern(ACCOUNT_ID_PATTERN);
        held.at("instanceMatchCriteria").one_of(&INSTANCE_MATCH_CRITERIA);
        held.at("reservationType").default(json!(default_reservation_type())).one_of(&["default", "capacity-block"]);
        held.at("state").default(json!(active())).one_of(&["active", "expiring"]);
    })
}

const CAPACITY_RESERVATION_ID_PATTERN: &str = "^cr-[0-9a-z]+$";
const ACCOUNT_ID_PATTERN: &str = "^[0-9]{12}$";
const INSTANCE_MATCH_CRITERIA: [&str; 2] = ["open", "targeted"];
