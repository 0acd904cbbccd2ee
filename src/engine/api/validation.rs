//! Strict validation of operator-written Karpenter objects: the `karpenter.sh/v1` CRD schema and CEL rules plus the
//! webhook-equivalent Go checks (`nodepool_validation.go`, `nodeclaim_validation.go`), and the EC2NodeClass basics.
//!
//! Reading objects elsewhere stays lenient; this module is what an edit must pass before the engine accepts it.
//! Every check reports into one list so an operator sees all problems at once, each with the field path.

use std::collections::BTreeSet;
use std::fmt;

use chrono::{DateTime, SubsecRound, Utc};
use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};
use k8s_openapi::api::core::v1::Taint;
use thiserror::Error;

use super::common::{NodeClassReference, NodeSelectorRequirementWithMinValues};
use super::duration::parse_go_duration;
use super::ec2nodeclass::EC2NodeClass;
use super::nodeclaim::NodeClaim;
use super::nodepool::{Budget, NodePool, POLICY_BALANCED, POLICY_WHEN_EMPTY, POLICY_WHEN_EMPTY_OR_UNDERUTILIZED};
use crate::engine::labels::{self, LabelPolicy};
use crate::engine::requirements::Operator;
use crate::engine::resources::parse_quantity;
use crate::engine::version::KarpenterVersion;

/// Upstream limits (CRD `maxItems`/`maxProperties`/`maximum`).
pub const MAX_REQUIREMENTS: usize = 100;
pub const MAX_LABELS: usize = 100;
pub const MAX_BUDGETS: usize = 50;
pub const MAX_MIN_VALUES: i64 = 50;
pub const MAX_SELECTOR_TERMS: usize = 30;

/// One segment of a field path: a struct field (`.name`), a list index (`[3]`) or a map key (`[team]`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum PathSegment {
    Field(String),
    Index(usize),
    Key(String),
}

/// A field path in Kubernetes' notation, e.g. `spec.template.spec.requirements[1].values[0]` or
/// `spec.template.metadata.labels[karpenter.sh/nodepool]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct FieldPath(pub Vec<PathSegment>);

impl FieldPath {
    pub fn root() -> Self {
        FieldPath(Vec::new())
    }

    /// Parses the notation [`Display`](fmt::Display) writes. Bracketed all-digit segments become indices; a
    /// locator treats them as map keys too when the node is a map, so the ambiguity is harmless.
    pub fn parse(s: &str) -> FieldPath {
        let mut segs = Vec::new();
        let mut cur = String::new();
        let mut chars = s.chars();
        while let Some(c) = chars.next() {
            match c {
                '.' => {
                    if !cur.is_empty() {
                        segs.push(PathSegment::Field(std::mem::take(&mut cur)));
                    }
                }
                '[' => {
                    if !cur.is_empty() {
                        segs.push(PathSegment::Field(std::mem::take(&mut cur)));
                    }
                    let inner: String = chars.by_ref().take_while(|&c| c != ']').collect();
                    match inner.parse::<usize>() {
                        Ok(i) if inner.bytes().all(|b| b.is_ascii_digit()) => segs.push(PathSegment::Index(i)),
                        _ => segs.push(PathSegment::Key(inner)),
                    }
                }
                c => cur.push(c),
            }
        }
        if !cur.is_empty() {
            segs.push(PathSegment::Field(cur));
        }
        FieldPath(segs)
    }

    pub fn field(&self, name: &str) -> FieldPath {
        self.with(PathSegment::Field(name.to_string()))
    }

    pub fn index(&self, i: usize) -> FieldPath {
        self.with(PathSegment::Index(i))
    }

    pub fn key(&self, k: &str) -> FieldPath {
        self.with(PathSegment::Key(k.to_string()))
    }

    fn with(&self, seg: PathSegment) -> FieldPath {
        let mut v = self.0.clone();
        v.push(seg);
        FieldPath(v)
    }
}

impl fmt::Display for FieldPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, seg) in self.0.iter().enumerate() {
            match seg {
                PathSegment::Field(name) if i == 0 => f.write_str(name)?,
                PathSegment::Field(name) => write!(f, ".{name}")?,
                PathSegment::Index(n) => write!(f, "[{n}]")?,
                PathSegment::Key(k) => write!(f, "[{k}]")?,
            }
        }
        Ok(())
    }
}

/// One validation failure: which object, which field, the offending value and why.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{object}: {path}: {message} (got {value:?})")]
pub struct FieldError {
    /// `Kind/name`, e.g. `NodePool/default`.
    pub object: String,
    pub path: FieldPath,
    pub value: String,
    pub message: String,
}

/// Why a disruption budget could not be evaluated.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum BudgetError {
    #[error("invalid schedule {schedule:?}: {reason}")]
    InvalidSchedule { schedule: String, reason: String },
    #[error("invalid budget duration {duration:?}: {reason}")]
    InvalidDuration { duration: String, reason: String },
    #[error("invalid budget nodes {nodes:?}: must be a non-negative integer or a percentage 0%..100%")]
    InvalidNodes { nodes: String },
    #[error("'schedule' must be set with 'duration'")]
    ScheduleWithoutDuration,
    #[error("no time matching schedule {schedule:?} could be found")]
    NoOccurrence { schedule: String },
}

/// Collects errors for one object.
struct Report {
    object: String,
    errs: Vec<FieldError>,
}

