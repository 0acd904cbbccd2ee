//! A corpus in upstream's shapes: each file of `tests/corpus/` follows one of aws/karpenter-provider-aws's examples
//! (v1.14: `examples/v1/*.yaml`, `examples/workloads/*.yaml`), written in the project's own words, with a small
//! workload where the example has none and a general-purpose pool where it has only a workload. Each is planned by
//! `plan --file`'s passes over the embedded AWS catalog and checked for what upstream would do: every pod placed
//! (unless upstream leaves it pending), and the point the example makes.
//!
//! The same files are admitted by the strict stand-in API server against upstream's CRDs
//! (`api_server_strictness::upstream_examples_and_project_fixtures_are_admitted`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use karpenter_tui::controller::settings::FeatureGates;
use karpenter_tui::engine::catalog::aws::{
    INSTANCE_ACCELERATOR_MANUFACTURER, INSTANCE_ACCELERATOR_NAME, INSTANCE_CATEGORY, INSTANCE_CPU, INSTANCE_FAMILY,
    INSTANCE_GENERATION, INSTANCE_GPU_MANUFACTURER, INSTANCE_LOCAL_NVME, INSTANCE_MEMORY, RESOURCE_AMD_GPU,
    RESOURCE_NEURON, RESOURCE_NVIDIA_GPU, aws_catalog,
};
use karpenter_tui::engine::catalog::{Catalog, InstanceType};
use karpenter_tui::engine::labels;
use karpenter_tui::engine::manifests::ClusterObjects;
use karpenter_tui::engine::provisioning::ProvisioningResult;
use karpenter_tui::engine::scheduling::NewNodeClaim;
use karpenter_tui::shell::passes::{plan_with, pool_types};

const GIB: i64 = 1 << 30;

fn catalog() -> &'static Catalog {
    static CATALOG: OnceLock<Catalog> = OnceLock::new();
    CATALOG.get_or_init(|| aws_catalog("us-east-1", None, None, 0).expect("the embedded catalog"))
}

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus")
}

fn read(file: &str) -> (String, String) {
    let path = corpus_dir().join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    (text, path.display().to_string())
}

fn parse(text: &str, path: &str) -> ClusterObjects {
    ClusterObjects::parse(text, path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The corpus file, read and planned as `plan --file` plans it.
fn plan(file: &str) -> (ClusterObjects, ProvisioningResult) {
    let (text, path) = read(file);
    let m = parse(&text, &path);
    let r = plan_with(&m, catalog(), FeatureGates::default());
    (m, r)
}

/// Asserts nothing is pending and returns how many pods the new claims hold.
fn all_placed(file: &str, r: &ProvisioningResult) -> usize {
    assert!(r.pending_reasons().is_empty(), "{file}: pending: {:#?}", r.pending_reasons());
    assert!(r.results.existing.is_empty(), "{file}: no nodes exist, yet pods were placed on some");
    r.results.new_claims.iter().map(|c| c.pods.len()).sum()
}

/// Plans `file` and asserts upstream would place all of its `pods` pods on new claims.
fn plan_all(file: &str, pods: usize) -> (ClusterObjects, ProvisioningResult) {
    let (m, r) = plan(file);
    assert_eq!(all_placed(file, &r), pods, "{file}: placed pods");
    assert!(!r.results.new_claims.is_empty(), "{file}: no claims");
    (m, r)
}

fn values(t: &InstanceType, key: &str) -> Vec<String> {
    t.requirements.get(key).values
}

/// A single-valued numeric label of an instance type.
fn number(t: &InstanceType, key: &str) -> i64 {
    let v = values(t, key);
    assert_eq!(v.len(), 1, "{} {key}: {v:?}", t.name);
    v[0].parse().unwrap_or_else(|_| panic!("{} {key}: {v:?} is not a number", t.name))
}

fn claim_values(c: &NewNodeClaim, key: &str) -> Vec<String> {
    c.requirements.get(key).values
}

fn distinct(c: &NewNodeClaim, key: &str) -> BTreeSet<String> {
    c.instance_types.iter().flat_map(|t| values(t, key)).collect()
}

/// Names of the pods a claim holds.
fn pod_names<'a>(r: &'a ProvisioningResult, c: &NewNodeClaim) -> Vec<&'a str> {
    c.pods.iter().map(|&i| r.pods[i].name.as_str()).collect()
}

