//! Per-pane row access over a [`ClusterView`]: how many rows, each row's identity (so a selection follows its
//! object), the text a `/` filter searches, and the full detail Enter shows. Panes render cells themselves; this
//! module is what the reducer needs, so filtering and details are testable without rendering.

use crate::engine::provisioning::Millis;
use crate::engine::resources::{format_bytes_approx, format_cpu};
use crate::engine::scheduling::selector::{Selector, SelectorError};
use crate::protocol::view::ClusterView;
use crate::ui::action::Pane;

pub fn count(v: &ClusterView, p: Pane) -> usize {
    match p {
        Pane::Pending => v.pending.len(),
        Pane::NodePools => v.nodepools.len(),
        Pane::Nodes => v.nodes.len(),
        Pane::Disruptions => v.disruptions.len(),
        Pane::Budgets => v.budgets.len(),
        Pane::Interruptions => v.interruptions.len(),
        Pane::Events => v.events.len(),
    }
}

pub fn key(v: &ClusterView, p: Pane, i: usize) -> Option<String> {
    Some(match p {
        Pane::Pending => v.pending.get(i).map(|r| format!("{}/{}", r.namespace, r.name))?,
        Pane::NodePools => v.nodepools.get(i)?.name.clone(),
        Pane::Nodes => v.nodes.get(i)?.name.clone(),
        Pane::Disruptions => v.disruptions.get(i)?.id.clone(),
        Pane::Budgets => v.budgets.get(i).map(|b| format!("{}/{}", b.nodepool, b.reason))?,
        Pane::Interruptions => v.interruptions.get(i).map(|r| format!("{}@{}", r.node, r.at))?,
        Pane::Events => v.events.get(i).map(|e| format!("{}@{}:{}", e.object, e.at, e.reason))?,
    })
}

/// Whether row `i` contains `needle` (already lower-case) in any of its visible fields. An `!` prefix inverts.
pub fn matches(v: &ClusterView, p: Pane, i: usize, needle: &str) -> bool {
    if let Some(n) = needle.strip_prefix('!') {
        return n.is_empty() || !matches(v, p, i, n);
    }
    let hit = |s: &str| s.to_lowercase().contains(needle);
    match p {
        Pane::Pending => v.pending.get(i).is_some_and(|r| {
            hit(&r.namespace) || hit(&r.name) || r.reasons.iter().any(|(pool, why)| hit(pool) || hit(why))
        }),
        Pane::NodePools => v.nodepools.get(i).is_some_and(|r| hit(&r.name)),
        Pane::Nodes => v.nodes.get(i).is_some_and(|r| {
            hit(&r.name)
                || hit(r.nodepool.as_deref().unwrap_or(""))
                || hit(&r.instance_type)
                || hit(&r.zone)
                || hit(&r.capacity_type)
                || hit(r.state.as_str())
        }),
        Pane::Disruptions => v.disruptions.get(i).is_some_and(|r| {
            hit(&r.id)
                || hit(&r.method)
                || hit(&r.reason)
                || hit(r.state.as_str())
                || r.candidates.iter().any(|c| hit(c))
        }),
        Pane::Budgets => v.budgets.get(i).is_some_and(|r| hit(&r.nodepool) || hit(&r.reason)),
        Pane::Interruptions => v.interruptions.get(i).is_some_and(|r| hit(&r.kind) || hit(&r.node) || hit(&r.zone)),
        Pane::Events => v.events.get(i).is_some_and(|r| hit(&r.reason) || hit(&r.object) || hit(&r.message)),
    }
}

/// A node label selector in kubectl's `-l` syntax (`--selector`, `:selector`), with the text it was written as.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeSelector {
    pub text: String,
    selector: Selector,
}

impl NodeSelector {
    /// The text as `kubectl get nodes -l` takes it; a bad one says what is wrong at which character.
    pub fn parse(text: &str) -> Result<NodeSelector, SelectorError> {
        let text = text.trim();
        Ok(NodeSelector { text: text.to_string(), selector: Selector::parse(text)? })
    }

    pub fn matches(&self, labels: &std::collections::BTreeMap<String, String>) -> bool {
        self.selector.matches(labels)
    }
}

