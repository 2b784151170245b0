"""An OAuth client for tests/signin.rs: the official MCP Python SDK's OAuthClientProvider
signing in to `gantry serve --public-host ...`, with this script standing in for the browser.

`python3 oauth_client.py <connector URL> <file to read> [<client document URL>]`: with the third
argument the client is known by that document (its `client_id` is the URL) instead of
registering. It speaks in lines on stdout:
`CODE <code>` once gantry's sign-in page shows the code (the test then approves it as the
user), `READ <text>` after a read with the token, `REFRESHED <text>` after a read once the
token was refreshed, then waits for a line on stdin (the test revokes the grant meanwhile) and
prints `REFUSED <what>` when the next call is refused, `ok` last. Anything else ends it with
exit code 1 and the reason on stderr.
"""

import asyncio
import re
import sys
import time
from urllib.parse import parse_qs, urljoin, urlparse

import httpx2
from mcp import ClientSession
from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

REDIRECT = "http://127.0.0.1:9/callback"


class Memory:
    def __init__(self):
        self.tokens = None
        self.client = None

    async def get_tokens(self):
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken):
        self.tokens = tokens

    async def get_client_info(self):
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull):
        self.client = client_info


def say(line):
    print(line, flush=True)


async def main(url, path, document=None):
    result = asyncio.get_running_loop().create_future()
    authorizations = 0
    refused = False

    async def browse(authorization_url):
        # What the user's browser does: open the authorization URL, land on the waiting page,
        # read the code off it, and follow it once the user approved elsewhere.
        nonlocal authorizations, refused
        authorizations += 1
        if authorizations > 1:
            # The server refused the token (401) and the SDK starts a new sign-in.
            refused = True
            say("REFUSED the server asked for a new sign-in")
            raise RuntimeError("asked to sign in again")
        async with httpx2.AsyncClient(follow_redirects=False) as web:
            r = await web.get(authorization_url)
            if r.status_code != 303:
                raise RuntimeError(f"authorize answered {r.status_code}: {r.text[:300]}")
            wait = urljoin(authorization_url, r.headers["location"])
            shown = False
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                page = await web.get(wait)
                if page.status_code == 303:
                    back = page.headers["location"]
                    if not back.startswith(REDIRECT):
                        raise RuntimeError(f"sent to {back}")
                    q = parse_qs(urlparse(back).query)
                    if "error" in q:
                        raise RuntimeError(f"refused: {q['error']}")
                    result.set_result(
                        AuthorizationCodeResult(
                            code=q["code"][0], state=q.get("state", [None])[0], iss=q.get("iss", [None])[0]
                        )
                    )
                    return
                m = re.search(r'class="code">([A-Z0-9-]+)<', page.text)
                if page.status_code != 200 or not m:
                    raise RuntimeError(f"waiting page answered {page.status_code}: {page.text[:300]}")
                if not shown:
                    say(f"CODE {m.group(1)}")
                    shown = True
                await asyncio.sleep(0.3)
            raise RuntimeError("never approved")

    async def callback():
        return await result

    provider = OAuthClientProvider(
        server_url=url,
        client_metadata=OAuthClientMetadata(
            client_name="gantry sign-in test",
            redirect_uris=[REDIRECT],
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            token_endpoint_auth_method="none",
        ),
        storage=Memory(),
        redirect_handler=browse,
        callback_handler=callback,
        client_metadata_url=document,
    )

    def text_of(res):
        return " ".join(c.text for c in res.content if getattr(c, "type", "") == "text").replace("\n", " ")

    try:
        async with httpx2.AsyncClient(auth=provider, timeout=30) as http:
            async with streamable_http_client(url, http_client=http) as (read, write, *_):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    res = await session.call_tool("read", {"paths": [path]})
                    say(f"READ {text_of(res)}")
                    # The access token is taken as expired: the SDK refreshes it first.
                    first = provider.context.current_tokens.access_token
                    provider.context.token_expiry_time = time.time() - 1
                    res = await session.call_tool("read", {"paths": [path]})
                    if provider.context.current_tokens.access_token == first:
                        raise RuntimeError("the token was not refreshed")
                    say(f"REFRESHED {text_of(res)}")
                    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
                    answered = None
                    try:
                        res = await asyncio.wait_for(session.call_tool("read", {"paths": [path]}), 30)
                        answered = text_of(res)
                    except Exception:  # noqa: BLE001 - the new sign-in it asked for was refused
                        if not refused:
                            raise
                    if answered is not None:
                        raise RuntimeError(f"a call after revocation was answered: {answered}")
    except BaseException:
        # Once the refusal was seen, the transport closing on the failed sign-in is expected.
        if not refused:
            raise
    say("ok")


if __name__ == "__main__":
    try:
        asyncio.run(main(*sys.argv[1:4]))
    except BaseException as e:  # noqa: BLE001 - the test reads the reason
        print(f"oauth_client: {type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(1)
