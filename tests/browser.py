"""A real headless browser for end-to-end page tests: Debian's Chromium driven by Selenium.

Selenium talks to the system ``chromedriver`` (Debian's ``chromium-driver``, the same build
as ``chromium``); nothing is downloaded at run time. Without a browser on the machine the
browser tests skip, unless ``CODEX_REQUIRE_BROWSER=1`` (CI sets it), which makes a missing
browser a failure instead.

Screenshots go to ``var/screenshots/`` (ignored by git) so a person can look at each page.
"""

import secrets
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from django.conf import settings

from tests.served import install_once, missing

CHROMIUM_CANDIDATES = ("chromium", "chromium-browser", "google-chrome")
CHROMEDRIVER_CANDIDATES = ("chromedriver",)


def _which(names: tuple[str, ...]) -> str | None:
    for name in names:
        found = shutil.which(name) or (f"/usr/bin/{name}" if Path(f"/usr/bin/{name}").exists() else None)
        if found:
            return found
    return None


def screenshot_dir() -> Path:
    path = Path(settings.BASE_DIR) / "var" / "screenshots"
    path.mkdir(parents=True, exist_ok=True)
    return path


def headless_chromium():
    """A Selenium WebDriver for headless Chromium; the caller quits it (use ``addCleanup``)."""
    browser, driver = _which(CHROMIUM_CANDIDATES), _which(CHROMEDRIVER_CANDIDATES)
    if browser is None or driver is None:
        missing(
            "headless browser tests need chromium and chromedriver (apt-get install chromium chromium-driver)",
            required_by="CODEX_REQUIRE_BROWSER",
        )
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for argument in (
        "--headless=new",
        "--no-sandbox",  # CI runs as root, where Chromium's sandbox cannot start
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--window-size=1100,900",
        "--no-first-run",
        "--disable-extensions",
    ):
        options.add_argument(argument)
    web = webdriver.Chrome(service=Service(executable_path=driver), options=options)
    web.set_page_load_timeout(30)
    web.implicitly_wait(0)
    # Every document records what its Content-Security-Policy refused (PageChecks reads it).
    web.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": _RECORD_POLICY_VIOLATIONS})
    return web


_RECORD_POLICY_VIOLATIONS = """
window.__policyViolations = [];
document.addEventListener("securitypolicyviolation", (event) => {
  window.__policyViolations.push(`${event.effectiveDirective} refused ${event.blockedURI || "inline"}` +
    (event.sourceFile ? ` (${event.sourceFile}:${event.lineNumber})` : ""));
});
"""


class BrowserPages:
    """What page tests do in the browser ``self.web`` against ``self.live``: wait, sign in as a
    test person (password ``<name>-password``), and take whole-page screenshots named
    ``<screenshot_prefix>-<name>.png``."""

    web: Any
    live: Any
    screenshot_prefix: str

    def shot(self, name: str) -> None:
        """The whole page: the window grows to the document's height for the picture."""
        height = self.web.execute_script("return document.documentElement.scrollHeight")
        self.web.set_window_size(1100, min(height + 140, 4000))
        self.web.save_screenshot(str(screenshot_dir() / f"{self.screenshot_prefix}-{name}.png"))
        self.web.set_window_size(1100, 900)

    def wait(self):
        from selenium.webdriver.support.ui import WebDriverWait

        return WebDriverWait(self.web, 15)

    def sign_in(self, next_path: str = "/codex/", username: str = "alice") -> None:
        from selenium.webdriver.common.by import By

        self.web.get(self.live.base_url + next_path)
        self.wait_for_page_showing(By.CSS_SELECTOR, "form button[type=submit].primary")  # the sign-in form
        self.web.find_element(By.ID, "id_login").send_keys(username)
        self.web.find_element(By.ID, "id_password").send_keys(f"{username}-password")
        self.to_next_page(self.web.find_element(By.CSS_SELECTOR, "button[type=submit].primary").click)

    def wait_for_page_showing(self, by: str, value: str) -> Any:
        """The element the page shows, once its document has loaded (the element found)."""
        return self.wait().until(_page_showing(None, by, value))

    def to_next_page(self, act: Callable[[], object], by: str = "tag name", value: str = "main") -> Any:
        """Do ``act`` (a click or submit that loads another document), then wait until the
        document it left has been replaced, the new one has loaded, and it shows ``value``
        (``main`` by default; the element found is returned).

        Neither the URL nor ``document.readyState`` alone tells which document is there: a form
        that fails comes back at the same URL, a redirect passes through others, and the old
        page's readyState is "complete" too until the new one replaces it. So the page is
        marked before ``act`` (a property of its window, which a new document does not have)
        and the wait is for an unmarked, loaded page that shows the element."""
        marker = secrets.token_hex(8)
        self.web.execute_script("window.codexTestPage = arguments[0]", marker)
        act()
        return self.wait().until(_page_showing(marker, by, value))


