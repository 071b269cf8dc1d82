"""ComfyUI's MiniMax H3 templates (`video_minimax_h3_t2v`, `video_minimax_h3_i2v`, from the
installed comfyui-workflow-templates-json): refused at their H3 conditioning node, naming its
path inside the subgraph and why, before any file is read (a ComfyUI folder without the
files they name).

Cost: about 1 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import pytest
from comfy_templates import TEMPLATES, refusal

H3_REFUSED = {  # template -> (where, node type)
    "video_minimax_h3_t2v.json": ("subgraph 140 > node 131", "MiniMaxH3ImageToVideo"),
    "video_minimax_h3_i2v.json": ("subgraph 105 > node 104", "MiniMaxH3ImageToVideo"),
}


@pytest.mark.parametrize("template", sorted(H3_REFUSED))
def test_h3_template_refused_names_the_node_and_why(tmp_path, template):
    where, kind = H3_REFUSED[template]
    comfy = tmp_path / "ComfyUI"
    (comfy / "models" / "diffusion_models").mkdir(parents=True)
    (comfy / "input").mkdir()
    where = f"{where} ({kind}): "
    refusal(
        TEMPLATES / template, comfy, where, "single files", "res_multistep", "random:minimax-h3"
    )
