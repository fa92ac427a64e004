//! The one event loop: a `select!` over terminal input, server notifications, outcomes of
//! spawned requests and a tick. After each wake-up everything already pending is drained, and
//! the screen is drawn at most once per frame interval, only when something changed.
//!
//! The terminal stream is only ever polled with this task's own waker. crossterm's
//! `EventStream` hands the waker of a pending poll to a helper thread once and ignores later
//! wakers until that one fired: polling it with a no-op waker (`now_or_never`) made the next
//! key wait for the tick.

use std::future::poll_fn;
use std::pin::Pin;
use std::task::Poll;
use std::time::{Duration, Instant};

use anyhow::Result;
use baton_protocol::{Client, ClientError, ClientEvent, Notifications};
use crossterm::event::{Event, EventStream};
use futures_util::{Stream, StreamExt};
use tokio::sync::mpsc;
use tokio::time::MissedTickBehavior;

use crate::app::{App, FrameMetrics};
use crate::clipboard::{osc52, Multiplexer};
use crate::command::Command;
use crate::launcher::LaunchOptions;
use crate::runner::{Delivery, Runner};
use crate::terminal::Tui;
use crate::ui::{self, ViewContext};

/// ~60 frames a second at most.
const FRAME: Duration = Duration::from_millis(16);
/// Bound on items handled between two draws, so a flood of events cannot freeze the screen.
const DRAIN_LIMIT: usize = 2048;

/// The connection-side state of the loop: the runner and the notification stream.
struct Link {
    runner: Runner,
    notifications: Option<Notifications>,
}

impl Link {
    fn on_delivery(&mut self, app: &mut App, delivery: Delivery) {
        match delivery {
            Delivery::Outcome(outcome) => app.on_outcome(*outcome),
            Delivery::Connected(client, notifications) => {
                if self.notifications.is_some() {
                    // Only one attempt runs at a time; a surplus connection is closed.
                    client.close();
                    return;
                }
                let epoch = self.runner.attach(client);
                self.notifications = Some(notifications);
                app.on_connected(epoch);
            }
            Delivery::ConnectFailed(error) => app.on_connect_failed(&error, Instant::now()),
            Delivery::ServerStarted(result) => app.on_server_started(result),
            Delivery::ServerStopped(result) => app.on_server_stopped(result),
        }
    }

    /// `None` means the stream ended: the same as `Closed`.
    fn on_client_event(&mut self, app: &mut App, event: Option<ClientEvent>) {
        match event {
            Some(ClientEvent::Closed) | None => {
                self.notifications = None;
                self.runner.detach();
                app.on_disconnected("the server closed the connection", Instant::now());
            }
            Some(event) => app.on_client_event(event),
        }
    }
}

/// Runs until the user quits. `launch` says where the server is and how to start it again;
/// `initial` is the connection made at startup, or why it failed (the loop then keeps retrying
/// with backoff).
pub async fn run(
    tui: &mut Tui,
    app: &mut App,
    launch: LaunchOptions,
    initial: Result<(Client, Notifications), ClientError>,
    tick_every: Duration,
) -> Result<()> {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let mut link = Link { runner: Runner::new(launch, tx), notifications: None };
    match initial {
        Ok((client, notifications)) => link.on_delivery(app, Delivery::Connected(client, notifications)),
        Err(error) => app.on_connect_failed(&error, Instant::now()),
    }

    let mut terminal_events = EventStream::new();
    let mut tick = tokio::time::interval(tick_every);
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut last_draw: Option<Instant> = None;

    loop {
        for command in app.take_commands() {
            match command {
                Command::Copy(text) => copy_to_terminal(tui, &text),
                Command::Alert(bytes) => write_to_terminal(tui, &bytes),
                Command::Mouse(on) => crate::terminal::set_mouse_capture(tui, on),
                Command::Shell(shell) => {
                    // The terminal's input goes to the shell: this loop's reader stops first
                    // (dropping it wakes and ends its thread) and is made again after.
                    drop(terminal_events);
                    let outcome = crate::terminal::run_outside(tui, app.mouse_enabled(), || run_shell(&shell)).await;
                    terminal_events = EventStream::new();
                    app.shell_ended(outcome);
                }
                command => link.runner.execute(command),
            }
        }
        if app.should_quit() {
            break;
        }
        let frame_due = last_draw.map_or_else(Instant::now, |at| at + FRAME);
        if app.is_dirty() && Instant::now() >= frame_due {
            draw(tui, app)?;
            last_draw = Some(Instant::now());
            continue;
        }

        tokio::select! {
            event = terminal_events.next() => match event {
                Some(Ok(event)) => on_terminal_event(app, event),
                Some(Err(error)) => return Err(error.into()),
                None => break,
            },
            event = next_client_event(&mut link.notifications) => link.on_client_event(app, event),
            Some(delivery) = rx.recv() => link.on_delivery(app, delivery),
            _ = tick.tick() => app.on_tick(Instant::now()),
            _ = tokio::time::sleep_until(frame_due.into()), if app.is_dirty() => {}
        }

        for _ in 0..DRAIN_LIMIT {
            if let Ok(delivery) = rx.try_recv() {
                link.on_delivery(app, delivery);
            } else if let Some(event) = link.notifications.as_mut().and_then(Notifications::try_recv) {
                link.on_client_event(app, Some(event));
            } else if let Poll::Ready(event) = poll_now(&mut terminal_events).await {
                match event {
                    Some(Ok(event)) => on_terminal_event(app, event),
                    Some(Err(error)) => return Err(error.into()),
                    None => return finish(&link),
                }
            } else {
                break;
            }
        }
    }
    finish(&link)
}

