//! Strict parsing of operator-edited YAML: syntax and type errors, unknown fields, wrong apiVersion/kind and every
//! [`validation`](super::validation) error, each pinned to a 1-based line and column so an editor can jump there.
//!
//! serde_yaml does the typed deserialisation (its errors carry a location); `serde_ignored` reports the keys serde
//! skipped; a second, position-aware parse with `saphyr-parser` maps field paths back to where they were written.

use serde::de::DeserializeOwned;
use std::fmt;

use saphyr_parser::{Event, Parser, ScanError, Span};
use thiserror::Error;

use super::ec2nodeclass::EC2NodeClass;
use super::nodeclaim::NodeClaim;
use super::nodepool::NodePool;
use super::validation::{
    FieldError, FieldPath, PathSegment, validate_ec2nodeclass, validate_nodeclaim, validate_nodepool,
    validate_nodepool_written,
};
use crate::engine::labels::LabelPolicy;
use crate::engine::version::KarpenterVersion;

/// What kind of problem a [`Diagnostic`] reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiagnosticKind {
    /// Not well-formed YAML.
    Syntax,
    /// Well-formed YAML of the wrong shape (a string where a list belongs, a missing required field, ...).
    Type,
    /// A field the object's schema doesn't have (the API server would prune it silently).
    UnknownField,
    /// apiVersion/kind are missing or name a different object.
    WrongKind,
    /// The object parsed but breaks a validation rule.
    Invalid,
}

impl fmt::Display for DiagnosticKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DiagnosticKind::Syntax => "syntax error",
            DiagnosticKind::Type => "type error",
            DiagnosticKind::UnknownField => "unknown field",
            DiagnosticKind::WrongKind => "wrong object",
            DiagnosticKind::Invalid => "invalid",
        })
    }
}

/// One problem in an operator's YAML, at a 1-based line and column of `file`.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{file}:{line}:{column}: {kind}: {}{message}", if path.is_empty() { String::new() } else { format!("{path}: ") })]
pub struct Diagnostic {
    /// The file or source name the text came from (for display only).
    pub file: String,
    pub line: usize,
    pub column: usize,
    /// Field path in Kubernetes notation; empty when the problem isn't tied to a field.
    pub path: String,
    pub message: String,
    pub kind: DiagnosticKind,
}

/// A 1-based line and column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Pos {
    pub line: usize,
    pub column: usize,
}

impl Pos {
    const START: Pos = Pos { line: 1, column: 1 };

    fn from_span(span: &Span) -> Pos {
        // saphyr lines are 1-based, columns 0-based.
        Pos { line: span.start.line().max(1), column: span.start.col() + 1 }
    }
}

#[derive(Debug)]
enum Node {
    /// Entries keep the key's position: that is where an editor should point for "this field".
    Map(Vec<(String, Pos, Node)>, Pos),
    Seq(Vec<Node>, Pos),
    Scalar(String, Pos),
    /// Aliases aren't followed: a path through one resolves to the alias itself.
    Alias(Pos),
}

impl Node {
    fn pos(&self) -> Pos {
        match self {
            Node::Map(_, p) | Node::Seq(_, p) | Node::Scalar(_, p) | Node::Alias(p) => *p,
        }
    }
}

/// Where each field of a YAML document was written. Only the first document of a stream is indexed.
#[derive(Debug)]
pub struct YamlIndex {
    root: Option<Node>,
}

/// A YAML syntax error from the position-aware parser.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{line}:{column}: {message}")]
pub struct YamlSyntaxError {
    pub line: usize,
    pub column: usize,
    pub message: String,
}

impl From<ScanError> for YamlSyntaxError {
    fn from(e: ScanError) -> Self {
        YamlSyntaxError { line: e.marker().line().max(1), column: e.marker().col() + 1, message: e.info().to_string() }
    }
}

enum Frame {
    Map { entries: Vec<(String, Pos, Node)>, pos: Pos, key: Option<(String, Pos)> },
    Seq { items: Vec<Node>, pos: Pos },
}

