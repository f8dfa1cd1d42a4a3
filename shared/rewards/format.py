"""Format and shape rewards.

    format/tags           1.0 if the completion is exactly a sequence of tag blocks, by default
                          `<think>...</think><answer>...</answer>` (whitespace between and around allowed);
                          kwargs tags=[...], pattern=<regex fullmatched instead>, partial=True for per-tag credit
    format/boxed_present  1.0 if the completion has a complete, non-empty \\boxed{...}
    length/penalty        0 up to `target` length, then linearly negative: -slope * (L - target), floored at
                          -max_penalty; unit chars | words | tokens (tokens reads the `completion_lengths` column)
    format/no_repeat      -max_penalty * (share of repeated word n-grams), 0 for text shorter than n words
"""
from __future__ import annotations

import functools
import re
from typing import Sequence

from shared.rewards.core import register_reward
from shared.rewards.math import last_boxed


@functools.lru_cache(maxsize=64)
def _tags_regex(tags: tuple[str, ...]) -> re.Pattern:
    blocks = []
    for tag in tags:
        name = re.escape(tag)
        # The content may not open or close the same tag again, so "<a>x</a><a>y</a>" is not one block.
        blocks.append(rf"<{name}>(?:(?!</?{name}>).)*</{name}>")
    return re.compile(r"\s*" + r"\s*".join(blocks) + r"\s*", re.DOTALL)


def _tag_once_in_order(text: str, tag: str) -> bool:
    opening, closing = f"<{tag}>", f"</{tag}>"
    return text.count(opening) == 1 and text.count(closing) == 1 and text.index(opening) < text.index(closing)


@register_reward("format/tags")
def tags_format_reward(prompts: Sequence[str], completions: Sequence[str], *,
                       tags: Sequence[str] = ("think", "answer"), pattern: str | None = None,
                       partial: bool = False, **_) -> list[float]:
    """1.0 when the completion fullmatches the template, else 0.0 (partial=True: else the share of tags that
    each appear once, opened before closed)."""
    if isinstance(tags, str):
        tags = (tags,)
    regex = re.compile(pattern, re.DOTALL) if pattern is not None else _tags_regex(tuple(tags))
    out = []
    for completion in completions:
        if regex.fullmatch(completion):
            out.append(1.0)
        elif partial and tags:
            out.append(sum(_tag_once_in_order(completion, t) for t in tags) / len(tags))
        else:
            out.append(0.0)
    return out


@register_reward("format/boxed_present")
def boxed_present_reward(prompts: Sequence[str], completions: Sequence[str], **_) -> list[float]:
    out = []
    for completion in completions:
        content = last_boxed(completion)
        out.append(1.0 if content is not None and content.strip() else 0.0)
    return out


LENGTH_UNITS = ("chars", "words", "tokens")


@register_reward("length/penalty")
def length_penalty_reward(prompts: Sequence[str], completions: Sequence[str], *, target: int = 512,
                          slope: float | None = None, max_penalty: float = 1.0, unit: str = "chars",
                          completion_lengths: Sequence[int] | None = None, **_) -> list[float]:
    """-slope * max(0, L - target), floored at -max_penalty (max_penalty <= 0: no floor). slope defaults to
    1/target, so the penalty reaches -1 at twice the target. unit="tokens" needs a `completion_lengths`
    column (the rollout's token counts)."""
    if unit not in LENGTH_UNITS:
        raise ValueError(f"length/penalty: unit={unit!r}, expected one of {LENGTH_UNITS}")
    if target <= 0 and slope is None:
        raise ValueError("length/penalty: target must be > 0 unless slope is given")
    slope = 1.0 / target if slope is None else float(slope)
    if unit == "tokens":
        if completion_lengths is None:
            raise ValueError("length/penalty: unit='tokens' needs the column completion_lengths (token counts)")
        lengths = [int(n) for n in completion_lengths]
    elif unit == "words":
        lengths = [len(c.split()) for c in completions]
    else:
        lengths = [len(c) for c in completions]
    out = []
    for length in lengths:
        penalty = slope * max(0, length - target)
        if max_penalty > 0:
            penalty = min(penalty, max_penalty)
        out.append(-penalty if penalty else 0.0)
    return out


@register_reward("format/no_repeat")
def no_repeat_reward(prompts: Sequence[str], completions: Sequence[str], *, n: int = 3, max_penalty: float = 1.0,
                     **_) -> list[float]:
    """-max_penalty * (1 - distinct n-grams / n-grams) over whitespace words."""
    out = []
    for completion in completions:
        words = completion.split()
        grams = [tuple(words[i:i + n]) for i in range(len(words) - n + 1)]
        out.append(-max_penalty * (1.0 - len(set(grams)) / len(grams)) if grams else 0.0)
    return out