/// Runs the shell `shell` names on this terminal and waits for it: the user's `$SHELL` in the
/// task's directory, or the command the server gave (docker exec, ssh).
async fn run_shell(shell: &baton_protocol::TaskShellResult) -> Result<std::process::ExitStatus, String> {
    let mut command = match shell.argv.split_first() {
        Some((program, args)) => {
            let mut command = tokio::process::Command::new(program);
            command.args(args);
            command
        }
        None => {
            let program = std::env::var_os("SHELL").filter(|s| !s.is_empty()).unwrap_or_else(|| "/bin/sh".into());
            let mut command = tokio::process::Command::new(program);
            command.current_dir(&shell.workdir);
            command
        }
    };
    println!("baton: a shell in {} ({}); exit it to come back.", shell.workdir, shell.runtime);
    let status = command.status().await.map_err(|e| format!("{}: {e}", shell.command))?;
    Ok(status)
}

fn finish(link: &Link) -> Result<()> {
    if let Some(client) = link.runner.client() {
        client.close();
    }
    Ok(())
}

/// Polls `stream` once with the task's real context: an item if one is ready, else `Pending`,
/// with this task's waker registered for the next one.
async fn poll_now<S: Stream + Unpin>(stream: &mut S) -> Poll<Option<S::Item>> {
    poll_fn(|cx| Poll::Ready(Pin::new(&mut *stream).poll_next(cx))).await
}

async fn next_client_event(notifications: &mut Option<Notifications>) -> Option<ClientEvent> {
    match notifications {
        Some(notifications) => notifications.recv().await,
        None => std::future::pending().await,
    }
}

fn on_terminal_event(app: &mut App, event: Event) {
    match event {
        Event::Key(key) => app.handle_key(key),
        Event::Paste(text) => app.handle_paste(text),
        Event::Mouse(mouse) => app.handle_mouse(mouse),
        Event::Resize(..) => app.mark_dirty(),
        _ => {}
    }
}

/// Writes the OSC 52 sequence between frames, so it never lands inside a frame's output.
fn copy_to_terminal(tui: &mut Tui, text: &str) {
    use std::io::Write;
    let bytes = osc52(text, Multiplexer::from_env());
    let backend = tui.backend_mut();
    if let Err(error) = backend.write_all(bytes.as_bytes()).and_then(|()| backend.flush()) {
        tracing::warn!("could not write the copy to the terminal: {error}");
    }
}

/// Bytes for the terminal itself (an alert), between frames.
fn write_to_terminal(tui: &mut Tui, bytes: &str) {
    use std::io::Write;
    let backend = tui.backend_mut();
    if let Err(error) = backend.write_all(bytes.as_bytes()).and_then(|()| backend.flush()) {
        tracing::warn!("could not write an alert to the terminal: {error}");
    }
}

fn draw(tui: &mut Tui, app: &mut App) -> Result<()> {
    let ctx = ViewContext::current();
    let mut metrics = FrameMetrics::default();
    tui.draw(|frame| metrics = ui::draw(frame, app, &ctx))?;
    app.set_frame_metrics(metrics);
    app.take_dirty();
    Ok(())
}
