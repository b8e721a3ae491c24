//! A real browser for the console's tests: Debian's headless Chromium, driven over the W3C
//! WebDriver protocol (JSON over HTTP) through Debian's `chromedriver`. The client is the
//! few commands the tests use, on the reqwest the tests already have. Installed by the test
//! command when missing (`apt-get install chromium chromium-driver`, as root or through
//! sudo), and axe-core (the accessibility checker) from npm into `target/tools`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// The W3C element reference key.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// Installs Chromium and ChromeDriver from Debian when they are missing (once per process).
fn ensure_installed() {
    static CHECKED: Mutex<bool> = Mutex::new(false);
    let mut checked = CHECKED.lock().unwrap();
    if *checked {
        return;
    }
    if !(Path::new("/usr/bin/chromium").exists() && Path::new("/usr/bin/chromedriver").exists()) {
        let root = Command::new("id")
            .arg("-u")
            .output()
            .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
        let sudo = if root { vec![] } else { vec!["sudo", "-n"] };
        let run = |args: &[&str]| {
            let mut all = sudo.clone();
            all.extend_from_slice(args);
            Command::new(all[0])
                .args(&all[1..])
                .env("DEBIAN_FRONTEND", "noninteractive")
                .status()
                .is_ok_and(|s| s.success())
        };
        let _ = run(&["apt-get", "update", "-qq"]);
        assert!(
            run(&[
                "apt-get",
                "install",
                "-y",
                "-qq",
                "chromium",
                "chromium-driver"
            ]),
            "installing Debian's chromium and chromium-driver failed: the console's browser \
             tests need them (as root, or with sudo)"
        );
    }
    *checked = true;
}

/// axe-core's script, installed from npm into `target/tools/axe` on first use.
pub fn axe_script() -> String {
    let dir = crate::tools::npm("axe", "axe-core@4.14.1");
    std::fs::read_to_string(dir.join("node_modules/axe-core/axe.min.js")).unwrap()
}

/// Sends a request to ChromeDriver; its JSON answer.
async fn exchange(request: reqwest::RequestBuilder) -> Value {
    request.send().await.unwrap().json().await.unwrap()
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A headless Chromium under ChromeDriver, with its own empty profile; both end when it is
/// dropped.
pub struct Browser {
    driver: Child,
    base: String,
    client: reqwest::Client,
    _profile: tempfile::TempDir,
    /// Where screenshots go.
    pub shots: PathBuf,
}

impl std::fmt::Debug for Browser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Browser").field("base", &self.base).finish()
    }
}

