//! Capacity reservation discovery for an EC2NodeClass (upstream's `capacityreservation` provider and the
//! nodeclass controller's part of it, engine-v1x.md §4): `capacityReservationSelectorTerms` become
//! `DescribeCapacityReservations` calls, and what they find becomes `status.capacityReservations` (sorted by id;
//! a capacity block turns `expiring` 40 minutes before its end) with each reservation's available instance count.
//!
//! The cloud ([`super::cloud::AwsCloud`]) turns the status into `reserved` offerings of the class's catalog, keeps
//! each reservation's availability count, and launches into them ([`super::launch`]).

use std::collections::BTreeMap;

use aws_sdk_ec2::Client;
use aws_sdk_ec2::types::{CapacityReservation, Filter};

use super::config::AwsError;
use crate::engine::api::ec2nodeclass::{CapacityReservationSelectorTerm, CapacityReservationStatus};

/// How long before a capacity block's end it is `expiring` (its instances are then reclaimed by Karpenter).
pub const EXPIRING_BEFORE_SECS: i64 = 40 * 60;

/// One `DescribeCapacityReservations` call: by ids, or by filters (always with `state=active`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Query {
    Ids(Vec<String>),
    Filters(Vec<(String, Vec<String>)>),
}

/// The terms as calls: every `id` in one by-id call, each other term its own filtered call (terms are ORed,
/// fields within a term ANDed; a tag value `*` means the key exists).
pub fn queries(terms: &[CapacityReservationSelectorTerm]) -> Vec<Query> {
    let mut out = Vec::new();
    let ids: Vec<String> = terms.iter().filter_map(|t| t.id.clone()).collect();
    if !ids.is_empty() {
        out.push(Query::Ids(ids));
    }
    for t in terms.iter().filter(|t| t.id.is_none()) {
        let mut filters: Vec<(String, Vec<String>)> = t
            .tags
            .iter()
            .map(
                |(k, v)| {
                    if v == "*" { ("tag-key".into(), vec![k.clone()]) } else { (format!("tag:{k}"), vec![v.clone()]) }
                },
            )
            .collect();
        if let Some(o) = &t.owner_id {
            filters.push(("owner-id".into(), vec![o.clone()]));
        }
        if let Some(c) = &t.instance_match_criteria {
            filters.push(("instance-match-criteria".into(), vec![c.clone()]));
        }
        filters.push(("state".into(), vec!["active".into()]));
        out.push(Query::Filters(filters));
    }
    out
}

/// A reservation found: how the status shows it, and how many instances it can still take.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    pub status: CapacityReservationStatus,
    pub available: i64,
}

/// Reads EC2's answer at `now` (seconds): active reservations not yet ended, with a known match criteria and type,
/// once each, sorted by id. A capacity block within [`EXPIRING_BEFORE_SECS`] of its end is `expiring`.
pub fn read(reservations: &[CapacityReservation], now: i64) -> Vec<Found> {
    let mut out: BTreeMap<String, Found> = BTreeMap::new();
    for r in reservations {
        let Some(id) = r.capacity_reservation_id.clone() else { continue };
        if r.state.as_ref().is_some_and(|s| s.as_str() != "active") {
            continue;
        }
        let end = r.end_date.map(|d| d.secs());
        if end.is_some_and(|e| e <= now) {
            continue;
        }
        let criteria = r.instance_match_criteria.as_ref().map(|c| c.as_str().to_string()).unwrap_or_default();
        if criteria != "open" && criteria != "targeted" {
            tracing::warn!(reservation = %id, criteria = %criteria, "capacity reservation skipped: unknown instance match criteria");
            continue;
        }
        let kind = r.reservation_type.as_ref().map_or("default".to_string(), |t| t.as_str().to_string());
        if kind != "default" && kind != "capacity-block" {
            tracing::warn!(reservation = %id, kind = %kind, "capacity reservation skipped: unknown reservation type");
            continue;
        }
        let expiring = kind == "capacity-block" && end.is_some_and(|e| now >= e - EXPIRING_BEFORE_SECS);
        let status = CapacityReservationStatus {
            availability_zone: r.availability_zone.clone().unwrap_or_default(),
            end_time: end.map(|e| crate::engine::lifecycle::rfc3339(e * 1000)),
            id: id.clone(),
            instance_match_criteria: criteria,
            instance_type: r.instance_type.clone().unwrap_or_default(),
            owner_id: r.owner_id.clone().unwrap_or_default(),
            reservation_type: kind,
            state: if expiring { "expiring" } else { "active" }.into(),
            interruptible: r.interruptible.unwrap_or(false),
        };
        out.entry(id).or_insert(Found { status, available: i64::from(r.available_instance_count.unwrap_or(0)) });
    }
    out.into_values().collect()
}

