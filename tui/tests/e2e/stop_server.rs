//! `Q` stops the local server and all its agents, after a question: `batond stop --agents` on
//! baton's data dir, and only when that data dir runs the server baton talks to.

use baton_protocol::ClientOptions;
use baton_testkit::{batond_path, ServerBuilder};
use baton_tui::action::Action;
use baton_tui::app::{Confirmation, Overlay};
use baton_tui::command::Command;
use baton_tui::launcher::{stop_local_server, LaunchOptions};

use crate::common::*;

#[test]
fn q_asks_before_stopping_the_local_server() {
    let mut app = listed_app();
    app.handle_action(Action::StopServer);
    assert!(matches!(app.overlay(), Some(Overlay::Confirm(Confirmation::StopServer))));
    assert!(render(&app).contains("Stop the local server and every agent it runs"));
    app.handle_action(Action::CloseOverlay);
    assert!(!app.take_commands().contains(&Command::StopServer), "n stops nothing");
    app.handle_action(Action::StopServer);
    app.handle_action(Action::Confirm);
    assert!(app.take_commands().contains(&Command::StopServer));
    app.on_server_stopped(Ok("batond (pid 42) stopped".into()));
    assert!(app.flash_text().is_some_and(|t| t.starts_with("batond (pid 42) stopped")));
}

#[tokio::test]
async fn the_stop_runs_batond_stop_on_the_data_dir_of_the_server_baton_talks_to() {
    let dir = tempfile::tempdir().expect("temp dir");
    let data_dir = dir.path().join("server");
    let server = ServerBuilder::new(&data_dir).start().await;
    let options = |data_dir: &std::path::Path| LaunchOptions {
        url: server.url.clone(),
        client: ClientOptions::default(),
        data_dir: data_dir.to_path_buf(),
        batond: Some(batond_path()),
        no_spawn: true,
        startup_bound: baton_tui::launcher::STARTUP_BOUND,
    };
    // Another data dir: not ours to stop.
    let elsewhere = stop_local_server(&options(&dir.path().join("other"))).await;
    assert!(format!("{:#}", elsewhere.unwrap_err()).contains("does not run on this baton's data dir"));
    let said = stop_local_server(&options(&data_dir)).await.expect("stopped");
    assert!(said.contains("stopped"), "{said}");
    assert!(!data_dir.join("batond.url").exists(), "the server shut down cleanly");
}
