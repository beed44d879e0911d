"""The Web console's settings as an owner uses them, in headless Chromium against the real
managed service (`nl2sh service start`, the console on a fixed port as it is by default):
one form and one Save, the running service against the saved file, Restart now keeping
the owner logged in, and the token (generated, rotated once, revealed as it runs).
Screenshots at a phone and a desktop size, light and dark, land in
<repo>/target/web-screenshots/.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium.webdriver.support import expected_conditions as EC

from browser import DESKTOP, PHONE, Browser, Browsers, browsers  # noqa: F401 - `browsers` is a fixture
from web_service import clean_env, require_nl2sh


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Managed:
    """A configuration whose managed service runs while the test does."""

    def __init__(self, directory: Path):
        self.bin = require_nl2sh()
        self.config = directory / "my config.toml"
        self.web_port = free_port()
        self.config.write_text(
            "protocol_start_with_service = true\n"
            "protocol_service_port = 0\n"
            f"web_port = {self.web_port}\n"
            "approval_timeout_secs = 60\n"
        )
        self.config.chmod(0o600)
        self.origin = f"http://127.0.0.1:{self.web_port}"

    def cli(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [self.bin, "--config", str(self.config), *args],
            capture_output=True, text=True, timeout=120, env=clean_env(), stdin=subprocess.DEVNULL,
        )

    def status(self) -> dict:
        return json.loads(self.cli("service", "status", "--json").stdout)

    def login_link(self) -> str:
        out = self.cli("web", "login").stdout
        return next(line.strip() for line in out.splitlines() if "#login=" in line)

    def config_text(self) -> str:
        return self.config.read_text()


@pytest.fixture
def managed(tmp_path: Path) -> Iterator[Managed]:
    m = Managed(tmp_path)
    r = m.cli("service", "start")
    assert r.returncode == 0, r.stdout + r.stderr
    try:
        yield m
    finally:
        r = m.cli("service", "stop")
        assert r.returncode == 0, r.stdout + r.stderr


def log_in(b: Browser, m: Managed) -> None:
    b.get(m.login_link())
    b.wait_visible("#app", timeout=10)
    b.wait_visible("#settings-form", timeout=10)
    b.wait_visible("#connection-details", timeout=10)


def accept_confirm(b: Browser, expected: str) -> str:
    alert = b.wait(5).until(EC.alert_is_present(), "a confirm() dialog")
    text = alert.text
    assert expected in text, text
    alert.accept()
    return text


def click(b: Browser, css: str) -> None:
    """Click `css` once it is scrolled to the middle (a phone's menu bar stays on top)."""
    element = b.wait_visible(css, timeout=10)
    b.js("arguments[0].scrollIntoView({block: 'center'});", element)
    element.click()


def dark(b: Browser) -> None:
    b.driver.execute_cdp_cmd(
        "Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": "dark"}]}
    )
    assert b.js("return matchMedia('(prefers-color-scheme: dark)').matches;")


