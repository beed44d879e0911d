"""Real-browser helpers: Debian's headless Chromium driven by selenium through Debian's
chromedriver, a fresh profile for every browser, full-page screenshots, and the page's
console (JS errors, Content-Security-Policy violations) collected for the test to check.

Use the `browsers` fixture (import it into the test module: `from browser import browsers`):

    def test_something(browsers):
        b = browsers.new()                   # desktop size; browsers.new(size=PHONE) for a phone
        b.get("http://127.0.0.1:1234/")
        b.wait_visible("#app")
        b.screenshot("page-desktop")        # <repo>/target/web-screenshots/page-desktop.png
        b.assert_clean_console()            # no JS error, no CSP violation

Every browser is closed when its test ends; when the test failed, a screenshot of each
browser's last page is saved under target/web-screenshots/failures/ first.
"""

from __future__ import annotations

import base64
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.common.exceptions import WebDriverException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import WebDriverWait

# Debian's packages (scripts/test installs them); overridable for another system.
CHROMIUM_BIN = os.environ.get("CHROMIUM_BIN", "/usr/bin/chromium")
CHROMEDRIVER_BIN = os.environ.get("CHROMEDRIVER_BIN", "/usr/bin/chromedriver")
SCREENSHOT_DIR = Path(__file__).resolve().parents[2] / "target" / "web-screenshots"

DESKTOP = (1280, 900)
PHONE = (390, 844)

# Lines Chrome itself logs for a refused request (a 401 before login, a 403 the test
# provoked): the page handles those answers; they are not errors of the page.
EXPECTED_HTTP_REFUSAL = re.compile(r"Failed to load resource: the server responded with a status of 4\d\d")

# Runs before any script of every document the browser opens (DevTools scripts are not
# subject to the page's CSP): records CSP violations, uncaught errors and unhandled
# promise rejections where the test can read them even if the console log misses one.
_RECORDER = r"""
(function () {
  if (window.__browserTest) { return; }
  var rec = window.__browserTest = { csp: [], errors: [] };
  document.addEventListener('securitypolicyviolation', function (e) {
    rec.csp.push(e.violatedDirective + ' blocked ' + (e.blockedURI || '(inline)') +
      ' at ' + e.sourceFile + ':' + e.lineNumber);
  });
  window.addEventListener('error', function (e) {
    rec.errors.push('error: ' + e.message + ' at ' + e.filename + ':' + e.lineno);
  });
  window.addEventListener('unhandledrejection', function (e) {
    var r = e.reason;
    rec.errors.push('unhandled rejection: ' + (r && r.message ? r.message : String(r)));
  });
})();
"""


@dataclass
class LogEntry:
    level: str
    message: str
    source: str

    def __str__(self) -> str:
        return f"[{self.level}] {self.message}"


