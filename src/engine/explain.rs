//! Structured reasons for "why is this pod pending", rendered as one clear sentence each. The scheduler records
//! them per (pod, NodePool); the dashboard and reports show them.

use std::fmt;

use crate::engine::requirements::Incompatibility;
use crate::engine::resources::{Resources, describe_resource};

/// Why a NodePool could not take a pod.
#[derive(Debug, Clone, PartialEq)]
pub enum PoolRejection {
    /// The NodePool's template has a taint the pod does not tolerate.
    TaintNotTolerated { taint: String },
    /// The pod's node selector / affinity conflicts with the NodePool's requirements.
    Requirements(Incompatibility),
    /// No volume topology alternative fits the NodePool.
    VolumeTopology { detail: String },
    /// Topology spread / pod (anti-)affinity leaves no domain.
    Topology { detail: String },
    /// The NodePool's limits are used up.
    LimitsExhausted { resource: String, limit: i64, remaining: i64 },
    /// Instance-type filtering left nothing.
    InstanceTypes(Box<InstanceTypeMiss>),
    /// minValues could not be met by the surviving instance types.
    MinValues { key: String, needed: u32, available: usize },
    /// The NodePool has no usable instance types at all (before any pod).
    NoInstanceTypes,
    /// A reserved-capacity or other structural problem.
    Other(String),
    /// Strict reservation handling (provisioning): the pod waits for a later pass rather than fall back.
    ReservedOffering { detail: String },
    /// The pod uses Dynamic Resource Allocation, which is not placed (upstream v1.14.1's default); the same for
    /// every NodePool, so it stands alone, under no pool's name.
    Dra,
}

/// The detail of an instance-type miss: which checks ever passed, what was needed, and the closest candidate.
#[derive(Debug, Clone, PartialEq)]
pub struct InstanceTypeMiss {
    /// Types whose labels are compatible with the NodeClaim's requirements.
    pub requirements_ok: usize,
    /// Types with enough allocatable resources.
    pub resources_ok: usize,
    /// Types with an available offering compatible with zone/capacity-type requirements.
    pub offering_ok: usize,
    pub requirements_and_resources: usize,
    pub requirements_and_offering: usize,
    pub resources_and_offering: usize,
    /// Requests of the NodeClaim being built including this pod and daemon overhead.
    pub needed: Resources,
    /// The compatible type with the most allocatable of the scarcest resource, and what it offers.
    pub largest: Option<(String, Resources)>,
    /// Total types considered.
    pub considered: usize,
    /// The NodePool's limits removed larger types: (resource, what was left).
    pub limited_by: Option<(String, i64)>,
    /// An extended resource the pod needs that no compatible type offers at all.
    pub missing_resource: Option<String>,
    /// A single requirement (key, rendered) that no remaining type satisfies.
    pub blocking_requirement: Option<(String, String)>,
}

impl fmt::Display for InstanceTypeMiss {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.considered == 0 {
            return f.write_str("the NodePool has no instance types");
        }
        if self.requirements_ok == 0 {
            return match &self.blocking_requirement {
                Some((key, req)) => write!(f, "no instance type satisfies {key} {req}"),
                None => f.write_str("no instance type matches all of the requirements together"),
            };
        }
        if self.requirements_and_resources == 0 {
            if let Some(res) = &self.missing_resource {
                return write!(f, "no compatible instance type offers {res}");
            }
            write!(f, "no instance type has enough resources: needs {}", brief(&self.needed))?;
            if let Some((name, alloc)) = &self.largest {
                let short = self
                    .needed
                    .exceeding(alloc)
                    .into_iter()
                    .map(|k| format!("{k} {}", describe_resource(k, alloc.get(k))))
                    .collect::<Vec<_>>()
                    .join(", ");
                write!(f, "; largest compatible is {name} with {short} allocatable")?;
            }
            if let Some((res, left)) = &self.limited_by {
                write!(
                    f,
                    " (the NodePool's {res} limit leaves {}, which rules out larger types)",
                    describe_resource(res, (*left).max(0))
                )?;
            }
            return Ok(());
        }
        if self.requirements_and_offering == 0 {
            return f.write_str(
                "no compatible instance type has an available offering in the required zones and capacity types",
            );
        }
        write!(
            f,
            "no instance type has enough resources and an available offering together: needs {}",
            brief(&self.needed)
        )
    }
}

