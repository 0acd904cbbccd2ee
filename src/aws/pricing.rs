//! Prices (aws.md §2): on-demand from the Pricing API's GetProducts when it can be read, the embedded us-east-1
//! table otherwise; spot from DescribeSpotPriceHistory. New data is merged over the old (a refresh never loses a
//! price), and each side remembers when it was fetched so the dashboard can say where a figure came from.

use std::collections::HashMap;

use aws_config::{Region, SdkConfig};
use aws_sdk_pricing::types::{Filter as PricingFilter, FilterType};
use serde_json::Value;
use thiserror::Error;

use crate::engine::catalog::PriceSource;
use crate::engine::catalog::aws::{TypeFacts, static_on_demand_price, static_price_date};
use crate::engine::labels;

use super::config::AwsError;

/// The prices the live catalog is built with.
#[derive(Debug, Clone, Default)]
pub struct PriceBook {
    /// Instance type → USD/h, from the Pricing API.
    pub on_demand: HashMap<String, f64>,
    pub on_demand_at: Option<String>,
    /// (instance type, zone) → USD/h, the latest record of each.
    pub spot: HashMap<(String, String), f64>,
    /// Set after the first successful spot fetch; from then on a zone without a record has no spot price.
    pub spot_at: Option<String>,
}

impl PriceBook {
    /// The price of one offering: `None` means no price, which makes the offering unavailable.
    pub fn price(&self, f: &TypeFacts, capacity_type: &str, zone: &str) -> Option<f64> {
        let on_demand = self.on_demand.get(&f.name).copied().or_else(|| static_on_demand_price(&f.name));
        if capacity_type != labels::CAPACITY_SPOT {
            return on_demand;
        }
        match &self.spot_at {
            // Before the first spot fetch, spot is priced like on-demand (upstream's start-up default).
            None => on_demand,
            Some(_) => self.spot.get(&(f.name.clone(), zone.to_string())).copied(),
        }
    }

    /// Where these prices came from, for the header.
    pub fn source(&self) -> PriceSource {
        let date = static_price_date().unwrap_or_default();
        match (&self.on_demand_at, &self.spot_at) {
            (Some(at), _) => PriceSource::Live { at: at.clone() },
            (None, Some(at)) => PriceSource::LiveSpot { at: at.clone(), date },
            (None, None) => PriceSource::Static { date, fallback_region: None },
        }
    }

    /// Merges a spot fetch over what is known.
    pub fn merge_spot(&mut self, prices: HashMap<(String, String), f64>, at: String) {
        self.spot.extend(prices);
        self.spot_at = Some(at);
    }

    /// Merges an on-demand fetch over what is known.
    pub fn merge_on_demand(&mut self, prices: HashMap<String, f64>, at: String) {
        self.on_demand.extend(prices);
        self.on_demand_at = Some(at);
    }
}

/// A price refresh that failed, with what stands in for the prices it would have read: the warning it is logged
/// with says both, so "the header says embedded prices" has its reason next to it.
#[derive(Debug, Error)]
pub enum PriceError {
    #[error("{}", on_demand_fallback(.error, .last_read.as_deref(), .table_date.as_deref()))]
    OnDemand { error: AwsError, last_read: Option<String>, table_date: Option<String> },
    #[error("{}", spot_fallback(.error, .last_read.as_deref()))]
    Spot { error: AwsError, last_read: Option<String> },
}

/// Why the Pricing API could not be read, and where on-demand prices come from meanwhile: the last live read
/// when there was one (the embedded table for types it lacked), else the embedded table and its date.
pub fn on_demand_fallback(error: &AwsError, last_read: Option<&str>, table_date: Option<&str>) -> String {
    let table = match table_date {
        Some(d) if !d.is_empty() => format!("the embedded table dated {d}"),
        _ => "the embedded table".to_string(),
    };
    match last_read {
        None => format!("the Pricing API could not be read ({error}); on-demand prices come from {table}"),
        Some(at) => format!(
            "the Pricing API could not be read ({error}); on-demand prices stay as read at {at} (from {table} for \
             types that read lacked)"
        ),
    }
}

/// Why spot prices could not be read, and what spot offerings are priced at meanwhile.
pub fn spot_fallback(error: &AwsError, last_read: Option<&str>) -> String {
    match last_read {
        None => format!(
            "spot prices could not be read ({error}); spot offerings are priced like on-demand until they can be"
        ),
        Some(at) => format!("spot prices could not be read ({error}); spot prices stay as read at {at}"),
    }
}