class Browser:
    """One headless Chromium with its own fresh profile."""

    def __init__(self, name: str, size: tuple[int, int] = DESKTOP, mobile: bool = False):
        self.name = name
        self._profile = tempfile.mkdtemp(prefix="chromium-profile-")
        options = webdriver.ChromeOptions()
        options.binary_location = CHROMIUM_BIN
        for arg in (
            "--headless=new",
            f"--user-data-dir={self._profile}",
            # Tests may run as root (containers, CI), where Chromium needs this.
            "--no-sandbox",
            "--disable-dev-shm-usage",
            "--disable-gpu",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-extensions",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--password-store=basic",
            "--use-mock-keychain",
            f"--window-size={size[0]},{size[1]}",
            "--lang=en-US",
        ):
            options.add_argument(arg)
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        # Never ask Selenium Manager (it would go to the network): Debian's driver.
        service = Service(executable_path=CHROMEDRIVER_BIN)
        try:
            self.driver: webdriver.Chrome = webdriver.Chrome(options=options, service=service)
        except Exception:
            shutil.rmtree(self._profile, ignore_errors=True)
            raise
        self.log: list[LogEntry] = []
        self._recorded: dict[str, list[str]] = {"csp": [], "errors": []}
        self.driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": _RECORDER})
        self.set_viewport(size, mobile)

    # -- navigation and waiting --------------------------------------------------------

    def get(self, url: str) -> None:
        self._save_recorded()
        self.driver.get(url)

    def wait(self, timeout: float = 5.0) -> WebDriverWait:
        return WebDriverWait(self.driver, timeout, poll_frequency=0.05)

    def until(self, condition: Callable[[], object], timeout: float = 5.0, message: str = "") -> object:
        """Poll `condition()` (a function of nothing) until it returns something truthy."""
        return self.wait(timeout).until(lambda _d: condition(), message)

    def find(self, css: str) -> WebElement:
        return self.driver.find_element(By.CSS_SELECTOR, css)

    def find_all(self, css: str) -> list[WebElement]:
        return self.driver.find_elements(By.CSS_SELECTOR, css)

    def wait_visible(self, css: str, timeout: float = 5.0) -> WebElement:
        return self.wait(timeout).until(EC.visibility_of_element_located((By.CSS_SELECTOR, css)), f"{css} visible")

    def wait_clickable(self, css: str, timeout: float = 5.0) -> WebElement:
        return self.wait(timeout).until(EC.element_to_be_clickable((By.CSS_SELECTOR, css)), f"{css} clickable")

    def wait_gone(self, css: str, timeout: float = 5.0) -> None:
        self.wait(timeout).until(EC.invisibility_of_element_located((By.CSS_SELECTOR, css)), f"{css} gone")

    def js(self, script: str, *args):
        return self.driver.execute_script(script, *args)

    # -- viewport and screenshots ----------------------------------------------------

    def set_viewport(self, size: tuple[int, int], mobile: bool = False) -> None:
        """The page's viewport, exactly (a phone: mobile layout with the meta viewport honoured)."""
        width, height = size
        self.driver.execute_cdp_cmd(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": mobile},
        )
        self.driver.execute_cdp_cmd("Emulation.setTouchEmulationEnabled", {"enabled": mobile})
        self.viewport = (width, height, mobile)

    def horizontal_overflow(self) -> int:
        """How many CSS pixels the page is wider than its viewport (0: no sideways scrolling)."""
        return int(self.js("return Math.max(0, document.documentElement.scrollWidth - window.innerWidth);"))

    def screenshot(self, name: str, full_page: bool = True, directory: Path = SCREENSHOT_DIR) -> Path:
        """Save a PNG of the page (the whole scrollable page unless `full_page` is false)."""
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"{name}.png"
        params: dict = {"format": "png", "captureBeyondViewport": full_page}
        if full_page:
            metrics = self.driver.execute_cdp_cmd("Page.getLayoutMetrics", {})
            content = metrics.get("cssContentSize") or metrics["contentSize"]
            width, height, _ = self.viewport
            params["clip"] = {
                "x": 0,
                "y": 0,
                "width": max(width, content["width"]),
                "height": max(height, content["height"]),
                "scale": 1,
            }
        data = self.driver.execute_cdp_cmd("Page.captureScreenshot", params)["data"]
        path.write_bytes(base64.b64decode(data))
        return path

    # -- clipboard ----------------------------------------------------------------------

    def grant_clipboard(self, origin: str) -> None:
        """Let pages of `origin` write and read the clipboard without asking."""
        self.driver.execute_cdp_cmd(
            "Browser.grantPermissions",
            {"origin": origin, "permissions": ["clipboardReadWrite", "clipboardSanitizedWrite"]},
        )

    def read_clipboard(self) -> str:
        """The clipboard's text, read by the page (grant_clipboard() first)."""
        self.driver.set_script_timeout(5)
        result = self.driver.execute_async_script(
            """
            const done = arguments[arguments.length - 1];
            navigator.clipboard.readText().then(
              (text) => done({ok: true, text: text}),
              (err) => done({ok: false, error: String(err)}));
            """
        )
        assert result["ok"], f"navigator.clipboard.readText() failed: {result['error']}"
        return result["text"]

    def write_clipboard(self, text: str) -> None:
        self.driver.set_script_timeout(5)
        result = self.driver.execute_async_script(
            """
            const done = arguments[arguments.length - 1];
            navigator.clipboard.writeText(arguments[0]).then(
              () => done({ok: true}), (err) => done({ok: false, error: String(err)}));
            """,
            text,
        )
        assert result["ok"], f"navigator.clipboard.writeText() failed: {result['error']}"

    # -- the page's console ---------------------------------------------------------------

    def _save_recorded(self) -> None:
        """Keep what the in-page recorder saw before the document goes away."""
        try:
            rec = self.driver.execute_script("return window.__browserTest || null;")
        except WebDriverException:
            return
        if rec:
            for key in ("csp", "errors"):
                for item in rec.get(key) or []:
                    if item not in self._recorded[key]:
                        self._recorded[key].append(item)

    def console_log(self) -> list[LogEntry]:
        """Everything the browser logged so far (accumulated: chromedriver hands each entry out once)."""
        for e in self.driver.get_log("browser"):
            self.log.append(LogEntry(e.get("level", ""), e.get("message", ""), e.get("source", "")))
        return list(self.log)

    def console_problems(self, ignore: Iterable[str | re.Pattern] = ()) -> list[str]:
        """JS errors and CSP violations so far, except Chrome's lines for refused requests
        and anything matching `ignore`."""
        patterns = [EXPECTED_HTTP_REFUSAL] + [re.compile(p) if isinstance(p, str) else p for p in ignore]
        self._save_recorded()
        problems = []
        for entry in self.console_log():
            serious = entry.level == "SEVERE" or "Content Security Policy" in entry.message
            if serious and not any(p.search(entry.message) for p in patterns):
                problems.append(str(entry))
        for item in self._recorded["csp"]:
            problems.append(f"[CSP violation] {item}")
        for item in self._recorded["errors"]:
            if not any(p.search(item) for p in patterns):
                problems.append(f"[page] {item}")
        return problems

    def assert_clean_console(self, ignore: Iterable[str | re.Pattern] = ()) -> None:
        problems = self.console_problems(ignore)
        assert not problems, f"{self.name}: the browser console has errors:\n" + "\n".join(problems)

    def quit(self) -> None:
        try:
            self.driver.quit()
        finally:
            shutil.rmtree(self._profile, ignore_errors=True)


