//! Instance types and their offerings: what the cloud can launch, where, at what price.
//!
//! The scheduler only sees [`InstanceType`]s. Where they come from is a catalog source: the embedded AWS catalog,
//! the KWOK-style synthetic catalog, inline types from a scenario, or (later) the live AWS APIs.

pub mod aws;
pub mod classes;
pub mod fake;
pub mod inline;
pub mod kubelet_expr;
pub mod kwok;
pub mod report;

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Serialize;
use thiserror::Error;

use super::labels::{self, LabelPolicy};
use super::requirements::{Operator, Requirement, Requirements};
use super::resources::Resources;

/// Where a price came from; shown next to every cost figure.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PriceSource {
    /// The embedded on-demand table and its date (`fallback_region` set when the region has no table).
    Static { date: String, fallback_region: Option<String> },
    /// Fetched from the AWS pricing APIs at this time (RFC 3339): on-demand from the Pricing API, spot from
    /// DescribeSpotPriceHistory.
    Live { at: String },
    /// Spot prices fetched at `at`; on-demand prices from the embedded table of `date` (the Pricing API could not
    /// be read, or is skipped).
    LiveSpot { at: String, date: String },
    /// Made up by the simulated cloud (spot prices, synthetic catalogs, inline prices).
    Simulated,
}

impl PriceSource {
    /// The `priceSource` string of `karpenter-tui catalog` (`static-2026-07-20`, `live`, `simulated`).
    pub fn label(&self) -> String {
        match self {
            PriceSource::Static { date, fallback_region: None } => format!("static-{date}"),
            PriceSource::Static { date, fallback_region: Some(r) } => format!("static-{date} ({r} prices)"),
            PriceSource::Live { .. } => "live".to_string(),
            PriceSource::LiveSpot { date, .. } => format!("live spot, static-{date} on-demand"),
            PriceSource::Simulated => "simulated".to_string(),
        }
    }
}

/// One place and way to buy an instance type.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Offering {
    pub zone: String,
    pub capacity_type: String,
    /// USD per hour.
    pub price: f64,
    pub available: bool,
    /// For a `reserved` offering, the capacity reservation it launches into.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub reservation: Option<Reservation>,
}

/// A capacity reservation behind a `reserved` offering (an ODCR or a capacity block, engine-v1x.md §4).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Reservation {
    #[serde(rename = "reservationId")]
    pub id: String,
    /// Instances it can still take now (upstream's `ReservationCapacity`).
    #[serde(rename = "reservationCapacity")]
    pub capacity: i64,
    /// `default` or `capacity-block`.
    #[serde(rename = "reservationType")]
    pub kind: String,
    pub interruptible: bool,
    /// When it ends (ms since the epoch), if it does.
    #[serde(skip)]
    pub end: Option<i64>,
    /// EC2 would take launches into it were it not full: not expiring, ended, reclaimed or refused with a capacity
    /// error. v1.15's AWS provider calls such an offering Available even at capacity 0 (aws #9625), and
    /// terminate-first needs that distinction; `Offering::available` keeps meaning "a launch can use it now".
    #[serde(skip)]
    pub usable: bool,
}

impl Reservation {
    /// Full but healthy: v1.15's `Available=true` with `ReservationCapacity=0`.
    pub fn is_full(&self) -> bool {
        self.usable && self.capacity <= 0
    }
}

/// `karpenter.k8s.aws/capacity-reservation-type` values.
pub const RESERVATION_DEFAULT: &str = "default";
pub const RESERVATION_CAPACITY_BLOCK: &str = "capacity-block";

/// The requirements an offering is checked against (zone, capacity type, the reservation labels), looked up once
/// for the many offerings of a claim's types rather than once per offering.
#[derive(Clone, Copy)]
pub struct OfferingFilter<'a> {
    zone: Option<&'a Requirement>,
    capacity_type: Option<&'a Requirement>,
    reservation_id: Option<&'a Requirement>,
    reservation_type: Option<&'a Requirement>,
    reservation_interruptible: Option<&'a Requirement>,
}

impl<'a> OfferingFilter<'a> {
    pub fn new(reqs: &'a Requirements) -> Self {
        OfferingFilter {
            zone: reqs.get_ref(labels::ZONE),
            capacity_type: reqs.get_ref(labels::CAPACITY_TYPE),
            reservation_id: reqs.get_ref(aws::CAPACITY_RESERVATION_ID),
            reservation_type: reqs.get_ref(aws::CAPACITY_RESERVATION_TYPE),
            reservation_interruptible: reqs.get_ref(aws::CAPACITY_RESERVATION_INTERRUPTIBLE),
        }
    }

