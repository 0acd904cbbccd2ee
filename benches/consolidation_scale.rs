//! Consolidation at scale, end to end: `scripts/consolidation-scenario.py`'s shape (50 Deployments × 2,000
//! replicas on the AWS catalog, every fifth spread over zones, half scaled to a tenth at 15 minutes, 30 simulated
//! minutes) through `simulate`'s own code. Prints the time of each disruption pass as the report records it, the
//! whole run, and peak resident memory. Goals: every pass ≤ 2 s, the run ≤ 60 s, peak ≤ 1 GB.
//!
//! `cargo bench --bench consolidation_scale` (about a minute and a half on two cores). Under `cargo test` it runs a
//! small shape of the same scenario once, so it stays working.

use std::process::Command;
use std::time::Instant;

use karpenter_tui::sim::report::DecisionDetail;
use karpenter_tui::sim::run::run;
use karpenter_tui::sim::scenario::parse_scenario;

#[path = "common/heap.rs"]
mod heap;

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let (deployments, replicas) = if full { (50, 2000) } else { (5, 40) };
    let file = std::env::temp_dir().join(format!("consolidation-{}.yaml", std::process::id()));
    let status = Command::new("python3")
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/consolidation-scenario.py"))
        .args([deployments.to_string(), replicas.to_string()])
        .arg(&file)
        .status()
        .expect("python3 runs the scenario generator");
    assert!(status.success(), "the scenario generator failed");
    let text = std::fs::read_to_string(&file).expect("the generated scenario");
    let _ = std::fs::remove_file(&file);
    let scenario = parse_scenario(&text, "consolidation-scale.yaml").expect("a valid scenario");

    let started = Instant::now();
    let report = run(&scenario, None, None).expect("the scenario runs");
    let wall = started.elapsed().as_secs_f64();

    let passes = &report.timings.disruption_passes;
    let mut millis: Vec<f64> = passes.iter().map(|p| p.millis).collect();
    millis.sort_by(f64::total_cmp);
    let total: f64 = millis.iter().sum();
    let median = millis.get(millis.len() / 2).copied().unwrap_or(0.0);
    let max = millis.last().copied().unwrap_or(0.0);
    let most_candidates = passes.iter().map(|p| p.candidates).max().unwrap_or(0);
    // The shape does what it claims: the scale-down leaves nodes to consolidate.
    let consolidations =
        report.decisions.iter().filter(|d| matches!(d.detail, DecisionDetail::Disruption { .. })).count();
    assert!(consolidations > 0, "the scale-down should lead to consolidation");
    println!(
        "{} pods: {} disruption passes over up to {most_candidates} candidates, median {median:.0} ms, max {max:.0} ms, \
         {:.1} s in all; {consolidations} disruptions; the run {wall:.1} s (simulated {:.0} min); peak resident \
         memory {:.0} MiB",
        deployments * replicas,
        passes.len(),
        total / 1000.0,
        report.simulated_seconds / 60.0,
        heap::status_mib("VmHWM:"),
    );
}
