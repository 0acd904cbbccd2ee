//! The in-place NodePool editor (being written).
