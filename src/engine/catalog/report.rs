//! `karpenter-tui catalog` output: the JSON of scenario.md and a human table.

use serde_json::{Value, json};

use super::{Catalog, InstanceType, Offering};
use crate::engine::labels;
use crate::engine::resources::{describe_resource, format_bytes};

fn sorted_types(c: &Catalog) -> Vec<&InstanceType> {
    let mut types: Vec<&InstanceType> = c.instance_types.iter().map(AsRef::as_ref).collect();
    types.sort_by(|a, b| a.name.cmp(&b.name));
    types
}

fn sorted_offerings(it: &InstanceType) -> Vec<&Offering> {
    let mut offs: Vec<&Offering> = it.offerings.iter().collect();
    offs.sort_by(|a, b| (&a.zone, &a.capacity_type).cmp(&(&b.zone, &b.capacity_type)));
    offs
}

/// `{"region", "instanceTypes": [{"name", "capacity", "allocatable", "labels", "offerings", "priceSource"}]}`.
/// Types are sorted by name and offerings by (zone, capacity type). `labels` are the single-valued requirements
/// (what a node of the type would carry); each offering also names its own `priceSource`, since a static catalog's
/// spot prices are simulated.
pub fn catalog_json(c: &Catalog) -> Value {
    let types: Vec<Value> = sorted_types(c)
        .into_iter()
        .map(|it| {
            let offerings: Vec<Value> = sorted_offerings(it)
                .into_iter()
                .map(|o| {
                    json!({
                        "zone": o.zone,
                        "capacityType": o.capacity_type,
                        "price": o.price,
                        "available": o.available,
                        "priceSource": c.offering_price_source(o).label(),
                    })
                })
                .collect();
            json!({
                "name": it.name,
                "capacity": it.capacity.to_quantity_map(),
                "allocatable": it.allocatable().to_quantity_map(),
                "labels": it.requirements.single_valued_labels(),
                "offerings": offerings,
                "priceSource": c.price_source.label(),
            })
        })
        .collect();
    json!({ "region": c.region, "instanceTypes": types })
}

fn cheapest(it: &InstanceType, capacity_type: &str) -> Option<f64> {
    it.offerings
        .iter()
        .filter(|o| o.available && o.capacity_type == capacity_type)
        .map(|o| o.price)
        .min_by(f64::total_cmp)
}

fn price_cell(p: Option<f64>) -> String {
    p.map_or_else(|| "-".to_string(), |p| format!("${p:.4}"))
}

