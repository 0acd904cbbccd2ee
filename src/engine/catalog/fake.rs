//! The upstream fake cloud provider's catalogue (engine.md §9.1). Acceptance tests and the scheduling benchmark are
//! written against it, so its shapes, prices and labels follow upstream's test helpers exactly.

use std::collections::BTreeSet;
use std::sync::Arc;

use super::{Catalog, InstanceType, Offering, PriceSource};
use crate::engine::labels::{self, LabelPolicy};
use crate::engine::requirements::{Requirement, Requirements};
use crate::engine::resources::{self, Resources};

/// `size`: `large` for types with more than 4 CPU and 8Gi, else `small`.
pub const LABEL_SIZE: &str = "size";
/// `special`: `optional` on large types, otherwise absent (upstream's "exotic" label).
pub const LABEL_SPECIAL: &str = "special";
/// `integer`: the CPU count, for Gt/Lt tests.
pub const LABEL_INTEGER: &str = "integer";
pub const RESOURCE_GPU_VENDOR_A: &str = "fake.com/vendor-a";
pub const RESOURCE_GPU_VENDOR_B: &str = "fake.com/vendor-b";
pub const REGION: &str = "fake-region";

const GIB: i64 = 1 << 30;
const MIB: i64 = 1 << 20;

/// What a test may set on a fake type; unset fields take upstream's defaults.
#[derive(Debug, Clone, Default)]
pub struct FakeInstanceTypeOptions {
    pub name: String,
    /// CPU, memory and pods default to 4, 4Gi and 5 when zero; extended resources are kept as given.
    pub resources: Resources,
    /// Default amd64.
    pub architecture: Option<String>,
    /// Default {linux, windows, darwin}.
    pub operating_systems: Vec<String>,
    /// Default: spot in test-zone-1/2 and on-demand in test-zone-1/2/3, all available, at [`price_from_resources`].
    pub offerings: Vec<Offering>,
}

/// `0.1 × vCPU + 0.1 × memory in GB` plus 1.0 for each fake GPU resource present (upstream adds 1.0 per GPU
/// resource kind, whatever the count).
pub fn price_from_resources(r: &Resources) -> f64 {
    let mut price = 0.1 * r.cpu as f64 / 1000.0 + 0.1 * r.memory as f64 / 1e9;
    for gpu in [RESOURCE_GPU_VENDOR_A, RESOURCE_GPU_VENDOR_B] {
        if r.extended.iter().any(|(k, _)| k == gpu) {
            price += 1.0;
        }
    }
    price
}

fn offering(zone: &str, capacity_type: &str, price: f64) -> Offering {
    Offering {
        zone: zone.to_string(),
        capacity_type: capacity_type.to_string(),
        price,
        available: true,
        reservation: None,
    }
}

/// The default five offerings at `price`.
pub fn default_offerings(price: f64) -> Vec<Offering> {
    vec![
        offering("test-zone-1", labels::CAPACITY_SPOT, price),
        offering("test-zone-2", labels::CAPACITY_SPOT, price),
        offering("test-zone-1", labels::CAPACITY_ON_DEMAND, price),
        offering("test-zone-2", labels::CAPACITY_ON_DEMAND, price),
        offering("test-zone-3", labels::CAPACITY_ON_DEMAND, price),
    ]
}

/// Upstream `fake.NewInstanceType`.
pub fn fake_instance_type(opts: FakeInstanceTypeOptions) -> InstanceType {
    let mut capacity = opts.resources;
    if capacity.cpu == 0 {
        capacity.cpu = 4000;
    }
    if capacity.memory == 0 {
        capacity.memory = 4 * GIB;
    }
    if capacity.pods == 0 {
        capacity.pods = 5;
    }
    let offerings =
        if opts.offerings.is_empty() { default_offerings(price_from_resources(&capacity)) } else { opts.offerings };
    let arch = opts.architecture.unwrap_or_else(|| "amd64".to_string());
    let oses: Vec<String> = if opts.operating_systems.is_empty() {
        vec!["linux".into(), "windows".into(), "darwin".into()]
    } else {
        opts.operating_systems
    };
    // Zones and capacity types come from the available offerings, as upstream.
    let available = || offerings.iter().filter(|o| o.available);
    let zones: BTreeSet<&str> = available().map(|o| o.zone.as_str()).collect();
    let capacity_types: BTreeSet<&str> = available().map(|o| o.capacity_type.as_str()).collect();
    let mut r = Requirements::new();
    r.add(labels::INSTANCE_TYPE, Requirement::in_values([opts.name.clone()]));
    r.add(labels::ARCH, Requirement::in_values([arch]));
    r.add(labels::OS, Requirement::in_values(oses));
    r.add(labels::ZONE, Requirement::in_values(zones));
    r.add(labels::CAPACITY_TYPE, Requirement::in_values(capacity_types));
    // Whole CPUs, rounded up like `Quantity.Value()`.
    r.add(LABEL_INTEGER, Requirement::in_values([((capacity.cpu + 999) / 1000).to_string()]));
    if capacity.cpu > 4000 && capacity.memory > 8 * GIB {
        r.add(LABEL_SIZE, Requirement::in_values(["large"]));
        r.add(LABEL_SPECIAL, Requirement::in_values(["optional"]));
    } else {
        r.add(LABEL_SIZE, Requirement::in_values(["small"]));
        r.add(LABEL_SPECIAL, Requirement::does_not_exist());
    }
    InstanceType {
        name: opts.name,
        requirements: r,
        capacity,
        overhead: Resources::new(100, 10 * MIB, 0),
        offerings,
        volume_limits: Default::default(),
    }
}

