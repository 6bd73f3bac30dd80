"""A loss printed under one letter beside its parts: `L: 2.31 | L_ce: 2.10 | L_aux: 0.21`.

Papers write the objective as L = L_ce + L_aux, and trainers print it so: `L`/`l` beside
`l_ce`, `L_box`, `L-kl`, `train/L` beside `train/L_rec`, or the parts glued to the letter
(`L: %.4f Lend: %.4f Lpre: %.4f LX: %.4f LY: %.4f`, a trajectory model's print). The letter
is the total only where its parts are named after it: alone, `L` could be anything (a length,
a layer count), and `G` beside `G_GAN` / `D` beside `D_real` (a GAN's two models) is no one
loss, so only the loss's own letter counts.
"""

from __future__ import annotations

import re

_EVAL = {"val", "valid", "validation", "eval", "evaluation", "test", "dev"}
# glued to an upper-case `L`: a capital (`LX`, `LCE`, `LKL`) or a word of 3+ small letters
# (`Lend`, `Lpre`, `Lbox`), never a word that starts with an L of its own (`Loss`, `Lr`,
# `Length`, `Layer`, `Lambda`, `Logits`)
_GLUED = re.compile(r"^L(?:[A-Z][A-Za-z]*|[a-z]{3,})$")
_L_WORD = re.compile(r"^(?:lo|lr|lm|len$|length|lay|lam|lat|lim|lin|lab|lev|lef|low|lea)")


def _split(name: str) -> tuple[str, str]:
    """(namespace, leaf) of `train/L_ce`, `loss.L`: the leaf after the last `/` or `.`."""
    cut = max(name.rfind("/"), name.rfind("."))
    return name[:cut + 1], name[cut + 1:].strip()


def _is_part(leaf: str) -> bool:
    if len(leaf) > 2 and leaf[0] in "Ll" and leaf[1] in "_- " and leaf[2].isalpha():
        return True                          # l_ce, L_box, L-kl, `L box` (as normalize reads it)
    return bool(_GLUED.match(leaf)) and (leaf[1].isupper() or not _L_WORD.match(leaf.lower()))


def letter_total(names) -> tuple[str, list[str]] | None:
    """The one-letter total among `names` (outside an eval namespace) and its parts, else None."""
    names = list(names)
    totals = [n for n in names if _split(n)[1] in ("L", "l")
              and not set(re.split(r"[/._]", _split(n)[0].lower())) & _EVAL]
    if len(totals) != 1:
        return None
    space = _split(totals[0])[0]
    parts = [n for n in names if n != totals[0] and _split(n)[0] == space and _is_part(_split(n)[1])]
    return (totals[0], parts) if parts else None
