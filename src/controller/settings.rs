//! The controller's settings: one struct, filled from a scenario's `settings`, the command line and the config
//! file alike, so every backend runs the controller the same way.

use crate::engine::disruption::gate::Mode;
use crate::engine::provisioning::Millis;

use super::timing::{SECOND, VALIDATION_DELAY};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// What happens to voluntary disruptions: `auto` (Karpenter's behaviour), `approve`, `dry-run`.
    pub mode: Mode,
    /// Feature gate `SpotToSpotConsolidation` (upstream default off).
    pub spot_to_spot: bool,
    /// Provisioning batches close after this long without a new pending pod (upstream `BATCH_IDLE_DURATION`, 1 s)
    pub batch_idle: Millis,
    /// ... or after this long in all (upstream `BATCH_MAX_DURATION`, 10 s).
    pub batch_max: Millis,
    /// Consolidation commands are checked again after this long before they start (upstream 15 s).
    pub validation_delay: Millis,
    /// Candidates multi-node consolidation looks at, at most (upstream 100).
    pub multi_node_cap: usize,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            mode: Mode::Auto,
            spot_to_spot: false,
            batch_idle: SECOND,
            batch_max: 10 * SECOND,
            validation_delay: VALIDATION_DELAY,
            multi_node_cap: 100,
        }
    }
}
