"""Drives the world explorer (/ui/) in headless Chromium through Playwright, for
tests/tests/explorer.rs: denials, the session and its budgets, three calls appearing without a
reload, an effectful call's provenance verified in the browser, an altered object marked as not
matching, the episode filter and the search box, another episode's calls hidden from a session
and shown to one holding Log.Read. Saves a screenshot of each view.

Usage: explorer.py URL CREDENTIAL OTHER_CREDENTIAL OPERATOR_CREDENTIAL STORE SHOTS_DIR CHROMIUM
"""

import json
import os
import sqlite3
import sys
import urllib.request

from playwright.sync_api import expect, sync_playwright

URL, CREDENTIAL, OTHER, OPERATOR, STORE, SHOTS, CHROMIUM = sys.argv[1:8]
TIMEOUT_MS = 15_000


def post(path, token, body, accept="application/json"):
    request = urllib.request.Request(
        URL + path,
        data=json.dumps(body).encode(),
        headers={"Authorization": "Bearer " + token, "Content-Type": "application/json", "Accept": accept},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        text = response.read().decode()
    data = next((line[6:] for line in text.splitlines() if line.startswith("data: ")), text)
    answer = json.loads(data)
    assert "error" not in answer, answer
    return answer


def mcp_call(token, tool, arguments):
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}
    return post("/mcp/", token, body, accept="application/json, text/event-stream")


def a2a_send(token, task, skill, data):
    message = {"role": "user", "parts": [{"type": "data", "data": data}]}
    body = {"jsonrpc": "2.0", "id": 1, "method": "tasks/send",
            "params": {"id": task, "metadata": {"skill_id": skill}, "message": message}}
    return post("/a2a/", token, body)


def get(path, token):
    request = urllib.request.Request(URL + path, headers={"Authorization": "Bearer " + token})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def shot(page, name):
    page.screenshot(path=os.path.join(SHOTS, name + ".png"), full_page=True)


def newest_index(token):
    return get("/v1/calls?limit=1", token)["items"][0]["entryIndex"]


def row(page, index):
    return page.locator(f'tr.call[data-index="{index}"]')


