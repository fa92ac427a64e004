//! Agent terminals (ACP `terminal/*`) with a real batond and the mock agent: the command runs
//! in the session's working directory with the agent's environment, its output is journaled as
//! it comes and kept through a `kill -9` of batond, its output is bounded, a directory outside
//! the working directory is refused, `terminal/kill` kills it, and a terminal left running dies
//! with the session.

use crate::common;

use baton_protocol::*;
use common::*;

/// The terminal events of a journal: the command of the first, the output, the exit.
fn terminal_events(journal: &[EventRecord]) -> (Option<String>, String, Option<TerminalExit>) {
    let (mut command, mut output, mut exit) = (None, String::new(), None);
    for record in journal {
        if let SessionEvent::TerminalOutput { command: c, output: o, exit: e, .. } = &record.event {
            command = command.or_else(|| c.clone());
            output.push_str(o);
            exit = exit.or_else(|| e.clone());
        }
    }
    (command, output, exit)
}

#[tokio::test]
async fn a_terminal_runs_in_the_workdir_and_its_output_is_journaled_and_kept_through_a_kill_9() {
    let env = TestEnv::new();
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let session = started_session(&env, &client, &mut notes, "mock", "hi").await;

    let answer =
        prompt(&client, &mut notes, &session, "/terminal echo out; echo err >&2; pwd; echo $MOCK_TERMINAL; exit 3")
            .await;
    let workdir = env.workdir.canonicalize().expect("workdir");
    assert!(answer.starts_with("Exit 3, signal none, truncated false, released: "), "{answer}");
    for part in ["out", "err", &workdir.display().to_string(), "yes"] {
        assert!(answer.contains(part), "{part:?} in {answer}");
    }

    let journal = read_journal(&client, &mut notes, &session).await;
    let (command, output, exit) = terminal_events(&journal);
    assert_eq!(command.as_deref(), Some("sh -c echo out; echo err >&2; pwd; echo $MOCK_TERMINAL; exit 3"));
    assert!(output.contains("out\n") && output.contains("err\n") && output.contains("yes\n"), "{output:?}");
    assert_eq!(exit, Some(TerminalExit { exit_code: Some(3), signal: None }));
    // The agent's tool call shows the terminal; the folded view has the terminal's own entry.
    let shown = |messages: &[Message]| {
        messages.iter().find(|m| m.tool_call_id.as_deref().is_some_and(|id| id.starts_with("terminal:"))).cloned()
    };
    let entry = shown(&messages(&client, &session).await).expect("the terminal's entry");
    assert!(entry.text.starts_with("$ sh -c echo out"), "{entry:?}");
    assert_eq!(entry.status.as_deref(), Some("failed"), "exit 3 is a failure");
    let data = entry.data.clone().expect("data");
    assert!(data["terminal"]["output"].as_str().is_some_and(|o| o.contains("out\n")), "{data}");
    assert_eq!(data["terminal"]["exit"]["exit_code"], 3);

    server.kill9().await;
    let server = env.start().await;
    let (client, _notes) = server.client().await;
    let after = shown(&messages(&client, &session).await).expect("the terminal's entry after a restart");
    assert_eq!(after.data, entry.data, "nothing of the terminal is lost");
    server.stop().await;
}

#[tokio::test]
async fn a_terminals_output_is_bounded_its_directory_confined_and_kill_kills_it() {
    let env = TestEnv::new();
    std::fs::create_dir(env.workdir.join("sub")).expect("sub");
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let session = started_session(&env, &client, &mut notes, "mock", "hi").await;

    // outputByteLimit keeps the end.
    let answer = prompt(&client, &mut notes, &session, "/terminal --limit 10 printf 0123456789abcdef").await;
    assert_eq!(answer, "Exit 0, signal none, truncated true, released: 6789abcdef");
    // A directory beneath the working directory is fine; one outside is refused.
    let answer = prompt(&client, &mut notes, &session, "/terminal --cwd sub pwd").await;
    assert!(answer.ends_with("/sub"), "{answer}");
    let answer = prompt(&client, &mut notes, &session, "/terminal --cwd /tmp pwd").await;
    assert!(
        answer.starts_with("Terminal refused:") && answer.contains("outside the session's working directory"),
        "{answer}"
    );
    let answer = prompt(&client, &mut notes, &session, "/terminal --cwd .. pwd").await;
    assert!(answer.starts_with("Terminal refused:"), "{answer}");
    // terminal/kill ends it (and what it started), with the signal said.
    let answer = prompt(&client, &mut notes, &session, "/terminal-kill echo started; sleep 1000 & wait").await;
    assert!(answer.starts_with("Exit none, signal SIGKILL"), "{answer}");
    server.stop().await;
}

#[tokio::test]
async fn a_terminal_left_running_is_killed_when_the_session_stops() {
    let env = TestEnv::new();
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let session = started_session(&env, &client, &mut notes, "mock", "hi").await;
    let pid_file = env.workdir.join("pid");
    let answer = prompt(&client, &mut notes, &session, "/terminal-leave echo $$ > pid; exec sleep 1000").await;
    assert!(answer.starts_with("Left term-"), "{answer}");
    until("the command's pid", || std::fs::read_to_string(&pid_file).is_ok_and(|p| p.ends_with('\n'))).await;
    let pid: u32 = std::fs::read_to_string(&pid_file).expect("pid").trim().parse().expect("a pid");
    let proc = format!("/proc/{pid}");
    assert!(std::path::Path::new(&proc).exists(), "it runs");

    client.request(SessionStopParams { session_id: session.clone() }).await.expect("task.session.stop");
    until("the terminal's command to die", || {
        // A zombie waiting to be reaped counts as gone.
        std::fs::read_to_string(format!("{proc}/stat")).map_or(true, |stat| stat.contains(") Z "))
    })
    .await;
    let journal = read_journal(&client, &mut notes, &session).await;
    let (_, _, exit) = terminal_events(&journal);
    assert_eq!(exit.and_then(|e| e.signal).as_deref(), Some("SIGKILL"), "its end is journaled");
    server.stop().await;
}
