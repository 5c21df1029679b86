"""The console's Memory page on a real uvicorn, in real headless Chromium: an operator sees
the mode, the namespaces with their counts and searches; a signed-in principal who may not
operate gets the page that does not exist, and hostile memory text is shown inert."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest
from chromium import headless_chromium
from runtime_testkit import RESULT_TIMEOUT, Serving, unique
from selenium.webdriver.common.by import By
from starlette.requests import Request

from helix_dbos.memory import MemoryStore
from helix_dbos.server import create_app


def authenticate(request: Request) -> str | None:
    return request.headers.get("x-user") or request.cookies.get("user")


def only_ops_operate(principal: Any, action: Any, session: Any) -> bool:
    return principal == "ops"


@pytest.fixture(scope="module")
def base(executor: Any) -> Iterator[str]:
    serving = Serving(create_app(executor, authenticate=authenticate, authorize=only_ops_operate))
    yield serving.url
    serving.stop()


def test_an_operator_sees_namespaces_and_searches_in_a_real_browser(executor: Any, base: str) -> None:
    user = unique("u")
    store = MemoryStore(pool=executor.pool)
    store.remember(("user", user), "drinks green tea")
    store.remember(("user", user), "<script>document.title='owned'</script> likes tea too")
    browser = headless_chromium()
    try:
        browser.get(f"{base}/console/missing-page-for-cookie")
        browser.add_cookie({"name": "user", "value": "ops"})
        browser.get(f"{base}/console/memory?" + urlencode({"prefix": f"user/{user}", "q": "tea"}))
        mode = browser.find_element(By.ID, "memory-mode").text
        assert mode in ("vector", "text-only")
        hits = browser.find_element(By.ID, "memory-hits").text
        assert "drinks green tea" in hits and "<script>" in hits  # shown as text, not run
        assert browser.title != "owned"
        namespaces = browser.find_element(By.ID, "memory-namespaces").text
        assert f"user/{user} 2" in namespaces
    finally:
        browser.quit()


def test_a_principal_who_may_not_operate_gets_the_missing_page(executor: Any, base: str) -> None:
    MemoryStore(pool=executor.pool).remember(("user", unique("secret")), "the vault code is 1234")
    with httpx.Client(base_url=base, headers={"X-User": "bob"}, timeout=RESULT_TIMEOUT) as bob:
        page = bob.get("/console/memory", params={"prefix": "", "q": "vault code"})
        nowhere = bob.get("/console/no-such-page-at-all")
    assert page.status_code == 404 and "1234" not in page.text
    assert nowhere.status_code == 404
    with httpx.Client(base_url=base, headers={"X-User": "ops"}, timeout=RESULT_TIMEOUT) as ops:
        bad = ops.get("/console/memory", params={"prefix": "user//x", "q": "tea"})
    assert bad.status_code == 422 and "non-empty string" in bad.text
