#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Broken variants of every shipped scenario, for tools/scripts/scn-outputs.sh: each line
deleted, each prefix, each key's value replaced by junk. Deterministic: the same files every
run.   tools/scripts/scn-variants.py OUT_DIR   (prints how many it wrote)"""
import glob, os, sys
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
n = 0
for path in sorted(glob.glob('scenarios/*.yaml')):
    base = os.path.basename(path)[:-5]
    lines = open(path).read().split('\n')
    open(f'{out}/{base}.yaml', 'w').write('\n'.join(lines)); n += 1
    for i, l in enumerate(lines):
        if not l.strip() or l.strip().startswith('#'):
            continue
        open(f'{out}/{base}.del{i}.yaml', 'w').write('\n'.join(lines[:i] + lines[i+1:])); n += 1
        open(f'{out}/{base}.cut{i}.yaml', 'w').write('\n'.join(lines[:i])); n += 1
        if ':' in l:
            k = l.index(':')
            for j, junk in enumerate(('-1', 'x', '[1]', '1e99', '')):
                v = l[:k+1] + ' ' + junk
                open(f'{out}/{base}.val{i}_{j}.yaml', 'w').write('\n'.join(lines[:i] + [v] + lines[i+1:])); n += 1
print(n)