class Browsers:
    """Makes browsers for one test and closes them all at its end."""

    def __init__(self, test_name: str):
        self.test_name = test_name
        self.all: list[Browser] = []

    def new(self, size: tuple[int, int] = DESKTOP, mobile: bool | None = None, name: str | None = None) -> Browser:
        if mobile is None:
            mobile = size[0] < 600
        b = Browser(name or f"browser{len(self.all)}", size=size, mobile=mobile)
        self.all.append(b)
        return b

    def close(self, failed: bool) -> None:
        for b in self.all:
            if failed:
                try:
                    b.screenshot(f"{self.test_name}--{b.name}", directory=SCREENSHOT_DIR / "failures")
                except Exception:  # noqa: BLE001 - the failure itself is what matters
                    pass
            b.quit()
        self.all.clear()


@pytest.fixture
def browsers(request) -> Iterator[Browsers]:
    """A factory of fresh headless Chromium browsers, all closed when the test ends."""
    for path in (CHROMIUM_BIN, CHROMEDRIVER_BIN):
        if not os.access(path, os.X_OK):
            pytest.fail(f"{path} is missing: install Debian's chromium and chromium-driver (scripts/test does)")
    failed_before = request.session.testsfailed
    made = Browsers(re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.name))
    try:
        yield made
    finally:
        made.close(failed=request.session.testsfailed > failed_before)
