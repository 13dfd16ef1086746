"""Reading what runs wrote: metrics.jsonl, the archive (through ``population.archive.ReadOnlyArchive``),
what the children came to, ablation tables and curves, the figures and the HTML report, and the
text of ``scripts/inspect_archive.py``. Nothing here writes to a run, so all of it works on a run
that is still going. This room imports no module of the run itself (the epoch loop, its config):
a report needs only what the run left on disk, and the run never needs a report.
"""
