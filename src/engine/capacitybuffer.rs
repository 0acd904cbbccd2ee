//! CapacityBuffers (core v1.14, gate `CapacityBuffer`, engine-v1x.md §7): each buffer resolves to a pod shape and a
//! replica count (upstream's `capacitybuffer` controller), and a resolved buffer becomes that many virtual pods the
//! provisioner places like pending pods, so the room they take exists before real pods need it. Pure: the
//! controller ([`crate::controller`]) writes the statuses and feeds the virtual pods to its solves.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{Pod, PodCondition, PodStatus, PodTemplate, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::engine::api::capacitybuffer::*;
use crate::engine::lifecycle::set_condition_in;
use crate::engine::provisioning::Millis;
use crate::engine::resources::parse_quantity;
use crate::engine::scheduling::pod::pod_requests;
use crate::engine::stored_pod::StoredPod;

/// Marks a virtual pod (upstream's annotations).
pub const ANNOTATION_FAKE_POD: &str = "karpenter.sh/capacity-buffer-fake-pod";
pub const ANNOTATION_BUFFER_NAME: &str = "karpenter.sh/capacity-buffer-name";
pub const ANNOTATION_BUFFER_NAMESPACE: &str = "karpenter.sh/capacity-buffer-namespace";

/// What a buffer may take its shape from.
#[derive(Debug, Clone, Copy, Default)]
pub struct Sources<'a> {
    pub pod_templates: &'a [PodTemplate],
    pub deployments: &'a [Deployment],
    pub statefulsets: &'a [StatefulSet],
    pub replicasets: &'a [ReplicaSet],
}

/// A buffer that resolved: its shape and how many chunks.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolved {
    pub template: Arc<PodTemplateSpec>,
    pub replicas: i32,
}

