#!/usr/bin/env python3
"""A scripted stand-in for an agent CLI (`codex exec`, `claude -p`), for gantry's tests.

    fake_agent.py (--mcp-config FILE | --endpoint URL) [--resume ID] (PROMPT | --prompt-file F)

It reads the MCP server from FILE (Claude Code's `mcpServers` format), or takes URL and
sends $GANTRY_WORKER_TOKEN as its bearer token (as Codex does), speaks MCP over
Streamable HTTP to it, follows the directives in PROMPT (one per line), keeps its
conversation in $FAKE_AGENT_STATE/<id>.json so a resume continues it, and ends by printing
one JSON line with its conversation id and the conversation's size in tokens, as agent CLIs
print their own accounting.

Directives (anywhere in the prompt, one per line):
    READ <path>        read a file through gantry's `read` tool (relative to the workdir)
    WAIT <path>        wait (up to 60 s) until <path> exists before going on
    TOKENS <n>         this turn adds n tokens to the conversation (default 1000)
    SPAWN              try `agents` spawn (a worker must be refused)
    STATUS             try `agents` status (a worker must be refused)
    FINISH_AS <id>     try to finish naming another worker in `to`
    WRONG_SECRET       call the endpoint with a changed secret; note the HTTP status
    LEAK <path>        write the endpoint's URL to <path> (a test tries it from outside)
    DETACH <marker>    leave a detached process behind whose command line holds <marker>
    NOFINISH           exit without calling finish
The result handed in with `finish` lists what happened, one `key=value` per line.
"""

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid


BEARER = None


def post(url, body):
    headers = {
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": "2025-11-25",
    }
    if BEARER and url.endswith("/mcp") and url.count("/") == 3:
        headers["authorization"] = "Bearer " + BEARER
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        headers=headers,
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as reply:
            text = reply.read().decode()
            return reply.status, (json.loads(text) if text.strip() else None)
    except urllib.error.HTTPError as e:
        return e.code, None


class Mcp:
    def __init__(self, url):
        self.url = url
        self.next_id = 1
        status, reply = self.rpc("initialize", {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "fake-agent", "version": "1.0"},
        })
        if status != 200:
            raise SystemExit(f"initialize failed: HTTP {status}")

    def rpc(self, method, params):
        body = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}
        self.next_id += 1
        return post(self.url, body)

    def call(self, tool, arguments):
        """The tool's text and whether it failed, or the HTTP status when there was none."""
        status, reply = self.rpc("tools/call", {"name": tool, "arguments": arguments})
        if status != 200 or reply is None:
            return f"HTTP {status}", True
        if "error" in reply:
            return reply["error"].get("message", "error"), True
        result = reply["result"]
        text = "".join(c.get("text", "") for c in result.get("content", []))
        return text, bool(result.get("isError"))


def one_line(text):
    return " ".join(text.split())[:300]


def main():
    global BEARER
    args = sys.argv[1:]
    config = resume = endpoint = None
    while args and args[0].startswith("--"):
        flag, value, args = args[0], args[1], args[2:]
        if flag == "--mcp-config":
            config = value
        elif flag == "--resume":
            resume = value
        elif flag == "--endpoint":
            endpoint = value
        elif flag == "--prompt-file":
            with open(value) as f:
                args = [f.read()] + args
    prompt = args[0] if args else ""
    if endpoint:
        url = endpoint
        BEARER = os.environ["GANTRY_WORKER_TOKEN"]
    else:
        with open(config) as f:
            url = json.load(f)["mcpServers"]["gantry"]["url"]

    state_dir = os.environ["FAKE_AGENT_STATE"]
    os.makedirs(state_dir, exist_ok=True)
    if resume:
        with open(os.path.join(state_dir, resume + ".json")) as f:
            conversation = json.load(f)
    else:
        conversation = {"id": str(uuid.uuid4()), "turns": 0, "tokens": 0}
    conversation["turns"] += 1
    print(json.dumps({"type": "started", "conversation": conversation["id"]}), flush=True)

    mcp = Mcp(url)
    notes = [f"conversation={conversation['id']}", f"turn={conversation['turns']}",
             f"worker={os.environ.get('GANTRY_WORKER', '')}"]
    tokens = 1000
    finish = True
    for line in prompt.splitlines():
        word, _, rest = line.strip().partition(" ")
        rest = rest.strip()
        if word == "READ":
            text, failed = mcp.call("read", {"paths": [rest]})
            notes.append(f"read={'FAILED ' if failed else ''}{one_line(text)}")
        elif word == "WAIT":
            until = time.time() + 60
            while not os.path.exists(rest) and time.time() < until:
                time.sleep(0.05)
        elif word == "TOKENS":
            tokens = int(rest)
        elif word == "SPAWN":
            text, failed = mcp.call("agents", {"action": "spawn", "tasks": ["x"]})
            notes.append(f"spawn={'refused' if failed else 'ALLOWED'}: {one_line(text)}")
        elif word == "STATUS":
            text, failed = mcp.call("agents", {"action": "status"})
            notes.append(f"status={'refused' if failed else 'ALLOWED'}: {one_line(text)}")
        elif word == "FINISH_AS":
            text, failed = mcp.call("agents", {"action": "finish", "to": [rest], "message": "forged"})
            notes.append(f"finish_as={'refused' if failed else 'ALLOWED'}: {one_line(text)}")
        elif word == "WRONG_SECRET":
            base, _, _ = url.rpartition("/mcp")
            forged = base[:-4] + ("AAAA" if not base.endswith("AAAA") else "BBBB") + "/mcp"
            status, _ = post(forged, {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                      "params": {"name": "agents", "arguments": {"action": "finish", "message": "x"}}})
            notes.append(f"wrong_secret=HTTP {status}")
        elif word == "LEAK":
            with open(rest, "w") as f:
                f.write(url)
        elif word == "DETACH":
            subprocess.Popen(
                [sys.executable, "-c", "import time; time.sleep(300)", rest],
                start_new_session=True,
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )
        elif word == "NOFINISH":
            finish = False

    conversation["tokens"] += tokens
    with open(os.path.join(state_dir, conversation["id"] + ".json"), "w") as f:
        json.dump(conversation, f)
    if finish:
        text, failed = mcp.call("agents", {"action": "finish", "message": "\n".join(notes)})
        if failed:
            print(json.dumps({"type": "finish_failed", "text": one_line(text)}), flush=True)
    print(json.dumps({"type": "done", "conversation": conversation["id"],
                      "tokens": conversation["tokens"]}), flush=True)


if __name__ == "__main__":
    main()
