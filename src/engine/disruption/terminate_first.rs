//! Terminate-first (Karpenter v1.15, gates `TerminateFirstDrift` and `TerminateFirstRepair`; spec engine-v115 §2):
//! when a capacity-constrained pool cannot stage a replacement before its candidate goes — a static pool at
//! `limits.nodes`, or a node in a full capacity reservation with nowhere else for its pods — the candidate is deleted
//! with no replacement and provisioning refills the slot it freed once its pods are pending. Budgets still pace the
//! deletes and PDBs still hold the drain.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::candidates::Candidate;
use super::consolidation::Simulator;
use super::{Command, Context, Method};
use crate::engine::api::NodePool;
use crate::engine::catalog::{InstanceType, OfferingFilter};
use crate::engine::labels;

/// Instance types per NodePool, as a disruption pass reads them.
pub(super) type Catalogs = BTreeMap<String, Vec<Arc<InstanceType>>>;

/// The catalogs with one slot of reservation `id` given back, as deleting a node in it would: its offerings that are
/// full but healthy become available with room for one more. `None` when no offering of it is healthy (expiring,
/// refused by EC2, gone): freeing the slot would not let anything launch there.
pub(super) fn credited(catalogs: &Catalogs, id: &str) -> Option<Catalogs> {
    let holds = |t: &InstanceType| t.offerings.iter().any(|o| o.reservation.as_ref().is_some_and(|r| r.id == id));
    let mut any = false;
    let mut out = catalogs.clone();
    for types in out.values_mut() {
        for t in types.iter_mut().filter(|t| holds(t)) {
            let t = Arc::make_mut(t);
            for o in &mut t.offerings {
                if let Some(r) = o.reservation.as_mut().filter(|r| r.id == id && r.usable) {
                    r.capacity = r.capacity.max(0) + 1;
                    o.available = true;
                    any = true;
                }
            }
        }
    }
    any.then_some(out)
}

/// Pass 2 of a dynamic candidate's replacement (upstream `SimulateSchedulingWithReservedFallback`): the candidate
/// runs in a capacity reservation and pass 1 found no place for its pods; would they all fit, strictly (no falling
/// back from a reservation they need), once its own slot is freed? Only then does deleting it first help.
pub(super) fn fits_after_delete<'s>(ctx: &Context<'_>, sim: &Simulator<'s>, c: &Candidate) -> bool {
    if c.capacity_type != labels::CAPACITY_RESERVED {
        return false;
    }
    let Some(id) = c.reservation_id.as_deref() else { return false };
    let Some(catalogs) = credited(ctx.catalogs, id) else { return false };
    let strict = sim.strict_with(ctx, &catalogs);
    strict.run(&[c], false).errors.is_empty()
}

/// A delete-only command that goes first: `candidates` leave, nothing is launched for them now.
pub(super) fn command(ctx: &Context<'_>, method: Method, candidates: Vec<Candidate>) -> Command {
    Command {
        method,
        candidates,
        replacements: Vec::new(),
        savings_per_hour: 0.0,
        computed_at: ctx.now,
        terminate_first: true,
        repair: None,
    }
}

/// Whether the static pool could refill a slot: upstream's static provisioning refuses NotReady and deleting pools,
/// so going first there would strand the workload.
pub(super) fn refillable(pool: &NodePool) -> bool {
    !pool.is_not_ready() && !pool.is_deleting()
}

/// For a static pool whose template launches only into capacity reservations and none of them has room: the
/// reservations still offered (full but healthy). A node holding a slot in one of them frees what its own refill
/// needs. `None` when the template can launch elsewhere or some reservation has room.
pub(super) fn full_reservations(ctx: &Context<'_>, pool: &NodePool) -> Option<BTreeSet<String>> {
    let reqs = crate::engine::drift::pool_requirements(pool);
    let capacity_types = reqs.get(labels::CAPACITY_TYPE);
    let reserved_only = reqs.has(labels::CAPACITY_TYPE)
        && capacity_types.has(labels::CAPACITY_RESERVED)
        && [labels::CAPACITY_ON_DEMAND, labels::CAPACITY_SPOT].iter().all(|ct| !capacity_types.has(ct));
    if !reserved_only {
        return None;
    }
    let filter = OfferingFilter::new(&reqs);
    let mut offered = BTreeSet::new();
    for t in ctx.catalogs.get(pool.name()).into_iter().flatten() {
        if t.requirements.intersects(&reqs).is_err() {
            continue;
        }
        for o in t.offerings.iter().filter(|o| filter.admits(o)) {
            let Some(r) = &o.reservation else { continue };
            if o.available {
                return None;
            }
            if r.usable {
                offered.insert(r.id.clone());
            }
        }
    }
    Some(offered)
}

/// Whether the candidate runs in one of `offered`.
pub(super) fn holds_slot(c: &Candidate, offered: &BTreeSet<String>) -> bool {
    c.capacity_type == labels::CAPACITY_RESERVED && c.reservation_id.as_ref().is_some_and(|id| offered.contains(id))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::catalog::{Offering, Reservation};
    use crate::engine::requirements::Requirements;

    fn catalogs(capacity: i64, usable: bool) -> Catalogs {
        let reserved = Offering {
            zone: "z1".into(),
            capacity_type: labels::CAPACITY_RESERVED.into(),
            price: 0.0,
            available: capacity > 0,
            reservation: Some(Reservation {
                id: "cr-a".into(),
                capacity,
                kind: "default".into(),
                interruptible: false,
                end: None,
                usable,
            }),
        };
        let od = Offering {
            zone: "z1".into(),
            capacity_type: "on-demand".into(),
            price: 0.1,
            available: true,
            reservation: None,
        };
        let t = InstanceType {
            name: "small".into(),
            requirements: Requirements::new(),
            capacity: Default::default(),
            overhead: Default::default(),
            offerings: vec![reserved, od],
            volume_limits: Default::default(),
        };
        [("a".to_string(), vec![Arc::new(t.clone())]), ("b".to_string(), vec![Arc::new(t)])].into_iter().collect()
    }

    fn reservation(c: &Catalogs, pool: &str) -> (bool, i64) {
        let o = &c[pool][0].offerings[0];
        (o.available, o.reservation.as_ref().map_or(-1, |r| r.capacity))
    }

    #[test]
    fn a_full_healthy_reservation_gets_the_freed_slot_back_in_every_pool() {
        let full = catalogs(0, true);
        assert!(full["a"][0].offerings[0].reservation.as_ref().unwrap().is_full());
        let c = credited(&full, "cr-a").expect("usable");
        assert_eq!(reservation(&c, "a"), (true, 1));
        assert_eq!(reservation(&c, "b"), (true, 1));
        assert_eq!(reservation(&full, "a"), (false, 0), "the pass's own catalogs are untouched");
        assert!(c["a"][0].offerings[1].available, "other offerings as they were");
    }

    #[test]
    fn an_unusable_or_unknown_reservation_gets_nothing_back() {
        assert!(credited(&catalogs(0, false), "cr-a").is_none());
        assert!(credited(&catalogs(0, true), "cr-other").is_none());
        assert!(!catalogs(0, false)["a"][0].offerings[0].reservation.as_ref().unwrap().is_full());
    }
}