/// Every option of every claim satisfies `check`, which says what is wrong otherwise.
fn every_option(file: &str, r: &ProvisioningResult, check: impl Fn(&InstanceType) -> Option<String>) {
    for c in &r.results.new_claims {
        assert!(!c.instance_types.is_empty(), "{file}: a claim without options");
        for t in &c.instance_types {
            if let Some(why) = check(t) {
                panic!("{file}: claim of {} offers {}: {why}", c.nodepool, t.name);
            }
        }
    }
}

fn option_has(key: &'static str, want: &[&str]) -> impl Fn(&InstanceType) -> Option<String> {
    let want: Vec<String> = want.iter().map(|v| v.to_string()).collect();
    move |t| {
        let v = values(t, key);
        (v != want).then(|| format!("{key} is {v:?}, want {want:?}"))
    }
}

/// The zones the pool's instance types are offered in: the domains upstream's topology counts for a zone spread.
fn pool_zones(m: &ClusterObjects, pool: &str) -> BTreeSet<String> {
    pool_types(m, catalog(), FeatureGates::default())[pool].iter().flat_map(|t| values(t, labels::ZONE)).collect()
}

/// Pods per zone, with every zone of `universe` present (zero where none went).
fn pods_per_zone(file: &str, r: &ProvisioningResult, universe: &BTreeSet<String>) -> BTreeMap<String, usize> {
    let mut per: BTreeMap<String, usize> = universe.iter().map(|z| (z.clone(), 0)).collect();
    for c in &r.results.new_claims {
        let zones = claim_values(c, labels::ZONE);
        assert_eq!(zones.len(), 1, "{file}: a spread claim is pinned to one zone, got {zones:?}");
        *per.entry(zones[0].clone()).or_default() += c.pods.len();
    }
    per
}

fn skew(per: &BTreeMap<String, usize>) -> usize {
    per.values().max().unwrap() - per.values().min().unwrap()
}

// ---------------------------------------------------------------------------------------------------------------
// examples/v1

#[test]
fn general_purpose_places_on_on_demand_amd64_cmr_of_generation_3_and_up() {
    let f = "v1-general-purpose.yaml";
    let (_, r) = plan_all(f, 6);
    for c in &r.results.new_claims {
        assert_eq!(claim_values(c, labels::CAPACITY_TYPE), ["on-demand"], "{f}");
    }
    every_option(f, &r, option_has(labels::ARCH, &["amd64"]));
    every_option(f, &r, option_has(labels::OS, &["linux"]));
    every_option(f, &r, |t| {
        let cat = values(t, INSTANCE_CATEGORY);
        let generation = number(t, INSTANCE_GENERATION);
        (!["c", "m", "r"].contains(&cat[0].as_str()) || generation <= 2)
            .then(|| format!("category {cat:?} generation {generation}"))
    });
}

#[test]
fn spot_pool_launches_spot_only() {
    let f = "v1-spot.yaml";
    let (_, r) = plan_all(f, 8);
    for c in &r.results.new_claims {
        assert_eq!(claim_values(c, labels::CAPACITY_TYPE), ["spot"], "{f}");
        for t in &c.instance_types {
            assert!(
                t.offerings.iter().any(|o| o.available && o.capacity_type == "spot"),
                "{f}: {} has no spot offering",
                t.name
            );
        }
    }
}