impl std::str::FromStr for NodeSelector {
    type Err = SelectorError;
    fn from_str(s: &str) -> Result<NodeSelector, SelectorError> {
        NodeSelector::parse(s)
    }
}

/// Whether row `i` of the Nodes pane is one the selector keeps (a NodeClaim without a node by its own labels).
pub fn selected_by(v: &ClusterView, i: usize, selector: &NodeSelector) -> bool {
    v.nodes.get(i).is_some_and(|r| selector.matches(&r.labels))
}

/// An extra label column's header, as eks-node-viewer writes it: the key's last path segment, upper-cased
/// (`karpenter.k8s.aws/instance-cpu` → `INSTANCE-CPU`).
pub fn label_header(key: &str) -> String {
    key.rsplit('/').next().unwrap_or(key).to_uppercase()
}

/// The sort key of an extra label column (after the pane's own columns in [`sort_keys`]).
pub fn label_sort_key(key: &str) -> String {
    format!("label:{key}")
}

/// The columns a pane can be sorted by; the first, `default`, is the backend's order (newest events first, open
/// proposals first, and so on). The Nodes pane's extra label columns follow these (`label:KEY`).
pub fn sort_keys(p: Pane) -> &'static [&'static str] {
    match p {
        Pane::Pending => &["default", "age", "cpu", "memory", "name", "why"],
        Pane::NodePools => &["default", "name", "weight", "nodes", "cpu", "memory", "cost", "budget", "drift"],
        Pane::Nodes => {
            &["default", "name", "pool", "type", "zone", "capacity", "price", "state", "cpu", "memory", "pods", "age"]
        }
        Pane::Disruptions => &["default", "savings", "age", "id", "state", "method", "nodes", "replacement", "pods"],
        Pane::Budgets => &["default", "allowed", "nodepool", "reason"],
        Pane::Interruptions => &["default", "age", "kind", "node", "capacity", "pods", "replaced", "progress"],
        Pane::Events => &["default", "reason", "object", "time", "message"],
    }
}

/// The table header a sort key sorts (where the ▲/▼ goes), if the pane has such a column.
pub fn sort_header(p: Pane, key: &str) -> Option<String> {
    if let Some(label) = key.strip_prefix("label:") {
        return Some(label_header(label));
    }
    let h = match (p, key) {
        (Pane::Pending, "name") => "POD",
        (Pane::Pending, "memory") => "MEM",
        (Pane::NodePools | Pane::Nodes, "price" | "cost") => "$/H",
        (Pane::NodePools, "weight") => "WT",
        (Pane::NodePools, "budget") => "BUDGET E/D/U",
        // The gauges' headers shorten on a narrow pane: the arrow goes on whichever is drawn.
        (Pane::NodePools, "cpu") => return Some("CORES / LIMIT".to_string()),
        (Pane::NodePools, "memory") => return Some("GiB / LIMIT".to_string()),
        (Pane::Events, "time") => "TIME",
        (Pane::Disruptions, "savings") => "SAVE $/H",
        (_, "default") => return None,
        (_, k) => return Some(k.to_uppercase()),
    };
    Some(h.to_string())
}

/// Whether a sort key, not reversed, puts the largest first (numbers, and ages oldest first: ▼) rather than text
/// from A to Z (▲).
pub fn sort_descends(p: Pane, key: &str) -> bool {
    let text = key.starts_with("label:")
        || matches!(
            (p, key),
            (Pane::Pending, "name")
                | (Pane::NodePools, "name")
                | (Pane::Nodes, "name" | "pool" | "type" | "zone" | "capacity" | "state")
                | (Pane::Pending, "why")
                | (Pane::Disruptions, "id" | "state" | "method" | "nodes" | "replacement")
                | (Pane::Budgets, "nodepool" | "reason")
                | (Pane::Interruptions, "kind" | "node" | "capacity" | "progress")
                | (Pane::Events, "reason" | "object" | "message")
        );
    !text
}

/// A row's value in a sort column: numbers sort largest first, text and ages (oldest first) ascending.
#[derive(Debug, Clone, PartialEq, PartialOrd)]
pub enum SortValue {
    /// Negated so that larger sorts first.
    Num(f64),
    Text(String),
}

