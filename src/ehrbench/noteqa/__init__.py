"""Question answering over discharge summaries (EHRNoteQA, docs/benchmarks.md#ehrnoteqa-accuracy): the published
rules (`published`) and the published question file with its notes (`records`)."""
