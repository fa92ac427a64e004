//! Driving an agent in the agent host straight over its line stream, as the server would:
//! JSON-RPC requests written in, numbered lines read out until the answer.

use baton_server::agent::host::client::HostedAgent;
use baton_server::agent::transport::Input;
use serde_json::{json, Value};

use super::WAIT;

/// The agent's next line, with its number.
pub async fn next(agent: &mut HostedAgent) -> (u64, Value) {
    let (seq, line) = tokio::time::timeout(WAIT, agent.stream.lines.recv())
        .await
        .expect("a line in time")
        .expect("the stream is open");
    (seq, serde_json::from_slice(&line).expect("the agent writes JSON"))
}

/// Sends a JSON-RPC request to the agent and returns every line up to its answer.
pub async fn call(agent: &mut HostedAgent, id: u64, method: &str, params: Value) -> Vec<(u64, Value)> {
    let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string();
    agent.stream.input.send(Input::Write(line)).expect("the connection is open");
    let mut lines = Vec::new();
    loop {
        let (seq, message) = next(agent).await;
        let answered = message["id"] == json!(id);
        lines.push((seq, message));
        if answered {
            return lines;
        }
    }
}

/// The params of a `session/prompt` with `text`.
pub fn prompt(session_id: &str, text: &str) -> Value {
    json!({"sessionId": session_id, "prompt": [{"type": "text", "text": text}]})
}
