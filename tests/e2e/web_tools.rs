//! The reference web page's Export, search, Fork and usage, in headless Chromium (see
//! `common/chromium.rs`) against a real batond and the mock agent.

use crate::common;
use crate::common::chromium;

use baton_protocol::*;
use chromium::*;
use common::*;
use serde_json::json;

/// The page's Export, search, Fork and usage: usage as the agent reported it, a search
/// whose hit opens its session scrolled to the message, an export downloaded as Markdown, a
/// fork that shows where it came from. Screenshots are saved.
#[tokio::test]
async fn web_page_exports_searches_forks_and_shows_usage() {
    if !browser_installed() {
        return;
    }
    let env = TestEnv::new();
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let harvest = started_session(&env, &client, &mut notes, "mock", "remember pineapple").await;
    prompt(&client, &mut notes, &harvest, "/usage 1200 80 1000 0.25").await;
    let created = client.request(env.task("Other work", "hello", "mock", true)).await.expect("task.create");
    let other = created.session.status.session_id;
    let chromium = Chromium::start().await;
    let browser = &chromium.browser;
    let token = server.token.clone().expect("the server's token");
    browser.goto(&format!("http://{}/?token={token}", address(&server))).await.expect("open the page");

    // Usage: the total in the header; a session without reports shows none.
    chromium.wait_text("#usage-total", "Σ 1.2k in · 80 out · $0.25", true).await;
    chromium.click(&format!("button.session[data-session-id='{other}']")).await;
    chromium.wait_text("#session-title", "Other work", true).await;
    chromium.wait_until("no usage for the other session", "document.querySelector('#session-usage').hidden").await;

    // Search: "pine" (a prefix while typed) finds the other session's message; a click opens it
    // there, marked and in view.
    chromium.fill("#search", "pine").await;
    chromium.wait_text("#search-results button.hit .snippet", "remember pineapple", true).await;
    let marked = browser.execute("return document.querySelector('#search-results mark').textContent", vec![]).await;
    assert_eq!(marked.expect("a match marked"), json!("pineapple"));
    chromium.screenshot("search_results").await;
    const CLICK_USER_HIT: &str = "const hit = [...document.querySelectorAll('#search-results button.hit')]
        .find((b) => b.querySelector('.snippet').textContent === 'remember pineapple');
        hit.click(); return hit.dataset.seq;";
    let seq = browser.execute(CLICK_USER_HIT, vec![]).await.expect("click the hit");
    chromium.wait_text("#transcript li.hit", "remember pineapple", true).await;
    chromium.wait_text("#session-title", "t", true).await;
    let marked = browser.execute("return document.querySelector('#transcript li.hit').dataset.seq", vec![]).await;
    assert_eq!(marked.expect("the entry marked"), seq, "the hit's own entry");
    chromium.wait_text("#session-usage", "1.2k in · 80 out · $0.25", true).await;
    chromium.screenshot("search_hit_opened").await;

    // Export: the Markdown transcript downloaded under the server's file name.
    chromium.click("#export-session").await;
    chromium.answer_ok("Export the transcript").await;
    let status = chromium.wait_text("#session-status", "downloaded ", false).await;
    let name = format!("t-{harvest}.md");
    assert!(status.contains(&name), "{status}");
    let path = chromium.downloads().join(&name);
    let markdown = wait_file(&path).await;
    assert!(markdown.starts_with("# t\n"), "{markdown}");
    for part in
        ["## User", "remember pineapple", "OK, I will remember pineapple.", "Used 1200 input and 80 output tokens."]
    {
        assert!(markdown.contains(part), "{part:?} in:\n{markdown}");
    }

    // Fork: asked first, then the fork is opened and names its source.
    chromium.click("#fork-session").await;
    chromium.answer_ok("Fork “t”?").await;
    let short: String = harvest.trim_start_matches("sess-").chars().take(8).collect();
    chromium.wait_text("#session-origin", &format!("fork of {short} (t)"), true).await;
    chromium.wait_text("button.session[aria-current=true] span", &format!("fork of {short}"), false).await;
    chromium.wait_text("#transcript li.status", "Forked from session", false).await;
    chromium.screenshot("fork_opened").await;
    let forked = client.request(SessionListParams::default()).await.expect("list").sessions;
    let fork = forked.iter().find(|row| row.forked_from.is_some()).expect("the fork is listed");
    assert_eq!(fork.forked_from.as_ref().map(|o| o.session_id.as_str()), Some(harvest.as_str()));
    // The origin opens the source again.
    chromium.click("#session-origin").await;
    chromium.wait_until("the source is selected", &format!("document.querySelector(\"button.session[data-session-id='{harvest}']\").getAttribute('aria-current') === 'true'")).await;

    // Fork with another agent: the conversation is handed over to it.
    chromium.click("#fork-session").await;
    chromium.wait_text("#ask[open] #ask-text", "Fork “t”?", false).await;
    assert_eq!(chromium.value("#ask-fields select[name=agent]").await, "mock", "the session's agent first");
    chromium.choose("#ask-fields select[name=agent]", "mock-fresh").await;
    chromium.answer_ok("hand the conversation over").await;
    chromium.wait_text("#transcript li.status", "Handed over from session", false).await;
    let rows = client.request(SessionListParams::default()).await.expect("list").sessions;
    let handed = rows.iter().find(|row| row.status.agent == "mock-fresh").expect("the handed-over session is listed");
    assert_eq!(handed.forked_from.as_ref().map(|o| o.session_id.as_str()), Some(harvest.as_str()));
}

