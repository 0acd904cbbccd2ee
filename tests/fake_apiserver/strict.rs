//! Strict admission of custom resources, as a real kube-apiserver does it against a CRD.
//!
//! The fake API server stores what it is sent; a real one prunes unknown fields, applies the schema's
//! `default`s and refuses (422) anything the OpenAPI schema, the list-type invariants or the
//! `x-kubernetes-validations` CEL rules reject. This module does the same, so that a controller under test that
//! writes something a real cluster would refuse fails here too, with the same field path and reason.
//!
//! What it follows, in the apiserver's order (apiextensions-apiserver `customResourceStrategy` and friends):
//! type meta, object meta, the OpenAPI schema (kube-openapi's messages), the scale subresource's replicas,
//! `x-kubernetes-list-type` set/map uniqueness, then the CEL rules — skipped, as upstream does, once a
//! type/required/enum/size error makes the object the wrong shape for them.
//!
//! Everything a CRD says that this module cannot enforce makes [`Crds::load_dir`] panic, naming it: a schema keyword
//! it does not know, a format the apiserver checks and this module does not, a CEL rule that does not parse or calls
//! a function not implemented here. Nothing is skipped silently.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};

use cel::extractors::This;
use cel::{Context, Env, ExecutionError, Program};
use regex::Regex;
use serde_json::{Map, Value, json};

// ---------------------------------------------------------------------------------------------------------------
// Public API
// ---------------------------------------------------------------------------------------------------------------

/// Every CRD served version, found by collection (group, version, plural) or by (apiVersion, kind).
pub struct Crds {
    schemas: Vec<CrdSchema>,
}

/// One served version of a CRD: its structural schema with compiled CEL rules.
pub struct CrdSchema {
    pub group: String,
    pub version: String,
    pub kind: String,
    pub plural: String,
    pub namespaced: bool,
    /// With the status subresource, `status` is only written through `/status`, and only `status` there.
    pub status_subresource: bool,
    scale: Option<Scale>,
    root: Node,
    /// Without any rule the apiserver has no CEL validator, and no note about rules left unchecked.
    has_rules: bool,
    env: Arc<Env>,
}

/// Which write the object comes from; `old` is the stored object it replaces.
#[derive(Clone, Debug)]
pub enum Write {
    Create,
    Update { old: Value },
    Status { old: Value },
}

/// The `field.ErrorType`s the apiserver reports (its `reason` in a Status cause).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrKind {
    Required,
    Invalid,
    /// The value is not of the schema's type (or format); blocks the CEL rules, as upstream.
    TypeInvalid,
    Unsupported,
    Duplicate,
    TooLong,
    TooMany,
    Forbidden,
    Internal,
}

/// A field error as `k8s.io/apimachinery/pkg/util/validation/field.Error` renders it.
#[derive(Clone, Debug, PartialEq)]
pub struct FieldError {
    /// `spec.disruption.budgets[0].nodes`, `metadata.labels`, `spec.limits[cpu]`; `<nil>` for an object-wide error.
    pub path: String,
    pub kind: ErrKind,
    /// The offending value as Go's `%q`/`%v` prints it (`"x"`, `5`), when the error shows one.
    pub value: Option<String>,
    /// What follows the value: `should match '^a$'`, a CEL rule's message, `supported values: "A", "B"`.
    pub detail: String,
}

impl ErrKind {
    /// The `reason` of a Status cause.
    pub fn reason(self) -> &'static str {
        match self {
            ErrKind::Required => "FieldValueRequired",
            ErrKind::Invalid => "FieldValueInvalid",
            ErrKind::TypeInvalid => "FieldValueTypeInvalid",
            ErrKind::Unsupported => "FieldValueNotSupported",
            ErrKind::Duplicate => "FieldValueDuplicate",
            ErrKind::TooLong => "FieldValueTooLong",
            ErrKind::TooMany => "FieldValueTooMany",
            ErrKind::Forbidden => "FieldValueForbidden",
            ErrKind::Internal => "InternalError",
        }
    }

    fn title(self) -> &'static str {
        match self {
            ErrKind::Required => "Required value",
            ErrKind::Invalid | ErrKind::TypeInvalid => "Invalid value",
            ErrKind::Unsupported => "Unsupported value",
            ErrKind::Duplicate => "Duplicate value",
            ErrKind::TooLong => "Too long",
            ErrKind::TooMany => "Too many",
            ErrKind::Forbidden => "Forbidden",
            ErrKind::Internal => "Internal error",
        }
    }

    /// Errors after which the CEL rules are not run (apiextensions-apiserver's `hasBlockingErr`).
    fn blocks_cel(self) -> bool {
        matches!(
            self,
            ErrKind::Unsupported | ErrKind::Required | ErrKind::TooLong | ErrKind::TooMany | ErrKind::TypeInvalid
        )
    }
}

impl FieldError {
    fn new(path: &str, kind: ErrKind, value: Option<String>, detail: impl Into<String>) -> Self {
        FieldError {
            path: if path.is_empty() { "<nil>".into() } else { path.into() },
            kind,
            value,
            detail: detail.into(),
        }
    }

    fn required(path: &str, detail: &str) -> Self {
        Self::new(path, ErrKind::Required, None, detail)
    }

    fn invalid(path: &str, value: &Value, detail: impl Into<String>) -> Self {
        Self::new(path, ErrKind::Invalid, Some(go_value(value)), detail)
    }

    /// The message without the path, as in a Status cause: `Invalid value: "x": should match '^a$'`.
    pub fn body(&self) -> String {
        let mut s = self.kind.title().to_string();
        // Like field.Error.ErrorBody: these kinds never show the value.
        let shows_value =
            !matches!(self.kind, ErrKind::Required | ErrKind::Forbidden | ErrKind::TooLong | ErrKind::Internal);
        if let (true, Some(v)) = (shows_value, &self.value) {
            s.push_str(": ");
            s.push_str(v);
        }
        if !self.detail.is_empty() {
            s.push_str(": ");
            s.push_str(&self.detail);
        }
        s
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.body())
    }
}

/// The 422 Status a real API server answers with (`errors.NewInvalid`).
pub fn invalid_status(kind: &str, group: &str, name: &str, errors: &[FieldError]) -> Value {
    let qualified = if group.is_empty() { kind.to_string() } else { format!("{kind}.{group}") };
    let causes: Vec<Value> =
        errors.iter().map(|e| json!({"reason": e.kind.reason(), "message": e.body(), "field": e.path})).collect();
    // utilerrors.NewAggregate: identical messages once, one bare, several in brackets.
    let mut messages: Vec<String> = Vec::new();
    for e in errors {
        let m = e.to_string();
        if !messages.contains(&m) {
            messages.push(m);
        }
    }
    let message = match messages.len() {
        0 => format!("{qualified} {name:?} is invalid"),
        1 => format!("{qualified} {name:?} is invalid: {}", messages[0]),
        _ => format!("{qualified} {name:?} is invalid: [{}]", messages.join(", ")),
    };
    json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
        "reason": "Invalid", "details": {"name": name, "group": group, "kind": kind, "causes": causes}, "code": 422,
    })
}

impl Crds {
    /// Loads every `*.yaml`/`*.yml` CRD in a directory. Panics naming the file, and the schema path and rule, on
    /// anything it cannot load or enforce (test-time only).
    pub fn load_dir(dir: &Path) -> Crds {
        let mut files: Vec<_> = std::fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("crdval: cannot read {}: {e}", dir.display()))
            .filter_map(|entry| entry.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
            .collect();
        files.sort();
        let env = Arc::new(cel_env());
        let mut schemas = Vec::new();
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("crdval: {}: {e}", file.display()));
            schemas.extend(load_crd(&file.display().to_string(), &text, &env));
        }
        for s in &schemas {
            if let Err(problems) = s.check_supported() {
                panic!("crdval: CEL rules of {} need what crdval lacks:\n{}", s.kind, problems.join("\n"));
            }
        }
        Crds { schemas }
    }

    /// The schema of a collection, e.g. ("karpenter.sh", "v1", "nodepools") for `apis/karpenter.sh/v1/nodepools`.
    pub fn schema_for(&self, group: &str, version: &str, plural: &str) -> Option<&CrdSchema> {
        self.schemas.iter().find(|s| s.group == group && s.version == version && s.plural == plural)
    }

    /// The schema of an object's type, e.g. ("karpenter.sh/v1", "NodePool").
    pub fn schema_for_kind(&self, api_version: &str, kind: &str) -> Option<&CrdSchema> {
        self.schemas.iter().find(|s| s.api_version() == api_version && s.kind == kind)
    }

    pub fn iter(&self) -> impl Iterator<Item = &CrdSchema> {
        self.schemas.iter()
    }
}

