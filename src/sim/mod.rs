//! The simulated cluster and cloud behind `simulate` and `demo`. Arrives with the simulation issue.
