#!/usr/bin/env python3
"""Checks from the #include lines of include/ and src/ that no include arrow runs back up the layers.

Every include is resolved as the compiler would find it (the including file's folder, then src/,
include/ and the generated headers), and must point to the same layer or a lower one, as the
tables below say. Each violation is printed as file:line; the exit status is 1 if there is any.

    python3 scripts/check-layers.py            check the tree
    python3 scripts/check-layers.py --graph    also print the layer-to-layer arrows found
"""
import pathlib
import re
import sys
from collections import Counter

ROOT = pathlib.Path(__file__).resolve().parent.parent

# The layers, bottom to top. A file may include files of its own layer and of layers below it,
# never above. Why this order: each layer only needs the ones below it to do its job.
#   public    the installed API (include/dlock): what users see; it cannot depend on anything that
#             is not installed, so it sits at the bottom and everything may use its types.
#   core      errors, options, identities: plain helpers behind the public types.
#   resp      the RESP codec: bytes <-> replies, no sockets.
#   net       connections, request queues, transports; speaks RESP.
#   pubsub    the subscriber connection, built on net.
#   topology  which connections exist (standalone today); owns command and pub/sub connections.
#   route     sends a command or script to the right connection of the topology.
#   lease     the watchdog's sans-I/O lease scheduler; needs nothing but the clock.
#   locks     the lock engine, the lock types and the public handles (see LOCKS_PARTS).
#   client    the facade that wires every layer together behind dlock::client.
#   quorum    Redlock: a lock over N independent clients; it uses only the public dlock::client
#             API (and core identities, lock names and the embedded scripts), so it sits above.
LAYERS = [
    ("public", "include/dlock/"),
    ("core", "src/core/"),
    ("resp", "src/resp/"),
    ("net", "src/net/"),
    ("pubsub", "src/pubsub/"),
    ("topology", "src/topology/"),
    ("route", "src/route/"),
    ("lease", "src/lease/"),
    ("locks", "src/locks/"),
    ("client", "src/client/"),
    ("quorum", "src/quorum/"),
]
RANK = {name: i for i, (name, _) in enumerate(LAYERS)}

# Inside src/locks, which parts may include which (other layers' files follow LAYERS). The engine
# does everything the same way for every lock type, so it must not know the types nor the handles
# built on it; a type is a protocol the engine runs (lock_protocol.hpp) plus its scripts, so it
# sees the engine only through that interface; handles are thin wrappers over the engine that
# name a type. The files directly in src/locks (names.hpp: Redisson's key and channel naming) are
# a helper every part and the client may use, and they include no part.
LOCKS_PARTS = {
    # part:      {part it includes: None (any file of it) or the set of files allowed}
    "engine": {"engine": None, "root": None},
    "types": {"types": None, "root": None, "engine": {"src/locks/engine/lock_protocol.hpp"}},
    "handles": {"handles": None, "root": None, "engine": None, "types": None},
    "root": {"root": None},
}

# dlock/client.hpp is the facade: the top of the public API. Among the public headers only the
# umbrella dlock/dlock.hpp includes it (and is a facade itself); among src/ files only src/client
# and src/quorum (Redlock, built on clients) do, so that no layer below reaches back up to it.
FACADE_HEADERS = {"include/dlock/client.hpp", "include/dlock/dlock.hpp"}
FACADE_USERS = ("src/client/", "src/quorum/", "include/dlock/dlock.hpp")

# Headers generated into the build tree (CMakeLists.txt, dlock_embed_lua). They are on the
# library's PRIVATE include path only and are not installed: src/ may include them, public
# headers may not (an installed header including them would not compile for users).
GENERATED = {"dlock/embedded_scripts.hpp"}

INCLUDE = re.compile(r'^\s*#\s*include\s*(?:"([^"]+)"|<([^>]+)>)')


def layer_of(rel):
    for name, prefix in LAYERS:
        if rel.startswith(prefix):
            return name
    return None


def locks_part(rel):
    rest = rel[len("src/locks/"):]
    return rest.split("/", 1)[0] if "/" in rest else "root"


def resolve(including, target, quoted):
    """The repository path `target` names, "<generated>", or None (a system header)."""
    candidates = []
    if quoted:
        candidates.append(including.parent / target)
    candidates += [ROOT / "src" / target, ROOT / "include" / target]
    for c in candidates:
        if c.is_file():
            return c.resolve().relative_to(ROOT).as_posix()
    if target in GENERATED:
        return "<generated>"
    return None


def check(rel, target_rel):
    """Why `rel` must not include `target_rel`, or None when it may."""
    src_layer, dst_layer = layer_of(rel), layer_of(target_rel)
    if target_rel == "<generated>":
        return "a generated header is not installed" if src_layer == "public" else None
    if src_layer == "public" and dst_layer != "public":
        return "a public header may include only public headers"
    if target_rel in FACADE_HEADERS and not rel.startswith(FACADE_USERS):
        return "only the facade (src/client, dlock/dlock.hpp) includes dlock/client.hpp"
    if RANK[dst_layer] > RANK[src_layer]:
        return f"layer {src_layer} includes layer {dst_layer} above it"
    if src_layer == dst_layer == "locks":
        src_part, dst_part = locks_part(rel), locks_part(target_rel)
        allowed = LOCKS_PARTS.get(src_part)
        if allowed is None:
            return f"src/locks/{src_part} is not in the LOCKS_PARTS table"
        if dst_part not in allowed:
            return f"src/locks part {src_part} must not include part {dst_part}"
        files = allowed[dst_part]
        if files is not None and target_rel not in files:
            return f"src/locks part {src_part} may include only {', '.join(sorted(files))} of {dst_part}"
    return None


def main():
    graph = "--graph" in sys.argv[1:]
    files = sorted(p for d in ("include", "src") for p in (ROOT / d).rglob("*")
                   if p.suffix in (".hpp", ".cpp", ".h"))
    violations, arrows, count = [], Counter(), 0
    for path in files:
        rel = path.relative_to(ROOT).as_posix()
        if layer_of(rel) is None:
            violations.append(f"{rel}:1: not in any layer: add its folder to LAYERS")
            continue
        for lineno, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            quoted = m.group(1) is not None
            target = m.group(1) or m.group(2)
            target_rel = resolve(path, target, quoted)
            if target_rel is None:
                if quoted:
                    violations.append(f"{rel}:{lineno}: \"{target}\" not found in the repository")
                continue  # a system or third-party header
            count += 1
            reason = check(rel, target_rel)
            dst = "generated" if target_rel == "<generated>" else layer_of(target_rel)
            arrows[(layer_of(rel), dst)] += 1
            if reason:
                violations.append(f"{rel}:{lineno}: includes \"{target}\": {reason}")
    if graph:
        for (a, b), n in sorted(arrows.items()):
            print(f"  {a} -> {b}: {n}")
    for v in violations:
        print(v)
    print(f"layering: {count} includes in {len(files)} files, {len(violations)} violations")
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main())