impl CrdSchema {
    pub fn api_version(&self) -> String {
        format!("{}/{}", self.group, self.version)
    }

    /// What the real API server does to a write before storing it: the status subresource's split (create drops
    /// `status`, update keeps the old one, a status write takes only `status` from the body), pruning of unknown
    /// fields, `default`s, then validation. Returns the object to store, or the field errors of a 422.
    ///
    /// Namespaced kinds need `metadata.namespace` set (from the URL) before the call, as the real server sets it.
    /// `metadata.generation`, `uid`, `resourceVersion` and `generateName` are left to the caller.
    pub fn admit(&self, obj: Value, write: &Write) -> Result<Value, Vec<FieldError>> {
        let Value::Object(body) = obj else {
            return Err(vec![FieldError::new("", ErrKind::Invalid, None, "the object must be a JSON object")]);
        };
        let mut obj = self.compose(body, write)?;
        let errs = self.validate_type_meta(&obj);
        if !errs.is_empty() {
            return Err(errs);
        }
        prune_resource_root(&mut obj, &self.root, "", &mut Vec::new());
        self.root.apply_defaults(&mut obj);
        let obj = Value::Object(obj);
        let errs = self.validate(&obj, write);
        if errs.is_empty() { Ok(obj) } else { Err(errs) }
    }

    /// Evaluates every CEL rule once, with `self` and `oldSelf` a value shaped by the rule's schema, and returns the
    /// rules whose evaluation needed a function or an overload this module does not provide.
    pub fn check_supported(&self) -> Result<(), Vec<String>> {
        let mut problems = Vec::new();
        self.root.check_rules_on_samples(self.kind.as_str(), "", &self.env, &mut problems);
        if problems.is_empty() { Ok(()) } else { Err(problems) }
    }

    /// The object as the write leaves it before pruning: the status subresource decides where `status` comes from.
    fn compose(&self, mut body: Map<String, Value>, write: &Write) -> Result<Map<String, Value>, Vec<FieldError>> {
        let old_status = |old: &Value| old.get("status").cloned();
        let mut obj = match write {
            Write::Create => {
                if self.status_subresource {
                    body.remove("status");
                }
                body
            }
            Write::Update { old } => {
                if self.status_subresource {
                    set_or_remove(&mut body, "status", old_status(old));
                }
                body
            }
            Write::Status { old } => {
                let Value::Object(mut stored) = old.clone() else {
                    return Err(vec![FieldError::new(
                        "",
                        ErrKind::Internal,
                        None,
                        "the stored object is not an object",
                    )]);
                };
                set_or_remove(&mut stored, "status", body.remove("status"));
                stored
            }
        };
        // rest.BeforeCreate/BeforeUpdate: a cluster-scoped object has no namespace, whatever the body says.
        if !self.namespaced
            && let Some(Value::Object(meta)) = obj.get_mut("metadata")
        {
            meta.remove("namespace");
        }
        Ok(obj)
    }

    /// customResourceValidator.ValidateTypeMeta: the body's apiVersion and kind must be this CRD's.
    fn validate_type_meta(&self, obj: &Map<String, Value>) -> Vec<FieldError> {
        let mut errs = Vec::new();
        let text = |k: &str| obj.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        let kind = text("kind");
        if kind != self.kind {
            errs.push(FieldError::invalid("kind", &Value::String(kind), format!("must be {}", self.kind)));
        }
        let api_version = text("apiVersion");
        if api_version != self.api_version() {
            errs.push(FieldError::invalid(
                "apiVersion",
                &Value::String(api_version),
                format!("must be {}", self.api_version()),
            ));
        }
        errs
    }

    /// The fields pruning would drop from `obj`, as a real server names them in the warning of
    /// `fieldValidation=Warn` (the default) or the 400 of `fieldValidation=Strict`: `unknown field "spec.foo"`.
    pub fn unknown_fields(&self, obj: &Value) -> Vec<String> {
        let mut dropped = Vec::new();
        if let Value::Object(mut obj) = obj.clone() {
            prune_resource_root(&mut obj, &self.root, "", &mut dropped);
        }
        dropped
    }

    fn validate(&self, obj: &Value, write: &Write) -> Vec<FieldError> {
        let (old, scope) = match write {
            Write::Create => (None, Scope::All),
            Write::Update { old } => (Some(old), Scope::All),
            Write::Status { old } => (Some(old), Scope::Status),
        };
        let mut errs = Vec::new();
        // A status write takes metadata from the stored object: only ValidateObjectMetaUpdate, nothing to see here.
        if scope == Scope::All {
            validate_object_meta(obj.get("metadata"), old.and_then(|o| o.get("metadata")), self.namespaced, &mut errs);
        }
        self.root.validate_schema(obj, "", scope, &mut errs);
        if let Some(scale) = &self.scale {
            scale.validate(obj, scope, &mut errs);
        }
        self.root.validate_list_types(obj, "", scope, &mut errs);
        if !self.has_rules {
            return errs;
        }
        if errs.iter().any(|e| e.kind.blocks_cel()) {
            errs.push(FieldError::new(
                "",
                ErrKind::Invalid,
                Some("\"null\"".into()),
                "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation",
            ));
        } else {
            self.root.validate_rules(obj, old, "", scope, &self.env, &mut errs);
        }
        errs
    }
}

fn set_or_remove(obj: &mut Map<String, Value>, key: &str, value: Option<Value>) {
    match value {
        Some(v) => {
            obj.insert(key.into(), v);
        }
        None => {
            obj.remove(key);
        }
    }
}

/// A status write validates only `status` (the rest is the stored, already admitted object), as ratcheting makes
/// the real server do for unchanged fields.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Scope {
    All,
    Status,
}

