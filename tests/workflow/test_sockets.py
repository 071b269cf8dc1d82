"""backend/workflow/sockets.py: the node definitions ComfyUI's frontend gets from paradit's
knowledge of each node (tests/frontends/test_comfyui_templates.py serves them): every node
paradit maps or refuses has one, its widgets are nodes.py's in nodes.py's order, and an entry
that contradicts nodes.py is refused when it is read.

Cost: about 1 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import pytest

from paradit.backend.workflow.nodes import REFUSED, SPECS
from paradit.backend.workflow.sockets import SOCKETS, _sockets, node_definition


@pytest.mark.fast
def test_every_node_paradit_maps_or_refuses_has_its_inputs_and_outputs():
    missing = sorted(set(SPECS) - set(SOCKETS)) + sorted(set(REFUSED) - set(SOCKETS))
    assert not missing, f"add them to backend/workflow/sockets.py: {missing}"


@pytest.mark.fast
def test_a_definition_lists_the_widgets_in_nodes_py_order_then_the_links():
    ksampler = node_definition(SOCKETS["KSampler"])
    assert ksampler["input_order"]["required"] == [
        *SPECS["KSampler"].widgets, "model", "positive", "negative", "latent_image",
    ]  # fmt: skip
    seed = ksampler["input"]["required"]["seed"]
    assert seed[0] == "INT" and seed[1]["control_after_generate"] is True
    assert ksampler["input"]["required"]["denoise"][1]["default"] == 1.0
    assert ksampler["output"] == ["LATENT"] and ksampler["output_node"] is False
    # LoadImage's upload button is the frontend's own, from the image list's option
    load = node_definition(SOCKETS["LoadImage"])
    assert load["input_order"]["required"] == ["image"]
    assert load["input"]["required"]["image"] == [[], {"image_upload": True}]
    clip = node_definition(SOCKETS["CLIPLoader"])
    assert clip["input"]["optional"] == {"device": [["default"], {"default": "default"}]}
    assert node_definition(SOCKETS["SaveImage"])["output_node"] is True


@pytest.mark.fast
def test_an_entry_that_contradicts_nodes_py_is_refused():
    with pytest.raises(ValueError, match=r"^KSampler: the widgets \['cfg', 'seed'\] must be"):
        _sockets("KSampler", "seed:INT cfg:FLOAT model:MODEL -> LATENT")
    with pytest.raises(ValueError, match="an entry is 'inputs -> outputs'"):
        _sockets("VAEDecode", "samples:LATENT vae:VAE")
    with pytest.raises(ValueError, match="only an INT widget has a control after generate"):
        _sockets("Unknown", "x:FLOAT+ -> X")
    with pytest.raises(ValueError, match="an input named twice"):
        _sockets("Unknown", "x:INT x:FLOAT -> X")


@pytest.mark.fast
def test_a_dynamic_list_gives_each_choice_its_widgets():
    """TextGenerate's sampling_mode: ComfyUI's dynamic combo, whose choice "on" shows the
    sampling widgets after it (saved after it, named `sampling_mode.seed` where a subgraph
    promotes one); without them the frontend would give a subgraph node's saved values to
    the wrong widgets."""
    spec = node_definition(SOCKETS["TextGenerate"])["input"]["required"]["sampling_mode"]
    assert spec[0] == "COMFY_DYNAMICCOMBO_V3"
    on, off = spec[1]["options"]
    assert (on["key"], off["key"], off["inputs"]) == ("on", "off", {"required": {}})
    assert list(on["inputs"]["required"])[-2:] == ["seed", "presence_penalty"]
    with pytest.raises(ValueError, match="a DYNAMIC list, and only one, has choices"):
        _sockets("Unknown", "mode:DYNAMIC -> X")
