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
