//! Builders for engine tests: pending pods, NodePools and a snapshot around the fake catalogue of
//! shared/spec/engine.md §9.1.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::{DaemonSet, DaemonSetSpec};
use k8s_openapi::api::core::v1::{
    Affinity, Container, NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, Pod, PodAffinity,
    PodAffinityTerm, PodAntiAffinity, PodCondition, PodSpec, PodStatus, PodTemplateSpec, ResourceRequirements, Taint,
    Toleration, TopologySpreadConstraint,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use karpenter_tui::engine::api::NodePool;
use karpenter_tui::engine::catalog::{Catalog, InstanceType};
use karpenter_tui::engine::provisioning::{ProvisioningResult, Snapshot, provision};
use karpenter_tui::engine::scheduling::SchedulerOptions;

pub mod plan_check;

/// The EC2NodeClass `default` as an item of a scenario's `objects` list.
pub const SCENARIO_NODECLASS: &str = r#"  - apiVersion: karpenter.k8s.aws/v1
    kind: EC2NodeClass
    metadata: {name: default}
    spec:
      role: KarpenterNodeRole-demo
      amiSelectorTerms: [{alias: al2023@latest}]
      subnetSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
      securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
"#;

pub fn nodepool(name: &str) -> NodePool {
    let yaml = format!(
        "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {{name: {name}}}\nspec:\n  template:\n    spec:\n      nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}\n"
    );
    serde_yaml::from_str(&yaml).expect("valid nodepool")
}

pub fn nodepool_yaml(yaml: &str) -> NodePool {
    serde_yaml::from_str(yaml).expect("valid nodepool yaml")
}

/// A pending pod that kube-scheduler marked unschedulable.
pub fn pod(name: &str) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some("default".into()),
            uid: Some(format!("uid-{name}")),
            ..Default::default()
        },
        spec: Some(PodSpec {
            containers: vec![Container { name: "app".into(), ..Default::default() }],
            ..Default::default()
        }),
        status: Some(PodStatus {
            conditions: Some(vec![PodCondition {
                type_: "PodScheduled".into(),
                status: "False".into(),
                reason: Some("Unschedulable".into()),
                ..Default::default()
            }]),
            ..Default::default()
        }),
    }
}

pub fn with_requests(mut p: Pod, cpu: Option<&str>, memory: Option<&str>) -> Pod {
    let mut req = BTreeMap::new();
    if let Some(c) = cpu {
        req.insert("cpu".to_string(), Quantity(c.into()));
    }
    if let Some(m) = memory {
        req.insert("memory".to_string(), Quantity(m.into()));
    }
    p.spec.as_mut().unwrap().containers[0].resources =
        Some(ResourceRequirements { requests: Some(req), ..Default::default() });
    p
}

pub fn with_resource(mut p: Pod, name: &str, q: &str) -> Pod {
    let c = &mut p.spec.as_mut().unwrap().containers[0];
    let res = c.resources.get_or_insert_with(Default::default);
    res.requests.get_or_insert_with(BTreeMap::new).insert(name.into(), Quantity(q.into()));
    p
}

pub fn with_labels(mut p: Pod, labels: &[(&str, &str)]) -> Pod {
    p.metadata.labels = Some(labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect());
    p
}

pub fn with_node_selector(mut p: Pod, sel: &[(&str, &str)]) -> Pod {
    p.spec.as_mut().unwrap().node_selector = Some(sel.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect());
    p
}

pub fn with_required_affinity(mut p: Pod, key: &str, op: &str, values: &[&str]) -> Pod {
    let term = NodeSelectorTerm {
        match_expressions: Some(vec![NodeSelectorRequirement {
            key: key.into(),
            operator: op.into(),
            values: Some(values.iter().map(|s| s.to_string()).collect()),
        }]),
        match_fields: None,
    };
    let spec = p.spec.as_mut().unwrap();
    let aff = spec.affinity.get_or_insert_with(Affinity::default);
    let na = aff.node_affinity.get_or_insert_with(NodeAffinity::default);
    na.required_during_scheduling_ignored_during_execution
        .get_or_insert_with(|| NodeSelector { node_selector_terms: vec![] })
        .node_selector_terms
        .push(term);
    p
}