/// Upstream subtracts, for each claim it creates, the largest capacity among the claim's options from what the
/// pool may still launch, and filters the next claim's options to what is left: the sum of every claim's largest
/// option stays within the limit, and the pods beyond it stay pending on the limit. Here the first claim may be
/// any type of at most 100 vCPUs, the largest being 96, so 4 are left: it takes the eleven 8-CPU pods a 96-vCPU
/// type holds, and no type of 4 vCPUs or fewer fits the twelfth.
#[test]
fn cpu_limit_of_100_caps_the_launch_and_leaves_the_rest_pending() {
    let f = "v1-100-cpu-limit.yaml";
    let (_, r) = plan(f);
    let claims = &r.results.new_claims;
    assert!(!claims.is_empty(), "{f}: the first claim fits within the limit");
    let worst: i64 = claims.iter().map(|c| c.instance_types.iter().map(|t| t.capacity.cpu).max().unwrap()).sum();
    assert!(worst <= 100_000, "{f}: the claims could launch {worst}m CPU, over the 100-CPU limit");
    let placed: usize = claims.iter().map(|c| c.pods.len()).sum();
    let pending = r.pending_reasons();
    assert_eq!(placed + pending.len(), 20, "{f}: every pod is placed or pending");
    assert_eq!(claims.len(), 1, "{f}: one claim, then the limit");
    assert_eq!(placed, 11, "{f}: eleven 8-CPU pods on a type of at most 96 vCPUs");
    for (pod, reasons) in &pending {
        assert!(
            reasons.iter().any(|(pool, why)| pool == "capped" && why.contains("limit")),
            "{f}: {pod:?} is pending for another reason than the limit: {reasons:?}"
        );
    }
}

#[test]
fn large_instances_keep_types_under_4_cpus_and_8_gib_out() {
    let f = "v1-large-instances.yaml";
    let (_, r) = plan_all(f, 3);
    every_option(f, &r, |t| {
        let (cpu, mem) = (number(t, INSTANCE_CPU), number(t, INSTANCE_MEMORY));
        (cpu <= 3 || mem <= 8191).then(|| format!("{cpu} vCPUs, {mem} MiB"))
    });
    every_option(f, &r, |t| (t.capacity.cpu < 4000).then(|| format!("capacity {}m CPU", t.capacity.cpu)));
}

#[test]
fn multiple_arch_pools_each_take_the_workload_of_their_architecture() {
    let f = "v1-multiple-arch.yaml";
    let (_, r) = plan_all(f, 6);
    let mut arches = BTreeSet::new();
    for c in &r.results.new_claims {
        let names = pod_names(&r, c);
        let (pool, arch) = if names.iter().all(|n| n.starts_with("legacy-api")) {
            ("x86", "amd64")
        } else if names.iter().all(|n| n.starts_with("arm-api")) {
            ("graviton", "arm64")
        } else {
            panic!("{f}: one claim holds both workloads: {names:?}")
        };
        assert_eq!(c.nodepool, pool, "{f}: {names:?}");
        arches.insert(arch);
        for t in &c.instance_types {
            assert_eq!(values(t, labels::ARCH), [arch], "{f}: {} in a claim for {names:?}", t.name);
            // AL2023 has no a1 AMI: upstream drops a1 from an AL2023 class's types.
            assert!(!t.name.starts_with("a1."), "{f}: {} under AL2023", t.name);
        }
    }
    assert_eq!(arches, BTreeSet::from(["amd64", "arm64"]), "{f}: both architectures launched");
}

/// Only the AMI family's ephemeral device (AL2023: /dev/xvda) is ephemeral storage; the data volumes are not.
#[test]
fn multiple_ebs_counts_only_the_root_volume_as_ephemeral_storage() {
    let f = "v1-multiple-ebs.yaml";
    let (_, r) = plan_all(f, 4);
    every_option(f, &r, |t| {
        (t.capacity.ephemeral_storage != 20 * GIB)
            .then(|| format!("ephemeral-storage {}", t.capacity.ephemeral_storage))
    });
    // 20Gi less 1Gi kube-reserved and the 10% nodefs eviction threshold holds two 6Gi pods, not three.
    for c in &r.results.new_claims {
        assert!(c.pods.len() <= 2, "{f}: {} pods of 6Gi on a 20Gi root", c.pods.len());
    }
    assert_eq!(r.results.new_claims.len(), 2, "{f}");
}

