"""Agents on the RL loop: multi-turn episodes (policy turns and environment/tool turns, the environment's tokens
masked out of the loss), several roles of one policy in one step, and tools (a local BM25 search engine).
A layer above shared.rl and below shared.judges, so tool-using judges can reuse the episode loop.
"""
