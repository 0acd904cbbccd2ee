//! EC2NodeClass drift (aws.md §4.3), checked in upstream's order with the first hit winning, each with a reason an
//! operator can read: the NodeClass's spec changed since launch (a hash stamped on the NodeClaim at launch), the
//! instance's image is no longer among the AMIs selected for its type, its security groups or its subnet are no
//! longer the selected ones. The engine's drift asks through its `NodeClassDrift` hook.

use std::collections::{BTreeMap, BTreeSet};

use crate::engine::api::{EC2NodeClass, NodeClaim};
use crate::engine::catalog::InstanceType;
use crate::engine::requirements::selector_requirements;

use super::ec2::Ec2Instance;

/// The NodeClaim annotation holding the NodeClass spec hash at launch, and its version.
pub const ANNOTATION_HASH: &str = "karpenter.k8s.aws/ec2nodeclass-hash";
pub const ANNOTATION_HASH_VERSION: &str = "karpenter.k8s.aws/ec2nodeclass-hash-version";
/// This tool's own hash scheme (upstream's v5/v6 hash bytes are Go-specific; a different version never drifts).
pub const HASH_VERSION: &str = "karpenter-tui-v1";

/// A stable hash of the spec fields that change a launched instance: not the selector terms (their results are
/// checked one by one below), not `amiFamily`.
pub fn spec_hash(nc: &EC2NodeClass) -> String {
    let mut spec = nc.spec.clone();
    spec.subnet_selector_terms.clear();
    spec.security_group_selector_terms.clear();
    spec.capacity_reservation_selector_terms.clear();
    spec.ami_selector_terms.clear();
    spec.ami_family = None;
    let json = serde_json::to_string(&spec).unwrap_or_default();
    super::stable_hash(&[json.as_bytes()]).to_string()
}

/// The annotations a launch stamps on its NodeClaim.
pub fn launch_annotations(nc: &EC2NodeClass) -> BTreeMap<String, String> {
    [(ANNOTATION_HASH.to_string(), spec_hash(nc)), (ANNOTATION_HASH_VERSION.to_string(), HASH_VERSION.to_string())]
        .into()
}

/// Why `claim` no longer matches its NodeClass, or `None`. `class_hash` is [`spec_hash`] of `nc` (computed once
/// per class, not per claim), `instance` the claim's instance as last listed and `instance_type` its type from the
/// catalog (for the AMI check); either may be unknown.
pub fn drifted(
    claim: &NodeClaim,
    nc: &EC2NodeClass,
    class_hash: &str,
    instance: Option<&Ec2Instance>,
    instance_type: Option<&InstanceType>,
) -> Option<String> {
    let name = nc.metadata.name.as_deref().unwrap_or("");
    let ann = claim.metadata.annotations.as_ref();
    let get = |k: &str| ann.and_then(|a| a.get(k)).map(String::as_str);
    if get(ANNOTATION_HASH_VERSION) == Some(HASH_VERSION)
        && let Some(h) = get(ANNOTATION_HASH)
        && h != class_hash
    {
        return Some(format!("EC2NodeClass {name}'s spec changed since launch"));
    }
    let status = nc.status.as_ref()?;
    if let (Some(image), Some(t)) = (claim.status.as_ref().and_then(|s| s.image_id.as_deref()), instance_type) {
        let wanted: Vec<&str> = status
            .amis
            .iter()
            .filter(|a| t.requirements.overlaps(&selector_requirements(&a.requirements)))
            .map(|a| a.id.as_str())
            .collect();
        if !wanted.is_empty() && !wanted.contains(&image) {
            return Some(format!("image {image} → {} (EC2NodeClass {name}'s AMIs changed)", wanted[0]));
        }
    }
    let i = instance?;
    // Every EC2 instance has a security group; none listed means the API didn't say (moto's fleet instances).
    if !i.security_groups.is_empty() {
        let have: BTreeSet<&str> = i.security_groups.iter().map(String::as_str).collect();
        let want: BTreeSet<&str> = status.security_groups.iter().map(|g| g.id.as_str()).collect();
        if have != want {
            let list = |s: &BTreeSet<&str>| s.iter().copied().collect::<Vec<_>>().join(", ");
            return Some(format!("security groups [{}] → [{}]", list(&have), list(&want)));
        }
    }
    if let Some(subnet) = &i.subnet_id
        && !status.subnets.iter().any(|s| &s.id == subnet)
    {
        return Some(format!("subnet {subnet} is no longer selected by EC2NodeClass {name}"));
    }
    None
}