    /// Whether the offering satisfies the zone, capacity-type and capacity-reservation requirements. A
    /// non-reserved offering has none of the reservation labels (upstream gives it `DoesNotExist` for them).
    pub fn admits(&self, o: &Offering) -> bool {
        // A reserved offering's three reservation labels; upstream's Intersects lets a missing label satisfy only
        // NotIn and DoesNotExist.
        let label = |req: Option<&Requirement>, value: Option<&str>| {
            req.is_none_or(|r| match value {
                Some(v) => r.has(v),
                None => matches!(r.operator(), Operator::NotIn | Operator::DoesNotExist),
            })
        };
        let res = o.reservation.as_ref();
        self.zone.is_none_or(|r| r.has(&o.zone))
            && self.capacity_type.is_none_or(|r| r.has(&o.capacity_type))
            && label(self.reservation_id, res.map(|r| r.id.as_str()))
            && label(self.reservation_type, res.map(|r| r.kind.as_str()))
            && label(self.reservation_interruptible, res.map(|r| if r.interruptible { "true" } else { "false" }))
    }
}

impl Offering {
    /// Whether the offering satisfies the zone, capacity-type and capacity-reservation requirements of `reqs` (see
    /// [`OfferingFilter`], which checks many offerings against the same requirements).
    pub fn compatible(&self, reqs: &Requirements) -> bool {
        OfferingFilter::new(reqs).admits(self)
    }

    /// The reservation's id, for a reserved offering.
    pub fn reservation_id(&self) -> Option<&str> {
        self.reservation.as_ref().map(|r| r.id.as_str())
    }
}

/// An instance type as the scheduler sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct InstanceType {
    pub name: String,
    /// Labels the type offers (instance-type, arch, os, zone, capacity-type, region, provider labels ...).
    pub requirements: Requirements,
    pub capacity: Resources,
    /// kube-reserved + system-reserved + eviction threshold.
    pub overhead: Resources,
    pub offerings: Vec<Offering>,
    /// The volumes each CSI driver can attach to a node of this type, as the cloud declares them (Karpenter v1.15's
    /// volume-limit-aware provisioning); empty: none declared, so unlimited until the node's CSINode says.
    pub volume_limits: VolumeLimits,
}

/// Attachable volumes per CSI driver name (a driver not named has no limit).
pub type VolumeLimits = BTreeMap<String, u32>;

impl Catalog {
    /// The catalog as a cloud provider without declared attach limits hands it out (Karpenter v1.14's
    /// `InstanceType` has no such field): the types that declare some are copied without them.
    pub fn without_volume_limits(&self) -> Catalog {
        let mut out = self.clone();
        for t in out.instance_types.iter_mut().filter(|t| !t.volume_limits.is_empty()) {
            *t = Arc::new(InstanceType { volume_limits: VolumeLimits::new(), ..(**t).clone() });
        }
        out
    }
}

impl InstanceType {
    /// capacity − overhead, floored at zero.
    pub fn allocatable(&self) -> Resources {
        let mut a = self.capacity.minus(&self.overhead);
        a.floor_zero();
        a
    }

    /// The cheapest available offering compatible with `reqs`.
    pub fn cheapest_offering(&self, reqs: &Requirements) -> Option<&Offering> {
        let filter = OfferingFilter::new(reqs);
        self.offerings.iter().filter(|o| o.available && filter.admits(o)).min_by(|a, b| a.price.total_cmp(&b.price))
    }
}

/// The instance types a region offers, with the label policy of their provider.
#[derive(Debug, Clone)]
pub struct Catalog {
    pub region: String,
    pub instance_types: Vec<Arc<InstanceType>>,
    pub label_policy: LabelPolicy,
    pub price_source: PriceSource,
}

impl Catalog {
    /// Adds a reserved offering of `instance_type` in `zone` for a capacity reservation, priced as upstream's AWS
    /// provider prices one (its on-demand price ÷ 10⁷: nearly free, yet in the on-demand order) and available while
    /// it can take an instance. The type's offerings then say for themselves whether they carry the reservation
    /// labels (a type-level `DoesNotExist` for them would refuse every claim pinned to the reservation).
    pub fn add_reservation(&mut self, instance_type: &str, zone: &str, reservation: Reservation) -> Result<(), String> {
        use crate::engine::labels::{CAPACITY_ON_DEMAND, CAPACITY_RESERVED, CAPACITY_TYPE};
        let t = self
            .instance_types
            .iter_mut()
            .find(|t| t.name == instance_type)
            .ok_or_else(|| format!("the catalog has no instance type {instance_type:?}"))?;
        if !t.offerings.iter().any(|o| o.zone == zone) {
            return Err(format!("{instance_type} is not offered in zone {zone:?}"));
        }
        let od = t.offerings.iter().find(|o| o.zone == zone && o.capacity_type == CAPACITY_ON_DEMAND);
        let offering = Offering {
            zone: zone.to_string(),
            capacity_type: CAPACITY_RESERVED.into(),
            price: od.map_or(0.0, |o| o.price / 10_000_000.0),
            available: reservation.capacity > 0,
            reservation: Some(reservation),
        };
        let t = Arc::make_mut(t);
        t.offerings.push(offering);
        for key in
            [aws::CAPACITY_RESERVATION_ID, aws::CAPACITY_RESERVATION_TYPE, aws::CAPACITY_RESERVATION_INTERRUPTIBLE]
        {
            t.requirements.remove(key);
        }
        if !t.requirements.get(CAPACITY_TYPE).has(CAPACITY_RESERVED) {
            let mut values: Vec<String> = t.offerings.iter().map(|o| o.capacity_type.clone()).collect();
            values.sort();
            values.dedup();
            t.requirements.set(CAPACITY_TYPE, crate::engine::requirements::Requirement::in_values(values));
        }
        Ok(())
    }

