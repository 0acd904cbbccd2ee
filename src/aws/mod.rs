//! The cloud-provider port over the AWS SDK (issue #7). Here so far: configuration like the AWS CLI with start-up
//! checks ([`config`]), the interruption messages EventBridge puts on the SQS queue ([`interruption`]) and the queue
//! itself ([`sqs`]). EC2 Fleet launches, live pricing and EC2NodeClass resolution are not built yet; the offline
//! catalog the engine uses lives in `engine::catalog`.

pub mod config;
pub mod interruption;
pub mod sqs;
