"""Agent skills as folders and their evolution from lessons (Trace2Skill, spec ../shared/papers/trace2skill.md).
A layer with shared.judges: it reuses the judges' front-matter parser, JSON repair and ChatClient, and the agents'
BM25 index.

  folder.py   SkillFolder (front matter, body, other files, protected names), load / save, sections, validate
  patch.py    Edit / Patch (ops in OPS), apply_patch (pure Python, unmatched targets skipped and logged),
              drop_unpaired_creates, line_disjoint, balanced_chunks, sanitize
  evolve.py   map_reduce_evolve (MAP, hierarchical MERGE, forced merge, translate, apply, verify) and
              sequential_evolve (batches applied to the current skill, rolled back when invalid)
  bank.py     ExperienceBank: the BM25 retrieval baseline within a token budget
  llm.py      ChatClient-backed map / merge / translate / fix callables
"""
from shared.skills.bank import ExperienceBank  # noqa: F401
from shared.skills.evolve import EvolveResult, map_reduce_evolve, sequential_evolve  # noqa: F401
from shared.skills.folder import (  # noqa: F401
    Section, SkillFolder, find_section, load_skill_folder, save_skill_folder, sections, validate,
)
from shared.skills.llm import llm_fix_fn, llm_map_fn, llm_merge_fn, llm_translate_fn  # noqa: F401
from shared.skills.patch import (  # noqa: F401
    OPS, Edit, Patch, apply_patch, balanced_chunks, drop_unpaired_creates, line_disjoint, sanitize,
)