/// Why a buffer did not resolve: (reason, message) for `ReadyForProvisioning=False`.
type Unresolved = (&'static str, String);

fn resolve_shape(
    cb: &CapacityBuffer,
    src: &Sources<'_>,
) -> Result<(PodTemplateSpec, Option<i32>, Option<i64>), Unresolved> {
    let ns = cb.namespace();
    let in_ns = |m: &ObjectMeta, name: &str| {
        m.namespace.as_deref().unwrap_or("default") == ns && m.name.as_deref() == Some(name)
    };
    if let Some(r) = &cb.spec.pod_template_ref {
        let t = src
            .pod_templates
            .iter()
            .find(|t| in_ns(&t.metadata, &r.name))
            .ok_or_else(|| (REASON_POD_TEMPLATE_NOT_FOUND, format!("podtemplates \"{}\" not found", r.name)))?;
        let template = t.template.clone().unwrap_or_default();
        return Ok((template, None, Some(t.metadata.generation.unwrap_or(0))));
    }
    let Some(r) = &cb.spec.scalable_ref else {
        return Err((REASON_RESOLUTION_FAILED, "Neither podTemplateRef nor scalableRef is set".into()));
    };
    let not_found =
        || (REASON_SCALABLE_REF_NOT_FOUND, format!("{}s.apps \"{}\" not found", r.kind.to_lowercase(), r.name));
    if r.api_group != "apps" {
        return Err((
            REASON_RESOLUTION_FAILED,
            format!(
                "unsupported scalableRef {}/{}: only apps Deployment, StatefulSet and ReplicaSet",
                r.api_group, r.kind
            ),
        ));
    }
    let (template, replicas) = match r.kind.as_str() {
        "Deployment" => {
            let d = src.deployments.iter().find(|d| in_ns(&d.metadata, &r.name)).ok_or_else(not_found)?;
            (d.spec.template.clone(), d.spec.replicas)
        }
        "StatefulSet" => {
            let d = src.statefulsets.iter().find(|d| in_ns(&d.metadata, &r.name)).ok_or_else(not_found)?;
            (d.spec.template.clone(), d.spec.replicas)
        }
        "ReplicaSet" => {
            let d = src.replicasets.iter().find(|d| in_ns(&d.metadata, &r.name)).ok_or_else(not_found)?;
            (d.spec.template.clone().unwrap_or_default(), d.spec.replicas)
        }
        other => {
            return Err((
                REASON_RESOLUTION_FAILED,
                format!("unsupported scalableRef kind {other}: only Deployment, StatefulSet and ReplicaSet"),
            ));
        }
    };
    // A scalable without replicas runs one.
    Ok((template, Some(replicas.unwrap_or(1)), None))
}

/// `ceil(scalable × percentage / 100)`, at least 1 when both are positive.
pub fn percentage_replicas(scalable: i32, percentage: i32) -> i32 {
    let n = (i64::from(scalable) * i64::from(percentage) + 99) / 100;
    let n = if n < 1 && scalable > 0 && percentage > 0 { 1 } else { n };
    n.clamp(0, i64::from(i32::MAX)) as i32
}

/// How many chunks fit in `limits`: the least of floor(limit ÷ request) over resources both name; `None` when
/// they share none (the limits then constrain nothing).
pub fn limit_replicas(
    limits: &BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
    template: &PodTemplateSpec,
) -> Option<i32> {
    let pod = StoredPod::unshared(Pod { metadata: Default::default(), spec: template.spec.clone(), status: None });
    let requests = pod_requests(&pod).ok()?;
    let mut least: Option<i64> = None;
    for (name, q) in limits {
        let Ok(limit) = parse_quantity(&q.0) else { continue };
        // `pods: 1` is implied by every pod, not a request the template makes.
        let request = if name == crate::engine::resources::PODS { 0 } else { requests.get(name) };
        if request <= 0 {
            continue;
        }
        let limit = if name == crate::engine::resources::CPU { limit.milli() } else { limit.value() };
        let n = limit / request;
        least = Some(least.map_or(n, |l| l.min(n)));
    }
    least.map(|n| n.clamp(0, i64::from(i32::MAX)) as i32)
}

/// The replica count: the larger of `replicas` and the percentage's, capped by the limits; the limits alone when
/// neither is set; 0 when nothing is. (The API docs say "minimum" of replicas and percentage; upstream's code and
/// tests take the maximum, and so does this.)
pub fn replicas(cb: &CapacityBuffer, template: &PodTemplateSpec, scalable: Option<i32>) -> i32 {
    let mut sizes = Vec::new();
    if let (Some(p), Some(n)) = (cb.spec.percentage, scalable)
        && n > 0
    {
        sizes.push(percentage_replicas(n, p));
    }
    sizes.extend(cb.spec.replicas);
    let desired = sizes.iter().copied().max();
    let limited = cb.spec.limits.as_ref().and_then(|l| limit_replicas(l, template));
    match (desired, limited) {
        (Some(d), Some(l)) => d.min(l),
        (None, Some(l)) => l,
        (Some(d), None) => d,
        (None, None) => 0,
    }
}

/// The buffer controller's reconcile: the status to hold now, and the resolution when it succeeded.
pub fn reconcile(cb: &CapacityBuffer, src: &Sources<'_>, now: Millis) -> (CapacityBufferStatus, Option<Resolved>) {
    let mut status = cb.status.clone().unwrap_or_default();
    status.provisioning_strategy = cb.spec.provisioning_strategy.clone();
    let generation = cb.metadata.generation;
    let resolved = match resolve_shape(cb, src) {
        Ok((template, scalable, template_generation)) => {
            let n = replicas(cb, &template, scalable);
            if cb.spec.pod_template_ref.is_some() {
                status.pod_template_ref = cb.spec.pod_template_ref.clone();
                status.pod_template_generation = template_generation;
            } else {
                status.pod_template_ref = None;
                status.pod_template_generation = None;
            }
            status.replicas = Some(n);
            set_condition_in(
                &mut status.conditions,
                COND_READY_FOR_PROVISIONING,
                "True",
                REASON_RESOLVED,
                "Pod template resolved successfully",
                now,
            );
            Some(Resolved { template: Arc::new(template), replicas: n })
        }
        Err((reason, message)) => {
            set_condition_in(&mut status.conditions, COND_READY_FOR_PROVISIONING, "False", reason, &message, now);
            None
        }
    };
    if let Some(c) = status.conditions.iter_mut().find(|c| c.type_ == COND_READY_FOR_PROVISIONING) {
        c.observed_generation = generation;
    }
    (status, resolved)
}

/// The virtual pods of a resolved buffer: `capacity-buffer-<name>-<i>`, the template's labels (so spreads and
/// anti-affinity among them hold), marked by annotations, unschedulable, with no node, claims or ephemeral
/// volumes.
pub fn virtual_pods(cb: &CapacityBuffer, r: &Resolved) -> Vec<StoredPod> {
    let uid = cb.metadata.uid.clone().unwrap_or_else(|| cb.key());
    let mut spec = r.template.spec.clone().unwrap_or_default();
    spec.node_name = None;
    spec.priority = Some(i32::MIN);
    if let Some(volumes) = &mut spec.volumes {
        let dropped: Vec<String> = volumes
            .iter()
            .filter(|v| v.persistent_volume_claim.is_some() || v.ephemeral.is_some())
            .map(|v| v.name.clone())
            .collect();
        volumes.retain(|v| !dropped.contains(&v.name));
        for c in spec.containers.iter_mut().chain(spec.init_containers.iter_mut().flatten()) {
            if let Some(m) = &mut c.volume_mounts {
                m.retain(|m| !dropped.contains(&m.name));
            }
        }
    }
    let template = StoredPod::from(Pod { metadata: Default::default(), spec: Some(spec), status: None });
    let labels = r.template.metadata.as_ref().and_then(|m| m.labels.clone());
    (0..r.replicas.max(0))
        .map(|i| {
            let mut p = template.clone();
            p.metadata = ObjectMeta {
                name: Some(format!("capacity-buffer-{}-{i}", cb.name())),
                namespace: Some(cb.namespace().to_string()),
                uid: Some(format!("{uid}-{i}")),
                labels: labels.clone(),
                annotations: Some(
                    [
                        (ANNOTATION_FAKE_POD.to_string(), "true".to_string()),
                        (ANNOTATION_BUFFER_NAME.to_string(), cb.name().to_string()),
                        (ANNOTATION_BUFFER_NAMESPACE.to_string(), cb.namespace().to_string()),
                    ]
                    .into(),
                ),
                ..Default::default()
            };
            p.status = Some(PodStatus {
                phase: Some("Pending".into()),
                conditions: Some(vec![PodCondition {
                    type_: "PodScheduled".into(),
                    status: "False".into(),
                    reason: Some("Unschedulable".into()),
                    ..Default::default()
                }]),
                ..Default::default()
            });
            p
        })
        .collect()
}

/// The buffer a virtual pod belongs to (`namespace/name`), if it is one.
pub fn buffer_of(p: &StoredPod) -> Option<String> {
    let a = p.metadata.annotations.as_ref()?;
    if a.get(ANNOTATION_FAKE_POD).map(String::as_str) != Some("true") {
        return None;
    }
    Some(format!("{}/{}", a.get(ANNOTATION_BUFFER_NAMESPACE)?, a.get(ANNOTATION_BUFFER_NAME)?))
}

/// Where one solve put a buffer's virtual pods.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Placed {
    pub existing: i32,
    pub new_capacity: i32,
    pub failed: i32,
}

