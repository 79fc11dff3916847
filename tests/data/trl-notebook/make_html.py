"""Writes notebook_table.html with transformers' own notebook table code (run from the repo root).

``transformers.utils.notebook.text_to_html_table`` is what ``NotebookProgressCallback`` shows
under a cell while TRL trains in a notebook (a ``Step`` column, then ``Training Loss`` and the
logged keys). It imports IPython for display only, so a stand-in module is enough here. The
values are rows 1-3 of the table quoted in unslothai/unsloth issue #2291.
"""

import sys
import types
from pathlib import Path

sys.modules.setdefault("IPython", types.ModuleType("IPython"))
display = types.ModuleType("IPython.display")
display.HTML = display.display = lambda *a, **k: None  # type: ignore[attr-defined]
sys.modules.setdefault("IPython.display", display)

from transformers.utils.notebook import text_to_html_table  # noqa: E402

rows = [
    ["Step", "Training Loss", "reward", "reward_std", "completion_length", "kl"],
    [1, 0.0, -17.25, 1.5, 445.5, 0.0],
    [2, -0.0, -10.5, 1.732051, 389.25, 0.0],
    [3, 0.0, 0.0, 0.0, 452.0, 0.00001],
]
out = Path(__file__).with_name("notebook_table.html")
out.write_text(text_to_html_table(rows) + "\n")
print(out)
