//! Headless Chromium driven over WebDriver (Debian's `chromium` and `chromium-driver`,
//! installed when missing) for the tests of the reference web page (`web_ui.rs`,
//! `web_tools.rs`), which include this file as a module; each uses what it needs.

use std::path::Path;
use std::process::Stdio;

use baton_testkit::{Server, WAIT};
use fantoccini::wd::TimeoutConfiguration;
use fantoccini::{Client as Browser, ClientBuilder, Locator};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

pub const CHROMIUM: &str = "/usr/bin/chromium";
pub const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// `127.0.0.1:PORT` of a running server.
pub fn address(server: &Server) -> String {
    server.url.trim_start_matches("ws://").trim_end_matches("/ws").to_string()
}

// --- Headless Chromium ----------------------------------------------------------------------

/// Installs Chromium and its WebDriver when missing; false, after saying why, where that is
/// impossible (the test is then skipped).
pub fn browser_installed() -> bool {
    static INSTALLED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *INSTALLED.get_or_init(|| {
        if Path::new(CHROMIUM).exists() && Path::new(CHROMEDRIVER).exists() {
            return true;
        }
        let apt = |args: &[&str]| {
            std::process::Command::new("apt-get").args(args).env("DEBIAN_FRONTEND", "noninteractive").output()
        };
        let install = ["install", "-y", "-q", "chromium", "chromium-driver"];
        // Without package lists (a fresh machine) the install fails: update and try again.
        let result = match apt(&install) {
            Ok(out) if out.status.success() => Ok(out),
            _ => apt(&["update", "-q"]).and_then(|_| apt(&install)),
        };
        match result {
            Ok(out) if out.status.success() && Path::new(CHROMEDRIVER).exists() => true,
            Ok(out) => {
                let stderr = String::from_utf8_lossy(&out.stderr);
                eprintln!("SKIPPED web UI test: apt-get install chromium chromium-driver failed: {}", stderr.trim());
                false
            }
            Err(e) => {
                eprintln!("SKIPPED web UI test: apt-get could not run: {e}");
                false
            }
        }
    })
}

/// chromedriver on a free loopback port and one headless Chromium session.
pub struct Chromium {
    pub browser: Browser,
    _driver: Child,
    _profile: tempfile::TempDir,
}

impl Chromium {
    pub async fn start() -> Chromium {
        Chromium::start_with(&[], json!({})).await
    }

