//! `karpenter-tui simulate FILE`: the scenario to play, with the command line's overrides.

use crate::engine::packing::Packing;
use crate::sim::scenario::{Scenario, parse_scenario_as};

/// FILE read, parsed and checked, with `--packing` (when given) over its `settings.packing`. The error is the
/// line to print after `error: ` (a scenario error names the file, line, column and field).
pub fn load_scenario(
    file: &str,
    packing: Option<Packing>,
    version: Option<crate::engine::version::KarpenterVersion>,
) -> Result<Scenario, String> {
    let text = std::fs::read_to_string(file).map_err(|e| format!("reading {file}: {e}"))?;
    let mut scenario = parse_scenario_as(&text, file, version).map_err(|e| e.to_string())?;
    if let Some(p) = packing {
        scenario.settings.controller.packing = p;
    }
    Ok(scenario)
}
