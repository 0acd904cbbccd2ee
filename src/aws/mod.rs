//! The cloud-provider port over the AWS SDK (EC2 Fleet, pricing, EC2NodeClass, SQS interruptions).
//! Arrives with the AWS issue; the offline catalog the engine uses today lives in `engine::catalog`.
