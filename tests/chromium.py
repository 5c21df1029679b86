"""Debian's headless Chromium for the browser tests (scripts/_browser.sh installs it)::

    driver = headless_chromium()
    try:
        driver.get(url)
    finally:
        driver.quit()
"""

from __future__ import annotations

from selenium import webdriver
from selenium.webdriver.chrome.service import Service


def headless_chromium() -> webdriver.Chrome:
    """A new headless Chromium driven through Debian's chromedriver."""
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"):
        options.add_argument(argument)
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
