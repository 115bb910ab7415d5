#!/usr/bin/env python3
"""The workspace's shape, checked by `make test` (as `make tidy`).

1. No import circle between the source files of any crate: edges are the
   `use crate::`, `use super::` and `crate::` paths outside test modules
   and comments, each resolved to the file of the longest module path it
   names.
2. No circle between the crates, and no crate that runs as a client (the
   wire, the transport, the client library, the mount, the libraries IOR
   and MPI-IO link) depends, at all, on a server crate or on SQLite (the
   dependency graph `cargo metadata` resolves for this host).
3. No function longer than 70 lines (from its `fn` to its closing brace,
   test modules included): the ones longer today are listed in
   tools/long-functions.txt with their length; a listed one may not grow,
   and one that is 70 lines or shorter now must leave the list.

Usage: tools/tidy.py [--write-lists]   (--write-lists records today's lists;
for a change that only shortens or removes.)
Exits 1 with one line per finding, naming the file and the fix.
"""
import json, os, re, subprocess, sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FUNCTION_LINES_MAX = 70
LONG_LIST = os.path.join(ROOT, "tools", "long-functions.txt")
# Crates that serve: a client-side crate links none of them.
SERVER_CRATES = {"lanefs-mds", "lanefs-server", "rusqlite", "libsqlite3-sys"}
# Crates that run as clients or inside users' programs.
CLIENT_CRATES = [
    "lanefs-core", "lanefs-proto", "lanefs-net", "lanefs-client", "lanefs-mpiio", "lanefs-ior", "lanefs-backends",
    "lanefs-fuse", "lanefs-plot", "lanefs-top",
]


def source_files(src):
    out = {}
    for dirpath, _, names in os.walk(src):
        for name in names:
            if name.endswith(".rs"):
                path = os.path.join(dirpath, name)
                module = os.path.relpath(path, src)[:-3].split(os.sep)
                if module[-1] in ("mod", "lib", "main"):
                    module = module[:-1]
                out[tuple(module)] = path
    return out


# Comments, strings and character literals, whichever starts first: a `//`
# inside a string ("http://") is the string's, a `"` inside a comment the
# comment's. A raw string's `r` starts a token: the `r"` that ends "...for"
# is not one. Character literals, not lifetimes: '{', '\'', '\u{7f}'.
TOKENS = re.compile(
    r"(?P<block>/\*.*?\*/)|(?P<line>//[^\n]*)"
    r'|(?P<raw>(?<![A-Za-z0-9_])b?r(?P<hashes>#*)".*?"(?P=hashes))'
    r'|(?P<str>b?"(?:[^"\\]|\\.)*")'
    r"|(?P<chr>b?'(?:\\(?:u\{[0-9a-fA-F]+\}|x[0-9a-fA-F]{2}|.)|[^\\'\n])')",
    re.S)


def without_comments_and_strings(text):
    def blank(m):
        lines = "\n" * m.group(0).count("\n")
        if m.group("line") is not None:
            return ""
        if m.group("chr") is not None:
            return "' '"
        return lines if m.group("block") is not None else '""' + lines
    return TOKENS.sub(blank, text)


def outside_tests(text):
    """The text before the file's inline `#[cfg(test)]` module (test
    modules sit last in every file here; one in a file of its own is
    declared, not cut at)."""
    m = re.search(r"#\[cfg\(test\)\]\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+\w+\s*\{", text)
    return text if m is None else text[:m.start()]


USE = re.compile(r"\buse\s+((?:crate|super|self)(?:::\w+)*)(?:::\{([^;]*)\})?")


def module_of(parts, files):
    for n in range(len(parts), -1, -1):
        if tuple(parts[:n]) in files:
            return tuple(parts[:n])
    return ()


def module_edges(files):
    graph = {m: set() for m in files}
    for module, path in files.items():
        text = without_comments_and_strings(outside_tests(open(path, encoding="utf-8").read()))
        for m in USE.finditer(text):
            parts = m.group(1).split("::")
            if parts[0] == "crate":
                base, parts = [], parts[1:]
            elif parts[0] == "self":
                base, parts = list(module), parts[1:]
            else:
                base = list(module)
                while parts and parts[0] == "super":
                    base, parts = base[:-1], parts[1:]
            names = [parts]
            if m.group(2):
                names = [parts + [x.strip().split("::")[0]] for x in m.group(2).split(",") if x.strip()]
            for name in names:
                target = module_of(base + name, files)
                if target != module:
                    graph[module].add(target)
        for m in re.finditer(r"(?<![\w:])crate::((?:\w+::)*\w+)", text):
            target = module_of(m.group(1).split("::"), files)
            if target != module:
                graph[module].add(target)
    return graph


def strongly_connected(graph):
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
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

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def crate_dirs():
    crates = os.path.join(ROOT, "crates")
    return sorted(os.path.join(crates, d) for d in os.listdir(crates) if os.path.isdir(os.path.join(crates, d, "src")))


def check_module_circles(findings):
    for crate in crate_dirs():
        files = source_files(os.path.join(crate, "src"))
        for component in strongly_connected(module_edges(files)):
            names = " <-> ".join("/".join(m) or "lib" for m in component)
            findings.append(f"{os.path.relpath(crate, ROOT)}: an import circle: {names} "
                            "(move what both use to a module of its own, or make one side generic)")


