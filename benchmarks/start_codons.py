"""Which start codon did a gene prediction choose? Genes matched to the truth by their stop
codon (same strand, same stop end); for single-exon pairs with different starts, whether
the prediction lies upstream or downstream of the true start, and whether either is the
first in-frame ATG of the ORF (upstream-most ATG after the previous in-frame stop).

    python benchmarks/start_codons.py CHROM FASTA TRUTH.gff3 PRED.gff3 [LO HI]

Prints counts; the differing pairs go to stderr.
"""
import sys, collections
def fasta(p):
    s=[];[s.append(l.strip()) for l in open(p) if not l.startswith('>')]; return ''.join(s).upper()
comp=str.maketrans('ACGT','TGCA')
def rc(x): return x.translate(comp)[::-1]
def genes(gff, chrom, lo=0, hi=10**9):
    g=collections.defaultdict(list)
    for l in open(gff):
        if l.startswith('#') or '\t' not in l: continue
        f=l.rstrip('\n').split('\t')
        if f[0]!=chrom or f[2] not in ('CDS',): continue
        par=[a.split('=')[1] for a in f[8].split(';') if a.startswith('Parent=')][0]
        g[par].append((int(f[3]),int(f[4]),f[6]))
    out=[]
    for k,v in g.items():
        s=min(a for a,b,c in v); e=max(b for a,b,c in v)
        if s>=lo and e<=hi: out.append((s,e,v[0][2],len(v)))
    return out
def first_atg(seq, s, e, strand):
    # 1-based inclusive CDS s..e; return 1-based start coordinate of the upstream-most in-frame ATG of the ORF
    if strand=='+':
        p=s-1
        best=p
        while p-3>=0:
            cod=seq[p-3:p]
            if cod in ('TAA','TAG','TGA'): break
            p-=3
            if cod=='ATG': best=p
        return best+1
    else:
        p=e  # 0-based exclusive end
        best=p
        while p+3<=len(seq):
            cod=rc(seq[p:p+3])
            if cod in ('TAA','TAG','TGA'): break
            p+=3
            if cod=='ATG': best=p
        return best
chrom, fa, truth, pred = sys.argv[1:5]
lo,hi=(int(sys.argv[5]),int(sys.argv[6])) if len(sys.argv)>6 else (0,10**9)
seq=fasta(fa)
T=genes(truth,chrom,lo,hi); Pd=genes(pred,chrom,lo,hi)
stopkey=lambda g:(g[1],'+') if g[2]=='+' else (g[0],'-')
tk={stopkey(g):g for g in T}
n=collections.Counter()
for g in Pd:
    t=tk.get(stopkey(g))
    if not t: n['no stop match']+=1; continue
    if t[3]>1 or g[3]>1:
        n['multi-exon matched stop, same' if (t[0],t[1])==(g[0],g[1]) else 'multi-exon matched stop, differ']+=1; continue
    ts = t[0] if t[2]=='+' else t[1]; ps = g[0] if g[2]=='+' else g[1]
    fa_=first_atg(seq,t[0],t[1],t[2])
    tf = ts==fa_
    if ts==ps: n[f'start ok (truth first ATG={tf})']+=1
    else:
        up = (ps<ts) if g[2]=='+' else (ps>ts)
        pf = ps==fa_
        n[f'start wrong: pred {"upstream" if up else "downstream"}, truth firstATG={tf}, pred firstATG={pf}']+=1
        print(' ', g, t, 'firstATG', fa_, file=sys.stderr)
for k,v in sorted(n.items()): print(v,k)
