//! The life cycle of a live execution: one value, changed only by named, checked transitions.
//!
//! ```text
//!   Starting ──becoming_ready──▶ BecomingReady ──ready──▶ Ready ◀──close_turn── TurnOpen(n)
//!      │  └──────────ready / reattached──────────────────▶  │ ──open_turn──────────▲
//!      └─────────────── any stage ──gone(reason)──▶ Gone(reason)   (final)
//! ```
//! `begin_stopping` marks an execution that is being stopped (by `task.session.stop`, a failed
//! launch or the server's shutdown) in any stage but `Gone`: from then on no turn opens and its
//! exit is not the agent's own. What can happen while a turn is open is the `TurnOpen` arm of
//! each transition below: it closes (answered, or ended by an exit, a forced cancel, a stop or a
//! failed start), the user cancels it (`cancel_turn`), or its prompt is found not to have
//! reached the agent (`prompt_undelivered`). The open turn carries what its end needs (its id,
//! whether it was cancelled, the prompt to deliver again), so whoever closes it gets all of it
//! from the one transition that closed it.
//!
//! The launch's own data is kept here too, so that it follows the same rules: the ACP
//! connection to the agent (`connected`, once, any stage but `Gone`), the ACP session the launch
//! made or restored (`acp_session_made`, any stage but `Gone`), and why a waiter gave the launch
//! up (`abandon`, only while it is still starting: a launch that got ready was not given up).
//!
//! So is the one datum a turn holds that is not a plain value: a reattached agent's open turn
//! (one a previous server opened) holds where that server's prompt's answer goes. It is made
//! with the turn by `reattached` and dropped the moment that turn is no longer open, so an
//! answer can only reach the turn it belongs to.

use serde_json::Value;
use tokio::sync::{oneshot, watch};

use crate::agent::acp::{AcpConnection, LineDone, RpcError};

/// The answer to a previous server's `session/prompt`, as this server receives it (an answer to
/// a request it did not send), with what marks its line handled.
pub type TurnAnswer = (Result<Value, RpcError>, Option<LineDone>);

/// What waiters observe of the life cycle (ensureSessionRunning waits on it instead of polling).
#[derive(Debug, Clone, PartialEq)]
pub enum Phase {
    Starting,
    Ready,
    /// The launch failed or the agent went away; the execution is (being) detached.
    Gone(String),
}

#[derive(Debug, Clone, PartialEq)]
pub enum Stage {
    /// The process is being launched: initialize, restore, the session's first state.
    Starting,
    /// Launched, idle, and the session is being moved to WAITING_FOR_INPUT: already counts as
    /// running for a status read, not yet for a prompt.
    BecomingReady,
    /// Takes a prompt.
    Ready,
    /// A turn is running.
    TurnOpen(Turn),
    Gone(String),
}

/// The open turn, handed to whoever closes it.
#[derive(Debug, Clone, PartialEq)]
pub struct Turn {
    /// Counting from 1 per execution.
    pub number: u64,
    /// The id its events carry (`MessageAddResult::turn_id`); none for a turn a previous server
    /// opened (a reattached hosted agent).
    pub id: Option<String>,
    /// The user cancelled it: an agent that answers the cancel with `end_turn` (opencode) ended
    /// a cancelled turn.
    pub cancelled: bool,
    /// The prompt never reached the agent (it exited first): the message to deliver again to
    /// the resumed agent instead of closing the turn as interrupted.
    pub undelivered: Option<String>,
}

impl Turn {
    fn new(number: u64, id: Option<String>) -> Turn {
        Turn { number, id, cancelled: false, undelivered: None }
    }
}

impl Stage {
    fn phase(&self) -> Phase {
        match self {
            Stage::Starting | Stage::BecomingReady => Phase::Starting,
            Stage::Ready | Stage::TurnOpen(_) => Phase::Ready,
            Stage::Gone(reason) => Phase::Gone(reason.clone()),
        }
    }
}

/// A transition the life cycle refused, and the stage it was refused in.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{transition} refused: the execution is {stage:?}{}", if *.stopping { " (stopping)" } else { "" })]
pub struct Refused {
    pub transition: &'static str,
    pub stage: Stage,
    pub stopping: bool,
}

