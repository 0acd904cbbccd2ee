//! Objects as a real API server sends them. The simulated world's objects carry what the engine reads and little
//! else; a Kubernetes 1.36 API server also sends, for every object, `managedFields`, and for pods the full container
//! specs (environment, probes, mounts), the per-pod service-account token volume, container statuses, five
//! conditions, IPs; for nodes dozens of cached images, conditions with heartbeat times, node info, addresses; for
//! what an operator applies with kubectl, the `last-applied-configuration` annotation. [`enrich`] adds all of that,
//! with sizes taken from an EKS cluster's objects, so the live benchmark measures what a real cluster costs.
//! Deterministic: the same object always gets the same additions.

#![allow(dead_code)]

use serde_json::{Map, Value, json};

/// When the objects were made and last heard from.
pub const CREATED: &str = "2026-05-01T08:00:00Z";
pub const STARTED: &str = "2026-05-01T08:00:07Z";
pub const HEARTBEAT: &str = "2026-05-01T10:00:00Z";

/// Images every node has pulled (the EKS add-ons, the workloads' images): repository and tag.
const NODE_IMAGES: usize = 40;

/// A deterministic stream of digits from a seed (FNV-1a then an LCG).
struct Digits(u64);

impl Digits {
    fn new(seed: &str, salt: &str) -> Digits {
        let mut h: u64 = 0xcbf29ce484222325;
        for b in seed.bytes().chain([0]).chain(salt.bytes()) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x100000001b3);
        }
        Digits(h)
    }

    fn next(&mut self, n: u64) -> usize {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((self.0 >> 33) % n) as usize
    }

    fn text(&mut self, alphabet: &[u8], len: usize) -> String {
        (0..len).map(|_| alphabet[self.next(alphabet.len() as u64)] as char).collect()
    }
}

const HEX: &[u8] = b"0123456789abcdef";
/// The alphabet of generated name suffixes (k8s.io/apimachinery `rand.String`).
const SUFFIX: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

fn hex(seed: &str, salt: &str, len: usize) -> String {
    Digits::new(seed, salt).text(HEX, len)
}

fn suffix(seed: &str, salt: &str, len: usize) -> String {
    Digits::new(seed, salt).text(SUFFIX, len)
}

fn uuid(seed: &str, salt: &str) -> String {
    let h = hex(seed, salt, 32);
    format!("{}-{}-{}-{}-{}", &h[..8], &h[8..12], &h[12..16], &h[16..20], &h[20..])
}

fn ip(seed: &str, salt: &str) -> String {
    let mut d = Digits::new(seed, salt);
    format!("10.{}.{}.{}", d.next(256), d.next(256), 1 + d.next(254))
}

/// The `fieldsV1` the API server records for a manager that set `v`: every field as `f:name`, list items of
/// associative lists as `k:{"name":...}`, other list items as `v:...`.
fn fields_v1(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut out = Map::new();
            for (k, x) in m {
                out.insert(format!("f:{k}"), fields_v1(x));
            }
            Value::Object(out)
        }
        Value::Array(items) => {
            let mut out = Map::new();
            for it in items {
                let key = match it {
                    Value::Object(o) => {
                        let id = ["name", "type", "containerPort", "key", "ip", "mountPath"]
                            .into_iter()
                            .find_map(|k| o.get(k).map(|v| json!({ k: v })));
                        match id {
                            Some(id) => format!("k:{id}"),
                            None => format!("v:{it}"),
                        }
                    }
                    other => format!("v:{other}"),
                };
                let mut inner = fields_v1(it);
                if let Value::Object(m) = &mut inner {
                    m.insert(".".into(), json!({}));
                }
                out.insert(key, inner);
            }
            Value::Object(out)
        }
        _ => json!({}),
    }
}

/// One `managedFields` entry for a manager that set the fields of `set`.
fn managed(manager: &str, api_version: &str, operation: &str, subresource: Option<&str>, set: &Value) -> Value {
    let mut e = json!({"manager": manager, "operation": operation, "apiVersion": api_version, "time": CREATED,
        "fieldsType": "FieldsV1", "fieldsV1": fields_v1(set)});
    if let Some(s) = subresource {
        e["subresource"] = json!(s);
    }
    e
}

