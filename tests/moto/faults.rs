//! A fault-injecting wrapper around the SDK's real HTTP client, for what moto cannot answer: capacity errors from
//! CreateFleet, throttling, and the Pricing API. Requests pass through to moto unless a queued fault matches their
//! action, in which case the fault answers instead (and the call is counted either way).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use aws_smithy_runtime_api::client::http::{
    HttpClient, HttpConnector, HttpConnectorFuture, HttpConnectorSettings, SharedHttpClient, SharedHttpConnector,
};
use aws_smithy_runtime_api::client::orchestrator::HttpRequest;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_runtime_api::http::{Response, StatusCode};
use aws_smithy_types::body::SdkBody;

/// Answers a request (its body as text) with a status and a body.
pub type Answer = Box<dyn Fn(&str) -> (u16, String) + Send + Sync>;

/// A standing rule: answers the requests it recognises, lets the rest through.
pub type Rule = Box<dyn Fn(&str) -> Option<(u16, String)> + Send + Sync>;

#[derive(Default)]
struct State {
    /// action → rules consulted on every request, after the queued faults.
    rules: BTreeMap<String, Vec<Rule>>,
    /// action → faults still to fire, first first.
    queued: BTreeMap<String, Vec<Answer>>,
    /// action → how many requests were sent for it (faulted or not).
    calls: BTreeMap<String, usize>,
}

#[derive(Clone, Default)]
pub struct Faults(Arc<Mutex<State>>);

impl std::fmt::Debug for Faults {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Faults")
    }
}

/// The operation a request is for: the EC2 query `Action`, or the JSON protocol's `X-Amz-Target` operation.
fn action(req: &HttpRequest, body: &str) -> String {
    if let Some(t) = req.headers().get("x-amz-target") {
        return t.rsplit('.').next().unwrap_or(t).to_string();
    }
    body.split('&').find_map(|kv| kv.strip_prefix("Action=")).unwrap_or("").to_string()
}

impl Faults {
    /// The next `action` request gets `answer` instead of reaching moto.
    pub fn queue(&self, action: &str, answer: Answer) {
        self.0.lock().unwrap().queued.entry(action.to_string()).or_default().push(answer);
    }

    /// Every `action` request that `rule` answers gets that answer; the others reach moto.
    pub fn rule(&self, action: &str, rule: Rule) {
        self.0.lock().unwrap().rules.entry(action.to_string()).or_default().push(rule);
    }

    pub fn calls(&self, action: &str) -> usize {
        self.0.lock().unwrap().calls.get(action).copied().unwrap_or(0)
    }

    /// The SDK's own HTTP client, wrapped.
    pub fn client(&self) -> SharedHttpClient {
        SharedHttpClient::new(Wrapped {
            inner: aws_smithy_http_client::Builder::new().build_http(),
            faults: self.clone(),
        })
    }
}

#[derive(Debug)]
struct Wrapped {
    inner: SharedHttpClient,
    faults: Faults,
}

impl HttpClient for Wrapped {
    fn http_connector(&self, settings: &HttpConnectorSettings, components: &RuntimeComponents) -> SharedHttpConnector {
        SharedHttpConnector::new(Connector {
            inner: self.inner.http_connector(settings, components),
            faults: self.faults.clone(),
        })
    }
}

#[derive(Debug)]
struct Connector {
    inner: SharedHttpConnector,
    faults: Faults,
}

impl HttpConnector for Connector {
    fn call(&self, request: HttpRequest) -> HttpConnectorFuture {
        let body = request.body().bytes().map(|b| String::from_utf8_lossy(b).into_owned()).unwrap_or_default();
        let action = action(&request, &body);
        let answered = {
            let mut s = self.faults.0.lock().unwrap();
            *s.calls.entry(action.clone()).or_insert(0) += 1;
            match s.queued.get_mut(&action).and_then(|q| (!q.is_empty()).then(|| q.remove(0))) {
                Some(answer) => Some(answer(&body)),
                None => s.rules.get(&action).and_then(|rules| rules.iter().find_map(|r| r(&body))),
            }
        };
        match answered {
            Some((status, text)) => {
                let mut resp = Response::new(StatusCode::try_from(status).unwrap(), SdkBody::from(text.clone()));
                let ct = if text.trim_start().starts_with('{') { "application/x-amz-json-1.1" } else { "text/xml" };
                resp.headers_mut().insert("content-type", ct);
                HttpConnectorFuture::ready(Ok(resp))
            }
            None => self.inner.call(request),
        }
    }
}

/// EC2's answer when it throttles.
pub fn throttled() -> Answer {
    Box::new(|_| {
        (
            503,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Response><Errors><Error><Code>RequestLimitExceeded</Code>\
             <Message>Request limit exceeded.</Message></Error></Errors><RequestID>fault</RequestID></Response>"
                .to_string(),
        )
    })
}

/// The overrides of a CreateFleet request: (instance type, zone, subnet).
pub fn fleet_overrides(body: &str) -> Vec<(String, String, String)> {
    let params: BTreeMap<String, String> =
        body.split('&').filter_map(|kv| kv.split_once('=')).map(|(k, v)| (k.to_string(), urlencoding(v))).collect();
    let mut out = Vec::new();
    for (k, v) in &params {
        if let Some(prefix) = k.strip_suffix(".InstanceType")
            && prefix.contains(".Overrides.")
        {
            let zone = params.get(&format!("{prefix}.AvailabilityZone")).cloned().unwrap_or_default();
            let subnet = params.get(&format!("{prefix}.SubnetId")).cloned().unwrap_or_default();
            out.push((v.clone(), zone, subnet));
        }
    }
    out
}

fn urlencoding(v: &str) -> String {
    let mut out = Vec::new();
    let b = v.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' if i + 2 < b.len() => {
                out.push(u8::from_str_radix(&v[i + 1..i + 3], 16).unwrap_or(b'?'));
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// CreateFleet launching nothing: `code` for every override of the request whose type `hit` selects.
pub fn fleet_errors(code: &'static str, hit: impl Fn(&str) -> bool + Send + Sync + 'static) -> Answer {
    Box::new(move |body| {
        let items: String = fleet_overrides(body)
            .into_iter()
            .filter(|(t, ..)| hit(t))
            .map(|(t, zone, subnet)| {
                format!(
                    "<item><launchTemplateAndOverrides><overrides><instanceType>{t}</instanceType>\
                     <availabilityZone>{zone}</availabilityZone><subnetId>{subnet}</subnetId></overrides>\
                     </launchTemplateAndOverrides><errorCode>{code}</errorCode>\
                     <errorMessage>injected: no capacity for {t} in {zone}</errorMessage></item>"
                )
            })
            .collect();
        (
            200,
            format!(
                "<CreateFleetResponse xmlns=\"http://ec2.amazonaws.com/doc/2016-11-15/\"><requestId>fault</requestId>\
                 <fleetId>fleet-fault</fleetId><errorSet>{items}</errorSet><fleetInstanceSet/></CreateFleetResponse>"
            ),
        )
    })
}
