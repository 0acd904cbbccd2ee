//! The simulation report (scenario.md "The report").
