//! AWS configuration like the AWS CLI: the SDK's default chain (environment, `AWS_PROFILE`/`--profile`, SSO, web
//! identity in the cluster, IMDS), `--region` over `AWS_REGION`, and the SDK's standard `AWS_ENDPOINT_URL` /
//! `AWS_ENDPOINT_URL_<SERVICE>` overrides (how the tests point it at moto). Checked at start, so a missing region
//! or credentials is said plainly instead of failing on the first call.

use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_credential_types::provider::ProvideCredentials;
use thiserror::Error;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AwsOptions {
    pub profile: Option<String>,
    pub region: Option<String>,
}

#[derive(Debug, Error)]
pub enum AwsError {
    #[error("no AWS region: pass --region or set AWS_REGION (or a region in the profile)")]
    NoRegion,
    #[error("no AWS credentials: {0} (set AWS_PROFILE, run `aws sso login`, or provide AWS_ACCESS_KEY_ID)")]
    NoCredentials(String),
    #[error("SQS queue {name} does not exist in {region} (check --interruption-queue)")]
    NoQueue { name: String, region: String },
    /// `what` names the call (and its object); `message` is for people; `code` is the service's error code when it
    /// answered with one; `transient` when trying again later may well work (no answer, throttling, a server
    /// fault).
    #[error("{what}: {message}")]
    Call { what: String, message: String, code: Option<String>, transient: bool },
}

impl AwsError {
    /// A failed call, summarised for people (see [`CallError`]).
    pub fn call<E: CallError>(what: impl Into<String>, e: E) -> AwsError {
        let s = e.summary();
        AwsError::Call { what: what.into(), message: s.message, code: s.code, transient: s.transient }
    }

    /// A failure that is not an AWS error (an answer with nothing usable in it, say).
    pub fn other(what: impl Into<String>, message: impl Into<String>) -> AwsError {
        AwsError::Call { what: what.into(), message: message.into(), code: None, transient: false }
    }

    /// The service's error code (`UnauthorizedOperation`, `NoSuchEntity`, ...), when it answered with one.
    pub fn code(&self) -> Option<&str> {
        match self {
            AwsError::Call { code, .. } => code.as_deref(),
            _ => None,
        }
    }

    /// Whether trying again later may well work: no answer, throttling or a server fault.
    pub fn is_transient(&self) -> bool {
        matches!(self, AwsError::Call { transient: true, .. })
    }
}

/// What a failed call comes down to, for people and for retry decisions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    pub message: String,
    pub code: Option<String>,
    pub transient: bool,
}

/// An error a call can fail with, summarised without the SDK's Debug dumps.
pub trait CallError {
    fn summary(&self) -> Summary;
}

/// Codes AWS services answer with when they throttle or fail on their side.
const TRANSIENT_CODES: [&str; 12] = [
    "Throttling",
    "ThrottlingException",
    "ThrottledException",
    "RequestThrottled",
    "RequestThrottledException",
    "RequestLimitExceeded",
    "TooManyRequestsException",
    "SlowDown",
    "InternalError",
    "InternalFailure",
    "InternalServerError",
    "ServiceUnavailable",
];

impl<E> CallError for aws_sdk_ec2::error::SdkError<E, aws_sdk_ec2::config::http::HttpResponse>
where
    E: aws_sdk_ec2::error::ProvideErrorMetadata + std::error::Error + 'static,
{
    fn summary(&self) -> Summary {
        use aws_sdk_ec2::error::SdkError;
        let raw = self.raw_response().map(|r| (r.status().as_u16(), r.body().bytes().unwrap_or_default()));
        let status = raw.map(|(s, _)| s);
        if let SdkError::ServiceError(s) = self
            && let Some(code) = s.err().code()
        {
            let message = match s.err().message() {
                Some(m) if !m.is_empty() => format!("{code}: {m}"),
                _ => code.to_string(),
            };
            let transient = TRANSIENT_CODES.contains(&code) || status.is_some_and(|s| s >= 500);
            return Summary { message, code: Some(code.to_string()), transient };
        }
        let transient = match self {
            SdkError::DispatchFailure(_) | SdkError::TimeoutError(_) => true,
            SdkError::ConstructionFailure(_) => false,
            _ => status.is_none_or(|s| s >= 500 || s == 429),
        };
        // Not an AWS answer: say what came back instead of how the SDK failed to parse it.
        let message = match raw.and_then(|(s, body)| describe_foreign_answer(s, body)) {
            Some(m) => m,
            None => error_chain(self),
        };
        Summary { message, code: None, transient }
    }
}

