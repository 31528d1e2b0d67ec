"""Harness tests: no model needed (a fake engine stands in for zipage.LLM)."""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if ROOT not in sys.path:  # run.py and tasks/ live at the repo root
    sys.path.insert(0, ROOT)