fn brief(r: &Resources) -> String {
    // "pods 1" is implied by every pod; leave it out unless it is the problem.
    let parts: Vec<String> = r
        .entries()
        .into_iter()
        .filter(|(k, _)| *k != "pods")
        .map(|(k, v)| format!("{k} {}", describe_resource(k, v)))
        .collect();
    if parts.is_empty() { "nothing".into() } else { parts.join(", ") }
}

impl fmt::Display for PoolRejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PoolRejection::TaintNotTolerated { taint } => write!(f, "the pod does not tolerate taint {taint}"),
            PoolRejection::Requirements(Incompatibility::Undefined { key, hint }) => {
                write!(f, "the NodePool does not define label {key:?}, which the pod requires")?;
                if let Some(h) = hint {
                    write!(f, " (did you mean {h:?}?)")?;
                }
                Ok(())
            }
            PoolRejection::Requirements(Incompatibility::Conflict { key, wanted, offered }) => {
                write!(f, "requirement {key} {wanted} conflicts with the NodePool's {key} {offered}")
            }
            PoolRejection::VolumeTopology { detail } => write!(f, "volume topology: {detail}"),
            PoolRejection::Topology { detail } => f.write_str(detail),
            PoolRejection::LimitsExhausted { resource, limit, remaining } => write!(
                f,
                "the NodePool's {resource} limit {} is exhausted ({} left, less than any instance type)",
                describe_resource(resource, *limit),
                describe_resource(resource, (*remaining).max(0))
            ),
            PoolRejection::InstanceTypes(miss) => miss.fmt(f),
            PoolRejection::MinValues { key, needed, available } => write!(
                f,
                "minValues {needed} for {key} cannot be met: the remaining instance types offer only {available}"
            ),
            PoolRejection::NoInstanceTypes => {
                f.write_str("no instance type of the NodePool's catalog is compatible with its requirements")
            }
            PoolRejection::Other(s) => f.write_str(s),
            PoolRejection::Dra => f.write_str(DRA_UNSUPPORTED),
            PoolRejection::ReservedOffering { detail } => f.write_str(detail),
        }
    }
}

/// Upstream's `DRAError` text.
pub const DRA_UNSUPPORTED: &str =
    "pod has Dynamic Resource Allocation requirements that are not yet supported by Karpenter";

/// Why a pod is not being provisioned for at all (it never reaches a NodePool).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PodIgnored {
    /// The pod requires `karpenter.sh/nodepool DoesNotExist` (not Karpenter's to schedule). No event upstream.
    OptedOut,
    /// A restricted label in the node selector or affinity.
    RestrictedLabel { key: String, why: String },
    /// The pod spec can't be interpreted (bad quantity, matchFields, ...).
    Invalid { field: String, message: String },
    /// A PVC problem (missing, lost, Immediate binding ...).
    Volume { detail: String },
}

impl fmt::Display for PodIgnored {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PodIgnored::OptedOut => {
                f.write_str("the pod requires karpenter.sh/nodepool DoesNotExist, so Karpenter ignores it")
            }
            PodIgnored::RestrictedLabel { key, why } => {
                write!(f, "ignored: selects on restricted label {key:?} ({why})")
            }
            PodIgnored::Invalid { field, message } => write!(f, "ignored: {field}: {message}"),
            PodIgnored::Volume { detail } => write!(f, "ignored: {detail}"),
        }
    }
}
