"""Gold that gets better: ``triage`` sends a run's likely gold gaps to a review queue (a LangFuse
annotation queue, or a local review file), ``apply`` turns the reviewers' verdicts into a new
dataset version."""
