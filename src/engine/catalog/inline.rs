//! Instance types written inline in a scenario (`catalog.instanceTypes`, scenario.md "Inline instance types").

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::Arc;

use serde::Deserialize;
use thiserror::Error;

use super::{Catalog, InstanceType, Offering, PriceSource};
use crate::engine::labels::{self, LabelPolicy};
use crate::engine::requirements::{Requirement, Requirements};
use crate::engine::resources::{self, Resources, parse_quantity};

/// An inline type exactly as the scenario spells it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct InlineInstanceType {
    pub name: String,
    pub cpu: QuantityValue,
    pub memory: QuantityValue,
    /// Default 110 (the kubelet default).
    #[serde(default)]
    pub pods: Option<i64>,
    #[serde(default)]
    pub ephemeral_storage: Option<QuantityValue>,
    /// Extended resources (`fake.com/vendor-a: "2"`).
    #[serde(default)]
    pub resources: BTreeMap<String, QuantityValue>,
    /// `amd64` (default) or `arm64`.
    #[serde(default)]
    pub arch: Option<String>,
    /// Default `linux`.
    #[serde(default)]
    pub os: Option<OneOrMany>,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Reserved for kubelet/system/eviction; none by default.
    #[serde(default)]
    pub overhead: BTreeMap<String, QuantityValue>,
    /// Volumes each CSI driver can attach (`{ebs.csi.aws.com: 25}`): what the cloud declares for the type and what
    /// the simulated node's CSINode reports.
    #[serde(default)]
    pub volume_limits: BTreeMap<String, u32>,
    pub offerings: Vec<InlineOffering>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct InlineOffering {
    pub zone: String,
    pub capacity_type: String,
    /// USD per hour.
    pub price: f64,
    #[serde(default = "yes")]
    pub available: bool,
    /// A `reserved` offering's capacity reservation (`cr-…`), how many instances it holds, its type
    /// (`default` | `capacity-block`), whether its owner may interrupt it, and when it ends (from t=0).
    #[serde(default)]
    pub reservation_id: Option<String>,
    #[serde(default)]
    pub reservation_capacity: Option<i64>,
    #[serde(default)]
    pub reservation_type: Option<String>,
    #[serde(default)]
    pub interruptible: Option<bool>,
    #[serde(default)]
    pub ends_at: Option<String>,
}

fn yes() -> bool {
    true
}

/// A `reserved` offering's reservation, checked: the id (`^cr-[0-9a-z]+$`) and capacity are required, the rest
/// belong to reserved offerings only.
fn reservation(
    o: &InlineOffering,
    at: &dyn Fn(&str, String) -> InlineError,
) -> Result<Option<super::Reservation>, InlineError> {
    if o.capacity_type != labels::CAPACITY_RESERVED {
        for (field, set) in [
            ("reservationId", o.reservation_id.is_some()),
            ("reservationCapacity", o.reservation_capacity.is_some()),
            ("reservationType", o.reservation_type.is_some()),
            ("interruptible", o.interruptible.is_some()),
            ("endsAt", o.ends_at.is_some()),
        ] {
            if set {
                return Err(at(field, "only a reserved offering has a capacity reservation".into()));
            }
        }
        return Ok(None);
    }
    let id = o.reservation_id.clone().ok_or_else(|| at("reservationId", "required for a reserved offering".into()))?;
    let valid = id
        .strip_prefix("cr-")
        .is_some_and(|r| !r.is_empty() && r.bytes().all(|b| b.is_ascii_digit() || b.is_ascii_lowercase()));
    if !valid {
        return Err(at("reservationId", format!("must match ^cr-[0-9a-z]+$, got {id:?}")));
    }
    let capacity =
        o.reservation_capacity.ok_or_else(|| at("reservationCapacity", "required for a reserved offering".into()))?;
    if capacity < 0 {
        return Err(at("reservationCapacity", format!("must not be negative, got {capacity}")));
    }
    let kind = o.reservation_type.clone().unwrap_or_else(|| super::RESERVATION_DEFAULT.to_string());
    if kind != super::RESERVATION_DEFAULT && kind != super::RESERVATION_CAPACITY_BLOCK {
        return Err(at("reservationType", format!("must be default or capacity-block, got {kind:?}")));
    }
    let end = match &o.ends_at {
        Some(d) => Some(
            crate::engine::lifecycle::duration_ms(d)
                .ok_or_else(|| at("endsAt", format!("must be a duration such as 90m, got {d:?}")))?,
        ),
        None => None,
    };
    let interruptible = o.interruptible.unwrap_or(false);
    Ok(Some(super::Reservation { id, capacity, kind, interruptible, end, usable: o.available }))
}

