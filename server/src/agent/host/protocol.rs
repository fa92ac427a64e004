//! The agent host's wire protocol, typed: every frame either side sends is one of the enums
//! below, serialised by serde in the main protocol's envelope shape
//! (`{"id","type","action","payload"}`, one JSON object per line), so a host started by an
//! older `batond` and a newer server (or the reverse) still understand each other.
//!
//! - [`ToHost`]: what the server sends: a [`Request`] (with an id, answered by a [`Reply`] or an
//!   error) or a [`Notice`] (no answer).
//! - [`FromHost`]: what the host sends: a [`Reply`], an error, or an [`Event`] of an attached
//!   agent's stream.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::PathBuf;

use baton_protocol::ErrorPayload;
use serde::{Deserialize, Serialize};

use super::HostAgent;

/// Server → host requests; each is answered by the [`Reply`] of the same action.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "action", content = "payload")]
pub enum Request {
    /// First on every connection: proves the server knows the host's token.
    #[serde(rename = "hello")]
    Hello { token: String },
    /// Starts an agent.
    #[serde(rename = "agent.spawn")]
    Spawn(SpawnAgent),
    /// Makes this connection the agent's attachment: its output after the last acknowledged
    /// line, then the live stream, then its exit, come as [`Event`]s.
    #[serde(rename = "agent.attach")]
    Attach { agent_id: String },
    /// Kills the agent's process group; answered once it is gone.
    #[serde(rename = "agent.kill")]
    Kill { agent_id: String },
    /// Forgets an agent (killing it if it still runs) and its spool.
    #[serde(rename = "agent.release")]
    Release { agent_id: String },
    /// The agents the host has.
    #[serde(rename = "agent.list")]
    List {},
}

impl Request {
    /// The action's name on the wire.
    pub fn action(&self) -> &'static str {
        match self {
            Request::Hello { .. } => "hello",
            Request::Spawn(_) => "agent.spawn",
            Request::Attach { .. } => "agent.attach",
            Request::Kill { .. } => "agent.kill",
            Request::Release { .. } => "agent.release",
            Request::List {} => "agent.list",
        }
    }
}

/// What `agent.spawn` starts: the command line, environment and working directory the server
/// took from its registry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpawnAgent {
    pub agent_id: String,
    pub command: String,
    #[serde(default)]
    pub args: Vec<String>,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    pub cwd: PathBuf,
}

/// Server → host notifications (no answer).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "action", content = "payload")]
pub enum Notice {
    /// A line for the agent's stdin; only from the connection attached to the agent. `n`
    /// numbers the server's lines (from 1 past the `written` its attachment reported): a line
    /// whose number the host wrote already is dropped, so a line sent again after a
    /// reconnection is written once.
    #[serde(rename = "agent.write")]
    Write {
        agent_id: String,
        line: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        n: Option<u64>,
    },
    /// Every output line up to `seq` has taken full effect in the server: the host may drop it.
    #[serde(rename = "agent.ack")]
    Ack { agent_id: String, seq: u64 },
}

/// The answers to [`Request`]s, by action.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "action", content = "payload")]
pub enum Reply {
    #[serde(rename = "hello")]
    Hello { pid: u32 },
    #[serde(rename = "agent.spawn")]
    Spawned {
        pid: u32,
        #[serde(default)]
        start_time: Option<u64>,
    },
    #[serde(rename = "agent.attach")]
    Attached(HostAgent),
    #[serde(rename = "agent.kill")]
    Killed {
        #[serde(default)]
        code: Option<i32>,
        #[serde(default)]
        signal: Option<i32>,
    },
    #[serde(rename = "agent.release")]
    Released {},
    #[serde(rename = "agent.list")]
    Agents { agents: Vec<HostAgent> },
}

impl Reply {
    /// The action it answers.
    pub fn action(&self) -> &'static str {
        match self {
            Reply::Hello { .. } => "hello",
            Reply::Spawned { .. } => "agent.spawn",
            Reply::Attached(_) => "agent.attach",
            Reply::Killed { .. } => "agent.kill",
            Reply::Released {} => "agent.release",
            Reply::Agents { .. } => "agent.list",
        }
    }
}

