"""The extraction prompt: the local template and its output contract, and choosing the version
(label, number) a run uses; fetching from LangFuse lives in ``backends.langfuse.prompts``."""