/// RAID0 makes the instance store the ephemeral storage: its size in GB (the label, decimal) is the capacity.
#[test]
fn instance_store_raid0_is_the_ephemeral_storage() {
    let f = "v1-instance-store-ephemeral-storage.yaml";
    let (_, r) = plan_all(f, 3);
    every_option(f, &r, |t| {
        let gb = number(t, INSTANCE_LOCAL_NVME);
        let want = gb * 1_000_000_000;
        (gb <= 300 || t.capacity.ephemeral_storage != want)
            .then(|| format!("{gb} GB of NVMe, ephemeral-storage {} (want {want})", t.capacity.ephemeral_storage))
    });
}

#[test]
fn node_ttls_set_expire_after_on_every_claim() {
    let f = "v1-node-ttls.yaml";
    let (_, r) = plan_all(f, 4);
    for c in &r.results.new_claims {
        assert_eq!(c.expire_after, "168h", "{f}");
    }
}

#[test]
fn max_node_lifetime_sets_expiry_and_termination_grace_on_every_claim() {
    let f = "v1-max-node-lifetime.yaml";
    let (_, r) = plan_all(f, 4);
    for c in &r.results.new_claims {
        assert_eq!(c.expire_after, "168h", "{f}");
        assert_eq!(c.termination_grace_period.as_deref(), Some("24h"), "{f}");
    }
}

fn assert_min_values(f: &str, r: &ProvisioningResult, mins: &[(&str, usize)]) {
    for c in &r.results.new_claims {
        assert!(!c.min_values_relaxed, "{f}: minValues relaxed (the default policy is Strict)");
        assert_eq!(claim_values(c, labels::CAPACITY_TYPE), ["spot"], "{f}");
        for &(key, min) in mins {
            let seen = if key == labels::INSTANCE_TYPE {
                c.instance_types.iter().map(|t| t.name.clone()).collect()
            } else {
                distinct(c, key)
            };
            assert!(seen.len() >= min, "{f}: {key} spans {seen:?}, fewer than minValues {min}");
        }
    }
}

#[test]
fn min_values_family_keeps_five_families_in_each_claim() {
    let f = "v1-min-values-family.yaml";
    let (_, r) = plan_all(f, 6);
    assert_min_values(f, &r, &[(INSTANCE_FAMILY, 5)]);
}

#[test]
fn min_values_on_several_keys_all_hold() {
    let f = "v1-min-values-multiple-keys.yaml";
    let (_, r) = plan_all(f, 6);
    assert_min_values(f, &r, &[(INSTANCE_CATEGORY, 2), (INSTANCE_FAMILY, 5), (labels::INSTANCE_TYPE, 2)]);
}

/// Bottlerocket's ephemeral device is its data volume, /dev/xvdb (20Gi here), not the 4Gi OS volume.
#[test]
fn bottlerocket_uses_its_data_volume_for_ephemeral_storage() {
    let f = "v1-bottlerocket.yaml";
    let (_, r) = plan_all(f, 4);
    every_option(f, &r, option_has(labels::OS, &["linux"]));
    every_option(f, &r, |t| {
        (t.capacity.ephemeral_storage != 20 * GIB)
            .then(|| format!("ephemeral-storage {}", t.capacity.ephemeral_storage))
    });
}

#[test]
fn bottlerocket_custom_userdata_plans_linux_nodes() {
    let f = "v1-br-custom-userdata.yaml";
    let (_, r) = plan_all(f, 3);
    every_option(f, &r, option_has(labels::OS, &["linux"]));
    every_option(f, &r, option_has(labels::ARCH, &["amd64"]));
}

