#!/bin/sh
# check_includes.sh — the layout's include rules, checked on the sources.
#
#   test/install/check_includes.sh [TREE]      (TREE: the repository root, default .)
#
# Prints each violation and exits 1 if there is one, else prints a summary
# and exits 0.  Needs python3 (PYTHON, default python3).  The rules:
#  1. A file of an algorithm's folder (src/core/<algo>/, cuda/<algo>/, algo
#     one of kmeans, dbscan, hdbscan, affinity, tools) includes no file of
#     another algorithm's folder (core or CUDA); common/ and its own
#     algorithm's folders are fine.  Direct includes: the umbrella gpuclust_core.h and
#     common/gpu.h name every algorithm by design.
#  2. A private header (*_internal.h) is included only by files of its own
#     folder: not by another folder of the core, not by cuda/, not by the
#     glue (src/ outside src/core).  The tests (test/) may include it.
#  3. No include cycle among the files of src/core, nor among those of
#     cuda/, nor among the glue's: a node is a file with its extension dropped (a.c and a.h are
#     one node, a.cu and a.cuh too; but a folder's public header, as
#     kmeans/kmeans.h, is a node of its own), an edge an #include "…" resolved as
#     the compilers do (the includer's folder, then -Isrc/core, -Icuda,
#     -Isrc).
#  4. No call cycle among the .c files of src/core: an edge a.c -> b.c when
#     a.c calls a non-static gc_* function that b.c defines.
#  5. The glue (src/ outside src/core) in layers: a file includes headers of
#     its own folder and of lower layers only: common/ < worker/ < the
#     algorithms' folders (none of another's) < distributed/ < gpuclust.c;
#     and no include cycle among its files (rule 3).
#  6. No glue header has the path of a core or CUDA header or of one of
#     PostgreSQL's (pg_config --includedir-server; PG_CONFIG): it would
#     shadow it, as the glue is compiled with -Isrc first.
set -eu
TREE=${1:-.}
exec "${PYTHON:-python3}" - "$TREE" <<'EOF'
import os, re, sys

root = os.path.abspath(sys.argv[1])
ALGOS = ('kmeans', 'dbscan', 'hdbscan', 'affinity', 'tools')
SRC_EXT = ('.c', '.h', '.cu', '.cuh')
INC = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
# the compilers' -I order: the core's headers by path from src/core, the
# CUDA headers by path from cuda/, the glue's from src/
IDIRS = [os.path.join(root, d) for d in ('src/core', 'cuda', 'src')]


def rel(p):
    return os.path.relpath(p, root)


def files_under(top):
    out = []
    for dirpath, dirnames, names in os.walk(os.path.join(root, top)):
        dirnames.sort()
        for n in sorted(names):
            if n.endswith(SRC_EXT):
                out.append(os.path.join(dirpath, n))
    return out


def strip_comments(text):
    return re.sub(r'/\*.*?\*/', lambda m: '\n' * m.group(0).count('\n'),
                  text, flags=re.S)


def includes(path):
    with open(path, encoding='utf-8', errors='replace') as f:
        text = strip_comments(f.read())
    found = []
    for name in INC.findall(text):
        for d in [os.path.dirname(path)] + IDIRS:
            cand = os.path.normpath(os.path.join(d, name))
            if os.path.isfile(cand):
                found.append((name, cand))
                break
    return found


def algo_of(path):
    """The algorithm folder a file lies in (core or CUDA), or None."""
    r = rel(path).split(os.sep)
    if len(r) >= 3 and r[0] == 'src' and r[1] == 'core' and r[2] in ALGOS:
        return r[2]
    if len(r) >= 2 and r[0] == 'cuda' and r[1] in ALGOS:
        return r[1]
    return None


errors = []
core = files_under('src/core')
cuda = files_under('cuda')
glue = [p for p in files_under('src') if not rel(p).startswith('src/core/')]
graph = {}
for path in core + cuda + glue:
    for name, target in includes(path):
        a, b = algo_of(path), algo_of(target)
        if a is not None and b is not None and a != b:
            errors.append('%s includes "%s": another algorithm\'s folder (%s)'
                          % (rel(path), name, b))
        if target.endswith('_internal.h') and \
                os.path.dirname(target) != os.path.dirname(path):
            errors.append('%s includes "%s": a private header of %s/'
                          % (rel(path), name, rel(os.path.dirname(target))))
        graph.setdefault(path, set()).add(target)


