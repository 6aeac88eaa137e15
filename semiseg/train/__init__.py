"""The train job: a config -> a run folder of checkpoints (loop.train).

loop (the job), data (windows, features and labels in memory), tables (the gene model's
counted tables: PWMs, content, learned rules), runfolder (checkpoints, resume),
distributed (several GPUs).
"""