pub fn with_tolerations(mut p: Pod, tolerations: Vec<Toleration>) -> Pod {
    p.spec.as_mut().unwrap().tolerations = Some(tolerations);
    p
}

fn term(labels: &[(&str, &str)], key: &str) -> PodAffinityTerm {
    PodAffinityTerm {
        label_selector: Some(LabelSelector {
            match_labels: Some(labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()),
            match_expressions: None,
        }),
        topology_key: key.into(),
        ..Default::default()
    }
}

pub fn with_pod_anti_affinity(mut p: Pod, labels: &[(&str, &str)], key: &str) -> Pod {
    let spec = p.spec.as_mut().unwrap();
    let aff = spec.affinity.get_or_insert_with(Affinity::default);
    aff.pod_anti_affinity
        .get_or_insert_with(PodAntiAffinity::default)
        .required_during_scheduling_ignored_during_execution
        .get_or_insert_with(Vec::new)
        .push(term(labels, key));
    p
}

pub fn with_pod_affinity(mut p: Pod, labels: &[(&str, &str)], key: &str) -> Pod {
    let spec = p.spec.as_mut().unwrap();
    let aff = spec.affinity.get_or_insert_with(Affinity::default);
    aff.pod_affinity
        .get_or_insert_with(PodAffinity::default)
        .required_during_scheduling_ignored_during_execution
        .get_or_insert_with(Vec::new)
        .push(term(labels, key));
    p
}

pub fn with_spread(mut p: Pod, labels: &[(&str, &str)], key: &str, max_skew: i32, required: bool) -> Pod {
    let spec = p.spec.as_mut().unwrap();
    spec.topology_spread_constraints.get_or_insert_with(Vec::new).push(TopologySpreadConstraint {
        label_selector: Some(LabelSelector {
            match_labels: Some(labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()),
            match_expressions: None,
        }),
        max_skew,
        topology_key: key.into(),
        when_unsatisfiable: if required { "DoNotSchedule".into() } else { "ScheduleAnyway".into() },
        ..Default::default()
    });
    p
}

pub fn with_pvc(mut p: Pod, claim: &str) -> Pod {
    let spec = p.spec.as_mut().unwrap();
    spec.volumes.get_or_insert_with(Vec::new).push(k8s_openapi::api::core::v1::Volume {
        name: claim.into(),
        persistent_volume_claim: Some(k8s_openapi::api::core::v1::PersistentVolumeClaimVolumeSource {
            claim_name: claim.into(),
            read_only: None,
        }),
        ..Default::default()
    });
    p
}

pub fn taint(key: &str, value: Option<&str>, effect: &str) -> Taint {
    Taint { key: key.into(), value: value.map(Into::into), effect: effect.into(), time_added: None }
}

pub fn daemonset(name: &str, cpu: &str, tolerations: Option<Vec<Toleration>>) -> DaemonSet {
    DaemonSet {
        metadata: ObjectMeta { name: Some(name.into()), namespace: Some("kube-system".into()), ..Default::default() },
        spec: DaemonSetSpec {
            template: PodTemplateSpec {
                metadata: None,
                spec: Some(PodSpec {
                    containers: vec![Container {
                        name: "d".into(),
                        resources: Some(ResourceRequirements {
                            requests: Some([("cpu".to_string(), Quantity(cpu.into()))].into()),
                            ..Default::default()
                        }),
                        ..Default::default()
                    }],
                    tolerations,
                    ..Default::default()
                }),
            },
            ..Default::default()
        },
        status: None,
    }
}

/// A snapshot under construction: the objects a provisioning pass reads.
pub type World = Snapshot;