/// The class's userData is merged into what the node boots with; it changes nothing in what is launched, so the
/// plan is the default class's.
#[test]
fn al2023_custom_userdata_plans_as_the_default_class() {
    let f = "v1-al2023-custom-userdata.yaml";
    let (text, path) = read(f);
    let (_, r) = plan_all(f, 3);
    every_option(f, &r, option_has(labels::OS, &["linux"]));
    let start = text.find("  userData: |").expect("the userData");
    let end = start + text[start..].find("\n---").expect("the end of the class");
    let plain = format!("{}{}", &text[..start], &text[end..]);
    let without = plan_with(&parse(&plain, &path), catalog(), FeatureGates::default());
    assert_eq!(summary(&r), summary(&without), "{f}: userData changed the plan");
}

#[test]
fn al2_custom_ami_plans_linux_amd64_nodes() {
    let f = "v1-al2-custom-ami.yaml";
    let (_, r) = plan_all(f, 3);
    every_option(f, &r, option_has(labels::OS, &["linux"]));
    every_option(f, &r, option_has(labels::ARCH, &["amd64"]));
}

/// A Custom family has no default block devices: upstream gives its nodes the default 20Gi of ephemeral storage.
#[test]
fn custom_family_gets_the_default_ephemeral_storage() {
    let f = "v1-custom-family.yaml";
    let (_, r) = plan_all(f, 3);
    every_option(f, &r, option_has(labels::OS, &["linux"]));
    every_option(f, &r, |t| {
        (t.capacity.ephemeral_storage != 20 * GIB)
            .then(|| format!("ephemeral-storage {}", t.capacity.ephemeral_storage))
    });
}

/// `amiFamily: Custom` wins over the alias's family (upstream's `AMIFamily()`), so this is a Custom class that
/// happens to run Bottlerocket images: default 20Gi ephemeral storage, as for any Custom class.
#[test]
fn custom_family_with_a_bottlerocket_alias_plans_as_custom() {
    let f = "v1-custom-family-with-alias.yaml";
    let (_, r) = plan_all(f, 3);
    every_option(f, &r, option_has(labels::OS, &["linux"]));
    every_option(f, &r, |t| {
        (t.capacity.ephemeral_storage != 20 * GIB)
            .then(|| format!("ephemeral-storage {}", t.capacity.ephemeral_storage))
    });
}

fn assert_windows(f: &str, build: &str) {
    let (_, r) = plan_all(f, 3);
    every_option(f, &r, option_has(labels::OS, &["windows"]));
    every_option(f, &r, option_has(labels::WINDOWS_BUILD, &[build]));
    every_option(f, &r, option_has(labels::ARCH, &["amd64"]));
    for c in &r.results.new_claims {
        assert_eq!(claim_values(c, labels::OS), ["windows"], "{f}");
    }
}

#[test]
fn windows_2019_plans_build_10_0_17763() {
    assert_windows("v1-windows-2019.yaml", "10.0.17763");
}

#[test]
fn windows_2022_plans_build_10_0_20348() {
    assert_windows("v1-windows-2022.yaml", "10.0.20348");
}

#[test]
fn windows_2025_plans_build_10_0_26100() {
    assert_windows("v1-windows-2025.yaml", "10.0.26100");
}

#[test]
fn windows_custom_userdata_plans_build_10_0_20348() {
    assert_windows("v1-windows-custom-userdata.yaml", "10.0.20348");
}

/// Security groups do not change what is planned; the pool allows spot, which upstream prefers when offered.
#[test]
fn security_groups_by_name_and_tags_plan_with_spot_allowed() {
    let f = "v1-security-group-with-vpc.yaml";
    let (_, r) = plan_all(f, 5);
    for c in &r.results.new_claims {
        assert!(claim_values(c, labels::CAPACITY_TYPE).iter().any(|v| v == "spot"), "{f}: spot not allowed");
    }
    every_option(f, &r, option_has(labels::ARCH, &["amd64"]));
}

#[test]
fn placement_group_pool_pins_claims_to_its_zone() {
    let f = "v1-placement-group.yaml";
    let (_, r) = plan_all(f, 4);
    for c in &r.results.new_claims {
        assert_eq!(claim_values(c, labels::ZONE), ["us-east-1a"], "{f}");
    }
}

