"""Signs in to World's /mcp/ with the official MCP Python SDK's OAuth client, for
tests/tests/oauth.rs: `OAuthClientProvider` discovers the metadata from the 401, registers a
client dynamically and sends the browser (headless Chromium, driven by Playwright) to the
authorization page. The script prints `approval-code CODE` as the page shows it and waits; the
test approves that code at a terminal, the page sends the browser to this script's loopback
redirect URI, and the SDK exchanges the code (PKCE S256) for a token. It then lists and calls a
tool, forces a refresh, calls again, and prints what it saw as one JSON object.

usage: oauth_client.py <mcp-url> <chromium> <tool> <arguments-json>
"""

import asyncio
import http.server
import json
import queue
import sys
import threading
import time
import urllib.parse

import mcp.client.auth.oauth2 as oauth2
from mcp import ClientSession
from mcp.client.auth import OAuthClientProvider, TokenStorage
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken
from playwright.async_api import async_playwright

CLIENT_NAME = "World sign-in test"
WAIT_SECONDS = 90


class MemoryStorage(TokenStorage):
    def __init__(self):
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None
        self.history: list[OAuthToken] = []

    async def get_tokens(self):
        return self.tokens

    async def set_tokens(self, tokens):
        self.tokens = tokens
        self.history.append(tokens)

    async def get_client_info(self):
        return self.client

    async def set_client_info(self, client_info):
        self.client = client_info


def callback_server():
    """A loopback HTTP server whose /callback records the authorization response."""
    arrived: queue.Queue = queue.Queue()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            parsed = urllib.parse.urlparse(self.path)
            if parsed.path != "/callback":
                self.send_error(404)
                return
            arrived.put(urllib.parse.parse_qs(parsed.query))
            body = b"<!doctype html><title>Signed in</title><p id=done>Signed in; you may close this tab.</p>"
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, arrived


async def run(url, chromium, tool, arguments):
    seen = {"verifiers": []}
    generate = oauth2.PKCEParameters.generate.__func__

    # The verifier never leaves the SDK; it is kept here only so the test can look for it in
    # the servers' logs.
    def recording_generate(cls):
        params = generate(cls)
        seen["verifiers"].append(params.code_verifier)
        return params

    oauth2.PKCEParameters.generate = classmethod(recording_generate)

    server, arrived = callback_server()
    redirect_uri = f"http://127.0.0.1:{server.server_address[1]}/callback"
    storage = MemoryStorage()
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        page = await browser.new_page()
        problems = []
        page.on("pageerror", lambda e: problems.append(str(e)))

        async def redirect_handler(authorization_url):
            response = await page.goto(authorization_url)
            assert response.status == 200, response.status
            policy = response.headers["content-security-policy"]
            assert policy.startswith("default-src 'none'") and "script-src" not in policy, policy
            assert (await page.text_content("#client-name")) == CLIENT_NAME
            assert (await page.text_content("#redirect-uri")) == redirect_uri
            code = (await page.text_content("#approval-code")).strip()
            command = await page.text_content("#approve-command")
            assert f"world-core session approve {code}" in command, command
            seen["approvalCode"] = code
            print("approval-code", code, flush=True)

        async def callback_handler():
            params = await asyncio.to_thread(arrived.get, True, WAIT_SECONDS)
            await page.wait_for_url(lambda landed: landed.startswith(redirect_uri + "?"), timeout=WAIT_SECONDS * 1000)
            seen["landed"] = page.url.split("?")[0]
            seen["landedText"] = await page.text_content("#done")
            one = {key: values[0] for key, values in params.items()}
            seen["callback"] = sorted(one)
            seen["iss"] = one.get("iss")
            seen["authorizationCode"] = one.get("code")
            return AuthorizationCodeResult(code=one["code"], state=one.get("state"), iss=one.get("iss"))

        metadata = OAuthClientMetadata(
            client_name=CLIENT_NAME,
            redirect_uris=[redirect_uri],
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            token_endpoint_auth_method="none",
        )
        provider = OAuthClientProvider(url, metadata, storage, redirect_handler, callback_handler)
        async with create_mcp_http_client(auth=provider) as http_client:
            async with streamable_http_client(url, http_client=http_client) as streams:
                async with ClientSession(streams[0], streams[1]) as session:
                    initialized = await session.initialize()
                    listed = await session.list_tools()
                    called = await session.call_tool(tool, arguments)
                    seen["serverName"] = initialized.server_info.name
                    seen["tools"] = [t.name for t in listed.tools]
                    seen["structuredContent"] = called.structured_content
                    # The token's lifetime is up as far as the SDK knows: its next request
                    # refreshes first.
                    provider.context.token_expiry_time = time.time() - 1
                    again = await session.call_tool(tool, arguments)
                    seen["afterRefresh"] = again.structured_content
        await browser.close()
        seen["problems"] = problems
    server.shutdown()
    seen["clientId"] = storage.client.client_id
    seen["redirectUri"] = redirect_uri
    seen["tokens"] = [
        {"access": t.access_token, "refresh": t.refresh_token, "expiresIn": t.expires_in, "type": t.token_type}
        for t in storage.history
    ]
    return seen


def main():
    if len(sys.argv) != 5:
        print(__doc__, file=sys.stderr)
        return 2
    url, chromium, tool, arguments = sys.argv[1:]
    seen = asyncio.run(run(url, chromium, tool, json.loads(arguments)))
    print(json.dumps(seen, sort_keys=True), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
