"""Model providers behind one protocol (OpenAI, Gemini, OpenAI-compatible servers, the scripted
fake), with one retry policy, call tracing and batch answering; imported lazily per provider."""