impl Scope {
    /// Whether a root-level property is validated in this scope.
    fn covers(self, root_property: &str) -> bool {
        self == Scope::All || root_property == "status"
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Loading: CRD YAML -> Node tree with compiled rules
// ---------------------------------------------------------------------------------------------------------------

/// A structural schema node, with what the apiserver enforces at that node.
#[derive(Default)]
struct Node {
    ty: Option<Ty>,
    nullable: bool,
    int_or_string: bool,
    preserve_unknown: bool,
    embedded: bool,
    properties: BTreeMap<String, Node>,
    additional: Option<Additional>,
    items: Option<Box<Node>>,
    required: Vec<String>,
    enumeration: Option<Vec<Value>>,
    pattern: Option<(String, Regex)>,
    date_time: bool,
    minimum: Option<f64>,
    exclusive_minimum: bool,
    maximum: Option<f64>,
    exclusive_maximum: bool,
    multiple_of: Option<f64>,
    min_length: Option<u64>,
    max_length: Option<u64>,
    min_items: Option<u64>,
    max_items: Option<u64>,
    min_properties: Option<u64>,
    max_properties: Option<u64>,
    list: ListType,
    list_map_keys: Vec<String>,
    map_atomic: bool,
    default: Option<Value>,
    all_of: Vec<Node>,
    any_of: Vec<Node>,
    one_of: Vec<Node>,
    not: Option<Box<Node>>,
    rules: Vec<Rule>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Ty {
    Object,
    Array,
    String,
    Integer,
    Number,
    Boolean,
}

enum Additional {
    Allows(bool),
    Schema(Box<Node>),
}

#[derive(Default, PartialEq)]
enum ListType {
    #[default]
    Atomic,
    Set,
    /// Items are identified by `list_map_keys`.
    Map,
}

struct Rule {
    source: String,
    program: Program,
    message: Option<String>,
    message_expression: Option<Program>,
    reason: Option<ErrKind>,
    field_path: Option<String>,
    uses_old_self: bool,
}

/// `scale` subresource paths, checked as customResourceValidator.ValidateScaleSpec/Status do.
struct Scale {
    spec_replicas: String,
    status_replicas: String,
}

/// Where a CRD is being read, for the panic messages of a bad file.
struct At<'a> {
    file: &'a str,
    crd: &'a str,
    env: &'a Env,
}

impl At<'_> {
    fn fail(&self, path: &str, what: impl fmt::Display) -> ! {
        panic!(
            "crdval: {} (CRD {}), schema at {:?}: {what}",
            self.file,
            self.crd,
            if path.is_empty() { "<root>" } else { path }
        )
    }
}

fn load_crd(file: &str, text: &str, env: &Arc<Env>) -> Vec<CrdSchema> {
    let doc: Value = serde_yaml::from_str(text).unwrap_or_else(|e| panic!("crdval: {file}: not YAML: {e}"));
    if doc.get("kind").and_then(Value::as_str) != Some("CustomResourceDefinition") {
        panic!("crdval: {file}: not a CustomResourceDefinition");
    }
    let spec = &doc["spec"];
    let field = |v: &Value, name: &str| -> String {
        v.get(name).and_then(Value::as_str).unwrap_or_else(|| panic!("crdval: {file}: no {name}")).to_string()
    };
    let group = field(spec, "group");
    let kind = field(&spec["names"], "kind");
    let plural = field(&spec["names"], "plural");
    let namespaced = field(spec, "scope") == "Namespaced";
    let crd = format!("{plural}.{group}");
    let versions =
        spec.get("versions").and_then(Value::as_array).unwrap_or_else(|| panic!("crdval: {file}: no versions"));
    let mut out = Vec::new();
    for v in versions.iter().filter(|v| v.get("served").and_then(Value::as_bool).unwrap_or(false)) {
        let version = field(v, "name");
        let at = At { file, crd: &crd, env };
        let schema = v.pointer("/schema/openAPIV3Schema").unwrap_or_else(|| at.fail("", "no openAPIV3Schema"));
        let subresources = v.get("subresources");
        let scale = subresources.and_then(|s| s.get("scale")).map(|s| Scale {
            spec_replicas: field(s, "specReplicasPath"),
            status_replicas: s.get("statusReplicasPath").and_then(Value::as_str).unwrap_or_default().to_string(),
        });
        let root = parse_node(schema, "", &at);
        out.push(CrdSchema {
            has_rules: root.has_rules(),
            group: group.clone(),
            version,
            kind: kind.clone(),
            plural: plural.clone(),
            namespaced,
            status_subresource: subresources.and_then(|s| s.get("status")).is_some(),
            scale,
            root,
            env: Arc::clone(env),
        });
    }
    out
}

/// Schema keywords that only document.
const DOC_KEYWORDS: &[&str] = &["description", "title", "example", "externalDocs", "$schema", "id"];
/// Formats the apiserver accepts without checking anything (for the types they are used with here).
const NOOP_FORMATS: &[&str] = &["int32", "int64", "float", "double", "password", ""];

fn parse_node(v: &Value, path: &str, at: &At) -> Node {
    let Some(obj) = v.as_object() else { at.fail(path, "schema is not an object") };
    let mut n = Node::default();
    for (key, val) in obj {
        parse_keyword(&mut n, key, val, path, at);
    }
    n
}

fn parse_keyword(n: &mut Node, key: &str, val: &Value, path: &str, at: &At) {
    let uint = |v: &Value| v.as_u64().unwrap_or_else(|| at.fail(path, format!("{key} is not a non-negative integer")));
    let flag = |v: &Value| v.as_bool().unwrap_or_else(|| at.fail(path, format!("{key} is not a boolean")));
    let number = |v: &Value| v.as_f64().unwrap_or_else(|| at.fail(path, format!("{key} is not a number")));
    match key {
        "type" => n.ty = Some(parse_type(val, path, at)),
        "nullable" => n.nullable = flag(val),
        "x-kubernetes-int-or-string" => n.int_or_string = flag(val),
        "x-kubernetes-preserve-unknown-fields" => n.preserve_unknown = flag(val),
        "x-kubernetes-embedded-resource" => n.embedded = flag(val),
        "properties" => {
            let props = val.as_object().unwrap_or_else(|| at.fail(path, "properties is not an object"));
            n.properties = props.iter().map(|(k, s)| (k.clone(), parse_node(s, &child(path, k), at))).collect();
        }
        "additionalProperties" => {
            n.additional = Some(match val {
                Value::Bool(b) => Additional::Allows(*b),
                _ => Additional::Schema(Box::new(parse_node(val, &format!("{path}[*]"), at))),
            })
        }
        "items" => n.items = Some(Box::new(parse_node(val, &format!("{path}[*]"), at))),
        "required" => n.required = string_list(val).unwrap_or_else(|| at.fail(path, "required is not a string list")),
        "enum" => n.enumeration = Some(val.as_array().cloned().unwrap_or_else(|| at.fail(path, "enum is not a list"))),
        "pattern" => {
            let source = val.as_str().unwrap_or_else(|| at.fail(path, "pattern is not a string"));
            let re =
                Regex::new(&go_regex(source)).unwrap_or_else(|e| at.fail(path, format!("pattern {source:?}: {e}")));
            n.pattern = Some((source.to_string(), re));
        }
        "format" => match val.as_str() {
            Some("date-time" | "datetime") => n.date_time = true,
            Some(f) if NOOP_FORMATS.contains(&f) => {}
            _ => at.fail(path, format!("format {val} is checked by the apiserver but not modeled by crdval")),
        },
        "minimum" => n.minimum = Some(number(val)),
        "maximum" => n.maximum = Some(number(val)),
        "exclusiveMinimum" => n.exclusive_minimum = flag(val),
        "exclusiveMaximum" => n.exclusive_maximum = flag(val),
        "multipleOf" => n.multiple_of = Some(number(val)),
        "minLength" => n.min_length = Some(uint(val)),
        "maxLength" => n.max_length = Some(uint(val)),
        "minItems" => n.min_items = Some(uint(val)),
        "maxItems" => n.max_items = Some(uint(val)),
        "minProperties" => n.min_properties = Some(uint(val)),
        "maxProperties" => n.max_properties = Some(uint(val)),
        "uniqueItems" if !flag(val) => {}
        "x-kubernetes-list-type" => {
            n.list = match val.as_str() {
                Some("atomic") => ListType::Atomic,
                Some("set") => ListType::Set,
                Some("map") => ListType::Map,
                _ => at.fail(path, format!("x-kubernetes-list-type {val}")),
            }
        }
        "x-kubernetes-list-map-keys" => {
            n.list_map_keys =
                string_list(val).unwrap_or_else(|| at.fail(path, "x-kubernetes-list-map-keys is not a string list"))
        }
        "x-kubernetes-map-type" => n.map_atomic = val.as_str() == Some("atomic"),
        "default" => n.default = Some(val.clone()),
        "allOf" | "anyOf" | "oneOf" => {
            let list = val.as_array().unwrap_or_else(|| at.fail(path, format!("{key} is not a list")));
            let nodes = list.iter().map(|s| parse_node(s, path, at)).collect();
            match key {
                "allOf" => n.all_of = nodes,
                "anyOf" => n.any_of = nodes,
                _ => n.one_of = nodes,
            }
        }
        "not" => n.not = Some(Box::new(parse_node(val, path, at))),
        "x-kubernetes-validations" => {
            let list = val.as_array().unwrap_or_else(|| at.fail(path, "x-kubernetes-validations is not a list"));
            n.rules = list.iter().map(|r| parse_rule(r, path, at)).collect();
        }
        k if DOC_KEYWORDS.contains(&k) => {}
        _ => at.fail(path, format!("schema keyword {key:?} is not modeled by crdval")),
    }
}

fn parse_type(val: &Value, path: &str, at: &At) -> Ty {
    match val.as_str() {
        Some("object") => Ty::Object,
        Some("array") => Ty::Array,
        Some("string") => Ty::String,
        Some("integer") => Ty::Integer,
        Some("number") => Ty::Number,
        Some("boolean") => Ty::Boolean,
        _ => at.fail(path, format!("type {val} is not a structural schema type")),
    }
}

fn string_list(v: &Value) -> Option<Vec<String>> {
    v.as_array()?.iter().map(|s| s.as_str().map(String::from)).collect()
}

fn parse_rule(r: &Value, path: &str, at: &At) -> Rule {
    let Some(obj) = r.as_object() else { at.fail(path, "x-kubernetes-validations entry is not an object") };
    let text =
        |k: &str| obj.get(k).map(|v| v.as_str().unwrap_or_else(|| at.fail(path, format!("{k} is not a string"))));
    let source =
        text("rule").unwrap_or_else(|| at.fail(path, "x-kubernetes-validations entry without rule")).to_string();
    let fail = |what: String| -> ! { at.fail(path, format!("rule {source:?}: {what}")) };
    for key in obj.keys() {
        match key.as_str() {
            "rule" | "message" | "messageExpression" | "reason" | "fieldPath" => {}
            "optionalOldSelf" if obj[key] == Value::Bool(false) => {}
            _ => fail(format!("{key} is not modeled by crdval")),
        }
    }
    let program = compile_rule(&source, at.env).unwrap_or_else(|e| fail(e));
    let message_expression = text("messageExpression").map(|m| compile_rule(m, at.env).unwrap_or_else(|e| fail(e)));
    let reason = text("reason").map(|r| match r {
        "FieldValueInvalid" => ErrKind::Invalid,
        "FieldValueForbidden" => ErrKind::Forbidden,
        "FieldValueRequired" => ErrKind::Required,
        "FieldValueDuplicate" => ErrKind::Duplicate,
        _ => fail(format!("reason {r:?} is not one the apiserver accepts")),
    });
    Rule {
        uses_old_self: program.references().has_variable("oldSelf"),
        program,
        message: text("message").map(|m| m.trim().to_string()).filter(|m| !m.is_empty()),
        message_expression,
        reason,
        field_path: text("fieldPath").map(normalize_field_path),
        source,
    }
}

/// `.spec.foo['bar.baz']` -> `spec.foo[bar.baz]`: how the apiserver prints a rule's fieldPath.
fn normalize_field_path(p: &str) -> String {
    p.trim_start_matches('.').replace("['", "[").replace("']", "]")
}

// ---------------------------------------------------------------------------------------------------------------
// CEL: the environment, the functions Kubernetes adds, and values
// ---------------------------------------------------------------------------------------------------------------

/// Operators, and functions whose behaviour here matches Kubernetes' CEL (tests exercise each). A rule calling
/// anything else fails the load: Kubernetes' libraries (lists, quantity, url, ip, ...) have functions the CEL crate
/// lacks or has with other semantics (`max`, `indexOf` on lists).
const SUPPORTED_FUNCTIONS: &str = concat!(
    "_==_ _!=_ _<_ _<=_ _>_ _>=_ _&&_ _||_ !_ -_ _+_ _-_ _*_ _/_ _%_ _?_:_ _[_] @in @not_strictly_false ",
    "size int uint double string matches startsWith endsWith contains split find lowerAscii upperAscii ",
    "trim replace substring join",
);

/// The CEL standard library with the strings extension (`split`, ...); `find` is bound per evaluation.
fn cel_env() -> Env {
    let mut env = Env::stdlib();
    env.add_extension(cel::extensions::strings).expect("the strings extension registers once");
    env
}

fn compile_rule(source: &str, env: &Env) -> Result<Program, String> {
    let program = env.compile(source).map_err(|e| format!("does not parse: {e}"))?;
    let refs = program.references();
    if let Some(f) = refs.functions().into_iter().find(|f| !listed(SUPPORTED_FUNCTIONS, f)) {
        return Err(format!("calls {f:?}, which crdval does not implement"));
    }
    Ok(program)
}

/// Kubernetes' regex library `find`: the first match of a regex in the string, or "".
fn cel_find(This(this): This<Arc<String>>, pattern: Arc<String>) -> Result<cel::Value, ExecutionError> {
    static CACHE: OnceLock<Mutex<HashMap<String, Regex>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    let mut cache = cache.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let re = match cache.get(pattern.as_str()) {
        Some(re) => re.clone(),
        None => {
            let re = Regex::new(&pattern).map_err(|e| ExecutionError::function_error("find", e))?;
            cache.insert(pattern.to_string(), re.clone());
            re
        }
    };
    let found = re.find(&this).map(|m| m.as_str().to_string()).unwrap_or_default();
    Ok(cel::Value::String(Arc::new(found)))
}

/// A JSON value as the apiserver hands it to CEL: typed by its schema (integer -> int, number -> double).
fn to_cel(v: &Value, s: Option<&Node>) -> cel::Value {
    match v {
        Value::Null => cel::Value::Null,
        Value::Bool(b) => cel::Value::Bool(*b),
        Value::Number(n) => number_to_cel(n, s.and_then(|s| s.ty)),
        Value::String(t) => cel::Value::String(Arc::new(t.clone())),
        Value::Array(items) => {
            let item_schema = s.and_then(|s| s.items.as_deref());
            cel::Value::List(Arc::new(items.iter().map(|i| to_cel(i, item_schema)).collect()))
        }
        Value::Object(fields) => {
            let map: HashMap<String, cel::Value> =
                fields.iter().map(|(k, fv)| (k.clone(), to_cel(fv, s.and_then(|s| s.property(k))))).collect();
            cel::Value::from(map)
        }
    }
}

fn number_to_cel(n: &serde_json::Number, ty: Option<Ty>) -> cel::Value {
    if ty == Some(Ty::Number) {
        return cel::Value::Float(n.as_f64().unwrap_or(f64::NAN));
    }
    if let Some(i) = n.as_i64() {
        return cel::Value::Int(i);
    }
    match n.as_f64() {
        Some(f) if ty == Some(Ty::Integer) && f.fract() == 0.0 => cel::Value::Int(f as i64),
        Some(f) => cel::Value::Float(f),
        None => cel::Value::Null,
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Pruning and defaulting
// ---------------------------------------------------------------------------------------------------------------

/// ObjectMeta's fields: anything else under `metadata` does not survive the apiserver's decoding.
const OBJECT_META_FIELDS: &str = concat!(
    "name generateName namespace selfLink uid resourceVersion generation creationTimestamp ",
    "deletionTimestamp deletionGracePeriodSeconds labels annotations ownerReferences finalizers ",
    "managedFields",
);

/// The root of a resource (or an embedded one) keeps apiVersion, kind and ObjectMeta whatever the schema says.
fn prune_resource_root(obj: &mut Map<String, Value>, s: &Node, path: &str, dropped: &mut Vec<String>) {
    if let Some(Value::Object(meta)) = obj.get_mut("metadata") {
        drop_fields(meta, &child(path, "metadata"), dropped, |k| listed(OBJECT_META_FIELDS, k));
    }
    drop_fields(obj, path, dropped, |k| matches!(k, "apiVersion" | "kind" | "metadata") || s.keeps(k));
    for (k, v) in obj.iter_mut() {
        if let Some(p) = s.property(k).filter(|_| k != "metadata") {
            p.prune(v, &child(path, k), dropped);
        }
    }
}

/// Removes the fields `keep` refuses, noting their paths.
fn drop_fields(obj: &mut Map<String, Value>, path: &str, dropped: &mut Vec<String>, keep: impl Fn(&str) -> bool) {
    obj.retain(|k, _| {
        let kept = keep(k);
        if !kept {
            dropped.push(child(path, k));
        }
        kept
    });
}

impl Node {
    fn has_rules(&self) -> bool {
        let additional = match &self.additional {
            Some(Additional::Schema(a)) => a.has_rules(),
            _ => false,
        };
        !self.rules.is_empty()
            || additional
            || self.items.as_ref().is_some_and(|i| i.has_rules())
            || self.properties.values().chain(&self.all_of).any(Node::has_rules)
    }

    fn property(&self, k: &str) -> Option<&Node> {
        self.properties.get(k).or(match &self.additional {
            Some(Additional::Schema(a)) => Some(a),
            _ => None,
        })
    }

    /// Whether an object at this node keeps the field `k` when pruned.
    fn keeps(&self, k: &str) -> bool {
        self.preserve_unknown
            || self.properties.contains_key(k)
            || matches!(self.additional, Some(Additional::Schema(_)) | Some(Additional::Allows(true)))
    }

    /// Drops fields the schema does not know (noting their paths); an integral float in an integer field is
    /// stored as an integer, as Go's decoding does.
    fn prune(&self, v: &mut Value, path: &str, dropped: &mut Vec<String>) {
        match v {
            Value::Object(obj) if self.embedded => prune_resource_root(obj, self, path, dropped),
            Value::Object(obj) => {
                drop_fields(obj, path, dropped, |k| self.keeps(k));
                for (k, fv) in obj.iter_mut() {
                    if let Some(p) = self.property(k) {
                        p.prune(fv, &child(path, k), dropped);
                    }
                }
            }
            Value::Array(items) => {
                if let Some(item) = &self.items {
                    for (i, x) in items.iter_mut().enumerate() {
                        item.prune(x, &format!("{path}[{i}]"), dropped);
                    }
                }
            }
            Value::Number(n) if self.ty == Some(Ty::Integer) && n.as_i64().is_none() => {
                if let Some(f) = n.as_f64().filter(|f| f.fract() == 0.0 && f.abs() < 9.0e18) {
                    *v = Value::from(f as i64);
                }
            }
            _ => {}
        }
    }

    /// Structural defaulting: a missing field (or a null one that is not nullable) gets the default; a
    /// non-nullable null without one is dropped; then the children, so defaults inside defaults apply too.
    fn apply_defaults(&self, obj: &mut Map<String, Value>) {
        for (k, p) in &self.properties {
            let null = obj.get(k).is_some_and(Value::is_null) && !p.nullable;
            match &p.default {
                Some(d) if null || !obj.contains_key(k) => {
                    obj.insert(k.clone(), d.clone());
                }
                _ if null => {
                    obj.remove(k);
                }
                _ => {}
            }
        }
        if let Some(Additional::Schema(a)) = &self.additional {
            obj.retain(|k, v| self.properties.contains_key(k) || !v.is_null() || a.nullable || a.default.is_some());
        }
        for (k, v) in obj.iter_mut() {
            let Some(p) = self.property(k) else { continue };
            if v.is_null()
                && !p.nullable
                && let Some(d) = &p.default
            {
                *v = d.clone();
            }
            p.apply_defaults_value(v);
        }
    }

    fn apply_defaults_value(&self, v: &mut Value) {
        match v {
            Value::Object(obj) => self.apply_defaults(obj),
            Value::Array(items) => {
                let Some(item) = &self.items else { return };
                for i in items.iter_mut() {
                    if i.is_null()
                        && !item.nullable
                        && let Some(d) = &item.default
                    {
                        *i = d.clone();
                    }
                    item.apply_defaults_value(i);
                }
            }
            _ => {}
        }
    }
}

// ---------------------------------------------------------------------------------------------------------------
// OpenAPI schema validation (kube-openapi's validators and messages)
// ---------------------------------------------------------------------------------------------------------------

impl Node {
    fn validate_schema(&self, v: &Value, path: &str, scope: Scope, errs: &mut Vec<FieldError>) {
        if v.is_null() && self.nullable {
            return;
        }
        if let Err(actual) = self.check_type(v) {
            let wanted = self.type_name();
            let detail = format!("{} in body must be of type {wanted}: {actual:?}", display_path(path));
            errs.push(FieldError::new(path, ErrKind::TypeInvalid, Some(format!("{actual:?}")), detail));
            return;
        }
        self.validate_enum(v, path, errs);
        match v {
            Value::String(s) => self.validate_string(s, v, path, errs),
            Value::Number(n) => self.validate_number(n, v, path, errs),
            Value::Array(items) => self.validate_array(items, path, errs),
            Value::Object(obj) => self.validate_object(obj, path, scope, errs),
            _ => {}
        }
        self.validate_combinators(v, path, errs);
    }

    fn type_name(&self) -> &'static str {
        match self.ty {
            _ if self.int_or_string => "integer,string",
            Some(Ty::Object) => "object",
            Some(Ty::Array) => "array",
            Some(Ty::String) => "string",
            Some(Ty::Integer) => "integer",
            Some(Ty::Number) => "number",
            Some(Ty::Boolean) => "boolean",
            None => "any",
        }
    }

    /// Ok, or the JSON type name of the value that does not fit.
    fn check_type(&self, v: &Value) -> Result<(), &'static str> {
        let actual = json_type(v);
        let fits = match self.ty {
            _ if self.int_or_string => actual == "integer" || actual == "string",
            None => true,
            Some(Ty::Number) => actual == "integer" || actual == "number",
            Some(t) => self.type_name() == actual || (t == Ty::Integer && is_integral(v)),
        };
        if fits { Ok(()) } else { Err(actual) }
    }

    fn validate_enum(&self, v: &Value, path: &str, errs: &mut Vec<FieldError>) {
        let Some(allowed) = &self.enumeration else { return };
        if allowed.iter().any(|a| json_equal(a, v)) {
            return;
        }
        let listed: Vec<String> = allowed
            .iter()
            .map(|a| match a {
                Value::String(s) => format!("{s:?}"),
                other => format!("{:?}", other.to_string()),
            })
            .collect();
        let detail = format!("supported values: {}", listed.join(", "));
        errs.push(FieldError::new(path, ErrKind::Unsupported, Some(go_value(v)), detail));
    }

    fn validate_string(&self, s: &str, v: &Value, path: &str, errs: &mut Vec<FieldError>) {
        let p = display_path(path);
        let runes = s.chars().count() as u64;
        if let Some(max) = self.max_length.filter(|m| runes > *m) {
            errs.push(FieldError::new(path, ErrKind::TooLong, None, too_long(max)));
        }
        if let Some(min) = self.min_length.filter(|m| runes < *m) {
            errs.push(FieldError::invalid(path, v, format!("{p} in body should be at least {min} chars long")));
        }
        if let Some((source, _)) = self.pattern.as_ref().filter(|(_, re)| !re.is_match(s)) {
            errs.push(FieldError::invalid(path, v, format!("{p} in body should match '{source}'")));
        }
        if self.date_time && !is_date_time(s) {
            let detail = format!("{p} in body must be of type date-time: {s:?}");
            errs.push(FieldError::new(path, ErrKind::TypeInvalid, Some(go_value(v)), detail));
        }
    }

    fn validate_number(&self, n: &serde_json::Number, v: &Value, path: &str, errs: &mut Vec<FieldError>) {
        let p = display_path(path);
        let x = n.as_f64().unwrap_or(f64::NAN);
        if let Some(m) = self.multiple_of.filter(|m| *m != 0.0 && (x / m).fract() != 0.0) {
            errs.push(FieldError::invalid(path, v, format!("{p} in body should be a multiple of {}", go_float(m))));
        }
        let bound_error = |relation: &str, bound: f64| {
            FieldError::invalid(path, v, format!("{p} in body should be {relation} {}", go_float(bound)))
        };
        match self.maximum {
            Some(max) if self.exclusive_maximum && x >= max => errs.push(bound_error("less than", max)),
            Some(max) if x > max => errs.push(bound_error("less than or equal to", max)),
            _ => {}
        }
        match self.minimum {
            Some(min) if self.exclusive_minimum && x <= min => errs.push(bound_error("greater than", min)),
            Some(min) if x < min => errs.push(bound_error("greater than or equal to", min)),
            _ => {}
        }
    }

    fn validate_array(&self, items: &[Value], path: &str, errs: &mut Vec<FieldError>) {
        if let Some(item) = &self.items {
            for (i, v) in items.iter().enumerate() {
                item.validate_schema(v, &format!("{path}[{i}]"), Scope::All, errs);
            }
        }
        let p = display_path(path);
        let len = items.len() as u64;
        if let Some(min) = self.min_items.filter(|m| len < *m) {
            let detail = format!("{p} in body should have at least {min} items");
            errs.push(FieldError::new(path, ErrKind::Invalid, Some(len.to_string()), detail));
        }
        if let Some(max) = self.max_items.filter(|m| len > *m) {
            errs.push(FieldError::new(
                path,
                ErrKind::TooMany,
                Some(len.to_string()),
                format!("must have at most {max} items"),
            ));
        }
    }

    fn validate_object(&self, obj: &Map<String, Value>, path: &str, scope: Scope, errs: &mut Vec<FieldError>) {
        let p = display_path(path);
        let count = obj.len() as u64;
        // kube-openapi stops at a property-count violation, without looking at the properties.
        if let Some(min) = self.min_properties.filter(|m| count < *m) {
            let detail = format!("{p} in body should have at least {min} properties");
            errs.push(FieldError::new(path, ErrKind::Invalid, Some(count.to_string()), detail));
            return;
        }
        if let Some(max) = self.max_properties.filter(|m| count > *m) {
            errs.push(FieldError::new(
                path,
                ErrKind::TooMany,
                Some(count.to_string()),
                format!("must have at most {max} items"),
            ));
            return;
        }
        let at_root = path.is_empty();
        for (k, v) in obj {
            if at_root && (!scope.covers(k) || k == "metadata") {
                continue; // ObjectMeta is checked by validate_object_meta
            }
            if let Some(prop) = self.properties.get(k) {
                prop.validate_schema(v, &child(path, k), Scope::All, errs);
            } else if let Some(Additional::Schema(a)) = &self.additional {
                // kube-openapi joins map keys with a dot: `spec.limits.cpu`.
                a.validate_schema(v, &child(path, k), Scope::All, errs);
            }
        }
        for k in self.required.iter().filter(|k| !obj.contains_key(*k) && (!at_root || scope.covers(k))) {
            errs.push(FieldError::required(&child(path, k), ""));
        }
    }

    /// allOf/anyOf/oneOf/not: value validations nested in the node.
    fn validate_combinators(&self, v: &Value, path: &str, errs: &mut Vec<FieldError>) {
        for s in &self.all_of {
            s.validate_schema(v, path, Scope::All, errs);
        }
        let passes = |s: &Node| {
            let mut e = Vec::new();
            s.validate_schema(v, path, Scope::All, &mut e);
            e
        };
        // kube-openapi reports these as composite errors, shown with an empty value.
        let composite = |what: &str| {
            FieldError::new(path, ErrKind::Invalid, Some("\"\"".into()), format!("{} {what}", display_path(path)))
        };
        // Int-or-string's anyOf [integer, string] is the type check already done.
        if !self.any_of.is_empty() && !self.int_or_string {
            let results: Vec<_> = self.any_of.iter().map(passes).collect();
            if !results.iter().any(Vec::is_empty) {
                errs.push(composite("must validate at least one schema (anyOf)"));
                errs.extend(results.into_iter().min_by_key(Vec::len).unwrap_or_default());
            }
        }
        if !self.one_of.is_empty() && self.one_of.iter().map(passes).filter(Vec::is_empty).count() != 1 {
            errs.push(composite("must validate one and only one schema (oneOf)"));
        }
        if self.not.as_ref().is_some_and(|not| passes(not).is_empty()) {
            errs.push(composite("must not validate the schema (not)"));
        }
    }
}

fn too_long(max: u64) -> String {
    format!("may not be more than {max} {}", if max == 1 { "byte" } else { "bytes" })
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// A float with no fraction passes an integer type check (go-openapi's isFloatInt).
fn is_integral(v: &Value) -> bool {
    v.as_f64().is_some_and(|f| f.fract() == 0.0)
}

fn json_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        _ => a == b,
    }
}

