"""The annotate job: a trained model over a genome -> BED9, GFF3, bigWig (run.annotate).

run (the job), annotator (the model on windows), batches, background, seams (stitching
windows), uncertainty, emit (writer thread), outputset (all outputs appear together),
gaps, progress, provenance, merge and shards (scatter/gather over chromosomes).
"""