pub fn sort_value(v: &ClusterView, p: Pane, key: &str, i: usize) -> SortValue {
    use SortValue::{Num, Text};
    let big_first = |x: f64| Num(-x);
    let oldest_first = |t: Millis| Num(t as f64);
    match (p, key) {
        (Pane::Pending, _) => v.pending.get(i).map_or(Num(0.0), |r| match key {
            "age" => oldest_first(r.created_at),
            "cpu" => big_first(r.cpu_millis as f64),
            "memory" => big_first(r.memory_bytes as f64),
            "why" => Text(r.reasons.first().map(|(_, why)| why.clone()).unwrap_or_default()),
            _ => Text(format!("{}/{}", r.namespace, r.name)),
        }),
        (Pane::NodePools, _) => v.nodepools.get(i).map_or(Num(0.0), |r| {
            let used = |res: &str| r.usage.iter().find(|u| u.resource == res).map_or(0.0, |u| u.used as f64);
            match key {
                "weight" => big_first(f64::from(r.weight)),
                "nodes" => big_first(r.nodes as f64),
                "cpu" => big_first(used("cpu")),
                "memory" => big_first(used("memory")),
                "cost" => big_first(r.cost_per_hour),
                // Fewest disruptions allowed first: the most constrained pools on top.
                "budget" => Num(r.budgets.iter().map(|(_, n, _)| *n as f64).sum()),
                "drift" => big_first(r.drifted as f64),
                _ => Text(r.name.clone()),
            }
        }),
        (Pane::Nodes, _) => v.nodes.get(i).map_or(Num(0.0), |r| match key {
            "pool" => Text(r.nodepool.clone().unwrap_or_default()),
            "type" => Text(r.instance_type.clone()),
            "zone" => Text(r.zone.clone()),
            "capacity" => Text(r.capacity_type.clone()),
            k if k.starts_with("label:") => Text(r.labels.get(&k["label:".len()..]).cloned().unwrap_or_default()),
            "age" => oldest_first(r.created_at),
            "price" => big_first(r.price),
            "cpu" => big_first(r.cpu_requested as f64 / r.cpu_allocatable.max(1) as f64),
            "memory" => big_first(r.memory_requested as f64 / r.memory_allocatable.max(1) as f64),
            "pods" => big_first(r.pods as f64),
            "state" => Text(r.state.as_str().to_string()),
            _ => Text(r.name.clone()),
        }),
        (Pane::Disruptions, _) => v.disruptions.get(i).map_or(Num(0.0), |r| match key {
            "savings" => big_first(r.savings_per_hour),
            // `d-12` after `d-9`: by the number.
            "id" => Num(r.id.trim_start_matches(|c: char| !c.is_ascii_digit()).parse().unwrap_or(0.0)),
            "state" => Text(r.state.short().to_string()),
            "method" => Text(r.method.clone()),
            "nodes" => Text(r.candidates.join(",")),
            "replacement" => Text(r.replacements.iter().flatten().cloned().collect::<Vec<_>>().join(",")),
            "pods" => big_first(r.evictions.len() as f64),
            _ => oldest_first(r.at),
        }),
        (Pane::Budgets, _) => v.budgets.get(i).map_or(Num(0.0), |r| match key {
            "allowed" => big_first(r.allowed_now as f64),
            "reason" => Text(format!("{}/{}", r.reason, r.nodepool)),
            _ => Text(format!("{}/{}", r.nodepool, r.reason)),
        }),
        (Pane::Interruptions, _) => v.interruptions.get(i).map_or(Num(0.0), |r| match key {
            "pods" => big_first(r.pods as f64),
            "kind" => Text(r.kind.clone()),
            "node" => Text(r.node.clone()),
            "capacity" => Text(r.capacity_type.clone()),
            "replaced" => big_first(r.replaced_after.unwrap_or(-1.0)),
            "progress" => Text(r.progress.clone()),
            _ => oldest_first(r.at),
        }),
        (Pane::Events, _) => v.events.get(i).map_or(Num(0.0), |r| match key {
            "reason" => Text(r.reason.clone()),
            "time" => oldest_first(r.at),
            "message" => Text(r.message.clone()),
            _ => Text(r.object.clone()),
        }),
    }
}