#[derive(Debug, Clone, PartialEq)]
struct State {
    stage: Stage,
    stopping: bool,
    /// Turns opened so far (the open turn, if any, is the last one).
    turns: u64,
    /// The agent's ACP session id, once the launch made or restored it.
    acp_session: Option<String>,
    /// Why a waiter gave the launch up (reported instead of the pipe error that follows).
    abandoned: Option<String>,
    /// The ACP connection over the agent's pipes is made (once: `connected`).
    connected: bool,
}

/// What a transition asks of the life cycle.
#[derive(Debug, Clone)]
enum Event {
    BecomingReady,
    Ready,
    Reattached {
        turn_open: bool,
    },
    OpenTurn {
        id: String,
    },
    CancelTurn,
    PromptUndelivered {
        turn: u64,
        content: String,
    },
    /// Closes the open turn; with `only`, only if it is that turn.
    CloseTurn {
        only: Option<u64>,
    },
    BeginStopping,
    Gone(String),
    AcpSessionMade(String),
    Connected,
    Abandon(String),
}

impl Event {
    fn name(&self) -> &'static str {
        match self {
            Event::BecomingReady => "becoming_ready",
            Event::Ready => "ready",
            Event::Reattached { .. } => "reattached",
            Event::OpenTurn { .. } => "open_turn",
            Event::CancelTurn => "cancel_turn",
            Event::PromptUndelivered { .. } => "prompt_undelivered",
            Event::CloseTurn { only: None } => "close_turn",
            Event::CloseTurn { only: Some(_) } => "close_turn_number",
            Event::BeginStopping => "begin_stopping",
            Event::Gone(_) => "gone",
            Event::AcpSessionMade(_) => "acp_session_made",
            Event::Connected => "connected",
            Event::Abandon(_) => "abandon",
        }
    }
}

/// The whole life cycle in one match: the state after `event`, or None when `event` is refused
/// in `state`. Pure; `Life` applies it under its lock.
fn step(state: &State, event: Event) -> Option<State> {
    let State { stage, stopping, turns, .. } = state;
    let running = !stopping;
    let (stage, turns) = match (stage, event) {
        (Stage::Gone(_), _) => return None,
        (_, Event::BeginStopping) => return Some(State { stopping: true, ..state.clone() }),
        (_, Event::AcpSessionMade(id)) => return Some(State { acp_session: Some(id), ..state.clone() }),
        (_, Event::Connected) if !state.connected => return Some(State { connected: true, ..state.clone() }),
        (_, Event::Connected) => return None,
        (Stage::Starting | Stage::BecomingReady, Event::Abandon(reason)) => {
            return Some(State { abandoned: Some(reason), ..state.clone() });
        }
        (_, Event::Gone(reason)) => (Stage::Gone(reason), *turns),
        (Stage::Starting, Event::BecomingReady) if running => (Stage::BecomingReady, *turns),
        (Stage::Starting | Stage::BecomingReady, Event::Ready) if running => (Stage::Ready, *turns),
        (Stage::Starting, Event::Reattached { turn_open: false }) if running => (Stage::Ready, *turns),
        (Stage::Starting, Event::Reattached { turn_open: true }) if running => {
            (Stage::TurnOpen(Turn::new(turns + 1, None)), turns + 1)
        }
        (Stage::Ready, Event::OpenTurn { id }) if running => {
            (Stage::TurnOpen(Turn::new(turns + 1, Some(id))), turns + 1)
        }
        // While a turn is open, stopping or not: it is cancelled, its prompt turns out not to
        // have reached the agent, or it closes. (Stopping and gone are the arms above.)
        (Stage::TurnOpen(turn), Event::CancelTurn) => {
            (Stage::TurnOpen(Turn { cancelled: true, ..turn.clone() }), *turns)
        }
        (Stage::TurnOpen(turn), Event::PromptUndelivered { turn: n, content }) if turn.number == n => {
            (Stage::TurnOpen(Turn { undelivered: Some(content), ..turn.clone() }), *turns)
        }
        (Stage::TurnOpen(turn), Event::CloseTurn { only }) if only.is_none_or(|n| n == turn.number) => {
            (Stage::Ready, *turns)
        }
        _ => return None,
    };
    Some(State { stage, turns, ..state.clone() })
}