/// A quantity written as a string (`"4"`, `4Gi`) or a bare YAML number (`4`, `0.5`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum QuantityValue {
    Int(i64),
    Float(f64),
    Str(String),
}

impl fmt::Display for QuantityValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            QuantityValue::Int(n) => write!(f, "{n}"),
            QuantityValue::Float(x) => write!(f, "{x}"),
            QuantityValue::Str(s) => f.write_str(s),
        }
    }
}

/// `os: linux` or `os: [linux, windows]`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

impl OneOrMany {
    pub fn to_vec(&self) -> Vec<String> {
        match self {
            OneOrMany::One(s) => vec![s.clone()],
            OneOrMany::Many(v) => v.clone(),
        }
    }
}

/// A bad inline type, with the path of the offending field (`instanceTypes[2].memory`).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{path}: {message}")]
pub struct InlineError {
    pub path: String,
    pub message: String,
}

/// Labels derived from the type itself or its offerings; `labels:` may not set them.
const DERIVED_LABELS: [&str; 5] =
    [labels::INSTANCE_TYPE, labels::ARCH, labels::OS, labels::ZONE, labels::CAPACITY_TYPE];

impl InlineInstanceType {
    /// Converts the type; `path` prefixes error messages (e.g. `instanceTypes[2]`). With a `region` the type gets
    /// the region label like the catalog's other types.
    pub fn to_instance_type(&self, path: &str, region: Option<&str>) -> Result<InstanceType, InlineError> {
        let err = |field: &str, message: String| InlineError { path: format!("{path}.{field}"), message };
        if self.name.trim().is_empty() {
            return Err(err("name", "must not be empty".into()));
        }
        let quantity = |field: &str, q: &QuantityValue, as_cpu: bool| -> Result<i64, InlineError> {
            let parsed = parse_quantity(&q.to_string()).map_err(|e| err(field, e.to_string()))?;
            let v = if as_cpu { parsed.milli() } else { parsed.value() };
            if v < 0 {
                return Err(err(field, format!("must not be negative, got {q}")));
            }
            Ok(v)
        };
        let cpu = quantity("cpu", &self.cpu, true)?;
        let memory = quantity("memory", &self.memory, false)?;
        let pods = self.pods.unwrap_or(110);
        if pods < 0 {
            return Err(err("pods", format!("must not be negative, got {pods}")));
        }
        let mut capacity = Resources::new(cpu, memory, pods);
        if let Some(q) = &self.ephemeral_storage {
            capacity.ephemeral_storage = quantity("ephemeralStorage", q, false)?;
        }
        for (name, q) in &self.resources {
            let field = format!("resources.{name}");
            if [resources::CPU, resources::MEMORY, resources::PODS, resources::EPHEMERAL_STORAGE]
                .contains(&name.as_str())
            {
                return Err(err(&field, format!("set {name} with its own field")));
            }
            let v = quantity(&field, q, false)?;
            capacity.set_value(name, v);
        }
        let mut overhead = Resources::default();
        for (name, q) in &self.overhead {
            let v = quantity(&format!("overhead.{name}"), q, name == resources::CPU)?;
            overhead.set_value(name, v);
        }

        let arch = self.arch.clone().unwrap_or_else(|| "amd64".to_string());
        if arch != "amd64" && arch != "arm64" {
            return Err(err("arch", format!("must be amd64 or arm64, got {arch:?}")));
        }
        let os = self.os.as_ref().map_or_else(|| vec!["linux".to_string()], OneOrMany::to_vec);
        if os.is_empty() || os.iter().any(|o| o.trim().is_empty()) {
            return Err(err("os", "must name at least one operating system".into()));
        }

        if self.offerings.is_empty() {
            return Err(err("offerings", "at least one offering is required".into()));
        }
        let mut offerings = Vec::with_capacity(self.offerings.len());
        let mut seen = BTreeSet::new();
        for (i, o) in self.offerings.iter().enumerate() {
            let at = |field: &str, message: String| err(&format!("offerings[{i}].{field}"), message);
            if o.zone.trim().is_empty() {
                return Err(at("zone", "must not be empty".into()));
            }
            if !labels::CAPACITY_TYPES.contains(&o.capacity_type.as_str()) {
                return Err(at(
                    "capacityType",
                    format!("must be on-demand, spot or reserved, got {:?}", o.capacity_type),
                ));
            }
            if !o.price.is_finite() || o.price < 0.0 {
                return Err(at("price", format!("must be a non-negative number, got {}", o.price)));
            }
            let reservation = reservation(o, &at)?;
            if !seen.insert((o.zone.as_str(), o.capacity_type.as_str(), o.reservation_id.as_deref().unwrap_or(""))) {
                return Err(at("zone", format!("duplicate offering {} {}", o.zone, o.capacity_type)));
            }
            offerings.push(Offering {
                zone: o.zone.clone(),
                capacity_type: o.capacity_type.clone(),
                price: o.price,
                // As everywhere in the engine, a reserved offering is available only while it can take a launch; a
                // full one written `available: true` is full but healthy (`Reservation::is_full`).
                available: o.available && reservation.as_ref().is_none_or(|r| r.capacity > 0),
                reservation,
            });
        }

        let mut r = Requirements::new();
        r.add(labels::INSTANCE_TYPE, Requirement::in_values([self.name.clone()]));
        r.add(labels::ARCH, Requirement::in_values([arch]));
        r.add(labels::OS, Requirement::in_values(os));
        // Every offering counts, available or not: a scenario event may make an offering available later.
        r.add(labels::ZONE, Requirement::in_values(offerings.iter().map(|o| o.zone.clone())));
        r.add(labels::CAPACITY_TYPE, Requirement::in_values(offerings.iter().map(|o| o.capacity_type.clone())));
        if let Some(region) = region {
            r.add(labels::REGION, Requirement::in_values([region]));
        }
        for (k, v) in &self.labels {
            let key = labels::normalize_key(k);
            if DERIVED_LABELS.contains(&key) || key == labels::REGION {
                return Err(err(&format!("labels.{k}"), "is derived from the type and its offerings".into()));
            }
            if key.is_empty() {
                return Err(err("labels", "empty label key".into()));
            }
            r.add(key, Requirement::in_values([v.clone()]));
        }
        for driver in self.volume_limits.keys() {
            if driver.is_empty() {
                return Err(err("volumeLimits", "empty CSI driver name".into()));
            }
        }
        Ok(InstanceType {
            name: self.name.clone(),
            requirements: r,
            capacity,
            overhead,
            offerings,
            volume_limits: self.volume_limits.clone(),
        })
    }
}