/// Dollars a month at an hourly price: eks-node-viewer's month of 730 hours (a twelfth of 8,760).
pub fn per_month(per_hour: f64) -> f64 {
    per_hour * 730.0
}

/// Dollars a month for a narrow column: no cents, thousands separated (`35`, `1,204`).
pub fn month_cell(per_hour: f64) -> String {
    fmt_quantity(per_month(per_hour).round())
}

/// "3m20s" style age on the backend's clock.
pub fn age(now: Millis, then: Millis) -> String {
    let s = ((now - then).max(0) / 1000) as u64;
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m{:02}s", s / 60, s % 60),
        3600..86400 => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
        _ => format!("{}d{:02}h", s / 86400, (s % 86400) / 3600),
    }
}

pub fn clock(t: Millis) -> String {
    chrono::DateTime::<chrono::Utc>::from_timestamp_millis(t)
        .map(|d| d.format("%H:%M:%S").to_string())
        .unwrap_or_else(|| "--:--:--".into())
}

/// The title and lines of the Enter view of row `i`.
pub fn detail(v: &ClusterView, p: Pane, i: usize) -> (String, Vec<String>) {
    let mut out = Vec::new();
    let title = match p {
        Pane::Pending => {
            let Some(r) = v.pending.get(i) else { return (String::new(), out) };
            out.push(format!("Pod {}/{} — pending for {}", r.namespace, r.name, age(v.now, r.created_at)));
            out.push(format!(
                "Requests: cpu {}, memory {}",
                format_cpu(r.cpu_millis),
                format_bytes_approx(r.memory_bytes)
            ));
            out.push(String::new());
            if r.reasons.is_empty() {
                out.push("The engine has no objection: a NodeClaim is being launched or the next provisioning".into());
                out.push("pass (batched over a few seconds) will pick it up.".into());
            } else {
                out.push("Why no NodePool can take it:".into());
                for (pool, why) in &r.reasons {
                    if pool.is_empty() {
                        out.push(format!("  • {why}"));
                    } else {
                        out.push(format!("  • NodePool {pool}: {why}"));
                    }
                }
            }
            format!("pod {}/{}", r.namespace, r.name)
        }
        Pane::NodePools => {
            let Some(r) = v.nodepools.get(i) else { return (String::new(), out) };
            out.push(format!(
                "Weight {}, {} node(s), ${:.4}/h (${:.2}/month), {} drifted",
                r.weight,
                r.nodes,
                r.cost_per_hour,
                per_month(r.cost_per_hour),
                r.drifted
            ));
            if let Some(n) = r.replicas {
                out.push(format!(
                    "Static: {n} replica(s) wanted, {} ready; ] and [ scale it by one (or :scale {} N)",
                    r.ready, r.name
                ));
            } else {
                out.push(format!("Consolidation: {} after {}", r.consolidation_policy, r.consolidate_after));
            }
            for u in &r.usage {
                let unit = match usage_unit(&u.resource) {
                    "" => String::new(),
                    unit => format!(" {unit}"),
                };
                let used = fmt_quantity(usage_scaled(&u.resource, u.used));
                out.push(match u.limit {
                    Some(l) if u.used > l => format!(
                        "{}: {used} of {}{unit}, over by {}",
                        u.resource,
                        fmt_quantity(usage_scaled(&u.resource, l)),
                        fmt_quantity(usage_scaled(&u.resource, u.used - l))
                    ),
                    Some(l) => {
                        format!("{}: {used} of {}{unit}", u.resource, fmt_quantity(usage_scaled(&u.resource, l)))
                    }
                    None => format!("{}: {used}{unit}, no limit", u.resource),
                });
            }
            for (reason, allowed, why) in &r.budgets {
                match why {
                    Some(w) => out.push(format!("Budget {reason}: 0 — {w}")),
                    None => out.push(format!("Budget {reason}: {allowed} node(s) may be disrupted now")),
                }
            }
            if !r.overlays.is_empty() {
                out.push("NodeOverlays on its instance types:".into());
                out.extend(r.overlays.iter().map(|l| format!("  {l}")));
            }
            if !v.overlays.is_empty() {
                out.push("NodeOverlays (evaluation order):".into());
                for o in &v.overlays {
                    out.push(format!(
                        "  {} (weight {}): {}; {} offering price(s), {} capacity change(s)",
                        o.name, o.weight, o.state, o.prices, o.capacity
                    ));
                }
            }
            out.push(String::new());
            out.extend(r.yaml.lines().map(str::to_string));
            format!("nodepool {}", r.name)
        }
        Pane::Nodes => {
            let Some(r) = v.nodes.get(i) else { return (String::new(), out) };
            out.push(format!(
                "{} {} {} in {}, ${:.4}/h (${:.2}/month), age {}",
                r.state.as_str(),
                r.capacity_type,
                r.instance_type,
                r.zone,
                r.price,
                per_month(r.price),
                age(v.now, r.created_at)
            ));
            out.push(format!(
                "NodePool {}, NodeClaim {}",
                r.nodepool.as_deref().unwrap_or("(none: not managed)"),
                r.nodeclaim.as_deref().unwrap_or("(none)")
            ));
            if let Some(o) = &r.price_overlay {
                out.push(format!("Price ${:.4}/h from NodeOverlay {o} (what Karpenter decides with)", r.price));
            }
            out.push(format!(
                "Requests: cpu {} of {}, memory {} of {}, pods {} of {}",
                format_cpu(r.cpu_requested),
                format_cpu(r.cpu_allocatable),
                format_bytes_approx(r.memory_requested),
                format_bytes_approx(r.memory_allocatable),
                r.pods,
                r.max_pods
            ));
            if !r.labels.is_empty() {
                let labels: Vec<String> = r.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
                out.push(format!("Labels: {}", labels.join(", ")));
            }
            if let Some(u) = &r.repair {
                let reason = u.reason.as_deref().map(|x| format!(" ({x})")).unwrap_or_default();
                let when = if u.repair_at > v.now {
                    format!("node repair replaces it in {}", age(u.repair_at, v.now))
                } else {
                    "its toleration is over: node repair replaces it unless over 20% of its pool is unhealthy".into()
                };
                out.push(format!(
                    "Unhealthy: {}={}{reason} for {}; {when} (R repairs it now)",
                    u.condition,
                    u.status,
                    age(v.now, u.since)
                ));
            }
            out.push(String::new());
            out.push("Why it is (not) being consolidated:".into());
            if r.outlook.is_empty() {
                out.push("  • nothing to say yet".into());
            }
            out.extend(r.outlook.iter().map(|l| format!("  • {l}")));
            out.push(String::new());
            out.push(format!("Pods ({}):", r.pod_names.len()));
            out.extend(r.pod_names.iter().map(|p| format!("  {p}")));
            format!("node {}", r.name)
        }
        Pane::Disruptions => {
            let Some(r) = v.disruptions.get(i) else { return (String::new(), out) };
            out.push(format!("{} — {} ({}) — {}", r.id, r.method, r.reason, r.state.as_str()));
            out.push(r.summary.clone());
            if let Some(d) = &r.detail {
                out.push(format!("Why: {d}"));
            }
            if let Some(p) = &r.progress {
                out.push(format!("Progress: {p}"));
            }
            out.push(String::new());
            out.push(format!("Candidates: {}", nodes_summary(v, &r.candidates)));
            if r.replacements.is_empty() {
                out.push("Replacements: none (delete only)".into());
            }
            for (n, repl) in r.replacements.iter().enumerate() {
                out.push(format!("Replacement {}: {}", n + 1, repl.join(", ")));
            }
            out.push(format!("Savings: ${:.4}/h (${:.2}/month)", r.savings_per_hour, r.savings_per_hour * 730.0));
            for (pool, n, allowed) in &r.budget_use {
                out.push(format!("Budget: uses {n} of {allowed} allowed now on NodePool {pool}"));
            }
            out.push(String::new());
            out.push(format!("Candidate nodes ({}):", r.candidates.len()));
            out.extend(nodes_table(v, &r.candidates));
            if !r.evictions.is_empty() {
                out.push(String::new());
                out.push(format!("Pods to evict ({}):", r.evictions.len()));
                for (pod, pdb) in &r.evictions {
                    match pdb {
                        Some((name, allowed)) => {
                            out.push(format!("  {pod}  (PDB {name}: {allowed} disruption(s) allowed now)"))
                        }
                        None => out.push(format!("  {pod}")),
                    }
                }
            }
            format!("disruption {}", r.id)
        }
        Pane::Budgets => {
            let Some(r) = v.budgets.get(i) else { return (String::new(), out) };
            out.push(format!(
                "NodePool {}, reason {}: {} node(s) may be disrupted now",
                r.nodepool, r.reason, r.allowed_now
            ));
            if let Some(e) = &r.error {
                out.push(format!("Malformed budget, nothing is allowed: {e}"));
            }
            out.push(String::new());
            out.push("Budgets in force for this reason:".into());
            if r.rules.is_empty() {
                out.push("  (none: the default of 10% applies)".into());
            }
            out.extend(r.rules.iter().map(|b| format!("  {b}")));
            out.push(String::new());
            out.push("Scheduled windows in the next 24h:".into());
            if r.windows.is_empty() {
                out.push("  none".into());
            }
            for (a, z, nodes) in &r.windows {
                out.push(format!("  +{}h{:02}m → +{}h{:02}m: {nodes}", a / 60, a % 60, z / 60, z % 60));
            }
            format!("budgets {}/{}", r.nodepool, r.reason)
        }
        Pane::Interruptions => {
            let Some(r) = v.interruptions.get(i) else { return (String::new(), out) };
            out.push(format!("{} at {} for node {} ({} in {})", r.kind, clock(r.at), r.node, r.capacity_type, r.zone));
            out.push(format!("{} pod(s) on the node when the notice came", r.pods));
            out.push(format!("Progress: {}", r.progress));
            if let Some(s) = r.replaced_after {
                out.push(format!("Time to replace: {s:.0}s"));
            }
            format!("interruption {}", r.node)
        }
        Pane::Events => {
            let Some(r) = v.events.get(i) else { return (String::new(), out) };
            out.push(format!("{} {} {} {}", clock(r.at), r.kind, r.reason, r.object));
            out.push(r.message.clone());
            format!("event {}", r.reason)
        }
    };
    (title, out)
}