// ---------------------------------------------------------------------------------------------------------------
// x-kubernetes-list-type set/map uniqueness (structurallisttype.ValidateListSetsAndMaps)
// ---------------------------------------------------------------------------------------------------------------

impl Node {
    fn validate_list_types(&self, v: &Value, path: &str, scope: Scope, errs: &mut Vec<FieldError>) {
        match v {
            Value::Object(obj) => {
                for (k, fv) in obj {
                    if path.is_empty() && !scope.covers(k) {
                        continue;
                    }
                    if let Some(p) = self.properties.get(k) {
                        p.validate_list_types(fv, &child(path, k), Scope::All, errs);
                    } else if let Some(Additional::Schema(a)) = &self.additional {
                        a.validate_list_types(fv, &format!("{path}[{k}]"), Scope::All, errs);
                    }
                }
            }
            Value::Array(items) => {
                match self.list {
                    ListType::Set => duplicates(items, path, errs, Value::clone),
                    ListType::Map => self.validate_list_map(items, path, errs),
                    ListType::Atomic => {}
                }
                if let Some(item) = &self.items {
                    for (i, x) in items.iter().enumerate() {
                        item.validate_list_types(x, &format!("{path}[{i}]"), Scope::All, errs);
                    }
                }
            }
            _ => {}
        }
    }

