//! Instance types from the EC2 API (aws.md §1.1): DescribeInstanceTypes (hvm, x86_64/arm64) and
//! DescribeInstanceTypeOfferings by zone, turned into the same facts the embedded catalog holds, so one set of
//! formulas (`engine::catalog::aws::build_catalog`) computes capacity, overhead and labels for both.

use std::collections::{BTreeMap, BTreeSet};

use aws_sdk_ec2::types::{EbsOptimizedSupport, EphemeralNvmeSupport, Filter, InstanceTypeInfo, LocationType};

use crate::engine::catalog::aws::{Accelerator, Gpu, NeuronDevice, TypeFacts};

use super::config::AwsError;

/// What the two calls found: every type's facts, and the zones each is offered in.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Discovered {
    pub types: Vec<TypeFacts>,
    /// Instance type → zones offering it.
    pub offerings: BTreeMap<String, BTreeSet<String>>,
}

impl Discovered {
    /// Every zone some type is offered in (upstream's `allZones`).
    pub fn zones(&self) -> Vec<String> {
        let all: BTreeSet<&String> = self.offerings.values().flatten().collect();
        all.into_iter().cloned().collect()
    }

    /// Types that are offered somewhere, each with its zones, in name order.
    pub fn offered(&self) -> Vec<(&TypeFacts, Vec<&str>)> {
        let mut out: Vec<(&TypeFacts, Vec<&str>)> = self
            .types
            .iter()
            .filter_map(|f| {
                let zones = self.offerings.get(&f.name)?;
                (!zones.is_empty()).then(|| (f, zones.iter().map(String::as_str).collect()))
            })
            .collect();
        out.sort_by(|a, b| a.0.name.cmp(&b.0.name));
        out
    }
}

fn round_i64(x: f64) -> i64 {
    x.round() as i64
}

/// The facts the formulas read, from one DescribeInstanceTypes entry (`None` when a required fact is missing).
pub fn facts(t: &InstanceTypeInfo) -> Option<TypeFacts> {
    let name = t.instance_type.as_ref()?.as_str().to_string();
    let net = t.network_info.as_ref()?;
    let card_index = net.default_network_card_index.unwrap_or(0);
    let card = net.network_cards().iter().find(|c| c.network_card_index.unwrap_or(0) == card_index);
    let proc = t.processor_info.as_ref();
    let mut f = TypeFacts {
        name,
        vcpu: i64::from(t.v_cpu_info.as_ref()?.default_v_cpus?),
        mem_mi_b: t.memory_info.as_ref()?.size_in_mib?,
        arch: proc
            .map(|p| p.supported_architectures().iter().map(|a| a.as_str().to_string()).collect())
            .unwrap_or_default(),
        usage: t.supported_usage_classes().iter().map(|u| u.as_str().to_string()).collect(),
        // Max pods counts the default card's interfaces, not NetworkInfo.MaximumNetworkInterfaces (aws.md §1.3).
        enis: i64::from(
            card.and_then(|c| c.maximum_network_interfaces).or(net.maximum_network_interfaces).unwrap_or(0),
        ),
        ipv4: i64::from(net.ipv4_addresses_per_interface?),
        hypervisor: t.hypervisor.as_ref().map(|h| h.as_str().to_string()),
        eit: net.encryption_in_transit_supported.unwrap_or(false),
        bw_mbps: card.and_then(|c| c.baseline_bandwidth_in_gbps).map(|g| round_i64(g * 1000.0)),
        efa: net.efa_info.as_ref().and_then(|e| e.maximum_efa_interfaces).map(i64::from).filter(|n| *n > 0),
        cpu_mfr: proc.and_then(|p| p.manufacturer.clone()),
        clock_mhz: proc.and_then(|p| p.sustained_clock_speed_in_ghz).map(|g| round_i64(g * 1000.0)),
        ..Default::default()
    };
    if let Some(g) = &t.gpu_info {
        f.gpus = g
            .gpus()
            .iter()
            .map(|d| Gpu {
                name: d.name.clone().unwrap_or_default(),
                mfr: d.manufacturer.clone().unwrap_or_default(),
                count: i64::from(d.count.unwrap_or(0)),
                mem_mi_b: i64::from(d.memory_info.as_ref().and_then(|m| m.size_in_mib).unwrap_or(0)),
            })
            .collect();
    }
    if let Some(n) = &t.neuron_info {
        f.neuron = n
            .neuron_devices()
            .iter()
            .map(|d| NeuronDevice {
                name: d.name.clone().unwrap_or_default(),
                count: i64::from(d.count.unwrap_or(0)),
                cores: i64::from(d.core_info.as_ref().and_then(|c| c.count).unwrap_or(0)),
            })
            .collect();
    }
    if let Some(a) = &t.inference_accelerator_info {
        f.accel = a
            .accelerators()
            .iter()
            .map(|d| Accelerator {
                name: d.name.clone().unwrap_or_default(),
                mfr: d.manufacturer.clone().unwrap_or_default(),
                count: i64::from(d.count.unwrap_or(0)),
            })
            .collect();
    }
    if let Some(s) = &t.instance_storage_info
        && let Some(gb) = s.total_size_in_gb
    {
        f.store_gb = Some(gb);
        f.nvme = s.nvme_support.as_ref().is_some_and(|n| *n != EphemeralNvmeSupport::Unsupported);
    }
    if let Some(ebs) = &t.ebs_info
        && ebs.ebs_optimized_support == Some(EbsOptimizedSupport::Default)
    {
        f.ebs_mbps = ebs.ebs_optimized_info.as_ref().and_then(|o| o.maximum_bandwidth_in_mbps).map(i64::from);
    }
    Some(f)
}