/// Names shown in full before a list of nodes is summarised.
const NODES_NAMED: usize = 5;

/// A list of nodes in one line: all of them when few, else how many, their instance types by count (most first)
/// and the first few names (`100 nodes (60 m5.large, 40 c5.xlarge): a, b, c, d, e and 95 more`).
pub fn nodes_summary(v: &ClusterView, names: &[String]) -> String {
    if names.len() <= NODES_NAMED {
        return names.join(", ");
    }
    let mut types: std::collections::BTreeMap<&str, usize> = std::collections::BTreeMap::new();
    for n in names {
        let t = v.nodes.iter().find(|r| &r.name == n).map_or("unknown type", |r| r.instance_type.as_str());
        *types.entry(t).or_insert(0) += 1;
    }
    let mut types: Vec<(&str, usize)> = types.into_iter().collect();
    types.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let shown: Vec<String> = types.iter().take(3).map(|(t, n)| format!("{n} {t}")).collect();
    let more_types = if types.len() > 3 { format!(", {} more types", types.len() - 3) } else { String::new() };
    format!(
        "{} nodes ({}{more_types}): {} and {} more",
        names.len(),
        shown.join(", "),
        names[..NODES_NAMED].join(", "),
        names.len() - NODES_NAMED
    )
}

/// One line per node (name, type, zone, capacity type, $/h, pods), under a header: the candidates of a command as
/// a table the detail view scrolls through.
pub fn nodes_table(v: &ClusterView, names: &[String]) -> Vec<String> {
    let mut out =
        vec![format!("  {:<44} {:<16} {:<12} {:<10} {:>9} {:>5}", "NODE", "TYPE", "ZONE", "CAPACITY", "$/H", "PODS")];
    for n in names {
        out.push(match v.nodes.iter().find(|r| &r.name == n) {
            Some(r) => format!(
                "  {:<44} {:<16} {:<12} {:<10} {:>9.4} {:>5}",
                r.name, r.instance_type, r.zone, r.capacity_type, r.price, r.pods
            ),
            None => format!("  {n:<44} (not in the picture)"),
        });
    }
    out
}

