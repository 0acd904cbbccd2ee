//! The cloud-provider port over the AWS SDK (issue #7). Here so far: the interruption messages EventBridge puts on
//! the SQS queue, parsed ([`interruption`]). EC2 Fleet launches, live pricing and EC2NodeClass resolution are not
//! built yet; the offline catalog the engine uses lives in `engine::catalog`.

pub mod interruption;
