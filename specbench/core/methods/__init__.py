"""The four decision procedures (target.py, sd.py, specasr.py, as2d.py, and lookup.py's
model-free drafter) over what they share (base.py). Their configurations, labels and the
registry are in configs.py, which needs no numpy; this package's import loads nothing else.
"""