    fn validate_list_map(&self, items: &[Value], path: &str, errs: &mut Vec<FieldError>) {
        if let Some((i, x)) = items.iter().enumerate().find(|(_, x)| !x.is_null() && !x.is_object()) {
            errs.push(FieldError::invalid(
                &format!("{path}[{i}]"),
                x,
                "must be an object for an array of list-type map",
            ));
            return;
        }
        duplicates(items, path, errs, |x| Value::Object(map_key(x, &self.list_map_keys)));
    }
}

/// The key fields of a map-list item (absent ones left out).
fn map_key(x: &Value, keys: &[String]) -> Map<String, Value> {
    keys.iter().filter_map(|k| x.get(k).map(|v| (k.clone(), v.clone()))).collect()
}

/// Reports the second occurrence of each repeated identity, at its index (as validateListSet does).
fn duplicates(items: &[Value], path: &str, errs: &mut Vec<FieldError>, identity: impl Fn(&Value) -> Value) {
    let mut seen: HashMap<String, usize> = HashMap::new();
    for (i, x) in items.iter().enumerate() {
        let id = identity(x);
        let rendered = id.to_string();
        let times = seen.entry(rendered).or_insert(0);
        *times += 1;
        if *times == 2 {
            let value = match &id {
                Value::Object(_) | Value::Array(_) => id.to_string(),
                other => go_value(other),
            };
            errs.push(FieldError::new(&format!("{path}[{i}]"), ErrKind::Duplicate, Some(value), ""));
        }
    }
}