/// What a plan decided, to compare two plans: per claim its pool, pods and options.
fn summary(r: &ProvisioningResult) -> Vec<(String, usize, Vec<String>)> {
    r.results
        .new_claims
        .iter()
        .map(|c| (c.nodepool.clone(), c.pods.len(), c.instance_types.iter().map(|t| t.name.clone()).collect()))
        .collect()
}

/// No Karpenter release reads a ConfigMap of spot price caps: the plan is the same without it.
#[test]
fn a_configmap_of_spot_price_caps_changes_nothing() {
    let f = "v1-max-spot-prices.yaml";
    let (text, path) = read(f);
    let (_, r) = plan_all(f, 4);
    for c in &r.results.new_claims {
        assert_eq!(claim_values(c, labels::CAPACITY_TYPE), ["spot"], "{f}");
    }
    let start = text.find("apiVersion: v1\nkind: ConfigMap").expect("the ConfigMap");
    let end = start + text[start..].find("\n---\n").expect("the ConfigMap's end") + 5;
    let plain = format!("{}{}", &text[..start], &text[end..]);
    assert!(!plain.contains("kind: ConfigMap"));
    let without = plan_with(&parse(&plain, &path), catalog(), FeatureGates::default());
    assert_eq!(summary(&r), summary(&without), "{f}: the ConfigMap changed the plan");
}

// ---------------------------------------------------------------------------------------------------------------
// examples/workloads

#[test]
fn inflate_without_replicas_is_one_pod_on_one_claim() {
    let f = "workloads-inflate.yaml";
    let (_, r) = plan_all(f, 1);
    assert_eq!(r.results.new_claims.len(), 1, "{f}");
}

#[test]
fn arm64_selector_gets_arm64_types_only() {
    let f = "workloads-arm64.yaml";
    let (_, r) = plan_all(f, 1);
    every_option(f, &r, option_has(labels::ARCH, &["arm64"]));
}

/// The heaviest preferred term (arm64, weight 50) is held as required first; arm64 types exist, so it holds.
#[test]
fn prefer_arm_launches_arm64() {
    let f = "workloads-prefer-arm.yaml";
    let (_, r) = plan_all(f, 3);
    every_option(f, &r, option_has(labels::ARCH, &["arm64"]));
}

#[test]
fn spot_selector_gets_spot_claims() {
    let f = "workloads-spot.yaml";
    let (_, r) = plan_all(f, 4);
    for c in &r.results.new_claims {
        assert_eq!(claim_values(c, labels::CAPACITY_TYPE), ["spot"], "{f}");
    }
}

#[test]
fn zone_spread_puts_pods_in_several_zones_evenly() {
    let f = "workloads-spread-zone.yaml";
    let (m, r) = plan_all(f, 6);
    let per = pods_per_zone(f, &r, &pool_zones(&m, "general"));
    assert!(per.values().filter(|&&n| n > 0).count() >= 2, "{f}: {per:?}");
    assert!(skew(&per) <= 1, "{f}: maxSkew 1 broken: {per:?}");
}

/// Upstream counts a hostname domain's minimum as zero (a new node can always be made), so maxSkew 2 allows two
/// pods on each new node.
#[test]
fn hostname_spread_puts_at_most_two_pods_on_a_node() {
    let f = "workloads-spread-hostname.yaml";
    let (_, r) = plan_all(f, 10);
    for c in &r.results.new_claims {
        assert!(c.pods.len() <= 2, "{f}: {} pods on one node", c.pods.len());
    }
    assert_eq!(r.results.new_claims.len(), 5, "{f}: ten pods two by two");
}