impl YamlIndex {
    /// Builds the index with an explicit stack, so deeply nested input can't overflow the call stack.
    pub fn parse(yaml: &str) -> Result<YamlIndex, YamlSyntaxError> {
        let mut stack: Vec<Frame> = Vec::new();
        let mut root: Option<Node> = None;
        for ev in Parser::new_from_str(yaml) {
            let (ev, span) = ev?;
            let pos = Pos::from_span(&span);
            let done = match ev {
                Event::MappingStart(..) => {
                    stack.push(Frame::Map { entries: Vec::new(), pos, key: None });
                    None
                }
                Event::SequenceStart(..) => {
                    stack.push(Frame::Seq { items: Vec::new(), pos });
                    None
                }
                Event::MappingEnd | Event::SequenceEnd => match stack.pop() {
                    Some(Frame::Map { entries, pos, .. }) => Some(Node::Map(entries, pos)),
                    Some(Frame::Seq { items, pos }) => Some(Node::Seq(items, pos)),
                    None => None,
                },
                Event::Scalar(text, ..) => Some(Node::Scalar(text.into_owned(), pos)),
                Event::Alias(_) => Some(Node::Alias(pos)),
                _ => None,
            };
            let Some(node) = done else { continue };
            match stack.last_mut() {
                Some(Frame::Map { entries, key, .. }) => match key.take() {
                    Some((k, kpos)) => entries.push((k, kpos, node)),
                    None => {
                        // Complex (non-scalar) keys can't be addressed by a field path; keep a placeholder.
                        let k = match &node {
                            Node::Scalar(s, _) => s.clone(),
                            _ => String::from("?"),
                        };
                        *key = Some((k, node.pos()));
                    }
                },
                Some(Frame::Seq { items, .. }) => items.push(node),
                None if root.is_none() => root = Some(node),
                None => {}
            }
        }
        Ok(YamlIndex { root })
    }

    /// Where the field at `path` was written: the key for a map entry, the item for a list element. `None` when
    /// the path doesn't exist in the text.
    pub fn locate(&self, path: &FieldPath) -> Option<Pos> {
        let (pos, matched) = self.walk(path)?;
        (matched == path.0.len()).then_some(pos)
    }

    /// Like [`locate`](Self::locate), but falls back to the nearest parent that exists (or the document start).
    pub fn locate_nearest(&self, path: &FieldPath) -> Pos {
        self.walk(path).map_or(Pos::START, |(p, _)| p)
    }

    /// Follows `path` as far as it goes; returns the last position reached and how many segments matched.
    fn walk(&self, path: &FieldPath) -> Option<(Pos, usize)> {
        let mut node = self.root.as_ref()?;
        let mut pos = node.pos();
        for (i, seg) in path.0.iter().enumerate() {
            let next = match (node, seg) {
                (Node::Map(entries, _), PathSegment::Field(k) | PathSegment::Key(k)) => {
                    entries.iter().find(|(ek, _, _)| ek == k).map(|(_, kp, n)| (*kp, n))
                }
                (Node::Map(entries, _), PathSegment::Index(n)) => {
                    let k = n.to_string();
                    entries.iter().find(|(ek, _, _)| *ek == k).map(|(_, kp, n)| (*kp, n))
                }
                (Node::Seq(items, _), PathSegment::Index(n)) => items.get(*n).map(|n| (n.pos(), n)),
                _ => None,
            };
            match next {
                Some((p, n)) => {
                    pos = p;
                    node = n;
                }
                None => return Some((pos, i)),
            }
        }
        Some((pos, path.0.len()))
    }