// ---------------------------------------------------------------------------------------------------------------
// x-kubernetes-validations (apiextensions-apiserver/pkg/apiserver/schema/cel/validation.go)
// ---------------------------------------------------------------------------------------------------------------

impl Node {
    fn validate_rules(
        &self,
        v: &Value,
        old: Option<&Value>,
        path: &str,
        scope: Scope,
        env: &Arc<Env>,
        errs: &mut Vec<FieldError>,
    ) {
        if v.is_null() {
            return; // only non-null values are validated; presence is the parent's business
        }
        let old = old.filter(|o| !o.is_null());
        for rule in &self.rules {
            // Transition rules need a value to compare with: not on create, nor for a new list item.
            if rule.uses_old_self && old.is_none() {
                continue;
            }
            if let Some(e) = self.eval_rule(rule, v, old, path, env) {
                errs.push(e);
            }
        }
        for s in &self.all_of {
            s.validate_rules(v, old, path, scope, env, errs);
        }
        match v {
            Value::Object(obj) => self.validate_rules_object(obj, old, path, scope, env, errs),
            Value::Array(items) => self.validate_rules_array(items, old, path, env, errs),
            _ => {}
        }
    }

    fn validate_rules_object(
        &self,
        obj: &Map<String, Value>,
        old: Option<&Value>,
        path: &str,
        scope: Scope,
        env: &Arc<Env>,
        errs: &mut Vec<FieldError>,
    ) {
        // An atomic map is replaced whole: its entries have no old counterpart.
        let old_of = |k: &str| if self.map_atomic { None } else { old.and_then(|o| o.get(k)) };
        for (k, fv) in obj {
            if path.is_empty() && !scope.covers(k) {
                continue;
            }
            if let Some(p) = self.properties.get(k) {
                p.validate_rules(fv, old_of(k), &child(path, k), Scope::All, env, errs);
            } else if let Some(Additional::Schema(a)) = &self.additional {
                a.validate_rules(fv, old_of(k), &format!("{path}[{k}]"), Scope::All, env, errs);
            }
        }
    }

    fn validate_rules_array(
        &self,
        items: &[Value],
        old: Option<&Value>,
        path: &str,
        env: &Arc<Env>,
        errs: &mut Vec<FieldError>,
    ) {
        let Some(item) = &self.items else { return };
        // Only map-lists correlate an item with its old self, by key.
        let old_items = old.and_then(Value::as_array);
        for (i, x) in items.iter().enumerate() {
            let old_item = match (&self.list, old_items) {
                (ListType::Map, Some(olds)) => {
                    let key = map_key(x, &self.list_map_keys);
                    olds.iter().find(|o| map_key(o, &self.list_map_keys) == key)
                }
                _ => None,
            };
            item.validate_rules(x, old_item, &format!("{path}[{i}]"), Scope::All, env, errs);
        }
    }

    /// Evaluates one rule; the field error it raises, if any.
    fn eval_rule(&self, rule: &Rule, v: &Value, old: Option<&Value>, path: &str, env: &Arc<Env>) -> Option<FieldError> {
        let value = Some(format!("{:?}", self.cel_type_name()));
        let error_string = rule.message.clone().unwrap_or_else(|| rule.source.trim().to_string());
        let result = eval(&rule.program, v, old, self, env);
        let detail = match result {
            Ok(cel::Value::Bool(true)) => return None,
            Ok(_) => self.failure_message(rule, v, old, env),
            Err(ExecutionError::NoSuchOverload(e)) => format!(
                "'no such overload: {e}': call arguments did not match a supported operator, function or macro signature for rule: {error_string}"
            ),
            Err(e) => format!("{e} evaluating rule: {error_string}"),
        };
        let path = match &rule.field_path {
            Some(fp) => child(path, fp),
            None => path.to_string(),
        };
        let kind = rule.reason.unwrap_or(ErrKind::Invalid);
        Some(FieldError::new(&path, kind, value, if kind == ErrKind::Duplicate { String::new() } else { detail }))
    }