pub fn fmt_res(resource: &str, v: i64) -> String {
    match resource {
        "cpu" => format_cpu(v),
        "memory" | "ephemeral-storage" => format_bytes_approx(v),
        _ => v.to_string(),
    }
}

/// A NodePool's usage in the unit people set limits in: cores for cpu (stored in millicores), GiB for memory and
/// storage (stored in bytes), counts otherwise.
pub fn usage_scaled(resource: &str, v: i64) -> f64 {
    match resource {
        "cpu" => v as f64 / 1000.0,
        "memory" | "ephemeral-storage" => v as f64 / (1u64 << 30) as f64,
        _ => v as f64,
    }
}

/// The unit `usage_scaled` gives.
pub fn usage_unit(resource: &str) -> &'static str {
    match resource {
        "cpu" => "cores",
        "memory" | "ephemeral-storage" => "GiB",
        _ => "",
    }
}

/// `used / limit` in `usage_scaled` units, with how far over the limit it is: `16,016 / 1,000, over by 15,016`.
pub fn usage_text(resource: &str, used: i64, limit: Option<i64>) -> String {
    let q = |v: i64| fmt_quantity(usage_scaled(resource, v));
    match limit {
        Some(l) if used > l => format!("{} / {}, over by {}", q(used), q(l), q(used - l)),
        Some(l) => format!("{} / {}", q(used), q(l)),
        None => q(used),
    }
}