/// DescribeSpotPriceHistory for Linux from now on: the latest record per (type, zone). Records without a time or
/// with an unreadable price are skipped; no record at all is an error (upstream treats it as one too).
pub async fn spot_prices(ec2: &aws_sdk_ec2::Client) -> Result<HashMap<(String, String), f64>, AwsError> {
    let mut latest: HashMap<(String, String), (i64, f64)> = HashMap::new();
    let mut pages = ec2
        .describe_spot_price_history()
        .product_descriptions("Linux/UNIX")
        .product_descriptions("Linux/UNIX (Amazon VPC)")
        .start_time(aws_sdk_ec2::primitives::DateTime::from_secs(chrono::Utc::now().timestamp()))
        .max_results(1000)
        .into_paginator()
        .send();
    while let Some(page) = pages.next().await {
        let page = page.map_err(|e| AwsError::call("DescribeSpotPriceHistory", e))?;
        for r in page.spot_price_history() {
            let (Some(t), Some(zone), Some(ts), Some(price)) =
                (&r.instance_type, &r.availability_zone, r.timestamp, r.spot_price.as_deref())
            else {
                continue;
            };
            let Ok(price) = price.parse::<f64>() else { continue };
            if !price.is_finite() || price < 0.0 {
                continue;
            }
            let key = (t.as_str().to_string(), zone.clone());
            let secs = ts.secs();
            if latest.get(&key).is_none_or(|(at, _)| *at <= secs) {
                latest.insert(key, (secs, price));
            }
        }
    }
    if latest.is_empty() {
        return Err(AwsError::other("DescribeSpotPriceHistory", "no spot price records returned"));
    }
    Ok(latest.into_iter().map(|(k, (_, p))| (k, p)).collect())
}

/// The Pricing API lives in a few regions only; this is the one that serves `region`.
pub fn pricing_endpoint_region(region: &str) -> &'static str {
    if region.starts_with("ap-") {
        "ap-south-1"
    } else if region.starts_with("cn-") {
        "cn-northwest-1"
    } else if region.starts_with("eu-") {
        "eu-central-1"
    } else {
        "us-east-1"
    }
}

/// One GetProducts price-list entry: (instance type, USD/h) when it has a positive numeric price.
pub fn parse_price_list_entry(json: &str, currency: &str) -> Option<(String, f64)> {
    let v: Value = serde_json::from_str(json).ok()?;
    let instance_type = v.pointer("/product/attributes/instanceType")?.as_str()?.to_string();
    let terms = v.pointer("/terms/OnDemand")?.as_object()?;
    for term in terms.values() {
        let Some(dims) = term.get("priceDimensions").and_then(Value::as_object) else { continue };
        for d in dims.values() {
            let Some(p) = d.pointer(&format!("/pricePerUnit/{currency}")).and_then(Value::as_str) else { continue };
            if let Ok(p) = p.parse::<f64>()
                && p.is_finite()
                && p > 0.0
            {
                return Some((instance_type, p));
            }
        }
    }
    None
}

fn term(field: &str, value: &str) -> Result<PricingFilter, AwsError> {
    PricingFilter::builder()
        .r#type(FilterType::TermMatch)
        .field(field)
        .value(value)
        .build()
        .map_err(|e| AwsError::call("GetProducts filter", e))
}