    /// The rule's messageExpression result, else its message, else `failed rule: <rule>`.
    fn failure_message(&self, rule: &Rule, v: &Value, old: Option<&Value>, env: &Arc<Env>) -> String {
        if let Some(expr) = &rule.message_expression
            && let Ok(cel::Value::String(m)) = eval(expr, v, old, self, env)
            && !m.trim().is_empty()
            && !m.contains('\n')
        {
            return m.trim().to_string();
        }
        match &rule.message {
            Some(m) => m.clone(),
            None => format!("failed rule: {}", rule.source.trim()),
        }
    }

    /// The schema type the apiserver shows as a CEL error's value (`Invalid value: "object": ...`).
    fn cel_type_name(&self) -> &'static str {
        match self.ty {
            None => "",
            Some(_) => self.type_name(),
        }
    }

    /// Evaluates every rule against a sample value of its node's shape; collects missing functions/overloads.
    fn check_rules_on_samples(&self, kind: &str, path: &str, env: &Arc<Env>, problems: &mut Vec<String>) {
        if !self.rules.is_empty() {
            let sample = self.sample();
            for rule in &self.rules {
                let result = eval(&rule.program, &sample, Some(&sample), self, env);
                if let Err(e @ (ExecutionError::NoSuchOverload(_) | ExecutionError::UndeclaredReference(_))) = result {
                    problems.push(format!("{kind} {path}: rule {:?}: {e}", rule.source));
                }
            }
        }
        for (k, p) in &self.properties {
            p.check_rules_on_samples(kind, &child(path, k), env, problems);
        }
        if let Some(Additional::Schema(a)) = &self.additional {
            a.check_rules_on_samples(kind, &format!("{path}[*]"), env, problems);
        }
        if let Some(i) = &self.items {
            i.check_rules_on_samples(kind, &format!("{path}[*]"), env, problems);
        }
        for s in &self.all_of {
            s.check_rules_on_samples(kind, path, env, problems);
        }
    }

    /// A value with every property set, one map entry and one list item: the shape a rule expects.
    fn sample(&self) -> Value {
        if let Some(first) = self.enumeration.as_ref().and_then(|e| e.first()) {
            return first.clone();
        }
        match self.ty {
            _ if self.int_or_string => json!("1"),
            Some(Ty::Object) => {
                let mut obj: Map<String, Value> =
                    self.properties.iter().map(|(k, p)| (k.clone(), p.sample())).collect();
                if let Some(Additional::Schema(a)) = &self.additional {
                    obj.insert("k".into(), a.sample());
                }
                Value::Object(obj)
            }
            Some(Ty::Array) => json!([self.items.as_ref().map(|i| i.sample()).unwrap_or(Value::Null)]),
            Some(Ty::String) => json!("a@b"),
            Some(Ty::Integer) => json!(1),
            Some(Ty::Number) => json!(1.5),
            Some(Ty::Boolean) => json!(true),
            None => Value::Null,
        }
    }
}

/// Runs a program with `self` (and `oldSelf`) bound, and Kubernetes' `find`.
fn eval(
    program: &Program,
    v: &Value,
    old: Option<&Value>,
    s: &Node,
    env: &Arc<Env>,
) -> Result<cel::Value, ExecutionError> {
    let mut ctx = Context::with_env(Arc::clone(env));
    ctx.add_function("find", cel_find).map_err(|e| ExecutionError::function_error("find", e))?;
    ctx.add_variable_from_value("self", to_cel(v, Some(s)));
    if let Some(o) = old {
        ctx.add_variable_from_value("oldSelf", to_cel(o, Some(s)));
    }
    program.execute(&ctx)
}

// ---------------------------------------------------------------------------------------------------------------
// ObjectMeta and the scale subresource (apimachinery's ValidateObjectMetaAccessor)
// ---------------------------------------------------------------------------------------------------------------

const DNS1123_SUBDOMAIN_FMT: &str = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const DNS1123_SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
const DNS1123_LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const DNS1123_LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character";
const QUALIFIED_NAME_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const QUALIFIED_NAME_MSG: &str =
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const LABEL_VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const TOTAL_ANNOTATION_SIZE_LIMIT: usize = 256 * 1024;

fn anchored(fmt: &str) -> Regex {
    Regex::new(&format!("^(?:{fmt})$")).expect("a constant pattern")
}

fn regexes() -> &'static [Regex; 4] {
    static RES: OnceLock<[Regex; 4]> = OnceLock::new();
    RES.get_or_init(|| {
        [
            anchored(DNS1123_SUBDOMAIN_FMT),
            anchored(DNS1123_LABEL_FMT),
            anchored(QUALIFIED_NAME_FMT),
            anchored(&format!("({QUALIFIED_NAME_FMT})?")),
        ]
    })
}

/// validation.RegexError: the message, the examples, the pattern.
fn regex_error(msg: &str, fmt: &str, examples: &[&str]) -> String {
    let mut s = format!("{msg} (e.g. ");
    for (i, e) in examples.iter().enumerate() {
        if i > 0 {
            s.push_str(" or ");
        }
        s.push_str(&format!("'{e}', "));
    }
    s.push_str(&format!("regex used for validation is '{fmt}')"));
    s
}

fn is_dns1123_subdomain(v: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if v.len() > 253 {
        errs.push("must be no more than 253 characters".to_string());
    }
    if !regexes()[0].is_match(v) {
        errs.push(regex_error(DNS1123_SUBDOMAIN_MSG, DNS1123_SUBDOMAIN_FMT, &["example.com"]));
    }
    errs
}

fn is_dns1123_label(v: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if v.len() > 63 {
        errs.push("must be no more than 63 characters".to_string());
    }
    if !regexes()[1].is_match(v) {
        errs.push(regex_error(DNS1123_LABEL_MSG, DNS1123_LABEL_FMT, &["my-name", "123-abc"]));
    }
    errs
}

fn is_qualified_name(v: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let parts: Vec<&str> = v.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".to_string());
            } else {
                errs.extend(is_dns1123_subdomain(prefix).into_iter().map(|m| format!("prefix part {m}")));
            }
            *name
        }
        _ => {
            let base = regex_error(QUALIFIED_NAME_MSG, QUALIFIED_NAME_FMT, &["MyName", "my.name", "123-abc"]);
            return vec![format!(
                "a qualified name {base} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
            )];
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".to_string());
    } else if name.len() > 63 {
        errs.push("name part must be no more than 63 characters".to_string());
    }
    if !regexes()[2].is_match(name) {
        let base = regex_error(QUALIFIED_NAME_MSG, QUALIFIED_NAME_FMT, &["MyName", "my.name", "123-abc"]);
        errs.push(format!("name part {base}"));
    }
    errs
}

fn is_label_value(v: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if v.len() > 63 {
        errs.push("must be no more than 63 characters".to_string());
    }
    if !regexes()[3].is_match(v) {
        let fmt = format!("({QUALIFIED_NAME_FMT})?");
        errs.push(regex_error(LABEL_VALUE_MSG, &fmt, &["MyValue", "my_value", "12345"]));
    }
    errs
}

/// A `map[string]string` field of ObjectMeta, or the type error a real server's decoder would refuse it with.
fn string_map<'a>(meta: &'a Map<String, Value>, key: &str, errs: &mut Vec<FieldError>) -> Vec<(&'a str, &'a str)> {
    let path = format!("metadata.{key}");
    match meta.get(key) {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Object(m)) => {
            let mut out = Vec::new();
            for (k, v) in m {
                match v.as_str() {
                    Some(s) => out.push((k.as_str(), s)),
                    None => errs.push(type_error(&format!("{path}[{k}]"), v, "string")),
                }
            }
            out
        }
        Some(other) => {
            errs.push(type_error(&path, other, "object"));
            Vec::new()
        }
    }
}

