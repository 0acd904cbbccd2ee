//! The interruption queue: long-polled, each message parsed and handed to a handler, then deleted or left, by
//! upstream's rules (aws.md §5): handled, no-op or unparseable → deleted; the handler failed (the API server
//! refused, say) → left, so it comes back after the visibility timeout and is tried again.

use aws_config::SdkConfig;
use aws_sdk_sqs::Client;
use aws_sdk_sqs::types::MessageSystemAttributeName;

use super::config::AwsError;
use super::interruption::{Message, ParseError, parse};

/// Upstream's receive parameters: up to 10 messages, 20 s visibility, 20 s long poll.
pub const MAX_MESSAGES: i32 = 10;
pub const VISIBILITY_TIMEOUT: i32 = 20;
pub const WAIT_SECONDS: i32 = 20;

pub struct Queue {
    client: Client,
    pub name: String,
    pub url: String,
}

/// What one poll did, for logs and tests.
#[derive(Debug, Default, PartialEq)]
pub struct PollReport {
    pub received: usize,
    pub handled: Vec<Message>,
    /// Unparseable bodies (logged and deleted).
    pub malformed: Vec<String>,
    /// Messages left on the queue because handling failed: (message, why).
    pub retried: Vec<(Message, String)>,
}

impl Queue {
    /// Resolves the queue's URL by name, once.
    pub async fn resolve(sdk: &SdkConfig, name: &str) -> Result<Queue, AwsError> {
        let client = Client::new(sdk);
        let out = client.get_queue_url().queue_name(name).send().await.map_err(|e| {
            let missing = e.as_service_error().is_some_and(|s| s.is_queue_does_not_exist());
            if missing {
                let region = sdk.region().map(|r| r.to_string()).unwrap_or_default();
                AwsError::NoQueue { name: name.to_string(), region }
            } else {
                AwsError::call(format!("GetQueueUrl {name}"), e)
            }
        })?;
        let url = out.queue_url.unwrap_or_default();
        Ok(Queue { client, name: name.to_string(), url })
    }

    /// One long poll with upstream's timings.
    pub async fn poll(&self, handle: impl AsyncHandler) -> Result<PollReport, AwsError> {
        self.poll_with(WAIT_SECONDS, VISIBILITY_TIMEOUT, handle).await
    }

    /// One poll: wait up to `wait_seconds` for messages; a message left on the queue comes back after
    /// `visibility_timeout` seconds.
    pub async fn poll_with(
        &self,
        wait_seconds: i32,
        visibility_timeout: i32,
        mut handle: impl AsyncHandler,
    ) -> Result<PollReport, AwsError> {
        let out = self
            .client
            .receive_message()
            .queue_url(&self.url)
            .max_number_of_messages(MAX_MESSAGES)
            .visibility_timeout(visibility_timeout)
            .wait_time_seconds(wait_seconds)
            .message_system_attribute_names(MessageSystemAttributeName::SentTimestamp)
            .send()
            .await
            .map_err(|e| AwsError::call(format!("ReceiveMessage {}", self.name), e))?;
        let mut report = PollReport::default();
        for m in out.messages.unwrap_or_default() {
            report.received += 1;
            let body = m.body.unwrap_or_default();
            let receipt = m.receipt_handle.unwrap_or_default();
            let delete = match parse(&body) {
                Err(e) => {
                    tracing::warn!(queue = %self.name, "unparseable interruption message deleted: {e}");
                    report.malformed.push(describe(&e));
                    true
                }
                Ok(msg) => match handle.handle(&msg).await {
                    Ok(()) => {
                        report.handled.push(msg);
                        true
                    }
                    Err(why) => {
                        tracing::warn!(queue = %self.name, "interruption {} not handled, will retry: {why}", msg.id);
                        report.retried.push((msg, why));
                        false
                    }
                },
            };
            if delete {
                self.client
                    .delete_message()
                    .queue_url(&self.url)
                    .receipt_handle(receipt)
                    .send()
                    .await
                    .map_err(|e| AwsError::call(format!("DeleteMessage {}", self.name), e))?;
            }
        }
        Ok(report)
    }
}

fn describe(e: &ParseError) -> String {
    e.to_string()
}

/// What acts on a parsed message. `Err` leaves the message on the queue for another try.
pub trait AsyncHandler {
    fn handle(&mut self, m: &Message) -> impl std::future::Future<Output = Result<(), String>>;
}

impl<F: FnMut(&Message) -> Result<(), String>> AsyncHandler for F {
    async fn handle(&mut self, m: &Message) -> Result<(), String> {
        self(m)
    }
}
