//! `karpenter-tui plan`: one provisioning pass and one disruption pass over a set of objects — manifests
//! (`--file`, offline) or what a live cluster's watch cache holds. What would Karpenter launch for the pending
//! pods and why does each remaining pod stay pending; which nodes would it disrupt now and why not the others?
//! Writes nothing.

use std::collections::BTreeMap;

use anyhow::{Context as _, Result};
use serde_json::json;

use crate::engine::disruption::PassResult;
use crate::engine::disruption::consolidation::Outlook;
use crate::engine::manifests::ClusterObjects;
use crate::engine::provisioning::ProvisioningResult;
use crate::engine::resources::describe_resource;

pub use crate::shell::passes::{disruption, disruption_with, packing_comparison, plan, plan_packed, plan_with};

/// The disruption half of the JSON form.
pub fn disruption_json(pass: &PassResult, outlook: &BTreeMap<String, Outlook>) -> serde_json::Value {
    let command = pass.command.as_ref().map(|c| {
        let mut v = json!({
            "method": c.method.as_str(),
            "reason": c.reason().as_str(),
            "summary": c.summary(),
            "candidates": c.candidates.iter().map(|x| json!({
                "node": x.node, "nodePool": x.nodepool, "instanceType": x.instance_type,
                "pods": x.pods.iter().map(|p| p.key()).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
            "replacements": c.replacements.iter().map(|r| json!({
                "nodePool": r.nodepool, "instanceTypes": r.instance_types, "pricePerHour": r.price,
            })).collect::<Vec<_>>(),
            "savingsPerHour": c.savings_per_hour,
        });
        // v1.15's terminate-first: the node goes before anything replaces it.
        if c.terminate_first {
            v["terminateFirst"] = json!(true);
        }
        v
    });
    let nodes: Vec<serde_json::Value> = outlook
        .iter()
        .map(|(node, o)| match o {
            Outlook::Blocked(why) => {
                json!({"node": node, "disruptable": false, "why": why.iter().map(|b| b.to_string()).collect::<Vec<_>>()})
            }
            Outlook::Disruptable(c) => json!({"node": node, "disruptable": true, "why": [c.summary()]}),
        })
        .collect();
    json!({"command": command, "candidates": pass.candidates, "nodes": nodes})
}

/// The disruption half of the human form.
pub fn disruption_table(pass: &PassResult, outlook: &BTreeMap<String, Outlook>) -> String {
    let mut out = String::from("\nDISRUPTION\n");
    match &pass.command {
        Some(c) => out.push_str(&format!("would start: {}\n", c.summary())),
        None => out.push_str("nothing to disrupt now\n"),
    }
    if !outlook.is_empty() {
        out.push_str(&format!("\n{:<40} {}\n", "NODE", "OUTLOOK"));
        for (node, o) in outlook {
            let why = match o {
                Outlook::Blocked(why) => why.iter().map(|b| b.to_string()).collect::<Vec<_>>().join("; "),
                Outlook::Disruptable(c) => c.summary(),
            };
            out.push_str(&format!("{node:<40} {why}\n"));
        }
    }
    out
}

/// The packing line of the human form: what each strategy would spend and the LP bound, the one in use marked.
pub fn packing_table(
    cmp: &crate::engine::provisioning::PackingComparison,
    packing: crate::engine::packing::Packing,
) -> String {
    if cmp.upstream.nodes == 0 && cmp.cost.nodes == 0 {
        return String::new();
    }
    format!("\nPACKING ({packing} in use)\n{}\n", cmp.summary())
}

/// The packing object of the JSON form.
pub fn packing_json(
    cmp: &crate::engine::provisioning::PackingComparison,
    packing: crate::engine::packing::Packing,
) -> serde_json::Value {
    let plan = |p: crate::engine::provisioning::PlanPrice| json!({"pricePerHour": p.per_hour, "nodes": p.nodes});
    json!({
        "strategy": packing.as_str(),
        "upstream": plan(cmp.upstream),
        "cost": plan(cmp.cost),
        "lowerBoundPerHour": cmp.bound,
    })
}

/// The notes of a manifest file (what was skipped or read differently from a cluster), as the human form's first
/// section; nothing when there are none.
pub fn notes_table(notes: &[String]) -> String {
    if notes.is_empty() {
        return String::new();
    }
    let mut out = String::from("NOTES\n");
    for n in notes {
        out.push_str(&format!("{n}\n"));
    }
    out.push('\n');
    out
}

/// The manifests of `path`, refusing what Karpenter `version`'s API would refuse.
pub fn load(path: &str, version: crate::engine::version::KarpenterVersion) -> Result<ClusterObjects> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {path}"))?;
    Ok(ClusterObjects::parse_for(&text, path, version)?)
}

/// The JSON form: NodeClaims (upstream objects), placements on existing nodes, failures with reasons per NodePool.
pub fn to_json(m: &ClusterObjects, r: &ProvisioningResult) -> serde_json::Value {
    let claims = r.nodeclaims(&m.nodepools);
    let new_claims: Vec<serde_json::Value> = r
        .results
        .new_claims
        .iter()
        .zip(&claims)
        .map(|(c, obj)| {
            json!({
                "nodePool": c.nodepool,
                "pods": c.pods.iter().map(|&p| r.pods[p].key()).collect::<Vec<_>>(),
                "cheapestPricePerHour": c.cheapest_price(),
                "instanceTypes": c.instance_types.iter().map(|t| t.name.clone()).collect::<Vec<_>>(),
                "nodeClaim": obj,
            })
        })
        .collect();
    let existing: Vec<serde_json::Value> = r
        .results
        .existing
        .iter()
        .map(|p| json!({"node": p.node, "pods": p.pods.iter().map(|&i| r.pods[i].key()).collect::<Vec<_>>()}))
        .collect();
    let pending: Vec<serde_json::Value> = r
        .results
        .failures
        .iter()
        .map(|f| {
            json!({
                "pod": r.pods[f.pod].key(),
                "reasons": f.reasons.iter().map(|(pool, why)| json!({"nodePool": pool, "reason": why.to_string()})).collect::<Vec<_>>(),
            })
        })
        .collect();
    let ignored: Vec<serde_json::Value> = r
        .rejected
        .iter()
        .map(|(k, why)| json!({"pod": k, "reason": why.to_string()}))
        .chain(r.results.ignored.iter().map(|(i, why)| json!({"pod": r.pods[*i].key(), "reason": why.to_string()})))
        .collect();
    json!({"newNodeClaims": new_claims, "existingNodes": existing, "pending": pending, "ignored": ignored})
}

/// The human form.
pub fn to_table(r: &ProvisioningResult) -> String {
    let mut out = String::new();
    let total: usize = r.pods.len();
    out.push_str(&format!(
        "{} pods considered: {} on new NodeClaims, {} on existing nodes, {} pending, {} ignored\n",
        total,
        r.results.new_claims.iter().map(|c| c.pods.len()).sum::<usize>(),
        r.results.existing.iter().map(|p| p.pods.len()).sum::<usize>(),
        r.results.failures.len(),
        r.rejected.len() + r.results.ignored.len()
    ));
    if !r.results.new_claims.is_empty() {
        out.push_str("\nNEW NODECLAIMS\n");
        out.push_str(&format!(
            "{:<16} {:>5} {:>9} {:>10}  {:<24} {}\n",
            "NODEPOOL", "PODS", "CPU", "MEMORY", "CHEAPEST", "OPTIONS"
        ));
        for c in &r.results.new_claims {
            let cheapest = c
                .instance_types
                .first()
                .map(|t| match c.cheapest_price() {
                    Some(p) => format!("{} ${p:.4}/h", t.name),
                    None => t.name.clone(),
                })
                .unwrap_or_default();
            out.push_str(&format!(
                "{:<16} {:>5} {:>9} {:>10}  {:<24} {}\n",
                c.nodepool,
                c.pods.len(),
                describe_resource("cpu", c.requests.cpu),
                describe_resource("memory", c.requests.memory),
                cheapest,
                c.instance_types.len()
            ));
        }
    }
    if !r.results.existing.is_empty() {
        out.push_str("\nEXISTING NODES\n");
        for p in &r.results.existing {
            out.push_str(&format!("{:<32} {} pods\n", p.node, p.pods.len()));
        }
    }
    if !r.results.failures.is_empty() {
        out.push_str("\nPENDING\n");
        for f in &r.results.failures {
            out.push_str(&format!("{}\n", r.pods[f.pod].key()));
            for (pool, why) in &f.reasons {
                out.push_str(&format!("  {pool}: {why}\n"));
            }
        }
    }
    let ignored: Vec<String> = r
        .rejected
        .iter()
        .map(|(k, why)| format!("{k}: {why}"))
        .chain(r.results.ignored.iter().map(|(i, why)| format!("{}: {why}", r.pods[*i].key())))
        .collect();
    if !ignored.is_empty() {
        out.push_str("\nIGNORED\n");
        for l in ignored {
            out.push_str(&format!("{l}\n"));
        }
    }
    out
}