/// The parts of `obj` under these top-level paths (`metadata.labels`, `spec`, ...), as one object.
fn parts(obj: &Value, paths: &[&str]) -> Value {
    let mut out = json!({});
    for p in paths {
        let pointer = format!("/{}", p.replace('.', "/"));
        if let Some(v) = obj.pointer(&pointer) {
            let mut at = &mut out;
            let segs: Vec<&str> = p.split('.').collect();
            for s in &segs[..segs.len() - 1] {
                at = at.as_object_mut().expect("objects").entry(*s).or_insert_with(|| json!({}));
            }
            at[segs[segs.len() - 1]] = v.clone();
        }
    }
    out
}

fn meta(obj: &mut Value) -> &mut Map<String, Value> {
    if !obj["metadata"].is_object() {
        obj["metadata"] = json!({});
    }
    obj["metadata"].as_object_mut().expect("an object")
}

fn map_at<'a>(obj: &'a mut Value, key: &str) -> &'a mut Map<String, Value> {
    if !obj[key].is_object() {
        obj[key] = json!({});
    }
    obj[key].as_object_mut().expect("an object")
}

fn insert_missing(m: &mut Map<String, Value>, entries: impl IntoIterator<Item = (String, String)>) {
    for (k, v) in entries {
        m.entry(k).or_insert(Value::String(v));
    }
}

/// Adds what an API server would send with `obj` (of `kind`, as `Kind`'s debug name: `Pod`, `Node`, ...).
pub fn enrich(kind: &str, obj: &mut Value) {
    let name = obj.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_string();
    let m = meta(obj);
    m.entry("uid").or_insert_with(|| json!(uuid(&name, "uid")));
    m.entry("creationTimestamp").or_insert_with(|| json!(CREATED));
    m.insert("resourceVersion".into(), json!("1"));
    match kind {
        "Pod" => pod(obj, &name),
        "Node" => node(obj, &name),
        "NodeClaim" => {
            let fields = parts(obj, &["metadata.labels", "metadata.annotations", "metadata.finalizers", "spec"]);
            let status = parts(obj, &["status"]);
            meta(obj).insert(
                "managedFields".into(),
                json!([
                    managed("karpenter", "karpenter.sh/v1", "Update", None, &fields),
                    managed("karpenter", "karpenter.sh/v1", "Update", Some("status"), &status),
                ]),
            );
        }
        // What an operator applies with kubectl carries what it applied, and kubectl's and the controllers'
        // managed fields.
        _ => {
            let mut applied = obj.clone();
            if let Some(o) = applied.as_object_mut() {
                o.remove("status");
            }
            if let Some(m) = applied["metadata"].as_object_mut() {
                m.retain(|k, _| matches!(k.as_str(), "name" | "namespace" | "labels" | "annotations"));
            }
            let api_version = obj["apiVersion"].as_str().unwrap_or("v1").to_string();
            let spec = parts(obj, &["metadata.labels", "metadata.annotations", "spec"]);
            let status = parts(obj, &["status"]);
            let mut entries = vec![managed("kubectl-client-side-apply", &api_version, "Update", None, &spec)];
            if status.as_object().is_some_and(|s| !s.is_empty()) {
                entries.push(managed("controller", &api_version, "Update", Some("status"), &status));
            }
            let m = meta(obj);
            let annotations = m.entry("annotations").or_insert_with(|| json!({}));
            annotations["kubectl.kubernetes.io/last-applied-configuration"] = json!(format!("{applied}\n"));
            m.insert("managedFields".into(), Value::Array(entries));
        }
    }
}

