//! What a session's agent offers to switch and what the user chose (`session_options`).
//!
//! The offer is a projection of the journal: every `mode` and `options` event updates it in the
//! write that journals the event, so it is never behind what clients were told. The choice is
//! the user's, written by `session.set_mode`/`session.set_option`.

use baton_protocol::{ChosenOptions, OptionValue, OptionsChange, SessionEvent, SessionOptions};
use rusqlite::{params, Connection, OptionalExtension};

use super::{Store, StoreError, StoreResult};

/// Keeps the session's offer up to date with a journaled event (inside its write).
pub(super) fn project(conn: &Connection, session_id: &str, event: &SessionEvent) -> StoreResult<()> {
    let change = match event {
        SessionEvent::Options { change } => change.clone(),
        SessionEvent::Mode { mode_id } => OptionsChange { current_mode: Some(mode_id.clone()), ..Default::default() },
        _ => return Ok(()),
    };
    let mut offered = offered_in(conn, session_id)?;
    offered.apply(&change);
    let json = serde_json::to_string(&offered).map_err(|e| StoreError::Corrupt(e.to_string()))?;
    conn.prepare_cached(
        "INSERT INTO session_options (session_id, offered) VALUES (?1, ?2)
         ON CONFLICT (session_id) DO UPDATE SET offered = excluded.offered",
    )?
    .execute(params![session_id, json])?;
    Ok(())
}

fn offered_in(conn: &Connection, session_id: &str) -> StoreResult<SessionOptions> {
    let text: Option<String> = conn
        .prepare_cached("SELECT offered FROM session_options WHERE session_id = ?1")?
        .query_row([session_id], |r| r.get(0))
        .optional()?;
    Ok(text.and_then(|t| serde_json::from_str(&t).ok()).unwrap_or_default())
}

fn chosen_in(conn: &Connection, session_id: &str) -> StoreResult<ChosenOptions> {
    let text: Option<String> = conn
        .prepare_cached("SELECT chosen FROM session_options WHERE session_id = ?1")?
        .query_row([session_id], |r| r.get(0))
        .optional()?;
    Ok(text.and_then(|t| serde_json::from_str(&t).ok()).unwrap_or_default())
}

/// Writes the user's choices of a session (it must exist).
pub(super) fn set_chosen_in(conn: &Connection, session_id: &str, chosen: &ChosenOptions) -> StoreResult<()> {
    super::records::get_session(conn, session_id)?;
    let json = serde_json::to_string(chosen).map_err(|e| StoreError::Corrupt(e.to_string()))?;
    conn.prepare_cached(
        "INSERT INTO session_options (session_id, chosen) VALUES (?1, ?2)
         ON CONFLICT (session_id) DO UPDATE SET chosen = excluded.chosen",
    )?
    .execute(params![session_id, json])?;
    Ok(())
}

/// One choice of the user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Choice {
    Mode(String),
    Option(String, OptionValue),
}

impl Store {
    /// What the session's agent offers (as it last said) and what the user chose.
    pub async fn session_options(&self, session_id: &str) -> StoreResult<(SessionOptions, ChosenOptions)> {
        let session_id = session_id.to_string();
        self.read(move |conn| {
            super::records::get_session(conn, &session_id)?;
            Ok((offered_in(conn, &session_id)?, chosen_in(conn, &session_id)?))
        })
        .await
    }

    /// Records a choice of the user; returns all of them.
    pub async fn choose_option(&self, session_id: &str, choice: Choice) -> StoreResult<ChosenOptions> {
        let session_id = session_id.to_string();
        self.write(move |conn, _| {
            let mut chosen = chosen_in(conn, &session_id)?;
            match choice {
                Choice::Mode(mode) => chosen.mode = Some(mode),
                Choice::Option(id, value) => {
                    chosen.config.insert(id, value);
                }
            }
            set_chosen_in(conn, &session_id, &chosen)?;
            Ok(chosen)
        })
        .await
    }

    /// Puts back the choices a refused switch replaced.
    pub async fn restore_chosen(&self, session_id: &str, chosen: ChosenOptions) -> StoreResult<()> {
        let session_id = session_id.to_string();
        self.write(move |conn, _| set_chosen_in(conn, &session_id, &chosen)).await
    }

    /// Gives a new session (a fork) the choices of another.
    pub async fn copy_chosen_options(&self, from: &str, to: &str) -> StoreResult<()> {
        let (from, to) = (from.to_string(), to.to_string());
        self.write(move |conn, _| {
            let chosen = chosen_in(conn, &from)?;
            if chosen != ChosenOptions::default() {
                set_chosen_in(conn, &to, &chosen)?;
            }
            Ok(())
        })
        .await
    }
}