    /// The path of the last node that starts at or before `at`: the best guess for which field a serde error
    /// (which only has a location) is about.
    fn path_at(&self, at: Pos) -> FieldPath {
        let mut best = FieldPath::root();
        let mut best_pos = Pos::START;
        let Some(root) = &self.root else { return best };
        let mut todo: Vec<(&Node, FieldPath)> = vec![(root, FieldPath::root())];
        while let Some((node, path)) = todo.pop() {
            match node {
                Node::Map(entries, _) => {
                    for (k, kp, n) in entries {
                        let p = path.field(k);
                        if *kp <= at && *kp >= best_pos {
                            best = p.clone();
                            best_pos = *kp;
                        }
                        todo.push((n, p));
                    }
                }
                Node::Seq(items, _) => {
                    for (i, n) in items.iter().enumerate() {
                        let p = path.index(i);
                        if n.pos() <= at && n.pos() >= best_pos {
                            best = p.clone();
                            best_pos = n.pos();
                        }
                        todo.push((n, p));
                    }
                }
                Node::Scalar(..) | Node::Alias(_) => {}
            }
        }
        best
    }

    fn scalar(&self, key: &str) -> Option<(&str, Pos)> {
        match self.root.as_ref()? {
            Node::Map(entries, _) => entries.iter().find(|(k, _, _)| k == key).and_then(|(_, _, n)| match n {
                Node::Scalar(s, p) => Some((s.as_str(), *p)),
                _ => None,
            }),
            _ => None,
        }
    }
}

/// Where `path` (in the notation of [`FieldPath`], e.g. `spec.template.spec.requirements[1].values`) was written
/// in `yaml`, as a 1-based (line, column). `None` if the YAML doesn't parse or the path isn't there.
pub fn locate(yaml: &str, path: &str) -> Option<(usize, usize)> {
    let index = YamlIndex::parse(yaml).ok()?;
    index.locate(&FieldPath::parse(path)).map(|p| (p.line, p.column))
}

/// Converts serde_ignored's path (`spec.template.0.foo`) to ours; the wrappers around options/newtypes carry no
/// segment of their own.
pub fn ignored_path(p: &serde_ignored::Path<'_>) -> FieldPath {
    let mut segs = Vec::new();
    let mut cur = p;
    loop {
        match cur {
            serde_ignored::Path::Root => break,
            serde_ignored::Path::Seq { parent, index } => {
                segs.push(PathSegment::Index(*index));
                cur = parent;
            }
            serde_ignored::Path::Map { parent, key } => {
                segs.push(PathSegment::Field(key.clone()));
                cur = parent;
            }
            serde_ignored::Path::Some { parent }
            | serde_ignored::Path::NewtypeStruct { parent }
            | serde_ignored::Path::NewtypeVariant { parent } => cur = parent,
        }
    }
    segs.reverse();
    FieldPath(segs)
}

struct Ctx<'a> {
    file: &'a str,
    index: Option<YamlIndex>,
    out: Vec<Diagnostic>,
}

impl Ctx<'_> {
    fn push(&mut self, pos: Pos, path: String, message: String, kind: DiagnosticKind) {
        self.out.push(Diagnostic {
            file: self.file.to_string(),
            line: pos.line,
            column: pos.column,
            path,
            message,
            kind,
        });
    }

    fn at_path(&mut self, path: &FieldPath, message: String, kind: DiagnosticKind) {
        let pos = self.index.as_ref().map_or(Pos::START, |i| i.locate_nearest(path));
        self.push(pos, path.to_string(), message, kind);
    }
}