/// A hit older than the newest 200 entries the page loads: the pages before them are put in
/// front until one holds it, and it is scrolled into view.
#[tokio::test]
async fn web_page_search_reaches_a_hit_older_than_the_page_shows() {
    if !browser_installed() {
        return;
    }
    let env = TestEnv::new();
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let session = started_session(&env, &client, &mut notes, "mock", "remember pineapple").await;
    // Three entries a turn (the prompt, a thought, the answer): well past the page's 200.
    for n in 0..80 {
        prompt(&client, &mut notes, &session, &format!("note {n}")).await;
    }
    let entries = client.request(MessageListParams::all(&session)).await.expect("message.list").messages.len();
    assert!(entries > 240, "{entries} entries");
    let chromium = Chromium::start().await;
    let browser = &chromium.browser;
    let token = server.token.clone().expect("the server's token");
    browser.goto(&format!("http://{}/?token={token}", address(&server))).await.expect("open the page");
    chromium.wait_text(&format!("button.session[data-session-id='{session}'] .badge"), "waiting for you", true).await;

    chromium.fill("#search", "pineapple ").await;
    chromium.wait_text("#search-results button.hit .snippet", "remember pineapple", true).await;
    const CLICK_USER_HIT: &str = "[...document.querySelectorAll('#search-results button.hit')]
        .find((b) => b.querySelector('.snippet').textContent === 'remember pineapple').click();";
    browser.execute(CLICK_USER_HIT, vec![]).await.expect("click the hit");
    chromium.wait_text("#transcript li.hit", "remember pineapple", true).await;
    const IN_VIEW: &str = "const hit = document.querySelector('#transcript li.hit').getBoundingClientRect();
        const pane = document.querySelector('#transcript').getBoundingClientRect();
        return hit.top >= pane.top && hit.bottom <= pane.bottom;";
    assert_eq!(browser.execute(IN_VIEW, vec![]).await.expect("measure"), json!(true), "scrolled into view");
    let shown = browser.execute("return document.querySelectorAll('#transcript li').length", vec![]).await;
    assert!(shown.expect("count").as_u64().unwrap_or(0) as usize >= entries - 1, "the older pages were put in front");
    chromium.wait_text("#transcript li.agent", "Echo: note 79", true).await;
    chromium.screenshot("search_hit_older_than_the_page").await;
}

/// A command the agent ran in a terminal shows in the transcript with its output and exit,
/// from `message.list` on opening the session and live while it runs.
#[tokio::test]
async fn web_page_shows_an_agents_terminal_output() {
    if !browser_installed() {
        return;
    }
    let env = TestEnv::new();
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let session = started_session(&env, &client, &mut notes, "mock", "hi").await;
    prompt(&client, &mut notes, &session, "/terminal echo first-output; exit 0").await;
    let chromium = Chromium::start().await;
    let token = server.token.clone().expect("the server's token");
    chromium.browser.goto(&format!("http://{}/?token={token}", address(&server))).await.expect("open the page");
    let row = format!("button.session[data-session-id='{session}']");
    chromium.wait_until("the session listed", &format!("document.querySelector(\"{row}\")")).await;
    chromium.click(&row).await;
    // Folded (message.list): the command, its output, its exit.
    chromium.wait_text("#transcript li.terminal pre.terminal-output", "first-output", false).await;
    chromium.wait_text("#transcript li.terminal", "$ sh -c echo first-output; exit 0 (exit 0)", false).await;
    // Its pieces replayed after message.list are not shown twice.
    let shown = chromium.value_of("#transcript li.terminal pre.terminal-output", "textContent").await;
    assert_eq!(shown, "first-output\n");
    // Live (terminal_output events).
    client
        .request(MessageAddParams::new(session.clone(), "/terminal echo second-output; exit 4"))
        .await
        .expect("message.add");
    chromium
        .wait_until(
            "the second terminal's output and exit",
            "[...document.querySelectorAll('#transcript li.terminal')].some((li) => \
             li.textContent.includes('second-output') && li.textContent.includes('(exit 4)'))",
        )
        .await;
    chromium.screenshot("terminal_output").await;
}

