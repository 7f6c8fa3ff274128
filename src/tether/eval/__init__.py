"""Measuring tether on real data: :mod:`~tether.eval.beir` (retrieval on a BEIR dataset:
nDCG@10, recall@100, the pipeline's trade table), :mod:`~tether.eval.grounding` (does
``retrieve`` ground a claim whose evidence is in scope, and refuse one whose evidence is
not?) and :mod:`~tether.eval.documents` (grounding on question sets over real documents:
PDF manuals, HTML and Markdown documentation). ``tether eval`` is their command line.

Each module is imported on its own (``from tether.eval.beir import load_beir``): an
evaluation loads datasets and models that the library never needs.
"""
