"""The semantic judge: does a predicted object name the same real-world entity as a gold one?

It sits beside ``pipeline`` (it calls models through ``llm`` providers and keeps its verdicts
in the response cache) and below ``analysis``, which puts judged matches beside the string
figures. ``offline:rules`` never calls a model.
"""
