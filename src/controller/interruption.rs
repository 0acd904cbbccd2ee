//! Interruption notices: what the cloud says is about to happen to instances, and what the controller does about
//! each kind (upstream's interruption controller). AWS parses its SQS messages into these
//! ([`crate::aws::interruption`]); the simulated cloud raises them directly; scenarios name them in kebab case.

/// What an event asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// `EC2 Spot Instance Interruption Warning`: two minutes' notice.
    SpotInterruption,
    /// `EC2 Instance Rebalance Recommendation`: informational.
    RebalanceRecommendation,
    /// `AWS Health Event`, EC2 scheduled change.
    ScheduledChange,
    /// `EC2 Instance State-change Notification`, stopping or stopped.
    InstanceStopping,
    /// `EC2 Instance State-change Notification`, shutting-down or terminated.
    InstanceTerminated,
    /// `EC2 Capacity Reservation Instance Interruption Warning`.
    #[serde(skip)]
    CapacityReservationInterruption,
    /// Anything else (another health event, another state, another source): nothing to do.
    #[serde(skip)]
    NoOp,
}

impl Kind {
    /// Whether the instance's NodeClaim is deleted (cordon and drain through its finalizer).
    pub fn deletes_nodeclaim(self) -> bool {
        !matches!(self, Kind::RebalanceRecommendation | Kind::NoOp)
    }

    /// The upstream event reason shown to operators.
    pub fn reason(self) -> &'static str {
        match self {
            Kind::SpotInterruption => "SpotInterrupted",
            Kind::RebalanceRecommendation => "SpotRebalanceRecommendation",
            Kind::ScheduledChange => "Unhealthy",
            Kind::InstanceStopping => "Stopping",
            Kind::InstanceTerminated => "Terminating",
            Kind::CapacityReservationInterruption => "CapacityReservationInterrupted",
            Kind::NoOp => "NoOp",
        }
    }
}

/// One notice about some instances (an SQS message from EventBridge, or the simulated cloud's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub kind: Kind,
    /// The EventBridge event id.
    pub id: String,
    /// The event time (RFC 3339), for the latency operators see.
    pub time: String,
    /// The instances it is about (`i-...`).
    pub instance_ids: Vec<String>,
}
