//! The controller's clock constants, upstream's where upstream has one. Every backend uses these; none keeps its
//! own copy.

use crate::engine::provisioning::Millis;

pub const SECOND: Millis = 1_000;
pub const MINUTE: Millis = 60 * SECOND;
/// Disruption passes run at most this often (upstream polls every 10 s).
pub const DISRUPTION_POLL: Millis = 10 * SECOND;
/// Consolidation commands are validated again after this long before they start (upstream: 15 s).
pub const VALIDATION_DELAY: Millis = 15 * SECOND;
/// The consolidation state moves by itself at least this often (upstream: 5 min), so "consolidated" is looked at
/// again even in a cluster where nothing changes.
pub const STATE_REFRESH: Millis = 5 * MINUTE;
/// A pod that stays provisionable asks for another provisioning pass this often (upstream's requeue).
pub const POD_REQUEUE: Millis = 10 * SECOND;
/// `status.lastPodEventTime` is written at most this often per node (upstream's dedupe).
pub const POD_EVENT_DEDUPE: Millis = 10 * SECOND;
/// Instance types the cloud could launch none of a claim's requests on are kept out of the NodePool's
/// provisioning this long.
pub const UNLAUNCHABLE_FOR: Millis = 60 * MINUTE;
/// Offerings that failed with insufficient capacity are kept out of launches this long (AWS provider).
pub const ICE_TTL: Millis = 3 * MINUTE;
/// An instance no NodeClaim holds is collected once it was launched this long ago (the AWS provider's; a claim
/// records its instance a moment after the launch).
pub const LEAK_AGE: Millis = 30 * SECOND;
/// Garbage collection lists the cloud's instances this often (the AWS provider lists every 10 s).
pub const GC_EVERY: Millis = 10 * SECOND;