    /// [`Chromium::start`] with more command-line switches for Chromium and more preferences
    /// of its profile (an object: name → value).
    pub async fn start_with(switches: &[String], prefs: serde_json::Value) -> Chromium {
        // chromedriver cannot pick a port itself: take a free one from the system.
        let port = std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("free port").port();
        let mut driver = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn chromedriver");
        // It says "ChromeDriver was started successfully on port N." once it listens.
        let mut lines = BufReader::new(driver.stdout.take().expect("stdout")).lines();
        tokio::time::timeout(WAIT, async {
            while let Some(line) = lines.next_line().await.expect("read chromedriver") {
                if line.contains("started successfully") {
                    return;
                }
            }
            panic!("chromedriver exited before it listened");
        })
        .await
        .expect("chromedriver did not start");
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        let profile = tempfile::tempdir().expect("profile dir");
        let mut args: Vec<String> = [
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-extensions",
            "--window-size=1200,800",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        args.push(format!("--user-data-dir={}", profile.path().display()));
        args.extend(switches.iter().cloned());
        // Downloads (the page's Export) land in the profile, without a question.
        let mut all_prefs = json!({
            "download.default_directory": profile.path().join("downloads"),
            "download.prompt_for_download": false,
        });
        if let (Some(all), Some(more)) = (all_prefs.as_object_mut(), prefs.as_object()) {
            all.extend(more.clone());
        }
        let mut capabilities = serde_json::Map::new();
        capabilities.insert(
            "goog:chromeOptions".into(),
            json!({
                "binary": CHROMIUM,
                "args": args,
                "prefs": all_prefs,
            }),
        );
        let connector = hyper_util::client::legacy::connect::HttpConnector::new();
        let browser = ClientBuilder::new(connector)
            .capabilities(capabilities)
            .connect(&format!("http://127.0.0.1:{port}"))
            .await
            .expect("start a Chromium session");
        browser.update_timeouts(TimeoutConfiguration::new(Some(WAIT), Some(WAIT), None)).await.expect("set timeouts");
        Chromium { browser, _driver: driver, _profile: profile }
    }

    /// The browser's profile directory (its history, cookies, sessions), kept until `self` drops.
    pub fn profile(&self) -> &Path {
        self._profile.path()
    }

    /// Waits (bounded by the script timeout, no polling) until an element matching `selector`
    /// has `text` as its text (`exact`) or in it; returns that element's text.
    pub async fn wait_text(&self, selector: &str, text: &str, exact: bool) -> String {
        const SCRIPT: &str = r#"
            const [selector, needle, exact, done] = arguments;
            const find = () => {
                for (const el of document.querySelectorAll(selector)) {
                    const text = el.textContent;
                    if (exact ? text === needle : text.includes(needle)) return text;
                }
                return null;
            };
            const now = find();
            if (now !== null) return done(now);
            const observer = new MutationObserver(() => {
                const found = find();
                if (found !== null) { observer.disconnect(); done(found); }
            });
            observer.observe(document, { subtree: true, childList: true, characterData: true, attributes: true });
        "#;
        match self.browser.execute_async(SCRIPT, vec![json!(selector), json!(text), json!(exact)]).await {
            Ok(Value::String(found)) => found,
            other => {
                let page = self.browser.execute("return document.body.innerText", vec![]).await;
                panic!("no {selector} with text {text:?}: {other:?}\npage:\n{}", page.unwrap_or_default());
            }
        }
    }
}

impl Drop for Chromium {
    /// A test that fails leaves no browser behind: the browser processes are the ones using this
    /// test's fresh profile directory (chromedriver itself is killed on drop).
    fn drop(&mut self) {
        let marker = format!("--user-data-dir={}", self._profile.path().display());
        for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else { continue };
            let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
            if cmdline.split(|b| *b == 0).any(|arg| arg == marker.as_bytes()) {
                // SAFETY: signalling a browser process this test started.
                unsafe {
                    libc::kill(pid, libc::SIGKILL);
                }
            }
        }
    }
}

impl Chromium {
    /// Clicks what `selector` finds when the click happens: the list is redrawn on every
    /// notification, so an element found a moment before may be gone.
    pub async fn click(&self, selector: &str) {
        // What is clicked may not be drawn yet (the list arrives after the page opens).
        let literal = json!(selector).to_string();
        self.wait_until(&format!("something to click at {selector}"), &format!("document.querySelector({literal})"))
            .await;
        let script = "const el = document.querySelector(arguments[0]); if (!el) return false; el.click(); return true;";
        let clicked = self.browser.execute(script, vec![json!(selector)]).await.expect("click");
        assert_eq!(clicked, json!(true), "nothing to click at {selector}");
    }

