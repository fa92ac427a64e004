//! `baton`, the terminal client for Baton.
//!
//! The app ([`app::App`]) holds all state and turns actions, notifications and request outcomes
//! into [`command::Command`]s; the [`runner`] performs them on the typed protocol client; the
//! [`ui`] draws a frame from the state (the transcript's lines and rows come from
//! [`layout`], which the app owns and `ui` only reads; `app` never imports `ui`); [`event_loop`] ties them together.

pub mod action;
pub mod alerts;
pub mod app;
pub mod auto_resume;
pub mod backoff;
pub mod cli;
pub mod clipboard;
pub mod command;
pub mod config;
pub mod connect_error;
pub mod event_loop;
pub mod export_file;
pub mod keymap;
pub mod launcher;
pub mod layout;
pub mod logging;
pub mod runner;
pub mod server_url;
pub mod sessions;
pub mod terminal;
pub mod text_field;
pub mod transcript;
pub mod ui;