fn filter(name: &str, values: &[&str]) -> Filter {
    Filter::builder().name(name).set_values(Some(values.iter().map(|v| v.to_string()).collect())).build()
}

/// Both calls, paginated, with upstream's filters.
pub async fn discover(ec2: &aws_sdk_ec2::Client) -> Result<Discovered, AwsError> {
    let mut out = Discovered::default();
    let mut pages = ec2
        .describe_instance_types()
        .filters(filter("supported-virtualization-type", &["hvm"]))
        .filters(filter("processor-info.supported-architecture", &["x86_64", "arm64"]))
        .max_results(100)
        .into_paginator()
        .send();
    while let Some(page) = pages.next().await {
        let page = page.map_err(|e| AwsError::call("DescribeInstanceTypes", e))?;
        out.types.extend(page.instance_types().iter().filter_map(facts));
    }
    out.types.sort_by(|a, b| a.name.cmp(&b.name));
    out.types.dedup_by(|a, b| a.name == b.name);
    let mut pages = ec2
        .describe_instance_type_offerings()
        .location_type(LocationType::AvailabilityZone)
        .max_results(1000)
        .into_paginator()
        .send();
    while let Some(page) = pages.next().await {
        let page = page.map_err(|e| AwsError::call("DescribeInstanceTypeOfferings", e))?;
        for o in page.instance_type_offerings() {
            if let (Some(t), Some(z)) = (&o.instance_type, &o.location) {
                out.offerings.entry(t.as_str().to_string()).or_default().insert(z.clone());
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_ec2::types::{
        InstanceType, MemoryInfo, NetworkCardInfo, NetworkInfo, ProcessorInfo, UsageClassType, VCpuInfo,
    };

    #[test]
    fn facts_use_the_default_cards_interfaces_and_bandwidth() {
        let t = InstanceTypeInfo::builder()
            .instance_type(InstanceType::M5Large)
            .v_cpu_info(VCpuInfo::builder().default_v_cpus(2).build())
            .memory_info(MemoryInfo::builder().size_in_mib(8192).build())
            .processor_info(
                ProcessorInfo::builder()
                    .supported_architectures(aws_sdk_ec2::types::ArchitectureType::X8664)
                    .manufacturer("Intel")
                    .sustained_clock_speed_in_ghz(3.1)
                    .build(),
            )
            .supported_usage_classes(UsageClassType::OnDemand)
            .supported_usage_classes(UsageClassType::Spot)
            .network_info(
                NetworkInfo::builder()
                    .maximum_network_interfaces(9)
                    .ipv4_addresses_per_interface(10)
                    .default_network_card_index(0)
                    .network_cards(
                        NetworkCardInfo::builder()
                            .network_card_index(0)
                            .maximum_network_interfaces(3)
                            .baseline_bandwidth_in_gbps(0.75)
                            .build(),
                    )
                    .build(),
            )
            .build();
        let f = facts(&t).expect("complete facts");
        assert_eq!((f.vcpu, f.mem_mi_b, f.enis, f.ipv4), (2, 8192, 3, 10));
        assert_eq!(f.bw_mbps, Some(750));
        assert_eq!(f.clock_mhz, Some(3100));
        assert_eq!(f.usage, vec!["on-demand".to_string(), "spot".to_string()]);
        // Missing memory: not a usable type.
        let broken = InstanceTypeInfo::builder().instance_type(InstanceType::M5Large).build();
        assert!(facts(&broken).is_none());
    }
}