fn with_resources(name: &str, list: &[(&str, i64)]) -> InstanceType {
    let mut resources = Resources::default();
    for (k, v) in list {
        resources.set_value(k, *v);
    }
    fake_instance_type(FakeInstanceTypeOptions { name: name.to_string(), resources, ..Default::default() })
}

/// The fake provider's catalogue when a test sets none.
pub fn fake_default_instance_types() -> Vec<InstanceType> {
    vec![
        with_resources("default-instance-type", &[]),
        with_resources("small-instance-type", &[(resources::CPU, 2000), (resources::MEMORY, 2 * GIB)]),
        with_resources("gpu-vendor-instance-type", &[(RESOURCE_GPU_VENDOR_A, 2)]),
        with_resources("gpu-vendor-b-instance-type", &[(RESOURCE_GPU_VENDOR_B, 2)]),
        fake_instance_type(FakeInstanceTypeOptions {
            name: "arm-instance-type".into(),
            resources: Resources::new(16_000, 128 * GIB, 0),
            architecture: Some("arm64".into()),
            operating_systems: vec!["ios".into(), "linux".into(), "windows".into(), "darwin".into()],
            offerings: Vec::new(),
        }),
        with_resources("single-pod-instance-type", &[(resources::PODS, 1)]),
    ]
}

/// Upstream `fake.InstanceTypes(n)`: `fake-it-<i>` with i+1 vCPU, 2(i+1)Gi and 10(i+1) pods.
pub fn fake_instance_types(n: usize) -> Vec<InstanceType> {
    (0..n as i64)
        .map(|i| {
            let k = i + 1;
            fake_instance_type(FakeInstanceTypeOptions {
                name: format!("fake-it-{i}"),
                resources: Resources::new(k * 1000, 2 * k * GIB, 10 * k),
                ..Default::default()
            })
        })
        .collect()
}

/// Upstream `fake.InstanceTypesAssorted()`: CPU × memory × zone × capacity type × OS × arch, one offering each.
pub fn fake_instance_types_assorted() -> Vec<InstanceType> {
    let mut out = Vec::new();
    for cpu in [1i64, 2, 4, 8, 16, 32, 64] {
        for mem in [1i64, 2, 4, 8, 16, 32, 64, 128] {
            for zone in ["test-zone-1", "test-zone-2", "test-zone-3"] {
                for ct in [labels::CAPACITY_SPOT, labels::CAPACITY_ON_DEMAND] {
                    for os in ["linux", "windows"] {
                        for arch in ["amd64", "arm64"] {
                            let resources = Resources::new(cpu * 1000, mem * GIB, 0);
                            let price = price_from_resources(&resources);
                            out.push(fake_instance_type(FakeInstanceTypeOptions {
                                name: format!("{cpu}-cpu-{mem}-mem-{arch}-{os}-{zone}-{ct}"),
                                resources,
                                architecture: Some(arch.into()),
                                operating_systems: vec![os.into()],
                                offerings: vec![offering(zone, ct, price)],
                            }));
                        }
                    }
                }
            }
        }
    }
    out
}

/// Core labels plus `size`, `special` and `integer`, which the fake cloud resolves from its types.
pub fn fake_label_policy() -> LabelPolicy {
    let mut p = LabelPolicy::default();
    p.well_known.extend([LABEL_SIZE, LABEL_SPECIAL, LABEL_INTEGER].map(String::from));
    p
}