/// The life cycle; the phase of each stage is published to waiters on every change.
pub struct Life {
    inner: std::sync::Mutex<Inner>,
    phase: watch::Sender<Phase>,
}

/// The state, and the answer slot of a reattached agent's open turn: one lock, so that the slot
/// is made and dropped in the same step as its turn.
struct Inner {
    state: State,
    /// The number of the turn it belongs to, and where its answer goes.
    answer_to: Option<(u64, oneshot::Sender<TurnAnswer>)>,
    /// The ACP connection to the agent, once made (kept once gone: what the end still reads).
    acp: Option<AcpConnection>,
}

impl Default for Life {
    fn default() -> Self {
        Life {
            inner: std::sync::Mutex::new(Inner {
                state: State {
                    stage: Stage::Starting,
                    stopping: false,
                    turns: 0,
                    acp_session: None,
                    abandoned: None,
                    connected: false,
                },
                answer_to: None,
                acp: None,
            }),
            phase: watch::channel(Phase::Starting).0,
        }
    }
}

impl Life {
    fn inner(&self) -> std::sync::MutexGuard<'_, Inner> {
        // The state is a few plain fields changed whole, and the slot is set or taken whole: a
        // panic elsewhere cannot leave them torn.
        self.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Applies `event` (see `step`); the phase follows. Returns the state before and after.
    fn apply(&self, event: Event) -> Result<(State, State), Refused> {
        self.apply_then(event, |_| ()).map(|(before, after, ())| (before, after))
    }

    /// [`Self::apply`], then `then` under the same lock (with the state after the event).
    fn apply_then<R>(&self, event: Event, then: impl FnOnce(&mut Inner) -> R) -> Result<(State, State, R), Refused> {
        let name = event.name();
        let mut inner = self.inner();
        let Some(next) = step(&inner.state, event) else {
            return Err(Refused { transition: name, stage: inner.state.stage.clone(), stopping: inner.state.stopping });
        };
        let before = std::mem::replace(&mut inner.state, next.clone());
        // The answer slot lives exactly as long as its turn is open.
        let slot_turn = inner.answer_to.as_ref().map(|(number, _)| *number);
        let still_open = matches!(&next.stage, Stage::TurnOpen(turn) if Some(turn.number) == slot_turn);
        if !still_open {
            inner.answer_to = None;
        }
        let then = then(&mut inner);
        drop(inner);
        let phase = next.stage.phase();
        self.phase.send_if_modified(|current| {
            let changed = *current != phase;
            *current = phase;
            changed
        });
        Ok((before, next, then))
    }

    /// Applies an event that `step` accepts only while a turn is open, and returns that turn.
    fn apply_to_turn(&self, event: Event) -> Result<Turn, Refused> {
        let name = event.name();
        let (before, _) = self.apply(event)?;
        match before.stage {
            Stage::TurnOpen(turn) => Ok(turn),
            // `step` accepts these events in TurnOpen only.
            stage => Err(Refused { transition: name, stage, stopping: before.stopping }),
        }
    }

    pub fn stage(&self) -> Stage {
        self.inner().state.stage.clone()
    }

    pub fn phase(&self) -> Phase {
        self.phase.borrow().clone()
    }

    pub fn subscribe(&self) -> watch::Receiver<Phase> {
        self.phase.subscribe()
    }

    pub fn is_stopping(&self) -> bool {
        self.inner().state.stopping
    }

    /// The open turn's number.
    pub fn open_turn_number(&self) -> Option<u64> {
        match &self.inner().state.stage {
            Stage::TurnOpen(turn) => Some(turn.number),
            _ => None,
        }
    }

    /// Ready or in a turn, and not being stopped: the agent's exit would be its own.
    pub fn is_running(&self) -> bool {
        let inner = self.inner();
        let state = &inner.state;
        !state.stopping && matches!(state.stage, Stage::Ready | Stage::TurnOpen(_))
    }

    /// Launched (becoming ready, ready or in a turn), stopping or not.
    pub fn is_launched(&self) -> bool {
        matches!(self.inner().state.stage, Stage::BecomingReady | Stage::Ready | Stage::TurnOpen(_))
    }

    /// Starting → BecomingReady.
    pub fn becoming_ready(&self) -> Result<(), Refused> {
        self.apply(Event::BecomingReady).map(drop)
    }

