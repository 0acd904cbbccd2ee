//! Volume topology: a pod's PVCs constrain where its node may be (a bound PV's node affinity, or an unbound PVC's
//! StorageClass allowed topologies). They narrow the node, never the pod's own requirements.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;

use super::pod::{PodData, term_requirements};
use crate::engine::labels;
use crate::engine::requirements::{Requirement, Requirements};

/// PVCs, PVs and StorageClasses indexed for lookups.
#[derive(Debug, Clone, Default)]
pub struct VolumeIndex {
    pvcs: BTreeMap<(String, String), PersistentVolumeClaim>,
    pvs: BTreeMap<String, PersistentVolume>,
    classes: BTreeMap<String, StorageClass>,
}

impl VolumeIndex {
    pub fn new(pvcs: &[PersistentVolumeClaim], pvs: &[PersistentVolume], classes: &[StorageClass]) -> Self {
        VolumeIndex {
            pvcs: pvcs
                .iter()
                .map(|c| {
                    (
                        (
                            c.metadata.namespace.clone().unwrap_or_else(|| "default".into()),
                            c.metadata.name.clone().unwrap_or_default(),
                        ),
                        c.clone(),
                    )
                })
                .collect(),
            pvs: pvs.iter().map(|p| (p.metadata.name.clone().unwrap_or_default(), p.clone())).collect(),
            classes: classes.iter().map(|c| (c.metadata.name.clone().unwrap_or_default(), c.clone())).collect(),
        }
    }

    /// The pod's volume alternatives (each a set of node requirements; any one suffices), or why the pod can't be
    /// provisioned for. No PVCs → one empty alternative.
    pub fn alternatives(&self, pod: &PodData) -> Result<Vec<Requirements>, String> {
        let mut alts: Vec<Requirements> = vec![Requirements::new()];
        for claim in &pod.pvcs {
            let options = self.claim_options(&pod.namespace, claim)?;
            if options.is_empty() {
                continue;
            }
            let mut next = Vec::new();
            for a in &alts {
                for o in &options {
                    let merged = a.intersected(o);
                    // Prune combinations that can never be satisfied.
                    if merged.iter().all(|(_, r)| !r.is_empty()) {
                        next.push(merged);
                    }
                }
            }
            if next.is_empty() {
                return Err(format!("the topologies of the pod's volumes (last: {claim}) have no common domain"));
            }
            alts = next;
        }
        Ok(alts)
    }

    fn claim_options(&self, ns: &str, claim: &str) -> Result<Vec<Requirements>, String> {
        let pvc = self
            .pvcs
            .get(&(ns.to_string(), claim.to_string()))
            .ok_or_else(|| format!("PersistentVolumeClaim {ns}/{claim} does not exist"))?;
        if pvc.metadata.deletion_timestamp.is_some() {
            return Err(format!("PersistentVolumeClaim {ns}/{claim} is being deleted"));
        }
        if pvc.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Lost") {
            return Err(format!("PersistentVolumeClaim {ns}/{claim} is Lost"));
        }
        let spec = pvc.spec.clone().unwrap_or_default();
        if let Some(pv_name) = spec.volume_name.as_deref().filter(|s| !s.is_empty()) {
            let pv = self
                .pvs
                .get(pv_name)
                .ok_or_else(|| format!("PersistentVolume {pv_name} of claim {ns}/{claim} does not exist"))?;
            if pv.metadata.deletion_timestamp.is_some() {
                return Err(format!("PersistentVolume {pv_name} is being deleted"));
            }
            let pv_spec = pv.spec.clone().unwrap_or_default();
            let local = pv_spec.local.is_some() || pv_spec.host_path.is_some();
            let mut out = Vec::new();
            if let Some(req) = pv_spec.node_affinity.and_then(|a| a.required) {
                for (i, t) in req.node_selector_terms.iter().enumerate() {
                    let mut r = term_requirements(t, &format!("PersistentVolume {pv_name} nodeAffinity term {i}"))
                        .map_err(|e| e.to_string())?;
                    if local {
                        // A local volume's hostname pins an old node; the new node gets a new name.
                        r.remove(labels::HOSTNAME);
                    }
                    out.push(r);
                }
            }
            return Ok(out);
        }
        let class_name = spec.storage_class_name.clone().unwrap_or_default();
        if class_name.is_empty() {
            return Ok(Vec::new());
        }
        let class = self
            .classes
            .get(&class_name)
            .ok_or_else(|| format!("StorageClass {class_name} of claim {ns}/{claim} does not exist"))?;
        if class.volume_binding_mode.as_deref().unwrap_or("Immediate") == "Immediate" {
            return Err(format!(
                "claim {ns}/{claim} is unbound and StorageClass {class_name} binds Immediately, so the volume decides the zone"
            ));
        }
        let mut out = Vec::new();
        for term in class.allowed_topologies.iter().flatten() {
            let mut r = Requirements::new();
            for e in term.match_label_expressions.iter().flatten() {
                r.add(&e.key, Requirement::in_values(e.values.clone()));
            }
            out.push(r);
        }
        Ok(out)
    }
}

