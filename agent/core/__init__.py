"""The kernel: errors, settings, run state and data models, prompts and evidence rules.

Nothing here imports from ``corpus``, ``tools`` or the orchestration above them; everything
else may import from here. ``agent.llm`` belongs to the same layer.
"""