def node(p):
    """a.c and a.h are one node; an algorithm's public header (kmeans/kmeans.h,
    the folder's, not kmeans.c's) is a node of its own."""
    stem, ext = os.path.splitext(rel(p))
    folder = os.path.basename(os.path.dirname(p))
    if ext in ('.h', '.cuh') and os.path.basename(stem) == folder:
        return stem + ext
    return stem


def cycles(edges):
    """The strongly connected components of more than one node (Tarjan)."""
    index, low, stack, on, out, n = {}, {}, [], set(), [], [0]
    nodes = sorted(set(edges) | {b for v in edges.values() for b in v})

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in nodes:
        if v not in index:
            visit(v)
    return out


for label, files in (('src/core', core), ('cuda', cuda), ('glue', glue)):
    inside = set(files)
    edges = {}
    for a in files:
        for b in graph.get(a, ()):
            if b in inside and node(a) != node(b):
                edges.setdefault(node(a), set()).add(node(b))
    for comp in cycles(edges):
        errors.append('include cycle among %s files: %s' % (label, ' <-> '.join(comp)))

# the glue's layers: a file includes its own folder's headers and those of
# lower layers only (an algorithm folder none of another algorithm's)
LAYER = {'core': 0, 'common': 1, 'worker': 2, 'kmeans': 3, 'dbscan': 3, 'hdbscan': 3,
         'affinity': 3, 'tools': 3, 'distributed': 4}


def glue_folder(p):
    r = rel(p).split(os.sep)
    return r[1] if len(r) >= 3 and r[0] == 'src' else None


for a in glue:
    fa = glue_folder(a)
    for name, b in includes(a):
        fb = glue_folder(b)
        if fb is None or fb == fa:
            continue
        la, lb = LAYER.get(fa, 5), LAYER.get(fb, 5)
        if lb > la or (lb == la and fa != fb):
            errors.append('%s includes "%s": the glue\'s %s/ is not below %s/'
                          % (rel(a), name, fb, fa or 'src'))

# no glue header shadows a core header, nor PostgreSQL's own ("common/…"):
# the glue's compilers see -Isrc before -Isrc/core and PostgreSQL's headers
pg_inc = None
try:
    import subprocess
    pg_inc = subprocess.run([os.environ.get('PG_CONFIG', 'pg_config'), '--includedir-server'],
                            capture_output=True, text=True, check=True).stdout.strip()
except (OSError, subprocess.CalledProcessError):
    pass
for h in glue:
    if not h.endswith('.h'):
        continue
    name = os.path.relpath(h, os.path.join(root, 'src'))
    for other in [os.path.join(root, 'src/core'), os.path.join(root, 'cuda')] + \
            ([pg_inc] if pg_inc else []):
        if os.path.isfile(os.path.join(other, name)):
            errors.append('%s has the name of %s' % (rel(h), os.path.join(other, name)))

# call cycles among the core's .c files
DEF = re.compile(r'^(?!static\b)[A-Za-z_][\w \t\*]*\n(gc_\w+)\s*\(', re.M)
texts = {}
defs = {}
for p in core:
    if p.endswith('.c'):
        with open(p, encoding='utf-8', errors='replace') as f:
            texts[p] = strip_comments(f.read())
        for fn in DEF.findall(texts[p]):
            defs[fn] = p
calls = {}
for p, text in texts.items():
    for fn in set(re.findall(r'\b(gc_\w+)\s*\(', text)):
        q = defs.get(fn)
        if q is not None and q != p:
            calls.setdefault(rel(p), set()).add(rel(q))
for comp in cycles(calls):
    errors.append('call cycle among src/core files: %s' % ' <-> '.join(comp))

for e in errors:
    print('check_includes: ' + e)
if errors:
    print('check_includes: %d violation(s)' % len(errors))
    sys.exit(1)
print('check_includes: %d core, %d CUDA and %d glue files: no cross-algorithm '
      'or private include, no include or call cycle, the glue in layers, no '
      'header shadowing another'
      % (len(core), len(cuda), len(glue)))
EOF
