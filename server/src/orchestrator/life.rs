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
//! each transition below.

use tokio::sync::watch;

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
    /// Turn number `n` (counting from 1 per execution) is running.
    TurnOpen(u64),
    Gone(String),
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

#[derive(Debug, Clone)]
struct State {
    stage: Stage,
    stopping: bool,
    /// Turns opened so far.
    turns: u64,
}

/// The life cycle; the phase of each stage is published to waiters on every change.
pub struct Life {
    state: std::sync::Mutex<State>,
    phase: watch::Sender<Phase>,
}

impl Default for Life {
    fn default() -> Self {
        Life {
            state: std::sync::Mutex::new(State { stage: Stage::Starting, stopping: false, turns: 0 }),
            phase: watch::channel(Phase::Starting).0,
        }
    }
}

impl Life {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // The state is a few plain fields changed whole: a panic elsewhere cannot leave it torn.
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Runs a transition: `change` returns the new stage (or refuses), and the phase follows.
    fn transition<T>(
        &self,
        name: &'static str,
        change: impl FnOnce(&mut State) -> Option<(Stage, T)>,
    ) -> Result<T, Refused> {
        let mut state = self.state();
        let Some((stage, value)) = change(&mut state) else {
            return Err(Refused { transition: name, stage: state.stage.clone(), stopping: state.stopping });
        };
        let phase = stage.phase();
        state.stage = stage;
        drop(state);
        self.phase.send_if_modified(|current| {
            let changed = *current != phase;
            *current = phase;
            changed
        });
        Ok(value)
    }

    pub fn stage(&self) -> Stage {
        self.state().stage.clone()
    }

    pub fn phase(&self) -> Phase {
        self.phase.borrow().clone()
    }

    pub fn subscribe(&self) -> watch::Receiver<Phase> {
        self.phase.subscribe()
    }

    pub fn is_stopping(&self) -> bool {
        self.state().stopping
    }

    /// The open turn's number.
    pub fn open_turn_number(&self) -> Option<u64> {
        match self.state().stage {
            Stage::TurnOpen(n) => Some(n),
            _ => None,
        }
    }

    /// Ready or in a turn, and not being stopped: the agent's exit would be its own.
    pub fn is_running(&self) -> bool {
        let state = self.state();
        !state.stopping && matches!(state.stage, Stage::Ready | Stage::TurnOpen(_))
    }

    /// Launched (becoming ready, ready or in a turn), stopping or not.
    pub fn is_launched(&self) -> bool {
        matches!(self.state().stage, Stage::BecomingReady | Stage::Ready | Stage::TurnOpen(_))
    }

    /// Starting → BecomingReady.
    pub fn becoming_ready(&self) -> Result<(), Refused> {
        self.transition("becoming_ready", |s| match (&s.stage, s.stopping) {
            (Stage::Starting, false) => Some((Stage::BecomingReady, ())),
            _ => None,
        })
    }

    /// Starting or BecomingReady → Ready.
    pub fn ready(&self) -> Result<(), Refused> {
        self.transition("ready", |s| match (&s.stage, s.stopping) {
            (Stage::Starting | Stage::BecomingReady, false) => Some((Stage::Ready, ())),
            _ => None,
        })
    }

    /// Starting → Ready, or straight into a turn that a previous server opened (a reattached
    /// hosted agent).
    pub fn reattached(&self, turn_open: bool) -> Result<(), Refused> {
        self.transition("reattached", |s| match (&s.stage, s.stopping) {
            (Stage::Starting, false) if turn_open => {
                s.turns += 1;
                Some((Stage::TurnOpen(s.turns), ()))
            }
            (Stage::Starting, false) => Some((Stage::Ready, ())),
            _ => None,
        })
    }

    /// Ready → TurnOpen(n); returns n.
    pub fn open_turn(&self) -> Result<u64, Refused> {
        self.transition("open_turn", |s| match (&s.stage, s.stopping) {
            (Stage::Ready, false) => {
                s.turns += 1;
                Some((Stage::TurnOpen(s.turns), s.turns))
            }
            _ => None,
        })
    }

    /// TurnOpen(n) → Ready (also while stopping: the turn's end is still recorded); returns n.
    /// Refused when no turn is open: whoever closed it first records its end.
    pub fn close_turn(&self) -> Result<u64, Refused> {
        self.transition("close_turn", |s| match s.stage {
            Stage::TurnOpen(n) => Some((Stage::Ready, n)),
            _ => None,
        })
    }

    /// Closes turn `n` only if it is the one open (a cancel enforced later than the turn's end).
    pub fn close_turn_number(&self, n: u64) -> Result<(), Refused> {
        self.transition("close_turn_number", |s| match s.stage {
            Stage::TurnOpen(open) if open == n => Some((Stage::Ready, ())),
            _ => None,
        })
    }

    /// Any stage but Gone: the execution is being stopped. No turn opens from now on.
    pub fn begin_stopping(&self) -> Result<(), Refused> {
        self.transition("begin_stopping", |s| match s.stage {
            Stage::Gone(_) => None,
            ref stage => {
                s.stopping = true;
                Some((stage.clone(), ()))
            }
        })
    }

    /// Any stage but Gone → Gone(reason) (the first reason stays). Returns the turn that was
    /// open, whose end the caller records.
    pub fn gone(&self, reason: impl Into<String>) -> Result<Option<u64>, Refused> {
        let reason = reason.into();
        self.transition("gone", |s| match s.stage {
            Stage::Gone(_) => None,
            Stage::TurnOpen(n) => Some((Stage::Gone(reason), Some(n))),
            _ => Some((Stage::Gone(reason), None)),
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
            ("reattached", |l| l.reattached(false)),
            ("reattached_in_turn", |l| l.reattached(true)),
            ("open_turn", |l| l.open_turn().map(drop)),
            ("close_turn", |l| l.close_turn().map(drop)),
            ("close_turn_number_1", |l| l.close_turn_number(1)),
            ("begin_stopping", |l| l.begin_stopping()),
            ("gone", |l| l.gone("x").map(drop)),
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
                life.open_turn().unwrap();
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
            ("TurnOpen", false, "close_turn"),
            ("TurnOpen", false, "close_turn_number_1"),
            ("TurnOpen", false, "begin_stopping"),
            ("TurnOpen", false, "gone"),
            ("TurnOpen", true, "close_turn"),
            ("TurnOpen", true, "close_turn_number_1"),
            ("TurnOpen", true, "begin_stopping"),
            ("TurnOpen", true, "gone"),
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
        assert_eq!(life.open_turn(), Ok(1));
        assert_eq!(life.close_turn(), Ok(1));
        assert_eq!(life.open_turn(), Ok(2));
        assert!(life.close_turn_number(1).is_err(), "the cancel of turn 1 leaves turn 2 alone");
        assert_eq!(life.stage(), Stage::TurnOpen(2));
        assert_eq!(life.gone("stopped"), Ok(Some(2)), "gone reports the turn it interrupted");
        assert_eq!(life.phase(), Phase::Gone("stopped".into()));
        assert!(life.gone("again").is_err());
        assert_eq!(life.phase(), Phase::Gone("stopped".into()), "the first reason stays");
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
        assert!(life.open_turn().is_err(), "no turn opens while stopping");
    }
}
