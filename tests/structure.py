#!/usr/bin/env python3
"""The shape of the hand-written code, checked from its source text (part of tests/run).

1. Layers: no two modules of one crate import each other in a loop. A module is a file; it
   imports another when it names it through `crate::`, `super::` or a name the crate's
   lib.rs re-exports from it. Tests (`*_tests.rs`, `tests/`, what follows `#[cfg(test)]`)
   are left out. Crates importing each other in a loop cannot build, so cargo checks that.
2. Rooms: no crate holds more than 35 % of the hand-written lines (`src/` of the crates under
   runtime/ and codegen/, tests left out).
3. Paths: the code that serves calls (the server's handlers and ops, the workers, the
   control page) neither resolves nor compares paths itself: `canonicalize`, `read_dir` and
   a path's `starts_with` appear there only in `confine`'s path policy, which they call.

Exits 1 naming every breach; prints a summary line either way.
"""

import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CRATE_DIRS = ["runtime", "codegen"]
MAX_SHARE = 0.35

# Where calls are served: no path is resolved or compared here but through confine.
PATH_FREE = ["runtime/server/src", "runtime/agents/src", "runtime/admin/src"]
# gantry's own files, never a path from a call: the policy directory is listed here.
PATH_FREE_EXCEPT = {"runtime/server/src/policy_set.rs"}
PATH_CALLS = re.compile(r"\b(canonicalize|read_dir)\s*\(")
# `x.starts_with(y)` where `y` is neither a string, byte or char literal, an array of them
# nor a closure: on a path, a prefix test that ignores how the OS compares (case on
# Windows) and what links do.
STARTS_WITH = re.compile(r"\.starts_with\(\s*([^\"'b\[|\s])")


def code_of(text):
    """The text up to its first `#[cfg(test)]`, without comments; inside an inline module
    (`mod linux { ... }`), `super::` names the file itself and is dropped."""
    cut = text.find("#[cfg(test)]")
    if cut >= 0:
        text = text[:cut]
    text = re.sub(r"//[^\n]*", "", text)
    out, i = [], 0
    for m in re.finditer(r"\bmod \w+\s*\{", text):
        if m.start() < i:
            continue
        depth, j = 1, m.end()
        while j < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            j += 1
        out.append(text[i : m.end()])
        out.append(re.sub(r"\bsuper::", "self::", text[m.end() : j]))
        i = j
    out.append(text[i:])
    return "".join(out)


def rust_files(src):
    for dirpath, _, names in os.walk(src):
        for name in sorted(names):
            if name.endswith(".rs") and not name.endswith("_tests.rs"):
                yield os.path.join(dirpath, name)


def module_of(src, path):
    """`a::b` for src/a/b.rs or src/a/b/mod.rs; `` for lib.rs and main.rs."""
    rel = os.path.relpath(path, src)[:-3].split(os.sep)
    if rel[-1] == "mod" or (len(rel) == 1 and rel[0] in ("lib", "main")):
        rel = rel[:-1]
    return "::".join(rel)


def crates():
    for top in CRATE_DIRS:
        base = os.path.join(ROOT, top)
        for name in sorted(os.listdir(base)):
            src = os.path.join(base, name, "src")
            if os.path.isdir(src):
                yield os.path.join(top, name), src


def use_paths(code):
    """Every path a file names through `crate::`, `super::`, or a `use` of a top-level
    module, with `{}` groups expanded: `crate::a::{b, c::D}` gives `crate::a::b` and
    `crate::a::c::D`."""
    found = []
    for m in re.finditer(r"\b((?:crate|super)(?:::\w+)*)(::\{)?", code):
        prefix = m.group(1)
        if m.group(2):
            depth, i = 1, m.end()
            while i < len(code) and depth:
                depth += {"{": 1, "}": -1}.get(code[i], 0)
                i += 1
            found.extend(expand(prefix, code[m.end() : i - 1]))
        else:
            found.append(prefix)
    return found


def expand(prefix, group):
    items, depth, current = [], 0, ""
    for ch in group:
        if ch == "," and depth == 0:
            items.append(current)
            current = ""
            continue
        depth += {"{": 1, "}": -1}.get(ch, 0)
        current += ch
    items.append(current)
    out = []
    for item in (i.strip() for i in items):
        if not item:
            continue
        head = re.match(r"(\w+(?:::\w+)*)(::\{(.*)\})?", item, re.S)
        if not head:
            continue
        path = prefix + "::" + head.group(1)
        out.extend(expand(path, head.group(3)) if head.group(2) else [path])
    return out


def layers():
    breaches = []
    for crate, src in crates():
        modules = {module_of(src, f): f for f in rust_files(src)}
        lib = modules.get("")
        reexports = {}
        if lib:
            for m in re.finditer(r"pub use (\w+)(?:::(\w+))*::\{([^}]*)\};|pub use (\w+)::(\w+);", code_of(open(lib).read())):
                if m.group(3) is not None:
                    for name in m.group(3).split(","):
                        reexports[name.strip().split(" as ")[-1]] = m.group(1)
                else:
                    reexports[m.group(5)] = m.group(4)
        edges = {name: set() for name in modules}
        for name, path in modules.items():
            if name == "":
                continue
            here = name.split("::") if name else []
            is_dir_module = os.path.basename(path) == "mod.rs"
            for used in use_paths(code_of(open(path).read())):
                parts = used.split("::")
                if parts[0] == "crate":
                    at, rest = [], parts[1:]
                else:
                    at = here[:] if is_dir_module else here[:-1]
                    rest = parts[1:]
                    while rest and rest[0] == "super":
                        at, rest = at[:-1], rest[1:]
                target = None
                for k in range(len(rest), -1, -1):
                    candidate = "::".join(at + rest[:k])
                    if candidate in modules:
                        target = candidate
                        break
                if target == "" and rest and rest[0] in reexports:
                    target = reexports[rest[0]]
                if target and target != name and target != "":
                    edges[name].add(target)
        for cycle in loops(edges):
            breaches.append(f"{crate}: modules import each other in a loop: {' -> '.join(cycle)}")
    return breaches


def loops(edges):
    """The strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    sys.setrecursionlimit(10000)
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def rooms():
    sizes = {}
    for crate, src in crates():
        sizes[crate] = sum(
            len(code_of(open(f).read()).splitlines()) for f in rust_files(src)
        )
    total = sum(sizes.values())
    biggest = max(sizes, key=sizes.get)
    share = sizes[biggest] / total
    summary = f"largest crate {biggest}: {sizes[biggest]} of {total} hand-written lines ({share:.0%})"
    breaches = []
    if share > MAX_SHARE:
        breaches.append(f"{summary}, over {MAX_SHARE:.0%}: split it")
    return breaches, summary


def paths():
    breaches = []
    for place in PATH_FREE:
        for f in rust_files(os.path.join(ROOT, place)):
            rel = os.path.relpath(f, ROOT)
            if rel in PATH_FREE_EXCEPT:
                continue
            for n, line in enumerate(code_of(open(f).read()).splitlines(), 1):
                for pattern in (PATH_CALLS, STARTS_WITH):
                    if pattern.search(line):
                        breaches.append(
                            f"{rel}:{n}: resolves or compares a path itself; use confine::path_policy: {line.strip()}"
                        )
    return breaches


def main():
    breaches = layers()
    room_breaches, summary = rooms()
    breaches += room_breaches + paths()
    for b in breaches:
        print(f"structure: {b}", file=sys.stderr)
    print(f"structure: {summary}; {len(breaches)} breach(es)")
    return 1 if breaches else 0


if __name__ == "__main__":
    sys.exit(main())
