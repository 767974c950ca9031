#!/usr/bin/env python3
"""Fails when a crate's files import each other in a circle of more than two files.

Usage: tests/import_circles.py SRC_DIR...   (each a crate's `src`)

A file is a module (`a/b.rs` and `a/b/mod.rs` are `a::b`); it imports the module of each
`crate::`, `self::` or `super::` path it names outside its `#[cfg(test)] mod tests`: the
longest prefix of the path that is a file (an inline `mod` counts as its file). A circle is a strongly connected component of that
graph; two files that use each other (a type and its one consumer) are allowed, larger
circles are listed and make the exit status 1.
"""
import os
import re
import sys


def modules(src):
    """Module path (`a::b`, '' for the crate root) -> file."""
    files = {}
    for dirpath, _, names in os.walk(src):
        for name in names:
            if name.endswith('.rs'):
                path = os.path.join(dirpath, name)
                parts = os.path.relpath(path, src)[:-3].split(os.sep)
                if parts[-1] in ('mod', 'lib', 'main'):
                    parts = parts[:-1]
                files['::'.join(parts)] = path
    return files


def use_paths(text):
    """Every path a file names from `crate`, `self` or `super`, with `{a, b::c}` groups expanded."""
    paths = []

    def expand(prefix, tree):
        depth, start, items = 0, 0, []
        for i, ch in enumerate(tree + ','):
            depth += {'{': 1, '}': -1}.get(ch, 0)
            if ch == ',' and depth == 0:
                items.append(tree[start:i].strip())
                start = i + 1
        for item in filter(None, items):
            head, brace, rest = item.partition('{')
            words = [w for w in re.split(r'\s*::\s*', head) if re.fullmatch(r'\w+', w)]
            if brace:
                expand(prefix + words, rest[:rest.rfind('}')])
            else:
                paths.append(prefix + words)

    for m in re.finditer(r'\b(crate|self|super)((?:\s*::\s*\w+)*)\s*::\s*\{', text):
        depth, i = 1, m.end()
        while depth and i < len(text):
            depth += {'{': 1, '}': -1}.get(text[i], 0)
            i += 1
        words = re.findall(r'\w+', m.group(2))
        expand([m.group(1)] + words, text[m.end():i - 1])
    for m in re.finditer(r'\b(crate|self|super)((?:::\w+)+)', text):
        if not re.match(r'\s*::\s*\{', text[m.end():]):  # a group's prefix, expanded above
            paths.append([m.group(1)] + m.group(2).strip(':').split('::'))
    return paths


def imports(files):
    """Module -> the other modules it imports."""
    graph = {}
    for mod, path in files.items():
        with open(path) as f:
            text = re.sub(r'#\[cfg\(test\)\]\s*mod tests\s*\{.*', '', f.read(), flags=re.S)
        here = mod.split('::') if mod else []
        graph[mod] = set()
        for path_words in use_paths(text):
            # `self` in `a/b.rs` and in `a/b/mod.rs` alike is `a::b`, `super` is `a`.
            target = [] if path_words[0] == 'crate' else list(here)
            for word in path_words:
                if word == 'super':
                    target = target[:-1]
                elif word not in ('crate', 'self'):
                    target.append(word)
            while target and '::'.join(target) not in files:
                target.pop()
            if target and '::'.join(target) != mod:
                graph[mod].add('::'.join(target))
    return graph


def circles(graph):
    """Strongly connected components (Tarjan's algorithm)."""
    index, low, stack, found = {}, {}, [], []
    sys.setrecursionlimit(10000)

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        for child in graph[node]:
            if child not in index:
                visit(child)
                low[node] = min(low[node], low[child])
            elif child in stack:
                low[node] = min(low[node], index[child])
        if low[node] == index[node]:
            component = [stack.pop()]
            while component[-1] != node:
                component.append(stack.pop())
            found.append(component)

    for node in graph:
        if node not in index:
            visit(node)
    return found


def main(srcs):
    bad = 0
    for src in srcs:
        files = modules(src)
        for component in circles(imports(files)):
            if len(component) > 2:
                bad += 1
                listed = ', '.join(sorted(files[m] for m in component))
                print(f'{src}: circle of {len(component)} files: {listed}')
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