impl Report {
    fn new(kind: &str, name: Option<&str>) -> Self {
        Report { object: format!("{kind}/{}", name.unwrap_or("")), errs: Vec::new() }
    }

    fn err(&mut self, path: &FieldPath, value: impl Into<String>, message: impl Into<String>) {
        self.errs.push(FieldError {
            object: self.object.clone(),
            path: path.clone(),
            value: value.into(),
            message: message.into(),
        });
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Name and value syntax (k8s.io/apimachinery/pkg/util/validation)
// ---------------------------------------------------------------------------------------------------------------

fn is_alnum(b: u8) -> bool {
    b.is_ascii_alphanumeric()
}

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`, non-empty.
fn is_qualified_name_part(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && is_alnum(b[0])
        && is_alnum(b[b.len() - 1])
        && b.iter().all(|&c| is_alnum(c) || matches!(c, b'-' | b'_' | b'.'))
}

/// DNS-1123 subdomain: lowercase labels of `[a-z0-9-]` joined by dots, each starting and ending alphanumeric.
pub fn is_dns1123_subdomain(s: &str) -> bool {
    s.len() <= 253
        && !s.is_empty()
        && s.split('.').all(|label| {
            let b = label.as_bytes();
            !b.is_empty()
                && b.iter().all(|&c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
                && b[0] != b'-'
                && b[b.len() - 1] != b'-'
        })
}

/// Problems with a qualified name (`[prefix/]name`), worded like `validation.IsQualifiedName`. Empty when valid.
pub fn qualified_name_errors(key: &str) -> Vec<String> {
    const NAME_FMT: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start \
                            and end with an alphanumeric character";
    let mut errs = Vec::new();
    let parts: Vec<&str> = key.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".to_string());
            } else if !is_dns1123_subdomain(prefix) {
                errs.push(
                    "prefix part must be a lowercase RFC 1123 subdomain (at most 253 characters of [a-z0-9-.], \
                     each dot-separated part starting and ending with an alphanumeric character)"
                        .to_string(),
                );
            }
            *name
        }
        _ => {
            errs.push(
                "a qualified name must consist of alphanumeric characters, '-', '_' or '.', with an optional DNS \
                 subdomain prefix and '/' (e.g. 'example.com/MyName')"
                    .to_string(),
            );
            return errs;
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".to_string());
    } else {
        if name.len() > 63 {
            errs.push("name part must be no more than 63 characters".to_string());
        }
        if !is_qualified_name_part(name) {
            errs.push(NAME_FMT.to_string());
        }
    }
    errs
}

/// Problems with a label value (≤63 characters of `(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?`).
pub fn label_value_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 63 {
        errs.push("must be no more than 63 characters".to_string());
    }
    if !value.is_empty() && !is_qualified_name_part(value) {
        errs.push(
            "a valid label value must be an empty string or consist of alphanumeric characters, '-', '_' or '.', \
             and must start and end with an alphanumeric character"
                .to_string(),
        );
    }
    errs
}

/// `^([0-9]+(s|m|h))+$`: the CRD pattern for expireAfter/consolidateAfter/terminationGracePeriod (no fractions,
/// no sub-second units, so what the API server accepts is exactly what Go's parser reads).
fn is_smh_duration(s: &str) -> bool {
    let b = s.as_bytes();
    if b.is_empty() {
        return false;
    }
    let mut i = 0;
    while i < b.len() {
        let start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        if i == start || i == b.len() || !matches!(b[i], b's' | b'm' | b'h') {
            return false;
        }
        i += 1;
    }
    true
}

/// `^((([0-9]+(h|m))|([0-9]+h[0-9]+m))(0s)?)$`: budget windows are whole minutes (Go renders `1h0m0s`).
pub fn is_budget_duration(s: &str) -> bool {
    fn core(s: &str) -> bool {
        let digits_then = |s: &str, unit: char| -> Option<usize> {
            let n = s.bytes().take_while(u8::is_ascii_digit).count();
            (n > 0 && s[n..].starts_with(unit)).then_some(n + 1)
        };
        if let Some(n) = digits_then(s, 'h') {
            if n == s.len() {
                return true;
            }
            return digits_then(&s[n..], 'm').is_some_and(|m| n + m == s.len());
        }
        digits_then(s, 'm').is_some_and(|m| m == s.len())
    }
    core(s) || s.strip_suffix("0s").is_some_and(core)
}

/// `^((100|[0-9]{1,2})%|[0-9]+)$`.
pub fn is_budget_nodes(s: &str) -> bool {
    if let Some(p) = s.strip_suffix('%') {
        p == "100" || (!p.is_empty() && p.len() <= 2 && p.bytes().all(|b| b.is_ascii_digit()))
    } else {
        !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Budgets: cron schedules, activity and allowed disruptions
// ---------------------------------------------------------------------------------------------------------------

const MONTHS: [&str; 12] = ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"];
const DAYS: [&str; 7] = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];

/// Parses a budget schedule the way upstream's `cron.ParseStandard` does: five fields (minute hour dom month dow)
/// or one of the `@` macros, evaluated in UTC. croner accepts more (seconds, years, `L`, `W`, `#`); those are
/// rejected here so that a schedule accepted by us is accepted by the real controller.
pub fn parse_schedule(schedule: &str) -> Result<Cron, BudgetError> {
    let bad =
        |reason: &str| BudgetError::InvalidSchedule { schedule: schedule.to_string(), reason: reason.to_string() };
    let s = schedule.trim();
    let expr = if let Some(mac) = s.strip_prefix('@') {
        match mac {
            "yearly" | "annually" => "0 0 1 1 *",
            "monthly" => "0 0 1 * *",
            "weekly" => "0 0 * * 0",
            "daily" | "midnight" => "0 0 * * *",
            "hourly" => "0 * * * *",
            _ => {
                return Err(bad(
                    "unknown macro; expected @yearly, @annually, @monthly, @weekly, @daily, @midnight or @hourly",
                ));
            }
        }
    } else {
        s
    };
    let fields: Vec<&str> = expr.split_whitespace().collect();
    if fields.len() != 5 {
        return Err(bad("expected exactly 5 fields (minute hour day-of-month month day-of-week) or a macro"));
    }
    for (i, field) in fields.iter().enumerate() {
        if !field.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'*' | b',' | b'-' | b'/' | b'?')) {
            return Err(bad("fields may only contain digits, names, '*', ',', '-', '/' and '?'"));
        }
        // Letters are only month names (field 4) and weekday names (field 5), as in robfig/cron.
        let names: &[&str] = match i {
            3 => &MONTHS,
            4 => &DAYS,
            _ => &[],
        };
        for word in field.split(|c: char| !c.is_ascii_alphabetic()).filter(|w| !w.is_empty()) {
            if !names.iter().any(|n| n.eq_ignore_ascii_case(word)) {
                return Err(bad("unexpected name in a cron field"));
            }
        }
    }
    CronParser::builder()
        .seconds(Seconds::Disallowed)
        .year(Year::Disallowed)
        .build()
        .parse(&fields.join(" "))
        .map_err(|e| bad(&e.to_string()))
}

/// Whether a scheduled budget is in its window at `now`: active iff the first schedule hit strictly after
/// `now − duration` is not after `now` (upstream `Budget.IsActive`, whole-second resolution like robfig/cron).
pub fn budget_is_active(schedule: &str, duration: &str, now: DateTime<Utc>) -> Result<bool, BudgetError> {
    let cron = parse_schedule(schedule)?;
    let bad_duration = |reason: String| BudgetError::InvalidDuration { duration: duration.to_string(), reason };
    let d = parse_go_duration(duration).map_err(|e| bad_duration(e.to_string()))?;
    let d = chrono::Duration::from_std(d).map_err(|e| bad_duration(e.to_string()))?;
    let start = now.checked_sub_signed(d).ok_or_else(|| bad_duration("window starts before the epoch range".into()))?;
    let next = cron
        .find_next_occurrence(&start.trunc_subsecs(0), false)
        .map_err(|_| BudgetError::NoOccurrence { schedule: schedule.to_string() })?;
    Ok(next <= now)
}

/// Whether a budget applies at `now`: budgets without a schedule always do.
pub fn budget_active(budget: &Budget, now: DateTime<Utc>) -> Result<bool, BudgetError> {
    match (&budget.schedule, &budget.duration) {
        (None, None) => Ok(true),
        (Some(s), Some(d)) => budget_is_active(s, d, now),
        _ => Err(BudgetError::ScheduleWithoutDuration),
    }
}

/// How many of `num_nodes` a budget's `nodes` allows to be disrupted: an integer as is, a percentage rounded up
/// (so 10% of 5 nodes is 1), like `intstr.GetScaledValueFromIntOrPercent(..., roundUp=true)`.
pub fn budget_allowed(nodes: &str, num_nodes: i64) -> Result<i64, BudgetError> {
    let bad = || BudgetError::InvalidNodes { nodes: nodes.to_string() };
    if !is_budget_nodes(nodes) {
        return Err(bad());
    }
    if let Some(p) = nodes.strip_suffix('%') {
        let pct: i64 = p.parse().map_err(|_| bad())?;
        let scaled = pct.checked_mul(num_nodes.max(0)).ok_or_else(bad)?;
        Ok((scaled + 99) / 100)
    } else {
        nodes.parse().map_err(|_| bad())
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Shared pieces
// ---------------------------------------------------------------------------------------------------------------

/// Which object a requirement list belongs to: only NodePools may not mention `karpenter.sh/nodepool` (NodeClaims
/// carry it, written by Karpenter).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Owner {
    NodePool,
    NodeClaim,
}

fn validate_requirements(
    r: &mut Report,
    path: &FieldPath,
    reqs: &[NodeSelectorRequirementWithMinValues],
    policy: &LabelPolicy,
    owner: Owner,
) {
    if reqs.len() > MAX_REQUIREMENTS {
        r.err(path, reqs.len().to_string(), format!("must have at most {MAX_REQUIREMENTS} items"));
    }
    for (i, req) in reqs.iter().enumerate() {
        validate_requirement(r, &path.index(i), req, policy, owner);
    }
}

fn validate_requirement(
    r: &mut Report,
    path: &FieldPath,
    req: &NodeSelectorRequirementWithMinValues,
    policy: &LabelPolicy,
    owner: Owner,
) {
    let key_path = path.field("key");
    let values_path = path.field("values");
    let min_path = path.field("minValues");
    for e in qualified_name_errors(&req.key) {
        r.err(&key_path, &req.key, e);
    }
    // Deprecated beta keys are accepted under their current names, as upstream normalises before checking.
    let key = labels::normalize_key(&req.key);
    if owner == Owner::NodePool && key == labels::NODEPOOL {
        r.err(&key_path, &req.key, format!("label {:?} is restricted", labels::NODEPOOL));
    } else if let Some(why) = policy.restricted(key) {
        r.err(&key_path, &req.key, why);
    }
    for (j, v) in req.values.iter().enumerate() {
        for e in label_value_errors(v) {
            r.err(&values_path.index(j), v, e);
        }
    }
    let joined = || format!("[{}]", req.values.join(", "));
    let Some(op) = Operator::parse(&req.operator) else {
        r.err(
            &path.field("operator"),
            &req.operator,
            "unsupported operator; must be one of In, NotIn, Exists, DoesNotExist, Gt, Lt, Gte, Lte",
        );
        return;
    };
    match op {
        Operator::In if req.values.is_empty() => {
            r.err(&values_path, joined(), "requirements with operator 'In' must have a value defined");
        }
        Operator::Exists | Operator::DoesNotExist if !req.values.is_empty() => {
            r.err(&values_path, joined(), format!("requirements with operator '{op}' must not have values"));
        }
        Operator::Gt | Operator::Lt | Operator::Gte | Operator::Lte => {
            let ok = matches!(&req.values[..], [v] if v.parse::<i64>().is_ok_and(|n| n >= 0));
            if !ok {
                r.err(
                    &values_path,
                    joined(),
                    format!("requirements with operator '{op}' must have a single non-negative integer value"),
                );
            }
        }
        _ => {}
    }
    if let Some(m) = req.min_values {
        if !(1..=MAX_MIN_VALUES).contains(&m) {
            r.err(&min_path, m.to_string(), format!("minValues must be between 1 and {MAX_MIN_VALUES}"));
        } else if op == Operator::In && (req.values.len() as i64) < m {
            r.err(
                &min_path,
                m.to_string(),
                format!(
                    "requirements with 'minValues' must have at least that many values specified in the 'values' \
                     field (got {})",
                    req.values.len()
                ),
            );
        }
    }
    // Well-known values: a capacity-type requirement naming only values Karpenter never launches can't be met.
    if key == labels::CAPACITY_TYPE && op == Operator::In && !req.values.is_empty() {
        let known = req.values.iter().filter(|v| labels::CAPACITY_TYPES.contains(&v.as_str())).count();
        if known == 0 {
            r.err(
                &values_path,
                joined(),
                format!("no valid values for {key}, expected one of {:?}", labels::CAPACITY_TYPES),
            );
        } else if let Some(m) = req.min_values.filter(|m| (1..=MAX_MIN_VALUES).contains(m))
            && (known as i64) < m
        {
            r.err(&min_path, m.to_string(), format!("only {known} known values for {key}, fewer than minValues"));
        }
    }
}

/// Taints and startup taints share one (key, effect) set: a duplicate across the two lists is still a duplicate.
fn validate_taints(r: &mut Report, path: &FieldPath, taints: &[Taint], seen: &mut BTreeSet<(String, String)>) {
    for (i, t) in taints.iter().enumerate() {
        let p = path.index(i);
        if t.key.is_empty() {
            r.err(&p.field("key"), &t.key, "taint key must not be empty");
        } else {
            for e in qualified_name_errors(&t.key) {
                r.err(&p.field("key"), &t.key, e);
            }
        }
        if let Some(v) = &t.value {
            for e in label_value_errors(v) {
                r.err(&p.field("value"), v, e);
            }
        }
        if !matches!(t.effect.as_str(), "NoSchedule" | "PreferNoSchedule" | "NoExecute") {
            r.err(&p.field("effect"), &t.effect, "effect must be one of NoSchedule, PreferNoSchedule, NoExecute");
        }
        if !seen.insert((t.key.clone(), t.effect.clone())) {
            r.err(&p, format!("{}:{}", t.key, t.effect), "duplicate taint Key/Effect pair");
        }
    }
}

fn validate_node_class_ref(r: &mut Report, path: &FieldPath, ncr: &NodeClassReference) {
    for (field, value) in [("group", &ncr.group), ("kind", &ncr.kind), ("name", &ncr.name)] {
        if value.is_empty() {
            r.err(&path.field(field), value, format!("{field} may not be empty"));
        } else if field != "name" && value.contains('/') {
            r.err(&path.field(field), value, format!("{field} may not contain '/'"));
        }
    }
}

fn validate_expire_after(r: &mut Report, path: &FieldPath, v: &str) {
    if v != "Never" && !(is_smh_duration(v) && parse_go_duration(v).is_ok()) {
        r.err(path, v, "must be a duration of whole s/m/h units (e.g. 720h) or 'Never'");
    }
}

fn validate_termination_grace_period(r: &mut Report, path: &FieldPath, v: Option<&str>) {
    if let Some(v) = v
        && !(is_smh_duration(v) && parse_go_duration(v).is_ok())
    {
        r.err(path, v, "must be a duration of whole s/m/h units (e.g. 24h); 'Never' is not allowed");
    }
}

fn validate_metadata_name(r: &mut Report, name: Option<&str>) {
    let path = FieldPath::root().field("metadata").field("name");
    match name {
        None | Some("") => r.err(&path, "", "name is required"),
        Some(n) if !is_dns1123_subdomain(n) => r.err(&path, n, "must be a lowercase RFC 1123 subdomain"),
        _ => {}
    }
}

// ---------------------------------------------------------------------------------------------------------------
// NodePool
// ---------------------------------------------------------------------------------------------------------------

/// Every problem with a NodePool as an operator wrote it. Empty means the API server and Karpenter's webhook
/// logic would accept it.
/// The CRD's transition rule: a NodePool stays static (replicas set) or dynamic (replicas unset) for its life.
pub fn validate_nodepool_transition(old: &NodePool, new: &NodePool) -> Option<FieldError> {
    (old.spec.replicas.is_some() != new.spec.replicas.is_some()).then(|| FieldError {
        object: format!("NodePool/{}", new.metadata.name.as_deref().unwrap_or_default()),
        path: FieldPath::root().field("spec"),
        value: new.spec.replicas.map_or_else(|| "replicas unset".to_string(), |n| format!("replicas: {n}")),
        message: "Cannot transition NodePool between static (replicas set) and dynamic (replicas unset) provisioning \
                  modes"
            .into(),
    })
}

/// The NodePool checks of the CRD and webhook, as the newest modelled Karpenter has them (what an older version
/// refuses besides is [`validate_nodepool_written`]'s).
pub fn validate_nodepool(np: &NodePool, policy: &LabelPolicy) -> Vec<FieldError> {
    let mut r = Report::new("NodePool", np.metadata.name.as_deref());
    validate_metadata_name(&mut r, np.metadata.name.as_deref());
    let spec = FieldPath::root().field("spec");
    let tmpl = spec.field("template");

    // Template labels.
    let labels_path = tmpl.field("metadata").field("labels");
    let meta = &np.spec.template.metadata;
    if meta.labels.len() > MAX_LABELS {
        r.err(&labels_path, meta.labels.len().to_string(), format!("must have at most {MAX_LABELS} labels"));
    }
    for (k, v) in &meta.labels {
        let p = labels_path.key(k);
        for e in qualified_name_errors(k) {
            r.err(&p, k, e);
        }
        let key = labels::normalize_key(k);
        if key == labels::NODEPOOL {
            r.err(&p, k, format!("label {:?} is restricted", labels::NODEPOOL));
        } else if let Some(why) = policy.restricted(key) {
            r.err(&p, k, why);
        }
        for e in label_value_errors(v) {
            r.err(&p, v, e);
        }
    }
    let ann_path = tmpl.field("metadata").field("annotations");
    for k in meta.annotations.keys() {
        for e in qualified_name_errors(k) {
            r.err(&ann_path.key(k), k, e);
        }
    }

    // Template spec.
    let ts = &np.spec.template.spec;
    let tsp = tmpl.field("spec");
    validate_requirements(&mut r, &tsp.field("requirements"), &ts.requirements, policy, Owner::NodePool);
    let mut seen = BTreeSet::new();
    validate_taints(&mut r, &tsp.field("taints"), &ts.taints, &mut seen);
    validate_taints(&mut r, &tsp.field("startupTaints"), &ts.startup_taints, &mut seen);
    validate_node_class_ref(&mut r, &tsp.field("nodeClassRef"), &ts.node_class_ref);
    validate_expire_after(&mut r, &tsp.field("expireAfter"), &ts.expire_after);
    validate_termination_grace_period(
        &mut r,
        &tsp.field("terminationGracePeriod"),
        ts.termination_grace_period.as_deref(),
    );

    // Weight, limits, replicas.
    if let Some(w) = np.spec.weight
        && !(1..=100).contains(&w)
    {
        r.err(&spec.field("weight"), w.to_string(), "weight must be between 1 and 100");
    }
    if let Some(limits) = &np.spec.limits {
        for (k, q) in limits {
            if let Err(e) = parse_quantity(&q.0) {
                r.err(&spec.field("limits").key(k), &q.0, e.to_string());
            }
        }
    }
    if let Some(n) = np.spec.replicas
        && n < 0
    {
        r.err(&spec.field("replicas"), n.to_string(), "replicas must be non-negative");
    }
    // The CRD's rules for static pools (upstream v1.14.1's messages).
    if np.spec.replicas.is_some() {
        if let Some(limits) = &np.spec.limits
            && limits.keys().any(|k| k != "nodes")
        {
            let keys: Vec<&str> = limits.keys().map(String::as_str).collect();
            r.err(&spec.field("limits"), keys.join(","), "only 'limits.nodes' is supported on static NodePools");
        }
        if let Some(w) = np.spec.weight {
            r.err(&spec.field("weight"), w.to_string(), "'weight' is not supported on static NodePools");
        }
    }

    // Disruption.
    let dp = spec.field("disruption");
    let d = &np.spec.disruption;
    if ![POLICY_WHEN_EMPTY, POLICY_WHEN_EMPTY_OR_UNDERUTILIZED, POLICY_BALANCED]
        .contains(&d.consolidation_policy.as_str())
    {
        r.err(
            &dp.field("consolidationPolicy"),
            &d.consolidation_policy,
            "must be one of WhenEmpty, WhenEmptyOrUnderutilized, Balanced",
        );
    }
    if d.consolidate_after != "Never"
        && !(is_smh_duration(&d.consolidate_after) && parse_go_duration(&d.consolidate_after).is_ok())
    {
        r.err(
            &dp.field("consolidateAfter"),
            &d.consolidate_after,
            "must be a duration of whole s/m/h units (e.g. 30s) or 'Never'",
        );
    }
    let bp = dp.field("budgets");
    if d.budgets.len() > MAX_BUDGETS {
        r.err(&bp, d.budgets.len().to_string(), format!("must have at most {MAX_BUDGETS} budgets"));
    }
    for (i, b) in d.budgets.iter().enumerate() {
        validate_budget(&mut r, &bp.index(i), b);
    }
    r.errs
}

fn validate_budget(r: &mut Report, p: &FieldPath, b: &Budget) {
    if !is_budget_nodes(&b.nodes) {
        r.err(&p.field("nodes"), &b.nodes, "must be a non-negative integer or a percentage between 0% and 100%");
    }
    match (&b.schedule, &b.duration) {
        (Some(_), None) => r.err(&p.field("schedule"), "", "'schedule' must be set with 'duration'"),
        (None, Some(_)) => r.err(&p.field("duration"), "", "'duration' must be set with 'schedule'"),
        _ => {}
    }
    if let Some(s) = &b.schedule
        && let Err(e) = parse_schedule(s)
    {
        r.err(&p.field("schedule"), s, e.to_string());
    }
    if let Some(dur) = &b.duration
        && !is_budget_duration(dur)
    {
        r.err(&p.field("duration"), dur, "must be hours and/or minutes only, e.g. 8h, 30m or 1h30m");
    }
    let allowed = KarpenterVersion::NEWEST.budget_reasons();
    for (j, reason) in b.reasons.iter().flatten().enumerate() {
        if !allowed.contains(&reason.as_str()) {
            r.err(&p.field("reasons").index(j), reason, format!("must be one of {}", allowed.join(", ")));
        }
    }
}

/// What a NodePool's own text may not say under Karpenter `version`, beyond [`validate_nodepool`]: forms a later
/// version brought that the typed object cannot show, because serde filled in its default. `written` tells whether
/// the text names a field. Only authored text is checked this way (the editor, scenarios, manifest files): an
/// object read from the API server was defaulted there.
pub fn validate_nodepool_written(
    np: &NodePool,
    version: KarpenterVersion,
    written: impl Fn(&FieldPath) -> bool,
) -> Vec<FieldError> {
    let mut r = Report::new("NodePool", np.metadata.name.as_deref());
    let disruption = FieldPath::root().field("spec").field("disruption");
    let after = disruption.field("consolidateAfter");
    if version.requires_consolidate_after() && written(&disruption) && !written(&after) {
        r.err(
            &after,
            "",
            format!("Required value (Karpenter {version} requires it in spec.disruption; 1.15 defaults it to 0s)"),
        );
    }
    let budgets = disruption.field("budgets");
    let allowed = version.budget_reasons();
    for (i, b) in np.spec.disruption.budgets.iter().enumerate() {
        for (j, reason) in b.reasons.iter().flatten().enumerate() {
            // Reasons no modelled version knows are validate_nodepool's.
            if !allowed.contains(&reason.as_str())
                && KarpenterVersion::NEWEST.budget_reasons().contains(&reason.as_str())
            {
                r.err(
                    &budgets.index(i).field("reasons").index(j),
                    reason,
                    format!(
                        "must be one of {} ({reason} is a reason from a later Karpenter than {version})",
                        allowed.join(", ")
                    ),
                );
            }
        }
    }
    let annotations = FieldPath::root().field("spec").field("template").field("metadata").field("annotations");
    if np.spec.template.metadata.annotations.contains_key(labels::ANNOTATION_DO_NOT_REPAIR)
        && let Some(why) = do_not_repair_ignored(version)
    {
        r.err(&annotations.key(labels::ANNOTATION_DO_NOT_REPAIR), labels::ANNOTATION_DO_NOT_REPAIR, why);
    }
    r.errs
}

/// Why `karpenter.sh/do-not-repair`, written on an object, is refused under Karpenter `version`: it would do
/// nothing there. `None` where the version reads it.
pub fn do_not_repair_ignored(version: KarpenterVersion) -> Option<String> {
    (!version.reads_do_not_repair()).then(|| {
        format!(
            "{} is read from Karpenter 1.15 on; under {version} it would do nothing",
            labels::ANNOTATION_DO_NOT_REPAIR
        )
    })
}

// ---------------------------------------------------------------------------------------------------------------
// NodeClaim
// ---------------------------------------------------------------------------------------------------------------

/// The checks that apply to a NodeClaim's spec (requirements, taints, node class, durations, requests).
pub fn validate_nodeclaim(nc: &NodeClaim, policy: &LabelPolicy) -> Vec<FieldError> {
    let mut r = Report::new("NodeClaim", nc.metadata.name.as_deref());
    validate_metadata_name(&mut r, nc.metadata.name.as_deref());
    let sp = FieldPath::root().field("spec");
    let s = &nc.spec;
    validate_requirements(&mut r, &sp.field("requirements"), &s.requirements, policy, Owner::NodeClaim);
    let mut seen = BTreeSet::new();
    validate_taints(&mut r, &sp.field("taints"), &s.taints, &mut seen);
    validate_taints(&mut r, &sp.field("startupTaints"), &s.startup_taints, &mut seen);
    validate_node_class_ref(&mut r, &sp.field("nodeClassRef"), &s.node_class_ref);
    validate_expire_after(&mut r, &sp.field("expireAfter"), &s.expire_after);
    validate_termination_grace_period(
        &mut r,
        &sp.field("terminationGracePeriod"),
        s.termination_grace_period.as_deref(),
    );
    for (k, q) in &s.resources.requests {
        if let Err(e) = parse_quantity(&q.0) {
            r.err(&sp.field("resources").field("requests").key(k), &q.0, e.to_string());
        }
    }
    r.errs
}

// ---------------------------------------------------------------------------------------------------------------
// EC2NodeClass
// ---------------------------------------------------------------------------------------------------------------

pub const AMI_FAMILIES: [&str; 6] = ["al2", "al2023", "bottlerocket", "windows2019", "windows2022", "windows2025"];

/// The EC2NodeClass basics: AMI, subnet and security-group selector terms, and role xor instance profile.
pub fn validate_ec2nodeclass(nc: &EC2NodeClass) -> Vec<FieldError> {
    let mut r = Report::new("EC2NodeClass", nc.metadata.name.as_deref());
    validate_metadata_name(&mut r, nc.metadata.name.as_deref());
    let sp = FieldPath::root().field("spec");
    let s = &nc.spec;

    let ap = sp.field("amiSelectorTerms");
    if s.ami_selector_terms.is_empty() {
        r.err(&ap, "", "amiSelectorTerms must have at least one term");
    } else if s.ami_selector_terms.len() > MAX_SELECTOR_TERMS {
        r.err(&ap, s.ami_selector_terms.len().to_string(), format!("must have at most {MAX_SELECTOR_TERMS} terms"));
    }
    let has_alias = s.ami_selector_terms.iter().any(|t| t.alias.is_some());
    if has_alias && s.ami_selector_terms.len() > 1 {
        r.err(&ap, "", "'alias' is mutually exclusive, cannot be set with a combination of other amiSelectorTerms");
    }
    for (i, t) in s.ami_selector_terms.iter().enumerate() {
        let p = ap.index(i);
        let others = !t.tags.is_empty() || t.id.is_some() || t.name.is_some() || t.ssm_parameter.is_some();
        if t.alias.is_none() && !others {
            r.err(&p, "", "expected at least one of 'tags', 'id', 'name', 'alias', 'ssmParameter'");
        }
        if let Some(alias) = &t.alias {
            if others || t.owner.is_some() {
                r.err(&p.field("alias"), alias, "'alias' is mutually exclusive with the term's other fields");
            }
            match alias.split_once('@') {
                Some((family, version))
                    if !family.is_empty()
                        && !version.is_empty()
                        && family.bytes().all(|b| b.is_ascii_alphanumeric()) =>
                {
                    if !AMI_FAMILIES.contains(&family) {
                        r.err(
                            &p.field("alias"),
                            alias,
                            format!("family is not supported, must be one of {AMI_FAMILIES:?}"),
                        );
                    }
                }
                _ => r.err(&p.field("alias"), alias, "'alias' is improperly formatted, must match 'family@version'"),
            }
        }
        if t.id.is_some() && (!t.tags.is_empty() || t.name.is_some()) {
            r.err(
                &p.field("id"),
                t.id.clone().unwrap_or_default(),
                "'id' is mutually exclusive with 'tags' and 'name'",
            );
        }
    }

    for (field, terms, allow_name) in [
        ("subnetSelectorTerms", &s.subnet_selector_terms, false),
        ("securityGroupSelectorTerms", &s.security_group_selector_terms, true),
    ] {
        let p = sp.field(field);
        if terms.is_empty() {
            r.err(&p, "", format!("{field} must have at least one term"));
        } else if terms.len() > MAX_SELECTOR_TERMS {
            r.err(&p, terms.len().to_string(), format!("must have at most {MAX_SELECTOR_TERMS} terms"));
        }
        for (i, t) in terms.iter().enumerate() {
            let tp = p.index(i);
            let named = allow_name && t.name.is_some();
            if t.tags.is_empty() && t.id.is_none() && !named {
                let expected = if allow_name { "'tags', 'id' or 'name'" } else { "'tags' or 'id'" };
                r.err(&tp, "", format!("expected at least one of {expected}"));
            }
            if t.id.is_some() && (!t.tags.is_empty() || named) {
                r.err(
                    &tp.field("id"),
                    t.id.clone().unwrap_or_default(),
                    "'id' is mutually exclusive with the term's other fields",
                );
            }
            for (k, v) in &t.tags {
                if k.is_empty() || v.is_empty() {
                    r.err(&tp.field("tags").key(k), v, "empty tag keys or values aren't supported");
                }
            }
        }
    }

    // Capacity reservation selector terms: the CRD's CEL rules and patterns, with its messages.
    let cp = sp.field("capacityReservationSelectorTerms");
    let terms = &s.capacity_reservation_selector_terms;
    if terms.len() > MAX_SELECTOR_TERMS {
        r.err(&cp, terms.len().to_string(), format!("must have at most {MAX_SELECTOR_TERMS} terms"));
    }
    for (i, t) in terms.iter().enumerate() {
        let tp = cp.index(i);
        if t.tags.is_empty() && t.id.is_none() && t.instance_match_criteria.is_none() {
            r.err(&tp, "", "expected at least one, got none, ['tags', 'id', 'instanceMatchCriteria']");
        }
        if t.tags.len() > 20 {
            r.err(&tp.field("tags"), t.tags.len().to_string(), "must have at most 20 items");
        }
        for (k, v) in &t.tags {
            if k.is_empty() || v.is_empty() {
                r.err(&tp.field("tags").key(k), v, "empty tag keys or values aren't supported");
            }
        }
        if let Some(id) = &t.id
            && !id
                .strip_prefix("cr-")
                .is_some_and(|r| !r.is_empty() && r.bytes().all(|b| b.is_ascii_digit() || b.is_ascii_lowercase()))
        {
            r.err(&tp.field("id"), id, "should match '^cr-[0-9a-z]+$'");
        }
        if let Some(o) = &t.owner_id
            && !(o.len() == 12 && o.bytes().all(|b| b.is_ascii_digit()))
        {
            r.err(&tp.field("ownerID"), o, "should match '^[0-9]{12}$'");
        }
        if let Some(c) = &t.instance_match_criteria
            && c != "open"
            && c != "targeted"
        {
            r.err(&tp.field("instanceMatchCriteria"), c, "Unsupported value: must be one of \"open\", \"targeted\"");
        }
    }
    // Written as `!self.all(...)` in the CRD: refused only when every term mixes `id` with other fields.
    let mixes = |t: &crate::engine::api::ec2nodeclass::CapacityReservationSelectorTerm| {
        t.id.is_some() && (!t.tags.is_empty() || t.owner_id.is_some() || t.instance_match_criteria.is_some())
    };
    if !terms.is_empty() && terms.iter().all(mixes) {
        r.err(
            &cp,
            "",
            "'id' is mutually exclusive, cannot be set along with other fields in a capacity reservation selector term",
        );
    }

    match (&s.role, &s.instance_profile) {
        (Some(_), Some(_)) | (None, None) => {
            r.err(&sp, "", "must specify exactly one of ['role', 'instanceProfile']");
        }
        (Some(role), None) if role.is_empty() => r.err(&sp.field("role"), "", "role may not be empty"),
        (None, Some(ip)) if ip.is_empty() => {
            r.err(&sp.field("instanceProfile"), "", "instanceProfile may not be empty")
        }
        _ => {}
    }
    r.errs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qualified_names() {
        for ok in ["team", "example.com/team", "karpenter.sh/capacity-type", "a", "A_b.c-D", "x.y/Z9"] {
            assert!(qualified_name_errors(ok).is_empty(), "{ok}");
        }
        let long_name = "a".repeat(64);
        let long_prefix = format!("{}.com/a", "a".repeat(250));
        for bad in ["", "/a", "a/", "a/b/c", "-a", "a-", "Example.com/a", "ex_ample.com/a", &long_name, &long_prefix] {
            assert!(!qualified_name_errors(bad).is_empty(), "{bad}");
        }
    }

    #[test]
    fn label_values() {
        for ok in ["", "a", "m5.large", "on-demand", "A_1"] {
            assert!(label_value_errors(ok).is_empty(), "{ok}");
        }
        for bad in ["-a", "a-", "a b", "a/b", &"a".repeat(64)] {
            assert!(!label_value_errors(bad).is_empty(), "{bad}");
        }
    }

    #[test]
    fn duration_patterns() {
        for ok in ["8h", "30m", "1h30m", "1h0m0s", "10m0s", "0m"] {
            assert!(is_budget_duration(ok), "{ok}");
        }
        for bad in ["", "10s", "100s", "1h30s", "1m1h", "1.5h", "h", "1d", "1h30m5s"] {
            assert!(!is_budget_duration(bad), "{bad}");
        }
        for ok in ["0s", "720h", "1h30m", "90s"] {
            assert!(is_smh_duration(ok), "{ok}");
        }
        for bad in ["", "1.5h", "10ms", "Never", "5", "h"] {
            assert!(!is_smh_duration(bad), "{bad}");
        }
    }

    #[test]
    fn nodes_pattern() {
        for ok in ["0", "10", "0%", "5%", "100%", "1000"] {
            assert!(is_budget_nodes(ok), "{ok}");
        }
        for bad in ["", "%", "101%", "-1", "1.5", "10 %", "100%%"] {
            assert!(!is_budget_nodes(bad), "{bad}");
        }
    }

    #[test]
    fn field_path_round_trip() {
        let p = FieldPath::root().field("spec").field("requirements").index(1).field("values").index(0);
        assert_eq!(p.to_string(), "spec.requirements[1].values[0]");
        assert_eq!(FieldPath::parse(&p.to_string()), p);
        let l = FieldPath::root().field("labels").key("karpenter.sh/nodepool");
        assert_eq!(l.to_string(), "labels[karpenter.sh/nodepool]");
        assert_eq!(FieldPath::parse(&l.to_string()), l);
    }

    #[test]
    fn schedules() {
        for ok in ["0 9 * * 1-5", "@daily", "@midnight", "@annually", "*/15 * * * *", "0 0 1 JAN *", "0 0 * * MON-FRI"]
        {
            assert!(parse_schedule(ok).is_ok(), "{ok}");
        }
        for bad in
            ["", "@often", "* * * *", "0 0 * * * *", "0 0 L * *", "0 0 * * 1#2", "TZ=UTC 0 0 * * *", "61 * * * *"]
        {
            assert!(parse_schedule(bad).is_err(), "{bad}");
        }
    }
}