def cargo_metadata():
    host = subprocess.run(["rustc", "-vV"], check=True, capture_output=True, text=True).stdout
    host = next(line.split()[1] for line in host.splitlines() if line.startswith("host:"))
    out = subprocess.run(["cargo", "metadata", "--locked", "--format-version", "1", "--filter-platform", host],
                         cwd=ROOT, check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def check_crate_graph(findings):
    meta = cargo_metadata()
    names = {p["id"]: p["name"] for p in meta["packages"]}
    members = {names[i] for i in meta["workspace_members"]}
    # Normal and build dependencies: what a crate links into its users.
    deps = {}
    for node in meta["resolve"]["nodes"]:
        deps[names[node["id"]]] = {
            names[d["pkg"]] for d in node["deps"]
            if any(k["kind"] in (None, "build") for k in d["dep_kinds"])
        }
    inner = {c: {d for d in deps.get(c, ()) if d in members} for c in members}
    for component in strongly_connected(inner):
        findings.append(f"Cargo.toml: crates depend on each other in a circle: {' <-> '.join(component)}")

    def reach(crate):
        seen, todo = set(), [crate]
        while todo:
            for d in deps.get(todo.pop(), ()):
                if d not in seen:
                    seen.add(d)
                    todo.append(d)
        return seen

    linking = {}
    for crate in CLIENT_CRATES:
        servers = sorted(reach(crate) & SERVER_CRATES)
        if servers:
            linking[crate] = servers
    for crate, servers in sorted(linking.items()):
        findings.append(f"crates: {crate} runs as a client and links {', '.join(servers)}: "
                        "depend on the client, transport and wire crates only (lanefs-client, lanefs-net, "
                        "lanefs-proto)")

FN = re.compile(r"^[ \t]*(?:pub(?:\([^)]*\))?\s+)?(?:(?:const|async|unsafe|extern\s+\"[^\"]*\")\s+)*fn\s+(\w+)", re.M)


def functions(path):
    """(name, first line, line count) of every function with a body."""
    text = without_comments_and_strings(open(path, encoding="utf-8").read())
    out = []
    for m in FN.finditer(text):
        i, depth, parens = m.end(), 0, 0
        # The body's opening brace: the first `{` outside the signature's
        # parentheses and brackets; a `;` first means no body.
        while i < len(text):
            c = text[i]
            if c in "([":
                parens += 1
            elif c in ")]":
                parens -= 1
            elif parens == 0 and c == ";":
                break
            elif parens == 0 and c == "{":
                break
            i += 1
        if i >= len(text) or text[i] != "{":
            continue
        start = text.count("\n", 0, m.start()) + 1
        j = i
        while j < len(text):
            if text[j] == "{":
                depth += 1
            elif text[j] == "}":
                depth -= 1
                if depth == 0:
                    break
            j += 1
        end = text.count("\n", 0, j) + 1
        out.append((m.group(1), start, end - start + 1))
    return out


def read_list(path, key):
    if not os.path.exists(path):
        return {}
    out = {}
    for line in open(path):
        line = line.strip()
        if line and not line.startswith("#"):
            parts = line.split()
            out[key(parts)] = parts
    return out


def check_function_lengths(findings, write):
    long = {}
    for crate in crate_dirs():
        for dirpath, _, names in os.walk(os.path.join(crate, "src")):
            for name in sorted(names):
                if not name.endswith(".rs"):
                    continue
                path = os.path.relpath(os.path.join(dirpath, name), ROOT)
                for fn, line, lines in functions(os.path.join(ROOT, path)):
                    if lines > FUNCTION_LINES_MAX:
                        key = f"{path}::{fn}"
                        # Two functions of one name in a file: the longer.
                        if lines > long.get(key, (0, 0))[0]:
                            long[key] = (lines, line)
    if write:
        with open(LONG_LIST, "w") as f:
            f.write(f"# Functions over {FUNCTION_LINES_MAX} lines, with their length: none may grow, none may join,\n"
                    "# and one that shrinks to the limit leaves the list (tools/tidy.py).\n")
            for key, (lines, _) in sorted(long.items()):
                f.write(f"{key} {lines}\n")
        return
    listed = {k: int(v[1]) for k, v in read_list(LONG_LIST, lambda p: p[0]).items()}
    rel = os.path.relpath(LONG_LIST, ROOT)
    for key, (lines, line) in sorted(long.items()):
        path = key.split("::")[0]
        if key not in listed:
            findings.append(f"{path}:{line}: fn {key.split('::')[1]} is {lines} lines, over {FUNCTION_LINES_MAX}: "
                            "split it by what its parts do")
        elif lines > listed[key]:
            findings.append(f"{path}:{line}: fn {key.split('::')[1]} grew to {lines} lines from {listed[key]} "
                            f"({rel}): shorten it")
    for key in sorted(set(listed) - set(long)):
        findings.append(f"{rel}: {key} is {FUNCTION_LINES_MAX} lines or fewer now (or gone): remove its line")


def main():
    write = "--write-lists" in sys.argv[1:]
    findings = []
    check_module_circles(findings)
    check_crate_graph(findings)
    check_function_lengths(findings, write)
    for finding in findings:
        print(f"tidy: {finding}")
    if findings:
        return 1
    if not write:
        print("tidy: no import circles, no client crate on server code or SQLite, "
              f"no function over {FUNCTION_LINES_MAX} lines beyond its list")
    return 0


if __name__ == "__main__":
    sys.exit(main())
