"""Datasets made from elsewhere: production traces (``from_trace``) and ensemble gold voted by
several models (``ensemble``). Reading and writing our JSONL files is ``datasets/``."""
