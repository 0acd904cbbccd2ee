//! The unavailable-offerings cache (aws.md §3.5): offerings EC2 just said it can't fill, kept out of launches and
//! out of the catalog the engine plans with for 3 minutes, so the next attempt goes to the next cheapest offering
//! instead of failing the same way. Time is passed in, so the cache is pure and testable.

use std::collections::BTreeMap;

use crate::engine::catalog::Catalog;
use crate::engine::provisioning::Millis;

/// How long an offering stays out after a capacity error or a spot interruption.
pub const TTL: Millis = 3 * 60 * 1000;

/// CreateFleet error codes that mean "no capacity here now". `SpotMaxPriceTooLow` is one since v1.14.3 and v1.15.0
/// (the spot price is above the fleet's limit: on-demand, or a lower-weight pool, takes over).
pub const CAPACITY_ERRORS: [&str; 9] = [
    "InsufficientInstanceCapacity",
    "MaxSpotInstanceCountExceeded",
    "VcpuLimitExceeded",
    "UnfulfillableCapacity",
    "Unsupported",
    "InsufficientFreeAddressesInSubnet",
    "MaxFleetCountExceeded",
    "ReservationCapacityExceeded",
    "SpotMaxPriceTooLow",
];

pub fn is_capacity_error(code: &str) -> bool {
    CAPACITY_ERRORS.contains(&code)
}

#[derive(Debug, Clone, Default)]
pub struct Unavailable {
    /// (capacity type, instance type, zone) → until.
    offerings: BTreeMap<(String, String, String), Millis>,
    /// A whole capacity type (spot without the service-linked role) → until.
    capacity_types: BTreeMap<String, Millis>,
}

impl Unavailable {
    pub fn mark(&mut self, capacity_type: &str, instance_type: &str, zone: &str, now: Millis) {
        self.offerings.insert((capacity_type.into(), instance_type.into(), zone.into()), now + TTL);
    }

    pub fn mark_capacity_type(&mut self, capacity_type: &str, now: Millis) {
        self.capacity_types.insert(capacity_type.into(), now + TTL);
    }

    pub fn is_unavailable(&self, capacity_type: &str, instance_type: &str, zone: &str, now: Millis) -> bool {
        self.capacity_types.get(capacity_type).is_some_and(|until| *until > now)
            || self
                .offerings
                .get(&(capacity_type.to_string(), instance_type.to_string(), zone.to_string()))
                .is_some_and(|until| *until > now)
    }

    /// Drops expired entries.
    pub fn expire(&mut self, now: Millis) {
        self.offerings.retain(|_, until| *until > now);
        self.capacity_types.retain(|_, until| *until > now);
    }

    pub fn is_empty(&self) -> bool {
        self.offerings.is_empty() && self.capacity_types.is_empty()
    }

    /// The catalog with the offerings marked here made unavailable.
    pub fn apply(&self, catalog: &mut Catalog, now: Millis) {
        if self.is_empty() {
            return;
        }
        for t in &mut catalog.instance_types {
            let hit =
                t.offerings.iter().any(|o| o.available && self.is_unavailable(&o.capacity_type, &t.name, &o.zone, now));
            if hit {
                let t = std::sync::Arc::make_mut(t);
                for o in &mut t.offerings {
                    if self.is_unavailable(&o.capacity_type, &t.name, &o.zone, now) {
                        o.available = false;
                        if let Some(r) = &mut o.reservation {
                            r.usable = false;
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_expire_after_three_minutes() {
        let mut u = Unavailable::default();
        u.mark("spot", "m5.large", "us-east-1a", 1_000);
        assert!(u.is_unavailable("spot", "m5.large", "us-east-1a", 1_000 + TTL - 1));
        assert!(!u.is_unavailable("spot", "m5.large", "us-east-1b", 1_000));
        assert!(!u.is_unavailable("on-demand", "m5.large", "us-east-1a", 1_000));
        assert!(!u.is_unavailable("spot", "m5.large", "us-east-1a", 1_000 + TTL));
        u.mark_capacity_type("spot", 0);
        assert!(u.is_unavailable("spot", "c5.large", "us-east-1c", 10));
        u.expire(TTL + 1_001);
        assert!(u.is_empty());
    }

    #[test]
    fn the_catalog_loses_exactly_the_marked_offerings() {
        let mut c = crate::engine::catalog::aws::aws_catalog("us-east-1", None, None, 1).unwrap();
        let before: usize = c.instance_types.iter().flat_map(|t| &t.offerings).filter(|o| o.available).count();
        let mut u = Unavailable::default();
        u.mark("spot", "m5.large", "us-east-1a", 0);
        u.apply(&mut c, 1);
        let after: usize = c.instance_types.iter().flat_map(|t| &t.offerings).filter(|o| o.available).count();
        assert_eq!(after, before - 1);
        let m5 = c.get("m5.large").unwrap();
        assert!(m5.offerings.iter().any(|o| o.capacity_type == "spot" && o.zone == "us-east-1a" && !o.available));
        assert!(is_capacity_error("InsufficientInstanceCapacity") && !is_capacity_error("InvalidParameterValue"));
        assert!(is_capacity_error("SpotMaxPriceTooLow"), "an ICE since v1.14.3 and v1.15.0");
    }
}