def _page_showing(marker: str | None, by: str, value: str):
    """A wait condition: the document in the window is not the one marked ``marker``, it has
    loaded, and it holds an element found by ``by``/``value`` (that element, or False).

    Any browser error while a page is being replaced means "not yet": asked then, Chromium may
    answer "Node with given id does not belong to the document", which Selenium's own
    ``staleness_of`` does not take for staleness."""
    from selenium.common.exceptions import WebDriverException

    def condition(web) -> Any:
        try:
            if marker is not None and web.execute_script("return window.codexTestPage") == marker:
                return False
            if web.execute_script("return document.readyState") != "complete":
                return False
            found = web.find_elements(by, value)
            return found[0] if found else False
        except WebDriverException:
            return False

    return condition


# axe-core, the accessibility engine, from npm (pinned): installed once into var/ by the first
# page test that needs it, with the npm that .ci/run installs. Without npm the page checks skip,
# unless CODEX_REQUIRE_BROWSER=1 makes that a failure as it does for a missing browser.
AXE_CORE_VERSION = "4.10.3"
# Each page is checked at these widths (name: width, height, mobile): a desktop, a phone and a
# small phone; the screenshots are named by them.
VIEWPORTS = {"1280": (1280, 900, False), "390": (390, 844, True), "320": (320, 640, True)}

_axe_source: str | None = None


def axe_source() -> str:
    global _axe_source
    if _axe_source is not None:
        return _axe_source
    npm = shutil.which("npm")

    def install(directory: Path) -> None:
        if npm is None:
            missing(
                "the accessibility checks need npm to install axe-core (apt-get install npm)",
                required_by="CODEX_REQUIRE_BROWSER",
            )
        import subprocess

        subprocess.run(
            [
                npm,
                "install",
                "--no-save",
                "--no-audit",
                "--no-fund",
                "--prefix",
                str(directory),
                f"axe-core@{AXE_CORE_VERSION}",
            ],
            check=True,
            capture_output=True,
            timeout=300,
        )

    prefix = install_once(Path(settings.BASE_DIR) / "var" / f"axe-core-{AXE_CORE_VERSION}", install)
    script = prefix / "node_modules" / "axe-core" / "axe.min.js"
    _axe_source = script.read_text()
    return _axe_source


_AXE_RUN = """
const done = arguments[arguments.length - 1];
axe.run(document, {resultTypes: ["violations"]}).then(
  (results) => done(results.violations.map((v) => ({
    id: v.id, impact: v.impact, help: v.help,
    nodes: v.nodes.slice(0, 5).map((n) => n.target.join(" ") + " " + n.failureSummary),
  }))),
  (error) => done([{id: "axe-error", impact: "critical", help: String(error), nodes: []}]),
);
"""

# What sticks out past the right edge of the viewport: the widest few elements, to say why.
_OVERFLOW = """
const root = document.documentElement;
const width = root.clientWidth;
const wide = [];
for (const element of document.body.querySelectorAll("*")) {
  const box = element.getBoundingClientRect();
  if (box.right > width + 1) {
    const classes = typeof element.className === "string" && element.className ?
      "." + element.className.split(" ").join(".") : "";
    const id = element.id ? "#" + element.id : "";
    wide.push(`${element.tagName.toLowerCase()}${id}${classes} right=${Math.round(box.right)}`);
  }
}
return {scrollWidth: root.scrollWidth, clientWidth: width, wide: wide.slice(0, 8)};
"""