/// The `Provisioning` condition after a solve (status, reason, message), or `None` to leave it as it is (upstream:
/// a ready buffer none of whose pods the solve saw).
pub fn provisioning_condition(
    cb: &CapacityBuffer,
    placed: Option<Placed>,
) -> Option<(&'static str, &'static str, String)> {
    if cb.condition(COND_READY_FOR_PROVISIONING).is_none_or(|c| c.status != "True") {
        return Some(("False", REASON_NOT_READY, "Buffer is not ReadyForProvisioning".into()));
    }
    let desired = cb.status.as_ref().and_then(|s| s.replicas).unwrap_or(0);
    if desired == 0 {
        return Some(("False", REASON_BUFFER_EMPTY, "Buffer has zero desired replicas".into()));
    }
    let p = placed?;
    if p.new_capacity > 0 || p.failed > 0 {
        let message = if p.failed > 0 {
            format!("{}/{desired} virtual pods required new capacity, {} failed", p.new_capacity, p.failed)
        } else {
            format!("{}/{desired} virtual pods required new capacity", p.new_capacity)
        };
        return Some(("False", REASON_REQUIRES_NEW, message));
    }
    (p.existing == desired)
        .then(|| ("True", REASON_FITS_EXISTING, format!("All {desired} virtual pods fit on existing capacity")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn buffer(spec: &str) -> CapacityBuffer {
        serde_yaml::from_str(&format!(
            "apiVersion: autoscaling.x-k8s.io/v1beta1\nkind: CapacityBuffer\nmetadata: {{name: web-buffer, namespace: prod, uid: cb1}}\nspec: {spec}\n"
        ))
        .unwrap()
    }

    fn deployment(replicas: Option<i32>, cpu: &str) -> Deployment {
        let r = replicas.map_or(String::new(), |n| format!("replicas: {n}\n  "));
        serde_yaml::from_str(&format!(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: web, namespace: prod}}\nspec:\n  {r}selector: {{matchLabels: {{app: web}}}}\n  template:\n    metadata: {{labels: {{app: web}}}}\n    spec:\n      containers: [{{name: c, image: x, resources: {{requests: {{cpu: \"{cpu}\", memory: 1Gi}}}}}}]\n      volumes: [{{name: data, persistentVolumeClaim: {{claimName: data}}}}, {{name: cfg, configMap: {{name: c}}}}]\n"
        ))
        .unwrap()
    }

    #[test]
    fn replicas_are_the_max_of_replicas_and_percentage_capped_by_limits() {
        // › "max of replicas and percentage capped by limit": a Deployment of 10, replicas 5, 80 %, limit 4 CPU
        // → min(max(5, 8), floor(4 / 500m)) = 8.
        let d = [deployment(Some(10), "500m")];
        let src = Sources { deployments: &d, ..Default::default() };
        let cb = buffer(
            "{scalableRef: {apiGroup: apps, kind: Deployment, name: web}, replicas: 5, percentage: 80, limits: {cpu: '4'}}",
        );
        let (status, r) = reconcile(&cb, &src, 0);
        assert_eq!(r.unwrap().replicas, 8);
        assert_eq!(status.replicas, Some(8));
        // A tighter limit wins: 4 CPU of 1 CPU pods is 4.
        let d = [deployment(Some(10), "1")];
        let src = Sources { deployments: &d, ..Default::default() };
        assert_eq!(reconcile(&cb, &src, 0).1.unwrap().replicas, 4);
        // Limits alone: as many as fit.
        let cb =
            buffer("{scalableRef: {apiGroup: apps, kind: Deployment, name: web}, limits: {cpu: '3', memory: 10Gi}}");
        assert_eq!(reconcile(&cb, &src, 0).1.unwrap().replicas, 3);
        // A limit on a resource the pods don't request constrains nothing: replicas stand.
        let cb = buffer(
            "{scalableRef: {apiGroup: apps, kind: Deployment, name: web}, replicas: 7, limits: {nvidia.com/gpu: '1'}}",
        );
        assert_eq!(reconcile(&cb, &src, 0).1.unwrap().replicas, 7);
        // Nothing set: zero.
        let cb = buffer("{scalableRef: {apiGroup: apps, kind: Deployment, name: web}}");
        assert_eq!(reconcile(&cb, &src, 0).1.unwrap().replicas, 0);
        // A percentage rounds up, to at least one; a Deployment without replicas runs one.
        assert_eq!(percentage_replicas(10, 15), 2);
        assert_eq!(percentage_replicas(3, 1), 1);
        assert_eq!(percentage_replicas(0, 50), 0);
        let d = [deployment(None, "1")];
        let src = Sources { deployments: &d, ..Default::default() };
        let cb = buffer("{scalableRef: {apiGroup: apps, kind: Deployment, name: web}, percentage: 300}");
        assert_eq!(reconcile(&cb, &src, 0).1.unwrap().replicas, 3);
    }

    #[test]
    fn unresolved_buffers_say_why() {
        let cb = buffer("{podTemplateRef: {name: missing}, replicas: 2}");
        let (status, r) = reconcile(&cb, &Sources::default(), 1_000);
        assert!(r.is_none());
        let c = &status.conditions[0];
        assert_eq!((c.type_.as_str(), c.status.as_str()), (COND_READY_FOR_PROVISIONING, "False"));
        assert_eq!(c.reason.as_deref(), Some(REASON_POD_TEMPLATE_NOT_FOUND));
        let cb = buffer("{scalableRef: {apiGroup: apps, kind: Deployment, name: gone}, replicas: 2}");
        assert_eq!(
            reconcile(&cb, &Sources::default(), 0).0.conditions[0].reason.as_deref(),
            Some(REASON_SCALABLE_REF_NOT_FOUND)
        );
        let cb = buffer("{scalableRef: {apiGroup: batch, kind: Job, name: j}, replicas: 2}");
        assert_eq!(
            reconcile(&cb, &Sources::default(), 0).0.conditions[0].reason.as_deref(),
            Some(REASON_RESOLUTION_FAILED)
        );
    }

    #[test]
    fn virtual_pods_carry_the_shape_and_the_marks_but_no_volumes_claims_or_node() {
        let d = [deployment(Some(4), "500m")];
        let src = Sources { deployments: &d, ..Default::default() };
        let cb = buffer("{scalableRef: {apiGroup: apps, kind: Deployment, name: web}, replicas: 2}");
        let r = reconcile(&cb, &src, 0).1.unwrap();
        let pods = virtual_pods(&cb, &r);
        assert_eq!(pods.len(), 2);
        let p = &pods[1];
        assert_eq!(p.metadata.name.as_deref(), Some("capacity-buffer-web-buffer-1"));
        assert_eq!(p.metadata.uid.as_deref(), Some("cb1-1"));
        assert_eq!(p.metadata.labels.as_ref().unwrap()["app"], "web");
        assert_eq!(buffer_of(p).as_deref(), Some("prod/web-buffer"));
        let volumes: Vec<&str> = p.spec().volumes.iter().flatten().map(|v| v.name.as_str()).collect();
        assert_eq!(volumes, ["cfg"], "the claim is dropped");
        assert!(crate::engine::provisioning::is_provisionable(p));
        assert_eq!(pod_requests(p).unwrap().cpu, 500);
    }

    #[test]
    fn the_provisioning_condition_follows_where_the_pods_went() {
        let src_d = [deployment(Some(4), "500m")];
        let src = Sources { deployments: &src_d, ..Default::default() };
        let mut cb = buffer("{scalableRef: {apiGroup: apps, kind: Deployment, name: web}, replicas: 3}");
        assert_eq!(provisioning_condition(&cb, None).unwrap().1, REASON_NOT_READY);
        cb.status = Some(reconcile(&cb, &src, 0).0);
        let at = |existing, new_capacity, failed| {
            provisioning_condition(&cb, Some(Placed { existing, new_capacity, failed }))
        };
        assert_eq!(
            at(3, 0, 0),
            Some(("True", REASON_FITS_EXISTING, "All 3 virtual pods fit on existing capacity".into()))
        );
        assert_eq!(at(1, 2, 0), Some(("False", REASON_REQUIRES_NEW, "2/3 virtual pods required new capacity".into())));
        assert_eq!(
            at(0, 2, 1),
            Some(("False", REASON_REQUIRES_NEW, "2/3 virtual pods required new capacity, 1 failed".into()))
        );
        assert_eq!(provisioning_condition(&cb, None), None, "no pods seen: left alone");
        let mut empty = buffer("{scalableRef: {apiGroup: apps, kind: Deployment, name: web}, replicas: 0}");
        empty.status = Some(reconcile(&empty, &src, 0).0);
        assert_eq!(provisioning_condition(&empty, None).unwrap().1, REASON_BUFFER_EMPTY);
    }
}
