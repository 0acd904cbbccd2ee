//! The cluster port over kube-rs. Arrives with the live-cluster issue.
