//! The form objects are listed and watched in, before the cache types them: the metadata and the rest of the
//! object as JSON maps, read in one pass over the response. kube's `DynamicObject` flattens its fields, which makes
//! serde buffer every object whole before building it, and parses `managedFields` (often the largest part of an
//! object, which nothing here reads) into typed entries; at 20,000 pods that was about half of a list's time.

use std::borrow::Cow;
use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::core::{ApiResource, DynamicResourceScope, Resource};
use serde::de::{self, Deserialize, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::{Map, Value};

/// One object as the API server sent it, but for `metadata.managedFields`, skipped while reading.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RawObject {
    /// The metadata, typed: what the watcher reads (resourceVersion) and the cache keys objects by.
    pub metadata: ObjectMeta,
    /// Everything else: `spec`, `status`, `apiVersion`, `kind`...
    pub data: Map<String, Value>,
}

impl RawObject {
    /// The whole object as one JSON map, taken apart rather than copied.
    pub fn into_map(self) -> Result<Map<String, Value>, serde_json::Error> {
        let mut map = self.data;
        map.insert("metadata".into(), serde_json::to_value(self.metadata)?);
        Ok(map)
    }

    /// A field of `spec` or `status`, by JSON pointer below the object (`/spec/nodeName`).
    pub fn pointer(&self, pointer: &str) -> Option<&Value> {
        let rest = pointer.strip_prefix('/')?;
        let (first, below) = rest.split_once('/').map_or((rest, ""), |(f, b)| (f, b));
        let top = self.data.get(first)?;
        if below.is_empty() { Some(top) } else { top.pointer(&format!("/{below}")) }
    }
}

impl<'de> Deserialize<'de> for RawObject {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(ObjectVisitor)
    }
}

struct ObjectVisitor;

impl<'de> Visitor<'de> for ObjectVisitor {
    type Value = RawObject;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a Kubernetes object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<RawObject, A::Error> {
        let mut data = Map::new();
        let mut meta = Value::Null;
        while let Some(key) = access.next_key::<String>()? {
            if key == "metadata" {
                meta = Value::Object(access.next_value::<Metadata>()?.0);
            } else {
                data.insert(key, access.next_value()?);
            }
        }
        let metadata = match meta {
            Value::Null => ObjectMeta::default(),
            meta => ObjectMeta::deserialize(&meta).map_err(|e| de::Error::custom(format!("metadata: {e}")))?,
        };
        Ok(RawObject { metadata, data })
    }
}

/// An object's metadata without `managedFields`, which is skipped unread.
struct Metadata(Map<String, Value>);

impl<'de> Deserialize<'de> for Metadata {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Metadata;

            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("object metadata")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Metadata, A::Error> {
                let mut map = Map::new();
                while let Some(key) = access.next_key::<String>()? {
                    if key == "managedFields" {
                        access.next_value::<IgnoredAny>()?;
                    } else {
                        map.insert(key, access.next_value()?);
                    }
                }
                Ok(Metadata(map))
            }

            // `"metadata": null` reads as no metadata.
            fn visit_unit<E: de::Error>(self) -> Result<Metadata, E> {
                Ok(Metadata(Map::new()))
            }
        }
        d.deserialize_any(V)
    }
}

impl Resource for RawObject {
    type DynamicType = ApiResource;
    type Scope = DynamicResourceScope;

    fn group(dt: &ApiResource) -> Cow<'_, str> {
        dt.group.as_str().into()
    }

    fn version(dt: &ApiResource) -> Cow<'_, str> {
        dt.version.as_str().into()
    }

    fn kind(dt: &ApiResource) -> Cow<'_, str> {
        dt.kind.as_str().into()
    }

    fn api_version(dt: &ApiResource) -> Cow<'_, str> {
        dt.api_version.as_str().into()
    }

    fn plural(dt: &ApiResource) -> Cow<'_, str> {
        dt.plural.as_str().into()
    }

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_an_object_in_one_pass_without_its_managed_fields() {
        let text = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web", "namespace": "team", "resourceVersion": "42", "labels": {"app": "web"},
                         "managedFields": [{"manager": "kubectl", "operation": "Apply",
                                            "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {}}}]},
            "spec": {"nodeName": "n1"}
        })
        .to_string();
        let o: RawObject = serde_json::from_str(&text).unwrap();
        assert_eq!(o.metadata.name.as_deref(), Some("web"));
        assert_eq!(o.metadata.resource_version.as_deref(), Some("42"));
        assert_eq!(o.metadata.managed_fields, None);
        assert_eq!(o.pointer("/spec/nodeName"), Some(&json!("n1")));
        assert_eq!(o.pointer("/spec"), Some(&json!({"nodeName": "n1"})));
        assert_eq!(o.pointer("/status/phase"), None);
        let map = o.into_map().unwrap();
        assert!(map["metadata"].get("managedFields").is_none());
        assert_eq!(map["metadata"]["labels"]["app"], "web");
        assert_eq!(map["kind"], "Pod");
    }

    #[test]
    fn metadata_that_is_not_metadata_is_an_error_not_a_panic() {
        let bad = r#"{"metadata": {"name": 7}, "spec": {}}"#;
        let e = serde_json::from_str::<RawObject>(bad).unwrap_err().to_string();
        assert!(e.contains("metadata"), "{e}");
        let none: RawObject = serde_json::from_str(r#"{"metadata": null}"#).unwrap();
        assert_eq!(none.metadata, ObjectMeta::default());
    }
}