/// A volume a pod attaches through a CSI driver: (driver, `namespace/claim`). Two pods sharing a claim attach it
/// once.
pub type Attachment = (String, String);

/// In-tree provisioners and the CSI drivers that took them over, as upstream translates them before counting.
const IN_TREE_TO_CSI: [(&str, &str); 6] = [
    ("kubernetes.io/aws-ebs", "ebs.csi.aws.com"),
    ("kubernetes.io/gce-pd", "pd.csi.storage.gke.io"),
    ("kubernetes.io/azure-disk", "disk.csi.azure.com"),
    ("kubernetes.io/azure-file", "file.csi.azure.com"),
    ("kubernetes.io/cinder", "cinder.csi.openstack.org"),
    ("kubernetes.io/vsphere-volume", "csi.vsphere.vmware.com"),
];

impl VolumeIndex {
    /// The volumes the pod attaches through CSI drivers, sorted (upstream's `GetVolumes`): a bound claim's driver is
    /// its PersistentVolume's (an in-tree EBS volume counts as the EBS driver's; another non-CSI volume is not
    /// counted); an unbound claim's is its StorageClass's provisioner. A claim, volume or class that is missing, or
    /// an unbound claim without a class, is not counted, as upstream skips it rather than block the pod.
    pub fn attachments(&self, pod: &PodData) -> Vec<Attachment> {
        let mut out: Vec<Attachment> = Vec::new();
        for claim in &pod.pvcs {
            let Some(pvc) = self.pvcs.get(&(pod.namespace.clone(), claim.clone())) else { continue };
            let spec = pvc.spec.as_ref();
            let driver = match spec.and_then(|s| s.volume_name.as_deref()).filter(|s| !s.is_empty()) {
                Some(pv_name) => self.pvs.get(pv_name).and_then(|pv| pv.spec.as_ref()).and_then(|s| {
                    s.csi
                        .as_ref()
                        .map(|c| c.driver.clone())
                        .or_else(|| s.aws_elastic_block_store.as_ref().map(|_| "ebs.csi.aws.com".to_string()))
                }),
                None => spec
                    .and_then(|s| s.storage_class_name.as_deref())
                    .filter(|s| !s.is_empty())
                    .and_then(|class| self.classes.get(class))
                    .map(|c| {
                        let p = c.provisioner.as_str();
                        IN_TREE_TO_CSI.iter().find(|(tree, _)| *tree == p).map_or(p, |(_, csi)| csi).to_string()
                    }),
            };
            if let Some(driver) = driver.filter(|d| !d.is_empty()) {
                out.push((driver, format!("{}/{claim}", pod.namespace)));
            }
        }
        out.sort();
        out.dedup();
        out
    }
}