/// A quantity for reading at a glance: thousands separators, and fewer decimals as it grows (two below 10, one
/// below 100, none from 100): `0.25`, `5.85`, `13.2`, `16,016`.
pub fn fmt_quantity(x: f64) -> String {
    let decimals = if x.abs() >= 100.0 {
        0
    } else if x.abs() >= 10.0 {
        1
    } else {
        2
    };
    let text = format!("{x:.decimals$}");
    let text = if text.contains('.') { text.trim_end_matches('0').trim_end_matches('.') } else { &text };
    let (sign, digits) = match text.strip_prefix('-') {
        Some(rest) => ("-", rest),
        None => ("", text),
    };
    let (int, frac) = digits.split_once('.').map_or((digits, None), |(i, f)| (i, Some(f)));
    let grouped = crate::protocol::view::group_thousands(int);
    let sign = if grouped.chars().all(|c| c == '0' || c == ',') && frac.is_none() { "" } else { sign };
    match frac {
        Some(f) => format!("{sign}{grouped}.{f}"),
        None => format!("{sign}{grouped}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities_read_at_a_glance() {
        assert_eq!(fmt_quantity(0.0), "0");
        assert_eq!(fmt_quantity(0.25), "0.25");
        assert_eq!(fmt_quantity(5.85), "5.85");
        assert_eq!(fmt_quantity(64.0), "64");
        assert_eq!(fmt_quantity(13.24), "13.2");
        assert_eq!(fmt_quantity(999.4), "999");
        assert_eq!(fmt_quantity(1000.0), "1,000");
        assert_eq!(fmt_quantity(16_015.9), "16,016");
        assert_eq!(fmt_quantity(1_234_567.0), "1,234,567");
        assert_eq!(fmt_quantity(-15_015.9), "-15,016");
        assert_eq!(fmt_quantity(-0.001), "0");
    }

    #[test]
    fn usage_is_in_cores_and_gib_with_the_excess_over_the_limit() {
        assert_eq!(usage_text("cpu", 16_015_900, Some(1_000_000)), "16,016 / 1,000, over by 15,016");
        assert_eq!(usage_text("cpu", 5_850, Some(64_000)), "5.85 / 64");
        assert_eq!(usage_text("cpu", 1_000_000, Some(1_000_000)), "1,000 / 1,000");
        assert_eq!(usage_text("memory", 3 << 40, Some(1 << 40)), "3,072 / 1,024, over by 2,048");
        assert_eq!(usage_text("memory", 14_173_392_076, None), "13.2");
        assert_eq!(usage_text("nvidia.com/gpu", 4, Some(8)), "4 / 8");
    }
}