/// Runs the terms' calls and reads the answers at `now` (seconds). An id EC2 does not know is skipped, as
/// upstream does; other failures are errors.
pub async fn describe(
    ec2: &Client,
    terms: &[CapacityReservationSelectorTerm],
    now: i64,
) -> Result<Vec<Found>, AwsError> {
    let mut all = Vec::new();
    for q in queries(terms) {
        match q {
            Query::Ids(ids) => {
                // One id at a time: a single unknown id fails the whole by-id call.
                for id in ids {
                    match ec2.describe_capacity_reservations().capacity_reservation_ids(&id).send().await {
                        Ok(out) => all.extend(out.capacity_reservations.unwrap_or_default()),
                        Err(e)
                            if e.as_service_error()
                                .and_then(|s| aws_sdk_ec2::error::ProvideErrorMetadata::code(s))
                                .is_some_and(|c| c.contains("NotFound")) =>
                        {
                            tracing::info!(reservation = %id, "capacity reservation not found; skipped");
                        }
                        Err(e) => return Err(AwsError::call(format!("DescribeCapacityReservations {id}"), e)),
                    }
                }
            }
            Query::Filters(filters) => {
                let filters: Vec<Filter> = filters
                    .iter()
                    .map(|(n, v)| Filter::builder().name(n).set_values(Some(v.clone())).build())
                    .collect();
                let mut pages = ec2
                    .describe_capacity_reservations()
                    .set_filters(Some(filters))
                    .max_results(1000)
                    .into_paginator()
                    .send();
                while let Some(page) = pages.next().await {
                    let page = page.map_err(|e| AwsError::call("DescribeCapacityReservations", e))?;
                    all.extend(page.capacity_reservations.unwrap_or_default());
                }
            }
        }
    }
    Ok(read(&all, now))
}

