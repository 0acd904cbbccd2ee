//! Capacity reservations within one solve (upstream's `ReservationManager`, engine-v1x.md §4): every NodeClaim
//! being built holds each compatible reservation that still has room, pessimistically (any of its options might
//! launch into any of them), so two claims never count on the same last instance of a reservation. Provisioning is
//! strict: a pod whose claim would find compatible reservations all held elsewhere, or would lose every reservation
//! its claim holds, waits for a later pass instead of falling back (to on-demand, spot or a lower-weight NodePool).
//! Disruption's simulations use the fallback mode, which never refuses. A claim that holds reservations is pinned
//! to them when the solve ends.

use std::collections::{BTreeMap, BTreeSet};

use super::bitset::Bitset;
use super::template::Template;
use crate::engine::explain::PoolRejection;
use crate::engine::requirements::Requirements;

/// What each reservation of the catalog can still take at the start of a solve: the least any NodePool's catalog
/// says (pools may share a reservation, and each pool's view may lag differently).
pub(super) fn starting_capacity(templates: &[Template]) -> BTreeMap<String, i64> {
    let mut out: BTreeMap<String, i64> = BTreeMap::new();
    for tpl in templates {
        let mut seen: BTreeMap<&str, i64> = BTreeMap::new();
        for t in &tpl.types {
            for o in &t.offerings {
                if let Some(r) = &o.reservation {
                    let n = if o.available { r.capacity.max(0) } else { 0 };
                    let e = seen.entry(r.id.as_str()).or_insert(n);
                    *e = (*e).min(n);
                }
            }
        }
        for (id, n) in seen {
            out.entry(id.to_string()).and_modify(|m| *m = (*m).min(n)).or_insert(n);
        }
    }
    out
}

/// The reservations of one solve: what is left of each, and what each claim holds.
#[derive(Debug, Clone, Default)]
pub(super) struct Reservations {
    left: BTreeMap<String, i64>,
    held: BTreeMap<usize, BTreeSet<String>>,
    /// Provisioning (strict) or a disruption simulation (fallback).
    strict: bool,
}

impl Reservations {
    pub(super) fn new(capacity: &BTreeMap<String, i64>, strict: bool) -> Reservations {
        Reservations { left: capacity.clone(), held: BTreeMap::new(), strict }
    }

    /// Whether the catalog has any reservation at all (then nothing here costs anything).
    pub(super) fn any(&self) -> bool {
        !self.left.is_empty()
    }

    /// What claim `c` would hold with `types` under `reqs`: every available, compatible reserved offering's
    /// reservation it holds already or that has room. In strict mode, an error when compatible reservations exist
    /// but none can be held, or when the claim would lose all it holds.
    pub(super) fn check(
        &self,
        c: usize,
        tpl: &Template,
        types: &Bitset,
        reqs: &Requirements,
    ) -> Result<BTreeSet<String>, PoolRejection> {
        let mine = self.held.get(&c);
        let mut compatible: BTreeSet<&str> = BTreeSet::new();
        for ti in types.iter() {
            for o in &tpl.types[ti].offerings {
                if let Some(r) = &o.reservation
                    && o.available
                    && o.compatible(reqs)
                {
                    compatible.insert(r.id.as_str());
                }
            }
        }
        let holdable: BTreeSet<String> = compatible
            .iter()
            .filter(|id| mine.is_some_and(|m| m.contains(**id)) || self.left.get(**id).is_some_and(|n| *n > 0))
            .map(|id| id.to_string())
            .collect();
        if self.strict && holdable.is_empty() {
            if !compatible.is_empty() {
                return Err(PoolRejection::ReservedOffering {
                    detail: format!(
                        "every compatible capacity reservation ({}) is taken by other NodeClaims; waiting for it \
                         rather than falling back",
                        compatible.iter().copied().collect::<Vec<_>>().join(", ")
                    ),
                });
            }
            if mine.is_some_and(|m| !m.is_empty()) {
                return Err(PoolRejection::ReservedOffering {
                    detail: "the pod would take the NodeClaim off the capacity reservations it holds".into(),
                });
            }
        }
        Ok(holdable)
    }

    /// Claim `c` now holds exactly `ids` (idempotent per reservation; what it no longer holds is released).
    pub(super) fn hold(&mut self, c: usize, ids: BTreeSet<String>) {
        let before = self.held.remove(&c).unwrap_or_default();
        for id in before.difference(&ids) {
            *self.left.entry(id.clone()).or_default() += 1;
        }
        for id in ids.difference(&before) {
            *self.left.entry(id.clone()).or_default() -= 1;
        }
        if !ids.is_empty() {
            self.held.insert(c, ids);
        }
    }

    /// The reservations claim `c` holds.
    pub(super) fn held_by(&self, c: usize) -> Option<&BTreeSet<String>> {
        self.held.get(&c).filter(|h| !h.is_empty())
    }
}