fn type_error(path: &str, v: &Value, wanted: &str) -> FieldError {
    let actual = json_type(v);
    let detail = format!("{path} in body must be of type {wanted}: {actual:?}");
    FieldError::new(path, ErrKind::TypeInvalid, Some(format!("{actual:?}")), detail)
}

fn validate_object_meta(meta: Option<&Value>, old: Option<&Value>, namespaced: bool, errs: &mut Vec<FieldError>) {
    let empty = Map::new();
    let meta = match meta {
        Some(Value::Object(m)) => m,
        None => &empty,
        Some(other) => return errs.push(type_error("metadata", other, "object")),
    };
    let text = |m: &Map<String, Value>, k: &str| m.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    validate_names(meta, namespaced, errs);
    if let Some(Value::Object(old)) = old {
        for field in ["name", "namespace"] {
            if text(meta, field) != text(old, field) {
                let value = Value::String(text(meta, field));
                errs.push(FieldError::invalid(&format!("metadata.{field}"), &value, "field is immutable"));
            }
        }
    }
    if let Some(g) = meta.get("generation").and_then(Value::as_i64).filter(|g| *g < 0) {
        errs.push(FieldError::invalid("metadata.generation", &json!(g), "must be greater than or equal to 0"));
    }
    for (k, v) in string_map(meta, "labels", errs) {
        let key = Value::String(k.to_string());
        errs.extend(is_qualified_name(k).into_iter().map(|m| FieldError::invalid("metadata.labels", &key, m)));
        let value = Value::String(v.to_string());
        errs.extend(is_label_value(v).into_iter().map(|m| FieldError::invalid("metadata.labels", &value, m)));
    }
    let annotations = string_map(meta, "annotations", errs);
    for (k, _) in &annotations {
        let key = Value::String(k.to_string());
        let msgs = is_qualified_name(&k.to_lowercase());
        errs.extend(msgs.into_iter().map(|m| FieldError::invalid("metadata.annotations", &key, m)));
    }
    if annotations.iter().map(|(k, v)| k.len() + v.len()).sum::<usize>() > TOTAL_ANNOTATION_SIZE_LIMIT {
        errs.push(FieldError::new(
            "metadata.annotations",
            ErrKind::TooLong,
            None,
            too_long(TOTAL_ANNOTATION_SIZE_LIMIT as u64),
        ));
    }
    validate_finalizers(meta.get("finalizers"), errs);
}

/// name (or generateName), and namespace as the scope wants it.
fn validate_names(meta: &Map<String, Value>, namespaced: bool, errs: &mut Vec<FieldError>) {
    let text = |k: &str| meta.get(k).and_then(Value::as_str).unwrap_or("");
    let (name, generate_name, namespace) = (text("name"), text("generateName"), text("namespace"));
    if !generate_name.is_empty() {
        // A prefix may end with '-': validated as if the generated suffix followed.
        let masked = generate_name.strip_suffix('-').map(|p| format!("{p}a")).unwrap_or(generate_name.to_string());
        let value = Value::String(generate_name.to_string());
        errs.extend(
            is_dns1123_subdomain(&masked).into_iter().map(|m| FieldError::invalid("metadata.generateName", &value, m)),
        );
    }
    if name.is_empty() {
        // The caller generates a name from generateName; without either a real server refuses.
        if generate_name.is_empty() {
            errs.push(FieldError::required("metadata.name", "name or generateName is required"));
        }
    } else {
        let value = Value::String(name.to_string());
        errs.extend(is_dns1123_subdomain(name).into_iter().map(|m| FieldError::invalid("metadata.name", &value, m)));
    }
    if namespaced {
        if namespace.is_empty() {
            errs.push(FieldError::required("metadata.namespace", ""));
        } else {
            let value = Value::String(namespace.to_string());
            errs.extend(
                is_dns1123_label(namespace).into_iter().map(|m| FieldError::invalid("metadata.namespace", &value, m)),
            );
        }
    }
}

fn validate_finalizers(finalizers: Option<&Value>, errs: &mut Vec<FieldError>) {
    let list = match finalizers {
        None | Some(Value::Null) => return,
        Some(Value::Array(list)) => list,
        Some(other) => return errs.push(type_error("metadata.finalizers", other, "array")),
    };
    for f in list {
        match f.as_str() {
            Some(s) => {
                errs.extend(is_qualified_name(s).into_iter().map(|m| FieldError::invalid("metadata.finalizers", f, m)))
            }
            None => errs.push(type_error("metadata.finalizers", f, "string")),
        }
    }
}

impl Scale {
    /// ValidateScaleSpec/ValidateScaleStatus: the replicas a Scale reads must fit an int32.
    fn validate(&self, obj: &Value, scope: Scope, errs: &mut Vec<FieldError>) {
        let paths = match scope {
            Scope::All => vec![&self.spec_replicas, &self.status_replicas],
            Scope::Status => vec![&self.status_replicas],
        };
        for path in paths.into_iter().filter(|p| !p.is_empty()) {
            let pointer = path.replace('.', "/");
            let Some(n) = obj.pointer(&pointer).and_then(Value::as_i64) else { continue };
            let detail = if n < 0 {
                "should be a non-negative integer".to_string()
            } else if n > i64::from(i32::MAX) {
                format!("should be less than or equal to {}", i32::MAX)
            } else {
                continue;
            };
            errs.push(FieldError::invalid(path, &json!(n), detail));
        }
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Small helpers: paths, Go-style printing, RE2 and date-time
// ---------------------------------------------------------------------------------------------------------------

/// Whether `word` is one of the space-separated words of `list`.
fn listed(list: &str, word: &str) -> bool {
    list.split(' ').any(|w| w == word)
}

fn child(path: &str, name: &str) -> String {
    if path.is_empty() { name.to_string() } else { format!("{path}.{name}") }
}

/// The path as kube-openapi prints it in its own messages.
fn display_path(path: &str) -> &str {
    if path.is_empty() { "." } else { path }
}

/// A bad value as field.Error prints it: `%q` for strings, `%v` for numbers and booleans, JSON otherwise.
fn go_value(v: &Value) -> String {
    match v {
        Value::String(s) => format!("{s:?}"),
        Value::Number(n) => {
            n.as_i64().map(|i| i.to_string()).unwrap_or_else(|| go_float(n.as_f64().unwrap_or(f64::NAN)))
        }
        Value::Null => "\"null\"".into(),
        other => other.to_string(),
    }
}

fn go_float(f: f64) -> String {
    if f.fract() == 0.0 && f.abs() < 1e15 { format!("{}", f as i64) } else { format!("{f}") }
}

/// Go's RE2 `\d`, `\s` and `\w` are ASCII-only; the regex crate's are Unicode. Spell the ASCII classes out.
fn go_regex(pattern: &str) -> String {
    let mut out = String::with_capacity(pattern.len());
    let mut chars = pattern.chars();
    let mut in_class = false;
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some('d') => out.push_str(if in_class { "0-9" } else { "[0-9]" }),
                Some('s') => out.push_str(if in_class { r"\t\n\f\r " } else { r"[\t\n\f\r ]" }),
                Some('w') => out.push_str(if in_class { "0-9A-Za-z_" } else { "[0-9A-Za-z_]" }),
                Some(other) => {
                    out.push('\\');
                    out.push(other);
                }
                None => out.push('\\'),
            },
            '[' if !in_class => {
                in_class = true;
                out.push(c);
            }
            ']' if in_class => {
                in_class = false;
                out.push(c);
            }
            _ => out.push(c),
        }
    }
    out
}

/// kube-openapi's strfmt date-time: `YYYY-MM-DD`, `T` (either case), `hh:mm:ss`, optional fraction, `Z` or an offset.
fn is_date_time(s: &str) -> bool {
    static RE: OnceLock<Regex> = OnceLock::new();
    let re = RE.get_or_init(|| {
        Regex::new(r"^([0-9]{4})-([0-9]{2})-([0-9]{2})[tT]([0-9]{2}):([0-9]{2}):([0-9]{2})(\.[0-9]+)?([zZ]|[+-][0-9]{2}:[0-9]{2})$")
            .expect("a constant pattern")
    });
    let Some(c) = re.captures(s) else { return false };
    let num = |i: usize| c.get(i).and_then(|m| m.as_str().parse::<u32>().ok()).unwrap_or(u32::MAX);
    let (year, month, day) = (num(1), num(2), num(3));
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let days_in_month = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return false,
    };
    (1..=days_in_month).contains(&day) && num(4) <= 23 && num(5) <= 59 && num(6) <= 59
}