/// The NodeClaims running in reservations that are `expiring` (capacity blocks within 40 minutes of their end),
/// by their `karpenter.k8s.aws/capacity-reservation-id` label: what upstream's `capacityreservation.expiration`
/// deletes.
pub fn expiring_claims<'a>(
    claims: impl Iterator<Item = &'a crate::engine::api::NodeClaim>,
    statuses: &[&CapacityReservationStatus],
) -> Vec<String> {
    let expiring: std::collections::BTreeSet<&str> =
        statuses.iter().filter(|s| s.state == "expiring").map(|s| s.id.as_str()).collect();
    if expiring.is_empty() {
        return Vec::new();
    }
    let mut out: Vec<String> = claims
        .filter(|c| {
            c.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(crate::engine::catalog::aws::CAPACITY_RESERVATION_ID))
                .is_some_and(|id| expiring.contains(id.as_str()))
        })
        .map(|c| c.name().to_string())
        .collect();
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_ec2::primitives::DateTime;
    use aws_sdk_ec2::types::{CapacityReservationState, CapacityReservationType, InstanceMatchCriteria};

    const NOW: i64 = 1_800_000_000;

    fn cr(id: &str, kind: Option<CapacityReservationType>, end: Option<i64>) -> CapacityReservation {
        let mut b = CapacityReservation::builder()
            .capacity_reservation_id(id)
            .instance_type("m5.large")
            .availability_zone("us-east-1a")
            .owner_id("123456789012")
            .available_instance_count(3)
            .state(CapacityReservationState::Active)
            .instance_match_criteria(InstanceMatchCriteria::Targeted);
        if let Some(k) = kind {
            b = b.reservation_type(k);
        }
        if let Some(e) = end {
            b = b.end_date(DateTime::from_secs(e));
        }
        b.build()
    }

    #[test]
    fn terms_become_by_id_and_filtered_calls() {
        let term = |tags: &[(&str, &str)], id: Option<&str>, owner: Option<&str>, criteria: Option<&str>| {
            CapacityReservationSelectorTerm {
                tags: tags.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
                id: id.map(Into::into),
                owner_id: owner.map(Into::into),
                instance_match_criteria: criteria.map(Into::into),
            }
        };
        let q = queries(&[
            term(&[], Some("cr-1"), None, None),
            term(&[("team", "ml"), ("gpu", "*")], None, Some("123456789012"), Some("targeted")),
            term(&[], Some("cr-2"), None, None),
        ]);
        assert_eq!(q[0], Query::Ids(vec!["cr-1".into(), "cr-2".into()]));
        assert_eq!(
            q[1],
            Query::Filters(vec![
                ("tag-key".into(), vec!["gpu".into()]),
                ("tag:team".into(), vec!["ml".into()]),
                ("owner-id".into(), vec!["123456789012".into()]),
                ("instance-match-criteria".into(), vec!["targeted".into()]),
                ("state".into(), vec!["active".into()]),
            ])
        );
    }

    #[test]
    fn a_capacity_block_is_expiring_40_minutes_before_its_end_and_ended_ones_are_dropped() {
        // › "should mark capacity blocks as expiring 40 minutes prior to their endDate"
        let found = read(
            &[
                cr("cr-b", Some(CapacityReservationType::CapacityBlock), Some(NOW + 40 * 60)),
                cr("cr-a", None, Some(NOW + 40 * 60)),
                cr("cr-c", Some(CapacityReservationType::CapacityBlock), Some(NOW + 41 * 60)),
                cr("cr-gone", None, Some(NOW)),
                cr("cr-a", None, None),
            ],
            NOW,
        );
        let states: Vec<(&str, &str, &str)> = found
            .iter()
            .map(|f| (f.status.id.as_str(), f.status.reservation_type.as_str(), f.status.state.as_str()))
            .collect();
        assert_eq!(
            states,
            [
                ("cr-a", "default", "active"),
                ("cr-b", "capacity-block", "expiring"),
                ("cr-c", "capacity-block", "active")
            ]
        );
        assert_eq!(found[0].available, 3);
        assert_eq!(
            found[1].status.end_time.as_deref(),
            Some(crate::engine::lifecycle::rfc3339((NOW + 2400) * 1000).as_str())
        );
        assert_eq!(found[0].status.owner_id, "123456789012");
        assert_eq!(found[0].status.instance_match_criteria, "targeted");

        // The claims in the expiring block are the ones to delete.
        let claim = |name: &str, id: Option<&str>| {
            let mut c = crate::engine::api::NodeClaim::new(name, Default::default());
            c.metadata.labels = id
                .map(|id| [(crate::engine::catalog::aws::CAPACITY_RESERVATION_ID.to_string(), id.to_string())].into());
            c
        };
        let claims = [claim("a", Some("cr-a")), claim("b", Some("cr-b")), claim("c", None), claim("d", Some("cr-c"))];
        let statuses: Vec<_> = found.iter().map(|f| &f.status).collect();
        assert_eq!(expiring_claims(claims.iter(), &statuses), ["b"]);
    }
}