/// Why attaching `adding` beside `held` (both sorted) breaks a driver's limit, in upstream's words; `None` when
/// it fits. `limit` gives a driver's limit (`None`: unlimited).
pub fn exceeded(held: &[Attachment], adding: &[Attachment], limit: impl Fn(&str) -> Option<u32>) -> Option<String> {
    let mut i = 0;
    while i < adding.len() {
        let driver = adding[i].0.as_str();
        let end = i + adding[i..].iter().take_while(|a| a.0 == driver).count();
        if let Some(limit) = limit(driver) {
            let on = held.iter().filter(|a| a.0 == driver).count();
            let new = adding[i..end].iter().filter(|a| held.binary_search(a).is_err()).count();
            if on + new > limit as usize {
                return Some(format!("would exceed volume limit for {driver}, {} > {limit}", on + new));
            }
        }
        i = end;
    }
    None
}

/// Adds `adding` to `held`, keeping it sorted and without repeats.
pub fn attach(held: &mut Vec<Attachment>, adding: &[Attachment]) {
    held.extend(adding.iter().cloned());
    held.sort();
    held.dedup();
}

/// The attach limit of a NodeClaim not yet on a node with a CSINode, for one driver: the smallest any of its
/// remaining instance-type options declares (a type declaring none for it does not limit it).
///
/// Assumed: upstream v1.15's rule is not published beyond its pull request's text; this is the one place to
/// change it (docs/karpenter-v1x.md, "assumed").
pub fn options_limit<'a>(
    types: impl Iterator<Item = &'a crate::engine::catalog::InstanceType>,
    driver: &str,
) -> Option<u32> {
    types.filter_map(|t| t.volume_limits.get(driver).copied()).min()
}

/// A CSINode's attach limits: each driver's `allocatable.count` (a driver without one has no limit).
pub fn csinode_limits(c: &k8s_openapi::api::storage::v1::CSINode) -> crate::engine::catalog::VolumeLimits {
    c.spec
        .drivers
        .iter()
        .filter_map(|d| {
            let count = d.allocatable.as_ref()?.count?;
            Some((d.name.clone(), u32::try_from(count).unwrap_or(0)))
        })
        .collect()
}

