//! The interruption messages EventBridge puts on the SQS queue (aws.md §5): the raw event JSON, no SNS envelope.
//! Parsing is pure and total: every body gives a [`Message`] or a [`ParseError`] that says what was wrong, and an
//! event this tool doesn't act on is [`Kind::NoOp`] rather than an error, so it is deleted like upstream does.

use serde::Deserialize;
use thiserror::Error;

pub use crate::controller::interruption::{Kind, Message};

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ParseError {
    #[error("not JSON: {0}")]
    NotJson(String),
    #[error("{detail_type}: {field} missing or not a string")]
    Field { detail_type: String, field: &'static str },
}

#[derive(Deserialize)]
struct Envelope {
    #[serde(default)]
    version: String,
    #[serde(default)]
    id: String,
    #[serde(default, rename = "detail-type")]
    detail_type: String,
    #[serde(default)]
    source: String,
    #[serde(default)]
    time: String,
    #[serde(default)]
    detail: serde_json::Value,
}

fn text<'a>(detail: &'a serde_json::Value, field: &'static str, dt: &str) -> Result<&'a str, ParseError> {
    detail.get(field).and_then(|v| v.as_str()).ok_or_else(|| ParseError::Field { detail_type: dt.into(), field })
}

/// Parses one SQS body. An empty body is a no-op, as upstream treats it.
pub fn parse(body: &str) -> Result<Message, ParseError> {
    if body.trim().is_empty() {
        return Ok(Message { kind: Kind::NoOp, id: String::new(), time: String::new(), instance_ids: Vec::new() });
    }
    let e: Envelope = serde_json::from_str(body).map_err(|e| ParseError::NotJson(e.to_string()))?;
    let dt = e.detail_type.as_str();
    let one = |kind: Kind| -> Result<(Kind, Vec<String>), ParseError> {
        Ok((kind, vec![text(&e.detail, "instance-id", dt)?.to_string()]))
    };
    let (kind, instance_ids) = match (e.version.as_str(), e.source.as_str(), dt) {
        ("0", "aws.ec2", "EC2 Spot Instance Interruption Warning") => one(Kind::SpotInterruption)?,
        ("0", "aws.ec2", "EC2 Instance Rebalance Recommendation") => one(Kind::RebalanceRecommendation)?,
        ("0", "aws.ec2", "EC2 Capacity Reservation Instance Interruption Warning") => {
            one(Kind::CapacityReservationInterruption)?
        }
        ("0", "aws.ec2", "EC2 Instance State-change Notification") => {
            let state = text(&e.detail, "state", dt)?;
            match state {
                "stopping" | "stopped" => one(Kind::InstanceStopping)?,
                "shutting-down" | "terminated" => one(Kind::InstanceTerminated)?,
                _ => (Kind::NoOp, Vec::new()),
            }
        }
        ("0", "aws.health", "AWS Health Event") => {
            let service = e.detail.get("service").and_then(|v| v.as_str()).unwrap_or("");
            let category = e.detail.get("eventTypeCategory").and_then(|v| v.as_str()).unwrap_or("");
            if service == "EC2" && category == "scheduledChange" {
                let ids = e
                    .detail
                    .get("affectedEntities")
                    .and_then(|v| v.as_array())
                    .into_iter()
                    .flatten()
                    .filter_map(|x| x.get("entityValue").and_then(|v| v.as_str()))
                    .map(str::to_string)
                    .collect();
                (Kind::ScheduledChange, ids)
            } else {
                (Kind::NoOp, Vec::new())
            }
        }
        _ => (Kind::NoOp, Vec::new()),
    };
    Ok(Message { kind, id: e.id, time: e.time, instance_ids })
}

/// The instance id at the end of a provider id (`aws:///us-east-1a/i-0123` → `i-0123`).
pub fn instance_id(provider_id: &str) -> Option<&str> {
    provider_id.rsplit('/').next().filter(|s| s.starts_with("i-"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(detail_type: &str, source: &str, detail: serde_json::Value) -> String {
        serde_json::json!({
            "version": "0", "id": "7bf73129-1428-4cd3-a780-95db273d1602", "detail-type": detail_type,
            "source": source, "account": "123456789012", "time": "2026-11-24T12:00:00Z", "region": "us-east-1",
            "resources": [], "detail": detail,
        })
        .to_string()
    }

    #[test]
    fn the_five_kinds_and_their_actions() {
        let spot = event(
            "EC2 Spot Instance Interruption Warning",
            "aws.ec2",
            serde_json::json!({"instance-id": "i-1", "instance-action": "terminate"}),
        );
        let m = parse(&spot).unwrap();
        assert_eq!((m.kind, m.instance_ids.as_slice()), (Kind::SpotInterruption, &["i-1".to_string()][..]));
        assert!(m.kind.deletes_nodeclaim());
        assert_eq!(m.time, "2026-11-24T12:00:00Z");

        let rebalance =
            event("EC2 Instance Rebalance Recommendation", "aws.ec2", serde_json::json!({"instance-id": "i-2"}));
        let m = parse(&rebalance).unwrap();
        assert_eq!(m.kind, Kind::RebalanceRecommendation);
        assert!(!m.kind.deletes_nodeclaim(), "informational only");

        let health = event(
            "AWS Health Event",
            "aws.health",
            serde_json::json!({"service": "EC2", "eventTypeCategory": "scheduledChange",
                "eventTypeCode": "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED",
                "affectedEntities": [{"entityValue": "i-3"}, {"entityValue": "i-4"}]}),
        );
        let m = parse(&health).unwrap();
        assert_eq!(m.kind, Kind::ScheduledChange);
        assert_eq!(m.instance_ids, vec!["i-3".to_string(), "i-4".to_string()]);
        let other_health = event(
            "AWS Health Event",
            "aws.health",
            serde_json::json!({"service": "EC2", "eventTypeCategory": "issue", "affectedEntities": []}),
        );
        assert_eq!(parse(&other_health).unwrap().kind, Kind::NoOp);

        for (state, kind) in [
            ("stopping", Kind::InstanceStopping),
            ("stopped", Kind::InstanceStopping),
            ("shutting-down", Kind::InstanceTerminated),
            ("terminated", Kind::InstanceTerminated),
            ("running", Kind::NoOp),
        ] {
            let e = event(
                "EC2 Instance State-change Notification",
                "aws.ec2",
                serde_json::json!({"instance-id": "i-5", "state": state}),
            );
            assert_eq!(parse(&e).unwrap().kind, kind, "{state}");
        }
        let cr = event(
            "EC2 Capacity Reservation Instance Interruption Warning",
            "aws.ec2",
            serde_json::json!({"instance-id": "i-6", "instance-action": "terminate"}),
        );
        assert_eq!(parse(&cr).unwrap().kind, Kind::CapacityReservationInterruption);
    }

    #[test]
    fn malformed_and_unknown_messages() {
        assert!(matches!(parse("{not json"), Err(ParseError::NotJson(_))));
        assert_eq!(parse("").unwrap().kind, Kind::NoOp);
        assert_eq!(parse(&event("Something New", "aws.ec2", serde_json::json!({}))).unwrap().kind, Kind::NoOp);
        assert_eq!(parse(r#"{"hello": "world"}"#).unwrap().kind, Kind::NoOp);
        let e = parse(&event("EC2 Spot Instance Interruption Warning", "aws.ec2", serde_json::json!({"x": 1})));
        assert_eq!(
            e.unwrap_err().to_string(),
            "EC2 Spot Instance Interruption Warning: instance-id missing or not a string"
        );
        assert_eq!(instance_id("aws:///us-east-1a/i-0abc"), Some("i-0abc"));
        assert_eq!(instance_id("kwok://x"), None);
    }
}