    /// Starting or BecomingReady → Ready.
    pub fn ready(&self) -> Result<(), Refused> {
        self.apply(Event::Ready).map(drop)
    }

    /// Starting → Ready, or straight into a turn that a previous server opened (a reattached
    /// hosted agent).
    ///
    /// In that turn, returns where the previous server's prompt's answer arrives: the slot the
    /// answer is given to (`take_answer_slot`) is made in the same step, and dropped with the
    /// turn (the receiver then learns that no answer will come).
    pub fn reattached(&self, turn_open: bool) -> Result<Option<oneshot::Receiver<TurnAnswer>>, Refused> {
        self.apply_then(Event::Reattached { turn_open }, |inner| match &inner.state.stage {
            Stage::TurnOpen(turn) => {
                let (tx, rx) = oneshot::channel();
                inner.answer_to = Some((turn.number, tx));
                Some(rx)
            }
            _ => None,
        })
        .map(|(_, _, answer)| answer)
    }

    /// Where the answer to a previous server's prompt goes, while the reattached turn it
    /// belongs to is open; taken once.
    pub fn take_answer_slot(&self) -> Option<oneshot::Sender<TurnAnswer>> {
        self.inner().answer_to.take().map(|(_, slot)| slot)
    }

    /// Ready → TurnOpen(n), the turn whose events carry `id`; returns n.
    pub fn open_turn(&self, id: impl Into<String>) -> Result<u64, Refused> {
        self.apply(Event::OpenTurn { id: id.into() }).map(|(_, after)| after.turns)
    }

    /// TurnOpen → TurnOpen, marked cancelled by the user (also while stopping: the cancel is
    /// still answered); returns the turn's number.
    pub fn cancel_turn(&self) -> Result<u64, Refused> {
        self.apply_to_turn(Event::CancelTurn).map(|turn| turn.number)
    }

    /// TurnOpen(n) → TurnOpen(n) holding `content`, the prompt that never reached the agent.
    /// Refused for any other turn: only the turn that sent it can have lost it.
    pub fn prompt_undelivered(&self, n: u64, content: impl Into<String>) -> Result<(), Refused> {
        self.apply_to_turn(Event::PromptUndelivered { turn: n, content: content.into() }).map(drop)
    }

    /// TurnOpen → Ready (also while stopping: the turn's end is still recorded); returns the
    /// turn. Refused when no turn is open: whoever closed it first records its end.
    pub fn close_turn(&self) -> Result<Turn, Refused> {
        self.apply_to_turn(Event::CloseTurn { only: None })
    }

    /// Closes turn `n` only if it is the one open (a cancel enforced later than the turn's end).
    pub fn close_turn_number(&self, n: u64) -> Result<Turn, Refused> {
        self.apply_to_turn(Event::CloseTurn { only: Some(n) })
    }

    /// Any stage but Gone, once: the ACP connection to the agent is made (a launch makes it
    /// while starting; a reattached agent's, once the reattachment set its stage).
    pub fn connected(&self, acp: AcpConnection) -> Result<(), Refused> {
        self.apply_then(Event::Connected, |inner| inner.acp = Some(acp)).map(drop)
    }

    /// The ACP connection to the agent, once made.
    pub fn acp(&self) -> Option<AcpConnection> {
        self.inner().acp.clone()
    }

    /// Any stage but Gone: records the agent's ACP session id (the launch made or restored it).
    pub fn acp_session_made(&self, id: impl Into<String>) -> Result<(), Refused> {
        self.apply(Event::AcpSessionMade(id.into())).map(drop)
    }

    /// The agent's ACP session id, once made; kept once gone (what the end still reports).
    pub fn acp_session(&self) -> Option<String> {
        self.inner().state.acp_session.clone()
    }

    /// Starting or BecomingReady (stopping or not): the launch is given up for `reason`.
    pub fn abandon(&self, reason: impl Into<String>) -> Result<(), Refused> {
        self.apply(Event::Abandon(reason.into())).map(drop)
    }

    /// Why the launch was given up, if it was.
    pub fn abandoned(&self) -> Option<String> {
        self.inner().state.abandoned.clone()
    }

