"""The official MCP conformance suite's authorization-server scenarios against gantry's own
sign-in: `gantry serve --public-host 127.0.0.1:PORT` on a private state directory, a client
registered over HTTP, and the user's approval given with `gantry auth approve` while this
script plays the browser (authorization page, waiting page, then the suite's callback).

`python3 authorization.py <gantry> <node> <suite index.js> <results dir>`; exit code 0 when
every scenario passed.
"""

import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args):
        return None


def get(url, cookie=None):
    """Status, Location, body and Set-Cookie of a GET, redirects not followed."""
    opener = urllib.request.build_opener(NoRedirect)
    req = urllib.request.Request(url, headers={"cookie": cookie} if cookie else {})
    try:
        with opener.open(req, timeout=10) as r:
            return r.status, r.headers.get("location"), r.read().decode(), r.headers.get("set-cookie")
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("location"), e.read().decode(), e.headers.get("set-cookie")


def main(gantry, node, suite, results):
    work = tempfile.mkdtemp()
    os.makedirs(f"{work}/root")
    open(f"{work}/config.toml", "w").close()
    flags = ["--config", f"{work}/config.toml", "--state-dir", f"{work}/state", "--root", f"{work}/root"]
    env = dict(os.environ, HOME=work, GANTRY_LOG="error")
    port, callback = free_port(), free_port()
    issuer = f"http://127.0.0.1:{port}"
    server = subprocess.Popen(
        [gantry, "serve", *flags, "--no-admin", "--port", str(port), "--public-host", f"127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL, env=env,
    )
    try:
        for _ in range(100):
            try:
                if get(f"{issuer}/healthz")[0] == 200:
                    break
            except OSError:
                time.sleep(0.1)
        req = urllib.request.Request(
            f"{issuer}/oauth/register",
            data=json.dumps({"client_name": "MCP conformance suite",
                             "redirect_uris": [f"http://127.0.0.1:{callback}/callback"]}).encode(),
            headers={"content-type": "application/json"},
        )
        client_id = json.load(urllib.request.urlopen(req, timeout=10))["client_id"]
        run = subprocess.Popen(
            [node, suite, "authorization", "--url", issuer, "--client-id", client_id,
             "--resource", f"{issuer}/core/mcp", "--port", str(callback), "-o", results],
            stdout=subprocess.PIPE, text=True,
        )
        for line in run.stdout:
            print(line, end="", flush=True)
            if not line.startswith(f"{issuer}/oauth/authorize?"):
                continue
            # The browser: the authorization page sends it to the waiting page, which shows
            # the code; the user approves it; the waiting page then sends it to the callback.
            status, wait, _, set_cookie = get(line.strip())
            assert status == 303, f"authorize answered {status}"
            cookie = set_cookie.split(";")[0]  # the browser that asked keeps it
            page = get(wait, cookie)[2]
            code = re.search(r'class="code">([A-Z0-9-]+)<', page).group(1)
            subprocess.run([gantry, "auth", "approve", code, *flags], check=True, env=env,
                           stdout=subprocess.DEVNULL)
            status, back, _, _ = get(wait, cookie)
            assert status == 303 and back.startswith(f"http://127.0.0.1:{callback}/callback"), back
            get(back)
        return run.wait()
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:5]))