/// The page's Changes: the files the agent changed in its worktree with their counts, a file's
/// diff unified and side by side, a commit of the checked files only, a merge into the base
/// branch, and the command of a shell where the agent works.
#[tokio::test]
async fn web_page_reviews_commits_and_merges_a_tasks_changes() {
    if !browser_installed() {
        return;
    }
    let env = TestEnv::new();
    let repo = env.workdir.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git").arg("-C").arg(&repo).args(args).output().unwrap();
        assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    git(&["init", "-q", "-b", "main"]);
    git(&["config", "user.name", "Test User"]);
    git(&["config", "user.email", "test@example.com"]);
    std::fs::write(repo.join("notes.txt"), "one\ntwo\n").unwrap();
    git(&["add", "notes.txt"]);
    git(&["commit", "-qm", "init"]);
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let mut params = TaskCreateParams::new("Tidy the notes", "/write notes.txt one\\nTWO\\n", "mock");
    params.repository = Some(repo.to_string_lossy().into_owned());
    params.worktree = true;
    let created = client.request(params).await.expect("task.create");
    let session_id = created.session.status.session_id.clone();
    subscribe(&client, &session_id, Some(0)).await;
    collect_events(&mut notes, &session_id, is_turn_end).await;
    prompt(&client, &mut notes, &session_id, "/write scratch.txt not for the commit").await;

    let chromium = Chromium::start().await;
    let browser = &chromium.browser;
    let token = server.token.clone().expect("the server's token");
    browser.goto(&format!("http://{}/?token={token}", address(&server))).await.expect("open the page");
    chromium.click(&format!("button.session[data-session-id='{session_id}']")).await;
    chromium.wait_text("#session-title", "Tidy the notes", true).await;
    chromium.click("#changes-open").await;
    chromium.wait_text("#changes-summary", "2 files +2 -1 · 0 commits", false).await;
    chromium.wait_text("#changes-diff", "+TWO", false).await;
    let rows = browser
        .execute("return [...document.querySelectorAll('#changes-diff span')].map((s) => s.textContent)", vec![])
        .await
        .expect("the diff rows");
    assert_eq!(rows, json!(["--- a/notes.txt", "+++ b/notes.txt", "@@ -1,2 +1,2 @@", " one", "-two", "+TWO"]));
    let classes = browser
        .execute("return [...document.querySelectorAll('#changes-diff span')].map((s) => s.className)", vec![])
        .await
        .expect("classes");
    assert_eq!(classes, json!(["", "", "hunk", "", "del", "add"]));
    chromium.click("#changes-split").await;
    chromium.wait_until("side by side", "!!document.querySelector('#changes-diff .split')").await;
    let pair = browser
        .execute("return [...document.querySelectorAll('#changes-diff .split span')].map((s) => s.textContent)", vec![])
        .await
        .expect("the pairs");
    assert_eq!(pair, json!(["@@ -1,2 +1,2 @@", "@@ -1,2 +1,2 @@", " one", " one", "-two", "+TWO"]));
    chromium.wait_text("#changes-shell", "cd ", false).await;
    chromium.screenshot("changes_panel").await;

    // The scratch file is unchecked: only the notes are committed.
    chromium.click("#changes-files li[data-path='scratch.txt'] input").await;
    chromium.click("#changes-commit").await;
    chromium.answer_ok("Commit 1 file(s)").await;
    chromium.wait_text("#changes-note", "Committed ", false).await;
    chromium.wait_text("#changes-summary", "1 commit", false).await;
    let worktree = std::path::PathBuf::from(&created.task.workdir);
    let log = std::process::Command::new("git")
        .arg("-C")
        .arg(&worktree)
        .args(["show", "--stat", "--format=%s", "HEAD"])
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&log.stdout).to_string();
    assert!(log.starts_with("Tidy the notes") && log.contains("notes.txt") && !log.contains("scratch.txt"), "{log}");

    // The scratch file left in the worktree: the merge is refused, saying why.
    chromium.click("#changes-merge").await;
    chromium.answer_ok("Merge the task's branch into main?").await;
    chromium.wait_text("#changes-note", "1 uncommitted change (scratch.txt)", false).await;
    std::fs::remove_file(worktree.join("scratch.txt")).unwrap();
    chromium.click("#changes-merge").await;
    chromium.answer_ok("Merge the task's branch into main?").await;
    chromium.wait_text("#changes-note", "Merged into main (fast-forward, 1 commit)", false).await;
    assert_eq!(std::fs::read_to_string(repo.join("notes.txt")).unwrap(), "one\nTWO\n");
    chromium.click("#changes-close").await;

    // A task made on the page with a worktree of its own, from the repository's directory.
    chromium.click("#new-task").await;
    chromium.wait_text("#ask[open] #ask-text", "New task", true).await;
    chromium.fill("#ask-fields input[name=title]", "On its own branch").await;
    chromium.fill("#ask-fields input[name=workdir]", &repo.display().to_string()).await;
    chromium.choose("#ask-fields select[name=worktree]", "worktree").await;
    chromium.click("#ask-ok").await;
    chromium.wait_text("#session-title", "On its own branch", true).await;
    let tasks = client.request(TaskListParams::default()).await.expect("task.list").tasks;
    let made = tasks.iter().find(|t| t.title == "On its own branch").expect("the task");
    assert!(made.worktree_branch.is_some() && made.workdir != repo.to_string_lossy(), "{made:?}");
    assert_eq!(made.repository.as_deref(), Some(repo.to_str().unwrap()));
    server.stop().await;
}