# The site's frame and forms, as a person sees them (templates/base.html, site.css):
# - every form control and every box (a message, a note, a code block, a table) lies inside
#   the column and inside the box that holds it, unless it is inside something that scrolls
#   or clips sideways (then that must fit);
# - no date (a <time>) breaks over two lines;
# - one header, on at most two lines (three for staff at 320 px: their header has one more
#   link, to the admin), naming who is signed in (or offering to sign in).
_FRAME = """
const problems = [];
const describe = (element) => {
  const id = element.id ? "#" + element.id : "";
  const classes = typeof element.className === "string" && element.className.trim() ?
    "." + element.className.trim().split(/\\s+/).join(".") : "";
  const text = (element.innerText || element.value || "").trim().slice(0, 30);
  return `${element.tagName.toLowerCase()}${id}${classes}${text ? ` "${text}"` : ""}`;
};
const shown = (element) => {
  const box = element.getBoundingClientRect();
  return box.width > 0 && box.height > 0 && !element.closest(".visually-hidden, [hidden]") &&
    getComputedStyle(element).visibility !== "hidden";
};
const inner = (element) => {  // the box its children are laid out in: inside border and padding
  const box = element.getBoundingClientRect();
  const style = getComputedStyle(element);
  return {
    left: box.left + parseFloat(style.borderLeftWidth) + parseFloat(style.paddingLeft),
    right: box.right - parseFloat(style.borderRightWidth) - parseFloat(style.paddingRight),
  };
};
const column = inner(document.body);
const clipped = (element) => {  // inside something that scrolls or clips sideways: it fits instead
  for (let parent = element.parentElement; parent && parent !== document.body; parent = parent.parentElement) {
    if (getComputedStyle(parent).overflowX !== "visible") return true;
  }
  return false;
};
const CONTROLS = "input:not([type=hidden]), select, textarea, button, a.button";
const BOXES = ".ok, .note, .error, pre, table, fieldset, .secret, img, .actions, .search-row, ul.cards > li";
for (const element of document.body.querySelectorAll(`${CONTROLS}, ${BOXES}`)) {
  if (!shown(element) || clipped(element) || element.closest(".skip-link")) continue;
  const box = element.getBoundingClientRect();
  const out = (edges, where) => {
    if (box.left < edges.left - 0.5 || box.right > edges.right + 0.5) {
      problems.push(`${describe(element)} spans x=${Math.round(box.left)}-${Math.round(box.right)}, ` +
        `outside ${where} (x=${Math.round(edges.left)}-${Math.round(edges.right)})`);
      return true;
    }
    return false;
  };
  const parent = element.parentElement;
  const laidOut = parent && parent !== document.body && getComputedStyle(parent).display !== "inline";
  if (!out(column, "the column") && laidOut) {
    out(inner(parent), `its container ${describe(parent)}`);
  }
}
for (const time of document.querySelectorAll("main time")) {
  if (shown(time) && time.getClientRects().length > 1) {
    problems.push(`the date "${time.innerText}" breaks over two lines`);
  }
}
const headers = document.querySelectorAll("header.site");
const header = headers[0];
const tops = [];  // of every line box of the header's words; a new line starts 12 px or more lower
if (header) {
  for (const element of header.querySelectorAll("a, button, .who")) {
    if (shown(element)) tops.push(...[...element.getClientRects()].map((rect) => rect.top));
  }
}
tops.sort((a, b) => a - b);
const headerLines = tops.filter((top, index) => index === 0 || top - tops[index - 1] >= 12).length;
const who = header && header.querySelector(".who");
return {
  problems, headers: headers.length, headerLines,
  staff: Boolean(header && header.querySelector("nav a[href='/admin/']")),
  signedInAs: who ? who.textContent.replace("Signed in as", "").trim() : null,
  offersSignIn: Boolean(header && [...header.querySelectorAll("a")].some((a) => a.textContent.trim() === "Sign in")),
};
"""