pub trait Provision {
    fn provision(&self, catalog: &Catalog) -> ProvisioningResult;
    fn provision_with(&self, catalog: &Catalog, options: SchedulerOptions) -> ProvisioningResult;
}

impl Provision for Snapshot {
    fn provision(&self, catalog: &Catalog) -> ProvisioningResult {
        self.provision_with(catalog, SchedulerOptions::default())
    }

    fn provision_with(&self, catalog: &Catalog, options: SchedulerOptions) -> ProvisioningResult {
        let types: Vec<Arc<InstanceType>> = catalog.instance_types.clone();
        let catalogs = self.nodepools.iter().map(|p| (p.name().to_string(), types.clone())).collect();
        provision(&self.view(), &catalogs, &catalog.label_policy, options)
    }
}

/// Instance-type names offered to each new NodeClaim.
pub fn claim_types(r: &ProvisioningResult) -> Vec<Vec<String>> {
    r.results.new_claims.iter().map(|c| c.instance_types.iter().map(|t| t.name.clone()).collect()).collect()
}

/// The cheapest option of each claim (what the fake cloud would launch).
pub fn launched(r: &ProvisioningResult) -> Vec<String> {
    r.results.new_claims.iter().map(|c| c.instance_types.first().map(|t| t.name.clone()).unwrap_or_default()).collect()
}

pub fn failure_text(r: &ProvisioningResult, pod: &str) -> Option<String> {
    r.results.failures.iter().find(|f| r.pods[f.pod].name == pod).map(|f| f.summary())
}

pub fn scheduled(r: &ProvisioningResult) -> usize {
    r.results.scheduled_pods()
}

/// One inline type (`small`: 2 vCPU, 4 GiB) on demand in z1 and z2, as the `catalog:` section of a scenario.
pub const SMALL_ON_DEMAND_TYPES: &str = r#"
catalog:
  source: inline
  instanceTypes:
    - name: small
      cpu: "2"
      memory: 4Gi
      pods: 10
      overhead: {cpu: 100m, memory: 100Mi}
      offerings:
        - {zone: z1, capacityType: on-demand, price: 0.05}
        - {zone: z2, capacityType: on-demand, price: 0.05}
"#;

/// A two-type inline catalogue (small: 2 vCPU, large: 8 vCPU; spot in z1, on-demand in z1 and z2) for scenario
/// tests, as the `catalog:` section of a scenario.
pub const SMALL_LARGE_TYPES: &str = r#"
catalog:
  source: inline
  instanceTypes:
    - name: small
      cpu: "2"
      memory: 4Gi
      pods: 10
      overhead: {cpu: 100m, memory: 100Mi}
      offerings:
        - {zone: z1, capacityType: spot, price: 0.02}
        - {zone: z1, capacityType: on-demand, price: 0.05}
        - {zone: z2, capacityType: on-demand, price: 0.05}
    - name: large
      cpu: "8"
      memory: 16Gi
      pods: 40
      overhead: {cpu: 100m, memory: 100Mi}
      offerings:
        - {zone: z1, capacityType: spot, price: 0.08}
        - {zone: z1, capacityType: on-demand, price: 0.2}
        - {zone: z2, capacityType: on-demand, price: 0.2}
"#;

/// A NodePool `default` and a Deployment `app` of two 500m/512Mi replicas, as the `objects:` section of a scenario.
pub const POOL_AND_APP: &str = r#"
objects:
  - apiVersion: karpenter.sh/v1
    kind: NodePool
    metadata: {name: default}
    spec:
      template:
        spec:
          nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
  - apiVersion: apps/v1
    kind: Deployment
    metadata: {name: app}
    spec:
      replicas: 2
      selector: {matchLabels: {app: app}}
      template:
        metadata: {labels: {app: app}}
        spec:
          containers: [{name: c, image: x, resources: {requests: {cpu: 500m, memory: 512Mi}}}]
"#;
