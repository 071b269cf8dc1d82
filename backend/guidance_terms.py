"""A request's `guidance_terms`: the guidance terms beside `guidance_scale` that a model's
pipeline takes (`Limits.guidance_terms`, declared by the model's family as `GuidanceTerm`s).

LTX-2's pipeline, for instance, adds spatio-temporal guidance (`stg_scale`, one more DiT call
per step with the self-attention of `spatio_temporal_guidance_blocks` skipped), modality-
isolation guidance (`modality_scale`, one more call with the audio-video cross-attention
off), a guidance rescale, and the audio stream's own scales. A term left out takes the
family's default, which is paradit's "off" (a job without the field runs as before).

Torch-free: the request table validates with it; the family passes the values on.
"""

from __future__ import annotations

import math
from typing import Any

from .contract import GuidanceTerm, Limits

MAX_BLOCKS = 64
"""The most block indices one block-list term takes."""


def check(value: Any, limits: Limits) -> dict[str, Any] | None:
    """A request's `guidance_terms`, checked against the model's terms; None or {}: none
    given (the defaults). Returns the terms given, numbers as floats, blocks as lists."""
    if value is None or value == {}:
        return None
    terms = {term.name: term for term in limits.guidance_terms}
    if not terms:
        raise ValueError(
            "guidance_terms: this model's pipeline takes no guidance terms beside "
            "guidance_scale (GET /v1/info limits.guidance_terms is empty): leave it out"
        )
    if not isinstance(value, dict):
        raise ValueError(
            f"guidance_terms must be an object of the model's terms ({', '.join(terms)}), "
            f"got {value!r}"
        )
    unknown = sorted(set(value) - set(terms))
    if unknown:
        raise ValueError(
            f"guidance_terms: this model takes {', '.join(terms)}; unknown: {', '.join(unknown)}"
        )
    return {name: _term(terms[name], given, limits) for name, given in value.items()}


def check_followers(values: dict[str, Any], limits: Limits) -> None:
    """A follower given 0 where its followed term (or request field: `guidance_scale`) is
    not 0 is refused: the pipeline would run it at the other's value."""
    given = values.get("guidance_terms") or {}
    for term in limits.guidance_terms:
        if term.follows and given.get(term.name) == 0:
            leader = effective(term.follows, given, limits.guidance_terms, values)
            if leader not in (None, 0):
                raise ValueError(
                    f"guidance_terms.{term.name} 0 would run as {term.follows}'s {leader:g}: "
                    f"the pipeline reads 0 as 'the same as {term.follows}' (leave "
                    f"{term.name} out for that, or give a value above 0)"
                )


def _term(term: GuidanceTerm, given: Any, limits: Limits) -> Any:
    where = f"guidance_terms.{term.name}"
    if term.blocks:
        return _blocks(where, term, given)
    if given is None:
        if term.follows:
            return None
        raise ValueError(f"{where} must be a number, got null")
    if isinstance(given, bool) or not isinstance(given, (int, float)):
        raise ValueError(f"{where} must be a number, got {given!r}")
    high = term.high or limits.max_guidance
    if not math.isfinite(given) or not term.low <= given <= high:
        raise ValueError(f"{where} must be between {term.low:g} and {high:g}, got {given}")
    return float(given)


def _blocks(where: str, term: GuidanceTerm, given: Any) -> list[int]:
    last = int(term.high)
    usage = f"{where} must be a list of block indices between 0 and {last}"
    if not isinstance(given, list) or not given or len(given) > MAX_BLOCKS:
        raise ValueError(f"{usage} (at least one), got {given!r}")
    for item in given:
        if isinstance(item, bool) or not isinstance(item, int) or not 0 <= item <= last:
            raise ValueError(f"{usage}, got {given!r}")
    if len(set(given)) != len(given):
        raise ValueError(f"{usage}, each once, got {given!r}")
    return list(given)


def effective(
    name: str,
    given: dict[str, Any] | None,
    terms: tuple[GuidanceTerm, ...],
    fields: dict[str, Any] | None = None,
) -> Any:
    """The value `name` runs at: the request's, else its default; a follower left out (or
    null) runs at its followed term's, or at the request field it follows (`fields`: the
    request's values; None where it follows a field not given)."""
    by_name = {term.name: term for term in terms}
    if name not in by_name:
        return (fields or {}).get(name)
    term = by_name[name]
    value = (given or {}).get(name)
    if value is None:
        value = list(term.default) if term.blocks else term.default
    if value is None and term.follows:
        return effective(term.follows, given, terms, fields)
    return value


def resolved(
    given: dict[str, Any] | None, terms: tuple[GuidanceTerm, ...], fields: dict[str, Any]
) -> dict[str, Any]:
    """Every term at the value it runs at (`fields`: the request's values, for a term that
    follows one of them)."""
    return {term.name: effective(term.name, given, terms, fields) for term in terms}


def extra_passes(given: dict[str, Any] | None, terms: tuple[GuidanceTerm, ...]) -> tuple[str, ...]:
    """The terms whose values cost a DiT call per step in this job."""
    return tuple(
        term.name
        for term in terms
        if term.extra_pass
        and effective(term.name, given, terms) != effective(term.name, None, terms)
    )


def parse_cli(text: str) -> dict[str, Any]:
    """`--guidance-terms JSON` as the object it gives."""
    import json

    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        raise ValueError(
            f"--guidance-terms must be a JSON object, e.g. '{{\"stg_scale\": 1}}', got {text!r}"
        ) from None
    if not isinstance(value, dict):
        raise ValueError(f"--guidance-terms must be a JSON object, got {text!r}")
    return value