    pub async fn value(&self, selector: &str) -> String {
        let script = "return document.querySelector(arguments[0]).value";
        self.browser
            .execute(script, vec![json!(selector)])
            .await
            .expect("value")
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    /// A property of the element `selector` finds, as text.
    pub async fn value_of(&self, selector: &str, property: &str) -> String {
        let script = "const el = document.querySelector(arguments[0]); return el ? String(el[arguments[1]]) : null;";
        let value = self.browser.execute(script, vec![json!(selector), json!(property)]).await.expect("value_of");
        value.as_str().unwrap_or_else(|| panic!("nothing at {selector}")).to_string()
    }

    /// Sets a form field the way typing does (the field's input event included).
    pub async fn fill(&self, selector: &str, text: &str) {
        let field = self.browser.find(Locator::Css(selector)).await.unwrap_or_else(|e| panic!("{selector}: {e}"));
        field.clear().await.expect("clear");
        field.send_keys(text).await.expect("type");
    }

    /// Picks `value` in the select `selector` finds (its change event included).
    pub async fn choose(&self, selector: &str, value: &str) {
        let script =
            "const el = document.querySelector(arguments[0]); if (!el) return false; el.value = arguments[1]; \
                      el.dispatchEvent(new Event('change', { bubbles: true })); return el.value === arguments[1];";
        let chosen = self.browser.execute(script, vec![json!(selector), json!(value)]).await.expect("choose");
        assert_eq!(chosen, json!(true), "cannot choose {value} at {selector}");
    }

    /// Waits (bounded by the script timeout) until `condition` (a JS expression) is true.
    pub async fn wait_until(&self, what: &str, condition: &str) {
        let script = format!(
            r#"const done = arguments[0];
            const check = () => {{ try {{ return Boolean({condition}); }} catch (e) {{ return false; }} }};
            if (check()) return done(true);
            const observer = new MutationObserver(() => {{ if (check()) {{ observer.disconnect(); done(true); }} }});
            observer.observe(document, {{ subtree: true, childList: true, characterData: true, attributes: true }});"#
        );
        if let Err(e) = self.browser.execute_async(&script, vec![]).await {
            let page = self.browser.execute("return document.body.innerText", vec![]).await;
            panic!("{what}: {e}\npage:\n{}", page.unwrap_or_default());
        }
    }

    /// Runs `script` in every page this browser opens from now on, before the page's own
    /// scripts (DevTools' `Page.addScriptToEvaluateOnNewDocument`, through chromedriver).
    pub async fn before_every_page(&self, script: &str) {
        let command = DevTools { method: "Page.addScriptToEvaluateOnNewDocument", params: json!({ "source": script }) };
        self.browser.issue_cmd(command).await.expect("add a script to every page");
    }

    /// Saves a screenshot next to the test binaries' scratch files; returns where.
    pub async fn screenshot(&self, name: &str) -> std::path::PathBuf {
        let png = self.browser.screenshot().await.expect("screenshot");
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("web-ui-screenshots");
        std::fs::create_dir_all(&dir).expect("screenshot dir");
        let path = dir.join(format!("{name}.png"));
        std::fs::write(&path, png).expect("write screenshot");
        eprintln!("screenshot: {}", path.display());
        path
    }

    /// Answers the page's question dialog with OK (after it shows `text`).
    pub async fn answer_ok(&self, text: &str) {
        self.wait_text("#ask[open] #ask-text", text, false).await;
        self.click("#ask-ok").await;
        self.wait_until("the dialog closes", "!document.querySelector('#ask').open").await;
    }
}

impl Chromium {
    /// Where the page's downloads land.
    pub fn downloads(&self) -> std::path::PathBuf {
        self._profile.path().join("downloads")
    }
}

/// The file Chromium downloads to `path`, once it is complete. Chromium writes a `.crdownload`
/// beside it and renames it when done, and tells the page nothing: the file system is looked
/// at again until it is there, bounded by `WAIT`.
pub async fn wait_file(path: &Path) -> String {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        if let Ok(text) = std::fs::read_to_string(path) {
            return text;
        }
        assert!(tokio::time::Instant::now() < deadline, "{} was not downloaded", path.display());
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// A Chrome DevTools command, sent through chromedriver's `goog/cdp/execute` endpoint (WebDriver
/// itself has no way to run a script before a page's own).
#[derive(Debug)]
struct DevTools {
    method: &'static str,
    params: Value,
}

impl fantoccini::wd::WebDriverCompatibleCommand for DevTools {
    fn endpoint(&self, base_url: &url::Url, session_id: Option<&str>) -> Result<url::Url, url::ParseError> {
        base_url.join(&format!("session/{}/goog/cdp/execute", session_id.unwrap_or_default()))
    }

    fn method_and_body(&self, _request_url: &url::Url) -> (http::Method, Option<String>) {
        (http::Method::POST, Some(json!({ "cmd": self.method, "params": self.params }).to_string()))
    }
}