/// Converts a scenario's `catalog.instanceTypes`; errors are prefixed `instanceTypes[i]`. Names must be unique.
pub fn inline_instance_types(
    types: &[InlineInstanceType],
    region: Option<&str>,
) -> Result<Vec<InstanceType>, InlineError> {
    let mut names = BTreeSet::new();
    let mut out = Vec::with_capacity(types.len());
    for (i, t) in types.iter().enumerate() {
        let path = format!("instanceTypes[{i}]");
        if !names.insert(t.name.as_str()) {
            return Err(InlineError {
                path: format!("{path}.name"),
                message: format!("duplicate instance type {:?}", t.name),
            });
        }
        out.push(t.to_instance_type(&path, region)?);
    }
    Ok(out)
}

/// Adds inline types to a catalog. Their `labels:` keys become well-known (the cloud offers them). A name already
/// in the catalog is an error rather than a silent override.
pub fn add_inline_types(catalog: &mut Catalog, types: &[InlineInstanceType]) -> Result<(), InlineError> {
    let converted = inline_instance_types(types, Some(&catalog.region))?;
    // Check every name before touching the catalog so an error leaves it unchanged.
    if let Some((i, it)) = converted.iter().enumerate().find(|(_, it)| catalog.get(&it.name).is_some()) {
        return Err(InlineError {
            path: format!("instanceTypes[{i}].name"),
            message: format!("instance type {:?} already exists in the catalog", it.name),
        });
    }
    for (i, it) in converted.into_iter().enumerate() {
        for k in types[i].labels.keys() {
            catalog.label_policy.well_known.insert(labels::normalize_key(k).to_string());
        }
        catalog.instance_types.push(Arc::new(it));
    }
    catalog.instance_types.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(())
}

