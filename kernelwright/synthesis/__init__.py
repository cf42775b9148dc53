"""Synthesized, judge-verified training data (`kernelwright synthesize`): procedural tasks with
generator-written solutions, teacher-written pairs and infill tasks."""
