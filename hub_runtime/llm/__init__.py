"""The LLM dialogue: llama.cpp or a remote server, tool calls constrained to the home."""