/// The shared pipeline: deserialise with serde_yaml (collecting skipped keys), check apiVersion/kind, validate.
fn parse_strict<T: DeserializeOwned>(
    yaml: &str,
    file: &str,
    type_meta: Option<(&str, &str)>,
    validate: impl FnOnce(&T, &dyn Fn(&FieldPath) -> bool) -> Vec<FieldError>,
) -> Result<T, Vec<Diagnostic>> {
    let parsed_index = YamlIndex::parse(yaml);
    let syntax_error = parsed_index.as_ref().err().cloned();
    let mut cx = Ctx { file, index: parsed_index.ok(), out: Vec::new() };

    let mut unknown: Vec<FieldPath> = Vec::new();
    let de = serde_yaml::Deserializer::from_str(yaml);
    let result: Result<T, serde_yaml::Error> = serde_ignored::deserialize(de, |p| unknown.push(ignored_path(&p)));
    let obj = match result {
        Ok(obj) => Some(obj),
        Err(e) => {
            let loc = e.location().map(|l| Pos { line: l.line().max(1), column: l.column().max(1) });
            match (&syntax_error, loc) {
                // Both parsers reject the text: report it as syntax, where serde_yaml (libyaml) put it.
                (Some(se), _) => {
                    let pos = loc.unwrap_or(Pos { line: se.line, column: se.column });
                    cx.push(pos, String::new(), e.to_string(), DiagnosticKind::Syntax);
                }
                (None, loc) => {
                    let pos = loc.unwrap_or(Pos::START);
                    let path = cx.index.as_ref().map(|i| i.path_at(pos).to_string()).unwrap_or_default();
                    cx.push(pos, path, e.to_string(), DiagnosticKind::Type);
                }
            }
            None
        }
    };
    // If libyaml accepted text the YAML 1.2 parser rejects, the object stands (the API server's parser is the
    // lenient kind too); diagnostics below then point at the document start instead of the field.
    let wanted = type_meta.map(|(api_version, kind)| [("apiVersion", api_version), ("kind", kind)]);
    for (field, want) in wanted.into_iter().flatten() {
        let found = cx.index.as_ref().and_then(|i| i.scalar(field).map(|(s, p)| (s.to_string(), p)));
        match found {
            Some((s, _)) if s == want => {}
            Some((s, p)) => cx.push(
                p,
                field.to_string(),
                format!("expected {field} {want:?}, got {s:?}"),
                DiagnosticKind::WrongKind,
            ),
            None if cx.index.is_some() => cx.push(
                Pos::START,
                field.to_string(),
                format!("{field} is required ({want:?})"),
                DiagnosticKind::WrongKind,
            ),
            None => {}
        }
    }

    // The kube-derived root type doesn't keep apiVersion/kind, so serde skips them; they were checked above.
    let is_type_meta = |p: &FieldPath| {
        type_meta.is_some() && matches!(p.0.as_slice(), [PathSegment::Field(f)] if f == "apiVersion" || f == "kind")
    };
    for path in unknown.iter().filter(|p| !is_type_meta(p)) {
        let name = path.0.last().map_or(String::new(), |s| match s {
            PathSegment::Field(k) | PathSegment::Key(k) => k.clone(),
            PathSegment::Index(i) => i.to_string(),
        });
        cx.at_path(path, format!("unknown field {name:?}"), DiagnosticKind::UnknownField);
    }

    if let Some(obj) = &obj {
        // Whether the text names a field (unknown when only libyaml could read it: then it counts as written).
        let index = &cx.index;
        let written = |p: &FieldPath| index.as_ref().is_none_or(|i| i.locate(p).is_some());
        let errors = validate(obj, &written);
        for e in errors {
            cx.at_path(&e.path, format!("{} (got {:?})", e.message, e.value), DiagnosticKind::Invalid);
        }
    }

    match obj {
        Some(obj) if cx.out.is_empty() => Ok(obj),
        _ => {
            // Editors list problems top to bottom; the sort is stable so same-line problems keep their order.
            cx.out.sort_by_key(|d| (d.line, d.column));
            Err(cx.out)
        }
    }
}

/// Parses a NodePool an operator wrote, rejecting anything the API server or Karpenter would reject or silently
/// drop. `source_name` only labels the diagnostics.
/// As the newest modelled Karpenter takes it.
pub fn parse_nodepool_strict(yaml: &str, source_name: &str) -> Result<NodePool, Vec<Diagnostic>> {
    parse_nodepool_strict_with(yaml, source_name, &LabelPolicy::default(), KarpenterVersion::NEWEST)
}

