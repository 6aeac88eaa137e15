"""The gene model: reading frames over the semi-CRF.

frames (the frame-expanded label layout and gold labels), head (FrameHead: the CRF of
the gene model), sites, splice, orf, orflength, content (its scores), seqmask (what the
sequence allows), generules, firstatg, orffill, learnedrules (rules on decoded genes),
ensemble (averaged heads), argmaxhead (the no-CRF baseline), annotation_check (a gold
annotation against the model's grammar).
"""