    /// Any stage but Gone: the execution is being stopped. No turn opens from now on.
    pub fn begin_stopping(&self) -> Result<(), Refused> {
        self.apply(Event::BeginStopping).map(drop)
    }

    /// Any stage but Gone → Gone(reason) (the first reason stays). Returns the turn that was
    /// open, whose end the caller records.
    pub fn gone(&self, reason: impl Into<String>) -> Result<Option<Turn>, Refused> {
        self.apply(Event::Gone(reason.into())).map(|(before, _)| match before.stage {
            Stage::TurnOpen(turn) => Some(turn),
            _ => None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Transition = fn(&Life) -> Result<(), Refused>;

    fn transitions() -> Vec<(&'static str, Transition)> {
        vec![
            ("becoming_ready", |l| l.becoming_ready()),
            ("ready", |l| l.ready()),
            ("reattached", |l| l.reattached(false).map(drop)),
            ("reattached_in_turn", |l| l.reattached(true).map(drop)),
            ("open_turn", |l| l.open_turn("turn-a").map(drop)),
            ("cancel_turn", |l| l.cancel_turn().map(drop)),
            ("prompt_undelivered_1", |l| l.prompt_undelivered(1, "hello")),
            ("prompt_undelivered_2", |l| l.prompt_undelivered(2, "hello")),
            ("close_turn", |l| l.close_turn().map(drop)),
            ("close_turn_number_1", |l| l.close_turn_number(1).map(drop)),
            ("close_turn_number_2", |l| l.close_turn_number(2).map(drop)),
            ("begin_stopping", |l| l.begin_stopping()),
            ("gone", |l| l.gone("x").map(drop)),
            ("acp_session_made", |l| l.acp_session_made("s-1")),
            ("abandon", |l| l.abandon("too slow")),
        ]
    }

    /// A life cycle in `stage` (optionally stopping), reached through legal transitions.
    fn life_in(stage: &str, stopping: bool) -> Life {
        let life = Life::default();
        match stage {
            "Starting" => {}
            "BecomingReady" => life.becoming_ready().unwrap(),
            "Ready" => life.ready().unwrap(),
            "TurnOpen" => {
                life.ready().unwrap();
                life.open_turn("turn-a").unwrap();
            }
            "Gone" => drop(life.gone("went away").unwrap()),
            other => panic!("no stage {other}"),
        }
        if stopping {
            life.begin_stopping().unwrap();
        }
        life
    }

    /// Every transition from every stage, stopping or not: the legal ones are exactly these.
    #[test]
    fn every_illegal_transition_is_refused() {
        let legal: &[(&str, bool, &str)] = &[
            ("Starting", false, "becoming_ready"),
            ("Starting", false, "ready"),
            ("Starting", false, "reattached"),
            ("Starting", false, "reattached_in_turn"),
            ("Starting", false, "begin_stopping"),
            ("Starting", false, "gone"),
            ("Starting", true, "begin_stopping"),
            ("Starting", true, "gone"),
            ("BecomingReady", false, "ready"),
            ("BecomingReady", false, "begin_stopping"),
            ("BecomingReady", false, "gone"),
            ("BecomingReady", true, "begin_stopping"),
            ("BecomingReady", true, "gone"),
            ("Ready", false, "open_turn"),
            ("Ready", false, "begin_stopping"),
            ("Ready", false, "gone"),
            ("Ready", true, "begin_stopping"),
            ("Ready", true, "gone"),
            ("TurnOpen", false, "cancel_turn"),
            ("TurnOpen", false, "prompt_undelivered_1"),
            ("TurnOpen", false, "close_turn"),
            ("TurnOpen", false, "close_turn_number_1"),
            ("TurnOpen", false, "begin_stopping"),
            ("TurnOpen", false, "gone"),
            ("TurnOpen", true, "cancel_turn"),
            ("TurnOpen", true, "prompt_undelivered_1"),
            ("TurnOpen", true, "close_turn"),
            ("TurnOpen", true, "close_turn_number_1"),
            ("TurnOpen", true, "begin_stopping"),
            ("TurnOpen", true, "gone"),
            ("Starting", false, "acp_session_made"),
            ("Starting", true, "acp_session_made"),
            ("BecomingReady", false, "acp_session_made"),
            ("BecomingReady", true, "acp_session_made"),
            ("Ready", false, "acp_session_made"),
            ("Ready", true, "acp_session_made"),
            ("TurnOpen", false, "acp_session_made"),
            ("TurnOpen", true, "acp_session_made"),
            ("Starting", false, "abandon"),
            ("Starting", true, "abandon"),
            ("BecomingReady", false, "abandon"),
            ("BecomingReady", true, "abandon"),
        ];
        for stage in ["Starting", "BecomingReady", "Ready", "TurnOpen", "Gone"] {
            for stopping in [false, true] {
                if stage == "Gone" && stopping {
                    continue; // begin_stopping is refused once gone
                }
                for (name, transition) in transitions() {
                    let life = life_in(stage, stopping);
                    let before = (life.stage(), life.is_stopping());
                    let result = transition(&life);
                    let allowed = legal.contains(&(stage, stopping, name));
                    assert_eq!(result.is_ok(), allowed, "{name} from {stage} (stopping: {stopping}): {result:?}");
                    if !allowed {
                        assert_eq!((life.stage(), life.is_stopping()), before, "a refused {name} changed nothing");
                    }
                }
            }
        }
    }

    #[test]
    fn turns_are_numbered_and_a_stale_close_does_not_close_the_next_turn() {
        let life = Life::default();
        life.ready().unwrap();
        assert_eq!(life.open_turn("turn-a"), Ok(1));
        assert_eq!(life.close_turn().map(|t| t.number), Ok(1));
        assert_eq!(life.open_turn("turn-b"), Ok(2));
        assert!(life.close_turn_number(1).is_err(), "the cancel of turn 1 leaves turn 2 alone");
        assert!(life.prompt_undelivered(1, "old").is_err(), "turn 1's lost prompt is not turn 2's");
        let open = Turn { number: 2, id: Some("turn-b".into()), cancelled: false, undelivered: None };
        assert_eq!(life.stage(), Stage::TurnOpen(open.clone()));
        assert_eq!(life.gone("stopped"), Ok(Some(open)), "gone reports the turn it interrupted");
        assert_eq!(life.phase(), Phase::Gone("stopped".into()));
        assert!(life.gone("again").is_err());
        assert_eq!(life.phase(), Phase::Gone("stopped".into()), "the first reason stays");
    }

    #[test]
    fn the_closed_turn_carries_its_id_its_cancel_and_its_undelivered_prompt() {
        let life = Life::default();
        life.ready().unwrap();
        life.open_turn("turn-a").unwrap();
        let answered = life.close_turn().unwrap();
        assert_eq!(answered, Turn { number: 1, id: Some("turn-a".into()), cancelled: false, undelivered: None });

        assert_eq!(life.open_turn("turn-b"), Ok(2));
        assert_eq!(life.cancel_turn(), Ok(2));
        assert_eq!(life.cancel_turn(), Ok(2), "cancelling twice is the same cancel");
        life.prompt_undelivered(2, "hello").unwrap();
        let closed = life.close_turn_number(2).unwrap();
        assert!(closed.cancelled);
        assert_eq!(closed.undelivered.as_deref(), Some("hello"));
        assert_eq!(closed.id.as_deref(), Some("turn-b"));

        assert_eq!(life.open_turn("turn-c"), Ok(3));
        let fresh = life.close_turn().unwrap();
        assert!(!fresh.cancelled && fresh.undelivered.is_none(), "a new turn starts clean: {fresh:?}");
        assert!(life.cancel_turn().is_err(), "no turn is open to cancel");
    }

    #[test]
    fn a_turn_a_previous_server_opened_has_no_id() {
        let life = Life::default();
        life.reattached(true).unwrap();
        assert_eq!(life.open_turn_number(), Some(1));
        assert_eq!(life.close_turn().map(|t| t.id), Ok(None));
        assert_eq!(life.open_turn("turn-x"), Ok(2), "the next turn counts on");
    }

    fn connection() -> AcpConnection {
        let (ours, _theirs) = tokio::io::duplex(64);
        let (read, write) = tokio::io::split(ours);
        AcpConnection::start(read, write, std::sync::Arc::new(crate::agent::acp::tests::Silent))
    }

    #[tokio::test]
    async fn the_connection_is_made_once_before_the_end_and_kept_after_it() {
        let life = Life::default();
        assert!(life.acp().is_none());
        life.connected(connection()).unwrap();
        assert!(life.acp().is_some());
        assert_eq!(life.connected(connection()).map_err(|refused| refused.transition), Err("connected"), "once");
        drop(life.gone("exited").unwrap());
        assert!(life.acp().is_some(), "kept once gone: the end still reads it");

        // A reattached agent's connection is made once the reattachment set its stage.
        let reattached = Life::default();
        let _answer = reattached.reattached(true).unwrap();
        reattached.connected(connection()).unwrap();
        assert!(reattached.acp().is_some());

        // Never once gone.
        let gone = Life::default();
        drop(gone.gone("failed").unwrap());
        assert!(gone.connected(connection()).is_err());
        assert!(gone.acp().is_none());
    }

    #[test]
    fn a_reattached_turns_answer_slot_is_made_with_the_turn_and_goes_with_it() {
        use tokio::sync::oneshot::error::TryRecvError;

        // Reattached while idle: no turn, no slot.
        let idle = Life::default();
        assert!(idle.reattached(false).unwrap().is_none());
        assert!(idle.take_answer_slot().is_none());

        // In the previous server's turn: the slot is there (a cancel keeps it: the same turn),
        // taken once, and what is given to it reaches the receiver.
        let life = Life::default();
        let mut answer = life.reattached(true).unwrap().expect("where the turn's answer arrives");
        life.cancel_turn().unwrap();
        let slot = life.take_answer_slot().expect("the slot while its turn is open");
        assert!(life.take_answer_slot().is_none(), "taken once");
        assert!(slot.send((Ok(serde_json::json!({"stopReason": "cancelled"})), None)).is_ok());
        assert!(answer.try_recv().is_ok_and(|(result, _)| result.is_ok()));

        // A turn closed, or an execution gone, before the answer came: the slot went with the
        // turn, and the receiver knows no answer will come.
        for end in [|l: &Life| drop(l.close_turn().unwrap()), |l: &Life| drop(l.gone("exited").unwrap())] {
            let life = Life::default();
            let mut answer = life.reattached(true).unwrap().unwrap();
            end(&life);
            assert!(life.take_answer_slot().is_none(), "no slot once its turn is over");
            assert!(matches!(answer.try_recv(), Err(TryRecvError::Closed)));
        }

        // A later turn of the same execution has no slot: only the reattached turn had one.
        let life = Life::default();
        let _answer = life.reattached(true).unwrap().unwrap();
        life.close_turn().unwrap();
        life.open_turn("turn-b").unwrap();
        assert!(life.take_answer_slot().is_none());
    }

    #[test]
    fn a_launchs_session_and_the_reason_it_was_given_up_outlive_its_stages() {
        let life = Life::default();
        assert_eq!((life.acp_session(), life.abandoned()), (None, None));
        life.acp_session_made("s-1").unwrap();
        life.abandon("too slow").unwrap();
        life.becoming_ready().unwrap();
        life.ready().unwrap();
        assert!(life.abandon("later").is_err(), "a launch that got ready was not given up");
        assert_eq!(life.abandoned().as_deref(), Some("too slow"), "the first reason stays");
        life.open_turn("turn-a").unwrap();
        assert_eq!(life.acp_session().as_deref(), Some("s-1"), "the session id lasts through the turns");
        drop(life.gone("stopped").unwrap());
        assert!(life.acp_session_made("s-2").is_err(), "nothing changes once gone");
        assert_eq!(life.acp_session().as_deref(), Some("s-1"), "and what was made is still told");
    }

    #[tokio::test]
    async fn waiters_see_each_phase() {
        let life = Life::default();
        let mut phase = life.subscribe();
        life.becoming_ready().unwrap();
        assert_eq!(*phase.borrow_and_update(), Phase::Starting, "becoming ready is still starting");
        life.ready().unwrap();
        let ready = phase.wait_for(|p| *p == Phase::Ready).await.map(|p| p.clone());
        assert_eq!(ready.ok(), Some(Phase::Ready));
        life.begin_stopping().unwrap();
        assert!(!life.is_running() && life.is_launched());
        assert!(life.open_turn("turn-a").is_err(), "no turn opens while stopping");
    }
}