#[test]
fn hostname_and_zone_spreads_both_hold() {
    let f = "workloads-spread-hostname-zone.yaml";
    let (m, r) = plan_all(f, 20);
    for c in &r.results.new_claims {
        assert!(c.pods.len() <= 2, "{f}: {} pods on one node", c.pods.len());
    }
    assert_eq!(r.results.new_claims.len(), 10, "{f}: twenty pods two by two");
    let per = pods_per_zone(f, &r, &pool_zones(&m, "general"));
    assert!(skew(&per) <= 5, "{f}: zone maxSkew 5 broken: {per:?}");
}

fn assert_accelerator(f: &str, resource: &str, key: &'static str, want: &[&str]) -> ProvisioningResult {
    let (_, r) = plan_all(f, 2);
    every_option(f, &r, option_has(key, want));
    every_option(f, &r, |t| (t.capacity.get(resource) < 1).then(|| format!("no {resource}")));
    r
}

#[test]
fn nvidia_gpu_limit_gets_nvidia_types() {
    let _ =
        assert_accelerator("workloads-gpu-nvidia.yaml", RESOURCE_NVIDIA_GPU, INSTANCE_GPU_MANUFACTURER, &["nvidia"]);
}

/// Upstream places these on g4ad (AMD Radeon Pro V520), offered in us-east-1.
#[test]
#[ignore = "the embedded catalog has no g4ad types (its DescribeInstanceTypes snapshot omits them), so no type offers amd.com/gpu and the pods stay pending"]
fn amd_gpu_limit_gets_amd_types() {
    let _ = assert_accelerator("workloads-gpu-amd.yaml", RESOURCE_AMD_GPU, INSTANCE_GPU_MANUFACTURER, &["amd"]);
}

#[test]
fn neuron_limit_gets_inferentia_or_trainium_types() {
    let f = "workloads-neuron.yaml";
    let r = assert_accelerator(f, RESOURCE_NEURON, INSTANCE_ACCELERATOR_MANUFACTURER, &["aws"]);
    every_option(f, &r, |t| {
        let name = values(t, INSTANCE_ACCELERATOR_NAME);
        (!name.iter().all(|n| n.starts_with("inferentia") || n.starts_with("trainium")))
            .then(|| format!("accelerator {name:?}"))
    });
}

/// The AWS provider advertises no MIG resources (upstream's maintainers: not without a NodeOverlay), so a pod
/// asking for a MIG slice stays pending.
#[test]
fn mig_slice_stays_pending_without_an_overlay() {
    let f = "workloads-mig-nvidia.yaml";
    let (_, r) = plan(f);
    assert!(r.results.new_claims.is_empty(), "{f}: launched {:?}", summary(&r));
    let pending = r.pending_reasons();
    assert_eq!(pending.len(), 2, "{f}: {pending:#?}");
    for (pod, reasons) in &pending {
        assert!(
            reasons.iter().any(|(_, why)| why.contains("nvidia.com/mig-1g.5gb")),
            "{f}: {pod:?} pending for another reason: {reasons:?}"
        );
    }
}

#[test]
fn a_pdb_does_not_hold_back_provisioning() {
    let f = "workloads-disruption-budget.yaml";
    let (m, r) = plan_all(f, 10);
    assert_eq!(m.pdbs.len(), 1, "{f}: the PodDisruptionBudget is read");
    every_option(f, &r, option_has(labels::ARCH, &["amd64"]));
}

// ---------------------------------------------------------------------------------------------------------------

/// Every corpus file has its test above (a file added without one would go unchecked).
#[test]
fn every_corpus_file_is_tested() {
    let source = include_str!("upstream_corpus.rs");
    let mut files: Vec<String> = std::fs::read_dir(corpus_dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".yaml"))
        .collect();
    files.sort();
    assert!(files.len() >= 30, "{files:?}");
    for file in files {
        assert!(source.contains(&format!("\"{file}\"")), "tests/corpus/{file} has no test in upstream_corpus.rs");
        let (text, _) = read(&file);
        assert!(
            text.starts_with("# Follows the shape of upstream examples/"),
            "tests/corpus/{file}: the first line names the upstream example it follows"
        );
    }
}
