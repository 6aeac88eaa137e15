"""The evaluate job: a prediction against a truth (run.evaluate), and plots of both.

run (the job and its report), metrics are in semiseg.metrics (shared with training's
validation), calibration, intervals (predictions and truths as label tracks; the scheme
to read them with), genelevel (exon and gene level), plot.
"""