/// A fixed-width table: name, vCPU, memory, pods, allocatable CPU and memory, cheapest available on-demand and
/// spot price, and the zones with an available offering.
pub fn catalog_table(c: &Catalog) -> String {
    const HEADER: [&str; 9] =
        ["NAME", "VCPU", "MEMORY", "PODS", "ALLOC CPU", "ALLOC MEMORY", "ON-DEMAND", "SPOT", "ZONES"];
    let mut rows: Vec<[String; 9]> = Vec::new();
    for it in sorted_types(c) {
        let alloc = it.allocatable();
        let mut zones: Vec<&str> = it.offerings.iter().filter(|o| o.available).map(|o| o.zone.as_str()).collect();
        zones.sort_unstable();
        zones.dedup();
        rows.push([
            it.name.clone(),
            describe_resource("cpu", it.capacity.cpu),
            format_bytes(it.capacity.memory),
            it.capacity.pods.to_string(),
            describe_resource("cpu", alloc.cpu),
            format_bytes(alloc.memory),
            price_cell(cheapest(it, labels::CAPACITY_ON_DEMAND)),
            price_cell(cheapest(it, labels::CAPACITY_SPOT)),
            if zones.is_empty() { "-".to_string() } else { zones.join(",") },
        ]);
    }
    let mut widths = HEADER.map(str::len);
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.len());
        }
    }
    let mut out =
        format!("region {}: {} instance types, prices {}\n", c.region, c.instance_types.len(), c.price_source.label());
    let header: Vec<String> = HEADER.iter().map(|s| s.to_string()).collect();
    for row in std::iter::once(header.as_slice()).chain(rows.iter().map(|r| r.as_slice())) {
        let cells: Vec<String> = row
            .iter()
            .zip(widths)
            .enumerate()
            // Numbers right-aligned, names and zones left-aligned.
            .map(|(i, (cell, w))| if i == 0 || i == 8 { format!("{cell:<w$}") } else { format!("{cell:>w$}") })
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::catalog::{aws, fake, kwok};

    #[test]
    fn json_shape_for_aws() {
        let c = aws::aws_catalog("us-east-1", None, None, 3).unwrap();
        let v = catalog_json(&c);
        assert_eq!(v["region"], "us-east-1");
        let types = v["instanceTypes"].as_array().unwrap();
        assert_eq!(types.len(), c.instance_types.len());
        let names: Vec<&str> = types.iter().map(|t| t["name"].as_str().unwrap()).collect();
        let mut sorted = names.clone();
        sorted.sort_unstable();
        assert_eq!(names, sorted);
        let m5 = types.iter().find(|t| t["name"] == "m5.large").unwrap();
        assert_eq!(m5["capacity"]["memory"], "7577Mi");
        assert_eq!(m5["capacity"]["pods"], "29");
        assert_eq!(m5["allocatable"]["cpu"], "1930m");
        assert_eq!(m5["allocatable"]["memory"], "6903Mi");
        assert_eq!(m5["allocatable"]["ephemeral-storage"], "17Gi");
        assert_eq!(m5["labels"]["node.kubernetes.io/instance-type"], "m5.large");
        assert_eq!(m5["labels"]["karpenter.k8s.aws/instance-family"], "m5");
        assert_eq!(m5["priceSource"], "static-2026-07-20");
        let offs = m5["offerings"].as_array().unwrap();
        assert_eq!(offs.len(), 6);
        assert_eq!(offs[0]["zone"], "us-east-1a");
        assert_eq!(offs[0]["capacityType"], "on-demand");
        assert_eq!(offs[0]["price"], 0.096);
        assert_eq!(offs[0]["available"], true);
        assert_eq!(offs[1]["priceSource"], "simulated");
    }

    #[test]
    fn json_is_deterministic() {
        let a = serde_json::to_string(&catalog_json(&kwok::kwok_catalog("kwok"))).unwrap();
        let b = serde_json::to_string(&catalog_json(&kwok::kwok_catalog("kwok"))).unwrap();
        assert_eq!(a, b);
        let v: Value = serde_json::from_str(&a).unwrap();
        assert_eq!(v["instanceTypes"][0]["priceSource"], "simulated");
    }

    #[test]
    fn table_lists_prices_and_zones() {
        let t = catalog_table(&fake::fake_catalog());
        let lines: Vec<&str> = t.lines().collect();
        assert!(lines[0].starts_with("region fake-region: 6 instance types, prices simulated"));
        assert!(lines[1].starts_with("NAME"));
        // Sorted by name: arm-instance-type first.
        assert!(lines[2].starts_with("arm-instance-type"));
        let small = lines.iter().find(|l| l.starts_with("small-instance-type")).unwrap();
        assert!(small.contains("2Gi"), "{small}");
        assert!(small.contains("1.9"), "allocatable cpu 1900m: {small}");
        assert!(small.contains("$0.4147"), "{small}");
        assert!(small.ends_with("test-zone-1,test-zone-2,test-zone-3"), "{small}");
    }

    #[test]
    fn unpriced_types_show_dashes() {
        let mut c = fake::fake_catalog_with(fake::fake_instance_types(1));
        let mut it = (*c.instance_types[0]).clone();
        for o in &mut it.offerings {
            o.available = false;
        }
        c.instance_types[0] = std::sync::Arc::new(it);
        let t = catalog_table(&c);
        let row = t.lines().nth(2).unwrap();
        let cells: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(cells[cells.len() - 3..], ["-", "-", "-"], "{row}");
        assert!(!row.contains('$'), "{row}");
    }
}