def test_one_save_then_restart_now_applies_it_and_keeps_the_owner_logged_in(managed: Managed, browsers: Browsers):
    m = managed
    first = m.status()["connections"][0]
    running_port = int(first["listen"].rsplit(":", 1)[1])
    b = browsers.new(size=DESKTOP, name="settings-desktop")
    log_in(b, m)
    # One form, one Save (no Save button per setting).
    assert len(b.find_all("#settings-form button[type=submit]")) == 1
    assert b.find_all("#settings-form .setting")[0].get_attribute("data-key") == "protocol_start_with_service"
    # The token the file does not set is a generated one, said so.
    assert b.find("#state-protocol_token").text == "generated, rotates on restart"
    assert "generated, rotates on restart" in b.find("#token-state").text

    # Nothing changed: nothing sent.
    b.find("#save-settings").click()
    assert "Nothing to save" in b.wait_visible("#settings-msg").text

    # A port out of range is said next to its field, and nothing is saved.
    before = m.config_text()
    port = b.find("#input-protocol_service_port")
    port.clear()
    port.send_keys("70000")
    b.find("#save-settings").click()
    assert "65535" in b.wait_visible("#err-protocol_service_port").text
    assert "Nothing was saved" in b.find("#settings-msg").text
    assert m.config_text() == before

    # Two settings, one Save: both in the file, one answer with the restart command.
    saved_port = free_port()
    port.clear()
    port.send_keys(str(saved_port))
    b.find("#input-approval_notifications").click()
    b.find("#save-settings").click()
    msg = b.wait_visible("#settings-msg .restart-needed", timeout=10)
    text = b.find("#settings-msg").text
    assert f"protocol_service_port = {saved_port}" in text and "approval_notifications = false" in text, text
    quoted = f"nl2sh --config '{m.config}' service restart"
    assert quoted in msg.text, msg.text
    assert re.search(rf"(?m)^protocol_service_port = {saved_port}$", m.config_text()), m.config_text()
    assert "approval_notifications = false" in m.config_text()
    # Running differs from saved: said at the top and under the field.
    differs = b.wait_visible("#running-differs", timeout=10)
    assert f"saved {saved_port}, running {running_port}" in differs.text, differs.text
    assert quoted in differs.text
    note = b.wait_visible("#running-protocol_service_port")
    assert f"Saved {saved_port}, running {running_port}: restart to apply." == note.text
    assert m.status()["differs_from_saved"] == ["protocol_service_port"]
    # The command copies as it pastes into a shell (the path with its space quoted).
    b.grant_clipboard(m.origin)
    b.find("#running-differs .copy").click()
    assert b.read_clipboard() == quoted
    b.js("document.getElementById('settings-msg').scrollIntoView({block: 'center'});")
    b.screenshot("settings-saved-desktop")
    phone = browsers.new(size=PHONE, name="settings-phone")
    log_in(phone, m)
    phone.wait_visible("#running-differs", timeout=10)
    phone.screenshot("settings-differs-phone")
    assert phone.horizontal_overflow() == 0
    dark(phone)
    phone.screenshot("settings-differs-phone-dark")
    phone.assert_clean_console()

    # Restart now: asks, restarts, reconnects by itself with the same session.
    cookie = b.driver.get_cookie("nl2sh_session")["value"]
    b.find("#running-differs .restart-now").click()
    accept_confirm(b, "Restart the service now?")
    b.wait_visible("#restart-status", timeout=5)
    b.screenshot("settings-restarting-desktop")
    b.wait_visible("#restarted", timeout=90)
    assert not b.find("#login-screen").is_displayed()
    assert b.driver.get_cookie("nl2sh_session")["value"] == cookie
    after = m.status()
    assert after["connections"][0]["pid"] != first["pid"]
    assert after["connections"][0]["listen"].endswith(f":{saved_port}")
    assert after["differs_from_saved"] == []
    b.wait_visible("#connection-details", timeout=10)
    assert not b.find_all("#running-differs")
    b.screenshot("settings-restarted-desktop")
    # While the service restarts, the browser logs the polls it could not make.
    b.assert_clean_console(ignore=[re.compile(r"net::ERR_CONNECTION_(REFUSED|RESET)|ERR_EMPTY_RESPONSE")])


def test_rotate_asks_then_shows_the_new_token_once_and_reveal_shows_the_running_one(
    managed: Managed, browsers: Browsers
):
    m = managed
    b = browsers.new(size=PHONE, name="token-phone")
    log_in(b, m)
    click(b, "#reveal-token")
    running = b.wait_visible("#token-value").get_attribute("value")
    assert len(running) >= 32
    click(b, "#hide-token")

    # Rotate asks first; dismissed, nothing changes.
    before = m.config_text()
    click(b, "#rotate-token")
    alert = b.wait(5).until(EC.alert_is_present(), "a confirm() dialog")
    assert "Rotate the HTTP token?" in alert.text
    alert.dismiss()
    assert m.config_text() == before
    assert not b.find_all("#rotated-token")

    click(b, "#rotate-token")
    accept_confirm(b, "shown once")
    box = b.wait_visible("#rotated-token", timeout=10)
    new = b.find("#new-token-value").get_attribute("value")
    assert new and new != running and new in m.config_text()
    assert "takes effect when the service restarts" in box.text
    assert "Restart now" in box.text and f"--config '{m.config}'" in box.text
    b.js("arguments[0].scrollIntoView({block: 'center'});", box)
    b.screenshot("token-rotated-phone")
    b.screenshot("token-rotated-phone-view", full_page=False)
    assert b.horizontal_overflow() == 0
    # The token field now says it is set; the running service still takes the old one,
    # and Reveal shows that one (what clients must send now), saying the saved differs.
    b.until(lambda: b.find("#state-protocol_token").text == "set", 5, "the token is set")
    b.wait_visible("#running-protocol_token", timeout=10)
    click(b, "#reveal-token")
    assert b.wait_visible("#token-value").get_attribute("value") == running
    assert "saved token differs" in b.find("#token-note").text
    click(b, "#hide-new-token")
    assert not b.find_all("#rotated-token")
    # After the restart Reveal shows the new one.
    r = m.cli("service", "restart")
    assert r.returncode == 0, r.stdout + r.stderr
    click(b, "#refresh-connection")
    b.until(lambda: "saved token differs" not in b.find("#token-state").text, 10, "the running token is the saved one")
    click(b, "#reveal-token")
    assert b.wait_visible("#token-value").get_attribute("value") == new
    dark(b)
    b.screenshot("token-revealed-phone-dark")
    b.assert_clean_console()