impl Browser {
    /// Starts a browser; screenshots go to `shots`.
    pub async fn start(shots: &Path) -> Browser {
        ensure_installed();
        let port = free_port();
        // The browser keeps the machine's own clock: a run of the suite with the hub's clock
        // moved (`faketime`, which works through LD_PRELOAD) would otherwise move Chromium's
        // too, which hangs it; what such a run tests is the hub's time, not the browser's.
        let driver = Command::new("/usr/bin/chromedriver")
            .env_remove("LD_PRELOAD")
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver starts");
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(60))
            .build()
            .unwrap();
        let driver_url = format!("http://127.0.0.1:{port}");
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let ready = client
                .get(format!("{driver_url}/status"))
                .send()
                .await
                .ok()
                .filter(|r| r.status().is_success());
            if ready.is_some() {
                break;
            }
            assert!(Instant::now() < deadline, "chromedriver did not come up");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let profile = tempfile::tempdir().unwrap();
        let capabilities = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": "/usr/bin/chromium",
                // A Dutch browser: the console's default language.
                "prefs": {"intl.accept_languages": "nl-NL,nl"},
                "args": [
                    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                    "--disable-quic", "--no-first-run", "--disable-background-networking",
                    "--disable-component-update", "--disable-sync", "--window-size=1280,1000",
                    "--lang=nl-NL",
                    format!("--user-data-dir={}", profile.path().display()),
                ]
            }
        }}});
        let answer = exchange(
            client
                .post(format!("{driver_url}/session"))
                .json(&capabilities),
        )
        .await;
        let session = answer["value"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no browser session: {answer}"))
            .to_owned();
        std::fs::create_dir_all(shots).unwrap();
        Browser {
            driver,
            base: format!("{driver_url}/session/{session}"),
            client,
            _profile: profile,
            shots: shots.to_owned(),
        }
    }

    /// A command's `value`; a WebDriver error fails the test.
    async fn post(&self, path: &str, body: Value) -> Value {
        let answer = self.try_post(path, body).await;
        if let Some(error) = answer["value"]["error"].as_str() {
            panic!("WebDriver {path}: {error}: {}", answer["value"]["message"]);
        }
        answer["value"].clone()
    }

    /// A command's whole answer, errors included.
    async fn try_post(&self, path: &str, body: Value) -> Value {
        exchange(self.client.post(format!("{}{path}", self.base)).json(&body)).await
    }

    async fn get(&self, path: &str) -> Value {
        exchange(self.client.get(format!("{}{path}", self.base))).await["value"].clone()
    }

    /// Opens a URL and waits for the page to load.
    pub async fn goto(&self, url: &str) {
        self.post("/url", json!({"url": url})).await;
    }

    pub async fn url(&self) -> String {
        self.get("/url")
            .await
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    pub async fn title(&self) -> String {
        self.get("/title")
            .await
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    /// The element `css` selects, waiting up to 10 s for it.
    pub async fn find(&self, css: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(found) = self.try_find(css).await {
                return found;
            }
            assert!(
                Instant::now() < deadline,
                "no element `{css}` on {}",
                self.url().await
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The element `css` selects, if there is one now.
    pub async fn try_find(&self, css: &str) -> Option<String> {
        let answer = self
            .try_post("/element", json!({"using": "css selector", "value": css}))
            .await;
        answer["value"][ELEMENT].as_str().map(str::to_owned)
    }

    pub async fn click(&self, element: &str) {
        self.post(&format!("/element/{element}/click"), json!({}))
            .await;
    }

    /// Clicks the element `css` selects.
    pub async fn click_on(&self, css: &str) {
        let element = self.find(css).await;
        self.click(&element).await;
    }

    /// Types into an element (after clearing it).
    pub async fn fill(&self, css: &str, text: &str) {
        let element = self.find(css).await;
        self.post(&format!("/element/{element}/clear"), json!({}))
            .await;
        self.post(&format!("/element/{element}/value"), json!({"text": text}))
            .await;
    }

    /// The visible text of the page's `body`.
    pub async fn text(&self) -> String {
        self.text_of("body").await
    }

    /// The visible text of the element `css` selects. An element that went stale (the page
    /// was replaced between finding and reading it, or while reading it) is found again on
    /// the new page; any other WebDriver error fails the test, never reads as empty text.
    pub async fn text_of(&self, css: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let element = self.find(css).await;
            let answer = self.get(&format!("/element/{element}/text")).await;
            if let Some(text) = answer.as_str() {
                return text.to_owned();
            }
            let error = answer["error"].as_str().unwrap_or_default();
            // ChromeDriver also reports a node of a page replaced while it read it as an
            // "unknown error" saying so.
            let replaced = error == "unknown error"
                && answer["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("does not belong to the document"));
            assert!(
                (matches!(error, "stale element reference" | "no such element") || replaced)
                    && Instant::now() < deadline,
                "WebDriver text of `{css}`: {answer}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Waits up to 10 s for the element `css` selects to show a text other than `old` (after
    /// a form's answer replaced the page that showed `old`); that text.
    pub async fn text_changed_from(&self, css: &str, old: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let text = self.text_of(css).await;
            if text != old {
                return text;
            }
            assert!(
                Instant::now() < deadline,
                "`{css}` still says `{old}` on {}",
                self.url().await
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Waits up to `within` for the page's text to contain `what` (reloading it each
    /// second when `reload`).
    pub async fn wait_for_text(&self, what: &str, within: Duration, reload: bool) -> String {
        let deadline = Instant::now() + within;
        loop {
            let text = self.text().await;
            if text.contains(what) {
                return text;
            }
            assert!(
                Instant::now() < deadline,
                "`{what}` did not appear on {}; the page says:\n{text}",
                self.url().await
            );
            tokio::time::sleep(Duration::from_millis(if reload { 1000 } else { 200 })).await;
            if reload {
                self.post("/refresh", json!({})).await;
            }
        }
    }

    /// Waits up to `within` for the address to contain `part` (a form's answer page loaded,
    /// not the page the form was on).
    pub async fn wait_for_url(&self, part: &str, within: Duration) -> String {
        let deadline = Instant::now() + within;
        loop {
            let url = self.url().await;
            if url.contains(part) {
                return url;
            }
            assert!(
                Instant::now() < deadline,
                "the address stayed {url}, without `{part}`"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Runs a script in the page; what it returns.
    pub async fn execute(&self, script: &str, args: Value) -> Value {
        self.post("/execute/sync", json!({"script": script, "args": args}))
            .await
    }

    /// Runs a script that calls its last argument when done; what it passed.
    pub async fn execute_async(&self, script: &str, args: Value) -> Value {
        self.post("/execute/async", json!({"script": script, "args": args}))
            .await
    }

    /// Presses keys as a keyboard would (`\u{E004}` is Tab, `\u{E007}` Enter), on whatever
    /// has the focus.
    /// Waits (up to 5 s) until the page is loaded and its document has the keyboard focus:
    /// a key pressed in a freshly started window before that can go nowhere.
    pub async fn wait_for_keyboard(&self) {
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            let ready = self
                .execute(
                    "window.focus(); return document.readyState === 'complete' && document.hasFocus();",
                    json!([]),
                )
                .await;
            if ready == Value::Bool(true) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub async fn press(&self, keys: &str) {
        let mut actions = Vec::new();
        for key in keys.chars() {
            actions.push(json!({"type": "keyDown", "value": key.to_string()}));
            actions.push(json!({"type": "keyUp", "value": key.to_string()}));
        }
        self.post(
            "/actions",
            json!({"actions": [{"type": "key", "id": "keyboard", "actions": actions}]}),
        )
        .await;
    }

    /// Saves a screenshot of the page as `<name>.png` in [`Browser::shots`].
    pub async fn screenshot(&self, name: &str) -> PathBuf {
        use base64::Engine;
        // The whole page, not only the viewport (DevTools protocol: WebDriver has no
        // full-page screenshot).
        let size = self
            .execute(
                "const e = document.documentElement; return [e.scrollWidth, e.scrollHeight];",
                json!([]),
            )
            .await;
        let (width, height) = (
            size[0].as_u64().unwrap_or(1280),
            size[1].as_u64().unwrap_or(1000),
        );
        let shot = self
            .post(
                "/goog/cdp/execute",
                json!({"cmd": "Page.captureScreenshot", "params": {"format": "png",
                       "captureBeyondViewport": true,
                       "clip": {"x": 0, "y": 0, "width": width, "height": height.min(8000), "scale": 1}}}),
            )
            .await;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(shot["data"].as_str().unwrap_or_default())
            .unwrap();
        let path = self.shots.join(format!("{name}.png"));
        std::fs::write(&path, bytes).unwrap();
        path
    }

    /// Lays pages out as a viewport `width` CSS pixels wide (a phone at 320), through
    /// Chromium's DevTools protocol: a window cannot be made that narrow.
    pub async fn set_width(&self, width: u32) {
        self.post(
            "/goog/cdp/execute",
            json!({"cmd": "Emulation.setDeviceMetricsOverride",
                   "params": {"width": width, "height": 800, "deviceScaleFactor": 1, "mobile": false}}),
        )
        .await;
    }

    /// How far the page scrolls sideways (CSS pixels; 0 when it reflows), and the
    /// outermost elements that reach past the viewport's right edge, to say what to fix.
    pub async fn sideways_overflow(&self) -> (i64, Vec<String>) {
        let answer = self
            .execute(
                "const root = document.documentElement; const width = root.clientWidth;\
                 const wide = [];\
                 for (const e of document.body.querySelectorAll('*')) {\
                   const r = e.getBoundingClientRect();\
                   if (r.right > width + 1 && !(e.parentElement && e.parentElement.getBoundingClientRect().right > width + 1)) {\
                     wide.push(e.tagName.toLowerCase() + (e.id ? '#' + e.id : '') + (e.className ? '.' + String(e.className).split(' ').join('.') : '') + ' ' + Math.round(r.right - width) + 'px: ' + (e.innerText || '').slice(0, 40));\
                   }\
                 }\
                 return {over: root.scrollWidth - width, wide: wide.slice(0, 8)};",
                json!([]),
            )
            .await;
        let wide = answer["wide"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect();
        (answer["over"].as_i64().unwrap_or(i64::MAX), wide)
    }

    /// Every axe-core violation (WCAG 2.0, 2.1 A and AA rules) on the page, of any impact,
    /// as (impact, `rule: what (where)`).
    pub async fn accessibility_violations(&self) -> Vec<(String, String)> {
        let loaded = self
            .execute("return typeof window.axe !== 'undefined';", json!([]))
            .await;
        if loaded != json!(true) {
            // Injected through a script element's text would break the page's CSP; as a
            // WebDriver script it runs beside the page's own.
            self.execute(&format!("{};return true;", axe_script()), json!([]))
                .await;
        }
        let result = self
            .execute_async(
                "const done = arguments[arguments.length - 1];\
                 axe.run(document, {runOnly: {type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa']}})\
                   .then(r => done(r.violations.map(v => ({id: v.id, impact: v.impact, help: v.help,\
                       nodes: v.nodes.map(n => n.target.join(' ')).slice(0, 5)}))))\
                   .catch(e => done([{id: 'axe-error', impact: 'critical', help: String(e), nodes: []}]));",
                json!([]),
            )
            .await;
        result
            .as_array()
            .into_iter()
            .flatten()
            .map(|v| {
                (
                    v["impact"].as_str().unwrap_or("unknown").to_owned(),
                    format!("{}: {} ({})", v["id"], v["help"], v["nodes"]),
                )
            })
            .collect()
    }

    /// What has the keyboard focus: its tag, id, text and whether it shows a focus
    /// indicator (an outline or a box shadow).
    pub async fn focused(&self) -> Value {
        self.execute(
            "const e = document.activeElement; const s = getComputedStyle(e);\
             return {tag: e.tagName.toLowerCase(), id: e.id, text: (e.innerText || e.value || '').trim().slice(0, 80),\
                     href: e.getAttribute('href'),\
                     indicator: (s.outlineStyle !== 'none' && parseFloat(s.outlineWidth) > 0) || s.boxShadow !== 'none'};",
            json!([]),
        )
        .await
    }
}

impl Drop for Browser {
    /// Ends the session (ChromeDriver closes Chromium), then ChromeDriver. Plain blocking
    /// HTTP: a drop cannot wait for the async client.
    fn drop(&mut self) {
        use std::io::{Read, Write};
        if let Some(rest) = self.base.strip_prefix("http://")
            && let Some((address, path)) = rest.split_once('/')
            && let Ok(mut stream) = std::net::TcpStream::connect(address)
        {
            let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
            let _ = write!(
                stream,
                "DELETE /{path} HTTP/1.1\r\nHost: {address}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            );
            let _ = stream.read_to_end(&mut Vec::new());
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}