    /// The catalog without reserved offerings (gate `ReservedCapacity` off: upstream then knows no reservations).
    pub fn without_reservations(mut self) -> Catalog {
        for t in &mut self.instance_types {
            if t.offerings.iter().any(|o| o.reservation.is_some()) {
                Arc::make_mut(t).offerings.retain(|o| o.reservation.is_none());
            }
        }
        self.instance_types.retain(|t| !t.offerings.is_empty());
        self
    }

    /// The catalog with its reservations' ends, written relative to a scenario's t=0, made absolute.
    pub fn with_start(mut self, start: i64) -> Catalog {
        for t in &mut self.instance_types {
            if t.offerings.iter().any(|o| o.reservation.as_ref().is_some_and(|r| r.end.is_some())) {
                let t = Arc::make_mut(t);
                for r in t.offerings.iter_mut().filter_map(|o| o.reservation.as_mut()) {
                    if let Some(e) = &mut r.end {
                        *e += start;
                    }
                }
            }
        }
        self
    }

    /// Where one offering's price came from. Static tables only ever hold on-demand prices, so a spot offering of a
    /// statically priced catalog carries a simulated price (see `aws::spot_fraction`).
    pub fn offering_price_source(&self, offering: &Offering) -> PriceSource {
        match &self.price_source {
            PriceSource::Static { .. } if offering.capacity_type != labels::CAPACITY_ON_DEMAND => {
                PriceSource::Simulated
            }
            PriceSource::LiveSpot { date, .. } if offering.capacity_type == labels::CAPACITY_ON_DEMAND => {
                PriceSource::Static { date: date.clone(), fallback_region: None }
            }
            PriceSource::LiveSpot { at, .. } => PriceSource::Live { at: at.clone() },
            other => other.clone(),
        }
    }

    /// The instance type with this name.
    pub fn get(&self, name: &str) -> Option<&Arc<InstanceType>> {
        self.instance_types.iter().find(|it| it.name == name)
    }
}

/// Why a catalog could not be built.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum CatalogError {
    #[error("unknown region {region:?}; the embedded catalog covers {known}")]
    UnknownRegion { region: String, known: String },
    #[error("zone {zone:?} is not in region {region}; its zones are {known}")]
    UnknownZone { zone: String, region: String, known: String },
    #[error(
        "unknown amiFamily {0:?}; expected AL2, AL2023, Bottlerocket, Windows2019, Windows2022, Windows2025 or Custom"
    )]
    UnknownAmiFamily(String),
    #[error("EC2NodeClass {field}: {message}")]
    InvalidNodeClass { field: String, message: String },
    #[error("embedded AWS catalog data is unreadable: {0}")]
    Data(String),
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::requirements::{Requirement, Requirements};

    fn offering(reservation: Option<Reservation>) -> Offering {
        let ct = if reservation.is_some() { labels::CAPACITY_RESERVED } else { labels::CAPACITY_ON_DEMAND };
        Offering { zone: "z1".into(), capacity_type: ct.into(), price: 0.1, available: true, reservation }
    }

    #[test]
    fn reservation_type_and_interruptible_requirements_pick_the_offerings_that_carry_them() {
        let block = offering(Some(Reservation {
            id: "cr-1".into(),
            capacity: 1,
            kind: RESERVATION_CAPACITY_BLOCK.into(),
            interruptible: false,
            end: None,
            usable: true,
        }));
        let odcr = offering(Some(Reservation {
            id: "cr-2".into(),
            capacity: 1,
            kind: RESERVATION_DEFAULT.into(),
            interruptible: true,
            end: None,
            usable: true,
        }));
        let od = offering(None);
        let with = |key: &str, r: Requirement| {
            let mut reqs = Requirements::new();
            reqs.set(key, r);
            reqs
        };
        let blocks = with(aws::CAPACITY_RESERVATION_TYPE, Requirement::in_values(["capacity-block"]));
        assert_eq!([&block, &odcr, &od].map(|o| o.compatible(&blocks)), [true, false, false]);
        let steady = with(aws::CAPACITY_RESERVATION_INTERRUPTIBLE, Requirement::not_in(["true"]));
        assert_eq!(
            [&block, &odcr, &od].map(|o| o.compatible(&steady)),
            [true, false, true],
            "a missing label is NotIn"
        );
        let none = with(aws::CAPACITY_RESERVATION_TYPE, Requirement::does_not_exist());
        assert_eq!([&block, &odcr, &od].map(|o| o.compatible(&none)), [false, false, true]);
    }
}
