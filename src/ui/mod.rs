//! The dashboard (ratatui). Arrives with the dashboard issue; nothing here yet.
