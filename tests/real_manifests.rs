//! ClusterObjects shaped as people write them for EKS (the patterns of upstream's examples and the karpenter-blueprints,
//! written here in the project's own words), planned by `plan`'s passes over the embedded AWS catalog as upstream
//! would plan them: nothing pending that upstream would place.

use karpenter_tui::controller::settings::FeatureGates;
use karpenter_tui::engine::catalog::Catalog;
use karpenter_tui::engine::catalog::aws::{INSTANCE_EBS_BANDWIDTH, aws_catalog};
use karpenter_tui::engine::labels;
use karpenter_tui::engine::manifests::ClusterObjects;
use karpenter_tui::engine::provisioning::ProvisioningResult;
use karpenter_tui::shell::passes::plan_with;

const NODECLASS: &str = r#"
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata:
  name: default
spec:
  amiSelectorTerms:
    - alias: al2023@latest
  role: KarpenterNodeRole-my-cluster
  subnetSelectorTerms:
    - tags:
        karpenter.sh/discovery: my-cluster
  securityGroupSelectorTerms:
    - tags:
        karpenter.sh/discovery: my-cluster
"#;

/// [`NODECLASS`] under another name and AMI alias, as a further document.
fn nodeclass(name: &str, alias: &str) -> String {
    format!("\n---{}", NODECLASS.replace("name: default", &format!("name: {name}")).replace("al2023@latest", alias))
}

fn nodepool(name: &str, extra_requirements: &str) -> String {
    nodepool_of(name, "default", extra_requirements)
}

/// A NodePool of the EC2NodeClass `class`: amd64 on-demand c/m/r/g, plus `extra_requirements`.
fn nodepool_of(name: &str, class: &str, extra_requirements: &str) -> String {
    format!(
        r#"
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: {name}
spec:
  template:
    spec:
      nodeClassRef:
        group: karpenter.k8s.aws
        kind: EC2NodeClass
        name: {class}
      requirements:
        - key: kubernetes.io/arch
          operator: In
          values: ["amd64"]
        - key: karpenter.sh/capacity-type
          operator: In
          values: ["on-demand"]
        - key: karpenter.k8s.aws/instance-category
          operator: In
          values: ["c", "m", "r", "g"]
{extra_requirements}
  limits:
    cpu: 1000
  disruption:
    consolidationPolicy: WhenEmptyOrUnderutilized
    consolidateAfter: 1m
"#
    )
}

fn catalog() -> Catalog {
    aws_catalog("us-east-1", None, None, 0).expect("the embedded catalog")
}

fn plan(text: &str, gates: FeatureGates) -> ProvisioningResult {
    let m = ClusterObjects::parse(text, "app.yaml").unwrap_or_else(|e| panic!("{e}"));
    plan_with(&m, &catalog(), gates)
}

fn all_placed(r: &ProvisioningResult) -> usize {
    assert!(r.pending_reasons().is_empty(), "pending: {:?}", r.pending_reasons());
    r.results.new_claims.iter().map(|c| c.pods.len()).sum()
}

/// The stateful blueprint's shape: a gp3 StorageClass bound at first consumer and allowed in one zone by the EBS
/// CSI driver's own topology key, and a pod with a claim of it. Upstream normalizes the key to
/// `topology.kubernetes.io/zone`, so the node is launched in that zone.
#[test]
fn an_ebs_csi_storage_class_zone_pins_the_node_to_that_zone() {
    let text = format!(
        r#"{NODECLASS}{}
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: ebs-gp3
provisioner: ebs.csi.aws.com
volumeBindingMode: WaitForFirstConsumer
parameters:
  type: gp3
allowedTopologies:
  - matchLabelExpressions:
      - key: topology.ebs.csi.aws.com/zone
        values: ["us-east-1b"]
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: data
  namespace: default
spec:
  accessModes: ["ReadWriteOnce"]
  storageClassName: ebs-gp3
  resources:
    requests:
      storage: 4Gi
---
apiVersion: v1
kind: Pod
metadata:
  name: db-0
  namespace: default
spec:
  containers:
    - name: db
      image: public.ecr.aws/docker/library/postgres:16
      resources:
        requests: {{cpu: "1", memory: 2Gi}}
      volumeMounts:
        - name: data
          mountPath: /var/lib/postgresql/data
  volumes:
    - name: data
      persistentVolumeClaim:
        claimName: data
"#,
        nodepool("default", "")
    );
    let r = plan(&text, FeatureGates::default());
    assert_eq!(all_placed(&r), 1);
    let claim = &r.results.new_claims[0];
    let zones = claim.requirements.get(labels::ZONE);
    assert_eq!(zones.values, ["us-east-1b"], "the claim is pinned to the volume's zone: {zones:?}");
}

