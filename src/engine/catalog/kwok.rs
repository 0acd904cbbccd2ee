//! The KWOK provider's synthetic catalogue (engine.md §9.2): 144 made-up types that make large simulations cheap
//! and provider-neutral.

use std::sync::Arc;

use super::{Catalog, InstanceType, Offering, PriceSource};
use crate::engine::labels::{self, LabelPolicy};
use crate::engine::requirements::{Requirement, Requirements};
use crate::engine::resources::Resources;

pub const DOMAIN: &str = "karpenter.kwok.sh";
pub const INSTANCE_SIZE: &str = "karpenter.kwok.sh/instance-size";
pub const INSTANCE_FAMILY: &str = "karpenter.kwok.sh/instance-family";
pub const INSTANCE_CPU: &str = "karpenter.kwok.sh/instance-cpu";
pub const INSTANCE_MEMORY: &str = "karpenter.kwok.sh/instance-memory";

pub const ZONES: [&str; 4] = ["test-zone-a", "test-zone-b", "test-zone-c", "test-zone-d"];
const CPUS: [i64; 12] = [1, 2, 4, 8, 16, 32, 48, 64, 96, 128, 192, 256];
/// Family name and GiB of memory per vCPU.
const FAMILIES: [(&str, i64); 3] = [("c", 2), ("s", 4), ("m", 8)];
const OSES: [&str; 2] = ["linux", "windows"];
const ARCHES: [&str; 2] = ["amd64", "arm64"];
const GIB: i64 = 1 << 30;
const MIB: i64 = 1 << 20;

/// On-demand price: 0.025 per vCPU plus 0.001 per GiB.
pub fn kwok_on_demand_price(cpu: i64, memory_gib: i64) -> f64 {
    0.025 * cpu as f64 + 0.001 * memory_gib as f64
}

/// Core well-known labels plus the four KWOK labels; `karpenter.kwok.sh` reserved.
pub fn kwok_label_policy() -> LabelPolicy {
    let mut p = LabelPolicy::default();
    p.well_known.extend([INSTANCE_SIZE, INSTANCE_FAMILY, INSTANCE_CPU, INSTANCE_MEMORY].map(String::from));
    p.provider_domains = vec![DOMAIN.to_string()];
    p
}

fn kwok_type(cpu: i64, family: &str, gib_per_cpu: i64, os: &str, arch: &str) -> InstanceType {
    let memory_gib = cpu * gib_per_cpu;
    let size = format!("{cpu}x");
    let name = format!("{family}-{size}-{arch}-{os}");
    let mut capacity = Resources::new(cpu * 1000, memory_gib * GIB, (16 * cpu).min(1024));
    capacity.ephemeral_storage = 20 * GIB;
    let od = kwok_on_demand_price(cpu, memory_gib);
    let mut offerings = Vec::with_capacity(ZONES.len() * 2);
    for zone in ZONES {
        for (ct, price) in [(labels::CAPACITY_SPOT, 0.7 * od), (labels::CAPACITY_ON_DEMAND, od)] {
            offerings.push(Offering {
                zone: zone.to_string(),
                capacity_type: ct.to_string(),
                price,
                available: true,
                reservation: None,
            });
        }
    }
    let mut r = Requirements::new();
    r.add(labels::INSTANCE_TYPE, Requirement::in_values([name.clone()]));
    r.add(labels::ARCH, Requirement::in_values([arch]));
    r.add(labels::OS, Requirement::in_values([os]));
    r.add(labels::ZONE, Requirement::in_values(ZONES));
    r.add(labels::CAPACITY_TYPE, Requirement::in_values([labels::CAPACITY_SPOT, labels::CAPACITY_ON_DEMAND]));
    r.add(INSTANCE_SIZE, Requirement::in_values([size]));
    r.add(INSTANCE_FAMILY, Requirement::in_values([family]));
    r.add(INSTANCE_CPU, Requirement::in_values([cpu.to_string()]));
    r.add(INSTANCE_MEMORY, Requirement::in_values([(memory_gib * GIB / MIB).to_string()]));
    InstanceType {
        name,
        requirements: r,
        capacity,
        // Like the fake provider KWOK reserves a token amount for the kubelet.
        overhead: Resources::new(100, 10 * MIB, 0),
        offerings,
        volume_limits: Default::default(),
    }
}

/// The 144 KWOK types, sorted by name.
pub fn kwok_instance_types() -> Vec<InstanceType> {
    let mut out = Vec::with_capacity(CPUS.len() * FAMILIES.len() * OSES.len() * ARCHES.len());
    for cpu in CPUS {
        for (family, ratio) in FAMILIES {
            for os in OSES {
                for arch in ARCHES {
                    out.push(kwok_type(cpu, family, ratio, os, arch));
                }
            }
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// The KWOK catalogue; `region` only names the catalog (KWOK types carry no region label).
pub fn kwok_catalog(region: &str) -> Catalog {
    Catalog {
        region: region.to_string(),
        instance_types: kwok_instance_types().into_iter().map(Arc::new).collect(),
        label_policy: kwok_label_policy(),
        price_source: PriceSource::Simulated,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shape_of_the_catalogue() {
        let c = kwok_catalog("kwok");
        assert_eq!(c.instance_types.len(), 144);
        let names: std::collections::BTreeSet<&str> = c.instance_types.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names.len(), 144, "names are unique");
        let it = c.get("c-4x-amd64-linux").expect("c-4x-amd64-linux");
        assert_eq!(it.capacity.cpu, 4000);
        assert_eq!(it.capacity.memory, 8 * GIB);
        assert_eq!(it.capacity.pods, 64);
        assert_eq!(it.capacity.ephemeral_storage, 20 * GIB);
        assert_eq!(it.offerings.len(), 8);
        let od = it.offerings.iter().find(|o| o.capacity_type == "on-demand").unwrap().price;
        let spot = it.offerings.iter().find(|o| o.capacity_type == "spot").unwrap().price;
        assert!((od - (0.1 + 0.008)).abs() < 1e-12);
        assert!((spot - 0.7 * od).abs() < 1e-12);
        let labels = it.requirements.single_valued_labels();
        assert_eq!(labels.get(INSTANCE_SIZE).map(String::as_str), Some("4x"));
        assert_eq!(labels.get(INSTANCE_FAMILY).map(String::as_str), Some("c"));
        assert_eq!(labels.get(INSTANCE_CPU).map(String::as_str), Some("4"));
        assert_eq!(labels.get(INSTANCE_MEMORY).map(String::as_str), Some("8192"));
        assert_eq!(labels.get(labels::OS).map(String::as_str), Some("linux"));
        assert_eq!(it.requirements.get(labels::ZONE).values, ZONES);
    }

    #[test]
    fn pods_cap_at_1024() {
        let c = kwok_catalog("kwok");
        assert_eq!(c.get("m-256x-arm64-windows").unwrap().capacity.pods, 1024);
        assert_eq!(c.get("s-1x-amd64-linux").unwrap().capacity.pods, 16);
        assert_eq!(c.get("m-96x-amd64-linux").unwrap().capacity.memory, 768 * GIB);
    }

    #[test]
    fn label_policy() {
        let p = kwok_label_policy();
        assert!(p.is_well_known(INSTANCE_FAMILY));
        assert!(p.restricted("karpenter.kwok.sh/other").is_some());
        assert!(p.restricted(INSTANCE_CPU).is_none());
    }
}