/// A catalog made only of inline types (`catalog.source: inline`); prices are the scenario's, so "simulated".
pub fn inline_catalog(region: &str, types: &[InlineInstanceType]) -> Result<Catalog, InlineError> {
    let mut c = Catalog {
        region: region.to_string(),
        instance_types: Vec::new(),
        label_policy: LabelPolicy::default(),
        price_source: PriceSource::Simulated,
    };
    add_inline_types(&mut c, types)?;
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: i64 = 1 << 30;

    fn parse(yaml: &str) -> Result<Vec<InlineInstanceType>, serde_yaml::Error> {
        serde_yaml::from_str(yaml)
    }

    const EXAMPLE: &str = r#"
- name: default-instance-type
  cpu: "4"
  memory: 4Gi
  pods: 5
  ephemeralStorage: 20Gi
  resources: {fake.com/vendor-a: "2"}
  arch: amd64
  os: [linux]
  labels: {size: small, integer: "4"}
  overhead: {cpu: 100m, memory: 10Mi}
  offerings:
    - {zone: test-zone-1, capacityType: spot, price: 0.5}
    - {zone: test-zone-2, capacityType: on-demand, price: 1.0, available: false}
"#;

    #[test]
    fn scenario_example_converts() {
        let types = parse(EXAMPLE).unwrap();
        let c = inline_catalog("test-region", &types).unwrap();
        let it = c.get("default-instance-type").unwrap();
        assert_eq!(it.capacity.cpu, 4000);
        assert_eq!(it.capacity.memory, 4 * GIB);
        assert_eq!(it.capacity.pods, 5);
        assert_eq!(it.capacity.ephemeral_storage, 20 * GIB);
        assert_eq!(it.capacity.get("fake.com/vendor-a"), 2);
        assert_eq!(it.allocatable().cpu, 3900);
        assert_eq!(it.allocatable().memory, 4 * GIB - 10 * (1 << 20));
        assert_eq!(it.offerings.len(), 2);
        assert!(it.offerings[0].available && !it.offerings[1].available);
        assert_eq!(it.requirements.get(labels::ZONE).values, ["test-zone-1", "test-zone-2"]);
        assert_eq!(it.requirements.get(labels::CAPACITY_TYPE).values, ["on-demand", "spot"]);
        let l = it.requirements.single_valued_labels();
        assert_eq!(l.get("size").map(String::as_str), Some("small"));
        assert_eq!(l.get(labels::REGION).map(String::as_str), Some("test-region"));
        assert!(c.label_policy.is_well_known("size") && c.label_policy.is_well_known("integer"));
    }

    #[test]
    fn os_as_string_and_numeric_quantities() {
        let t = parse(
            "- {name: a, cpu: 2, memory: 1.5Gi, os: windows, offerings: [{zone: z, capacityType: on-demand, price: 1}]}",
        )
        .unwrap();
        let it = t[0].to_instance_type("instanceTypes[0]", None).unwrap();
        assert_eq!(it.capacity.cpu, 2000);
        assert_eq!(it.capacity.pods, 110);
        assert_eq!(it.requirements.get(labels::OS).values, ["windows"]);
        assert_eq!(it.requirements.get(labels::ARCH).values, ["amd64"]);
    }

    #[test]
    fn errors_name_the_field() {
        let yaml = r#"
- {name: a, cpu: "1", memory: 1Gi, offerings: [{zone: z, capacityType: spot, price: 1}]}
- {name: b, cpu: "1", memory: 1Gi, offerings: [{zone: z, capacityType: spot, price: 1}]}
- {name: c, cpu: "1", memory: 4Gx, offerings: [{zone: z, capacityType: spot, price: 1}]}
"#;
        let err = inline_instance_types(&parse(yaml).unwrap(), None).unwrap_err();
        assert!(err.to_string().starts_with(r#"instanceTypes[2].memory: invalid quantity "4Gx""#), "{err}");

        let bad = |yaml: &str| inline_instance_types(&parse(yaml).unwrap(), None).unwrap_err().to_string();
        assert!(
            bad("- {name: a, cpu: 1, memory: 1Gi, offerings: [{zone: z, capacityType: cheap, price: 1}]}")
                .starts_with("instanceTypes[0].offerings[0].capacityType")
        );
        assert!(
            bad("- {name: a, cpu: 1, memory: 1Gi, arch: s390x, offerings: [{zone: z, capacityType: spot, price: 1}]}")
                .starts_with("instanceTypes[0].arch")
        );
        assert!(bad("- {name: a, cpu: 1, memory: 1Gi, offerings: []}").starts_with("instanceTypes[0].offerings"));
        assert!(
            bad("- {name: a, cpu: -1, memory: 1Gi, offerings: [{zone: z, capacityType: spot, price: 1}]}")
                .starts_with("instanceTypes[0].cpu")
        );
        assert!(
            bad("- {name: a, cpu: 1, memory: 1Gi, labels: {topology.kubernetes.io/zone: z}, offerings: [{zone: z, capacityType: spot, price: 1}]}")
                .starts_with("instanceTypes[0].labels.topology.kubernetes.io/zone")
        );
        let dup = "- {name: a, cpu: 1, memory: 1Gi, offerings: [{zone: z, capacityType: spot, price: 1}]}\n\
                   - {name: a, cpu: 1, memory: 1Gi, offerings: [{zone: z, capacityType: spot, price: 1}]}";
        assert!(bad(dup).starts_with("instanceTypes[1].name: duplicate"));
    }

    #[test]
    fn unknown_fields_are_rejected() {
        assert!(parse("- {name: a, cpus: 1, memory: 1Gi, offerings: []}").is_err());
        assert!(
            parse("- {name: a, cpu: 1, memory: 1Gi, offerings: [{zone: z, capacityType: spot, price: 1, x: 1}]}")
                .is_err()
        );
    }

    #[test]
    fn added_to_an_existing_catalog() {
        let mut c = super::super::kwok::kwok_catalog("kwok");
        let before = c.instance_types.len();
        add_inline_types(&mut c, &parse(EXAMPLE).unwrap()).unwrap();
        assert_eq!(c.instance_types.len(), before + 1);
        assert!(c.label_policy.is_well_known("size"));
        let clash = parse(
            "- {name: c-1x-amd64-linux, cpu: 1, memory: 1Gi, offerings: [{zone: z, capacityType: spot, price: 1}]}",
        );
        assert!(add_inline_types(&mut c, &clash.unwrap()).is_err());
        assert_eq!(c.instance_types.len(), before + 1, "a failed add leaves the catalog unchanged");
    }
}
