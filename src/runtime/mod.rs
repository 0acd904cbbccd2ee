//! The async shell: clock, leadership, effect runner. Arrives with the simulation issue.