class PageChecks:
    """Each page at each viewport size: no horizontal overflow, the site's frame (one header on
    at most two lines, naming ``signed_in_as``, or offering to sign in when that is None;
    every control and box inside its column and its container; no date broken over two
    lines), nothing its Content-Security-Policy refused, no axe-core violation, and a
    whole-page screenshot ``<screenshot_prefix>-<name>-<viewport>.png`` to look at."""

    web: Any
    screenshot_prefix: str
    signed_in_as: str | None = None

    def use_viewport(self, viewport: str) -> None:
        width, height, mobile = VIEWPORTS[viewport]
        self.web.execute_cdp_cmd(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": mobile},
        )

    def overflow(self) -> dict[str, Any]:
        return self.web.execute_script(_OVERFLOW)

    def frame(self) -> dict[str, Any]:
        return self.web.execute_script(_FRAME)

    def axe_violations(self) -> list[dict[str, Any]]:
        self.web.set_script_timeout(60)
        if not self.web.execute_script("return typeof axe !== 'undefined'"):
            self.web.execute_script(axe_source())
        return self.web.execute_async_script(_AXE_RUN)

    def whole_page_shot(self, name: str, viewport: str) -> None:
        width, height, mobile = VIEWPORTS[viewport]
        full = self.web.execute_script("return document.documentElement.scrollHeight")
        self.web.execute_cdp_cmd(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": min(max(full, height), 6000), "deviceScaleFactor": 1, "mobile": mobile},
        )
        self.web.save_screenshot(str(screenshot_dir() / f"{self.screenshot_prefix}-{name}-{viewport}.png"))
        self.use_viewport(viewport)

    def problems_of_page(self, name: str, viewport: str, *, axe: bool = True, site: bool = True) -> list[str]:
        """What is wrong with the page open now; empty if nothing. ``site=False``: a page
        that is not in the site's frame (the admin's)."""
        problems = []
        sizes = self.overflow()
        if sizes["scrollWidth"] > sizes["clientWidth"]:
            problems.append(
                f"{name} at {viewport}: {sizes['scrollWidth']} px wide in a {sizes['clientWidth']} px viewport: "
                + "; ".join(sizes["wide"])
            )
        if site:
            problems += [f"{name} at {viewport}: {problem}" for problem in self.frame_problems(viewport)]
        refused = self.web.execute_script("return window.__policyViolations || []")
        problems += [f"{name} at {viewport}: Content-Security-Policy: {refusal}" for refusal in refused]
        if axe:
            for violation in self.axe_violations():
                problems.append(
                    f"{name} at {viewport}: axe {violation['id']} ({violation['impact']}): {violation['help']}: "
                    + " | ".join(violation["nodes"])
                )
        self.whole_page_shot(name, viewport)
        return problems

    def frame_problems(self, viewport: str) -> list[str]:
        frame = self.frame()
        problems = list(frame["problems"])
        if frame["headers"] != 1:
            problems.append(f"{frame['headers']} site headers, not one")
        elif frame["headerLines"] > (3 if frame["staff"] and viewport == "320" else 2):
            problems.append(f"the header takes {frame['headerLines']} lines")
        if self.signed_in_as is not None and frame["signedInAs"] != self.signed_in_as:
            problems.append(f"the header names {frame['signedInAs']!r}, not {self.signed_in_as!r}")
        if self.signed_in_as is None and (frame["signedInAs"] is not None or not frame["offersSignIn"]):
            problems.append(f"signed out, the header names {frame['signedInAs']!r} and offers no sign-in")
        return problems

    def check_open_page(self, name: str) -> None:
        """The page open now, at each viewport size: fails with every problem found (a page a
        flow reaches that a plain visit cannot, such as a second-factor step)."""
        problems = []
        for viewport in VIEWPORTS:
            self.use_viewport(viewport)
            problems += self.problems_of_page(name, viewport)
        self.web.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
        assert not problems, "\n".join(problems)