/// Capacity-reservation drift (upstream's `CapacityReservationDrift`, gate `ReservedCapacity`): the instance runs
/// in a reservation the NodeClass no longer selects (its status lacks it). An instance that fell back to on-demand
/// when its reservation ended does not drift; its relabel does the rest.
pub fn reservation_drift(nc: &EC2NodeClass, instance: &Ec2Instance) -> Option<String> {
    if instance.capacity_type() != crate::engine::labels::CAPACITY_RESERVED {
        return None;
    }
    let id = instance.capacity_reservation_id.as_deref()?;
    let status = nc.status.as_ref()?;
    if status.capacity_reservations.iter().any(|r| r.id == id) {
        return None;
    }
    let name = nc.metadata.name.as_deref().unwrap_or("");
    Some(format!("capacity reservation {id} is no longer selected by EC2NodeClass {name}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::api::NodeSelectorRequirementWithMinValues as Req;
    use crate::engine::api::ec2nodeclass::{
        AmiStatus, EC2NodeClassSpec, EC2NodeClassStatus, SecurityGroupStatus, SubnetStatus,
    };
    use crate::engine::api::nodeclaim::{NodeClaimSpec, NodeClaimStatus};

    fn nc() -> EC2NodeClass {
        let mut nc = EC2NodeClass::new("default", EC2NodeClassSpec { role: Some("R".into()), ..Default::default() });
        let arch = Req {
            key: "kubernetes.io/arch".into(),
            operator: "In".into(),
            values: ["amd64".to_string()].into(),
            min_values: None,
        };
        nc.status = Some(EC2NodeClassStatus {
            subnets: vec![SubnetStatus { id: "subnet-1".into(), zone: "us-east-1a".into(), zone_id: None }],
            security_groups: vec![SecurityGroupStatus { id: "sg-1".into(), name: None }],
            amis: vec![AmiStatus { id: "ami-new".into(), name: None, requirements: vec![arch], deprecated: None }],
            ..Default::default()
        });
        nc
    }

    fn instance(subnet: &str, sgs: &[&str]) -> Ec2Instance {
        Ec2Instance {
            id: "i-1".into(),
            instance_type: "m5.large".into(),
            zone: "us-east-1a".into(),
            state: "running".into(),
            launched_at: None,
            spot: false,
            image_id: None,
            subnet_id: Some(subnet.into()),
            security_groups: sgs.iter().map(|s| s.to_string()).collect(),
            tags: BTreeMap::new(),
            instance_profile_arn: None,
            capacity_reservation_id: None,
            reservations_only: false,
        }
    }

    #[test]
    fn an_instance_in_a_reservation_the_class_no_longer_selects_drifts() {
        use crate::engine::api::ec2nodeclass::CapacityReservationStatus;
        let mut class = nc();
        class.status.as_mut().unwrap().capacity_reservations =
            vec![CapacityReservationStatus { id: "cr-foo".into(), ..Default::default() }];
        let mut i = instance("subnet-1", &["sg-1"]);
        i.capacity_reservation_id = Some("cr-foo".into());
        i.reservations_only = true;
        assert_eq!(reservation_drift(&class, &i), None);
        i.capacity_reservation_id = Some("cr-bar".into());
        assert_eq!(
            reservation_drift(&class, &i).as_deref(),
            Some("capacity reservation cr-bar is no longer selected by EC2NodeClass default")
        );
        // Landed in an open reservation without asking for it: on-demand, not reserved, so no drift.
        i.reservations_only = false;
        assert_eq!(reservation_drift(&class, &i), None);
        // Fell back to on-demand when the reservation ended: no drift.
        i.reservations_only = true;
        i.capacity_reservation_id = None;
        assert_eq!(reservation_drift(&class, &i), None);
    }

    #[test]
    fn each_kind_of_drift_says_what_changed() {
        let catalog = crate::engine::catalog::aws::aws_catalog("us-east-1", None, None, 0).unwrap();
        let m5 = catalog.get("m5.large").unwrap();
        let class = nc();
        let mut claim = NodeClaim::new("c", NodeClaimSpec::default());
        claim.metadata.annotations = Some(launch_annotations(&class));
        claim.status = Some(NodeClaimStatus { image_id: Some("ami-new".into()), ..Default::default() });
        let ok = instance("subnet-1", &["sg-1"]);
        assert_eq!(drifted(&claim, &class, &spec_hash(&class), Some(&ok), Some(m5)), None);
        // moto reports no security groups for fleet instances: not a drift.
        assert_eq!(drifted(&claim, &class, &spec_hash(&class), Some(&instance("subnet-1", &[])), Some(m5)), None);

        let mut edited = class.clone();
        edited.spec.detailed_monitoring = Some(true);
        assert!(drifted(&claim, &edited, &spec_hash(&edited), Some(&ok), Some(m5)).unwrap().contains("spec changed"));
        // Selector terms are not part of the hash: what they select is checked instead.
        let mut reselected = class.clone();
        reselected.spec.subnet_selector_terms.push(Default::default());
        assert_eq!(drifted(&claim, &reselected, &spec_hash(&reselected), Some(&ok), Some(m5)), None);

        let mut old_image = claim.clone();
        old_image.status.as_mut().unwrap().image_id = Some("ami-old".into());
        assert_eq!(
            drifted(&old_image, &class, &spec_hash(&class), Some(&ok), Some(m5)).unwrap(),
            "image ami-old → ami-new (EC2NodeClass default's AMIs changed)"
        );
        assert!(
            drifted(&claim, &class, &spec_hash(&class), Some(&instance("subnet-1", &["sg-2"])), Some(m5))
                .unwrap()
                .contains("[sg-2] → [sg-1]")
        );
        assert!(
            drifted(&claim, &class, &spec_hash(&class), Some(&instance("subnet-9", &["sg-1"])), Some(m5))
                .unwrap()
                .contains("subnet-9")
        );
    }
}
