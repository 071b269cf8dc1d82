"""Single-file checkpoints as ComfyUI users hold them (ComfyUI/Wan/BFL key names; bf16, fp16,
fp32, fp8_e4m3fn, fp8_scaled, GGUF): header.py reads headers, detect.py recognises the model,
convert.py maps keys to diffusers' as row maps, quant.py reads rows dequantized, file_presets.py
holds what a header cannot say, load.py checks the files given, build.py builds the pipeline and
feeds the sharded loader, listing.py describes a ComfyUI models folder."""