/// On-demand Linux prices of `region` from the Pricing API (shared and dedicated-metal products). Either query
/// returning nothing is an error, so a half-answered refresh is not mistaken for the whole table.
pub async fn on_demand_prices(sdk: &SdkConfig, region: &str) -> Result<HashMap<String, f64>, AwsError> {
    let config =
        aws_sdk_pricing::config::Builder::from(sdk).region(Region::new(pricing_endpoint_region(region))).build();
    let client = aws_sdk_pricing::Client::from_conf(config);
    let currency = if region.starts_with("cn-") { "CNY" } else { "USD" };
    let mut all = HashMap::new();
    for (tenancy, family) in [("Shared", "Compute Instance"), ("Dedicated", "Compute Instance (bare metal)")] {
        let filters = vec![
            term("regionCode", region)?,
            term("serviceCode", "AmazonEC2")?,
            term("preInstalledSw", "NA")?,
            term("operatingSystem", "Linux")?,
            term("capacitystatus", "Used")?,
            term("marketoption", "OnDemand")?,
            term("tenancy", tenancy)?,
            term("productFamily", family)?,
        ];
        let mut found = 0usize;
        let mut pages = client
            .get_products()
            .service_code("AmazonEC2")
            .set_filters(Some(filters))
            .max_results(100)
            .into_paginator()
            .send();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| AwsError::call("GetProducts", e))?;
            for entry in page.price_list() {
                if let Some((t, p)) = parse_price_list_entry(entry, currency) {
                    all.insert(t, p);
                    found += 1;
                }
            }
        }
        if found == 0 {
            return Err(AwsError::other("GetProducts", format!("no {tenancy} on-demand prices for {region}")));
        }
    }
    Ok(all)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(name: &str) -> TypeFacts {
        TypeFacts { name: name.into(), ..Default::default() }
    }

    #[test]
    fn price_list_entries_give_the_on_demand_usd_price() {
        let entry = r#"{"product":{"attributes":{"instanceType":"m5.large"}},
            "terms":{"OnDemand":{"X.Y":{"priceDimensions":{"X.Y.Z":{"pricePerUnit":{"USD":"0.0960000000"}}}}}}}"#;
        assert_eq!(parse_price_list_entry(entry, "USD"), Some(("m5.large".into(), 0.096)));
        let zero = entry.replace("0.0960000000", "0.0000000000");
        assert_eq!(parse_price_list_entry(&zero, "USD"), None, "zero prices are ignored");
        assert_eq!(parse_price_list_entry("not json", "USD"), None);
        assert_eq!(parse_price_list_entry(entry, "CNY"), None);
    }

    #[test]
    fn spot_is_priced_like_on_demand_until_fetched_then_only_where_recorded() {
        let mut book = PriceBook::default();
        let od = static_on_demand_price("m5.large").expect("in the embedded table");
        assert_eq!(book.price(&facts("m5.large"), "spot", "us-east-1a"), Some(od));
        assert!(matches!(book.source(), PriceSource::Static { .. }));
        book.merge_spot([(("m5.large".to_string(), "us-east-1a".to_string()), 0.031)].into(), "t1".into());
        assert_eq!(book.price(&facts("m5.large"), "spot", "us-east-1a"), Some(0.031));
        assert_eq!(book.price(&facts("m5.large"), "spot", "us-east-1b"), None, "no record: no price");
        assert_eq!(book.price(&facts("m5.large"), "on-demand", "us-east-1b"), Some(od));
        assert!(matches!(book.source(), PriceSource::LiveSpot { .. }));
        book.merge_on_demand([("m5.large".to_string(), 0.1)].into(), "t2".into());
        assert_eq!(book.price(&facts("m5.large"), "on-demand", "us-east-1b"), Some(0.1));
        assert_eq!(book.source(), PriceSource::Live { at: "t2".into() });
        // A later spot fetch without a zone keeps the earlier record (merge, never shrink).
        book.merge_spot(HashMap::new(), "t3".into());
        assert_eq!(book.price(&facts("m5.large"), "spot", "us-east-1a"), Some(0.031));
    }

    #[test]
    fn fallback_warnings_say_why_and_what_stands_in() {
        let html = AwsError::other(
            "GetProducts",
            crate::aws::config::describe_foreign_answer(404, b"<html><title>404 Not Found</title></html>").unwrap(),
        );
        let first = PriceError::OnDemand { error: html, last_read: None, table_date: Some("2026-07-20".into()) };
        assert_eq!(
            first.to_string(),
            "the Pricing API could not be read (GetProducts: HTTP 404 with an HTML page (\"404 Not Found\") instead \
             of an AWS answer); on-demand prices come from the embedded table dated 2026-07-20"
        );
        let denied = || AwsError::other("GetProducts", "AccessDeniedException: not allowed");
        let later =
            PriceError::OnDemand { error: denied(), last_read: Some("2026-11-24T12:00:00Z".into()), table_date: None };
        assert_eq!(
            later.to_string(),
            "the Pricing API could not be read (GetProducts: AccessDeniedException: not allowed); on-demand prices \
             stay as read at 2026-11-24T12:00:00Z (from the embedded table for types that read lacked)"
        );
        let spot = PriceError::Spot { error: denied(), last_read: None };
        assert!(spot.to_string().starts_with("spot prices could not be read (GetProducts: AccessDeniedException"));
        assert!(spot.to_string().ends_with("priced like on-demand until they can be"));
    }

    #[test]
    fn pricing_endpoints_by_partition_and_continent() {
        assert_eq!(pricing_endpoint_region("ap-northeast-1"), "ap-south-1");
        assert_eq!(pricing_endpoint_region("eu-west-1"), "eu-central-1");
        assert_eq!(pricing_endpoint_region("us-west-2"), "us-east-1");
        assert_eq!(pricing_endpoint_region("cn-north-1"), "cn-northwest-1");
    }
}
