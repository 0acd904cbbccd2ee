//! The dashboard (ratatui), Elm-shaped: one [`app::AppState`] owned by the UI task, a reducer ([`app::update`])
//! with no I/O, pure rendering over a shared reference ([`view`]), and one action registry ([`action`]) behind keys,
//! help, footer hints, the palette and read-only filtering.

pub mod action;
pub mod app;
pub mod audit;
pub mod drill;
pub mod editor;
pub mod panes;
pub mod rows;
pub mod terminal;
pub mod theme;
pub mod view;