/// [`options_limit`] for every driver some option declares.
pub fn options_limits<'a>(
    types: impl Iterator<Item = &'a crate::engine::catalog::InstanceType> + Clone,
) -> crate::engine::catalog::VolumeLimits {
    let drivers: std::collections::BTreeSet<&str> =
        types.clone().flat_map(|t| t.volume_limits.keys().map(String::as_str)).collect();
    drivers.into_iter().filter_map(|d| options_limit(types.clone(), d).map(|l| (d.to_string(), l))).collect()
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Pod;
    use serde_json::json;

    use super::*;
    use crate::engine::scheduling::pod::pod_data;
    use crate::engine::stored_pod::StoredPod;

    fn pod(claims: &[&str]) -> PodData {
        let volumes: Vec<_> = claims
            .iter()
            .enumerate()
            .map(|(i, c)| json!({"name": format!("v{i}"), "persistentVolumeClaim": {"claimName": c}}))
            .collect();
        let p = json!({"metadata": {"name": "p", "namespace": "ns"},
                       "spec": {"containers": [{"name": "c"}], "volumes": volumes}});
        pod_data(&StoredPod::from(serde_json::from_value::<Pod>(p).unwrap()), &[]).unwrap()
    }

    fn index() -> VolumeIndex {
        let pvc = |name: &str, class: Option<&str>, volume: Option<&str>| {
            serde_json::from_value::<PersistentVolumeClaim>(json!({
                "metadata": {"name": name, "namespace": "ns"},
                "spec": {"storageClassName": class, "volumeName": volume}}))
            .unwrap()
        };
        let pvs = [
            json!({"metadata": {"name": "pv-csi"}, "spec": {"csi": {"driver": "efs.csi.aws.com", "volumeHandle": "h"}}}),
            json!({"metadata": {"name": "pv-intree"}, "spec": {"awsElasticBlockStore": {"volumeID": "vol-1"}}}),
            json!({"metadata": {"name": "pv-nfs"}, "spec": {"nfs": {"server": "s", "path": "/"}}}),
        ]
        .map(|v| serde_json::from_value::<PersistentVolume>(v).unwrap());
        let classes = [("gp3", "ebs.csi.aws.com"), ("legacy", "kubernetes.io/aws-ebs")].map(|(n, p)| {
            serde_json::from_value::<StorageClass>(json!({"metadata": {"name": n}, "provisioner": p})).unwrap()
        });
        VolumeIndex::new(
            &[
                pvc("unbound-gp3", Some("gp3"), None),
                pvc("unbound-legacy", Some("legacy"), None),
                pvc("bound-csi", Some("gp3"), Some("pv-csi")),
                pvc("bound-intree", None, Some("pv-intree")),
                pvc("bound-nfs", Some("gp3"), Some("pv-nfs")),
                pvc("no-class", None, None),
                pvc("gone-class", Some("gone"), None),
                pvc("gone-volume", Some("gp3"), Some("pv-gone")),
            ],
            &pvs,
            &classes,
        )
    }

    fn drivers(claims: &[&str]) -> Vec<String> {
        index().attachments(&pod(claims)).into_iter().map(|(d, id)| format!("{d} {id}")).collect()
    }

    #[test]
    fn a_bound_claim_counts_under_its_volumes_driver_and_an_unbound_one_under_its_class() {
        assert_eq!(drivers(&["bound-csi"]), ["efs.csi.aws.com ns/bound-csi"]);
        assert_eq!(drivers(&["bound-intree"]), ["ebs.csi.aws.com ns/bound-intree"]);
        assert_eq!(drivers(&["unbound-gp3"]), ["ebs.csi.aws.com ns/unbound-gp3"]);
        // An in-tree provisioner counts as the CSI driver that took it over.
        assert_eq!(drivers(&["unbound-legacy"]), ["ebs.csi.aws.com ns/unbound-legacy"]);
    }

    #[test]
    fn what_cannot_be_resolved_is_not_counted() {
        // A bound non-CSI volume, no class, a missing class or volume, a missing claim: skipped, as upstream does.
        assert!(drivers(&["bound-nfs", "no-class", "gone-class", "gone-volume", "missing"]).is_empty());
    }

    #[test]
    fn a_limit_counts_distinct_volumes_per_driver() {
        let a = |d: &str, id: &str| (d.to_string(), id.to_string());
        let held = vec![a("ebs", "ns/a"), a("ebs", "ns/b")];
        let limit = |d: &str| (d == "ebs").then_some(2);
        // The same claim again fits; a third does not; another driver is unlimited.
        assert_eq!(exceeded(&held, &[a("ebs", "ns/a")], limit), None);
        assert_eq!(
            exceeded(&held, &[a("ebs", "ns/c")], limit).as_deref(),
            Some("would exceed volume limit for ebs, 3 > 2")
        );
        assert_eq!(exceeded(&held, &[a("efs", "ns/x"), a("efs", "ns/y"), a("efs", "ns/z")], limit), None);
    }

    #[test]
    fn a_claims_options_limit_it_by_the_smallest_declared() {
        let t = |l: &[(&str, u32)]| crate::engine::catalog::InstanceType {
            name: "t".into(),
            requirements: Requirements::new(),
            capacity: Default::default(),
            overhead: Default::default(),
            offerings: Vec::new(),
            volume_limits: l.iter().map(|(d, n)| (d.to_string(), *n)).collect(),
        };
        let types = [t(&[("ebs", 25)]), t(&[("ebs", 10), ("efs", 5)]), t(&[])];
        assert_eq!(options_limit(types.iter(), "ebs"), Some(10));
        assert_eq!(options_limit(types.iter(), "fsx"), None);
        let all = options_limits(types.iter());
        assert_eq!(all.get("efs"), Some(&5));
        assert_eq!(all.len(), 2);
    }
}
