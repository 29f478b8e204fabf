"""The dashboard in a real browser (headless Chromium through Selenium): the plots render with points, a
change point is marked, a filter hides what it should, and the page makes no network request.

Skips, naming what is missing, where no browser can be had (`.ci/run` installs Debian's chromium and
chromium-driver when it can; `pip install selenium`).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from test_dashboard import LINE, _history

from perfsuite.tools.history import dashboard

pytestmark = pytest.mark.slow


def _driver():
    webdriver = pytest.importorskip(
        "selenium.webdriver", reason="the browser test needs selenium (pip install selenium)"
    )
    chromium = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    driver_path = shutil.which("chromedriver")
    if chromium is None or driver_path is None:
        pytest.skip(
            "the browser test needs chromium and chromedriver (Debian: apt-get install chromium chromium-driver)"
        )
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"performance": "ALL"})
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.chrome.service import Service

    try:
        return webdriver.Chrome(service=Service(driver_path), options=options)
    except WebDriverException as exc:  # a browser that cannot start here (no display libraries, a sandbox refusal)
        pytest.skip(f"chromium could not start: {str(exc).splitlines()[0][:200]}")


def test_the_dashboard_renders_marks_filters_and_fetches_nothing(tmp_path: Path) -> None:
    page = tmp_path / "history.html"
    dashboard.write_dashboard(page, dashboard.build_series(_history(tmp_path).entries(), line=LINE))
    browser = _driver()
    try:
        browser.get(page.as_uri())
        from selenium.webdriver.common.by import By
        from selenium.webdriver.support.ui import Select

        figures = browser.find_elements(By.CSS_SELECTOR, "figure.series")
        assert len(figures) >= 2
        points = browser.find_elements(By.CSS_SELECTOR, "svg circle.point")
        assert len(points) >= 6 and all(p.is_displayed() for p in points[:6])
        assert points[0].size["width"] > 0  # laid out, not only present in the markup
        marks = browser.find_elements(By.CSS_SELECTOR, "line.changepoint")
        assert len(marks) == 1
        assert figures[0].get_attribute("data-metric") == "syncs_per_step"  # the series that changed comes first
        [label] = browser.find_elements(By.CSS_SELECTOR, "text.cplabel")
        assert label.text.startswith("4444444 commit 4") and label.is_displayed()
        ticks = [t.text for t in figures[0].find_elements(By.CSS_SELECTOR, "text.xtick")]
        assert ticks == [sha[:7] for sha in LINE]  # the x axis names the commits, oldest left
        assert figures[0].find_element(By.CSS_SELECTOR, "text.ylabel").text == "syncs/step"
        shot = tmp_path / "history.png"  # to look at: pytest --basetemp keeps it
        assert browser.save_screenshot(str(shot)) and shot.read_bytes()[:4] == b"\x89PNG"

        Select(browser.find_element(By.ID, "f-metric")).select_by_value("syncs_per_step")
        shown = [f for f in browser.find_elements(By.CSS_SELECTOR, "figure.series") if f.is_displayed()]
        assert [f.get_attribute("data-metric") for f in shown] == ["syncs_per_step"]
        browser.find_element(By.XPATH, "//button[text()='table']").click()
        rows = [r for r in browser.find_elements(By.CSS_SELECTOR, "#table tr[data-metric]") if r.is_displayed()]
        assert rows and {r.get_attribute("data-metric") for r in rows} == {"syncs_per_step"}

        requests = [
            json.loads(entry["message"])["message"]
            for entry in browser.get_log("performance")
            if '"Network.requestWillBeSent"' in entry["message"]
        ]
        urls = {r["params"]["request"]["url"] for r in requests}
        assert urls <= {page.as_uri()}, f"the page requested {sorted(urls - {page.as_uri()})}"
    finally:
        browser.quit()
