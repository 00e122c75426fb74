"""Random-weight Qwen3/Qwen2 test-model maker (see tools/qwenserve-make-test-model).

Modules:
  configs      model hyper-parameters (tiny, small, 4b, 4b-2l) and HF config.json contents
  weights      tensor list, deterministic per-tensor random generation, dtype encoders
  gguf_out     streaming GGUF v3 writer
  st_out       streaming safetensors writer (single file or sharded + index)
  vocab        tokenizer.json -> GGUF tokenizer metadata (as llama.cpp's converter does)
  cli          command line
"""
