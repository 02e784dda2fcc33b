#!/usr/bin/env python3
"""Counts strata-store's public surface (issue 27): the names re-exported at its root, the public
methods of its types, the items of its public modules.

Usage: scripts/store-surface.py [REPO_ROOT] [-v]   (-v lists the names)"""
import re, sys, pathlib
args = [a for a in sys.argv[1:] if not a.startswith('-')]
verbose = '-v' in sys.argv
root = pathlib.Path(args[0] if args else pathlib.Path(__file__).resolve().parent.parent) / 'crates/store/src'
CFG = 'test-support'

def split_names(body):
    body = re.sub(r'\s+', ' ', body)
    names = []
    # expand {...}: take last segment of each leaf path
    def leaves(s):
        s = s.strip()
        m = re.match(r'^(.*?)\{(.*)\}$', s)
        if m:
            inner, depth, cur, out = m.group(2), 0, '', []
            for ch in inner:
                if ch == '{': depth += 1
                if ch == '}': depth -= 1
                if ch == ',' and depth == 0:
                    out.append(cur); cur = ''
                else: cur += ch
            out.append(cur)
            r = []
            for o in out:
                if o.strip(): r += leaves(o)
            return r
        if ' as ' in s: return [s.split(' as ')[1].strip()]
        return [s.split('::')[-1].strip()]
    return leaves(body)

def pub_uses(text):
    """(name, gated) for each `pub use` at module level (no indentation)."""
    out = []
    lines = text.split('\n')
    i = 0
    while i < len(lines):
        l = lines[i]
        if l.startswith('pub use '):
            gated = any(CFG in lines[j] for j in range(max(0, i-2), i) if lines[j].startswith('#[cfg'))
            stmt = l
            while not stmt.rstrip().endswith(';'):
                i += 1; stmt += ' ' + lines[i]
            body = stmt[len('pub use '):].rstrip().rstrip(';')
            out += [(n, gated) for n in split_names(body)]
        i += 1
    return out

def top_items(text):
    """pub items at module level (fn, struct, enum, trait, type, const, static) + pub use names."""
    out = []
    lines = text.split('\n')
    for i, l in enumerate(lines):
        m = re.match(r'^pub (?:fn|struct|enum|trait|type|const|static|mod) (\w+)', l)
        if m:
            # The gate may sit above other attributes (`#[cfg(..)]` then `#[derive(..)]`).
            gated, j = False, i - 1
            while j >= 0 and lines[j].startswith(('#[', '///')):
                if lines[j].startswith('#[cfg') and CFG in lines[j]: gated = True
                j -= 1
            out.append((m.group(1), gated))
    return out + pub_uses(text)

def impl_methods(typ):
    """pub fns in `impl <typ>` blocks across the crate."""
    out = []
    for f in sorted(root.rglob('*.rs')):
        lines = f.read_text().split('\n')
        i = 0
        while i < len(lines):
            if re.match(r'^impl(<[^>]*>)? ' + re.escape(typ) + r'(<[^>]*>)? \{', lines[i]):
                block_gated = i > 0 and lines[i-1].startswith('#[cfg') and CFG in lines[i-1]
                i += 1
                while i < len(lines) and lines[i] != '}':
                    m = re.match(r'^    pub fn (\w+)', lines[i])
                    if m:
                        j = i - 1
                        gated = block_gated
                        while j > 0 and lines[j].strip().startswith(('#[', '///')):
                            if lines[j].strip().startswith('#[cfg') and CFG in lines[j]: gated = True
                            j -= 1
                        out.append((f'{f.name}:{m.group(1)}', gated))
                    i += 1
            i += 1
    return out

def report(label, items):
    pub = [n for n, g in items if not g]
    gated = [n for n, g in items if g]
    print(f'{label:40} {len(pub):4}   (+{len(gated)} test-support)')
    if verbose:
        print('    ', ' '.join(pub))
        if gated: print('     [test-support]', ' '.join(gated))
    return len(pub), len(gated)

tot = [0, 0]
def add(r):
    tot[0] += r[0]; tot[1] += r[1]
add(report('(a) root pub use names', pub_uses((root / 'lib.rs').read_text())))
add(report('(b) pub inherent methods on Store', impl_methods('Store')))
for h in ['Dump', 'Embeddings', 'Ranking']:
    if any(re.search(r'pub struct ' + h + r'\b', f.read_text()) for f in root.rglob('*.rs')):
        add(report(f'(b) pub methods on handle {h}', impl_methods(h)))
lib = (root / 'lib.rs').read_text()
for mod in re.findall(r'^pub mod (\w+);', lib, re.M):
    p = root / f'{mod}.rs'
    if not p.exists(): p = root / mod / 'mod.rs'
    add(report(f'(c) pub items in pub mod {mod}', top_items(p.read_text())))
print(f'{"TOTAL":40} {tot[0]:4}   (+{tot[1]} test-support)')
root_names = {n for n, g in pub_uses(lib) if not g}
dups = [n for m in re.findall(r'^pub mod (\w+);', lib, re.M) for n, g in top_items(((root / f'{m}.rs') if (root / f'{m}.rs').exists() else (root / m / 'mod.rs')).read_text()) if n in root_names]
print(f'{"  of which also at the root (two paths)":40} {len(dups):4}   {" ".join(dups)}')