/// Host → server notifications: an attached agent's stream. Borrowed when sent (every line of
/// the agent's output goes out without a copy), owned when received.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "action", content = "payload")]
pub enum Event<'a> {
    /// One line of the agent's stdout, numbered from 1.
    #[serde(rename = "agent.output")]
    Output { agent_id: Cow<'a, str>, seq: u64, line: Cow<'a, str> },
    /// One line of the agent's stderr, plain text, numbered from 1 (apart from the output's
    /// numbers). Not kept until acknowledged like the output: the host keeps the latest lines
    /// (bounded) and sends each attachment those after the last one it sent, so a line may be
    /// lost with a dropped connection, and a gap in the numbers says how many. A server of an
    /// earlier version skips these frames (it skips any frame it cannot read).
    #[serde(rename = "agent.stderr")]
    Stderr { agent_id: Cow<'a, str>, seq: u64, line: Cow<'a, str> },
    /// The agent ended; no output follows.
    #[serde(rename = "agent.exited")]
    Exited {
        agent_id: Cow<'a, str>,
        #[serde(default)]
        code: Option<i32>,
        #[serde(default)]
        signal: Option<i32>,
        #[serde(default)]
        stderr_tail: String,
        /// Why it ended, when the host knows better than the code ("was killed for memory
        /// (…)"); absent otherwise, and from hosts of earlier versions.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cause: Option<String>,
    },
}

/// A frame from the server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum ToHost {
    Request {
        id: String,
        #[serde(flatten)]
        request: Request,
    },
    Notification(Notice),
}

/// A frame from the host.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum FromHost<'a> {
    Response {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<String>,
        #[serde(flatten)]
        reply: Reply,
    },
    /// A refused request (or a frame that could not be read: no id then).
    Error {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<String>,
        #[serde(default)]
        action: String,
        payload: ErrorPayload,
    },
    Notification(Event<'a>),
}