impl CallError for aws_sdk_ec2::error::BuildError {
    fn summary(&self) -> Summary {
        Summary { message: error_chain(self), code: None, transient: false }
    }
}

/// An error and its causes, each once (the SDK's layers often repeat their cause's text).
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut parts: Vec<String> = vec![e.to_string()];
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        source = s.source();
    }
    parts.join(": ")
}

/// An HTTP answer that is not from AWS (an HTML page from a proxy, a captive portal or an emulator that lacks the
/// service), described by its status and title; `None` for an empty or AWS-shaped (JSON/XML) body.
pub fn describe_foreign_answer(status: u16, body: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(&body[..body.len().min(64 * 1024)]);
    let trimmed = text.trim_start();
    let lower = trimmed.to_ascii_lowercase();
    if lower.starts_with("<!doctype html") || lower.starts_with("<html") || lower.contains("<body") {
        let title = ["title", "h1"].iter().find_map(|tag| element_text(trimmed, &lower, tag));
        return Some(match title {
            Some(t) => format!("HTTP {status} with an HTML page (\"{t}\") instead of an AWS answer"),
            None => format!("HTTP {status} with an HTML page instead of an AWS answer"),
        });
    }
    if trimmed.is_empty() || trimmed.starts_with('{') || trimmed.starts_with('<') {
        return None;
    }
    let first: String = trimmed.lines().next().unwrap_or("").chars().take(120).collect();
    Some(format!("HTTP {status} with a non-AWS answer: {first}"))
}

/// The text of the first `<tag>` element, whitespace collapsed, at most 80 characters.
fn element_text(text: &str, lower: &str, tag: &str) -> Option<String> {
    let open = lower.find(&format!("<{tag}"))?;
    let start = open + lower[open..].find('>')? + 1;
    let end = start + lower[start..].find(&format!("</{tag}"))?;
    let inner: String = text.get(start..end)?.split_whitespace().collect::<Vec<_>>().join(" ");
    let inner: String = inner.chars().take(80).collect();
    (!inner.is_empty()).then_some(inner)
}

/// Loads the configuration and checks that a region and credentials are there.
pub async fn load(opts: &AwsOptions) -> Result<SdkConfig, AwsError> {
    let mut loader = aws_config::defaults(BehaviorVersion::latest());
    if let Some(p) = &opts.profile {
        loader = loader.profile_name(p);
    }
    if let Some(r) = &opts.region {
        loader = loader.region(Region::new(r.clone()));
    }
    let sdk = loader.load().await;
    if sdk.region().is_none() {
        return Err(AwsError::NoRegion);
    }
    let provider = sdk.credentials_provider().ok_or_else(|| AwsError::NoCredentials("no provider".into()))?;
    provider.provide_credentials().await.map_err(|e| AwsError::NoCredentials(e.to_string()))?;
    Ok(sdk)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn html_answers_are_named_by_status_and_title() {
        let page =
            b"<!DOCTYPE html>\n<html><head><title>404 Not Found</title></head><body><h1>Not Found</h1></body></html>";
        assert_eq!(
            describe_foreign_answer(404, page).as_deref(),
            Some("HTTP 404 with an HTML page (\"404 Not Found\") instead of an AWS answer")
        );
        let untitled = b"  <html><body><h1>\n  Bad   Gateway </h1></body></html>";
        assert_eq!(
            describe_foreign_answer(502, untitled).as_deref(),
            Some("HTTP 502 with an HTML page (\"Bad Gateway\") instead of an AWS answer")
        );
        assert_eq!(
            describe_foreign_answer(503, b"<html></html>").as_deref(),
            Some("HTTP 503 with an HTML page instead of an AWS answer")
        );
        assert_eq!(
            describe_foreign_answer(500, b"upstream connect error\nmore").as_deref(),
            Some("HTTP 500 with a non-AWS answer: upstream connect error")
        );
        assert_eq!(describe_foreign_answer(400, br#"{"__type":"X"}"#), None, "AWS-shaped answers are the SDK's");
        assert_eq!(describe_foreign_answer(400, b"<Response><Errors/></Response>"), None);
        assert_eq!(describe_foreign_answer(500, b""), None);
    }

    #[test]
    fn a_chain_says_each_cause_once() {
        #[derive(Debug)]
        struct Outer(Inner);
        #[derive(Debug)]
        struct Inner;
        impl std::fmt::Display for Outer {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("response error: bad body")
            }
        }
        impl std::fmt::Display for Inner {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("bad body")
            }
        }
        impl std::error::Error for Outer {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(&self.0)
            }
        }
        impl std::error::Error for Inner {}
        assert_eq!(error_chain(&Outer(Inner)), "response error: bad body");
    }
}
