//! The integration tests, one module per file beside this one, linked into one test binary: each binary links kube,
//! rustls and the AWS SDK, and one per file made a clean build several gigabytes bigger and slower to link.
//! `aws_live` is its own binary because it sets the process environment.

mod common;
mod fake_apiserver;
mod harness;
mod moto;

mod api_server_strictness;
mod api_validation;
mod aws_e2e;
mod aws_ec2;
mod aws_interruptions;
mod aws_nodeclass;
mod aws_status;
mod aws_upkeep;
mod capacity_buffers;
mod cli_args;
mod cli_logs;
mod crd_equivalence;
mod dashboard;
mod default_spread_v115;
mod deploy_manifests;
mod disruption;
mod disruption_properties;
mod e2e_demo;
mod e2e_real_cluster;
mod editor;
mod karpenter_versions;
mod kube_adapter;
mod kube_overlay;
mod layers;
mod live_controller;
mod live_idle;
mod live_picture;
mod live_registration;
mod live_static;
mod node_repair;
mod node_repair_v115;
mod overlay;
mod packaging;
mod packing;
mod parity;
mod plan_manifests;
mod provisioning_acceptance;
mod provisioning_features;
mod real_manifests;
mod reserved_capacity;
mod scenario_files;
mod scheduler_properties;
mod shipped_scenarios;
mod simulate;
mod static_nodepools;
mod terminate_first_v115;
mod upstream_corpus;
mod whatif;
mod write_backoff;