/// A frame as one line (without its newline).
pub fn encode<T: Serialize>(frame: &T) -> String {
    // These types hold only strings, numbers and string maps: serialising cannot fail.
    serde_json::to_string(frame).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_protocol::{Envelope, MessageType};
    use serde_json::json;

    fn agent() -> HostAgent {
        HostAgent {
            agent_id: "exec-1".into(),
            pid: 42,
            start_time: Some(7),
            running: true,
            last_seq: 9,
            acked: 3,
            written: Some(2),
        }
    }

    /// Encodes `frame`, checks the line is an envelope of `kind` and `action` whose payload is
    /// `payload` (what a host or server of an earlier version reads and writes), and decodes it
    /// back to the same value.
    fn round_trip<T>(frame: T, kind: MessageType, action: &str, payload: serde_json::Value)
    where
        T: Serialize + serde::de::DeserializeOwned + PartialEq + std::fmt::Debug,
    {
        let line = encode(&frame);
        let envelope: Envelope = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{line}: {e}"));
        assert_eq!((envelope.kind, envelope.action.as_str()), (kind, action), "{line}");
        assert_eq!(envelope.payload, payload, "{line}");
        let back: T = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{line}: {e}"));
        assert_eq!(back, frame, "{line}");
        // As an earlier version wrote it: through the envelope, with a timestamp.
        let old = Envelope::new(kind, envelope.id.clone(), action, payload).to_json();
        let back: T = serde_json::from_str(&old).unwrap_or_else(|e| panic!("{old}: {e}"));
        assert_eq!(back, frame, "{old}");
    }

    fn request(request: Request, payload: serde_json::Value) {
        let action = request.action();
        round_trip(ToHost::Request { id: "5".into(), request }, MessageType::Request, action, payload);
    }

    fn reply(reply: Reply, payload: serde_json::Value) {
        let action = reply.action();
        round_trip(FromHost::Response { id: Some("5".into()), reply }, MessageType::Response, action, payload);
    }

    #[test]
    fn request_hello() {
        request(Request::Hello { token: "t".into() }, json!({"token": "t"}));
    }

    #[test]
    fn request_spawn() {
        let spawn = SpawnAgent {
            agent_id: "exec-1".into(),
            command: "batond".into(),
            args: vec!["mock-agent".into()],
            env: BTreeMap::from([("A".into(), "b".into())]),
            cwd: "/work".into(),
        };
        let payload = json!({"agent_id": "exec-1", "command": "batond", "args": ["mock-agent"], "env": {"A": "b"},
            "cwd": "/work"});
        request(Request::Spawn(spawn), payload);
        // args and env may be left out.
        let line =
            r#"{"id":"1","type":"request","action":"agent.spawn","payload":{"agent_id":"a","command":"c","cwd":"/"}}"#;
        let Ok(ToHost::Request { request: Request::Spawn(spawn), .. }) = serde_json::from_str(line) else {
            panic!("{line}")
        };
        assert!(spawn.args.is_empty() && spawn.env.is_empty());
    }

    #[test]
    fn request_attach() {
        request(Request::Attach { agent_id: "a".into() }, json!({"agent_id": "a"}));
    }

    #[test]
    fn request_kill() {
        request(Request::Kill { agent_id: "a".into() }, json!({"agent_id": "a"}));
    }

    #[test]
    fn request_release() {
        request(Request::Release { agent_id: "a".into() }, json!({"agent_id": "a"}));
    }

    #[test]
    fn request_list() {
        request(Request::List {}, json!({}));
    }

    #[test]
    fn notice_write() {
        let notice = Notice::Write { agent_id: "a".into(), line: "{\"jsonrpc\":\"2.0\"}".into(), n: Some(4) };
        round_trip(
            ToHost::Notification(notice),
            MessageType::Notification,
            "agent.write",
            json!({"agent_id": "a", "line": "{\"jsonrpc\":\"2.0\"}", "n": 4}),
        );
        // As a server of an earlier version sends it: unnumbered.
        let notice = Notice::Write { agent_id: "a".into(), line: "x".into(), n: None };
        round_trip(
            ToHost::Notification(notice),
            MessageType::Notification,
            "agent.write",
            json!({"agent_id": "a", "line": "x"}),
        );
    }

    #[test]
    fn notice_ack() {
        let notice = Notice::Ack { agent_id: "a".into(), seq: 12 };
        round_trip(
            ToHost::Notification(notice),
            MessageType::Notification,
            "agent.ack",
            json!({"agent_id": "a", "seq": 12}),
        );
    }

    #[test]
    fn reply_hello() {
        reply(Reply::Hello { pid: 3 }, json!({"pid": 3}));
    }

    #[test]
    fn reply_spawned() {
        reply(Reply::Spawned { pid: 3, start_time: Some(9) }, json!({"pid": 3, "start_time": 9}));
    }

    #[test]
    fn reply_attached() {
        reply(
            Reply::Attached(agent()),
            json!({"agent_id": "exec-1", "pid": 42, "start_time": 7, "running": true, "last_seq": 9, "acked": 3,
                "written": 2}),
        );
    }

    #[test]
    fn reply_killed() {
        reply(Reply::Killed { code: None, signal: Some(9) }, json!({"code": null, "signal": 9}));
    }

    #[test]
    fn reply_released() {
        reply(Reply::Released {}, json!({}));
    }

    #[test]
    fn reply_agents() {
        let payload = json!({"agents": [{"agent_id": "exec-1", "pid": 42, "start_time": 7, "running": true,
            "last_seq": 9, "acked": 3, "written": 2}]});
        reply(Reply::Agents { agents: vec![agent()] }, payload);
    }

    #[test]
    fn error_frame() {
        let error = ErrorPayload::not_found("no such agent");
        let payload = serde_json::to_value(&error).unwrap();
        let frame = FromHost::Error { id: Some("5".into()), action: "agent.attach".into(), payload: error };
        round_trip(frame, MessageType::Error, "agent.attach", payload);
    }

    #[test]
    fn event_output() {
        let event = Event::Output { agent_id: "a".into(), seq: 4, line: "{\"x\":\"\\n\"}".into() };
        round_trip(
            FromHost::Notification(event),
            MessageType::Notification,
            "agent.output",
            json!({"agent_id": "a", "seq": 4, "line": "{\"x\":\"\\n\"}"}),
        );
    }

    #[test]
    fn event_stderr() {
        let event = Event::Stderr { agent_id: "a".into(), seq: 2, line: "ERROR boom".into() };
        round_trip(
            FromHost::Notification(event),
            MessageType::Notification,
            "agent.stderr",
            json!({"agent_id": "a", "seq": 2, "line": "ERROR boom"}),
        );
    }

    #[test]
    fn an_event_of_a_later_host_is_skipped_not_misread() {
        // What a server reads from a newer host that sends an event it does not know: a frame
        // that does not parse, which the stream skips (as an earlier server skips agent.stderr).
        let line = r#"{"type":"notification","action":"agent.later","payload":{"agent_id":"a","seq":1}}"#;
        assert!(serde_json::from_str::<FromHost>(line).is_err(), "{line}");
    }

    #[test]
    fn event_exited() {
        let event = Event::Exited {
            agent_id: "a".into(),
            code: Some(1),
            signal: None,
            stderr_tail: "boom".into(),
            cause: None,
        };
        round_trip(
            FromHost::Notification(event),
            MessageType::Notification,
            "agent.exited",
            json!({"agent_id": "a", "code": 1, "signal": null, "stderr_tail": "boom"}),
        );
    }

    #[test]
    fn unknown_or_broken_frames_are_refused_not_guessed() {
        for line in [
            r#"{"id":"1","type":"request","action":"agent.teleport","payload":{}}"#,
            r#"{"id":"1","type":"request","action":"agent.attach","payload":{}}"#,
            r#"{"type":"request","action":"agent.list","payload":{}}"#,
            r#"{"type":"notification","action":"agent.ack","payload":{"agent_id":"a","seq":"x"}}"#,
            "not json",
        ] {
            assert!(serde_json::from_str::<ToHost>(line).is_err(), "{line}");
        }
    }
}