/// [`parse_nodepool_strict`] with a provider's label policy (restricted domains, well-known labels), as Karpenter
/// `version` takes it.
pub fn parse_nodepool_strict_with(
    yaml: &str,
    source_name: &str,
    policy: &LabelPolicy,
    version: KarpenterVersion,
) -> Result<NodePool, Vec<Diagnostic>> {
    parse_strict(yaml, source_name, Some(("karpenter.sh/v1", "NodePool")), |np, written| {
        let mut errors = validate_nodepool(np, policy);
        errors.extend(validate_nodepool_written(np, version, written));
        errors
    })
}

/// Strict parse of a NodeClaim (requirements, taints, node class reference, durations).
pub fn parse_nodeclaim_strict(yaml: &str, source_name: &str) -> Result<NodeClaim, Vec<Diagnostic>> {
    let policy = LabelPolicy::default();
    parse_strict(yaml, source_name, Some(("karpenter.sh/v1", "NodeClaim")), |nc, _| validate_nodeclaim(nc, &policy))
}

/// Strict parse of an EC2NodeClass (selector terms, AMI alias, role xor instance profile).
pub fn parse_ec2nodeclass_strict(yaml: &str, source_name: &str) -> Result<EC2NodeClass, Vec<Diagnostic>> {
    parse_strict(yaml, source_name, Some(("karpenter.k8s.aws/v1", "EC2NodeClass")), |c, _| validate_ec2nodeclass(c))
}

/// Strict parse of a `--scheduler-config` document (YAML or JSON): unknown fields and every rule upstream checks the
/// flag against, each at its line and column.
pub fn parse_scheduler_config_strict(
    yaml: &str,
    source_name: &str,
) -> Result<super::scheduler_config::SchedulerConfig, Vec<Diagnostic>> {
    if yaml.trim().is_empty() {
        return Ok(Default::default());
    }
    parse_strict(yaml, source_name, None, |c, _| super::scheduler_config::validate_scheduler_config(c))
}

/// Strictly parses `text` as the NodePool `pool_name`: the engine's strict parse plus "no renaming". Diagnostics
/// are sorted by position and name `pool_name` as their file.
pub fn validate_nodepool_text(
    text: &str,
    pool_name: &str,
    policy: &crate::engine::labels::LabelPolicy,
    version: KarpenterVersion,
) -> Result<NodePool, Vec<Diagnostic>> {
    validate_text(
        text,
        pool_name,
        "NodePool",
        |t| parse_nodepool_strict_with(t, pool_name, policy, version),
        |p| p.metadata.name.clone(),
    )
}

/// Strictly parses `text` as the NodeOverlay `name`: the CRD's rules (see
/// [`crate::engine::api::nodeoverlay::validate_nodeoverlay`]) plus "no renaming".
pub fn validate_nodeoverlay_text(
    text: &str,
    name: &str,
) -> Result<crate::engine::api::nodeoverlay::NodeOverlay, Vec<Diagnostic>> {
    validate_text(
        text,
        name,
        "NodeOverlay",
        |t| {
            parse_strict(t, name, Some(("karpenter.sh/v1alpha1", "NodeOverlay")), |o, _| {
                crate::engine::api::nodeoverlay::validate_nodeoverlay(o)
            })
        },
        |o| o.metadata.name.clone(),
    )
}