/// A fake-provider catalog of the given types.
pub fn fake_catalog_with(types: Vec<InstanceType>) -> Catalog {
    Catalog {
        region: REGION.to_string(),
        instance_types: types.into_iter().map(Arc::new).collect(),
        label_policy: fake_label_policy(),
        price_source: PriceSource::Simulated,
    }
}

/// The default fake catalogue.
pub fn fake_catalog() -> Catalog {
    fake_catalog_with(fake_default_instance_types())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn label(it: &InstanceType, key: &str) -> Option<String> {
        it.requirements.single_valued_labels().get(key).cloned()
    }

    #[test]
    fn default_catalogue() {
        let c = fake_catalog();
        let names: Vec<&str> = c.instance_types.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "default-instance-type",
                "small-instance-type",
                "gpu-vendor-instance-type",
                "gpu-vendor-b-instance-type",
                "arm-instance-type",
                "single-pod-instance-type"
            ]
        );
        let d = c.get("default-instance-type").unwrap();
        assert_eq!(d.capacity, Resources::new(4000, 4 * GIB, 5));
        assert_eq!(d.allocatable(), Resources::new(3900, 4 * GIB - 10 * MIB, 5));
        assert_eq!(d.offerings.len(), 5);
        // 0.1 × 4 + 0.1 × 4.294967296
        assert!((d.offerings[0].price - 0.8294967296).abs() < 1e-12);
        assert_eq!(label(d, LABEL_SIZE).as_deref(), Some("small"));
        assert_eq!(label(d, LABEL_INTEGER).as_deref(), Some("4"));
        assert!(d.requirements.get(LABEL_SPECIAL).is_empty());
        assert_eq!(d.requirements.get(labels::OS).values, ["darwin", "linux", "windows"]);
        assert_eq!(d.requirements.get(labels::ZONE).values, ["test-zone-1", "test-zone-2", "test-zone-3"]);

        let small = c.get("small-instance-type").unwrap();
        assert_eq!(small.capacity, Resources::new(2000, 2 * GIB, 5));
        assert!(small.offerings[0].price < d.offerings[0].price);

        let gpu = c.get("gpu-vendor-instance-type").unwrap();
        assert_eq!(gpu.capacity.get(RESOURCE_GPU_VENDOR_A), 2);
        assert!((gpu.offerings[0].price - (d.offerings[0].price + 1.0)).abs() < 1e-12);

        let arm = c.get("arm-instance-type").unwrap();
        assert_eq!(label(arm, labels::ARCH).as_deref(), Some("arm64"));
        assert!(arm.requirements.get(labels::OS).has("ios"));
        assert_eq!(label(arm, LABEL_SIZE).as_deref(), Some("large"));
        assert_eq!(label(arm, LABEL_SPECIAL).as_deref(), Some("optional"));
        assert_eq!(label(arm, LABEL_INTEGER).as_deref(), Some("16"));

        assert_eq!(c.get("single-pod-instance-type").unwrap().capacity.pods, 1);
    }

    #[test]
    fn spot_zones() {
        let d = fake_catalog().get("default-instance-type").unwrap().clone();
        let spot: Vec<&str> =
            d.offerings.iter().filter(|o| o.capacity_type == "spot").map(|o| o.zone.as_str()).collect();
        assert_eq!(spot, ["test-zone-1", "test-zone-2"]);
    }

    #[test]
    fn numbered_types() {
        let ts = fake_instance_types(3);
        assert_eq!(ts.len(), 3);
        assert_eq!(ts[2].name, "fake-it-2");
        assert_eq!(ts[2].capacity, Resources::new(3000, 6 * GIB, 30));
        assert_eq!(ts[2].offerings.len(), 5);
        assert!(ts[0].offerings[0].price < ts[1].offerings[0].price);
    }

    #[test]
    fn assorted_and_unavailable_offerings() {
        let a = fake_instance_types_assorted();
        assert_eq!(a.len(), 7 * 8 * 3 * 2 * 2 * 2);
        assert_eq!(a[0].offerings.len(), 1);
        let mut offs = default_offerings(1.0);
        offs[0].available = false;
        offs[1].available = false;
        let it =
            fake_instance_type(FakeInstanceTypeOptions { name: "x".into(), offerings: offs, ..Default::default() });
        // Only on-demand remains available, so spot is not offered.
        assert_eq!(it.requirements.get(labels::CAPACITY_TYPE).values, ["on-demand"]);
    }

    #[test]
    fn policy() {
        let p = fake_label_policy();
        assert!(p.is_well_known(LABEL_SIZE) && p.is_well_known(LABEL_INTEGER) && p.is_well_known(LABEL_SPECIAL));
        assert!(!p.is_well_known("team"));
    }
}