/// A Deployment's pod: the full container spec, the token volume named per pod, statuses and conditions.
fn pod(obj: &mut Value, name: &str) {
    let namespace = obj.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or("default").to_string();
    let app = obj.pointer("/metadata/labels/app").and_then(Value::as_str).unwrap_or("app").to_string();
    let hash = suffix(&format!("{namespace}/{app}"), "pod-template-hash", 10);
    let rs = format!("{app}-{hash}");
    let node = obj.pointer("/spec/nodeName").and_then(Value::as_str).unwrap_or_default().to_string();
    let token = format!("kube-api-access-{}", suffix(name, "token", 5));
    let registry = "123456789012.dkr.ecr.us-east-1.amazonaws.com";
    let image = format!("{registry}/{namespace}/{app}:v1.42.{}", hash.len());
    {
        let m = meta(obj);
        m.insert("generateName".into(), json!(format!("{rs}-")));
        let labels = m.entry("labels").or_insert_with(|| json!({}));
        labels["pod-template-hash"] = json!(hash);
        labels["app.kubernetes.io/name"] = json!(app);
        labels["app.kubernetes.io/part-of"] = json!(namespace);
        let owner = json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": rs, "uid": uuid(&rs, "uid"),
            "controller": true, "blockOwnerDeletion": true}]);
        m.insert("ownerReferences".into(), owner);
    }
    let spec = map_at(obj, "spec");
    for c in spec.get_mut("containers").and_then(Value::as_array_mut).into_iter().flatten() {
        let requests = c.pointer("/resources/requests").cloned().unwrap_or(json!({}));
        let c = c.as_object_mut().expect("a container");
        c.insert("image".into(), json!(image));
        c.insert("imagePullPolicy".into(), json!("IfNotPresent"));
        c.insert("command".into(), json!(["/app/server"]));
        c.insert("args".into(), json!(["--port=8080", "--metrics-port=9090", "--config=/etc/app/config.yaml"]));
        let field = |path: &str| json!({"fieldRef": {"apiVersion": "v1", "fieldPath": path}});
        c.insert(
            "env".into(),
            json!([
                {"name": "POD_NAME", "valueFrom": field("metadata.name")},
                {"name": "POD_NAMESPACE", "valueFrom": field("metadata.namespace")},
                {"name": "POD_IP", "valueFrom": field("status.podIP")},
                {"name": "NODE_NAME", "valueFrom": field("spec.nodeName")},
                {"name": "GOMEMLIMIT", "valueFrom": {"resourceFieldRef": {"resource": "limits.memory", "divisor": "0"}}},
                {"name": "LOG_LEVEL", "value": "info"},
                {"name": "OTEL_SERVICE_NAME", "value": app},
                {"name": "OTEL_EXPORTER_OTLP_ENDPOINT", "value": "http://otel-collector.observability.svc.cluster.local:4317"},
                {"name": "DATABASE_URL", "valueFrom": {"secretKeyRef": {"name": format!("{app}-db"), "key": "url"}}},
                {"name": "FEATURE_FLAGS", "value": "checkout-v2,search-ranking,async-invoices"}
            ]),
        );
        c.insert(
            "ports".into(),
            json!([{"name": "http", "containerPort": 8080, "protocol": "TCP"},
                {"name": "metrics", "containerPort": 9090, "protocol": "TCP"}]),
        );
        let probe = |path: &str, delay: u32| {
            json!({"httpGet": {"path": path, "port": "http", "scheme": "HTTP"}, "initialDelaySeconds": delay,
                "periodSeconds": 10, "timeoutSeconds": 1, "successThreshold": 1, "failureThreshold": 3})
        };
        c.insert("livenessProbe".into(), probe("/healthz", 10));
        c.insert("readinessProbe".into(), probe("/readyz", 5));
        let mut resources = json!({"requests": requests});
        if let Some(mem) = requests.get("memory") {
            resources["limits"] = json!({"memory": mem});
        }
        c.insert("resources".into(), resources);
        c.insert(
            "securityContext".into(),
            json!({"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]},
                "readOnlyRootFilesystem": true, "runAsNonRoot": true}),
        );
        c.insert("terminationMessagePath".into(), json!("/dev/termination-log"));
        c.insert("terminationMessagePolicy".into(), json!("File"));
        c.insert(
            "volumeMounts".into(),
            json!([{"name": "config", "mountPath": "/etc/app", "readOnly": true},
                {"name": token, "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": true}]),
        );
    }
    insert_missing(
        spec,
        [
            ("dnsPolicy", "ClusterFirst"),
            ("preemptionPolicy", "PreemptLowerPriority"),
            ("restartPolicy", "Always"),
            ("schedulerName", "default-scheduler"),
            ("serviceAccount", app.as_str()),
            ("serviceAccountName", app.as_str()),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string())),
    );
    spec.insert("enableServiceLinks".into(), json!(true));
    spec.insert("priority".into(), json!(0));
    spec.insert("terminationGracePeriodSeconds".into(), json!(30));
    spec.insert("securityContext".into(), json!({"fsGroup": 2000, "runAsUser": 1000, "runAsGroup": 3000}));
    let tolerations = spec.entry("tolerations").or_insert_with(|| json!([]));
    if let Some(t) = tolerations.as_array_mut() {
        for key in ["node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"] {
            t.push(json!({"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}));
        }
    }
    let volumes = spec.entry("volumes").or_insert_with(|| json!([]));
    if let Some(v) = volumes.as_array_mut() {
        v.push(json!({"name": "config", "configMap": {"name": format!("{app}-config"), "defaultMode": 420}}));
        v.push(json!({"name": token, "projected": {"defaultMode": 420, "sources": [
            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
            {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
            {"downwardAPI": {"items": [{"path": "namespace",
                "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}]}}));
    }
    let spec_fields = parts(obj, &["metadata.generateName", "metadata.labels", "metadata.ownerReferences", "spec"]);
    if !node.is_empty() {
        let host = ip(&node, "ip");
        let pod_ip = ip(name, "ip");
        let containers: Vec<Value> = obj["spec"]["containers"].as_array().cloned().unwrap_or_default();
        let statuses: Vec<Value> = containers
            .iter()
            .map(|c| {
                let cname = c["name"].as_str().unwrap_or_default();
                json!({"containerID": format!("containerd://{}", hex(name, cname, 64)),
                    "image": image, "imageID": format!("{registry}/{namespace}/{app}@sha256:{}", hex(&hash, "image", 64)),
                    "lastState": {}, "name": cname, "ready": true, "restartCount": 0, "started": true,
                    "state": {"running": {"startedAt": STARTED}},
                    "resources": c["resources"].clone(),
                    "user": {"linux": {"uid": 1000, "gid": 3000, "supplementalGroups": [2000, 3000]}},
                    "volumeMounts": [
                        {"name": "config", "mountPath": "/etc/app", "readOnly": true, "recursiveReadOnly": "Disabled"},
                        {"name": token, "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                            "readOnly": true, "recursiveReadOnly": "Disabled"}]})
            })
            .collect();
        let condition =
            |t: &str| json!({"type": t, "status": "True", "lastProbeTime": null, "lastTransitionTime": STARTED});
        let status = map_at(obj, "status");
        status.insert("phase".into(), json!("Running"));
        status.insert(
            "conditions".into(),
            json!([
                condition("PodReadyToStartContainers"),
                condition("Initialized"),
                condition("Ready"),
                condition("ContainersReady"),
                condition("PodScheduled")
            ]),
        );
        status.insert("hostIP".into(), json!(host));
        status.insert("hostIPs".into(), json!([{"ip": host}]));
        status.insert("podIP".into(), json!(pod_ip));
        status.insert("podIPs".into(), json!([{"ip": pod_ip}]));
        status.insert("qosClass".into(), json!("Burstable"));
        status.insert("startTime".into(), json!(CREATED));
        status.insert("containerStatuses".into(), Value::Array(statuses));
    }
    let status_fields = parts(obj, &["status"]);
    meta(obj).insert(
        "managedFields".into(),
        json!([
            managed("kube-controller-manager", "v1", "Update", None, &spec_fields),
            managed("kubelet", "v1", "Update", Some("status"), &status_fields),
        ]),
    );
}

/// An EC2 instance's node as kubelet, the cloud provider, Karpenter and the CSI driver keep it.
fn node(obj: &mut Value, name: &str) {
    let label = |o: &Value, k: &str| o.pointer(&format!("/metadata/labels/{}", k.replace('/', "~1"))).cloned();
    let arch = label(obj, "kubernetes.io/arch").and_then(|v| v.as_str().map(String::from)).unwrap_or("amd64".into());
    let itype = label(obj, "node.kubernetes.io/instance-type").and_then(|v| v.as_str().map(String::from));
    let itype = itype.unwrap_or_else(|| "m5.xlarge".into());
    let zone = label(obj, "topology.kubernetes.io/zone").and_then(|v| v.as_str().map(String::from));
    let zone = zone.unwrap_or_else(|| "us-east-1a".into());
    let region = zone[..zone.len() - 1].to_string();
    let host = ip(name, "ip");
    let dns = format!("ip-{}.ec2.internal", host.replace('.', "-"));
    let instance = format!("i-0{}", hex(name, "instance", 16));
    {
        let m = meta(obj);
        let labels = m.entry("labels").or_insert_with(|| json!({})).as_object_mut().expect("labels");
        insert_missing(
            labels,
            [
                ("beta.kubernetes.io/arch", arch.clone()),
                ("beta.kubernetes.io/instance-type", itype.clone()),
                ("beta.kubernetes.io/os", "linux".into()),
                ("failure-domain.beta.kubernetes.io/region", region.clone()),
                ("failure-domain.beta.kubernetes.io/zone", zone.clone()),
                ("k8s.io/cloud-provider-aws", hex("cluster", "provider", 32)),
                ("kubernetes.io/hostname", dns.clone()),
                ("kubernetes.io/os", "linux".into()),
                ("topology.ebs.csi.aws.com/zone", zone.clone()),
                ("topology.k8s.aws/zone-id", format!("use1-az{}", zone.len() % 6 + 1)),
                ("topology.kubernetes.io/region", region.clone()),
            ]
            .map(|(k, v)| (k.to_string(), v)),
        );
        let annotations = m.entry("annotations").or_insert_with(|| json!({})).as_object_mut().expect("annotations");
        insert_missing(
            annotations,
            [
                ("alpha.kubernetes.io/provided-node-ip", host.clone()),
                ("csi.volume.kubernetes.io/nodeid", format!("{{\"ebs.csi.aws.com\":\"{instance}\"}}")),
                ("node.alpha.kubernetes.io/ttl", "0".into()),
                ("volumes.kubernetes.io/controller-managed-attach-detach", "true".into()),
            ]
            .map(|(k, v)| (k.to_string(), v)),
        );
    }
    let ready = obj
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|cs| cs.iter().find(|c| c["type"] == "Ready"))
        .and_then(|c| c["status"].as_str())
        .unwrap_or("True")
        .to_string();
    let pressure = |t: &str, reason: &str, what: &str| {
        json!({"type": t, "status": "False", "lastHeartbeatTime": HEARTBEAT, "lastTransitionTime": CREATED,
            "reason": reason, "message": format!("kubelet has {what}")})
    };
    let images: Vec<Value> = (0..NODE_IMAGES)
        .map(|i| {
            let repo = match i {
                0 => "602401143452.dkr.ecr.us-east-1.amazonaws.com/amazon-k8s-cni".to_string(),
                1 => "602401143452.dkr.ecr.us-east-1.amazonaws.com/amazon-k8s-cni-init".to_string(),
                2 => "602401143452.dkr.ecr.us-east-1.amazonaws.com/eks/kube-proxy".to_string(),
                3 => "602401143452.dkr.ecr.us-east-1.amazonaws.com/eks/aws-ebs-csi-driver".to_string(),
                4 => "602401143452.dkr.ecr.us-east-1.amazonaws.com/eks/pause".to_string(),
                i => format!("123456789012.dkr.ecr.us-east-1.amazonaws.com/team-{:02}/a{:02}", i % 20, i),
            };
            json!({"names": [format!("{repo}@sha256:{}", hex(&repo, "digest", 64)),
                format!("{repo}:v1.{}.{}-eksbuild.{}", i % 30, i % 7, i % 3 + 1)],
                "sizeBytes": 10_000_000 + i * 7_919_113})
        })
        .collect();
    let status = map_at(obj, "status");
    status.insert(
        "addresses".into(),
        json!([{"type": "InternalIP", "address": host}, {"type": "InternalDNS", "address": dns},
            {"type": "Hostname", "address": dns}]),
    );
    for key in ["capacity", "allocatable"] {
        if let Some(q) = status.get_mut(key).and_then(Value::as_object_mut) {
            insert_missing(q, [("hugepages-1Gi", "0"), ("hugepages-2Mi", "0")].map(|(k, v)| (k.into(), v.into())));
        }
    }
    status.insert(
        "conditions".into(),
        json!([
            pressure("MemoryPressure", "KubeletHasSufficientMemory", "sufficient memory available"),
            pressure("DiskPressure", "KubeletHasNoDiskPressure", "no disk pressure"),
            pressure("PIDPressure", "KubeletHasSufficientPID", "sufficient PID available"),
            {"type": "Ready", "status": ready, "lastHeartbeatTime": HEARTBEAT, "lastTransitionTime": STARTED,
                "reason": "KubeletReady", "message": "kubelet is posting ready status"}
        ]),
    );
    status.insert("daemonEndpoints".into(), json!({"kubeletEndpoint": {"Port": 10250}}));
    status.insert("images".into(), Value::Array(images));
    status.insert(
        "nodeInfo".into(),
        json!({"architecture": arch, "bootID": uuid(name, "boot"), "containerRuntimeVersion": "containerd://2.0.5",
            "kernelVersion": "6.12.20-32.97.amzn2023.x86_64", "kubeProxyVersion": "", "kubeletVersion": "v1.36.0-eks-4a1d3f2",
            "machineID": hex(name, "machine", 32), "operatingSystem": "linux", "osImage": "Amazon Linux 2023.8.20260428",
            "systemUUID": format!("ec2{}", &uuid(name, "system")[3..])}),
    );
    status.insert("features".into(), json!({"supplementalGroupsPolicy": true}));
    status.insert(
        "runtimeHandlers".into(),
        json!([{"name": "", "features": {"recursiveReadOnlyMounts": true, "userNamespaces": true}},
            {"name": "runc", "features": {"recursiveReadOnlyMounts": true, "userNamespaces": true}}]),
    );
    let kubelet = parts(obj, &["metadata.annotations", "metadata.labels", "spec.providerID"]);
    let karpenter = parts(obj, &["metadata.labels", "metadata.finalizers", "metadata.ownerReferences", "spec.taints"]);
    let mut kubelet_status = parts(obj, &["status"]);
    kubelet_status["status"]["images"] = json!({});
    meta(obj).insert(
        "managedFields".into(),
        json!([
            managed("kubelet", "v1", "Update", None, &kubelet),
            managed("karpenter", "v1", "Update", None, &karpenter),
            managed(
                "kube-controller-manager",
                "v1",
                "Update",
                None,
                &json!({"metadata": {"annotations": {"node.alpha.kubernetes.io/ttl": "0"}}})
            ),
            managed("kubelet", "v1", "Update", Some("status"), &kubelet_status),
            managed(
                "aws-ebs-csi-driver",
                "v1",
                "Update",
                None,
                &json!({"metadata": {"annotations": {"csi.volume.kubernetes.io/nodeid": ""}}})
            ),
        ]),
    );
}

/// What kubelet changes on a node every 10 seconds when nothing else does: the heartbeat times of its conditions
/// and the time of its managed-fields entry.
pub fn heartbeat(node: &mut Value, at: &str) {
    for c in node.pointer_mut("/status/conditions").and_then(Value::as_array_mut).into_iter().flatten() {
        c["lastHeartbeatTime"] = json!(at);
    }
    for e in node.pointer_mut("/metadata/managedFields").and_then(Value::as_array_mut).into_iter().flatten() {
        if e["manager"] == "kubelet" && e["subresource"] == "status" {
            e["time"] = json!(at);
        }
    }
}
