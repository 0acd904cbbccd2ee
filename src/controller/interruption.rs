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
    /// `EC2 Capacity Reservation Instance Interruption Warning`: the owner of an interruptible capacity reservation
    /// takes it back.
    #[serde(rename = "capacity-reservation-interrupted")]
    CapacityReservationInterruption,
    /// DescribeInstanceStatus: the instance status check has been impaired for two minutes (forceful).
    InstanceStatus,
    /// DescribeInstanceStatus: the system status check has been impaired for two minutes (forceful).
    SystemStatus,
    /// DescribeInstanceStatus: a scheduled event (reboot, maintenance, retirement, stop) is listed.
    EventStatus,
    /// Anything else (another health event, another state, another source): nothing to do.
    #[serde(skip)]
    NoOp,
}

impl Kind {
    /// Whether the instance's NodeClaim is deleted (cordon and drain through its finalizer).
    pub fn deletes_nodeclaim(self) -> bool {
        !matches!(self, Kind::RebalanceRecommendation | Kind::NoOp)
    }

    /// Whether the drain is forceful: the NodeClaim's termination deadline is set to now before it is deleted, so
    /// pods are deleted at once, PDBs and grace periods notwithstanding (upstream's `ForcefulTermination`, for an
    /// instance whose status checks failed).
    pub fn forceful(self) -> bool {
        matches!(self, Kind::InstanceStatus | Kind::SystemStatus)
    }

    /// The upstream event reason shown to operators.
    pub fn reason(self) -> &'static str {
        match self {
            Kind::SpotInterruption => "SpotInterrupted",
            Kind::RebalanceRecommendation => "SpotRebalanceRecommendation",
            Kind::ScheduledChange => "Unhealthy",
            Kind::InstanceStopping => "Stopping",
            Kind::InstanceTerminated => "Terminating",
            Kind::CapacityReservationInterruption => "CapacityReservationInstanceInterrupted",
            Kind::InstanceStatus | Kind::SystemStatus | Kind::EventStatus => "InstanceUnhealthy",
            Kind::NoOp => "NoOp",
        }
    }

    /// What the Interruptions pane shows: the event reason, with the failed check for the three that share one.
    pub fn label(self) -> &'static str {
        match self {
            Kind::InstanceStatus => "InstanceUnhealthy (instance status)",
            Kind::SystemStatus => "InstanceUnhealthy (system status)",
            Kind::EventStatus => "InstanceUnhealthy (scheduled event)",
            k => k.reason(),
        }
    }

    /// Whether the notice comes from polling instance statuses, which repeats it every minute while the instance
    /// stays listed: a repeat for a NodeClaim already being deleted is nothing new.
    pub fn polled(self) -> bool {
        matches!(self, Kind::InstanceStatus | Kind::SystemStatus | Kind::EventStatus)
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