def main():
    os.makedirs(SHOTS, exist_ok=True)
    problems = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.set_default_timeout(TIMEOUT_MS)
        expect.set_options(timeout=TIMEOUT_MS)
        # The denials below are answered 400 and 401 on purpose; anything else is a problem
        # (a policy violation, a missing asset, a script error).
        expected = ("status of 400", "status of 401")
        page.on("console", lambda m: m.type == "error" and not any(e in m.text for e in expected)
                and problems.append(m.text))
        page.on("pageerror", lambda e: problems.append(str(e)))

        response = page.goto(URL + "/ui/")
        assert response.status == 200, response.status
        policy = response.headers["content-security-policy"]
        assert "default-src 'none'" in policy and "script-src 'self'" in policy, policy
        assert response.headers["cache-control"] == "no-store"

        # Denials show the seed's messages and keep nothing: an empty paste is an absent
        # credential; whitespace and one pair of quotes around a paste are trimmed; anything
        # else that is no credential is answered as malformed.
        absent = "a session credential is required: no Authorization Bearer header was present"
        malformed = "malformed Authorization header: expected a Bearer <64-hex-credential>"
        unknown = "unknown session credential: no session matches this token"
        # (Neighbours differ, so each answer is a new one.)
        for credential, message in [
            ("", absent),
            ("not-a-credential", malformed),
            ("   ", absent),
            ("0" * 32 + " " + "0" * 31, malformed),
            ('""', absent),
            ("'" + "0" * 63 + "€'", malformed),
            ("0" * 64, unknown),
            ("Bearer " + "0" * 64, malformed),
            ('  "' + "0" * 64 + '"  ', unknown),
        ]:
            page.fill("#credential", credential)
            page.click("#login button[type=submit]")
            expect(page.locator("#denied")).to_have_text(message)
            assert page.evaluate("sessionStorage.getItem('world.session')") is None
        shot(page, "1-denied")

        # The session: episode, expiry, each grant's budget. A paste in quotes with spaces
        # around is trimmed, and the credential alone is kept.
        page.fill("#credential", f' "{CREDENTIAL}"\t')
        page.click("#login button[type=submit]")
        expect(page.locator("#episode")).to_have_text("ep1")
        read_grant = page.locator('#grants tr[data-effect="Workspace.Read"]')
        expect(read_grant.locator(".spent")).to_have_text("0")
        expect(read_grant.locator(".left")).to_have_text("5")
        assert page.evaluate("sessionStorage.getItem('world.session')") == CREDENTIAL
        assert page.evaluate("localStorage.length") == 0

        # Three calls appear without a reload: pure over A2A, effectful and refused over MCP.
        start = newest_index(CREDENTIAL)
        a2a_send(CREDENTIAL, "explorer-pure", "tools.echo", {"hello": "explorer"})
        expect(row(page, start + 1)).to_have_attribute("data-outcome", "ok")
        expect(row(page, start + 1)).to_contain_text("A2A")
        mcp_call(CREDENTIAL, "fx_dread", {"path": "hello.txt"})
        expect(row(page, start + 2)).to_have_attribute("data-outcome", "ok")
        expect(row(page, start + 2).locator(".chip.ok")).to_have_text("Workspace.Read ok")
        refusal = {"plan": "world/effect-plan/v1", "effects": [], "finish": False, "result": {"refused": "no"}}
        mcp_call(CREDENTIAL, "fx_dscripted_uread", {"plan": refusal})
        expect(row(page, start + 3)).to_have_attribute("data-outcome", "refused")
        expect(row(page, start + 3)).to_contain_text("MCP")
        # The budget moved with the effect.
        expect(read_grant.locator(".spent")).to_have_text("1")
        expect(read_grant.locator(".left")).to_have_text("4")
        shot(page, "2-log")

        # The effectful call's chain, every object verified in the browser.
        row(page, start + 2).click()
        summary = page.locator("#verify-summary")
        expect(summary).to_contain_text("objects verified")
        marks = page.locator("#chain .mark")
        assert marks.count() >= 8, marks.count()  # record, input, output, plan, effect, request, result, source
        assert page.locator("#chain .mark.ok").count() == marks.count()
        for role in ["invocation record", "input", "output", "effect plan", "effect 0 record", "request", "result",
                     "transition source"]:
            expect(page.locator(f'#chain li[data-role="{role}"]').first).to_be_visible()
        expect(page.locator("#chain .facts.effect").first).to_contain_text("5 → 4")
        shot(page, "3-provenance")

        # Alter the input's stored bytes: the page marks that object, and only it, as not matching.
        input_ref = page.locator('#chain li[data-role="input"]').first.get_attribute("data-ref")
        with sqlite3.connect(STORE, timeout=30) as db:
            payload = db.execute("SELECT payload FROM objects WHERE hash = ?", (input_ref,)).fetchone()[0]
            db.execute("UPDATE objects SET payload = ? WHERE hash = ?", (bytes(payload) + b" ", input_ref))
        row(page, start + 1).click()
        expect(summary).to_contain_text("objects verified")
        row(page, start + 2).click()
        bad = page.locator('#chain li[data-role="input"] .mark.bad')
        expect(bad).to_contain_text("does not match")
        expect(summary).to_have_text(f"1 of {marks.count()} objects do not verify.")
        shot(page, "4-altered")

        # Another episode's calls are not this session's to read: filtering for it shows what an
        # episode nobody has shows, nothing.
        expect(page.locator("#reads")).to_have_text("episode ep1's calls and what belongs to no episode")
        a2a_send(OTHER, "explorer-other", "tools.echo", {"from": "ep2"})
        other_index = newest_index(OTHER)
        page.fill("#filter-episode", "ep2")
        page.click("#filters button[type=submit]")
        expect(page.locator("#no-calls")).to_be_visible()
        expect(page.locator("tr.call")).to_have_count(0)
        page.fill("#filter-episode", "ep1")
        page.click("#filters button[type=submit]")
        expect(row(page, start + 3)).to_be_visible()
        assert all(cells[4] == "ep1" for cells in page.eval_on_selector_all(
            "tr.call", "rows => rows.map(r => Array.from(r.cells, c => c.textContent))"))
        shot(page, "5-filtered")
        page.click("#clear-filters")
        expect(row(page, start + 3)).to_be_visible()
        expect(row(page, other_index)).to_have_count(0)

        # The search box: a task id, then an effect record's ref.
        page.fill("#find", "explorer-pure")
        page.click("#search button[type=submit]")
        expect(page.locator("tr.call")).to_have_count(1)
        expect(row(page, start + 1)).to_be_visible()
        record_ref = get(f"/v1/calls?find={start + 2}", CREDENTIAL)["items"][0]["effects"][0]["record"]
        page.fill("#find", record_ref)
        page.click("#search button[type=submit]")
        expect(page.locator("tr.call")).to_have_count(1)
        expect(row(page, start + 2)).to_be_visible()
        expect(page.locator("#entry-title")).to_contain_text(f"Entry {start + 2}")
        shot(page, "6-search")

        # The portable SHA-256 (used where WebCrypto is absent) agrees with WebCrypto.
        agree = page.evaluate("""async () => {
            const out = [];
            for (const n of [0, 3, 55, 56, 64, 1000]) {
                const bytes = new Uint8Array(n).map((_, i) => (i * 7 + n) & 255);
                out.push(window.worldSha256.portable(bytes) === await window.worldSha256.sha256Hex(bytes));
            }
            return out;
        }""")
        assert all(agree), agree

        # A read the handler refused shows the handler's reason beside the record.
        mcp_call(CREDENTIAL, "fx_dread", {"path": "missing.txt"})
        page.click("#newest")
        refused_read = newest_index(CREDENTIAL)
        row(page, refused_read).click()
        expect(page.locator("#entry-title")).to_contain_text(f"Entry {refused_read}")
        facts = page.locator("#chain .facts.effect").first
        expect(facts).to_contain_text("reason")
        expect(facts).to_contain_text("missing.txt")

        # Forgetting the session clears the tab's storage.
        page.click("#forget")
        assert page.evaluate("sessionStorage.getItem('world.session')") is None
        expect(page.locator("#main")).to_be_hidden()

        # A session holding Log.Read at world reads every episode: ep2's call, and ep1's chain.
        page.fill("#credential", OPERATOR)
        page.click("#login button[type=submit]")
        expect(page.locator("#reads")).to_have_text("every episode's calls (Log.Read at world)")
        # A new login starts at the newest page, the search above left behind.
        expect(page.locator("#newest")).to_be_disabled()
        expect(row(page, other_index)).to_contain_text("ep2")
        page.fill("#filter-episode", "ep2")
        page.click("#filters button[type=submit]")
        expect(page.locator("tr.call")).to_have_count(1)
        page.click("#clear-filters")
        row(page, start + 2).click()
        expect(page.locator('#chain li[data-role="effect 0 record"] > .object-head .mark')).to_have_text("✓ verified")
        shot(page, "7-every-episode")
        page.click("#forget")
        browser.close()
    assert not problems, problems
    print("explorer: every view checked;", len(os.listdir(SHOTS)), "screenshots in", SHOTS)


if __name__ == "__main__":
    main()
