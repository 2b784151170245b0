"""An https server on loopback for tests/signin.rs, standing in for the site that publishes an
OAuth client's ID metadata document.

`python3 document_server.py CERT KEY ROUTES`: ROUTES is a JSON file mapping a path to
`{"status": N, "body": TEXT, "headers": {...}}`, read at each request (the test writes it
once it knows the port, which the documents name). It prints the port it listens on, then
serves until killed, appending each path asked for to ROUTES + ".log".
"""

import http.server
import json
import ssl
import sys

cert, key, routes_file = sys.argv[1:4]


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        with open(routes_file + ".log", "a") as log:
            log.write(self.path + "\n")
        with open(routes_file) as f:
            routes = json.load(f)
        route = routes.get(self.path, {"status": 404, "body": "no such document"})
        body = route.get("body", "").encode()
        self.send_response(route["status"])
        for name, value in route.get("headers", {}).items():
            self.send_header(name, value)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
context.load_cert_chain(cert, key)
server.socket = context.wrap_socket(server.socket, server_side=True)
print(server.server_address[1], flush=True)
server.serve_forever()
