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
