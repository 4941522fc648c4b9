"""Serving benchmarks against SGLang's OpenAI-compatible endpoints, measured as sglang.bench_serving
measures them. No Textual here: the CLI, the pane and the tests share it."""
