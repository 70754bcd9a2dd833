"""Seed corpus/query_run with every query of the conformance cases (crates/vev-testsuite/cases/query):
libFuzzer then mutates real queries instead of finding the syntax from nothing. Run from fuzz/:
    python3 seed_query_run.py corpus/query_run
"""
import glob, os, sys, hashlib
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
n = 0
for path in glob.glob('../crates/vev-testsuite/cases/query/*.edn'):
    s = open(path).read()
    i = 0
    while True:
        i = s.find('[:find', i)
        if i < 0: break
        depth, j, instr = 0, i, False
        while j < len(s):
            c = s[j]
            if instr:
                if c == '\\': j += 1
                elif c == '"': instr = False
            elif c == '"': instr = True
            elif c in '[({': depth += 1
            elif c in '])}':
                depth -= 1
                if depth == 0: break
            j += 1
        q = s[i:j+1]
        open(os.path.join(out, hashlib.sha1(q.encode()).hexdigest()), 'w').write(q)
        n += 1
        i = j
print(n)
