//! The async shell between the dashboard and a backend: the messages they exchange ([`backend`]), the simulated
//! backend that plays a scenario in accelerated real time ([`sim_driver`]), the terminal event loop
//! ([`dashboard`]) and the operator audit log ([`audit`]).

pub mod audit;
pub mod backend;
pub mod controller;
pub mod dashboard;
pub mod live_driver;
pub mod live_view;
pub mod memory;
pub mod passes;
pub mod picture;
pub mod sim_driver;