/// Two blueprints select instance types by EBS bandwidth (`instance-ebs-bandwidth Gt 8000`).
#[test]
fn a_nodepool_selecting_fast_ebs_gets_types_with_that_bandwidth() {
    let text = format!(
        r#"{NODECLASS}{}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: io-heavy
  namespace: default
spec:
  replicas: 3
  selector:
    matchLabels: {{app: io-heavy}}
  template:
    metadata:
      labels: {{app: io-heavy}}
    spec:
      containers:
        - name: app
          image: public.ecr.aws/eks-distro/kubernetes/pause:3.7
          resources:
            requests: {{cpu: "2", memory: 4Gi}}
"#,
        nodepool(
            "fast-ebs",
            "        - key: karpenter.k8s.aws/instance-ebs-bandwidth\n          operator: Gt\n          values: [\"8000\"]"
        )
    );
    let r = plan(&text, FeatureGates::default());
    assert_eq!(all_placed(&r), 3);
    for c in &r.results.new_claims {
        for t in &c.instance_types {
            let bw = t.requirements.get(INSTANCE_EBS_BANDWIDTH);
            let mbps: i64 = bw.values.first().and_then(|v| v.parse().ok()).unwrap_or(0);
            assert!(mbps > 8000, "{} has {mbps} Mbps of EBS bandwidth", t.name);
        }
    }
}

/// The GPU time-slicing blueprint: a NodeOverlay says each GPU of a family is shared four ways, so pods asking for
/// one `nvidia.com/gpu` each pack four to a GPU.
#[test]
fn a_time_slicing_overlay_packs_gpu_pods_onto_shared_gpus() {
    let text = format!(
        r#"{NODECLASS}{}
---
apiVersion: karpenter.sh/v1alpha1
kind: NodeOverlay
metadata:
  name: gpu-time-slicing
spec:
  requirements:
    - key: karpenter.k8s.aws/instance-family
      operator: In
      values: ["g5"]
  capacity:
    nvidia.com/gpu: "4"
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: inference
  namespace: default
spec:
  replicas: 4
  selector:
    matchLabels: {{app: inference}}
  template:
    metadata:
      labels: {{app: inference}}
    spec:
      tolerations:
        - key: nvidia.com/gpu
          operator: Exists
          effect: NoSchedule
      containers:
        - name: model
          image: nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda11.7.1
          resources:
            requests: {{cpu: 500m, memory: 1Gi}}
            limits:
              nvidia.com/gpu: 1
"#,
        nodepool(
            "gpu",
            "        - key: karpenter.k8s.aws/instance-family\n          operator: In\n          values: [\"g5\"]\n        - key: node.kubernetes.io/instance-type\n          operator: In\n          values: [\"g5.xlarge\"]"
        )
    );
    let gates = FeatureGates::default().with_flag("NodeOverlay=true").expect("gate");
    let r = plan(&text, gates);
    assert_eq!(all_placed(&r), 4);
    assert_eq!(r.results.new_claims.len(), 1, "one g5.xlarge (1 GPU, shared 4 ways) holds all four pods");
    // Without the overlay one physical GPU holds one pod.
    let r = plan(&text, FeatureGates::default());
    assert_eq!(all_placed(&r), 4);
    assert_eq!(r.results.new_claims.len(), 4);
}

/// The Windows shape: a class whose AMI alias is a Windows Server release, a NodePool that asks for the `windows`
/// OS, and a pod that selects it. Upstream computes instance types per EC2NodeClass, so this class's types run
/// Windows (amd64 only) with its build label, and the pods land on them beside a Linux pool of the default class.
/// (As in any mixed cluster, a pod that selects no OS may land on either; the Linux app here selects `linux`.)
#[test]
fn a_windows_nodeclass_offers_windows_nodes_to_its_pools() {
    let windows_class = nodeclass("windows2022", "windows2022@latest");
    let windows_pool = nodepool_of(
        "windows2022",
        "windows2022",
        "        - key: kubernetes.io/os\n          operator: In\n          values: [\"windows\"]",
    );
    let app = r#"
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: iis
  namespace: default
spec:
  replicas: 3
  selector:
    matchLabels: {app: iis}
  template:
    metadata:
      labels: {app: iis}
    spec:
      nodeSelector:
        kubernetes.io/os: windows
      containers:
        - name: iis
          image: mcr.microsoft.com/windows/servercore/iis:windowsservercore-ltsc2022
          resources:
            requests: {cpu: "1", memory: 2Gi}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: default
spec:
  replicas: 2
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      nodeSelector:
        kubernetes.io/os: linux
      containers:
        - name: nginx
          image: nginx
          resources:
            requests: {cpu: "1", memory: 1Gi}
"#;
    let text = format!("{NODECLASS}{}{windows_class}{windows_pool}{app}", nodepool("linux", ""));
    let r = plan(&text, FeatureGates::default());
    assert_eq!(all_placed(&r), 5);
    let windows: Vec<_> = r.results.new_claims.iter().filter(|c| c.nodepool == "windows2022").collect();
    assert!(!windows.is_empty(), "the Windows pods got a Windows NodeClaim");
    for c in &windows {
        assert_eq!(c.requirements.get(labels::OS).values, ["windows"]);
        for t in &c.instance_types {
            assert_eq!(t.requirements.get(labels::OS).values, ["windows"], "{}", t.name);
            assert_eq!(t.requirements.get(labels::WINDOWS_BUILD).values, ["10.0.20348"], "{}", t.name);
            assert_eq!(t.requirements.get(labels::ARCH).values, ["amd64"], "{}", t.name);
        }
    }
    let pods_on = |pool: &str| -> usize {
        r.results.new_claims.iter().filter(|c| c.nodepool == pool).map(|c| c.pods.len()).sum()
    };
    assert_eq!(pods_on("windows2022"), 3);
    assert_eq!(pods_on("linux"), 2, "Linux pods stay off the Windows nodes");
}