/// The text of an edited object named `object_name` of `kind`: `parse`'s strict parse plus "no renaming".
fn validate_text<T>(
    text: &str,
    object_name: &str,
    kind: &str,
    parse: impl FnOnce(&str) -> Result<T, Vec<Diagnostic>>,
    name_of: impl Fn(&T) -> Option<String>,
) -> Result<T, Vec<Diagnostic>> {
    let pool_name = object_name;
    if text.trim().is_empty() {
        return Err(vec![Diagnostic {
            file: pool_name.to_string(),
            line: 1,
            column: 1,
            path: String::new(),
            message: format!("the document is empty; a {kind} needs apiVersion, kind, metadata and spec"),
            kind: DiagnosticKind::Syntax,
        }]);
    }
    let result = parse(text);
    let name = match &result {
        Ok(p) => name_of(p),
        // Still say "don't rename" when something else is wrong too, if the text is YAML at all.
        Err(_) => serde_yaml::from_str::<serde_yaml::Value>(text)
            .ok()
            .and_then(|v| v.get("metadata")?.get("name")?.as_str().map(str::to_string)),
    };
    let rename = match name.as_deref() {
        Some(n) if n == pool_name => None,
        Some(n) => Some(format!(
            "renaming is not supported: metadata.name must stay {pool_name:?} (got {n:?}); create a new {kind} instead"
        )),
        None if result.is_ok() => Some(format!("metadata.name is required and must stay {pool_name:?}")),
        None => None,
    };
    let mut diagnostics = match result {
        Ok(p) if rename.is_none() => return Ok(p),
        Ok(_) => Vec::new(),
        Err(d) => d,
    };
    if let Some(message) = rename {
        let (line, column) = locate(text, "metadata.name").or_else(|| locate(text, "metadata")).unwrap_or((1, 1));
        diagnostics.push(Diagnostic {
            file: pool_name.to_string(),
            line,
            column,
            path: "metadata.name".into(),
            message,
            kind: DiagnosticKind::Invalid,
        });
        diagnostics.sort_by_key(|d| (d.line, d.column));
    }
    Err(diagnostics)
}

/// The text to edit for a live NodePool: its YAML without `status` (the controller's, not the operator's) and
/// without `metadata.managedFields` (bookkeeping nobody edits by hand). Everything else stays, so the diff against
/// it shows exactly what the operator changed.
pub fn editable_yaml(pool: &NodePool) -> Result<String, serde_yaml::Error> {
    let mut p = pool.clone();
    p.status = None;
    p.metadata.managed_fields = None;
    serde_yaml::to_string(&p)
}

/// [`editable_yaml`] for a NodeOverlay.
pub fn editable_overlay_yaml(o: &crate::engine::api::nodeoverlay::NodeOverlay) -> Result<String, serde_yaml::Error> {
    let mut o = o.clone();
    o.status = None;
    o.metadata.managed_fields = None;
    serde_yaml::to_string(&o)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOC: &str = "\
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: default
spec:
  template:
    spec:
      requirements:
        - key: kubernetes.io/arch
          operator: In
          values: [amd64]
        - key: team
          operator: In
          values:
            - a
            - b
";

    #[test]
    fn locates_fields() {
        assert_eq!(locate(DOC, "spec"), Some((5, 1)));
        assert_eq!(locate(DOC, "spec.template.spec.requirements[1]"), Some((12, 11)));
        assert_eq!(locate(DOC, "spec.template.spec.requirements[1].values[1]"), Some((16, 15)));
        assert_eq!(locate(DOC, "spec.template.spec.requirements[0].values"), Some((11, 11)));
        assert_eq!(locate(DOC, "spec.nope"), None);
        assert_eq!(locate("a: [", "a"), None);
    }

    #[test]
    fn nearest_parent_fallback() {
        let idx = YamlIndex::parse(DOC).unwrap();
        let p = FieldPath::parse("spec.template.spec.nodeClassRef.group");
        assert_eq!(idx.locate_nearest(&p), Pos { line: 7, column: 5 });
    }

    #[test]
    fn path_at_location() {
        let idx = YamlIndex::parse(DOC).unwrap();
        assert_eq!(
            idx.path_at(Pos { line: 16, column: 15 }).to_string(),
            "spec.template.spec.requirements[1].values[1]"
        );
    }

    #[test]
    fn deep_nesting_does_not_overflow() {
        let deep = "[".repeat(100_000);
        let _ = YamlIndex::parse(&deep);
        let _ = parse_nodepool_strict(&deep, "deep.yaml");
    }
}
