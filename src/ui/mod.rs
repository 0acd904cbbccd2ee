//! The dashboard (ratatui), Elm-shaped: one [`app::AppState`] owned by the UI task, a reducer with no I/O, pure
//! rendering over a shared reference, and one action registry behind keys, help, palette and read-only filtering.

pub mod editor;
pub mod theme;
